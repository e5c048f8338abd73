"""Chapter 4's readings: how far permuting attention moves the output, by max-attention bin.

The functions read the chapter's ``summary`` (index (dataset, "encoder+tanh"), one column per
max-attention bin: the median over instances of the median output change, NaN for an empty
bin) and its ``frames`` ((dataset, encoder) -> :func:`attnlib.counterfactual.bin_by_max_attention`
frame with the columns ``value``, ``bin`` and ``predicted``). Each returns ``{glued name:
value}`` for :func:`attnlib.presentation.glue.glue_all`.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .wording import ENCODER_NAMES, some_of

__all__ = ["bilstm", "by_class", "class_medians", "encoders"]

_LSTM = ("rt-polarity", "lstm+tanh")


def _check_summary(summary: pd.DataFrame) -> None:
    if _LSTM not in summary.index:
        raise ValueError(f"summary needs the row {_LSTM}, has {list(summary.index)}")


def bilstm(summary: pd.DataFrame, *, low: float, high: float) -> dict[str, Any]:
    """Reads the BiLSTM's medians on rt-polarity: range, top bin, the paper's range, trend.

    ``summary``: the chapter's medians by bin; ``low``, ``high``: the range read from J&W's
    Figure 6 (``published.PERMUTATION_SST_RANGE``).
    """
    _check_summary(summary)
    lstm = summary.loc[_LSTM].dropna()
    where = {
        "inside it": ((lstm >= low) & (lstm <= high)).sum(),
        "above it": (lstm > high).sum(),
        "below it": (lstm < low).sum(),
    }
    n_in = where["inside it"]
    extra = "".join(f", {n} {w}" for w, n in list(where.items())[1:] if n)
    return {
        "ch04_lstm_min": float(lstm.min()),
        "ch04_lstm_max": float(lstm.max()),
        "ch04_lstm_top": float(summary.loc[_LSTM].iloc[-1]),
        "ch04_lstm_vs_paper": f"{some_of(n_in, len(lstm), 'non-empty bins')} lie inside that "
        f"range{extra}",
        "ch04_lstm_trend": "grow steadily as attention gets more peaked, from the lowest bin "
        "to the top one"
        if lstm.is_monotonic_increasing
        else "do not grow steadily "
        f"with the peak: the largest is in the bin {lstm.idxmax()}, the smallest in "
        f"{lstm.idxmin()}",
    }


def class_medians(frame: pd.DataFrame, classes: Sequence[str]) -> tuple[pd.Series, pd.Series]:
    """One model's median output change per predicted class, over all bins and bin by bin.

    ``frame``: its ``bin_by_max_attention`` frame; ``classes``: the class names, by index.
    Returns (class name -> median, (class name, bin) -> median over the non-empty bins).
    """
    missing = {"value", "bin", "predicted"} - set(frame.columns)
    if missing:
        raise ValueError(f"frame lacks the column(s) {sorted(missing)}")
    overall = frame.groupby("predicted")["value"].median().rename(lambda c: classes[c])
    by_bin = frame.groupby(["predicted", "bin"], observed=True)["value"].median()
    return overall, by_bin.rename(lambda c: classes[c], level=0)


def by_class(
    frames: Mapping[tuple[str, str], pd.DataFrame], classes: Mapping[str, Sequence[str]]
) -> dict[str, Any]:
    """Reads the split by predicted class: the BiLSTM's, which class moves more for the
    other models, and the IMDB Average model's class medians.

    ``frames``: (dataset, encoder) -> ``bin_by_max_attention`` frame, in the chapter's order
    (rt-polarity's lstm and IMDB's average among them); ``classes``: dataset -> class names.
    """
    for key in (("rt-polarity", "lstm"), ("imdb", "average")):
        if key not in frames:
            raise ValueError(f"frames needs {key}, has {list(frames)}")
    overall, by_bin = class_medians(frames[("rt-polarity", "lstm")], classes["rt-polarity"])
    more, less = overall.idxmax(), overall.idxmin()
    side: dict[str, list[str]] = {}
    for key, frame in frames.items():
        if key[1] != "lstm":
            moves_more = class_medians(frame, classes[key[0]])[0].idxmax()
            where_ = key[0].replace("imdb", "IMDB")
            side.setdefault(moves_more, []).append(f"{where_} {ENCODER_NAMES[key[1]]}")
    imdb_avg = class_medians(frames[("imdb", "average")], classes["imdb"])[0]
    return {
        "ch04_lstm_class": f"the sentences it predicts {more} move more than those it "
        f"predicts {less}: a median of {overall[more]:.3f} against {overall[less]:.3f} "
        "over "
        f"all bins, and {by_bin[more].min():.2f} to {by_bin[more].max():.2f} against "
        f"{by_bin[less].min():.2f} to {by_bin[less].max():.2f} bin by bin",
        "ch04_class_more": "; ".join(
            f"the sentences predicted {c} move more for the " + ", the ".join(v)
            for c, v in side.items()
        ),
        "ch04_imdb_avg_classes": " and ".join(
            f"{v:.3f} for reviews predicted {c}" for c, v in imdb_avg.items()
        ),
    }


def encoders(summary: pd.DataFrame, keys: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """Reads the CNN and Average encoders against the BiLSTM, on rt-polarity and IMDB.

    ``summary``: the chapter's medians by bin; ``keys``: the (dataset, encoder) of its
    models, in the chapter's order (the prose names rt-polarity's encoders in that order).
    """
    _check_summary(summary)
    others = [e for d, e in keys if d == "rt-polarity" and e != "lstm"]
    above = {e: (summary.loc[("rt-polarity", f"{e}+tanh")] > summary.loc[_LSTM]) for e in others}
    shared = {
        e: summary.loc[[("rt-polarity", f"{e}+tanh"), _LSTM]].notna().all().sum() for e in others
    }
    rest = summary.loc[[("rt-polarity", f"{e}+tanh") for e in others]]
    return {
        "ch04_rt_vs_lstm": " and ".join(
            f"the {ENCODER_NAMES[e]}'s median is above the BiLSTM's in "
            f"{some_of(above[e].sum(), shared[e], 'bins the two share')}"
            for e in others
        ),
        "ch04_rt_others_lo": float(np.nanmin(rest.values)),
        "ch04_rt_others_hi": float(np.nanmax(rest.values)),
        "ch04_imdb_ranges": " and ".join(
            f"{np.nanmin(s):.3f} to {np.nanmax(s):.3f} ({ENCODER_NAMES[m.split('+')[0]]})"
            for (d, m), s in summary.iterrows()
            if d == "imdb"
        ),
    }
