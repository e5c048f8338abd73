"""The synthetic task's negation variant (Chapter 15): labels from effective polarities, negators in the rationale."""
import hashlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib import data, train
from attnlib.data.synthetic import (
    DISTRACTORS,
    MARKER_POLARITY,
    NEGATORS,
    effective_polarity,
    make_synthetic,
)


def fingerprint(d) -> str:
    return hashlib.sha256(
        repr((d.texts, d.labels.tolist(), [r.tolist() for r in d.rationales])).encode()
    ).hexdigest()


def test_without_negation_the_data_are_those_of_the_plain_task():
    # sha256 of the data the generator gave before the negation variant existed (cached models depend on them)
    assert fingerprint(make_synthetic(n=300, seed=0)).startswith("3c7eff5b63691018")
    assert fingerprint(make_synthetic(n=300, min_len=5, max_len=60, max_majority=2, seed=3)).startswith(
        "c68c349f220b66f6")
    assert fingerprint(make_synthetic(n=300, seed=0, negation=0.0)) == fingerprint(make_synthetic(n=300, seed=0))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 60), min_len=st.integers(10, 20), extra=st.integers(0, 30), max_majority=st.integers(1, 3),
       negation=st.floats(0.01, 1.0), seed=st.integers(0, 10_000))
def test_labels_rationales_and_negators(n, min_len, extra, max_majority, negation, seed):
    d = make_synthetic(n, min_len=min_len, max_len=min_len + extra, max_majority=max_majority, negation=negation,
                       seed=seed)
    assert (d.labels == 1).sum() == n // 2  # balanced
    for toks, y, rationale in zip(d.tokens, d.labels, d.rationales):
        assert min_len <= len(toks) <= min_len + extra
        polarity = effective_polarity(toks)
        assert np.sign(polarity.sum()) == (1 if y == 1 else -1)  # a majority, never a tie
        is_neg = np.isin(toks, NEGATORS)
        np.testing.assert_array_equal(rationale, (polarity != 0) | is_neg)
        for t in np.flatnonzero(is_neg):  # a negator always stands right before a marker
            assert t + 1 < len(toks) and toks[t + 1] in MARKER_POLARITY
        assert set(toks) <= set(DISTRACTORS) | set(MARKER_POLARITY) | set(NEGATORS)


def test_negation_rate_and_its_extremes():
    d = make_synthetic(4000, min_len=10, max_len=60, negation=0.3, seed=0)
    markers = sum(int(np.isin(t, list(MARKER_POLARITY)).sum()) for t in d.tokens)
    negators = sum(int(np.isin(t, NEGATORS).sum()) for t in d.tokens)
    assert 0.27 < negators / markers < 0.33
    everything = make_synthetic(200, negation=1.0, seed=1, min_len=10)
    for t in everything.tokens:
        assert np.isin(t, NEGATORS).sum() == np.isin(t, list(MARKER_POLARITY)).sum()
    assert make_synthetic(50, negation=0.5, seed=2).texts == make_synthetic(50, negation=0.5, seed=2).texts


def test_effective_polarity():
    np.testing.assert_array_equal(effective_polarity(["not", "excellent", "table", "awful", "never", "awful"]),
                                  [0, -1, 0, -1, 0, 1])
    assert effective_polarity([]).shape == (0,)
    with pytest.raises(ValueError):
        effective_polarity("not excellent")


@pytest.mark.parametrize("bad", [-0.1, 1.5, True, "0.3", float("nan")])
def test_bad_negation(bad):
    with pytest.raises(ValueError, match="negation"):
        make_synthetic(10, negation=bad)


def test_too_short_for_negators():
    with pytest.raises(ValueError, match="negators fit"):
        make_synthetic(10, min_len=6, max_majority=3, negation=0.2)


def test_load_dataset_passes_it_through():
    plain = data.load_dataset("synthetic", n=400, seed=0)
    hard = data.load_dataset("synthetic", n=400, seed=0, negation=0.5)
    assert all(w in hard.vocab.stoi for w in NEGATORS)
    batch = hard.test.batch(np.arange(len(hard.test)))
    negs = np.isin(np.asarray(hard.vocab.itos)[batch.tokens.numpy()], NEGATORS)
    assert negs.any() and batch.rationale[negs].all()
    assert train.dataset_fingerprint(hard) != train.dataset_fingerprint(plain)  # the model cache tells them apart
    with pytest.raises(ValueError, match="unexpected arguments"):
        data.load_dataset("synthetic", n=400, seed=0, negations=0.5)
