"""What Chapter 8 (training an adversary: a whole model that attends elsewhere) reads off its
results.

The chapter trains W&P's adversaries for a sweep of λ against a frozen base
(:func:`attnlib.adversarial_training.lambda_sweep`; its ``frame`` has one row per λ with
``lambda``, ``mean_jsd``, ``mean_tvd``, ``same_decision``, ``f1``) and places two yardsticks on
the same axes: the base retrained with other seeds (:func:`attnlib.baselines.seed_variance`,
the *seed point*) and Chapter 6's uniform-attention model.

**What the seeds can support.** The seed point is several retrained models, so its means carry
an interval over seeds and sentences (:func:`attnlib.uncertainty.over_seeds`). Each λ point,
like the uniform point, is **one** trained model: the book profile cannot afford several
adversaries per λ. So an adversary (or the uniform model) is judged against the seed point:
its per-sentence values, repeated for every retrained seed, are compared with the retrained
models' by :func:`attnlib.uncertainty.compare_over_seeds` with ``paired_seeds=False`` (the
interval carries the retrained models' spread and the sentence noise; the single model's own
retraining noise is not measured, and the prose says so). Two single models (an adversary
against the uniform model) are compared over the sentences alone, and the prose says that too.
No verdict is read *between* two adversaries.

**Degenerate.** W&P give no name for an adversary whose attention ignores the words. The book
calls an adversary *degenerate* when its attention peaks on one and the same position (say,
the last token) in most sentences: the 95% interval over sentences of that share lies above
one half, as Chapter 10 reads "usually". Its attention is then a rule about positions, and a
JSD from the base's attention measures the distance to that rule.

:func:`per_instance` gathers the per-sentence values, :func:`judge` makes every comparison
once; the other functions read paragraphs and tables from them and return
``{glued name: value}`` or a table.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ... import uncertainty
from .wording import listed, require_columns

__all__ = [
    "Judged",
    "PerInstance",
    "attention_peaks",
    "curve",
    "heatmaps",
    "judge",
    "lambdas",
    "one_position",
    "peaks",
    "per_instance",
    "seed_spread",
    "settings",
    "sweep_table",
    "table4_beside",
    "table4_lambda",
    "table4",
    "verdict",
    "yardstick_points",
    "yardsticks",
]

_FRAME_COLUMNS = ("lambda", "mean_jsd", "mean_tvd", "same_decision", "f1")
_PEAK_COLUMNS = ("peak on first token", "peak on last token", "mean peak weight")
#: the peak table's columns for the most common peak position (:func:`attention_peaks`)
_ONE_POSITION_COLUMNS = ("most common peak", "share peaking there", "95% interval", "degenerate")
UNIFORM_LABEL = "uniform attention (Chapter 6)"


def _lams_text(values) -> str:
    return listed(f"{v:g}" for v in values)


def _lam_label(v: float) -> str:
    return f"adversary, λ = {v:g}"


def _check_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The sweep's frame indexed by λ (``frame.set_index("lambda")``), after a check."""
    require_columns(frame, _FRAME_COLUMNS, "frame (LambdaSweep.frame)")
    if len(frame) == 0:
        raise ValueError("frame has no rows: the sweep trained no adversary")
    return frame.set_index("lambda")


# ----------------------------------------------------------------------------- per-sentence values
@dataclass(frozen=True)
class PerInstance:
    """Every model's distance from the base, per test sentence (the same sentences everywhere).

    ``lams``: the adversaries' λ in the sweep's order; ``adv_jsd``, ``adv_tvd``: λ -> (n,);
    ``seeds``: the retrained seeds; ``seed_jsd``, ``seed_tvd``, ``seed_same``: (S, n), one row
    per retrained seed (``seed_same`` 1 where the seed decides as the base); ``uni_jsd``,
    ``uni_tvd``, ``uni_same``: (n,) the uniform model's.
    """

    lams: tuple
    adv_jsd: Mapping
    adv_tvd: Mapping
    seeds: tuple
    seed_jsd: np.ndarray
    seed_tvd: np.ndarray
    seed_same: np.ndarray
    uni_jsd: np.ndarray
    uni_tvd: np.ndarray
    uni_same: np.ndarray

    @property
    def label(self) -> str:
        """The seed point's name: ``"random seeds 1, 2, 3 (Chapter 7)"``."""
        return f"random seed{'s' if len(self.seeds) > 1 else ''} {', '.join(map(str, self.seeds))} (Chapter 7)"


def per_instance(comparisons: Mapping, floor, uniform_vs_base) -> PerInstance:
    """Gather the per-sentence values the readings judge.

    comparisons: λ -> :class:`attnlib.train.Comparison` of that adversary with the base on the
    test split (:meth:`LambdaSweep.comparison`); floor: :class:`attnlib.baselines.SeedVariance`
    of the retrained seeds on the same split (``per_seed`` with ``seed``, ``instance``,
    ``jsd``, ``tvd``, ``same decision``); uniform_vs_base: the uniform model's Comparison.
    """
    if not isinstance(comparisons, Mapping) or not comparisons:
        raise ValueError("comparisons must map each λ to its adversary's Comparison with the base")
    require_columns(floor.per_seed, ["seed", "instance", "jsd", "tvd", "same decision"], "floor.per_seed")
    seeds = tuple(int(s) for s in pd.unique(floor.per_seed["seed"]))

    def matrix(field):
        table = floor.per_seed.pivot(index="seed", columns="instance", values=field).loc[list(seeds)]
        return table.to_numpy(dtype=np.float64)

    n = matrix("jsd").shape[1]
    lams = tuple(float(v) for v in comparisons)
    for v, c in comparisons.items():
        if len(c.output_tvd) != n:
            raise ValueError(f"the adversary at λ = {v:g} was compared on {len(c.output_tvd)} sentences, the seeds on {n}")
    if len(uniform_vs_base.output_tvd) != n:
        raise ValueError(f"the uniform model was compared on {len(uniform_vs_base.output_tvd)} sentences, the seeds on {n}")
    return PerInstance(
        lams=lams,
        adv_jsd={v: np.asarray(c.attention_jsd, np.float64) for v, c in zip(lams, comparisons.values())},
        adv_tvd={v: np.asarray(c.output_tvd, np.float64) for v, c in zip(lams, comparisons.values())},
        seeds=seeds,
        seed_jsd=matrix("jsd"),
        seed_tvd=matrix("tvd"),
        seed_same=matrix("same decision"),
        uni_jsd=np.asarray(uniform_vs_base.attention_jsd, np.float64),
        uni_tvd=np.asarray(uniform_vs_base.output_tvd, np.float64),
        uni_same=np.asarray(uniform_vs_base.same_decision, np.float64),
    )


@dataclass(frozen=True)
class Judged:
    """Every comparison the chapter reads, made once (:func:`judge`).

    ``seed_jsd``, ``seed_tvd``, ``seed_same``: the seed point's means with their intervals over
    seeds and sentences. ``tvd[λ]``, ``jsd_seed[λ]``: the adversary against the seed point
    (one model against several: :class:`attnlib.uncertainty.SeedComparison`);
    ``jsd_uniform[λ]``: the adversary's JSD against the uniform model's (two single models,
    over the sentences: :class:`attnlib.uncertainty.Comparison`); ``uni_tvd``, ``uni_jsd``: the
    uniform model against the seed point; ``adv_tvd[λ]``, ``adv_jsd[λ]``, ``uni_tvd_own``: a
    single model's mean with its interval over the sentences.
    """

    seed_jsd: uncertainty.Interval
    seed_tvd: uncertainty.Interval
    seed_same: uncertainty.Interval
    tvd: Mapping
    jsd_seed: Mapping
    jsd_uniform: Mapping
    uni_tvd: uncertainty.SeedComparison
    uni_jsd: uncertainty.SeedComparison
    adv_tvd: Mapping
    adv_jsd: Mapping
    uni_tvd_own: uncertainty.Interval
    uni_jsd_own: uncertainty.Interval


def _against_seeds(one: np.ndarray, seeds: np.ndarray, seed: int) -> uncertainty.SeedComparison:
    """One model's per-sentence values against the retrained models': its row repeated for each
    retrained seed, compared as two recipes (``paired_seeds=False``), so the interval holds the
    retrained models' spread and the sentences' noise, and each retrained model is a per-seed
    comparison."""
    return uncertainty.compare_over_seeds(np.tile(one, (len(seeds), 1)), seeds, paired_seeds=False, seed=seed)


def _own(values: np.ndarray, seed: int) -> uncertainty.Interval:
    return uncertainty.bootstrap(values, seed=seed)


def judge(per: PerInstance, *, seed: int = 0) -> Judged:
    """Make every comparison of the chapter once (see :class:`Judged`); ``seed`` seeds the
    bootstraps."""
    if len(per.seeds) < 2:
        raise ValueError("the seed point needs at least 2 retrained seeds for an interval over seeds")
    return Judged(
        seed_jsd=uncertainty.over_seeds(per.seed_jsd, seed=seed),
        seed_tvd=uncertainty.over_seeds(per.seed_tvd, seed=seed),
        seed_same=uncertainty.over_seeds(per.seed_same, seed=seed),
        tvd={v: _against_seeds(per.adv_tvd[v], per.seed_tvd, seed) for v in per.lams},
        jsd_seed={v: _against_seeds(per.adv_jsd[v], per.seed_jsd, seed) for v in per.lams},
        jsd_uniform={v: uncertainty.compare(per.adv_jsd[v], per.uni_jsd, paired=True, seed=seed) for v in per.lams},
        uni_tvd=_against_seeds(per.uni_tvd, per.seed_tvd, seed),
        uni_jsd=_against_seeds(per.uni_jsd, per.seed_jsd, seed),
        adv_tvd={v: _own(per.adv_tvd[v], seed) for v in per.lams},
        adv_jsd={v: _own(per.adv_jsd[v], seed) for v in per.lams},
        uni_tvd_own=_own(per.uni_tvd, seed),
        uni_jsd_own=_own(per.uni_jsd, seed),
    )


def _against_words(c: uncertainty.SeedComparison, more: str = "more", less: str = "less") -> str:
    """A single model against the seed point, for a table cell: "more (3 of 3 seeds)", "within noise",
    or "within the seeds' spread" (above some retrained models and below others, each beyond noise)."""
    n = c.n_seeds
    if c.verdict == "higher":
        return f"{more} ({c.support} of {n} seeds)"
    if c.verdict == "lower":
        return f"{less} ({c.support} of {n} seeds)"
    if c.verdict == uncertainty.SEEDS_DISAGREE:  # above some retrained models, below others
        return "within the seeds' spread"
    return c.verdict


def yardstick_points(per: PerInstance) -> dict[str, tuple]:
    """The two yardsticks as ``{label: (mean JSD, mean TVD)}`` against the base: the retrained
    seeds first (the mean over seeds of each seed's mean over sentences), then the uniform model."""
    return {
        per.label: (float(per.seed_jsd.mean(1).mean()), float(per.seed_tvd.mean(1).mean())),
        UNIFORM_LABEL: (float(per.uni_jsd.mean()), float(per.uni_tvd.mean())),
    }


def seed_spread(per: PerInstance, judged: Judged) -> dict[str, dict]:
    """The seed point's spread for the sweep's figure (:func:`attnlib.viz.plot_lambda_sweep`'s
    ``spread``): each retrained model's (mean JSD, mean TVD), and the 95% intervals over seeds and
    sentences of the two means."""
    return {per.label: {
        "points": [(float(j), float(t)) for j, t in zip(per.seed_jsd.mean(1), per.seed_tvd.mean(1))],
        "jsd": (judged.seed_jsd.low, judged.seed_jsd.high),
        "tvd": (judged.seed_tvd.low, judged.seed_tvd.high),
    }}


def sweep_table(frame: pd.DataFrame, per: PerInstance, judged: Judged, *, uniform, base,
                seed_f1: Sequence[float]) -> pd.DataFrame:
    """One row per adversary, then the seed point, the uniform model and the base itself: mean JSD
    and mean TVD from the base with their 95% intervals (over the sentences for one model; over
    seeds and sentences for the seed point), the share of the same decision, the test F1, and the
    output change against retraining ("more (3 of 3 seeds)", "within noise", "less ...").

    frame: the sweep's frame; per, judged: :func:`per_instance`, :func:`judge`; uniform, base:
    TrainedModels; seed_f1: the retrained models' test F1.
    """
    fr = _check_frame(frame)
    rows = {}
    for v in per.lams:
        rows[_lam_label(v)] = [judged.adv_jsd[v].format(), judged.adv_tvd[v].format(),
                               f"{float(fr.loc[v, 'same_decision']):.3f}", f"{float(fr.loc[v, 'f1']):.3f}",
                               _against_words(judged.tvd[v])]
    rows[per.label] = [judged.seed_jsd.format(), judged.seed_tvd.format(), f"{judged.seed_same.estimate:.3f}",
                       f"{float(np.mean(seed_f1)):.3f}", "(the yardstick)"]
    rows[UNIFORM_LABEL] = [judged.uni_jsd_own.format(), judged.uni_tvd_own.format(), f"{per.uni_same.mean():.3f}",
                           f"{float(uniform.test['f1']):.3f}", _against_words(judged.uni_tvd)]
    rows["base model (itself)"] = ["0", "0", "1", f"{float(base.test['f1']):.3f}", ""]
    return pd.DataFrame.from_dict(rows, orient="index", columns=[
        "mean JSD(α, α_b) [95% interval]", "mean TVD(ŷ, ŷ_b) [95% interval]", "same decision", "test F1",
        "output change against retraining"])


# ----------------------------------------------------------------------------- settings
def settings(book, paper, *, guide_lam: float, wp_range: tuple) -> dict[str, Any]:
    """The profiles' sweeps in words (λ values, epochs), ln 2, Chapter 9's guide λ and the range
    of W&P's own adversaries.

    book, paper: the ``book`` and ``paper`` :class:`attnlib.profiles.Profile`; guide_lam: the λ
    of the adversary Chapter 9 uses as a guide; wp_range: (low, high) λ of W&P's reported
    adversaries in our scale (:func:`attnlib.adversarial_training.wp_lambda_range`).
    """
    extra = sorted(set(paper.wp.lambdas) - set(book.wp.lambdas))
    if not extra:
        raise ValueError("the paper profile should sweep λ values the book profile does not")
    low, high = (float(x) for x in wp_range)
    inside = [v for v in book.wp.lambdas if low * (1 - 1e-9) <= v <= high * (1 + 1e-9)]
    above = [v for v in book.wp.lambdas if v > high * (1 + 1e-9)]
    return {
        "ch08_ln2": float(np.log(2)),  # the largest JSD (natural logs)
        "ch08_guide_lam": "none" if guide_lam is None else f"{guide_lam:g}",
        "ch08_book_n_lams": len(book.wp.lambdas),
        "ch08_book_lams": _lams_text(book.wp.lambdas),
        "ch08_book_epochs": book.wp.adversary_epochs,
        "ch08_paper_extra_lams": _lams_text(extra),
        "ch08_paper_epochs": paper.wp.adversary_epochs,
        "ch08_wp_low": f"{low:g}",
        "ch08_wp_high": f"{high:g}",
        "ch08_book_in_range": _lams_text(inside) if inside else "none",
        "ch08_book_above": _lams_text(above) if above else "none",
    }


def _seed_point(per: PerInstance, judged: Judged) -> str:
    """The seed point in words: its models, and each mean with its interval over seeds and sentences."""
    j, t = judged.seed_jsd, judged.seed_tvd
    return (f"{len(per.seeds)} retrained models (seeds {listed(map(str, per.seeds))}) lie, on average, at mean "
            f"JSD {j.estimate:.3f} (95% interval over seeds and sentences {j.range_text()}; model by model "
            f"{listed(f'{x:.3f}' for x in per.seed_jsd.mean(1))}) and mean TVD "
            f"{t.estimate:.3f} ({t.range_text()}; {listed(f'{x:.3f}' for x in per.seed_tvd.mean(1))})")


def _difference(c) -> str:
    return c.difference.signed_text()


def yardsticks(per: PerInstance, judged: Judged, *, uniform, base, seed_f1: Sequence[float]) -> dict[str, Any]:
    """The seed point, the uniform point and the base: JSD, TVD, same decision and F1;
    ``ch08_seed_point``, the seed point in a clause with its intervals; ``ch08_uni_vs_seed``, the
    uniform model's output change against retraining, judged.

    per, judged: :func:`per_instance`, :func:`judge`; uniform, base: TrainedModels; seed_f1: the
    retrained models' test F1.
    """
    c = judged.uni_tvd
    if c.verdict in ("higher", "lower"):
        word = "more" if c.verdict == "higher" else "less"
        uni = (f"it changes the output {word} than retraining does (a difference of "
               f"{_difference(c)}; beyond noise against {c.support} of the {c.n_seeds} retrained models alone)")
    elif c.verdict == uncertainty.SEEDS_DISAGREE:
        uni = (f"its output change lies above some retrained models' and below others' "
               f"(a difference of {_difference(c)}): the seeds disagree")
    else:
        uni = (f"it changes the output about as much as retraining does (a difference of "
               f"{_difference(c)}, within noise)")
    out: dict[str, Any] = {
        "ch08_seed_label": f"seed {', '.join(map(str, per.seeds))}",
        "ch08_n_seeds": len(per.seeds),
        "ch08_seed_point": _seed_point(per, judged),
        "ch08_uni_vs_seed": uni,
    }
    for key, value in {
        "seed_jsd": judged.seed_jsd.estimate,
        "seed_tvd": judged.seed_tvd.estimate,
        "seed_same": judged.seed_same.estimate,
        "seed_f1": np.mean(seed_f1),
        "uni_jsd": per.uni_jsd.mean(),
        "uni_tvd": per.uni_tvd.mean(),
        "uni_same": per.uni_same.mean(),
        "uni_f1": uniform.test["f1"],
        "base_f1": base.test["f1"],
    }.items():
        out[f"ch08_{key}"] = float(value)
    out["ch08_seed_tvd_ci"] = judged.seed_tvd.range_text()
    return out


def lambdas(frame: pd.DataFrame, *, lam: float) -> dict[str, Any]:
    """The sweep's λ values in words (``ch08_lams``) and the λ shown first (``ch08_lam``).

    frame: the sweep's frame; lam: the chapter's parameter ``lam``.
    """
    fr = _check_frame(frame)
    lams = [float(v) for v in fr.index]
    return {"ch08_lams": _lams_text(lams), "ch08_lam": _lams_text([lam])}


# ----------------------------------------------------------------------------- the curve
def _runs(series: pd.Series, lams: list[float]) -> str:
    values = [float(series[v]) for v in sorted(lams)]
    return f"{listed(f'{v:.3f}' for v in values)} over λ = {_lams_text(sorted(lams))}"


def _right(judged: Judged, v: float) -> str:
    """Where an adversary's attention lies against the two yardsticks: "right", "left" or "between"."""
    seed, uni = judged.jsd_seed[v].verdict, judged.jsd_uniform[v].verdict
    if seed == "higher" and uni == "higher":
        return "right"
    if seed == "lower" and uni == "lower":
        return "left"
    return "between"


def _sides(judged: Judged, lams) -> tuple[list, list, list]:
    sides = {v: _right(judged, v) for v in lams}
    return ([v for v in lams if sides[v] == "right"], [v for v in lams if sides[v] == "between"],
            [v for v in lams if sides[v] == "left"])


def curve(frame: pd.DataFrame, per: PerInstance, judged: Judged) -> dict[str, Any]:
    """The JSD-vs-TVD curve in words: its extremes and the values it runs through (described,
    not judged: each λ point is one adversary), where the adversaries lie against the
    yardsticks, and their output change against retraining, each judged against the seed point.

    frame: the sweep's frame; per, judged: :func:`per_instance`, :func:`judge`.
    """
    fr = _check_frame(frame)
    lams = [float(v) for v in fr.index]
    jsd_at, tvd_at = fr["mean_jsd"].astype(float), fr["mean_tvd"].astype(float)
    out: dict[str, Any] = {}
    jsd_max = float(jsd_at.max())
    out["ch08_jsd_max"] = jsd_max
    out["ch08_jsd_max_lams"] = _lams_text([v for v in lams if jsd_at[v] >= jsd_max - 0.005])
    out["ch08_jsd_min"] = float(jsd_at.min())
    out["ch08_jsd_min_lam"] = _lams_text([float(jsd_at.idxmin())])
    top = float(tvd_at.idxmax())
    out["ch08_tvd_max"] = float(tvd_at.max())
    out["ch08_tvd_max_lam"] = _lams_text([top])
    out["ch08_tvd_max_same"] = float(fr.loc[top, "same_decision"])
    out["ch08_tvd_max_f1"] = float(fr.loc[top, "f1"])
    out["ch08_tvd_min"] = float(tvd_at.min())
    out["ch08_tvd_min_lam"] = _lams_text([float(tvd_at.idxmin())])
    ceiling = jsd_max > 0.95 * np.log(2)
    out["ch08_trend"] = (f"the mean JSD runs {_runs(jsd_at, lams)}{' (up to its ceiling, ln 2)' if ceiling else ''}; "
                         f"the mean TVD runs {_runs(tvd_at, lams)}.")
    right, between, left = _sides(judged, lams)
    where = [f"λ = {_lams_text(group)} lie{'s' if len(group) == 1 else ''} {name}"
             for name, group in (("right of both, beyond noise", right),
                                 ("between them or within noise of one", between),
                                 ("left of both, beyond noise", left)) if group]
    out["ch08_where"] = "; ".join(where)
    more = [v for v in lams if judged.tvd[v].verdict == "higher"]
    less = [v for v in lams if judged.tvd[v].verdict == "lower"]
    tied = [v for v in lams if v not in more and v not in less]
    cost = []
    if more:
        cost.append(f"λ = {_lams_text(more)} change{'s' if len(more) == 1 else ''} the output more than "
                    "retraining does, beyond noise")
    if tied:
        cost.append(f"λ = {_lams_text(tied)} do{'es' if len(tied) == 1 else ''} not differ from it beyond noise")
    if less:
        cost.append(f"λ = {_lams_text(less)} change{'s' if len(less) == 1 else ''} it less, beyond noise")
    out["ch08_cost_vs_seed"] = "; ".join(cost)
    out["ch08_trend_verdict"] = (
        "Each λ point is one adversary, one training run, whose own retraining noise is not measured: the book "
        "does not read the curve's shape from one adversary to the next, only each point against the "
        "yardsticks, as above. "
        + ("No adversary changes the output more than retraining does, beyond noise, at any λ of the sweep."
           if not more else "")
    ).strip()
    closer = ([f"the adversary at λ = {v:g}" for v in less]
              + (["the uniform model"] if judged.uni_tvd.verdict == "lower" else []))
    if closer:
        said = listed(closer)
        out["ch08_closest"] = (f"{said[0].upper()}{said[1:]} {'is' if len(closer) == 1 else 'are'} closer to the "
                               "base in output than retraining, beyond noise.")
    else:
        out["ch08_closest"] = ("None of these models, the uniform model included, is closer to the base in output "
                               "than retraining, beyond noise.")
    return out


def _tvds(fr: pd.DataFrame, lams) -> str:
    return listed(f"{float(fr.loc[v, 'mean_tvd']):.3f}" for v in lams)


def verdict(frame: pd.DataFrame, per: PerInstance, judged: Judged, peak_table: pd.DataFrame) -> dict[str, Any]:
    """W&P's test in words (``ch08_verdict``): an adversary passes when its attention lies right of
    both yardsticks beyond noise and its output change is not above retraining's beyond noise; a
    degenerate one (:func:`attention_peaks`) is named so even when it passes.

    frame: the sweep's frame; per, judged: :func:`per_instance`, :func:`judge`; peak_table:
    :func:`attention_peaks` with a row per adversary.
    """
    fr = _check_frame(frame)
    lams = [float(v) for v in fr.index]
    _check_peak_table(peak_table, lams)
    right, _, left = _sides(judged, lams)
    degenerate = set(_degenerate(peak_table, lams))
    passes = [v for v in right if judged.tvd[v].verdict != "higher"]
    over = [v for v in right if judged.tvd[v].verdict == "higher"]
    clean = [v for v in passes if v not in degenerate]
    bent = [v for v in passes if v in degenerate]
    seed_tvd = f"{judged.seed_tvd.estimate:.3f}, 95% interval {judged.seed_tvd.range_text()}"
    parts = []
    if clean:
        parts.append(
            "So on rt-polarity a model *can* be trained to attend further from the base than both "
            "yardsticks, beyond noise, for no more output change than retraining costs: by W&P's "
            f"criterion λ = {_lams_text(clean)} pass{'es' if len(clean) == 1 else ''} (mean TVD "
            f"{_tvds(fr, clean)} against the retrained models' {seed_tvd})."
        )
    if bent:
        where = listed(sorted({str(peak_table.loc[_lam_label(v), 'most common peak']) for v in bent}))
        parts.append(
            f"{'Also by' if clean else 'By'} W&P's criterion λ = {_lams_text(bent)} pass{'es' if len(bent) == 1 else ''} "
            f"(mean TVD {_tvds(fr, bent)} against the retrained models' "
            f"{seed_tvd}), but {'it is' if len(bent) == 1 else 'they are'} degenerate: "
            f"{'its' if len(bent) == 1 else 'their'} attention peaks on {where} in most sentences, a rule "
            "about positions, not an attention over the words, so the JSD measures the distance to that rule."
        )
    if over:
        one = len(over) == 1
        parts.append(
            f"The adversar{'y' if one else 'ies'} at λ = {_lams_text(over)} attend{'s' if one else ''} further "
            f"from the base than both yardsticks but change{'s' if one else ''} the output more than retraining "
            f"does, beyond noise (mean TVD {_tvds(fr, over)} against "
            f"{seed_tvd})."
        )
    if not right:
        parts.append("No adversary lands right of both yardsticks beyond noise: a trained model here does not "
                     "attend further from the base than retraining does.")
    if left:
        parts.append(
            f"λ = {_lams_text(left)} fail{'s' if len(left) == 1 else ''} the test: left of both yardsticks, "
            f"{'its' if len(left) == 1 else 'their'} attention is closer to the base than a retrained model's."
        )
    parts.append("Each of these verdicts rests on one adversary per λ, read against the spread of "
                 f"{len(per.seeds)} retrained models.")
    return {"ch08_verdict": " ".join(parts)}


# ----------------------------------------------------------------------------- where attention peaks
def _position_name(side: str, offset: int) -> str:
    if side == "start":
        return "the first token" if offset == 0 else "the second token" if offset == 1 else f"token {offset + 1}"
    return ("the last token" if offset == 0 else "the second-to-last token" if offset == 1
            else f"token {offset + 1} from the end")


def one_position(attention) -> tuple[str, np.ndarray]:
    """The position a model's attention peaks on most often, counted from the start or from the
    end of the sentence, and, per sentence, whether it peaks there (1.0) or not (0.0).

    attention: one array of weights per sentence (real tokens only). A sentence whose largest
    weight is tied peaks nowhere (uniform attention peaks on no position). Ties between
    positions go to the first token, then the last, then the nearer one.
    """
    arrays = [np.asarray(a, dtype=np.float64).ravel() for a in attention]
    if not arrays or any(len(a) == 0 for a in arrays):
        raise ValueError("attention must hold at least one sentence, each with at least one weight")
    lengths = np.array([len(a) for a in arrays])
    peak = np.array([int(np.argmax(a)) for a in arrays])
    unique = np.array([int(np.sum(a == a.max())) == 1 for a in arrays])
    offsets = {"start": peak, "end": lengths - 1 - peak}
    best = None
    for rank, side in enumerate(("start", "end")):
        values = offsets[side][unique]
        if values.size == 0:
            continue
        counts = np.bincount(values)
        for offset in np.flatnonzero(counts == counts.max()):
            key = (-int(counts[offset]), int(offset), rank)
            if best is None or key < best[0]:
                best = (key, side, int(offset))
    if best is None:
        return "no single position", np.zeros(len(arrays))
    _, side, offset = best
    return _position_name(side, offset), ((offsets[side] == offset) & unique).astype(np.float64)


def _degenerate_word(share: uncertainty.Interval) -> str:
    if share.low > 0.5:
        return "yes"
    if share.high < 0.5:
        return "no"
    return "about half, within noise"


def attention_peaks(models: Mapping[str, Any], split, *, seed: int = 0) -> pd.DataFrame:
    """Where each model's attention peaks on ``split``: one row per model (in the order given) with
    the share of sentences peaking on the first and on the last token and the mean peak weight
    (:func:`attnlib.metrics.attention_positions`), then the position it peaks on most often
    (:func:`one_position`), the share of sentences peaking there with its 95% interval over the
    sentences, and whether it is degenerate ("yes" when that interval lies above one half, "no"
    below, "about half, within noise" otherwise; module docstring). Numbers not rounded.

    models: row label -> AttentionClassifier; split: an :class:`attnlib.data.Split`.
    """
    from attnlib import train
    from attnlib.metrics import attention_positions

    if not isinstance(models, Mapping) or not models:
        raise ValueError("models must map at least one row label to a model")

    def peaks(model):
        attention = train.predict(model, split).attention
        where = attention_positions(attention)
        name, hits = one_position(attention)
        share = uncertainty.bootstrap(hits, seed=seed)
        return {**{k: where[k] for k in _PEAK_COLUMNS}, "most common peak": name, "share peaking there":
                share.estimate, "95% interval": f"[{share.low:.3f}, {share.high:.3f}]",
                "degenerate": _degenerate_word(share)}

    return pd.DataFrame({label: peaks(model) for label, model in models.items()}).T


def _check_peak_table(peak_table: pd.DataFrame, lams) -> None:
    missing = [c for c in (*_PEAK_COLUMNS, *_ONE_POSITION_COLUMNS) if c not in peak_table.columns]
    if missing:
        raise ValueError(f"peak_table lacks the column(s) {', '.join(missing)}")
    if "base" not in peak_table.index or any(_lam_label(v) not in peak_table.index for v in lams):
        raise ValueError("peak_table needs a row 'base' and one 'adversary, λ = ...' per λ")


def _degenerate(peak_table: pd.DataFrame, lams) -> list[float]:
    """The λ whose adversary is degenerate (the peak table's verdict)."""
    return [v for v in lams if peak_table.loc[_lam_label(v), "degenerate"] == "yes"]


def peaks(peak_table: pd.DataFrame, frame: pd.DataFrame, *, seed_models: Sequence[int], last_tokens: pd.Series,
          base_f1: float) -> dict[str, Any]:
    """The peak table in words: the base's and the retrained models' peaks, each adversary's, which
    are degenerate (``ch08_collapse``) and which spread their weight more thinly than the base and
    every retrained model (``ch08_spread``).

    peak_table: :func:`attention_peaks` with rows ``base``, ``adversary, λ = ...`` and
    ``seed <s>`` for each of ``seed_models``; frame: the sweep's frame; last_tokens: the test
    split's last tokens' shares, most common first (``value_counts(normalize=True)``); base_f1:
    the base's test F1.
    """
    fr = _check_frame(frame)
    lams = [float(v) for v in fr.index]
    _check_peak_table(peak_table, lams)
    if len(last_tokens) == 0:
        raise ValueError("last_tokens is empty")
    seed_rows = [f"seed {s}" for s in seed_models]
    if not seed_rows or any(r not in peak_table.index for r in seed_rows):
        raise ValueError(f"peak_table needs the rows {seed_rows}")

    def row(v):
        return peak_table.loc[_lam_label(v)]

    base_pk = peak_table.loc["base"]
    first, last = "peak on first token", "peak on last token"
    seeds_first = [float(peak_table.loc[r, first]) for r in seed_rows]
    seeds_w = [float(peak_table.loc[r, "mean peak weight"]) for r in seed_rows]
    out: dict[str, Any] = {
        "ch08_base_first": float(base_pk[first]),
        "ch08_peak_seeds": listed(map(str, seed_models)),
        "ch08_seeds_first": listed(f"{x:.0%}" for x in seeds_first),
        "ch08_base_peakw": float(base_pk["mean peak weight"]),
        "ch08_seeds_peakw": listed(f"{x:.3f}" for x in seeds_w),
        "ch08_base_one": f"{float(base_pk['share peaking there']):.0%} on {base_pk['most common peak']}",
    }
    out["ch08_peaks"] = "; ".join(
        f"λ = {v:g}: peak on {row(v)['most common peak']} in {float(row(v)['share peaking there']):.0%} of "
        f"sentences (95% interval {row(v)['95% interval']}), mean peak weight {float(row(v)['mean peak weight']):.3f}"
        for v in lams
    )
    collapse = _degenerate(peak_table, lams)
    if collapse:
        where = sorted({str(row(v)["most common peak"]) for v in collapse})
        shares = [float(row(v)["share peaking there"]) for v in collapse]
        text = (
            f"The adversar{'y' if len(collapse) == 1 else 'ies'} at λ = {_lams_text(collapse)} "
            f"{'is' if len(collapse) == 1 else 'are'} degenerate: {'it peaks' if len(collapse) == 1 else 'each peaks'} "
            f"on {listed(where)} in {min(shares):.0%} to {max(shares):.0%} of the test sentences (most of them, "
            "beyond noise; mean peak weight "
            f"{min(float(row(v)['mean peak weight']) for v in collapse):.3f} or more)"
        )
        if where == ["the last token"]:
            text += (f"; that token is ‘{last_tokens.index[0]}’ in {last_tokens.iloc[0]:.0%} of them. The forward "
                     "half of the last BiLSTM state has read the whole sentence, so a decoder that looks only "
                     "there still sees all of it")
        text += (f". {'Its' if len(collapse) == 1 else 'Their'} test F1: "
                 f"{listed(f'{fr.f1[v]:.3f}' for v in collapse)}, against the base's {base_f1:.3f}.")
    else:
        text = "No adversary is degenerate: none peaks on one position in most sentences beyond noise."
    out["ch08_collapse"] = text
    flattest = min(min(seeds_w), float(base_pk["mean peak weight"]))
    spread = [v for v in lams if float(row(v)["mean peak weight"]) < flattest]
    out["ch08_spread"] = (
        f"At λ = {_lams_text(spread)} the adversary's attention is flatter than the base's and than every "
        "retrained model's (a lower mean peak weight than any of them)." if spread else ""
    )
    return out


_ORDINALS = ("first", "second", "third", "fourth")


def heatmaps(p_base, p_adv, *, tokens: Sequence[Sequence[str]], peak_table: pd.DataFrame,
             frame: pd.DataFrame) -> dict[str, Any]:
    """The shaded sentences in words (``ch08_heatmaps``) and what the slider shows
    (``ch08_slide``).

    p_base, p_adv: :class:`attnlib.train.Predictions` of the base and of the adversary shown,
    on the shown sentences (at most four), in order; tokens: those sentences' tokens;
    peak_table: :func:`attention_peaks`; frame: the sweep's frame.
    """
    from attnlib.metrics import jsd as jsd_of

    fr = _check_frame(frame)
    lams = [float(v) for v in fr.index]
    _check_peak_table(peak_table, lams)
    if not 0 < len(tokens) <= len(_ORDINALS):
        raise ValueError(f"tokens must hold 1 to {len(_ORDINALS)} sentences, got {len(tokens)}")
    if len(p_base.attention) != len(tokens) or len(p_adv.attention) != len(tokens):
        raise ValueError("p_base and p_adv must hold one prediction per sentence of tokens")
    said = []
    for j, (n, toks) in enumerate(zip(_ORDINALS, tokens)):
        a_b, a_a = p_base.attention[j], p_adv.attention[j]
        jb, ja = int(np.argmax(a_b)), int(np.argmax(a_a))
        d = float(jsd_of(a_a, a_b))
        same = p_base.predicted[j] == p_adv.predicted[j]
        said.append(
            f"In the {n}, the base puts its largest weight, {a_b[jb]:.2f}, on "
            f"“{toks[jb]}”, the adversary its largest, {a_a[ja]:.2f}, on “{toks[ja]}” "
            f"(JSD {d:.2f}); the adversary's p(positive) is {p_adv.probs[j, -1]:.2f} "
            f"against the base's {p_base.probs[j, -1]:.2f}, "
            + ("the same decision." if same else "a different decision.")
        )
    collapse = _degenerate(peak_table, lams)
    if collapse:
        where = listed(sorted({str(peak_table.loc[_lam_label(v), "most common peak"]) for v in collapse}))
        slide = (
            f"Slide to λ = {_lams_text(collapse)} and the adversary moves to {where} in most "
            "sentences, whatever they say (the peak table): a degenerate adversary. A model that "
            "always looks at one position is a legitimate classifier, and its attention tells us only "
            "that the BiLSTM summarises the sentence there."
        )
    else:
        slide = "Slide along the sweep and compare each adversary's attention with the peak table."
    return {"ch08_heatmaps": " ".join(said), "ch08_slide": slide}


# ----------------------------------------------------------------------------- W&P's Table 4
def _table4_intervals(comparison, seed: int):
    for name in ("output_tvd", "attention_jsd"):
        if not isinstance(getattr(comparison, name, None), np.ndarray):
            raise ValueError("comparison must be the sweep's per-instance comparison (LambdaSweep.comparison)")
    return uncertainty.bootstrap(np.stack([comparison.output_tvd, comparison.attention_jsd], axis=1), seed=seed)


def _adversary_f1(comparison, labels, seed: int) -> uncertainty.Interval:
    """The adversary's test F1 with its bootstrap interval: its predictions are the base's where
    the two decide alike and the other class elsewhere (two classes)."""
    labels = np.asarray(labels)
    if labels.shape != comparison.predicted_b.shape:
        raise ValueError(f"labels must be the test split's, one per instance ({len(comparison.predicted_b)}), "
                         f"got shape {labels.shape}")
    predicted = np.where(comparison.same_decision, comparison.predicted_b, 1 - comparison.predicted_b)
    return uncertainty.f1(labels, predicted, seed=seed)


def _value(x) -> float:
    return float(getattr(x, "value", x))


def table4_beside(comparison, frame: pd.DataFrame, *, lam: float, paper: Mapping, scale: float,
                  peak_row: Mapping | None = None, labels=None, seed: int = 0) -> pd.DataFrame:
    """The adversary W&P's Table 4 rule picks from our sweep within their λ range, beside their
    Table 4 row.

    ``comparison``: :meth:`LambdaSweep.comparison` at ``lam`` (per-instance TVD and JSD on the
    test split); ``frame``: the sweep's frame; ``paper``: ``published.WP_TABLE4[dataset]``;
    ``scale``: ``published.WP_LAMBDA_SCALE`` (their λ = l is ours 2 l); ``peak_row``: the
    adversary's row of :func:`attention_peaks` (adds where it peaks and whether it is
    degenerate; W&P report neither); ``labels``: the test split's labels, for the interval of our
    F1 (without them the F1 is shown alone). Ours is one adversary: its F1, TVD and JSD carry
    95% bootstrap intervals over the test sentences. Columns ours, W&P.
    """
    fr = _check_frame(frame)
    if not any(np.isclose(float(v), lam) for v in fr.index):
        raise ValueError(f"lam = {lam:g} is not in the sweep ({_lams_text(fr.index)})")
    row = fr.loc[[v for v in fr.index if np.isclose(float(v), lam)][0]]
    tvd, jsd = _table4_intervals(comparison, seed)
    f1 = f"{float(row['f1']):.3f}" if labels is None else str(_adversary_f1(comparison, labels, seed))
    theirs = {k: _value(paper[k]) for k in ("lambda", "f1", "tvd", "jsd")}
    ours = [f"{lam:g}", f"{lam / scale:g}", f1, str(tvd), str(jsd)]
    wp = [f"{theirs['lambda'] * scale:g}", f"{theirs['lambda']:g}", f"{theirs['f1']:.3f}", f"{theirs['tvd']:.3f}",
          f"{theirs['jsd']:.3f}"]
    index = ["λ (our loss)", "λ (W&P's loss)", "test F1" if labels is None else "test F1 [95% interval]",
             "mean TVD [95% interval]", "mean JSD [95% interval]"]
    if peak_row is not None:
        ours += [f"{float(peak_row['share peaking there']):.3f} {peak_row['95% interval']} "
                 f"({peak_row['most common peak']})", str(peak_row["degenerate"])]
        wp += ["not reported", "not reported"]
        index += ["share peaking on one position [95% interval]", "degenerate"]
    return pd.DataFrame({"ours (rt-polarity, one adversary)": ours, "W&P Table 4 (SST)": wp}, index=index)


def table4_lambda(frame: pd.DataFrame, *, wp_range: tuple) -> tuple[float, bool]:
    """The adversary set beside W&P's Table 4: (λ, True) for the one their rule picks within
    ``wp_range`` (:func:`attnlib.adversarial_training.wp_pick`); when none qualifies, (λ, False)
    for the adversary with the largest mean JSD in the range (in the whole sweep if the range
    holds none)."""
    from attnlib import adversarial_training

    fr = _check_frame(frame)
    pick = adversarial_training.wp_pick(frame, within=wp_range)
    if pick is not None:
        return float(pick), True
    low, high = (float(x) for x in wp_range)
    lams = [float(v) for v in fr.index if low * (1 - 1e-9) <= float(v) <= high * (1 + 1e-9)] or [float(v) for v in fr.index]
    jsd = fr["mean_jsd"].astype(float)
    return max(lams, key=lambda v: jsd[v]), False


def table4(comparison, frame: pd.DataFrame, judged: Judged, *, lam: float, picked: bool, paper: Mapping,
           scale: float, wp_range: tuple, whole_grid_lam: float | None, peak_row: Mapping | None = None,
           seed: int = 0) -> dict[str, Any]:
    """Our Table-4 adversary against W&P's, in words.

    ``comparison``: the adversary's :meth:`LambdaSweep.comparison`; ``frame``: the sweep's frame;
    ``judged``: :func:`judge`; ``lam``, ``picked``: :func:`table4_lambda`; ``paper``:
    ``published.WP_TABLE4[dataset]``; ``scale``: their λ = l is ours ``scale`` x l;
    ``wp_range``: their adversaries' λ in our scale; ``whole_grid_lam``: what the rule picks
    over the whole sweep (:func:`attnlib.diagnostic.table4_pick`); ``peak_row``: the adversary's
    row of :func:`attention_peaks`. Gives ``ch08_table4`` (the adversary in a clause), its λ in
    both scales, where their TVD and JSD fall against our intervals over the sentences
    (``ch08_t4_tvd``, ``ch08_t4_jsd``), ``ch08_t4_grid`` (the rule over the whole grid),
    ``ch08_t4_nearest`` (our adversary nearest their SST λ, against 0.4) and
    ``ch08_t4_degenerate``.
    """
    fr = _check_frame(frame)
    if not any(np.isclose(float(v), lam) for v in fr.index):
        raise ValueError(f"lam = {lam:g} is not in the sweep ({_lams_text(fr.index)})")
    theirs = {k: _value(paper[k]) for k in ("lambda", "tvd", "jsd")}
    low, high = (float(x) for x in wp_range)

    def inside(v: float) -> bool:
        return low * (1 - 1e-9) <= v <= high * (1 + 1e-9)

    out: dict[str, Any] = {
        "ch08_t4_paper_lam": f"{theirs['lambda']:g}",
        "ch08_t4_paper_lam_ours": f"{theirs['lambda'] * scale:g}",
        "ch08_t4_range": f"{low:g} to {high:g} in our scale ({low / scale:g} to {high / scale:g} in theirs)",
        "ch08_t4_lam": f"{lam:g}",
        "ch08_t4_lam_wp": f"{lam / scale:g}",
    }
    if whole_grid_lam is None:
        out["ch08_t4_grid"] = "Over our whole grid no adversary reaches a mean JSD above 0.4 either."
    else:
        ratio = whole_grid_lam / (theirs["lambda"] * scale)
        out["ch08_t4_grid"] = (
            f"Over our whole grid the same rule picks λ = {whole_grid_lam:g} ({whole_grid_lam / scale:g} in W&P's "
            f"scale), {ratio:,.3g} times their SST pick"
            + (", which lies in their range too." if inside(whole_grid_lam) else
               ": an adversary trained with a λ unlike theirs, which is why the book applies the rule within "
               "their range.")
        )
    target = theirs["lambda"] * scale
    near = min(judged.adv_jsd, key=lambda v: abs(np.log(v) - np.log(target)) if v > 0 else np.inf)
    iv = judged.adv_jsd[near]
    side = "above" if iv.low > 0.4 else "below" if iv.high < 0.4 else "within noise of"
    out["ch08_t4_nearest"] = (
        f"Our adversary nearest their SST pick, λ = {near:g} ({near / scale:g} in W&P's scale), reaches a mean JSD "
        f"of {iv.estimate:.3f} (95% interval over the sentences {iv.range_text()}), {side} their 0.4; it is one "
        "adversary, and how far another training run at that λ would land is not measured."
    )
    row = fr.loc[[v for v in fr.index if np.isclose(float(v), lam)][0]]
    clause = f"the adversary at λ = {lam:g} (mean JSD {float(row['mean_jsd']):.3f}, mean TVD {float(row['mean_tvd']):.3f})"
    out["ch08_table4"] = clause if picked else (
        f"no adversary: none in that range reaches a mean JSD above 0.4, so the table shows the one with the "
        f"largest, {clause}")
    tvd, jsd = _table4_intervals(comparison, seed)

    def words(ours, value, what):
        relation = ours.relation_to(value)
        return f"our {what}, {ours.estimate:.3f} (95% interval {ours.range_text()}), is {relation} theirs ({value:.3f})"

    out["ch08_t4_tvd"] = words(tvd, theirs["tvd"], "mean TVD")
    out["ch08_t4_jsd"] = words(jsd, theirs["jsd"], "mean JSD")
    if peak_row is None:
        out["ch08_t4_degenerate"] = ""
    else:
        share = f"{float(peak_row['share peaking there']):.0%} (95% interval {peak_row['95% interval']})"
        d = peak_row["degenerate"]
        out["ch08_t4_degenerate"] = (
            f"Our adversary is degenerate: it peaks on {peak_row['most common peak']} in {share} of the test "
            "sentences, so the row compares a rule about positions with W&P's adversary, of which they report "
            "how far its attention is from the base's but not where it peaks." if d == "yes" else
            f"Our adversary is not degenerate: its most common peak, on {peak_row['most common peak']}, holds for "
            f"{share} of the test sentences." if d == "no" else
            f"Whether our adversary is degenerate is within noise: it peaks on {peak_row['most common peak']} in "
            f"{share} of the test sentences."
        )
    return out
