"""attnlib.erasure: erasing attention weights (Serrano & Smith 2019)."""
import copy

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attnlib import data, erasure as er
from attnlib.data import collate
from attnlib.models import AttentionClassifier, ModelConfig


# Its own data set (not conftest's tiny one): the calibrated model's rankings on these sentences have no
# near-ties, so the chunking tests below can compare the erasure order exactly.
@pytest.fixture(scope="module")
def ds():
    return data.load_dataset("synthetic", n=200)


def _calibrated(ds, encoder="lstm", attention="tanh", seed=0):
    """A tiny model with seeded random weights, its decoder scaled so that decisions split and erasures flip them.

    Attention scores x5 (peakier attention); logits standardised over the training split
    and x3, so y-hat spans both classes and moves visibly when weights are erased.
    """
    torch.manual_seed(seed)
    config = ModelConfig(encoder=encoder, attention=attention, embed_dim=8, hidden=16)
    m = AttentionClassifier(len(ds.vocab), config).eval()
    with torch.no_grad():
        for p in m.attention_parameters():
            p.mul_(5.0)
        batch = ds.train.batch(np.arange(len(ds.train)))
        encoded = m.encode(batch)
        _, logits = m.decode(encoded.hidden, m.attend(encoded))
        scale = 3.0 / logits.std()
        m.decoder.bias.sub_(logits.median()).mul_(scale)
        m.decoder.weight.mul_(scale)
    return m


@pytest.fixture(scope="module")
def model(ds):
    return _calibrated(ds)


ROWS = [0, 3, 5, 8, 11, 14, 17, 19]


@pytest.fixture(scope="module")
def ranked(model, ds):
    return er.ranked_removal(model, ds.test.batch(ROWS), seed=1)


def _alpha_and_probs(model, one):
    with torch.no_grad():
        out = model(one)
    return out.attention[0], out.probs[0]


def _erased_output(model, one, alpha, removed):
    """y' through the public forward (attention checked): alpha with ``removed`` zeroed, renormalised."""
    a = alpha.clone()
    a[removed] = 0.0
    with torch.no_grad():
        return model(one, attention=(a / a.sum())[None]).probs[0]


def _jsd(p, q):
    p, q = np.asarray(p, np.float64), np.asarray(q, np.float64)
    m = (p + q) / 2
    kl = lambda a, b: np.sum(np.where(a > 0, a * np.log(np.where(a > 0, a, 1) / b), 0.0))  # noqa: E731
    return 0.5 * kl(p, m) + 0.5 * kl(q, m)


# ----------------------------------------------------------------------------- erase
def test_erasing_nothing_gives_the_models_own_output(model, ds):
    batch = ds.test.batch(np.arange(10))
    with torch.no_grad():
        out = model(batch)
        state = model.site_state(batch)
        nothing = torch.zeros_like(state.mask)
        y = er.erase(model, state, nothing)
        y3 = er.erase(model, state, nothing[:, None].expand(10, 3, -1))
    assert torch.allclose(y, out.probs, atol=1e-6)
    assert y3.shape == (10, 3, 2) and torch.allclose(y3, out.probs[:, None].expand(10, 3, 2), atol=1e-6)


def test_erase_equals_decoding_the_renormalised_attention(model, ds):
    batch = ds.test.batch(np.arange(6))
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        out = model(batch)
        mask = out.encoded.mask
        remove = (torch.rand(6, 4, mask.shape[1], generator=g) < 0.5) & mask[:, None]
        remove[:, :, 1] = False  # the first real token is always kept
        y = er.erase(model, model.site_state(batch), remove)
        for k in range(4):
            a = out.attention.masked_fill(remove[:, k], 0.0)
            ref = model(batch, attention=a / a.sum(-1, keepdim=True)).probs
            assert torch.allclose(y[:, k], ref, atol=1e-6)


@given(
    st.integers(1, 4),
    st.integers(1, 3),
    st.integers(1, 9),
    st.integers(0, 2**31 - 1),
)
def test_erased_weights_are_zero_and_rows_renormalise(B, K, T, seed):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    mask = torch.arange(T) < lengths[:, None]
    alpha = torch.rand(B, T, generator=g, dtype=torch.float64).masked_fill(~mask, 0.0)
    alpha = torch.where(torch.rand(B, T, generator=g) < 0.2, torch.zeros_like(alpha), alpha)  # some zero weights
    alpha[:, 0] += 0.1  # every row has positive weight on its first token
    alpha = alpha / alpha.sum(-1, keepdim=True)
    remove = torch.rand(B, K, T, generator=g) < 0.5
    remove[:, :, 0] = False
    erased = er.erased_attention(alpha, mask, remove)
    assert erased.shape == (B, K, T)
    assert torch.all(erased[remove] == 0) and torch.all(erased[~mask[:, None].expand_as(remove)] == 0)
    assert torch.allclose(erased.sum(-1), torch.ones(B, K, dtype=torch.float64), atol=1e-12)
    kept = ~remove & mask[:, None]
    # proportional to alpha on the kept tokens: erased = alpha / (kept mass)
    mass = (alpha[:, None] * kept).sum(-1, keepdim=True)
    assert torch.allclose(erased, torch.where(kept, alpha[:, None] / mass, torch.zeros_like(erased)), atol=1e-12)
    two_d = er.erased_attention(alpha, mask, remove[:, 0])
    assert torch.equal(two_d, erased[:, 0])


def test_erase_refuses_a_row_with_no_weight_left(model, ds):
    batch = ds.test.batch([0, 1])
    with torch.no_grad():
        out = model(batch)
        state = model.site_state(batch)
    mask, alpha = out.encoded.mask, out.attention
    with pytest.raises(ValueError, match="1 row\\(s\\) keep no real token with positive weight"):
        er.erase(model, state, mask & (torch.arange(2)[:, None] == 0))  # row 0 loses every token
    zero_rest = alpha.clone()
    zero_rest[0] = 0.0
    zero_rest[0, 1] = 1.0  # one-hot on the first real token
    remove = torch.zeros_like(mask)
    remove[0, 1] = True  # erase it: the rest has weight 0
    with pytest.raises(ValueError, match="keep no real token"):
        er.erase(model, state, remove, attention=zero_rest)


def test_erase_validates_its_inputs(model, ds):
    batch = ds.test.batch([0, 1])
    with torch.no_grad():
        out = model(batch)
        state = model.site_state(batch)
    mask, alpha = out.encoded.mask, out.attention
    none = torch.zeros_like(mask)
    B, T = mask.shape
    with pytest.raises(ValueError, match="remove must be a bool tensor"):
        er.erase(model, state, none.float())
    with pytest.raises(ValueError, match="remove must be a bool tensor"):
        er.erase(model, state, none[:, :-1])
    with pytest.raises(ValueError, match="remove must be a bool tensor"):
        er.erase(model, state, none[None])
    with pytest.raises(ValueError, match="mask must be a bool tensor"):
        er.erased_attention(alpha, mask.long(), none)
    with pytest.raises(ValueError, match="attention must be a float tensor"):
        er.erase(model, state, none, attention=alpha[:, None])
    with pytest.raises(ValueError, match="state must be a SiteState"):
        er.erase(model, (out.encoded.hidden, mask), none)
    with pytest.raises(ValueError, match="non-negative"):
        er.erase(model, state, none, attention=alpha - 0.5 * mask)
    with pytest.raises(ValueError, match="NaN"):
        er.erase(model, state, none, attention=alpha.masked_fill(mask, float("nan")))
    bad = alpha.clone()
    bad[:, 0] = 0.1  # weight on <SOS>
    with pytest.raises(ValueError, match="off the real tokens"):
        er.erase(model, state, none, attention=bad)
    with pytest.raises(ValueError, match="torch tensor"):
        er.erase(model, state, none, attention=alpha.numpy())
    with pytest.raises(ValueError, match="AttentionClassifier"):
        er.erase(object(), state, none)


# ----------------------------------------------------------------------------- single weight
def test_single_weight_equals_a_per_instance_reference(model, ds):
    rows = list(range(12))
    r = er.single_weight(model, ds.test.batch(rows), seed=3)
    assert r.indices.tolist() == rows and r.n_excluded == 0
    for i, row in enumerate(rows):
        one = ds.test.batch([row])
        alpha, y_hat = _alpha_and_probs(model, one)
        n = int(one.mask.sum())
        top = int(alpha.argmax())
        rand = 1 + int(r.random_token[i])  # padded position (after <SOS>)
        assert r.top_token[i] == top - 1 and 0 <= r.random_token[i] < n and rand != top
        y_top, y_rand = _erased_output(model, one, alpha, top), _erased_output(model, one, alpha, rand)
        assert r.jsd_top[i] == pytest.approx(_jsd(y_hat, y_top), abs=1e-6)
        assert r.jsd_random[i] == pytest.approx(_jsd(y_hat, y_rand), abs=1e-6)
        assert r.flip_top[i] == (int(y_top.argmax()) != int(y_hat.argmax()))
        assert r.flip_random[i] == (int(y_rand.argmax()) != int(y_hat.argmax()))
        assert r.top_weight[i] == pytest.approx(float(alpha.max()), abs=1e-7)
        assert r.random_weight[i] == pytest.approx(float(alpha[rand]), abs=1e-7)
        assert r.predicted[i] == int(y_hat.argmax()) and r.lengths[i] == n
        assert np.allclose(r.probs_top[i], y_top.numpy(), atol=1e-6)
    assert not hasattr(r, "max_attention")  # one name for the top weight: top_weight
    assert np.allclose(r.jsd_difference, r.jsd_top - r.jsd_random)


def test_single_weight_random_token_is_seeded_and_uniform_over_the_other_tokens(model, ds):
    # one 5-token sentence, 2,000 times under different split indices: 2,000 independent draws
    ids = ds.test.ids[0][:6].tolist() + [data.EOS]
    batch = collate([np.asarray(ids)] * 2000, np.zeros(2000), np.arange(2000))
    r = er.single_weight(model, batch, seed=0)
    top = int(r.top_token[0])
    assert np.all(r.top_token == top) and np.all(r.random_token != top)
    counts = np.bincount(r.random_token, minlength=5)
    others = np.delete(counts, top)
    assert counts[top] == 0 and np.all(np.abs(others - 500) < 5 * np.sqrt(2000 * 0.25 * 0.75)), counts
    same = er.single_weight(model, batch, seed=0)
    other = er.single_weight(model, batch, seed=1)
    assert np.array_equal(same.random_token, r.random_token) and np.array_equal(same.jsd_random, r.jsd_random)
    assert not np.array_equal(other.random_token, r.random_token)


def test_single_weight_does_not_depend_on_chunking(model, ds):
    whole = er.single_weight(model, ds.train, seed=2)
    assert len(whole) == len(ds.train)
    for chunk_size in (1, 7, len(ds.train)):
        other = er.single_weight(model, ds.train, seed=2, chunk_size=chunk_size)
        assert np.array_equal(other.indices, whole.indices)
        assert np.array_equal(other.top_token, whole.top_token)
        assert np.array_equal(other.random_token, whole.random_token)
        assert np.array_equal(other.flip_top, whole.flip_top) and np.array_equal(other.flip_random, whole.flip_random)
        assert np.allclose(other.jsd_top, whole.jsd_top, atol=1e-6)
        assert np.allclose(other.jsd_random, whole.jsd_random, atol=1e-6)


def test_flip_summary_and_frame(model, ds):
    r = er.single_weight(model, ds.train, max_instances=60, seed=0)
    s = er.flip_summary(r)
    assert s["n"] == 60 and s["n_excluded"] == 0
    assert s["flip_top"] == pytest.approx(r.flip_top.mean()) and s["flip_random"] == pytest.approx(r.flip_random.mean())
    assert s["both_flip"] + s["only_top_flips"] == pytest.approx(s["flip_top"])
    assert s["top_changes_more"] == pytest.approx(np.mean(r.jsd_top > r.jsd_random))
    assert s["median_jsd_difference"] == pytest.approx(np.median(r.jsd_top - r.jsd_random))
    # the calibrated model behaves like Serrano & Smith's: the top weight matters more, and flips happen
    assert s["top_changes_more"] > 0.5 and s["flip_top"] > s["flip_random"]
    frame = r.to_frame()
    assert len(frame) == 60 and frame["instance"].tolist() == r.indices.tolist()
    assert {"instance", "label", "predicted", "length", "top_weight", "random_weight",
            "jsd_top", "jsd_random", "jsd_difference", "flip_top", "flip_random"} <= set(frame.columns)
    assert np.bincount(frame["label"]).tolist() == [30, 30]  # stratified subsample
    with pytest.raises(ValueError, match="SingleWeightResult"):
        er.flip_summary(object())


def test_attention_blind_output_changes_nothing(model, ds):
    blind = copy.deepcopy(model)
    with torch.no_grad():
        blind.decoder.weight.zero_()
    r = er.single_weight(blind, ds.test)
    assert np.all(r.jsd_top == 0) and np.all(r.jsd_random == 0) and not r.flip_top.any()
    rr = er.ranked_removal(blind, ds.test)
    assert not rr.flipped.any() and np.all(rr.n_removed == -1) and np.all(np.isnan(rr.fraction_removed))
    assert er.removal_summary(rr)["never_flipped"].tolist() == [1.0] * 4


# ----------------------------------------------------------------------------- ranked removal
def _reference_order(model, one, ranking, result_order):
    """Erasure order over the real tokens, computed on one instance with the public forward."""
    alpha, y_hat = _alpha_and_probs(model, one)
    real = torch.nonzero(one.mask[0]).flatten()
    if ranking == "random":
        return result_order  # the draw itself; checked separately (seeding, permutation)
    a = alpha[None].clone().requires_grad_(True)
    probs = model(one, attention=a).probs
    (grad,) = torch.autograd.grad(probs[0, int(y_hat.argmax())], a)
    score = {"attention": alpha, "gradient": grad[0], "attention_x_gradient": alpha * grad[0]}[ranking]
    return np.argsort(-score[real].double().numpy(), kind="stable")


def test_ranked_removal_equals_a_per_instance_per_k_reference_loop(model, ds, ranked):
    """Reference: each instance alone, each prefix k through its own public forward, stop at the first flip."""
    assert ranked.indices.tolist() == ROWS and ranked.rankings == er.RANKINGS
    assert ranked.flipped.any() and not ranked.flipped.all()  # the test sees both outcomes
    for i, row in enumerate(ROWS):
        one = ds.test.batch([row])
        alpha, y_hat = _alpha_and_probs(model, one)
        real = torch.nonzero(one.mask[0]).flatten()
        n = len(real)
        assert ranked.lengths[i] == n and ranked.predicted[i] == int(y_hat.argmax())
        for r, name in enumerate(ranked.rankings):
            order = _reference_order(model, one, name, ranked.order(i, name))
            assert np.array_equal(order, ranked.order(i, name)), name
            first = -1
            for k in range(1, n):
                y = _erased_output(model, one, alpha, real[order[:k]])
                if int(y.argmax()) != int(y_hat.argmax()):
                    first = k
                    break
            assert ranked.n_removed[i, r] == first, (row, name)
            assert ranked.flipped[i, r] == (first > 0)
            if first > 0:
                assert ranked.fraction_removed[i, r] == first / n
            else:
                assert np.isnan(ranked.fraction_removed[i, r])


def test_gradient_scores_equal_autograd_on_one_instance(model, ds):
    one = ds.test.batch([4])
    alpha, y_hat = _alpha_and_probs(model, one)
    a = alpha[None].clone().requires_grad_(True)
    (ref,) = torch.autograd.grad(model(one, attention=a).probs[0, int(y_hat.argmax())], a)
    with torch.no_grad():
        state = model.site_state(one)
        rankings = ("gradient", "attention_x_gradient")
        probs, scores = er._ranking_scores(model, state, one.index, rankings, 0)
    assert torch.allclose(probs[0], y_hat, atol=1e-6)
    assert torch.allclose(scores[0, 0].float(), ref[0], atol=1e-6, rtol=1e-5)
    assert torch.allclose(scores[0, 1].float(), (alpha * ref[0]), atol=1e-7, rtol=1e-5)
    assert all(p.grad is None for p in model.parameters())


def test_ranks_are_permutations_of_the_real_tokens(ranked, ds):
    batch = ds.test.batch(ROWS)
    mask = batch.mask.numpy()
    for i in range(len(ROWS)):
        n = int(mask[i].sum())
        for r in range(len(ranked.rankings)):
            ranks = ranked.ranks[i, r, : mask.shape[1]]
            assert np.all(ranks[~mask[i]] == -1) and np.all(ranked.ranks[i, r, mask.shape[1]:] == -1)
            assert sorted(ranks[mask[i]].tolist()) == list(range(n))
        assert not np.array_equal(ranked.order(i, "random"), ranked.order(i, "attention"))


@given(st.integers(1, 3), st.integers(1, 8), st.integers(0, 2**31 - 1))
def test_ranks_follow_descending_scores_with_ties_by_position(n, T, seed):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (n,), generator=g)
    first = torch.randint(0, T - lengths.max() + 1, (1,), generator=g)
    pos = torch.arange(T)
    mask = (pos >= first) & (pos < first + lengths[:, None])
    scores = torch.randint(-2, 3, (n, 2, T), generator=g).double()  # many ties
    ranks = er._ranks(scores, mask).numpy()
    for i in range(n):
        real = np.flatnonzero(mask[i].numpy())
        for r in range(2):
            order = real[np.argsort(-scores[i, r, real].numpy(), kind="stable")]
            assert np.array_equal(np.argsort(ranks[i, r, real]), np.searchsorted(real, order))
            assert np.all(ranks[i, r, ~mask[i].numpy()] >= len(real))


def test_random_ranking_is_seeded(model, ds):
    a = er.ranked_removal(model, ds.test, rankings=("random",), seed=5)
    b = er.ranked_removal(model, ds.test, rankings=["random"], seed=5)
    c = er.ranked_removal(model, ds.test, rankings="random", seed=6)
    assert np.array_equal(a.ranks, b.ranks) and np.array_equal(a.n_removed, b.n_removed)
    assert not np.array_equal(a.ranks, c.ranks)
    # the same draw whichever other rankings run beside it
    full = er.ranked_removal(model, ds.test, seed=5)
    assert np.array_equal(full.ranks[:, 1], a.ranks[:, 0]) and np.array_equal(full.n_removed[:, 1], a.n_removed[:, 0])


def test_ranked_removal_does_not_depend_on_chunking(model, ds):
    whole = er.ranked_removal(model, ds.train, seed=4)
    assert whole.flipped.any()
    for chunk_size in (1, 5, len(ds.train)):
        other = er.ranked_removal(model, ds.train, seed=4, chunk_size=chunk_size)
        assert np.array_equal(other.indices, whole.indices)
        assert np.array_equal(other.ranks, whole.ranks)
        assert np.array_equal(other.n_removed, whole.n_removed)
        assert np.allclose(other.probs, whole.probs, atol=1e-6)
    # ... and an instance's result does not depend on its neighbours
    alone = er.ranked_removal(model, ds.train.batch(whole.indices[7:8]), seed=4)
    T = alone.ranks.shape[-1]
    assert np.array_equal(alone.n_removed[0], whole.n_removed[7])
    assert np.array_equal(alone.ranks[0], whole.ranks[7, :, :T])


def test_uniform_attention_ties_break_by_position_and_gradient_orders_agree(ds):
    m = _calibrated(ds, encoder="average", attention="uniform")
    r = er.ranked_removal(m, ds.test)
    for i in range(len(r)):
        assert np.array_equal(r.order(i, "attention"), np.arange(r.lengths[i]))
    # alpha_t = 1/T for all t: alpha x gradient is the gradient scaled, the same order
    assert np.array_equal(r.ranks[:, 2], r.ranks[:, 3]) and np.array_equal(r.n_removed[:, 2], r.n_removed[:, 3])


def test_removal_summary_and_frame(ranked):
    s = er.removal_summary(ranked)
    assert s.index.tolist() == list(er.RANKINGS)
    for r, name in enumerate(er.RANKINGS):
        f = ranked.flipped[:, r]
        assert s.loc[name, "n"] == len(ROWS) and s.loc[name, "n_flipped"] == f.sum()
        assert s.loc[name, "never_flipped"] == pytest.approx(1 - f.mean())
        if f.any():
            mean = np.mean(ranked.n_removed[f, r] / ranked.lengths[f])
            assert s.loc[name, "mean_fraction_removed"] == pytest.approx(mean)
            assert s.loc[name, "median_fraction_removed"] == pytest.approx(np.median(ranked.fraction_removed[f, r]))
    frame = ranked.to_frame()
    assert len(frame) == len(ROWS) * 4
    columns = ["instance", "ranking", "label", "predicted", "length", "flipped", "n_removed", "fraction_removed"]
    assert list(frame.columns) == columns
    assert frame["instance"].tolist()[:4] == [ROWS[0]] * 4
    assert frame["ranking"].astype(str).tolist()[:4] == list(er.RANKINGS)
    assert frame["n_removed"].isna().tolist() == (~ranked.flipped).reshape(-1).tolist()
    done = frame[frame["flipped"]]
    assert np.all((done["n_removed"] >= 1) & (done["n_removed"] <= done["length"] - 1))
    assert np.allclose(done["fraction_removed"], done["n_removed"].astype(float) / done["length"])
    with pytest.raises(ValueError, match="RankedRemovalResult"):
        er.removal_summary(object())
    with pytest.raises(ValueError, match="not in this result"):
        ranked.order(0, "loo")


def test_model_is_left_as_it_was(ds):
    m = _calibrated(ds, encoder="cnn", attention="dot")
    before = copy.deepcopy(m.state_dict())
    m.train()
    er.ranked_removal(m, ds.test, max_instances=6)
    er.single_weight(m, ds.test, max_instances=6)
    assert m.training
    assert all(p.grad is None for p in m.parameters())
    assert all(torch.equal(v, m.state_dict()[k]) for k, v in before.items())


# ----------------------------------------------------------------------------- short instances
def test_instances_with_one_real_token_are_excluded(model, ds):
    ids = [ds.test.ids[0], np.array([data.SOS, ds.test.ids[1][1], data.EOS]), ds.test.ids[2]]
    batch = collate(ids, [0, 1, 0], index=[0, 11, 2])
    r = er.single_weight(model, batch)
    assert r.indices.tolist() == [0, 2] and r.excluded.tolist() == [11] and r.n_excluded == 1
    assert er.flip_summary(r)["n_excluded"] == 1
    rr = er.ranked_removal(model, batch)
    assert rr.indices.tolist() == [0, 2] and rr.excluded.tolist() == [11]
    without = er.ranked_removal(model, ds.test.batch([0, 2]))  # the same instances (same split indices, same draws)
    assert np.array_equal(rr.n_removed, without.n_removed) and np.array_equal(rr.ranks, without.ranks)
    alone = collate([ids[1]], [0])
    with pytest.raises(ValueError, match="2 or more real tokens"):
        er.ranked_removal(model, alone)
    with pytest.raises(ValueError, match="at least 2 real tokens"):
        er.single_weight(model, alone)
    # two real tokens: the random token is the other one, and ranked removal tries k = 1 only
    two = collate([np.array([data.SOS, *ds.test.ids[0][1:3], data.EOS])], [0])
    s = er.single_weight(model, two)
    assert {int(s.top_token[0]), int(s.random_token[0])} == {0, 1}
    t = er.ranked_removal(model, two)
    assert set(t.n_removed[0].tolist()) <= {-1, 1} and np.all(t.fraction_removed[t.flipped] == 0.5)


# ----------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"rankings": ("attention", "loo")}, "'loo'.*choose from attention, random, gradient, attention_x_gradient"),
        ({"rankings": ()}, "at least one"),
        ({"rankings": ("random", "random")}, "repeat"),
        ({"rankings": 3}, "sequence of names"),
        ({"max_instances": 0}, "max_instances"),
        ({"seed": -1}, "seed"),
        ({"seed": 1.5}, "seed"),
        ({"chunk_size": 0}, "chunk_size"),
    ],
)
def test_ranked_removal_validation(kwargs, match, model, ds):
    with pytest.raises(ValueError, match=match):
        er.ranked_removal(model, ds.test, **kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [({"max_instances": -2}, "max_instances"), ({"seed": "0"}, "seed"), ({"chunk_size": 1.0}, "chunk_size")],
)
def test_single_weight_validation(kwargs, match, model, ds):
    with pytest.raises(ValueError, match=match):
        er.single_weight(model, ds.test, **kwargs)


def test_bad_model_or_data(model, ds):
    for fn in (er.single_weight, er.ranked_removal):
        with pytest.raises(ValueError, match="AttentionClassifier"):
            fn(object(), ds.test)
        with pytest.raises(ValueError, match="Split or Batch"):
            fn(model, [1, 2, 3])
    given_model = AttentionClassifier(len(ds.vocab), ModelConfig(encoder="average", attention="given"))
    with pytest.raises(ValueError, match="attention='given'"):
        er.ranked_removal(given_model, ds.test)
