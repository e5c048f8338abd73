"""Kobayashi et al. (2021)'s norms through the attention block and GlobEnc (attnlib.experiments.globenc), each
against an independent computation: the decomposition's sum against the states a forward hook sees in
the model's own forward pass, and its vectors against explicit loops over (sentence, query, token) from
the weights (LayerNorm by hand, W^V and W^O sliced per head); the rollout against a NumPy loop over layers."""
import numpy as np
import pytest
import torch

from attnlib.experiments import globenc as ge


@pytest.fixture(scope="module")
def tiny(scaled_transformer):
    return scaled_transformer()


@pytest.fixture(scope="module")
def bert(tiny_bert_checkpoint):
    """The tiny BERT checkpoint with random biases, LayerNorm gains and shifts (its own are 0 and 1), so
    that the bias and beta terms are not zero; two sentences of different lengths."""
    from attnlib.models import PretrainedClassifier

    clf = PretrainedClassifier(str(tiny_bert_checkpoint)).eval()
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for name, p in clf.model.encoder.named_parameters():
            if name.endswith("bias") or "LayerNorm" in name:
                p.add_(0.3 * torch.randn(p.shape, generator=g))
    batch = clf.encode_texts(["a good film", "a very long and boring plot , sadly"])
    return clf, batch


def _hooked(module, run):
    """(input, output) of ``module`` in ``run()``, through a forward hook."""
    seen = {}
    handle = module.register_forward_hook(lambda m, args, out: seen.update(x=args[0].detach(), y=out.detach()))
    try:
        run()
    finally:
        handle.remove()
    return seen["x"], seen["y"]


# --- the decomposition sums to what the model computes ------------------------------------------------
def test_book_decomposition_sums_to_the_residual_stream_after_attention_and_to_the_layer_output(tiny):
    model, tokens, lengths = tiny
    trace = model.trace(tokens)
    m = trace.key_mask[:, :, None].float()
    for index, layer in enumerate(model.layers):
        # the residual stream after the attention block is what the second LayerNorm reads
        stream, _ = _hooked(layer.norm2, lambda: model(tokens, edits={}))
        states = trace.hidden_states[:, index]
        vectors, rest = model.layer_decomposition(index, states, tokens, trace.key_mask)
        if index < len(model.layers) - 1:  # the forward pass computes only the [CLS] row of the last layer
            torch.testing.assert_close((vectors.sum(2) + rest) * m, stream * m, atol=2e-5, rtol=1e-5)
        else:
            torch.testing.assert_close((vectors.sum(2) + rest)[:, 0], stream[:, 0], atol=2e-5, rtol=1e-5)
        torch.testing.assert_close(rest[0, 1], layer.out.bias.detach())  # the part from no token: b^O
        whole, rest_layer = model.layer_decomposition(index, states, tokens, trace.key_mask, upto="layer")
        assert torch.equal(whole, vectors)  # pre-LN: the residual stream passes no LayerNorm
        torch.testing.assert_close(whole.sum(2) + rest_layer, trace.hidden_states[:, index + 1], atol=2e-5, rtol=1e-5)
        for b, n in enumerate(lengths.tolist()):
            assert not vectors[b, n:].any() and not vectors[b, :, n:].any() and not rest_layer[b, n:].any()


def test_bert_decomposition_sums_to_the_first_and_the_second_layer_norms_output(bert):
    clf, batch = bert
    trace = clf.trace(batch)
    m = trace.key_mask[:, :, None].float()
    for index, layer in enumerate(clf.layers):
        run = lambda: clf.trace(batch)  # noqa: E731
        _, after_first = _hooked(layer.attention.output.LayerNorm, run)
        _, after_second = _hooked(layer.output.LayerNorm, run)
        states = trace.hidden_states[:, index]
        vectors, rest = clf.layer_decomposition(index, states, trace.tokens, trace.key_mask, upto="attention")
        torch.testing.assert_close(vectors.sum(2) + rest, after_first * m, atol=2e-5, rtol=1e-5)
        vectors2, rest2 = clf.layer_decomposition(index, states, trace.tokens, trace.key_mask, upto="layer")
        torch.testing.assert_close(vectors2.sum(2) + rest2, after_second * m, atol=2e-5, rtol=1e-5)
        torch.testing.assert_close(after_second * m, trace.hidden_states[:, index + 1])
        for b, n in enumerate(trace.lengths.tolist()):
            assert not vectors2[b, n:].any() and not vectors2[b, :, n:].any() and not rest2[b, n:].any()


# --- the vectors against loops from the weights ---------------------------------------------------------
def _layer_norm(z, norm):
    z = z.double()
    s = torch.sqrt(((z - z.mean()) ** 2).mean() + norm.eps)
    return (z - z.mean()) / s * norm.weight.double() + norm.bias.double(), s


@torch.no_grad()
def test_book_vectors_match_a_loop_over_queries_and_tokens(tiny):
    """x_{i<-j} = sum_h alpha^h_ij ((LN1(x_j) W^V_h + b^V_h) W^O_h) + [i = j] x_i, by hand, head by head."""
    model, tokens, lengths = tiny
    trace = model.trace(tokens)
    d, H, dv = model.config.d_model, model.config.heads, model.config.head_dim
    for index, layer in enumerate(model.layers):
        x = trace.hidden_states[:, index].double()
        Wv, bv = layer.qkv.weight[2 * d:].double(), layer.qkv.bias[2 * d:].double()
        Wo = layer.out.weight.double()  # (d, d): out = heads @ Wo.T
        got, _ = model.layer_decomposition(index, trace.hidden_states[:, index], tokens, trace.key_mask)
        for b, n in enumerate(lengths.tolist()):
            for i in range(n):
                for j in range(n):
                    normed, _ = _layer_norm(x[b, j], layer.norm1)
                    want = x[b, i].clone() if i == j else torch.zeros(d, dtype=torch.float64)
                    for h in range(H):
                        value = normed @ Wv[h * dv:(h + 1) * dv].T + bv[h * dv:(h + 1) * dv]
                        want += trace.attentions[b, index, h, i, j].double() * (value @ Wo[:, h * dv:(h + 1) * dv].T)
                    np.testing.assert_allclose(got[b, i, j].numpy(), want.numpy(), atol=2e-5, rtol=1e-5)


@torch.no_grad()
def test_bert_vectors_match_a_loop_with_both_layer_norms_by_hand(bert):
    """Kobayashi et al.'s x_{i<-j} = gamma1 (y_ij - m(y_ij)) / s(z_i) with z_i = sum_j y_ij + b^O (LN1's input,
    summed by hand), GlobEnc's gamma2 (x_{i<-j} - m) / s(h_i + FFN(h_i)) with the FFN run by hand, and the
    parts from no token, gamma (b - m(b)) / s + beta."""
    clf, batch = bert
    trace = clf.trace(batch)
    c = clf.config
    d, H, dv = c.d_model, c.heads, c.head_dim
    for index, layer in enumerate(clf.layers):
        attn, out = layer.attention, layer.output
        Wv, bv = attn.self.value.weight.double(), attn.self.value.bias.double()
        Wo, bo = attn.output.dense.weight.double(), attn.output.dense.bias.double()
        n1, n2 = attn.output.LayerNorm, out.LayerNorm
        x = trace.hidden_states[:, index].double()
        got1, rest1 = clf.layer_decomposition(index, trace.hidden_states[:, index], trace.tokens, trace.key_mask)
        got2, rest2 = clf.layer_decomposition(index, trace.hidden_states[:, index], trace.tokens, trace.key_mask,
                                              upto="layer")
        for b, n in enumerate(trace.lengths.tolist()):
            for i in range(n):
                y = torch.zeros(n, d, dtype=torch.float64)
                for j in range(n):
                    if i == j:
                        y[j] += x[b, i]
                    for h in range(H):
                        value = x[b, j] @ Wv[h * dv:(h + 1) * dv].T + bv[h * dv:(h + 1) * dv]
                        y[j] += trace.attentions[b, index, h, i, j].double() * (value @ Wo[:, h * dv:(h + 1) * dv].T)
                z = y.sum(0) + bo
                hidden, s1 = _layer_norm(z, n1)
                ffn = layer.intermediate.intermediate_act_fn(hidden @ layer.intermediate.dense.weight.double().T
                                                             + layer.intermediate.dense.bias.double())
                ffn = ffn @ out.dense.weight.double().T + out.dense.bias.double()
                _, s2 = _layer_norm(hidden + ffn, n2)
                g1, g2 = n1.weight.double(), n2.weight.double()
                x1 = (y - y.mean(-1, keepdim=True)) / s1 * g1
                x2 = (x1 - x1.mean(-1, keepdim=True)) / s2 * g2
                np.testing.assert_allclose(got1[b, i, :n].numpy(), x1.numpy(), atol=3e-5, rtol=1e-4)
                np.testing.assert_allclose(got2[b, i, :n].numpy(), x2.numpy(), atol=3e-5, rtol=1e-4)
                r1 = (bo - bo.mean()) / s1 * g1 + n1.bias.double()
                np.testing.assert_allclose(rest1[b, i].numpy(), r1.numpy(), atol=3e-5, rtol=1e-4)
                r2 = (r1 + ffn - (r1 + ffn).mean()) / s2 * g2 + n2.bias.double()
                np.testing.assert_allclose(rest2[b, i].numpy(), r2.numpy(), atol=3e-5, rtol=1e-4)


# --- norms, rollout, chunks, errors --------------------------------------------------------------------
def _numpy_rollout(norms):
    out = np.zeros_like(norms)
    for b in range(norms.shape[0]):
        R = norms[b, 0]
        out[b, 0] = R
        for layer in range(1, norms.shape[1]):
            R = norms[b, layer] @ R
            out[b, layer] = R
    return out


@pytest.mark.parametrize("family", ["tiny", "bert"])
def test_norms_rollout_and_cls_rows(family, request):
    if family == "tiny":
        model, batch, _ = request.getfixturevalue("tiny")
    else:
        model, batch = request.getfixturevalue("bert")
    trace = model.trace(batch)
    L = trace.n_layers
    for upto in ("attention", "layer"):
        norms = ge.decomposition_norms(model, batch, upto=upto)
        assert norms.shape == (len(trace), L, *trace.attentions.shape[-2:])
        for index in range(L):
            vectors, _ = model.layer_decomposition(index, trace.hidden_states[:, index], trace.tokens,
                                                   trace.key_mask, upto=upto)
            torch.testing.assert_close(norms[:, index], vectors.norm(dim=-1), atol=1e-6, rtol=1e-6)
            assert torch.equal(ge.decomposition_norms(model, batch, upto=upto, layer=index - L), norms[:, index])
        # chunked (one sentence per call) = unchunked, bit for bit
        assert torch.equal(ge.decomposition_norms(model, batch, upto=upto, sentences_per_chunk=1), norms)
        for b, n in enumerate(trace.lengths.tolist()):
            assert not norms[b, :, n:].any() and not norms[b, :, :, n:].any()
    assert torch.equal(ge.norm_residual_ln_cls(model, batch),
                       ge.decomposition_norms(model, batch, upto="attention")[:, -1, 0])
    enc = ge.decomposition_norms(model, batch, upto="layer")
    rolled = ge.globenc(model, batch)
    np.testing.assert_allclose(rolled.numpy(), _numpy_rollout(enc.double().numpy()), rtol=1e-5)
    assert torch.equal(ge.globenc_cls(model, batch), rolled[:, -1, 0])
    shares = ge.globenc_rollout(enc, normalise=True)
    rows = enc.double().numpy()
    rows = rows / np.where(rows.sum(-1, keepdims=True) > 0, rows.sum(-1, keepdims=True), 1)
    np.testing.assert_allclose(shares.numpy(), _numpy_rollout(rows), rtol=1e-5, atol=1e-7)
    for b, n in enumerate(trace.lengths.tolist()):
        np.testing.assert_allclose(shares[b, -1, :n].sum(-1).numpy(), 1.0, atol=1e-5)  # products of stochastic rows
        assert not rolled[b, :, n:].any() and not rolled[b, :, :, n:].any()


def test_bad_input_is_refused_clearly(tiny, tiny_dataset):
    from attnlib.models import AttentionClassifier, ModelConfig

    model, tokens, _ = tiny
    with pytest.raises(ValueError, match="upto must be one of"):
        ge.decomposition_norms(model, tokens, upto="ffn")
    with pytest.raises(ValueError, match="layer must be an int in -2 .. 1"):
        ge.decomposition_norms(model, tokens, layer=2)
    with pytest.raises(ValueError, match="sentences_per_chunk"):
        ge.decomposition_norms(model, tokens, sentences_per_chunk=0)
    with pytest.raises(ValueError, match="upto must be one of"):
        model.layer_decomposition(0, torch.zeros(1, 9, 8), tokens[:1], tokens[:1] != 0, upto="all")
    with pytest.raises(ValueError, match="layer must be an int in 0 .. 1"):
        model.layer_decomposition(-1, torch.zeros(1, 9, 8), tokens[:1], tokens[:1] != 0)
    with pytest.raises(ValueError, match=r"\(B, L, T, T\)"):
        ge.globenc_rollout(torch.ones(2, 3, 3))
    with pytest.raises(ValueError, match="non-negative"):
        ge.globenc_rollout(-torch.ones(1, 2, 3, 3))
    with pytest.raises(ValueError, match="normalise must be True or False"):
        ge.globenc_rollout(torch.ones(1, 2, 3, 3), normalise=1)
    lstm = AttentionClassifier(len(tiny_dataset.vocab), ModelConfig(encoder="lstm"))
    with pytest.raises(ValueError, match="needs a model with a layer's output split"):
        ge.globenc_cls(lstm, tiny_dataset.test.batch(range(3)))


# --- registered explanations ---------------------------------------------------------------------------
def test_the_methods_are_registered_run_on_both_families_and_not_on_the_bilstm(transformer, bert, tiny_dataset):
    from attnlib.experiments.explanations import PART_V_METHODS, REGISTRY, applies, explain
    from attnlib.models import AttentionClassifier, ModelConfig

    names = ["norm + residual + LN", "GlobEnc"]
    assert PART_V_METHODS[-2:] == tuple(names)
    assert all(REGISTRY[m].needs == "decomposition" and not REGISTRY[m].by_default for m in names)
    lstm = AttentionClassifier(len(tiny_dataset.vocab), ModelConfig(encoder="lstm"))
    assert not any(applies(lstm, m) for m in names)
    clf, batch = bert
    split = tiny_dataset.test.subset(np.arange(6))
    for model, data, want in ((transformer, split, ge.globenc_cls(transformer, split.batch(range(6)))),
                              (clf, batch, ge.globenc_cls(clf, batch))):
        assert all(applies(model, m) for m in names)
        result = explain(model, data, methods=names)
        assert result.methods == tuple(names)
        for m in names:
            for scores, n in zip(result.scores[m], result.lengths):
                assert len(scores) == n and np.isfinite(scores).all() and (scores >= 0).all()
                assert scores.sum() == pytest.approx(1.0)  # shares of the words
        # GlobEnc's scores are its [CLS] row over the words, as shares
        for k, (scores, index) in enumerate(zip(result.scores["GlobEnc"], result.indices)):
            row = want[int(index)].double().numpy()[1:1 + len(scores)]
            np.testing.assert_allclose(scores, row / row.sum(), rtol=1e-5)
