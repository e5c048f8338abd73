"""Code moved out of Chapters 12-14 into the experiments (helper E): attnlib.flow.rollout_words."""
import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib import flow
from attnlib.data import Split, Vocabulary
from attnlib.models import TransformerClassifier, TransformerConfig

CONFIG = TransformerConfig(layers=2, heads=2, head_dim=4, embed_dim=6, dropout=0.0)
WORDS = [f"w{i}" for i in range(20)]


def _split(lengths, seed=0):
    rng = np.random.default_rng(seed)
    tokens = [[WORDS[j] for j in rng.integers(0, len(WORDS), n)] for n in lengths]
    vocab = Vocabulary.from_documents([WORDS])
    return Split("s", [" ".join(t) for t in tokens], tokens, vocab.encode_many(tokens),
                 np.arange(len(tokens)) % 2), len(vocab)


def _model(vocab, seed=0, layers=2):
    torch.manual_seed(seed)
    model = TransformerClassifier(vocab, dataclasses.replace(CONFIG, layers=layers)).eval()
    with torch.no_grad():  # sharper attention than a fresh init gives
        for layer in model.layers:
            layer.qkv.weight.mul_(4.0)
    return model


def _one_by_one(model, split, index, residual=flow.RESIDUAL):
    """The oracle: one unpadded sentence, the full rollout, its last layer's row 0, cut to the words."""
    batch = split.batch([index])
    with torch.no_grad():
        trace = model.trace(batch)
    full = flow.rollout(trace.attentions, trace.key_mask, residual=residual)[0, -1, 0]
    n = int(batch.lengths[0])
    return full[1 : n - 1].numpy()


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(1, 12), min_size=1, max_size=5), st.integers(0, 3),
       st.sampled_from([0.0, 0.5, 0.9]), st.integers(1, 3))
def test_rollout_words_is_each_sentences_rollout_cut_to_its_words(lengths, seed, residual, layers):
    split, vocab = _split(lengths, seed)
    model = _model(vocab, seed, layers)
    order = np.random.default_rng(seed).permutation(len(lengths))
    got = flow.rollout_words(model, split, order, residual=residual)
    assert len(got) == len(order)
    for words, index in zip(got, order):
        assert words.shape == (lengths[index],)  # aligned with the sentence's tokens
        np.testing.assert_allclose(words, _one_by_one(model, split, index, residual), rtol=1e-5, atol=1e-6)
        assert np.all(words >= 0) and words.sum() < 1 + 1e-6  # a distribution's part: [CLS], [SEP] cut


def test_rollout_words_is_not_renormalised_and_uses_the_residual():
    split, vocab = _split([5, 9, 3])
    model = _model(vocab)
    half = flow.rollout_words(model, split, [0, 1, 2])
    assert all(w.sum() < 1 - 1e-3 for w in half)  # [CLS] keeps part of the row
    other = flow.rollout_words(model, split, [0, 1, 2], residual=0.1)
    assert not np.allclose(half[1], other[1])


def test_rollout_words_errors():
    split, vocab = _split([4, 5])
    model = _model(vocab)
    with pytest.raises(ValueError, match="trace"):
        flow.rollout_words(object(), split, [0])
    with pytest.raises(ValueError, match="Split"):
        flow.rollout_words(model, [1, 2], [0])
    with pytest.raises(ValueError, match="at least one"):
        flow.rollout_words(model, split, [])
    with pytest.raises(ValueError, match="residual"):
        flow.rollout_words(model, split, [0], residual=1.0)
