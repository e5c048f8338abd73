"""attnlib.flow: attention rollout and flow (Abnar & Zuidema 2020), against NumPy and networkx oracles and on the book's transformer."""
import dataclasses

import networkx as nx
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import attnlib
from attnlib import data
from attnlib.flow import FLOW_SCALE, RESIDUAL, flow, flow_cls, rollout, rollout_cls
from attnlib.models import Trace, TransformerClassifier, TransformerConfig

CONFIG = TransformerConfig(layers=2, heads=2, head_dim=4, embed_dim=6, dropout=0.0)


def _model(seed=0, layers=2, vocab=30):
    torch.manual_seed(seed)
    model = TransformerClassifier(vocab, dataclasses.replace(CONFIG, layers=layers)).eval()
    with torch.no_grad():  # sharper attention than a fresh init gives, so rows differ visibly
        for layer in model.layers:
            layer.qkv.weight.mul_(4.0)
    return model


def _batch(lengths=(7, 4, 9), vocab=30, seed=0):
    rng = np.random.default_rng(seed)
    ids = [np.concatenate([[data.SOS], rng.integers(4, vocab, n - 2), [data.EOS]]) for n in lengths]
    return data.collate(ids, np.arange(len(lengths)) % 2)


def random_attentions(lengths, layers, heads, seed, T=None, dtype=torch.float64):
    """Attentions (B, L, h, T, T) shaped like a Trace's: softmax rows over the real keys, 0 on padding."""
    rng = np.random.default_rng(seed)
    lengths = np.asarray(lengths)
    T = int(lengths.max()) if T is None else T
    mask = np.arange(T)[None, :] < lengths[:, None]
    logits = rng.normal(0, 2, (len(lengths), layers, heads, T, T))
    logits = np.where(mask[:, None, None, None, :], logits, -np.inf)
    att = np.exp(logits - logits.max(-1, keepdims=True))
    att = att / att.sum(-1, keepdims=True) * mask[:, None, None, :, None]
    return torch.as_tensor(att, dtype=dtype), torch.as_tensor(mask)


def oracle(attentions, lengths, residual):
    """NumPy oracle: one sentence and one layer at a time, on the unpadded block.

    A^ = r I + (1 - r) mean_h A (rows renormalised), R_0 = A^_0, R_l = A^_l R_{l-1}.
    """
    att = attentions.double().numpy()
    B, L, _, T, _ = att.shape
    out = np.zeros((B, L, T, T))
    for b in range(B):
        n = int(lengths[b])
        R = None
        for layer in range(L):
            A = residual * np.eye(n) + (1 - residual) * att[b, layer, :, :n, :n].mean(0)
            A = A / A.sum(1, keepdims=True)
            R = A if R is None else A @ R
            out[b, layer, :n, :n] = R
    return out


# ----------------------------------------------------------------------------- against the oracle


@pytest.mark.parametrize("residual", (0.0, 0.3, RESIDUAL, 0.9))
def test_rollout_matches_the_numpy_oracle(residual):
    lengths = [5, 2, 8, 1]
    att, mask = random_attentions(lengths, layers=4, heads=3, seed=1)
    out = rollout(att, mask, residual=residual)
    assert out.shape == (4, 4, 8, 8) and out.dtype == torch.float64
    np.testing.assert_allclose(out.numpy(), oracle(att, lengths, residual), atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 9), min_size=1, max_size=5),
    layers=st.integers(1, 4),
    heads=st.integers(1, 3),
    extra=st.integers(0, 3),
    residual=st.floats(0.0, 0.99),
    seed=st.integers(0, 2**16),
)
def test_rollout_properties(lengths, layers, heads, extra, residual, seed):
    """Oracle agreement, distributions over the real positions, zeros on padding, [CLS] row = rollout_cls."""
    att, mask = random_attentions(lengths, layers, heads, seed, T=max(lengths) + extra)
    out = rollout(att, mask, residual=residual)
    np.testing.assert_allclose(out.numpy(), oracle(att, lengths, residual), atol=1e-10)
    assert bool((out >= 0).all())
    rows = out.sum(-1)  # (B, L, T): 1 on real rows, 0 on padding rows
    np.testing.assert_allclose(rows.numpy(), np.broadcast_to(mask[:, None, :].double().numpy(), rows.shape),
                               atol=1e-10)
    pad = ~mask
    assert float(out.masked_select(pad[:, None, None, :].expand_as(out)).abs().sum()) == 0  # padding columns
    trace = Trace(tokens=torch.zeros(mask.shape, dtype=torch.long), lengths=mask.sum(-1), key_mask=mask,
                  attentions=att, values=torch.zeros(*att.shape[:4], 1), output_projection=torch.zeros(1),
                  hidden_states=torch.zeros(1))
    np.testing.assert_allclose(rollout_cls(trace, residual=residual).numpy(), out[:, -1, 0].numpy(), atol=1e-12)


def test_residual_zero_with_one_layer_is_the_head_averaged_attention():
    att, mask = random_attentions([6, 3, 4], layers=1, heads=4, seed=2)
    torch.testing.assert_close(rollout(att, mask, residual=0.0)[:, 0], att[:, 0].mean(1), atol=1e-12, rtol=0)
    # and with residual r > 0 a single layer is r I + (1 - r) A on the real block
    eye = torch.eye(6, dtype=att.dtype) * (mask[:, :, None] & mask[:, None, :])
    torch.testing.assert_close(rollout(att, mask, residual=0.25)[:, 0], 0.25 * eye + 0.75 * att[:, 0].mean(1),
                               atol=1e-12, rtol=0)


def test_rollout_is_the_product_of_the_layers():
    att, mask = random_attentions([7], layers=3, heads=2, seed=3)
    single = [rollout(att[:, [layer]], mask)[0, 0] for layer in range(3)]  # each layer's A^ alone
    out = rollout(att, mask)
    torch.testing.assert_close(out[0, 1], single[1] @ single[0], atol=1e-12, rtol=0)
    torch.testing.assert_close(out[0, 2], single[2] @ single[1] @ single[0], atol=1e-12, rtol=0)


# ----------------------------------------------------------------------------- on the book's transformer


def test_rollout_of_a_trace_is_padding_invariant():
    model, batch = _model(), _batch()
    trace = model.trace(batch)
    full, cls = rollout(trace.attentions, trace.key_mask), rollout_cls(trace)
    assert full.shape == (3, 2, 9, 9) and cls.shape == (3, 9)
    torch.testing.assert_close(cls, full[:, -1, 0], atol=1e-6, rtol=0)
    for row in range(3):  # each sentence alone (no padding) gives the same rollout as in the padded batch
        n = int(batch.lengths[row])
        alone = model.trace(batch.tokens[row : row + 1, :n])
        torch.testing.assert_close(rollout(alone.attentions, alone.key_mask)[0], full[row, :, :n, :n],
                                   atol=1e-5, rtol=0)
        torch.testing.assert_close(rollout_cls(alone)[0], cls[row, :n], atol=1e-5, rtol=0)
        assert float(cls[row, n:].abs().sum()) == 0
    torch.testing.assert_close(cls.sum(-1), torch.ones(3), atol=1e-5, rtol=0)
    # rolling out mixes more than the last layer alone: the [CLS] row differs from the raw one
    raw = trace.attentions[:, -1, :, 0].mean(1)
    assert float((cls - raw).abs().max()) > 1e-3
    assert attnlib.flow.rollout is rollout  # the short name


def test_one_layer_model_residual_zero_is_the_model_attention():
    model, batch = _model(layers=1), _batch()
    cls = rollout_cls(model.trace(batch), residual=0.0)
    with torch.no_grad():
        torch.testing.assert_close(cls, model(batch).attention, atol=1e-6, rtol=0)


# ----------------------------------------------------------------------------- validation


def test_validation_errors():
    att, mask = random_attentions([4, 2], layers=2, heads=2, seed=0)
    with pytest.raises(ValueError, match="float tensor"):
        rollout(att.numpy(), mask)
    with pytest.raises(ValueError, match="float tensor"):
        rollout(att.long(), mask)
    with pytest.raises(ValueError, match="shape \\(B, layers, heads, T, T\\)"):
        rollout(att[:, 0], mask)
    with pytest.raises(ValueError, match="shape \\(B, layers, heads, T, T\\)"):
        rollout(att[..., :3], mask)
    with pytest.raises(ValueError, match="empty dimension"):
        rollout(att[:0], mask[:0])
    with pytest.raises(ValueError, match="bool tensor"):
        rollout(att, mask.long())
    with pytest.raises(ValueError, match="key_mask must have shape \\(2, 4\\)"):
        rollout(att, mask[:, :3])
    with pytest.raises(ValueError, match="at least one real position"):
        rollout(att, mask & torch.tensor([[True], [False]]))
    with pytest.raises(ValueError, match="sum to 1 over the real keys"):
        rollout(att * 2, mask)
    with pytest.raises(ValueError, match="sum to 1 over the real keys"):
        rollout(att.transpose(-1, -2), mask)  # keys on the wrong axis
    with pytest.raises(ValueError, match="negative"):
        rollout(att - 0.5, mask)
    with pytest.raises(ValueError, match="NaN"):
        rollout(att.masked_fill(torch.ones_like(att, dtype=torch.bool), float("nan")), mask)
    for bad in (1.0, -0.1, 1.5, float("nan"), True, "0.5", None):
        with pytest.raises(ValueError, match="residual"):
            rollout(att, mask, residual=bad)
    with pytest.raises(ValueError, match="Trace"):
        rollout_cls(att)
    trace = _model().trace(_batch())
    with pytest.raises(ValueError, match="residual"):
        rollout_cls(trace, residual=1)


# ----------------------------------------------------------------------------- attention flow


def flow_oracle(attentions, lengths, residual, normalise=True):
    """networkx oracle: A^ per layer in NumPy, an explicit layer graph with float capacities, one max-flow per token.

    Nodes (l, p) for l = 0 .. L; edge (l + 1, q) -> (l, k) with capacity A^_l[q, k]; the flow
    of token k is the max-flow value from (L, 0) to (0, k).
    """
    att = attentions.double().numpy()
    B, L, _, T, _ = att.shape
    out = np.zeros((B, T))
    for b in range(B):
        n = int(lengths[b])
        graph = nx.DiGraph()
        graph.add_nodes_from((layer, p) for layer in range(L + 1) for p in range(n))
        for layer in range(L):
            A = residual * np.eye(n) + (1 - residual) * att[b, layer, :, :n, :n].mean(0)
            A = A / A.sum(1, keepdims=True)
            graph.add_edges_from(((layer + 1, q), (layer, k), {"capacity": A[q, k]}) for q in range(n) for k in range(n))
        values = np.array([1.0 if n == 1 else nx.maximum_flow_value(graph, (L, 0), (0, k)) for k in range(n)])
        out[b, :n] = values / values.sum() if normalise else values
    return out


def test_flow_matches_networkx():
    lengths = [6, 1, 9, 3]
    att, mask = random_attentions(lengths, layers=3, heads=2, seed=4)
    raw = flow(att, mask, normalise=False)
    assert raw.shape == (4, 9) and raw.dtype == torch.float64
    np.testing.assert_allclose(raw.numpy(), flow_oracle(att, lengths, RESIDUAL, normalise=False), atol=1e-6)
    np.testing.assert_allclose(flow(att, mask).numpy(), flow_oracle(att, lengths, RESIDUAL), atol=1e-6)


@settings(max_examples=12, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 6), min_size=1, max_size=3),
    layers=st.integers(1, 3),
    heads=st.integers(1, 2),
    extra=st.integers(0, 2),
    residual=st.floats(0.0, 0.95),
    seed=st.integers(0, 2**16),
)
def test_flow_properties(lengths, layers, heads, extra, residual, seed):
    """networkx agreement to 1e-6, raw flows in [0, 1], distributions over the real positions, 0 on padding."""
    att, mask = random_attentions(lengths, layers, heads, seed, T=max(lengths) + extra)
    raw = flow(att, mask, residual=residual, normalise=False)
    np.testing.assert_allclose(raw.numpy(), flow_oracle(att, lengths, residual, normalise=False), atol=1e-6)
    assert bool((raw >= 0).all()) and bool((raw <= 1 + 1e-9).all())
    out = flow(att, mask, residual=residual)
    assert bool((out >= 0).all()) and bool((out <= 1 + 1e-12).all())
    np.testing.assert_allclose(out.sum(-1).numpy(), np.ones(len(lengths)), atol=1e-12)
    assert float(out.masked_select(~mask).abs().sum()) == 0


def test_one_layer_flow_is_the_cls_row():
    """With one layer every path is one edge: the flow to k is A^_0[0, k] (rollout's [CLS] row)."""
    att, mask = random_attentions([5, 3], layers=1, heads=2, seed=5)
    torch.testing.assert_close(flow(att, mask, normalise=False), rollout(att, mask)[:, 0, 0], atol=1e-8, rtol=0)


def test_flow_of_a_trace_matches_networkx_and_is_padding_invariant():
    model, batch = _model(layers=3), _batch()
    trace = model.trace(batch)
    out = flow_cls(trace)
    assert out.shape == (3, 9) and out.dtype == trace.attentions.dtype
    lengths = batch.lengths.numpy()
    np.testing.assert_allclose(out.double().numpy(), flow_oracle(trace.attentions, lengths, RESIDUAL), atol=1e-6)
    for row in range(3):  # each sentence alone (no padding) gives the same flow as in the padded batch
        n = int(batch.lengths[row])
        alone = model.trace(batch.tokens[row : row + 1, :n])
        torch.testing.assert_close(flow_cls(alone)[0], out[row, :n], atol=1e-5, rtol=0)
        assert float(out[row, n:].abs().sum()) == 0
    assert attnlib.flow.flow is flow  # the short name


def test_flow_validation_errors():
    att, mask = random_attentions([4, 2], layers=2, heads=2, seed=0)
    with pytest.raises(ValueError, match="float tensor"):
        flow(att.numpy(), mask)
    with pytest.raises(ValueError, match="shape \\(B, layers, heads, T, T\\)"):
        flow(att[:, 0], mask)
    with pytest.raises(ValueError, match="key_mask must have shape"):
        flow(att, mask[:, :3])
    with pytest.raises(ValueError, match="sum to 1 over the real keys"):
        flow(att * 2, mask)
    shifted = torch.nn.functional.pad(att, (1, 0, 1, 0))  # a padding position in front of every sentence
    with pytest.raises(ValueError, match="position 0"):
        flow(shifted, torch.nn.functional.pad(mask, (1, 0)))
    for bad in (1.0, -0.1, "0.5"):
        with pytest.raises(ValueError, match="residual"):
            flow(att, mask, residual=bad)
    for bad in (0, 0.5, 2**31, float("inf"), True, "1e6"):
        with pytest.raises(ValueError, match="scale"):
            flow(att, mask, scale=bad)
    with pytest.raises(ValueError, match="normalise"):
        flow(att, mask, normalise="yes")
    with pytest.raises(ValueError, match="Trace"):
        flow_cls(att)
    assert FLOW_SCALE == 2**26


# ------------------------------------------------------------------ relevance by layer and its correlations
from attnlib.flow import (  # noqa: E402
    RELEVANCE_METHODS,
    RelevanceResult,
    instance_correlations,
    layer_correlations,
    relevance_by_layer,
)


@pytest.fixture(scope="module")
def synthetic_transformer(tiny_dataset):
    torch.manual_seed(0)
    config = dataclasses.replace(CONFIG, layers=3)
    model = TransformerClassifier(len(tiny_dataset.vocab), config).eval()
    with torch.no_grad():
        for layer in model.layers:
            layer.qkv.weight.mul_(4.0)
    return model


def _words(values, tokens):
    """(T,) over every position -> over the words only, renormalised."""
    kept = values[np.asarray(real_words(tokens))]
    return kept / kept.sum()


def real_words(tokens):
    from attnlib.models import real_token_mask

    return real_token_mask(torch.as_tensor(tokens)[None])[0].numpy()


def test_relevance_by_layer_agrees_with_rollout_flow_and_the_model(tiny_dataset, synthetic_transformer):
    model, split = synthetic_transformer, tiny_dataset.test
    res = relevance_by_layer(model, split, max_instances=12, seed=3, chunk_size=5)
    assert isinstance(res, RelevanceResult) and len(res) == 12 and res.n_layers == 3
    assert tuple(res.scores) == RELEVANCE_METHODS
    batch = split.batch(res.indices)
    trace = model.trace(batch)
    last_rollout = rollout_cls(trace).numpy()
    last_flow = flow_cls(trace).numpy()
    attention = model(batch).attention.detach().numpy()  # the last layer's [CLS] row, heads averaged
    for i in range(len(res)):
        tokens = batch.tokens[i].numpy()
        for method, expected in (("rollout", last_rollout[i]), ("flow", last_flow[i]),
                                 ("raw attention", attention[i])):
            got = res.scores[method][i]
            assert got.shape == (3, res.lengths[i])
            np.testing.assert_allclose(got[-1], _words(expected, tokens), atol=1e-6)
            np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-9)
    # flow after layer 1 is the flow of a one-layer model made of layer 0: the first layer's A^'s [CLS] row
    first = res.scores["flow"][0][0]
    steps = 0.5 * trace.attentions[0, 0].mean(0) + 0.5 * torch.eye(trace.attentions.shape[-1])
    n = int(trace.key_mask[0].sum())
    row = (steps[0, :n] / steps[0, :n].sum()).numpy()
    np.testing.assert_allclose(first, _words(np.pad(row, (0, trace.attentions.shape[-1] - n)),
                                             batch.tokens[0].numpy()), atol=1e-6)
    # the same instances as every other experiment, whatever the chunking (float32 padding: 1e-7)
    again = relevance_by_layer(model, split, max_instances=12, seed=3, chunk_size=12)
    np.testing.assert_array_equal(again.indices, res.indices)
    np.testing.assert_allclose(again.probs, res.probs, atol=1e-6)
    for method in RELEVANCE_METHODS:
        np.testing.assert_allclose(again.padded(method), res.padded(method), atol=1e-6)


def test_layer_correlations_are_scipy_spearman_per_instance(tiny_dataset, synthetic_transformer):
    import scipy.stats

    from attnlib import importance as imp

    model, split = synthetic_transformer, tiny_dataset.test
    rel = relevance_by_layer(model, split, max_instances=10, seed=1)
    res = imp.importance(model, split, max_instances=10, seed=1, loo_mode="replace")
    table = layer_correlations(rel, res)
    assert len(table) == 2 * 3 * 3 and set(table.measure) == {"loo", "gradient"}
    row = table[(table.measure == "gradient") & (table.method == "flow") & (table.layer == 2)].iloc[0]
    with np.errstate(all="ignore"):
        rhos = np.array([scipy.stats.spearmanr(rel.scores["flow"][i][1], res.gradient[i]).statistic
                         for i in range(len(rel))])
    assert row["n"] == np.isfinite(rhos).sum()
    assert row["mean"] == pytest.approx(np.nanmean(rhos), abs=1e-9)
    assert row["sd"] == pytest.approx(np.nanstd(rhos), abs=1e-9)
    assert row["low"] <= row["mean"] <= row["high"]  # the mean's bootstrap interval over sentences
    per_instance = instance_correlations(rel, res)[("gradient", "flow")]
    assert per_instance.shape == (10, 3)
    np.testing.assert_allclose(per_instance[:, 1], rhos, atol=1e-9, equal_nan=True)
    other = imp.importance(model, split, max_instances=10, seed=2, loo_mode="replace")
    with pytest.raises(ValueError, match="different instances"):
        layer_correlations(rel, other)


def test_all_positions_keep_cls_as_abnar_and_zuidema_do(tiny_dataset, synthetic_transformer):
    """positions="all" (A&Z's notebook): [CLS] and [SEP] stay in both vectors. In layer 1 rollout
    is raw attention with [CLS]'s own weight raised to (a_00 + 1) / 2, so the two rank the words
    alike and differ only in where [CLS] stands; the words' blank-out scores are the same replacements
    as positions="words" computes."""
    from attnlib import importance as imp

    model, split = synthetic_transformer, tiny_dataset.test
    words = relevance_by_layer(model, split, max_instances=10, seed=1)
    full = relevance_by_layer(model, split, max_instances=10, seed=1, positions="all")
    assert full.positions == "all" and (full.lengths == words.lengths + 2).all()
    batch = split.batch(full.indices)
    raw0 = model.trace(batch).attentions[:, 0].mean(1)[:, 0].double().numpy()  # layer 1's [CLS] row
    for i in range(len(full)):
        n = int(full.lengths[i])
        raw, rolled = full.scores["raw attention"][i][0], full.scores["rollout"][i][0]
        assert raw.shape == rolled.shape == (n,)
        np.testing.assert_allclose(raw, raw0[i, :n] / raw0[i, :n].sum(), atol=1e-6)
        expected = raw / 2
        expected[0] = (raw[0] + 1) / 2
        np.testing.assert_allclose(rolled, expected, atol=1e-6)
        assert rolled.argmax() == 0  # [CLS] first: it holds more than half
        np.testing.assert_allclose(full.scores["flow"][i][0], rolled, atol=1e-6)  # one layer: flow = rollout
        np.testing.assert_allclose(full.scores["rollout"][i][:, 1:-1] / full.scores["rollout"][i][:, 1:-1].sum(-1, keepdims=True),
                                   words.scores["rollout"][i], atol=1e-6)
    ref_words = imp.importance(model, split, max_instances=10, seed=1, loo_mode="replace")
    ref_all = imp.importance(model, split, max_instances=10, seed=1, loo_mode="replace", positions="all")
    assert ref_all.settings["positions"] == "all" and (ref_all.lengths == ref_words.lengths + 2).all()
    for i in range(len(ref_all)):
        np.testing.assert_allclose(ref_all.loo[i][1:-1], ref_words.loo[i], atol=1e-6)
        assert ref_all.gradient[i].sum() == pytest.approx(1.0)
    table = layer_correlations(full, ref_all)
    assert set(table.n) <= {10} and len(table) == 2 * 3 * 3
    with pytest.raises(ValueError, match="same positions"):
        layer_correlations(full, ref_words)
    with pytest.raises(ValueError, match="replace"):
        imp.importance(model, split, max_instances=4, positions="all")
    with pytest.raises(ValueError, match="positions"):
        imp.importance(model, split, max_instances=4, loo_mode="replace", positions="cls")
    with pytest.raises(ValueError, match="positions"):
        relevance_by_layer(model, split, max_instances=4, positions="every")


def test_relevance_by_layer_rejects_models_without_a_trace(tiny_dataset, tiny_model):
    with pytest.raises(ValueError, match="trace"):
        relevance_by_layer(tiny_model("average"), tiny_dataset.test, max_instances=4)
    with pytest.raises(ValueError, match="residual"):
        relevance_by_layer(TransformerClassifier(len(tiny_dataset.vocab), CONFIG), tiny_dataset.test,
                           max_instances=4, residual=1.0)


def test_flow_of_a_batch_equals_each_sentence_alone_across_groups():
    """40 sentences make two max-flow groups at the default scale; each sentence's flows are the same alone."""
    lengths = np.random.default_rng(5).integers(1, 9, size=40)
    att, mask = random_attentions(lengths, layers=3, heads=2, seed=11)
    together = flow(att, mask, normalise=False)
    for b in (0, 17, 30, 31, 39):
        n = int(lengths[b])
        alone = flow(att[b:b + 1, :, :, :n, :n], mask[b:b + 1, :n], normalise=False)
        assert torch.equal(together[b, :n], alone[0])
        assert torch.all(together[b, n:] == 0)
    oracle_values = flow_oracle(att, lengths, RESIDUAL, normalise=False)
    np.testing.assert_allclose(together.numpy(), oracle_values, atol=1e-6)


def test_correlations_over_seeds_stack_each_models_rho(tiny_dataset, synthetic_transformer):
    """Two "seeds": the same model twice and a second one; the table reads the stack over seeds."""
    from attnlib import importance as imp
    from attnlib import uncertainty
    from attnlib.flow import correlations_over_seeds

    split = tiny_dataset.test
    torch.manual_seed(1)
    other = TransformerClassifier(len(tiny_dataset.vocab), dataclasses.replace(CONFIG, layers=3)).eval()
    models = [synthetic_transformer, other]
    rel = [relevance_by_layer(m, split, max_instances=10, seed=1) for m in models]
    res = [imp.importance(m, split, max_instances=10, seed=1, loo_mode="replace") for m in models]
    table, rho = correlations_over_seeds(rel, res)
    assert rho["loo", "flow"].shape == (2, 10, 3)
    np.testing.assert_allclose(rho["loo", "flow"][1], instance_correlations(rel[1], res[1])["loo", "flow"],
                               equal_nan=True)
    row = table[(table.measure == "loo") & (table.method == "rollout") & (table.layer == 3)].iloc[0]
    iv = uncertainty.over_seeds(rho["loo", "rollout"][:, :, 2])
    assert row["mean"] == pytest.approx(iv.estimate) and row["seeds"] == 2
    assert row["low"] == pytest.approx(max(iv.low, -1.0)) and row["high"] == pytest.approx(min(iv.high, 1.0))
    assert (table["low"] >= -1).all() and (table["high"] <= 1).all()
    with pytest.raises(ValueError, match="one relevance and one importance"):
        correlations_over_seeds(rel, res[:1])
    moved = relevance_by_layer(other, split, max_instances=10, seed=2)
    with pytest.raises(ValueError, match="different instances"):
        correlations_over_seeds([rel[0], moved], res)


def test_rationale_scores_are_the_last_layer_and_the_importance(tiny_dataset, synthetic_transformer):
    from attnlib import importance as imp
    from attnlib.flow import rationale_scores

    split = tiny_dataset.test
    rel = relevance_by_layer(synthetic_transformer, split, max_instances=6, seed=1)
    res = imp.importance(synthetic_transformer, split, max_instances=6, seed=1, loo_mode="replace")
    scores = rationale_scores(rel, res, seed=4)
    assert list(scores) == [*RELEVANCE_METHODS, "blank-out", "gradient", "random"]
    np.testing.assert_array_equal(scores["flow"][2], rel.scores["flow"][2][-1])
    np.testing.assert_array_equal(scores["gradient"][0], res.gradient[0])
    rng = np.random.default_rng(4)
    np.testing.assert_array_equal(scores["random"][0], rng.random(len(scores["flow"][0])))
    assert rationale_scores(rel, res, seed=4)["random"][3].tolist() == scores["random"][3].tolist()
    with pytest.raises(ValueError, match="different instances"):
        rationale_scores(rel, imp.importance(synthetic_transformer, split, max_instances=6, seed=2))
