"""Attention rollout through a transformer's layers (Abnar & Zuidema 2020, *Quantifying Attention Flow*).

A head's attention says how a layer mixes the states of the layer below, not how the output
depends on the input words: after the first layer a position already mixes every word.
Abnar & Zuidema follow the mixing down the layers. With the heads averaged and the residual
connection accounted for as an identity,

    A^_l = residual * I + (1 - residual) * mean_h A_{l,h}        (rows renormalised)

over the real positions (A&Z: residual = 0.5), and the *rollout* multiplies them upward::

    R_0 = A^_0,    R_l = A^_l R_{l-1}.

Row q of R_l is how much position q after layer l draws on each input token; every row is
a distribution over the real positions (a product of row-stochastic matrices).

* :func:`rollout` -- every layer's rollout (B, L, T, T) from attentions (B, L, h, T, T), as in
  ``model.trace(batch).attentions`` (:class:`attnlib.models.Trace`), batched over sentences
  (a loop over the few layers only).
* :func:`rollout_cls` -- the row the book reads: the last layer's [CLS] (<SOS>) row (B, T),
  computed as a row vector times the layers' matrices (no T x T products).

A&Z's SST script reads ``.max(axis=0)`` over positions rather than the [CLS] row the paper
describes; the book reads the [CLS] row, the one the classifier's output reads. *Attention
flow* (max-flow on the layer graph with A^ as capacities) comes in a later chapter and will
live here as well.
"""
from __future__ import annotations

import numbers

import numpy as np
import torch

from .._checks import SUM_TOL, check_finite
from ..models import Trace

__all__ = ["RESIDUAL", "rollout", "rollout_cls"]

#: A&Z's weight of the identity (the residual connection) in A^ = r I + (1 - r) A.
RESIDUAL = 0.5


def _check_residual(residual) -> float:
    if isinstance(residual, bool) or not isinstance(residual, numbers.Real) or not np.isfinite(residual):
        raise ValueError(f"residual must be a number in [0, 1), got {residual!r}")
    if not 0 <= residual < 1:
        raise ValueError(
            f"residual must lie in [0, 1) (the identity's weight; 1 would ignore the attention), got {residual!r}"
        )
    return float(residual)


def _check_inputs(attentions, key_mask) -> tuple[torch.Tensor, torch.Tensor]:
    """attentions (B, L, h, T, T) float and key_mask (B, T) bool, validated; the mask on their device."""
    if not isinstance(attentions, torch.Tensor) or not attentions.is_floating_point():
        raise ValueError(
            f"attentions must be a float tensor (B, layers, heads, T, T) such as model.trace(batch).attentions, "
            f"got {type(attentions).__name__ if not isinstance(attentions, torch.Tensor) else attentions.dtype}"
        )
    if attentions.ndim != 5 or attentions.shape[-1] != attentions.shape[-2]:
        raise ValueError(f"attentions must have shape (B, layers, heads, T, T), got {tuple(attentions.shape)}")
    B, L, h, T, _ = attentions.shape
    if min(B, L, h, T) == 0:
        raise ValueError(f"attentions has an empty dimension: {tuple(attentions.shape)}")
    if not isinstance(key_mask, torch.Tensor) or key_mask.dtype != torch.bool:
        raise ValueError(
            f"key_mask must be a bool tensor (B, T), True on the real positions (e.g. trace.key_mask), "
            f"got {type(key_mask).__name__ if not isinstance(key_mask, torch.Tensor) else key_mask.dtype}"
        )
    if tuple(key_mask.shape) != (B, T):
        raise ValueError(f"key_mask must have shape ({B}, {T}) to match attentions, got {tuple(key_mask.shape)}")
    key_mask = key_mask.to(attentions.device)
    if not bool(key_mask.any(-1).all()):
        raise ValueError("every sentence needs at least one real position in key_mask")
    check_finite(attentions, "attentions")
    if bool((attentions < 0).any()):
        raise ValueError("attentions has negative entries; each row must be a distribution over the keys")
    keys = key_mask[:, None, None, None, :].to(attentions.dtype)
    sums = (attentions * keys).sum(-1)  # (B, L, h, T): each real query's mass on the real keys
    bad = ((sums - 1).abs() > SUM_TOL) & key_mask[:, None, None, :]
    if bool(bad.any()):
        raise ValueError(
            f"every real query row of attentions must sum to 1 over the real keys (tolerance {SUM_TOL:g}); "
            f"{int(bad.sum())} row(s) do not, e.g. one sums to {float(sums[bad][0]):.6g}: pass attention "
            f"probabilities with the keys on the last axis (trace.attentions)"
        )
    return attentions, key_mask


def _augmented(attentions: torch.Tensor, key_mask: torch.Tensor, residual: float) -> torch.Tensor:
    """A^ (B, L, T, T): heads averaged, residual * I added over the real positions, rows renormalised; 0 off them."""
    T = attentions.shape[-1]
    block = (key_mask[:, :, None] & key_mask[:, None, :]).to(attentions.dtype)[:, None]  # (B, 1, T, T)
    eye = torch.eye(T, dtype=attentions.dtype, device=attentions.device) * block
    mixed = (residual * eye + (1 - residual) * attentions.mean(2)) * block
    total = mixed.sum(-1, keepdim=True)
    return mixed / torch.where(total > 0, total, torch.ones_like(total))  # padding rows: 0 / 1


def rollout(attentions: torch.Tensor, key_mask: torch.Tensor, *, residual: float = RESIDUAL) -> torch.Tensor:
    """Attention rollout after every layer (Abnar & Zuidema 2020, Sec. 3): (B, L, T, T).

    With A^_l = residual * I + (1 - residual) * mean_h A_{l,h} over the real positions (rows
    renormalised), the rollout is R_0 = A^_0 and R_l = A^_l R_{l-1}: ``out[:, l, q]`` is how
    much position q after layer l draws on each input position. Every real row sums to 1
    over the real positions; rows and columns of padding are 0, so a sentence gives the same
    rollout alone and in a padded batch. Batched over sentences (the loop is over layers).

    Args:
        attentions: (B, L, h, T, T) attention probabilities, query rows over keys on the last
            axis, as ``model.trace(batch).attentions`` (:class:`attnlib.models.Trace`). Each real
            query row must be a distribution over the real keys; padding rows are ignored.
        key_mask: (B, T) bool, True on the real positions ([CLS] and [SEP] included), e.g.
            ``trace.key_mask``.
        residual: the identity's weight r in [0, 1) (A&Z: 0.5). r = 0 rolls out the raw
            head-averaged attention.

    Returns:
        (B, L, T, T) float tensor on the attentions' device and of their dtype.
    """
    residual = _check_residual(residual)
    attentions, key_mask = _check_inputs(attentions, key_mask)
    steps = _augmented(attentions, key_mask, residual)
    out = [steps[:, 0]]
    for layer in range(1, steps.shape[1]):
        out.append(torch.matmul(steps[:, layer], out[-1]))
    return torch.stack(out, 1)


def rollout_cls(trace: Trace, *, residual: float = RESIDUAL) -> torch.Tensor:
    """The last layer's [CLS] (<SOS>) row of the rollout, (B, T): what the book compares with importance.

    ``rollout(trace.attentions, trace.key_mask, residual=residual)[:, -1, 0]``, computed from the
    top down as a row vector times each layer's A^ (L vector-matrix products per sentence
    instead of L - 1 matrix products). A distribution over the real positions, [CLS] and [SEP]
    included (0 on padding); to compare it with measures over the words, cut it to them and
    renormalise, as :func:`attnlib.experiments.importance.importance` does with attention.

    Args:
        trace: a :class:`attnlib.models.Trace`, e.g. ``model.trace(batch)`` of a
            :class:`~attnlib.models.TransformerClassifier` or a
            :class:`~attnlib.models.PretrainedClassifier`.
        residual: as in :func:`rollout`.
    """
    if not isinstance(trace, Trace):
        raise ValueError(f"trace must be an attnlib.models.Trace (model.trace(batch)), got {type(trace).__name__}")
    residual = _check_residual(residual)
    attentions, key_mask = _check_inputs(trace.attentions, trace.key_mask)
    if not bool(key_mask[:, 0].all()):
        raise ValueError("position 0 ([CLS], <SOS>) must be real in every sentence of the trace")
    steps = _augmented(attentions, key_mask, residual)
    row = steps[:, -1, 0]  # (B, T)
    for layer in range(steps.shape[1] - 2, -1, -1):
        row = torch.matmul(row.unsqueeze(1), steps[:, layer]).squeeze(1)
    return row
