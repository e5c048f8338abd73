"""Benchmark: batched null-space dimensions and effective attention vs a per-head loop.

    python benchmarks/run.py identifiability

MiniLM's shape (6 layers x 12 heads, head dim 32) on 200 sentences of 8 to 72 tokens
(random T and softmax A: the cost is the linear algebra, not the model). The batched side
is attnlib.identifiability (one numpy SVD call per distinct length over every sentence,
layer and head); the loop calls numpy's SVD once per (sentence, layer, head), as public
implementations do. Both compute the same numbers (checked). Timed interleaved, median of
the repeats. Target: >= 10x.
"""
from __future__ import annotations

import statistics
import time

import numpy as np

TARGET_RATIO = 10.0
N_SENTENCES, LAYERS, HEADS, D_V = 200, 6, 12, 32


def _data(seed: int = 0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(8, 73, size=N_SENTENCES)
    S = int(lengths.max())
    T = rng.normal(size=(N_SENTENCES, LAYERS, HEADS, S, D_V)).astype(np.float32)
    scores = rng.normal(size=(N_SENTENCES, LAYERS, HEADS, S, S)).astype(np.float32)
    pos = np.arange(S)
    keys = pos[None, :] < lengths[:, None]
    scores = np.where(keys[:, None, None, None, :], scores, -np.inf)
    A = np.exp(scores - scores.max(-1, keepdims=True))
    A = (A / A.sum(-1, keepdims=True)).astype(np.float32)
    return A, T, lengths


def _loop(A, T, lengths):
    """Per sentence, layer and head: one SVD, the rank, the projector."""
    dims = np.zeros(T.shape[:3], dtype=np.int64)
    eff = np.zeros(A.shape, dtype=np.float64)
    for b, n in enumerate(lengths):
        for layer in range(T.shape[1]):
            for h in range(T.shape[2]):
                t = T[b, layer, h, :n].astype(np.float64)
                U, s, _ = np.linalg.svd(t, full_matrices=False)
                r = int((s > s[0] * max(t.shape) * np.finfo(np.float32).eps).sum())
                dims[b, layer, h] = n - r
                Ur = U[:, :r]
                eff[b, layer, h, :n, :n] = (A[b, layer, h, :n, :n].astype(np.float64) @ Ur) @ Ur.T
    return dims, eff


def _batched(A, T, lengths):
    from attnlib import identifiability as idf

    return idf.null_space_dim(T, lengths), idf.effective_attention(A, T, lengths)


def bench_identifiability(repeats: int = 3) -> dict:
    A, T, lengths = _data()
    d_b, e_b = _batched(A, T, lengths)
    d_l, e_l = _loop(A, T, lengths)
    assert (d_b == d_l).all(), "null-space dimensions differ"
    diff = float(np.abs(e_b - e_l).max())
    batched, loop = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        _batched(A, T, lengths)
        batched.append(time.perf_counter() - start)
        start = time.perf_counter()
        _loop(A, T, lengths)
        loop.append(time.perf_counter() - start)
    b, l_ = statistics.median(batched), statistics.median(loop)
    heads = N_SENTENCES * LAYERS * HEADS
    print(
        f"identifiability, null-space dims + effective attention for {heads:,} heads "
        f"({N_SENTENCES} sentences of {lengths.min()}-{lengths.max()} tokens, {LAYERS} x {HEADS} heads, d_v {D_V}): "
        f"batched {b:.2f} s, per-head loop {l_:.2f} s, ratio {l_ / b:.1f}x (target >= {TARGET_RATIO:.0f}x); "
        f"max |diff| {diff:.1e}"
    )
    return {"batched_s": b, "loop_s": l_, "ratio": l_ / b, "max_abs_diff": diff}


BENCHMARKS = {"identifiability": bench_identifiability}
