"""Krishna et al.'s agreement metrics (attnlib.experiments.disagreement) against a per-sentence loop."""
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import spearmanr

from attnlib import uncertainty
from attnlib.experiments.disagreement import (METRICS, TOP_K_METRICS, Disagreement, agreement, disagreement_matrix,
                                              pairwise, top_k)
from attnlib.experiments.explanations import ExplanationResult


# ----------------------------------------------------------------------------- the oracle: one sentence at a time
def _top(x, k):
    """The top-k word positions by |score|, ties the earlier word first, k capped at the length."""
    return sorted(range(len(x)), key=lambda w: (-abs(x[w]), w))[: min(k, len(x))]


def _oracle_one(a, b, k, metric):
    a, b = [float(v) for v in a], [float(v) for v in b]
    ta, tb = _top(a, k), _top(b, k)
    kk = min(k, len(a))
    if metric == "feature agreement":
        return len(set(ta) & set(tb)) / kk
    if metric == "rank agreement":
        return sum(x == y for x, y in zip(ta, tb)) / kk
    if metric == "sign agreement":
        return sum(np.sign(a[w]) == np.sign(b[w]) for w in set(ta) & set(tb)) / kk
    if len(a) < 2 or len(set(a)) == 1 or len(set(b)) == 1:
        return np.nan
    return spearmanr(a, b).statistic


def _oracle(a, b, lengths, k, metric):
    return np.array([_oracle_one(a[i, :n], b[i, :n], k, metric) for i, n in enumerate(lengths)])


def _random_batch(rng, N=40, T=9, ties=True):
    lengths = rng.integers(1, T + 1, size=N)
    lengths[0], lengths[1] = 1, T  # a one-word sentence and a full one
    if ties:
        a, b = rng.integers(-2, 3, size=(2, N, T)).astype(float)
    else:
        a, b = rng.normal(size=(2, N, T))
    pad = np.arange(T)[None, :] >= lengths[:, None]
    a[pad], b[pad] = 99.0, np.nan  # padding is ignored, whatever it holds
    return a, b, lengths


@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("ties", [True, False])
@pytest.mark.parametrize("k", [1, 2, 4, 9, 12])
def test_each_metric_is_the_per_sentence_loop(metric, ties, k):
    rng = np.random.default_rng([k, ties, METRICS.index(metric)])
    a, b, lengths = _random_batch(rng, ties=ties)
    got = agreement(a, b, lengths=lengths, k=k, metric=metric)
    want = _oracle(a, b, lengths, k, metric)
    assert got.shape == (len(lengths),) and got.dtype == np.float64
    np.testing.assert_allclose(got, want, atol=1e-12, equal_nan=True)
    if metric in TOP_K_METRICS:
        assert np.isfinite(got).all() and ((got >= 0) & (got <= 1)).all()


def test_worked_examples_by_hand():
    a = np.array([[1.0, -3.0, 2.0, 0.0, 0.0], [5.0, 5.0, 1.0, 0.0, 9.0]])
    b = np.array([[3.0, 1.0, -2.0, 9.0, 9.0], [5.0, -5.0, 0.0, 0.0, 9.0]])
    lengths = [3, 5]
    # sentence 0: top-2 by magnitude: a {1 (-3), 2 (2)}, b {0 (3), 2 (-2)}; one shared word, of the opposite sign
    # sentence 1: a's 5 and 5 tie: the earlier word (0) first; b's 5 and -5 tie too: word 0 first
    np.testing.assert_allclose(agreement(a, b, lengths=lengths, k=2, metric="feature agreement"), [0.5, 1.0])
    np.testing.assert_allclose(agreement(a, b, lengths=lengths, k=2, metric="rank agreement"), [0.5, 1.0])
    np.testing.assert_allclose(agreement(a, b, lengths=lengths, k=2, metric="sign agreement"), [0.0, 1.0])
    # k = 3 in sentence 1: a's third is word 1 (5), b's third is word 1 (-5): the same words, one sign differs
    np.testing.assert_allclose(agreement(a, b, lengths=lengths, k=3, metric="sign agreement"), [1 / 3, 2 / 3])
    # the sign of the score does not decide the top-k, its magnitude does
    neg = np.array([[-9.0, -8.0, 1.0, 2.0]])
    assert agreement(neg, np.array([[9.0, 8.0, 2.0, 1.0]]), k=2, metric="feature agreement")[0] == 1.0
    assert agreement(neg, np.array([[9.0, 8.0, 2.0, 1.0]]), k=2, metric="sign agreement")[0] == 0.0
    # k beyond the sentence: capped, so every word is shared
    assert agreement(a[:1], b[:1], lengths=[3], k=10, metric="feature agreement")[0] == 1.0
    np.testing.assert_array_equal(top_k(a, lengths=lengths, k=2),
                                  [[False, True, True, False, False], [True, False, False, False, True]])


def test_rank_correlation_is_nan_where_undefined_and_matches_metrics_spearman():
    from attnlib.metrics import spearman

    a = np.array([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0], [2.0, 2.0, 2.0]])
    b = np.array([[1.0, 3.0, 2.0], [7.0, 0.0, 0.0], [1.0, 2.0, 3.0]])
    got = agreement(a, b, lengths=[3, 1, 3], k=1, metric="rank correlation")
    assert got[0] == pytest.approx(spearman(a[0], b[0])) and np.isnan(got[1]) and np.isnan(got[2])


def test_torch_and_lists_are_taken_and_lengths_default_to_the_width():
    import torch

    a, b = [[3.0, -1.0, 2.0]], [[1.0, 3.0, 2.0]]
    want = agreement(np.array(a), np.array(b), lengths=[3], k=2, metric="feature agreement")
    assert agreement(torch.tensor(a), torch.tensor(b), k=2, metric="feature agreement")[0] == want[0] == 0.5


# ----------------------------------------------------------------------------- properties
_scores = st.integers(1, 8).flatmap(lambda n: st.tuples(
    st.lists(st.floats(-5, 5, allow_nan=False, width=32) | st.sampled_from([0.0, 1.0, -1.0]), min_size=n, max_size=n),
    st.lists(st.floats(-5, 5, allow_nan=False, width=32) | st.sampled_from([0.0, 1.0, -1.0]), min_size=n, max_size=n)))


@settings(max_examples=60, deadline=None)
@given(pair=_scores, k=st.integers(1, 10), extra=st.integers(0, 4), fill=st.sampled_from([0.0, 1e9, -1e9, np.nan]))
def test_properties_of_the_top_k_metrics(pair, k, extra, fill):
    a, b = (np.array([x]) for x in pair)
    n = a.shape[1]
    values = {m: agreement(a, b, lengths=[n], k=k, metric=m)[0] for m in METRICS}
    fa = values["feature agreement"]
    assert fa == agreement(b, a, lengths=[n], k=k, metric="feature agreement")[0]  # symmetric
    assert values["rank agreement"] <= fa + 1e-12 and values["sign agreement"] <= fa + 1e-12
    for m in TOP_K_METRICS:
        assert agreement(a, a, lengths=[n], k=k, metric=m)[0] == 1.0  # an explanation agrees with itself
        # the padding's width and contents change nothing
        wide_a = np.concatenate([a, np.full((1, extra), fill)], axis=1)
        wide_b = np.concatenate([b, np.full((1, extra), fill)], axis=1)
        assert agreement(wide_a, wide_b, lengths=[n], k=k, metric=m)[0] == values[m]
    if k >= n:
        assert fa == 1.0
    # rank correlation too is blind to the padding
    wide = [np.concatenate([x, np.zeros((1, extra))], axis=1) for x in (a, b)]
    np.testing.assert_equal(agreement(*wide, lengths=[n], k=k, metric="rank correlation")[0],
                            values["rank correlation"])


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(1, 7))
def test_a_batch_is_each_of_its_rows_alone(seed, k):
    rng = np.random.default_rng(seed)
    a, b, lengths = _random_batch(rng, N=12, T=7, ties=bool(seed % 2))
    for m in METRICS:
        batch = agreement(a, b, lengths=lengths, k=k, metric=m)
        alone = [agreement(a[i:i + 1, :n], b[i:i + 1, :n], k=k, metric=m)[0] for i, n in enumerate(lengths)]
        np.testing.assert_array_equal(batch, alone)


# ----------------------------------------------------------------------------- pairwise and the matrix
def _result(scores: dict, lengths):
    n = len(lengths)
    return ExplanationResult(
        probs=np.full((n, 2), 0.5), predicted=np.zeros(n, int), labels=np.zeros(n, int), indices=np.arange(n),
        lengths=np.asarray(lengths), methods=tuple(scores), scores=scores, ig_delta=np.full(n, np.nan))


LENGTHS = [3, 5, 1, 4]


def _hand_made(shift=0.0):
    attention = [np.array([0.5, 0.3, 0.2]), np.array([0.1, 0.4, 0.2, 0.2, 0.1]), np.array([1.0]),
                 np.array([0.4, 0.3, 0.2, 0.1])]
    gradient = [np.array([0.2, 0.3, 0.5]), np.array([0.1, 0.4, 0.3, 0.1, 0.1]), np.array([2.0]),
                np.array([0.4, 0.1, 0.2, 0.3 + shift])]
    random = [np.array([-1.0, 2.0, 0.5]), np.array([0.0, 0.0, 5.0, -4.0, 1.0]), np.array([-3.0]),
              np.array([0.1, 0.2, 0.3, 0.4])]
    return _result({"attention": attention, "gradient × input": gradient, "random": random}, LENGTHS)


def test_pairwise_is_agreement_on_each_pair_of_padded_scores():
    r = _hand_made()
    out = pairwise(r, k=2, metric="feature agreement")
    assert list(out) == [("attention", "gradient × input"), ("attention", "random"), ("gradient × input", "random")]
    for (ma, mb), v in out.items():
        assert v.shape == (1, len(LENGTHS))
        np.testing.assert_array_equal(v[0], _oracle(r.padded(ma), r.padded(mb), LENGTHS, 2, "feature agreement"))
    # attention top-2: {0, 1}, {1, 2}, {0}, {0, 1}; gradient: {2, 1}, {1, 2}, {0}, {0, 3}
    np.testing.assert_array_equal(out[("attention", "gradient × input")][0], [0.5, 1.0, 1.0, 0.5])
    chosen = pairwise([r, r], methods=["random", "attention"], k=2, metric="rank agreement")
    assert list(chosen) == [("random", "attention")] and chosen[("random", "attention")].shape == (2, 4)


def test_the_matrix_is_symmetric_with_ones_on_the_diagonal_and_its_means_are_the_pairs():
    results = [_hand_made(), _hand_made(shift=0.5)]
    for metric in METRICS:
        table = disagreement_matrix(results, k=2, metric=metric, resamples=200)
        assert isinstance(table, Disagreement) and table.n_seeds == 2 and table.metric == metric and table.k == 2
        m = table.mean
        assert list(m.index) == list(m.columns) == ["attention", "gradient × input", "random"]
        np.testing.assert_array_equal(m.to_numpy(), m.to_numpy().T)
        np.testing.assert_array_equal(np.diag(m.to_numpy()), 1.0)
        for (a, b), iv in table.intervals.items():
            per_seed = np.nanmean(table.values[(a, b)], axis=1)
            assert m.loc[a, b] == pytest.approx(per_seed.mean()) == iv.estimate
            assert iv.low <= iv.estimate <= iv.high
            assert table.interval(b, a) is iv
            lo, hi = (0.0, 1.0) if metric in TOP_K_METRICS else (-1.0, 1.0)
            assert lo <= iv.low and iv.high <= hi
        assert table.interval("random", "random").estimate == 1.0
        frame = table.table()
        assert list(frame.columns) == ["method a", "method b", "mean", "low", "high", "interval"] and len(frame) == 3


def test_the_interval_carries_the_seeds_and_widens_when_they_disagree():
    rng = np.random.default_rng(0)
    N, T = 60, 6
    lengths = np.full(N, T)
    base = [rng.normal(size=T) for _ in range(N)]

    def seed_result(noise):
        other = [s + noise * rng.normal(size=T) for s in base]
        return _result({"a": base, "b": other}, lengths)

    agreeing = [seed_result(0.3) for _ in range(3)]
    disagreeing = [seed_result(0.05), seed_result(0.3), seed_result(3.0)]  # one seed's b is noise
    kwargs = dict(k=2, metric="feature agreement", resamples=300)
    narrow = disagreement_matrix(agreeing, **kwargs).intervals[("a", "b")]
    wide = disagreement_matrix(disagreeing, **kwargs).intervals[("a", "b")]
    assert wide.half_width > 2 * narrow.half_width
    assert wide.method == narrow.method == "t over seeds and sentences"
    # it is over_seeds' interval of the (seeds, sentences) values, kept within [0, 1]
    values = pairwise(disagreeing, k=2, metric="feature agreement")[("a", "b")]
    direct = uncertainty.over_seeds(values, resamples=300)
    assert wide.estimate == direct.estimate and wide.low == max(direct.low, 0.0) and wide.high == min(direct.high, 1.0)
    one = disagreement_matrix(agreeing[0], **kwargs).intervals[("a", "b")]
    assert one.method == "bootstrap, one model"


def test_the_matrix_is_a_data_frame_of_floats():
    table = disagreement_matrix(_hand_made(), k=1, metric="sign agreement", resamples=100)
    assert isinstance(table.mean, pd.DataFrame) and (table.mean.dtypes == float).all()


# ----------------------------------------------------------------------------- errors
def test_bad_input_is_a_clear_value_error():
    a = np.zeros((2, 3))
    with pytest.raises(ValueError, match="same shape"):
        agreement(a, np.zeros((2, 4)), k=1, metric="feature agreement")
    with pytest.raises(ValueError, match="2-D"):
        agreement(np.zeros(3), np.zeros(3), k=1, metric="feature agreement")
    with pytest.raises(ValueError, match=r"lengths must be \(N,\)"):
        agreement(a, a, lengths=[3], k=1, metric="feature agreement")
    with pytest.raises(ValueError, match="each length must be in 1..3"):
        agreement(a, a, lengths=[3, 0], k=1, metric="feature agreement")
    with pytest.raises(ValueError, match="each length must be in 1..3"):
        agreement(a, a, lengths=[3, 4], k=1, metric="feature agreement")
    for k in (0, -1, 1.5, True, None):
        with pytest.raises(ValueError, match="k must be an integer >= 1"):
            agreement(a, a, k=k, metric="feature agreement")
    with pytest.raises(ValueError, match="unknown metric 'feature overlap'"):
        agreement(a, a, k=1, metric="feature overlap")
    nan = a.copy()
    nan[1, 1] = np.nan
    with pytest.raises(ValueError, match="a holds NaN among the words .first in sentence 1."):
        agreement(nan, a, k=1, metric="rank agreement")
    agreement(nan, a, lengths=[3, 1], k=1, metric="rank agreement")  # NaN in the padding is fine
    r = _hand_made()
    with pytest.raises(ValueError, match="unknown method 'lime'"):
        pairwise(r, methods=["attention", "lime"], k=1, metric="feature agreement")
    with pytest.raises(ValueError, match="at least two methods"):
        pairwise(r, methods=["attention"], k=1, metric="feature agreement")
    with pytest.raises(ValueError, match="unknown metric"):
        disagreement_matrix(r, k=1, metric="agreement")
    with pytest.raises(ValueError, match="k must be"):
        disagreement_matrix(r, k=0, metric="feature agreement")
    other = _result({"attention": [np.ones(2)], "random": [np.ones(2)]}, [2])
    with pytest.raises(ValueError, match="same sentences"):
        pairwise([r, other], k=1, metric="feature agreement")
    with pytest.raises(ValueError, match="not an ExplanationResult"):
        pairwise([r, {"attention": []}], k=1, metric="feature agreement")
    with pytest.raises(ValueError, match="at least one"):
        disagreement_matrix([], k=1, metric="feature agreement")
