"""Chapter 4's readings (attnlib.presentation.readings.ch04) on small hand-made frames."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib import counterfactual
from attnlib.presentation.readings import ch04

BINS = ["[0, 0.25)", "[0.25, 0.5)", "[0.5, 0.75)", "[0.75, 1]"]
NAN = math.nan


def _summary(rows):
    frame = pd.DataFrame.from_dict(rows, orient="index", columns=BINS)
    frame.index = pd.MultiIndex.from_tuples(frame.index, names=["dataset", "model"])
    frame.columns.name = "bin"
    return frame


def test_bilstm_inside_above_and_growing():
    s = _summary({("rt-polarity", "lstm+tanh"): [0.05, 0.08, 0.15, NAN]})
    out = ch04.bilstm(s, low=0.02, high=0.10)
    assert (out["ch04_lstm_min"], out["ch04_lstm_max"]) == (0.05, 0.15)
    assert math.isnan(out["ch04_lstm_top"])  # the top bin is empty
    assert out["ch04_lstm_vs_paper"] == "2 of the 3 non-empty bins lie inside that range, 1 above it"
    assert out["ch04_lstm_trend"] == (
        "grow steadily as attention gets more peaked, from the lowest bin to the top one"
    )


def test_bilstm_below_and_not_growing():
    s = _summary({("rt-polarity", "lstm+tanh"): [0.01, 0.20, 0.08, 0.05]})
    out = ch04.bilstm(s, low=0.02, high=0.10)
    assert out["ch04_lstm_top"] == 0.05
    assert out["ch04_lstm_vs_paper"] == (
        "2 of the 4 non-empty bins lie inside that range, 1 above it, 1 below it"
    )
    assert out["ch04_lstm_trend"] == (
        "do not grow steadily with the peak: the largest is in the bin [0.25, 0.5), "
        "the smallest in [0, 0.25)"
    )
    inside = ch04.bilstm(
        _summary({("rt-polarity", "lstm+tanh"): [0.03, 0.04, NAN, NAN]}), low=0.02, high=0.10
    )
    assert inside["ch04_lstm_vs_paper"] == "both non-empty bins lie inside that range"


def test_bilstm_needs_the_rt_polarity_bilstm():
    with pytest.raises(ValueError, match="lstm\\+tanh"):
        ch04.bilstm(_summary({("imdb", "cnn+tanh"): [0.1] * 4}), low=0.02, high=0.10)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.one_of(st.floats(0, 1), st.just(NAN)), min_size=4, max_size=4).filter(
        lambda v: not all(math.isnan(x) for x in v)
    )
)
def test_bilstm_counts_every_non_empty_bin_once(values):
    out = ch04.bilstm(_summary({("rt-polarity", "lstm+tanh"): values}), low=0.02, high=0.10)
    text = out["ch04_lstm_vs_paper"]
    head, _, tail = text.partition(" non-empty bins lie inside that range")
    m = re.fullmatch(r"none of the (\d+)|all (\d+)|(both)|(\d+) of the (\d+)", head)
    assert m is not None, text
    none, every, both, k, n = m.groups()
    n_in, n_all = ((0, int(none)) if none else (int(every), int(every)) if every else (2, 2) if both
                   else (int(k), int(n)))
    rest = [int(w) for w in tail.replace(",", " ").split() if w.isdigit()]
    assert n_all == sum(not math.isnan(v) for v in values)
    assert n_in + sum(rest) == n_all


def _frame(values, max_attention, predicted):
    return counterfactual.bin_by_max_attention(values, max_attention, predicted=np.array(predicted))


def _frames():
    return {
        ("rt-polarity", "lstm"): _frame([0.3, 0.5, 0.1, 0.2], [0.1, 0.6, 0.1, 0.8], [1, 1, 0, 0]),
        ("rt-polarity", "cnn"): _frame([0.3, 0.5, 0.1, 0.2], [0.1, 0.6, 0.1, 0.8], [0, 0, 1, 1]),
        ("imdb", "cnn"): _frame([0.1, 0.9], [0.3, 0.3], [0, 1]),
        ("imdb", "average"): _frame([0.1, 0.6], [0.3, 0.9], [0, 1]),
    }


CLASSES = {"rt-polarity": ("neg", "pos"), "imdb": ("neg", "pos")}


def test_class_medians_names_the_classes():
    overall, by_bin = ch04.class_medians(_frames()[("rt-polarity", "lstm")], ("neg", "pos"))
    assert overall.to_dict() == {"neg": pytest.approx(0.15), "pos": pytest.approx(0.4)}
    assert by_bin["pos"].tolist() == [0.3, 0.5] and by_bin["neg"].tolist() == [0.1, 0.2]
    with pytest.raises(ValueError, match="predicted"):
        ch04.class_medians(pd.DataFrame({"value": [0.1], "bin": ["a"]}), ("neg", "pos"))


def test_by_class_reads_which_class_moves_more():
    out = ch04.by_class(_frames(), CLASSES)
    assert out["ch04_lstm_class"] == (
        "the sentences it predicts pos move more than those it predicts neg: a median of "
        "0.400 against 0.150 over all bins, and 0.30 to 0.50 against 0.10 to 0.20 bin by bin"
    )
    assert out["ch04_class_more"] == (
        "the sentences predicted neg move more for the rt-polarity CNN; the sentences "
        "predicted pos move more for the IMDB CNN, the IMDB Average model"
    )
    assert (
        out["ch04_imdb_avg_classes"] == "0.100 for reviews predicted neg and 0.600 for reviews predicted pos"
    )


def test_by_class_when_negative_moves_more_for_the_bilstm():
    frames = _frames()
    frames[("rt-polarity", "lstm")] = _frame([0.9, 0.5, 0.1, 0.2], [0.1, 0.6, 0.1, 0.8], [0, 0, 1, 1])
    out = ch04.by_class(frames, CLASSES)
    assert out["ch04_lstm_class"].startswith(
        "the sentences it predicts neg move more than those it predicts pos"
    )
    del frames[("imdb", "average")]
    with pytest.raises(ValueError, match="imdb"):
        ch04.by_class(frames, CLASSES)


def _encoder_summary():
    return _summary(
        {
            ("imdb", "average+tanh"): [0.4, 0.6, NAN, NAN],
            ("imdb", "cnn+tanh"): [0.1, 0.2, 0.3, 0.35],
            ("rt-polarity", "average+tanh"): [0.20, 0.30, NAN, NAN],
            ("rt-polarity", "cnn+tanh"): [0.10, 0.05, 0.30, 0.40],
            ("rt-polarity", "lstm+tanh"): [0.05, 0.10, 0.20, NAN],
        }
    )


def test_encoders_against_the_bilstm_in_the_chapters_order():
    keys = [
        ("rt-polarity", "lstm"),
        ("rt-polarity", "cnn"),
        ("rt-polarity", "average"),
        ("imdb", "cnn"),
        ("imdb", "average"),
    ]
    out = ch04.encoders(_encoder_summary(), keys)
    assert out["ch04_rt_vs_lstm"] == (
        "the CNN's median is above the BiLSTM's in 2 of the 3 bins the two share and the "
        "Average model's median is above the BiLSTM's in both bins the two share"
    )
    assert (out["ch04_rt_others_lo"], out["ch04_rt_others_hi"]) == (0.05, 0.40)
    assert out["ch04_imdb_ranges"] == "0.400 to 0.600 (Average model) and 0.100 to 0.350 (CNN)"
    swapped = ch04.encoders(_encoder_summary(), [keys[0], keys[2], keys[1]])
    assert swapped["ch04_rt_vs_lstm"].startswith("the Average model's median")
