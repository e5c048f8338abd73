"""attnlib.experiments.norm_attention against its definition, computed from a tiny model's weights."""
import pytest
import torch

from attnlib.experiments import norm_attention as N
from attnlib.models import Trace, TransformerClassifier, TransformerConfig


@pytest.fixture(scope="module")
def traced():
    torch.manual_seed(0)
    model = TransformerClassifier(30, TransformerConfig(layers=2, heads=3, head_dim=4, embed_dim=6, dropout=0.0))
    model.eval()
    tokens = torch.tensor([[2, 7, 9, 11, 3, 0], [2, 5, 3, 0, 0, 0], [2, 8, 8, 12, 13, 3]])
    return model, tokens, model.trace(tokens)


def _by_hand(model, trace, b, layer):
    """alpha^h_ij (LN(x_j) W^V_h + b^V_h) W^O_h for every head h, query i and key j, from the weights:
    (h, T, T, d_model), an explicit loop over heads and keys."""
    block = model.layers[layer]
    d, dv, H = model.config.d_model, model.config.head_dim, model.config.heads
    x = block.norm1(trace.hidden_states[b, layer])  # the layer's input, layer-normed: (T, d)
    w_v, b_v = block.qkv.weight[2 * d:], block.qkv.bias[2 * d:]
    w_o = block.out.weight  # out(y) = y @ w_o.T + b_o
    T = x.shape[0]
    out = torch.zeros(H, T, T, d, dtype=torch.float64)
    for h in range(H):
        for j in range(T):
            if not trace.key_mask[b, j]:
                continue
            v = (x[j].double() @ w_v[h * dv:(h + 1) * dv].double().T) + b_v[h * dv:(h + 1) * dv].double()
            f = v @ w_o[:, h * dv:(h + 1) * dv].double().T  # f_h(x_j): (d,)
            for i in range(T):
                out[h, i, j] = trace.attentions[b, layer, h, i, j].double() * f
    return out


def test_each_heads_norm_is_the_norm_of_what_it_sends(traced):
    model, tokens, trace = traced
    each = N.norm_attention(trace, heads="each")
    assert each.shape == trace.attentions.shape
    with torch.no_grad():
        for b in range(len(tokens)):
            for layer in range(model.config.layers):
                sent = _by_hand(model, trace, b, layer)
                assert torch.allclose(each[b, layer].double(), sent.norm(dim=-1), atol=1e-5)


def test_the_layers_norm_is_the_norm_of_the_heads_sum(traced):
    model, tokens, trace = traced
    total = N.norm_attention(trace, heads="sum")
    assert total.shape == (len(tokens), model.config.layers, tokens.shape[1], tokens.shape[1])
    with torch.no_grad():
        for b in range(len(tokens)):
            for layer in range(model.config.layers):
                sent = _by_hand(model, trace, b, layer).sum(0)
                assert torch.allclose(total[b, layer].double(), sent.norm(dim=-1), atol=1e-5)
    # heads that send opposite vectors cancel: the sum's norm is at most the sum of the norms
    assert bool((total <= N.norm_attention(trace, heads="each").sum(2) + 1e-5).all())


def test_padding_is_zero_and_chunks_change_nothing(traced, monkeypatch):
    model, tokens, trace = traced
    total = N.norm_attention(trace, heads="sum")
    pad = ~trace.key_mask
    assert bool((total[1][:, pad[1]] == 0).all()) and bool((total[1][:, :, pad[1]] == 0).all())
    monkeypatch.setattr(N, "_CHUNK_ELEMENTS", 1)  # one sentence at a time
    assert torch.equal(N.norm_attention(trace, heads="sum"), total)


def test_bad_input_is_refused_clearly(traced):
    _, _, trace = traced
    with pytest.raises(ValueError, match="heads must be one of"):
        N.norm_attention(trace, heads="mean")
    with pytest.raises(ValueError, match="model.trace"):
        N.norm_attention(trace.attentions)
    assert isinstance(trace, Trace)


def test_one_layer_alone_is_that_layers_slice_of_all(traced):
    trace = traced[2]
    for heads in ("each", "sum"):
        every = N.norm_attention(trace, heads=heads)
        for layer in (0, -1):
            torch.testing.assert_close(N.norm_attention(trace, heads=heads, layer=layer), every[:, layer], rtol=0, atol=0)
    with pytest.raises(ValueError, match="layer must be an int"):
        N.norm_attention(trace, layer=trace.attentions.shape[1])
