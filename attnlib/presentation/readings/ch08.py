"""What Chapter 8 (training an adversary: a whole model that attends elsewhere) reads off its
results.

The chapter trains W&P's adversaries for a sweep of λ against a frozen base
(:func:`attnlib.adversarial_training.lambda_sweep`; its ``frame`` has one row per λ with
``lambda``, ``mean_jsd``, ``mean_tvd``, ``same_decision``, ``f1``) and places two yardsticks on
the same axes: a model retrained with another seed (:func:`attnlib.baselines.seed_variance`)
and Chapter 6's uniform-attention model. The functions below build the chapter's two tables
and read each paragraph's numbers and clauses off them, returning ``{glued name: value}``.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ... import uncertainty
from .wording import listed, require_columns

__all__ = [
    "attention_peaks",
    "curve",
    "heatmaps",
    "lambdas",
    "peaks",
    "settings",
    "sweep_table",
    "table4_beside",
    "table4",
    "verdict",
    "yardstick_points",
    "yardsticks",
]

_FRAME_COLUMNS = ("lambda", "mean_jsd", "mean_tvd", "same_decision", "f1")
_PEAK_COLUMNS = ("peak on first token", "peak on last token", "mean peak weight")


def _lams_text(values) -> str:
    return listed(f"{v:g}" for v in values)


def _check_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The sweep's frame indexed by λ (``frame.set_index("lambda")``), after a check."""
    require_columns(frame, _FRAME_COLUMNS, "frame (LambdaSweep.frame)")
    if len(frame) == 0:
        raise ValueError("frame has no rows: the sweep trained no adversary")
    return frame.set_index("lambda")


def _two_points(points: Mapping[str, tuple]) -> tuple[tuple[float, float], tuple[float, float]]:
    if not isinstance(points, Mapping) or len(points) != 2:
        raise ValueError("points must map the seed point, then the uniform point, to (JSD, TVD)")
    (seed_jsd, seed_tvd), (uni_jsd, uni_tvd) = [map(float, p) for p in points.values()]
    return (seed_jsd, seed_tvd), (uni_jsd, uni_tvd)


def yardstick_points(floor, uniform_vs_base, seed_models: Sequence[int]) -> dict[str, tuple]:
    """The two yardsticks as ``{label: (mean JSD, mean TVD)}`` against the base: the retrained
    seed(s) first, then the uniform model.

    floor: :class:`attnlib.baselines.SeedVariance` of the retrained seeds; uniform_vs_base:
    :class:`attnlib.train.Comparison` of the uniform model with the base; seed_models: the
    retrained seeds (for the label).
    """
    if len(seed_models) == 0:
        raise ValueError("seed_models must name at least one retrained seed")
    return {
        f"random seed{'s' if len(seed_models) > 1 else ''} "
        f"{', '.join(map(str, seed_models))} (Chapter 7)": (
            floor.per_seed["jsd"].mean(),
            floor.per_seed["tvd"].mean(),
        ),
        "uniform attention (Chapter 6)": (
            uniform_vs_base.attention_jsd.mean(),
            uniform_vs_base.output_tvd.mean(),
        ),
    }


def sweep_table(
    frame: pd.DataFrame,
    points: Mapping[str, tuple],
    *,
    floor,
    uniform,
    uniform_vs_base,
    base,
) -> pd.DataFrame:
    """One row per adversary, then the yardsticks and the base itself: mean JSD and mean TVD
    from the base, the share of the same decision, and test F1; not rounded.

    frame: the sweep's frame; points: :func:`yardstick_points`; floor: the SeedVariance of the
    retrained seeds; uniform: the uniform model (a TrainedModel); uniform_vs_base: its
    Comparison with the base; base: the base (a TrainedModel).
    """
    _check_frame(frame)
    _two_points(points)
    table = frame.set_index("lambda")[
        ["mean_jsd", "mean_tvd", "same_decision", "f1", "best_epoch"]
    ]
    table.index = [f"adversary, λ = {v:g}" for v in table.index]
    seed_same = floor.per_seed["same decision"].mean()
    extra = pd.DataFrame(
        {
            "mean_jsd": [p[0] for p in points.values()],
            "mean_tvd": [p[1] for p in points.values()],
            "same_decision": [seed_same, np.mean(uniform_vs_base.same_decision)],
            "f1": [
                np.mean([m.test["f1"] for m in floor.models.values()]),
                uniform.test["f1"],
            ],
        },
        index=list(points),
    )
    base_row = pd.DataFrame(
        {
            "mean_jsd": [0.0],
            "mean_tvd": [0.0],
            "same_decision": [1.0],
            "f1": [base.test["f1"]],
        },
        index=["base model (itself)"],
    )
    table = pd.concat([table.drop(columns="best_epoch"), extra, base_row])
    table.columns = ["mean JSD(α, α_b)", "mean TVD(ŷ, ŷ_b)", "same decision", "test F1"]
    return table


def settings(book, paper, *, guide_lam: float) -> dict[str, Any]:
    """The profiles' sweeps in words (λ values, epochs), ln 2 and Chapter 9's guide λ.

    book, paper: the ``book`` and ``paper`` :class:`attnlib.profiles.Profile`; guide_lam: the
    λ of the adversary Chapter 9 uses as a guide (``diagnostic.ADVERSARY_LAMBDA``).
    """
    extra = sorted(set(paper.wp.lambdas) - set(book.wp.lambdas))
    if not extra:
        raise ValueError("the paper profile should sweep λ values the book profile does not")
    return {
        "ch08_ln2": float(np.log(2)),  # the largest JSD (natural logs)
        "ch08_guide_lam": f"{guide_lam:g}",  # W&P footnote 8
        "ch08_book_n_lams": len(book.wp.lambdas),
        "ch08_book_lams": _lams_text(book.wp.lambdas),
        "ch08_book_epochs": book.wp.adversary_epochs,
        "ch08_paper_extra_lams": _lams_text(extra),
        "ch08_paper_epochs": paper.wp.adversary_epochs,
    }


def _seed_point(floor, seed_models: Sequence[int], jsd: float, tvd: float) -> str:
    """The seed point in words: one retrained model; two, with both values; or the mean of
    three or more with each measure's Student's t 95% interval over the seeds. A seed's value
    is its mean over the sentences (``floor.per_seed`` has a ``seed`` column)."""
    if len(seed_models) == 1:
        return f"a retrained model (seed {seed_models[0]}) lies at mean JSD {jsd:.3f} and mean TVD {tvd:.3f}"
    require_columns(floor.per_seed, ["seed", "jsd", "tvd"], "floor.per_seed")
    by_seed = floor.per_seed.groupby("seed")[["jsd", "tvd"]].mean()
    models = f"{len(seed_models)} retrained models (seeds {listed(map(str, seed_models))}) lie, on average,"
    if len(by_seed) == 2:  # a t interval on one degree of freedom says less than the two values
        j, t = (by_seed[c].to_numpy() for c in ("jsd", "tvd"))
        return (f"{models} at mean JSD {j.mean():.3f} (the two: {j[0]:.3f} and {j[1]:.3f}) and mean "
                f"TVD {t.mean():.3f} ({t[0]:.3f} and {t[1]:.3f})")
    j, t = (uncertainty.seed_interval(by_seed[c].to_numpy()) for c in ("jsd", "tvd"))
    return (f"{models} at mean JSD {j.estimate:.3f} (95% interval over the seeds {j.range_text()}) "
            f"and mean TVD {t.estimate:.3f} ({t.range_text()})")


def yardsticks(
    points: Mapping[str, tuple],
    *,
    floor,
    uniform,
    uniform_vs_base,
    base,
    seed_models: Sequence[int],
) -> dict[str, Any]:
    """The seed point, the uniform point and the base: JSD, TVD, same decision and F1;
    ``ch08_seed_point``, the seed point in a clause (two seeds' values, or t intervals over
    three or more).

    points: :func:`yardstick_points`; floor: the SeedVariance of the retrained seeds;
    uniform, base: TrainedModels; uniform_vs_base: the uniform model's Comparison with the
    base; seed_models: the retrained seeds.
    """
    (seed_jsd, seed_tvd), (uni_jsd, uni_tvd) = _two_points(points)
    seed_same = floor.per_seed["same decision"].mean()
    seed_f1 = float(np.mean([m.test["f1"] for m in floor.models.values()]))
    out: dict[str, Any] = {"ch08_seed_label": f"seed {', '.join(map(str, seed_models))}",
                           "ch08_seed_point": _seed_point(floor, seed_models, seed_jsd, seed_tvd)}
    for key, value in {
        "seed_jsd": seed_jsd,
        "seed_tvd": seed_tvd,
        "seed_same": seed_same,
        "seed_f1": seed_f1,
        "uni_jsd": uni_jsd,
        "uni_tvd": uni_tvd,
        "uni_same": np.mean(uniform_vs_base.same_decision),
        "uni_f1": uniform.test["f1"],
        "base_f1": base.test["f1"],
    }.items():
        out[f"ch08_{key}"] = float(value)
    return out


def lambdas(frame: pd.DataFrame, *, lam: float) -> dict[str, Any]:
    """The sweep's λ values in words (``ch08_lams``) and the λ shown first (``ch08_lam``).

    frame: the sweep's frame; lam: the chapter's parameter ``lam``.
    """
    fr = _check_frame(frame)
    lams = [float(v) for v in fr.index]
    return {"ch08_lams": _lams_text(lams), "ch08_lam": _lams_text([lam])}


def _trend(series: pd.Series, what: str, lams: list[float]) -> tuple[str, bool]:
    values = [round(float(series[v]), 3) for v in sorted(lams)]  # as printed
    steady = all(b >= a - 0.005 for a, b in zip(values, values[1:]))
    if all(b >= a for a, b in zip(values, values[1:])):
        how = "never falling as λ grows"
    elif steady:
        how = "never falling by more than 0.005 as λ grows"
    else:
        how = "not rising steadily with λ"
    return (
        f"{what} runs {listed(f'{v:.3f}' for v in values)} over λ = "
        f"{_lams_text(sorted(lams))}, {how}",
        steady,
    )


def _sides(jsd_at: pd.Series, lams, seed_jsd: float, uni_jsd: float):
    right = [v for v in lams if jsd_at[v] > max(seed_jsd, uni_jsd)]
    left = [v for v in lams if jsd_at[v] < min(seed_jsd, uni_jsd)]
    between = [v for v in lams if v not in right and v not in left]
    return right, between, left


def curve(frame: pd.DataFrame, points: Mapping[str, tuple]) -> dict[str, Any]:
    """The JSD-vs-TVD curve in words: its extremes, its trend over λ, where the adversaries
    lie against the yardsticks, their output cost against the seed's, and W&P's Table 4 pick.

    frame: the sweep's frame; points: :func:`yardstick_points` (the seed point first).
    """
    from attnlib import published

    fr = _check_frame(frame)
    lams = [float(v) for v in fr.index]
    jsd_at, tvd_at = fr["mean_jsd"].astype(float), fr["mean_tvd"].astype(float)
    (seed_jsd, seed_tvd), (uni_jsd, uni_tvd) = _two_points(points)
    out: dict[str, Any] = {}
    jsd_max, jsd_min = float(jsd_at.max()), float(jsd_at.min())
    out["ch08_jsd_max"] = jsd_max
    out["ch08_jsd_max_lams"] = _lams_text([v for v in lams if jsd_at[v] >= jsd_max - 0.005])
    out["ch08_jsd_min"] = jsd_min
    out["ch08_jsd_min_lam"] = _lams_text([float(jsd_at.idxmin())])
    top = float(tvd_at.idxmax())
    out["ch08_tvd_max"] = float(tvd_at.max())
    out["ch08_tvd_max_lam"] = _lams_text([top])
    out["ch08_tvd_max_same"] = float(fr.loc[top, "same_decision"])
    out["ch08_tvd_max_f1"] = float(fr.loc[top, "f1"])
    out["ch08_tvd_min"] = float(tvd_at.min())
    out["ch08_tvd_min_lam"] = _lams_text([float(tvd_at.idxmin())])

    jsd_trend, jsd_steady = _trend(jsd_at, "the mean JSD", lams)
    tvd_trend, tvd_steady = _trend(tvd_at, "the mean TVD", lams)
    ceiling = jsd_max > 0.95 * np.log(2)
    out["ch08_trend"] = (
        f"{jsd_trend}{' (up to its ceiling, ln 2)' if ceiling else ''}; {tvd_trend}."
    )
    out["ch08_trend_verdict"] = (
        "Our points trace that trade-off, up to differences of a few thousandths "
        "that one run per λ "
        "cannot resolve."
        if jsd_steady and tvd_steady
        else (
            "Our points trace it only in part"
            if jsd_steady or tvd_steady
            else "Our points do not trace it"
        )
        + "; with one run per λ we cannot tell the "
        "effect of λ from that of a single training run."
    )
    right, between, left = _sides(jsd_at, lams, seed_jsd, uni_jsd)
    where = [
        f"λ = {_lams_text(group)} lie{'s' if len(group) == 1 else ''} {name}"
        for name, group in (
            ("right of both", right),
            ("between them", between),
            ("left of both", left),
        )
        if group
    ]
    out["ch08_where"] = "; ".join(where)
    less = [v for v in lams if tvd_at[v] <= seed_tvd]
    more = [v for v in lams if tvd_at[v] > seed_tvd]
    cost = []
    if less:
        cost.append(f"λ = {_lams_text(less)} change the output no more than the seed does")
    if more:
        cost.append(
            f"λ = {_lams_text(more)} change {'it' if less else 'the output'} more"
            + ("" if less else " than the seed does")
        )
    out["ch08_cost_vs_seed"] = "; ".join(cost)
    out["ch08_closest"] = min(
        [("the uniform model", uni_tvd), ("the seed", seed_tvd)]
        + [(f"the adversary at λ = {v:g}", float(tvd_at[v])) for v in lams],
        key=lambda p: p[1],
    )[0]
    cands = [v for v in lams if jsd_at[v] > published.JSD_DIFFERENT_WP]
    if cands:
        best = min(cands, key=lambda v: tvd_at[v])
        t4 = (
            f"the adversary at λ = {best:g} (mean JSD {jsd_at[best]:.3f}, "
            f"mean TVD {tvd_at[best]:.3f})"
        )
    else:
        t4 = "none: no adversary reaches a mean JSD above 0.4"
    out["ch08_table4"] = t4
    return out


def verdict(frame: pd.DataFrame, points: Mapping[str, tuple]) -> dict[str, Any]:
    """W&P's test in words (``ch08_verdict``): which adversaries attend further from the base
    than both yardsticks, and at what output cost against the seed's.

    frame: the sweep's frame; points: :func:`yardstick_points` (the seed point first).
    """
    fr = _check_frame(frame)
    lams = [float(v) for v in fr.index]
    jsd_at, tvd_at = fr["mean_jsd"].astype(float), fr["mean_tvd"].astype(float)
    (seed_jsd, seed_tvd), (uni_jsd, _) = _two_points(points)
    right, _, left = _sides(jsd_at, lams, seed_jsd, uni_jsd)
    conv = [v for v in right if tvd_at[v] <= seed_tvd]
    over = [v for v in right if tvd_at[v] > seed_tvd]
    parts = []
    if conv:
        parts.append(
            "So on rt-polarity a model *can* be trained to attend further from the base "
            "than both yardsticks for no more output change than retraining costs: by "
            f"W&P's criterion λ = {_lams_text(conv)} pass{'es' if len(conv) == 1 else ''} "
            "(mean TVD "
            f"{listed(f'{tvd_at[v]:.3f}' for v in conv)} against the seed's "
            f"{seed_tvd:.3f})."
        )
    if over:
        one = len(over) == 1
        parts.append(
            f"The adversar{'y' if one else 'ies'} at λ = {_lams_text(over)} "
            f"attend{'s' if one else ''} further from the base than both yardsticks but "
            f"change{'s' if one else ''} the output more than retraining does (mean TVD "
            f"{listed(f'{tvd_at[v]:.3f}' for v in over)} against {seed_tvd:.3f})."
        )
    if not right:
        parts.append(
            "No adversary lands right of both yardsticks: on this run a trained "
            "model does not attend further from the base than retraining does."
        )
    if left:
        parts.append(
            f"λ = {_lams_text(left)} fail{'s' if len(left) == 1 else ''} the test: "
            "left of both yardsticks, its attention is no further from the base "
            "than a retrained model's."
        )
    return {"ch08_verdict": " ".join(parts)}


def attention_peaks(models: Mapping[str, Any], split) -> pd.DataFrame:
    """Where each model's attention peaks on ``split``: one row per model (in the order given)
    with the share of sentences peaking on the first and on the last token and the mean peak
    weight (:func:`attnlib.metrics.attention_positions`); not rounded.

    models: row label -> AttentionClassifier; split: an :class:`attnlib.data.Split`.
    """
    from attnlib import train
    from attnlib.metrics import attention_positions

    if not isinstance(models, Mapping) or not models:
        raise ValueError("models must map at least one row label to a model")

    def peaks(model):
        where = attention_positions(train.predict(model, split).attention)
        return {k: where[k] for k in _PEAK_COLUMNS}

    return pd.DataFrame({label: peaks(model) for label, model in models.items()}).T


def _check_peak_table(peak_table: pd.DataFrame, lams) -> None:
    missing = [c for c in _PEAK_COLUMNS if c not in peak_table.columns]
    if missing:
        raise ValueError(f"peak_table lacks the column(s) {', '.join(missing)}")
    rows = [f"adversary, λ = {v:g}" for v in lams]
    if "base" not in peak_table.index or any(r not in peak_table.index for r in rows):
        raise ValueError("peak_table needs a row 'base' and one 'adversary, λ = ...' per λ")


def _collapse(peak_table: pd.DataFrame, lams) -> list[float]:
    """The λ whose adversary peaks on the last token, with nearly all its weight."""
    last = "peak on last token"
    return [
        v
        for v in lams
        if peak_table.loc[f"adversary, λ = {v:g}"][last] >= 0.9
        and peak_table.loc[f"adversary, λ = {v:g}"]["mean peak weight"] >= 0.9
    ]


def peaks(
    peak_table: pd.DataFrame,
    frame: pd.DataFrame,
    *,
    seed_model: int,
    last_tokens: pd.Series,
    base_f1: float,
) -> dict[str, Any]:
    """The peak table in words: the base's and the seed's peaks, each adversary's, whether
    some collapse onto the last token (``ch08_collapse``) or spread out (``ch08_spread``).

    peak_table: :func:`attention_peaks` with rows ``base``, ``adversary, λ = ...`` and
    ``seed <seed_model>``; frame: the sweep's frame; seed_model: the retrained seed in the
    table; last_tokens: the test split's last tokens' shares, most common first
    (``value_counts(normalize=True)``); base_f1: the base's test F1.
    """
    fr = _check_frame(frame)
    lams = [float(v) for v in fr.index]
    _check_peak_table(peak_table, lams)
    if len(last_tokens) == 0:
        raise ValueError("last_tokens is empty")

    def peak_row(v):
        return peak_table.loc[f"adversary, λ = {v:g}"]

    base_pk, seed_pk = peak_table.loc["base"], peak_table.loc[f"seed {seed_model}"]
    out: dict[str, Any] = {
        "ch08_base_first": float(base_pk["peak on first token"]),
        "ch08_peak_seed": str(seed_model),
        "ch08_seed_first": float(seed_pk["peak on first token"]),
        "ch08_base_peakw": float(base_pk["mean peak weight"]),
        "ch08_seed_peakw": float(seed_pk["mean peak weight"]),
    }
    first, last = "peak on first token", "peak on last token"
    out["ch08_peaks"] = "; ".join(
        f"λ = {v:g}: peak on the first token in {peak_row(v)[first]:.0%} of sentences, "
        f"on the last in {peak_row(v)[last]:.0%}, mean peak weight "
        f"{peak_row(v)['mean peak weight']:.3f}"
        for v in lams
    )
    collapse = _collapse(peak_table, lams)
    if collapse:
        least_w = min(peak_row(v)["mean peak weight"] for v in collapse)
        least_last = min(peak_row(v)[last] for v in collapse)
        text = (
            f"At λ = {_lams_text(collapse)} the adversary puts nearly all of its weight "
            f"(mean peak weight at least {least_w:.3f}) on the last token in at least "
            f"{least_last:.0%} of the test sentences; that token is "
            f"‘{last_tokens.index[0]}’ in {last_tokens.iloc[0]:.0%} of them. The "
            "forward half of the last BiLSTM state has read the whole sentence, so a "
            "decoder that looks only there can still classify: test F1 "
            f"{listed(f'{fr.f1[v]:.3f}' for v in collapse)} against the base's "
            f"{base_f1:.3f}."
        )
    else:
        text = (
            "No adversary collapses onto the last token (a peak there in 90% of the "
            "sentences with mean peak weight 0.9 or more)."
        )
    out["ch08_collapse"] = text
    flat_below = base_pk["mean peak weight"] - 0.05
    spread = [v for v in lams if peak_row(v)["mean peak weight"] < flat_below]
    out["ch08_spread"] = (
        f"At λ = {_lams_text(spread)} the adversary's attention is flatter "
        "than the base's (a lower mean peak weight)."
        if spread
        else ""
    )
    return out


_ORDINALS = ("first", "second", "third", "fourth")


def heatmaps(
    p_base,
    p_adv,
    *,
    tokens: Sequence[Sequence[str]],
    peak_table: pd.DataFrame,
    frame: pd.DataFrame,
) -> dict[str, Any]:
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
    collapse = _collapse(peak_table, lams)
    if collapse:
        slide = (
            f"Slide to λ = {_lams_text(collapse)} and the adversary moves to the final "
            "token in nearly every sentence, whatever it says (the peak table). A "
            "model that always "
            "looks at its last hidden state is a legitimate classifier, and its "
            "attention tells us only that the BiLSTM summarises the sentence there."
        )
    else:
        slide = (
            "Slide along the sweep and compare each adversary's attention with the "
            "peak table."
        )
    return {"ch08_heatmaps": " ".join(said), "ch08_slide": slide}


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


def table4_beside(comparison, frame: pd.DataFrame, *, lam: float, paper: Mapping, scale: float,
                  labels=None, seed: int = 0) -> pd.DataFrame:
    """The adversary W&P's Table 4 rule picks from our sweep, beside their Table 4 row.

    ``comparison``: :meth:`LambdaSweep.comparison` at ``lam`` (per-instance TVD and JSD on the
    test split); ``frame``: the sweep's frame; ``paper``: ``published.WP_TABLE4[dataset]``;
    ``scale``: ``published.WP_LAMBDA_SCALE`` (their λ = l is ours 2 l); ``labels``: the test
    split's labels, for the interval of our F1 (without them the F1 is shown alone). Our F1, TVD
    and JSD carry 95% bootstrap intervals over the test sentences. Rows λ (our scale), λ (W&P's
    scale), test F1, mean TVD, mean JSD; columns ours, W&P.
    """
    fr = _check_frame(frame)
    if not any(np.isclose(float(v), lam) for v in fr.index):
        raise ValueError(f"lam = {lam:g} is not in the sweep ({_lams_text(fr.index)})")
    row = fr.loc[[v for v in fr.index if np.isclose(float(v), lam)][0]]
    tvd, jsd = _table4_intervals(comparison, seed)
    f1 = f"{float(row['f1']):.3f}" if labels is None else str(_adversary_f1(comparison, labels, seed))
    theirs = {k: float(getattr(paper[k], "value", paper[k])) for k in ("lambda", "f1", "tvd", "jsd")}
    return pd.DataFrame(
        {
            "ours (rt-polarity)": [f"{lam:g}", f"{lam / scale:g}", f1, str(tvd), str(jsd)],
            "W&P Table 4 (SST)": [f"{theirs['lambda'] * scale:g}", f"{theirs['lambda']:g}", f"{theirs['f1']:.3f}",
                                  f"{theirs['tvd']:.3f}", f"{theirs['jsd']:.3f}"],
        },
        index=["λ (our loss)", "λ (W&P's loss)", "test F1" if labels is None else "test F1 [95% interval]",
               "mean TVD [95% interval]", "mean JSD [95% interval]"],
    )


def table4(comparison, *, lam: float, paper: Mapping, scale: float, seed: int = 0) -> dict[str, Any]:
    """Our Table-4 adversary against W&P's, in words: where their TVD and JSD fall against our
    intervals (``ch08_t4_tvd``, ``ch08_t4_jsd``), and its λ in both scales."""
    tvd, jsd = _table4_intervals(comparison, seed)
    theirs = {k: float(getattr(paper[k], "value", paper[k])) for k in ("lambda", "tvd", "jsd")}

    def words(ours, value, what):
        relation = ours.relation_to(value)
        if relation == "within noise of":
            return f"our {what}, {ours.estimate:.3f} (95% interval {ours.range_text()}), is within noise of theirs ({value:.3f})"
        return (f"our {what}, {ours.estimate:.3f} (95% interval {ours.range_text()}), "
                f"is {relation} theirs ({value:.3f})")

    return {
        "ch08_t4_lam": f"{lam:g}",
        "ch08_t4_lam_wp": f"{lam / scale:g}",
        "ch08_t4_paper_lam": f"{theirs['lambda']:g}",
        "ch08_t4_paper_lam_ours": f"{theirs['lambda'] * scale:g}",
        "ch08_t4_tvd": words(tvd, theirs["tvd"], "mean TVD"),
        "ch08_t4_jsd": words(jsd, theirs["jsd"], "mean JSD"),
    }
