"""`Split` (one of train/dev/test) and `Dataset` (three splits + vocabulary)."""
from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .batching import Batch, collate
from .text import Vocabulary

from .._checks import check_positive_int

__all__ = ["Split", "Dataset", "stratified_positions"]


def stratified_positions(labels: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """A seeded stratified sample: ``k`` positions of ``labels``, class shares kept, ascending.

    Each class gets floor(k * share) places, and the largest remainders the leftover ones
    (ties: the smaller class id); within a class the places go to a uniformly random choice
    drawn from ``rng`` (one permutation per class, in class order). All of them when
    ``k >= len(labels)``. The one stratified-subset rule of attnlib: data subsampling and
    every experiment's ``max_instances`` use it.
    """
    labels = np.asarray(labels)
    n = len(labels)
    if k >= n:
        return np.arange(n)
    classes, counts = np.unique(labels, return_counts=True)
    exact = k * counts / n
    quota = np.floor(exact).astype(np.int64)
    extra = k - int(quota.sum())
    if extra:  # largest remainders first, ties by class
        quota[np.lexsort((classes, -(exact - quota)))[:extra]] += 1
    chosen = [rng.permutation(np.flatnonzero(labels == c))[:q] for c, q in zip(classes, quota)]
    return np.sort(np.concatenate(chosen))


@dataclass(repr=False, eq=False)
class Split:
    """One split of a data set, instance-aligned lists.

    texts:      the raw texts.
    tokens:     token lists, *without* SOS/EOS.
    ids:        int64 arrays, *with* SOS/EOS (``len(ids[i]) == len(tokens[i]) + 2``).
    labels:     int64 array.
    rationales: bool arrays aligned to ``tokens`` (ground-truth important tokens; in
                `load_deception`'s task the impermissible ones), or None when the data
                set has none (only ``synthetic`` and `load_deception` have them).
    attention:  float arrays aligned to ``tokens``: a *given* attention distribution
                per instance (see `with_attention`), or None.
    """

    name: str
    texts: list[str]
    tokens: list[list[str]]
    ids: list[np.ndarray]
    labels: np.ndarray
    rationales: list[np.ndarray] | None = None
    attention: list[np.ndarray] | None = None

    def __post_init__(self) -> None:
        self.labels = np.asarray(self.labels, dtype=np.int64).reshape(-1)
        n = len(self.labels)
        for what in ("texts", "tokens", "ids"):
            if len(getattr(self, what)) != n:
                raise ValueError(f"Split {self.name!r}: {len(getattr(self, what))} {what} but {n} labels")
        if self.rationales is not None and len(self.rationales) != n:
            raise ValueError(f"Split {self.name!r}: {len(self.rationales)} rationales but {n} labels")
        if self.attention is not None and len(self.attention) != n:
            raise ValueError(f"Split {self.name!r}: {len(self.attention)} attention arrays but {n} labels")

    def __len__(self) -> int:
        return len(self.labels)

    def __repr__(self) -> str:
        rat = ", with rationales" if self.rationales is not None else ""
        rat += ", with given attention" if self.attention is not None else ""
        return f"Split({self.name!r}, n={len(self)}{rat})"

    def lengths(self) -> np.ndarray:
        """Token counts per instance, without SOS/EOS."""
        return np.fromiter(map(len, self.tokens), dtype=np.int64, count=len(self.tokens))

    def _rows(self, indices) -> np.ndarray:
        if isinstance(indices, slice):
            return np.arange(len(self))[indices]
        idx = np.asarray(indices)
        if idx.dtype == bool:
            if idx.shape != (len(self),):
                raise ValueError(f"a boolean mask must have shape ({len(self)},), got {idx.shape}")
            return np.flatnonzero(idx)
        if idx.size == 0:
            return np.empty(0, dtype=np.int64)
        if not np.issubdtype(idx.dtype, np.integer):
            raise ValueError(f"indices must be integers or a boolean mask, got dtype {idx.dtype}")
        idx = idx.astype(np.int64).reshape(-1)
        if idx.min() < -len(self) or idx.max() >= len(self):
            raise ValueError(f"index out of range for split {self.name!r} of size {len(self)}")
        return np.where(idx < 0, idx + len(self), idx)

    def subset(self, indices) -> "Split":
        """A new Split with the given rows (ints, a boolean mask or a slice), in that order."""
        idx = self._rows(indices).tolist()
        return Split(
            name=self.name,
            texts=[self.texts[i] for i in idx],
            tokens=[self.tokens[i] for i in idx],
            ids=[self.ids[i] for i in idx],
            labels=self.labels[idx],
            rationales=None if self.rationales is None else [self.rationales[i] for i in idx],
            attention=None if self.attention is None else [self.attention[i] for i in idx],
        )

    def with_attention(self, attention, *, atol: float = 1e-4) -> "Split":
        """A copy of this split whose instances carry a given attention distribution.

        ``attention[i]`` has one non-negative weight per token of instance ``i``
        (without SOS/EOS) summing to 1, e.g. another model's attention from
        :func:`attnlib.train.predict`. Batches then carry it as ``Batch.attention``.
        """
        arrays = [np.asarray(a, dtype=np.float32).reshape(-1) for a in attention]
        if len(arrays) != len(self):
            raise ValueError(f"Split {self.name!r} has {len(self)} instances but {len(arrays)} attention arrays were given")
        lengths = self.lengths()
        given = np.fromiter(map(len, arrays), dtype=np.int64, count=len(arrays))
        bad = np.flatnonzero(given != lengths)
        if bad.size:
            i = int(bad[0])
            raise ValueError(
                f"attention for instance {i} of split {self.name!r} has {given[i]} weights but the instance has "
                f"{lengths[i]} tokens: the given attention must be aligned to this data set's tokens"
            )
        if len(arrays):
            flat = np.concatenate(arrays)
            if not np.isfinite(flat).all() or (flat < 0).any():
                raise ValueError("attention weights must be finite and non-negative")
            sums = np.add.reduceat(flat, np.r_[0, np.cumsum(given)[:-1]]) if flat.size else np.zeros(0)
            off = np.flatnonzero(np.abs(sums - 1.0) > atol)
            if off.size:
                raise ValueError(f"attention for instance {int(off[0])} sums to {sums[off[0]]:.6f}, not 1")
        return Split(self.name, self.texts, self.tokens, self.ids, self.labels, self.rationales, arrays)

    def remove_tokens(self, masks) -> "Split":
        """A new Split with the masked tokens of every instance deleted.

        ``masks[i]``: a bool (or 0/1) array with one entry per token of instance ``i``
        (without SOS/EOS), True on the tokens to delete -- e.g. ``split.rationales``, to ask
        what a model predicts without the tokens Pruthi et al. call impermissible. Tokens,
        ids (wrapped ``<SOS> ... <EOS>`` again), rationales and given attention are
        re-aligned to the kept tokens; a given attention is renormalised over them. ``texts``
        are kept as they are, so they no longer match the tokens.

        Raises ValueError when ``masks`` does not have one array per instance and one entry
        per token, or when the deletion would leave an instance with no tokens (or a given
        attention with no mass): the message says how many.
        """
        n = len(self)
        if isinstance(masks, (str, bytes)) or not hasattr(masks, "__len__"):
            raise ValueError(f"masks must be a sequence of bool arrays, one per instance, got {type(masks).__name__}")
        if len(masks) != n:
            raise ValueError(
                f"remove_tokens needs one mask per instance of split {self.name!r} ({n}), got {len(masks)}"
            )
        arrays = [np.asarray(m) for m in masks]
        if any(a.ndim != 1 for a in arrays):
            raise ValueError("each mask must be a 1-d array with one entry per token")
        lengths = self.lengths()
        given = np.fromiter(map(len, arrays), dtype=np.int64, count=n)
        bad = np.flatnonzero(given != lengths)
        if bad.size:
            i = int(bad[0])
            raise ValueError(
                f"the mask of instance {i} has {given[i]} entries but the instance has {lengths[i]} tokens "
                f"({bad.size} mask(s) do not fit)"
            )
        flat = np.concatenate(arrays) if n else np.zeros(0, dtype=bool)
        if flat.dtype != bool:
            if flat.size and not np.isin(flat, (0, 1)).all():
                raise ValueError("masks must be boolean (or 0/1): True on the tokens to delete")
            flat = flat.astype(bool)
        owner = np.repeat(np.arange(n), lengths)
        new_lengths = lengths - np.bincount(owner[flat], minlength=n)
        emptied = int(((new_lengths == 0) & (lengths > 0)).sum())
        if emptied:
            raise ValueError(
                f"removing the masked tokens would leave {emptied} of the {n} instances of split {self.name!r} "
                "with no tokens; keep at least one token of each instance"
            )
        keep = ~flat
        bounds = np.concatenate([[0], np.cumsum(new_lengths)])
        cuts = bounds[1:-1]

        flat_tokens = np.empty(len(flat), dtype=object)
        flat_tokens[:] = list(itertools.chain.from_iterable(self.tokens))
        kept_tokens, b = flat_tokens[keep].tolist(), bounds.tolist()
        tokens = [kept_tokens[b[i] : b[i + 1]] for i in range(n)]

        id_lengths = np.fromiter(map(len, self.ids), dtype=np.int64, count=n)
        if (id_lengths != lengths + 2).any():
            raise ValueError(f"split {self.name!r}: ids must be the tokens wrapped <SOS> ... <EOS> (2 longer)")
        keep_ids = np.ones(int(id_lengths.sum()), dtype=bool)  # SOS and EOS stay
        keep_ids[np.arange(len(flat)) + 2 * owner + 1] = keep
        ids = np.split(np.concatenate(self.ids)[keep_ids], np.cumsum(new_lengths + 2)[:-1]) if n else []

        rationales = None
        if self.rationales is not None:
            rationales = np.split(np.concatenate(self.rationales).astype(bool)[keep], cuts) if n else []
        attention = None
        if self.attention is not None:
            weights = np.concatenate(self.attention).astype(np.float32)[keep] if n else np.zeros(0, np.float32)
            mass = np.bincount(owner[keep], weights=weights, minlength=n)
            lost = int(((mass <= 0) & (new_lengths > 0)).sum())
            if lost:
                raise ValueError(f"{lost} instance(s) would keep no given attention mass: nothing to renormalise")
            weights = (weights / mass[owner[keep]]).astype(np.float32)
            attention = np.split(weights, cuts) if n else []
        return Split(
            name=self.name,
            texts=list(self.texts),
            tokens=tokens,
            ids=ids,
            labels=self.labels.copy(),
            rationales=rationales,
            attention=attention,
        )

    def batch(self, indices) -> Batch:
        """One padded `Batch` of the given rows; ``batch.index`` holds the row numbers."""
        idx = self._rows(indices)
        if len(idx) == 0:
            raise ValueError("batch() needs at least one row")
        rows = idx.tolist()
        return collate(
            [self.ids[i] for i in rows],
            self.labels[idx],
            idx,
            None if self.rationales is None else [self.rationales[i] for i in rows],
            None if self.attention is None else [self.attention[i] for i in rows],
        )

    def batch_indices(self, batch_size: int = 32, *, shuffle: bool = False, seed: int = 0) -> list[np.ndarray]:
        """The row indices of each batch `batches` would yield, in the same order."""
        check_positive_int(batch_size, "batch_size", minimum=1)
        check_positive_int(seed, "seed", minimum=0)
        order = np.argsort(self.lengths(), kind="stable")
        chunks = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
        if shuffle:
            perm = np.random.default_rng(seed).permutation(len(chunks))
            chunks = [chunks[i] for i in perm]
        return chunks

    def batches(self, batch_size: int = 32, *, shuffle: bool = False, seed: int = 0) -> Iterator[Batch]:
        """Length-bucketed batches, as Jain & Wallace do it.

        Rows are sorted by length (stable, so ties keep split order) and cut into
        contiguous chunks of ``batch_size`` (the last may be smaller), so little
        padding is needed. ``shuffle=True`` shuffles the *order of the batches*
        with ``numpy.random.default_rng(seed)`` -- pass e.g. the epoch number as
        seed. Deterministic: the same arguments always give the same batches.
        """
        for chunk in self.batch_indices(batch_size, shuffle=shuffle, seed=seed):
            yield self.batch(chunk)

    def n_batches(self, batch_size: int = 32) -> int:
        check_positive_int(batch_size, "batch_size", minimum=1)
        return -(-len(self) // batch_size)


@dataclass(repr=False, eq=False)
class Dataset:
    """A binary text-classification data set, ready for the book's models.

    ``vocab`` is built from ``train`` only. ``classes[k]`` names label ``k``.
    ``substitute_note`` says honestly what this data set stands in for (if
    anything) and why. ``stats`` records what preprocessing dropped and
    ``config`` the arguments it was loaded with.
    """

    name: str
    description: str
    vocab: Vocabulary
    train: Split
    dev: Split
    test: Split
    classes: tuple[str, ...] = ("negative", "positive")
    substitute_note: str = ""
    stats: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)

    @property
    def splits(self) -> dict[str, Split]:
        return {"train": self.train, "dev": self.dev, "test": self.test}

    def __getitem__(self, split: str) -> Split:
        try:
            return self.splits[split]
        except KeyError:
            raise KeyError(f"no split {split!r}; use 'train', 'dev' or 'test'") from None

    def with_attention(self, *, train, dev, test, name: str | None = None) -> "Dataset":
        """A copy whose three splits carry given attention (see `Split.with_attention`)."""
        from dataclasses import replace

        return replace(
            self,
            name=name or self.name,
            train=self.train.with_attention(train),
            dev=self.dev.with_attention(dev),
            test=self.test.with_attention(test),
        )

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def has_rationales(self) -> bool:
        return self.train.rationales is not None

    def summary(self) -> pd.DataFrame:
        """One row per split: n, fraction positive (label 1), mean and max length.

        Lengths count tokens without SOS/EOS.
        """
        rows = {}
        for name, split in self.splits.items():
            lens = split.lengths()
            n = len(split)
            rows[name] = {
                "n": n,
                "frac_positive": float(np.mean(split.labels == 1)) if n else float("nan"),
                "mean_len": float(lens.mean()) if n else float("nan"),
                "max_len": int(lens.max()) if n else 0,
            }
        df = pd.DataFrame.from_dict(rows, orient="index")
        df.index.name = "split"
        return df

    def __repr__(self) -> str:
        return (
            f"Dataset({self.name!r}: train={len(self.train)}, dev={len(self.dev)}, test={len(self.test)}, "
            f"vocab={len(self.vocab)}, classes={self.classes})"
        )
