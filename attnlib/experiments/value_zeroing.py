"""Value zeroing (Mohebbi, Zuidema, Chrupała & Alishahi 2023): how much a layer's output for token i
changes when token j's value vector is removed.

An attention weight says how much of token j's value vector reaches token i; the layer then adds
the residual stream, normalises and runs its feed-forward block, and any of these can make that
contribution count for more or less. Value zeroing measures the whole layer: run layer l again on
its own input with token j's value vector set to zero in every head (the attention weights stay as
they were), and take the cosine distance between token i's new output and its original one::

    C^l_ij = 1 - cos(x~^l_i with v_j = 0, x~^l_i)

Each row is then divided by its sum over the real tokens (the authors' normalisation), and the
layers are combined by rollout without a residual term, ``R^1 = C^1``, ``R^l = C^l R^(l-1)``
(their ``compute_joint_attention(..., res=False)``): ``R^L[0]``, the [CLS] row after the last
layer, is the explanation :mod:`attnlib.experiments.explanations` registers as "value zeroing".
This follows the authors' code (github.com/hmohebbi/ValueZeroing, ``scoring/value_zeroing.py``):
the value vector is zeroed with its bias, at every position including [CLS] and [SEP], and the
distance is sklearn's cosine distance.

A model offers it by declaring the ``value_zeroing`` capability (:mod:`attnlib.models.protocol`):
``layer_output(layer, states, tokens, key_mask, value_keep)`` runs one layer on given input states
with each row's value vectors multiplied by ``value_keep`` (B, T). The book's transformer and a
pretrained checkpoint (:class:`~attnlib.models.PretrainedClassifier`) declare it; J&W's BiLSTM has
no layer of value vectors to zero (its attention reads the hidden states directly), so the method
does not apply to it. Batched: every (sentence, zeroed token) pair of a chunk is one row of one
layer call. Mohebbi et al. (2023), "Quantifying Context Mixing in Transformers", EACL, Sec. 3.
"""
from __future__ import annotations

import torch

from .._checks import check_positive_int
from ..models.protocol import eval_mode, layer_shape, require_capability

__all__ = ["value_zeroing", "value_zeroing_rollout", "value_zeroing_cls", "STATE_ELEMENTS"]

#: Elements of the (rows, T, d_model) input states of one layer call: its feed-forward block holds four
#: times as many, so about 25 MB at this size (a pretrained model's layers are wide).
STATE_ELEMENTS = 2**20


def value_zeroing(model, batch, *, rows_per_call: int | None = None) -> torch.Tensor:
    """Every layer's value-zeroing matrix, (B, L, T, T): ``[b, l, i, j]`` is the cosine distance between
    token i's output of layer l and that output with token j's value vector zeroed, each row divided by
    its sum over the real tokens; 0 on padding. ``batch``: what ``model.trace`` reads. ``rows_per_call``:
    (sentence, zeroed token) rows per layer call (None: as many as :data:`STATE_ELEMENTS` allows); any
    value gives the same numbers."""
    require_capability(model, "value_zeroing", "value zeroing")
    if rows_per_call is not None:
        rows_per_call = check_positive_int(rows_per_call, "rows_per_call")
    L, _ = layer_shape(model)
    with torch.no_grad(), eval_mode(model):
        trace = model.trace(batch)
        hidden, key_mask, tokens = trace.hidden_states, trace.key_mask, trace.tokens
        B, _, T, d = hidden.shape
        rows_per_call = rows_per_call or max(1, STATE_ELEMENTS // (T * d))
        real = key_mask.to(hidden.dtype)
        scores = torch.zeros(B, L, T, T, dtype=hidden.dtype, device=hidden.device)
        # every (sentence, real token j) pair: one row with j's value vector zeroed
        pair_b, pair_j = key_mask.nonzero(as_tuple=True)
        for start in range(0, len(pair_b), rows_per_call):
            b, j = pair_b[start:start + rows_per_call], pair_j[start:start + rows_per_call]
            keep = torch.ones(len(b), T, dtype=hidden.dtype, device=hidden.device)
            keep[torch.arange(len(b), device=keep.device), j] = 0
            for layer in range(L):
                states = hidden[b, layer]
                zeroed = model.layer_output(layer, states, tokens[b], key_mask[b], keep).to(hidden.dtype)
                original = hidden[b, layer + 1]
                distance = 1 - torch.nn.functional.cosine_similarity(zeroed, original, dim=-1, eps=1e-12)
                scores[b, layer, :, j] = distance * real[b]
        scores = scores * real[:, None, None, :]
        total = scores.sum(-1, keepdim=True)
        return scores / torch.where(total > 0, total, torch.ones_like(total))


def value_zeroing_rollout(scores: torch.Tensor) -> torch.Tensor:
    """The layers combined, (B, L, T, T): ``R^1 = C^1``, ``R^l = C^l R^(l-1)`` (no residual term)."""
    if scores.ndim != 4 or scores.shape[-1] != scores.shape[-2]:
        raise ValueError(f"scores must be (B, L, T, T), got {tuple(scores.shape)}")
    rolled = [scores[:, 0]]
    for layer in range(1, scores.shape[1]):
        rolled.append(scores[:, layer] @ rolled[-1])
    return torch.stack(rolled, 1)


def value_zeroing_cls(model, batch) -> torch.Tensor:
    """The explanation: the [CLS] row of the rollout after the last layer, (B, T) over every position."""
    return value_zeroing_rollout(value_zeroing(model, batch))[:, -1, 0, :]
