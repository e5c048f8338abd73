"""Tests for attnlib.data: tokenizer, vocabulary, data sets, batching, synthetic task, GloVe, online loaders."""
from __future__ import annotations

import itertools
import json
import time
from collections import Counter

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from attnlib.data import (
    EOS,
    MARKER_POLARITY,
    PAD,
    SOS,
    SPECIALS,
    UNK,
    Batch,
    Dataset,
    DatasetUnavailableError,
    Split,
    Vocabulary,
    available_datasets,
    collate,
    glove_embeddings,
    load_dataset,
    make_synthetic,
    tokenize,
)
from attnlib.data.embeddings import glove_index, glove_matrix
from attnlib.data.text import Corpus, _split_chunk, _split_chunk_regex

OFFLINE = ["rt-polarity", "imdb", "synthetic"]
ONLINE = ["sst2", "agnews", "20news"]


# ---------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def rt() -> Dataset:
    return load_dataset("rt-polarity")


@pytest.fixture(scope="module")
def imdb() -> Dataset:
    return load_dataset("imdb")


@pytest.fixture(scope="module")
def syn() -> Dataset:
    return load_dataset("synthetic")


def _all_texts(ds: Dataset) -> list[str]:
    return ds.train.texts + ds.dev.texts + ds.test.texts


# -------------------------------------------------------------------------------------------- tokenizer


def test_specials():
    assert (PAD, UNK, SOS, EOS) == (0, 1, 2, 3)
    assert SPECIALS == ["<PAD>", "<UNK>", "<SOS>", "<EOS>"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Hello, World!", ["hello", ",", "world", "!"]),
        ("It was GREAT.<br /><br />Really.", ["it", "was", "great", ".", "really", "."]),
        ("line<br/>break<BR>again", ["line", "break", "again"]),
        ("<i>Italic</i> text", ["italic", "text"]),
        ("The 21st century's best", ["the", "qqq", "century", "'s", "best"]),
        ("I give it 10/10 and $5.99 in 1999", ["i", "give", "it", "qqq", "and", "$", "qqq", "in", "qqq"]),
        ("doesn't can't won't I'm we're they've you'll he'd", ["does", "n't", "ca", "n't", "wo", "n't", "i", "'m",
                                                              "we", "'re", "they", "'ve", "you", "'ll", "he", "'d"]),
        ("it 's a film that does n't work", ["it", "'s", "a", "film", "that", "does", "n't", "work"]),
        ("a well-made 12-year-old", ["a", "well", "-", "made", "qqq", "-", "year", "-", "old"]),
        ("wait.... what -- no!!! really??", ["wait", "...", "what", "--", "no", "!!!", "really", "??"]),
        ("o'brien's rock'n'roll", ["o'brien", "'s", "rock'n'roll"]),
        ("the 1990's", ["the", "qqq", "'s"]),
        ("Curly \u201cquotes\u201d and it\u2019s \u2014 fine\u2026", ['curly', '"', 'quotes', '"', 'and', 'it', "'s",
                                                                     '--', 'fine', '...']),
        ("IMDB\x96style \x93quotes\x94", ["imdb", "-", "style", '"', "quotes", '"']),
        ("end.the start", ["end", ".", "the", "start"]),
        ("x2 b4 mp3", ["qqq", "qqq", "qqq"]),
    ],
)
def test_tokenize_examples(text, expected):
    assert tokenize(text) == expected


@pytest.mark.parametrize("bad", ["", "   ", "\n\t", None, 3, b"bytes", ["a", "list"], "<br /><br />"])
def test_tokenize_rejects_bad_input(bad):
    with pytest.raises(ValueError, match="str|empty|whitespace|no tokens"):
        tokenize(bad)


_fragments = list("abcXYZ019 .,!?'-\"<>/\t\n") + ["<br />", "n't", "'s", "\u2019", "\x96", "\u00b2", "10/10", "co-op"]
_texts = st.lists(st.one_of(st.sampled_from(_fragments), st.characters()), min_size=1, max_size=40).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_texts)
def test_tokenize_properties(text):
    assume(text.strip())
    try:
        toks = tokenize(text)
    except ValueError:
        return  # only HTML tags: documented
    assert toks, "non-empty result"
    for t in toks:
        assert t and not any(c.isspace() for c in t)
        assert not any(c.isdigit() for c in t), t  # J&W digit rule
        assert t == t.lower()
    assert tokenize(text) == toks  # deterministic
    # the vectorised corpus path gives exactly the same tokens
    corpus = Corpus.from_texts([text, "filler text", text])
    assert corpus.token_lists([0, 2]) == [toks, toks]


@settings(max_examples=300, deadline=None)
@given(_texts)
def test_chunk_shortcuts_agree_with_general_rule(text):
    for chunk in text.lower().split():
        assert _split_chunk(chunk) == _split_chunk_regex(chunk)


def test_corpus_path_matches_tokenize(imdb, rt):
    for ds in (imdb, rt):
        for split in ds.splits.values():
            for i in range(0, len(split), max(1, len(split) // 150)):
                assert split.tokens[i] == tokenize(split.texts[i])


# ------------------------------------------------------------------------------------------- vocabulary


def test_vocabulary_from_documents_min_df_and_order():
    docs = [["b", "a", "a"], ["a", "c"], ["b", "a"], ["d"]]
    v = Vocabulary.from_documents(docs, min_df=2)
    assert v.itos == SPECIALS + ["a", "b"]  # df: a 3, b 2 (c, d 1): min_df counts documents, not tokens
    assert len(v) == 6 and v.stoi["a"] == 4 and "c" not in v
    v1 = Vocabulary.from_documents(docs, min_df=1)
    assert v1.itos == SPECIALS + ["a", "b", "c", "d"]  # ties broken alphabetically
    assert Vocabulary.from_documents(docs, min_df=1, max_size=2).itos == SPECIALS + ["a", "b"]
    with pytest.raises(ValueError, match="min_df"):
        Vocabulary.from_documents(docs, min_df=0)
    with pytest.raises(ValueError):
        Vocabulary(["a", "b"])  # specials missing


def test_encode_wraps_and_decode():
    v = Vocabulary.from_documents([["good", "film"], ["bad", "film"]])
    ids = v.encode(["good", "film", "unseen"])
    assert ids.dtype == np.int64
    assert ids[0] == SOS and ids[-1] == EOS and len(ids) == 5
    assert ids[3] == UNK
    assert v.decode(ids) == ["good", "film", "<UNK>"]  # PAD/SOS/EOS dropped, UNK kept in place
    assert v.decode(ids, keep_specials=True) == ["<SOS>", "good", "film", "<UNK>", "<EOS>"]
    assert v.decode(torch.tensor([SOS, v.stoi["bad"], EOS, PAD, PAD])) == ["bad"]
    assert v.encode([]).tolist() == [SOS, EOS]
    assert v.encode(["<PAD>", "<EOS>"]).tolist() == [SOS, UNK, UNK, EOS]  # literal specials are just words
    with pytest.raises(ValueError, match="list of tokens"):
        v.encode("good film")
    with pytest.raises(ValueError):
        v.decode([0, 99])
    many = v.encode_many([["good"], [], ["bad", "unseen", "film"]])
    assert [a.tolist() for a in many] == [v.encode(t).tolist() for t in [["good"], [], ["bad", "unseen", "film"]]]


_words = st.lists(st.text(alphabet="abcdefgh'-.", min_size=1, max_size=6), max_size=20)


@settings(max_examples=150, deadline=None)
@given(st.lists(_words, min_size=1, max_size=6), _words)
def test_encode_decode_round_trip(docs, probe):
    v = Vocabulary.from_documents(docs)
    for d in docs:
        assert v.decode(v.encode(d)) == d
    out = v.decode(v.encode(probe))
    assert len(out) == len(probe)
    assert out == [w if w in v.stoi else "<UNK>" for w in probe]


def test_vocab_built_from_train_only(rt):
    ds = load_dataset("rt-polarity", min_df=2)
    df = Counter(w for toks in ds.train.tokens for w in set(toks))
    assert set(ds.vocab.words) == {w for w, c in df.items() if c >= 2}
    assert ds.vocab == Vocabulary.from_documents(ds.train.tokens, min_df=2)  # vectorised == reference path
    # words seen only in dev/test are unknown
    test_only = {w for toks in ds.test.tokens for w in toks} - set(df)
    assert test_only and not test_only & set(ds.vocab.stoi)
    for toks, ids in zip(ds.test.tokens, ds.test.ids):
        for w, i in zip(toks, ids[1:-1]):
            assert i == ds.vocab.stoi.get(w, UNK)
    assert rt.config["min_df"] == 1 and len(rt.vocab) > len(ds.vocab)


# --------------------------------------------------------------------------------------------- data sets


def test_available_datasets():
    av = available_datasets()
    assert list(av) == OFFLINE + ONLINE
    for name in OFFLINE:
        assert "offline" in av[name]
    for name in ONLINE:
        assert "online" in av[name]


def test_unknown_name_lists_known_names():
    with pytest.raises(ValueError) as err:
        load_dataset("sst")
    msg = str(err.value)
    for name in OFFLINE + ONLINE:
        assert repr(name) in msg
    assert "Did you mean 'sst2'" in msg and "rt-polarity" in msg
    with pytest.raises(ValueError, match="Did you mean 'imdb'"):
        load_dataset("imbd")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(max_train=0), "max_train"),
        (dict(max_train=-5), "max_train"),
        (dict(max_train=2.5), "max_train"),
        (dict(max_train=True), "max_train"),
        (dict(max_eval=0), "max_eval"),
        (dict(min_df=0), "min_df"),
        (dict(seed=-1), "seed"),
        (dict(data_files="x.csv"), "data_files"),
        (dict(bogus=1), "unexpected"),
    ],
)
def test_load_dataset_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        load_dataset("rt-polarity", **kwargs)


def test_dataset_basics(rt):
    assert rt.name == "rt-polarity" and rt.classes == ("negative", "positive")
    assert "SST" in rt.substitute_note and "not SST" in rt.substitute_note
    assert isinstance(rt.train, Split) and rt["dev"] is rt.dev
    assert "rt-polarity" in repr(rt) and len(repr(rt)) < 200 and len(repr(rt.train)) < 80
    summ = rt.summary()
    assert list(summ.index) == ["train", "dev", "test"]
    assert list(summ.columns) == ["n", "frac_positive", "mean_len", "max_len"]
    assert summ.loc["train", "n"] == len(rt.train)
    assert summ.loc["test", "max_len"] == rt.test.lengths().max()
    assert abs(summ.loc["dev", "frac_positive"] - rt.dev.labels.mean()) < 1e-12


def test_sos_eos_wrapping(rt, imdb, syn):
    for ds in (rt, imdb, syn):
        for split in ds.splits.values():
            for toks, ids in itertools.islice(zip(split.tokens, split.ids), 0, None, 7):
                assert ids.dtype == np.int64
                assert ids[0] == SOS and ids[-1] == EOS and len(ids) == len(toks) + 2
                assert not np.isin(ids[1:-1], [PAD, SOS, EOS]).any()


def test_length_filters(rt, imdb):
    for split in rt.splits.values():
        assert split.lengths().min() >= 5
    for split in imdb.splits.values():
        lens = split.lengths()
        assert lens.min() >= 6 and lens.max() < 400
    assert imdb.stats["n_too_long"] > 1000 and rt.stats["n_too_short"] > 0
    assert rt.stats["n_kept"] == sum(len(s) for s in rt.splits.values())


@pytest.mark.parametrize("name", ["rt-polarity", "imdb", "synthetic"])
def test_splits_disjoint_stratified_80_10_10(name, rt, imdb, syn):
    ds = {"rt-polarity": rt, "imdb": imdb, "synthetic": syn}[name]
    texts = {k: set(s.texts) for k, s in ds.splits.items()}
    assert not texts["train"] & texts["dev"] and not texts["train"] & texts["test"] and not texts["dev"] & texts["test"]
    keys = [" ".join(t) for s in ds.splits.values() for t in s.tokens]
    assert len(keys) == len(set(keys))  # no duplicate token sequences at all
    n = sum(len(s) for s in ds.splits.values())
    overall = np.concatenate([s.labels for s in ds.splits.values()]).mean()
    for frac, split in zip((0.8, 0.1, 0.1), ds.splits.values()):
        assert abs(len(split) / n - frac) < 0.005
        assert abs(split.labels.mean() - overall) < 0.02
        assert set(np.unique(split.labels)) == {0, 1}


def test_imdb_preprocessing(imdb):
    assert imdb.stats["n_source"] == 25000 and imdb.stats["n_duplicates"] >= 96
    assert imdb.config["min_df"] == 10
    df = Counter(w for toks in imdb.train.tokens for w in set(toks))
    assert min(df[w] for w in imdb.vocab.words) >= 10
    assert not any("<br" in t or "br />" in t for t in map(" ".join, imdb.train.tokens[:500]))


def test_deterministic_and_seeded(rt):
    again = load_dataset("rt-polarity")
    assert again.vocab == rt.vocab
    for a, b in zip(rt.splits.values(), again.splits.values()):
        assert a.texts == b.texts and a.tokens == b.tokens
        assert np.array_equal(a.labels, b.labels)
        assert all(np.array_equal(x, y) for x, y in zip(a.ids, b.ids))
    other = load_dataset("rt-polarity", seed=1)
    assert set(other.test.texts) != set(rt.test.texts)
    assert set(_all_texts(other)) == set(_all_texts(rt))  # same data, different split


def test_max_train_max_eval_subsample(rt):
    small = load_dataset("rt-polarity", max_train=500, max_eval=101)
    assert (len(small.train), len(small.dev), len(small.test)) == (500, 101, 101)
    assert set(small.train.texts) <= set(rt.train.texts)  # subsampled after splitting
    assert set(small.test.texts) <= set(rt.test.texts)
    assert abs(small.train.labels.mean() - 0.5) < 0.01 and abs(small.test.labels.mean() - 0.5) < 0.01
    assert Counter(w for t in small.train.tokens for w in t).keys() == set(small.vocab.words)  # vocab of used train
    again = load_dataset("rt-polarity", max_train=500, max_eval=101)
    assert again.train.texts == small.train.texts and again.vocab == small.vocab
    big = load_dataset("rt-polarity", max_train=10**9)
    assert len(big.train) == len(rt.train)


# ---------------------------------------------------------------------------------------------- batching


def test_batch_fields(rt):
    split = rt.dev
    b = split.batch([3, 0, 7, 1])
    assert isinstance(b, Batch) and len(b) == 4
    assert b.tokens.dtype == torch.long and b.mask.dtype == torch.bool and b.rationale is None
    assert b.index.tolist() == [3, 0, 7, 1]
    assert b.labels.tolist() == split.labels[[3, 0, 7, 1]].tolist()
    lens = torch.tensor([len(split.ids[i]) for i in [3, 0, 7, 1]])
    assert torch.equal(b.lengths, lens)
    assert b.tokens.shape == (4, int(lens.max()))
    for r, i in enumerate([3, 0, 7, 1]):
        n = int(lens[r])
        assert b.tokens[r, :n].tolist() == split.ids[i].tolist()
        assert (b.tokens[r, n:] == PAD).all()
        assert b.mask[r].tolist() == [False] + [True] * (n - 2) + [False] * (b.tokens.shape[1] - n + 1)
    assert torch.equal(b.mask.sum(1), b.lengths - 2)
    assert not (b.mask & ((b.tokens == PAD) | (b.tokens == SOS) | (b.tokens == EOS))).any()
    moved = b.to("cpu")
    assert isinstance(moved, Batch) and torch.equal(moved.tokens, b.tokens)


def test_batches_length_bucketed_and_shuffle(rt):
    split = rt.train
    lens = split.lengths()
    batches = list(split.batches(64))
    assert len(batches) == split.n_batches(64) == -(-len(split) // 64)
    idx = torch.cat([b.index for b in batches]).numpy()
    assert sorted(idx.tolist()) == list(range(len(split)))  # every row exactly once
    assert (np.diff(lens[idx]) >= 0).all()  # sorted by length: contiguous buckets
    assert all(len(b) == 64 for b in batches[:-1])
    for b in batches[:5]:
        assert b.tokens.shape[1] == int(b.lengths.max())
    shuf = [b.index.tolist() for b in split.batches(64, shuffle=True, seed=3)]
    assert shuf == [b.index.tolist() for b in split.batches(64, shuffle=True, seed=3)]  # deterministic
    assert shuf != [b.index.tolist() for b in split.batches(64, shuffle=True, seed=4)]
    assert shuf != [b.index.tolist() for b in batches]
    assert sorted(map(tuple, shuf)) == sorted(tuple(b.index.tolist()) for b in batches)  # same buckets
    with pytest.raises(ValueError, match="batch_size"):
        next(split.batches(0))


def test_collate_validation():
    good = [np.array([SOS, 5, EOS]), np.array([SOS, EOS])]
    b = collate(good, [1, 0], [10, 11], rationales=[np.array([True]), np.array([], dtype=bool)])
    assert b.tokens.tolist() == [[SOS, 5, EOS], [SOS, EOS, PAD]]
    assert b.rationale.tolist() == [[False, True, False], [False, False, False]]
    assert collate(good, [1, 0]).index.tolist() == [0, 1]
    with pytest.raises(ValueError):
        collate([], [])
    with pytest.raises(ValueError, match="SOS"):
        collate([np.array([5, 6, EOS])], [0])
    with pytest.raises(ValueError, match="labels"):
        collate(good, [1])
    with pytest.raises(ValueError, match="rationale"):
        collate(good, [1, 0], rationales=[np.array([True, False]), np.array([], dtype=bool)])


def test_subset(rt):
    sub = rt.test.subset([5, 2])
    assert len(sub) == 2 and sub.texts == [rt.test.texts[5], rt.test.texts[2]]
    assert sub.labels.tolist() == rt.test.labels[[5, 2]].tolist()
    mask = rt.test.labels == 1
    assert len(rt.test.subset(mask)) == mask.sum()
    assert rt.test.subset(slice(0, 10)).texts == rt.test.texts[:10]
    with pytest.raises(ValueError):
        rt.test.subset([len(rt.test)])


# --------------------------------------------------------------------------------------------- synthetic


def test_synthetic_rationales_and_labels(syn):
    assert syn.has_rationales and "Not a stand-in" in syn.substitute_note
    assert (len(syn.train), len(syn.dev), len(syn.test)) == (3200, 400, 400)
    mixed = 0
    for split in syn.splits.values():
        assert split.labels.mean() == 0.5
        for text, toks, rat, y in zip(split.texts, split.tokens, split.rationales, split.labels):
            assert 10 <= len(toks) <= 40 and rat.dtype == bool and len(rat) == len(toks)
            assert rat.tolist() == [t in MARKER_POLARITY for t in toks]  # exactly the markers
            score = sum(MARKER_POLARITY.get(t, 0) for t in toks)
            assert score != 0 and y == int(score > 0)  # majority polarity, never tied
            mixed += len({MARKER_POLARITY[t] for t in toks if t in MARKER_POLARITY}) == 2
            assert tokenize(text) == toks
    assert 0.25 < mixed / 4000 < 0.55  # markers of both polarities are common
    b = syn.test.batch(range(16))
    assert b.rationale.shape == b.tokens.shape
    assert not (b.rationale & ~b.mask).any()
    flat = np.concatenate([syn.test.rationales[i] for i in range(16)])
    assert b.rationale[b.mask].numpy().tolist() == flat.tolist()


def test_synthetic_parameters_and_seed():
    d = make_synthetic(200, min_len=5, max_len=8, max_majority=2, seed=1)
    assert len(d.texts) == 200 and all(5 <= len(t) <= 8 for t in d.tokens)
    assert d.tokens == make_synthetic(200, min_len=5, max_len=8, max_majority=2, seed=1).tokens
    assert d.tokens != make_synthetic(200, min_len=5, max_len=8, max_majority=2, seed=2).tokens
    ds = load_dataset("synthetic", n=300, min_len=12, max_len=20, seed=5)
    assert sum(len(s) for s in ds.splits.values()) == 300
    assert ds.config["source_kwargs"] == {"n": 300, "min_len": 12, "max_len": 20}
    with pytest.raises(ValueError, match="min_len"):
        make_synthetic(10, min_len=3, max_len=5, max_majority=3)
    with pytest.raises(ValueError, match="max_len"):
        make_synthetic(10, min_len=10, max_len=5)
    with pytest.raises(ValueError, match="unexpected"):
        load_dataset("synthetic", length=3)


# ------------------------------------------------------------------------------------------------- GloVe


def test_glove_embeddings(rt, imdb):
    emb, cov = glove_embeddings(rt.vocab)
    assert emb.shape == (len(rt.vocab), 50) and emb.dtype == np.float32
    assert cov > 0.9
    assert not emb[PAD].any()
    for word in ("the", "film", "excellent", "qqq", "n't"):
        row = glove_index().get_loc(word)
        assert np.array_equal(emb[rt.vocab.stoi[word]], glove_matrix()[row])
    emb2, cov2 = glove_embeddings(rt.vocab)
    assert np.array_equal(emb, emb2) and cov == cov2
    emb3, _ = glove_embeddings(rt.vocab, seed=1)
    assert not np.array_equal(emb3[UNK], emb[UNK]) and np.array_equal(emb3[4], emb[4])
    assert 0.3 < emb[[UNK, SOS, EOS]].std() < 1.0  # random rows at GloVe's scale
    _, cov_imdb = glove_embeddings(imdb.vocab)
    assert cov_imdb > 0.9
    with pytest.raises(ValueError):
        glove_embeddings(["not", "a", "vocab"])


# ------------------------------------------------------------------------------------- online (local files)


_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "te", "vo", "zu", "pi"]


def _words(n: int, offset: int = 0) -> list[str]:
    """n distinct letters-only pseudo-words (so the digit rule cannot merge texts)."""
    combos = itertools.product(_SYLLABLES, repeat=3)
    return ["".join(c) for c in itertools.islice(combos, offset, offset + n)]


def _rows(label_names: dict, per_class: int, offset: int, extra: str = "") -> list[dict]:
    rows, words = [], iter(_words(per_class * len(label_names) * 2, offset))
    for label, name in label_names.items():
        for _ in range(per_class):
            rows.append({"text": f"{name} report about the {next(words)} and {next(words)} {extra}".strip(),
                         "label": label})
    return rows


def _agnews_file(path, per_class, offset):
    pd.DataFrame(_rows({0: "world", 1: "sports", 2: "business", 3: "science"}, per_class, offset)).to_csv(path, index=False)


def test_agnews_local_csv(tmp_path):
    _agnews_file(tmp_path / "train.csv", 20, 0)
    _agnews_file(tmp_path / "test.csv", 5, 500)
    ds = load_dataset("agnews", data_files={"train": tmp_path / "train.csv", "test": str(tmp_path / "test.csv")},
                      cache_dir=str(tmp_path / "hf"))
    assert ds.classes == ("world", "business")
    assert (len(ds.train), len(ds.dev), len(ds.test)) == (36, 4, 10)  # dev carved from train, test kept
    assert ds.stats["n_other_classes"] == 50
    for split in ds.splits.values():
        for text, y in zip(split.texts, split.labels):
            assert text.split()[0] in ("world", "business")
            assert y == (text.split()[0] == "business")
    test_file = pd.read_csv(tmp_path / "test.csv")
    assert set(ds.test.texts) == set(test_file.loc[test_file.label.isin([0, 2]), "text"])  # test = the test file
    assert all(t.split()[0] != "sports" for t in _all_texts(ds))


def test_20news_local_jsonl(tmp_path):
    names = {9: "rec.sport.baseball", 10: "rec.sport.hockey", 14: "sci.space", 0: "alt.atheism"}
    rows = []
    for label, name in names.items():
        for w in _words(15, 50 * label):
            rows.append({"text": f"posted in {name.split('.')[-1]} about {w} and the game last night", "label": label,
                         "label_text": name})
    rows.append({"text": "", "label": 9, "label_text": "rec.sport.baseball"})  # empty posts exist in 20news
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    ds = load_dataset("20news", data_files=str(path), cache_dir=str(tmp_path / "hf"))
    assert ds.classes == ("baseball", "hockey")
    assert sum(len(s) for s in ds.splits.values()) == 30 and ds.stats["n_empty"] == 1
    for split in ds.splits.values():
        for text, y in zip(split.texts, split.labels):
            assert text.split()[2] == ("hockey" if y == 1 else "baseball")


def test_sst2_local_parquet(tmp_path):
    def frame(per_class, offset, hidden=False):
        rows = _rows({0: "dull", 1: "lovely"}, per_class, offset, extra="in this film")
        return pd.DataFrame([{"sentence": r["text"], "label": -1 if hidden else r["label"]} for r in rows])

    files = {}
    for split, (n, off, hidden) in {"train": (30, 0, False), "validation": (6, 300, False), "test": (6, 600, True)}.items():
        files[split] = tmp_path / f"{split}.parquet"
        frame(n, off, hidden).to_parquet(files[split])
    ds = load_dataset("sst2", data_files=files, cache_dir=str(tmp_path / "hf"))
    assert set(ds.test.texts) == set(frame(6, 300)["sentence"])  # validation serves as test
    assert (len(ds.train), len(ds.dev), len(ds.test)) == (54, 6, 12)
    assert all(y == (t.split()[0] == "lovely") for t, y in zip(ds.train.texts, ds.train.labels))


def test_local_data_files_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_dataset("agnews", data_files={"train": tmp_path / "missing.csv"})
    (tmp_path / "a.txt").write_text("x")
    with pytest.raises(ValueError, match="format"):
        load_dataset("agnews", data_files=tmp_path / "a.txt")
    with pytest.raises(ValueError, match="split"):
        load_dataset("agnews", data_files={"unsupervised": tmp_path / "a.txt"})


@pytest.mark.parametrize("name", ONLINE)
def test_online_without_network_fails_fast_naming_alternatives(name, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    start = time.monotonic()
    with pytest.raises(DatasetUnavailableError) as err:
        load_dataset(name, cache_dir=str(tmp_path / "empty-cache"))
    assert time.monotonic() - start < 10
    assert isinstance(err.value, ConnectionError) and isinstance(err.value, RuntimeError)
    for alt in ("rt-polarity", "imdb", "synthetic"):
        assert alt in str(err.value)


def test_unreachable_hub_fails_fast(monkeypatch, tmp_path):
    # no offline flags, but the endpoint refuses connections: the pre-flight check notices at once
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy",
                "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    start = time.monotonic()
    with pytest.raises(ConnectionError, match="rt-polarity"):
        load_dataset("agnews", cache_dir=str(tmp_path / "empty-cache"))
    assert time.monotonic() - start < 10


def test_sample_texts_is_seeded_raw_and_checked():
    from attnlib import data

    texts, labels = data.sample_texts("imdb", 5, seed=3)
    again, _ = data.sample_texts("imdb", 5, seed=3)
    other, _ = data.sample_texts("imdb", 5, seed=4)
    assert texts == again and texts != other and len(texts) == 5 and labels.shape == (5,)
    assert all(isinstance(t, str) and t.strip() for t in texts)
    assert set(labels.tolist()) <= {0, 1}
    rt, _ = data.sample_texts("rt-polarity", None)
    assert len(rt) > 8000  # all of rt-polarity, untokenised
    with pytest.raises(ValueError, match="movie-review"):
        data.sample_texts("synthetic", 3)
