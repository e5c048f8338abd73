"""attnlib.metrics: properties (hypothesis), agreement with SciPy, and input validation."""
import math
import warnings

import numpy as np
import pytest
import scipy.spatial.distance
import scipy.special
import scipy.stats
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from attnlib.metrics import jsd, kendall_tau, kl, tvd

LN2 = math.log(2.0)


@st.composite
def distributions(draw, n=None, zeros=True):
    """A probability vector (some entries may be exactly 0), or a pair of them of equal length."""
    n = n or draw(st.integers(1, 30))
    # No subnormal weights: SciPy's reference itself overflows on them (jensenshannon -> inf).
    positive = st.floats(1e-6, 10.0) if zeros else st.floats(1e-3, 10.0)
    elements = st.one_of(st.just(0.0), positive) if zeros else positive
    w = draw(arrays(np.float64, n, elements=elements))
    if w.sum() <= 1e-9:
        w[draw(st.integers(0, n - 1))] = 1.0
    return w / w.sum()


@st.composite
def pairs(draw, zeros=True):
    n = draw(st.integers(1, 30))
    return draw(distributions(n, zeros)), draw(distributions(n, zeros))


# ----------------------------------------------------------------------------- properties


@given(pairs())
def test_jsd_symmetric_bounded_and_nan_free(pq):
    p, q = pq
    a, b = jsd(p, q), jsd(q, p)
    assert not math.isnan(a)
    assert a == pytest.approx(b, abs=1e-12)
    assert -1e-12 <= a <= LN2 + 1e-9


@given(distributions())
def test_identity_of_indiscernibles(p):
    assert jsd(p, p) == pytest.approx(0.0, abs=1e-12)
    assert tvd(p, p) == 0.0
    assert kl(p, p) == pytest.approx(0.0, abs=1e-12)


@given(pairs())
def test_tvd_symmetric_bounded(pq):
    p, q = pq
    assert tvd(p, q) == pytest.approx(tvd(q, p))
    assert 0.0 <= tvd(p, q) <= 1.0 + 1e-12


@given(pairs(zeros=False))
def test_kl_nonnegative_and_matches_scipy(pq):
    p, q = pq
    assert kl(p, q) >= -1e-12
    assert kl(p, q) == pytest.approx(scipy.stats.entropy(p, q), rel=1e-9, abs=1e-12)


@given(pairs())
def test_jsd_matches_scipy(pq):
    p, q = pq
    ours = jsd(p, q)
    m = (p + q) / 2
    theirs = 0.5 * scipy.special.rel_entr(p, m).sum() + 0.5 * scipy.special.rel_entr(q, m).sum()
    assert ours == pytest.approx(theirs, abs=1e-9)
    # scipy's jensenshannon is the square root (natural log by default); it can return nan for
    # p == q (sqrt of a rounding-negative value), so compare only where it is defined.
    distance = scipy.spatial.distance.jensenshannon(p, q)
    if np.isfinite(distance):
        assert ours == pytest.approx(distance**2, abs=1e-9)


@given(pairs())
def test_pinsker_style_bound(pq):
    """JSD <= TVD * ln 2 (Lin 1991): a distance that cannot move without moving the other."""
    p, q = pq
    assert jsd(p, q) <= tvd(p, q) * LN2 + 1e-9


@given(pairs())
def test_pinsker_lower_bound(pq):
    """JSD >= TVD^2 / 2: Pinsker's inequality on each half, KL(p || m) >= 2 TVD(p, m)^2."""
    p, q = pq
    assert jsd(p, q) >= tvd(p, q) ** 2 / 2 - 1e-9


def test_disjoint_supports_reach_the_maxima():
    p, q = np.array([0.5, 0.5, 0.0, 0.0]), np.array([0.0, 0.0, 0.3, 0.7])
    assert jsd(p, q) == pytest.approx(LN2, abs=1e-12)
    assert tvd(p, q) == pytest.approx(1.0)


def test_binary_output_tvd_is_absolute_difference():
    a, b = 0.83, 0.41
    assert tvd([1 - a, a], [1 - b, b]) == pytest.approx(abs(a - b))


def test_worked_example_from_chapter_two():
    p = np.array([0.1, 0.1, 0.5, 0.3])
    q = np.array([0.0, 0.0, 0.3, 0.7])
    assert tvd(p, q) == pytest.approx(0.4)
    expected = 0.5 * scipy.stats.entropy(p, (p + q) / 2) + 0.5 * scipy.stats.entropy(q, (p + q) / 2)
    assert jsd(p, q) == pytest.approx(expected, abs=1e-12)


# ----------------------------------------------------------------------------- batching, masks


def test_batched_equals_rowwise_and_torch_in_torch_out():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(7), size=(3, 4))
    q = rng.dirichlet(np.ones(7), size=(3, 4))
    for f in (tvd, jsd, kl):
        batched = f(p, q)
        assert batched.shape == (3, 4)
        rowwise = np.array([[f(p[i, j], q[i, j]) for j in range(4)] for i in range(3)])
        np.testing.assert_allclose(batched, rowwise, atol=1e-12)
        out = f(torch.tensor(p), torch.tensor(q))
        assert isinstance(out, torch.Tensor) and out.shape == (3, 4)


def test_mask_and_lengths_ignore_padding():
    rng = np.random.default_rng(1)
    lengths = np.array([3, 5, 2])
    p = np.zeros((3, 6))
    q = np.zeros((3, 6))
    for i, n in enumerate(lengths):
        p[i, :n] = rng.dirichlet(np.ones(n))
        q[i, :n] = rng.dirichlet(np.ones(n))
    p[:, -1] = 123.0  # garbage in the padding must not matter
    mask = np.arange(6)[None] < lengths[:, None]
    for f in (tvd, jsd, kl):
        expected = np.array([f(p[i, :n], q[i, :n]) for i, n in enumerate(lengths)])
        np.testing.assert_allclose(f(p, q, lengths=lengths), expected, atol=1e-12)
        np.testing.assert_allclose(f(p, q, mask=mask), expected, atol=1e-12)


def test_jsd_is_differentiable_through_zeros():
    logits = torch.tensor([[2.0, -1.0, 0.5, float("-inf")]], requires_grad=True)
    p = torch.softmax(logits, -1)  # last entry exactly 0
    q = torch.tensor([[0.25, 0.25, 0.5, 0.0]])
    jsd(p, q).sum().backward()
    assert torch.isfinite(logits.grad[:, :3]).all()


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "p, q, message",
    [
        ([0.5, 0.6], [0.5, 0.5], "sum to 1"),
        ([1.2, -0.2], [0.5, 0.5], "negative"),
        ([0.5, 0.5], [0.3, 0.3, 0.4], "same shape"),
        ([0.5, float("nan")], [0.5, 0.5], "NaN"),
        ([[0.5, 0.5], [0.2, 0.2]], [[0.5, 0.5], [0.5, 0.5]], "sum to 1"),
    ],
)
@pytest.mark.parametrize("f", [tvd, jsd, kl])
def test_bad_distributions_raise(f, p, q, message):
    with pytest.raises(ValueError, match=message):
        f(p, q)


def test_sum_tolerance_is_documented_and_applied():
    p = np.array([0.5, 0.5 + 5e-4])  # inside 1e-3
    assert tvd(p, [0.5, 0.5]) >= 0
    with pytest.raises(ValueError):
        tvd(np.array([0.5, 0.5 + 5e-3]), [0.5, 0.5])


def test_check_false_skips_validation():
    assert tvd([0.5, 0.6], [0.5, 0.5], check=False) == pytest.approx(0.05)


# ----------------------------------------------------------------------------- Kendall tau


def _scipy_tau(x, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = scipy.stats.kendalltau(x, y)
    return r.statistic, r.pvalue


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 45).flatmap(lambda n: st.tuples(
    arrays(np.float64, n, elements=st.integers(-3, 3).map(float)),  # many ties
    arrays(np.float64, n, elements=st.floats(-5, 5, allow_nan=False)),
)))
def test_kendall_tau_matches_scipy_with_ties(xy):
    x, y = xy
    tau, p = kendall_tau(x, y)
    s_tau, s_p = _scipy_tau(x, y)
    if math.isnan(s_tau):
        assert math.isnan(tau) and math.isnan(p)
    else:
        assert tau == pytest.approx(s_tau, abs=1e-6)
        assert p == pytest.approx(s_p, abs=1e-6)


def test_kendall_tau_matches_scipy_on_random_batches():
    rng = np.random.default_rng(42)
    for n, ties in [(2, False), (5, True), (20, False), (33, False), (34, False), (40, True), (120, False)]:
        x = rng.normal(size=(200, n))
        y = x + rng.normal(size=(200, n)) * rng.uniform(0.1, 3.0, size=(200, 1))
        if ties:
            x, y = np.round(x), np.round(y * 2) / 2
        tau, p = kendall_tau(x, y)
        ref = np.array([_scipy_tau(a, b) for a, b in zip(x, y)])
        np.testing.assert_allclose(tau, ref[:, 0], atol=1e-6, equal_nan=True)
        np.testing.assert_allclose(p, ref[:, 1], atol=1e-6, equal_nan=True)


def test_kendall_tau_exact_pvalue_for_long_perfect_agreement():
    x = np.arange(50.0)
    tau, p = kendall_tau(x, x)  # n > 33 but no discordant pair: SciPy's exact 2/n!
    s_tau, s_p = _scipy_tau(x, x)
    assert tau == pytest.approx(1.0) and p == pytest.approx(s_p, rel=1e-9)


def test_kendall_tau_masked_rows_equal_cropped_rows():
    rng = np.random.default_rng(3)
    x, y = rng.normal(size=(4, 10)), rng.normal(size=(4, 10))
    lengths = np.array([10, 7, 2, 4])
    x[1, 7:] = np.nan  # padding may hold anything, even NaN
    tau, p = kendall_tau(x, y, lengths=lengths)
    for i, n in enumerate(lengths):
        s_tau, s_p = _scipy_tau(x[i, :n], y[i, :n])
        assert tau[i] == pytest.approx(s_tau, abs=1e-9)
        assert p[i] == pytest.approx(s_p, abs=1e-9)


def test_kendall_tau_ragged_rows_with_ties_and_holes_match_scipy_in_any_chunking():
    # Rows of very different lengths (processed in length groups), many ties, and masks with
    # holes (not just padding at the end): every row agrees with SciPy on its valid entries.
    rng = np.random.default_rng(7)
    N, T = 60, 90
    x, y = np.round(rng.normal(size=(N, T)) * 2), rng.normal(size=(N, T))
    y[::3] = np.round(y[::3])
    mask = np.zeros((N, T), dtype=bool)
    for r in range(N):
        n = int(rng.integers(2, T + 1))
        mask[r, np.sort(rng.choice(T, size=n, replace=False))] = True
    for chunk in (50, 5_000, 250_000):
        tau, p = kendall_tau(x, y, mask=mask, chunk_elements=chunk)
        ref = np.array([_scipy_tau(x[r, mask[r]], y[r, mask[r]]) for r in range(N)])
        np.testing.assert_allclose(tau, ref[:, 0], atol=1e-9, equal_nan=True)
        np.testing.assert_allclose(p, ref[:, 1], atol=1e-9, equal_nan=True)


def test_kendall_tau_constant_row_is_nan_not_error():
    tau, p = kendall_tau([[1.0, 1.0, 1.0], [1.0, 2.0, 3.0]], [[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    assert math.isnan(tau[0]) and math.isnan(p[0])
    assert tau[1] == pytest.approx(-1.0)


def test_kendall_tau_leading_dims_and_torch():
    rng = np.random.default_rng(5)
    x, y = torch.tensor(rng.normal(size=(2, 3, 8))), torch.tensor(rng.normal(size=(2, 3, 8)))
    tau, p = kendall_tau(x, y)
    assert isinstance(tau, torch.Tensor) and tau.shape == (2, 3) and p.shape == (2, 3)
    s_tau, _ = _scipy_tau(x[1, 2].numpy(), y[1, 2].numpy())
    assert tau[1, 2].item() == pytest.approx(s_tau)


@pytest.mark.parametrize(
    "x, y, kwargs, message",
    [
        ([1.0], [2.0], {}, "at least 2"),
        ([[1.0, 2.0, 3.0]], [[1.0, 2.0, 3.0]], {"lengths": [1]}, "at least 2"),
        ([1.0, 2.0], [1.0, 2.0, 3.0], {}, "same shape"),
        ([1.0, float("nan"), 3.0], [1.0, 2.0, 3.0], {}, "NaN"),
        ([1.0, 2.0], [1.0, 2.0], {"lengths": [1], "mask": [True, True]}, "either"),
    ],
)
def test_kendall_tau_bad_input(x, y, kwargs, message):
    with pytest.raises(ValueError, match=message):
        kendall_tau(x, y, **kwargs)


def test_read_only_input_gives_no_warning_and_same_value():
    """np.broadcast_to views are read-only; the metrics copy them instead of warning."""
    import warnings

    rng = np.random.default_rng(3)
    base = rng.dirichlet(np.ones(5), size=4)
    seeds = rng.dirichlet(np.ones(5), size=(1, 4))
    view = np.broadcast_to(base, seeds.shape)
    assert not view.flags.writeable
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = jsd(seeds, view)
    np.testing.assert_allclose(got, jsd(seeds, view.copy()))


def test_attention_positions_on_ragged_attention():
    from attnlib.metrics import attention_positions

    att = [np.array([0.7, 0.2, 0.1]), np.array([0.25] * 4), np.array([0.1, 0.9]), np.array([1.0])]
    got = attention_positions(att)
    assert got["mean weight on first token"] == pytest.approx((0.7 + 0.25 + 0.1 + 1.0) / 4)
    assert got["mean weight on last token"] == pytest.approx((0.1 + 0.25 + 0.9 + 1.0) / 4)
    assert got["peak on first token"] == pytest.approx(2 / 4)  # the uniform row is a tie: neither
    assert got["peak on last token"] == pytest.approx(2 / 4)  # the one-token row is both first and last
    assert got["mean peak weight"] == pytest.approx((0.7 + 0.25 + 0.9 + 1.0) / 4)
    with pytest.raises(ValueError, match="at least one instance"):
        attention_positions([])
    with pytest.raises(ValueError, match="instance 1 has none"):
        attention_positions([np.array([1.0]), np.array([])])


# ------------------------------------------------------------------ Spearman's rho
from attnlib.metrics import spearman  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 12).flatmap(
        lambda n: st.tuples(
            st.lists(st.integers(-3, 3), min_size=n, max_size=n),
            st.lists(st.floats(-5, 5, allow_nan=False), min_size=n, max_size=n),
        )
    )
)
def test_spearman_matches_scipy_with_ties(xy):
    x, y = (np.asarray(v, dtype=float) for v in xy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scipy.stats.ConstantInputWarning)
        expected = scipy.stats.spearmanr(x, y).statistic
    got = spearman(x[None], y[None])[0]
    if np.isnan(expected):
        assert np.isnan(got)
    else:
        assert got == pytest.approx(expected, abs=1e-12)


def test_spearman_masked_rows_equal_each_row_alone_and_keep_tensors():
    rng = np.random.default_rng(3)
    lengths = np.array([2, 7, 5, 9])
    x, y = rng.normal(size=(4, 9)), rng.normal(size=(4, 9))
    x[1, :3] = 1.0  # ties
    x[lengths[:, None] <= np.arange(9)] = np.nan  # padding may hold anything, even NaN
    rho = spearman(x, y, lengths=lengths)
    for i, n in enumerate(lengths):
        assert rho[i] == pytest.approx(scipy.stats.spearmanr(x[i, :n], y[i, :n]).statistic, abs=1e-12)
    out = spearman(torch.as_tensor(np.nan_to_num(x)), torch.as_tensor(y), lengths=torch.as_tensor(lengths))
    assert isinstance(out, torch.Tensor) and np.allclose(out.numpy(), rho)
    const = spearman(np.ones((1, 4)), np.arange(4.0)[None])
    assert np.isnan(const[0])


def test_spearman_rejects_bad_input():
    with pytest.raises(ValueError, match="at least 2"):
        spearman(np.ones((2, 3)), np.ones((2, 3)), lengths=[1, 3])
    with pytest.raises(ValueError, match="finite"):
        spearman(np.array([[1.0, np.inf]]), np.array([[1.0, 2.0]]))
    with pytest.raises(ValueError):
        spearman(np.ones((2, 3)), np.ones((2, 4)))


def test_residue_bound_shows_rounding_residue_as_the_next_power_of_ten():
    from attnlib.metrics import residue_bound

    assert residue_bound(6.4194446782662825e-09) == "below 1e-8"
    assert residue_bound(6.419444661661174e-09) == "below 1e-8"  # the same bound on another CPU
    assert residue_bound(-1.788139e-07) == "below 1e-6"
    assert residue_bound(np.float32(2.086163e-07)) == "below 1e-6"
    assert residue_bound(torch.tensor(0.03)) == "below 1e-1"
    assert residue_bound(0.0) == "0"
    with pytest.raises(ValueError, match="finite"):
        residue_bound(float("nan"))


@given(st.floats(min_value=1e-300, max_value=1e-2))
def test_residue_bound_is_above_the_value_and_within_ten_times_it(x):
    from attnlib.metrics import residue_bound

    bound = float(residue_bound(x).removeprefix("below "))
    assert x < bound <= 10 * x * (1 + 1e-12)
