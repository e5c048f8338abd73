"""Chapter 4's readings (attnlib.presentation.readings.ch04) and the medians by group over
seeds and sentences they rest on (readings.binned), on small hand-made runs."""

from __future__ import annotations

import math
import re
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib.presentation.readings import binned, ch04
from attnlib.seeds import SeedResults

BINS = ("[0, 0.25)", "[0.25, 0.5)", "[0.5, 0.75)", "[0.75, 1]")
CENTRES = (0.1, 0.4, 0.6, 0.9)  # a max-attention value inside each bin
CLASSES = {"rt-polarity": ("neg", "pos"), "imdb": ("neg", "pos")}


# ----------------------------------------------------------------------------- hand-made runs
def _seed(values, peaks, predicted=None):
    values = np.asarray(values, dtype=float)
    predicted = np.zeros(len(values), int) if predicted is None else np.asarray(predicted)
    return SimpleNamespace(indices=np.arange(len(values)), median_tvd=values, max_attention=np.asarray(peaks, float),
                           predicted=predicted)


def _runs_of(per_seed):
    return SeedResults(tuple(range(len(per_seed))), tuple(per_seed))


def _binned_run(level_by_bin, n_per_bin=40, shift=(0.0, 0.0, 0.0), spread=0.01, seed=0, predicted=None):
    """Sentences spread evenly over the bins; bin b's values centred on level_by_bin[b] (+ each
    seed's shift), NaN level: the bin is empty."""
    rng = np.random.default_rng(seed)
    out = []
    for s, dx in enumerate(shift):
        values, peaks = [], []
        for b, level in enumerate(level_by_bin):
            if level is None:
                continue
            count = n_per_bin[b] if isinstance(n_per_bin, tuple) else n_per_bin
            values.extend(np.abs(level + dx + spread * rng.standard_normal(count)))
            peaks.extend([CENTRES[b]] * count)
        pred = None if predicted is None else predicted(len(values), s)
        out.append(_seed(values, peaks, pred))
    return _runs_of(out)


# ----------------------------------------------------------------------------- binned
def test_weighted_medians_match_numpy_on_each_resample():
    rng = np.random.default_rng(3)
    values, peaks = rng.random((3, 40)), rng.random((3, 40))
    g = binned.by_bin(values, peaks, resamples=100)
    draws = binned._resample_counts(40, 100, 0)
    codes, labels = binned.bin_codes(peaks)
    assert labels == BINS
    for s in range(3):
        for j in range(4):
            assert g.per_seed[s, j] == pytest.approx(np.median(values[s][codes[s] == j]))
            for b in (0, 7, 99):
                picked = np.repeat(values[s], draws[b])[np.repeat(codes[s], draws[b]) == j]
                expected = np.median(picked) if len(picked) else np.nan
                assert np.allclose(g.draws[b, s, j], expected, equal_nan=True)


def test_group_means_are_shares_clipped_to_zero_one():
    hits = np.array([[1, 1, 1, 0, 1, 1, 1, 1], [1, 1, 1, 1, 0, 1, 1, 1]], float)
    g = binned.group_means(hits, np.zeros_like(hits, int), ("all",), resamples=200)
    assert g.estimate("all") == pytest.approx(7 / 8)
    iv = g.interval("all")
    assert 0 <= iv.low <= iv.estimate <= iv.high <= 1


def test_the_interval_widens_with_the_spread_across_seeds():
    calm = binned.by_bin(*_stacked(_binned_run([0.1, 0.2, 0.3, 0.4], shift=(0, 0, 0))))
    spread = binned.by_bin(*_stacked(_binned_run([0.1, 0.2, 0.3, 0.4], shift=(-0.03, 0, 0.03))))
    for b in BINS:
        assert spread.interval(b).half_width > calm.interval(b).half_width


def _stacked(runs_):
    return runs_.stack("median_tvd"), runs_.stack("max_attention")


def test_identical_seeds_give_a_tie_and_the_sentence_interval():
    one = _binned_run([0.1, 0.1, 0.3, 0.3], shift=(0.0,))
    three = _runs_of([one.results[0]] * 3)
    g = binned.by_bin(*_stacked(three))
    c = g.compare(BINS[1], g, BINS[0], paired_seeds=True)
    assert c.verdict == "within noise"
    assert c.seeds_text() == "in none of 3 seeds alone"
    assert g.interval(BINS[0]).method == "t over seeds and sentences"
    single = binned.by_bin(*_stacked(one))
    assert single.interval(BINS[0]).method == "bootstrap, one model"
    assert single.compare(BINS[2], single, BINS[0], paired_seeds=True).seeds_text() == "from one model"


def test_a_difference_in_one_seed_of_three_is_no_verdict():
    rng = np.random.default_rng(0)
    per_seed = []
    for s in range(3):
        low = 0.1 + 0.01 * rng.standard_normal(40)
        high = (0.3 if s == 0 else 0.1) + 0.01 * rng.standard_normal(40)
        per_seed.append(_seed(np.abs(np.r_[low, high]), [0.1] * 40 + [0.9] * 40))
    g = binned.by_bin(*_stacked(_runs_of(per_seed)))
    c = g.compare(BINS[3], g, BINS[0], paired_seeds=True)
    assert c.seeds_showing("higher") == 1
    assert c.verdict != "higher"
    assert "1 of 3" in c.seeds_text()


def test_too_few_sentences_for_a_median():
    runs_ = _binned_run([0.1, 0.2, 0.3, 0.4], n_per_bin=(30, 30, 30, 5))
    g = binned.by_bin(*_stacked(runs_))
    assert g.enough(BINS[2]) and not g.enough(BINS[3]) and not g.empty(BINS[3])
    assert g.count_text(BINS[3]) == "5"
    assert binned.MIN_FOR_MEDIAN == 6 and 1 - 2 * 0.5 ** 5 < 0.95 <= 1 - 2 * 0.5 ** 6


def test_group_medians_rejects_bad_input():
    with pytest.raises(ValueError, match="one shape"):
        binned.group_medians(np.zeros((2, 3)), np.zeros((2, 4), int), ("a",))
    with pytest.raises(ValueError, match="index labels"):
        binned.group_medians(np.zeros((1, 3)), np.array([[0, 1, 2]]), ("a", "b"))
    g = binned.group_medians(np.zeros((1, 3)), np.zeros((1, 3), int), ("a",), resamples=100)
    with pytest.raises(ValueError, match="no group"):
        g.interval("b")


# ----------------------------------------------------------------------------- the BiLSTM
def _lstm(levels, **kw):
    return {("rt-polarity", "lstm"): _binned_run(levels, **kw)}


def test_bilstm_above_the_range_only_past_its_tolerance():
    out = ch04.bilstm(ch04.medians_by_bin(_lstm([0.05, 0.08, 0.115, 0.20])), low=0.02, high=0.10, tolerance=0.02)
    # 0.115 lies above 0.10 but not above 0.10 + 0.02: it overlaps the widened range
    assert out["ch04_lstm_vs_paper"] == "3 of the 4 non-empty bins overlap that range, 1 lies above it ([0.75, 1])"
    assert out["ch04_n_seeds"] == 3 and out["ch04_tolerance"] == 0.02
    assert out["ch04_lstm_top"] == pytest.approx(0.20, abs=0.01)
    assert out["ch04_lstm_top_ci"].startswith("95% interval over seeds and sentences ")


def test_bilstm_grows_only_when_every_step_is_beyond_noise():
    grows = ch04.bilstm(ch04.medians_by_bin(_lstm([0.05, 0.10, 0.15, 0.20])), low=0.02, high=0.10, tolerance=0.02)
    assert grows["ch04_lstm_trend"].startswith(
        "grow steadily as attention gets more peaked: each bin's median lies above the one before it")
    assert "holds in 3 of 3 seeds" in grows["ch04_lstm_trend"]
    flat_step = ch04.bilstm(ch04.medians_by_bin(_lstm([0.062, 0.0625, 0.10, 0.11])), low=0.02, high=0.10,
                            tolerance=0.02)
    assert flat_step["ch04_lstm_trend"].startswith("rise from [0, 0.25) to [0.75, 1] (+")
    assert flat_step["ch04_lstm_trend"].endswith("not step by step: the step from [0, 0.25) to [0.25, 0.5) is "
                                                 "within noise")
    flat = ch04.bilstm(ch04.medians_by_bin(_lstm([0.06, 0.06, 0.06, 0.06])), low=0.02, high=0.10, tolerance=0.02)
    assert flat["ch04_lstm_trend"].startswith("do not grow beyond noise from [0, 0.25) to [0.75, 1]")
    assert flat["ch04_lstm_vs_paper"] == ("all 4 non-empty bins overlap that range, so none lies clearly above or "
                                         "below it")


def test_bilstm_names_a_bin_with_too_few_sentences_and_judges_without_it():
    m = ch04.medians_by_bin(_lstm([0.05, 0.10, 0.11, 0.30], n_per_bin=(40, 40, 40, 4)))
    out = ch04.bilstm(m, low=0.02, high=0.10, tolerance=0.02)
    assert out["ch04_lstm_vs_paper"].startswith("all 3 bins with enough sentences overlap that range, so none lies "
                                                "clearly above or below it; the bin [0.75, 1] holds too few sentences")
    assert "(fewer than 6 in some seed; [0.75, 1]: 4)" in out["ch04_lstm_vs_paper"]
    assert "from [0, 0.25) to [0.5, 0.75)" in out["ch04_lstm_trend"]
    assert out["ch04_lstm_top_ci"] == "too few sentences in some seed for an interval: 4"
    assert ch04.bin_table(m).loc[("rt-polarity", "lstm+tanh"), "[0.75, 1]"].endswith("(too few)")


def test_bilstm_below_the_range_and_an_empty_bin():
    out = ch04.bilstm(ch04.medians_by_bin(_lstm([0.06, 0.04, 0.002, None], spread=0.0005)), low=0.05, high=0.10,
                      tolerance=0.02)
    assert out["ch04_lstm_vs_paper"] == "2 of the 3 non-empty bins overlap that range, 1 lies below it ([0.5, 0.75))"
    assert math.isnan(out["ch04_lstm_top"])
    assert out["ch04_lstm_trend"].startswith("fall from [0, 0.25) to [0.5, 0.75)")


def test_bilstm_needs_the_rt_polarity_bilstm():
    with pytest.raises(ValueError, match="lstm"):
        ch04.bilstm(ch04.medians_by_bin({("imdb", "cnn"): _binned_run([0.1] * 4)}), low=0.02, high=0.10,
                    tolerance=0.02)
    with pytest.raises(ValueError, match="results over seeds"):
        ch04.medians_by_bin({("rt-polarity", "lstm"): object()})


@settings(max_examples=15, deadline=None)
@given(st.lists(st.floats(0.0, 0.5), min_size=4, max_size=4))
def test_bilstm_counts_every_judged_bin_once(levels):
    out = ch04.bilstm(ch04.medians_by_bin(_lstm(levels)), low=0.05, high=0.10, tolerance=0.02)
    text = re.sub(r"\[[0-9., ]+[\])]", "", out["ch04_lstm_vs_paper"])  # the bins' names hold numbers too
    numbers = [int(x) for x in re.findall(r"\d+", text)]
    if text.startswith("all 4 bins"):
        assert numbers == [4]
    else:  # "k of the 4 bins ..., j lie above it, i lies below it"
        assert numbers[1] == 4 and numbers[0] + sum(numbers[2:]) == 4


def test_bilstm_counts_reads_the_first_seed_and_the_range():
    runs_ = {("rt-polarity", "lstm"): _runs_of([_seed([0.1] * 4, [0.1, 0.6, 0.6, 0.9]),
                                                _seed([0.1] * 4, [0.1, 0.1, 0.6, 0.9])])}
    out = ch04.bilstm_counts(runs_)
    assert [out[f"ch04_lstm_bin{b}"] for b in range(4)] == [1, 0, 2, 1]
    assert (out["ch04_lstm_n"], out["ch04_lstm_peaked"]) == (4, 0.75)
    assert out["ch04_lstm_peaked_range"] == "50% to 75% over the 2 seeds"


# ----------------------------------------------------------------------------- by class
def _classed(moves_more: dict, n=120):
    """(dataset, encoder) -> a run whose class-0 sentences move by moves_more[key][0] per seed and
    class-1 sentences by moves_more[key][1]."""
    rng = np.random.default_rng(1)
    out = {}
    for key, (lv0, lv1) in moves_more.items():
        per_seed = []
        for s in range(3):
            pred = np.r_[np.zeros(n // 2, int), np.ones(n // 2, int)]
            a0 = lv0[s] if isinstance(lv0, tuple) else lv0
            a1 = lv1[s] if isinstance(lv1, tuple) else lv1
            values = np.abs(np.where(pred == 0, a0, a1) + 0.01 * rng.standard_normal(n))
            per_seed.append(_seed(values, rng.random(n), pred))
        out[key] = _runs_of(per_seed)
    return out


def test_by_class_reads_which_class_moves_more_over_seeds():
    runs_ = _classed({("rt-polarity", "lstm"): (0.05, 0.10), ("rt-polarity", "cnn"): (0.20, 0.10),
                      ("imdb", "cnn"): (0.10, 0.10), ("imdb", "average"): (0.10, 0.30)})
    out = ch04.by_class(ch04.medians_by_class(runs_, CLASSES), CLASSES)
    assert out["ch04_lstm_class"].startswith(
        "the sentences it predicts pos move more than those it predicts neg: a median of 0.050 against 0.100 "
        "over all bins (the difference -0.050, 95% interval")
    assert out["ch04_lstm_class"].endswith("holds in 3 of 3 seeds)")
    assert out["ch04_class_more"] == (
        "the sentences predicted neg move more for the rt-polarity CNN (holds in 3 of 3 seeds); neither class "
        "moves more beyond noise for the IMDB CNN (in none of 3 seeds alone); the sentences predicted pos move "
        "more for the IMDB Average model (holds in 3 of 3 seeds)")
    alike = _classed({("rt-polarity", "lstm"): (0.05, 0.10), ("rt-polarity", "cnn"): (0.20, 0.10),
                      ("imdb", "average"): (0.20, 0.10)})
    assert ch04.by_class(ch04.medians_by_class(alike, CLASSES), CLASSES)["ch04_class_more"] == (
        "the sentences predicted neg move more for the rt-polarity CNN and the IMDB Average model (holds in 3 of "
        "3 seeds each)")
    assert re.fullmatch(r"0\.10\d \(95% interval over seeds and reviews: 0\.\d+ to 0\.\d+\) for reviews "
                        r"predicted neg and 0\.30\d \(95% interval over seeds and reviews: 0\.\d+ to 0\.\d+\) for "
                        r"reviews predicted pos", out["ch04_imdb_avg_classes"])


def test_by_class_when_the_seeds_disagree_or_one_seed_differs():
    runs_ = _classed({("rt-polarity", "lstm"): ((0.05, 0.15, 0.10), (0.15, 0.05, 0.10)),
                      ("rt-polarity", "cnn"): ((0.30, 0.10, 0.10), 0.10),
                      ("imdb", "average"): (0.1, 0.1)})
    out = ch04.by_class(ch04.medians_by_class(runs_, CLASSES), CLASSES)
    assert out["ch04_lstm_class"].startswith("whether the sentences it predicts neg or pos move more depends on "
                                             "the seed")
    assert "1 of 3 seeds higher, 1 lower" in out["ch04_lstm_class"]
    assert out["ch04_class_more"].startswith(
        "neither class moves more beyond noise for the rt-polarity CNN (beyond noise in 1 of 3 seeds alone) and "
        "the IMDB Average model (in none of 3 seeds alone)")


def test_by_class_needs_the_bilstm_and_imdb_average():
    runs_ = _classed({("rt-polarity", "lstm"): (0.1, 0.1)})
    with pytest.raises(ValueError, match="imdb"):
        ch04.by_class(ch04.medians_by_class(runs_, CLASSES), CLASSES)
    with pytest.raises(ValueError, match="classes lacks"):
        ch04.medians_by_class({("sst", "lstm"): runs_[("rt-polarity", "lstm")]}, CLASSES)


# ----------------------------------------------------------------------------- encoders
def test_encoders_against_the_bilstm_bin_by_bin():
    runs_ = {  # 160 sentences each
        ("rt-polarity", "lstm"): _binned_run([0.05, 0.10, 0.15, 0.20], seed=1),
        ("rt-polarity", "cnn"): _binned_run([0.10, 0.20, 0.15, 0.30], seed=2),
        ("rt-polarity", "average"): _binned_run([0.20, 0.30, 0.30, 0.30], n_per_bin=(40, 40, 77, 3), seed=3),
        ("imdb", "cnn"): _binned_run([0.1, 0.2, 0.3, 0.35], seed=4),
        ("imdb", "average"): _binned_run([0.4, 0.6, None, None], n_per_bin=80, seed=5),
    }
    out = ch04.encoders(ch04.medians_by_bin(runs_))
    assert out["ch04_rt_vs_lstm"] == (
        "the CNN's median is above the BiLSTM's beyond noise in 3 of the 4 bins the two share (holds in 3 "
        "of 3 seeds), within noise in [0.5, 0.75); the Average model's median is above the BiLSTM's beyond "
        "noise in all 3 bins with enough sentences in both (holds in 3 of 3 seeds), and [0.75, 1] holds too few "
        "sentences in some seed to judge (3 for the Average model, 40 for the BiLSTM)")
    assert out["ch04_rt_others_lo"] == pytest.approx(0.10, abs=0.01)
    assert out["ch04_rt_others_hi"] == pytest.approx(0.30, abs=0.01)
    assert re.fullmatch(r"0\.[34]\d\d to 0\.[56]\d\d \(Average model\) and 0\.[01]\d\d to 0\.3\d\d \(CNN\)",
                        out["ch04_imdb_ranges"])


def test_imdb_with_one_seed_says_it_rests_on_one_model():
    runs_ = {("rt-polarity", "lstm"): _binned_run([0.05, 0.10, 0.15, 0.20], seed=1),
             ("imdb", "cnn"): _binned_run([0.1, 0.2, 0.3, 0.35], shift=(0.0,), seed=4),
             ("imdb", "average"): _classed({("imdb", "average"): (0.4, 0.1)}, n=160)[("imdb", "average")]}
    runs_[("imdb", "average")] = _runs_of(runs_[("imdb", "average")].results[:1])
    out = ch04.encoders(ch04.medians_by_bin(runs_))
    assert out["ch04_imdb_seeds"].startswith("one model per encoder (one training seed")
    assert ch04.bin_table(ch04.medians_by_bin(runs_))["seeds"].tolist() == [3, 1, 1]
    classed = ch04.medians_by_class({**runs_, ("rt-polarity", "lstm"): _classed(
        {("rt-polarity", "lstm"): (0.1, 0.1)}, n=160)[("rt-polarity", "lstm")]}, CLASSES)
    said = ch04.by_class(classed, CLASSES)
    more = said["ch04_class_more"]
    assert "the sentences predicted neg move more for the IMDB Average model (from one model)" in more
    assert "too few sentences are predicted pos to compare the classes for the IMDB CNN (n = 0)" in more
    assert said["ch04_imdb_avg_classes"].startswith("0.40")
    assert "(95% interval over reviews, one model: 0." in said["ch04_imdb_avg_classes"]
    three = ch04.encoders(ch04.medians_by_bin({("rt-polarity", "lstm"): runs_[("rt-polarity", "lstm")],
                                               ("imdb", "cnn"): _binned_run([0.1] * 4, seed=4)}))
    assert three["ch04_imdb_seeds"] == "3 training seeds per model, like rt-polarity's"


def test_an_encoder_above_the_bilstm_in_one_seed_of_three_only():
    lstm = _binned_run([0.10] * 4, seed=1)
    cnn = _binned_run([0.10] * 4, shift=(0.2, 0.0, 0.0), seed=2)
    out = ch04.encoders(ch04.medians_by_bin({("rt-polarity", "lstm"): lstm, ("rt-polarity", "cnn"): cnn}))
    assert out["ch04_rt_vs_lstm"].startswith(
        "the CNN's median is above the BiLSTM's beyond noise in none of the 4 bins the two share")


# ----------------------------------------------------------------------------- tables, frames
def test_tables_and_seed_frames():
    runs_ = {("rt-polarity", "lstm"): _binned_run([0.05, 0.10, None, 0.2], n_per_bin=(40, 40, 0, 40))}
    m = ch04.medians_by_bin(runs_)
    est = ch04.bin_estimates(m)
    assert list(est.columns) == list(BINS) and est.index[0] == ("rt-polarity", "lstm+tanh")
    assert math.isnan(est.iloc[0, 2]) and est.iloc[0, 0] == pytest.approx(0.05, abs=0.01)
    table = ch04.bin_table(m)
    assert list(table.columns) == ["seeds", *BINS] and table.iloc[0, 0] == 3
    assert table.iloc[0, 3] == "n/a" and re.fullmatch(r"0\.0[45]\d \[0\.0\d\d, 0\.0\d\d\]", table.iloc[0, 1])
    assert ch04.count_table(m).iloc[0].tolist() == ["40", "40", "0", "40"]
    frames = ch04.seed_frames(runs_)[("rt-polarity", "lstm")]
    assert len(frames) == 3 and list(frames[0]["bin"].cat.categories) == list(BINS)


def test_violin_panels_mark_each_seeds_median():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from attnlib import viz

    runs_ = {("rt-polarity", "lstm"): _runs_of([_seed([0.1, 0.3, 0.5], [0.1, 0.1, 0.9]),
                                                _seed([0.2, 0.4, 0.7], [0.1, 0.1, 0.9])])}
    frames = ch04.seed_frames(runs_)[("rt-polarity", "lstm")]
    fig = viz.plot_violin_panels({"lstm": frames[0]}, ylabel="TVD", seed_frames={"lstm": frames})
    ax = fig.axes[0]
    dots = [line for line in ax.lines if line.get_marker() == "o" and len(line.get_ydata())]
    assert sorted(float(d.get_ydata()[0]) for d in dots) == pytest.approx([0.2, 0.3, 0.5, 0.7])
    assert "each seed's median (2 seeds)" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert viz.describe(fig).endswith("TVD, the violins from the first seed's model; per bin, the lowest to the "
                                      "highest seed's median: lstm: [0, 0.25) 0.2-0.3, [0.75, 1] 0.5-0.7.")
    with pytest.raises(ValueError, match="seed_frames"):
        viz.plot_violin_panels({"lstm": frames[0]}, ylabel="TVD", seed_frames={"cnn": frames})
    one = viz.plot_violin_panels({"lstm": frames[0]}, ylabel="TVD", seed_frames={"lstm": frames[:1]})
    assert not [line for line in one.axes[0].lines if line.get_marker() == "o"]  # one seed: no dots
    plt.close("all")
