"""What Chapter 6 (uniform baselines) reads off its run, for the prose to quote.

Each function takes the chapter's results (the table of trained and uniform models, the
F1 gaps, the dilution curve) and returns ``{glued name: value}`` for
:func:`attnlib.presentation.glue.glue_all`.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ... import uncertainty
from .wording import ENCODER_NAMES, require_columns

__all__ = [
    "DATASET_KEYS",
    "ahead",
    "dilution",
    "imdb",
    "long_task",
    "rt_polarity",
    "scores",
    "with_intervals",
]

#: The short name each data set's glued numbers carry (``ch06_rt_f1_t``...).
DATASET_KEYS = {"rt-polarity": "rt", "imdb": "imdb", "synthetic": "syn", "synthetic-long": "long"}
_METRICS = {"F1": "f1", "accuracy": "acc", "ROC-AUC": "auc"}
_TABLE_COLUMNS = ["dataset", "encoder", "attention", *_METRICS]


def with_intervals(table: pd.DataFrame, comparisons, *, seed: int = 0) -> pd.DataFrame:
    """The comparison table to show: our F1 with its 95% bootstrap interval over the test
    sentences ("0.764 [0.735, 0.792]"; the plain F1 where a comparison kept no predictions,
    e.g. more than two classes), accuracy, ROC-AUC and W&P's F1, indexed by (dataset,
    encoder, attention).

    table: the chapter's table (the comparisons' frames, concatenated); comparisons: data set
    name -> :class:`attnlib.baselines.UniformComparison` (its ``labels`` and ``predicted``).
    """
    require_columns(table, [*_TABLE_COLUMNS, "F1 (W&P)"], "table")
    cells = []
    for row in table.itertuples(index=False):
        c = comparisons.get(row.dataset) if isinstance(comparisons, Mapping) else None
        if c is None:
            raise ValueError(f"comparisons has no entry for the table's data set {row.dataset!r}")
        predicted = c.predicted.get((row.encoder, row.attention))
        cells.append(f"{row.F1:.3f}" if predicted is None
                     else uncertainty.f1(c.labels, predicted, seed=seed).format(3))
    shown = table.assign(F1=cells).rename(columns={"F1": "F1 [95% interval]"})
    return shown.set_index(["dataset", "encoder", "attention"])


def ahead(a: float, b: float, more: str = "ahead", less: str = "behind") -> str:
    """``more`` when a > b, ``less`` when a < b, ``"level"`` when equal."""
    return more if a > b else less if a < b else "level"


def _by_dataset(table: pd.DataFrame, datasets: Sequence[str] = ()) -> pd.DataFrame:
    missing = [c for c in _TABLE_COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"table has no column {', '.join(map(repr, missing))}")
    absent = [d for d in datasets if d not in set(table["dataset"])]
    if absent:
        raise ValueError(f"table has no rows for {', '.join(map(repr, absent))}")
    return table.set_index(["dataset", "attention"])


def _check_gaps(gaps: pd.DataFrame) -> None:
    for c in ("F1 gap (ours)", "low", "high", "F1 gap (W&P)"):
        if c not in gaps.columns:
            raise ValueError(f"gaps has no column {c!r} (UniformComparison.gap() gives it)")


def _gap_interval(gaps: pd.DataFrame, dataset: str) -> uncertainty.Interval:
    """Our F1 gap on ``dataset`` with its 95% interval (the paired bootstrap of ``gap()``)."""
    row = gaps.loc[dataset].iloc[0]
    return uncertainty.Interval(float(row["F1 gap (ours)"]), float(row["low"]), float(row["high"]), 0)




def scores(table: pd.DataFrame, gaps: pd.DataFrame) -> dict[str, Any]:
    """Every data set's F1, accuracy and ROC-AUC with trained and uniform attention, and its gap.

    table: the chapter's ``table`` (one row per data set, encoder and attention ``trained`` /
    ``uniform``; columns F1, accuracy, ROC-AUC), one encoder per data set; gaps: the F1 gaps,
    indexed by (dataset, encoder), column ``F1 gap (ours)``.
    """
    t = _by_dataset(table, list(DATASET_KEYS))
    _check_gaps(gaps)
    out: dict[str, Any] = {}
    for d, key in DATASET_KEYS.items():
        for m, short in _METRICS.items():
            for a in ("trained", "uniform"):
                out[f"ch06_{key}_{short}_{a[0]}"] = float(t.loc[(d, a), m])
        out[f"ch06_{key}_gap"] = float(gaps.loc[d, "F1 gap (ours)"].iloc[0])
        out[f"ch06_{key}_gap_ci"] = _gap_interval(gaps, d).range_text()
    return out


def rt_polarity(table: pd.DataFrame, gaps: pd.DataFrame, *, accuracy_change) -> dict[str, Any]:
    """On rt-polarity: the F1 gap in points, its direction, where the paper's gap falls against our
    interval (``ch06_rt_vs_paper``: "above", "below" or "within noise of"), and whether the
    uniform model's accuracy is ahead, behind or level within noise.

    table, gaps: as for :func:`scores` (gaps also with ``F1 gap (W&P)``); accuracy_change:
    :meth:`attnlib.baselines.UniformComparison.accuracy_change` (uniform minus trained, paired
    over the test sentences).
    """
    t = _by_dataset(table, ["rt-polarity"])
    _check_gaps(gaps)
    rt = t.loc["rt-polarity"]
    rt_gap = float(gaps.loc["rt-polarity", "F1 gap (ours)"].iloc[0])
    wp_gap = float(gaps.loc["rt-polarity", "F1 gap (W&P)"].iloc[0])
    out: dict[str, Any] = {
        "ch06_rt_gap_pts": 100 * abs(rt_gap),
        "ch06_rt_f1_dir": ahead(rt.loc["uniform", "F1"], rt.loc["trained", "F1"], "above", "below"),
        "ch06_rt_vs_paper": _gap_interval(gaps, "rt-polarity").relation_to(wp_gap),
    }
    out["ch06_rt_acc_dir"] = accuracy_change.says("ahead beyond noise", "behind beyond noise", "level within noise")
    out["ch06_rt_acc_ci"] = accuracy_change.difference.range_text()
    return out


def imdb(table: pd.DataFrame, gaps: pd.DataFrame, *, encoder: str) -> dict[str, Any]:
    """On IMDB: which encoder ran, and whether its F1 gap (trained minus uniform) is beyond noise
    (``ch06_imdb_gap_verdict``: "within noise", or "beyond noise" when our interval excludes 0).

    table, gaps: as for :func:`scores`; encoder: the IMDB encoder (``"lstm"``, ``"cnn"``,
    ``"average"``).
    """
    if encoder not in ENCODER_NAMES:
        raise ValueError(f"encoder must be one of {list(ENCODER_NAMES)}, got {encoder!r}")
    _by_dataset(table, ["imdb"])
    _check_gaps(gaps)
    within = _gap_interval(gaps, "imdb").contains(0.0)
    return {"ch06_imdb_enc": ENCODER_NAMES[encoder],
            "ch06_imdb_gap_verdict": "within noise" if within else "beyond noise"}


def long_task(table: pd.DataFrame, *, predicted, labels) -> dict[str, Any]:
    """The synthetic tasks: whether averaging costs F1 on the short one, and on the long one the
    uniform model's share of positive calls, the F1 of calling all positive, the accuracy gap.

    table: as for :func:`scores`; predicted: the uniform long-task model's predicted class per
    test sentence; labels: the long task's test labels.
    """
    predicted, labels = np.asarray(predicted), np.asarray(labels)
    if predicted.shape != labels.shape or predicted.ndim != 1:
        raise ValueError(
            "predicted and labels must be 1-d of one length, "
            f"got {predicted.shape} and {labels.shape}"
        )
    t = _by_dataset(table, ["synthetic", "synthetic-long"])
    pos_rate = float(np.mean(labels == 1))
    sy = t.loc["synthetic", "F1"]
    lo = t.loc["synthetic-long"]
    acc_gap = float(lo.loc["trained", "accuracy"] - lo.loc["uniform", "accuracy"])
    return {
        "ch06_long_predpos": float(np.mean(predicted == 1)),
        "ch06_allpos_f1": 2 * pos_rate / (1 + pos_rate),
        "ch06_syn_clause": "its 1–5 markers among 10–40 words survive averaging"
        if sy["uniform"] >= sy["trained"] - 0.01
        else "averaging costs it F1 even here",
        "ch06_long_acc_gap": acc_gap,
        "ch06_long_needed": "Here attention is needed."
        if acc_gap > 0.1
        else "Even here, in this run, uniform attention nearly keeps up.",
    }


def dilution(curve: pd.DataFrame, models: Sequence[str]) -> dict[str, Any]:
    """The dilution probe: the attention model's weight on the marker and its p(positive), and
    the uniform model's p(positive), over the lengths.

    curve: :func:`~attnlib.experiments.baselines.dilution_curve` (lengths 10, 150, 300 and
    50 on among them); models: the curve's model names, one with "tanh" in it, one with
    "uniform".
    """
    for c in ("model", "length", "p(positive)", "attention on marker"):
        if c not in curve.columns:
            raise ValueError(f"curve has no column {c!r}")
    names = list(models)
    try:
        tanh_name = next(n for n in names if "tanh" in n)
        uni_name = next(n for n in names if "uniform" in n)
    except StopIteration:
        raise ValueError(f"models must name a tanh and a uniform model, got {names}") from None
    tc, uc = (curve[curve.model == n].set_index("length") for n in (tanh_name, uni_name))
    out: dict[str, Any] = {}
    for n in (10, 150, 300):
        out[f"ch06_dil_att_{n}"] = float(tc.loc[n, "attention on marker"])
    p_lo, p_hi = tc["p(positive)"].min(), tc["p(positive)"].max()
    out["ch06_dil_t_p"] = (
        f"stays at {p_lo:.2f}"
        if p_hi - p_lo < 0.005
        else f"stays between {p_lo:.2f} and {p_hi:.2f}"
    )
    out["ch06_dil_u_p10"] = float(uc.loc[10, "p(positive)"])
    out["ch06_dil_u_lo"] = float(uc.loc[50:, "p(positive)"].min())
    out["ch06_dil_u_hi"] = float(uc.loc[50:, "p(positive)"].max())
    return out
