"""attnlib.presentation.readings.ch05: Chapter 5's readings on small hand-made runs over seeds."""
import re
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib.experiments import counterfactual
from attnlib.presentation.readings import ch05
from attnlib.seeds import SeedResults

CLASSES = ("negative", "positive")
PAPER = {0: SimpleNamespace(value=0.50), 1: SimpleNamespace(value=0.54)}
HIT, MISS = 0.6, 0.1


class Result(SimpleNamespace):
    """An AdversaryResult's fields the readings use; ``select`` re-reads ``at_eps`` (eps -> JSD)."""

    def select(self, eps):
        return Result(**{**vars(self), "eps_max_jsd": np.asarray(self.at_eps.get(eps, self.eps_max_jsd))})


def result(jsd, predicted, max_attention=None, at_eps=None):
    jsd, predicted = np.asarray(jsd, dtype=float), np.asarray(predicted)
    peaks = np.full(len(jsd), 0.3) if max_attention is None else np.asarray(max_attention, float)
    return Result(eps_max_jsd=jsd, predicted=predicted, indices=np.arange(len(jsd)), max_attention=peaks,
                  at_eps=at_eps or {})


def over_seeds(*results):
    return SeedResults(tuple(range(len(results))), tuple(results))


def hits_by_class(n0_hit, n0, n1_hit, n1, **kw):
    """A seed's result: n0 sentences predicted 0 (n0_hit of them very different), n1 predicted 1."""
    jsd = [HIT] * n0_hit + [MISS] * (n0 - n0_hit) + [HIT] * n1_hit + [MISS] * (n1 - n1_hit)
    return result(jsd, [0] * n0 + [1] * n1, **kw)


def seeds_of(*shares, n=100):
    """One seed per (share predicted 0, share predicted 1), n sentences in each class."""
    return over_seeds(*(hits_by_class(round(a * n), n, round(b * n), n) for a, b in shares))


# ----------------------------------------------------------------------------- counts and tables
def test_counts_reads_means_over_seeds():
    runs = {"lstm": over_seeds(hits_by_class(3, 4, 1, 6), hits_by_class(1, 4, 1, 6)),
            "cnn": over_seeds(hits_by_class(0, 5, 5, 5), hits_by_class(0, 5, 5, 5))}
    out = ch05.counts(runs, classes=CLASSES, eps=0.01)
    assert out["ch05_ln2"] == pytest.approx(np.log(2))
    assert out["ch05_lstm_n"] == 10 and out["ch05_n_seeds"] == 2
    assert out["ch05_lstm_frac"] == pytest.approx((0.4 + 0.2) / 2)
    assert out["ch05_lstm_negative"] == pytest.approx((0.75 + 0.25) / 2)
    assert out["ch05_lstm_positive"] == pytest.approx(1 / 6)
    assert out["ch05_cnn_positive"] == 1.0 and out["ch05_eps"] == 0.01
    assert re.fullmatch(r"0\.\d\d to 0\.\d\d", out["ch05_lstm_frac_ci"])


@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 0.69), st.integers(0, 1)), min_size=2, max_size=40))
def test_counts_one_seed_is_hits_over_n(rows):
    jsd, predicted = zip(*rows)
    out = ch05.counts({"lstm": over_seeds(result(jsd, predicted))}, classes=CLASSES, eps=0.05)
    hits = int((np.asarray(jsd) >= counterfactual.VERY_DIFFERENT_JSD).sum())
    assert out["ch05_lstm_n"] == len(rows) and out["ch05_lstm_frac"] == pytest.approx(hits / len(rows))


def test_fractions_table_gives_each_seeds_counts_and_the_interval():
    runs = {"lstm": over_seeds(hits_by_class(30, 40, 10, 60), hits_by_class(20, 50, 10, 50))}
    table = ch05.fractions_table(runs, classes=CLASSES)
    assert list(table.index) == [("lstm+tanh", "negative"), ("lstm+tanh", "positive"), ("lstm+tanh", "all")]
    assert table.loc[("lstm+tanh", "negative"), "sentences per seed"] == "40 and 50"
    assert table.loc[("lstm+tanh", "all"), "sentences per seed"] == "100"
    assert table.loc[("lstm+tanh", "negative"), "fraction very different"].startswith("0.575 [")


def test_counts_rejects_a_single_result():
    with pytest.raises(ValueError, match="results over seeds"):
        ch05.counts({"lstm": hits_by_class(1, 2, 1, 2)}, classes=CLASSES, eps=0.01)


# ----------------------------------------------------------------------------- against the paper
def test_against_paper_above_for_both_classes_in_every_seed():
    runs = {"lstm": seeds_of((0.80, 0.85), (0.78, 0.83), (0.82, 0.86))}
    out = ch05.against_paper(runs, PAPER, eps=0.01, paper_eps=0.05, classes=CLASSES)
    assert out["ch05_pe_vs_paper"] == "above theirs for both classes (holds in 3 of 3 seeds for each class)"
    assert out["ch05_against_paper"] == (
        "Over 3 training seeds, at 0.05 ours are 0.800 and 0.847, and at 0.01 0.800 and 0.847: above theirs "
        "for both classes at either ε (holds in 3 of 3 seeds for each class, at either ε).")
    table = ch05.paper_table(runs, PAPER, eps=0.01, paper_eps=0.05, classes=CLASSES)
    assert list(table.index) == ["ours, BiLSTM, eps = 0.01 (mean over 3 seeds)",
                                 "ours, BiLSTM, eps = 0.05 (mean over 3 seeds)",
                                 "J&W, SST, BiLSTM (authors' outputs, eps = 0.05)"]
    assert table.iloc[2].tolist() == ["0.50", "0.54"]


def test_against_paper_one_seed_of_three_above_is_no_verdict():
    runs = {"lstm": seeds_of((0.95, 0.54), (0.50, 0.54), (0.50, 0.54))}
    out = ch05.against_paper(runs, PAPER, eps=0.01, paper_eps=0.01, classes=CLASSES)
    assert out["ch05_run_vs_paper"].startswith("within noise of theirs for both classes")
    assert "beyond noise in 1 of 3 seeds alone for predicted negative" in out["ch05_run_vs_paper"]


def test_against_paper_the_two_eps_differ():
    at_05 = {0.05: [HIT] * 100 + [HIT] * 100}
    lstm = over_seeds(*(hits_by_class(50, 100, 54, 100, at_eps=at_05) for _ in range(3)))
    out = ch05.against_paper({"lstm": lstm}, PAPER, eps=0.01, paper_eps=0.05, classes=CLASSES)
    assert out["ch05_run_vs_paper"] == ("within noise of theirs for both classes (in none of 3 seeds alone for each "
                                        "class)")
    assert out["ch05_pe_vs_paper"].startswith("above theirs for both classes")
    assert out["ch05_against_paper"].startswith("Over 3 training seeds, at 0.05 ours are 1.000 and 1.000, above")
    assert "; at 0.01 they are 0.500 and 0.540, within noise of theirs" in out["ch05_against_paper"]


def test_against_paper_needs_the_bilstm():
    with pytest.raises(ValueError, match="lstm"):
        ch05.against_paper({"cnn": seeds_of((0.5, 0.5))}, PAPER, eps=0.01, paper_eps=0.05, classes=CLASSES)


# ----------------------------------------------------------------------------- class split
@pytest.mark.parametrize(
    "shares, start",
    [
        (((0.9, 0.1),) * 3, "the adversary succeeds more often on the BiLSTM's sentences predicted negative "
         "than on those predicted positive, and the gap (+0.800"),
        (((0.1, 0.9),) * 3, "the adversary succeeds less often on the BiLSTM's sentences predicted negative "
         "than on those predicted positive, and the gap (-0.800"),
        (((0.5, 0.5),) * 3, "the gap between the BiLSTM's two classes (0.000"),
        (((0.9, 0.1), (0.1, 0.9), (0.5, 0.5)), "which of the BiLSTM's two classes the adversary finds easier "
         "depends on the seed"),
        (((0.9, 0.1), (0.5, 0.5), (0.5, 0.5)), "the gap between the BiLSTM's two classes (+0.267"),
    ],
)
def test_class_split_reads_the_verdict_over_seeds(shares, start):
    text = ch05.class_split({"lstm": seeds_of(*shares)}, classes=CLASSES)["ch05_lstm_class_split"]
    assert text.startswith(start)
    if start.startswith("the gap between"):
        assert text.endswith("these runs do not say which class the adversary finds easier")


# ----------------------------------------------------------------------------- other models
def test_other_models_against_the_bilstm():
    runs = {"lstm": seeds_of(*((0.1, 0.1),) * 3), "cnn": seeds_of(*((0.9, 0.3),) * 3),
            "average": seeds_of(*((0.1, 0.1),) * 3)}
    out = ch05.other_models(runs, classes=CLASSES)
    assert out["ch05_others_vs_lstm"] == (
        "on 0.60 of the sentences with the CNN, more often than with the BiLSTM (holds in 3 of 3 seeds) and "
        "0.10 of the sentences with the Average model, as often as with the BiLSTM, within noise (in none of 3 "
        "seeds alone); with the BiLSTM, on 0.10")
    assert out["ch05_others_classes"] == (
        "the CNN: 0.900 predicted negative, 0.300 predicted positive (more often on predicted negative; holds in "
        "3 of 3 seeds); the Average model: 0.100 predicted negative, 0.100 predicted positive (the classes "
        "within noise; in none of 3 seeds alone)")


def test_other_models_one_verdict_said_once_and_one_seed_differing():
    runs = {"lstm": seeds_of(*((0.1, 0.1),) * 3), "cnn": seeds_of((0.9, 0.9), (0.1, 0.1), (0.1, 0.1)),
            "average": seeds_of(*((0.1, 0.11),) * 3)}
    out = ch05.other_models(runs, classes=CLASSES)
    assert out["ch05_others_vs_lstm"] == (
        "on 0.37 of the sentences with the CNN and 0.10 of the sentences with the Average model, against 0.10 "
        "with the BiLSTM: each as often as with the BiLSTM, within noise (the CNN: beyond noise in 1 of 3 seeds "
        "alone; the Average model: in none of 3 seeds alone)")


# ----------------------------------------------------------------------------- bins
def test_bins_against_the_line_over_seeds():
    peaks = [0.1] * 20 + [0.9] * 20 + [0.1] * 20 + [0.9] * 20
    pred = [0] * 40 + [1] * 40
    rng = np.random.default_rng(0)

    def seed(hi_top):
        jsd = np.r_[0.60 + 0.01 * rng.standard_normal(20), hi_top + 0.01 * rng.standard_normal(20),
                    0.49 + 0.01 * rng.standard_normal(40)]
        return result(np.clip(jsd, 0, 0.69), pred, peaks)

    runs = {"lstm": over_seeds(seed(0.2), seed(0.2), seed(0.2)),
            "cnn": over_seeds(*(result([0.6] * 80, [0] * 75 + [1] * 5, peaks) for _ in range(3)))}
    out = ch05.bins(runs, classes=CLASSES, threshold=0.49)
    assert (out["ch05_lstm_top"], out["ch05_lstm_bottom"]) == (40, 40)
    assert out["ch05_line"] == (
        "For the BiLSTM's sentences predicted negative, the median lies at or above the line in [0, 0.25), "
        "below it in [0.75, 1]; for those predicted positive, within noise of it in both non-empty bins. "
        "For the CNN's sentences predicted negative, the median lies at or above the line in both non-empty "
        "bins; for those predicted positive, no bin holds enough sentences to judge ([0.75, 1]: too few "
        "sentences in some seed to judge).")


def test_bins_needs_the_bilstm():
    with pytest.raises(ValueError, match="lstm"):
        ch05.bins({"cnn": seeds_of((0.5, 0.5))}, classes=CLASSES, threshold=0.49)


def test_seed_frames_one_frame_per_seed():
    frames = ch05.seed_frames({"lstm": seeds_of((0.5, 0.5), (0.4, 0.6))})["lstm"]
    assert len(frames) == 2 and set(frames[0].columns) >= {"value", "bin", "predicted"}


# ----------------------------------------------------------------------------- last shown
@pytest.mark.parametrize("jsd, side", [(0.3, "falls below"), (0.49, "still reaches")])
def test_last_shown(jsd, side):
    out = ch05.last_shown(result([0.6, 0.5, jsd], [0, 0, 1]), [0, 2], threshold=0.49)
    assert out == {"ch05_last_jsd": jsd, "ch05_last_side": side}
