"""Part V's value zeroing and gradient-weighted attention relevance, each against an independent
computation: value zeroing against a loop that zeroes one value vector at a time (through a hook
on the layer's own value projection, not through ``layer_output``) and reruns the layer; Chefer's
relevance against a loop that takes each head's gradient alone and accumulates the layers by hand."""
import numpy as np
import pytest
import torch

from attnlib.experiments import attention_relevance as ar
from attnlib.experiments import value_zeroing as vz
from attnlib.models import Site


@pytest.fixture(scope="module")
def tiny(scaled_transformer):
    return scaled_transformer()


def _loop_value_zeroing(model, tokens, lengths):
    """For each sentence, layer and token j: zero j's value vector (a hook on the layer's qkv output
    zeroes the value third at row j), rerun that layer alone on its original input, and take the cosine
    distance of every token's output; rows then divided by their sums."""
    trace = model.trace(tokens)
    hidden = trace.hidden_states
    B, L = len(tokens), len(model.layers)
    d = model.config.d_model
    out = np.zeros((B, L, tokens.shape[1], tokens.shape[1]))
    for b in range(B):
        n = int(lengths[b])
        x = hidden[b:b + 1, :, :n]
        visible = model.visibility(tokens[b:b + 1, :n], torch.ones(1, n, dtype=torch.bool))
        for layer_index, layer in enumerate(model.layers):
            for j in range(n):
                def zero_value(module, args, output, j=j):
                    output = output.clone()
                    output[:, j, 2 * d:] = 0  # q | k | v: the value third of row j
                    return output
                handle = layer.qkv.register_forward_hook(zero_value)
                try:
                    with torch.no_grad():
                        probs, v = layer.attend(x[:, layer_index], visible)
                        new = layer.finish(x[:, layer_index], probs, v)
                finally:
                    handle.remove()
                original = x[:, layer_index + 1]
                cos = torch.nn.functional.cosine_similarity(new, original, dim=-1)[0]
                out[b, layer_index, :n, j] = (1 - cos).numpy()
            row = out[b, layer_index, :n, :n]
            out[b, layer_index, :n, :n] = row / row.sum(-1, keepdims=True)
    return out


def test_value_zeroing_matches_a_loop_that_zeroes_one_value_vector_at_a_time(tiny):
    model, tokens, lengths = tiny
    got = vz.value_zeroing(model, tokens).numpy()
    want = _loop_value_zeroing(model, tokens, lengths)
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-4)
    for b, n in enumerate(lengths.tolist()):
        np.testing.assert_allclose(got[b, :, :n, :n].sum(-1), 1.0, atol=1e-5)  # rows are shares
        assert not got[b, :, n:].any() and not got[b, :, :, n:].any()  # padding is 0
    # chunking the (sentence, token) rows changes nothing
    np.testing.assert_allclose(vz.value_zeroing(model, tokens, rows_per_call=5).numpy(), got, atol=1e-6)


def test_value_zeroing_rollout_and_its_cls_row(tiny):
    model, tokens, lengths = tiny
    scores = vz.value_zeroing(model, tokens)
    rolled = vz.value_zeroing_rollout(scores)
    np.testing.assert_allclose(rolled[:, 1].numpy(), (scores[:, 1] @ scores[:, 0]).numpy(), atol=1e-6)
    cls = vz.value_zeroing_cls(model, tokens)
    np.testing.assert_allclose(cls.numpy(), rolled[:, -1, 0].numpy(), atol=1e-7)
    with pytest.raises(ValueError, match=r"\(B, L, T, T\)"):
        vz.value_zeroing_rollout(scores[0])


def test_value_zeroing_and_relevance_refuse_a_model_without_layers(tiny_dataset):
    from attnlib.models import AttentionClassifier, ModelConfig

    lstm = AttentionClassifier(len(tiny_dataset.vocab), ModelConfig(encoder="lstm"))
    batch = tiny_dataset.test.batch(range(3))
    with pytest.raises(ValueError, match="value zeroing needs a model with"):
        vz.value_zeroing(lstm, batch)
    with pytest.raises(ValueError, match="gradient-weighted attention relevance needs a model with"):
        ar.attention_relevance(lstm, batch)


def _loop_relevance(model, tokens):
    """Chefer's rule with every head's gradient taken alone (a fresh forward pass per head), and R
    accumulated layer by layer in NumPy."""
    L, H = len(model.layers), model.config.heads
    B, T = tokens.shape
    grads = np.zeros((B, L, H, T, T))
    attention = np.zeros((B, L, H, T, T))
    for layer in range(L):
        for head in range(H):
            kept = {}

            def edit(rows, key_mask):
                rows = rows.clone()
                kept["rows"] = rows
                return rows

            with torch.enable_grad():
                out = model(tokens, edits={Site(layer, head): edit})
                score = ar.explained_logit(out.logits, out.probs)
                (g,) = torch.autograd.grad(score.sum(), [kept["rows"]])
            grads[:, layer, head] = g.numpy()
            attention[:, layer, head] = kept["rows"].detach().numpy()
    relevance = np.zeros((B, T, T))
    for b in range(B):
        R = np.eye(T)
        for layer in range(L):
            cam = np.maximum(grads[b, layer] * attention[b, layer], 0).mean(0)
            R = R + cam @ R
        relevance[b] = R
    return relevance


def test_relevance_matches_one_head_at_a_time_and_a_loop_over_layers(tiny):
    model, tokens, lengths = tiny
    got = ar.attention_relevance(model, tokens).numpy()
    np.testing.assert_allclose(got, _loop_relevance(model, tokens), atol=1e-5, rtol=1e-4)
    cls = ar.relevance_cls(model, tokens).numpy()
    assert (cls[:, 0] == 0).all() and np.allclose(cls[:, 1:], got[:, 0, 1:])
    for b, n in enumerate(lengths.tolist()):
        assert not cls[b, n:].any()  # no relevance reaches padding
        assert (cls[b, 1:n] >= 0).all()


def test_explained_logit_for_one_and_for_several_logits():
    z = torch.tensor([[2.0], [-1.0]])
    probs = torch.cat([1 - torch.sigmoid(z), torch.sigmoid(z)], -1)
    assert ar.explained_logit(z, probs).tolist() == [2.0, 1.0]
    logits = torch.tensor([[0.1, 0.7, 0.2]])
    assert ar.explained_logit(logits, logits.softmax(-1)).tolist() == [pytest.approx(0.7)]


def test_value_zeroing_on_a_checkpoint_matches_hugging_faces_own_layer(tiny_bert_checkpoint):
    """On a BERT checkpoint the loop runs each layer through transformers' own code (outside attnlib's
    attention function), a forward hook zeroing row j of the layer's value projection."""
    from attnlib.models import PretrainedClassifier

    clf = PretrainedClassifier(str(tiny_bert_checkpoint)).eval()
    batch = clf.encode_texts(["a good film", "a very long and boring plot , sadly"])
    got = vz.value_zeroing(clf, batch).numpy()
    trace = clf.trace(batch)
    for b, n in enumerate(trace.lengths.tolist()):
        for index, layer in enumerate(clf.layers):
            want = np.zeros((n, n))
            for j in range(n):
                def zero_value(module, args, output, j=j):
                    output = output.clone()
                    output[:, j] = 0
                    return output
                handle = layer.attention.self.value.register_forward_hook(zero_value)
                try:
                    with torch.no_grad():
                        new = layer(trace.hidden_states[b:b + 1, index, :n])
                finally:
                    handle.remove()
                new = new[0] if isinstance(new, tuple) else new
                cos = torch.nn.functional.cosine_similarity(new, trace.hidden_states[b:b + 1, index + 1, :n], dim=-1)
                want[:, j] = (1 - cos[0]).numpy()
            want /= want.sum(-1, keepdims=True)
            np.testing.assert_allclose(got[b, index, :n, :n], want, atol=2e-4)


def test_relevance_on_a_checkpoint_matches_one_head_at_a_time(tiny_bert_checkpoint):
    from attnlib.models import PretrainedClassifier

    clf = PretrainedClassifier(str(tiny_bert_checkpoint)).eval()
    batch = clf.encode_texts(["a good film", "a very long and boring plot , sadly"])
    np.testing.assert_allclose(ar.attention_relevance(clf, batch).numpy(), _loop_relevance(clf, batch.tokens),
                               atol=1e-5, rtol=1e-4)


def test_relevance_in_passes_of_a_few_tokens_changes_nothing(tiny, monkeypatch):
    model, tokens, _ = tiny
    whole = ar.relevance_cls(model, tokens)
    monkeypatch.setattr(ar, "PASS_TOKENS", 10)  # one sentence of 9 positions per pass
    np.testing.assert_allclose(ar.relevance_cls(model, tokens).numpy(), whole.numpy(), atol=1e-6)
