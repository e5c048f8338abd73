"""Chapter 13 (attention trained to deceive): the numbers and clauses its prose reads off the
deception table, the explanations' mass on the impermissible tokens, and erasure.

Each reading function takes the chapter's results and returns ``{glued name: value}``. The
models are named by :func:`label` (``"transformer, λ = 1"``), the rows of the chapter's tables.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from ... import published, uncertainty
from .wording import require_columns

__all__ = ["label", "seeds_plan", "accuracy_and_mass", "pruthi", "pruthi_table", "beside_pruthi", "with_intervals", "mean_shares",
           "explanations", "erasure"]

#: The chapter's two model families, and the short names its glued names use.
FAMILIES = (("BiLSTM + tanh", "lstm"), ("transformer", "tf"))


def label(family: str, lam: float) -> str:
    """A model's name in the chapter's tables: ``label("transformer", 1.0)`` is ``"transformer, λ = 1"``."""
    return f"{family}, λ = {lam:g}"


_TABLE_COLUMNS = ("accuracy", "impermissible attention (%)", "accuracy, impermissible tokens deleted")


def seeds_plan(*, lstm_seeds: int, tf_seeds: int) -> dict[str, Any]:
    """How many training seeds each family gets for the table beside Pruthi's, for the
    chapter's introduction (``ch13_seeds_plan``): "every model trains with 3 seeds" or
    "the transformers train with 3 seeds and the BiLSTMs with one seed"."""
    for name, n in (("lstm_seeds", lstm_seeds), ("tf_seeds", tf_seeds)):
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"{name} must be a positive int, got {n!r}")

    def seeds(n: int) -> str:
        return "one seed" if n == 1 else f"{n} seeds"

    plan = (f"every model trains with {seeds(tf_seeds)}" if lstm_seeds == tf_seeds
            else f"the transformers train with {seeds(tf_seeds)} and the BiLSTMs with "
                 f"{seeds(lstm_seeds)}")
    return {"ch13_seeds_plan": plan}


def _per_instance(table: pd.DataFrame, kind: str, name: str) -> np.ndarray:
    """The per-sentence values behind a row's mean: deception_table's ``correct`` or ``mass`` column."""
    if kind not in table.columns or name not in table.index:
        raise ValueError(f"table has no {kind!r} values for {name!r}: pass deception_table's frame, "
                         "which keeps the per-sentence values behind its means")
    return np.asarray(table.at[name, kind], dtype=np.float64)


def _accuracy_change(table: pd.DataFrame, family: str, lam: float) -> uncertainty.Comparison:
    """Accuracy without the penalty minus with it (λ = ``lam``): paired over the same test sentences."""
    return uncertainty.compare(_per_instance(table, "correct", label(family, 0.0)),
                               _per_instance(table, "correct", label(family, lam)), paired=True)


def _keeps(change: uncertainty.Comparison) -> str:
    return change.says("loses accuracy beyond noise", "gains accuracy beyond noise", "keeps its accuracy within noise")


def with_intervals(table: pd.DataFrame, *, seed: int = 0) -> pd.DataFrame:
    """The deception table to show: accuracy and impermissible attention with their 95% bootstrap
    intervals over the test sentences ("0.692 [0.661, 0.723]"), the tokens' share and the accuracy
    with the impermissible tokens deleted as they are (3 decimals)."""
    require_columns(table, _TABLE_COLUMNS, "table")
    rows = {}
    for name in table.index:
        accuracy = uncertainty.bootstrap(_per_instance(table, "correct", name), seed=seed)
        mass = uncertainty.bootstrap(_per_instance(table, "mass", name), seed=seed)
        rows[name] = {"accuracy [95% interval]": str(accuracy),
                      "impermissible attention (%) [95% interval]": str(mass),
                      **{c: f"{float(table.loc[name, c]):.3f}" for c in table.columns
                         if c not in ("accuracy", "impermissible attention (%)", "n", "correct", "mass")}}
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = table.index.name
    return out


def pruthi() -> dict[str, Any]:
    """Pruthi et al.'s numbers the prose quotes, read from :data:`attnlib.published.PRUTHI_TABLE3`.

    ``ch13_p_{bert,lstm}_{0,01,1}_{acc,mass}`` (λ = 0, 0.1, 1; percent, as printed: a mass
    printed as "<0.01" is the bound 0.01) and ``ch13_p_deleted`` ("49–50"), the accuracy
    with the impermissible tokens deleted.
    """
    names = {"BERT (mean over heads)": "bert", "BiLSTM + attention": "lstm"}
    out: dict[str, Any] = {}
    for (model, lam), (acc, mass) in published.PRUTHI_TABLE3.items():
        if model in names:
            tag = f"ch13_p_{names[model]}_{f'{lam:g}'.replace('.', '')}"
            out[f"{tag}_acc"], out[f"{tag}_mass"] = acc.value, mass.value
    lo, hi = published.PRUTHI_TOKENS_REMOVED
    out["ch13_p_deleted"] = f"{lo.value:g}–{hi.value:g}"
    return out


def pruthi_table() -> pd.DataFrame:
    """Pruthi et al.'s Table 3 (every model and λ of :data:`attnlib.published.PRUTHI_TABLE3`),
    as printed: percentages, the bounds as "< 0.01"."""
    rows = {f"{model}, λ = {lam:g}": {"accuracy (%)": _as_printed(acc), "impermissible attention (%)": _as_printed(mass)}
            for (model, lam), (acc, mass) in published.PRUTHI_TABLE3.items()}
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.name = "model"
    return table


def _as_printed(number) -> str:
    """A percentage of Pruthi et al.'s table as printed: one decimal, or the small ones and
    the bounds ("< 0.01") as given."""
    v = number.value
    text = f"{v:.1f}" if v >= 1 else f"{v:g}"
    return ("< " if number.upper_bound else "") + text


#: Pruthi et al.'s model beside each of ours (their Table 3's row names).
PAPER_MODEL = {"BiLSTM + tanh": "BiLSTM + attention", "transformer": "BERT (mean over heads)"}


def beside_pruthi(runs: dict) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Ours over training seeds beside Pruthi et al.'s Table 3, and the glued reading of it.

    ``runs``: ``{(family, λ, seed): trained deceiver}``, each with ``.test["accuracy"]``
    and ``.mass["test"]`` (:class:`attnlib.deception.DeceiverModel`), families as in
    :data:`FAMILIES`. The table has a row per model (named by :func:`label`) and, for the test
    accuracy and the attention mass on the impermissible tokens, ours in percent as the mean
    over seeds with Student's t 95% interval (:func:`attnlib.uncertainty.seed_interval`; a
    model of one seed shows its value and "(1 seed)") and theirs as printed ("n/a" where they
    report none; "< 0.01" where they give a bound).
    The glued values, per family (``lstm``, ``tf``): ``ch13_{f}_seeds`` (its seeds per model;
    ``_seeds_text``: "one seed", "3 seeds"), ``ch13_lstm_seeds_sentence`` (why the BiLSTM has
    fewer, where it has) and, at λ = 0 and the largest λ, ``ch13_{f}_{0,top}_{acc,mass}_seeds`` (as in the table).
    Raises ValueError for an empty or misshapen ``runs``, or a family whose models differ in seeds.
    """
    if not isinstance(runs, dict) or not runs or any(not isinstance(k, tuple) or len(k) != 3 for k in runs):
        raise ValueError("runs must be a non-empty dict {(family, lambda, seed): a trained model}")
    by_model: dict = {}
    for (family, lam, _), model in runs.items():
        by_model.setdefault((family, lam), []).append(model)
    short = dict(FAMILIES)
    rows, out = {}, {}
    top = max(lam for _, lam in by_model)
    for (family, lam), models in by_model.items():
        tag = short.get(family, family)
        if out.setdefault(f"ch13_{tag}_seeds", len(models)) != len(models):
            raise ValueError(f"the {family} models differ in their number of seeds")
        out[f"ch13_{tag}_seeds_text"] = "one seed" if len(models) == 1 else f"{len(models)} seeds"
        accuracy = _over_seeds([100.0 * m.test["accuracy"] for m in models])
        mass = _over_seeds([100.0 * m.mass["test"] for m in models], share=True)
        paper = published.PRUTHI_TABLE3.get((PAPER_MODEL.get(family), lam))
        rows[label(family, lam)] = {  # short headers: the table must fit a phone
            "accuracy %, ours": accuracy,
            "accuracy %, theirs": "n/a" if paper is None else _as_printed(paper[0]),
            "mass %, ours": mass,
            "mass %, theirs": "n/a" if paper is None else _as_printed(paper[1]),
        }
        which = "0" if lam == 0 else "top" if lam == top else None
        if which:
            out[f"ch13_{tag}_{which}_acc_seeds"], out[f"ch13_{tag}_{which}_mass_seeds"] = accuracy, mass
    if "ch13_lstm_seeds" in out and "ch13_tf_seeds" in out:
        fewer = out["ch13_lstm_seeds"] < out["ch13_tf_seeds"]
        out["ch13_lstm_seeds_sentence"] = (
            f"The BiLSTM's rows come from {out['ch13_lstm_seeds_text']}: a BiLSTM deceiver costs more "
            "to train than this transformer, and more seeds would take the chapter past its time budget."
            if fewer else f"The BiLSTM's rows come from {out['ch13_lstm_seeds_text']} too."
        )
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.name = "model"
    return table, out


def _over_seeds(values: list, *, share: bool = False) -> str:
    """The mean over seeds with its t interval as text (a share's cut at 0; large ones at 1
    decimal, small at 3), or one seed's value and "(1 seed)"."""
    if len(values) == 1:
        v = values[0]
        return f"{v:.{1 if v >= 1 or not share else 3}f} (1 seed)"
    interval = uncertainty.seed_interval(values)
    if share:
        interval = replace(interval, low=max(interval.low, 0.0))  # t's symmetric interval cut at 0
    return interval.format(1 if interval.estimate >= 1 or not share else 3)


def accuracy_and_mass(table: pd.DataFrame, summary: pd.Series, *, top: float) -> dict[str, Any]:
    """The reading of the deception table: accuracy and attention mass without and with the penalty.

    ``table``: :func:`attnlib.deception.deception_table`'s frame (with its per-sentence values
    in ``correct`` and ``mass``), rows named by :func:`label`, with the column "accuracy, impermissible tokens
    deleted" added; ``summary``: the task's summary (with "impermissible tokens (mean share)");
    ``top``: the largest λ trained. A model "keeps its accuracy" when the paired 95% interval
    of the change over the test sentences contains 0, and loses (or gains) it only beyond noise.
    """
    require_columns(table, _TABLE_COLUMNS, "table")
    out: dict[str, Any] = {
        "ch13_top_lambda": f"{top:g}",
        "ch13_share": float(summary["impermissible tokens (mean share)"]),
    }
    for family, short in FAMILIES:
        for lam, which in ((0.0, "0"), (top, "top")):
            row = table.loc[label(family, lam)]
            tag = f"ch13_{short}_{which}"
            out[f"{tag}_acc"] = float(row["accuracy"])
            out[f"{tag}_mass"] = float(row["impermissible attention (%)"])
            out[f"{tag}_deleted"] = float(row["accuracy, impermissible tokens deleted"])
    change = {f: _accuracy_change(table, f, top) for f, _ in FAMILIES}
    lstm_top_acc = float(table.loc[label("BiLSTM + tanh", top), "accuracy"])
    lstm_rows = [i for i in table.index if str(i).startswith("BiLSTM + tanh, λ = ")]
    lstm_lams = sorted(float(str(i).rsplit("= ", 1)[1]) for i in lstm_rows)
    pruthi_lam = 0.1  # where Pruthi et al.'s BiLSTM already lost its accuracy
    at = [lam for lam in lstm_lams if abs(lam - pruthi_lam) < 1e-12]
    if at:
        acc_at = float(table.loc[label("BiLSTM + tanh", at[0]), "accuracy"])
        lost = _accuracy_change(table, "BiLSTM + tanh", at[0]).verdict == "higher"
        out["ch13_lstm_at_pruthi"] = (
            f"ours goes from {out['ch13_lstm_0_acc']:.3f} to {acc_at:.3f} at λ = {pruthi_lam:g}, "
            + ("so at the same λ both lose accuracy (ours beyond noise)"
               if lost else "so at the same λ ours keeps its accuracy within noise, where theirs does not")
        )
    else:
        out["ch13_lstm_at_pruthi"] = f"we trained no BiLSTM at λ = {pruthi_lam:g} in this profile"
    for family, short in FAMILIES:
        d = change[family].difference
        out[f"ch13_{short}_drop"] = d.estimate
        out[f"ch13_{short}_drop_ci"] = d.range_text()
        out[f"ch13_{short}_verdict"] = _keeps(change[family])
    out.update(
        {
            "ch13_deleted_max": float(table["accuracy, impermissible tokens deleted"].max()),
            "ch13_lstm_state": (  # chance: 0.5 within the accuracy's 95% interval
                "at chance" if uncertainty.bootstrap(_per_instance(table, "correct", label("BiLSTM + tanh", top)))
                .contains(0.5) else f"at {lstm_top_acc:.3f}"
            ),
        }
    )
    return out


def mean_shares(per_sentence: dict) -> pd.DataFrame:
    """Each explanation's mean share on the impermissible tokens, a row per model.

    ``per_sentence``: ``{model name: {explanation: (N,) shares per sentence}}``, as
    :func:`attnlib.deception.score_mass` gives them; sentences whose share is NaN are skipped.
    """
    if not per_sentence:
        raise ValueError("per_sentence must name at least one model")
    return pd.DataFrame(
        {
            key: {name: np.nanmean(mass) for name, mass in masses.items()}
            for key, masses in per_sentence.items()
        }
    ).T


_SHORT = (("attention", "att"), ("gradient", "grad"), ("leave-one-out", "loo"), ("rollout", "roll"))
_OTHERS = ("gradient", "leave-one-out", "rollout")


def explanations(
    shares: pd.DataFrame, per_sentence: dict, token_share, *, top: float, n_explained: int
) -> dict[str, Any]:
    """The reading of the explanations' mass on the impermissible tokens: do they see through it?

    ``shares``: :func:`mean_shares`' table (rows :func:`label`, columns attention, gradient,
    leave-one-out, rollout); ``per_sentence``: the per-sentence shares it was made from;
    ``token_share``: per sentence, the impermissible tokens' share of its tokens (what uniform
    weights give), aligned with ``per_sentence``; ``top``: the largest λ; ``n_explained``: how
    many test sentences were explained.
    """
    require_columns(shares, [m for m, _ in _SHORT], "shares")
    tf_top = shares.loc[label("transformer", top)]
    tf_0 = shares.loc[label("transformer", 0.0)]
    lstm_top = shares.loc[label("BiLSTM + tanh", top)]
    out: dict[str, Any] = {"ch13_n_explained": n_explained}
    for m, key in _SHORT:
        out[f"ch13_tf_top_{key}"] = float(tf_top[m])
    for m, key in _SHORT:
        out[f"ch13_tf_0_{key}"] = float(tf_0[m])
    out["ch13_lstm_top_grad"] = float(lstm_top["gradient"])
    out["ch13_lstm_top_loo"] = float(lstm_top["leave-one-out"])
    att_drop = float(tf_0["attention"] - tf_top["attention"])
    other_drop = max(float(tf_0[m] - tf_top[m]) for m in _OTHERS)
    out["ch13_others_move"] = "far less" if other_drop < att_drop / 2 else "almost as much"
    out["ch13_others_fooled"] = (
        "none of them is fooled the way attention is"
        if min(float(tf_top[m]) for m in _OTHERS) > 10 * float(tf_top["attention"])
        else "some of them are fooled too"
    )
    deceptive = per_sentence[label("transformer", top)]
    seeing = [  # above uniform weights' share beyond noise, sentence by sentence (paired)
        m
        for m in _OTHERS
        if uncertainty.compare(deceptive[m], token_share, paired=True).verdict == "higher"
    ]
    out["ch13_seeing"] = (
        ", ".join(seeing)
        if seeing
        else "none of them: each is within noise of, or below, that share"
    )
    return out


def erasure(removal: pd.DataFrame, *, top: float) -> dict[str, Any]:
    """The reading of Serrano & Smith's erasure on the BiLSTMs without and with the penalty.

    ``removal``: :func:`attnlib.erasure.removal_summary`'s frames concatenated under the keys
    ``label("BiLSTM + tanh", lam)`` for λ = 0 and ``top`` (rows: attention, gradient, random;
    columns never_flipped, mean_fraction_removed); ``top``: the largest λ.
    """
    require_columns(removal, ("never_flipped", "mean_fraction_removed"), "removal")
    r0 = removal.loc[label("BiLSTM + tanh", 0.0)]
    r1 = removal.loc[label("BiLSTM + tanh", top)]
    out: dict[str, Any] = {}
    for name, r in (("0", r0), ("top", r1)):
        for ranking in ("attention", "gradient", "random"):
            out[f"ch13_erase{name}_{ranking}_flips"] = 1 - float(r.loc[ranking, "never_flipped"])
    out["ch13_erase0_att"] = float(r0.loc["attention", "mean_fraction_removed"])
    out["ch13_erase0_grad"] = float(r0.loc["gradient", "mean_fraction_removed"])
    return out
