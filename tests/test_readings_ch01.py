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


class _Set:
    """A stand-in SeedSet: its seeds' trained models and their stored scores."""

    def __init__(self, *trained):
        self.trained, self.seeds = trained, tuple(range(len(trained)))

    def __len__(self):
        return len(self.trained)

    @property
    def first(self):
        return self.trained[0]

    def scores(self, split, metric):
        return np.array([getattr(t, split)[metric] for t in self.trained])


def _models():
    return {
        "lstm": _Set(_model(0.70, 0.85, 0.86, 3), _model(0.72, 0.87, 0.86, 4)),
        "cnn": _Set(_model(0.75, 0.80, 0.90, 5), _model(0.77, 0.80, 0.90, 2)),
        "average": _Set(_model(0.65, 0.88, 0.84, 8), _model(0.63, 0.88, 0.84, 1)),
    }


def test_comparison_reads_means_over_seeds_the_gap_and_the_first_seeds_epochs():
    out = ch01.comparison(_models(), paper_f1=0.78, rebuttal_f1=0.795)
    assert out["ch01_paper_f1"] == 0.78 and out["ch01_wp_f1"] == 0.795
    assert out["ch01_gap_abs"] == pytest.approx(0.07)  # 0.78 - the BiLSTM's mean, 0.71
    assert "ch01_gap_dir" not in out  # the direction is read against our interval (f1_beside_paper)
    assert (out["ch01_f1_min"], out["ch01_f1_max"]) == pytest.approx((0.64, 0.76))
    # no ranking from the means alone: encoder_spread reads it over seeds and sentences
    assert not {"ch01_f1_best", "ch01_auc_best", "ch01_devauc_best"} & set(out)
    assert (out["ch01_auc_min"], out["ch01_auc_max"]) == pytest.approx((0.80, 0.88))
    assert (out["ch01_epoch_lstm"], out["ch01_epoch_cnn"], out["ch01_epoch_average"]) == (3, 5, 8)
    assert all(isinstance(out[f"ch01_epoch_{e}"], int) for e in ("lstm", "cnn", "average"))


def test_comparison_gives_the_size_of_the_gap_either_way():
    out = ch01.comparison(_models(), paper_f1=0.60, rebuttal_f1=0.795)
    assert out["ch01_gap_abs"] == pytest.approx(0.11)


def test_comparison_needs_the_bilstm_known_encoders_and_seed_sets():
    models = _models()
    with pytest.raises(ValueError, match="lstm"):
        ch01.comparison({"cnn": models["cnn"]}, paper_f1=0.8, rebuttal_f1=0.8)
    with pytest.raises(ValueError, match="unknown"):
        ch01.comparison({**models, "gru": models["cnn"]}, paper_f1=0.8, rebuttal_f1=0.8)
    with pytest.raises(ValueError, match="SeedSet"):
        ch01.comparison({**models, "lstm": _model(0.7, 0.8, 0.8, 1)}, paper_f1=0.8, rebuttal_f1=0.8)


def test_scores_table_puts_the_two_published_rows_after_ours():
    table = ch01.scores_table(_models(), "rt-polarity", paper_f1=0.78, rebuttal_f1=0.795)
    assert list(table.index) == [
        ("lstm + tanh", "rt-polarity"),
        ("cnn + tanh", "rt-polarity"),
        ("average + tanh", "rt-polarity"),
        ("lstm + tanh", "SST (Jain & Wallace 2019)"),
        ("lstm + tanh", "SST (Wiegreffe & Pinter 2019)"),
    ]
    assert list(table.columns) == ["seeds", "test accuracy", "test F1", "test ROC-AUC"]
    assert table["test F1"].tolist() == pytest.approx([0.71, 0.76, 0.64, 0.78, 0.795])
    assert np.isnan(table.loc[("lstm + tanh", "SST (Jain & Wallace 2019)"), "test accuracy"])


def test_scores_table_gives_each_f1_its_interval_over_seeds_and_sentences():
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, 300)
    predicted = {e: np.where(rng.random((2, 300)) < 0.8, labels, 1 - labels) for e in ("lstm", "cnn", "average")}
    table = ch01.scores_table(_models(), "rt", paper_f1=0.78, rebuttal_f1=0.795, predicted=predicted, labels=labels)
    assert list(table.columns) == ["seeds", "test accuracy", "test F1", "F1 95% interval", "test ROC-AUC"]
    assert table.loc[("cnn + tanh", "rt"), "F1 95% interval"] == \
        uncertainty.f1_over_seeds(labels, predicted["cnn"]).range_text()


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
    assert out["ch01_most_peaked"] == "the most peaked is the BiLSTM"
    assert (out["ch01_median_len"], out["ch01_even"]) == (3, 1 / 3)
    assert out["ch01_six_peaks"] == "*dull*, *bad*" and out["ch01_six_first"] == 1
    flat = dict(preds, lstm=SimpleNamespace(attention=[a * 0 + 1 / len(a) for a in preds["lstm"].attention]))
    assert ch01.attention_peaks(flat, tokens, [0])["ch01_most_peaked"] == "the most peaked is the Average"
    # over seeds: a ranking only when it holds in every seed, and the ranges
    every = ch01.attention_peaks(preds, tokens, [0], by_seed={"lstm": [preds["lstm"]] * 2,
                                                             "average": [preds["average"], flat["lstm"]]})
    assert every["ch01_most_peaked"] == "the most peaked is the BiLSTM in every one of the 2 seeds"
    assert every["ch01_medmax_range_average"] == "0.33 to 0.60"  # flat: median of 1/3, 1/2, 1/4
    assert every["ch01_first_range_lstm"] == "66.7% to 66.7%"
    split = ch01.attention_peaks(preds, tokens, [0], by_seed={"lstm": [preds["lstm"], flat["lstm"]],
                                                             "average": [preds["average"]] * 2})
    assert split["ch01_most_peaked"] == "no encoder is the most peaked in every seed"


def test_f1_beside_paper_reads_the_paper_against_our_interval_over_seeds():
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 800)
    predicted = np.where(rng.random((3, 800)) < 0.76, labels, 1 - labels)
    ours = uncertainty.f1_over_seeds(labels, predicted)
    out = ch01.f1_beside_paper(predicted, labels, paper_f1=0.95)
    assert out["ch01_f1_ci"] == ours.range_text() and out["ch01_vs_paper"] == "below"  # ours is below theirs
    assert out["ch01_f1_mean"] == pytest.approx(np.mean([f1_score(labels, p) for p in predicted]))
    assert out["ch01_f1_seeds"].count(" and ") == 1 and out["ch01_f1_seeds"].count(",") == 1
    assert ch01.f1_beside_paper(predicted, labels, paper_f1=ours.estimate)["ch01_vs_paper"] == "within noise of"
    assert ch01.f1_beside_paper(predicted, labels, paper_f1=0.5)["ch01_vs_paper"] == "above"
    one = ch01.f1_beside_paper(predicted[0], labels, paper_f1=0.5)  # one model: the sentence interval
    assert one["ch01_f1_ci"] == uncertainty.f1(labels, predicted[0]).range_text()


def test_encoder_spread_reads_the_gap_over_seeds_and_sentences():
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(1)
    labels = rng.integers(0, 2, 600)

    def seeds_of(accuracy):
        return np.where(rng.random((3, 600)) < accuracy, labels, 1 - labels)

    close = {"lstm": seeds_of(0.78), "cnn": seeds_of(0.77)}
    said = ch01.encoder_spread(close, labels)
    mean = {e: np.mean([f1_score(labels, p) for p in m]) for e, m in close.items()}
    gap = max(mean.values()) - min(mean.values())
    out = said["ch01_f1_spread"]
    assert out.startswith(f", a gap of {gap:.3f} (95% interval over seeds and sentences ")
    assert "within noise: on 600 test sentences and 3 seeds each" in out and "of 3 seeds" in out
    assert {said["ch01_f1_best"], said["ch01_f1_worst"]} == {"BiLSTM", "CNN"}
    apart = {"lstm": seeds_of(0.9), "average": seeds_of(0.6)}
    wide = ch01.encoder_spread(apart, labels)
    assert wide["ch01_f1_spread"].endswith("beyond noise (holds in 3 of 3 seeds)")
    assert (wide["ch01_f1_best"], wide["ch01_f1_worst"]) == ("BiLSTM", "Average")
    one = ch01.encoder_spread({e: m[0] for e, m in apart.items()}, labels)["ch01_f1_spread"]
    assert "over the test sentences" in one and one.endswith("beyond noise (from one model)")
    with pytest.raises(ValueError, match="predictions per seed"):
        ch01.encoder_spread({"lstm": labels[:5], "cnn": labels}, labels)
    with pytest.raises(ValueError, match="at least two"):
        ch01.encoder_spread({"lstm": labels}, labels)
