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


# computed with the generator of commit d301f69, before the negation variant existed
PLAIN_0 = "3c7eff5b636910182a4d93ee65e5de70964bddfec8dbfb2f843b0a855cbf99db"
PLAIN_3 = "c68c349f220b66f6ffbde974dd50535e8e50169df9fd611d519712277878368f"


def test_without_negation_the_data_are_those_of_the_plain_task():
    # sha256 of the data the generator gave before the negation variant existed (cached models depend on them)
    assert fingerprint(make_synthetic(n=300, seed=0)) == PLAIN_0
    assert fingerprint(make_synthetic(n=300, min_len=5, max_len=60, max_majority=2, seed=3)) == PLAIN_3
    assert fingerprint(make_synthetic(n=300, min_len=5, max_len=60, max_majority=2, negation=0, seed=3)) == PLAIN_3
    assert fingerprint(make_synthetic(n=300, seed=0, negation=0.0)) == fingerprint(make_synthetic(n=300, seed=0))


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 60), slack=st.integers(0, 10), extra=st.integers(0, 30), max_majority=st.integers(1, 4),
       negation=st.one_of(st.just(0.0), st.just(1.0), st.floats(0.0, 1.0)), seed=st.integers(0, 10_000))
def test_labels_rationales_and_negators(n, slack, extra, max_majority, negation, seed):
    min_len = 2 * (2 * max_majority - 1) + slack  # the shortest sentences the negation variant allows
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
    has_negator = np.array([np.isin(t, NEGATORS).any() for t in d.tokens])
    assert 0.50 < has_negator.mean() < 0.59  # E[1 - 0.7 ** (a + b)] = 0.544 with max_majority=3
    everything = make_synthetic(200, negation=1.0, seed=1, min_len=10)
    for t in everything.tokens:  # every marker right after a negator
        assert np.isin(t, NEGATORS).sum() == np.isin(t, list(MARKER_POLARITY)).sum()
        assert all(i > 0 and t[i - 1] in NEGATORS for i, w in enumerate(t) if w in MARKER_POLARITY)
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
    with pytest.raises(ValueError, match="negators fit"):
        make_synthetic(10, min_len=9, max_len=40, max_majority=3, negation=1.0)
    make_synthetic(10, min_len=6, max_majority=3, negation=0.0)  # the plain task needs only 2 * 3 - 1
    make_synthetic(10, min_len=10, max_len=10, max_majority=3, negation=1.0)  # the bound is tight enough


def test_load_dataset_passes_it_through():
    assert data.NEGATORS == NEGATORS and data.effective_polarity is effective_polarity
    default = data.load_dataset("synthetic", negation=0.3, seed=0)
    assert default.config["source_kwargs"] == {"negation": 0.3} and len(default.train) > 3000
    plain = data.load_dataset("synthetic", n=400, seed=0)
    hard = data.load_dataset("synthetic", n=400, seed=0, negation=0.5)
    harder = data.load_dataset("synthetic", n=400, seed=0, negation=0.8)
    assert all(w in hard.vocab.stoi for w in NEGATORS)
    batch = hard.test.batch(np.arange(len(hard.test)))
    negs = np.isin(np.asarray(hard.vocab.itos)[batch.tokens.numpy()], NEGATORS)
    assert negs.any() and batch.rationale[negs].all()
    fingerprints = {train.dataset_fingerprint(x) for x in (plain, hard, harder)}
    assert len(fingerprints) == 3  # the model cache tells them apart
    assert hard.config != harder.config
    with pytest.raises(ValueError, match="unexpected arguments"):
        data.load_dataset("synthetic", n=400, seed=0, negations=0.5)


def test_negators_survive_tokenizing_and_are_in_glove():
    from attnlib.data.embeddings import glove_index

    d = make_synthetic(300, negation=0.5, seed=4)
    assert all(data.tokenize(text) == toks for text, toks in zip(d.texts, d.tokens))
    assert (glove_index().get_indexer(list(NEGATORS)) >= 0).all()
