"""The disagreement problem (Chapter 18): how far two explanations of the same prediction agree.

Krishna, Han, Gu, Pombra, Jabbari, Wu & Lakkaraju (2022), "The Disagreement Problem in Explainable
Machine Learning: A Practitioner's Perspective", arXiv:2202.01602, Sec. 3, measure the agreement of
two explanations ``a`` and ``b`` of one instance (a score per feature; here per word) on their
top-k features, the k with the largest *absolute* score (a large negative score is an important
feature too):

=====================  ========================================================================
metric                 per sentence, with k' = min(k, n) for a sentence of n words
=====================  ========================================================================
feature agreement      |topk(a) ∩ topk(b)| / k': the share of the top features both name
rank agreement         the share of the k' ranks at which a and b put the same word (the
                       r-th most important word of a is the r-th of b)
sign agreement         |{w in topk(a) ∩ topk(b): sign(a_w) = sign(b_w)}| / k': shared top
                       features that also push the same way (0 has the sign 0: two zeros agree)
rank correlation       Spearman's rho of a and b over all the words
                       (:func:`attnlib.metrics.spearman`, ties given their average rank)
=====================  ========================================================================

Rules the paper leaves open, fixed here: the top-k is a *stable* sort by absolute value, so of
tied words the earlier one ranks first; k is capped at the sentence's number of words (a
three-word sentence has no top five, and two explanations of it agree on all three words:
feature agreement 1); the sign of a score is ``numpy.sign``. Each of the three top-k metrics
lies in [0, 1], is 1 for an explanation against itself, and rank agreement and sign agreement
never exceed feature agreement. Rank correlation lies in [-1, 1] and is NaN where it is not
defined (a sentence of one word, or one whose scores are all equal under either method).

* :func:`agreement` -- one metric per sentence, batched over padded (N, T) score arrays;
* :func:`pairwise` -- every pair of methods of one :class:`~attnlib.experiments.explanations.ExplanationResult`,
  or of several (one per training seed, the same sentences): (seeds, N) values per pair;
* :func:`disagreement_matrix` -- the method x method table of mean agreement, each pair with an
  interval over training seeds *and* sentences (:func:`attnlib.uncertainty.over_seeds`).

Batched with NumPy: one stable argsort per score array, no loop over sentences.
"""
from __future__ import annotations

import itertools
import math
import numbers
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from .. import uncertainty
from .._checks import check_positive_int

__all__ = ["METRICS", "TOP_K_METRICS", "agreement", "top_k", "pairwise", "Disagreement", "disagreement_matrix"]

#: The metrics :func:`agreement` knows, Krishna et al.'s three top-k ones and Spearman's rho.
METRICS = ("feature agreement", "rank agreement", "sign agreement", "rank correlation")
#: The metrics on the top-k features (in [0, 1]); rank correlation is over every word (in [-1, 1]).
TOP_K_METRICS = METRICS[:3]


def _check_metric(metric) -> str:
    if not isinstance(metric, str) or metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; expected one of {', '.join(map(repr, METRICS))}")
    return metric


def _check_k(k) -> int:
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise ValueError(f"k must be an integer >= 1 (the number of top features), got {k!r}")
    if k < 1:
        raise ValueError(f"k must be an integer >= 1 (the number of top features), got {k!r}")
    return int(k)


def _as_scores(x, name: str) -> np.ndarray:
    if isinstance(x, (str, bytes)):
        raise ValueError(f"{name} must be an (N, T) array of scores, got {type(x).__name__}")
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().cpu().numpy()
    try:
        array = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must hold numbers: {err}") from None
    if array.ndim != 2:
        raise ValueError(f"{name} must be 2-D, (sentences, words) padded, got shape {array.shape}")
    return array


def _check_inputs(a, b, lengths):
    """(a, b) as (N, T) float64, lengths (N,) int, and the (N, T) mask of real words."""
    a, b = _as_scores(a, "a"), _as_scores(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same shape (sentences, words), got {a.shape} and {b.shape}")
    N, T = a.shape
    if lengths is None:
        lengths = np.full(N, T, dtype=np.int64)
    else:
        if hasattr(lengths, "detach"):
            lengths = lengths.detach().cpu().numpy()
        raw = np.asarray(lengths)
        if raw.ndim != 1 or len(raw) != N:
            raise ValueError(f"lengths must be (N,) = ({N},), one per sentence, got shape {raw.shape}")
        if raw.dtype.kind not in "iu" and not (raw.dtype.kind == "f" and np.all(np.isfinite(raw))
                                               and np.all(raw == np.round(raw))):
            raise ValueError(f"lengths must be whole numbers of words, got {raw.dtype} values")
        lengths = raw.astype(np.int64)
        if N and (lengths.min() < 1 or lengths.max() > T):
            raise ValueError(f"each length must be in 1..{T} (the padded width); got lengths from "
                             f"{int(lengths.min())} to {int(lengths.max())}")
    valid = np.arange(T)[None, :] < lengths[:, None]
    for name, x in (("a", a), ("b", b)):
        bad = ~np.isfinite(x) & valid
        if bad.any():
            row = int(np.argmax(bad.any(1)))
            what = "NaN" if np.isnan(x[valid]).any() else "inf"
            raise ValueError(f"{name} holds {what} among the words (first in sentence {row}); scores must be finite")
    return a, b, lengths, valid


def _order(x: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """(N, T): each row's word positions by decreasing |score|, ties the earlier word first, padding last."""
    key = np.where(valid, -np.abs(x), np.inf)
    return np.argsort(key, axis=-1, kind="stable")


def _rank_of(order: np.ndarray) -> np.ndarray:
    """(N, T): the rank (0 = most important) of each word position, from :func:`_order`."""
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.broadcast_to(np.arange(order.shape[1]), order.shape), axis=-1)
    return ranks


def top_k(scores, *, lengths=None, k: int) -> np.ndarray:
    """(N, T) bool: the top-k words of each sentence by absolute score (ties: the earlier word first;
    k capped at the sentence's length); padding is never in it."""
    x, _, lengths, valid = _check_inputs(scores, scores, lengths)
    k = _check_k(k)
    kk = np.minimum(k, lengths)
    return _rank_of(_order(x, valid)) < kk[:, None]


def agreement(a, b, *, lengths=None, k: int, metric: str) -> np.ndarray:
    """One agreement metric of two explanations, per sentence (see the module docstring).

    Args:
        a, b: (N, T) scores of two explanations of the same N sentences, padded: sentence i's
            words are its first ``lengths[i]`` entries (what is past them is ignored). Torch
            tensors are taken too.
        lengths: (N,) words per sentence, each in 1..T (None: every row is T words long).
        k: how many top features (an integer >= 1); capped at each sentence's length.
        metric: one of :data:`METRICS`.

    Returns:
        (N,) float64. Rank correlation is NaN on a sentence of one word or whose scores are
        constant under a or b.

    Raises ``ValueError`` for shapes or lengths that do not match, NaN or inf among the words,
    k < 1, or an unknown metric.
    """
    metric = _check_metric(metric)
    k = _check_k(k)
    a, b, lengths, valid = _check_inputs(a, b, lengths)
    N = a.shape[0]
    if metric == "rank correlation":
        return _rank_correlation(a, b, lengths, valid)
    if N == 0:
        return np.zeros(0)
    kk = np.minimum(k, lengths)
    order_a, order_b = _order(a, valid), _order(b, valid)
    if metric == "rank agreement":
        first = np.arange(a.shape[1])[None, :] < kk[:, None]  # the first k' ranks
        return ((order_a == order_b) & first).sum(-1) / kk
    both = (_rank_of(order_a) < kk[:, None]) & (_rank_of(order_b) < kk[:, None])
    if metric == "sign agreement":
        both &= np.sign(a) == np.sign(b)
    return both.sum(-1) / kk


def _rank_correlation(a, b, lengths, valid) -> np.ndarray:
    from ..metrics import spearman

    out = np.full(a.shape[0], np.nan)
    several = lengths >= 2  # Spearman's rho needs two words; a one-word sentence has none (NaN)
    if several.any():
        with np.errstate(invalid="ignore", divide="ignore"):
            out[several] = spearman(np.where(valid, a, 0.0)[several], np.where(valid, b, 0.0)[several],
                                    lengths=lengths[several])
    return out


# ----------------------------------------------------------------------------- over methods and seeds
def _as_results(results) -> list:
    from .explanations import ExplanationResult

    listed = [results] if isinstance(results, ExplanationResult) else results
    if isinstance(listed, (str, bytes)) or not hasattr(listed, "__iter__"):
        raise ValueError("results must be an ExplanationResult or a list of them (one per training seed), "
                         f"got {type(results).__name__}")
    listed = list(listed)
    if not listed:
        raise ValueError("results must hold at least one ExplanationResult")
    for i, r in enumerate(listed):
        if not isinstance(r, ExplanationResult):
            raise ValueError(f"results[{i}] is a {type(r).__name__}, not an ExplanationResult (from explain())")
    first = listed[0]
    for i, r in enumerate(listed[1:], start=1):
        if len(r) != len(first) or not np.array_equal(np.asarray(r.indices), np.asarray(first.indices)):
            raise ValueError(f"every result must explain the same sentences: results[{i}] has other indices "
                             f"({len(r)} sentences) than results[0] ({len(first)})")
        if not np.array_equal(np.asarray(r.lengths), np.asarray(first.lengths)):
            raise ValueError(f"results[{i}] gives other sentence lengths than results[0]")
    if len(first) == 0:
        raise ValueError("the results hold no sentences")
    return listed


def _methods(listed: list, methods) -> tuple:
    shared = [m for m in listed[0].methods if all(m in r.scores for r in listed)]
    if methods is None:
        chosen = shared
    else:
        if isinstance(methods, str):
            methods = [methods]
        chosen = list(methods)
        for m in chosen:
            missing = [i for i, r in enumerate(listed) if m not in r.scores]
            if missing:
                have = ", ".join(map(repr, shared)) or "none"
                raise ValueError(f"unknown method {m!r}: not in results[{missing[0]}]; the methods every "
                                 f"result has: {have}")
        if len(set(chosen)) != len(chosen):
            raise ValueError(f"methods must not repeat, got {chosen}")
    if len(chosen) < 2:
        raise ValueError(f"agreement needs at least two methods, got {chosen}")
    return tuple(chosen)


def _padded(result, method: str) -> np.ndarray:
    scores = result.scores[method]
    lengths = np.asarray(result.lengths)
    if len(scores) != len(lengths) or not np.array_equal(np.fromiter(map(len, scores), np.int64, len(scores)),
                                                         lengths):
        raise ValueError(f"the scores of {method!r} do not have one value per word of each sentence (lengths)")
    return result.padded(method)


def pairwise(results, *, methods=None, k: int, metric: str) -> dict:
    """Every pair of methods' agreement, per training seed and sentence.

    Args:
        results: one :class:`~attnlib.experiments.explanations.ExplanationResult`, or a list of them,
            one per training seed, on the same sentences (the same ``indices`` and ``lengths``).
        methods: the methods to compare, in order (None: every method all the results have, in
            the first result's order); at least two.
        k, metric: as :func:`agreement`.

    Returns:
        {(method_a, method_b): (seeds, N) float64} for every unordered pair, a before b in
        ``methods`` (``itertools.combinations`` order).
    """
    metric, k = _check_metric(metric), _check_k(k)
    listed = _as_results(results)
    chosen = _methods(listed, methods)
    padded = [{m: _padded(r, m) for m in chosen} for r in listed]
    lengths = np.asarray(listed[0].lengths)
    return {(ma, mb): np.stack([agreement(p[ma], p[mb], lengths=lengths, k=k, metric=metric) for p in padded])
            for ma, mb in itertools.combinations(chosen, 2)}


@dataclass(frozen=True)
class Disagreement:
    """A method x method table of agreement (:func:`disagreement_matrix`).

    ``mean``: DataFrame, methods x methods, symmetric, 1.0 on the diagonal: the mean over training
    seeds of each seed's mean over the sentences (sentences where the metric is NaN left out).
    ``intervals``: {(method_a, method_b): :class:`attnlib.uncertainty.Interval`} for each pair in
    ``pairwise`` order, over seeds and sentences (its ends kept within the metric's range).
    ``values``: :func:`pairwise`'s (seeds, N) arrays. ``metric``, ``k``, ``n_seeds``.
    """

    mean: pd.DataFrame
    intervals: dict
    values: dict
    metric: str
    k: int
    n_seeds: int

    @property
    def methods(self) -> tuple:
        return tuple(self.mean.index)

    def interval(self, a: str, b: str) -> uncertainty.Interval:
        """The interval of one pair, in either order (a method against itself: exactly 1)."""
        if a == b and a in self.mean.index:
            n = next(iter(self.intervals.values())).n
            return uncertainty.Interval(1.0, 1.0, 1.0, n, method="a method against itself")
        for pair in ((a, b), (b, a)):
            if pair in self.intervals:
                return self.intervals[pair]
        raise ValueError(f"unknown method pair ({a!r}, {b!r}); the methods are {', '.join(map(repr, self.methods))}")

    def table(self, digits: int = 3) -> pd.DataFrame:
        """One row per pair: method a, method b, mean, low, high and the interval as text."""
        rows = [{"method a": a, "method b": b, "mean": iv.estimate, "low": iv.low, "high": iv.high,
                 "interval": iv.format(digits)} for (a, b), iv in self.intervals.items()]
        return pd.DataFrame(rows, columns=["method a", "method b", "mean", "low", "high", "interval"])


def _clipped(iv: uncertainty.Interval, low: float, high: float) -> uncertainty.Interval:
    if not math.isfinite(iv.estimate):
        return iv
    return replace(iv, low=max(iv.low, low), high=min(iv.high, high))


def disagreement_matrix(results, *, methods=None, k: int, metric: str, seed: int = 0,
                        level: float = uncertainty.LEVEL, resamples: int = uncertainty.RESAMPLES) -> Disagreement:
    """The method x method table of mean agreement, with an interval for each pair.

    ``results``, ``methods``, ``k``, ``metric``: as :func:`pairwise`. Each pair's (seeds, N)
    values go to :func:`attnlib.uncertainty.over_seeds` (``seed``, ``level``, ``resamples``:
    its bootstrap's), so the interval carries the noise of the sentences and, with several
    results, of the training seeds: where the seeds' models disagree about a pair, it widens.
    With one result it is the sentence bootstrap's interval ("one model").
    """
    listed = _as_results(results)
    seed = check_positive_int(seed, "seed", minimum=0)
    values = pairwise(listed, methods=methods, k=k, metric=metric)
    chosen = _methods(listed, methods)
    bounds = (0.0, 1.0) if metric in TOP_K_METRICS else (-1.0, 1.0)
    intervals = {pair: _clipped(uncertainty.over_seeds(v, level=level, resamples=resamples, seed=seed), *bounds)
                 for pair, v in values.items()}
    mean = pd.DataFrame(np.eye(len(chosen)), index=list(chosen), columns=list(chosen))
    for (a, b), iv in intervals.items():
        mean.loc[a, b] = mean.loc[b, a] = iv.estimate
    mean.index.name, mean.columns.name = "method", "method"
    return Disagreement(mean, intervals, values, metric, int(k), len(listed))
