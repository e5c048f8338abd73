"""Training seeds as an axis: one recipe trained with K seeds, an experiment run over them, and
its results stacked seeds x instances.

A verdict about a trained model must survive retraining. Intervals over sentences hold one
model fixed and cannot see what another seed would do, so every model-level claim of the book
is made over a :class:`SeedSet`::

    sets = seeds.train_seed_sets({"lstm": dict(dataset=ds, encoder="lstm"),
                                  "cnn": dict(dataset=ds, encoder="cnn")}, seeds=(0, 1, 2))
    runs = seeds.run_over_seeds(importance.importance, sets["lstm"], ds.test, max_instances=500)
    tau = runs.stack("tau_gradient")                     # (3, n): seeds x instances
    uncertainty.compare_over_seeds(tau, runs.stack("tau_loo"))   # "holds in 3 of 3 seeds"

Every model of a set is exactly ``train.train_model(**spec, seed=s)``: the same cache entry,
so a chapter that needs seed 1 of a recipe another chapter trained loads it. All the sets of
one call train in one pool, one model per core (:func:`attnlib.train.train_models`).

:func:`run_over_seeds` runs any per-instance experiment (``f(model, split, ..., seed=...)``,
the contract of :mod:`attnlib.runs`) on each model with the same arguments, so the same test
instances are picked for every seed, and :meth:`SeedResults.stack` aligns their per-instance
fields by instance. :mod:`attnlib.uncertainty`'s ``over_seeds``, ``compare_over_seeds``,
``f1_over_seeds`` and ``compare_f1_over_seeds`` read the stacks.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ._checks import check_seed
from .train import TrainedModel, predict_proba, train_models

__all__ = ["SeedSet", "SeedResults", "train_seeds", "train_seed_sets", "run_over_seeds", "seeds_after", "check_seeds",
           "check_spec"]


def seeds_after(base: int, count: int) -> tuple[int, ...]:
    """``count`` seeds starting at ``base`` (``base``, ``base + 1``, ...): a chapter's seed
    parameter stays the first seed of every set, so ``seed=1`` shifts the whole set."""
    base = check_seed(base)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be a positive int (seeds per recipe), got {count!r}")
    return tuple(range(base, base + count))


@dataclass(frozen=True)
class SeedSet:
    """One recipe trained with several seeds: ``trained[k]`` is ``train_model(**spec, seed=seeds[k])``."""

    seeds: tuple
    trained: tuple
    spec: Mapping

    def __len__(self) -> int:
        return len(self.trained)

    def __iter__(self) -> Iterator[TrainedModel]:
        return iter(self.trained)

    def __getitem__(self, k: int) -> TrainedModel:
        return self.trained[k]

    @property
    def models(self) -> list:
        """The trained modules, one per seed."""
        return [t.model for t in self.trained]

    @property
    def first(self) -> TrainedModel:
        """The model of the first seed (the chapter's own seed): what a one-model figure shows."""
        return self.trained[0]

    def scores(self, split: str = "test", metric: str = "f1") -> np.ndarray:
        """(S,) one score per seed from the models' stored evaluations (``split`` "dev" or "test")."""
        if split not in ("dev", "test"):
            raise ValueError(f"split must be 'dev' or 'test', got {split!r}")
        values = [getattr(t, split).get(metric) for t in self.trained]
        if any(v is None for v in values):
            raise ValueError(f"metric {metric!r} is not among the stored scores {sorted(self.trained[0].test)}")
        return np.asarray(values, dtype=np.float64)

    def predicted(self, split) -> np.ndarray:
        """(S, n) each seed's predicted class on every instance of ``split`` (a Split)."""
        return np.stack([predict_proba(m, split).argmax(-1) for m in self.models])


def check_seeds(seeds) -> tuple[int, ...]:
    """``seeds`` as a tuple of distinct ints, or a ValueError naming the fix."""
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence) or len(seeds) < 1:
        raise ValueError(f"seeds must be a non-empty sequence of ints, e.g. (0, 1, 2), got {seeds!r}")
    seeds = tuple(check_seed(s) for s in seeds)
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct, got {seeds}")
    return seeds


def check_spec(name, spec) -> dict:
    """A copy of one recipe's ``train_model`` keyword arguments: a dict with a dataset and no seed."""
    if not isinstance(spec, Mapping) or "dataset" not in spec:
        raise ValueError(f"spec {name!r} must be a dict of train_model keyword arguments with a 'dataset', got {spec!r:.80}")
    if "seed" in spec:
        raise ValueError(f"spec {name!r} names a seed; the seeds come from seeds=")
    return dict(spec)


def train_seed_sets(specs: Mapping, seeds, *, workers: int | None = None, progress: bool = True) -> dict:
    """Several recipes, each trained (or loaded from the cache) with every seed in ``seeds``:
    name -> :class:`SeedSet`. ``specs``: name -> :func:`attnlib.train.train_model` keyword
    arguments without ``seed``. Every model of every set trains in one pool, one per core."""
    if not isinstance(specs, Mapping) or not specs:
        raise ValueError("specs must be a non-empty dict: name -> train_model keyword arguments (without seed)")
    seeds = check_seeds(seeds)
    checked = {name: check_spec(name, spec) for name, spec in specs.items()}
    jobs = {(name, s): {**spec, "seed": s} for name, spec in checked.items() for s in seeds}
    trained = train_models(jobs, workers=workers, progress=progress)
    return {name: SeedSet(seeds, tuple(trained[(name, s)] for s in seeds), spec) for name, spec in checked.items()}


def train_seeds(spec: Mapping, seeds, *, workers: int | None = None, progress: bool = True) -> SeedSet:
    """One recipe trained with every seed in ``seeds``: a :class:`SeedSet` (see :func:`train_seed_sets`)."""
    return train_seed_sets({"recipe": spec}, seeds, workers=workers, progress=progress)["recipe"]


@dataclass(frozen=True)
class SeedResults:
    """One experiment's results on every model of a :class:`SeedSet`, in seed order."""

    seeds: tuple
    results: tuple

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, k: int):
        return self.results[k]

    @property
    def indices(self) -> np.ndarray:
        """The instances of the stack's columns: every instance some seed's result holds, in split order."""
        return np.unique(np.concatenate([np.asarray(r.indices) for r in self.results]))

    def stack(self, field: str | Callable) -> np.ndarray:
        """(S, n): a per-instance field (an attribute name, or a function of one result giving one
        value per instance) for every seed, aligned by instance (:attr:`indices`); NaN where a
        seed's result left an instance out."""
        columns = self.indices
        out = np.full((len(self.results), len(columns)), np.nan)
        for k, result in enumerate(self.results):
            values = field(result) if callable(field) else getattr(result, field)
            values = np.asarray(values, dtype=np.float64)
            rows = np.asarray(result.indices)
            if values.shape != rows.shape:
                raise ValueError(f"field {getattr(field, '__name__', field)!r} of seed {self.seeds[k]} has shape "
                                 f"{values.shape}, not one value per instance ({rows.shape})")
            out[k, np.searchsorted(columns, rows)] = values
        return out


def run_over_seeds(experiment: Callable, seed_set: SeedSet, split, /, **kwargs) -> SeedResults:
    """``experiment(model, split, **kwargs)`` on every model of ``seed_set``, with the same
    arguments (so the same ``max_instances`` and ``seed`` pick the same instances for every
    model): a :class:`SeedResults`, whose :meth:`~SeedResults.stack` gives seeds x instances."""
    if not isinstance(seed_set, SeedSet):
        raise ValueError(f"seed_set must be an attnlib.seeds.SeedSet (from train_seeds), got {type(seed_set).__name__}")
    if not callable(experiment):
        raise ValueError(f"experiment must be a per-instance experiment function, got {type(experiment).__name__}")
    results = tuple(experiment(model, split, **kwargs) for model in seed_set.models)
    for r in results:
        if not hasattr(r, "indices"):
            raise ValueError(f"{getattr(experiment, '__name__', experiment)} returned {type(r).__name__}, "
                             "which has no per-instance indices (an InstanceResult)")
    return SeedResults(seed_set.seeds, results)
