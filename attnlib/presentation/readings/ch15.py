"""Chapter 15 (which explanation should you trust?): what its prose reads off its results.

One function per paragraph: the hard slices of the synthetic task (:func:`slices`), the
capstone table's ranks (:func:`ranks`), the deceivers (:func:`deceivers`) and the book's
answer (:func:`verdict`); each returns ``{glued name: value}``. :func:`capstone_table` builds
the table a reader sees (shown, like every table, through
:func:`attnlib.presentation.tables.readable`).
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from ... import uncertainty
from ...experiments import faithfulness
from ...experiments.explanations import METHODS
from .wording import listed, some_of

__all__ = [
    "SHORT",
    "LEARNED",
        "slices",
    "capstone_table",
    "ranks",
    "deceivers",
    "verdict",
]

#: The capstone table's columns, as its header (and the verdict) names them.
SHORT = {
    "AP, synthetic": "AP syn",
    "comprehensiveness AOPC, rt": "comp rt",
    "sufficiency AOPC, rt": "suff rt",
    "comprehensiveness AOPC, synthetic": "comp syn",
    "sufficiency AOPC, synthetic": "suff syn",
    "fraction removed to flip, rt": "S&S rt",
}

#: The capstone table's columns as a sentence names them.
YARDSTICKS = {
    "AP, synthetic": "plausibility on the synthetic task",
    "comprehensiveness AOPC, rt": "comprehensiveness on rt-polarity",
    "sufficiency AOPC, rt": "sufficiency on rt-polarity",
    "comprehensiveness AOPC, synthetic": "comprehensiveness on the synthetic task",
    "sufficiency AOPC, synthetic": "sufficiency on the synthetic task",
    "fraction removed to flip, rt": "S&S's decision flips on rt-polarity",
}

#: Accuracy on sentences with a negated marker from which a model counts as having learned the
#: synthetic rule (below it, its plausibility column leaves the verdict).
LEARNED = 0.95

_NEGATED = "with a negated marker"


def _need(frame, labels, what: str, axis: str = "index") -> None:
    have = getattr(frame, axis)
    missing = [label for label in labels if label not in have]
    if missing:
        raise ValueError(f"{what} has no {axis} entry {missing}")


def slices(found: pd.DataFrame, plausible: pd.DataFrame, transformer, split, bands, names) -> dict[str, Any]:
    """Reads the two hard slices: the negators the BiLSTM's methods find, and flow by sentence length.

    found: method x model share of the negators in the top k (column "BiLSTM";
    :func:`attnlib.experiments.explanations.negators_found` per model, with "random (expected)").
    plausible: (model, method) x plausibility metric (:func:`~attnlib.experiments.explanations.plausibility`).
    transformer: the transformer's ExplanationResult on ``split`` (with "flow").
    split: the synthetic test Split (its rationales). bands, names: the length bins and their
    labels (``pd.cut``).
    """
    _need(found, ["BiLSTM"], "found", "columns")
    _need(found, ["attention", "leave-one-out", "integrated gradients", "random (expected)"], "found")
    out = {
        "ch15_neg_lstm_att": float(found.loc["attention", "BiLSTM"]),
        "ch15_neg_lstm_loo": float(found.loc["leave-one-out", "BiLSTM"]),
        "ch15_neg_lstm_ig": float(found.loc["integrated gradients", "BiLSTM"]),
        "ch15_neg_random": float(found.loc["random (expected)", "BiLSTM"]),
    }
    if "flow" not in transformer.scores:
        raise ValueError("transformer must be the transformer's ExplanationResult (it has no flow scores)")
    truth = [split.rationales[i] for i in transformer.indices]
    flow_ap = faithfulness.rationale_ranking(transformer.scores["flow"], truth)
    flow_by_band = (
        flow_ap["average precision"]
        .groupby(pd.cut(transformer.lengths, bands, labels=names), observed=True)
        .mean()
    )
    out["ch15_flow_short"] = float(flow_by_band.iloc[0])
    out["ch15_flow_long"] = float(flow_by_band.iloc[-1])
    out["ch15_band_short"] = str(flow_by_band.index[0])
    out["ch15_band_long"] = str(flow_by_band.index[-1])
    out["ch15_gxi_tf"] = float(plausible.loc[("transformer", "gradient × input"), "average precision"])
    return out


def capstone_table(ranked: dict, higher: dict, methods=METHODS) -> pd.DataFrame:
    """The capstone table a reader sees: (model, method) x yardstick, "mean (rank)" or "n/a".

    ranked: model -> :class:`attnlib.uncertainty.RankedTable` (columns named as :data:`SHORT`'s keys).
    higher: column -> whether higher is better (the header's arrow). methods: the row order.
    """
    if not ranked:
        raise ValueError("ranked must map at least one model to its RankedTable")
    cells = pd.concat(
        {f: table.cells().reindex(methods) for f, table in ranked.items()},
        names=["model", "method"],
    ).fillna("n/a")
    unknown = [c for c in cells.columns if c not in SHORT or c not in higher]
    if unknown:
        raise ValueError(f"no short name or direction for column(s) {unknown}")
    cells.columns = [f"{SHORT[c]} {'↑' if higher[c] else '↓'}" for c in cells.columns]
    return cells


def _rank_text(table, column: str) -> str:
    return f"{int(table.ranks.at['attention', column])}" + ("=" if table.tied.at["attention", column] else "")


def _place(rank_text: str) -> str:
    """A rank as a sentence says it: "4" -> "4th", "2=" -> "joint 2nd"."""
    joint = rank_text.endswith("=")
    k = int(rank_text.rstrip("="))
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return ("joint " if joint else "") + f"{k}{suffix}"


def _places(ranks: list[str], n_methods: int) -> str:
    """Attention's places in the three columns: "4th of 5 in all three columns", or "joint 1st,
    3rd and 3rd of 5 in these three columns"."""
    if len(set(ranks)) == 1:
        return f"{_place(ranks[0])} of {n_methods} in all three columns"
    return f"{listed(_place(r) for r in ranks)} of {n_methods} in these three columns"


def ranks(ranked: dict, columns: dict, n_methods: dict) -> dict[str, Any]:
    """Reads the capstone table: per model, the best methods and attention's rank per column,
    and ERASER's two directions (gradient x input against attention, paired).

    ranked: model -> RankedTable. columns: model -> {column: {method: per-sentence values}}
    (what was ranked). n_methods: model -> how many methods apply to it.
    """
    out: dict[str, Any] = {}
    for family in ranked:
        key, table = family.lower(), ranked[family]
        out[f"ch15_{key}_n_methods"] = n_methods[family]
        for column, short in (
            ("AP, synthetic", "ap"),
            ("comprehensiveness AOPC, rt", "comp"),
            ("sufficiency AOPC, rt", "suff"),
        ):
            first = table.best(column, exclude=["random"])
            out[f"ch15_{key}_{short}_best"] = listed(first) + (
                " (tied within noise)" if len(first) > 1 else ""
            )
            out[f"ch15_{key}_att_{short}_rank"] = _rank_text(table, column)
        name = "the Average model" if key == "average" else f"the {family}"
        out[f"ch15_{key}_summary"] = (
            f"For {name}, the most plausible ranking against the truth is {out[f'ch15_{key}_ap_best']}; "
            f"the most comprehensive on rt-polarity, {out[f'ch15_{key}_comp_best']}; the most sufficient, "
            f"{out[f'ch15_{key}_suff_best']}. Attention comes "
            + _places([out[f"ch15_{key}_att_{c}_rank"] for c in ("ap", "comp", "suff")], n_methods[family])
            + "."
        )
        # ERASER's two directions, sentence by sentence (paired intervals)
        comp = columns[family]["comprehensiveness AOPC, rt"]
        ap = columns[family]["AP, synthetic"]
        out[f"ch15_{key}_eraser_comp"] = uncertainty.compare(
            comp["gradient × input"], comp["attention"], paired=True
        ).says(
            "more comprehensive than",
            "less comprehensive than",
            "as comprehensive as, within noise,",
        )
        out[f"ch15_{key}_eraser_ap"] = uncertainty.compare(
            ap["attention"], ap["gradient × input"], paired=True
        ).says(
            "more plausible than",
            "less plausible than",
            "as plausible as, within noise,",
        )
    return out


def _fooled(family: str, row: pd.Series, vs_random: dict) -> str:
    finders = [
        f"{m} ({row[m]:.3f})"
        for m in ("leave-one-out", "integrated gradients")
        if vs_random[m].verdict == "higher"
    ]
    hidden = vs_random["attention"].verdict == "lower"
    chance = " (near chance: there is little left to hide)" if row["accuracy"] < 0.55 else ""
    return (
        f"the {family} keeps a test accuracy of {row['accuracy']:.3f}{chance} and "
        "its attention "
        f"{'moves off them' if hidden else 'does not move below chance'} "
        f"({row['attention']:.3f}, against {row['random']:.3f} for a random "
        "ranking), while "
        + (
            " and ".join(finders)
            + " still put more on them than a random ranking, beyond "
            "noise: the model uses words its attention hides"
            if finders and hidden
            else (
                " and ".join(finders)
                + " put more on them than a random ranking, beyond noise"
                if finders
                else f"leave-one-out ({row['leave-one-out']:.3f}) and integrated "
                "gradients "
                f"({row['integrated gradients']:.3f}) are within noise of, or "
                "below, a random "
                "ranking's share: no method finds the words"
            )
        )
    )


def deceivers(per_sentence_mass: dict, fooled: pd.DataFrame, top_lambda: float) -> dict[str, Any]:
    """Reads the deceivers: each model at the largest penalty judged against a random ranking's
    share of the impermissible words, sentence by sentence, and attention's share at λ = 0.

    per_sentence_mass: (model, "λ = <lam>") -> {method: per-sentence share on the impermissible
    words}. fooled: (model, penalty) x ["accuracy", methods...], the means. top_lambda: the
    largest penalty (a number). The models are those of ``fooled``'s index, in order.
    """
    _need(fooled, ["accuracy", "attention", "random", "leave-one-out", "integrated gradients"], "fooled", "columns")
    top_lam = f"λ = {top_lambda:g}"
    out: dict[str, Any] = {}
    for family in dict.fromkeys(fooled.index.get_level_values(0)):
        if (family, top_lam) not in per_sentence_mass:
            raise ValueError(f"per_sentence_mass has no entry ({family!r}, {top_lam!r})")
        share, row = per_sentence_mass[(family, top_lam)], fooled.loc[(family, top_lam)]
        vs_random = {
            m: uncertainty.compare(share[m], share["random"], paired=True)
            for m in ("attention", "leave-one-out", "integrated gradients")
        }
        out[f"ch15_fool_{family.lower()}"] = _fooled(family, row, vs_random)
        out[f"ch15_fool_{family.lower()}_att_0"] = float(fooled.loc[(family, "λ = 0"), "attention"])
    out["ch15_top_lambda"] = top_lam
    return out


def _verdict(family: str, first: list, beaten: list, yardsticks: list, learned: bool, negated: float) -> str:
    n = len(yardsticks)
    if first:
        text = (f"attention ranks first, alone or tied within noise, on "
                f"{some_of(len(first), n, 'yardsticks')} ({listed(YARDSTICKS[c] for c in first)})")
    else:
        text = f"attention ranks first on none of its {n} yardsticks"
    if beaten:
        text += ", and other methods beat it beyond noise on " + (
            ("both" if n == 2 else "every one") if len(beaten) == n else listed(YARDSTICKS[c] for c in beaten))
    if not learned:
        text += (f"; its plausibility is left out, since the model did not learn the rule (it reaches "
                 f"{negated:.3f} on sentences with a negated marker)")
    return text


def _model_name(family: str) -> str:
    return "the Average model" if family.lower() == "average" else f"the {family}"


class _Reading(NamedTuple):
    """One model's verdict, as :func:`verdict` found it."""

    first: list  # the yardsticks where attention ranks first
    beaten: list  # those where other methods beat it beyond noise
    yardsticks: list
    learned: bool  # the model learned the synthetic rule
    negated: float  # its accuracy on sentences with a negated marker
    text: str  # the verdict in words


def _answer(rows: dict) -> str:
    """The book's answer in one or two sentences: ``rows`` is family -> :class:`_Reading`. When attention is first nowhere and
    beaten everywhere for every model, that is said once; otherwise model by model."""
    never = [f for f, r in rows.items() if not r.first and len(r.beaten) == len(r.yardsticks)]
    if len(rows) < 2 or len(never) < len(rows):
        clauses = [f"for {_model_name(f)}, {r.text}" for f, r in rows.items()]
        return "F" + "; ".join(clauses)[1:] + "."
    every = {2: "both models", 3: "all three models"}.get(len(rows), f"all {len(rows)} models")
    counts = listed(f"{len(r.yardsticks)} for {_model_name(f)}" for f, r in rows.items())
    text = (f"For {every}, attention ranks first on none of their yardsticks ({counts}), and other "
            f"methods beat it beyond noise on every one.")
    unlearned = [(f, r.negated) for f, r in rows.items() if not r.learned]
    if unlearned:
        names = listed(_model_name(f) for f, _ in unlearned)
        scores = listed(f"{n:.3f}" for _, n in unlearned)
        if len(unlearned) == 1:
            text += (f" The plausibility of {names} is left out, since it did not learn the rule "
                     f"({scores} on sentences with a negated marker).")
        else:
            who = "neither" if len(unlearned) == 2 else "none of them"
            text += (f" The plausibility of {names} is left out, since {who} learned the rule "
                     f"({scores} on sentences with a negated marker).")
    return text


def verdict(ranked: dict, accuracy: pd.DataFrame) -> dict[str, Any]:
    """Reads the book's answer: per model, on how many yardsticks attention ranks first, and
    which methods (if any) rank first in every column that compares methods. ``ch15_answer``
    says it in one go (a verdict shared by every model is said once).

    ranked: model -> RankedTable. accuracy: (task, model) x accuracy columns, with
    "with a negated marker" for the synthetic task; a model under :data:`LEARNED` there did
    not learn the rule, and its "AP, synthetic" column leaves its verdict.
    """
    _need(accuracy, [_NEGATED], "accuracy", "columns")
    learned = {f: accuracy.loc[("synthetic", f), _NEGATED] >= LEARNED for f in ranked}
    out: dict[str, Any] = {}
    winners = []
    rows = {}
    for family in ranked:
        table = ranked[family]
        # the columns that compare methods (S&S's has attention and random alone)
        yardsticks = [
            c
            for c in table.ranks.columns
            if table.ranks[c].drop("random", errors="ignore").notna().sum() > 1
            and (learned[family] or c != "AP, synthetic")
        ]
        firsts = [
            m
            for m in table.ranks.index
            if m != "random"
            and all(table.ranks.at[m, c] == 1 for c in yardsticks if np.isfinite(table.ranks.at[m, c]))
        ]
        winners += [
            f"{m} (the {family} model)"
            for m in firsts
            if all(np.isfinite(table.ranks.at[m, c]) for c in yardsticks)
        ]
        first = [c for c in yardsticks if table.ranks.at["attention", c] == 1]
        beaten = [c for c in yardsticks if table.ranks.at["attention", c] > 1]
        negated = float(accuracy.loc[("synthetic", family), _NEGATED])
        out[f"ch15_{family.lower()}_verdict"] = _verdict(
            family, first, beaten, yardsticks, learned[family], negated,
        )
        rows[family] = _Reading(first, beaten, yardsticks, learned[family], negated,
                                out[f"ch15_{family.lower()}_verdict"])
    out["ch15_answer"] = _answer(rows)
    out["ch15_sweep"] = (
        "no method ranks first (alone or tied) in every column for any model"
        if not winners
        else "only "
        + " and ".join(winners)
        + (" rank" if len(winners) > 1 else " ranks")
        + " first (alone or tied) in every column that compares methods"
    )
    return out
