"""Chapter 10 (erasure): what the prose reads off the single-weight and ranked-removal runs,
over every training seed of the two models.

Both experiments run on two models, named as the chapter names them: ``"lstm + tanh"``
(glued with the suffix ``_lstm``, written "BiLSTM") and ``"average + tanh"`` (suffix ``_avg``,
written "Average"), each trained with several seeds. The functions take, per model, the
experiment's results on every seed (an :class:`attnlib.seeds.SeedResults`: ``results`` in seed
order and ``stack(field)``, seeds x sentences) and return ``{glued name: value}`` for
:func:`attnlib.presentation.glue.glue_all`. A share is the mean over seeds with its 95%
interval over seeds and sentences (:func:`attnlib.uncertainty.over_seeds`); a comparison
is :func:`attnlib.uncertainty.compare_over_seeds`, and says in how many seeds it holds.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from ... import uncertainty
from ...experiments.erasure import removal_summary

__all__ = ["MODELS", "single_weight", "second_finding", "summary_over_seeds", "removal_over_seeds", "flip_fractions", "flip_shares", "curve_areas",
           "rankings_compared"]

#: The chapter's two models and the suffix of their glued names.
MODELS = {"lstm + tanh": "lstm", "average + tanh": "avg"}

_WRITTEN = {"lstm + tanh": "BiLSTM", "average + tanh": "Average"}
_RANKINGS = ("attention", "random", "gradient", "attention_x_gradient")
#: the single-weight shares a row of the summary reads, as flip_summary names them
_SHARES = {
    "flip_top": lambda r: np.asarray(r.flip_top, float),
    "flip_random": lambda r: np.asarray(r.flip_random, float),
    "only_top_flips": lambda r: (np.asarray(r.flip_top, bool) & ~np.asarray(r.flip_random, bool)).astype(float),
    "only_random_flips": lambda r: (~np.asarray(r.flip_top, bool) & np.asarray(r.flip_random, bool)).astype(float),
    "top_changes_more": lambda r: (np.asarray(r.jsd_difference) > 0).astype(float),
}


def _check_models(runs: Mapping, what: str) -> None:
    if not isinstance(runs, Mapping) or set(runs) != set(MODELS):
        got = sorted(runs) if isinstance(runs, Mapping) else type(runs).__name__
        raise ValueError(f"{what} must map exactly the models {sorted(MODELS)}, got {got}")
    for m, r in runs.items():
        if not hasattr(r, "stack") or not hasattr(r, "results"):
            raise ValueError(f"{what}[{m!r}] must be the results over seeds (attnlib.seeds.run_over_seeds), "
                             f"got {type(r).__name__}")


def _share(runs, field: Callable, seed: int) -> uncertainty.Interval:
    return uncertainty.over_seeds(runs.stack(field), seed=seed)


def _each_seed(runs, statistic: Callable) -> np.ndarray:
    """(S,) a statistic of each seed's result."""
    return np.array([statistic(r) for r in runs.results], dtype=float)


def summary_over_seeds(single: Mapping, *, seed: int = 0) -> pd.DataFrame:
    """The single-weight table: one column per model, the shares of :func:`attnlib.erasure.flip_summary`
    as "mean [95% interval over seeds and sentences]", and the median Delta JSD as the mean of
    the seeds' medians with their range."""
    _check_models(single, "single")
    table = {}
    for m, runs in single.items():
        column = {"seeds": str(len(runs.results))}
        for row, field in _SHARES.items():
            column[row] = _share(runs, field, seed).format(3)
        medians = _each_seed(runs, lambda r: np.median(r.jsd_difference))
        column["median_jsd_difference"] = f"{medians.mean():.4f} ({medians.min():.4f} to {medians.max():.4f})"
        table[m] = column
    return pd.DataFrame(table)


def _all_above(a: np.ndarray, b: np.ndarray) -> bool:
    """Every seed's value of a above every seed's value of b."""
    return bool(a.min() > b.max())


def single_weight(single: Mapping, *, seed: int = 0) -> dict[str, Any]:
    """What the single-weight paragraph reads: flip rates, JSD gaps, top weights, the first finding.

    ``single``: model -> its single-weight results over seeds. Shares are means over seeds
    (``ch10_{row}_{suffix}``) with their intervals (``ch10_{row}_ci_{suffix}``). Serrano &
    Smith's first finding (erasing the top weight usually moves the output more than erasing a
    random one) holds for a model when the interval of its ``top_changes_more`` share lies
    above one half; "almost every point" needs it above 0.9 for both. The Average model's
    median gap is called larger or smaller than the BiLSTM's only when every seed's median is.
    """
    _check_models(single, "single")
    out: dict[str, Any] = {}
    tcm = {}
    for m, k in MODELS.items():
        for row in ("flip_top", "flip_random", "top_changes_more"):
            iv = _share(single[m], _SHARES[row], seed)
            out[f"ch10_{row}_{k}"] = float(iv.estimate)
            out[f"ch10_{row}_ci_{k}"] = iv.range_text()
            if row == "top_changes_more":
                tcm[m] = iv
        medians = _each_seed(single[m], lambda r: np.median(r.jsd_difference))
        out[f"ch10_median_jsd_difference_{k}"] = float(medians.mean())
    out["ch10_n"] = int(len(single["lstm + tanh"].results[0]))
    out["ch10_n_seeds"] = int(len(single["lstm + tanh"].results))
    lows = min(iv.low for iv in tcm.values())
    usual = all(iv.low > 0.5 for iv in tcm.values())
    out["ch10_points"] = ("Almost every point lies" if lows >= 0.9 else "Most points lie" if usual
                          else "For one model half the points or fewer lie")
    out["ch10_first_finding"] = (
        f"That is Serrano & Smith's first finding, and it supports attention: for both models the "
        f"share lies above one half over all {out['ch10_n_seeds']} seeds and the sentences."
        if usual else
        "So Serrano & Smith's first finding does not hold for both models: for at least one, the "
        "interval over seeds and sentences reaches one half."
    )
    med = {m: _each_seed(single[m], lambda r: np.median(r.jsd_difference)) for m in MODELS}
    avg, lstm = med["average + tanh"], med["lstm + tanh"]
    out["ch10_avg_med_dir"] = ("larger" if _all_above(avg, lstm) else "smaller" if _all_above(lstm, avg)
                               else "no different in kind (the seeds do not order the two)")

    def bigdiff(r) -> float:  # weight gap where the 10% largest Delta JSDs are
        big = r.jsd_difference >= np.quantile(r.jsd_difference, 0.9)
        return float(np.median((r.top_weight - r.random_weight)[big]))

    for m, k in MODELS.items():
        out[f"ch10_bigdiff_weight_{k}"] = float(_each_seed(single[m], bigdiff).mean())
    out["ch10_top_weight_lstm"] = float(_each_seed(single["lstm + tanh"], lambda r: r.top_weight.mean()).mean())
    out["ch10_top_weight_avg_median"] = float(_each_seed(single["average + tanh"],
                                                         lambda r: np.median(r.top_weight)).mean())
    out["ch10_top_weight_lstm_median"] = float(_each_seed(single["lstm + tanh"],
                                                          lambda r: np.median(r.top_weight)).mean())
    out["ch10_yes_tcm"] = "yes" if usual else "not for both"
    return out


def second_finding(single: Mapping, *, seed: int = 0) -> dict[str, Any]:
    """How often one erasure flips a decision, and whether the Average model flips more.

    Serrano & Smith find that erasing one weight *rarely* flips a decision, but set no
    threshold for "rarely" (their figures, not a table, show it), so the chapter gives the
    shares with their intervals instead of a verdict against a number of its own. What it does
    judge: that erasing the top weight flips more decisions than erasing a random one, per model
    (paired, over seeds and sentences), and whether the Average model's top erasure flips more
    decisions than the BiLSTM's (two recipes: ``paired_seeds=False``).
    """
    _check_models(single, "single")
    top = {m: single[m].stack(_SHARES["flip_top"]) for m in MODELS}
    rand = {m: single[m].stack(_SHARES["flip_random"]) for m in MODELS}
    against = {m: uncertainty.compare_over_seeds(top[m], rand[m], seed=seed) for m in MODELS}
    said = []
    for m in MODELS:
        c, whose = against[m], f"the {_WRITTEN[m]}{' model' if m == 'average + tanh' else ''}'s decisions"
        said.append(c.says(f"more of {whose} ({c.seeds_text()})", f"fewer of {whose} ({c.seeds_text()})",
                           tie=f"no more of {whose} beyond noise ({c.seeds_text()})",
                           disagree=f"more or fewer of {whose}, depending on the seed"))
    second = ("Their second finding is that such an erasure *rarely* flips a decision. They set no "
              "threshold for \"rarely\", so we give the shares with their intervals over seeds and "
              f"sentences rather than a verdict: {single_weight_shares(single, seed)}. Erasing the top weight "
              f"rather than a random one flips {said[0]}, and {said[1]}.")
    c = uncertainty.compare_over_seeds(top["average + tanh"], top["lstm + tanh"], paired_seeds=False, seed=seed)
    smaller = _all_above(_each_seed(single["lstm + tanh"], lambda r: np.median(r.top_weight)),
                         _each_seed(single["average + tanh"], lambda r: np.median(r.top_weight)))
    clause = c.says(
        f"so erasing its top weight flips more decisions ({c.seeds_text()})"
        + (", though that weight is smaller in every seed" if smaller else ""),
        f"yet here erasing its top weight flips fewer decisions than for the BiLSTM ({c.seeds_text()})",
        tie=f"yet here erasing its top weight flips no more decisions than for the BiLSTM beyond noise "
            f"({c.seeds_text()})",
        disagree="and whether erasing its top weight flips more decisions than for the BiLSTM depends on the seed",
    )
    rare = (f"the paper sets no threshold; over {len(single['lstm + tanh'].results)} seeds each")
    return {"ch10_second_finding": second, "ch10_yes_rare": rare, "ch10_avg_flip_clause": clause}


def single_weight_shares(single: Mapping, seed: int = 0) -> str:
    """"5.7% (95% interval 4.2% to 7.1%) of the BiLSTM's decisions and ... of the Average model's"."""
    parts = []
    for m in MODELS:
        iv = _share(single[m], _SHARES["flip_top"], seed)
        parts.append(f"{iv.estimate:.1%} (95% interval {iv.low:.1%} to {iv.high:.1%}) of the "
                     f"{_WRITTEN[m]}{' model' if m == 'average + tanh' else ''}'s decisions")
    return " and ".join(parts) + " flip"


def _check_ranked(ranked: Mapping) -> None:
    _check_models(ranked, "ranked")
    for m, runs in ranked.items():
        for r in runs.results:
            missing = [k for k in _RANKINGS if k not in tuple(r.rankings)]
            if missing:
                raise ValueError(f"ranked[{m!r}] lacks the rankings {missing}")


def _flipped(ranking: str) -> Callable:
    return lambda r: np.asarray(r.flipped[:, tuple(r.rankings).index(ranking)], float)


def _area(ranking: str) -> Callable:
    """Per sentence: 1 - the fraction erased at the flip, 0 where it never flips (the curve's area is its mean)."""
    def per_sentence(r):
        j = tuple(r.rankings).index(ranking)
        return np.where(r.flipped[:, j], 1 - np.nan_to_num(r.fraction_removed[:, j]), 0.0)
    return per_sentence


def removal_over_seeds(ranked: Mapping) -> pd.DataFrame:
    """Ranked removal's table (:func:`attnlib.erasure.removal_summary`), each cell the mean over
    the model's seeds: indexed by (model, ranking)."""
    _check_ranked(ranked)
    frames = {(m, k): removal_summary(r) for m, runs in ranked.items() for k, r in enumerate(runs.results)}
    table = pd.concat(frames, names=["model", "seed"])
    return table.groupby(level=["model", "ranking"], sort=False).mean()


def flip_fractions(ranked: Mapping) -> dict:
    """The flip curves' data: model -> {ranking: (seeds, sentences) fraction erased at the first
    flip, NaN where it never flips}, for :func:`attnlib.viz.plot_flip_curves`."""
    _check_ranked(ranked)
    return {m: {rk: runs.stack(lambda r, j=j: r.fraction_removed[:, j])
                for j, rk in enumerate(runs.results[0].rankings)} for m, runs in ranked.items()}


def flip_shares(ranked: Mapping, *, seed: int = 0) -> dict[str, Any]:
    """The share of decisions each ranking flips (``ch10_flipped_*``) and never flips
    (``ch10_never_*``): means over seeds; ``ch10_never_ci_attention_*``, the interval of the
    share attention's order never flips.

    ``ranked``: model -> its ranked-removal results over seeds.
    """
    _check_ranked(ranked)
    out: dict[str, Any] = {}
    for m, runs in ranked.items():
        for rk in runs.results[0].rankings:
            iv = _share(runs, _flipped(rk), seed)
            out[f"ch10_flipped_{rk}_{MODELS[m]}"] = float(iv.estimate)
            out[f"ch10_never_{rk}_{MODELS[m]}"] = float(1 - iv.estimate)
            if rk == "attention":
                out[f"ch10_never_ci_attention_{MODELS[m]}"] = f"{1 - iv.high:.0%} to {1 - iv.low:.0%}"
    return out


def curve_areas(result) -> dict[str, float]:
    """Area under each flip curve of one model's result: the mean over sentences of 1 - fraction
    erased (0: never flips)."""
    return {rk: float(_area(rk)(result).mean()) for rk in result.rankings}


def _both(verdicts: Mapping[str, bool]) -> str:
    ok = [m for m, holds in verdicts.items() if holds]
    names = {"lstm + tanh": "the BiLSTM", "average + tanh": "the Average model"}
    if len(ok) == 2:
        return "yes, for both models"
    return f"only for {names[ok[0]]}" if ok else "no, for neither model"


_PLACES = ("below random", "closer to random than to the gradient orders",
           "closer to the gradient orders than to random", "above the gradient orders")


def _place(a: Mapping) -> int:
    best_grad = max(a["gradient"], a["attention_x_gradient"])
    if best_grad == a["random"]:  # no span to place attention in: above, below, or at both
        return 3 if a["attention"] > best_grad else 0 if a["attention"] < best_grad else 1
    pos = (a["attention"] - a["random"]) / (best_grad - a["random"])
    return 3 if pos > 1 else 2 if pos >= 0.5 else 1 if pos >= 0 else 0


def _where(results) -> str:
    """Where attention's curve lies between random (0) and the better gradient order (1), when
    every seed puts it in the same place; otherwise the places the seeds give."""
    places = sorted({_place(curve_areas(r)) for r in results})
    if len(places) == 1:
        return _PLACES[places[0]]
    return f"{_PLACES[places[0]]} or {_PLACES[places[-1]]}, depending on the seed"


def rankings_compared(ranked: Mapping, *, seed: int = 0) -> dict[str, Any]:
    """The findings table's ranked-removal rows: attention against random, gradients against attention.

    ``ranked``: model -> ranked-removal results over seeds, with the rankings attention, random,
    gradient and attention_x_gradient. "Sooner" is a larger area under the flip curve (per
    sentence, 1 - the fraction erased at the flip, 0 where none flips), compared within each
    model over seeds and sentences (paired: the same models); a finding holds for a model when
    :func:`attnlib.uncertainty.compare_over_seeds` says so. Where attention's curve lies is read
    from its position between random (0) and the better gradient order (1) in each seed. A
    model "often" needs a large erasure, Serrano & Smith's reading of an upper quartile that
    reaches 1.0, when at least a quarter of its decisions never flip under attention's order:
    "yes" when the share's interval lies at or above one quarter, "no" when below, and "about
    a quarter, within noise" otherwise.
    """
    _check_ranked(ranked)
    areas = {m: {rk: runs.stack(_area(rk)) for rk in _RANKINGS} for m, runs in ranked.items()}
    att_vs_random = {m: uncertainty.compare_over_seeds(a["attention"], a["random"], seed=seed)
                     for m, a in areas.items()}
    grad_vs_att = {m: [uncertainty.compare_over_seeds(a[g], a["attention"], seed=seed)
                       for g in ("gradient", "attention_x_gradient")] for m, a in areas.items()}
    out: dict[str, Any] = {
        "ch10_att_vs_random": _both({m: c.verdict == "higher" for m, c in att_vs_random.items()}),
        "ch10_grad_vs_att": _both({m: all(c.verdict == "higher" for c in cs) for m, cs in grad_vs_att.items()}),
    }
    for m, runs in ranked.items():
        k = MODELS[m]
        out[f"ch10_att_where_{k}"] = _where(runs.results)
        out[f"ch10_att_vs_random_seeds_{k}"] = att_vs_random[m].seeds_text()
        never = uncertainty.over_seeds(1 - runs.stack(_flipped("attention")), seed=seed)
        out[f"ch10_often_{k}"] = ("yes" if never.low >= 0.25 else "no" if never.high < 0.25
                                  else "about a quarter, within noise")
    rl = ranked["lstm + tanh"]
    grad_never = [1 - float(np.mean(rl.stack(_flipped(g)))) for g in ("gradient", "attention_x_gradient")]
    lo, hi = f"{min(grad_never):.0%}", f"{max(grad_never):.0%}"
    out["ch10_grad_never"] = f"{lo} under either gradient order" if lo == hi else f"{lo} to {hi} under the gradient orders"
    return out
