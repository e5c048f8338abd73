"""attnlib.presentation.readings.ch05: Chapter 5's readings on small hand-made results."""
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib.experiments import counterfactual
from attnlib.presentation.readings import ch05

CLASSES = ("negative", "positive")


def result(jsd, predicted, indices=None):
    jsd, predicted = np.asarray(jsd, dtype=float), np.asarray(predicted)
    idx = np.arange(len(jsd)) if indices is None else np.asarray(indices)
    return SimpleNamespace(eps_max_jsd=jsd, predicted=predicted, indices=idx,
                           max_attention=np.full(len(jsd), 0.3))


def fractions_of(results):
    return pd.concat(
        {f"{e}+tanh": counterfactual.fraction_very_different(r, classes=list(CLASSES))
         for e, r in results.items()},
        names=["model"],
    )


def hits_by_class(n0_hit, n0, n1_hit, n1):
    """A result with n0 sentences predicted 0 (n0_hit of them very different), n1 predicted 1."""
    jsd = [0.6] * n0_hit + [0.1] * (n0 - n0_hit) + [0.6] * n1_hit + [0.1] * (n1 - n1_hit)
    return result(jsd, [0] * n0 + [1] * n1)


# ----------------------------------------------------------------------------- counts
def test_counts_reads_totals_and_class_fractions():
    results = {"lstm": hits_by_class(3, 4, 1, 6), "cnn": hits_by_class(0, 5, 5, 5)}
    out = ch05.counts(fractions_of(results), list(results), eps=0.01)
    assert out["ch05_ln2"] == pytest.approx(np.log(2))
    assert (out["ch05_lstm_n"], out["ch05_lstm_n_vd"]) == (10, 4)
    assert out["ch05_lstm_frac"] == pytest.approx(0.4)
    assert out["ch05_lstm_negative"] == pytest.approx(0.75)
    assert out["ch05_lstm_positive"] == pytest.approx(1 / 6)
    assert (out["ch05_cnn_n_vd"], out["ch05_cnn_positive"]) == (5, 1.0)
    assert out["ch05_eps"] == 0.01
    assert isinstance(out["ch05_lstm_n"], int) and isinstance(out["ch05_lstm_frac"], float)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 0.69), st.integers(0, 1)), min_size=1, max_size=40))
def test_counts_fraction_is_hits_over_n(rows):
    jsd, predicted = zip(*rows)
    r = result(jsd, predicted)
    out = ch05.counts(fractions_of({"lstm": r}), ["lstm"], eps=0.05)
    hits = int((np.asarray(jsd) >= counterfactual.VERY_DIFFERENT_JSD).sum())
    assert out["ch05_lstm_n"] == len(rows) and out["ch05_lstm_n_vd"] == hits
    assert out["ch05_lstm_frac"] == hits / len(rows)


def test_counts_rejects_a_frame_without_its_columns():
    with pytest.raises(ValueError, match="class"):
        ch05.counts(pd.DataFrame({"n": [1], "n_very_different": [0], "fraction": [0.0]}),
                    ["lstm"], eps=0.01)


# ----------------------------------------------------------------------------- against the paper
def table(fr, lo, hi, n=(100, 100)):
    return pd.DataFrame({"fraction": fr, "low": lo, "high": hi, "n": n}, index=[0, 1])


PAPER = {0: SimpleNamespace(value=0.50), 1: SimpleNamespace(value=0.54)}


def test_against_paper_both_classes_alike():
    ours = {0.01: table([0.3, 0.3], [0.2, 0.2], [0.4, 0.4]),
            0.05: table([0.52, 0.5], [0.45, 0.45], [0.6, 0.6])}
    out = ch05.against_paper(ours, PAPER, eps=0.01, paper_eps=0.05, classes=CLASSES)
    assert out["ch05_paper_eps"] == 0.05
    assert (out["ch05_pe_neg"], out["ch05_pe_pos"]) == (0.52, 0.5)
    assert out["ch05_pe_vs_paper"] == "within noise of theirs for both classes"
    assert out["ch05_run_vs_paper"] == "below theirs for both classes"
    assert out["ch05_against_paper"] == ("At 0.05 ours are 0.520 and 0.500, within noise of theirs for both "
                                         "classes; at 0.01 they are 0.300 and 0.300, below theirs for both classes.")
    same = ch05.against_paper({0.01: ours[0.01], 0.05: ours[0.01]}, PAPER, eps=0.01, paper_eps=0.05,
                              classes=CLASSES)
    assert same["ch05_against_paper"] == ("At 0.05 ours are 0.300 and 0.300, and at 0.01 0.300 and 0.300: "
                                          "below theirs for both classes at either ε.")


def test_against_paper_classes_apart():
    ours = {0.01: table([0.7, 0.3], [0.6, 0.2], [0.8, 0.4])}
    out = ch05.against_paper(ours, PAPER, eps=0.01, paper_eps=0.01, classes=CLASSES)
    assert out["ch05_run_vs_paper"] == (
        "above theirs for sentences predicted negative and below theirs for those "
        "predicted positive"
    )


def test_against_paper_needs_both_eps():
    with pytest.raises(ValueError, match="eps = 0.05"):
        ch05.against_paper({0.01: table([0.3, 0.3], [0.2, 0.2], [0.4, 0.4])}, PAPER,
                           eps=0.01, paper_eps=0.05, classes=CLASSES)


# ----------------------------------------------------------------------------- class split
@pytest.mark.parametrize(
    "lstm, start",
    [
        (hits_by_class(90, 100, 10, 100), "the adversary succeeds more often on the BiLSTM's "
         "sentences predicted negative than on those predicted positive, and the gap (+0.800"),
        (hits_by_class(10, 100, 90, 100), "the adversary succeeds less often on the BiLSTM's "
         "sentences predicted negative than on those predicted positive, and the gap (-0.800"),
        (hits_by_class(50, 100, 50, 100), "the gap between the BiLSTM's two classes (0.000"),
    ],
)
def test_class_split_reads_the_verdict(lstm, start):
    text = ch05.class_split({"lstm": lstm}, classes=CLASSES)["ch05_lstm_class_split"]
    assert text.startswith(start)
    assert text.endswith("is beyond noise") or text.endswith("finds easier")


def test_class_split_needs_the_bilstm():
    with pytest.raises(ValueError, match="lstm"):
        ch05.class_split({"cnn": hits_by_class(1, 2, 1, 2)}, classes=CLASSES)


# ----------------------------------------------------------------------------- other models
def test_other_models_against_the_bilstm():
    results = {"lstm": hits_by_class(10, 100, 10, 100), "cnn": hits_by_class(90, 100, 30, 100),
               "average": hits_by_class(10, 100, 10, 100)}
    out = ch05.other_models(results, fractions_of(results), classes=CLASSES)
    assert out["ch05_others_vs_lstm"] == (
        "on 120 of 200 sentences with the CNN (0.60), more often than with the BiLSTM and "
        "20 of 200 sentences with the Average model (0.10), as often as with the BiLSTM, within "
        "noise; with the BiLSTM, 20 of 200 (0.10)"
    )
    assert out["ch05_others_classes"] == (
        "the CNN: 0.900 predicted negative, 0.300 predicted positive (more often on predicted "
        "negative); the Average model: 0.100 predicted negative, 0.100 predicted positive "
        "(the classes within noise)"
    )


def test_other_models_less_often_and_the_other_class():
    results = {"lstm": hits_by_class(90, 100, 90, 100), "cnn": hits_by_class(5, 100, 60, 100)}
    out = ch05.other_models(results, fractions_of(results), classes=CLASSES)
    assert out["ch05_others_vs_lstm"] == (
        "on 65 of 200 sentences with the CNN (0.33), against 180 of 200 (0.90) with the BiLSTM: less often "
        "than with the BiLSTM")
    alike = {"lstm": hits_by_class(10, 100, 10, 100), "cnn": hits_by_class(11, 100, 10, 100),
             "average": hits_by_class(10, 100, 11, 100)}
    assert ch05.other_models(alike, fractions_of(alike), classes=CLASSES)["ch05_others_vs_lstm"] == (
        "on 21 of 200 sentences with the CNN (0.10) and 21 of 200 sentences with the Average model (0.10), "
        "against 20 of 200 (0.10) with the BiLSTM: each as often as with the BiLSTM, within noise")
    assert out["ch05_others_classes"].endswith("(more often on predicted positive)")


# ----------------------------------------------------------------------------- bins
def frame(values, max_attention, predicted):
    return counterfactual.bin_by_max_attention(values, max_attention, predicted=np.asarray(predicted))


def test_bins_counts_and_line():
    f_lstm = frame([0.6, 0.6, 0.6, 0.1], [0.1, 0.9, 0.95, 0.6], [0, 0, 1, 1])
    f_cnn = frame([0.6, 0.6], [0.1, 0.3], [0, 0])
    out = ch05.bins({"a": f_lstm, "b": f_cnn}, ["lstm", "cnn"], classes=CLASSES, threshold=0.49)
    assert (out["ch05_lstm_top"], out["ch05_lstm_bottom"]) == (2, 1)
    assert out["ch05_line"] == (
        "the BiLSTM: predicted negative in both non-empty bins, predicted positive in 1 "
        "of the 2 non-empty bins (below it in [0.5, 0.75)); the CNN: predicted negative in both "
        "non-empty bins"
    )


def test_bins_needs_one_frame_per_encoder():
    with pytest.raises(ValueError, match="one per encoder"):
        ch05.bins({"a": frame([0.6], [0.1], [0])}, ["lstm", "cnn"], classes=CLASSES,
                  threshold=0.49)


# ----------------------------------------------------------------------------- last shown
@pytest.mark.parametrize("jsd, side", [(0.3, "falls below"), (0.49, "still reaches")])
def test_last_shown(jsd, side):
    out = ch05.last_shown(result([0.6, 0.5, jsd], [0, 0, 1]), [0, 2], threshold=0.49)
    assert out == {"ch05_last_jsd": jsd, "ch05_last_side": side}
