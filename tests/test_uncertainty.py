"""attnlib.uncertainty: bootstrap intervals, verdicts that call noise noise, ranks with ties."""
import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib import uncertainty as U


def test_identical_scores_are_a_tie_paired_and_independent():
    x = np.random.default_rng(0).normal(size=300)
    for paired in (True, False):
        c = U.compare(x, x.copy(), paired=paired)
        assert c.verdict == U.WITHIN_NOISE and not c.differs
        assert c.difference.contains(0.0)
        assert c.says("more", "less") == U.WITHIN_NOISE


@given(st.lists(st.floats(-1, 1), min_size=2, max_size=60), st.booleans())
@settings(max_examples=40, deadline=None)
def test_a_method_is_never_beyond_noise_of_itself(values, paired):
    assert U.compare(values, values, paired=paired, resamples=200).verdict == U.WITHIN_NOISE


def test_a_clear_difference_is_called_and_its_direction_is_right():
    rng = np.random.default_rng(1)
    a, b = rng.normal(0.5, 0.1, 200), rng.normal(0.3, 0.1, 200)
    assert U.compare(a, b, paired=False).verdict == "higher"
    assert U.compare(b, a, paired=True).verdict == "lower"
    assert U.compare(a, b, paired=True).says("wins", "loses") == "wins"


def test_the_chapter_5_reading_of_0_631_against_0_654_is_within_noise():
    """Issue 27: 0.631 of 263 against 0.654 of 237 sentences, z about 0.5."""
    neg = np.r_[np.ones(166), np.zeros(263 - 166)]  # 0.631
    pos = np.r_[np.ones(155), np.zeros(237 - 155)]  # 0.654
    c = U.compare(neg, pos, paired=False)
    assert c.verdict == U.WITHIN_NOISE
    assert c.difference.low < 0 < c.difference.high


def test_pairing_finds_a_small_consistent_difference_that_independent_groups_miss():
    rng = np.random.default_rng(2)
    sentence = rng.normal(0, 1, 150)  # a large per-sentence effect shared by both methods
    a, b = sentence + 0.05 + rng.normal(0, 0.02, 150), sentence
    assert U.compare(a, b, paired=True).verdict == "higher"
    assert U.compare(a, b, paired=False).verdict == U.WITHIN_NOISE


def test_interval_agrees_with_scipys_percentile_bootstrap():
    x = np.random.default_rng(3).exponential(size=400)
    ours = U.bootstrap(x, resamples=4000)
    ref = scipy.stats.bootstrap((x,), np.mean, confidence_level=0.95, n_resamples=4000, method="percentile",
                                random_state=np.random.default_rng(9)).confidence_interval
    width = ref.high - ref.low
    assert ours.estimate == pytest.approx(x.mean())
    assert abs(ours.low - ref.low) < 0.1 * width and abs(ours.high - ref.high) < 0.1 * width


def test_coverage_is_near_the_level():
    rng = np.random.default_rng(4)
    hits = sum(U.bootstrap(rng.normal(1.0, 2.0, 60), resamples=500, seed=s).contains(1.0) for s in range(300))
    assert 0.89 <= hits / 300 <= 0.99


def test_columns_share_resamples_and_nan_is_left_out():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(100, 3))
    x[::7, 1] = np.nan
    cols = U.bootstrap(x, seed=3)
    assert len(cols) == 3 and cols[1].n == 100 - len(range(0, 100, 7))
    assert cols[1].estimate == pytest.approx(np.nanmean(x[:, 1]))
    alone = U.bootstrap(x[:, 0], seed=3)
    # the same rows drawn: equal up to the summation order of a column's mean against a vector's
    assert (alone.low, alone.high) == (pytest.approx(cols[0].low, rel=1e-12), pytest.approx(cols[0].high, rel=1e-12))


def test_seeded_deterministic_and_independent_of_blocking(monkeypatch):
    x = np.random.default_rng(6).normal(size=250)
    a, b = U.bootstrap(x, seed=7), U.bootstrap(x, seed=7)
    assert a == b and U.bootstrap(x, seed=8) != a
    monkeypatch.setattr(U, "_BLOCK", 1000)  # 4 resamples per block
    assert U.bootstrap(x, seed=7) == a


def test_small_and_empty_inputs():
    one = U.bootstrap([0.4])
    assert (one.estimate, one.low, one.high, one.n) == (0.4, 0.4, 0.4, 1)
    none = U.bootstrap([np.nan, np.nan])
    assert none.n == 0 and np.isnan(none.estimate)
    assert U.bootstrap(np.ones(50)).format() == "1.000 [1.000, 1.000]"
    assert U.bootstrap(np.full(50, 0.25)).format(1, percent=True) == "25% [25, 25]"


@pytest.mark.parametrize("bad, message", [
    ("abc", "array of per-instance values"),
    ([[[1.0]]], "1-D"),
    ([1.0, np.inf], "inf"),
    (["a", "b"], "numbers"),
])
def test_bad_values_are_clear_errors(bad, message):
    with pytest.raises(ValueError, match=message):
        U.bootstrap(bad)


def test_bad_settings_and_unpaired_lengths_are_clear_errors():
    with pytest.raises(ValueError, match="level"):
        U.bootstrap([1.0, 2.0], level=95)
    with pytest.raises(ValueError, match="resamples"):
        U.bootstrap([1.0, 2.0], resamples=10)
    with pytest.raises(ValueError, match="one value per instance"):
        U.compare([1.0, 2.0], [1.0], paired=True)
    with pytest.raises(ValueError, match="at least 2 seeds"):
        U.seed_interval([0.7])


def test_rank_ties_what_noise_cannot_order():
    rng = np.random.default_rng(7)
    base = rng.normal(0, 1, 200)
    scores = {"a": base + 1.0 + rng.normal(0, 0.01, 200), "b": base + 1.0 + rng.normal(0, 0.01, 200),
              "c": base + rng.normal(0, 0.01, 200)}
    table = U.rank(scores)
    assert list(table["rank"]) == [1, 1, 3] and list(table.index[-1:]) == ["c"]
    assert list(table["tied"]) == [True, True, False]
    flipped = U.rank(scores, higher_is_better=False)
    assert flipped.loc["c", "rank"] == 1 and flipped.loc["a", "rank"] == 2 == flipped.loc["b", "rank"]
    same = U.rank({"x": base, "y": base.copy()})
    assert list(same["rank"]) == [1, 1]


def test_rank_with_holm_claims_no_order_that_chance_among_many_pairs_gives():
    rng = np.random.default_rng(3)
    base = rng.normal(0, 1, 60)
    noise = {f"m{i}": base + rng.normal(0, 0.3, 60) for i in range(8)}  # 8 methods, one true mean: 28 pairs
    plain = U.rank(noise, seed=1)
    corrected = U.rank(noise, seed=1, correction="holm")
    assert plain["rank"].max() > 1  # some pair's own interval excludes 0 by chance
    assert list(corrected["rank"]) == [1] * 8  # Holm over the 28 pairs: no order
    clear = dict(noise, best=base + 2.0 + rng.normal(0, 0.3, 60))  # a real difference survives the correction
    table = U.rank(clear, seed=1, correction="holm")
    assert table.index[0] == "best" and table.loc["best", "rank"] == 1 and (table["rank"].drop("best") == 2).all()
    # the p-values, independently: the same resampled rows, Holm by hand
    pairs = [("best", m) for m in noise]
    idx = np.random.default_rng(1).integers(0, 60, size=(2000, 60))
    p = [min(1.0, 2 * min(np.mean(d <= 0), np.mean(d >= 0)))
         for d in ((clear[a] - clear[b])[idx].mean(1) for a, b in pairs)]
    assert max(p) < 0.05 / 8
    with pytest.raises(ValueError, match="correction"):
        U.rank(noise, correction="bonferroni")
    columns = U.rank_columns({"x": noise}, {"x": True}, seed=1, correction="holm")
    assert (columns.ranks["x"] == 1).all()


def test_seed_interval_is_students_t():
    x = np.array([0.71, 0.74, 0.69, 0.73])
    iv = U.seed_interval(x)
    low, high = scipy.stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=scipy.stats.sem(x))
    assert (iv.low, iv.high) == pytest.approx((low, high)) and iv.method == "t over seeds"


def test_an_interval_is_above_below_or_within_noise_of_a_published_number():
    iv = U.Interval(0.62, 0.57, 0.67, 280)
    assert iv.relation_to(0.50) == "above" and iv.relation_to(0.70) == "below"
    assert iv.relation_to(0.60) == "within noise of" and iv.relation_to(0.57) == "within noise of"


def test_rank_columns_ranks_each_column_on_its_own_and_marks_ties():
    rng = np.random.default_rng(8)
    base = rng.normal(0, 1, 120)
    columns = {
        "AP": {"attention": base + 0.5, "gradient": base + 0.5 + rng.normal(0, 1e-3, 120), "random": base},
        "suff": {"attention": base + 1.0, "random": base},  # lower is better; gradient does not apply
    }
    table = U.rank_columns(columns, {"AP": True, "suff": False})
    assert table.ranks.loc["random", "AP"] == 3 and table.ranks.loc["attention", "AP"] == 1
    assert table.best("AP") == ["attention", "gradient"] and table.best("AP", exclude=["attention"]) == ["gradient"]
    assert table.ranks.loc["random", "suff"] == 1 and np.isnan(table.means.loc["gradient", "suff"])
    cells = table.cells()
    assert cells.loc["gradient", "suff"] == "n/a" and cells.loc["attention", "AP"].endswith("(1=)")
    assert cells.loc["random", "suff"].endswith("(1)")
    with pytest.raises(ValueError, match="no direction"):
        U.rank_columns(columns, {"AP": True})


def test_ranks_from_wins_counts_who_beats_each_method():
    from attnlib.uncertainty import ranks_from_wins

    wins = np.zeros((4, 4), dtype=bool)
    wins[0, 2] = wins[1, 2] = wins[0, 3] = wins[1, 3] = wins[2, 3] = True  # 0 and 1 tie on top
    assert ranks_from_wins(wins).tolist() == [1, 1, 3, 4]
    assert ranks_from_wins(np.zeros((3, 3), dtype=bool)).tolist() == [1, 1, 1]
    with pytest.raises(ValueError, match="beat each other"):
        ranks_from_wins(wins | wins.T)
    with pytest.raises(ValueError, match="square bool"):
        ranks_from_wins(np.zeros((2, 3), dtype=bool))


# ----------------------------------------------------------------------------- many tests at once
def _holm_adjusted(p):
    """Holm's adjusted p-values, the other textbook form: max over j <= i of (m - j + 1) p_(j)."""
    p = np.asarray(p, dtype=float)
    m = len(p)
    order = np.argsort(p, kind="stable")
    adjusted = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adjusted
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=25), st.sampled_from([0.01, 0.05, 0.1]))
def test_holm_matches_adjusted_p_values(p, alpha):
    assert (U.holm(p, alpha=alpha) == (_holm_adjusted(p) <= alpha)).all()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=1, max_size=25))
def test_holm_lies_between_bonferroni_and_no_correction(p):
    p = np.asarray(p)
    reject = U.holm(p)
    assert (reject >= (p <= 0.05 / len(p))).all()  # every Bonferroni rejection
    assert (reject <= (p <= 0.05)).all()  # never more than the uncorrected tests


def test_holm_on_a_worked_example():
    # m = 4: thresholds 0.0125, 0.0167, 0.025, 0.05; 0.01 and 0.015 reject, 0.03 > 0.025 stops
    assert U.holm([0.03, 0.01, 0.04, 0.015]).tolist() == [False, True, False, True]
    # twenty tests, one at p = 0.02: significant uncorrected, not after Holm
    assert not U.holm([0.02] + [0.5] * 19).any()


def test_holm_nan_never_rejects_and_counts():
    assert U.holm([0.001, np.nan]).tolist() == [True, False]
    assert U.holm([0.03, np.nan]).tolist() == [False, False]  # m = 2: 0.03 > 0.025


@pytest.mark.parametrize("bad", [dict(p_values=[[0.1]]), dict(p_values=[1.5]), dict(p_values=[0.1], alpha=0)])
def test_holm_refuses_bad_input(bad):
    with pytest.raises(ValueError):
        U.holm(**bad)


def test_normal_p_against_scipy():
    change, se = np.array([0.0196, -0.05, 0.007, 0.0]), np.array([0.01, 0.023, 0.022, 0.0])
    p = U.normal_p(change, se)
    assert p[0] == pytest.approx(0.05, abs=1e-4)
    assert p[1] == pytest.approx(2 * scipy.stats.norm.sf(0.05 / 0.023))
    assert p[2] > 0.5 and p[3] == 1.0
    assert np.isnan(U.normal_p([0.1], [np.nan])).all()
    with pytest.raises(ValueError):
        U.normal_p([0.1, 0.2], [0.1])


@settings(max_examples=100, deadline=None)
@given(st.floats(-1, 1), st.floats(0.001, 0.5), st.integers(2, 10), st.floats(-1, 1), st.floats(0.001, 0.5),
       st.integers(2, 10))
def test_welch_agrees_with_scipy(ma, sa, na, mb, sb, nb):
    c = U.welch(ma, sa, na, mb, sb, nb)
    p = scipy.stats.ttest_ind_from_stats(ma, sa, na, mb, sb, nb, equal_var=False).pvalue
    assert c.difference.estimate == pytest.approx(ma - mb)
    if abs(p - 0.05) > 1e-6:  # the interval excludes 0 exactly when the test rejects at 5%
        assert c.differs == (p < 0.05)
    assert c.a.contains(ma) and c.b.contains(mb)


def test_welch_ties_and_refusals():
    assert U.welch(0.7, 0.0, 3, 0.7, 0.0, 3).verdict == U.WITHIN_NOISE
    assert U.welch(0.8, 0.0, 3, 0.7, 0.0, 3).verdict == "higher"
    for bad in [dict(n_a=1), dict(sd_a=-0.1), dict(mean_b=float("nan"))]:
        args = dict(mean_a=0.7, sd_a=0.01, n_a=3, mean_b=0.6, sd_b=0.01, n_b=3) | bad
        with pytest.raises(ValueError):
            U.welch(**args)


def test_normal_interval_is_the_estimate_plus_minus_z_se():
    iv = U.normal_interval(0.5, 0.1, 30)
    assert iv.low == pytest.approx(0.5 - 0.1959964, abs=1e-6) and iv.high == pytest.approx(0.5 + 0.1959964, abs=1e-6)
    assert U.normal_interval(0.5, 0.1, 30, level=0.9).half_width == pytest.approx(0.1 * scipy.stats.norm.ppf(0.95))
    assert U.normal_interval(0.2, 0.1, 30).relation_to(0.5) == "below"
    with pytest.raises(ValueError):
        U.normal_interval(0.5, 0.1, 30, level=1.5)


# ----------------------------------------------------------------------------- F1 and proportions
@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1)), min_size=1, max_size=60))
def test_f1_estimate_is_scikit_learns(pairs):
    from sklearn.metrics import f1_score

    labels, predicted = map(np.array, zip(*pairs))
    iv = U.f1(labels, predicted, resamples=200)
    assert iv.estimate == f1_score(labels, predicted, zero_division=0)  # the same float: tables agree to the digit
    assert iv.low <= iv.estimate <= iv.high and 0 <= iv.low and iv.high <= 1


def test_f1_interval_agrees_with_scipys_bootstrap_of_the_ratio():
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, 400)
    predicted = np.where(rng.random(400) < 0.8, labels, 1 - labels)
    iv = U.f1(labels, predicted, resamples=4000)

    def f1_of(y, p, axis=-1):  # scikit-learn's F1, on scipy's resamples (vectorized: one row per resample)
        tp = np.sum((y == 1) & (p == 1), axis=axis)
        return 2 * tp / (2 * tp + np.sum(y != p, axis=axis))

    assert f1_of(labels, predicted) == pytest.approx(f1_score(labels, predicted))
    ref = scipy.stats.bootstrap((labels, predicted), f1_of, paired=True, vectorized=True, n_resamples=4000,
                                method="percentile", random_state=0).confidence_interval
    assert iv.low == pytest.approx(ref.low, abs=0.012) and iv.high == pytest.approx(ref.high, abs=0.012)


def test_compare_f1_ties_identical_models_and_sees_a_clear_gap():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 500)
    good = np.where(rng.random(500) < 0.9, labels, 1 - labels)
    bad = np.where(rng.random(500) < 0.6, labels, 1 - labels)
    same = U.compare_f1(labels, good, good)
    assert same.verdict == U.WITHIN_NOISE and same.difference.estimate == 0
    assert same.difference.low == same.difference.high == 0
    clear = U.compare_f1(labels, good, bad)
    assert clear.verdict == "higher" and clear.difference.estimate == pytest.approx(clear.a.estimate - clear.b.estimate)
    assert U.compare_f1(labels, bad, good).verdict == "lower"


@pytest.mark.parametrize("labels, predicted, message", [
    ([0, 1, 2], [0, 1, 1], "binary"), ([0, 1], [0, 1, 1], "one length"), ([], [], "empty"),
    ([[0, 1]], [[0, 1]], "1-D"),
])
def test_f1_refuses_bad_input(labels, predicted, message):
    with pytest.raises(ValueError, match=message):
        U.f1(labels, predicted)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_proportion_is_wilsons_interval_as_scipy_computes_it(kn):
    k, n = kn
    iv = U.proportion(k, n)
    ref = scipy.stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert iv.estimate == k / n and iv.n == n and iv.method == "Wilson"
    assert iv.low == pytest.approx(ref.low, abs=1e-12) and iv.high == pytest.approx(ref.high, abs=1e-12)


@pytest.mark.parametrize("k, n", [(-1, 5), (6, 5), (0, 0), (1.5, 4), (True, 3)])
def test_proportion_refuses_impossible_counts(k, n):
    with pytest.raises(ValueError):
        U.proportion(k, n)


def test_an_end_that_rounds_to_zero_is_shown_without_a_sign():
    iv = U.Interval(0.02, -0.00004, 0.042, 100)
    assert iv.range_text() == "0.000 to 0.042" and str(iv) == "0.020 [0.000, 0.042]"
    assert U.Interval(-0.2, -0.31, -0.0004, 9).range_text(2) == "-0.31 to 0.00"
    assert U.Interval(0.5, 0.25, 0.75, 9).format(percent=True) == "50.0% [25.0, 75.0]"


# ----------------------------------------------------------------------------- McNemar's exact guard
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1)), min_size=1, max_size=60))
def test_mcnemar_exact_is_scipys_binomial_test_on_the_discordant_pairs(pairs):
    from scipy import stats

    a, b = (np.array(x, dtype=float) for x in zip(*pairs))
    k, m = int(((a == 1) & (b == 0)).sum()), int(((a == 0) & (b == 1)).sum())
    want = 1.0 if k + m == 0 else stats.binomtest(k, k + m, 0.5).pvalue
    assert U.mcnemar_exact(a, b) == pytest.approx(want, rel=1e-12, abs=1e-15)


def test_few_discordant_pairs_are_within_noise_although_the_bootstrap_excludes_zero():
    # 5 sentences right under A and wrong under B, none the other way, among 400
    a = np.zeros(400)
    b = np.zeros(400)
    a[:5] = 1
    result = U.compare(a, b, paired=True)
    assert result.difference.low > 0  # the bootstrap alone would call it higher
    assert result.p_exact == pytest.approx(2 * 0.5**5)
    assert result.verdict == U.WITHIN_NOISE
    a[:12] = 1  # 12 to 0: exact p = 2 * 0.5**12, well below 0.05
    assert U.compare(a, b, paired=True).verdict == "higher"
    # not 0/1 outcomes: no exact test, the interval alone decides
    assert U.compare(a * 0.5, b, paired=True).p_exact is None


def test_mcnemar_exact_refuses_what_is_not_paired_zero_one_outcomes():
    with pytest.raises(ValueError, match="0/1"):
        U.mcnemar_exact([0, 2], [1, 0])
    with pytest.raises(ValueError, match="same length"):
        U.mcnemar_exact([0, 1], [1])


def test_signed_text_reads_a_difference_with_its_interval():
    assert U.Interval(-0.0372, -0.0741, -0.0004, 400).signed_text() == "-0.037, 95% interval -0.074 to 0.000"
    assert U.Interval(0.25, 0.1, 0.4, 50, level=0.9).signed_text(2) == "+0.25, 90% interval +0.10 to +0.40"
    nan = float("nan")
    assert U.Interval(-0.5, nan, nan, 3).signed_text(missing="no interval") == "-0.500, no interval"


def test_a_group_of_one_keeps_its_estimate_but_gets_no_interval():
    c = U.compare([1.0], [0.0, 0.0, 1.0], paired=False)
    assert c.difference.estimate == pytest.approx(1 - 1 / 3)
    assert np.isnan(c.difference.low) and np.isnan(c.difference.high)
    assert c.verdict == U.WITHIN_NOISE
    assert np.isnan(U.compare([], [0.0, 1.0], paired=False).difference.estimate)


def _resampled_together(matrix, resamples=400, seed=3):
    """(B, S): each seed's mean over the same draws of columns (an explicit loop, the oracle)."""
    rng = np.random.default_rng(seed)
    n = matrix.shape[1]
    return np.stack([matrix[:, rng.integers(0, n, n)].mean(1) for _ in range(resamples)])


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4), st.integers(5, 30), st.integers(0, 10_000))
def test_pooled_interval_is_over_seeds_interval_from_any_draws(S, n, salt):
    """Fed the per-seed means and draws of the columns resampled together, pooled_interval is
    over_seeds' interval: the same estimate, the same seed part, a sentence part from the draws."""
    rng = np.random.default_rng(salt)
    matrix = rng.normal(size=(S, 1)) + rng.normal(size=(S, n))
    draws = _resampled_together(matrix)
    mine = U.pooled_interval(matrix.mean(1), draws, n=n)
    theirs = U.over_seeds(matrix)
    assert mine.estimate == pytest.approx(theirs.estimate)
    assert mine.method == theirs.method
    if S > 1:  # the seed part is the same; the sentence parts are two bootstraps of one variance
        assert mine.high - mine.low == pytest.approx(theirs.high - theirs.low, rel=0.35)
        assert mine.high - mine.low >= 2 * 1.96 * np.sqrt(np.var(matrix.mean(1), ddof=1) / S) * 0.999


def test_pooled_interval_widens_with_the_seed_spread_and_checks_its_shapes():
    rng = np.random.default_rng(0)
    base = rng.normal(size=(1, 50)).repeat(3, 0)
    tight = U.pooled_interval(base.mean(1), _resampled_together(base), n=50)
    spread = base + np.array([[-1.0], [0.0], [1.0]])
    wide = U.pooled_interval(spread.mean(1), _resampled_together(spread), n=50)
    assert wide.high - wide.low > 5 * (tight.high - tight.low)
    with pytest.raises(ValueError, match="same S"):
        U.pooled_interval([0.1, 0.2], np.zeros((10, 3)), n=5)


def test_percentile_interval_is_the_bootstraps_and_has_no_spread_below_two_sentences():
    x = np.random.default_rng(1).normal(size=40)
    boot = U.bootstrap(x, seed=4)
    rng = np.random.default_rng(4)
    draws = np.array([x[rng.integers(0, 40, 40)].mean() for _ in range(U.RESAMPLES)])
    mine = U.percentile_interval(x.mean(), draws, 40)
    assert mine.estimate == pytest.approx(boot.estimate)
    assert mine.low == pytest.approx(boot.low, abs=0.05) and mine.high == pytest.approx(boot.high, abs=0.05)
    one = U.percentile_interval(0.3, [0.1, 0.5], 1)
    assert (one.low, one.high) == (0.3, 0.3)


def test_pooled_comparison_is_compare_over_seeds_verdict():
    rng = np.random.default_rng(2)
    a = rng.normal(0.5, 0.1, size=(3, 60))
    b = a - 0.2 + rng.normal(0, 0.05, size=(3, 60))
    c = U.compare_over_seeds(a, b)
    assert c.verdict == "higher" and c.support == 3
    same = U.compare_over_seeds(a, a)
    assert same.verdict == U.WITHIN_NOISE
