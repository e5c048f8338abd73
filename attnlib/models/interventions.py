"""Interventions: edits of attention rows (…, T) under a key mask, written once for every model.

An experiment takes the model's own attention at a site (:class:`attnlib.models.protocol.SiteState`),
edits it with one of these functions, and decodes the result with ``model.decode_at``. Each
works on rows of any leading shape (a classifier's (B, T), a transformer head's (B, Q, T)),
with candidates along extra axes right after the batch axis, and puts weight only on keys:

* :func:`permute_rows` with :func:`permutation_sources` -- permute among the real tokens
  (Jain & Wallace 2019, Alg. 2);
* :func:`erase_rows` -- erase some weights and renormalise (Serrano & Smith 2019);
* :func:`uniform_rows` -- 1 / T over the keys (Wiegreffe & Pinter 2019's baseline);
* :func:`replace_rows` -- any given distributions (checked), e.g. an adversary's;
* :func:`project_rows` -- the rows projected onto a subspace of R^T, e.g. the column space
  of a head's value-output matrix (effective attention, Brunner et al. 2020). A projected
  row need not sum to 1 or stay non-negative.

These are tensor functions without model or grad-mode side effects; the experiments call
them inside :mod:`attnlib.runs`'s loop.
"""
from __future__ import annotations

import numpy as np
import torch

from .._checks import check_distribution

__all__ = [
    "real_span",
    "permutation_sources",
    "permute_rows",
    "erase_rows",
    "uniform_rows",
    "replace_rows",
    "project_rows",
]


def real_span(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """First key position and number of keys per row of a (B, T) key mask; the keys must be contiguous (<SOS> w1 ... wn <EOS> PAD ...)."""
    n_real = mask.sum(-1)
    first = mask.to(torch.int8).argmax(-1)
    pos = torch.arange(mask.shape[-1], device=mask.device)
    contiguous = (pos >= first[:, None]) & (pos < (first + n_real)[:, None])
    if not torch.equal(contiguous, mask):
        raise ValueError("the real tokens of each instance must be contiguous: <SOS> w1 ... wn <EOS> PAD ...")
    return first, n_real


def permutation_sources(mask: torch.Tensor, n_permutations: int, rng: np.random.Generator) -> torch.Tensor:
    """Random source positions (n, P, T) for :func:`permute_rows`: alpha_p[t] = alpha[src[p, t]] permutes only the keys in ``mask``.

    Seeded by ``rng`` (a NumPy Generator): the same generator state gives the same permutations.

    One sort of random integer keys per row, each key carrying its position in its low b
    bits (T <= 2^b). With W-bit keys (W = 32, or 64 beyond 1,024 positions): positions
    before the real tokens (<SOS>) get the key t; real tokens r * 2^(b+1) + 2^b + t with r
    uniform in [0, 2^R), R = W - 2 - b; positions after them (<EOS>, padding)
    2^(W-1) + t. Sorting puts <SOS> first, then the real positions in uniformly random
    order, then <EOS> and padding in order, so ``sorted & (2^b - 1)`` is the identity off
    the real tokens and a uniformly random permutation on them. (Equal r, probability
    about n^2 / 2^(R+1) per row with R >= 20, fall back to position order: negligible.)
    The r are bits of NumPy's PCG64 raw output, about 4x faster than ``torch.randint``;
    sorting packed integers with NumPy is about 5x faster than an argsort of float keys.
    Making the keys is most of the cost of a permutation test; the decode is the smaller part.
    """
    first, _ = real_span(mask.cpu())
    mask = mask.cpu().numpy()
    n, T = mask.shape
    b = max(1, (T - 1).bit_length())
    dtype, width = (np.uint32, 32) if b <= 10 else (np.uint64, 64)
    pos = np.arange(T, dtype=dtype)
    count = n * n_permutations * T
    keys = rng.bit_generator.random_raw(-(-count * width // 64)).view(dtype)[:count].reshape(n, n_permutations, T)
    # per (row, position): which bits stay random (bits b+1 .. W-2 on real tokens, none
    # elsewhere) and the bits to set; two in-place broadcasts over the P permutations
    random_bits = np.where(mask, dtype(((1 << (width - 1)) - 1) & ~((2 << b) - 1)), dtype(0))  # (n, T)
    after = pos | dtype(1 << (width - 1))
    set_bits = np.where(mask, pos | dtype(1 << b), np.where(pos < first.cpu().numpy()[:, None], pos, after))
    np.bitwise_and(keys, random_bits[:, None, :], out=keys)
    np.bitwise_or(keys, set_bits[:, None, :], out=keys)
    keys.sort(axis=-1)
    return torch.from_numpy(np.bitwise_and(keys, (1 << b) - 1, dtype=np.int64))


def permute_rows(attention: torch.Tensor, sources: torch.Tensor) -> torch.Tensor:
    """P permutations of each row: out[b, p, ..., t] = attention[b, ..., sources[b, p, ..., t]].

    ``attention`` (B, ..., T); ``sources`` (B, P, ..., T) long, e.g. :func:`permutation_sources`
    (which permutes only the real tokens, so each permuted row is again a distribution over them).
    """
    B, P = sources.shape[:2]
    expanded = attention.unsqueeze(1).expand(B, P, *attention.shape[1:])
    return expanded.gather(-1, sources.to(attention.device))


def erase_rows(attention: torch.Tensor, mask: torch.Tensor, remove: torch.Tensor):
    """Erase-and-renormalise (Serrano & Smith 2019): alpha'_t = alpha_t [t kept] / sum_s alpha_s [s kept].

    ``attention`` (B, ..., T) rows and a ``mask`` that broadcasts to them (the keys);
    ``remove`` (B, K..., ..., T) bool: candidate axes after the batch axis, as many as it has
    more dimensions than ``attention``. Returns alpha' with the shape of ``remove`` and its
    pre-normalisation mass (…, 1). Rows that keep no mass are left at 0: the caller checks
    the mass (no validation here; :func:`attnlib.erasure.erased_attention` validates).
    """
    kept = attention * mask
    for _ in range(remove.ndim - kept.ndim):
        kept = kept.unsqueeze(1)
    # One new (n, K, T) tensor, divided in place: on CPU every fresh tensor of this size
    # costs page faults comparable to the arithmetic itself.
    kept = torch.where(remove, torch.zeros((), dtype=kept.dtype, device=kept.device), kept)
    total = kept.sum(-1, keepdim=True)
    return kept.div_(torch.where(total > 0, total, torch.ones_like(total))), total


def uniform_rows(mask: torch.Tensor) -> torch.Tensor:
    """alpha_t = 1 / T over the keys, 0 elsewhere. (…, T) bool -> (…, T) float."""
    m = mask.to(torch.get_default_dtype())
    return m / m.sum(-1, keepdim=True)


def replace_rows(attention: torch.Tensor, given, mask: torch.Tensor, *, check: bool = True) -> torch.Tensor:
    """``given`` rows in place of ``attention``'s, broadcast to its shape (candidates may come first).

    ``given`` (B, K..., ..., T) or anything that broadcasts to ``attention`` (B, ..., T); with
    ``check`` its rows must be distributions over the keys of ``mask`` and exactly 0 off them.
    Returns a tensor of ``attention``'s dtype and device.
    """
    given = torch.as_tensor(given).to(attention.device, attention.dtype)
    if given.ndim < attention.ndim:
        given = given.expand_as(attention)
    if given.shape[0] != attention.shape[0] or given.shape[-1] != attention.shape[-1]:
        raise ValueError(f"given attention {tuple(given.shape)} does not fit rows {tuple(attention.shape)}")
    if check:
        keys = mask.reshape(mask.shape[0], *([1] * (given.ndim - mask.ndim)), *mask.shape[1:]).expand_as(given)
        if bool((given.detach().masked_select(~keys) != 0).any()):
            raise ValueError("given attention must be 0 off the keys (<SOS>, <EOS> and padding)")
        check_distribution(given.detach(), "given attention", keys)
    return given


def project_rows(attention: torch.Tensor, basis: torch.Tensor) -> torch.Tensor:
    """Rows projected onto the span of ``basis``'s orthonormal columns: a U U^T.

    ``attention`` (…, T); ``basis`` (…, T, r) with orthonormal columns (e.g. the left singular
    vectors of a head's value-output matrix for its nonzero singular values), broadcast over
    the leading axes. For effective attention, ``basis`` spans the column space of T, so the
    part of each row in T's left null space -- which does not change the head's output -- is
    removed.
    """
    coefficients = torch.matmul(attention.unsqueeze(-2), basis)  # (…, 1, r)
    return torch.matmul(coefficients, basis.transpose(-1, -2)).squeeze(-2)
