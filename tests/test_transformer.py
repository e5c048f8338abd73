"""The book's small transformer: its trace, edits, the intervention protocol, and training."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib import data, train
from attnlib.models import Site, TransformerClassifier, TransformerConfig, interventions
from attnlib.models.heads import Trace, apply_edits, check_edits, flatten_candidates

CONFIG = TransformerConfig(layers=2, heads=3, head_dim=4, embed_dim=6, max_positions=40, dropout=0.0)


def _model(seed=0, config=CONFIG, vocab=30):
    torch.manual_seed(seed)
    return TransformerClassifier(vocab, config).eval()


def _batch(lengths=(7, 4, 9), vocab=30, seed=0):
    rng = np.random.default_rng(seed)
    ids = [np.concatenate([[data.SOS], rng.integers(4, vocab, n - 2), [data.EOS]]) for n in lengths]
    return data.collate(ids, np.arange(len(lengths)) % 2)


def test_forward_gives_distributions_and_ignores_padding():
    model, batch = _model(), _batch()
    probs = model(batch).probs
    assert probs.shape == (3, 2)
    torch.testing.assert_close(probs.sum(-1), torch.ones(3))
    for row in range(3):  # each sentence alone (no padding) gives the same output as in the padded batch
        n = int(batch.lengths[row])
        alone = model(batch.tokens[row : row + 1, :n]).probs
        torch.testing.assert_close(alone[0], probs[row], atol=1e-5, rtol=0)


def test_trace_shapes_rows_and_padding():
    model, batch = _model(), _batch()
    tr = model.trace(batch)
    assert isinstance(tr, Trace)
    B, T = batch.tokens.shape
    assert tr.attentions.shape == (B, 2, 3, T, T)
    assert tr.values.shape == (B, 2, 3, T, 4)
    assert tr.output_projection.shape == (2, 3, 4, 12)
    assert tr.hidden_states.shape == (B, 3, T, 12)
    assert tr.lengths.tolist() == batch.lengths.tolist()
    real = tr.key_mask
    rows = tr.attentions.sum(-1)  # (B, L, h, T)
    torch.testing.assert_close(rows, real[:, None, None, :].float().expand_as(rows))
    assert float(tr.attentions.masked_select(~real[:, None, None, None, :].expand_as(tr.attentions)).abs().max()) == 0
    assert float(tr.hidden_states.masked_select(~real[:, None, :, None].expand_as(tr.hidden_states)).abs().max()) == 0


def test_trace_head_outputs_rebuild_the_attention_block():
    """Oracle: the heads' A @ T summed, plus W^O's bias, is what the layer's output projection emits."""
    model, batch = _model(), _batch()
    seen = []
    handle = model.layers[1].out.register_forward_hook(lambda mod, inp, out: seen.append(out.detach()))
    tr = model.trace(batch)
    handle.remove()
    rebuilt = tr.head_output()[:, 1].sum(1) + model.layers[1].out.bias
    mask = tr.key_mask[:, :, None]
    torch.testing.assert_close(rebuilt * mask, seen[0] * mask, atol=1e-5, rtol=0)
    assert tr.value_output(1).shape == (3, 3, batch.tokens.shape[1], 12)


def test_edits_identity_uniform_and_several_sites():
    model, batch = _model(), _batch()
    plain = model(batch).probs
    same = model(batch, edits={Site(0, 1): lambda a, m: a, Site(1, 2): lambda a, m: a}).probs
    torch.testing.assert_close(same, plain)
    one = model(batch, edits={Site(1, 0): lambda a, m: interventions.uniform_rows(m).unsqueeze(1).expand_as(a)}).probs
    assert float((one - plain).detach().abs().max()) > 1e-4
    two = model(batch, edits={Site(0, 0): lambda a, m: interventions.uniform_rows(m).unsqueeze(1).expand_as(a),
                              Site(1, 0): lambda a, m: interventions.uniform_rows(m).unsqueeze(1).expand_as(a)}).probs
    assert float((two - one).detach().abs().max()) > 1e-6


@pytest.mark.parametrize("edits, match", [
    ({Site(2, 0): lambda a, m: a}, "outside the model"),
    ({Site(0, 3): lambda a, m: a}, "outside the model"),
    ({(0, 0): lambda a, m: a}, "keyed by"),
    ({Site(0, 0): "uniform"}, "must be a function"),
    ([Site(0, 0)], "mapping"),
])
def test_bad_edits(edits, match):
    with pytest.raises(ValueError, match=match):
        _model()(_batch(), edits=edits)


def test_wrongly_shaped_edit():
    with pytest.raises(ValueError, match="must give attention of shape"):
        _model()(_batch(), edits={Site(0, 0): lambda a, m: a[:, :2]})


def test_decode_at_reproduces_forward_for_every_site():
    model, batch = _model(), _batch()
    plain = model(batch).probs
    for site in model.sites:
        state = model.site_state(batch, site)
        assert state.attention.shape == (3, batch.tokens.shape[1], batch.tokens.shape[1])
        torch.testing.assert_close(model.decode_at(state, state.attention), plain, atol=1e-6, rtol=0)


def test_decode_at_candidates_match_one_at_a_time_and_are_differentiable():
    model, batch = _model(), _batch()
    state = model.site_state(batch, Site(0, 2))
    rng = np.random.default_rng(0)
    B, T = state.mask.shape
    # one permutation per query row: the shared intervention on (B, Q, T) rows, sources (B, P, Q, T)
    per_row = interventions.permutation_sources(state.mask.repeat_interleave(T, 0), 4, rng)
    sources = per_row.view(B, T, 4, T).transpose(1, 2)
    cands = interventions.permute_rows(state.attention, sources).detach().requires_grad_(True)
    assert cands.shape == (B, 4, T, T)
    torch.testing.assert_close(cands.sum(-1), torch.ones(B, 4, T))
    out = model.decode_at(state, cands)
    assert out.shape == (3, 4, 2)
    for p in range(4):
        torch.testing.assert_close(out[:, p], model.decode_at(state, cands[:, p].detach()), atol=1e-6, rtol=0)
    out[..., 1].sum().backward()
    assert cands.grad is not None and float(cands.grad.abs().sum()) > 0
    with pytest.raises(ValueError, match="attention must have shape"):
        model.decode_at(state, cands[:, :, :2])


def test_site_state_checks_the_site_and_the_input():
    model = _model()
    with pytest.raises(ValueError, match="outside the model"):
        model.site_state(_batch(), Site(5, 0))
    with pytest.raises(ValueError, match="longer than the model's 40 positions"):
        model(_batch(lengths=(41, 5)))
    with pytest.raises(ValueError, match="LongTensor"):
        model(torch.zeros(2, 5))


@pytest.mark.parametrize("kwargs", [dict(layers=0), dict(head_dim=-1), dict(dropout=1.0), dict(n_classes=1)])
def test_config_validation(kwargs):
    with pytest.raises(ValueError):
        TransformerConfig(**kwargs)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(2, 12), min_size=1, max_size=4), st.integers(0, 1), st.integers(0, 2))
def test_trace_attention_is_what_the_site_sees(lengths, layer, head):
    model, batch = _model(), _batch(tuple(lengths))
    tr = model.trace(batch)
    state = model.site_state(batch, Site(layer, head))
    real = tr.key_mask[:, :, None] & tr.key_mask[:, None, :]
    torch.testing.assert_close(tr.attentions[:, layer, head] * real, state.attention * real, atol=1e-6, rtol=0)


def test_check_edits_and_flatten_candidates():
    assert check_edits(None, 2, 2) == {}
    f = lambda a, m: a  # noqa: E731
    assert check_edits({Site(1, 0): f}, 2, 2) == {1: {0: f}}
    x = torch.rand(2, 3, 5, 4, 4)
    flat, cand, K = flatten_candidates(x, 2, 4)
    assert flat.shape == (30, 4, 4) and cand == (3, 5) and K == 15
    probs = torch.rand(2, 2, 4, 4)
    out = apply_edits(probs, {1: torch.zeros(2, 4, 4)}, torch.ones(2, 4, dtype=torch.bool))
    assert torch.equal(out[:, 0], probs[:, 0]) and float(out[:, 1].abs().sum()) == 0


# ----------------------------------------------------------------------------- training
def test_warmup_schedule():
    assert train.TRANSFORMER_TRAIN.warmup > 0 and train.TRANSFORMER_TRAIN.lr < 1e-3  # the book's settings warm up
    model = torch.nn.Linear(2, 2)
    tc = train.TrainConfig(lr=1.0, warmup=0.25, amsgrad=False)
    opt = train.make_optimizer(model, tc)
    schedule = train.lr_schedule(opt, tc, 8)
    lrs = []
    for _ in range(8):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        schedule.step()
    assert lrs[:2] == [pytest.approx(0.5), pytest.approx(1.0)]  # warm-up over 2 of 8 steps
    assert lrs[2:] == sorted(lrs[2:], reverse=True) and lrs[-1] == pytest.approx(1 / 6)
    assert train.lr_schedule(opt, train.TrainConfig(), 8) is None  # J&W: constant
    with pytest.raises(ValueError, match="warmup"):
        train.TrainConfig(warmup=1.0)


def test_train_model_builds_caches_and_reproduces_the_transformer(tiny_dataset):
    config = TransformerConfig(layers=1, heads=2, head_dim=4, max_positions=64)
    a = train.train_model(tiny_dataset, config, epochs=2, progress=False)
    assert isinstance(a.model, TransformerClassifier) and not a.from_cache
    assert a.config.name.startswith("transformer") and 0 <= a.test["f1"] <= 1
    b = train.train_model(tiny_dataset, config, epochs=2, progress=False)
    assert b.from_cache and b.test == a.test
    c = train.train_model(tiny_dataset, config, epochs=2, progress=False, use_cache=False)
    for (k, v), w in zip(a.model.state_dict().items(), c.model.state_dict().values()):
        assert torch.equal(v, w), k
    with pytest.raises(ValueError, match="ModelConfig or a TransformerConfig"):
        train.train_model(tiny_dataset, {"layers": 1})


def test_dropout_draws_from_the_models_own_generator():
    """Training masks must not depend on who else draws from torch's global generator (threads)."""
    config = TransformerConfig(layers=1, heads=2, head_dim=4, embed_dim=6, dropout=0.5)
    outs = []
    for other_draws in (0, 7):
        model = _model(seed=3, config=config).train()
        torch.rand(other_draws)  # someone else using the global generator in between
        outs.append(model(_batch()).probs)
    torch.testing.assert_close(outs[0], outs[1], atol=0, rtol=0)
    model.eval()
    torch.testing.assert_close(model(_batch()).probs, model(_batch()).probs, atol=0, rtol=0)  # eval: no dropout


def test_transformers_trained_at_once_equal_each_trained_alone(tiny_dataset):
    configs = {f"d{d}": TransformerConfig(layers=1, heads=2, head_dim=d, max_positions=64) for d in (4, 2)}
    together = train.train_models({k: dict(dataset=tiny_dataset, config=c, epochs=2, use_cache=False, progress=False)
                                   for k, c in configs.items()}, progress=False)
    for k, c in configs.items():
        alone = train.train_model(tiny_dataset, c, epochs=2, use_cache=False, progress=False)
        for (name, v), w in zip(alone.model.state_dict().items(), together[k].model.state_dict().values()):
            assert torch.equal(v, w), (k, name)


@pytest.mark.parametrize("experiment", ["single_weight", "ranked_removal"])
def test_row_per_instance_experiments_refuse_a_head_with_a_row_per_query(tiny_dataset, experiment):
    """Erasure edits one row per instance; permutation and the adversary handle heads (test_head_perturbation)."""
    from attnlib import counterfactual, erasure

    config = TransformerConfig(layers=1, heads=2, head_dim=4, max_positions=64)
    model = TransformerClassifier(len(tiny_dataset.vocab), config).eval()
    run = getattr(counterfactual, experiment, None) or getattr(erasure, experiment)
    with pytest.raises(ValueError, match="one attention row per instance.*a row per query"):
        run(model, tiny_dataset.test, max_instances=4, site=Site(0, 1))


# ----------------------------------------------------------------------------- Pruthi et al.'s restricted attention
SEP = 5  # the separator's id in these tests
RESTRICTED = TransformerConfig(layers=2, heads=3, head_dim=4, embed_dim=6, max_positions=40, dropout=0.0,
                               segment_separator=SEP)


def _two_segments(rng, n_rows=4, vocab=30):
    """<SOS> a... SEP b... <EOS> rows (ids 6.. for words), padded; one row without a separator."""
    rows = []
    for i in range(n_rows):
        first, second = rng.integers(6, vocab, rng.integers(1, 5)), rng.integers(6, vocab, rng.integers(1, 5))
        middle = [SEP] if i else []
        rows.append(np.concatenate([[data.SOS], first, middle, second, [data.EOS]]))
    return data.collate(rows, np.arange(n_rows) % 2)


def test_visibility_is_pruthis_inter_attention_mask():
    """Oracle: their create_inter_attention_mask, written out position by position."""
    model, rng = _model(config=RESTRICTED), np.random.default_rng(0)
    batch = _two_segments(rng)
    tokens, real = batch.tokens, batch.tokens != data.PAD
    got = model.visibility(tokens, real)[:, 0]
    B, T = tokens.shape
    for b in range(B):
        seps = [j for j in range(T) if tokens[b, j] == SEP]
        segment = [int(bool(seps) and j >= seps[0]) for j in range(T)]  # the separator opens segment 2
        for i in range(T):
            for j in range(T):
                if i == 0:
                    want = bool(real[b, j])
                else:
                    want = bool(real[b, j]) and j != 0 and segment[i] == segment[j]
                assert bool(got[b, i, j]) == want, (b, i, j)
    plain = _model().visibility(tokens, real)
    assert plain.shape == (B, 1, 1, T) and torch.equal(plain[:, 0, 0], real)


def test_restricted_attention_keeps_the_segments_apart_in_every_layer():
    """A word of the first segment never reaches the second: the second segment's states (the
    separator's included) do not move; [CLS]'s do, since it attends to both."""
    model, rng = _model(config=RESTRICTED), np.random.default_rng(1)
    batch = _two_segments(rng)
    edited = batch.tokens.clone()
    edited[1:, 1] = (edited[1:, 1] - 6 + 1) % 24 + 6  # another word at position 1 (first segment) of rows 1..
    a, b = model.trace(batch.tokens), model.trace(edited)
    for row in range(1, len(edited)):
        sep = int((edited[row] == SEP).nonzero()[0, 0])
        n = int(batch.lengths[row])
        torch.testing.assert_close(a.hidden_states[row, :, sep:n], b.hidden_states[row, :, sep:n], atol=0, rtol=0)
        assert not torch.equal(a.hidden_states[row, 1:, 0], b.hidden_states[row, 1:, 0])
    rows = a.attentions.sum(-1)  # still distributions over the real keys
    torch.testing.assert_close(rows, a.key_mask[:, None, None, :].float().expand_as(rows))
    assert float(a.attentions[:, :, :, 1:, 0].abs().max()) == 0  # nobody attends to [CLS]


def test_a_restricted_model_meets_the_protocol():
    model, batch = _model(config=RESTRICTED), _two_segments(np.random.default_rng(2))
    out = model(batch)
    assert out.head_attention.shape == (len(batch.tokens), 3, batch.tokens.shape[1])
    torch.testing.assert_close(out.attention, out.head_attention.mean(1))
    for site in model.sites:
        state = model.site_state(batch, site)
        torch.testing.assert_close(model.decode_at(state, state.attention), out.probs, atol=1e-6, rtol=0)
    embedded = model.embed_tokens(batch.tokens)
    torch.testing.assert_close(model.forward_embedded(batch.tokens, embedded).probs, out.probs, atol=1e-6, rtol=0)


def test_the_restriction_is_in_the_name_but_not_in_an_unrestricted_models_dict():
    assert "segment_separator" not in CONFIG.to_dict()  # unrestricted models keep their cache keys
    assert RESTRICTED.to_dict()["segment_separator"] == SEP and "restricted" in RESTRICTED.name
    for bad in (data.EOS, 0, -1, 2.5, True):
        with pytest.raises(ValueError, match="segment_separator"):
            TransformerConfig(segment_separator=bad)
