"""What every transformer family of the book shares: a trace of its heads, and edits at sites.

A transformer has one :class:`~attnlib.models.protocol.Site` per (layer, head). Both of the
book's transformers (:class:`attnlib.models.transformer.TransformerClassifier`, trained
from scratch, and :class:`attnlib.models.pretrained.PretrainedClassifier`, any BERT-family
model such as all-MiniLM-L6-v2) expose

* ``trace(batch) -> Trace`` -- per layer and head the attention (B, L, h, T, T), the values
  (B, L, h, T, d_v) and the head's slice of the output projection, plus the hidden states;
  everything over the real tokens only (padding is 0);
* ``forward(batch, edits={Site: edit})`` -- the output with the attention of any set of
  heads edited. An edit is a function ``edit(attention, key_mask) -> attention`` on one
  head's rows (B, T, T) (e.g. one of :mod:`attnlib.models.interventions`), or the rows
  themselves;
* the intervention protocol (``site_state`` / ``decode_at``) at every site.

This module holds the parts they share, so that no family repeats them:
:class:`Trace`, :func:`check_edits` and :func:`apply_edits`, and the candidate flattening
that ``decode_at`` needs (:func:`flatten_candidates`).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

from .protocol import Site

__all__ = ["Trace", "Edit", "RowEdit", "MASK", "rowwise", "check_sites", "check_edits", "apply_edits",
           "flatten_candidates", "key_mask_of"]

#: One head's edit: a function of (attention rows (B, T, T), key mask (B, T)), or given rows (B, T, T).
Edit = Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | torch.Tensor


class RowEdit:
    """An edit whose every query row depends on that row alone (and the key mask).

    A model may then hand it only the rows its output reads: the book's transformer computes
    only the [CLS] row of its last layer, (B, 1, T), when every edit there is a RowEdit, as
    it does without edits. ``RowEdit(fn, name)`` wraps ``fn(rows, key_mask) -> rows``.
    """

    def __init__(self, fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], name: str):
        if not callable(fn):
            raise ValueError(f"RowEdit needs a function (rows, key_mask) -> rows, got {type(fn).__name__}")
        self.fn, self.name = fn, str(name)

    def __call__(self, attention: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        return self.fn(attention, key_mask)

    def __repr__(self) -> str:
        return f"RowEdit({self.name})"


#: The gate xi = 0 of Michel et al.: the head's rows become 0, so it adds nothing to the residual stream.
MASK = RowEdit(lambda attention, key_mask: attention * 0, "mask")


def rowwise(head_edits: Mapping[int, Edit] | None) -> bool:
    """True when every edit of one layer (``{head: edit}``, or none) is a :class:`RowEdit`."""
    return all(isinstance(edit, RowEdit) for edit in (head_edits or {}).values())


@dataclass
class Trace:
    """One forward pass of a transformer, head by head, over the real tokens.

    tokens:            (B, T) input ids.
    lengths:           (B,) real length of each sentence, [CLS] and [SEP] included.
    key_mask:          (B, T) bool, True on the real positions (< length).
    attentions:        (B, L, h, T, T): row q of head (l, h) is query q's distribution over
                       the keys; rows and columns of padding are 0.
    values:            (B, L, h, T, d_v): the value vectors (with their bias); 0 on padding.
    output_projection: (L, h, d_v, d_model): head h's slice of layer l's output projection
                       W^O, so the head adds ``attentions @ values @ output_projection`` to
                       the residual stream (plus a bias shared by all heads).
    hidden_states:     (B, L + 1, T, d_model): the input embeddings (index 0) and the output
                       of each layer; 0 on padding.
    """

    tokens: torch.Tensor
    lengths: torch.Tensor
    key_mask: torch.Tensor
    attentions: torch.Tensor
    values: torch.Tensor
    output_projection: torch.Tensor
    hidden_states: torch.Tensor

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def n_layers(self) -> int:
        return int(self.attentions.shape[1])

    @property
    def n_heads(self) -> int:
        return int(self.attentions.shape[2])

    @property
    def head_dim(self) -> int:
        return int(self.values.shape[-1])

    def value_output(self, layer: int | None = None) -> torch.Tensor:
        """Brunner et al.'s T = E W^V W^O_h: (B, L, h, T, d_model), or (B, h, T, d_model) for one layer."""
        if layer is None:
            return torch.einsum("blhtv,lhvd->blhtd", self.values, self.output_projection)
        return torch.einsum("bhtv,hvd->bhtd", self.values[:, layer], self.output_projection[layer])

    def pooled(self, layer: int = -1) -> torch.Tensor:
        """The mean of one layer's hidden states over the real positions (default: the last): (B, d_model)."""
        m = self.key_mask.to(self.hidden_states.dtype).unsqueeze(-1)
        return (self.hidden_states[:, layer] * m).sum(-2) / m.sum(-2)

    def head_output(self) -> torch.Tensor:
        """Each head's contribution to the residual stream, A T: (B, L, h, T, d_model)."""
        return torch.einsum("blhqt,blhtd->blhqd", self.attentions, self.value_output())


def key_mask_of(lengths: torch.Tensor, T: int) -> torch.Tensor:
    """(B, T) bool, True on positions < length."""
    return torch.arange(T, device=lengths.device)[None, :] < lengths[:, None]


def check_sites(sites, n_layers: int | None = None, n_heads: int | None = None) -> list[Site]:
    """``sites`` (one :class:`Site` or an iterable of them) as a list, each inside a model of
    ``n_layers`` x ``n_heads`` when those are given, or a clear ValueError naming the model's shape."""
    if isinstance(sites, Site):
        sites = [sites]
    if isinstance(sites, (str, bytes, Mapping)) or not hasattr(sites, "__iter__"):
        raise ValueError(f"sites must be an iterable of attnlib.models.Site(layer, head), got {type(sites).__name__}")
    sites = list(sites)
    for site in sites:
        if not isinstance(site, Site):
            raise ValueError(f"sites must hold attnlib.models.Site(layer, head), got {site!r}")
        if n_layers is not None and (site.layer >= n_layers or site.head >= n_heads):
            raise ValueError(f"{site} is outside the model ({n_layers} layers x {n_heads} heads)")
    return sites


def check_edits(edits: Mapping | None, n_layers: int, n_heads: int) -> dict:
    """``edits`` as {layer: {head: edit}}, or a clear ValueError for a bad site or edit."""
    if edits is None:
        return {}
    if not isinstance(edits, Mapping):
        raise ValueError(f"edits must be a mapping {{Site(layer, head): edit}}, got {type(edits).__name__}")
    by_layer: dict[int, dict[int, Edit]] = {}
    for site, edit in edits.items():
        if not isinstance(site, Site):
            raise ValueError(f"edits must be keyed by attnlib.models.Site(layer, head), got {site!r}")
        check_sites(site, n_layers, n_heads)
        if not (callable(edit) or isinstance(edit, torch.Tensor)):
            raise ValueError(f"the edit at {site} must be a function (attention, key_mask) -> attention or a tensor")
        by_layer.setdefault(site.layer, {})[site.head] = edit
    return by_layer


def apply_edits(probs: torch.Tensor, head_edits: Mapping[int, Edit] | None, key_mask: torch.Tensor) -> torch.Tensor:
    """One layer's attention (B, h, T, T) with the given heads' rows replaced by their edits (differentiable)."""
    if not head_edits:
        return probs
    heads = list(probs.unbind(1))
    for head, edit in head_edits.items():
        new = edit(heads[head], key_mask) if callable(edit) else edit
        new = torch.as_tensor(new, device=probs.device, dtype=probs.dtype)
        if new.shape != heads[head].shape:
            raise ValueError(
                f"the edit of head {head} must give attention of shape {tuple(heads[head].shape)}, got {tuple(new.shape)}"
            )
        heads[head] = new
    return torch.stack(heads, 1)


def flatten_candidates(attention: torch.Tensor, B: int, T: int) -> tuple[torch.Tensor, tuple, int]:
    """Candidate rows (B, K..., T, T) as (B * K, T, T), the candidate shape K..., and K."""
    if attention.ndim < 3 or attention.shape[0] != B or tuple(attention.shape[-2:]) != (T, T):
        raise ValueError(f"attention must have shape ({B}, [K...,] {T}, {T}), got {tuple(attention.shape)}")
    cand = tuple(attention.shape[1:-2])
    K = 1
    for k in cand:
        K *= k
    return attention.reshape(B * K, T, T), cand, K
