"""attnlib.uncertainty over training seeds and sentences: the pooled interval, the verdict and its words."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from sklearn.metrics import f1_score

from attnlib import uncertainty as u


def _crossed(rng, S, n, mean=0.0, seed_sd=0.1, sentence_sd=0.3, noise_sd=0.1):
    """values[s, i] = mean + seed effect + sentence effect + interaction: the crossed design."""
    return (mean + rng.normal(0, seed_sd, (S, 1)) + rng.normal(0, sentence_sd, (1, n))
            + rng.normal(0, noise_sd, (S, n)))


def test_identical_sides_are_a_tie():
    a = _crossed(np.random.default_rng(0), 3, 100)
    c = u.compare_over_seeds(a, a.copy())
    assert c.verdict == u.WITHIN_NOISE and not c.differs
    assert c.difference.estimate == c.difference.low == c.difference.high == 0
    assert c.seeds_text() == "in none of 3 seeds alone"


def test_identical_seeds_give_the_sentence_interval():
    """No seed spread: the interval is the normal one of the sentence bootstrap (sd / sqrt(n))."""
    x = np.random.default_rng(1).normal(0, 1, 400)
    iv = u.over_seeds(np.tile(x, (3, 1)))
    expected = 1.96 * x.std(ddof=1) / np.sqrt(len(x))
    assert iv.estimate == pytest.approx(x.mean())
    assert iv.half_width == pytest.approx(expected, rel=0.1)


def test_constant_rows_give_students_t_over_seeds():
    """No sentence spread: the interval is Student's t over the seeds' means (attnlib's seed_interval)."""
    per_seed = np.array([0.61, 0.64, 0.70, 0.66])
    iv = u.over_seeds(np.repeat(per_seed[:, None], 50, axis=1))
    oracle = u.seed_interval(per_seed)
    assert (iv.estimate, iv.low, iv.high) == pytest.approx((oracle.estimate, oracle.low, oracle.high), abs=1e-12)


def test_a_difference_in_one_seed_of_three_is_1_of_3_never_beyond_noise():
    rng = np.random.default_rng(2)
    a = np.tile(rng.normal(0, 1, 300), (3, 1))
    b = a.copy()
    b[2] -= 0.5  # only the third seed's model differs, and clearly
    c = u.compare_over_seeds(a, b)
    assert c.seeds_showing("higher") == 1 and c.seeds_showing("lower") == 0
    assert c.verdict == u.WITHIN_NOISE and not c.differs
    assert c.seeds_text() == "beyond noise in 1 of 3 seeds alone"
    # however large, one seed never carries the verdict
    b[2] -= 100
    assert u.compare_over_seeds(a, b).verdict == u.WITHIN_NOISE


def test_a_verdict_only_the_pooling_reaches_is_not_said_to_hold_in_0_seeds():
    rng = np.random.default_rng(30)
    base = rng.normal(0, 1, 400)
    a = np.tile(base, (3, 1)) + rng.normal(0, 0.6, (3, 400))
    b = np.tile(base, (3, 1)) + rng.normal(0, 0.6, (3, 400)) - 0.09
    c = u.compare_over_seeds(a, b)
    assert c.verdict == "higher" and c.support == 0  # the pooled interval excludes 0, no seed's alone does
    pointing = sum(p.difference.estimate > 0 for p in c.per_seed)
    assert c.seeds_text() == (f"beyond noise pooled over 3 seeds, {pointing} of which point that way, "
                              "none beyond noise alone")
    assert "holds in 0" not in c.seeds_text()


def test_a_difference_in_every_seed_holds_in_3_of_3():
    rng = np.random.default_rng(3)
    a = _crossed(rng, 3, 300)
    b = a - 0.1 + rng.normal(0, 0.05, a.shape)
    c = u.compare_over_seeds(a, b)
    assert c.verdict == "higher" and c.differs and c.support == 3
    assert c.seeds_text() == "holds in 3 of 3 seeds"
    assert c.says("above", "below") == "above"
    assert u.compare_over_seeds(b, a).verdict == "lower"


def test_seeds_that_differ_in_opposite_directions_disagree():
    rng = np.random.default_rng(4)
    a = _crossed(rng, 3, 300, seed_sd=0)
    b = a.copy()
    b[0] -= 0.2
    b[1] += 0.2
    c = u.compare_over_seeds(a, b)
    assert c.verdict == u.SEEDS_DISAGREE and not c.differs
    assert c.says("x", "y", disagree="the seeds disagree") == "the seeds disagree"
    assert c.seeds_text() == "1 of 3 seeds higher, 1 lower, each beyond noise"


@settings(max_examples=25, deadline=None)
@given(spread=st.floats(0.01, 1.0), factor=st.floats(1.5, 10.0), seed=st.integers(0, 2**16))
def test_the_pooled_interval_widens_with_the_spread_across_seeds(spread, factor, seed):
    rng = np.random.default_rng(seed)
    offsets = rng.normal(0, 1, (4, 1))
    offsets -= offsets.mean()
    base = rng.normal(0, 0.3, (1, 80)) + rng.normal(0, 0.05, (4, 80))
    narrow = u.over_seeds(base + spread * offsets, resamples=200)
    wide = u.over_seeds(base + factor * spread * offsets, resamples=200)
    assert wide.high - wide.low > narrow.high - narrow.low
    assert wide.estimate == pytest.approx(narrow.estimate)


def test_coverage_of_the_crossed_design_by_simulation():
    """95% intervals from 3 seeds x 150 sentences cover the true mean about 95% of the time
"""
    rng = np.random.default_rng(5)
    covered = 0
    trials = 300
    for _ in range(trials):
        iv = u.over_seeds(_crossed(rng, 3, 150, mean=0.5, seed_sd=0.05, sentence_sd=0.3, noise_sd=0.2),
                          resamples=200, seed=int(rng.integers(1 << 30)))
        covered += iv.contains(0.5)
    assert 0.91 <= covered / trials <= 0.995, covered / trials


def test_one_seed_reads_as_one_model():
    rng = np.random.default_rng(6)
    a = rng.normal(0.2, 1, (1, 200))
    b = a - 0.3
    c = u.compare_over_seeds(a, b)
    assert c.one_model and c.seeds_text() == "from one model"
    plain = u.compare(a[0], b[0], paired=True)
    assert c.verdict == plain.verdict == "higher"
    assert (c.difference.low, c.difference.high) == (plain.difference.low, plain.difference.high)
    assert "one model" in u.over_seeds(a).method


def test_a_missing_instance_in_one_seed_is_left_out_of_that_seed_only():
    rng = np.random.default_rng(7)
    a = _crossed(rng, 3, 50)
    a[1, 4] = np.nan
    iv = u.over_seeds(a)
    assert iv.estimate == pytest.approx(np.mean([np.nanmean(row) for row in a]))
    assert np.isfinite(iv.low) and np.isfinite(iv.high)


def test_f1_over_seeds_matches_scikit_learn_and_one_seed_is_plain_f1():
    rng = np.random.default_rng(8)
    y = rng.integers(0, 2, 300)
    pred = np.where(rng.random((3, 300)) < 0.8, y, 1 - y)
    iv = u.f1_over_seeds(y, pred)
    assert iv.estimate == pytest.approx(np.mean([f1_score(y, p) for p in pred]), abs=1e-12)
    one, plain = u.f1_over_seeds(y, pred[:1]), u.f1(y, pred[0])
    assert (one.estimate, one.low, one.high) == (plain.estimate, plain.low, plain.high)
    same = u.compare_f1_over_seeds(y, pred, pred.copy())
    assert same.verdict == u.WITHIN_NOISE and same.difference.estimate == 0


def test_two_recipes_add_both_seed_spreads():
    """paired_seeds=False (two encoders, each with its seeds): Welch's df, both spreads counted."""
    rng = np.random.default_rng(9)
    sentences = rng.normal(0, 0.3, (1, 200))
    a = 0.6 + np.array([[0.00], [0.05], [-0.05]]) + sentences
    b = 0.5 + np.array([[0.01], [-0.01], [0.0]]) + sentences
    c = u.compare_over_seeds(a, b, paired_seeds=False)
    va, vb = a.mean(1).var(ddof=1) / 3, b.mean(1).var(ddof=1) / 3
    df = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 2)
    assert c.difference.half_width == pytest.approx(stats.t.ppf(0.975, df) * np.sqrt(va + vb), rel=1e-6)


@pytest.mark.parametrize("bad, match", [
    (np.zeros(5), "2-D"),
    (np.full((2, 3), np.inf), "inf"),
    ("abc", "array"),
])
def test_bad_input_is_named(bad, match):
    with pytest.raises(ValueError, match=match):
        u.over_seeds(bad)


def test_sides_must_share_instances_and_seed_counts():
    with pytest.raises(ValueError, match="same instances"):
        u.compare_over_seeds(np.zeros((3, 4)), np.zeros((3, 5)))
    with pytest.raises(ValueError, match="same number of seeds"):
        u.compare_over_seeds(np.zeros((3, 4)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="seeds x instances"):
        u.f1_over_seeds([0, 1], [0, 1])


def test_a_share_never_leaves_its_range():
    """A t interval of a rare 0/1 outcome over few seeds would reach below 0: clipped to [0, 1]."""
    flips = np.zeros((3, 800))
    flips[1, :10] = 1  # one seed flips 10 decisions, the others none
    iv = u.over_seeds(flips)
    assert iv.low == 0.0 and 0 < iv.estimate < iv.high <= 1
    c = u.compare_over_seeds(flips, np.zeros((3, 800)))
    assert c.a.low == 0.0 and c.b.low == c.b.high == 0.0 and c.difference.low >= -1.0
