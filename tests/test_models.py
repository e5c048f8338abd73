"""attnlib.models: encode / attend / decode, the hooks later chapters rely on, and validation."""
import numpy as np
import pytest
import torch

from attnlib.data import EOS, PAD, SOS
from attnlib.models import (
    AttentionClassifier,
    ModelConfig,
    masked_softmax,
    real_token_mask,
    uniform_attention,
)

VOCAB = 40


def make_tokens(lengths, seed=0):
    """Token ids <SOS> w... <EOS> PAD..., real words drawn from ids 4..VOCAB-1."""
    g = torch.Generator().manual_seed(seed)
    T = max(lengths) + 2
    tokens = torch.full((len(lengths), T), PAD, dtype=torch.long)
    for i, n in enumerate(lengths):
        tokens[i, 0] = SOS
        tokens[i, 1 : n + 1] = torch.randint(4, VOCAB, (n,), generator=g)
        tokens[i, n + 1] = EOS
    return tokens


ALL_CONFIGS = [ModelConfig(encoder=e, attention=a) for e in ("lstm", "cnn", "average") for a in ("tanh", "dot", "uniform")]


@pytest.fixture(params=ALL_CONFIGS, ids=lambda c: c.name)
def model(request):
    torch.manual_seed(0)
    return AttentionClassifier(VOCAB, request.param).eval()


def test_forward_shapes_and_attention_is_a_masked_distribution(model):
    tokens = make_tokens([5, 3, 8])
    out = model(tokens)
    B, T = tokens.shape
    assert out.probs.shape == (B, 2)
    assert torch.allclose(out.probs.sum(-1), torch.ones(B))
    assert out.encoded.hidden.shape == (B, T, model.config.hidden_size)
    mask = real_token_mask(tokens)
    assert torch.all(out.attention[~mask] == 0)
    assert torch.allclose(out.attention.sum(-1), torch.ones(B, dtype=out.attention.dtype))
    assert mask.sum(-1).tolist() == [5, 3, 8]


def test_padding_does_not_change_the_output(model):
    """An instance gives the same output alone and padded inside a longer batch."""
    tokens = make_tokens([4, 9])
    alone = model(tokens[:1, :6])
    batched = model(tokens)
    assert torch.allclose(alone.probs[0], batched.probs[0], atol=1e-5)
    assert torch.allclose(alone.attention[0], batched.attention[0, :6], atol=1e-5)


def test_decode_with_given_attention_and_candidates(model):
    tokens = make_tokens([5, 7])
    out = model(tokens)
    again, _ = model.decode(out.encoded.hidden, out.attention)
    assert torch.allclose(again, out.probs)
    K = 3
    cands = torch.stack([out.attention, uniform_attention(out.encoded.mask), out.attention.flip(-1) * 0], 1)
    cands[:, 2] = uniform_attention(out.encoded.mask)
    probs, logits = model.decode(out.encoded.hidden, cands)  # (B, K, C)
    assert probs.shape == (2, K, 2)
    assert torch.allclose(probs[:, 0], out.probs)
    given = model(tokens, attention=cands)
    assert given.probs.shape == (2, K, 2)


def test_uniform_attention_override_equals_uniform_model():
    torch.manual_seed(0)
    learned = AttentionClassifier(VOCAB, ModelConfig(attention="tanh"))
    uniform = AttentionClassifier(VOCAB, ModelConfig(attention="uniform"))
    uniform.load_state_dict({k: v for k, v in learned.state_dict().items() if not k.startswith("attention.")})
    tokens = make_tokens([3, 6, 2])
    mask = real_token_mask(tokens)
    a = learned(tokens, attention=uniform_attention(mask))
    b = uniform(tokens)
    assert torch.allclose(a.probs, b.probs, atol=1e-6)
    assert torch.allclose(b.attention, mask.float() / mask.sum(-1, keepdim=True))


def test_detach_attention_cuts_the_gradient_through_alpha():
    torch.manual_seed(0)
    model = AttentionClassifier(VOCAB, ModelConfig(encoder="lstm", attention="tanh"))
    tokens = make_tokens([6])
    out = model(tokens, detach_attention=True)
    out.probs[0, 1].backward()
    assert all(p.grad is None or torch.all(p.grad == 0) for p in model.attention_parameters())
    model.zero_grad()
    out = model(tokens)
    out.probs[0, 1].backward()
    assert any(p.grad is not None and torch.any(p.grad != 0) for p in model.attention_parameters())


def test_encode_accepts_given_embeddings_for_gradients():
    torch.manual_seed(0)
    model = AttentionClassifier(VOCAB, ModelConfig(encoder="cnn", attention="dot"))
    tokens = make_tokens([4])
    emb = model.embedding(tokens).detach().requires_grad_(True)
    enc = model.encode(tokens, embedded=emb)
    probs, _ = model.decode(enc.hidden, model.attend(enc).detach())
    probs[0, 1].backward()
    assert emb.grad is not None and emb.grad.shape == emb.shape


def test_average_encoder_has_no_context():
    """Changing one token changes only that token's hidden state for the average encoder."""
    torch.manual_seed(0)
    model = AttentionClassifier(VOCAB, ModelConfig(encoder="average"))
    a = make_tokens([5])
    b = a.clone()
    b[0, 3] = 4 if a[0, 3] != 4 else 5
    ha, hb = model.encode(a).hidden, model.encode(b).hidden
    changed = (ha - hb).abs().sum(-1)[0] > 0
    assert changed.tolist() == [False, False, False, True, False, False, False]


def test_glove_embeddings_are_loaded_and_pad_is_zero():
    emb = np.random.default_rng(0).normal(size=(VOCAB, 50)).astype(np.float32)
    model = AttentionClassifier(VOCAB, ModelConfig(), embeddings=emb)
    assert torch.allclose(model.embedding.weight[5], torch.tensor(emb[5]))
    assert torch.all(model.embedding.weight[PAD] == 0)


def test_multiclass_head():
    model = AttentionClassifier(VOCAB, ModelConfig(n_classes=4))
    out = model(make_tokens([3, 4]))
    assert out.probs.shape == (2, 4) and torch.allclose(out.probs.sum(-1), torch.ones(2))


def test_masked_softmax_is_stable_and_exact_zero():
    scores = torch.tensor([[1000.0, 1001.0, 5.0]])
    mask = torch.tensor([[True, True, False]])
    a = masked_softmax(scores, mask)
    assert torch.isfinite(a).all() and a[0, 2] == 0 and torch.isclose(a.sum(), torch.tensor(1.0))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"encoder": "gru"}, "unknown encoder"),
        ({"attention": "softmax"}, "unknown attention"),
        ({"hidden": 0}, "hidden"),
        ({"n_classes": 1}, "n_classes"),
    ],
)
def test_bad_config(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig(**kwargs)


def test_bad_inputs_raise_clear_errors():
    model = AttentionClassifier(VOCAB, ModelConfig())
    tokens = make_tokens([3, 4])
    with pytest.raises(ValueError, match="shape"):
        model(tokens, attention=torch.ones(2, 3))
    with pytest.raises(ValueError, match="sum to 1"):
        model(tokens, attention=real_token_mask(tokens).float())
    bad = uniform_attention(real_token_mask(tokens))
    bad[:, 0] = 0.1  # weight on <SOS>
    bad = bad / bad.sum(-1, keepdim=True)
    with pytest.raises(ValueError, match="SOS"):
        model(tokens, attention=bad)
    empty = torch.tensor([[SOS, EOS, PAD]])
    with pytest.raises(ValueError, match="at least one real token"):
        model(empty)
    with pytest.raises(ValueError, match="LongTensor"):
        model(tokens.float())
    with pytest.raises(ValueError, match="embeddings must have shape"):
        AttentionClassifier(VOCAB, ModelConfig(), embeddings=np.zeros((3, 50)))


@pytest.mark.parametrize("n_classes", [2, 4])
def test_candidate_decode_equals_one_decode_per_candidate(n_classes):
    """The (B, K, T) path (multiply-and-sum for one logit, einsum for several) is K separate decodes."""
    torch.manual_seed(1)
    m = AttentionClassifier(VOCAB, ModelConfig(n_classes=n_classes)).eval()
    out = m(make_tokens([6, 9, 4]))
    g = torch.Generator().manual_seed(2)
    cands = torch.softmax(torch.randn(3, 5, out.attention.shape[1], generator=g).masked_fill(~out.encoded.mask[:, None], -torch.inf), -1)
    probs, logits = m.decode(out.encoded.hidden, cands)
    for k in range(5):
        p_k, l_k = m.decode(out.encoded.hidden, cands[:, k])
        assert torch.allclose(probs[:, k], p_k, atol=1e-6) and torch.allclose(logits[:, k], l_k, atol=1e-5)


# ----------------------------------------------------------------------------- packed BiLSTM
def _packed_run(lstm, lengths, T, dtype, run, mkldnn):
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    lstm.zero_grad()
    gen = torch.Generator().manual_seed(int(lengths.sum()))
    emb = torch.randn(len(lengths), T, lstm.input_size, dtype=dtype, generator=gen).requires_grad_()
    head = torch.randn(2 * lstm.hidden_size, dtype=dtype, generator=gen)
    with torch.backends.mkldnn.flags(enabled=mkldnn):
        packed = pack_padded_sequence(emb, lengths, batch_first=True, enforce_sorted=False)
        hidden, _ = pad_packed_sequence(run(packed), batch_first=True, total_length=T)
        (hidden.tanh() @ head).sum().backward()
    return [hidden.detach(), emb.grad] + [p.grad.clone() for p in lstm.parameters()]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("mkldnn", [False, True])
@pytest.mark.parametrize("lengths", [[7, 7, 7], [9, 3, 5, 1, 9, 2], [1], [12, 4, 4, 11, 1, 6, 8, 12]])
def test_packed_bilstm_gives_nn_lstms_bits_forward_and_backward(dtype, mkldnn, lengths, monkeypatch):
    """The O(T)-backward BiLSTM (where attnlib's portable LSTM is off or does not apply) is nn.LSTM
    to the bit: outputs, input and all parameter gradients."""
    from attnlib import portable
    from attnlib.models.packed_lstm import applies, packed_bilstm

    monkeypatch.setenv(portable.CHAINS_ENV, "0")
    torch.manual_seed(len(lengths))
    lstm = torch.nn.LSTM(5, 6, batch_first=True, bidirectional=True).to(dtype)
    lengths = torch.tensor(lengths)
    T = int(lengths.max()) + 1
    ours = _packed_run(lstm, lengths, T, dtype, lambda p: packed_bilstm(lstm, p), mkldnn)
    theirs = _packed_run(lstm, lengths, T, dtype, lambda p: lstm(p)[0], mkldnn)
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs))  # with oneDNN on, nn.LSTM runs itself
    with torch.no_grad():  # no gradients: nn.LSTM runs as it is
        from torch.nn.utils.rnn import pack_padded_sequence
        packed = pack_padded_sequence(torch.zeros(len(lengths), T, 5, dtype=dtype), lengths, batch_first=True,
                                      enforce_sorted=False)
        assert not applies(lstm, packed)


def test_packed_bilstm_leaves_other_lstms_to_nn_lstm():
    from torch.nn.utils.rnn import pack_padded_sequence

    from attnlib.models.packed_lstm import applies, packed_bilstm

    packed = pack_padded_sequence(torch.randn(2, 4, 3), torch.tensor([4, 2]), batch_first=True)
    for lstm in (torch.nn.LSTM(3, 2, bidirectional=True, num_layers=2), torch.nn.LSTM(3, 2),
                 torch.nn.LSTM(3, 2, bidirectional=True, bias=False)):
        assert not applies(lstm, packed)
        assert torch.equal(packed_bilstm(lstm, packed).data, lstm(packed)[0].data)
    assert applies(torch.nn.LSTM(3, 2, bidirectional=True), packed)
