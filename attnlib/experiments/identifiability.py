"""Identifiability of attention (Brunner et al. 2020): when many attentions give one output.

A head's output is ``A @ T``: the attention A (d_s x d_s, one row per query) times
T = E W^V W^O_h (d_s x d_v, the value vectors through the head's slice of the output
projection). Any A~ with ``A~ @ T = 0`` and ``A~ @ 1 = 0`` (rows still sum to 1) gives
``(A + A~) @ T = A @ T``: the same output from a different attention. Such rows live in the
left null space of [T, 1], whose dimension is at least d_s - rank(T) - 1 >= d_s - d_v - 1;
once a sentence is longer than the head dimension, attention is not identifiable.

* :func:`null_space_dim` -- d_s - rank(T) per sentence and head;
* :func:`effective_attention` -- A projected onto the column space of T (A minus its part
  in the null space), the only part of A that reaches the output;
* :func:`alternative_attention` -- a concrete A + A~ with the same output, as far from A
  as positivity allows;
* :func:`alternative_reach` -- how far :func:`alternative_attention` moves every head's rows,
  for every sentence of a corpus longer than the head dimension;
* :func:`trace_statistics` -- for every sentence, layer and head of a model's trace
  (:class:`attnlib.models.Trace`): the null-space dimension, the correlation between raw and
  effective attention, and the attention mass raw and effective attention put on groups of
  tokens ([CLS], [SEP], punctuation, ...).

Everything is batched: ``T`` is ``(B, ..., S, d_v)`` and ``A`` is ``(B, ..., S, S)`` with any
middle axes (layers, heads), padded to S, with ``lengths`` (B,) the real length of each
sentence (every position the model attends to, [CLS] and [SEP] included). Each matrix is
cropped to its own sentence's length before any SVD (never the padded length), and gets its
own rank, with a tolerance relative to its largest singular value. Matrices of one length go
through one batched numpy SVD (LAPACK per matrix, not torch: small SVDs on a busy torch thread
pool were measured 100x slower). numpy's OpenBLAS runs one thread on its AVX2 kernels
(:mod:`attnlib.cpu` pins both): beside a busy process small SVDs took 77 ms each on two OpenBLAS
threads against 2.9 ms on one, and the kernels chosen by CPU gave other last bits. Results are
float64 numpy arrays, padded with 0.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np
import pandas as pd
import torch

from .. import metrics
from .._checks import as_tensor, check_bool, check_distribution, check_finite, check_positive_int, check_seed

__all__ = ["null_space_dim", "effective_attention", "alternative_attention", "Alternative", "rank_tolerance",
           "reduce_values", "RTOL_EPS", "trace_statistics", "default_groups", "punctuation_mask",
           "corpus_statistics", "null_space_table", "correlation_by_length", "alternative_reach"]


#: The rank cut-off, relative to a matrix's largest singular value, in units of the data's
#: machine epsilon: singular values below RTOL_EPS x eps x sigma_max count as zero. It does
#: not depend on the matrix's shape, so T (S x d_model) and its reduced stand-in (S x d_v,
#: :func:`reduce_values`) get the same rank. float32 activations: 1.2e-5 x sigma_max.
RTOL_EPS = 100


def rank_tolerance(singular_values: np.ndarray, dtype) -> np.ndarray:
    """The rank cut-off for each matrix: sigma_max x RTOL_EPS x eps of the data's dtype.

    ``eps`` is that of the data's own precision (float32 activations: 1.2e-7), since
    singular values near it are rounding; the experiments below pass the precision the values
    were computed in (float64 arrays of float32 numbers count as float32). ``singular_values``: (..., k), largest first.
    Returns (...,).
    """
    eps = np.finfo(dtype).eps if np.issubdtype(np.dtype(dtype), np.floating) else np.finfo(np.float64).eps
    if not singular_values.shape[-1]:
        return np.zeros(singular_values.shape[:-1])
    return singular_values[..., 0] * RTOL_EPS * eps


# ----------------------------------------------------------------------------- checks
def _as_array(x, name: str) -> np.ndarray:
    """A finite float numpy array (from numpy or torch), or a ValueError naming ``name``.

    The array keeps the precision its values were COMPUTED in, which sets the rank tolerance
    (:func:`rank_tolerance`): float64 values that are all float32 numbers (a model's float32
    activations cast to float64 "for accuracy") carry float32's rounding, so they come back as
    float32. With float64's epsilon their rounding noise counted as rank, and the null spaces of
    the book's transformers and of MiniLM vanished (measured: [15 14 11 0] -> [0 0 0 0]).
    """
    t, _ = as_tensor(x, name, dtype=None)
    if not t.is_floating_point():
        raise ValueError(f"{name} must be a float array, got dtype {t.dtype}")
    check_finite(t, name)
    arr = t.detach().cpu().numpy()
    if arr.dtype == np.float64 and arr.size and np.array_equal(arr.astype(np.float32), arr):
        arr = arr.astype(np.float32)  # exact: every value is a float32
    return arr


def _check_lengths(lengths, B: int, S: int) -> np.ndarray:
    if lengths is None:
        return np.full(B, S, dtype=np.int64)
    arr = np.asarray(lengths)
    if arr.ndim != 1 or arr.shape[0] != B or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"lengths must be {B} integers (one per sentence), got {arr.dtype} of shape {arr.shape}")
    if (arr < 1).any() or (arr > S).any():
        raise ValueError(f"lengths must lie in [1, {S}] (the padded length), got {arr.min()}..{arr.max()}")
    return arr.astype(np.int64)


def _check_values(T, lengths) -> tuple[np.ndarray, np.ndarray]:
    T = _as_array(T, "T")
    if T.ndim < 3:
        raise ValueError(f"T must be (B, ..., S, d_v): sentences, any head axes, tokens, value dims; got shape {T.shape}")
    return T, _check_lengths(lengths, T.shape[0], T.shape[-2])


def _check_attention(A, T: np.ndarray) -> np.ndarray:
    A = _as_array(A, "A")
    S = T.shape[-2]
    if A.shape != (*T.shape[:-2], S, S):
        raise ValueError(f"A must be (B, ..., S, S) = {(*T.shape[:-2], S, S)} to match T {T.shape}, got {A.shape}")
    return A


def _by_length(lengths: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(n, the sentences of length n), for each distinct length."""
    for n in np.unique(lengths):
        yield int(n), np.flatnonzero(lengths == n)


def _left_basis(M: np.ndarray, dtype, full: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """U and a mask of U's columns that span the column space of each M (k, n, c).

    ``full``: U is (k, n, n), so the columns outside the mask span the left null space;
    otherwise U is (k, n, min(n, c)) (enough for the column space, and cheaper).
    """
    U, s, _ = np.linalg.svd(M, full_matrices=full)
    tol = rank_tolerance(s, dtype)
    ranks = (s > tol[..., None]).sum(-1)  # (k,)
    in_span = np.arange(U.shape[-1])[None, :] < ranks[:, None]
    return U, in_span


# ----------------------------------------------------------------------------- T, reduced
def reduce_values(values, output_projection) -> np.ndarray:
    """A (B, ..., S, r) stand-in for T = V W_O with T's singular values and left singular vectors.

    ``values``: V (B, ..., S, d_v), a head's value vectors per sentence; ``output_projection``:
    W_O (..., d_v, d_model), the head's slice of the output projection (one per head, shared by
    every sentence). With W_O = P diag(s) Q^T (thin SVD, the r singular values above
    :func:`rank_tolerance`), T = (V P_r diag(s_r)) Q_r^T and Q_r has orthonormal columns, so
    T' = V P_r diag(s_r) has the same singular values and left singular vectors as T: the same
    null space, rank and column-space projector, from an S x r matrix (r <= d_v) instead of
    S x d_model. W_O's SVD runs once per head, not once per sentence. Computed in float64 and
    returned in the inputs' precision, with the columns past a head's rank r set to 0 (so
    every head has d_v columns).
    """
    V = _as_array(values, "values")
    W = _as_array(output_projection, "output_projection")
    if V.ndim < 3 or W.ndim < 2 or W.shape[-2] != V.shape[-1] or W.shape[:-2] != V.shape[1:-2]:
        raise ValueError(
            f"values must be (B, ..., S, d_v) and output_projection (..., d_v, d_model) with the same head "
            f"axes and d_v; got {V.shape} and {W.shape}"
        )
    P, sv, _ = np.linalg.svd(W.astype(np.float64), full_matrices=False)  # (..., d_v, k), (..., k)
    keep = sv > rank_tolerance(sv, W.dtype)[..., None]
    scale = P * (sv * keep)[..., None, :]  # (..., d_v, k): P_r diag(s_r), zero past the rank
    dtype = np.result_type(V.dtype, W.dtype)  # keeps the data's precision (and so its rank tolerance)
    return (V.astype(np.float64) @ scale).astype(dtype)  # broadcasts over sentences


# ----------------------------------------------------------------------------- null space
def null_space_dim(T, lengths=None) -> np.ndarray:
    """d_s - rank(T) per sentence and head: the dimension of T's left null space.

    ``T``: (B, ..., S, d_v), the value vectors times the head's output projection, padded
    to S; ``lengths``: (B,) real lengths (None: all S). Each T is cropped to its sentence
    (n x d_v) and ranked with :func:`rank_tolerance`. Returns an int array (B, ...).
    Attention rows with an unchanged output also keep summing to 1, so the directions an
    attention row can move in without changing the output number ``null_space_dim`` or one
    fewer (see :func:`alternative_attention`).
    """
    T, lengths = _check_values(T, lengths)
    B, middle, d_v = T.shape[0], T.shape[1:-2], T.shape[-1]
    out = np.zeros((B, *middle), dtype=np.int64)
    for n, rows in _by_length(lengths):
        block = T[rows, ..., :n, :].astype(np.float64)  # (b, ..., n, d_v)
        s = np.linalg.svd(block, compute_uv=False)
        tol = rank_tolerance(s, T.dtype)
        out[rows] = n - (s > tol[..., None]).sum(-1)
    return out


# ----------------------------------------------------------------------------- effective attention
def effective_attention(A, T, lengths=None, *, with_null_dim: bool = False):
    """Brunner's effective attention: each row of A projected onto the column space of T.

    A - (its projection onto T's left null space) = A P with P = U_r U_r^T, U_r the left
    singular vectors of the cropped T with singular values above :func:`rank_tolerance`.
    The output is unchanged (A_eff T = A T) but the rows need not sum to 1 or stay
    non-negative: plot them on a diverging scale. Where n <= rank(T) it is A itself.
    ``A``: (B, ..., S, S) queries x keys; ``T``: (B, ..., S, d_v). Returns (B, ..., S, S)
    float64, 0 outside each sentence; with ``with_null_dim=True`` also
    :func:`null_space_dim` from the same SVDs, as ``(effective, null_dim)``.
    """
    T, lengths = _check_values(T, lengths)
    A = _check_attention(A, T)
    check_bool(with_null_dim, "with_null_dim")
    out = np.zeros(A.shape, dtype=np.float64)
    dims = np.zeros(T.shape[:-2], dtype=np.int64)
    for n, rows in _by_length(lengths):
        t = T[rows, ..., :n, :].astype(np.float64)
        a = A[rows, ..., :n, :n].astype(np.float64)
        flat_t = t.reshape(-1, n, t.shape[-1])
        U, in_span = _left_basis(flat_t, T.dtype, full=False)  # U (k, n, min(n, d_v))
        Ur = U * in_span[:, None, :]  # drop the columns outside the column space
        out[rows, ..., :n, :n] = ((a.reshape(-1, n, n) @ Ur) @ np.swapaxes(Ur, -1, -2)).reshape(a.shape)
        dims[rows] = (n - in_span.sum(-1)).reshape(dims[rows].shape)
    return (out, dims) if with_null_dim else out


# ----------------------------------------------------------------------------- alternative attention
class Alternative:
    """An attention with the same head output as A (from :func:`alternative_attention`).

    attention:     (B, ..., S, S) A + A~: rows sum to 1 and are >= 0 (up to rounding).
    change:        (B, ..., S, S) A~ itself.
    output_change: (B, ...) max |A~ T| over the sentence's rows and value dims (rounding: ~1e-15
                   relative in float64 arithmetic, more for float32 inputs).
    output_scale:  (B, ...) max |A T|, for scale.
    jsd:           (B, ..., S) JSD(A_i, A_i + A~_i) per query row (natural logs; 0 off the sentence).
    null_dim:      (B, ...) the dimension of the directions a row may move in
                   (left null space of [T, 1]).
    """

    def __init__(self, attention, change, output_change, output_scale, jsd, null_dim):
        self.attention, self.change = attention, change
        self.output_change, self.output_scale = output_change, output_scale
        self.jsd, self.null_dim = jsd, null_dim

    def __repr__(self) -> str:
        return (f"Alternative(shape={self.attention.shape}, max output change {self.output_change.max():.2e}, "
                f"mean row JSD {self.jsd.mean():.3f})")


def alternative_attention(A, T, lengths=None, *, seed: int = 0, target: str = "random",
                          n_candidates: int = 16, budget: int | None = None) -> Alternative:
    """A + A~ with the same head output as A: A~ T = 0, A~ 1 = 0 and A + A~ >= 0.

    Per query row i and candidate target distribution g (``target="random"``:
    ``n_candidates`` Dirichlet(0.5) draws over the sentence's tokens, seeded by (``seed``,
    sentence); ``"uniform"``: the one target 1/n): the direction d = the projection of
    g - A_i onto the left null space of [T, 1] (moving along it changes neither the output nor
    the row sum), and the step c d with the largest c that keeps A_i + c d >= 0 (positivity
    is the only limit). Of the candidates, the row keeps the one farthest from A_i in JSD.
    Where the null space is empty (n <= rank [T, 1]) A~_i = 0. A row whose small weights
    block every direction moves little: softmax rows have no exact zeros, but tiny weights
    stop a step early. Rows of A must be distributions over the sentence. ``budget``: elements of
    the (heads, rows, candidates, tokens) array one step builds (None: :data:`_CANDIDATE_BUDGET`);
    a smaller one holds less memory and gives the same numbers.
    """
    T, lengths = _check_values(T, lengths)
    A = _check_attention(A, T)
    seed = check_seed(seed)
    if target not in ("random", "uniform"):
        raise ValueError(f"target must be 'random' or 'uniform', got {target!r}")
    m = 1 if target == "uniform" else check_positive_int(n_candidates, "n_candidates")
    if budget is not None:
        check_positive_int(budget, "budget")
    middle = T.shape[1:-2]
    heads = int(np.prod(middle, dtype=np.int64))
    change = np.zeros(A.shape, dtype=np.float64)
    out_change = np.zeros(T.shape[:-2], dtype=np.float64)
    out_scale = np.zeros(T.shape[:-2], dtype=np.float64)
    jsd = np.zeros(A.shape[:-1], dtype=np.float64)
    null_dim = np.zeros(T.shape[:-2], dtype=np.int64)
    for n, rows in _by_length(lengths):
        a = A[rows, ..., :n, :n].astype(np.float64)
        try:
            check_distribution(torch.from_numpy(a), "A")
        except ValueError as err:
            raise ValueError(f"each row of A must be a distribution over the sentence's tokens: {err}") from None
        k = len(rows) * heads
        flat_a = np.clip(a, 0.0, None).reshape(k, n, n)
        flat_t = T[rows, ..., :n, :].astype(np.float64).reshape(k, n, -1)
        U, in_span = _left_basis(np.concatenate([flat_t, np.ones((k, n, 1))], axis=-1), T.dtype)  # [T, 1]
        N = U * (~in_span)[:, None, :]  # the null-space columns
        PN = N @ np.swapaxes(N, -1, -2)  # (k, n, n), symmetric: the projector onto the null space
        if target == "uniform":
            goals = np.full((len(rows), m, n), 1.0 / n)
        else:
            goals = np.stack([np.random.default_rng([seed, int(r)]).dirichlet(np.full(n, 0.5), size=m) for r in rows])
        goals = np.repeat(goals, heads, axis=0)  # (k, m, n): one set of targets per sentence
        best_delta = np.zeros((k, n, n))
        best_jsd = np.zeros((k, n))
        step = max(1, (budget or _CANDIDATE_BUDGET) // (n * n * m))  # heads per tensor program
        for lo in range(0, k, step):
            sl = slice(lo, lo + step)
            d = (goals[sl, None, :, :] - flat_a[sl, :, None, :]) @ PN[sl, None]  # (s, n rows, m, n)
            with np.errstate(divide="ignore", invalid="ignore"):
                limits = np.where(d < -1e-12, flat_a[sl, :, None, :] / -d, np.inf)
            c = limits.min(-1, keepdims=True)
            c = np.where(np.isfinite(c), c, 0.0)  # d >= 0 everywhere only when d = 0
            moved = np.clip(flat_a[sl, :, None, :] + c * d, 0.0, None)
            far = metrics.jsd(np.broadcast_to(flat_a[sl, :, None, :], moved.shape), moved, check=False)  # (s, n, m)
            pick = far.argmax(-1)
            best_delta[sl] = np.take_along_axis(c * d, pick[..., None, None], axis=2)[:, :, 0]
            best_jsd[sl] = np.take_along_axis(far, pick[..., None], axis=2)[..., 0]
        change[rows, ..., :n, :n] = best_delta.reshape(a.shape)
        out_change[rows] = np.abs(best_delta @ flat_t).max(axis=(-2, -1)).reshape(len(rows), *middle)
        out_scale[rows] = np.abs(flat_a @ flat_t).max(axis=(-2, -1)).reshape(len(rows), *middle)
        jsd[rows, ..., :n] = best_jsd.reshape(a.shape[:-1])
        null_dim[rows] = (~in_span).sum(-1).reshape(len(rows), *middle)
    attention = np.clip(A.astype(np.float64) + change, 0.0, None)
    return Alternative(attention, change, out_change, out_scale, jsd, null_dim)


#: Elements of the (heads, rows, candidates, tokens) array one step of alternative_attention builds.
_CANDIDATE_BUDGET = 2**22


# ----------------------------------------------------------------------------- a model's heads at once
def default_groups(lengths, T: int) -> dict[str, np.ndarray]:
    """The positions every BERT-style input has: [CLS] (the first) and [SEP] (the last real one), (B, T) bool each."""
    lengths = np.asarray(lengths)
    pos = np.arange(T)[None, :]
    return {"[CLS]": np.broadcast_to(pos == 0, (len(lengths), T)).copy(), "[SEP]": pos == (lengths[:, None] - 1)}


def trace_statistics(trace, groups: Mapping[str, np.ndarray] | None = None) -> pd.DataFrame:
    """Null space, raw vs effective attention, and attention mass per group, for every head of a trace.

    ``trace``: an :class:`attnlib.models.Trace` (``model.trace(batch)`` of either transformer
    family). ``groups``: name -> (B, T) bool, the key positions whose attention mass to report
    (default :func:`default_groups`: [CLS] and [SEP]; add e.g. punctuation). One row per
    sentence, layer and head: ``sentence`` (the row of the batch), ``layer``, ``head``,
    ``length`` (d_s), ``d_v``, ``null_dim`` (d_s - rank T, T = V W^O_h through
    :func:`reduce_values`), ``correlation`` (Pearson's r between the raw and the effective
    attention matrix over the sentence's d_s x d_s entries; exactly 1 where nothing is
    projected away), and per group ``raw <g>`` and ``effective <g>``: the attention the
    sentence's queries put on the group's keys, averaged over the queries. Heads are
    processed one layer at a time (effective attention is float64, (B, h, T, T)).
    """
    attentions, values = trace.attentions, trace.values
    if attentions.ndim != 5 or values.ndim != 5:
        raise ValueError("trace must be an attnlib.models.Trace with attentions (B, L, h, T, T) and values (B, L, h, T, d_v)")
    lengths = trace.lengths.detach().cpu().numpy().astype(np.int64)
    B, L, H, T, _ = attentions.shape
    groups = dict(default_groups(lengths, T) if groups is None else groups)
    for name, g in groups.items():
        g = np.asarray(g.detach().cpu() if isinstance(g, torch.Tensor) else g, dtype=bool)
        if g.shape != (B, T):
            raise ValueError(f"group {name!r} must be a (B, T) = ({B}, {T}) bool array, got {g.shape}")
        groups[name] = g
    real = np.arange(T)[None, :] < lengths[:, None]  # (B, T)
    pair = (real[:, :, None] & real[:, None, :])[:, None]  # (B, 1, T, T)
    count = (lengths.astype(np.float64) ** 2)[:, None]  # (B, 1)
    frames = []
    for layer in range(L):
        A = attentions[:, layer].detach().cpu().numpy()
        Tm = reduce_values(values[:, layer].detach().cpu().numpy(), trace.output_projection[layer].detach().cpu().numpy())
        eff, dims = effective_attention(A, Tm, lengths, with_null_dim=True)
        a = A.astype(np.float64) * pair  # 0 off the sentence (as eff is)
        # Pearson r over each sentence's d_s^2 entries from sums (einsum: no (B, h, T, T) temporaries)
        sa, se = a.sum((-2, -1)), eff.sum((-2, -1))
        cov = np.einsum("bhij,bhij->bh", a, eff) - sa * se / count
        va = np.einsum("bhij,bhij->bh", a, a) - sa * sa / count
        ve = np.einsum("bhij,bhij->bh", eff, eff) - se * se / count
        with np.errstate(invalid="ignore", divide="ignore"):
            corr = np.where((va > 1e-12 * count) & (ve > 1e-12 * count), cov / np.sqrt(va * ve), np.nan)
        corr = np.clip(np.where(dims == 0, 1.0, corr), -1.0, 1.0)  # nothing projected away: A_eff = A (r = 1)
        cols = {
            "sentence": np.repeat(np.arange(B), H), "layer": layer, "head": np.tile(np.arange(H), B),
            "length": np.repeat(lengths, H), "d_v": trace.head_dim, "null_dim": dims.reshape(-1),
            "correlation": corr.reshape(-1),
        }
        for name, g in groups.items():
            keys = (g & real).astype(np.float64)  # (B, T): the group's keys
            for kind, M in (("raw", a), ("effective", eff)):
                cols[f"{kind} {name}"] = (np.einsum("bhij,bj->bh", M, keys) / lengths[:, None]).reshape(-1)
        frames.append(pd.DataFrame(cols))
    return pd.concat(frames, ignore_index=True)


# ----------------------------------------------------------------------------- a corpus, batch by batch
def punctuation_mask(words) -> torch.Tensor:
    """(V,) bool over a vocabulary: True for a non-empty token made only of Unicode punctuation (P*).

    ``words``: the vocabulary's token strings in id order (``tokenizer.convert_ids_to_tokens``,
    ``vocab.itos``). Index it with a batch's token ids to get that batch's punctuation keys.
    """
    import unicodedata

    if isinstance(words, str):
        raise ValueError("words must be a sequence of token strings, not one string")
    words = list(words)
    if not all(isinstance(w, str) for w in words):
        raise ValueError("words must be token strings")
    return torch.tensor(
        [len(w) > 0 and all(unicodedata.category(c).startswith("P") for c in w) for w in words], dtype=torch.bool,
        device="cpu",
    )


_KEEP = (None, "test", "train")


def corpus_statistics(model, batches, punctuation=None, *, keep: str | None = None, store=None,
                      desc: str | None = None, progress: bool = True):
    """:func:`trace_statistics` over a corpus, one batch at a time; optionally its pooled and hidden states.

    ``model``: a transformer of either family (``model.trace(batch)``); ``batches``: its
    batches (``model.batches(texts)``, ``split.batches(n)``), each with ``index`` (the
    sentences' positions in the texts) and ``tokens``. ``punctuation``: (V,) bool over the
    vocabulary (:func:`punctuation_mask`), added as the group ``"punctuation"`` beside
    [CLS] and [SEP]; None: those two only. ``keep``: None -- statistics only; ``"test"`` --
    statistics, and the pooled states and (into ``store``, a
    :class:`attnlib.token_identity.HiddenStateStore`) the hidden states of the sentences of
    at most ``store.max_tokens`` tokens, marked as test sentences; ``"train"`` -- pooled and
    hidden states only, marked as training sentences. Runs without gradients; freed memory
    goes back to the system after every batch (:func:`attnlib.cpu.release_memory`).

    Returns ``(frame, pooled)``: the statistics of every batch in one frame, ``sentence``
    being the position in the texts (None with ``keep="train"``), and
    {position in the texts: pooled last state} (empty without ``keep``).
    """
    from tqdm.auto import tqdm

    from .. import cpu
    from .token_identity import HiddenStateStore

    if keep not in _KEEP:
        raise ValueError(f"keep must be one of {_KEEP}, got {keep!r}")
    if keep is not None and not isinstance(store, HiddenStateStore):
        raise ValueError(f"keep={keep!r} needs a token_identity.HiddenStateStore as store, got {type(store).__name__}")
    if punctuation is not None and (not isinstance(punctuation, torch.Tensor) or punctuation.dtype != torch.bool
                                    or punctuation.ndim != 1):
        raise ValueError("punctuation must be a (V,) bool tensor over the vocabulary (punctuation_mask), or None")
    check_bool(progress, "progress")
    frames, pooled = [], {}
    with torch.no_grad():
        for batch in tqdm(list(batches), desc=desc, unit="batch", mininterval=1.0, disable=not progress):
            tr = model.trace(batch)
            index = batch.index.cpu().numpy()
            if keep != "train":
                groups = default_groups(tr.lengths.cpu().numpy(), tr.attentions.shape[-1])
                if punctuation is not None:
                    where = tr.key_mask.device  # the model's device; the mask and the ids may be elsewhere
                    groups["punctuation"] = (punctuation.to(where)[batch.tokens.to(where)] & tr.key_mask).cpu().numpy()
                frame = trace_statistics(tr, groups)
                frame["sentence"] = index[frame["sentence"]]
                frames.append(frame)
            cpu.release_memory()  # freed memory back: Binder stops at 2 GB
            if keep:
                pooled.update(zip(index.tolist(), tr.pooled()))  # by position in the texts
                short = (tr.lengths <= store.max_tokens).nonzero().flatten()
                store.add(tr, short, train=keep == "train")
    return (pd.concat(frames, ignore_index=True) if frames else None), pooled


def null_space_table(panels: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """How closely each model sits on the line dim = max(0, d_s - d_v): one row per panel.

    ``panels``: name -> :func:`trace_statistics` frame (``length``, ``d_v``, ``null_dim``).
    Columns: (sentence, head) pairs; d_s > d_v (their share); dim = d_s - d_v where
    d_s > d_v and dim = 0 where d_s <= d_v (shares of those pairs, NaN where there are none);
    max dim.
    """
    rows = {}
    for name, frame in panels.items():
        missing = [c for c in ("length", "d_v", "null_dim") if c not in frame]
        if missing:
            raise ValueError(f"panel {name!r} lacks the columns {missing} (a trace_statistics frame)")
        long = frame["length"] > frame["d_v"]
        rows[name] = pd.Series(
            {
                "(sentence, head) pairs": len(frame),
                "d_s > d_v": float(long.mean()),
                "dim = d_s - d_v where d_s > d_v": (
                    float((frame.loc[long, "null_dim"] == frame.loc[long, "length"] - frame.loc[long, "d_v"]).mean())
                    if long.any()
                    else np.nan
                ),
                "dim = 0 where d_s <= d_v": (
                    float((frame.loc[~long, "null_dim"] == 0).mean()) if (~long).any() else np.nan
                ),
                "max dim": int(frame["null_dim"].max()),
            }
        )
    return pd.DataFrame(rows).T


def correlation_by_length(panels: Mapping[str, pd.DataFrame], bins) -> pd.DataFrame:
    """Mean, sd and count of the raw-vs-effective correlation per length bin, one column group per panel.

    ``panels``: name -> frame with ``length`` and ``correlation`` (:func:`trace_statistics`);
    ``bins``: increasing bin edges in tokens, each bin [left, right). Rows: the bins any
    panel fills.
    """
    edges = list(bins)
    if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"bins must be at least two increasing edges, got {edges}")
    tables = {}
    for name, frame in panels.items():
        which = pd.cut(frame["length"], bins, right=False)
        tables[name] = frame.groupby(which, observed=True)["correlation"].agg(["mean", "std", "size"])
    return pd.concat(tables, axis=1)



def alternative_reach(model, batches, *, seed: int = 0, n_candidates: int = 16, budget: int = 2**17,
                      desc: str | None = None, progress: bool = True) -> pd.DataFrame:
    """How far attention moves without changing the output: :func:`alternative_attention` at every
    head of every sentence longer than the head dimension, one row per (sentence, layer, head).

    ``model``: a transformer of either family (``model.trace(batch)``); ``batches``: its batches,
    each with ``index`` (the sentences' positions in the texts). Sentences of at most d_v tokens
    are skipped: their null space is empty and nothing can move. ``T`` enters through
    :func:`reduce_values` (the same left null space as T = V W^O_h, so the same moves), in the
    trace's precision (the rank tolerance follows it). Each row of A moves along the null space of
    [T, 1] towards the farthest of ``n_candidates`` seeded targets as far as positivity allows: a
    *lower bound* on how far that row can move, not the farthest feasible row (maximising a JSD
    over the feasible set is not a convex problem).

    Columns: ``sentence`` (its position in the texts), ``layer``, ``head``, ``length`` (d_s),
    ``d_v``, ``null_dim`` (of [T, 1]), ``mean_jsd`` (the mean over the sentence's query rows of
    JSD(A_i, A_i + A~_i)) and ``max_jsd`` (its largest row). Runs without gradients, one layer
    of one batch at a time, with a small ``budget`` (:func:`alternative_attention`; about 4 MB
    per array): the numbers do not depend on it, the memory a chapter holds does.
    """
    from tqdm.auto import tqdm

    from .. import cpu

    seed = check_seed(seed)
    check_positive_int(n_candidates, "n_candidates")
    check_bool(progress, "progress")
    frames = []
    with torch.no_grad():
        for batch in tqdm(list(batches), desc=desc, unit="batch", mininterval=1.0, disable=not progress):
            tr = model.trace(batch)
            lengths = tr.lengths.detach().cpu().numpy().astype(np.int64)
            keep = np.flatnonzero(lengths > tr.head_dim)
            if not len(keep):
                continue
            n = lengths[keep]
            index = batch.index.cpu().numpy()[keep]
            L, H = tr.attentions.shape[1], tr.attentions.shape[2]
            rows = np.arange(tr.attentions.shape[-1])[None, None, :] < n[:, None, None]  # (b, 1, T)
            for layer in range(L):
                A = tr.attentions[keep, layer].detach().cpu().numpy()
                Tm = reduce_values(tr.values[keep, layer].detach().cpu().numpy(),
                                   tr.output_projection[layer].detach().cpu().numpy())
                alt = alternative_attention(A, Tm, n, seed=seed, n_candidates=n_candidates, budget=budget)
                jsd = np.where(rows, alt.jsd, 0.0)  # (b, h, T): 0 past the sentence
                frames.append(pd.DataFrame({
                    "sentence": np.repeat(index, H), "layer": layer, "head": np.tile(np.arange(H), len(keep)),
                    "length": np.repeat(n, H), "d_v": tr.head_dim, "null_dim": alt.null_dim.reshape(-1),
                    "mean_jsd": (jsd.sum(-1) / n[:, None]).reshape(-1), "max_jsd": jsd.max(-1).reshape(-1),
                }))
            del tr
            cpu.release_memory()
    columns = ["sentence", "layer", "head", "length", "d_v", "null_dim", "mean_jsd", "max_jsd"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)
