"""Benchmark: batched null-space dimensions and effective attention vs a per-head loop.

    python benchmarks/run.py identifiability

MiniLM's shape (6 layers x 12 heads, head dim 32, d_model 384) on 200 sentences of 8 to 72
tokens (random values, output projections and softmax attention: the cost is the linear
algebra, not the model). The loop follows Brunner's definition head by head, as public
implementations do: T = V W_O (S x d_model) per (sentence, layer, head), one numpy SVD, the
rank, the projection. The batched side is attnlib.identifiability: ``reduce_values`` (W_O's
SVD once per head, then an S x d_v stand-in with T's singular values and left singular
vectors), then one numpy SVD call per distinct length over every sentence, layer and head, shared by
the dimension and the projection (``effective_attention(..., with_null_dim=True)``).
Both compute the same numbers (checked). Timed interleaved, median of the repeats.
Target: >= 10x. Most of the gain is the reduction (S x 32 instead of S x 384 SVDs); batching
the small SVDs themselves gains little, since LAPACK dominates their cost.
"""
from __future__ import annotations

import statistics
import time

import numpy as np

TARGET_RATIO = 10.0
N_SENTENCES, LAYERS, HEADS, D_V, D_MODEL = 200, 6, 12, 32, 384


def _data(seed: int = 0):
    """V (B, L, H, S, d_v) float32, W_O per head (L, H, d_v, d_model), A (B, L, H, S, S), lengths."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(8, 73, size=N_SENTENCES)
    S = int(lengths.max())
    V = rng.normal(size=(N_SENTENCES, LAYERS, HEADS, S, D_V)).astype(np.float32)
    W = (rng.normal(size=(LAYERS, HEADS, D_V, D_MODEL)) / np.sqrt(D_V)).astype(np.float32)
    scores = rng.normal(size=(N_SENTENCES, LAYERS, HEADS, S, S)).astype(np.float32)
    keys = np.arange(S)[None, :] < lengths[:, None]
    scores = np.where(keys[:, None, None, None, :], scores, -np.inf)
    A = np.exp(scores - scores.max(-1, keepdims=True))
    A = (A / A.sum(-1, keepdims=True)).astype(np.float32)
    return V, W, A, lengths


def _loop(V, W, A, lengths):
    """Per sentence, layer and head: T = V W_O (S x d_model), one SVD, the rank, the projection."""
    dims = np.zeros(V.shape[:3], dtype=np.int64)
    eff = np.zeros(A.shape, dtype=np.float64)
    from attnlib.identifiability import RTOL_EPS

    eps = np.finfo(np.float32).eps * RTOL_EPS
    for b, n in enumerate(lengths):
        for layer in range(V.shape[1]):
            for h in range(V.shape[2]):
                t = V[b, layer, h, :n].astype(np.float64) @ W[layer, h].astype(np.float64)
                U, s, _ = np.linalg.svd(t, full_matrices=False)
                r = int((s > s[0] * eps).sum())
                dims[b, layer, h] = n - r
                Ur = U[:, :r]
                eff[b, layer, h, :n, :n] = (A[b, layer, h, :n, :n].astype(np.float64) @ Ur) @ Ur.T
    return dims, eff


def _batched(V, W, A, lengths):
    from attnlib import identifiability as idf

    T = idf.reduce_values(V, W)  # W_O's SVD once per head; S x d_v per sentence and head
    effective, dims = idf.effective_attention(A, T, lengths, with_null_dim=True)  # one SVD per head
    return dims, effective


def bench_identifiability(repeats: int = 3) -> dict:
    V, W, A, lengths = _data()
    d_b, e_b = _batched(V, W, A, lengths)
    d_l, e_l = _loop(V, W, A, lengths)
    mismatched = int((d_b != d_l).sum())
    diff = float(np.abs(e_b - e_l).max())
    batched, loop = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        _batched(V, W, A, lengths)
        batched.append(time.perf_counter() - start)
        start = time.perf_counter()
        _loop(V, W, A, lengths)
        loop.append(time.perf_counter() - start)
    b, l_ = statistics.median(batched), statistics.median(loop)
    heads = N_SENTENCES * LAYERS * HEADS
    print(
        f"identifiability, null-space dims + effective attention for {heads:,} heads "
        f"({N_SENTENCES} sentences of {lengths.min()}-{lengths.max()} tokens, {LAYERS} x {HEADS} heads, d_v {D_V}, "
        f"d_model {D_MODEL}): batched {b:.2f} s, per-head loop over T = V W_O {l_:.2f} s, ratio {l_ / b:.1f}x "
        f"(target >= {TARGET_RATIO:.0f}x); dims differ on {mismatched} heads, max |effective diff| {diff:.1e}"
    )
    return {"batched_s": b, "loop_s": l_, "ratio": l_ / b, "max_abs_diff": diff, "dims_mismatched": mismatched}


BENCHMARKS = {"identifiability": bench_identifiability}
