"""Experiments give the same bits on one thread as on two.

A chapter's kernel takes the threads the machine grants (:func:`attnlib.cpu.available_cores`, or
``ATTNLIB_THREADS``): a reader's Colab kernel two, a laptop's more, a quota-limited container
fewer: the committed outputs must not depend on it. Training already runs on one thread (``attnlib.train.TRAIN_THREADS``); this checks
inference at the book's model sizes, where torch splits the GEMMs and the LSTM across threads.
"""
from __future__ import annotations

import pytest
import torch

from attnlib.models import ModelConfig, TransformerConfig


def _tokens(vocab: int, batch: int, length: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, vocab, (batch, length), generator=g)
    ids[:, 0] = 2  # <SOS>
    lengths = torch.randint(length // 2, length + 1, (batch,), generator=g)
    ids[torch.arange(length)[None] >= lengths[:, None]] = 0  # padding
    ids[torch.arange(batch), lengths - 1] = 3  # <EOS>
    return ids


def _outputs_on_one_and_two_threads(model, tokens):
    """((probs, attention) on one thread, the same on two threads)."""

    def run():
        with torch.no_grad():
            out = model(tokens)
        return out.probs.clone(), out.attention.clone()

    return _on_threads(1, run), _on_threads(2, run)


def _on_threads(n: int, fn):
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        return fn()
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("family", ["transformer", "lstm"])
def test_inference_is_the_same_on_one_and_two_threads(family):
    # the BiLSTM's recurrence is attnlib's portable LSTM, whose bits do not depend on threads
    torch.manual_seed(0)
    vocab = 5000
    if family == "transformer":
        model = TransformerConfig(layers=4, heads=4, head_dim=32).build(vocab).eval()
    else:
        model = ModelConfig(encoder="lstm", attention="tanh").build(vocab).eval()
    one, two = _outputs_on_one_and_two_threads(model, _tokens(vocab, 128, 40))
    assert torch.equal(one[0], two[0]) and torch.equal(one[1], two[1])


def test_atens_lstm_inference_on_one_and_two_threads_differs_only_in_the_last_bits(monkeypatch):
    # with attnlib's kernel off, ATen's CPU LSTM splits its work across threads: its hidden states
    # differ in the last bit (about 6e-8) between one and two threads
    from attnlib import portable

    monkeypatch.setenv(portable.CHAINS_ENV, "0")
    torch.manual_seed(0)
    vocab = 5000
    model = ModelConfig(encoder="lstm", attention="tanh").build(vocab).eval()
    one, two = _outputs_on_one_and_two_threads(model, _tokens(vocab, 128, 40))
    for a, b in zip(one, two):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
