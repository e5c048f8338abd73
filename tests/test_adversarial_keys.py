"""attnlib.adversarial_keys: the key map's exact start, the bounded distance D, training, the frozen model, errors."""
import copy
import math

import numpy as np
import pytest
import torch

from attnlib import adversarial_keys as ak
from attnlib import metrics, train
from attnlib.models import AttentionClassifier, ModelConfig, TransformerConfig, device_of

CONFIG = TransformerConfig(layers=2, heads=2, head_dim=4, dropout=0.0)
FAST = dict(hidden=32, batch_size=32, use_cache=False, progress=False)


@pytest.fixture(scope="module")
def model(tiny_dataset):
    # Module-scoped fixtures run before the per-test private cache is set: never cache here.
    trained = train.train_model(tiny_dataset, CONFIG, train_config=train.TrainConfig(epochs=8, lr=3e-3, amsgrad=False),
                                use_cache=False, progress=False)
    assert trained.test["accuracy"] >= 0.9  # a model that has learnt the task, so accuracy can be lost
    return trained.model.eval()


@pytest.fixture(scope="module")
def batch(tiny_dataset):
    return tiny_dataset.test.batch(np.arange(12))  # padded: lengths differ


def _states_equal(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


# ----------------------------------------------------------------------------- the untrained map
@pytest.mark.parametrize("layer", [0, 1])
def test_an_untrained_map_leaves_keys_attention_and_outputs_exactly_as_they_are(model, batch, layer):
    key_map = ak.AdversarialKeyMap(CONFIG.d_model, 32, seed=0).to(device_of(model))  # beside a GPU model too
    seen = []

    def spy(keys):
        seen.append(keys)
        seen.append(key_map(keys))
        return seen[-1]

    plain, edited = model(batch), model(batch, key_edits={layer: spy})
    assert seen and all(torch.equal(k, k_adv) for k, k_adv in zip(seen[::2], seen[1::2]))
    assert torch.equal(plain.probs, edited.probs) and torch.equal(plain.logits, edited.logits)
    tr = model.trace(batch)
    h = tr.hidden_states[:, layer]
    with torch.no_grad():
        visible = model.visibility(tr.tokens, tr.key_mask)
        own, _ = model.layers[layer].attend(h, visible)
        mapped, _ = model.layers[layer].attend(h, visible, key_edit=key_map)
    assert torch.equal(own, mapped)
    assert torch.equal(ak.attention_jsd(model, batch, layer=layer, key_map=key_map).cpu(), torch.zeros(len(batch)))


def test_the_start_is_stationary_for_the_distance(model, batch):
    """Why alpha = 0 needs the nudge: D's gradient is exactly 0 at the untrained map."""
    key_map = ak.AdversarialKeyMap(CONFIG.d_model, 32, seed=0)
    for p in model.parameters():
        p.requires_grad_(False)
    try:
        ak.attention_jsd(model, batch, layer=0, key_map=key_map).mean().backward()
    finally:
        for p in model.parameters():
            p.requires_grad_(True)
    assert all(float(p.grad.abs().max()) == 0 for p in key_map.parameters())
    key_map.nudge()
    d = ak.attention_jsd(model, batch, layer=0, key_map=key_map).detach()
    assert 0 < float(d.max()) < 1e-5  # off the start, barely


def test_the_map_is_seeded_and_leaves_the_global_generator_alone():
    state = torch.get_rng_state()
    a, b, c = (ak.AdversarialKeyMap(8, 16, seed=s) for s in (3, 3, 4))
    assert torch.equal(torch.get_rng_state(), state)
    assert _states_equal(a, b) and not _states_equal(a, c)
    with torch.no_grad():
        assert float(a.out.weight.abs().max()) == 0 and float(a.hidden.weight.abs().max()) > 0


# ----------------------------------------------------------------------------- the distance
def test_distance_is_metrics_jsd_on_the_trace_attention(model, batch):
    """Oracle: the attention rebuilt by hand from the trace's hidden states, JSD per row, averaged in a loop."""
    key_map = ak.AdversarialKeyMap(CONFIG.d_model, 32, seed=1)
    key_map.nudge(scale=30.0)  # far from the start
    key_map.to(device_of(model))  # beside a GPU model too
    layer, d, H, dv = 1, CONFIG.d_model, CONFIG.heads, CONFIG.head_dim
    tr = model.trace(batch)
    block = model.layers[layer]
    with torch.no_grad():
        x = block.norm1(tr.hidden_states[:, layer])
        q = x @ block.qkv.weight[:d].T + block.qkv.bias[:d]
        k = key_map(x @ block.qkv.weight[d : 2 * d].T + block.qkv.bias[d : 2 * d])
    B, T, _ = q.shape
    scores = torch.einsum("bqhe,bkhe->bhqk", q.view(B, T, H, dv), k.view(B, T, H, dv)) / math.sqrt(dv)
    adversarial = torch.softmax(scores.masked_fill(~tr.key_mask[:, None, None, :], -torch.inf), -1)
    original = tr.attentions[:, layer]
    got = ak.attention_jsd(model, batch, layer=layer, key_map=key_map).detach()
    expected = []
    for i in range(B):
        n = int(tr.lengths[i])
        rows = metrics.jsd(adversarial[i, :, :n, :n].double(), original[i, :, :n, :n].double())  # (H, n)
        expected.append(float(rows.mean()))
    np.testing.assert_allclose(got.cpu().numpy(), expected, rtol=1e-4, atol=1e-7)
    assert 0.01 < float(got.mean()) < math.log(2)


# ----------------------------------------------------------------------------- training
def test_alpha_one_keeps_accuracy_alpha_zero_moves_attention_and_the_model_is_untouched(model, tiny_dataset):
    before = copy.deepcopy(model.state_dict())
    frozen = model.layers[0].qkv.weight
    frozen.requires_grad_(False)  # the caller's flags come back as they were, mixed ones included
    model.zero_grad(set_to_none=True)
    model.train()
    try:
        runs = {alpha: ak.adversarial_keys(model, tiny_dataset.train, tiny_dataset.test, layer=0, alpha=alpha,
                                           epochs=3, lr=1e-2, **FAST) for alpha in (0.0, 1.0)}
        assert model.training
        assert not frozen.requires_grad
        assert all(p.requires_grad for name, p in model.named_parameters() if name != "layers.0.qkv.weight")
        assert all(p.grad is None for p in model.parameters())
    finally:
        frozen.requires_grad_(True)
        model.eval()
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    keep, move = runs[1.0], runs[0.0]
    assert keep.base_accuracy == move.base_accuracy >= 0.9
    assert keep.accuracy >= keep.base_accuracy - 0.05
    assert move.jsd > 0.05 > keep.jsd  # D started at 0 for both
    assert move.history[-1]["jsd"] > move.history[0]["jsd"] > 0
    assert [h["epoch"] for h in move.history] == [1, 2, 3] and move.n_train == 300 and move.n_test == 100
    for run in runs.values():
        assert 0 <= run.jsd <= math.log(2) and 0 <= run.output_tvd <= 1
        assert math.isclose(run.history[-1]["loss"], run.alpha * run.history[-1]["bce"]
                            - (1 - run.alpha) * run.history[-1]["jsd"], rel_tol=1e-6, abs_tol=1e-7)
    # the kept map is the one scored
    test = tiny_dataset.test
    d = ak.attention_jsd(model, test.batch(np.arange(len(test))), layer=0, key_map=move.key_map).detach()
    assert float(d.mean()) == pytest.approx(move.jsd, rel=1e-4)


def test_runs_are_deterministic_subsets_stratified_and_cached(model, tiny_dataset):
    args = (model, tiny_dataset.train, tiny_dataset.test)
    kwargs = dict(layer=1, alpha=0.5, epochs=1, max_train=64, hidden=32, batch_size=32, progress=False)
    a = ak.adversarial_keys(*args, **kwargs, use_cache=False)
    b = ak.adversarial_keys(*args, **kwargs)
    c = ak.adversarial_keys(*args, **kwargs)
    assert a.n_train == 64 and not b.from_cache and c.from_cache
    for r in (b, c):
        assert (r.accuracy, r.jsd, r.output_tvd, r.history) == (a.accuracy, a.jsd, a.output_tvd, a.history)
        assert _states_equal(r.key_map, a.key_map)
    other = ak.adversarial_keys(*args, **{**kwargs, "seed": 1})
    assert not other.from_cache and other.history != a.history


def test_sweep_has_one_row_per_layer_and_alpha(model, tiny_dataset, monkeypatch):
    """The runs train two at once, and each gives the bits it gives alone; the model's flags come back."""
    import attnlib.train

    monkeypatch.setattr(attnlib.train, "training_slots", lambda: 2)
    model.train()
    flags = [p.requires_grad for p in model.parameters()]
    frame = ak.adversarial_keys_sweep(model, tiny_dataset.train, tiny_dataset.test, layers=[1, 0], alphas=(0.0, 1.0),
                                      epochs=1, **FAST)
    assert model.training and [p.requires_grad for p in model.parameters()] == flags
    model.eval()
    assert list(zip(frame.layer, frame.alpha)) == [(1, 0.0), (1, 1.0), (0, 0.0), (0, 1.0)]
    assert {"accuracy", "base_accuracy", "jsd", "output_tvd", "final_loss", "train_seconds"} <= set(frame.columns)
    assert frame.base_accuracy.nunique() == 1
    for row in frame.itertuples():
        one = ak.adversarial_keys(model, tiny_dataset.train, tiny_dataset.test, layer=row.layer, alpha=row.alpha,
                                  epochs=1, **FAST)
        assert (row.jsd, row.accuracy, row.output_tvd, row.final_loss) == (
            one.jsd, one.accuracy, one.output_tvd, one.history[-1]["loss"])


def test_a_cached_sweep_hashes_the_model_once_and_shares_the_single_runs_entries(model, tiny_dataset, monkeypatch):
    hashed = []
    real = ak._state_fingerprint
    monkeypatch.setattr(ak, "_state_fingerprint", lambda module: hashed.append(1) or real(module))
    settings = dict(epochs=1, hidden=32, batch_size=32, max_train=32, progress=False, seed=7)
    frame = ak.adversarial_keys_sweep(model, tiny_dataset.train, tiny_dataset.test, layers=[0, 1], alphas=(0.5, 1.0),
                                      **settings)
    assert len(hashed) == 1 and not frame.from_cache.any()
    one = ak.adversarial_keys(model, tiny_dataset.train, tiny_dataset.test, layer=1, alpha=0.5, **settings)
    assert one.from_cache and one.jsd == frame.jsd[2]


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize("kwargs, match", [
    (dict(layer=2), "layer must be an int in 0 .. 1"),
    (dict(layer=-1), "layer must be"),
    (dict(layer=True), "layer must be"),
    (dict(alpha=1.5), r"alpha must be a number in \[0, 1\]"),
    (dict(alpha=-0.1), "alpha must be"),
    (dict(alpha=float("nan")), "alpha must be"),
    (dict(hidden=0), "hidden"),
    (dict(epochs=0), "epochs"),
    (dict(max_train=0), "max_train"),
    (dict(lr=0.0), "lr"),
])
def test_bad_settings(model, tiny_dataset, kwargs, match):
    kwargs = {"layer": 0, "alpha": 0.5, **kwargs}
    with pytest.raises(ValueError, match=match):
        ak.adversarial_keys(model, tiny_dataset.train, tiny_dataset.test, **kwargs, progress=False)


def test_a_model_without_keys_is_refused(tiny_dataset, batch):
    other = AttentionClassifier(len(tiny_dataset.vocab), ModelConfig(encoder="average"))
    with pytest.raises(ValueError, match="adversarial keys .* needs a model with attention keys that can be edited.*key_edits"):
        ak.adversarial_keys(other, tiny_dataset.train, tiny_dataset.test, layer=0, alpha=0.5)
    with pytest.raises(ValueError, match="key_edits"):
        ak.attention_jsd(other, batch, layer=0, key_map=lambda k: k)


def test_bad_splits(model, tiny_dataset):
    empty = tiny_dataset.test.subset([])
    with pytest.raises(ValueError, match="train_split .* is empty"):
        ak.adversarial_keys(model, empty, tiny_dataset.test, layer=0, alpha=0.5)
    with pytest.raises(ValueError, match="test_split .* is empty"):
        ak.adversarial_keys(model, tiny_dataset.train, empty, layer=0, alpha=0.5)
    with pytest.raises(ValueError, match="must be an attnlib.data.Split"):
        ak.adversarial_keys(model, tiny_dataset.train, tiny_dataset.test.batch([0, 1]), layer=0, alpha=0.5)
    s = tiny_dataset.test.subset([0, 1])
    s.ids[0] = s.ids[0].copy()
    s.ids[0][1] = model.vocab_size
    with pytest.raises(ValueError, match="outside the model's vocabulary"):
        ak.adversarial_keys(model, tiny_dataset.train, s, layer=0, alpha=0.5)


def test_bad_sweeps_fail_before_training(model, tiny_dataset):
    args = (model, tiny_dataset.train, tiny_dataset.test)
    for kwargs, match in [(dict(layers=[0, 0]), "duplicates"), (dict(layers=[]), "empty"), (dict(layers=[5]), "layer"),
                          (dict(alphas=(0.5, 0.5)), "duplicates"), (dict(alphas=()), "empty"),
                          (dict(alphas=0.5), "sequence"), (dict(alphas=(0.2, 2.0)), "alpha")]:
        with pytest.raises(ValueError, match=match):
            ak.adversarial_keys_sweep(*args, **kwargs, progress=False)


def test_bad_distance_inputs(model, batch):
    key_map = ak.AdversarialKeyMap(CONFIG.d_model, 8)
    with pytest.raises(ValueError, match="key_map must be a function"):
        ak.attention_jsd(model, batch, layer=0, key_map="mlp")
    with pytest.raises(ValueError, match="layer"):
        ak.attention_jsd(model, batch, layer=3, key_map=key_map)
    with pytest.raises(ValueError, match="Batch or a LongTensor"):
        ak.attention_jsd(model, batch.tokens.float(), layer=0, key_map=key_map)
    with pytest.raises(ValueError, match="shape"):  # a map that changes the shape: the model says so
        ak.attention_jsd(model, batch, layer=0, key_map=lambda k: k[..., :4])
