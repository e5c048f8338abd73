"""Chapter 13 (attention trained to deceive): the numbers and clauses its prose reads off the
deception tables, the explanations' mass on the impermissible tokens, and erasure, over every
training seed of every model.

Every model (a family at a penalty weight lambda) is trained with several seeds. The
per-sentence results of each seed's model stack as seeds x sentences (the same test sentences
for every seed), and every number the prose quotes is the mean over seeds with a 95% interval
that carries both the seed spread and the sentences' noise (:func:`attnlib.uncertainty.over_seeds`);
every verdict ("keeps its accuracy", "above uniform weights' share", "moves less than
attention") is :func:`attnlib.uncertainty.compare_over_seeds`, which says in how many seeds
it holds and is "within noise" unless the pooled interval excludes 0 and most seeds agree.

Each reading function takes the chapter's results and returns ``{glued name: value}``. The
models are named by :func:`label` (``"transformer, λ = 1"``), the rows of the chapter's tables.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from ... import published, uncertainty
from ...experiments.deception import score_mass
from ...seeds import SeedSet
from .wording import listed

__all__ = ["label", "seed_sets", "models_by_seed", "seeds_plan", "table_over_seeds", "accuracy_and_mass", "pruthi",
           "pruthi_table", "beside_pruthi", "MINILM_STEP", "minilm_cost", "explanation_shares", "mean_shares",
           "shares_table", "explanations", "removal_table", "erasure", "setup", "n_lambdas"]

#: The chapter's two model families, and the short names its glued names use.
FAMILIES = (("BiLSTM + tanh", "lstm"), ("transformer", "tf"))

#: The deception table's per-sentence columns (:func:`attnlib.deception.deception_table`).
_PER_SENTENCE = ("correct", "mass")


def label(family: str, lam: float) -> str:
    """A model's name in the chapter's tables: ``label("transformer", 1.0)`` is ``"transformer, λ = 1"``."""
    return f"{family}, λ = {lam:g}"


# ----------------------------------------------------------------------------- the models over seeds
def seed_sets(runs: Mapping) -> dict:
    """The chapter's deceivers grouped by model: ``{(family, λ): SeedSet}``, each set's models
    in seed order (the chapter's own seed first).

    ``runs``: ``{(family, λ, seed): trained deceiver}`` (:func:`attnlib.deception.train_deceiver`'s
    results). :func:`attnlib.seeds.run_over_seeds` then runs any per-sentence experiment on
    every seed's model of a set. Raises ValueError for an empty or misshapen ``runs``.
    """
    if not isinstance(runs, Mapping) or not runs or any(not isinstance(k, tuple) or len(k) != 3 for k in runs):
        raise ValueError("runs must be a non-empty dict {(family, lambda, seed): a trained model}")
    grouped: dict = {}
    for (family, lam, s), model in runs.items():
        grouped.setdefault((family, lam), {})[s] = model
    return {key: SeedSet(tuple(sorted(by_seed)), tuple(by_seed[s] for s in sorted(by_seed)),
                         {"family": key[0], "lam": key[1]})
            for key, by_seed in grouped.items()}


def models_by_seed(sets: Mapping) -> list:
    """``[{model name: its k-th seed's trained model}, ...]``, k = 0, 1, ...: one dict per seed, for
    :func:`attnlib.deception.deception_table` (a model with fewer seeds drops out of the later dicts)."""
    if not isinstance(sets, Mapping) or not sets:
        raise ValueError("sets must be a non-empty dict {(family, lambda): SeedSet} (seed_sets)")
    depth = max(len(s) for s in sets.values())
    return [{label(*key): s[k] for key, s in sets.items() if k < len(s)} for k in range(depth)]


def seeds_plan(*, lstm_seeds: int, tf_seeds: int) -> dict[str, Any]:
    """How many training seeds each family gets, for the chapter's introduction
    (``ch13_seeds_plan``): "every model trains with 3 seeds" or "the transformers train with 3
    seeds and the BiLSTMs with one seed"."""
    for name, n in (("lstm_seeds", lstm_seeds), ("tf_seeds", tf_seeds)):
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"{name} must be a positive int, got {n!r}")

    def seeds(n: int) -> str:
        return "one seed" if n == 1 else f"{n} seeds"

    plan = (f"every model trains with {seeds(tf_seeds)}" if lstm_seeds == tf_seeds
            else f"the transformers train with {seeds(tf_seeds)} and the BiLSTMs with "
                 f"{seeds(lstm_seeds)}")
    return {"ch13_seeds_plan": plan}


# ----------------------------------------------------------------------------- the deception tables
def _check_tables(tables, what: str = "tables") -> list:
    if isinstance(tables, pd.DataFrame) or not isinstance(tables, Sequence) or not tables:
        raise ValueError(f"{what} must be a non-empty list of deception_table frames, one per seed")
    for t in tables:
        if not isinstance(t, pd.DataFrame) or any(c not in t.columns for c in _PER_SENTENCE):
            raise ValueError(f"{what} must hold deception_table's frames, with the per-sentence values behind "
                             f"its means (the columns {', '.join(_PER_SENTENCE)})")
    return list(tables)


def _stack(tables: list, name: str, column: str) -> np.ndarray:
    """(S, n) a model's per-sentence ``column`` ("correct" or "mass") over the seeds that have it."""
    rows = [np.asarray(t.at[name, column], dtype=np.float64) for t in tables if name in t.index]
    if not rows:
        raise ValueError(f"no table has the model {name!r}")
    return np.stack(rows)


def _names(tables: list) -> list:
    """Every model of the tables, in the first table's order."""
    names = list(tables[0].index)
    return names + [n for t in tables[1:] for n in t.index if n not in names]


def _clipped(interval: uncertainty.Interval, high: float = math.inf) -> uncertainty.Interval:
    """A share's interval cut at 0 and at ``high`` (the pooled t interval is symmetric)."""
    return replace(interval, low=max(interval.low, 0.0), high=min(interval.high, high))


def table_over_seeds(tables, deleted, *, seed: int = 0) -> pd.DataFrame:
    """The deception table to show, over seeds: per model the test accuracy, the attention mass
    on the impermissible tokens (%) and the accuracy with those tokens deleted, each as "mean
    [95% interval over seeds and sentences]"; the tokens' share (%); the seeds.

    ``tables``, ``deleted``: per seed, :func:`attnlib.deception.deception_table` of that seed's
    models on the test split and on the same split with the impermissible tokens deleted.
    """
    tables, deleted = _check_tables(tables), _check_tables(deleted, "deleted")
    rows = {}
    for name in _names(tables):
        correct = _stack(tables, name, "correct")
        rows[name] = {
            "accuracy [95% interval]": uncertainty.over_seeds(correct, seed=seed).format(3),
            "impermissible attention (%) [95% interval]":
                _clipped(uncertainty.over_seeds(_stack(tables, name, "mass"), seed=seed)).format(3),
            "impermissible tokens (%)": f"{float(tables[0]['impermissible tokens (%)'].iloc[0]):.3f}",
            "accuracy, impermissible tokens deleted [95% interval]":
                uncertainty.over_seeds(_stack(deleted, name, "correct"), seed=seed).format(3),
            "seeds": str(len(correct)),
        }
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "model"
    return out


def _accuracy_change(tables: list, family: str, lam: float, seed: int) -> uncertainty.SeedComparison:
    """Accuracy without the penalty minus with it (λ = ``lam``), over seeds and the same test
    sentences: seed k at λ = 0 and at ``lam`` start from the same weights (paired seeds)."""
    a, b = _stack(tables, label(family, 0.0), "correct"), _stack(tables, label(family, lam), "correct")
    k = min(len(a), len(b))
    return uncertainty.compare_over_seeds(a[:k], b[:k], seed=seed)


def _short(change: uncertainty.SeedComparison) -> str:
    """The accuracy verdict in a few words: "keeps its accuracy within noise", "loses accuracy
    beyond noise", "gains accuracy beyond noise", or that it depends on the seed."""
    if change.verdict == uncertainty.SEEDS_DISAGREE:
        return "loses or gains accuracy, depending on the seed"
    return change.says("loses accuracy beyond noise", "gains accuracy beyond noise",
                       tie="keeps its accuracy within noise")


def _keeps(change: uncertainty.SeedComparison) -> str:
    """The accuracy verdict in words, with how the seeds bear it out."""
    n = change.n_seeds
    if change.verdict == uncertainty.SEEDS_DISAGREE:
        return (f"loses accuracy in some seeds and gains it in others, each beyond noise "
                f"({change.seeds_showing('higher')} of {n} lose it, {change.seeds_showing('lower')} gain it)")
    if change.differs:
        return f"{_short(change)} ({change.seeds_text()})"
    if change.one_model:
        return "keeps its accuracy within noise (one model)"
    shown = max(("higher", "lower"), key=change.seeds_showing)
    k = change.seeds_showing(shown)
    if not k:
        return f"keeps its accuracy within noise, in each of the {n} seeds alone too"
    verb = ("loses" if k == 1 else "lose") if shown == "higher" else ("gains" if k == 1 else "gain")
    return (f"keeps its accuracy within noise over seeds and sentences, though {k} of its {n} seeds alone "
            f"{verb} accuracy beyond noise")


def _lambdas(tables: list, family: str) -> list:
    rows = [n for n in _names(tables) if str(n).startswith(f"{family}, λ = ")]
    return sorted(float(str(n).rsplit("= ", 1)[1]) for n in rows)


def _mean(tables: list, name: str, column: str) -> float:
    """The mean over seeds of each seed's mean over the sentences."""
    return float(np.mean(np.nanmean(_stack(tables, name, column), axis=1)))


def accuracy_and_mass(tables, deleted, summary: pd.Series, *, top: float, seed: int = 0) -> dict[str, Any]:
    """The reading of the deception tables over seeds: accuracy and attention mass without and
    with the penalty.

    ``tables``, ``deleted``: as for :func:`table_over_seeds`; ``summary``: the task's summary
    (with "impermissible tokens (mean share)"); ``top``: the largest λ trained. Values are means
    over seeds (``ch13_{lstm,tf}_{0,top}_{acc,mass,deleted}``; mass in %). A model "keeps its
    accuracy" unless the pooled interval of the change (paired by sentence and by seed) excludes
    0 with most seeds agreeing (:func:`attnlib.uncertainty.compare_over_seeds`); a model is "at
    chance" when the interval of its accuracy over seeds and sentences contains 0.5.
    """
    tables, deleted = _check_tables(tables), _check_tables(deleted, "deleted")
    out: dict[str, Any] = {
        "ch13_top_lambda": f"{top:g}",
        "ch13_share": float(summary["impermissible tokens (mean share)"]),
    }
    for family, short in FAMILIES:
        for lam, which in ((0.0, "0"), (top, "top")):
            name, tag = label(family, lam), f"ch13_{short}_{which}"
            out[f"{tag}_acc"] = _mean(tables, name, "correct")
            out[f"{tag}_mass"] = _mean(tables, name, "mass")
            out[f"{tag}_deleted"] = _mean(deleted, name, "correct")
    for family, short in FAMILIES:
        change = _accuracy_change(tables, family, top, seed)
        out[f"ch13_{short}_drop"] = change.difference.estimate
        out[f"ch13_{short}_drop_ci"] = change.difference.range_text()
        out[f"ch13_{short}_verdict"] = _keeps(change)
        out[f"ch13_{short}_verdict_short"] = _short(change)
    pruthi_lam = 0.1  # where Pruthi et al.'s BiLSTM already lost its accuracy
    at = [lam for lam in _lambdas(tables, "BiLSTM + tanh") if abs(lam - pruthi_lam) < 1e-12]
    if at:
        acc_at = _mean(tables, label("BiLSTM + tanh", at[0]), "correct")
        c = _accuracy_change(tables, "BiLSTM + tanh", at[0], seed)
        out["ch13_lstm_at_pruthi"] = (
            f"ours goes from {out['ch13_lstm_0_acc']:.3f} to {acc_at:.3f} at λ = {pruthi_lam:g}, so at the same λ "
            + c.says(f"both lose accuracy (ours beyond noise, {c.seeds_text()})",
                     f"ours gains accuracy beyond noise ({c.seeds_text()}), where theirs loses it",
                     tie="ours keeps its accuracy within noise, where theirs does not",
                     disagree="ours loses accuracy in some seeds and gains it in others, where theirs loses it")
        )
    else:
        out["ch13_lstm_at_pruthi"] = f"we trained no BiLSTM at λ = {pruthi_lam:g} in this profile"
    names = _names(deleted)
    chance = {n: uncertainty.over_seeds(_stack(deleted, n, "correct"), seed=seed).contains(0.5) for n in names}
    out["ch13_deleted_max"] = max(_mean(deleted, n, "correct") for n in names)
    above = [n for n, at_chance in chance.items() if not at_chance]
    out["ch13_deleted_state"] = (
        "each within noise of chance (0.5) over seeds and sentences" if not above else
        f"within noise of chance (0.5) for {len(names) - len(above)} of the {len(names)} models; "
        f"{listed(above)} {'stays' if len(above) == 1 else 'stay'} off it beyond noise"
    )
    lstm_top = uncertainty.over_seeds(_stack(tables, label("BiLSTM + tanh", top), "correct"), seed=seed)
    out["ch13_lstm_state"] = "at chance" if lstm_top.contains(0.5) else f"at {lstm_top.estimate:.3f}"
    tf_top = uncertainty.over_seeds(_stack(tables, label("transformer", top), "correct"), seed=seed)
    out["ch13_tf_top_chance"] = {
        "above": f"above chance beyond noise (95% interval {tf_top.range_text()})",
        "below": f"below chance beyond noise (95% interval {tf_top.range_text()})",
    }.get(tf_top.relation_to(0.5), f"within noise of chance (95% interval {tf_top.range_text()})")
    tf_name = label("transformer", top)
    said = (f"its accuracy is {tf_top.estimate:.3f} with them, {out['ch13_tf_top_chance']}, and "
            f"{out['ch13_tf_top_deleted']:.3f} without them")
    out["ch13_deceives"] = (
        f"So attention can be made to deceive: with {out['ch13_tf_top_mass']:.3f}% of its attention on the "
        f"impermissible tokens, our transformer still decides with them: {said}"
        if tf_top.relation_to(0.5) == "above" and chance[tf_name] else
        f"Whether attention was made to deceive here is open: with {out['ch13_tf_top_mass']:.3f}% of its "
        f"attention on the impermissible tokens, {said}, so the model is not shown to decide with them"
    )
    return out


# ----------------------------------------------------------------------------- Pruthi et al.
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


def _scaled(interval: uncertainty.Interval, factor: float) -> uncertainty.Interval:
    """An interval of a share in percent (``factor`` 100)."""
    return replace(interval, estimate=factor * interval.estimate, low=factor * interval.low,
                   high=factor * interval.high)


def _percent(interval: uncertainty.Interval, *, share: bool = False) -> str:
    """An interval of a 0..1 accuracy, or of a mass already in %, as the table prints it: large
    values at 1 decimal, small shares at 3; one model's value with "(1 seed)"."""
    digits = 1 if interval.estimate >= 1 or not share else 3
    if interval.method.endswith("one model"):
        return f"{interval.estimate:.{digits}f} (1 seed)"
    return interval.format(digits)


def beside_pruthi(tables, *, seed: int = 0) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Ours over training seeds beside Pruthi et al.'s Table 3, and the glued reading of it.

    ``tables``: per seed, :func:`attnlib.deception.deception_table` of that seed's models (rows
    named by :func:`label`, families as in :data:`FAMILIES`). The table has a row per model and,
    for the test accuracy and the attention mass on the impermissible tokens, ours in percent as
    the mean over seeds with its 95% interval over seeds and sentences
    (:func:`attnlib.uncertainty.over_seeds`; a model of one seed shows its value and "(1 seed)")
    and theirs as printed ("n/a" where they report none; "< 0.01" where they give a bound).
    The glued values, per family (``lstm``, ``tf``): ``ch13_{f}_seeds`` (its seeds per model;
    ``_seeds_text``: "one seed", "3 seeds"), ``ch13_lstm_seeds_sentence`` (why the BiLSTM has
    fewer, where it has) and, at λ = 0 and the largest λ, ``ch13_{f}_{0,top}_{acc,mass}_seeds``
    (as in the table). Raises ValueError for a family whose models differ in seeds.
    """
    tables = _check_tables(tables)
    short = dict(FAMILIES)
    rows, out = {}, {}
    names = _names(tables)
    lams = {}
    for name in names:
        family, lam = str(name).rsplit(", λ = ", 1)
        lams.setdefault(family, []).append(float(lam))
    for name in names:
        family, lam = str(name).rsplit(", λ = ", 1)
        lam = float(lam)
        tag = short.get(family, family)
        correct = _stack(tables, name, "correct")
        if out.setdefault(f"ch13_{tag}_seeds", len(correct)) != len(correct):
            raise ValueError(f"the {family} models differ in their number of seeds")
        out[f"ch13_{tag}_seeds_text"] = "one seed" if len(correct) == 1 else f"{len(correct)} seeds"
        accuracy = _percent(_scaled(uncertainty.over_seeds(correct, seed=seed), 100.0))
        mass = _percent(_clipped(uncertainty.over_seeds(_stack(tables, name, "mass"), seed=seed)), share=True)
        paper = published.PRUTHI_TABLE3.get((PAPER_MODEL.get(family), lam))
        rows[name] = {  # short headers: the table must fit a phone
            "accuracy %, ours": accuracy,
            "accuracy %, theirs": "n/a" if paper is None else _as_printed(paper[0]),
            "mass %, ours": mass,
            "mass %, theirs": "n/a" if paper is None else _as_printed(paper[1]),
        }
        which = "0" if lam == 0 else "top" if lam == max(lams[family]) else None
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


#: What fine-tuning the pretrained MiniLM (all-MiniLM-L6-v2, 6 layers x 12 heads, d_model 384) as
#: Pruthi et al. fine-tune BERT costs on the book's machine: restricted attention in every layer,
#: R_mean on the last layer's [CLS] rows, AdamW, batches of 32 of the book profile's deception
#: sentences (about 49 word pieces each), forward and backward through
#: :class:`attnlib.models.PretrainedClassifier`'s portable products (the book's models must be the
#: same bits on every CPU), one thread per model as the chapters train. Measured on 2026-11-28 on
#: the project's two-core machine, never idle that day: at a load average of 12 to 14, ten steps
#: took 6.8 to 12.9 s (median 10.0 s); at about 20, five steps took a median of 15 to 17 s while
#: one epoch of the chapter's 2 x 4 x 16 transformer deceiver over the same 2,000 sentences, timed
#: between them, took 19 to 24 s. So an epoch of MiniLM (63 steps) costs about 50 times one of
#: ours (``epoch_vs_ours``), a ratio the load cancels from. On the idle machine our transformer
#: deceiver trains its 6 epochs in about 17 s (README, "Chapter 13 opened first"): about 2.8 s an
#: epoch (``ours_epoch_seconds``) on ``ours_sentences`` sentences.
MINILM_STEP = {"batch": 32, "epoch_vs_ours": 50, "ours_epoch_seconds": 17 / 6, "ours_sentences": 2000,
               "loaded_step_seconds": 10.0}


def minilm_cost(*, n_train: int, n_models: int, epochs: int, budget_minutes: float = 4.0) -> dict[str, Any]:
    """Why the chapter has no pretrained row: what fine-tuning MiniLM as Pruthi et al. fine-tune
    BERT would cost on the idle book machine, from the measurements of :data:`MINILM_STEP`.

    ``n_train``: the training sentences; ``n_models``: the fine-tunings the row needs (every λ,
    every seed); ``epochs``: the epochs the chapter's transformer trains; ``budget_minutes``: the
    chapter's time budget. An epoch of MiniLM is ``epoch_vs_ours`` times one of our transformer,
    whose epoch time grows with the sentences. Glued: ``ch13_minilm_ratio``,
    ``ch13_minilm_epoch_min`` (one epoch, minutes), ``ch13_minilm_models``,
    ``ch13_minilm_one_epoch_min`` (every model, one epoch each), ``ch13_minilm_full_hours``
    (every model, ``epochs`` each), ``ch13_minilm_epochs`` and ``ch13_minilm_budget`` ("5 to 32
    times the chapter's 4-minute budget").
    """
    for name, value in (("n_train", n_train), ("n_models", n_models), ("epochs", epochs)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if not budget_minutes > 0:
        raise ValueError(f"budget_minutes must be positive, got {budget_minutes!r}")
    m = MINILM_STEP
    epoch = m["epoch_vs_ours"] * m["ours_epoch_seconds"] * n_train / m["ours_sentences"] / 60  # minutes
    one, full = n_models * epoch, n_models * epochs * epoch
    return {
        "ch13_minilm_ratio": m["epoch_vs_ours"],
        "ch13_minilm_epoch_min": epoch,
        "ch13_minilm_models": n_models,
        "ch13_minilm_one_epoch_min": one,
        "ch13_minilm_epochs": epochs,
        "ch13_minilm_full_hours": full / 60,
        "ch13_minilm_budget": (f"{one / budget_minutes:.0f} to {full / budget_minutes:.0f} times the chapter's "
                               f"{budget_minutes:g}-minute budget"),
    }


# ----------------------------------------------------------------------------- the explanations
_SHORT = (("attention", "att"), ("gradient", "grad"), ("leave-one-out", "loo"), ("rollout", "roll"))
_OTHERS = ("gradient", "leave-one-out", "rollout")
_WRITTEN = {"attention": "attention", "gradient": "gradient importance", "leave-one-out": "leave-one-out",
            "rollout": "rollout"}


def explanation_shares(explained: Mapping, rollouts: Mapping, rationales) -> tuple[dict, np.ndarray]:
    """Each explanation's share on the impermissible tokens, per model, seeds x sentences.

    ``explained``: ``{(family, λ): importance results over seeds}``
    (:func:`attnlib.seeds.run_over_seeds` of :func:`attnlib.importance.importance`, the same
    sentences for every seed); ``rollouts``: ``{(family, λ): [rollout over the words, per
    seed]}`` for the models that have it (:func:`attnlib.flow.rollout_words` on each result's
    sentences); ``rationales``: the split's masks of the impermissible tokens.
    Returns ``({model name: {explanation: (S, n) shares}}, (n,) the tokens' share per sentence)``:
    the share is :func:`attnlib.deception.score_mass` (NaN where an explanation is all 0); the
    tokens' share is what uniform weights give them.
    """
    if not isinstance(explained, Mapping) or not explained:
        raise ValueError("explained must be a non-empty dict {(family, lambda): results over seeds}")
    out, token_share = {}, None
    for key, runs in explained.items():
        results = list(runs)
        indices = np.asarray(results[0].indices)
        if any(not np.array_equal(np.asarray(r.indices), indices) for r in results):
            raise ValueError(f"{key}: every seed must explain the same sentences (same max_instances and seed)")
        masks = [rationales[int(i)] for i in indices]
        share = np.array([np.mean(m) for m in masks])
        if token_share is None:
            token_share = share
        elif share.shape != token_share.shape or not np.allclose(share, token_share):
            raise ValueError("every model must explain the same sentences")
        measures = {"attention": [r.attention for r in results], "gradient": [r.gradient for r in results],
                    "leave-one-out": [r.loo for r in results]}
        if key in rollouts:
            if len(rollouts[key]) != len(results):
                raise ValueError(f"{key}: one rollout per seed, got {len(rollouts[key])} for {len(results)} seeds")
            measures["rollout"] = list(rollouts[key])
        out[label(*key)] = {name: np.stack([score_mass(scores, masks) for scores in per_seed])
                            for name, per_seed in measures.items()}
    return out, token_share


def _as_seeds(values) -> np.ndarray:
    """(S, n): a (n,) one model's shares as one seed."""
    array = np.asarray(values, dtype=np.float64)
    return array[None, :] if array.ndim == 1 else array


def mean_shares(per_sentence: dict) -> pd.DataFrame:
    """Each explanation's mean share on the impermissible tokens, a row per model: the mean over
    seeds of each seed's mean over its sentences.

    ``per_sentence``: ``{model name: {explanation: (S, n) or (n,) shares per sentence}}``
    (:func:`explanation_shares`); sentences whose share is NaN are skipped.
    """
    if not per_sentence:
        raise ValueError("per_sentence must name at least one model")
    return pd.DataFrame(
        {key: {name: float(np.mean(np.nanmean(_as_seeds(mass), axis=1))) for name, mass in masses.items()}
         for key, masses in per_sentence.items()}
    ).T


def shares_table(per_sentence: dict, token_share, *, seed: int = 0) -> pd.DataFrame:
    """The explanations' shares to show: per model and explanation "mean [95% interval over seeds
    and sentences]" ("n/a" where a model has no such explanation), and the tokens' mean share
    (what uniform weights give them)."""
    shares = mean_shares(per_sentence)
    rows = {}
    for name, masses in per_sentence.items():
        rows[name] = {m: _clipped(uncertainty.over_seeds(_as_seeds(masses[m]), seed=seed), 1.0).format(3)
                      if m in masses else "n/a" for m in shares.columns}
        rows[name]["impermissible tokens"] = f"{float(np.mean(token_share)):.3f}"
    return pd.DataFrame.from_dict(rows, orient="index")


def _points(value: float) -> str:
    return f"{100 * value:.0f}%"


def _uniform_words(m: str, c: uncertainty.SeedComparison, share: float) -> str:
    """One explanation of the deceptive model against uniform weights' share, in words."""
    name = f"{_WRITTEN[m]} ({_points(share)})"
    return c.says(f"{name} lies above it beyond noise ({c.seeds_text()})",
                  f"{name} lies below it beyond noise ({c.seeds_text()})",
                  tie=f"{name} is within noise of it ({c.seeds_text()})",
                  disagree=f"{name} lies above it in some seeds and below it in others, each beyond noise")


def _each(pairs: list) -> str:
    """How the seeds bear out several verdicts: "each holds in 3 of 3 seeds" when they agree,
    else "gradient importance: holds in 3 of 3 seeds; rollout: holds in 2 of 3 seeds"."""
    texts = [c.seeds_text() for _, c in pairs]
    if len(set(texts)) == 1:
        return f"each {texts[0]}" if len(texts) > 1 else texts[0]
    return "; ".join(f"{_WRITTEN[m]}: {t}" for (m, _), t in zip(pairs, texts))


def explanations(per_sentence: dict, token_share, *, top: float, n_explained: int, seed: int = 0) -> dict[str, Any]:
    """The reading of the explanations' mass on the impermissible tokens over seeds: do they see
    through the deception?

    ``per_sentence``: :func:`explanation_shares`' shares (rows :func:`label`; the transformers
    with attention, gradient, leave-one-out and rollout, the BiLSTMs without rollout);
    ``token_share``: per sentence, the impermissible tokens' share of its tokens (what uniform
    weights give); ``top``: the largest λ; ``n_explained``: the test sentences explained.

    Per explanation of the transformer: its share at λ = 0 and at ``top`` (means over seeds,
    ``ch13_tf_{0,top}_{att,grad,loo,roll}``); its fall, against attention's fall
    (``ch13_moves``: paired by sentence and seed, "less than attention's" only beyond noise);
    and its share in the deceptive model against uniform weights' (``ch13_uniform``): above
    beyond noise, it sees through (``ch13_seeing``); below beyond noise, it is pushed away from
    the tokens the model uses, i.e. fooled (``ch13_fooled``, ``ch13_others_fooled``); within
    noise, neither. No threshold of the chapter's own: every verdict is an interval's.
    """
    top_name, zero_name = label("transformer", top), label("transformer", 0.0)
    need = [m for m, _ in _SHORT]
    for name in (top_name, zero_name):
        missing = [m for m in need if m not in per_sentence.get(name, {})]
        if missing:
            raise ValueError(f"per_sentence[{name!r}] has no {', '.join(missing)} shares")
    lstm_top = label("BiLSTM + tanh", top)
    shares = mean_shares(per_sentence)
    out: dict[str, Any] = {"ch13_n_explained": n_explained}
    for m, key in _SHORT:
        out[f"ch13_tf_top_{key}"] = float(shares.loc[top_name, m])
        out[f"ch13_tf_0_{key}"] = float(shares.loc[zero_name, m])
    out["ch13_lstm_top_grad"] = float(shares.loc[lstm_top, "gradient"])
    out["ch13_lstm_top_loo"] = float(shares.loc[lstm_top, "leave-one-out"])
    deceptive, plain = per_sentence[top_name], per_sentence[zero_name]
    fall = {m: _as_seeds(plain[m]) - _as_seeds(deceptive[m]) for m in need}
    moves, less, not_less = [], [], []
    for m in _OTHERS:
        c = uncertainty.compare_over_seeds(fall[m], fall["attention"], seed=seed)
        moves.append(f"{_WRITTEN[m]} from {_points(out[f'ch13_tf_0_{dict(_SHORT)[m]}'])} to "
                     f"{_points(out[f'ch13_tf_top_{dict(_SHORT)[m]}'])}")
        (less if c.verdict == "lower" else not_less).append((m, c))
    said = f"{listed(moves)}"
    if less and not not_less:
        said += (f". Each falls less than attention does, beyond noise over seeds and sentences "
                 f"({_each(less)})")
    else:
        parts = []
        if less:
            parts.append(f"{listed(_WRITTEN[m] for m, _ in less)} {'falls' if len(less) == 1 else 'fall'} less than "
                         "attention does, beyond noise")
        parts.append(f"{listed(_WRITTEN[m] for m, _ in not_less)} {'does' if len(not_less) == 1 else 'do'} not "
                     "fall less than attention beyond noise over seeds and sentences")
        joined = "; ".join(parts)
        said += ". " + joined[0].upper() + joined[1:]
    out["ch13_moves"] = said
    uniform = np.broadcast_to(np.asarray(token_share, dtype=np.float64), _as_seeds(deceptive["attention"]).shape)
    verdicts = {}
    for m in _OTHERS:
        values = _as_seeds(deceptive[m])
        verdicts[m] = uncertainty.compare_over_seeds(values, uniform[: len(values)], seed=seed)
    out["ch13_uniform"] = "; ".join(
        _uniform_words(m, verdicts[m], out[f"ch13_tf_top_{dict(_SHORT)[m]}"]) for m in _OTHERS)
    seeing = [_WRITTEN[m] for m in _OTHERS if verdicts[m].verdict == "higher"]
    fooled = [m for m in _OTHERS if verdicts[m].verdict == "lower"]
    out["ch13_seeing"] = listed(seeing) if seeing else "none of them"
    out["ch13_seeing_sentence"] = (
        f"{listed(seeing)} still {'points' if len(seeing) == 1 else 'point'} at the tokens the model decides "
        "with, above uniform weights' share beyond noise" if seeing else
        "none of them singles out the tokens the model decides with, since none lies above uniform weights' "
        "share beyond noise")
    out["ch13_fooled"] = listed(_WRITTEN[m] for m in fooled) if fooled else "none of them"
    if fooled:
        less_than_att = [m for m in fooled if uncertainty.compare_over_seeds(
            _as_seeds(deceptive[m]), _as_seeds(deceptive["attention"]), seed=seed).verdict == "higher"]
        verb = "is" if len(fooled) == 1 else "are"
        out["ch13_others_fooled"] = (
            f"{listed(_WRITTEN[m] for m in fooled)} {verb} fooled too: in the deceptive model "
            f"{'it puts' if len(fooled) == 1 else 'they put'} less on the impermissible tokens than uniform "
            "weights would, beyond noise"
            + (f", though {'it is' if len(fooled) == 1 else 'they are'} not pushed as far as attention"
               if set(less_than_att) == set(fooled) else "")
        )
    else:
        out["ch13_others_fooled"] = ("none of them is pushed below uniform weights' share the way attention is")
    return out


# ----------------------------------------------------------------------------- erasure
def _check_removal(removal: Mapping) -> None:
    if not isinstance(removal, Mapping) or not removal:
        raise ValueError("removal must be a non-empty dict {model name: ranked_removal results over seeds}")
    for name, runs in removal.items():
        if not hasattr(runs, "stack") or not hasattr(runs, "results"):
            raise ValueError(f"removal[{name!r}] must be the results over seeds (attnlib.seeds.run_over_seeds), "
                             f"got {type(runs).__name__}")


def _flipped(runs, ranking: str) -> np.ndarray:
    """(S, n): 1 where erasing in ``ranking``'s order flips the decision."""
    j = tuple(runs.results[0].rankings).index(ranking)
    return runs.stack(lambda r: np.asarray(r.flipped[:, j], float))


def _fraction_where_flipped(runs, ranking: str) -> float:
    """The mean over seeds of each seed's mean share erased at the flip, among the decisions that flip."""
    j = tuple(runs.results[0].rankings).index(ranking)
    per_seed = [np.nanmean(np.where(r.flipped[:, j], r.fraction_removed[:, j], np.nan)) if r.flipped[:, j].any()
                else np.nan for r in runs.results]
    return float(np.nanmean(per_seed)) if np.isfinite(per_seed).any() else float("nan")


def removal_table(removal: Mapping, *, seed: int = 0) -> pd.DataFrame:
    """Ranked removal over seeds, to show: per (model, ranking) the share of decisions that flip
    ("mean [95% interval over seeds and sentences]") and the mean share of the tokens erased where
    one flips (the mean over seeds).

    ``removal``: ``{model name: results over seeds}`` of :func:`attnlib.erasure.ranked_removal`.
    """
    _check_removal(removal)
    rows = {}
    for name, runs in removal.items():
        for ranking in runs.results[0].rankings:
            rows[(name, ranking)] = {
                "flipped [95% interval]": uncertainty.over_seeds(_flipped(runs, ranking), seed=seed).format(3),
                "mean share erased (where it flips)": _fraction_where_flipped(runs, ranking),
            }
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.names = ["model", "ranking"]
    return table


def erasure(removal: Mapping, *, top: float, seed: int = 0) -> dict[str, Any]:
    """The reading of Serrano & Smith's erasure on the BiLSTMs without and with the penalty, over seeds.

    ``removal``: ``{label("BiLSTM + tanh", lam): ranked_removal results over seeds}`` for λ = 0
    and ``top`` (rankings attention, gradient, random); ``top``: the largest λ. Shares of the
    decisions that flip are means over seeds (``ch13_erase{0,top}_{ranking}_flips``); at λ = 0
    the mean share erased where the attention and the gradient orders flip one
    (``ch13_erase0_att``, ``ch13_erase0_grad``); ``ch13_erase_top_att_vs_random``: at ``top``,
    attention's order against a random one, over seeds and sentences.
    """
    _check_removal(removal)
    zero, deceptive = label("BiLSTM + tanh", 0.0), label("BiLSTM + tanh", top)
    for name in (zero, deceptive):
        if name not in removal:
            raise ValueError(f"removal has no {name!r}")
    out: dict[str, Any] = {}
    for which, name in (("0", zero), ("top", deceptive)):
        for ranking in ("attention", "gradient", "random"):
            out[f"ch13_erase{which}_{ranking}_flips"] = float(np.mean(np.nanmean(_flipped(removal[name], ranking), 1)))
    out["ch13_erase0_att"] = _fraction_where_flipped(removal[zero], "attention")
    out["ch13_erase0_grad"] = _fraction_where_flipped(removal[zero], "gradient")
    c = uncertainty.compare_over_seeds(_flipped(removal[deceptive], "attention"), _flipped(removal[deceptive], "random"),
                                       seed=seed)
    out["ch13_erase_top_att_vs_random"] = c.says(
        f"more decisions than a random order, beyond noise ({c.seeds_text()})",
        f"fewer decisions than a random order, beyond noise ({c.seeds_text()})",
        tie=f"as many decisions as a random order, within noise ({c.seeds_text()})",
        disagree="more decisions than a random order in some seeds and fewer in others",
    )
    return out


def setup(profile, paper, *, n_train: int) -> dict[str, Any]:
    """What the chapter trains (``profile``: this run's DeceptionSizes) beside what the paper profile
    trains (``paper``): the transformer's shape, the epochs, and the training sentences."""
    return {"ch13_tf_shape": " × ".join(map(str, profile.transformer)), "ch13_n_train": int(n_train),
            "ch13_lstm_epochs": profile.lstm_epochs, "ch13_tf_epochs": profile.transformer_epochs,
            "ch13_paper_lstm_epochs": paper.lstm_epochs, "ch13_paper_tf_shape": " × ".join(map(str, paper.transformer))}


def n_lambdas(lams: Sequence[float]) -> dict[str, Any]:
    """How many penalty weights the table has."""
    return {"ch13_n_lams": len(lams)}
