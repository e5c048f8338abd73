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

*Attention flow* treats the same layers as a flow network instead: a node per (layer
l = 0 .. L, position), an edge from (l + 1, q) down to (l, k) with capacity A^_l[q, k], and the
relevance of input token k is the value of a maximum flow from the output node (L, [CLS]) to
(0, k), one max-flow per input token. Rollout multiplies along every path; flow is limited by
each path's narrowest edge and shares capacity between paths, so it spreads relevance more
evenly (A&Z's Table 1: flow correlates better with blank-out importance from layer 3 on).

* :func:`flow` -- the flow from the last layer's [CLS] (position 0) to every input token,
  (B, T), normalised to sum 1 over the real positions; SciPy's Dinic
  (``scipy.sparse.csgraph.maximum_flow``) on integer capacities (A^ times :data:`FLOW_SCALE`),
  the graph of a sentence built once (vectorised) and reused for its T max-flows.
* :func:`flow_cls` -- the same from a :class:`~attnlib.models.Trace`, the mirror of
  :func:`rollout_cls`.

* :func:`relevance_by_layer` -- raw attention, rollout and flow of the [CLS] row after every
  layer, over the words of a split's sentences (the book's runner picks the instances), and
  :func:`layer_correlations` -- their Spearman correlation with blank-out or gradient
  importance, layer by layer (A&Z's Tables 1-3).

A&Z's SST script reads ``.max(axis=0)`` over positions rather than the [CLS] row the paper
describes; the book reads the [CLS] row (node), the one the classifier's output reads.
networkx's max-flow (A&Z's code) gives the same flows (to about 5e-9), some 50x slower at 20
tokens and 190x at 80 for 6 layers (``benchmarks/bench_flow.py``: at 20 tokens SciPy's fixed
cost per call, about 0.5 ms of checks and sparse conversions, dominates); the tests keep
networkx as the oracle.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse
import torch
from scipy.sparse.csgraph import maximum_flow

from .. import runs, uncertainty
from .._checks import SUM_TOL, check_finite
from ..runs import InstanceResult
from ..metrics import spearman
from ..models import Trace, real_token_mask
from ..models.protocol import has_capability

__all__ = [
    "RESIDUAL",
    "FLOW_SCALE",
    "RELEVANCE_METHODS",
    "rollout",
    "rollout_cls",
    "rollout_words",
    "flow",
    "flow_cls",
    "RelevanceResult",
    "relevance_by_layer",
    "layer_correlations",
    "instance_correlations",
    "correlations_over_seeds",
    "rationale_scores",
]

#: A&Z's weight of the identity (the residual connection) in A^ = r I + (1 - r) A.
RESIDUAL = 0.5

#: Capacities of :func:`flow` are round(A^ * FLOW_SCALE) as int32 (SciPy's max-flow needs integers). Each
#: max-flow serves a group of sentences at once, and the group's total flow (at most the sum of their output
#: nodes' capacities, about FLOW_SCALE each) must stay below 2**31: 2**26 lets up to 31 sentences share one call.
FLOW_SCALE = 2**26

#: The largest scale :func:`flow` accepts: one sentence per max-flow call.
MAX_FLOW_SCALE = 2**30


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


def rollout_words(model, split, indices, *, residual: float = RESIDUAL) -> list:
    """The last layer's [CLS] row of the rollout over each sentence's words, one array per sentence.

    :func:`rollout_cls` of ``model.trace(split.batch(indices))`` (one padded batch), cut to the
    words: [CLS] (<SOS>) and [SEP] (<EOS>) dropped, the rest not renormalised (Chapter 13
    measures the share of it on a sentence's impermissible tokens with
    :func:`attnlib.deception.score_mass`, which divides by the total). Array ``i`` has
    ``len(split.tokens[indices[i]])`` entries, aligned with those tokens and with
    :func:`attnlib.importance.importance`'s lists for the same instances.

    Args:
        model: a transformer with ``trace(batch)`` whose output reads position 0.
        split: an :class:`attnlib.data.Split` (e.g. ``dataset.test``).
        indices: the instances (row numbers of ``split``), at least one.
        residual: as in :func:`rollout`.
    """
    if not has_capability(model, "layered"):
        raise ValueError(f"model must have a trace(batch) method (a transformer), got {type(model).__name__}")
    if not callable(getattr(split, "batch", None)):
        raise ValueError(f"split must be an attnlib.data.Split, got {type(split).__name__}")
    batch = split.batch(indices)
    with torch.no_grad():
        rows = rollout_cls(model.trace(batch), residual=residual)
    n = batch.lengths.tolist()
    return [rows[i, 1 : n[i] - 1].cpu().numpy() for i in range(len(n))]


# ----------------------------------------------------------------------------- attention flow


def _check_scale(scale) -> int:
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not np.isfinite(scale):
        raise ValueError(f"scale must be a number in [1, 2**30], got {scale!r}")
    if not 1 <= scale <= MAX_FLOW_SCALE:
        raise ValueError(
            f"scale must lie in [1, 2**30] (capacities A^ * scale and the flow values must fit SciPy's int32), "
            f"got {scale!r}"
        )
    return int(round(scale))


def _layer_edges(steps: np.ndarray, scale: int, offset: int):
    """The edges of one sentence's flow network, as (rows, columns, capacities), its nodes numbered from ``offset``.

    ``steps``: A^ (L, n, n) over the sentence's real positions. Node offset + l * n + p is
    (layer l, position p), l = 0 .. L; node (l + 1, q) has an edge to every (l, k) with capacity
    round(A^_l[q, k] * scale). Built in one go: the rows of all layers are A^'s rows in order.
    """
    L, n, _ = steps.shape
    capacity = np.rint(steps * scale).astype(np.int64).reshape(-1)  # (L n n): row (l + 1, q), column k
    rows = offset + n + np.repeat(np.arange(L * n), n)
    columns = offset + (np.arange(L)[:, None, None] * n + np.arange(n)[None, None, :]).repeat(n, axis=1).reshape(-1)
    return rows, columns, capacity


def _group_flows(steps: list, scale: int) -> list:
    """Max-flow values from each sentence's output node (L, 0) to each of its input tokens (0, k), in units of A^.

    ``steps``: one A^ (L, n_b, n_b) per sentence of the group. The sentences' networks go side by
    side into one graph with a super-source S, an edge S -> (L, 0)_b for every sentence b (capacity:
    the total capacity out of (L, 0)_b, so it never binds) and a super-sink. Max-flow j joins the
    super-sink to input token j of every sentence that has one. The networks share no node, so the
    flow through S -> (L, 0)_b is sentence b's own maximum flow to its token j: one SciPy call
    serves the whole group, and a sentence's flows are the same in any group (integer capacities,
    a unique max-flow value).
    """
    sizes = np.array([s.shape[1] for s in steps])
    L = steps[0].shape[0]
    offsets = np.concatenate([[0], np.cumsum((L + 1) * sizes)])
    source, sink = int(offsets[-1]), int(offsets[-1]) + 1
    parts = [_layer_edges(s, scale, int(o)) for s, o in zip(steps, offsets[:-1])]
    outputs = offsets[:-1] + L * sizes  # node (L, 0) of each sentence
    # (L, 0)'s out-edges are the first row of the top layer's block of a sentence's edges
    out_capacity = np.array([p[2][(L - 1) * n * n:(L - 1) * n * n + n].sum() for p, n in zip(parts, sizes)])
    tokens = np.concatenate([o + np.arange(n) for o, n in zip(offsets[:-1], sizes)])  # every (0, k)
    position = np.concatenate([np.arange(n) for n in sizes])
    owner = np.repeat(np.arange(len(sizes)), sizes)
    rows = np.concatenate([*(p[0] for p in parts), np.full(len(sizes), source), tokens])
    columns = np.concatenate([*(p[1] for p in parts), outputs, np.full(len(tokens), sink)])
    capacity = np.concatenate([*(p[2] for p in parts), out_capacity, np.zeros(len(tokens), dtype=np.int64)])
    # rows are in node order and each row's columns increasing: CSR by a stable sort of the rows
    order = np.lexsort((columns, rows))
    rows, columns, capacity = rows[order], columns[order], capacity[order]
    n_nodes = source + 2
    indptr = np.searchsorted(rows, np.arange(n_nodes + 1)).astype(np.int32)
    indices = columns.astype(np.int32)
    is_sink = columns == sink
    sink_slot = np.empty(len(tokens), dtype=np.int64)
    sink_slot[np.searchsorted(tokens, rows[is_sink])] = np.flatnonzero(is_sink)
    values = np.zeros((len(sizes), int(sizes.max())))  # (sentences, token position j)
    for j in range(int(sizes.max())):
        data = capacity.copy()
        at_j = position == j
        data[sink_slot[at_j]] = out_capacity[owner[at_j]]
        graph = scipy.sparse.csr_array((data.astype(np.int32), indices, indptr), shape=(n_nodes, n_nodes))
        sent = maximum_flow(graph, source, sink, method="dinic").flow.tocsr()
        lo, hi = sent.indptr[source], sent.indptr[source + 1]
        through = np.zeros(len(sizes))  # the flow on each S -> (L, 0)_b, sentence order = node order
        through[np.searchsorted(outputs, sent.indices[lo:hi])] = sent.data[lo:hi]
        values[:, j] = through / scale
    return [values[b, :n] for b, n in enumerate(sizes)]


def flow(attentions: torch.Tensor, key_mask: torch.Tensor, *, residual: float = RESIDUAL,
         scale: float = FLOW_SCALE, normalise: bool = True) -> torch.Tensor:
    """Attention flow from the last layer's [CLS] (position 0) to every input token (Abnar & Zuidema 2020, Sec. 4).

    The layers form a flow network: a node (l, p) for every layer l = 0 .. L (0: the input
    embeddings) and real position p, and an edge from (l + 1, q) down to (l, k) with capacity
    A^_l[q, k], where A^_l = residual * I + (1 - residual) * mean_h A_{l,h} (rows
    renormalised, as in :func:`rollout`). The flow of input token k is the value of a maximum
    flow from the output node (L, 0) to (0, k), one max-flow per input token (a single
    super-sink would give only their joint flow). The source's capacity is 1, so every flow
    lies in [0, 1]; with ``normalise`` (default) the flows are divided by their sum, so each
    row of the result is a distribution over the real positions ([CLS] and [SEP] included,
    0 on padding), as A&Z normalise each output row.

    SciPy's Dinic (``scipy.sparse.csgraph.maximum_flow``) needs integer capacities: they are
    round(A^ * scale) as int32, and the flows are divided by ``scale`` again. Rounding moves
    each capacity by at most 1 / (2 scale), so the capacity of any cut of m edges, and hence a
    flow value, by at most m / (2 scale) <= L n^2 / (2 scale) for n real positions: with the
    default scale 2**26, at most 3e-4 for 6 layers and 80 tokens in the very worst case (every
    edge of a cut rounded the same way); measured against networkx's exact flows, up to 1.5e-7
    on float32 attention (``benchmarks/bench_flow.py``; ``tests/test_flow.py`` holds every flow
    to 1e-6). The networks of up to
    2**31 / (scale + T) sentences (31 at the default scale) go side by side into one graph with a
    super-source, and max-flow j reaches token j of all of them at once, so a batch costs about
    (B / 31) x T SciPy calls instead of B x T; each sentence's flows are the same in any batch.

    Args:
        attentions: (B, L, h, T, T) attention probabilities, as for :func:`rollout`.
        key_mask: (B, T) bool, True on the real positions; position 0 ([CLS]) must be real.
        residual: the identity's weight r in [0, 1) (A&Z: 0.5).
        scale: capacities are A^ times this, in [1, 2**30] (default :data:`FLOW_SCALE` = 2**26; up to 2**30 for one sentence per max-flow).
        normalise: divide each sentence's flows by their sum (default); False gives the raw
            max-flow values in [0, 1].

    Returns:
        (B, T) float tensor of the attentions' dtype and device.
    """
    residual = _check_residual(residual)
    scale = _check_scale(scale)
    if not isinstance(normalise, (bool, np.bool_)):
        raise ValueError(f"normalise must be True or False, got {normalise!r}")
    attentions, key_mask = _check_inputs(attentions, key_mask)
    if not bool(key_mask[:, 0].all()):
        raise ValueError("position 0 ([CLS], <SOS>), the output node of the flow, must be real in every sentence")
    steps = _augmented(attentions, key_mask, residual).detach().double().cpu().numpy()  # (B, L, T, T)
    mask = key_mask.cpu().numpy()
    out = np.zeros(mask.shape, dtype=np.float64)
    # sentences per max-flow call: their output nodes' capacities (each <= scale + T / 2) must sum below 2**31
    group = max(1, (2**31 - 1) // (scale + mask.shape[1]))
    for start in range(0, mask.shape[0], group):
        rows = range(start, min(start + group, mask.shape[0]))
        real = [np.flatnonzero(mask[b]) for b in rows]
        flows = _group_flows([steps[b][:, r][:, :, r] for b, r in zip(rows, real)], scale)
        for b, r, values in zip(rows, real, flows):
            out[b, r] = values / values.sum() if normalise and values.sum() > 0 else values
    return torch.as_tensor(out, dtype=attentions.dtype, device=attentions.device)


def flow_cls(trace: Trace, *, residual: float = RESIDUAL, scale: float = FLOW_SCALE,
             normalise: bool = True) -> torch.Tensor:
    """Attention flow from the last layer's [CLS] node to every input token, (B, T): the mirror of :func:`rollout_cls`.

    ``flow(trace.attentions, trace.key_mask, ...)``: a distribution over the real positions
    ([CLS] and [SEP] included; 0 on padding); cut it to the words and renormalise to compare it
    with measures over the words.

    Args:
        trace: a :class:`attnlib.models.Trace`, e.g. ``model.trace(batch)``.
        residual, scale, normalise: as in :func:`flow`.
    """
    if not isinstance(trace, Trace):
        raise ValueError(f"trace must be an attnlib.models.Trace (model.trace(batch)), got {type(trace).__name__}")
    return flow(trace.attentions, trace.key_mask, residual=residual, scale=scale, normalise=normalise)


# ----------------------------------------------------------------- relevance by layer (Chapter 14)
#: The relevance methods of :func:`relevance_by_layer`, in their order.
RELEVANCE_METHODS = ("raw attention", "rollout", "flow")


@dataclass(kw_only=True)
class RelevanceResult(InstanceResult):
    """Raw attention, rollout and flow of the [CLS] row after every layer, over the real words.

    ``scores[method][i]`` is an (L, n_i) array for instance ``indices[i]``: row l is the
    method's relevance of each of the instance's n_i words after layer l (layer 0 first),
    renormalised over the words ([CLS] and [SEP] cut off), aligned to
    ``split.tokens[indices[i]]`` and to :class:`~attnlib.experiments.importance.ImportanceResult`
    for the same ``max_instances`` and ``seed``. ``residual`` is A^'s identity weight.
    With ``positions == "all"`` the rows cover every real position, [CLS] and [SEP] included
    (n_i + 2 of them, as ``lengths`` then counts), as A&Z's code correlates them.
    """

    scores: dict
    residual: float = RESIDUAL
    positions: str = "words"

    @property
    def n_layers(self) -> int:
        return int(self.scores[RELEVANCE_METHODS[0]][0].shape[0]) if len(self) else 0

    def padded(self, method: str) -> np.ndarray:
        """One method as an (N, L, n_max) array, 0 past each instance's words."""
        if method not in self.scores:
            raise ValueError(f"unknown method {method!r}; choose one of {', '.join(self.scores)}")
        n_max = int(self.lengths.max()) if len(self) else 0
        out = np.zeros((len(self), self.n_layers, n_max))
        for i, s in enumerate(self.scores[method]):
            out[i, :, : s.shape[1]] = s
        return out


def _words_only(relevance: torch.Tensor, words: torch.Tensor) -> list:
    """(B, L, T) over every position -> per instance (L, n) over its words, rows renormalised."""
    out = []
    for r, w in zip(relevance, words):
        kept = r[:, w]
        total = kept.sum(-1, keepdim=True)
        out.append((kept / torch.where(total > 0, total, torch.ones_like(total))).cpu().numpy())
    return out


def relevance_by_layer(
    model,
    split,
    *,
    max_instances: int | None = None,
    seed: int = 0,
    residual: float = RESIDUAL,
    chunk_size: int | None = None,
    scale: float = FLOW_SCALE,
    positions: str = "words",
) -> RelevanceResult:
    """Raw attention, rollout and flow of the output position after each layer (A&Z 2020, Sec. 3-4).

    For layer l: raw attention is layer l's [CLS] (<SOS>) row averaged over the heads; rollout
    is row 0 of R_l (:func:`rollout`); flow is the max-flow from (l + 1, [CLS]) to each input
    token through layers 0 .. l (:func:`flow`). Each is cut to the words and renormalised, so
    the three are distributions over the same tokens as gradient and leave-one-out importance
    (:func:`attnlib.experiments.importance.importance`). Instances and chunks come from the
    book's runner: the same ``max_instances`` and ``seed`` pick the same sentences as every
    other experiment.

    Args:
        model: a model with ``trace(batch)`` whose output reads position 0, e.g. the book's
            :class:`~attnlib.models.TransformerClassifier`.
        split: an :class:`attnlib.data.Split` (e.g. ``dataset.test``) or a Batch.
        max_instances, seed, chunk_size: as for every per-instance experiment.
        residual: A^'s identity weight r in [0, 1) (A&Z: 0.5).
        scale: flow's capacity scale (:func:`flow`).
        positions: ``"words"`` (default): cut to the words, as above. ``"all"``: keep [CLS]
            and [SEP] (<SOS>, <EOS>), as the notebook behind A&Z's Tables 1-2 does; compare it
            with ``importance(..., positions="all", loo_mode="replace")``. In layer 1 rollout
            and flow then differ from raw attention only in [CLS]'s own weight,
            (a_00 + 1) / 2, which ranks [CLS] first.
    """
    if not has_capability(model, "layered"):
        raise ValueError(f"model must have a trace(batch) method (a transformer), got {type(model).__name__}")
    residual = _check_residual(residual)
    scale = _check_scale(scale)
    if positions not in ("words", "all"):
        raise ValueError(f"positions must be 'words' or 'all', got {positions!r}")
    with runs.experiment(model, split, seed=seed, max_instances=max_instances, chunk_size=chunk_size,
                          rows=64, cost=lambda T, H: T * (T + H) * 64, budget=32_000_000, own_attention=False,
                          min_tokens=2) as run:
        scores = {m: [None] * len(run) for m in RELEVANCE_METHODS}
        probs = None
        for rows, chunk in run.chunk_batches():  # rows: the chunk's positions in run.batch
            with torch.no_grad():
                trace = model.trace(chunk)
                p = model(chunk).probs.cpu().numpy()
            probs = np.zeros((len(run), p.shape[1])) if probs is None else probs
            probs[rows] = p
            A, key_mask = _check_inputs(trace.attentions, trace.key_mask)
            L = A.shape[1]
            words = real_token_mask(trace.tokens) if positions == "words" else key_mask
            raw = A.mean(2)[:, :, 0, :]  # (B, L, T)
            rolled = rollout(A, key_mask, residual=residual)[:, :, 0, :]
            flowed = torch.stack([flow(A[:, : l + 1], key_mask, residual=residual, scale=scale)
                                  for l in range(L)], 1)
            for name, value in zip(RELEVANCE_METHODS, (raw, rolled, flowed)):
                for row, per_word in zip(rows, _words_only(value.double(), words)):
                    scores[name][row] = per_word
        fields = run.instance_fields(probs, with_specials=positions == "all")  # the positions scored
    return RelevanceResult(**fields, scores=scores, residual=residual, positions=positions)


def instance_correlations(relevance: RelevanceResult, importance, measures=("loo", "gradient")) -> dict:
    """Spearman's rho per instance and layer: ``{(measure, method): (N, L) array}`` (NaN where undefined).

    The values :func:`layer_correlations` averages; for paired comparisons of the methods on the
    same sentences (:func:`attnlib.uncertainty.compare`, :func:`attnlib.uncertainty.rank`).
    ``importance`` is an :class:`~attnlib.experiments.importance.ImportanceResult` of the same
    instances (same ``max_instances`` and ``seed``).
    """
    if not isinstance(relevance, RelevanceResult):
        raise ValueError(f"relevance must be a RelevanceResult (relevance_by_layer), got {type(relevance).__name__}")
    if not np.array_equal(np.asarray(relevance.indices), np.asarray(importance.indices)):
        raise ValueError("relevance and importance cover different instances: use the same max_instances and seed")
    theirs = getattr(importance, "settings", {}).get("positions", "words")
    if theirs != relevance.positions:
        raise ValueError(f"relevance scores positions={relevance.positions!r} but importance "
                         f"positions={theirs!r}: compute both with the same positions")
    lengths = np.asarray(relevance.lengths)
    L = relevance.n_layers
    out = {}
    for measure in measures:
        target = importance.padded(measure)  # (N, n_max)
        for method in relevance.scores:
            scores = relevance.padded(method)  # (N, L, n_max)
            out[measure, method] = spearman(scores, np.repeat(target[:, None, :], L, 1),
                                            lengths=np.repeat(lengths[:, None], L, 1))
    return out


def layer_correlations(relevance: RelevanceResult, importance, measures=("loo", "gradient")) -> pd.DataFrame:
    """Spearman's rho between each relevance method after each layer and each importance measure.

    One row per (measure, method, layer): the mean and sd over instances of the per-instance
    rho (A&Z's Tables 1-3), the mean's 95% bootstrap interval over instances (``low``,
    ``high``; :func:`attnlib.uncertainty.bootstrap`), and how many instances had a defined rho
    (a constant score has none). ``importance`` is an
    :class:`~attnlib.experiments.importance.ImportanceResult` of the same instances (same
    ``max_instances`` and ``seed``).
    """
    rows = []
    for (measure, method), rho in instance_correlations(relevance, importance, measures).items():
        intervals = uncertainty.bootstrap(rho)  # one per layer, the same sentences resampled
        for layer, interval in enumerate(intervals):
            r = rho[:, layer]
            rows.append({"measure": measure, "method": method, "layer": layer + 1,
                         "mean": float(np.nanmean(r)), "sd": float(np.nanstd(r)),
                         "low": interval.low, "high": interval.high, "n": int(np.isfinite(r).sum())})
    return pd.DataFrame(rows)


def correlations_over_seeds(relevance, importance, measures=("loo", "gradient"), *, seed: int = 0):
    """:func:`layer_correlations` over the models of several training seeds.

    ``relevance``, ``importance``: :func:`relevance_by_layer` and
    :func:`~attnlib.experiments.importance.importance` run on every model of one seed set with
    the same ``max_instances`` and ``seed`` (:func:`attnlib.seeds.run_over_seeds`: the same
    sentences for every seed), in seed order. Returns ``(table, rho)``: ``rho`` is
    ``{(measure, method): (S, N, L)}``, each seed's :func:`instance_correlations`; ``table``
    has one row per (measure, method, layer) with the mean over seeds and sentences, the sd over
    sentences (the mean of the seeds' sds, for the figure's bands), the 95% interval over seeds
    and sentences (:func:`attnlib.uncertainty.over_seeds`: ``low``, ``high``, clipped to [-1, 1],
    where a mean rho lies: with 3 seeds Student's t has 2 degrees of freedom), the sentences with
    a defined rho in every seed (``n``) and the number of ``seeds``.
    """
    relevance, importance = list(relevance), list(importance)
    if not relevance or len(relevance) != len(importance):
        raise ValueError(f"need one relevance and one importance result per seed, got {len(relevance)} and "
                         f"{len(importance)}")
    first = np.asarray(relevance[0].indices)
    if any(not np.array_equal(np.asarray(r.indices), first) for r in relevance):
        raise ValueError("the seeds' results cover different instances: use the same max_instances and seed")
    per_seed = [instance_correlations(r, i, measures) for r, i in zip(relevance, importance)]
    rho = {key: np.stack([c[key] for c in per_seed]) for key in per_seed[0]}
    rows = []
    for (measure, method), values in rho.items():  # (S, N, L)
        for layer in range(values.shape[2]):
            r = values[:, :, layer]
            iv = uncertainty.over_seeds(r, seed=seed)
            rows.append({"measure": measure, "method": method, "layer": layer + 1, "mean": iv.estimate,
                         "sd": float(np.mean(np.nanstd(r, axis=1))),
                         "low": max(iv.low, -1.0), "high": min(iv.high, 1.0),  # where a mean rho lies
                         "n": int(np.isfinite(r).all(0).sum()), "seeds": len(per_seed)})
    return pd.DataFrame(rows), rho


def rationale_scores(relevance: RelevanceResult, importance, *, seed: int = 0) -> dict:
    """Every score the book ranks a sentence's words by, for a known rationale (Chapter 14):
    ``{method: [one array per instance]}``, aligned with ``relevance.indices``.

    Raw attention, rollout and flow after the last layer (``relevance``, over the words), blank-out
    and gradient importance (``importance``, the same instances) and a seeded uniform ``random``
    score (``numpy.random.default_rng(seed)``: the same for every model scored with that seed).
    """
    if not isinstance(relevance, RelevanceResult):
        raise ValueError(f"relevance must be a RelevanceResult (relevance_by_layer), got {type(relevance).__name__}")
    if relevance.positions != "words":
        raise ValueError("rationale_scores needs relevance over the words (positions='words')")
    if not np.array_equal(np.asarray(relevance.indices), np.asarray(importance.indices)):
        raise ValueError("relevance and importance cover different instances: use the same max_instances and seed")
    out = {m: [np.asarray(s[-1]) for s in relevance.scores[m]] for m in RELEVANCE_METHODS}
    out["blank-out"] = list(importance.loo)
    out["gradient"] = list(importance.gradient)
    rng = np.random.default_rng(seed)
    out["random"] = [rng.random(len(s)) for s in out[RELEVANCE_METHODS[0]]]
    return out
