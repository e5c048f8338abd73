"""attnlib.counterfactual: attention permutation (J&W Alg. 2) and adversarial attention (Alg. 3)."""
import copy
import math

import numpy as np
import pytest
import torch

from attnlib.models import interventions
from attnlib import counterfactual as cf
from attnlib import data, metrics, train
from attnlib.data import collate
from attnlib.models import AttentionClassifier, ModelConfig, masked_softmax

LN2 = math.log(2)


@pytest.fixture(scope="module")
def ds(tiny_dataset):
    return tiny_dataset


@pytest.fixture(scope="module")
def model(tiny_model):
    return tiny_model("lstm", "tanh")


@pytest.fixture(scope="module")
def adv(model, ds):
    return cf.adversarial_attention(model, ds.test, max_instances=40, steps=150, seed=0)


def _constant_output(model):
    """A copy whose output ignores attention: decoder weight 0, so y = sigmoid(bias) always."""
    m = copy.deepcopy(model)
    with torch.no_grad():
        m.decoder.weight.zero_()
    return m


# ----------------------------------------------------------------------------- permutation
def test_permutations_only_move_weight_among_real_tokens(model, ds):
    r = cf.permute_attention(model, ds.test, n_permutations=25, max_instances=30, keep_permutations=True)
    batch = ds.test.batch(r.indices)
    mask = batch.mask.cpu().numpy()
    T = mask.shape[1]
    assert r.permutations.shape == (30, 25, T)
    for i in range(30):
        real = np.flatnonzero(mask[i])
        perm = r.permutations[i]  # (P, T) source positions
        assert np.array_equal(np.sort(perm[:, real], axis=1), np.broadcast_to(real, (25, len(real))))
        assert np.array_equal(perm[:, ~mask[i]], np.broadcast_to(np.flatnonzero(~mask[i]), (25, T - len(real))))
        assert len({tuple(p) for p in perm[:, real]}) > 20  # random, not repeated
    # the permuted attention: a permutation of alpha-hat's real entries, zeros at SOS/EOS/PAD
    with torch.no_grad():
        alpha = model(batch).attention.cpu().numpy()
    permuted = np.take_along_axis(alpha[:, None, :], r.permutations, axis=-1)
    assert np.all(permuted[~np.broadcast_to(mask[:, None, :], permuted.shape)] == 0)
    assert np.array_equal(np.sort(permuted, -1), np.broadcast_to(np.sort(alpha, -1)[:, None, :], permuted.shape))


def test_permutation_is_seeded_and_deterministic(model, ds):
    a = cf.permute_attention(model, ds.test, n_permutations=30, seed=3, keep_permutations=True)
    b = cf.permute_attention(model, ds.test, n_permutations=30, seed=3, keep_permutations=True)
    c = cf.permute_attention(model, ds.test, n_permutations=30, seed=4, keep_permutations=True)
    assert np.array_equal(a.permutations, b.permutations)
    assert np.array_equal(a.all_tvd, b.all_tvd) and np.array_equal(a.median_tvd, b.median_tvd)
    assert not np.array_equal(a.permutations, c.permutations)


def test_batched_median_equals_per_instance_per_permutation_loop(model, ds):
    """Reference: every instance alone, every permutation through the public forward (checked attention)."""
    rows = [0, 7, 13, 42, 77, 99]
    P = 15
    r = cf.permute_attention(model, ds.test.batch(rows), n_permutations=P, seed=1, keep_permutations=True)
    assert r.indices.tolist() == rows
    for i, row in enumerate(rows):
        one = ds.test.batch([row])
        T = one.tokens.shape[1]
        assert np.array_equal(r.permutations[i, :, T:], np.broadcast_to(np.arange(T, r.permutations.shape[2]), (P, r.permutations.shape[2] - T)))
        with torch.no_grad():
            base = model(one)
            changes = []
            for p in range(P):
                alpha_p = base.attention[0][torch.from_numpy(r.permutations[i, p, :T])]
                y_p = model(one, attention=alpha_p[None]).probs  # raises if weight lands on SOS/EOS/PAD
                changes.append(float(metrics.tvd(y_p, base.probs)[0]))
        assert np.allclose(r.all_tvd[i], changes, atol=2e-6)
        assert r.median_tvd[i] == pytest.approx(np.median(changes), abs=2e-6)
        assert r.max_attention[i] == pytest.approx(float(base.attention.max()), abs=1e-6)
        assert r.predicted[i] == int(base.probs.argmax(-1))
    assert np.array_equal(r.labels, ds.test.labels[rows])


def test_uniform_attention_gives_exactly_zero_change(ds):
    torch.manual_seed(0)
    uniform = AttentionClassifier(len(ds.vocab), ModelConfig(encoder="lstm", attention="uniform"))
    r = cf.permute_attention(uniform, ds.test, n_permutations=20)
    assert np.all(r.all_tvd == 0.0) and np.all(r.median_tvd == 0.0)


def test_permutation_subsample_is_stratified_and_model_mode_is_restored(model, ds):
    model.train()
    try:
        r = cf.permute_attention(model, ds.test, n_permutations=5, max_instances=40, seed=2)
        assert model.training  # restored
    finally:
        model.eval()
    assert len(r) == 40 and np.all(np.diff(r.indices) > 0)
    assert np.bincount(r.labels).tolist() == [20, 20]
    assert np.array_equal(r.labels, ds.test.labels[r.indices])
    assert set(r.to_frame().columns) >= {"instance", "label", "predicted", "max_attention", "median_tvd"}


# ----------------------------------------------------------------------------- adversary
def test_candidates_are_distributions_over_real_tokens(adv, model, ds):
    N, K, T = adv.candidates.shape
    assert (N, K) == (40, 5) and adv.mask.shape == (N, T)
    off = ~np.broadcast_to(adv.mask[:, None, :], adv.candidates.shape)
    assert np.all(adv.candidates[off] == 0) and np.all(adv.candidates >= 0)
    assert np.allclose(adv.candidates.sum(-1), 1.0, atol=1e-5)
    assert np.all(np.isfinite(adv.candidates)) and np.all(np.isfinite(adv.jsd)) and np.all(np.isfinite(adv.tvd))
    # outputs and distances recomputed independently: public forward with checked attention
    batch = ds.test.batch(adv.indices)
    with torch.no_grad():
        base = model(batch)
        out = model(batch, attention=torch.from_numpy(adv.candidates[:, :, : batch.tokens.shape[1]]))
    y = out.probs.double().cpu().numpy()
    assert np.allclose(adv.candidate_probs, y, atol=1e-5)
    assert np.allclose(adv.tvd, metrics.tvd(y, np.broadcast_to(base.probs.double().cpu().numpy()[:, None], y.shape)), atol=1e-5)
    alpha = np.broadcast_to(adv.alpha[:, None, :], adv.candidates.shape)
    assert np.allclose(adv.jsd, metrics.jsd(adv.candidates.astype(np.float64), alpha.astype(np.float64), check=False), atol=1e-5)
    assert np.array_equal(adv.predicted, base.probs.argmax(-1).cpu().numpy())
    for i in range(N):
        assert adv.candidate(i).shape == (K, int(adv.mask[i].sum()))


def test_selection_rule(adv):
    assert adv.eps == adv.search_eps == 0.01
    assert np.array_equal(adv.kept, adv.tvd <= 0.01)
    assert np.all(adv.tvd[adv.kept] <= adv.eps)
    assert np.all(adv.eps_max_jsd >= 0) and np.all(adv.eps_max_jsd <= LN2)
    expected = np.array([max([0.0, *adv.jsd[i][adv.kept[i]]]) for i in range(len(adv))])  # alpha-hat counts as JSD 0
    assert np.array_equal(adv.eps_max_jsd, expected)
    assert adv.kept.any()  # the search does find output-preserving candidates
    for i, best in enumerate(adv.best_attention):
        b = adv.best[i]
        ref = adv.attention[i] if b < 0 else adv.candidate(i)[b]
        assert np.array_equal(best, ref)
        assert b < 0 or (adv.kept[i, b] and adv.jsd[i, b] == adv.eps_max_jsd[i])


def test_reselecting_at_a_larger_eps_never_lowers_eps_max_jsd(adv):
    previous = np.zeros(len(adv))
    for eps in (1e-4, 0.005, 0.01, 0.02, 0.05, 0.1, 1.0):
        sel = adv.select(eps)
        assert sel.eps == eps and sel.search_eps == 0.01
        assert np.all(sel.eps_max_jsd >= previous)
        previous = sel.eps_max_jsd
    assert np.all(adv.select(1.0).kept)
    assert np.array_equal(adv.select(0.01).eps_max_jsd, adv.eps_max_jsd)
    assert adv.eps == 0.01  # select() returns a new result
    frame = cf.fraction_very_different(adv.select(0.05))
    assert frame["n"].sum() == len(adv)


def test_output_blind_model_lets_the_adversary_reach_large_jsd(model, ds):
    """With y independent of alpha every candidate is kept and they move far from alpha-hat."""
    r = cf.adversarial_attention(_constant_output(model), ds.test, max_instances=20, steps=150)
    assert np.all(r.kept) and np.allclose(r.tvd, 0.0, atol=1e-6)
    # one-hot vs. uniform over 10 tokens already has JSD 0.53; the sentences have 10 to 40
    assert np.all(r.eps_max_jsd > 0.45), r.eps_max_jsd.min()


def _key_token_model(share: float = 0.9, length: int = 10, slope: float = 10.0):
    """An average+dot model whose output depends only on the weight on one 'key' token.

    h(key) ~ e1 and h(other) has no e1 component; attention puts ``share`` on the key;
    logit = slope * (alpha_key - share) * h_key,1, so y-hat = 0.5 (the steepest point)
    and TVD(y, y-hat) ~ slope/4 * |alpha_key - share|. The other tokens are free.
    """
    torch.manual_seed(0)
    m = AttentionClassifier(10, ModelConfig(encoder="average", attention="dot", embed_dim=4, hidden=4)).eval()
    with torch.no_grad():
        m.embedding.weight.zero_()
        m.embedding.weight[4] = torch.tensor([1.0, 0, 0, 0])
        m.embedding.weight[5:] = torch.cat([torch.zeros(5, 1), torch.randn(5, 3)], 1)
        m.projection.weight.copy_(torch.diag(torch.tensor([10.0, 1, 1, 1])))
        m.projection.bias.zero_()
        score = math.log(share / (1 - share) * (length - 1))  # softmax share on the key among `length` tokens
        m.attention.q.weight.copy_(torch.tensor([[score * 2.0, 0, 0, 0]]))  # dot attention divides by sqrt(H) = 2
        h_key = math.tanh(10.0)
        m.decoder.weight.copy_(torch.tensor([[slope, 0, 0, 0]]))
        m.decoder.bias.fill_(-slope * share * h_key)
    rng = np.random.default_rng(0)
    ids = []
    for _ in range(12):
        words = rng.integers(5, 10, size=length)
        words[rng.integers(length)] = 4
        ids.append(np.concatenate([[data.SOS], words, [data.EOS]]))
    return m, collate(ids, np.arange(12) % 2)


def test_output_that_hinges_on_one_token_constrains_the_adversary():
    model, batch = _key_token_model()
    r = cf.adversarial_attention(model, batch, steps=300)
    assert np.allclose(r.probs[:, 1], 0.5, atol=1e-3) and np.allclose(r.max_attention, 0.9, atol=1e-3)
    # Only the 0.1 of mass off the key may move (alpha_key within ~0.004 of 0.9), and
    # JSD <= ln 2 * TVD(alpha, alpha-hat) <= ln 2 * (0.1 + 0.004).
    assert np.all(r.eps_max_jsd <= LN2 * 0.105), r.eps_max_jsd.max()
    # ... and it does move it where it finds a kept candidate (some starts with almost no
    # weight on the key saturate the output at 0 and never come back: J&W's penalty has
    # a vanishing gradient there, so those candidates are dropped)
    assert np.mean(r.eps_max_jsd > 0.01) >= 0.5
    assert np.all(r.eps_max_jsd[r.kept.any(1)] > 0.01)
    free = cf.adversarial_attention(_constant_output(model), batch, steps=300)
    assert np.all(free.eps_max_jsd > 0.45)


def test_whole_split_equals_batches_of_32(model, ds, assert_search_unchunked):
    """Seeded per instance and a sum of per-instance losses: chunking changes nothing but rounding."""
    whole = cf.adversarial_attention(model, ds.test, max_instances=64, steps=60, seed=5)
    chunked = cf.adversarial_attention(model, ds.test, max_instances=64, steps=60, seed=5, chunk_size=32)
    assert np.array_equal(whole.indices, chunked.indices)
    assert_search_unchunked(chunked.candidates, whole.candidates, 1e-4, "candidates")
    assert_search_unchunked(chunked.tvd, whole.tvd, 1e-5, "tvd")
    assert_search_unchunked(chunked.eps_max_jsd, whole.eps_max_jsd, 1e-4, "eps_max_jsd")
    # and an instance's search does not depend on its neighbours
    alone = cf.adversarial_attention(model, ds.test.batch(whole.indices[:1]), steps=60, seed=5)
    T = alone.candidates.shape[2]
    assert_search_unchunked(alone.candidates[0], whole.candidates[0, :, :T], 1e-4, "alone")


def test_adversary_leaves_the_model_untouched(ds):
    torch.manual_seed(0)
    m = AttentionClassifier(len(ds.vocab), ModelConfig(encoder="cnn", attention="tanh"))
    before = copy.deepcopy(m.state_dict())
    m.train()
    r = cf.adversarial_attention(m, ds.test, max_instances=8, steps=5, progress=False)
    assert m.training
    assert all(p.grad is None for p in m.parameters())
    assert all(torch.equal(v, m.state_dict()[k]) for k, v in before.items())
    assert len(r) == 8


# ----------------------------------------------------------------------------- summaries
def test_fraction_very_different_by_predicted_class():
    class R:
        eps_max_jsd = np.array([0.1, 0.5, 0.49, 0.6, 0.2, 0.0])
        predicted = np.array([0, 0, 0, 1, 1, 1])

    frame = cf.fraction_very_different(R(), classes=("negative", "positive"))
    assert frame.loc[0, "n"] == 3 and frame.loc[0, "n_very_different"] == 2
    assert frame.loc[0, "fraction"] == pytest.approx(2 / 3) and frame.loc[1, "fraction"] == pytest.approx(1 / 3)
    assert frame.loc[1, "class"] == "positive"
    assert cf.fraction_very_different(R(), threshold=0.7)["fraction"].tolist() == [0.0, 0.0]
    # each fraction carries its bootstrap interval over the class's sentences
    assert (frame["low"] <= frame["fraction"]).all() and (frame["fraction"] <= frame["high"]).all()
    assert frame.loc[0, "low"] < frame.loc[0, "high"]


def test_bin_by_max_attention_long_format():
    frame = cf.bin_by_max_attention([1, 2, 3, 4, 5, 6], [0.0, 0.1, 0.25, 0.6, 0.75, 1.0], predicted=[0, 1, 0, 1, 0, 1])
    assert list(frame.columns) == ["value", "max_attention", "bin", "predicted"]
    assert frame["bin"].astype(str).tolist() == ["[0, 0.25)", "[0, 0.25)", "[0.25, 0.5)", "[0.5, 0.75)", "[0.75, 1]", "[0.75, 1]"]
    assert list(frame["bin"].cat.categories) == ["[0, 0.25)", "[0.25, 0.5)", "[0.5, 0.75)", "[0.75, 1]"]
    with pytest.raises(ValueError, match="same length"):
        cf.bin_by_max_attention([1, 2], [0.5])
    with pytest.raises(ValueError, match="lie in"):
        cf.bin_by_max_attention([1], [1.5])
    with pytest.raises(ValueError, match="increasing"):
        cf.bin_by_max_attention([1], [0.5], bins=(0, 0.5, 0.5, 1))


# ----------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"eps": 0}, "eps"),
        ({"eps": -0.1}, "eps"),
        ({"k": 0}, "k must be"),
        ({"steps": 0}, "steps"),
        ({"lr": 0}, "lr"),
        ({"lr": -1.0}, "lr"),
        ({"seed": -1}, "seed"),
        ({"max_instances": 0}, "max_instances"),
        ({"chunk_size": 0}, "chunk_size"),
    ],
)
def test_adversary_validation(kwargs, match, ds):
    m = AttentionClassifier(len(ds.vocab), ModelConfig(encoder="average"))
    with pytest.raises(ValueError, match=match):
        cf.adversarial_attention(m, ds.test, **kwargs)


@pytest.mark.parametrize(
    "kwargs, match",
    [({"n_permutations": 0}, "n_permutations"), ({"chunk_size": 0}, "chunk_size"), ({"seed": 1.5}, "seed")],
)
def test_permutation_validation(kwargs, match, ds):
    m = AttentionClassifier(len(ds.vocab), ModelConfig(encoder="average"))
    with pytest.raises(ValueError, match=match):
        cf.permute_attention(m, ds.test, **kwargs)


def test_bad_inputs(ds, adv):
    m = AttentionClassifier(len(ds.vocab), ModelConfig(encoder="average"))
    with pytest.raises(ValueError, match="Split or Batch"):
        cf.permute_attention(m, [1, 2, 3])
    with pytest.raises(ValueError, match="AttentionClassifier"):
        cf.adversarial_attention(object(), ds.test)
    with pytest.raises(ValueError, match="eps"):
        adv.select(0)


@pytest.mark.parametrize("long", (300, 1100))  # 32-bit keys up to 1,024 positions, 64-bit beyond
def test_permutations_are_uniform_and_work_beyond_256_tokens(long):
    from collections import Counter

    ids = [np.concatenate([[data.SOS], np.arange(4, 4 + n), [data.EOS]]) for n in (3, long)]
    batch = collate(ids, [0, 1])
    src = interventions.permutation_sources(batch.mask, 6000, np.random.default_rng(0))
    counts = Counter(map(tuple, src[0, :, 1:4].tolist()))
    assert len(counts) == 6 and all(abs(c - 1000) < 150 for c in counts.values())  # ~5 sigma
    assert torch.all(src[0, :, 4:] == torch.arange(4, src.shape[-1]))  # EOS and padding stay put
    assert torch.all(src[1, :, 0] == 0) and torch.all(src[1, :, -1] == long + 1)  # SOS, EOS
    assert torch.equal(src[1].sort(-1).values, torch.arange(long + 2).expand(6000, long + 2))
    # every real token of the long row lands on the first real position about equally often
    first = np.bincount(src[1, :, 1].cpu().numpy(), minlength=long + 2)[1:-1]
    assert first.sum() == 6000 and first.max() < 6000 / long * 4


def test_loss_jsd_matches_metrics_jsd_in_value_and_gradient():
    torch.manual_seed(0)
    mask = torch.ones(4, 3, 7, dtype=torch.bool)
    mask[:, :, 5:] = False
    logits = torch.randn(4, 3, 7, dtype=torch.float64, requires_grad=True)
    p = masked_softmax(logits, mask)
    q = masked_softmax(torch.randn(4, 3, 7, dtype=torch.float64), mask)
    q = torch.where(torch.rand_like(q) < 0.2, torch.zeros_like(q), q)
    q = q / q.sum(-1, keepdim=True)  # some exact zeros inside the support too
    ours = cf._loss_jsd(p, q, cf._xlogx(p).sum(-1), cf._xlogx(q).sum(-1))
    ref = metrics.jsd(p, q, check=False)
    assert torch.allclose(ours, ref, atol=1e-12)
    g1, = torch.autograd.grad(ours.sum(), logits, retain_graph=True)
    g2, = torch.autograd.grad(ref.sum(), logits)
    assert torch.all(torch.isfinite(g1)) and torch.allclose(g1, g2, atol=1e-10)

