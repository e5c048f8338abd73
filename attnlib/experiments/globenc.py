"""Norms of what each token sends through a whole attention block (Kobayashi et al. 2021), and GlobEnc,
their rollout over the layers (Modarressi et al. 2022).

Norm-based attention (:mod:`attnlib.experiments.norm_attention`) measures what the heads send,
``||sum_h alpha^h_ij f_h(x_j)||``. The block around them does more: a residual connection adds the
query's own input, and in BERT (post-LN) a LayerNorm then rescales the sum. Kobayashi, Kuribayashi,
Yokoi & Inui (2021) split the whole block by the token each part comes from. A LayerNorm is
``LN(z) = gamma (z - m(z)) / s(z) + beta`` with ``s(z) = sqrt(var(z) + eps)``; m is linear and s is one
number per query, so for ``z_i = sum_j y_ij + b^O`` with ``y_ij = sum_h alpha^h_ij f_h(x_j) + delta_ij x_i``::

    LN(z_i) = sum_j gamma (y_ij - m(y_ij)) / s(z_i)  +  gamma (b^O - m(b^O)) / s(z_i) + beta
            = sum_j x_{i<-j}                          +  (the part from no token)

and ``||x_{i<-j}||`` is their measure ("N-ResLN": the norm of token j's share of the attention
block's output at i). Modarressi, Fayyaz, Yaghoobzadeh & Pilehvar (2022) carry the same vectors
through the layer's second LayerNorm (the feed-forward block is not attributed: its output joins
the part from no token), ``x~_{i<-j} = gamma2 (x_{i<-j} - m(x_{i<-j})) / s(h_i + FFN(h_i))``;
``N^l_ij = ||x~_{i<-j}||`` (N-Enc) says how much of layer l's output at i comes from its input at j. GlobEnc combines the layers by rollout with no identity added (the
residual is inside N already): ``R^1 = N^1``, ``R^l = N^l R^(l-1)``, and ``R^L[0]``, the [CLS] row after
the last layer, is the explanation.

This follows the authors' code. Kobayashi et al.'s ``BertNormOutput``
(github.com/gorokoba560/norm-analysis-of-transformer, ``emnlp2021/transformers/src/transformers/
modeling_bert.py``, lines 299-390, copied into GlobEnc's ``src/modeling/modeling_bert.py``, lines
381-490): f keeps
the value bias b^V, the output bias b^O and beta are left out of the vectors (here: the part from no
token), each vector is centred by its own mean and divided by s of the real LayerNorm input.
GlobEnc's ``BertLayer.forward`` (lines 704-714 there) passes those vectors through the second
LayerNorm the same way (gamma2, no beta2), and ``BertEncoder.forward`` (lines 829-838) and
``src/attention_rollout.py`` (``compute_joint_attention``, whose ``pre_process`` has its normalisation
commented out) roll the raw norms out: no identity and **no row normalisation** (rows are only
masked to the real tokens). :func:`globenc_rollout` does the same; ``normalise=True`` divides each
row by its sum first, a variant, not the authors'.

A model offers this by declaring the ``decomposition`` capability (:mod:`attnlib.models.protocol`):
``layer_decomposition(layer, states, tokens, key_mask, upto=)`` returns the vectors (B, T, T, d_model)
and the part from no token (B, T, d_model). A pretrained BERT-family checkpoint is post-LN, as above.
The book's transformer is pre-LN: its attention block gives ``h_i = x_i + sum_h sum_j alpha^h_ij
f_h(LN1(x_j)) + b^O``; LN1 acts on each token alone, so it sits inside f, and the residual stream
passes no LayerNorm: its vectors are ``sum_h alpha^h_ij f_h(LN1(x_j)) + delta_ij x_i`` (N-Res with LN1
inside f), the same for ``upto="attention"`` (h) and ``upto="layer"`` (``h + FFN(LN2(h))``, the
feed-forward output in the part from no token); its final LayerNorm, above the last layer, is not
in any layer's matrix. J&W's BiLSTM has no such block, and the methods do not apply to it.

* :func:`decomposition_norms`: ``||x_{i<-j}||`` of every layer (B, L, T, T), or one layer (B, T, T);
* :func:`norm_residual_ln_cls`: "norm + residual + LN", Kobayashi et al. 2021's norms of the last
  layer's attention block, [CLS] row (query 0), (B, T) (as "norm-based" takes the last layer's row);
* :func:`globenc_rollout`, :func:`globenc`, :func:`globenc_cls`: the rollout of the N-Enc matrices,
  (B, L, T, T), and its [CLS] row after the last layer, (B, T): "GlobEnc".

Batched over sentences; the (B', T, T, d_model) vectors are held a chunk of sentences and a layer at a
time (:data:`VECTOR_ELEMENTS`). Padding rows and columns are 0. Kobayashi et al. (2021),
"Incorporating Residual and Normalization Layers into Analysis of Masked Language Models", EMNLP;
Modarressi et al. (2022), "GlobEnc: Quantifying Global Token Attribution by Incorporating the Whole
Encoder Layer in Transformers", NAACL.
"""
from __future__ import annotations

import torch

from .._checks import check_positive_int, layer_indices
from ..models.protocol import DECOMPOSITION_STAGES, eval_mode, layer_shape, require_capability

__all__ = ["VECTOR_ELEMENTS", "decomposition_norms", "norm_residual_ln_cls", "globenc_rollout", "globenc",
           "globenc_cls"]

#: Elements of the (sentences, T, T, d_model) vectors one layer call may hold (16 MB in float32); the
#: post-LN decomposition holds a few tensors of that size at once. MiniLM on 50 reviews: +196 MB peak
#: and 3.8 s at this size, +478 MB and 7.2 s at 2**24 (measured; smaller chunks are also faster).
VECTOR_ELEMENTS = 2**22


def decomposition_norms(model, batch, *, upto: str = "attention", layer: int | None = None,
                        sentences_per_chunk: int | None = None) -> torch.Tensor:
    """``||x_{i<-j}||`` of every layer, (B, L, T, T): ``[b, l, i, j]`` is the norm of what token j sends to
    query i through layer l, up to ``upto`` (``"attention"``: the attention block, Kobayashi et al.
    2021's N-ResLN; ``"layer"``: through the second LayerNorm, GlobEnc's N-Enc; see the module
    docstring). ``layer``: that layer only (negative from the top), (B, T, T). ``batch``: what
    ``model.trace`` reads. ``sentences_per_chunk``: sentences per layer call (None: as many as
    :data:`VECTOR_ELEMENTS` allows); any value gives the same numbers. Padding rows and columns are 0.
    """
    require_capability(model, "decomposition", "the norm of a token's vector through the attention block")
    if upto not in DECOMPOSITION_STAGES:
        raise ValueError(f"upto must be one of {DECOMPOSITION_STAGES}, got {upto!r}")
    if sentences_per_chunk is not None:
        sentences_per_chunk = check_positive_int(sentences_per_chunk, "sentences_per_chunk")
    L, _ = layer_shape(model)
    layers = layer_indices(layer, L)
    with torch.no_grad(), eval_mode(model):
        trace = model.trace(batch)
        hidden, key_mask, tokens = trace.hidden_states, trace.key_mask, trace.tokens
        B, _, T, d = hidden.shape
        rows = sentences_per_chunk or max(1, VECTOR_ELEMENTS // (T * T * d))
        m = key_mask.to(hidden.dtype)
        out = hidden.new_zeros((B, len(layers), T, T))
        for start in range(0, B, rows):
            stop = min(B, start + rows)
            for k, index in enumerate(layers):
                vectors, _ = model.layer_decomposition(index, hidden[start:stop, index], tokens[start:stop],
                                                       key_mask[start:stop], upto=upto)
                out[start:stop, k] = torch.linalg.vector_norm(vectors.to(hidden.dtype).contiguous(), dim=-1)
        out = out * m[:, None, :, None] * m[:, None, None, :]
    return out[:, 0] if layer is not None else out


def norm_residual_ln_cls(model, batch) -> torch.Tensor:
    """"norm + residual + LN": ``||x_{0<-j}||`` through the last layer's attention block (Kobayashi et al.
    2021), the [CLS] row, (B, T) over every position; 0 on padding."""
    return decomposition_norms(model, batch, upto="attention", layer=-1)[:, 0, :]


def globenc_rollout(norms: torch.Tensor, *, normalise: bool = False) -> torch.Tensor:
    """The layers combined as GlobEnc's authors do, (B, L, T, T): ``R^1 = N^1``, ``R^l = N^l R^(l-1)``, no
    identity added and, by default, the raw norms (their code normalises no row). ``normalise=True``
    first divides each row of every ``N^l`` by its sum (a variant; rows that sum to 0 stay 0)."""
    if not isinstance(norms, torch.Tensor) or norms.ndim != 4 or norms.shape[-1] != norms.shape[-2]:
        shape = tuple(norms.shape) if isinstance(norms, torch.Tensor) else type(norms).__name__
        raise ValueError(f"norms must be a (B, L, T, T) tensor (decomposition_norms(..., upto='layer')), got {shape}")
    if not isinstance(normalise, bool):
        raise ValueError(f"normalise must be True or False, got {normalise!r}")
    if bool((norms < 0).any()) or not bool(torch.isfinite(norms).all()):
        raise ValueError("norms must be finite and non-negative (norms of vectors)")
    if normalise:
        total = norms.sum(-1, keepdim=True)
        norms = norms / torch.where(total > 0, total, torch.ones_like(total))
    rolled = [norms[:, 0]]
    for layer in range(1, norms.shape[1]):
        rolled.append(norms[:, layer] @ rolled[-1])
    return torch.stack(rolled, 1)


def globenc(model, batch, *, normalise: bool = False) -> torch.Tensor:
    """GlobEnc's matrices after every layer, (B, L, T, T): :func:`globenc_rollout` of the N-Enc norms
    (:func:`decomposition_norms` with ``upto="layer"``)."""
    return globenc_rollout(decomposition_norms(model, batch, upto="layer"), normalise=normalise)


def globenc_cls(model, batch) -> torch.Tensor:
    """"GlobEnc": the [CLS] row of the rollout after the last layer, (B, T) over every position; 0 on padding."""
    return globenc(model, batch)[:, -1, 0, :]
