"""Faithfulness and plausibility of token scores: ERASER's metrics (DeYoung et al. 2020) and rationale recovery.

Jacovi & Goldberg (2020) separate two questions about an explanation: is it *plausible*
(does it convince a human: does it agree with the tokens people mark), and is it *faithful*
(does it reflect what the model computed)? Plausibility is measured against human
rationales; faithfulness without them, by what the model does when the tokens go.

**Faithfulness.** For a soft score s over the n real tokens of x (attention, gradients,
leave-one-out, flow, ...), the rationale r_f is its top k = ceil(f n) tokens (ties: the
earlier token first; at least 1, at most n). With m(.)_j the model's probability of the class
j it predicts for the whole of x, ERASER defines

    comprehensiveness_f = m(x)_j - m(x \\ r_f)_j     (higher is better: the model needs r_f)
    sufficiency_f       = m(x)_j - m(r_f)_j         (lower is better: r_f alone suffices)

and summarises each over the fractions f in 1, 5, 10, 20, 50 % by AOPC, the plain mean of
the 5 differences (as ERASER's code computes it). The two differ only in what is kept --
the rest of x, or r_f -- and are computed by one function (:func:`faithfulness`). The
removal is *deletion*: the dropped tokens are taken out and the sequence gets shorter, as
for J&W's leave-one-out (:func:`attnlib.experiments.importance.leave_one_out`); a text with
every token removed is ``<SOS> <UNK> <EOS>`` (one unknown word: J&W's classifier needs a
token to attend to).

Serrano & Smith's faithfulness measure, the fraction of the attention removed (at the
attention layer, the hidden states fixed) before the decision flips, is
:func:`attnlib.experiments.erasure.ranked_removal`; its direction is in :data:`METRICS` too.

**Plausibility.** :func:`rationale_ranking` scores a soft score against a human (or
synthetic) rationale mask per instance -- precision@k, average precision and ROC-AUC --
and :func:`rationale_recovery` tabulates them for the measures of an
:class:`~attnlib.experiments.importance.ImportanceResult` beside a random ranking
(moved here from :mod:`~attnlib.experiments.importance`, which still exports it).

Every metric carries its direction (:class:`Metric`, :data:`METRICS`), so tables and plots
label themselves (``METRICS["sufficiency"].label`` is ``"sufficiency (lower is better)"``).

Implementation: :func:`faithfulness` runs through the one experiment runner
(:mod:`attnlib.runs`: a seeded subset, length buckets, ``chunk_size``, eval mode). For a
chunk of instances it builds every reduced input -- (instance, measure, fraction, kept part)
-- at once with index arithmetic (no loop over instances or thresholds), sorts the rows by
length and runs them as a few padded batches of at most ``max_tokens`` tokens. The plain
per-instance forms (:func:`top_k_count`, :func:`rationale_mask`, :func:`probability_drop`,
:func:`aopc`) are what the batched code computes, written for one instance's arrays.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from .. import runs
from .._checks import check_distribution, check_positive_int
from ..runs import InstanceResult
from ..data import Split
from ..models.protocol import check_token_model, model_name, word_mask
from .importance import MEASURES, ImportanceResult

__all__ = [
    "FRACTIONS",
    "MAX_TOKENS",
    "Metric",
    "METRICS",
    "top_k_count",
    "rationale_mask",
    "probability_drop",
    "aopc",
    "erasure_metrics",
    "FaithfulnessResult",
    "faithfulness",
    "faithfulness_summary",
    "rationale_ranking",
    "rationale_recovery",
    "rationale_ties",
    "fraction_to_flip",
    "erasure_curves",
]

#: ERASER's fractions of the tokens kept as the rationale (DeYoung et al. 2020): 1, 5, 10, 20 and 50 %.
FRACTIONS = (0.01, 0.05, 0.10, 0.20, 0.50)

#: Default bound on the tokens (rows x padded width) of one forward pass of reduced inputs.
MAX_TOKENS = 65_536

# faithfulness(): about this many instances per length bucket, fewer where the reduced inputs pass the budget.
_ROWS = 64
_BUDGET = 2**24


# ----------------------------------------------------------------------------- the metrics and their direction


@dataclass(frozen=True)
class Metric:
    """A metric's name and direction, so tables and plots label themselves.

    kind: ``"faithfulness"`` (measured on the model) or ``"plausibility"`` (against human
    rationales). keeps: for the erasure metrics, what the reduced input keeps (``"rest"``:
    x without the rationale, ``"rationale"``: the rationale alone); None otherwise.
    """

    name: str
    higher_is_better: bool
    kind: str
    description: str
    keeps: str | None = None

    @property
    def direction(self) -> str:
        return "higher is better" if self.higher_is_better else "lower is better"

    @property
    def label(self) -> str:
        """``"name (higher is better)"``: a column or axis label."""
        return f"{self.name} ({self.direction})"


COMPREHENSIVENESS = Metric("comprehensiveness", True, "faithfulness",
                           "m(x)_j - m(x without the top-k tokens)_j (DeYoung et al. 2020)", keeps="rest")
SUFFICIENCY = Metric("sufficiency", False, "faithfulness",
                     "m(x)_j - m(the top-k tokens alone)_j (DeYoung et al. 2020)", keeps="rationale")

#: Every metric of the book's faithfulness and plausibility chapters, by name.
METRICS = {
    m.name: m
    for m in (
        COMPREHENSIVENESS,
        SUFFICIENCY,
        Metric("fraction removed", False, "faithfulness",
               "share of the attention erased before the decision flips (Serrano & Smith 2019; "
               "attnlib.experiments.erasure.ranked_removal)"),
        Metric("precision@k", True, "plausibility", "share of the top-k tokens that are rationale tokens"),
        Metric("average precision", True, "plausibility", "mean precision at each rationale token's score"),
        Metric("AUC", True, "plausibility", "P(a rationale token outscores another token), ties 1/2"),
    )
}

#: The two erasure metrics, in the order of :class:`FaithfulnessResult`'s arrays.
_ERASURE = (COMPREHENSIVENESS, SUFFICIENCY)


# ----------------------------------------------------------------------------- plain per-instance forms


def _check_fractions(fractions) -> tuple:
    if isinstance(fractions, (str, bytes)):
        raise ValueError(f"fractions must be a sequence of numbers in (0, 1], got {fractions!r}")
    try:
        values = tuple(fractions)
    except TypeError:
        values = (fractions,)
    if not values:
        raise ValueError("fractions must hold at least one fraction in (0, 1]")
    out = []
    for f in values:
        if isinstance(f, bool) or not isinstance(f, (int, float, np.integer, np.floating)) or not np.isfinite(f) \
                or not 0 < f <= 1:
            raise ValueError(f"every fraction must be a number in (0, 1] (a share of the tokens), got {f!r}")
        out.append(float(f))
    if len(set(out)) != len(out):
        raise ValueError(f"fractions must not repeat, got {values!r}")
    return tuple(out)


def top_k_count(n, fraction: float):
    """k = ceil(fraction * n), at least 1 and at most n: how many tokens ERASER keeps at a fraction.

    ``n`` an int or an integer array of token counts (>= 1). The product is rounded to 9
    decimals first, so that 0.05 * 20 (1.0000000000000002 in floating point) gives 1.
    """
    (fraction,) = _check_fractions([fraction])
    n_arr = np.asarray(n)
    if n_arr.dtype.kind not in "iu" or (n_arr < 1).any():
        raise ValueError(f"n must be a positive integer (or array of them), got {n!r}")
    k = np.clip(np.ceil(np.round(n_arr * fraction, 9)), 1, n_arr).astype(np.int64)
    return int(k) if k.ndim == 0 else k


def rationale_mask(scores, fraction: float) -> np.ndarray:
    """The top ceil(fraction * n) tokens of one instance's scores (n,), as a bool mask (ties: earlier first)."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 1 or scores.size == 0:
        raise ValueError(f"scores must be a non-empty 1-D array (one score per token), got shape {scores.shape}")
    if not np.isfinite(scores).all():
        raise ValueError("scores contains NaN or inf")
    k = top_k_count(len(scores), fraction)
    mask = np.zeros(len(scores), dtype=bool)
    mask[np.argsort(-scores, kind="stable")[:k]] = True
    return mask


def probability_drop(probs, reduced, target=None) -> np.ndarray:
    """m(x)_j - m(x')_j: how much the probability of class j falls from x to a reduced input x'.

    Comprehensiveness is this with x' = x without the rationale, sufficiency with x' = the
    rationale alone. j is ``target``, by default the class the model predicts for x, argmax m(x).

    Args:
        probs: m(x), (C,) or (N, C).
        reduced: m(x') with the shape of ``probs`` plus any number of axes before the class
            axis, e.g. (F, C) for one instance's F fractions, or (N, ..., C).
        target: class j (an int, or (N,) ints); None: argmax of ``probs``.

    Returns:
        an array of ``reduced``'s shape without its class axis.
    """
    p = np.asarray(probs, dtype=np.float64)
    r = np.asarray(reduced, dtype=np.float64)
    if p.ndim not in (1, 2) or r.ndim < p.ndim or r.shape[: p.ndim - 1] != p.shape[:-1] or r.shape[-1] != p.shape[-1]:
        raise ValueError(
            f"probs must be (C,) or (N, C) and reduced the same with any axes before the class axis; "
            f"got {p.shape} and {r.shape}"
        )
    check_distribution(torch.from_numpy(np.ascontiguousarray(p)), "probs")
    check_distribution(torch.from_numpy(np.ascontiguousarray(r)), "reduced")
    j = p.argmax(-1) if target is None else np.asarray(target)
    if j.shape != p.shape[:-1] or j.dtype.kind not in "iu" or (j < 0).any() or (j >= p.shape[-1]).any():
        raise ValueError(f"target must be a class index for each row of probs (shape {p.shape[:-1]}), got {target!r}")
    return _drop(p, r, j)


def _drop(p: np.ndarray, r: np.ndarray, j: np.ndarray) -> np.ndarray:
    """probability_drop on validated arrays: p (..., C), r (..., *extra, C), j (...)."""
    extra = r.ndim - p.ndim
    p_j = np.take_along_axis(p, j[..., None], -1)[..., 0]
    jj = j.reshape(j.shape + (1,) * extra + (1,))
    r_j = np.take_along_axis(r, np.broadcast_to(jj, r.shape[:-1] + (1,)), -1)[..., 0]
    return p_j.reshape(p_j.shape + (1,) * extra) - r_j


def aopc(values) -> np.ndarray:
    """AOPC: the plain mean of a metric over the fractions (the last axis), as ERASER's code computes it."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 0 or v.shape[-1] == 0:
        raise ValueError("values must have a non-empty last axis (one value per fraction)")
    return v.mean(-1)


def erasure_metrics(probs, probs_without, probs_rationale, target=None) -> dict:
    """One instance's comprehensiveness and sufficiency at each fraction, and their AOPC.

    Args:
        probs: m(x), (C,).
        probs_without: m(x without r_f), (F, C), one row per fraction.
        probs_rationale: m(r_f), (F, C).
        target: class j (None: argmax m(x)).

    Returns:
        {"comprehensiveness": (F,), "sufficiency": (F,), "comprehensiveness AOPC": float,
        "sufficiency AOPC": float}.
    """
    if np.ndim(probs) != 1 or np.ndim(probs_without) != 2 or np.shape(probs_without) != np.shape(probs_rationale):
        raise ValueError(
            f"probs must be (C,) and probs_without, probs_rationale both (F, C); got {np.shape(probs)}, "
            f"{np.shape(probs_without)} and {np.shape(probs_rationale)}"
        )
    out = {}
    for metric, reduced in zip(_ERASURE, (probs_without, probs_rationale)):
        values = probability_drop(probs, reduced, target)
        out[metric.name] = values
        out[f"{metric.name} AOPC"] = float(aopc(values))
    return out


# ----------------------------------------------------------------------------- the batched experiment


@dataclass
class FaithfulnessResult(InstanceResult):
    """Output of :func:`faithfulness`; row i is instance ``indices[i]``, axis m is ``measures[m]``, f ``fractions[f]``.

    comprehensiveness: (N, M, F) m(x)_j - m(x without r_f)_j.
    sufficiency:       (N, M, F) m(x)_j - m(r_f)_j.
    k:                 (N, F) tokens in r_f, ceil(f n) clipped to [1, n].
    probs_without:     (N, M, F, C) m(x without r_f).  probs_rationale: (N, M, F, C) m(r_f).
    target:            (N,) the class j (the prediction for x).
    probs, predicted, labels, indices, lengths, excluded: as every :class:`InstanceResult`.
    """

    measures: tuple
    fractions: tuple
    comprehensiveness: np.ndarray
    sufficiency: np.ndarray
    k: np.ndarray
    probs_without: np.ndarray
    probs_rationale: np.ndarray
    target: np.ndarray
    settings: dict = field(default_factory=dict)

    def values(self, metric: str) -> np.ndarray:
        """(N, M, F) values of ``"comprehensiveness"`` or ``"sufficiency"``."""
        if metric not in ("comprehensiveness", "sufficiency"):
            raise ValueError(f"unknown metric {metric!r}; choose comprehensiveness or sufficiency")
        return getattr(self, metric)

    def aopc(self, metric: str) -> np.ndarray:
        """(N, M) AOPC of a metric: its plain mean over the fractions."""
        return aopc(self.values(metric))

    def to_frame(self) -> pd.DataFrame:
        """One row per (instance, measure, fraction): instance, label, predicted, length, measure, fraction, k, metrics."""
        N, M, F = self.comprehensiveness.shape
        frame = self.instance_frame(
            repeat=M * F,
            measure=pd.Categorical(np.tile(np.repeat(np.asarray(self.measures, dtype=object), F), N),
                                   categories=list(self.measures)),
            fraction=np.tile(np.asarray(self.fractions), N * M),
            k=np.repeat(self.k[:, None, :], M, 1).reshape(-1),
            comprehensiveness=self.comprehensiveness.reshape(-1),
            sufficiency=self.sufficiency.reshape(-1),
        )
        return frame


def _check_model(model):
    return check_token_model(model, "faithfulness (deletion runs model(ids) on shortened token ids)")


def _score_table(scores, split):
    """(measure names, {name: lookup}, the split or batch to run on) from an ImportanceResult or a mapping."""
    if isinstance(scores, ImportanceResult):
        if not isinstance(split, Split):
            raise ValueError("with an ImportanceResult, pass the Split it was computed on (its indices are split positions)")
        scores.check()
        positions = np.asarray(scores.indices, dtype=np.int64)
        if len(positions) and int(positions.max()) >= len(split):
            raise ValueError(
                f"the ImportanceResult refers to split position {int(positions.max())} but the split has "
                f"{len(split)} instances: pass the split it was computed on"
            )
        table = {name: dict(zip(positions.tolist(), getattr(scores, name))) for name in MEASURES}
        return MEASURES, table, split.batch(positions)
    if not isinstance(scores, Mapping) or not scores:
        raise ValueError(
            "scores must be an ImportanceResult or a non-empty mapping {name: per-instance scores}, each a "
            "sequence of 1-D arrays indexed by split position (one score per real token)"
        )
    names = tuple(scores)
    if not all(isinstance(name, str) for name in names):
        raise ValueError(f"the names of scores must be strings, got {names!r}")
    for name, values in scores.items():
        if isinstance(values, (str, bytes)) or not hasattr(values, "__getitem__") or not hasattr(values, "__len__"):
            raise ValueError(f"scores[{name!r}] must be a sequence of 1-D arrays indexed by split position")
    return names, dict(scores), split


def _padded_scores(table: dict, names: tuple, batch, lengths: np.ndarray) -> np.ndarray:
    """(N, M, T) float64 scores aligned to ``batch.tokens`` (0 off the real tokens), validated."""
    index = batch.index.cpu().numpy()
    mask = batch.mask.cpu().numpy()
    out = np.zeros((len(index), len(names), mask.shape[1]))
    for m, name in enumerate(names):  # gathering ragged arrays once per run, not in the hot path
        values = table[name]
        try:
            rows = [np.asarray(values[int(i)], dtype=np.float64).reshape(-1) for i in index]
        except (IndexError, KeyError):
            raise ValueError(
                f"scores[{name!r}] has no entry for some split position in {index.min()}..{index.max()}: it must be "
                f"indexed by split position (one array per instance)"
            ) from None
        except (TypeError, ValueError) as err:
            raise ValueError(f"scores[{name!r}] must hold arrays of numbers: {err}") from None
        counts = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        if (counts != lengths).any():
            bad = int(np.flatnonzero(counts != lengths)[0])
            raise ValueError(
                f"scores[{name!r}] for split position {int(index[bad])} has {counts[bad]} values but the instance has "
                f"{lengths[bad]} real tokens: give one score per real token (no <SOS>/<EOS>)"
            )
        flat = np.concatenate(rows)
        if not np.isfinite(flat).all():
            raise ValueError(f"scores[{name!r}] contains NaN or inf")
        out[:, m][mask] = flat
    return out


def _ranks(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Rank of every position by descending score among the real tokens (ties: earlier first); (n, M, T) long."""
    keys = (-scores).masked_fill(~mask.unsqueeze(1), float("inf"))
    order = torch.sort(keys, dim=-1, stable=True).indices
    ranks = torch.empty_like(order)
    ranks.scatter_(-1, order, torch.arange(order.shape[-1], device=order.device).expand_as(order))
    return ranks


def _reduced_inputs(tokens: torch.Tensor, keep: torch.Tensor, pad_id: int, unk_id: int) -> torch.Tensor:
    """Token rows with only the kept real tokens, shortened (deletion): (n, T) ids, (n, R, T) bool -> (n R, T) ids.

    The start and end tokens (<SOS>, <EOS>; [CLS], [SEP]) stay; a row that keeps no real token
    becomes ``<SOS> <UNK> <EOS>``. Compacted by a stable sort of the kept positions to the
    front, then ``pad_id`` after the end.
    """
    n, R, T = keep.shape
    real = word_mask(tokens, pad_id)  # (n, T)
    frame = (tokens != pad_id) & ~real  # the start and end tokens
    kept_real = keep & real.unsqueeze(1)
    rows = tokens.unsqueeze(1).expand(n, R, T).reshape(n * R, T)
    kept = (kept_real | frame.unsqueeze(1)).reshape(n * R, T)
    empty = ~kept_real.reshape(n * R, T).any(-1)  # (n R,)
    at_one = torch.zeros_like(kept)
    at_one[:, 1] = True
    placeholder = at_one & empty.unsqueeze(1)  # position 1 (the first word) becomes <UNK>
    rows = rows.masked_fill(placeholder, unk_id)
    kept = kept | placeholder
    order = torch.sort((~kept).to(torch.int8), dim=-1, stable=True).indices
    lengths = kept.sum(-1, keepdim=True)
    return rows.gather(1, order).masked_fill(torch.arange(T, device=rows.device) >= lengths, pad_id)


def _probs_of_rows(model, rows: torch.Tensor, max_tokens: int) -> torch.Tensor:
    """``model(rows).probs`` for many rows: sorted by length, in padded batches of at most ``max_tokens`` tokens
    (and :data:`attnlib.runs.PASS_ELEMENTS` elements by the model's ``token_cost``)."""
    lengths = (rows != model.pad_id).sum(-1)
    order = torch.argsort(lengths, descending=True, stable=True)
    lens = lengths[order].tolist()
    out = None
    start = 0
    while start < len(lens):
        width = lens[start]
        stop = min(len(lens), start + runs.rows_per_pass(model, width, max_tokens))
        idx = order[start:stop]
        probs = model(rows[idx, :width]).probs
        if out is None:
            out = probs.new_empty(rows.shape[0], probs.shape[-1])
        out[idx] = probs
        start = stop
    return out


def faithfulness(
    model,
    split,
    scores,
    *,
    fractions=FRACTIONS,
    max_instances: int | None = None,
    seed: int = 0,
    chunk_size: int | None = None,
    max_tokens: int = MAX_TOKENS,
) -> FaithfulnessResult:
    """ERASER's comprehensiveness and sufficiency of soft token scores, by deletion (DeYoung et al. 2020).

    For each instance x (n real tokens), each measure's scores s and each fraction f, the
    rationale r_f is the top k = ceil(f n) tokens of s (:func:`top_k_count`; ties: earlier
    first), and with j = argmax m(x) (the predicted class)

        comprehensiveness_f = m(x)_j - m(x without r_f)_j,   sufficiency_f = m(x)_j - m(r_f)_j,

    the removed tokens deleted (the input gets shorter). One computation gives both: each
    reduced input keeps either the rest or r_f, and every reduced input of a chunk of
    instances x measures x fractions x {rest, r_f} is one set of padded rows.
    AOPC (:meth:`FaithfulnessResult.aopc`, :func:`faithfulness_summary`) is the plain mean
    over the fractions.

    Args:
        model: an :class:`~attnlib.models.AttentionClassifier` or a
            :class:`~attnlib.models.TransformerClassifier` (eval mode for the call, restored
            after; no gradients).
        split: a :class:`~attnlib.data.Split` or :class:`~attnlib.data.Batch`.
        scores: an :class:`~attnlib.experiments.importance.ImportanceResult` of this split
            (its attention, gradient and LOO; its instances), or a mapping {name: scores}
            where ``scores[i]`` is a 1-D array with one value per real token of split
            position i (a Batch's ``index``), higher = more important.
        fractions: the fractions f in (0, 1] (default :data:`FRACTIONS`: ERASER's 1, 5, 10,
            20, 50 %).
        max_instances, seed: a seeded stratified subset, the same as every experiment's.
        chunk_size: instances per chunk; None: about 64, fewer for long documents. Any
            value gives the same result (up to float rounding).
        max_tokens: at most this many tokens (rows x padded width) per forward pass.

    Raises:
        ValueError: for a model other than the two families, bad fractions, scores that do
        not have one finite value per real token of every instance, or an empty split.
    """
    model = _check_model(model)
    fractions = _check_fractions(fractions)
    max_tokens = check_positive_int(max_tokens, "max_tokens")
    names, table, source = _score_table(scores, split)
    M, F = len(names), len(fractions)
    R = 2 * M * F  # reduced inputs per instance
    frac = torch.tensor(fractions, dtype=torch.float64, device="cpu")
    with runs.experiment(model, source, seed=seed, max_instances=max_instances, chunk_size=chunk_size,
                          rows=_ROWS, cost=lambda T, H: R * T * (H + T), budget=_BUDGET,
                          checked_model=model) as run, torch.no_grad():
        N, C = len(run), model.n_classes
        padded = _padded_scores(table, names, run.batch, run.lengths)  # (N, M, T_all)
        probs = np.empty((N, C))
        reduced = np.empty((N, 2, M, F, C))
        k_all = np.empty((N, F), dtype=np.int64)
        for rows, chunk in run.chunk_batches():
            tokens = model.token_ids(chunk)  # (n, T), validated by the model
            n, T = tokens.shape
            mask = word_mask(tokens, model.pad_id)
            s = torch.as_tensor(padded[rows, :, :T], device=tokens.device)  # (n, M, T)
            ranks = _ranks(s, mask)  # (n, M, T)
            length = mask.sum(-1).double()  # (n,)
            k = torch.ceil(torch.round(length[:, None] * frac.to(tokens.device), decimals=9))
            k = torch.minimum(k.clamp_min(1), length[:, None]).long()  # (n, F)
            top = ranks.unsqueeze(2) < k[:, None, :, None]  # (n, M, F, T): r_f
            keep = torch.stack([~top, top], 1)  # (n, 2, M, F, T): keep the rest / keep r_f
            rows_in = _reduced_inputs(tokens, keep.reshape(n, R, T), model.pad_id, model.unk_id)
            p_reduced = _probs_of_rows(model, rows_in, max_tokens)  # (n R, C)
            probs[rows] = model(tokens).probs.double().cpu().numpy()
            reduced[rows] = p_reduced.double().cpu().numpy().reshape(n, 2, M, F, C)
            k_all[rows] = k.cpu().numpy()
    target = probs.argmax(-1)
    drops = _drop(probs, reduced, target)  # (N, 2, M, F): the one formula for both metrics
    return FaithfulnessResult(
        measures=names,
        fractions=fractions,
        comprehensiveness=drops[:, 0],
        sufficiency=drops[:, 1],
        k=k_all,
        probs_without=reduced[:, 0],
        probs_rationale=reduced[:, 1],
        target=target,
        settings={"model": model_name(model),
                  "split": getattr(split, "name", "batch"), "removal": "delete",
                  "max_instances": max_instances, "seed": run.seed},
        **run.instance_fields(probs),
    )


def faithfulness_summary(result: FaithfulnessResult, *, by_fraction: bool = False) -> pd.DataFrame:
    """Mean comprehensiveness and sufficiency per measure, columns labelled with their direction.

    Default: one row per measure, the mean AOPC of each metric (columns
    ``"comprehensiveness (higher is better)"``, ``"sufficiency (lower is better)"``) and ``n``.
    ``by_fraction``: one row per (measure, fraction) with the means at that fraction.
    """
    if not isinstance(result, FaithfulnessResult):
        raise ValueError(f"result must be a FaithfulnessResult (from faithfulness), got {type(result).__name__}")
    if by_fraction:
        index = pd.MultiIndex.from_product([list(result.measures), list(result.fractions)],
                                           names=["measure", "fraction"])
        columns = {m.label: result.values(m.name).mean(0).reshape(-1) for m in _ERASURE}
        return pd.DataFrame({**columns, "n": len(result)}, index=index)
    columns = {m.label: result.aopc(m.name).mean(0) for m in _ERASURE}
    frame = pd.DataFrame({**columns, "n": len(result)}, index=pd.Index(list(result.measures), name="measure"))
    return frame


# ----------------------------------------------------------------------------- plausibility: rationales


def _ranking_metrics(scores: np.ndarray, truth: np.ndarray, valid: np.ndarray, k: np.ndarray, chunk: int = 2_000_000):
    """Per-row expected precision@k, average precision and ROC-AUC of ``scores`` against ``truth``.

    Ties: precision@k is its expectation under random tie-breaking; AP follows sklearn's
    ``average_precision_score`` (a tied group enters at once); AUC counts ties as 1/2.
    """
    N, T = scores.shape
    prec, ap, auc = (np.full(N, np.nan) for _ in range(3))
    rows = max(1, chunk // max(1, T * T))
    for s in range(0, N, rows):
        sl = slice(s, s + rows)
        x, y, v, kk = scores[sl], truth[sl] & valid[sl], valid[sl], k[sl]
        # pair[b, i, j] compares token i with token j of row b (both valid)
        both = v[:, :, None] & v[:, None, :]
        gt = (x[:, None, :] > x[:, :, None]) & both  # j scores above i
        eq = (x[:, None, :] == x[:, :, None]) & both  # j ties with i (i itself included)
        above = gt.sum(2)
        tied = np.maximum(eq.sum(2), 1)
        # token i takes a rank uniform in above+1 .. above+tied: P(rank <= k)
        in_top = np.clip((kk[:, None] - above) / tied, 0.0, 1.0)
        n_true = y.sum(1)
        with np.errstate(invalid="ignore", divide="ignore"):
            prec[sl] = np.where(n_true > 0, (in_top * y).sum(1) / kk, np.nan)
            # precision at the threshold s_i: true tokens scoring >= s_i over all tokens scoring >= s_i
            ge = gt | eq
            at_least = ge.sum(2)
            true_at_least = (ge & y[:, None, :]).sum(2)
            ap[sl] = np.where(n_true > 0, ((true_at_least / np.maximum(at_least, 1)) * y).sum(1) / n_true, np.nan)
            # AUC: over (true i, false j) pairs, 1 if s_i > s_j, 1/2 if tied
            neg = v & ~y
            wins = ((x[:, :, None] > x[:, None, :]) + 0.5 * (x[:, :, None] == x[:, None, :])) * (y[:, :, None] & neg[:, None, :])
            n_pairs = n_true * neg.sum(1)
            auc[sl] = np.where(n_pairs > 0, wins.sum((1, 2)) / np.maximum(n_pairs, 1), np.nan)
    return prec, ap, auc


def _random_ap(n: np.ndarray, r: np.ndarray) -> np.ndarray:
    """E[AP] of a uniformly random ranking of n tokens, r of them true: (H_n + (r-1)/(n-1) (n - H_n)) / n."""
    harmonic = np.array([np.sum(1.0 / np.arange(1, m + 1)) for m in range(int(n.max()) + 1)])[n]
    frac = np.where(n > 1, (r - 1) / np.maximum(n - 1, 1), 0.0)
    return (harmonic + frac * (n - harmonic)) / n


def _pad_rows(arrays, lengths: np.ndarray, dtype) -> np.ndarray:
    out = np.zeros((len(arrays), int(lengths.max())), dtype=dtype)
    out[np.arange(out.shape[1])[None, :] < lengths[:, None]] = np.concatenate(arrays)
    return out


def rationale_ranking(scores, rationales, k: int | None = None) -> pd.DataFrame:
    """Per-instance plausibility of soft scores against rationale masks: precision@k, average precision, AUC.

    For each instance (``scores[i]`` and ``rationales[i]`` of equal length, True on the
    rationale tokens): ``precision@k`` -- the share of the top-k tokens that are rationale
    tokens, k = the number of rationale tokens (R-precision) when ``k`` is None, else
    min(k, n), ties broken at random (its expectation); ``average precision`` -- mean over
    the rationale tokens t of the precision among tokens scoring >= s_t (as
    ``sklearn.metrics.average_precision_score``); ``AUC`` -- P(a rationale token outscores
    another token), ties 1/2 (NaN without both kinds). NaN rows for instances without a
    rationale token. Batched over padded arrays (pairwise comparisons, chunked).

    Returns:
        a DataFrame with one row per instance and columns ``n_tokens``, ``n_rationale``,
        ``precision@k``, ``average precision``, ``AUC`` (directions in :data:`METRICS`).
    """
    if isinstance(scores, (str, bytes)) or isinstance(rationales, (str, bytes)):
        raise ValueError("scores and rationales must be sequences of 1-D arrays, one per instance")
    scores = [np.asarray(s, dtype=np.float64).reshape(-1) for s in scores]
    truth = [np.asarray(r, dtype=bool).reshape(-1) for r in rationales]
    if not scores:
        raise ValueError("scores is empty: give one array per instance")
    if len(scores) != len(truth):
        raise ValueError(f"got {len(scores)} score arrays but {len(truth)} rationales")
    lengths = np.fromiter(map(len, scores), dtype=np.int64, count=len(scores))
    if (lengths == 0).any():
        raise ValueError("every instance needs at least one token (an empty score array was given)")
    if (np.fromiter(map(len, truth), dtype=np.int64, count=len(truth)) != lengths).any():
        raise ValueError("each rationale must have one entry per token of its instance (as its scores)")
    if k is not None:
        k = check_positive_int(k, "k")
    flat = np.concatenate(scores)
    if not np.isfinite(flat).all():
        raise ValueError("scores contains NaN or inf")
    x, y = _pad_rows(scores, lengths, np.float64), _pad_rows(truth, lengths, bool)
    valid = np.arange(x.shape[1])[None, :] < lengths[:, None]
    n_true = y.sum(1)
    kk = (n_true if k is None else np.minimum(k, lengths)).astype(np.float64)
    prec, ap, auc = _ranking_metrics(x, y, valid, np.maximum(kk, 1))
    return pd.DataFrame({"n_tokens": lengths, "n_rationale": n_true, "precision@k": prec,
                         "average precision": ap, "AUC": auc})


def _tied_ap(score: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    """One instance's average precision with its ties broken (i) at random, in expectation, and
    (ii) in the rationale's favour (a tied rationale token ahead of a tied other one)."""
    order = np.lexsort((~truth, -score))  # by score, the rationale first within a tie
    x, y = score[order], truth[order]
    hits = np.cumsum(y)
    favour = float((hits[y] / (np.flatnonzero(y) + 1)).mean())
    starts = np.flatnonzero(np.r_[True, x[1:] != x[:-1]])
    bounds = np.r_[starts, len(x)]
    total, above, true_above = 0.0, 0, 0
    for a, b in zip(bounds[:-1], bounds[1:]):
        n, t = int(b - a), int(y[a:b].sum())
        if t:  # the group's t rationale tokens take t of its n places uniformly at random
            k = np.arange(1, n + 1)
            before = (k - 1) * (t - 1) / (n - 1) if n > 1 else np.zeros(1)
            total += float(np.sum(t / n * (true_above + 1 + before) / (above + k)))
        above, true_above = above + n, true_above + t
    return total / int(y.sum()), favour


def rationale_ties(scores, rationales) -> pd.DataFrame:
    """How much of a score's average precision its ties decide, per instance.

    :func:`rationale_ranking` scores ties as ``sklearn.metrics.average_precision_score`` does: a
    group of tied tokens enters the ranking at once, so each rationale token in it gets the
    precision of the whole group. A score that gives many tokens exactly the same value (attention
    flow saturates: every token that can take the output node's whole capacity gets a flow of 1)
    loses average precision to that rule alone. Columns, one row per instance with a rationale
    token:

    * ``average precision``: as :func:`rationale_ranking` (ties enter together);
    * ``AP, ties at random``: its expectation when the ties are broken uniformly at random
      (McSherry & Najork 2008, exact: a tied group of n tokens holding t rationale tokens puts
      one at its k-th place with probability t/n, preceded in the group by (k - 1)(t - 1)/(n - 1)
      others on average);
    * ``AP, ties to the rationale``: with every tie broken in the rationale's favour, the AP of
      the order the score gives when only its strict inequalities count (1 when no other token
      scores strictly above a rationale token);
    * ``top tied``: 1 where two or more tokens share the highest score, else 0;
    * ``share tied at the top``: the share of the instance's tokens that share its highest score;
    * ``rationale at the top``: the share of its rationale tokens among them.

    ``scores``, ``rationales``: as for :func:`rationale_ranking` (exact float equality is a tie).
    """
    ranked = rationale_ranking(scores, rationales)
    rows = []
    for s, r in zip(scores, rationales):
        x, y = np.asarray(s, dtype=np.float64).reshape(-1), np.asarray(r, dtype=bool).reshape(-1)
        if not y.any():
            rows.append((np.nan,) * 5)
            continue
        at_random, favour = _tied_ap(x, y)
        top = x == x.max()
        rows.append((at_random, favour, float(top.sum() > 1), float(top.mean()), float(y[top].sum() / y.sum())))
    extra = pd.DataFrame(rows, columns=["AP, ties at random", "AP, ties to the rationale", "top tied",
                                        "share tied at the top", "rationale at the top"])
    return pd.concat([ranked[["n_tokens", "n_rationale", "average precision"]], extra], axis=1)


def rationale_recovery(result: ImportanceResult, rationales, k: int | None = None) -> pd.DataFrame:
    """How well attention, gradients and leave-one-out rank the known rationale tokens first (plausibility).

    For the synthetic task (``split.rationales``: True on the marker words the label is
    computed from), per instance with at least one true token, and per measure:

    * ``precision@k``: the fraction of the top-k tokens that are true, with k = the
      number of true tokens of the instance (R-precision) when ``k`` is None, else
      min(k, n_tokens); ties are broken at random (its expectation is reported);
    * ``average precision``: mean over the true tokens t of the precision among tokens
      scoring >= score_t (as ``sklearn.metrics.average_precision_score``);
    * ``AUC``: P(a random true token outscores a random other token), ties 1/2 (needs
      both kinds of token in the instance).

    Columns hold the means over instances, and ``n`` the instances scored. A last row,
    ``random``, gives the expected values of a uniformly random ranking: R/n for
    precision@k, (H_n + (R - 1)/(n - 1)(n - H_n))/n for AP (H_n the harmonic number),
    1/2 for AUC. Computed batched over padded arrays (:func:`rationale_ranking`).

    Args:
        result: an :class:`~attnlib.experiments.importance.ImportanceResult` of a split with rationales.
        rationales: the split's rationales (a :class:`~attnlib.data.Split`, or its
            ``rationales`` list, indexed by ``result.indices``).
        k: fixed cut-off, or None for k = number of true tokens per instance.
    """
    if not isinstance(result, ImportanceResult):
        raise ValueError(f"expected an ImportanceResult (from attnlib.importance.importance), got {type(result).__name__}")
    result.check()
    if isinstance(rationales, Split):
        if rationales.rationales is None:
            raise ValueError(f"split {rationales.name!r} has no rationales (only the synthetic data set has them)")
        rationales = rationales.rationales
    if rationales is None or isinstance(rationales, (str, bytes)) or not hasattr(rationales, "__getitem__"):
        raise ValueError("rationales must be the split's list of boolean arrays (split.rationales) or the Split")
    if k is not None:
        k = check_positive_int(k, "k")
    indices = np.asarray(result.indices, dtype=np.int64)
    if len(rationales) <= int(indices.max()):
        raise ValueError(
            f"rationales has {len(rationales)} entries but the result refers to split position {int(indices.max())}: "
            f"pass the rationales of the split the result was computed on"
        )
    truth_list = [np.asarray(rationales[i], dtype=bool).reshape(-1) for i in indices.tolist()]
    lengths = result.lengths
    if (np.fromiter(map(len, truth_list), dtype=np.int64, count=len(truth_list)) != lengths).any():
        raise ValueError("each rationale must have one entry per token of its instance (is it the right split?)")
    n_true = np.fromiter((t.sum() for t in truth_list), dtype=np.int64, count=len(truth_list))
    keep = n_true > 0
    if not keep.any():
        raise ValueError("no instance has a true rationale token")
    kept_truth = [t for t, ok in zip(truth_list, keep) if ok]
    rows = {}
    for measure in MEASURES:
        values = getattr(result, measure)
        per = rationale_ranking([v for v, ok in zip(values, keep) if ok], kept_truth, k=k)
        rows[measure] = {
            "precision@k": float(np.nanmean(per["precision@k"])),
            "average precision": float(np.nanmean(per["average precision"])),
            "AUC": float(np.nanmean(per["AUC"])) if per["AUC"].notna().any() else np.nan,
            "n": int(keep.sum()),
        }
    n_k, r_k = lengths[keep], n_true[keep]
    has_auc = r_k < n_k
    rows["random"] = {
        "precision@k": float(np.mean(r_k / n_k)),
        "average precision": float(np.mean(_random_ap(n_k, r_k))),
        "AUC": 0.5 if has_auc.any() else np.nan,
        "n": int(keep.sum()),
    }
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index.name = "measure"
    return frame


# ----------------------------------------------------------------------------- Chapter 15's capstone


def fraction_to_flip(model, split, *, rankings=("attention", "random"),
                     max_instances: int | None = None, seed: int = 0, chunk_size: int | None = None) -> dict:
    """Serrano & Smith's yardstick per sentence: {ranking: (N,) fraction of the attention erased
    before the decision flips}, a sentence that never flips counting as 1.

    :func:`attnlib.experiments.erasure.ranked_removal` (a model with one attention layer),
    its ``rankings``, ``max_instances``, ``seed`` and ``chunk_size``.
    """
    from .erasure import ranked_removal

    removal = ranked_removal(model, split, rankings=rankings, max_instances=max_instances, seed=seed,
                             chunk_size=chunk_size)
    never_is_all = np.where(removal.flipped, removal.fraction_removed, 1.0)  # (N, R)
    return dict(zip(removal.rankings, never_is_all.T))


def erasure_curves(results) -> dict:
    """ERASER's curves of several results: {name: :func:`faithfulness_summary` by fraction}
    (one row per measure and fraction), e.g. one per model for
    :func:`attnlib.presentation.viz.plot_erasure_curves`."""
    if not isinstance(results, Mapping) or not results:
        raise ValueError("results must be a non-empty mapping of name to FaithfulnessResult")
    return {name: faithfulness_summary(result, by_fraction=True) for name, result in results.items()}
