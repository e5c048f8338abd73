"""attnlib.identifiability: null-space dimensions, effective attention and alternative attention.

Oracles: scipy.linalg.null_space (its own SVD and cut-off) for the dimension; the defining
identities for the rest (A_eff T = A T, (A + A~) T = A T, rows of A + A~ distributions).
"""
import numpy as np
import pandas as pd
import pytest
import scipy.linalg
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib import identifiability as idf


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _heads(rng, lengths, heads=3, d_v=4, S=None, junk=True):
    """Padded (B, H, S, d_v) T and (B, H, S, S) row-stochastic A; junk in the padding."""
    S = S or int(max(lengths))
    B = len(lengths)
    T = rng.normal(size=(B, heads, S, d_v))
    A = np.zeros((B, heads, S, S))
    for b, n in enumerate(lengths):
        A[b, :, :n, :n] = _softmax(rng.normal(size=(heads, n, n)) * 2)
        if junk:
            T[b, :, n:] = rng.normal(size=(heads, S - n, d_v)) * 100  # must be ignored
            A[b, :, n:, :] = 7.0
            A[b, :, :, n:] = 7.0
    return A, T


def test_null_space_dim_matches_scipy_per_sentence_and_head():
    rng = np.random.default_rng(0)
    lengths = np.array([2, 4, 5, 9, 9, 12])
    _, T = _heads(rng, lengths, heads=3, d_v=5)
    # a rank-deficient head: two value dims equal, so rank <= 4
    T[3, 1, :, 4] = T[3, 1, :, 3]
    dims = idf.null_space_dim(T, lengths)
    assert dims.shape == (6, 3)
    for b, n in enumerate(lengths):
        for h in range(3):
            expected = scipy.linalg.null_space(T[b, h, :n].T).shape[1]  # left null space of T
            assert dims[b, h] == expected, (b, h)
    assert dims[3, 1] == 9 - 4
    np.testing.assert_array_equal(dims[4], 9 - 5)


def test_null_space_dim_is_length_minus_head_dim_once_longer():
    rng = np.random.default_rng(1)
    lengths = np.arange(1, 20)
    _, T = _heads(rng, lengths, heads=2, d_v=8)
    dims = idf.null_space_dim(T, lengths)
    np.testing.assert_array_equal(dims, np.maximum(lengths - 8, 0)[:, None].repeat(2, 1))


def test_tolerance_is_relative_to_the_largest_singular_value():
    rng = np.random.default_rng(2)
    T = rng.normal(size=(1, 1, 10, 4))
    T[..., 3] = T[..., 2] * (1 + 1e-15)  # numerically rank 3
    small, large = T * 1e-8, T * 1e8
    assert idf.null_space_dim(small)[0, 0] == idf.null_space_dim(large)[0, 0] == 7


def test_padding_does_not_change_anything():
    rng = np.random.default_rng(3)
    lengths = np.array([6, 10])
    A, T = _heads(rng, lengths, heads=2, d_v=3, S=14, junk=True)
    A2, T2 = A.copy(), T.copy()
    T2[0, :, 6:] = 0.0
    A2[0, :, 6:, :] = 0.0
    A2[0, :, :, 6:] = 0.0
    np.testing.assert_array_equal(idf.null_space_dim(T, lengths), idf.null_space_dim(T2, lengths))
    e1, e2 = idf.effective_attention(A, T, lengths), idf.effective_attention(A2, T2, lengths)
    np.testing.assert_allclose(e1, e2, atol=1e-12)
    assert (e1[0, :, 6:, :] == 0).all() and (e1[0, :, :, 6:] == 0).all()


def test_effective_attention_keeps_the_output_and_drops_the_null_part():
    rng = np.random.default_rng(4)
    lengths = np.array([3, 8, 11])
    A, T = _heads(rng, lengths, heads=2, d_v=4)
    eff, dims = idf.effective_attention(A, T, lengths, with_null_dim=True)
    np.testing.assert_array_equal(dims, idf.null_space_dim(T, lengths))
    np.testing.assert_array_equal(eff, idf.effective_attention(A, T, lengths))
    for b, n in enumerate(lengths):
        a, t, e = A[b, :, :n, :n], T[b, :, :n], eff[b, :, :n, :n]
        np.testing.assert_allclose(e @ t, a @ t, atol=1e-10)  # same output
        null = scipy.linalg.null_space(np.swapaxes(t, -1, -2)[0])  # left null space of head 0
        if null.size:
            np.testing.assert_allclose(e[0] @ null, 0.0, atol=1e-10)  # nothing left in it
            np.testing.assert_allclose((a[0] - e[0]) @ t[0], 0.0, atol=1e-10)  # the removed part is silent
        else:
            np.testing.assert_allclose(e, a, atol=1e-10)  # short sentence: identifiable, unchanged


def test_effective_attention_on_a_short_sentence_is_raw_attention():
    rng = np.random.default_rng(5)
    A, T = _heads(rng, [4], heads=1, d_v=8)
    np.testing.assert_allclose(idf.effective_attention(A, T, [4]), A, atol=1e-12)


def test_alternative_attention_has_the_same_output_and_is_a_distribution():
    rng = np.random.default_rng(6)
    lengths = np.array([5, 12, 16])
    A, T = _heads(rng, lengths, heads=3, d_v=4)
    alt = idf.alternative_attention(A, T, lengths, seed=0)
    for b, n in enumerate(lengths):
        new = alt.attention[b, :, :n, :n]
        assert (new >= 0).all()
        np.testing.assert_allclose(new.sum(-1), 1.0, atol=1e-10)
        np.testing.assert_allclose(new @ T[b, :, :n], A[b, :, :n, :n] @ T[b, :, :n], atol=1e-10)
    assert alt.output_change.max() < 1e-10 * alt.output_scale.max()
    np.testing.assert_array_equal(alt.null_dim, np.maximum(lengths - 5, 0)[:, None].repeat(3, 1))
    assert (alt.jsd[0] == 0).all()  # n = 5 = d_v + 1: nowhere to move
    assert (alt.jsd[2] > 0).all()  # long sentences move every row
    # as far as positivity allows: each moved row touches zero somewhere
    assert (alt.attention[2].min(-1) < 1e-12).all()
    # more candidates never move a row less (the first candidates are the same draws)
    one = idf.alternative_attention(A, T, lengths, seed=0, n_candidates=1)
    assert (alt.jsd >= one.jsd - 1e-12).all() and np.median(alt.jsd[2]) > 1.5 * np.median(one.jsd[2])


def test_alternative_attention_is_seeded():
    rng = np.random.default_rng(7)
    A, T = _heads(rng, [10], heads=2, d_v=3)
    a1 = idf.alternative_attention(A, T, seed=1).attention
    np.testing.assert_array_equal(a1, idf.alternative_attention(A, T, seed=1).attention)
    assert not np.allclose(a1, idf.alternative_attention(A, T, seed=2).attention)
    uni = idf.alternative_attention(A, T, target="uniform")
    np.testing.assert_allclose(uni.attention.sum(-1), 1.0, atol=1e-10)


def test_torch_and_float32_inputs():
    rng = np.random.default_rng(8)
    A, T = _heads(rng, [9, 9], heads=2, d_v=4, junk=False)
    At, Tt = torch.tensor(A, dtype=torch.float32), torch.tensor(T, dtype=torch.float32)
    np.testing.assert_array_equal(idf.null_space_dim(Tt), idf.null_space_dim(T))
    eff = idf.effective_attention(At, Tt)
    assert eff.dtype == np.float64
    np.testing.assert_allclose(eff, idf.effective_attention(A, T), atol=1e-5)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 14), d_v=st.integers(1, 6), heads=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_properties_on_random_heads(n, d_v, heads, seed):
    rng = np.random.default_rng(seed)
    A, T = _heads(rng, [n], heads=heads, d_v=d_v, junk=False)
    dims = idf.null_space_dim(T)
    assert (dims == max(n - d_v, 0)).all()  # Gaussian T has full rank almost surely
    eff = idf.effective_attention(A, T)
    np.testing.assert_allclose(eff @ T, A @ T, atol=1e-9)
    alt = idf.alternative_attention(A, T, seed=seed)
    np.testing.assert_allclose(alt.attention @ T, A @ T, atol=1e-9)
    np.testing.assert_allclose(alt.attention.sum(-1), 1.0, atol=1e-9)
    assert (alt.attention >= 0).all()
    assert ((alt.jsd >= 0) & (alt.jsd <= np.log(2) + 1e-12)).all()


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: idf.null_space_dim(np.zeros((3, 4))), "B, ..., S, d_v"),
        (lambda: idf.null_space_dim(np.zeros((2, 1, 4, 3)), lengths=[4]), "lengths must be 2"),
        (lambda: idf.null_space_dim(np.zeros((2, 1, 4, 3)), lengths=[0, 4]), r"\[1, 4\]"),
        (lambda: idf.null_space_dim(np.zeros((2, 1, 4, 3)), lengths=[2, 5]), r"\[1, 4\]"),
        (lambda: idf.null_space_dim(np.full((1, 1, 4, 3), np.nan)), "NaN"),
        (lambda: idf.null_space_dim(np.zeros((1, 1, 4, 3), dtype=int)), "float"),
        (lambda: idf.effective_attention(np.zeros((1, 1, 4, 5)), np.zeros((1, 1, 4, 3))), "A must be"),
        (lambda: idf.alternative_attention(np.ones((1, 1, 4, 4)), np.ones((1, 1, 4, 3))), "distribution"),
        (lambda: idf.alternative_attention(np.eye(4)[None, None], np.ones((1, 1, 4, 3)), target="far"), "target"),
    ],
)
def test_bad_input_gets_a_clear_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_reduced_values_have_the_same_null_space_and_projection_as_the_full_T():
    rng = np.random.default_rng(9)
    lengths = np.array([3, 7, 12])
    B, L, H, S, d_v, d_model = 3, 2, 3, 12, 4, 10
    V = rng.normal(size=(B, L, H, S, d_v))
    W = rng.normal(size=(L, H, d_v, d_model))
    W[1, 2, 3] = W[1, 2, 2]  # one head's W_O has rank 3: T has rank <= 3 there
    T_full = V @ W  # (B, L, H, S, d_model)
    T_red = idf.reduce_values(V, W)
    assert T_red.shape == (B, L, H, S, d_v)
    np.testing.assert_array_equal(idf.null_space_dim(T_red, lengths), idf.null_space_dim(T_full, lengths))
    assert (idf.null_space_dim(T_red, lengths)[2, 1, 2] == 12 - 3)
    A = np.zeros((B, L, H, S, S))
    for b, n in enumerate(lengths):
        A[b, ..., :n, :n] = _softmax(rng.normal(size=(L, H, n, n)))
    np.testing.assert_allclose(idf.effective_attention(A, T_red, lengths), idf.effective_attention(A, T_full, lengths),
                               atol=1e-10)
    for b, n in enumerate(lengths):  # same singular values
        s_full = np.linalg.svd(T_full[b, ..., :n, :], compute_uv=False)
        s_red = np.linalg.svd(T_red[b, ..., :n, :], compute_uv=False)
        k = min(s_full.shape[-1], s_red.shape[-1])
        np.testing.assert_allclose(s_red[..., :k], s_full[..., :k], atol=1e-10)
    with pytest.raises(ValueError, match="output_projection"):
        idf.reduce_values(V, W[..., :3, :])


# ----------------------------------------------------------------------------- trace_statistics
def _tiny_trace(lengths=(3, 9, 6), head_dim=4):
    from attnlib import data
    from attnlib.models import TransformerClassifier, TransformerConfig

    torch.manual_seed(0)
    model = TransformerClassifier(30, TransformerConfig(layers=2, heads=2, head_dim=head_dim, embed_dim=6, dropout=0.0))
    rng = np.random.default_rng(1)
    ids = [np.concatenate([[data.SOS], rng.integers(4, 30, n - 2), [data.EOS]]) for n in lengths]
    return model.trace(data.collate(ids, np.zeros(len(lengths))))


def test_trace_statistics_against_direct_computation():
    tr = _tiny_trace()
    frame = idf.trace_statistics(tr)
    B, L, H, T = len(tr), tr.n_layers, tr.n_heads, tr.attentions.shape[-1]
    assert len(frame) == B * L * H
    lengths = tr.lengths.numpy()
    full_T = tr.value_output().numpy()  # (B, L, H, T, d_model): Brunner's T, not the reduced stand-in
    np.testing.assert_array_equal(
        frame.sort_values(["sentence", "layer", "head"])["null_dim"].to_numpy(),
        idf.null_space_dim(full_T, lengths).reshape(-1))
    short = frame["length"] <= frame["d_v"]
    assert short.any() and (~short).any()
    assert (frame.loc[short, "correlation"] == 1).all() and (frame.loc[short, "null_dim"] == 0).all()
    assert (frame.loc[~short, "null_dim"] == frame.loc[~short, "length"] - 4).all()
    eff = idf.effective_attention(tr.attentions.numpy(), full_T, lengths)
    A = tr.attentions.numpy()
    for _, row in frame.sample(8, random_state=0).iterrows():
        b, l, h, n = (int(row[k]) for k in ("sentence", "layer", "head", "length"))
        assert row["raw [CLS]"] == pytest.approx(A[b, l, h, :n, 0].mean())
        assert row["effective [SEP]"] == pytest.approx(eff[b, l, h, :n, n - 1].mean(), abs=1e-6)  # float32 T: reduced vs full
        r = np.corrcoef(A[b, l, h, :n, :n].ravel(), eff[b, l, h, :n, :n].ravel())[0, 1]
        assert row["correlation"] == pytest.approx(r, abs=1e-6)


def test_trace_statistics_groups_and_bad_input():
    tr = _tiny_trace()
    T = tr.attentions.shape[-1]
    every = np.ones((len(tr), T), dtype=bool)
    frame = idf.trace_statistics(tr, {"all": every})
    np.testing.assert_allclose(frame["raw all"], 1.0, atol=1e-6)  # rows are distributions over the sentence
    with pytest.raises(ValueError, match="group 'x'"):
        idf.trace_statistics(tr, {"x": every[:, :2]})
    with pytest.raises(ValueError, match="Trace"):
        idf.trace_statistics(type("T", (), {"attentions": torch.zeros(2, 2), "values": torch.zeros(2, 2)})())


def test_the_rank_tolerance_follows_the_precision_the_values_were_computed_in():
    """A reader who casts a float32 model's T to float64 "for accuracy" gets the same null spaces."""
    rng = np.random.default_rng(3)
    # float32 T of rank d_v = 4 for n = 12 tokens, as a float32 model computes it (rounding of order 1e-7)
    T32 = (rng.standard_normal((3, 12, 4)) @ rng.standard_normal((3, 4, 32))).astype(np.float32)
    T32 += (rng.standard_normal(T32.shape) * 1e-6).astype(np.float32) * (np.arange(3) == 2)[:, None, None]
    as32 = idf.null_space_dim(T32)
    assert as32.tolist() == [8, 8, 8]  # rounding-level noise is not rank
    assert idf.null_space_dim(T32.astype(np.float64)).tolist() == as32.tolist()
    assert idf.null_space_dim(torch.from_numpy(T32).double()).tolist() == as32.tolist()
    # genuinely float64 values keep float64's tolerance: a 1e-6 component is rank there
    T64 = T32.astype(np.float64) + rng.standard_normal(T32.shape) * 1e-9
    assert idf.null_space_dim(T64).tolist() == [0, 0, 0]


# ----------------------------------------------------------------------------- alternative_reach
def test_alternative_reach_is_alternative_attention_on_every_long_sentence_and_head():
    from attnlib import data
    from attnlib.models import TransformerClassifier, TransformerConfig

    torch.manual_seed(0)
    model = TransformerClassifier(30, TransformerConfig(layers=2, heads=2, head_dim=4, embed_dim=6, dropout=0.0))
    rng = np.random.default_rng(1)
    lengths = (3, 9, 6, 4)
    ids = [np.concatenate([[data.SOS], rng.integers(4, 30, n - 2), [data.EOS]]) for n in lengths]
    batch = data.collate(ids, np.zeros(len(lengths)), np.arange(len(lengths)))
    frame = idf.alternative_reach(model, [batch], seed=3, progress=False)
    assert sorted(frame["sentence"].unique()) == [1, 2]  # longer than d_v = 4 only
    assert len(frame) == 2 * 2 * 2 and (frame["length"] > frame["d_v"]).all()
    tr = model.trace(batch)
    keep = np.array([1, 2])
    n = np.array([9, 6])
    for layer in range(2):
        Tm = idf.reduce_values(tr.values[keep, layer].detach().numpy(), tr.output_projection[layer].detach().numpy())
        alt = idf.alternative_attention(tr.attentions[keep, layer].detach().numpy(), Tm, n, seed=3)
        rows = frame[frame["layer"] == layer].sort_values(["sentence", "head"])
        for k, (b, length) in enumerate(zip(keep, n)):
            for h in range(2):
                row = rows[(rows["sentence"] == b) & (rows["head"] == h)].iloc[0]
                assert row["mean_jsd"] == pytest.approx(alt.jsd[k, h, :length].mean())
                assert row["max_jsd"] == pytest.approx(alt.jsd[k, h, :length].max())
                assert row["null_dim"] == alt.null_dim[k, h]
    # the budget only sizes the tensor programs
    small = idf.alternative_reach(model, [batch], seed=3, budget=64, progress=False)
    pd.testing.assert_frame_equal(frame, small)
    short = data.collate([ids[0]], np.zeros(1), np.arange(1))
    assert len(idf.alternative_reach(model, [short], progress=False)) == 0
