"""Chapter 10 (erasure): what the prose reads off the single-weight and ranked-removal runs.

Both experiments are run on two models, named as the chapter names them: ``"lstm + tanh"``
(glued with the suffix ``_lstm``, written "BiLSTM") and ``"average + tanh"`` (suffix ``_avg``,
written "Average"). Each function takes the chapter's results and returns
``{glued name: value}`` for :func:`attnlib.presentation.glue.glue_all`.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["MODELS", "single_weight", "second_finding", "flip_shares", "curve_areas", "rankings_compared"]

#: The chapter's two models and the suffix of their glued names.
MODELS = {"lstm + tanh": "lstm", "average + tanh": "avg"}

_WRITTEN = {"lstm + tanh": "BiLSTM", "average + tanh": "Average"}
_SUMMARY_ROWS = ("n", "flip_top", "flip_random", "top_changes_more", "median_jsd_difference")
_RANKINGS = ("attention", "random", "gradient", "attention_x_gradient")


def _check_models(results: Mapping, what: str) -> None:
    if not isinstance(results, Mapping) or set(results) != set(MODELS):
        got = sorted(results) if isinstance(results, Mapping) else type(results).__name__
        raise ValueError(f"{what} must map exactly the models {sorted(MODELS)}, got {got}")


def _check_summary(summary: pd.DataFrame) -> None:
    if not isinstance(summary, pd.DataFrame):
        raise ValueError(f"summary must be a DataFrame of flip_summary columns, got {type(summary).__name__}")
    _check_models(dict.fromkeys(summary.columns), "summary's columns")
    missing = [r for r in _SUMMARY_ROWS if r not in summary.index]
    if missing:
        raise ValueError(f"summary lacks the flip_summary rows {missing}")


def single_weight(summary: pd.DataFrame, single: Mapping) -> dict[str, Any]:
    """What the single-weight paragraph reads: flip rates, JSD gaps, top weights, the first finding.

    ``summary``: one column per model (:data:`MODELS`), the rows of
    :func:`attnlib.erasure.flip_summary`. ``single``: model -> its
    :class:`attnlib.erasure.SingleWeightResult`.
    """
    _check_summary(summary)
    _check_models(single, "single")
    out: dict[str, Any] = {}
    for m, k in MODELS.items():
        for row in ("flip_top", "flip_random", "top_changes_more", "median_jsd_difference"):
            out[f"ch10_{row}_{k}"] = float(summary.loc[row, m])
    out["ch10_n"] = int(summary.loc["n"].iloc[0])
    tcm = summary.loc["top_changes_more"].astype(float)
    out["ch10_points"] = (
        "Almost every point lies"
        if tcm.min() >= 0.9
        else "Most points lie"
        if tcm.min() > 0.5
        else "For one model at most half the points lie"
    )
    out["ch10_first_finding"] = (
        "That is Serrano & Smith's first finding, and it supports attention."
        if tcm.min() > 0.5
        else "So Serrano & Smith's first finding does not hold for both models."
    )
    med = summary.loc["median_jsd_difference"].astype(float)
    out["ch10_avg_med_dir"] = "larger" if med["average + tanh"] > med["lstm + tanh"] else "smaller"
    for m, r in single.items():  # weight gap where the 10% largest Delta JSDs are
        big = r.jsd_difference >= np.quantile(r.jsd_difference, 0.9)
        out[f"ch10_bigdiff_weight_{MODELS[m]}"] = float(np.median((r.top_weight - r.random_weight)[big]))
    out["ch10_top_weight_lstm"] = float(single["lstm + tanh"].top_weight.mean())
    out["ch10_top_weight_avg_median"] = float(np.median(single["average + tanh"].top_weight))
    out["ch10_top_weight_lstm_median"] = float(np.median(single["lstm + tanh"].top_weight))
    out["ch10_yes_tcm"] = "yes" if tcm.min() > 0.5 else "not for both"
    return out


def second_finding(summary: pd.DataFrame, single: Mapping) -> dict[str, Any]:
    """Whether one erasure rarely flips a decision (fewer than one in ten), and the Average model's clause.

    ``summary``: as for :func:`single_weight`; ``single``: model -> SingleWeightResult (its
    ``top_weight`` medians decide whether the Average model's top weight "is smaller").
    """
    _check_summary(summary)
    _check_models(single, "single")
    flip_top = summary.loc["flip_top"].astype(float)
    rare = flip_top < 0.10  # "rarely flips": fewer than one decision in ten
    if rare.all():
        second, yes_rare = (
            "Their second finding holds too: the output moves *little* (fewer than one "
            "decision in ten flips).",
            "yes",
        )
    elif rare.any():
        ok, no = _WRITTEN[rare.idxmax()], _WRITTEN[(~rare).idxmax()]
        second = (
            f"Their second finding holds for the {ok} model, "
            "whose output moves *little* (fewer than one "
            f"decision in ten flips), but not for the {no} model."
        )
        yes_rare = f"{ok} yes, {no} no"
    else:
        second, yes_rare = (
            "Their second finding does not hold here: "
            "erasing one weight flips at least one "
            "decision in ten for both models.",
            "no",
        )
    top_avg = float(np.median(single["average + tanh"].top_weight))
    more = flip_top["average + tanh"] > flip_top["lstm + tanh"]
    smaller = top_avg < float(np.median(single["lstm + tanh"].top_weight))
    clause = (
        ("so erasing its top weight flips more decisions" + (", though that weight is smaller" if smaller else ""))
        if more
        else "yet here erasing its top weight flips no more decisions than for the BiLSTM"
    )
    return {"ch10_second_finding": second, "ch10_yes_rare": yes_rare, "ch10_avg_flip_clause": clause}


def _check_ranked(ranked: Mapping) -> None:
    _check_models(ranked, "ranked")
    for m, r in ranked.items():
        missing = [k for k in _RANKINGS if k not in tuple(r.rankings)]
        if missing:
            raise ValueError(f"ranked[{m!r}] lacks the rankings {missing}")


def flip_shares(ranked: Mapping) -> dict[str, Any]:
    """The share of decisions each ranking flips (``ch10_flipped_*``) and never flips (``ch10_never_*``).

    ``ranked``: model -> its :class:`attnlib.erasure.RankedRemovalResult`.
    """
    _check_models(ranked, "ranked")
    out: dict[str, Any] = {}
    for m, r in ranked.items():
        for j, rk in enumerate(r.rankings):
            out[f"ch10_flipped_{rk}_{MODELS[m]}"] = float(r.flipped[:, j].mean())
            out[f"ch10_never_{rk}_{MODELS[m]}"] = float(1 - r.flipped[:, j].mean())
    return out


def curve_areas(ranked: Mapping) -> dict[str, dict[str, float]]:
    """Area under each flip curve: the mean over sentences of 1 - fraction erased (0: never flips)."""
    areas = {}
    for m, r in ranked.items():
        area = np.where(r.flipped, 1 - np.nan_to_num(r.fraction_removed), 0.0).mean(0)
        areas[m] = dict(zip(r.rankings, area))
    return areas


def _both(areas: Mapping, test: Callable) -> str:
    ok = [m for m in areas if test(areas[m])]
    names = {"lstm + tanh": "the BiLSTM", "average + tanh": "the Average model"}
    if len(ok) == 2:
        return "yes, for both models"
    return f"only for {names[ok[0]]}" if ok else "no, for neither model"


def _where(a: Mapping) -> str:
    best_grad = max(a["gradient"], a["attention_x_gradient"])
    pos = (a["attention"] - a["random"]) / (best_grad - a["random"])
    return (
        "above the gradient orders"
        if pos > 1
        else "closer to the gradient orders than to random"
        if pos >= 0.5
        else "closer to random than to the gradient orders"
        if pos >= 0
        else "below random"
    )


def rankings_compared(ranked: Mapping) -> dict[str, Any]:
    """The findings table's ranked-removal rows: attention vs random, gradients vs attention.

    ``ranked``: model -> :class:`attnlib.erasure.RankedRemovalResult` with the rankings
    attention, random, gradient and attention_x_gradient. "Sooner" is a larger area under the
    flip curve (:func:`curve_areas`); where attention's curve lies is read from its position
    between random (0) and the better gradient order (1). A model "often" needs a large
    erasure when at least a quarter of its decisions never flip under attention's order.
    """
    _check_ranked(ranked)
    areas = curve_areas(ranked)
    out: dict[str, Any] = {
        "ch10_att_vs_random": _both(areas, lambda a: a["attention"] > a["random"]),
        "ch10_grad_vs_att": _both(areas, lambda a: min(a["gradient"], a["attention_x_gradient"]) > a["attention"]),
    }
    for m, a in areas.items():
        out[f"ch10_att_where_{MODELS[m]}"] = _where(a)
    for m, r in ranked.items():
        never = float(1 - r.flipped[:, r.rankings.index("attention")].mean())
        out[f"ch10_often_{MODELS[m]}"] = "yes" if never >= 0.25 else "no"
    rl = ranked["lstm + tanh"]
    grad_never = [1 - rl.flipped[:, rl.rankings.index(k)].mean() for k in ("gradient", "attention_x_gradient")]
    lo, hi = f"{min(grad_never):.0%}", f"{max(grad_never):.0%}"
    out["ch10_grad_never"] = f"{lo} under either gradient order" if lo == hi else f"{lo} to {hi} under the gradient orders"
    return out
