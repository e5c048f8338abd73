"""attnlib.token_identity: token identifiability by layer (Brunner et al. 2020, Sec. 5).

Oracles: sklearn.metrics.pairwise (cosine_similarity, euclidean_distances) with an argmax per
sentence in a plain loop, for the matching step; constructions whose answer is known for the
rest (layer 0 is its own answer, a rotation is undone by a linear map, a hidden state with
no token information scores exactly chance, exact ties go to the first position).
"""
import numpy as np
import scipy.stats
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics.pairwise import cosine_similarity, euclidean_distances

from attnlib import token_identity as ti

FAST = dict(epochs=3, batch_size=64, mlp_hidden=16, progress=False)


def _embeddings(rng, B, S, D, lengths, junk=True):
    """Distinct random input embeddings (B, S, D); junk in the padding (must be ignored)."""
    e0 = rng.normal(size=(B, S, D))
    if junk:
        for b, n in enumerate(lengths):
            e0[b, n:] = rng.normal(size=(S - n, D)) * 100
    return e0


def _data(seed=0, B=60, S=10, D=12, min_len=3):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(min_len, S + 1, B)
    return rng, lengths, _embeddings(rng, B, S, D, lengths)


def _acc(result, layer, probe, distance):
    f = result.frame
    row = f[(f.layer == layer) & (f.probe == probe) & (f.distance == distance)]
    assert len(row) == 1
    return float(row.accuracy.iloc[0])


def _oracle_nearest(P, E0, n, distance):
    """Per-sentence nearest input position by sklearn (P (n, D), E0 (n, D))."""
    if distance == "cosine":
        return cosine_similarity(P[:n], E0[:n]).argmax(1)
    return euclidean_distances(P[:n], E0[:n]).argmin(1)


# ----------------------------------------------------------------------------- known answers
def test_layer_zero_with_the_naive_probe_identifies_every_token():
    rng, lengths, e0 = _data(0)
    hs = np.stack([e0, rng.normal(size=e0.shape)], 1)
    r = ti.token_identifiability(hs, lengths, train=np.arange(40), test=np.arange(40, 60), probes=("naive",),
                                 progress=False)
    for distance in ("cosine", "l2"):
        assert _acc(r, 0, "naive", distance) == 1.0
        assert _acc(r, 1, "naive", distance) < 0.5  # unrelated noise: near chance
    assert r.n_test_tokens == lengths[40:].sum() and r.n_train_tokens == 0
    assert set(r.frame.n_tokens) == {lengths[40:].sum()}


@pytest.mark.parametrize("as_torch", [False, True])
def test_a_linear_probe_undoes_a_rotation_and_shift_that_fools_the_naive_one(as_torch):
    rng, lengths, e0 = _data(1, B=80, S=10, D=12)
    Q, _ = np.linalg.qr(rng.normal(size=(12, 12)))
    h = e0 @ Q + 2.0
    hs = np.stack([e0, h, np.tanh(h)], 1)
    if as_torch:
        hs = torch.from_numpy(hs).float()
    r = ti.token_identifiability(hs, lengths, train=np.arange(60), test=np.arange(60, 80), probes=("naive", "linear"),
                                 **FAST)
    for distance in ("cosine", "l2"):
        assert _acc(r, 1, "naive", distance) < 0.5
        assert _acc(r, 1, "linear", distance) >= 0.99
        assert _acc(r, 2, "linear", distance) > _acc(r, 2, "naive", distance)


def test_the_mlp_probe_learns_a_nonlinear_inverse():
    rng, lengths, e0 = _data(2, B=100, S=10, D=8)
    Q, _ = np.linalg.qr(rng.normal(size=(8, 8)))
    h = np.maximum(e0 @ Q, 0) - 0.3 * np.maximum(-e0 @ Q, 0)  # a leaky ReLU of a rotation
    hs = np.stack([e0, h], 1)
    r = ti.token_identifiability(hs, lengths, train=np.arange(80), test=np.arange(80, 100), probes=("naive", "mlp"),
                                 epochs=30, batch_size=64, mlp_hidden=64, lr=3e-3, progress=False)
    for distance in ("cosine", "l2"):
        assert _acc(r, 1, "mlp", distance) >= 0.95 > _acc(r, 1, "naive", distance)


def test_a_hidden_state_without_token_information_scores_exactly_chance():
    rng, lengths, e0 = _data(3, B=50, S=9, D=10)
    per_sentence = rng.normal(size=(50, 1, 10)).repeat(9, axis=1)  # the same vector at every position
    everywhere = np.full((50, 9, 10), 0.7)  # one vector for every token of every sentence
    hs = np.stack([e0, per_sentence, everywhere], 1)
    test = np.arange(30, 50)
    r = ti.token_identifiability(hs, lengths, train=np.arange(30), test=test, **FAST)
    chance = np.mean(np.concatenate([np.full(n, 1 / n) for n in lengths[test]]))
    assert r.chance == pytest.approx(chance, abs=1e-12)
    assert r.chance == pytest.approx(len(test) / lengths[test].sum(), abs=1e-12)
    uninformed = r.frame[r.frame.layer > 0]
    assert len(uninformed) == 12
    np.testing.assert_allclose(uninformed.accuracy, r.chance, atol=1e-12)  # one token per sentence, whatever the probe


def test_exact_ties_go_to_the_first_position():
    # every input embedding of a sentence is the same vector (small integers, exact in float32),
    # predictions are one-hot or zero: every score of a row ties exactly
    rng = np.random.default_rng(4)
    B, S, D = 12, 7, 4
    lengths = rng.integers(1, S + 1, B)
    e0 = np.ones((B, S, D)) * np.arange(1, B + 1)[:, None, None]
    onehot = np.eye(D)[rng.integers(0, D, (B, S))]
    hs = np.stack([e0, onehot, np.zeros((B, S, D))], 1)
    test = np.arange(4, 12)
    r = ti.token_identifiability(hs, lengths, train=np.arange(4), test=test, probes=("naive",), progress=False)
    first_position_rate = len(test) / lengths[test].sum()
    np.testing.assert_allclose(r.frame.accuracy, first_position_rate, atol=1e-12)
    assert r.chance == pytest.approx(first_position_rate)
    for distance in ("cosine", "l2"):
        best = ti.nearest_positions(hs[:, 1], e0, lengths, distance=distance)
        valid = np.arange(S)[None, :] < lengths[:, None]
        assert (best[valid] == 0).all() and (best[~valid] == -1).all()


# ----------------------------------------------------------------------------- oracle
@pytest.mark.parametrize("distance", ["cosine", "l2"])
def test_matching_agrees_with_sklearn_per_sentence(distance):
    rng = np.random.default_rng(5)
    B, M, S, D = 9, 3, 11, 6
    lengths = rng.integers(1, S + 1, B)
    E0 = _embeddings(rng, B, S, D, lengths)
    P = rng.normal(size=(B, M, S, D)) + 0.8 * E0[:, None]  # informative, so matches are not all random
    P[:, :, :, :][np.broadcast_to(np.arange(S)[None, None, :, None] >= lengths[:, None, None, None], P.shape)] = 1e3
    best = ti.nearest_positions(P, E0, lengths, distance=distance)
    assert best.shape == (B, M, S) and best.dtype == np.int64
    hits = 0
    for b in range(B):
        n = lengths[b]
        assert (best[b, :, n:] == -1).all()
        for m in range(M):
            expected = _oracle_nearest(P[b, m], E0[b], n, distance)
            np.testing.assert_array_equal(best[b, m, :n], expected, err_msg=f"sentence {b}, layer {m}")
            hits += (expected == np.arange(n)).sum()
    assert 0 < hits < M * lengths.sum()  # the example has both hits and misses
    np.testing.assert_array_equal(ti.nearest_positions(P[:, 1], E0, lengths, distance=distance), best[:, 1])


def test_naive_accuracies_agree_with_a_per_sentence_sklearn_loop():
    rng, lengths, e0 = _data(6, B=30, S=8, D=5)
    hs = np.stack([e0, e0 + rng.normal(size=e0.shape), rng.normal(size=e0.shape)], 1)
    test = np.array([3, 7, 8, 15, 20, 21, 29])
    train = np.setdiff1d(np.arange(30), test)
    r = ti.token_identifiability(hs, lengths, train=train, test=test, probes=("naive",), progress=False)
    for distance in ("cosine", "l2"):
        for layer in range(3):
            hits = sum((_oracle_nearest(hs[b, layer], hs[b, 0], lengths[b], distance) == np.arange(lengths[b])).sum()
                       for b in test)
            assert _acc(r, layer, "naive", distance) == pytest.approx(hits / lengths[test].sum(), abs=1e-12)


def test_probes_learn_from_the_train_sentences_only():
    # train sentences are rotated by Q1, test sentences by Q2: a probe fit on the train
    # tokens cannot undo Q2; one fit on other Q2 sentences can
    rng, lengths, e0 = _data(7, B=120, S=8, D=10)
    Q1, _ = np.linalg.qr(rng.normal(size=(10, 10)))
    Q2, _ = np.linalg.qr(rng.normal(size=(10, 10)))
    h = np.concatenate([e0[:30] @ Q1, e0[30:] @ Q2])
    hs = np.stack([e0, h], 1)
    kw = dict(probes=("linear",), distances=("l2",), layers=[1], progress=False)
    other = ti.token_identifiability(hs, lengths, train=np.arange(30), test=np.arange(30, 120), **kw)
    same = ti.token_identifiability(hs, lengths, train=np.arange(30, 60), test=np.arange(60, 120), **kw)
    assert other.frame.accuracy.iloc[0] < 0.5 and same.frame.accuracy.iloc[0] >= 0.99
    assert other.n_train_tokens == lengths[:30].sum() and other.n_test_tokens == lengths[30:].sum()


# ----------------------------------------------------------------------------- bookkeeping
def test_frame_layout_pivot_and_layer_subset():
    rng, lengths, e0 = _data(8, B=20, S=6, D=4)
    hs = np.stack([e0, e0 * 2, e0 + 1, -e0], 1)
    mask = np.zeros(20, bool)
    mask[:12] = True
    r = ti.token_identifiability(hs, lengths, train=mask, test=~mask, layers=[3, 1], distances=("l2", "cosine"), **FAST)
    f = r.to_frame()
    assert list(f.columns) == ["layer", "probe", "distance", "accuracy", "low", "high", "n_tokens"]
    assert len(f) == 2 * 3 * 2 and sorted(set(f.layer)) == [1, 3]
    f.loc[0, "accuracy"] = -1.0
    assert r.frame.accuracy.iloc[0] != -1.0  # to_frame is a copy
    table = r.pivot()
    assert list(table.index) == [1, 3]
    assert list(table.columns) == ["naive/l2", "naive/cosine", "linear/l2", "linear/cosine", "mlp/l2", "mlp/cosine"]
    assert table.loc[3, "naive/l2"] == _acc(r, 3, "naive", "l2")
    assert (r.pivot("low") <= table).all().all() and (table <= r.pivot("high")).all().all()
    with pytest.raises(ValueError, match="values"):
        r.pivot("jsd")


def test_subsampling_caps_the_training_tokens():
    rng, lengths, e0 = _data(9, B=40, S=8, D=4)
    hs = np.stack([e0, e0 + 0.1], 1)
    r = ti.token_identifiability(hs, lengths, train=np.arange(30), test=np.arange(30, 40), probes=("linear",),
                                 max_train_tokens=50, **{k: v for k, v in FAST.items() if k != "mlp_hidden"})
    assert r.n_train_tokens == 50 < lengths[:30].sum()


def test_the_same_seed_gives_the_same_frame():
    rng, lengths, e0 = _data(10, B=40, S=8, D=6)
    hs = np.stack([e0, np.tanh(e0 @ rng.normal(size=(6, 6)))], 1)
    kw = dict(train=np.arange(25), test=np.arange(25, 40), max_train_tokens=100, **FAST)
    a = ti.token_identifiability(hs, lengths, seed=3, **kw)
    b = ti.token_identifiability(hs, lengths, seed=3, **kw)
    pd.testing.assert_frame_equal(a.frame, b.frame)
    assert (a.n_train_tokens, a.n_test_tokens, a.chance) == (b.n_train_tokens, b.n_test_tokens, b.chance)


# ----------------------------------------------------------------------------- bad input
def _ok():
    rng, lengths, e0 = _data(11, B=6, S=5, D=3)
    return np.stack([e0, e0], 1), lengths


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(hidden_states=np.zeros((6, 5, 3))), "hidden_states must be"),
        (dict(hidden_states=np.zeros((6, 2, 5, 3), dtype=np.int64)), "hidden_states must be a float"),
        (dict(hidden_states="nan"), "hidden_states contains NaN"),
        (dict(hidden_states="inf"), "hidden_states contains inf"),
        (dict(lengths=np.array([5, 5, 5])), "lengths must be 6 integers"),
        (dict(lengths=np.array([5, 5, 5, 5, 5, 0])), r"lengths must lie in \[1, 5\]"),
        (dict(lengths=np.array([5, 5, 5, 5, 5, 6])), r"lengths must lie in \[1, 5\]"),
        (dict(lengths=np.full(6, 5.0)), "lengths must be 6 integers"),
        (dict(train=[]), "train selects no sentences"),
        (dict(test=np.zeros(6, bool)), "test selects no sentences"),
        (dict(train=np.ones(5, bool)), "train as a boolean mask must have length 6"),
        (dict(test=[4, 6]), r"test indices must lie in \[0, 5\]"),
        (dict(train=[0, 1, 2, 3], test=[3, 4]), "train and test must be disjoint"),
        (dict(probes=("naive", "svm")), "unknown probe 'svm' in probes; valid: naive, linear, mlp"),
        (dict(probes=()), "probes must be a non-empty"),
        (dict(distances=("cosine", "dot")), "unknown distance 'dot' in distances; valid: cosine, l2"),
        (dict(layers=[0, 2]), r"layers must be indices in 0\.\.1"),
        (dict(layers=[]), "layers must be None or a non-empty"),
        (dict(mlp_hidden=0), "mlp_hidden must be an integer >= 1"),
        (dict(epochs=0), "epochs must be an integer >= 1"),
        (dict(epochs=True), "epochs must be an integer >= 1"),
        (dict(batch_size=2.5), "batch_size must be an integer >= 1"),
        (dict(max_train_tokens=0), "max_train_tokens must be an integer >= 1"),
        (dict(lr=0.0), "lr must be > 0"),
        (dict(seed=-1), "seed must be a non-negative int"),
        (dict(progress="yes"), "progress must be True or False"),
    ],
)
def test_bad_input_raises_a_value_error_naming_the_argument(change, match):
    hs, lengths = _ok()
    kw = dict(hidden_states=hs, lengths=lengths, train=[0, 1, 2], test=[3, 4, 5], progress=False)
    kw.update(change)
    if isinstance(kw["hidden_states"], str):
        bad = hs.copy()
        bad[5, 1, 4, 2] = np.nan if kw["hidden_states"] == "nan" else np.inf
        kw["hidden_states"] = bad
    with pytest.raises(ValueError, match=match):
        ti.token_identifiability(**kw)


def test_nearest_positions_rejects_bad_input():
    rng = np.random.default_rng(12)
    E0 = rng.normal(size=(3, 4, 2))
    with pytest.raises(ValueError, match="unknown distance 'dot'; valid: cosine, l2"):
        ti.nearest_positions(E0, E0, [4, 4, 4], distance="dot")
    with pytest.raises(ValueError, match="predictions must be"):
        ti.nearest_positions(E0[:, :3], E0, [4, 4, 4])
    with pytest.raises(ValueError, match="lengths must lie"):
        ti.nearest_positions(E0, E0, [4, 4, 5])


# ----------------------------------------------------------------------------- property
@settings(max_examples=25, deadline=None)
@given(
    B=st.integers(2, 6), n_layers=st.integers(1, 3), S=st.integers(1, 5), D=st.integers(1, 4),
    n_train=st.integers(1, 5), data_seed=st.integers(0, 2**16), scale=st.sampled_from([1e-3, 1.0, 1e3]),
)
def test_accuracies_are_shares_of_the_test_tokens(B, n_layers, S, D, n_train, data_seed, scale):
    n_train = min(n_train, B - 1)
    rng = np.random.default_rng(data_seed)
    lengths = rng.integers(1, S + 1, B)
    hs = rng.normal(size=(B, n_layers, S, D)) * scale
    test = np.arange(n_train, B)
    r = ti.token_identifiability(hs, lengths, train=np.arange(n_train), test=test, epochs=1, batch_size=3,
                                 mlp_hidden=3, progress=False)
    f = r.frame
    assert len(f) == n_layers * 3 * 2
    assert f.accuracy.between(0, 1).all()
    assert (f.n_tokens == lengths[test].sum()).all() and r.n_test_tokens == lengths[test].sum()
    assert r.n_train_tokens == lengths[:n_train].sum()
    assert 0 < r.chance <= 1
    # each accuracy is a count of test tokens over the number of test tokens
    np.testing.assert_allclose(f.accuracy * r.n_test_tokens, np.round(f.accuracy * r.n_test_tokens), atol=1e-9)
    assert r.chance == pytest.approx(len(test) / lengths[test].sum())
    # ... with Wilson's interval over those tokens (scipy's, as the oracle)
    for row in f.itertuples():
        k = int(round(row.accuracy * row.n_tokens))
        ref = scipy.stats.binomtest(k, int(row.n_tokens)).proportion_ci(method="wilson")
        assert row.low == pytest.approx(ref.low, abs=1e-12) and row.high == pytest.approx(ref.high, abs=1e-12)
