"""Norm-based attention (Kobayashi et al. 2020): weight a token by what it sends, not only by alpha.

A head adds ``sum_j alpha_ij f_h(x_j)`` to query i's residual stream, with f_h(x_j) = (the
value vector of token j) W^O_h: the part of the output projection that reads head h. The
attention weight alpha_ij says how much of f_h(x_j) arrives, and ``||f_h(x_j)||`` how large it
is; a token with a large weight and a small vector changes little (Kobayashi et al. found
[CLS], [SEP] and punctuation there). Their measure is the norm of the vector that arrives:

* per head, ``||alpha^h_ij f_h(x_j)|| = alpha^h_ij ||f_h(x_j)||`` (:func:`norm_attention`,
  ``heads="each"``), (B, L, h, T, T);
* per layer, the norm of the heads' sum, ``||sum_h alpha^h_ij f_h(x_j)||`` (``heads="sum"``,
  their Eq. 7), (B, L, T, T): heads that send opposite vectors cancel, which a mean of the
  heads' weights cannot show.

Both come from a :class:`attnlib.models.Trace` (``model.trace(batch)``), which every
transformer family of the book gives (the book's small transformer and a pretrained
checkpoint alike), batched over sentences; rows and columns of padding are 0. Their 2021
follow-up adds the residual connection and the layer norm to the same decomposition (not
here yet). Kobayashi, Kuribayashi, Yokoi & Inui (2020), "Attention is Not Only a Weight:
Analyzing Transformers with Vector Norms", EMNLP, Sec. 3 and Eq. 6-7.
"""
from __future__ import annotations

import torch

from .._checks import layer_indices
from ..models import Trace

__all__ = ["HEADS", "norm_attention"]

#: how :func:`norm_attention` treats the heads of a layer
HEADS = ("each", "sum")

#: elements of the (B', T, T, d_model) sum a chunk of sentences may hold (32 MB in float32)
_CHUNK_ELEMENTS = 8_000_000


def norm_attention(trace: Trace, *, heads: str = "each", layer: int | None = None) -> torch.Tensor:
    """Kobayashi et al.'s norm-based attention of every layer (see the module docstring).

    ``heads="each"``: ``alpha^h_ij ||f_h(x_j)||``, (B, L, h, T, T). ``heads="sum"``: the norm
    of the vector all heads together send from token j to query i, ``||sum_h alpha^h_ij
    f_h(x_j)||``, (B, L, T, T). ``layer``: that layer only (its index, negative from the top),
    without the layer axis, and without the other layers' vectors in memory. Padding rows and
    columns are 0. The sum is computed a chunk of sentences and a layer at a time (its vectors are
    B x T x T x d_model).
    """
    if not isinstance(trace, Trace):
        raise ValueError(f"trace must be an attnlib.models.Trace (model.trace(batch)), got {type(trace).__name__}")
    if heads not in HEADS:
        raise ValueError(f"heads must be one of {HEADS}, got {heads!r}")
    layers = layer_indices(layer, trace.attentions.shape[1], "the trace")
    out = [_one_layer(trace, index, heads) for index in layers]
    return out[0] if layer is not None else torch.stack(out, 1)


def _one_layer(trace: Trace, layer: int, heads: str) -> torch.Tensor:
    sent = trace.value_output(layer)  # (B, h, T, d): f_h(x_j), 0 on padding
    attention = trace.attentions[:, layer]  # (B, h, T, T)
    if heads == "each":
        return attention * sent.norm(dim=-1)[:, :, None, :]
    B, _, T, _ = attention.shape
    d = sent.shape[-1]
    out = attention.new_zeros((B, T, T))
    rows = max(1, _CHUNK_ELEMENTS // max(1, T * T * d))
    for start in range(0, B, rows):
        stop = min(B, start + rows)
        arrived = torch.einsum("bhqt,bhtd->bqtd", attention[start:stop], sent[start:stop])
        out[start:stop] = arrived.norm(dim=-1)
    return out
