"""What Chapter 5 (adversarial attention) reads off its run, for the prose to quote.

Each function takes the chapter's results (the
:class:`~attnlib.experiments.counterfactual.AdversaryResult` per encoder, the fractions table,
the binned frames) and returns ``{glued name: value}`` for
:func:`attnlib.presentation.glue.glue_all`.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from attnlib import uncertainty
from attnlib.experiments import counterfactual

from .wording import ENCODER_NAMES, listed, require_columns, some_of

__all__ = [
    "against_paper",
    "bins",
    "class_split",
    "counts",
    "last_shown",
    "other_models",
]


def _check_lstm(results: Mapping) -> None:
    if "lstm" not in results:
        raise ValueError(f"results needs an 'lstm' entry (the BiLSTM), got {list(results)}")


def _hits(results: Mapping) -> dict:
    return {
        e: r.eps_max_jsd >= counterfactual.VERY_DIFFERENT_JSD for e, r in results.items()
    }


def _by_class(results: Mapping, hits: Mapping) -> dict:
    # predicted class 0 against predicted class 1: two groups of sentences
    return {
        e: uncertainty.compare(
            hits[e][r.predicted == 0], hits[e][r.predicted == 1], paired=False
        )
        for e, r in results.items()
    }


def counts(fractions: pd.DataFrame, encoders: Sequence[str], *, eps: float) -> dict[str, Any]:
    """How many sentences the adversary finds a very different attention for, per model.

    fractions: the chapter's table, :func:`~attnlib.experiments.counterfactual.
    fraction_very_different` per model concatenated with index level ``model``
    (``"lstm+tanh"``, ...), with a ``class`` column; encoders: the encoders run
    (``"lstm"``, ...); eps: the output bound of the search.
    """
    require_columns(fractions, ["n", "n_very_different", "fraction", "class"], "fractions")
    out: dict[str, Any] = {"ch05_ln2": float(np.log(2))}  # the largest JSD (natural logs)
    totals = fractions.groupby(level="model")[["n", "n_very_different"]].sum()
    for e in encoders:
        n, n_vd = totals.loc[f"{e}+tanh"]
        out[f"ch05_{e}_n"] = int(n)
        out[f"ch05_{e}_n_vd"] = int(n_vd)
        out[f"ch05_{e}_frac"] = float(n_vd / n)
        by_class = fractions.loc[f"{e}+tanh"].set_index("class")["fraction"]
        for c, v in by_class.items():
            out[f"ch05_{e}_{c}"] = float(v)
    out["ch05_eps"] = float(eps)
    return out


def against_paper(
    ours: Mapping, paper: Mapping, *, eps: float, paper_eps: float, classes: Sequence[str]
) -> dict[str, Any]:
    """Our BiLSTM fractions against the authors', at their eps and at ours.

    ours: eps -> the BiLSTM's :func:`~attnlib.experiments.counterfactual.
    fraction_very_different` table (rows 0 and 1; columns fraction, low, high, n), with
    entries for ``eps`` and ``paper_eps``; paper: class (0, 1) -> published value (with
    ``.value``); eps: the run's eps; paper_eps: the eps behind the authors' committed
    outputs; classes: the two class names.
    """
    for e in (eps, paper_eps):
        if e not in ours:
            raise ValueError(f"ours has no table at eps = {e:g} (it has {sorted(ours)})")
    c0, c1 = classes
    out: dict[str, Any] = {
        "ch05_paper_eps": float(paper_eps),
        "ch05_pe_neg": float(ours[paper_eps].fraction[0]),
        "ch05_pe_pos": float(ours[paper_eps].fraction[1]),
    }
    for key, f in (("ch05_pe_vs_paper", ours[paper_eps]), ("ch05_run_vs_paper", ours[eps])):
        sides = [  # our interval against their number, class by class
            uncertainty.Interval(f.fraction[c], f.low[c], f.high[c], int(f.n[c])).relation_to(
                paper[c].value
            )
            for c in (0, 1)
        ]
        out[key] = (
            f"{sides[0]} theirs for both classes"
            if sides[0] == sides[1]
            else f"{sides[0]} theirs for sentences predicted {c0} and {sides[1]} "
            f"theirs for those predicted {c1}"
        )
    at_paper = f"{out['ch05_pe_neg']:.3f} and {out['ch05_pe_pos']:.3f}"
    at_run = f"{float(ours[eps].fraction[0]):.3f} and {float(ours[eps].fraction[1]):.3f}"
    if out["ch05_pe_vs_paper"] == out["ch05_run_vs_paper"]:  # one verdict: said once
        out["ch05_against_paper"] = (f"At {paper_eps:g} ours are {at_paper}, and at {eps:g} {at_run}: "
                                     f"{out['ch05_run_vs_paper']} at either ε.")
    else:
        out["ch05_against_paper"] = (f"At {paper_eps:g} ours are {at_paper}, {out['ch05_pe_vs_paper']}; "
                                     f"at {eps:g} they are {at_run}, {out['ch05_run_vs_paper']}.")
    return out


def class_split(results: Mapping, *, classes: Sequence[str]) -> dict[str, Any]:
    """Whether the adversary succeeds more often on one predicted class of the BiLSTM.

    results: encoder -> AdversaryResult (an ``"lstm"`` entry needed); classes: the two class
    names.
    """
    _check_lstm(results)
    c0, c1 = classes
    lstm = results["lstm"]
    hits = lstm.eps_max_jsd >= counterfactual.VERY_DIFFERENT_JSD
    split = uncertainty.compare(
        hits[lstm.predicted == 0], hits[lstm.predicted == 1], paired=False
    )
    d = split.difference
    gap = f"({d.signed_text(missing='too few sentences in a class for an interval')})"
    return {
        "ch05_lstm_class_split": split.says(
            f"the adversary succeeds more often on the BiLSTM's sentences predicted {c0} "
            f"than on those predicted {c1}, and the gap {gap} is beyond noise",
            f"the adversary succeeds less often on the BiLSTM's sentences predicted {c0} "
            f"than on those predicted {c1}, and the gap {gap} is beyond noise",
            f"the gap between the BiLSTM's two classes {gap} is within noise: this sample "
            "does not say which class the adversary finds easier",
        )
    }


def other_models(
    results: Mapping, fractions: pd.DataFrame, *, classes: Sequence[str]
) -> dict[str, Any]:
    """The CNN's and the Average model's success against the BiLSTM's, overall and by class.

    results: encoder -> AdversaryResult (an ``"lstm"`` entry needed); fractions: the
    chapter's fractions table (see :func:`counts`); classes: the two class names.
    """
    _check_lstm(results)
    require_columns(fractions, ["n", "n_very_different", "fraction", "class"], "fractions")
    c0, c1 = classes
    lstm = results["lstm"]
    hits = _hits(results)
    by_class = _by_class(results, hits)
    totals = fractions.groupby(level="model")[["n", "n_very_different"]].sum()
    share = totals["n_very_different"] / totals["n"]
    others = [e for e in results if e != "lstm"]
    said = {  # each model against the BiLSTM, on the same sentences where they are the same
        e: uncertainty.compare(
            hits[e], hits["lstm"], paired=np.array_equal(results[e].indices, lstm.indices)
        ).says("more often than with the BiLSTM", "less often than with the BiLSTM",
               "as often as with the BiLSTM, within noise")
        for e in others
    }
    counts = {e: f"{hits[e].sum()} of {len(hits[e])} sentences with the {ENCODER_NAMES[e]} "
                 f"({share[e + '+tanh']:.2f})" for e in others}
    lstm_count = f"{hits['lstm'].sum()} of {len(hits['lstm'])} ({share['lstm+tanh']:.2f})"
    if len(set(said.values())) == 1:  # one verdict: said once
        vs_lstm = (f"on {listed(counts.values())}, against {lstm_count} with the BiLSTM: "
                   + ("each " if len(others) > 1 else "") + next(iter(said.values())))
    else:
        vs_lstm = f"on {listed(counts[e] + ', ' + said[e] for e in others)}; with the BiLSTM, {lstm_count}"
    per_class = "; ".join(
        f"the {ENCODER_NAMES[e]}: "
        + ", ".join(
            f"{f:.3f} predicted {c}"
            for c, f in fractions.loc[f"{e}+tanh"].set_index("class")["fraction"].items()
        )
        + " ("
        + by_class[e].says(
            f"more often on predicted {c0}",
            f"more often on predicted {c1}",
            "the classes within noise",
        )
        + ")"
        for e in others
    )
    return {"ch05_others_vs_lstm": vs_lstm, "ch05_others_classes": per_class}


def _against_line(frame: pd.DataFrame, classes: Sequence[str], threshold: float) -> str:
    parts = []
    for c, f in frame.groupby("predicted"):
        med = f.groupby("bin", observed=True)["value"].median()
        below = [str(b) for b, v in med.items() if v < threshold]
        parts.append(
            f"predicted {classes[c]} in {some_of(len(med) - len(below), len(med), 'non-empty bins')}"
            + (f" (below it in {', '.join(below)})" if below else "")
        )
    return ", ".join(parts)


def bins(
    frames: Mapping[str, pd.DataFrame],
    encoders: Sequence[str],
    *,
    classes: Sequence[str],
    threshold: float,
) -> dict[str, Any]:
    """Where the eps-max JSD sits against the "very different" line, bin by bin of max attention.

    frames: label -> :func:`~attnlib.experiments.counterfactual.bin_by_max_attention` frame
    (columns value, bin, predicted), one per encoder, the BiLSTM's first; encoders: the
    encoders in the order of ``frames``; classes: the class names; threshold: the line.
    """
    if len(frames) != len(encoders) or not frames:
        raise ValueError(
            f"frames ({len(frames)}) and encoders ({len(encoders)}) must match, one per encoder"
        )
    for f in frames.values():
        require_columns(f, ["value", "bin", "predicted"], "a frame")
    first_bins = frames[next(iter(frames))].groupby("bin", observed=False).size()
    return {
        "ch05_lstm_top": int(first_bins.iloc[-1]),
        "ch05_lstm_bottom": int(first_bins.iloc[0]),
        "ch05_line": "; ".join(
            f"the {ENCODER_NAMES[e]}: {_against_line(f, classes, threshold)}"
            for e, f in zip(encoders, frames.values())
        ),
    }


def last_shown(result, shown: Sequence[int], *, threshold: float) -> dict[str, Any]:
    """The eps-max JSD of the last sentence shown, and whether it reaches the line.

    result: the BiLSTM's AdversaryResult; shown: the positions (in ``result``) of the
    sentences shown; threshold: the "very different" line.
    """
    if not len(shown):
        raise ValueError("shown must hold at least one position")
    last_jsd = float(result.eps_max_jsd[shown[-1]])
    return {
        "ch05_last_jsd": last_jsd,
        "ch05_last_side": "falls below" if last_jsd < threshold else "still reaches",
    }
