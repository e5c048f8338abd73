"""Distances between distributions and rank agreement, batched over leading dimensions.

* :func:`tvd` -- total variation distance, TVD(p, q) = 1/2 sum_i |p_i - q_i|, in [0, 1].
* :func:`kl` -- Kullback-Leibler divergence KL(p || q) = sum_i p_i log(p_i / q_i) (nats).
* :func:`jsd` -- Jensen-Shannon divergence, 1/2 KL(p || m) + 1/2 KL(q || m) with
  m = (p + q) / 2, natural logs, so 0 <= JSD <= ln 2 ~= 0.693 (Lin 1991; the scale used
  by Jain & Wallace 2019).
* :func:`kendall_tau` -- Kendall's tau-b with its two-sided p-value, identical to
  :func:`scipy.stats.kendalltau` (ties handled, exact p-value where SciPy uses it).

Conventions shared by all four:

* Inputs are array-like or torch tensors of shape ``(..., T)``; the last dimension is
  the support (tokens), every leading dimension is a batch dimension and the result
  has shape ``(...)``. Torch in gives torch out (differentiable for tvd/kl/jsd);
  anything else gives NumPy (a Python float for a single row).
* Padded rows: pass ``mask`` (bool, same shape; True = real entry) or ``lengths``
  (shape ``(...)``; the first ``lengths`` entries are real). Entries outside the mask
  are ignored.
* Distributions are checked: no NaN or inf, no negative entries, and each row (over
  the masked entries) must sum to 1 within an absolute tolerance of
  ``attnlib._checks.SUM_TOL`` = 1e-3. Bad input raises ``ValueError`` that says what
  is wrong. ``check=False`` skips the checks inside hot optimisation loops.
* Zeros are fine: logs are taken of values clamped at ``EPS`` = 1e-10, so a zero
  entry contributes exactly 0 to JSD and gradients stay finite. For KL this means
  that where q_i = 0 < p_i the true (infinite) divergence is reported as the large
  finite p_i * log(p_i / 1e-10), as in J&W's implementation.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch

from . import portable
from ._checks import (
    as_tensor,
    check_distribution,
    check_finite,
    check_same_shape,
    resolve_mask,
    to_output,
)

__all__ = ["tvd", "kl", "jsd", "kendall_tau", "spearman", "attention_positions", "residue_bound", "EPS"]

EPS = 1e-10


def _prepare_pair(p, q, mask, lengths, check: bool, names=("p", "q")):
    pt, p_torch = as_tensor(p, names[0], dtype=None)
    qt, q_torch = as_tensor(q, names[1], dtype=None)
    if not pt.is_floating_point():
        pt = pt.to(torch.float64)
    if not qt.is_floating_point():
        qt = qt.to(torch.float64)
    if pt.dtype != qt.dtype:
        dtype = torch.promote_types(pt.dtype, qt.dtype)
        pt, qt = pt.to(dtype), qt.to(dtype)
    check_same_shape(pt, qt, names)
    m = resolve_mask(pt.shape, mask, lengths, device=pt.device)
    if check:
        check_distribution(pt, names[0], m)
        check_distribution(qt, names[1], m)
    if m is not None:
        m = m.to(pt.dtype)
    return pt, qt, m, (p_torch or q_torch)


def _kl_terms(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Elementwise p * (log p - log q), exactly 0 where p = 0, with finite gradients."""
    return p * (torch.log(p.clamp_min(EPS)) - torch.log(q.clamp_min(EPS)))


def _masked_sum(x: torch.Tensor, m: torch.Tensor | None) -> torch.Tensor:
    return (x * m).sum(-1) if m is not None else x.sum(-1)


def tvd(p, q, *, mask=None, lengths=None, check: bool = True):
    """Total variation distance 1/2 sum_t |p_t - q_t| over the last dimension.

    For two binary outputs [1-a, a] and [1-b, b] it equals |a - b|, the "output
    difference" of Jain & Wallace 2019 (Alg. 2-3). Range [0, 1].
    """
    pt, qt, m, was_torch = _prepare_pair(p, q, mask, lengths, check)
    return to_output(0.5 * _masked_sum((pt - qt).abs(), m), was_torch)


def kl(p, q, *, mask=None, lengths=None, check: bool = True):
    """Kullback-Leibler divergence KL(p || q) = sum_t p_t log(p_t / q_t) in nats.

    Not symmetric: ``kl(p, q)`` penalises mass of p where q has little. This is the
    order in Wiegreffe & Pinter 2019's adversarial loss, KL(alpha_adv || alpha_base).
    """
    pt, qt, m, was_torch = _prepare_pair(p, q, mask, lengths, check)
    return to_output(_masked_sum(_kl_terms(pt, qt), m), was_torch)


def jsd(p, q, *, mask=None, lengths=None, check: bool = True):
    """Jensen-Shannon divergence with natural logs: symmetric, 0 <= JSD <= ln 2.

    JSD(p, q) = 1/2 KL(p || m) + 1/2 KL(q || m), m = (p + q) / 2. It is 0 iff p = q and
    ln 2 iff p and q have disjoint supports. The book counts an adversarial attention as very
    different when JSD >= 0.49 (about 70% of the maximum; see :mod:`attnlib.published`).
    """
    pt, qt, m, was_torch = _prepare_pair(p, q, mask, lengths, check)
    mid = 0.5 * (pt + qt)
    value = 0.5 * _masked_sum(_kl_terms(pt, mid), m) + 0.5 * _masked_sum(_kl_terms(qt, mid), m)
    return to_output(value.clamp_min(0.0), was_torch)


# ----------------------------------------------------------------------------- Kendall tau

#: Largest n for which SciPy (method="auto") uses the exact null distribution when there are no ties.
_EXACT_MAX_N = 33


@lru_cache(maxsize=1)
def _kendall_exact_cdf() -> torch.Tensor:
    """P(number of inversions <= c) for a random permutation of n, n <= 33 (Mahonian numbers).

    Row n, column c; computed with exact integers, then divided by n!.
    """
    max_c = _EXACT_MAX_N * (_EXACT_MAX_N - 1) // 2
    table = np.ones((_EXACT_MAX_N + 1, max_c + 1), dtype=np.float64)
    counts = [1]  # n = 1: one permutation, zero inversions
    for n in range(2, _EXACT_MAX_N + 1):
        new = [0] * (len(counts) + n - 1)
        running = 0
        for c in range(len(new)):  # new[c] = sum_{j=0}^{n-1} counts[c - j]
            if c < len(counts):
                running += counts[c]
            if c - n >= 0:
                running -= counts[c - n]
            new[c] = running
        counts = new
        total = math.factorial(n)
        cum = 0
        for c, k in enumerate(counts):
            cum += k
            table[n, c] = cum / total
    return torch.from_numpy(table)


def _exact_pvalue(n: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """SciPy's exact two-sided p-value for tau without ties; c = min(dis, total - dis)."""
    table = _kendall_exact_cdf()
    small = n <= _EXACT_MAX_N
    p = torch.ones_like(c, dtype=torch.float64)
    if small.any():
        p[small] = 2.0 * table[n[small], c[small]]
    big = ~small
    if big.any():  # SciPy only goes exact for n > 33 when c <= 1: 2/n! or 2/(n-1)!
        nb = n[big].to(torch.float64)
        lg = torch.where(c[big] == 0, torch.lgamma(nb + 1), torch.lgamma(nb))
        p[big] = torch.exp(math.log(2.0) - lg)
    return p.clamp(max=1.0)


@lru_cache(maxsize=8)
def _pair_index(T: int):
    """Indices (i, j), i < j, of all unordered pairs of T positions."""
    i, j = torch.triu_indices(T, T, offset=1)
    return i, j


def _tau_chunk(x: torch.Tensor, y: torch.Tensor, valid: torch.Tensor):
    """Tau-b and SciPy's two-sided p-value for each row of x, y (N, T) over the valid entries."""
    T = x.shape[1]
    i, j = _pair_index(T)
    all_valid = bool(valid.all())
    # Signs of every pair difference, (N, P). float32 is exact here: values in {-1, 0, 1}
    # and row sums of at most P < 2**24 terms.
    sx = torch.sign(x[:, i] - x[:, j]).to(torch.float32)
    sy = torch.sign(y[:, i] - y[:, j]).to(torch.float32)
    if all_valid:
        pair = None
        prod = sx * sy
    else:
        pair = (valid[:, i] & valid[:, j]).to(torch.float32)  # both ends are real tokens
        prod = sx * sy * pair
    con_minus_dis = prod.sum(1, dtype=torch.float64)
    n = valid.sum(1)
    nf = n.to(torch.float64)
    tot = nf * (nf - 1) / 2
    vf = valid.to(torch.float64)

    def tie_stats(values, s):
        tied = s == 0
        if pair is not None:
            tied = tied & (pair > 0)
        n_tied = tied.sum(1, dtype=torch.float64)
        if not bool((n_tied > 0).any()):
            zero = torch.zeros_like(n_tied)
            return n_tied, zero, zero
        # size of each valid element's tie group: the valid elements equal to it, itself included
        equal = (values[:, :, None] == values[:, None, :]) & valid[:, None, :]
        group = equal.sum(2, dtype=torch.float64) * vf
        t0 = ((group - 1) * (group - 2) * vf).sum(1)  # = sum over groups t(t-1)(t-2)
        t1 = ((group - 1) * (2 * group + 5) * vf).sum(1)  # = sum over groups t(t-1)(2t+5)
        return n_tied, t0, t1

    xtie, x0, x1 = tie_stats(x, sx)
    ytie, y0, y1 = tie_stats(y, sy)
    degenerate = (xtie == tot) | (ytie == tot)
    denom = portable.sqrt(tot - xtie) * portable.sqrt(tot - ytie)
    tau = torch.where(degenerate, torch.nan, con_minus_dis / torch.where(degenerate, 1.0, denom))
    tau = tau.clamp(-1.0, 1.0)

    # Asymptotic p-value with the tie-corrected variance (Kendall 1945), as SciPy computes it.
    m = nf * (nf - 1)
    var = (m * (2 * nf + 5) - x1 - y1) / 18 + (2 * xtie * ytie) / m
    safe = torch.where(nf > 2, 9 * m * (nf - 2), torch.ones_like(m))
    var = var + torch.where(nf > 2, x0 * y0 / safe, torch.zeros_like(m))
    z = con_minus_dis / portable.sqrt(var)
    pvalue = torch.special.erfc(z.abs() / math.sqrt(2.0))

    # Exact p-value where SciPy uses it: no ties, and n <= 33 or at most one discordant pair
    # (or one concordant). Without ties C + D = n0, so D = (n0 - (C - D)) / 2.
    no_ties = (xtie == 0) & (ytie == 0)
    dis = torch.round((tot - con_minus_dis) / 2)
    c = torch.minimum(dis, tot - dis)
    use_exact = no_ties & ((n <= _EXACT_MAX_N) | (c <= 1))
    if use_exact.any():
        pvalue[use_exact] = _exact_pvalue(n[use_exact], c[use_exact].to(torch.int64))
    pvalue = torch.where(degenerate, torch.nan, pvalue)
    return tau, pvalue


def kendall_tau(x, y, *, mask=None, lengths=None, chunk_elements: int = 250_000):
    """Kendall's tau-b and its two-sided p-value per row, agreeing with ``scipy.stats.kendalltau``.

    tau_b = (C - D) / sqrt((n0 - n1)(n0 - n2)), with C, D the concordant and discordant
    pairs, n0 = n(n-1)/2 and n1, n2 the pairs tied in x and in y (Kendall 1945). The
    p-value is SciPy's ``method="auto"``: exact (the null distribution of inversions)
    when there are no ties and n <= 33, else the normal approximation with the
    tie-corrected variance. Jain & Wallace 2019 use it to compare attention with
    gradient and leave-one-out importance.

    Returns ``(tau, pvalue)``, each of shape ``x.shape[:-1]``. A row in which x or y is
    constant has no defined tau: both are NaN there (as in SciPy). Rows are processed
    in chunks of about ``chunk_elements`` pair entries to bound memory.

    Raises ``ValueError`` for shape mismatch, NaN or inf, or a row with fewer than 2
    (unmasked) entries.
    """
    xt, x_torch = as_tensor(x, "x")
    yt, y_torch = as_tensor(y, "y")
    was_torch = x_torch or y_torch
    device = xt.device
    xt, yt = xt.detach().to("cpu", torch.float64), yt.detach().to("cpu", torch.float64)
    check_same_shape(xt, yt, ("x", "y"))
    valid = resolve_mask(xt.shape, mask, lengths)
    lead, T = xt.shape[:-1], xt.shape[-1]
    valid = torch.ones(xt.shape, dtype=torch.bool) if valid is None else valid.cpu()
    xt, yt = xt.masked_fill(~valid, 0.0), yt.masked_fill(~valid, 0.0)  # padding may hold anything
    check_finite(xt, "x")
    check_finite(yt, "y")
    xf, yf, vf = xt.reshape(-1, T), yt.reshape(-1, T), valid.reshape(-1, T)
    counts = vf.sum(1)
    if xf.shape[0] and counts.min() < 2:
        bad = int((counts < 2).sum())
        raise ValueError(f"Kendall tau needs at least 2 tokens per row; {bad} row(s) have fewer")
    # Rows of similar length together, each chunk cropped to its longest row: ragged rows (IMDB
    # reviews of 50 to 1,000 tokens) cost sum(n^2), not rows x T^2. Valid entries move to the front
    # of their row in their order (tau counts pairs, so the same pairs give the same tau and p).
    n_rows = xf.shape[0]
    tau_flat = torch.empty(n_rows, dtype=torch.float64)
    p_flat = torch.empty(n_rows, dtype=torch.float64)
    if n_rows:
        front = torch.argsort((~vf).to(torch.int8), dim=1, stable=True)
        xf, yf, vf = xf.gather(1, front), yf.gather(1, front), vf.gather(1, front)
        order = torch.argsort(counts, stable=True)
        sorted_counts = counts[order]
        start = 0
        while start < n_rows:
            rows = max(1, chunk_elements // max(1, int(sorted_counts[start]) ** 2))
            end = min(n_rows, start + rows)
            while end - start > 1 and (end - start) * int(sorted_counts[end - 1]) ** 2 > 2 * chunk_elements:
                end = start + (end - start) // 2
            idx = order[start:end]
            L = int(sorted_counts[end - 1])
            t, p = _tau_chunk(xf[idx, :L], yf[idx, :L], vf[idx, :L])
            tau_flat[idx], p_flat[idx] = t, p
            start = end
    tau, pvalue = tau_flat.reshape(lead), p_flat.reshape(lead)
    if was_torch:
        tau, pvalue = tau.to(device), pvalue.to(device)
    return to_output(tau, was_torch), to_output(pvalue, was_torch)


def spearman(x, y, *, mask=None, lengths=None):
    """Spearman's rank correlation per row, agreeing with ``scipy.stats.spearmanr`` on each row.

    rho = Pearson correlation of the ranks of x and of y over the row's valid entries, ties
    given their average rank. Abnar & Zuidema 2020 (Tables 1-3) use it to compare raw
    attention, rollout and flow with blank-out and gradient importance. Batched over rows
    (SciPy's ``rankdata`` along the last axis, padding as NaN); no loop over rows.

    Returns rho of shape ``x.shape[:-1]`` (a tensor if an input was one). A row in which x or y
    is constant over its valid entries has no defined rho: NaN there (as in SciPy). Raises
    ``ValueError`` for shape mismatch, NaN or inf among the valid entries, or a row with fewer
    than 2 valid entries.
    """
    from scipy.stats import rankdata

    xt, x_torch = as_tensor(x, "x")
    yt, y_torch = as_tensor(y, "y")
    check_same_shape(xt, yt, ("x", "y"))
    valid = resolve_mask(xt.shape, mask, lengths)
    valid = np.ones(tuple(xt.shape), dtype=bool) if valid is None else valid.cpu().numpy()
    xs = xt.detach().to("cpu", torch.float64).numpy()
    ys = yt.detach().to("cpu", torch.float64).numpy()
    if not (np.isfinite(xs[valid]).all() and np.isfinite(ys[valid]).all()):
        raise ValueError("x and y must be finite on the valid entries")
    counts = valid.sum(-1)
    if counts.size and counts.min() < 2:
        raise ValueError(f"Spearman's rho needs at least 2 entries per row; {int((counts < 2).sum())} row(s) have fewer")
    rx = rankdata(np.where(valid, xs, np.nan), axis=-1, nan_policy="omit")
    ry = rankdata(np.where(valid, ys, np.nan), axis=-1, nan_policy="omit")
    rx, ry = np.where(valid, rx, 0.0), np.where(valid, ry, 0.0)
    n = np.maximum(counts, 1)
    dx = np.where(valid, rx - (rx.sum(-1) / n)[..., None], 0.0)
    dy = np.where(valid, ry - (ry.sum(-1) / n)[..., None], 0.0)
    sxx, syy, sxy = (dx * dx).sum(-1), (dy * dy).sum(-1), (dx * dy).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where((sxx > 0) & (syy > 0), sxy / np.sqrt(sxx * syy), np.nan)
    rho = np.clip(rho, -1.0, 1.0)
    if x_torch or y_torch:
        return torch.as_tensor(rho, device=xt.device)
    return rho


def attention_positions(attention) -> dict:
    """Where ragged attention distributions put their weight (one array per instance, real tokens only).

    Returns the mean over instances of the weight on the first and on the last token, the
    share of instances whose single largest weight is on the first / on the last token
    (a tie for the largest weight counts for neither, so uniform attention gives 0), and
    the mean largest weight. No loop over instances: one flat array and ``reduceat``.
    Chapters 8-9 use it to show that a BiLSTM's attention can favour summary positions.
    """
    arrays = [np.asarray(a, dtype=np.float64).ravel() for a in attention]
    if not arrays:
        raise ValueError("attention must hold at least one instance")
    lengths = np.fromiter(map(len, arrays), dtype=np.int64, count=len(arrays))
    if (lengths < 1).any():
        raise ValueError(f"every instance needs at least one weight; instance {int(np.argmin(lengths))} has none")
    flat = np.concatenate(arrays)
    if not np.isfinite(flat).all():
        raise ValueError("attention weights must be finite")
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    peak = np.maximum.reduceat(flat, starts)
    n_at_peak = np.add.reduceat(flat == np.repeat(peak, lengths), starts)
    first, last = flat[starts], flat[starts + lengths - 1]
    unique = n_at_peak == 1
    return {
        "mean weight on first token": float(first.mean()),
        "mean weight on last token": float(last.mean()),
        "peak on first token": float(np.mean(unique & (first == peak))),
        "peak on last token": float(np.mean(unique & (last == peak))),
        "mean peak weight": float(peak.mean()),
    }


def residue_bound(value) -> str:
    """Rounding residue shown as a bound, never with its noise digits: 6.42e-09 -> ``"below 1e-8"``.

    A residual that exact arithmetic makes 0 (a float32 model's output moved by 2e-7, a null-space
    product of 6e-9) carries digits that follow whichever kernels ran: they differ between CPUs
    and mean nothing. The bound is the next power of ten above ``|value|`` (``"0"`` for an exact 0).
    """
    x = abs(float(value))
    if not math.isfinite(x):
        raise ValueError(f"residue_bound takes a finite number, got {value!r}")
    if x == 0.0:
        return "0"
    exponent = math.floor(math.log10(x)) + 1
    return f"below 1e{exponent}" if exponent < 0 else f"below {10 ** exponent:g}"
