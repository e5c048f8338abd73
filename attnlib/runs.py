"""The one experiment runner: every per-instance experiment of attnlib loops through here.

Permutation, the adversary, single-weight erasure, ranked removal and the importance
measures are one loop: pick instances (all, or a seeded stratified subset), sort them by
length, cut them into chunks (length buckets, each padded only to its own longest
sentence, never more rows than a memory budget allows), and for each chunk run the model
below the edited site once (:meth:`InterventionModel.site_state`) in eval mode, on the
model's device. What each experiment then does with a chunk's state is its own.

::

    with runs.experiment(model, split, seed=0, max_instances=None, chunk_size=None,
                          rows=128, cost=lambda T, H: T * H, budget=2**23) as run:
        for rows, chunk, state in run.states():
            ...   # rows: positions in run.batch; state.attention, model.decode_at(state, ...)

The one knob for memory is ``chunk_size`` (instances per tensor program; None: about
``rows`` per chunk, fewer where ``cost`` x rows would exceed ``budget`` elements).
Per-instance randomness comes from :func:`instance_seed` and :func:`instance_uniform`,
keyed by (seed, the instance's index in its split), so an instance's result does not depend
on which other instances share its chunk.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from ._checks import check_positive_int, check_seed
from .data import Batch, Split, stratified_positions
from .models.protocol import Site, SiteState, check_model, device_of, eval_mode

__all__ = ["InstanceResult", "Run", "experiment", "select", "take", "chunks", "PASS_ELEMENTS", "rows_per_pass",
           "instance_seed", "instance_uniform", "warn_excluded"]


def select(split_or_batch, max_instances: int | None, seed: int) -> Batch:
    """All (or a seeded stratified ``max_instances``) instances as one padded CPU Batch, in split order.

    The subset is :func:`attnlib.data.stratified_positions` with ``np.random.default_rng(seed)``:
    the same ``max_instances`` and ``seed`` pick the same instances in every experiment.
    """
    if max_instances is not None:
        max_instances = check_positive_int(max_instances, "max_instances")
    if isinstance(split_or_batch, Split):
        if len(split_or_batch) == 0:
            raise ValueError(f"split {split_or_batch.name!r} is empty")
        rows = np.arange(len(split_or_batch))
        if max_instances is not None:
            rows = stratified_positions(split_or_batch.labels, max_instances, np.random.default_rng(seed))
        return split_or_batch.batch(rows)
    if isinstance(split_or_batch, Batch):
        batch = split_or_batch.to("cpu")
        if len(batch) == 0:
            raise ValueError("the batch is empty")
        if max_instances is not None and max_instances < len(batch):
            batch = take(batch, stratified_positions(batch.labels.cpu().numpy(), max_instances, np.random.default_rng(seed)))
        return batch
    raise ValueError(
        f"split_or_batch must be an attnlib.data.Split or Batch, got {type(split_or_batch).__name__}"
    )


def take(batch: Batch, rows) -> Batch:
    """Rows of a Batch (all its fields, given attention included), trimmed to their longest instance."""
    rows = torch.as_tensor(np.asarray(rows), dtype=torch.long, device=batch.tokens.device)
    lengths = batch.lengths[rows]
    T = int(lengths.max())
    return Batch(
        tokens=batch.tokens[rows, :T],
        lengths=lengths,
        mask=batch.mask[rows, :T],
        labels=batch.labels[rows],
        index=batch.index[rows],
        rationale=None if batch.rationale is None else batch.rationale[rows, :T],
        attention=None if batch.attention is None else batch.attention[rows, :T],
    )


def chunks(lengths: np.ndarray, rows: int, cost: Callable[[int], float], budget: int,
           chunk_size: int | None) -> list[np.ndarray]:
    """Row numbers sorted by length, cut into consecutive chunks (length buckets).

    ``chunk_size`` given: chunks of exactly that many rows (the last may be smaller).
    Otherwise about ``rows`` rows per chunk, evened out (842 rows at 256 -> 4 x 210/211),
    and never more than fit ``budget`` elements, where a row of a chunk padded to length
    T costs ``cost(T)`` (rows are sorted, so the chunk's last row sets T).
    """
    order = np.argsort(lengths, kind="stable")
    if chunk_size is None:
        chunk_size = -(-len(order) // -(-len(order) // rows))
        limit_by_budget = True
    else:
        limit_by_budget = False
    out, start = [], 0
    while start < len(order):
        stop = min(start + chunk_size, len(order))
        if limit_by_budget:
            while stop - start > 1 and (stop - start) * cost(int(lengths[order[stop - 1]])) > budget:
                stop -= 1
        out.append(order[start:stop])
        start = stop
    return out


#: Tensor elements (rows x the model's ``token_cost``) of one pass over many perturbed rows: a
#: transformer's token costs about ten times a BiLSTM's (every layer's FFN and T x T heads), and
#: 65,536 of its tokens in one pass took about 0.8 GB at peak (chapters 14 and 15). 2**24 is
#: exactly 65,536 tokens of J&W's BiLSTM (H = 256), so its passes stay as they were.
PASS_ELEMENTS = 2**24


def rows_per_pass(model, width: int, max_tokens: int, budget: int | None = None) -> int:
    """Rows padded to ``width`` tokens in one pass: at most ``max_tokens`` tokens and ``budget``
    elements (None: :data:`PASS_ELEMENTS`) by ``model.token_cost(width)``; at least 1."""
    budget = PASS_ELEMENTS if budget is None else budget
    return max(1, min(max_tokens // width, budget // max(1, int(model.token_cost(width)))))


def instance_seed(seed: int, index: int) -> int:
    """A seed for one instance, from the run's seed and the instance's position in its split."""
    return int(np.random.SeedSequence([seed, int(index)]).generate_state(1, np.uint64)[0] >> 1)


_MASK64 = (1 << 64) - 1


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser, elementwise on uint64 (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def instance_uniform(seed: int, stream: int, index: torch.Tensor, T: int) -> torch.Tensor:
    """Uniform [0, 1) numbers (n, T), float64: a counter-based generator keyed by (seed, stream, index, t).

    Each instance gets its own stream from (seed, its split index), and token position t
    indexes into it, so the numbers do not depend on which instances share a tensor or
    how far they are padded. Vectorised: no loop over instances.
    """
    key = _mix(_mix(np.asarray([seed & _MASK64], dtype=np.uint64)) ^ np.uint64(stream))  # (1,)
    per_instance = _mix(key ^ index.cpu().numpy().astype(np.uint64))  # (n,)
    bits = _mix(per_instance[:, None] ^ _mix(np.arange(T, dtype=np.uint64))[None, :])  # (n, T)
    return torch.from_numpy((bits >> np.uint64(11)).astype(np.float64) * 2.0**-53)


def _no_instances() -> np.ndarray:
    return np.zeros(0, dtype=np.int64)


@dataclass(kw_only=True)
class InstanceResult:
    """What every per-instance result of attnlib has: one entry per instance, in ``indices`` order.

    probs:     (N, C) the model's output distribution y-hat.
    predicted: (N,) its argmax.
    labels:    (N,) gold labels.
    indices:   (N,) positions of the instances in their split (increasing).
    lengths:   (N,) real tokens per instance (no <SOS>/<EOS>).
    excluded:  split indices of the instances the experiment left out (too few tokens).

    Experiments add their own fields; these are keyword-only, so the subclasses keep
    their own field order.
    """

    probs: np.ndarray
    predicted: np.ndarray
    labels: np.ndarray
    indices: np.ndarray
    lengths: np.ndarray
    excluded: np.ndarray = field(default_factory=_no_instances)

    def __len__(self) -> int:
        return len(self.indices)

    @property
    def n_excluded(self) -> int:
        return len(self.excluded)

    def instance_frame(self, repeat: int = 1, **columns) -> pd.DataFrame:
        """A frame whose first columns are instance, label, predicted, length, then ``columns``.

        ``repeat``: rows per instance (each instance's values repeated, for long tables).
        """
        head = {"instance": self.indices, "label": self.labels, "predicted": self.predicted, "length": self.lengths}
        head = {k: np.repeat(np.asarray(v), repeat) for k, v in head.items()}
        return pd.DataFrame({**head, **columns})


@dataclass
class Run:
    """One experiment's instances, chunks and model (from :func:`experiment`).

    batch:    the selected instances (CPU, split order; short ones already left out).
    excluded: split indices of the instances left out for having fewer than ``min_tokens``
              real tokens.
    lengths:  (N,) real tokens per instance (no <SOS>/<EOS>).
    """

    model: torch.nn.Module
    batch: Batch
    chunks: list
    device: torch.device
    excluded: np.ndarray
    seed: int

    def __len__(self) -> int:
        return len(self.batch)

    @property
    def lengths(self) -> np.ndarray:
        return self.batch.lengths.cpu().numpy() - 2

    @property
    def labels(self) -> np.ndarray:
        return self.batch.labels.cpu().numpy().copy()

    @property
    def indices(self) -> np.ndarray:
        return self.batch.index.cpu().numpy().copy()

    def instance_fields(self, probs: np.ndarray, keep: np.ndarray | None = None, *,
                        with_specials: bool = False) -> dict:
        """The :class:`InstanceResult` fields of this run, given y-hat (N, C): keyword arguments.

        ``keep``: (N,) bool, the instances the result keeps (the others join ``excluded``).
        ``with_specials``: the result scores every position, <SOS> ([CLS]) and <EOS> ([SEP])
        too (``positions="all"``), so ``lengths`` counts them: the words + 2.
        """
        probs = np.asarray(probs)
        labels, indices, lengths = self.labels, self.indices.astype(np.int64), self.lengths
        if with_specials:
            lengths = np.asarray(lengths) + 2
        excluded = self.excluded.astype(np.int64)
        if keep is not None:
            keep = np.asarray(keep, dtype=bool)
            excluded = np.sort(np.concatenate([excluded, indices[~keep]]))
            probs, labels, indices, lengths = probs[keep], labels[keep], indices[keep], lengths[keep]
        return {"probs": probs, "predicted": probs.argmax(-1), "labels": labels, "indices": indices,
                "lengths": lengths, "excluded": excluded}

    def chunk_batches(self) -> Iterator[tuple[np.ndarray, Batch]]:
        """(rows, the chunk's Batch on the model's device), chunk by chunk."""
        for rows in self.chunks:
            yield rows, take(self.batch, rows).to(self.device)

    def states(self, site: Site | None = None, *, query_rows: bool = False) -> Iterator[tuple[np.ndarray, Batch, SiteState]]:
        """(rows, chunk, the model's state below ``site``), chunk by chunk; the state without gradient.

        Most experiments edit one attention row per instance, (n, T): unless ``query_rows``
        (the experiment handles a row per query, (n, Q, T), as permutation and the adversary
        do), a site with a row per query (a transformer head) is a clear ValueError, not a
        shape error deep in an experiment.
        """
        for rows, chunk in self.chunk_batches():
            with torch.no_grad():
                state = self.model.site_state(chunk, site)
            if state.attention.ndim == 3 and query_rows:
                yield rows, chunk, state
                continue
            if state.attention.ndim != 2:
                raise ValueError(
                    f"this experiment edits one attention row per instance; the attention at {state.site} has "
                    f"shape {tuple(state.attention.shape)} (a row per query, as in a transformer head): edit such "
                    f"sites with the model's edits= or decode_at and attnlib.models.interventions"
                )
            yield rows, chunk, state


@contextmanager
def experiment(
    model,
    split_or_batch,
    *,
    seed,
    max_instances: int | None,
    chunk_size: int | None,
    rows: int,
    cost: Callable[[int, int], float],
    budget: int,
    own_attention: bool = True,
    min_tokens: int = 1,
    checked_model=None,
):
    """Validate, select, chunk; the model in eval mode inside the block (restored after, also after an error).

    ``cost(T, H)``: tensor elements per instance of a chunk padded to T tokens, H the model's
    ``hidden_size``. Instances with fewer than ``min_tokens`` real tokens are left out (listed
    in ``run.excluded``); if none is left, a ValueError says why.
    """
    model = checked_model if checked_model is not None else check_model(model, own_attention=own_attention)
    seed = check_seed(seed)
    if chunk_size is not None:
        chunk_size = check_positive_int(chunk_size, "chunk_size")
    batch = select(split_or_batch, max_instances, seed)
    short = (batch.lengths - 2).cpu().numpy() < min_tokens
    excluded = batch.index.cpu().numpy()[short]
    if short.all():
        raise ValueError(f"no instance has {min_tokens} or more real tokens, which this experiment needs")
    if short.any():
        batch = take(batch, np.flatnonzero(~short))
    H = int(model.hidden_size)
    parts = chunks(batch.lengths.cpu().numpy(), rows, lambda T: cost(T, H), budget, chunk_size)
    with eval_mode(model):
        yield Run(model=model, batch=batch, chunks=parts, device=device_of(model), excluded=excluded, seed=seed)


def warn_excluded(run: Run, what: str, stacklevel: int = 3) -> None:
    """A warning naming how many instances ``run`` left out and why."""
    if len(run.excluded):
        warnings.warn(f"{what}: leaving out {len(run.excluded)} instance(s) with too few tokens", stacklevel=stacklevel)
