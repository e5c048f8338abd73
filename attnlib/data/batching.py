"""Padded mini-batches: `Batch` and `collate`.

torch is imported lazily, so ``import attnlib.data`` and loading a dataset stay
cheap; only building a batch needs it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from .text import EOS, PAD, SOS

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["Batch", "collate"]


@dataclass(repr=False, eq=False)
class Batch:
    """One padded mini-batch; every field is a torch tensor on the same device.

    tokens:    LongTensor (B, T), ``<SOS> ids <EOS>`` right-padded with PAD.
    lengths:   LongTensor (B,), real length of each row *including* SOS and EOS.
    mask:      BoolTensor (B, T), True exactly on the real tokens (not SOS/EOS/PAD):
               the positions an attention distribution is over.
    labels:    LongTensor (B,).
    index:     LongTensor (B,), position of each row in the `Split` it came from.
    rationale: BoolTensor (B, T) aligned to ``tokens`` (False at SOS/EOS/PAD), or None
               when the data set has no ground-truth rationales.
    attention: FloatTensor (B, T), a *given* attention distribution over the real
               tokens (0 at SOS/EOS/PAD), or None. Models built with
               ``attention="given"`` use it instead of learning their own
               (Wiegreffe & Pinter's diagnostic classifiers).
    """

    tokens: "torch.Tensor"
    lengths: "torch.Tensor"
    mask: "torch.Tensor"
    labels: "torch.Tensor"
    index: "torch.Tensor"
    rationale: "torch.Tensor | None" = None
    attention: "torch.Tensor | None" = None

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    def to(self, device, non_blocking: bool = False) -> "Batch":
        """A copy with every tensor moved to ``device``."""
        mv = lambda t: None if t is None else t.to(device, non_blocking=non_blocking)  # noqa: E731
        return Batch(
            tokens=mv(self.tokens),
            lengths=mv(self.lengths),
            mask=mv(self.mask),
            labels=mv(self.labels),
            index=mv(self.index),
            rationale=mv(self.rationale),
            attention=mv(self.attention),
        )

    @property
    def device(self):
        return self.tokens.device

    def __repr__(self) -> str:
        b, t = self.tokens.shape
        rat = "" if self.rationale is None else ", rationale"
        rat += "" if self.attention is None else ", attention"
        return f"Batch(size={b}, max_len={t}, device={self.tokens.device}{rat})"


def collate(
    ids: Sequence[np.ndarray],
    labels,
    index=None,
    rationales: Sequence[np.ndarray] | None = None,
    attention: Sequence[np.ndarray] | None = None,
) -> Batch:
    """Pad encoded instances into a `Batch` (vectorised, no per-token Python loop).

    ``ids`` are int arrays that start with SOS and end with EOS (as produced by
    `Vocabulary.encode`); ``labels`` one int per instance; ``index`` the rows'
    positions in their split (default ``0..B-1``); ``rationales`` optional bool
    arrays aligned to the tokens *without* SOS/EOS; ``attention`` optional float
    arrays aligned the same way (a given attention distribution per instance).
    """
    import torch

    ids = list(ids)
    b = len(ids)
    if b == 0:
        raise ValueError("collate() needs at least one instance")
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=b)
    if (lengths < 2).any():
        raise ValueError("every instance must be wrapped as <SOS> ... <EOS> (length >= 2); use Vocabulary.encode")
    labels = np.asarray(labels, dtype=np.int64).reshape(-1)
    if labels.shape[0] != b:
        raise ValueError(f"got {b} instances but {labels.shape[0]} labels")
    index = np.arange(b, dtype=np.int64) if index is None else np.asarray(index, dtype=np.int64).reshape(-1)
    if index.shape[0] != b:
        raise ValueError(f"got {b} instances but {index.shape[0]} index entries")

    t = int(lengths.max())
    pos = np.arange(t)
    valid = pos[None, :] < lengths[:, None]
    tokens = np.full((b, t), PAD, dtype=np.int64)
    tokens[valid] = np.concatenate(ids).astype(np.int64, copy=False)
    rows = np.arange(b)
    if (tokens[:, 0] != SOS).any() or (tokens[rows, lengths - 1] != EOS).any():
        raise ValueError("every instance must start with SOS and end with EOS; use Vocabulary.encode")
    mask = (pos[None, :] >= 1) & (pos[None, :] < (lengths - 1)[:, None])

    rationale = _per_token(rationales, mask, lengths, bool, "rationales", "each rationale must have one entry")
    given = _per_token(
        attention, mask, lengths, np.float32, "attention arrays", "each attention array must have one weight"
    )

    return Batch(
        tokens=torch.from_numpy(tokens),
        lengths=torch.from_numpy(lengths),
        mask=torch.from_numpy(mask),
        labels=torch.from_numpy(labels.copy()),
        index=torch.from_numpy(index.copy()),
        rationale=rationale,
        attention=given,
    )


def _per_token(values, mask: np.ndarray, lengths: np.ndarray, dtype, what: str, rule: str):
    """Per-token arrays (one per instance, without SOS/EOS) padded onto ``mask``'s real positions; None stays None."""
    if values is None:
        return None
    import torch

    values = list(values)
    b = len(lengths)
    if len(values) != b:
        raise ValueError(f"got {b} instances but {len(values)} {what}")
    counts = np.fromiter(map(len, values), dtype=np.int64, count=b)
    if (counts != lengths - 2).any():
        raise ValueError(f"{rule} per token (length without SOS/EOS)")
    out = np.zeros(mask.shape, dtype=dtype)
    if counts.sum():
        out[mask] = np.concatenate(values).astype(dtype, copy=False)
    return torch.from_numpy(out)
