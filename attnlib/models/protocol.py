"""What an experiment needs from a model: the one interface every model family meets.

Every experiment of the book edits attention inside a model and measures what the output
does. The model runs the layers below the edited *site* once, and then decodes many
candidate attentions from that site upward::

    state = model.site_state(batch, site)        # below the site, once (no candidates yet)
    state.attention                              # the model's own rows at the site, (B, T) or (B, Q, T)
    probs = model.decode_at(state, candidates)   # (B, K, C) for K candidates (B, K, ..., T)

A :class:`Site` names where: a layer and a head. J&W's classifier has one site,
:data:`ONLY_SITE`; a transformer has one per (layer, head). The edits themselves are
functions on attention rows in :mod:`attnlib.models.interventions`; the experiments
(:mod:`attnlib.experiments`) combine the two, so they run unchanged on any model that meets
this protocol and at any of its sites.

A new family writes, and needs nothing else:

* ``sites`` -- a tuple of the :class:`Site` s it exposes;
* ``n_classes`` and ``hidden_size`` -- the output classes and the size of one token's state
  at a site (the experiments size their memory budget with it);
* ``site_state(batch, site=None)`` -- a :class:`SiteState` (site None: the first site);
* ``decode_at(state, attention)`` -- output probabilities for given attention rows at the
  state's site: ``attention`` has the shape of ``state.attention`` with any candidate axes
  after the batch axis, and the result has those axes before the class axis.
  Differentiable in ``attention``.

It is an ``nn.Module`` (so ``eval()``/``train()`` and its parameters' device work).
A family whose site attention has a row per query (a transformer head, (B, T, T)) sets
``rows_per_query = True``: the experiments that handle such sites (permutation, the
adversary) size their memory by it; the others refuse such a site with a clear error.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch
from torch import nn

__all__ = ["Site", "ONLY_SITE", "SiteState", "InterventionModel", "check_model", "device_of", "eval_mode",
           "class_probabilities"]


@dataclass(frozen=True)
class Site:
    """Where attention is edited: a layer and a head, both 0-based."""

    layer: int = 0
    head: int = 0

    def __post_init__(self):
        for name in ("layer", "head"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"Site.{name} must be a non-negative int, got {value!r}")

    def __str__(self) -> str:
        return f"layer {self.layer}, head {self.head}"


#: The single site of a model with one attention layer and one head (J&W's classifier).
ONLY_SITE = Site(0, 0)


@dataclass
class SiteState:
    """What a model computed below a site, once, for a batch.

    attention: the model's own attention rows at the site, (B, T), or (B, Q, T) with a row
               per query; each row a distribution over the keys in ``mask``.
    mask:      (B, T) bool, the keys a row may attend to (the real tokens).
    site:      the :class:`Site`.
    inputs:    what the model needs to decode from the site upward (private to the model:
               for J&W's classifier, the hidden states h).
    """

    attention: torch.Tensor
    mask: torch.Tensor
    site: Site
    inputs: Any = None

    def __len__(self) -> int:
        return self.mask.shape[0]


@runtime_checkable
class InterventionModel(Protocol):
    """The protocol (see the module docstring)."""

    sites: tuple
    n_classes: int
    hidden_size: int

    def site_state(self, batch, site: Site | None = None) -> SiteState: ...

    def decode_at(self, state: SiteState, attention: torch.Tensor) -> torch.Tensor: ...


def check_model(model, *, own_attention: bool = True):
    """``model`` if it meets :class:`InterventionModel` (and has attention of its own), else a clear ValueError."""
    missing = [name for name in ("sites", "n_classes", "hidden_size", "site_state", "decode_at")
               if not hasattr(model, name)]
    if missing or not isinstance(model, nn.Module):
        raise ValueError(
            f"model must be an nn.Module that meets attnlib.models.protocol.InterventionModel "
            f"(e.g. attnlib.models.AttentionClassifier, or train_model(...).model); "
            f"{type(model).__name__} lacks {', '.join(missing) or 'nn.Module'}"
        )
    if own_attention and not getattr(model, "has_own_attention", True):
        raise ValueError(
            "this experiment edits the model's own attention; the model has none (attention='given': "
            "its batches carry the attention)"
        )
    return model


def device_of(model: nn.Module) -> torch.device:
    """The device of a module's parameters (CPU for a module without parameters)."""
    try:
        return next(model.parameters()).device
    except (StopIteration, AttributeError):
        return torch.device("cpu")


@contextmanager
def eval_mode(model: nn.Module):
    """Eval mode inside the block; the caller's mode (train/eval) is restored after it, also after an error."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def class_probabilities(logits: torch.Tensor, n_classes: int) -> torch.Tensor:
    """Every family's output distribution from its logits: [1 - sigmoid, sigmoid] of one logit for
    two classes, softmax otherwise. (B, ..., 1 or C) -> (B, ..., C)."""
    if n_classes == 2:
        p = torch.sigmoid(logits)
        return torch.cat([1 - p, p], dim=-1)
    return torch.softmax(logits, dim=-1)
