"""Intervals for the book's numbers, and verdicts that call noise noise.

A book that adjudicates a scientific debate must not claim a difference its own noise explains.
Every per-instance statistic a chapter reports (AOPC, AP, a correlation per sentence, a mass
share, a flip fraction, an accuracy) is a mean over sentences, and the sentences are a sample:

* :func:`bootstrap` -- the percentile bootstrap interval of a mean over instances (one column or
  several, resampled together so that columns measured on the same sentences stay paired);
* :func:`compare` -- two such means, on the same sentences (paired) or on two groups
  (independent): the interval of their *difference*, and a verdict, ``"higher"``, ``"lower"`` or
  ``"within noise"`` (the interval of the difference contains 0; for paired right/wrong
  outcomes also when McNemar's exact test, :func:`mcnemar_exact`, does not reject);
* :func:`f1` and :func:`compare_f1` -- F1, which is not a mean over sentences but a ratio of two
  (2 TP / (2 TP + FP + FN)): the same bootstrap resamples the sentences and recomputes the ratio,
  for one model or for the paired difference of two models on the same sentences;
* :func:`proportion` -- a share k of n (an accuracy kept only as a count): Wilson's score
  interval, for results whose per-instance values were not kept;
* :func:`rank` -- several explanations scored on the same sentences: rank = 1 + the number of
  others that are higher beyond noise, so methods that noise cannot order share a rank;
* :func:`seed_interval` -- where the *model* is the unit (a few training seeds), Student's t
  interval of the mean over seeds;
* :func:`welch` -- two means over seeds known only by mean, sd and count (a table of seeds):
  Welch's t interval of their difference;
* :func:`over_seeds`, :func:`compare_over_seeds`, :func:`f1_over_seeds` and
  :func:`compare_f1_over_seeds` -- where several seeds of one recipe were scored on the same
  sentences (seeds x instances): an interval that carries both the seed noise and the sentence
  noise, and a verdict that says in how many seeds a difference holds, "within noise", or that
  the seeds disagree; :func:`pooled_interval`, :func:`pooled_comparison` and
  :func:`percentile_interval` do the same from any statistic's per-seed values and bootstrap draws
  (a median, a group's share), for callers that compute those themselves;
* :func:`normal_p` and :func:`holm` -- where a page runs many tests at once (every head, every
  layer), the two-sided p-value of each change against its standard error and Holm's
  step-down correction, so that one test in twenty passing at 5% is not read as a finding.

Everything is seeded (``seed``) and computed in float64 with numpy: the same interval on every
machine. The bootstrap draws ``resamples`` sets of n row indices with replacement and takes each
set's mean as ``counts @ values / n`` (one matrix product for all resamples and columns).

Efron & Tibshirani (1993), *An Introduction to the Bootstrap*, ch. 13 (percentile intervals)
and ch. 16 (two-sample and paired designs). Holm (1979), "A simple sequentially rejective
multiple test procedure", *Scand. J. Statist.* 6(2), 65-70.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

__all__ = ["Interval", "Comparison", "RankedTable", "bootstrap", "compare", "mcnemar_exact", "f1", "compare_f1", "proportion", "rank", "ranks_from_wins", "rank_columns", "rank_table", "seed_interval",
           "normal_p", "normal_interval", "holm", "welch", "over_seeds", "SeedComparison", "compare_over_seeds",
           "f1_over_seeds", "compare_f1_over_seeds", "pooled_interval", "pooled_comparison",
           "percentile_interval", "LEVEL", "RESAMPLES", "WITHIN_NOISE", "SEEDS_DISAGREE"]

#: the confidence level of every interval in the book
LEVEL = 0.95
#: bootstrap resamples: the interval's ends then move by well under 0.01 of its width between seeds
RESAMPLES = 2000
#: the verdict when the interval of a difference contains 0
WITHIN_NOISE = "within noise"

_BLOCK = 4_000_000  # resample rows x instances per matrix product (memory: 32 MB of counts)


def _fixed(value: float, digits: int) -> str:
    """``value`` to ``digits`` decimals, without the sign of a negative number that rounds to 0
    (``-0.000`` is ``0.000``: an interval's end a hair below 0 reads as 0)."""
    text = f"{value:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


@dataclass(frozen=True)
class Interval:
    """An estimate with its interval: ``estimate`` in [``low``, ``high``] at ``level``, from ``n`` units."""

    estimate: float
    low: float
    high: float
    n: int
    level: float = LEVEL
    method: str = "bootstrap"

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    def overlaps(self, other: "Interval") -> bool:
        return self.low <= other.high and other.low <= self.high

    def relation_to(self, value: float) -> str:
        """``"above"``, ``"below"`` or ``"within noise of"`` a reference value (a paper's number, say)."""
        if self.low > value:
            return "above"
        if self.high < value:
            return "below"
        return "within noise of"

    @property
    def half_width(self) -> float:
        """Half the interval's width: the "±" of a table (the percentile interval may be asymmetric)."""
        return (self.high - self.low) / 2

    def format(self, digits: int = 3, *, percent: bool = False) -> str:
        """``0.631 [0.572, 0.690]`` (or ``63.1% [57.2, 69.0]`` with ``percent``)."""
        if percent:
            d = max(digits - 2, 0)
            return f"{_fixed(100 * self.estimate, d)}% [{_fixed(100 * self.low, d)}, {_fixed(100 * self.high, d)}]"
        return f"{_fixed(self.estimate, digits)} [{_fixed(self.low, digits)}, {_fixed(self.high, digits)}]"

    def range_text(self, digits: int = 3) -> str:
        """The interval's ends in words for a sentence: ``0.000 to 0.042``."""
        return f"{_fixed(self.low, digits)} to {_fixed(self.high, digits)}"

    def signed_text(self, digits: int = 3, *, missing: str = "too few values for an interval") -> str:
        """A signed estimate (a difference, a change) with its interval, for a sentence:
        ``-0.037, 95% interval -0.074 to -0.001``; ``missing`` replaces the interval when it
        has none (NaN ends: a group of fewer than two values). An end that rounds to zero
        reads ``0.000``, without a sign."""
        def signed(value: float) -> str:  # _fixed, with a "+" on a positive value
            text = _fixed(value, digits)
            return text if text.startswith("-") or float(text) == 0 else "+" + text

        if not (np.isfinite(self.low) and np.isfinite(self.high)):
            return f"{signed(self.estimate)}, {missing}"
        return f"{signed(self.estimate)}, {round(100 * self.level):d}% interval {signed(self.low)} to {signed(self.high)}"

    def __str__(self) -> str:
        return self.format()


@dataclass(frozen=True)
class Comparison:
    """Two means and the interval of their difference ``a - b``; ``verdict`` reads it.

    ``p_exact``: for paired 0/1 outcomes (right or wrong per sentence), the two-sided p-value of
    McNemar's exact test on the discordant pairs; None otherwise."""

    a: Interval
    b: Interval
    difference: Interval
    paired: bool
    p_exact: float | None = None

    @property
    def verdict(self) -> str:
        """``"higher"`` (a above b beyond noise), ``"lower"``, or :data:`WITHIN_NOISE`.

        Beyond noise means that the interval of the difference excludes 0 and, for paired 0/1
        outcomes, that McNemar's exact test agrees (``p_exact`` below 1 - level): with few
        discordant pairs the bootstrap interval is too narrow (five sentences that one model gets
        right and the other wrong, and none the other way, give a bootstrap interval that excludes
        0, but an exact p of 2 * 0.5**5 = 0.0625)."""
        if self.p_exact is not None and not self.p_exact < 1 - self.difference.level:
            return WITHIN_NOISE
        if self.difference.low > 0:
            return "higher"
        if self.difference.high < 0:
            return "lower"
        return WITHIN_NOISE

    @property
    def differs(self) -> bool:
        return self.verdict != WITHIN_NOISE

    def says(self, higher: str, lower: str, tie: str = WITHIN_NOISE) -> str:
        """The words for this verdict: ``higher`` when a > b beyond noise, ``lower`` when a < b, else ``tie``."""
        return {"higher": higher, "lower": lower}.get(self.verdict, tie)


# ----------------------------------------------------------------------------- validation
def _as_columns(values, name: str) -> tuple[np.ndarray, bool]:
    """(n, k) float64 and whether the input was one column."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise ValueError(f"{name} must be an array of per-instance values, got {type(values).__name__}")
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must hold numbers: {err}") from None
    if array.ndim not in (1, 2):
        raise ValueError(f"{name} must be 1-D (instances) or 2-D (instances x columns), got shape {array.shape}")
    if np.isinf(array).any():
        raise ValueError(f"{name} holds inf; per-instance values must be finite (NaN marks a missing one)")
    single = array.ndim == 1
    return (array[:, None] if single else array), single


def _check_settings(level, resamples, seed) -> None:
    if not isinstance(level, numbers.Real) or not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), e.g. 0.95, got {level!r}")
    if isinstance(resamples, bool) or not isinstance(resamples, numbers.Integral) or resamples < 100:
        raise ValueError(f"resamples must be an integer >= 100, got {resamples!r}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ValueError(f"seed must be an integer, got {seed!r}")


def _resampled_means(values: np.ndarray, valid: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """(resamples, k): each resample's column means over its valid rows (NaN where a column has none)."""
    n = values.shape[0]
    rng = np.random.default_rng(seed)
    filled = np.where(valid, values, 0.0)
    weights = valid.astype(np.float64)
    out = np.empty((resamples, values.shape[1]))
    block = max(1, _BLOCK // max(n, 1))
    for start in range(0, resamples, block):
        b = min(block, resamples - start)
        idx = rng.integers(0, n, size=(b, n))
        counts = np.bincount((idx + (np.arange(b) * n)[:, None]).ravel(), minlength=b * n).reshape(b, n)
        counts = counts.astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[start:start + b] = (counts @ filled) / (counts @ weights)
    return out


def _interval(estimate: float, draws: np.ndarray, n: int, level: float) -> Interval:
    draws = draws[np.isfinite(draws)]
    if n == 0 or not math.isfinite(estimate):
        return Interval(float("nan"), float("nan"), float("nan"), n, level)
    if draws.size == 0:
        return Interval(estimate, estimate, estimate, n, level)
    alpha = (1 - level) / 2
    low, high = np.quantile(draws, [alpha, 1 - alpha])
    return Interval(float(estimate), float(min(low, estimate)), float(max(high, estimate)), n, level)


def _column_means(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(valid, values, 0.0).sum(0) / valid.sum(0)


# ----------------------------------------------------------------------------- the public functions
def bootstrap(values, *, level: float = LEVEL, resamples: int = RESAMPLES, seed: int = 0):
    """The mean over instances with its percentile bootstrap interval.

    Args:
        values: per-instance values, (n,), or (n, k) for k columns measured on the same
            instances (resampled together). NaN marks a missing value: that column's mean and
            resampled means leave it out.
        level: the interval's confidence level (default 0.95).
        resamples: bootstrap resamples (default 2000).
        seed: the resampling's seed (the same interval on every machine).

    Returns:
        an :class:`Interval` for (n,), a list of k for (n, k). With fewer than 2 valid
        values the interval is the estimate itself; with none, NaN.
    """
    _check_settings(level, resamples, seed)
    columns, single = _as_columns(values, "values")
    valid = ~np.isnan(columns)
    estimates = _column_means(columns, valid)
    draws = _resampled_means(columns, valid, resamples, seed) if len(columns) else np.empty((0, columns.shape[1]))
    counts = valid.sum(0)
    intervals = [_interval(estimates[j], draws[:, j] if counts[j] > 1 else draws[:0, j], int(counts[j]), level)
                 for j in range(columns.shape[1])]
    return intervals[0] if single else intervals


def compare(a, b, *, paired: bool, level: float = LEVEL, resamples: int = RESAMPLES, seed: int = 0) -> Comparison:
    """mean(a) against mean(b): their intervals, the interval of mean(a) - mean(b) and its verdict.

    ``paired=True``: a[i] and b[i] were measured on the same instance (two explanations of one
    sentence); instances are resampled together, and a row missing in either is left out.
    ``paired=False``: two groups (sentences predicted negative and positive), resampled
    independently; with fewer than two values in either group the difference has no interval
    (NaN ends; its estimate is the difference of the means where both groups have a value) and
    the verdict is a tie. The verdict is ``"higher"`` or ``"lower"`` only when the interval of the
    difference excludes 0; otherwise :data:`WITHIN_NOISE`. Identical inputs are always a tie.
    """
    _check_settings(level, resamples, seed)
    ca, _ = _as_columns(a, "a")
    cb, _ = _as_columns(b, "b")
    if ca.shape[1] != 1 or cb.shape[1] != 1:
        raise ValueError("compare takes two 1-D arrays of per-instance values")
    ca, cb = ca[:, 0], cb[:, 0]
    if paired:
        if len(ca) != len(cb):
            raise ValueError(f"paired values must have one value per instance on both sides, got {len(ca)} and {len(cb)}")
        both = ~(np.isnan(ca) | np.isnan(cb))
        pair = np.stack([ca[both], cb[both], ca[both] - cb[both]], axis=1)
        ia, ib, diff = bootstrap(pair, level=level, resamples=resamples, seed=seed)
        binary = bool(np.isin(pair[:, :2], (0.0, 1.0)).all()) and len(pair) > 0
        return Comparison(ia, ib, diff, paired=True,
                          p_exact=mcnemar_exact(pair[:, 0], pair[:, 1]) if binary else None)
    ia = bootstrap(ca, level=level, resamples=resamples, seed=seed)
    ib = bootstrap(cb, level=level, resamples=resamples, seed=seed + 1)
    va, vb = ca[~np.isnan(ca)], cb[~np.isnan(cb)]
    if len(va) < 2 or len(vb) < 2:  # a group of one has no spread to resample: no interval, no verdict
        nan = float("nan")
        estimate = float(va.mean() - vb.mean()) if len(va) and len(vb) else nan
        return Comparison(ia, ib, Interval(estimate, nan, nan, len(va) + len(vb), level), paired=False)
    da = _resampled_means(va[:, None], np.ones((len(va), 1), bool), resamples, seed)[:, 0]
    db = _resampled_means(vb[:, None], np.ones((len(vb), 1), bool), resamples, seed + 1)[:, 0]
    return Comparison(ia, ib, _interval(float(va.mean() - vb.mean()), da - db, len(va) + len(vb), level),
                      paired=False)


def mcnemar_exact(a, b) -> float:
    """McNemar's exact test for two paired 0/1 outcomes (model A and model B right or wrong on
    the same sentences): the two-sided binomial p-value of the discordant pairs, k = #(a=1, b=0)
    of n = k + #(a=0, b=1) at p = 1/2; 1.0 when no pair is discordant. Equals
    ``scipy.stats.binomtest(k, n, 0.5).pvalue`` (McNemar 1947; Fagerland et al. 2013 for the
    exact form)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"mcnemar_exact takes two 1-D arrays of the same length, got {a.shape} and {b.shape}")
    if not np.isin(np.concatenate([a, b]), (0.0, 1.0)).all():
        raise ValueError("mcnemar_exact takes 0/1 outcomes")
    k, m = int(np.sum((a == 1) & (b == 0))), int(np.sum((a == 0) & (b == 1)))
    n = k + m
    if n == 0:
        return 1.0
    from scipy import stats

    return float(min(1.0, 2 * stats.binom.cdf(min(k, m), n, 0.5)))


def _f1_columns(labels, predicted, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-instance (2 TP, 2 TP + FP + FN) of the positive class (label 1): F1 is their ratio of means."""
    y = np.asarray(labels)
    p = np.asarray(predicted)
    if y.ndim != 1 or p.shape != y.shape:
        raise ValueError(f"labels and {name} must be 1-D arrays of one length, got shapes {y.shape} and {p.shape}")
    if len(y) == 0:
        raise ValueError("labels is empty: no instances")
    for values, what in ((y, "labels"), (p, name)):
        if not np.isin(values, (0, 1)).all():
            raise ValueError(f"{what} must be binary class labels (0 or 1)")
    y, p = y.astype(bool), p.astype(bool)
    tp2 = 2.0 * (y & p)
    return tp2, tp2 + (p & ~y) + (y & ~p)


def _ratio(numerators: np.ndarray, denominators: np.ndarray) -> np.ndarray:
    """numerator / denominator, 0 where the denominator is 0 (F1 without any positive: scikit-learn's zero_division=0)."""
    return np.divide(numerators, denominators, out=np.zeros_like(numerators, dtype=np.float64),
                     where=denominators > 0)


def _f1_draws(columns: np.ndarray, resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(estimates, draws) of F1 for column pairs (num, den, num, den, ...), all resampled on the same rows."""
    means = _resampled_means(columns, np.ones(columns.shape, bool), resamples, seed)
    # the estimate from the whole counts (exact integers: the same float as scikit-learn's), the draws from means
    return _ratio(columns[:, 0::2].sum(0), columns[:, 1::2].sum(0)), _ratio(means[:, 0::2], means[:, 1::2])


def f1(labels, predicted, *, level: float = LEVEL, resamples: int = RESAMPLES, seed: int = 0) -> Interval:
    """F1 of the positive class (label 1) with its percentile bootstrap interval over the instances.

    F1 = 2 TP / (2 TP + FP + FN) is a ratio of two means over the instances, not a mean, so each
    resample recomputes the ratio (0 when a resample has no positive at all, as scikit-learn's
    ``f1_score(..., zero_division=0)``). ``labels``, ``predicted``: (n,) arrays of 0 and 1.
    """
    _check_settings(level, resamples, seed)
    num, den = _f1_columns(labels, predicted, "predicted")
    estimate, draws = _f1_draws(np.stack([num, den], axis=1), resamples, seed)
    return _interval(float(estimate[0]), draws[:, 0] if len(num) > 1 else draws[:0, 0], len(num), level)


def compare_f1(labels, predicted_a, predicted_b, *, level: float = LEVEL, resamples: int = RESAMPLES,
               seed: int = 0) -> Comparison:
    """F1(a) - F1(b) for two models' predictions on the same instances: a paired bootstrap.

    The instances are resampled together and both F1s recomputed on each resample, so the
    interval of the difference reflects that the two models saw the same sentences. The verdict
    is ``"higher"`` or ``"lower"`` only when that interval excludes 0; identical predictions are
    a tie.
    """
    _check_settings(level, resamples, seed)
    num_a, den_a = _f1_columns(labels, predicted_a, "predicted_a")
    num_b, den_b = _f1_columns(labels, predicted_b, "predicted_b")
    estimates, draws = _f1_draws(np.stack([num_a, den_a, num_b, den_b], axis=1), resamples, seed)
    n = len(num_a)
    if n < 2:
        draws = draws[:0]
    a, b = (_interval(float(estimates[j]), draws[:, j], n, level) for j in (0, 1))
    return Comparison(a, b, _interval(float(estimates[0] - estimates[1]), draws[:, 0] - draws[:, 1], n, level),
                      paired=True)


def proportion(successes: int, n: int, *, level: float = LEVEL) -> Interval:
    """A share ``successes / n`` with Wilson's score interval (Wilson 1927).

    For a fraction of independent trials known only by its count (an accuracy whose per-instance
    predictions were not kept). Unlike the normal interval it stays inside [0, 1] and is sensible
    at 0 and at n; it equals ``scipy.stats.binomtest(successes, n).proportion_ci(method="wilson")``.
    """
    from scipy import stats

    if not isinstance(level, numbers.Real) or not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), e.g. 0.95, got {level!r}")
    for value, name in ((successes, "successes"), (n, "n")):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ValueError(f"{name} must be a whole number, got {value!r}")
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n >= 1, got successes = {successes}, n = {n}")
    z = float(stats.norm.ppf(0.5 + level / 2))
    share = successes / n
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n))
    return Interval(float(share), max(0.0, centre - half), min(1.0, centre + half), int(n), level, method="Wilson")


def ranks_from_wins(wins) -> np.ndarray:
    """Ranks with ties from who beats whom: ``wins`` (M, M) bool, ``wins[i, j]`` when method i is
    better than method j beyond noise. A method's rank is 1 + the number of methods that beat it,
    so methods nobody beats share rank 1. Returns (M,) int."""
    wins = np.asarray(wins)
    if wins.ndim != 2 or wins.shape[0] != wins.shape[1] or wins.dtype != bool:
        raise ValueError(f"wins must be a square bool array (M, M), got {wins.dtype} of shape {wins.shape}")
    if (wins & wins.T).any() or wins.diagonal().any():
        raise ValueError("wins must not say that two methods beat each other, or that a method beats itself")
    return 1 + wins.sum(axis=0)


def rank(scores: dict, *, higher_is_better: bool = True, level: float = LEVEL, resamples: int = RESAMPLES,
         seed: int = 0, correction: str | None = None):
    """Rank methods scored on the same instances, with ties where noise cannot order them.

    ``scores``: name -> per-instance values (all the same length: the same instances). Each
    method's rank is 1 + the number of methods better than it beyond noise (the paired interval
    of the difference excludes 0), so methods that no other beats share rank 1, and a rank is
    never claimed from a difference the data cannot support.

    ``correction="holm"``: the M(M-1)/2 pairwise differences are tested together, each by its
    two-sided bootstrap p-value (twice the smaller share of resampled differences on either side
    of 0), with Holm's step-down correction at family-wise level 1 - ``level`` (:func:`holm`),
    instead of each pair's own interval: a table of many methods then claims no order that
    chance among its many pairs would give.

    Returns a DataFrame indexed by name, best first: ``mean``, ``low``, ``high`` (the method's
    own interval), ``rank`` and ``tied`` (True where another method has the same rank).
    """
    import pandas as pd

    if not isinstance(scores, dict) or len(scores) < 1:
        raise ValueError("scores must be a non-empty dict: method name -> per-instance values")
    names = list(scores)
    columns = [_as_columns(scores[name], f"scores[{name!r}]")[0] for name in names]
    lengths = {len(c) for c in columns}
    if len(lengths) != 1 or any(c.shape[1] != 1 for c in columns):
        raise ValueError(f"every method needs one value per instance, on the same instances; got lengths {sorted(lengths)}")
    table = np.concatenate(columns, axis=1)  # (n, m)
    k = len(names)
    # every column and every pairwise difference, resampled on the same rows
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    diffs = np.stack([table[:, i] - table[:, j] for i, j in pairs], axis=1) if pairs else np.empty((len(table), 0))
    if correction not in (None, "holm"):
        raise ValueError(f"correction must be None or 'holm', got {correction!r}")
    intervals = bootstrap(np.concatenate([table, diffs], axis=1), level=level, resamples=resamples, seed=seed)
    differs = None
    if correction == "holm" and pairs:
        valid = ~np.isnan(diffs)
        draws = _resampled_means(diffs, valid, resamples, seed)
        with np.errstate(invalid="ignore"):
            p = np.minimum(1.0, 2 * np.minimum(np.nanmean(draws <= 0, axis=0), np.nanmean(draws >= 0, axis=0)))
        differs = holm(p, alpha=1 - level)
    wins = np.zeros((k, k), dtype=bool)  # wins[i, j]: method i is better than method j beyond noise
    for q, ((i, j), d) in enumerate(zip(pairs, intervals[k:])):  # d: mean_i - mean_j
        above, below = d.low > 0, d.high < 0
        if differs is not None:
            above, below = bool(differs[q]) and d.estimate > 0, bool(differs[q]) and d.estimate < 0
        if above if higher_is_better else below:
            wins[i, j] = True
        elif below if higher_is_better else above:
            wins[j, i] = True
    own = intervals[:k]
    frame = pd.DataFrame({"mean": [iv.estimate for iv in own], "low": [iv.low for iv in own],
                          "high": [iv.high for iv in own], "rank": ranks_from_wins(wins)},
                         index=pd.Index(names, name="method"))
    frame["tied"] = frame["rank"].map(frame["rank"].value_counts()) > 1
    return frame.sort_values(["rank", "mean"], ascending=[True, not higher_is_better])


@dataclass(frozen=True)
class RankedTable:
    """Methods ranked column by column with ties within noise (:func:`rank_columns`).

    ``means``, ``ranks``: DataFrames, methods x columns (NaN where a method has no values in
    a column); ``tied``: True where another method shares the rank; ``higher_is_better``:
    column -> direction.
    """

    means: object
    ranks: object
    tied: object
    higher_is_better: dict

    def cells(self, digits: int = 3, missing: str = "n/a"):
        """Display cells ``"0.191 (2=)"``: the mean and its rank, ``=`` marking a tie within noise."""
        import pandas as pd

        out = pd.DataFrame(index=self.means.index, columns=self.means.columns, dtype=object)
        for column in self.means:
            for method in self.means.index:
                value, r = self.means.at[method, column], self.ranks.at[method, column]
                out.at[method, column] = (missing if not np.isfinite(value) else
                                          f"{value:.{digits}f} ({int(r)}{'=' if self.tied.at[method, column] else ''})")
        return out

    def best(self, column: str, *, exclude=()) -> list:
        """The methods ranked first in ``column`` (several when noise cannot separate them)."""
        ranks = self.ranks[column].drop(labels=[m for m in exclude if m in self.ranks.index]).dropna()
        return [m for m in ranks.index if ranks[m] == ranks.min()]


def rank_columns(columns: dict, higher_is_better: dict, **settings) -> RankedTable:
    """:func:`rank` for every column of a table: ``columns``: column -> {method: per-instance values}.

    Each column is ranked on its own instances (methods of one column share them); a method
    missing from a column (it does not apply) gets NaN there. ``higher_is_better``: column ->
    bool. ``settings`` go to :func:`rank` (level, resamples, seed, correction).
    """
    return rank_table(columns, higher_is_better,
                      lambda scores, better: rank(dict(scores), higher_is_better=better, **settings),
                      values="per-instance values")


def rank_table(columns, higher_is_better, rank_one, *, values: str = "per-instance values") -> RankedTable:
    """Rank every column of a table with ``rank_one(scores, higher_is_better)`` (a frame indexed
    by method with ``mean``, ``rank`` and ``tied``, as :func:`rank` returns): the one assembly of
    a :class:`RankedTable`, for :func:`rank_columns` and its over-seeds form
    (:func:`attnlib.experiments.explanations.rank_columns_over_seeds`). ``values`` names what a
    column's scores are, for the error message."""
    import pandas as pd

    if not isinstance(columns, Mapping) or not columns:
        raise ValueError(f"columns must be a non-empty dict: column -> {{method: {values}}}")
    missing = [c for c in columns if c not in higher_is_better]
    if missing:
        raise ValueError(f"higher_is_better has no direction for column(s) {missing}")
    methods = list(dict.fromkeys(m for scores in columns.values() for m in scores))
    means = pd.DataFrame(np.nan, index=pd.Index(methods, name="method"), columns=list(columns))
    ranks, tied = means.copy(), pd.DataFrame(False, index=means.index, columns=means.columns)
    for column, scores in columns.items():
        if not scores:
            continue
        ranked = rank_one(scores, bool(higher_is_better[column]))
        means.loc[ranked.index, column] = ranked["mean"]
        ranks.loc[ranked.index, column] = ranked["rank"]
        tied.loc[ranked.index, column] = ranked["tied"]
    return RankedTable(means, ranks, tied, {c: bool(higher_is_better[c]) for c in columns})


def seed_interval(values, *, level: float = LEVEL) -> Interval:
    """The mean over training seeds with Student's t interval (the model is the unit; k >= 2 seeds)."""
    from scipy import stats

    if not isinstance(level, numbers.Real) or not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), e.g. 0.95, got {level!r}")
    columns, single = _as_columns(values, "values")
    if not single:
        raise ValueError("seed_interval takes one value per seed, a 1-D array")
    x = columns[:, 0]
    x = x[~np.isnan(x)]
    if len(x) < 2:
        raise ValueError(f"an interval over seeds needs at least 2 seeds, got {len(x)}")
    mean = float(x.mean())
    half = float(stats.t.ppf(0.5 + level / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))
    return Interval(mean, mean - half, mean + half, len(x), level, method="t over seeds")


def normal_p(change, se) -> np.ndarray:
    """Two-sided p-values of ``change`` against 0, each with its standard error ``se`` (normal
    approximation: ``2 * (1 - Phi(|change| / se))``). A NaN or non-positive ``se`` gives NaN,
    except a change of exactly 0, whose p-value is 1."""
    from scipy import stats

    change = np.asarray(change, dtype=np.float64)
    se = np.asarray(se, dtype=np.float64)
    if change.shape != se.shape:
        raise ValueError(f"change and se must have one shape, got {change.shape} and {se.shape}")
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.abs(change) / se
    p = np.where(np.isfinite(z) & (se > 0), 2 * stats.norm.sf(z), np.nan)
    return np.where(change == 0, 1.0, p)


def normal_interval(estimate: float, se: float, n: int, *, level: float = LEVEL) -> Interval:
    """``estimate`` +- z x ``se``, the normal interval at ``level`` (z = 1.96 at 95%), for a mean
    known by its standard error only (a table of mean, sd and n). A NaN ``se`` gives NaN ends."""
    from scipy import stats

    if not isinstance(level, numbers.Real) or not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), e.g. 0.95, got {level!r}")
    half = float(stats.norm.ppf(0.5 + level / 2)) * float(se)
    return Interval(float(estimate), float(estimate) - half, float(estimate) + half, int(n), level, method="normal")


def holm(p_values, *, alpha: float = 0.05) -> np.ndarray:
    """Holm's step-down correction: which of several tests reject at family-wise level ``alpha``.

    The p-values are sorted, p_(1) <= ... <= p_(m); p_(i) rejects while every p_(j), j <= i, is
    <= alpha / (m - j + 1). The chance that any true null is rejected stays <= alpha, however the
    tests depend on one another. A NaN p-value never rejects, and counts in m. Returns a bool
    array in the input's order.
    """
    if not isinstance(alpha, numbers.Real) or not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), e.g. 0.05, got {alpha!r}")
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError(f"p_values must be 1-D, got shape {p.shape}")
    if (p[~np.isnan(p)] < 0).any() or (p[~np.isnan(p)] > 1).any():
        raise ValueError("p_values must lie in [0, 1]")
    m = len(p)
    order = np.argsort(np.where(np.isnan(p), np.inf, p), kind="stable")
    thresholds = alpha / (m - np.arange(m))
    passing = p[order] <= thresholds  # NaN compares False
    first_fail = int(np.argmin(passing)) if not passing.all() else m
    reject = np.zeros(m, dtype=bool)
    reject[order[:first_fail]] = True
    return reject


def welch(mean_a: float, sd_a: float, n_a: int, mean_b: float, sd_b: float, n_b: int, *,
          level: float = LEVEL) -> Comparison:
    """mean_a - mean_b, each a mean over ``n`` seeds with sample sd ``sd``: Welch's t interval of
    the difference (unequal variances, Welch-Satterthwaite degrees of freedom) and its verdict.

    For results kept only as mean and sd per seed set (e.g. a diagnostic table). Needs n >= 2 on
    both sides. Two sds of 0 give a zero-width interval (a difference of exactly 0 is a tie).
    """
    from scipy import stats

    if not isinstance(level, numbers.Real) or not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), e.g. 0.95, got {level!r}")
    for n, name in ((n_a, "n_a"), (n_b, "n_b")):
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 2:
            raise ValueError(f"{name} must be an integer >= 2 (an interval over seeds needs two), got {n!r}")
    values = np.array([mean_a, sd_a, mean_b, sd_b], dtype=np.float64)
    if not np.isfinite(values).all() or sd_a < 0 or sd_b < 0:
        raise ValueError("means must be finite and sds finite and >= 0")
    va, vb = sd_a**2 / n_a, sd_b**2 / n_b
    diff = float(mean_a - mean_b)
    if va + vb == 0:
        half = 0.0
    else:
        df = (va + vb) ** 2 / (va**2 / (n_a - 1) + vb**2 / (n_b - 1))
        half = float(stats.t.ppf(0.5 + level / 2, df) * math.sqrt(va + vb))

    def own(mean, sd, n):
        h = float(stats.t.ppf(0.5 + level / 2, n - 1) * sd / math.sqrt(n))
        return Interval(float(mean), float(mean) - h, float(mean) + h, int(n), level, method="t over seeds")

    return Comparison(own(mean_a, sd_a, n_a), own(mean_b, sd_b, n_b),
                      Interval(diff, diff - half, diff + half, int(n_a + n_b), level, method="Welch t over seeds"),
                      paired=False)


# ----------------------------------------------------------------------------- seeds and sentences
#: the verdict when some seeds show a difference one way beyond noise and others the other way
SEEDS_DISAGREE = "seeds disagree"


def _seed_matrix(values, name: str) -> np.ndarray:
    """(S, n) float64: one row per training seed, one column per instance (NaN: missing)."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise ValueError(f"{name} must be a (seeds, instances) array, got {type(values).__name__}")
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must hold numbers: {err}") from None
    if array.ndim != 2 or array.shape[0] < 1 or array.shape[1] < 1:
        raise ValueError(f"{name} must be 2-D, seeds x instances (one row per seed), got shape {array.shape}")
    if np.isinf(array).any():
        raise ValueError(f"{name} holds inf; per-instance values must be finite (NaN marks a missing one)")
    return array


def _seed_draws(matrices: list, resamples: int, seed: int) -> tuple[list, list]:
    """Per-seed means of each (S_j, n) matrix, and the same means on ``resamples`` resamples of
    the instances, one resample of rows shared by every seed and every matrix: [(S_j,)], [(B, S_j)]."""
    stacked = np.concatenate([m.T for m in matrices], axis=1)  # (n, sum S_j): columns resampled together
    valid = ~np.isnan(stacked)
    estimates = _column_means(stacked, valid)
    draws = _resampled_means(stacked, valid, resamples, seed)
    cuts = np.cumsum([m.shape[0] for m in matrices])[:-1]
    return np.split(estimates, cuts), np.split(draws, cuts, axis=1)


def _sentence_variance(draws: np.ndarray) -> float:
    """The bootstrap variance of a statistic over resampled instances (draws: (B,); NaN draws left out)."""
    finite = draws[np.isfinite(draws)]
    return float(np.var(finite, ddof=1)) if finite.size > 1 else 0.0


def _pooled(estimate: float, seed_parts: list, sentence_var: float, n: int, level: float,
            bounds: tuple = (-math.inf, math.inf)) -> Interval:
    """estimate +- t x sqrt(V), V = sum of the seed parts (variance, degrees of freedom) + the sentence
    variance (taken as known: a bootstrap over many instances), with Welch-Satterthwaite's df; the
    ends clipped to ``bounds``, the range the mean can take (a share never leaves [0, 1])."""
    from scipy import stats

    seed_var = sum(v for v, _ in seed_parts)
    total = seed_var + sentence_var
    if not math.isfinite(estimate):
        return Interval(float("nan"), float("nan"), float("nan"), n, level, method="t over seeds and sentences")
    if total <= 0:
        return Interval(estimate, estimate, estimate, n, level, method="t over seeds and sentences")
    denominator = sum(v * v / df for v, df in seed_parts if v > 0)
    df = total * total / denominator if denominator > 0 else math.inf
    half = float(stats.t.ppf(0.5 + level / 2, df) * math.sqrt(total)) if math.isfinite(df) else \
        float(stats.norm.ppf(0.5 + level / 2) * math.sqrt(total))
    low, high = max(float(estimate) - half, bounds[0]), min(float(estimate) + half, bounds[1])
    return Interval(float(estimate), low, high, n, level, method="t over seeds and sentences")


def _support(matrix: np.ndarray) -> tuple:
    """Where a mean of these values can lie: [0, 1] for 0/1 outcomes (a share), else anywhere."""
    finite = matrix[np.isfinite(matrix)]
    return (0.0, 1.0) if finite.size and np.isin(finite, (0.0, 1.0)).all() else (-math.inf, math.inf)


def _seed_part(per_seed: np.ndarray) -> tuple[float, int]:
    """(variance of the mean over seeds, its degrees of freedom) from the per-seed statistics."""
    per_seed = per_seed[np.isfinite(per_seed)]
    k = len(per_seed)
    return (float(np.var(per_seed, ddof=1)) / k, k - 1) if k > 1 else (0.0, 0)


def _one_model(estimate: float, draws: np.ndarray, n: int, level: float) -> Interval:
    iv = _interval(estimate, draws if n > 1 else draws[:0], n, level)
    return Interval(iv.estimate, iv.low, iv.high, iv.n, level, method="bootstrap, one model")


def over_seeds(values, *, level: float = LEVEL, resamples: int = RESAMPLES, seed: int = 0) -> Interval:
    """The mean over training seeds and sentences, with an interval that carries both noises.

    ``values``: (S, n), one row per training seed of one recipe, one column per test instance (the
    same instances in every row; NaN marks a missing value). The estimate is the mean over seeds
    of each seed's mean over its instances.

    **Why not a nested bootstrap.** The design is *crossed*, not nested: every seed's model is
    scored on the same sentences. A hierarchical bootstrap that resamples seeds and then
    sentences independently within each seed treats the sentences as S independent samples and
    shrinks their noise by S; one that resamples both axes at once (Owen's pigeonhole bootstrap)
    keeps the crossing but, with 3 to 5 seeds, its percentile interval has only a handful of
    distinct seed draws and understates the seed variance by (S - 1) / S. So this splits the
    variance of the estimate in its two parts and estimates each where it is well estimated:

    * **seeds**: the sample variance of the S per-seed means, / S. With the sentences held fixed
      it is what retraining moves (it also carries the seed x sentence interaction / n);
    * **sentences**: the bootstrap variance of the mean over seeds when the instances are
      resampled *together* across seeds (one draw of rows for every seed: the crossing is kept).

    The interval is estimate +- t x sqrt(sum), with the Welch-Satterthwaite degrees of freedom
    (the seed part has S - 1, the sentence part, from hundreds of instances, is taken as known):
    with much seed spread it is Student's t over seeds; with none, the normal interval of the
    sentence bootstrap. Against the true variance of the crossed random-effects model it counts
    the interaction term twice (conservative by sigma_e^2 / (S n)); ``tests/test_uncertainty.py``
    measures its coverage by simulation. For 0/1 values (a share) the ends are clipped to
    [0, 1], where a share lies. With one seed it is the sentence bootstrap's
    percentile interval, and its ``method`` says "one model".
    """
    _check_settings(level, resamples, seed)
    matrix = _seed_matrix(values, "values")
    (estimates,), (draws,) = _seed_draws([matrix], resamples, seed)
    n = int((~np.isnan(matrix)).any(0).sum())
    return pooled_interval(estimates, draws, n=n, level=level, bounds=_support(matrix))


@dataclass(frozen=True)
class SeedComparison:
    """Two quantities compared over training seeds and sentences (:func:`compare_over_seeds`).

    ``a``, ``b``: each side's mean over seeds with its interval (:func:`over_seeds`);
    ``difference``: ``a - b`` pooled over seeds and sentences; ``per_seed``: the comparison
    within each seed (the k-th seed of a against the k-th of b), over the sentences alone.
    """

    a: Interval
    b: Interval
    difference: Interval
    per_seed: tuple
    paired_seeds: bool

    @property
    def n_seeds(self) -> int:
        return len(self.per_seed)

    @property
    def one_model(self) -> bool:
        """True when each side rests on one trained model: no seed noise was measured."""
        return self.n_seeds == 1

    def seeds_showing(self, verdict: str) -> int:
        """How many seeds show ``verdict`` (``"higher"`` or ``"lower"``) beyond noise on their own."""
        return sum(c.verdict == verdict for c in self.per_seed)

    @property
    def verdict(self) -> str:
        """``"higher"``, ``"lower"``, :data:`WITHIN_NOISE` or :data:`SEEDS_DISAGREE`.

        * :data:`SEEDS_DISAGREE`: one seed shows a beyond noise and another b, each over its sentences;
        * ``"higher"`` / ``"lower"``: the pooled interval excludes 0, and more than half of the
          seeds' own differences point that way (so one seed of three never carries a verdict,
          however large its difference);
        * otherwise :data:`WITHIN_NOISE`.

        With one seed this is that seed's verdict over the sentences (``one_model``)."""
        if self.one_model:
            return self.per_seed[0].verdict
        if self.seeds_showing("higher") and self.seeds_showing("lower"):
            return SEEDS_DISAGREE
        d = self.difference
        direction = "higher" if d.low > 0 else "lower" if d.high < 0 else None
        if direction is None:
            return WITHIN_NOISE
        signs = np.array([c.difference.estimate for c in self.per_seed])
        agreeing = int(np.sum(signs > 0)) if direction == "higher" else int(np.sum(signs < 0))
        return direction if 2 * agreeing > self.n_seeds else WITHIN_NOISE

    @property
    def differs(self) -> bool:
        return self.verdict in ("higher", "lower")

    @property
    def support(self) -> int:
        """For a verdict "higher" or "lower": the seeds that show it beyond noise on their own; else
        the most seeds that show either direction."""
        if self.verdict in ("higher", "lower"):
            return self.seeds_showing(self.verdict)
        return max(self.seeds_showing("higher"), self.seeds_showing("lower"))

    def says(self, higher: str, lower: str, tie: str = WITHIN_NOISE, disagree: str = SEEDS_DISAGREE) -> str:
        """The words for this verdict."""
        return {"higher": higher, "lower": lower, SEEDS_DISAGREE: disagree}.get(self.verdict, tie)

    def seeds_text(self) -> str:
        """How the seeds bear it out, for a sentence: ``"holds in 3 of 3 seeds"``, ``"holds in 2 of 3
        seeds"`` (seeds beyond noise on their own), ``"beyond noise pooled over 3 seeds, 3 of which
        point that way, none beyond noise alone"`` (a verdict only the pooling reaches), ``"beyond
        noise in 1 of 3 seeds alone"``, ``"one higher, one lower"``, or ``"from one model"``."""
        if self.one_model:
            return "from one model"
        n = self.n_seeds
        if self.verdict == SEEDS_DISAGREE:
            return (f"{self.seeds_showing('higher')} of {n} seeds higher, "
                    f"{self.seeds_showing('lower')} lower, each beyond noise")
        if self.verdict in ("higher", "lower"):
            if self.support:
                return f"holds in {self.support} of {n} seeds"
            pointing = sum((c.difference.estimate > 0) if self.verdict == "higher" else (c.difference.estimate < 0)
                           for c in self.per_seed)
            return f"beyond noise pooled over {n} seeds, {pointing} of which point that way, none beyond noise alone"
        shown = max(("higher", "lower"), key=self.seeds_showing)
        k = self.seeds_showing(shown)
        return f"beyond noise in {k} of {n} seeds alone" if k else f"in none of {n} seeds alone"


def _check_seed_pairs(a: np.ndarray, b: np.ndarray, paired_seeds: bool) -> None:
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"a and b must score the same instances (columns), got {a.shape[1]} and {b.shape[1]}")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"a and b need the same number of seeds (rows), got {a.shape[0]} and {b.shape[0]}"
                         + ("" if paired_seeds else "; with paired_seeds=False their k-th seeds are still "
                            "compared one by one"))


def _finite_mean(values: np.ndarray) -> float:
    """The mean of the finite values, NaN (without a warning) when there are none."""
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else float("nan")


def _mean_over_seeds(draws: np.ndarray) -> np.ndarray:
    """(B,) each resample's mean over the seeds that have a value (NaN, without a warning, where none has)."""
    finite = np.isfinite(draws)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(finite, draws, 0.0).sum(1) / finite.sum(1)


def pooled_interval(per_seed, draws, *, n: int, level: float = LEVEL,
                    bounds: tuple = (-math.inf, math.inf)) -> Interval:
    """The interval of a statistic's mean over seeds from its per-seed values and their bootstrap
    draws: :func:`over_seeds`' interval for any statistic (a median, a group's share), not only a
    mean over the instances.

    ``per_seed`` (S,): the statistic of each seed's model on the sentences (NaN: a seed without
    it). ``draws`` (B, S): the statistic on B resamples of the sentences, drawn *together* for
    every seed (one draw of sentences per row), so the crossing of seeds and sentences is kept.
    ``n``: the number of sentences behind it; ``bounds``: where the mean can lie. The estimate
    is the mean of the finite per-seed values; the interval, :func:`over_seeds`' (its docstring
    says why not a nested bootstrap). With one seed, the percentile interval of the draws,
    marked "one model".
    """
    est = np.asarray(per_seed, dtype=np.float64).ravel()
    draws = np.asarray(draws, dtype=np.float64)
    if draws.ndim != 2 or draws.shape[1] != est.size or est.size == 0:
        raise ValueError(f"per_seed must be (S,) and draws (B, S) of the same S >= 1, got {est.shape} and {draws.shape}")
    estimate = _finite_mean(est)
    if est.size == 1:
        return _one_model(estimate, draws[:, 0], n, level)
    return _pooled(estimate, [_seed_part(est)], _sentence_variance(_mean_over_seeds(draws)), est.size, level, bounds)


def pooled_comparison(est_a, est_b, draws_a, draws_b, per_seed, *, paired_seeds: bool, level: float = LEVEL,
                      ranges=((-math.inf, math.inf),) * 3) -> SeedComparison:
    """Two statistics' means over seeds and their difference, from per-seed values and bootstrap
    draws (:func:`pooled_interval`'s inputs for each side), with the per-seed comparisons
    ``per_seed`` (S :class:`Comparison`): :func:`compare_over_seeds`' verdict for any statistic.
    ``paired_seeds``: the k-th seed's model gives both sides (the seed part of the difference is
    the spread of the per-seed differences), else two recipes (their seed parts add, Welch).
    ``ranges``: where side a, side b and their difference can lie."""
    est_a, est_b = np.asarray(est_a, dtype=np.float64), np.asarray(est_b, dtype=np.float64)
    S = len(est_a)
    mean_a, mean_b = _finite_mean(est_a), _finite_mean(est_b)
    if S == 1:
        side_a = _one_model(mean_a, draws_a[:, 0], per_seed[0].a.n, level)
        side_b = _one_model(mean_b, draws_b[:, 0], per_seed[0].b.n, level)
        return SeedComparison(side_a, side_b, per_seed[0].difference, tuple(per_seed), paired_seeds)
    mean_draws_a, mean_draws_b = _mean_over_seeds(draws_a), _mean_over_seeds(draws_b)
    side_a = _pooled(mean_a, [_seed_part(est_a)], _sentence_variance(mean_draws_a), S, level, ranges[0])
    side_b = _pooled(mean_b, [_seed_part(est_b)], _sentence_variance(mean_draws_b), S, level, ranges[1])
    parts = [_seed_part(est_a - est_b)] if paired_seeds else [_seed_part(est_a), _seed_part(est_b)]
    difference = _pooled(mean_a - mean_b, parts, _sentence_variance(mean_draws_a - mean_draws_b), S, level,
                         ranges[2])
    return SeedComparison(side_a, side_b, difference, tuple(per_seed), paired_seeds)


def percentile_interval(estimate: float, draws, n: int, *, level: float = LEVEL) -> Interval:
    """The percentile bootstrap interval of one model's statistic from its bootstrap draws over
    ``n`` sentences (fewer than 2 give no spread; NaN draws are left out): :func:`bootstrap`'s
    interval for any statistic (a median, a share of a group)."""
    draws = np.asarray(draws, dtype=np.float64).ravel()
    return _interval(float(estimate), draws if n > 1 else draws[:0], int(n), level)


def compare_over_seeds(a, b, *, paired_seeds: bool = True, level: float = LEVEL, resamples: int = RESAMPLES,
                       seed: int = 0) -> SeedComparison:
    """mean(a) against mean(b) over training seeds and sentences, and how many seeds bear it out.

    ``a``, ``b``: (S, n) per-instance values, one row per seed, on the same n instances (paired by
    instance). ``paired_seeds=True``: row k of both comes from one trained model (two explanations
    of the same model): the seed part of the difference's variance is the spread of the per-seed
    differences. ``paired_seeds=False``: two recipes (two encoders), each trained with S seeds:
    the seed parts of both sides add (Welch). Either way the sentences are resampled together
    (one draw of rows for every seed and both sides) and the per-seed verdicts compare row k
    with row k over the sentences (:func:`compare`, paired). The pooled interval is
    :func:`over_seeds`' (see there why it is not a nested bootstrap); the verdict,
    :attr:`SeedComparison.verdict`, says "within noise" unless the pooled interval excludes 0 and
    most seeds point the same way, and :data:`SEEDS_DISAGREE` when seeds differ beyond noise in
    opposite directions. One row each: the comparison of one model over the sentences, marked
    ``one_model``.
    """
    _check_settings(level, resamples, seed)
    ma, mb = _seed_matrix(a, "a"), _seed_matrix(b, "b")
    _check_seed_pairs(ma, mb, paired_seeds)
    (est_a, est_b), (draws_a, draws_b) = _seed_draws([ma, mb], resamples, seed)
    per_seed = [compare(ma[k], mb[k], paired=True, level=level, resamples=resamples, seed=seed)
                for k in range(ma.shape[0])]
    (lo_a, hi_a), (lo_b, hi_b) = _support(ma), _support(mb)
    difference = (lo_a - hi_b, hi_a - lo_b)
    return pooled_comparison(est_a, est_b, draws_a, draws_b, per_seed, paired_seeds=paired_seeds, level=level,
                             ranges=((lo_a, hi_a), (lo_b, hi_b), difference))


def _f1_seed_draws(labels, predicted: list, resamples: int, seed: int):
    """Per-seed F1 of each (S_j, n) prediction matrix, and on resampled instances (rows shared)."""
    columns, sizes = [], []
    for name, matrix in predicted:
        sizes.append(matrix.shape[0])
        for row in matrix:
            columns.extend(_f1_columns(labels, row, name))
    estimates, draws = _f1_draws(np.stack(columns, axis=1), resamples, seed)
    cuts = np.cumsum(sizes)[:-1]
    return np.split(estimates, cuts), np.split(draws, cuts, axis=1)


def _prediction_matrix(predicted, name: str) -> np.ndarray:
    matrix = np.asarray(predicted)
    if matrix.ndim != 2 or matrix.shape[0] < 1:
        raise ValueError(f"{name} must be 2-D, seeds x instances (one row of predictions per seed), got shape {matrix.shape}")
    return matrix


def f1_over_seeds(labels, predicted, *, level: float = LEVEL, resamples: int = RESAMPLES, seed: int = 0) -> Interval:
    """F1 of the positive class, the mean over training seeds, with :func:`over_seeds`' interval
    (seed spread + the sentence bootstrap, instances resampled together across seeds).
    ``predicted``: (S, n) 0/1 predictions, one row per seed, on the instances of ``labels`` (n,)."""
    _check_settings(level, resamples, seed)
    matrix = _prediction_matrix(predicted, "predicted")
    (estimates,), (draws,) = _f1_seed_draws(labels, [("predicted", matrix)], resamples, seed)
    if matrix.shape[0] == 1:
        return _one_model(float(estimates[0]), draws[:, 0], matrix.shape[1], level)
    return _pooled(float(estimates.mean()), [_seed_part(estimates)], _sentence_variance(draws.mean(1)),
                   matrix.shape[0], level, (0.0, 1.0))


def compare_f1_over_seeds(labels, predicted_a, predicted_b, *, paired_seeds: bool = False, level: float = LEVEL,
                          resamples: int = RESAMPLES, seed: int = 0) -> SeedComparison:
    """F1(a) - F1(b) over training seeds and sentences: :func:`compare_over_seeds` for F1, which is
    a ratio, not a mean (each resample recomputes every seed's F1 from its counts).

    ``predicted_a``, ``predicted_b``: (S, n) 0/1 predictions, one row per seed, on the instances
    of ``labels``. ``paired_seeds=False`` (the default): two recipes, each with its own seeds."""
    _check_settings(level, resamples, seed)
    ma, mb = _prediction_matrix(predicted_a, "predicted_a"), _prediction_matrix(predicted_b, "predicted_b")
    _check_seed_pairs(ma, mb, paired_seeds)
    (est_a, est_b), (draws_a, draws_b) = _f1_seed_draws(labels, [("predicted_a", ma), ("predicted_b", mb)],
                                                       resamples, seed)
    per_seed = [compare_f1(labels, ma[k], mb[k], level=level, resamples=resamples, seed=seed)
                for k in range(ma.shape[0])]
    return pooled_comparison(est_a, est_b, draws_a, draws_b, per_seed, paired_seeds=paired_seeds, level=level,
                             ranges=((0.0, 1.0), (0.0, 1.0), (-1.0, 1.0)))
