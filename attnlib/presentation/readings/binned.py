"""Medians (and shares) of groups of sentences (bins of maximum attention, predicted classes)
over training seeds and sentences: what Chapters 4 and 5 read off J&W's violin plots and
their split by predicted class.

J&W (2019, Figs. 6 and 8) plot a per-sentence value (the median output change under
permutation, the eps-max JSD) against bins of the largest attention weight, and the book reads
each bin's **median**; the range quoted from their Figure 6 is a range of such medians
(``published.PERMUTATION_SST_RANGE``). So the statistic here is the median too, like for like:
a bin's mean would sit above its median for these right-skewed values, and set against the
paper's medians it would lean towards "above".

**The statistic over seeds.** Each training seed's model puts every sentence in its own bin
(its own largest weight) and gives it its own value, so the groups are formed per seed. For
group g the estimate is the mean over seeds of each seed's median over the sentences it puts
in g. Its interval is :func:`attnlib.uncertainty.over_seeds`' with the median in place of the
mean: the variance of the estimate is split into

* **seeds**: the sample variance of the per-seed medians, / S (what retraining moves, with
  the sentences held fixed), with S - 1 degrees of freedom;
* **sentences**: the bootstrap variance of the mean over seeds of the per-seed medians when the
  test sentences are resampled *together* across seeds (one draw of sentences for every seed:
  a resampled sentence lands in whichever group each seed's model puts it), so the crossing of
  seeds and sentences is kept and the group sizes vary as they would in a new sample;

and the interval is estimate +- t x sqrt(sum) with Welch-Satterthwaite's degrees of freedom,
as ``over_seeds`` computes it (:func:`attnlib.uncertainty.pooled_interval` and
:func:`~attnlib.uncertainty.pooled_comparison`, fed with each seed's median). The seed part
also carries each seed's own sampling of its group, so it errs wide, as ``over_seeds`` does.
A comparison of two groups of one model (two bins, two classes) is paired over seeds (the
k-th seed's model gives both); two models (two encoders) are two recipes, whose seed parts
add (``paired_seeds=False``). Either
way the verdict is :class:`attnlib.uncertainty.SeedComparison`'s: "higher" or "lower" only when
the pooled interval excludes 0 and most seeds point that way, "seeds disagree" when seeds
differ beyond noise in opposite directions. A bootstrap of medians needs the same draws of
sentences for every group and model compared, so every call draws them from ``seed`` over the
same n sentences: two models scored on the same test sentences are resampled together.

**Shares.** :func:`group_means` does the same with each seed's mean over the group (a share,
for 0/1 values: the sentences predicted negative for which the adversary succeeds), which
:func:`attnlib.uncertainty.compare_over_seeds` cannot do when the groups are disjoint within a
seed (it pairs the two sides sentence by sentence).

**Too few sentences.** A median's distribution-free 95% interval (from order statistics: the
median lies between the smallest and the largest of n values with probability 1 - 2 x 0.5^n)
exists only from :data:`MIN_FOR_MEDIAN` = 6 sentences on (1 - 2 x 0.5^5 = 0.94 < 0.95); a
bootstrap of fewer cannot do better. A group with fewer sentences in any seed gets no verdict:
:meth:`GroupMedians.enough` says so and the readings name the group's count instead.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ... import uncertainty
from ...experiments import counterfactual

__all__ = ["MIN_FOR_MEDIAN", "GroupMedians", "group_medians", "group_means", "bin_codes", "by_bin", "by_class",
           "by_class_and_bin"]

#: the fewest sentences a group needs in every seed for a 95% interval of its median
#: (order statistics: 1 - 2 x 0.5^n >= 0.95 from n = 6 on)
MIN_FOR_MEDIAN = 6


def bin_codes(max_attention) -> tuple[np.ndarray, tuple]:
    """(S, n) each sentence's bin of maximum attention (J&W's bins, ``bin_by_max_attention``) in
    each seed, and the bins' labels."""
    m = np.atleast_2d(np.asarray(max_attention, dtype=np.float64))
    rows = [counterfactual.bin_by_max_attention(row, row)["bin"] for row in m]
    labels = tuple(str(b) for b in rows[0].cat.categories)
    return np.stack([r.cat.codes.to_numpy() for r in rows]).astype(np.int64), labels


def _resample_counts(n: int, resamples: int, seed: int) -> np.ndarray:
    """(resamples, n): how often each sentence is drawn in each bootstrap resample (the draws
    depend only on n and ``seed``: two calls over the same sentences draw the same resamples)."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    return np.stack([np.bincount(row, minlength=n) for row in idx]).astype(np.int32)


def _weighted_medians(sorted_values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(B,) np.median of each resample: ``sorted_values`` (m,) ascending, ``counts`` (B, m) how
    often each is drawn (the mean of the middle two for an even total; NaN for none)."""
    if sorted_values.size == 0:
        return np.full(counts.shape[0], np.nan)
    cum = np.cumsum(counts, axis=1)
    total = cum[:, -1]
    lower = np.argmax(cum > ((total - 1) // 2)[:, None], axis=1)  # 0-based rank (total-1)//2
    upper = np.argmax(cum > (total // 2)[:, None], axis=1)        # rank total//2
    out = (sorted_values[lower] + sorted_values[upper]) / 2
    return np.where(total > 0, out, np.nan)


@dataclass(frozen=True)
class GroupMedians:
    """Each seed's median (or mean, :func:`group_means`) of each group of sentences, and the same
    on bootstrap resamples.

    ``labels``: the groups' names; ``per_seed`` (S, G): each seed's statistic (NaN where a seed
    puts no sentence in the group); ``counts`` (S, G): the sentences per group and seed;
    ``draws`` (B, S, G): the statistic on resampled sentences (one resample for every seed);
    ``bounds``: where the statistic can lie ((0, 1) for a share: the intervals are clipped there).
    """

    labels: tuple
    per_seed: np.ndarray
    counts: np.ndarray
    draws: np.ndarray
    level: float = uncertainty.LEVEL
    bounds: tuple = (-np.inf, np.inf)
    statistic: str = "median"

    @property
    def n_seeds(self) -> int:
        return self.per_seed.shape[0]

    def _index(self, group) -> int:
        if group not in self.labels:
            raise ValueError(f"no group {group!r}; the groups are {list(self.labels)}")
        return self.labels.index(group)

    def enough(self, group) -> bool:
        """Whether every seed puts at least :data:`MIN_FOR_MEDIAN` sentences in ``group`` (for a
        mean, at least 2: a bootstrap of one value has no spread)."""
        least = MIN_FOR_MEDIAN if self.statistic == "median" else 2
        return bool(self.counts[:, self._index(group)].min() >= least)

    def empty(self, group) -> bool:
        """Whether no seed puts a sentence in ``group``."""
        return bool(self.counts[:, self._index(group)].max() == 0)

    def count_text(self, group) -> str:
        """The group's sentences per seed, for a sentence: ``"4"`` or ``"4, 2 and 7"``."""
        c = [str(int(x)) for x in self.counts[:, self._index(group)]]
        return c[0] if len(set(c)) == 1 else ", ".join(c[:-1]) + " and " + c[-1]

    def estimate(self, group) -> float:
        """The mean over seeds of the per-seed medians (over the seeds that have the group)."""
        values = self.per_seed[:, self._index(group)]
        finite = values[np.isfinite(values)]
        return float(finite.mean()) if finite.size else float("nan")

    def interval(self, group) -> uncertainty.Interval:
        """The group's median, mean over seeds, with its interval over seeds and sentences (module
        docstring). With one seed, the percentile interval of the sentence bootstrap."""
        j = self._index(group)
        n = int(self.counts[:, j].max())
        return uncertainty.pooled_interval(self.per_seed[:, j], self.draws[:, :, j], n=n, level=self.level,
                                           bounds=self.bounds)

    def compare(self, group, other: "GroupMedians", other_group, *, paired_seeds: bool) -> uncertainty.SeedComparison:
        """This group's median against ``other``'s ``other_group`` (``other`` may be ``self``: two
        groups of one model, ``paired_seeds=True``; another model: ``paired_seeds=False``), over
        seeds and sentences: a :class:`attnlib.uncertainty.SeedComparison`."""
        if other.draws.shape[:2] != self.draws.shape[:2]:
            raise ValueError("the two sides need the same seeds and the same bootstrap resamples "
                             f"(shapes {self.draws.shape[:2]} and {other.draws.shape[:2]})")
        i, j = self._index(group), other._index(other_group)
        est_a, est_b = self.per_seed[:, i], other.per_seed[:, j]
        draws_a, draws_b = self.draws[:, :, i], other.draws[:, :, j]
        per_seed = []
        for k in range(self.n_seeds):
            n_a, n_b = int(self.counts[k, i]), int(other.counts[k, j])
            a = uncertainty.percentile_interval(est_a[k], draws_a[:, k], n_a, level=self.level)
            b = uncertainty.percentile_interval(est_b[k], draws_b[:, k], n_b, level=self.level)
            d = uncertainty.percentile_interval(est_a[k] - est_b[k], draws_a[:, k] - draws_b[:, k], min(n_a, n_b),
                                                level=self.level)
            per_seed.append(uncertainty.Comparison(a, b, d, paired=False))
        lo, hi = self.bounds
        ranges = (self.bounds, other.bounds, (lo - other.bounds[1], hi - other.bounds[0]))
        return uncertainty.pooled_comparison(est_a, est_b, draws_a, draws_b, per_seed, paired_seeds=paired_seeds,
                                             level=self.level, ranges=ranges)


def _checked(values, groups, labels, resamples):
    v = np.atleast_2d(np.asarray(values, dtype=np.float64))
    g = np.atleast_2d(np.asarray(groups))
    if v.shape != g.shape or v.shape[1] < 1:
        raise ValueError(f"values and groups must be (seeds, sentences) of one shape, got {v.shape} and {g.shape}")
    if not np.isfinite(v).all():
        raise ValueError("values must be finite")
    labels = tuple(labels)
    if g.min() < -1 or g.max() >= len(labels):
        raise ValueError(f"groups must index labels ({len(labels)} of them) or be -1")
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 100:
        raise ValueError(f"resamples must be an integer >= 100, got {resamples!r}")
    return v, g, labels


def group_medians(values, groups, labels, *, resamples: int = uncertainty.RESAMPLES, seed: int = 0,
                  level: float = uncertainty.LEVEL) -> GroupMedians:
    """The medians of ``values`` per group, per seed and on bootstrap resamples of the sentences.

    ``values``: (S, n) per-sentence values, one row per training seed, on the same n sentences;
    ``groups``: (S, n) each sentence's group in each seed, an index into ``labels`` (-1: none);
    ``labels``: the groups' names. ``seed`` seeds the resampling (the same draws for every call
    over n sentences, so groups and models compared are resampled together)."""
    v, g, labels = _checked(values, groups, labels, resamples)
    S, n = v.shape
    counts_draw = _resample_counts(n, resamples, seed)
    per_seed = np.full((S, len(labels)), np.nan)
    counts = np.zeros((S, len(labels)), dtype=np.int64)
    draws = np.full((resamples, S, len(labels)), np.nan)
    for s in range(S):
        for j in range(len(labels)):
            members = np.flatnonzero(g[s] == j)
            counts[s, j] = len(members)
            if not len(members):
                continue
            order = members[np.argsort(v[s, members], kind="stable")]
            per_seed[s, j] = float(np.median(v[s, members]))
            draws[:, s, j] = _weighted_medians(v[s, order], counts_draw[:, order])
    return GroupMedians(labels, per_seed, counts, draws, level)


def group_means(values, groups, labels, *, resamples: int = uncertainty.RESAMPLES, seed: int = 0,
                level: float = uncertainty.LEVEL) -> GroupMedians:
    """:func:`group_medians` with each seed's *mean* over the group: for 0/1 ``values``, the
    group's share (its intervals clipped to [0, 1])."""
    v, g, labels = _checked(values, groups, labels, resamples)
    S, n = v.shape
    counts_draw = _resample_counts(n, resamples, seed).astype(np.float64)
    per_seed = np.full((S, len(labels)), np.nan)
    counts = np.zeros((S, len(labels)), dtype=np.int64)
    draws = np.full((resamples, S, len(labels)), np.nan)
    for s in range(S):
        for j in range(len(labels)):
            member = (g[s] == j).astype(np.float64)
            counts[s, j] = int(member.sum())
            if not counts[s, j]:
                continue
            per_seed[s, j] = float(v[s][member > 0].mean())
            with np.errstate(invalid="ignore", divide="ignore"):
                draws[:, s, j] = (counts_draw @ (member * v[s])) / (counts_draw @ member)
    share = bool(np.isin(v, (0.0, 1.0)).all())
    return GroupMedians(labels, per_seed, counts, draws, level, (0.0, 1.0) if share else (-np.inf, np.inf), "mean")


def by_bin(values, max_attention, *, resamples: int = uncertainty.RESAMPLES, seed: int = 0) -> GroupMedians:
    """:func:`group_medians` over J&W's bins of maximum attention: ``values`` and
    ``max_attention`` (S, n), each seed's per-sentence value and largest weight."""
    codes, labels = bin_codes(max_attention)
    return group_medians(values, codes, labels, resamples=resamples, seed=seed)


def by_class(values, predicted, classes, *, resamples: int = uncertainty.RESAMPLES, seed: int = 0,
             statistic: str = "median") -> GroupMedians:
    """:func:`group_medians` (or, ``statistic="mean"``, :func:`group_means`) over the predicted
    classes: ``predicted`` (S, n), each seed's predicted class; ``classes`` the class names."""
    if statistic not in ("median", "mean"):
        raise ValueError(f"statistic must be 'median' or 'mean', got {statistic!r}")
    p = np.atleast_2d(np.asarray(predicted)).astype(np.int64)
    by = group_medians if statistic == "median" else group_means
    return by(values, p, classes, resamples=resamples, seed=seed)


def by_class_and_bin(values, predicted, max_attention, classes, *, resamples: int = uncertainty.RESAMPLES,
                     seed: int = 0) -> GroupMedians:
    """:func:`group_medians` over (predicted class, bin of maximum attention): the groups of J&W's
    violins, labelled ``(class name, bin label)``."""
    codes, bins = bin_codes(max_attention)
    p = np.atleast_2d(np.asarray(predicted)).astype(np.int64)
    labels = [(c, b) for c in classes for b in bins]
    return group_medians(values, p * len(bins) + codes, labels, resamples=resamples, seed=seed)
