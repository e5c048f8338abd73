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

**Token-level access** (:class:`TokenModel`). Gradients, integrated gradients,
leave-one-out, ERASER's deletion metrics and every explanation of Chapter 15 act on the
tokens, not on an attention site: they differentiate with respect to the token embeddings,
or delete tokens and run the model again::

    ids = model.token_ids(batch)               # (B, T) ids on the model's device, validated
    e = model.embed_tokens(ids)                # (B, T, E): the token embeddings e_t
    out = model.forward_embedded(ids, e)       # TokenOutput: probs (B, C), attention (B, T)
    model(ids).probs                           # any rows, e.g. with tokens deleted

Every family's rows read ``start word ... word end pad ...`` (``<SOS> ... <EOS>``,
``[CLS] ... [SEP]``): the tokens an explanation scores are positions 1 .. length - 2
(:func:`word_mask`), so deletion, ranking and scoring are the same code for every family,
given the family's ``pad_id`` and ``unk_id`` (the placeholder of a row left without words).
Why this shape: a method needs the embeddings as a leaf it can take gradients at (captum's
and TransformerLens' ``hook_embed`` are the same point), the forward pass from there, and the
attention the explanation reports, in one call, so that the gradient and the attention come
from one pass; forward hooks on a family's embedding module would tie the experiments to
that module's name. A new family writes, besides the four methods above:

* ``pad_id``, ``unk_id``, ``special_ids`` (the start and end ids, never a replacement) and
  ``vocab_size``;
* ``single_attention`` -- True when the attention it reports is one alpha that decoding
  reads directly (J&W's), which ``forward_embedded(..., detach_attention=True)`` may detach
  (J&W's gradient importance); False for a stack of layers and heads (then it is refused);
* ``token_cost(T)`` -- tensor elements one instance padded to T costs in a forward and
  backward pass (the runner's memory budget).

``forward_embedded``'s ``attention`` is over every position; the experiments cut it to the
words and renormalise the rows that put weight elsewhere (a transformer's [CLS] row).
Optional, for speed (without them the generic path gives the same numbers up to float
rounding): ``unpadded_probs`` (rows of one length run without padding: J&W's BiLSTM runs
them unpacked), ``deletion_tvd(ids, base_probs, max_tokens)`` (every single-word deletion
at once: J&W's BiLSTM reuses the states of x) and ``probs_hiding(ids, hide)`` (positions made
padding-like in place: J&W's "replace by PAD"); each is None or absent where it does not apply.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch
from torch import nn

__all__ = ["Site", "ONLY_SITE", "SiteState", "InterventionModel", "check_model", "device_of", "eval_mode",
           "class_probabilities", "TokenOutput", "TokenModel", "TOKEN_METHODS", "check_token_model", "word_mask",
           "model_name", "LayeredModel", "KeyEditModel", "CAPABILITIES", "has_capability", "require_capability",
           "layer_shape", "DECOMPOSITION_STAGES"]


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


# ----------------------------------------------------------------------------- token-level access
@dataclass
class TokenOutput:
    """:meth:`TokenModel.forward_embedded`'s output.

    probs:     (B, C) the output distribution.
    attention: (B, T) the attention an explanation reports (J&W's alpha; a transformer's
               last-layer [CLS] row averaged over its heads), over every position, 0 on padding.
    """

    probs: torch.Tensor
    attention: torch.Tensor


@runtime_checkable
class TokenModel(Protocol):
    """Token-level access (see the module docstring)."""

    pad_id: int
    unk_id: int
    special_ids: tuple
    vocab_size: int
    n_classes: int
    single_attention: bool

    def token_ids(self, batch) -> torch.Tensor: ...

    def embed_tokens(self, ids: torch.Tensor) -> torch.Tensor: ...

    def forward_embedded(self, ids: torch.Tensor, embedded: torch.Tensor, *,
                         detach_attention: bool = False) -> TokenOutput: ...

    def token_cost(self, T: int) -> int: ...


#: What :func:`check_token_model` asks of a model.
TOKEN_METHODS = ("pad_id", "unk_id", "special_ids", "vocab_size", "n_classes", "single_attention", "token_ids",
                 "embed_tokens", "forward_embedded", "token_cost")


def check_token_model(model, what: str = "this experiment"):
    """``model`` if it meets :class:`TokenModel`, else a ValueError naming what it lacks."""
    missing = [name for name in TOKEN_METHODS if not hasattr(model, name)]
    if missing or not isinstance(model, nn.Module):
        raise ValueError(
            f"{what} needs a model with token-level access (attnlib.models.protocol.TokenModel: "
            f"AttentionClassifier, TransformerClassifier, PretrainedClassifier, or your family with "
            f"{', '.join(TOKEN_METHODS)}); {type(model).__name__} lacks {', '.join(missing) or 'nn.Module'}"
        )
    return model


def word_mask(ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    """True on the words of ``start word ... word end pad ...`` rows: positions 1 .. length - 2. (B, T) -> (B, T)."""
    lengths = (ids != pad_id).sum(-1, keepdim=True)
    pos = torch.arange(ids.shape[-1], device=ids.device)
    return (pos >= 1) & (pos < lengths - 1)


def model_name(model) -> str:
    """The model's name for a result's settings: its config's ``name``, else its class name."""
    return getattr(getattr(model, "config", None), "name", None) or type(model).__name__


# ----------------------------------------------------------------------------- declared capabilities
@runtime_checkable
class LayeredModel(Protocol):
    """A stack of attention layers of several heads (the book's transformer, a pretrained encoder):
    a site is a head, with a row per query, and ``trace(batch)`` gives every layer's attentions,
    values and output projections at once (:class:`attnlib.models.Trace`)."""

    sites: tuple
    rows_per_query: bool

    def trace(self, batch): ...


@runtime_checkable
class KeyEditModel(LayeredModel, Protocol):
    """A layered model whose attention *keys* can be replaced per layer (Pruthi-style edits, the
    adversarial keys of Chapter 12): ``model(batch, key_edits={layer: fn})`` maps a layer's keys
    (B, T, d_model), all heads side by side; ``embed(tokens)`` and ``visibility(tokens, key_mask)``
    give the first layer's input and which keys a query may see."""

    edits_keys: bool

    def embed(self, tokens): ...

    def visibility(self, tokens, key_mask): ...


#: How far up a layer ``layer_decomposition(..., upto=)`` carries the tokens' vectors (capability
#: ``decomposition``): ``"attention"``, the attention block's output (attention, its residual and, in a
#: post-LN layer, the first LayerNorm: Kobayashi et al. 2021's "ATB"); ``"layer"``, the layer's output
#: with the feed-forward block's output in the part from no token (GlobEnc's N_Enc: in a post-LN layer
#: the vectors also pass the second LayerNorm).
DECOMPOSITION_STAGES = ("attention", "layer")


#: What a family may declare, how an experiment checks it, and what it promises. Experiments ask
#: :func:`has_capability` / :func:`require_capability`, never which class a model is.
CAPABILITIES = {
    "single_attention": (
        lambda m: getattr(m, "single_attention", False) is True,
        "one attention distribution over the tokens that decoding reads directly (J&W's classifier: "
        "``model(batch).attention`` is (B, T); ``single_attention = True``)"),
    "layered": (
        lambda m: getattr(m, "rows_per_query", False) is True and callable(getattr(m, "trace", None))
        and getattr(m, "sites", None) is not None,
        "a stack of attention layers and heads with ``trace(batch)`` (LayeredModel: ``rows_per_query = True``)"),
    "key_edits": (
        lambda m: CAPABILITIES["layered"][0](m) and getattr(m, "edits_keys", False) is True
        and callable(getattr(m, "embed", None)) and callable(getattr(m, "visibility", None)),
        "attention keys that can be edited per layer (KeyEditModel: ``edits_keys = True``, "
        "``forward(batch, key_edits=...)``, ``embed``, ``visibility``)"),
    "value_zeroing": (
        lambda m: CAPABILITIES["layered"][0](m) and callable(getattr(m, "layer_output", None)),
        "a layer that can run again on given input states with some value vectors zeroed "
        "(``layer_output(layer, states, tokens, key_mask, value_keep)``: the transformers)"),
    "decomposition": (
        lambda m: CAPABILITIES["layered"][0](m) and callable(getattr(m, "layer_decomposition", None)),
        "a layer's output split into what each input token sends to each query, plus a part from no "
        "token (``layer_decomposition(layer, states, tokens, key_mask, upto=...)``, Kobayashi et al. "
        "2021, GlobEnc: the transformers)"),
    "randomisation": (
        lambda m: callable(getattr(m, "randomisation_stages", None))
        and callable(getattr(m, "initialised_parameters", None)),
        "parameters in stages from the output down, and a fresh initialisation of them "
        "(``randomisation_stages()``, ``initialised_parameters(seed)``: the book's transformer)"),
}


def has_capability(model, capability: str) -> bool:
    """Whether ``model`` declares ``capability`` (a key of :data:`CAPABILITIES`)."""
    if capability not in CAPABILITIES:
        raise ValueError(f"unknown capability {capability!r}; known: {', '.join(CAPABILITIES)}")
    return isinstance(model, nn.Module) and bool(CAPABILITIES[capability][0](model))


def require_capability(model, capability: str, what: str = "this experiment"):
    """``model`` if it declares ``capability``, else a ValueError saying what the experiment needs."""
    if not has_capability(model, capability):
        raise ValueError(f"{what} needs a model with {CAPABILITIES[capability][1]}; "
                         f"{type(model).__name__} does not declare it")
    return model


def layer_shape(model) -> tuple[int, int]:
    """(layers, heads) of a layered model, read from its sites (every (layer, head), in order), or a ValueError."""
    require_capability(model, "layered", "reading layers and heads")
    sites = tuple(model.sites)
    L = 1 + max((s.layer for s in sites), default=-1)
    H = 1 + max((s.head for s in sites), default=-1)
    if not sites or sites != tuple(Site(layer, head) for layer in range(L) for head in range(H)):
        raise ValueError(f"model.sites must be every Site(layer, head) of its layers x heads, in order; "
                         f"{type(model).__name__} has {len(sites)} sites")
    return L, H
