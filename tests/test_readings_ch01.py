"""Chapter 1's readings (attnlib.presentation.readings.ch01) on small hand-made results."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib import uncertainty
from attnlib.presentation.readings import ch01


def _model(f1, auc, dev_auc, epoch, accuracy=0.8):
    return SimpleNamespace(
        test={"f1": f1, "roc_auc": auc, "accuracy": accuracy, "n": 10},
        dev={"roc_auc": dev_auc},
        best_epoch=epoch,
    )


def _models():
    return {
        "lstm": _model(0.70, 0.85, 0.86, 3),
        "cnn": _model(0.75, 0.80, 0.90, 5),
        "average": _model(0.65, 0.88, 0.84, 8),
    }


def test_comparison_reads_the_spread_the_gap_and_the_epochs():
    out = ch01.comparison(_models(), paper_f1=0.78, rebuttal_f1=0.795)
    assert out["ch01_paper_f1"] == 0.78 and out["ch01_wp_f1"] == 0.795
    assert out["ch01_gap_abs"] == pytest.approx(0.08)
    assert "ch01_gap_dir" not in out  # the direction is read against our interval (f1_beside_paper)
    assert (out["ch01_f1_min"], out["ch01_f1_max"]) == (0.65, 0.75)
    assert (out["ch01_f1_best"], out["ch01_f1_worst"]) == ("CNN", "Average")
    assert (out["ch01_auc_min"], out["ch01_auc_max"], out["ch01_auc_best"]) == (0.80, 0.88, "Average")
    assert (out["ch01_devauc_best"], out["ch01_devauc_best_v"]) == ("CNN", 0.90)
    assert (out["ch01_epoch_lstm"], out["ch01_epoch_cnn"], out["ch01_epoch_average"]) == (3, 5, 8)
    assert all(isinstance(out[f"ch01_epoch_{e}"], int) for e in ("lstm", "cnn", "average"))


def test_comparison_gives_the_size_of_the_gap_either_way():
    out = ch01.comparison(_models(), paper_f1=0.60, rebuttal_f1=0.795)
    assert out["ch01_gap_abs"] == pytest.approx(0.10)


def test_comparison_gap_is_the_paper_minus_ours_as_the_chapter_computes_it():
    models = _models()
    out = ch01.comparison(models, paper_f1=0.8, rebuttal_f1=0.8)
    assert out["ch01_gap_abs"] == abs(0.8 - models["lstm"].test["f1"])


def test_comparison_needs_the_bilstm_and_known_encoders():
    models = _models()
    with pytest.raises(ValueError, match="lstm"):
        ch01.comparison({"cnn": models["cnn"]}, paper_f1=0.8, rebuttal_f1=0.8)
    with pytest.raises(ValueError, match="unknown"):
        ch01.comparison({**models, "gru": models["cnn"]}, paper_f1=0.8, rebuttal_f1=0.8)


def test_scores_table_puts_the_two_published_rows_after_ours():
    table = ch01.scores_table(_models(), "rt-polarity", paper_f1=0.78, rebuttal_f1=0.795)
    assert list(table.index) == [
        ("lstm + tanh", "rt-polarity"),
        ("cnn + tanh", "rt-polarity"),
        ("average + tanh", "rt-polarity"),
        ("lstm + tanh", "SST (Jain & Wallace 2019)"),
        ("lstm + tanh", "SST (Wiegreffe & Pinter 2019)"),
    ]
    assert list(table.columns) == ["test accuracy", "test F1", "test ROC-AUC"]
    assert table["test F1"].tolist() == [0.70, 0.75, 0.65, 0.78, 0.795]
    assert np.isnan(table.loc[("lstm + tanh", "SST (Jain & Wallace 2019)"), "test accuracy"])


def test_threshold_counts_misses_and_false_alarms_both_ways():
    labels = [1, 1, 1, 0, 0, 0]
    more = ch01.threshold({"f1": 0.5, "accuracy": 0.6}, [0, 0, 1, 0, 1, 0], labels)
    assert (more["ch01_fn"], more["ch01_fp"], more["ch01_fn_vs_fp"]) == (2, 1, "more")
    assert more["ch01_f1_vs_acc"] == "below"
    fewer = ch01.threshold({"f1": 0.7, "accuracy": 0.6}, [1, 1, 1, 1, 1, 0], labels)
    assert (fewer["ch01_fn"], fewer["ch01_fp"], fewer["ch01_fn_vs_fp"]) == (0, 2, "fewer")
    assert fewer["ch01_f1_vs_acc"] == "above"
    same = ch01.threshold({"f1": 0.6, "accuracy": 0.6}, [0, 1, 1, 1, 0, 0], labels)
    assert (same["ch01_fn"], same["ch01_fp"], same["ch01_fn_vs_fp"]) == (1, 1, "as many")
    assert same["ch01_f1_vs_acc"] == "above"  # equal is not below
    with pytest.raises(ValueError, match="shape"):
        ch01.threshold({"f1": 0.6, "accuracy": 0.6}, [0, 1], labels)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1)), min_size=1, max_size=40))
def test_threshold_misses_and_false_alarms_are_the_errors(pairs):
    predicted, labels = zip(*pairs)
    out = ch01.threshold({"f1": 0.5, "accuracy": 0.5}, predicted, labels)
    assert out["ch01_fn"] + out["ch01_fp"] == sum(p != y for p, y in pairs)


def test_captions_name_the_label_and_the_probability():
    probs = np.array([[0.2, 0.8], [0.9, 0.1], [0.5, 0.5]])
    titles = ch01.captions("lstm", probs, [1, 0, 1], ("neg", "pos"), [1, 0])
    assert titles == ["lstm: label neg, p(positive) = 0.10", "lstm: label pos, p(positive) = 0.80"]


def test_attention_peaks_reads_medians_first_tokens_and_the_chosen_six():
    tokens = [["a", "good", "film"], ["not", "bad"], ["dull", "and", "slow", "x"]]
    preds = {
        "lstm": SimpleNamespace(
            attention=[np.array([0.6, 0.3, 0.1]), np.array([0.2, 0.8]), np.array([0.7, 0.1, 0.1, 0.1])]
        ),
        "average": SimpleNamespace(
            attention=[np.array([0.2, 0.5, 0.3]), np.array([0.4, 0.6]), np.array([0.1, 0.2, 0.6, 0.1])]
        ),
    }
    out = ch01.attention_peaks(preds, tokens, [2, 1])
    assert out["ch01_medmax_lstm"] == 0.7 and out["ch01_medmax_average"] == 0.6
    assert out["ch01_first_lstm"] == pytest.approx(2 / 3) and out["ch01_first_average"] == 0.0
    assert out["ch01_top_lstm"] == "*a*, *bad*, *dull*"
    assert out["ch01_top_average"] == "*good*, *bad*, *slow*"
    assert out["ch01_most_peaked"] == "BiLSTM"
    assert (out["ch01_median_len"], out["ch01_even"]) == (3, 1 / 3)
    assert out["ch01_six_peaks"] == "*dull*, *bad*" and out["ch01_six_first"] == 1
    flat = dict(preds, lstm=SimpleNamespace(attention=[a * 0 + 1 / len(a) for a in preds["lstm"].attention]))
    assert ch01.attention_peaks(flat, tokens, [0])["ch01_most_peaked"] == "Average"


def test_f1_beside_paper_reads_the_paper_against_our_interval():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 800)
    predicted = np.where(rng.random(800) < 0.76, labels, 1 - labels)
    ours = uncertainty.f1(labels, predicted)
    out = ch01.f1_beside_paper(predicted, labels, paper_f1=0.95)
    assert out == {"ch01_f1_ci": ours.range_text(), "ch01_vs_paper": "below"}  # ours is below theirs
    assert ch01.f1_beside_paper(predicted, labels, paper_f1=ours.estimate)["ch01_vs_paper"] == "within noise of"
    assert ch01.f1_beside_paper(predicted, labels, paper_f1=0.5)["ch01_vs_paper"] == "above"


def test_encoder_spread_says_within_noise_unless_the_paired_interval_excludes_zero():
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(1)
    labels = rng.integers(0, 2, 600)
    right = rng.random(600)
    other = rng.random(600)  # independent errors: neither model dominates the other
    close = {"lstm": np.where(right < 0.78, labels, 1 - labels), "cnn": np.where(other < 0.77, labels, 1 - labels)}
    out = ch01.encoder_spread(close, labels)["ch01_f1_spread"]
    gap = abs(f1_score(labels, close["lstm"]) - f1_score(labels, close["cnn"]))  # the best minus the worst
    assert out.startswith(f", a gap of {gap:.3f} (95% interval ") and "within noise: on 600 test sentences" in out
    apart = {"lstm": np.where(right < 0.9, labels, 1 - labels), "average": np.where(right < 0.6, labels, 1 - labels)}
    assert ch01.encoder_spread(apart, labels)["ch01_f1_spread"].endswith("), beyond noise")
    # a low end just above 0 is shown to 4 decimals (not "0.000"), and called barely beyond
    rng2 = np.random.default_rng(7)
    for trial in range(200):
        edge = {"lstm": np.where(rng2.random(600) < 0.80, labels, 1 - labels),
                "cnn": np.where(rng2.random(600) < 0.75, labels, 1 - labels)}
        said = ch01.encoder_spread(edge, labels)["ch01_f1_spread"]
        if said.endswith("if barely"):
            low = said.split("interval ")[1].split(" to ")[0]
            assert float(low) > 0 and (len(low.split(".")[1]) == 4 or float(low) >= 0.0005)
            break
    else:
        pytest.fail("no draw came out barely beyond noise")
    with pytest.raises(ValueError, match="shape"):
        ch01.encoder_spread({"lstm": labels[:5], "cnn": labels}, labels)
    with pytest.raises(ValueError, match="at least two"):
        ch01.encoder_spread({"lstm": labels}, labels)
