"""Model-parameter randomisation (Adebayo et al. 2018): does an explanation depend on what the model learned?

A sanity check for any explanation method. Take the trained model and replace its parameters by a
fresh initialisation, a stage at a time from the top down (the *cascade*): first the output layer, then
each attention layer from the top, last the embeddings. After each stage, explain the same sentences
again and compare each sentence's explanation with the trained model's. An explanation that stays the
same when the parameters that made the prediction are gone explains the architecture and the input,
not the model: it fails the check. Adebayo, Gilmer, Muelly, Goodfellow, Hardt & Kim (2018), "Sanity
Checks for Saliency Maps", NeurIPS, Sec. 3 (cascading randomisation, Spearman rank correlation of the
explanations, with and without absolute values).

* :func:`cascade` yields ``(stage, model)`` pairs: a copy of the model with every stage up to this one
  re-initialised (cumulatively, as Adebayo et al. do), the trained model left alone. A model offers it
  by declaring the ``randomisation`` capability (:mod:`attnlib.models.protocol`): its
  ``randomisation_stages()`` and ``initialised_parameters(seed)`` (the constructor's own
  initialisation). The book's transformer declares it.
* :func:`randomisation_test` explains the same sentences on the trained model and after every stage
  (:func:`attnlib.experiments.explanations.explain`, any registered method) and scores each sentence
  with Spearman's rank correlation (the explanations compared as :func:`explain` gives them) and with the top-k feature agreement, the
  share of the trained explanation's k most important words that are still among the k most important
  (Neely et al. 2022 argue that the rank correlation over all the words can be dominated by the words
  that matter least; the two can disagree).
* :func:`curves` pools several seeds' results: per method, stage and measure, the mean over seeds and
  sentences with its interval (:func:`attnlib.uncertainty.over_seeds`); :func:`verdicts` reads the last
  stage (everything randomised) against :data:`SANITY_LINE`.

Every stage's parameters differ from the trained ones and every other parameter is bit for bit the
trained model's (``tests/test_randomisation.py``).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from .._checks import check_positive_int
from ..metrics import spearman
from ..models.protocol import require_capability

__all__ = ["RandomisationResult", "cascade", "randomisation_test", "randomisation_over_seeds", "curves", "verdicts", "top_k_agreement",
           "MEASURES", "SANITY_LINE", "TOP_K"]

#: the two measures of :func:`randomisation_test`, per sentence
MEASURES = ("rank correlation", "top-k agreement")

#: A method passes when, with every parameter randomised, the 95% interval of its rank correlation with
#: the trained model's explanation lies below this line (a "strong" correlation begins about here by the
#: usual reading of Spearman's rho); it fails when the interval lies above it; otherwise the check
#: cannot tell, within noise.
SANITY_LINE = 0.5

#: words of the top-k agreement (capped at the sentence's length)
TOP_K = 5


def cascade(model, *, seed: int = 0):
    """``(stage, model)`` for each stage of ``model.randomisation_stages()``, top down: a copy of
    ``model`` (eval mode) with the parameters of this stage and every stage above it replaced by
    ``model.initialised_parameters(seed)``'s. ``model`` itself is not changed."""
    require_capability(model, "randomisation", "model-parameter randomisation")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed must be an int, got {seed!r}")
    stages = tuple(model.randomisation_stages())
    fresh = model.initialised_parameters(int(seed))
    params = dict(model.named_parameters())
    listed = [name for _, names in stages for name in names]
    if sorted(listed) != sorted(params) or len(set(listed)) != len(listed):
        raise ValueError("randomisation_stages() must list every parameter of the model exactly once")
    randomised = copy.deepcopy(model).eval()
    own = dict(randomised.named_parameters())
    for stage, names in stages:
        with torch.no_grad():
            for name in names:
                if fresh[name].shape != own[name].shape:
                    raise ValueError(f"initialised_parameters() gives {name} the shape {tuple(fresh[name].shape)}, "
                                     f"the model has {tuple(own[name].shape)}")
                own[name].copy_(fresh[name])
        yield stage, copy.deepcopy(randomised)


def top_k_agreement(a: np.ndarray, b: np.ndarray, lengths: np.ndarray, k: int = TOP_K) -> np.ndarray:
    """Per row, the share of ``a``'s k largest entries (of the first ``lengths`` of the row; k capped at
    the length; ties: the earlier word first) that are among ``b``'s k largest, (N,)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    lengths = np.asarray(lengths)
    if a.shape != b.shape or a.ndim != 2 or lengths.shape != (a.shape[0],):
        raise ValueError(f"a and b must be (N, T) and lengths (N,); got {a.shape}, {b.shape}, {lengths.shape}")
    k = check_positive_int(k, "k")
    valid = np.arange(a.shape[1])[None, :] < lengths[:, None]

    def top(x):
        order = np.argsort(np.where(valid, -x, np.inf), axis=1, kind="stable")
        rank = np.argsort(order, axis=1, kind="stable")
        return (rank < np.minimum(k, lengths)[:, None]) & valid

    both = (top(a) & top(b)).sum(1)
    return both / np.maximum(np.minimum(k, lengths), 1)


@dataclass(frozen=True)
class RandomisationResult:
    """One model's cascade. ``stages``: ``("trained", "output", "layer L", ..., "embeddings")``;
    ``values[measure][method]``: (stages, N) per sentence, the trained model's explanation of each
    sentence against that stage's (the "trained" row is 1: the explanation against itself);
    ``changed``: stage -> the parameter names that stage re-initialised; ``indices``: the sentences;
    ``explained``: the trained model's :class:`~attnlib.experiments.explanations.ExplanationResult`."""

    stages: tuple
    methods: tuple
    values: dict
    changed: dict
    indices: np.ndarray
    k: int
    explained: object = None


def randomisation_test(model, split, *, methods, max_instances: int | None = None, seed: int = 0,
                       k: int = TOP_K, init_seed: int | None = None, progress: bool = False,
                       **explain_settings) -> RandomisationResult:
    """Explain ``split`` with ``methods`` on ``model`` and after each stage of :func:`cascade`, and score
    every sentence with :data:`MEASURES` against the trained model's explanation. ``max_instances`` and
    ``seed`` pick the sentences as everywhere in the book; ``init_seed`` (default ``seed``) seeds the
    fresh initialisation; other settings go to :func:`~attnlib.experiments.explanations.explain`. The
    stages are explained at once, one per free core (:func:`attnlib.train.run_concurrently`)."""
    return randomisation_over_seeds([model], split, methods=methods, max_instances=max_instances, seed=seed,
                                    k=k, init_seeds=None if init_seed is None else [init_seed],
                                    progress=progress, **explain_settings)[0]


def randomisation_over_seeds(models, split, *, methods, max_instances: int | None = None, seed: int = 0,
                             k: int = TOP_K, init_seeds=None, progress: bool = True, workers: int | None = None,
                             **explain_settings) -> list:
    """:func:`randomisation_test` of each model of ``models`` (one per training seed, e.g.
    ``SeedSet.models``) on the same sentences, every (model, stage) explanation one job of one pool
    (:func:`attnlib.train.run_concurrently`, a progress bar counting them); ``init_seeds``: one per model
    (default: ``seed`` for every one); ``workers``: the pool's (default: one per free core). Returns one :class:`RandomisationResult` per model, in order."""
    from functools import partial

    from ..train import run_concurrently
    from .explanations import explain

    models = list(models)
    if not models:
        raise ValueError("models must hold at least one model")
    for model in models:
        require_capability(model, "randomisation", "model-parameter randomisation")
    k = check_positive_int(k, "k")
    methods = tuple(methods)
    if not methods:
        raise ValueError("methods must name at least one explanation method")
    init_seeds = [seed] * len(models) if init_seeds is None else list(init_seeds)
    if len(init_seeds) != len(models):
        raise ValueError(f"init_seeds must give one seed per model ({len(models)}), got {len(init_seeds)}")
    settings = dict(methods=list(methods), max_instances=max_instances, seed=seed, **explain_settings)
    jobs, labels, stages = [], [], []
    for number, (model, init_seed) in enumerate(zip(models, init_seeds)):
        staged = [("trained", model), *cascade(model, seed=init_seed)]
        stages.append([stage for stage, _ in staged])
        for stage, staged_model in staged:
            jobs.append(partial(explain, staged_model, split, **settings))
            labels.append(f"model {number + 1}: {stage}")
    explained = iter(run_concurrently(jobs, workers=workers, progress=progress, description="explaining",
                                      unit="model", labels=labels))
    results = []
    for model, names in zip(models, stages):
        per_stage = [next(explained) for _ in names]
        results.append(_scored(model, names, per_stage, methods, k))
    return results


def _scored(model, stages: list, per_stage: list, methods: tuple, k: int) -> RandomisationResult:
    """One model's explanations at every stage (the trained one first) scored against the trained one."""
    trained = per_stage[0]
    lengths = np.array([len(s) for s in trained.scores[methods[0]]])  # words: explain scores words
    reference = {m: trained.padded(m) for m in methods}
    values = {measure: {m: [] for m in methods} for measure in MEASURES}
    for result in per_stage:
        for m in methods:
            now = result.padded(m)
            values["rank correlation"][m].append(_rank_correlation(reference[m], now, lengths))
            values["top-k agreement"][m].append(top_k_agreement(reference[m], now, lengths, k))
    changed = {"trained": (), **dict(model.randomisation_stages())}
    return RandomisationResult(stages=tuple(stages), methods=methods,
                               values={ms: {m: np.stack(v) for m, v in per.items()} for ms, per in values.items()},
                               changed={s: tuple(changed[s]) for s in stages}, indices=np.asarray(trained.indices),
                               k=k, explained=trained)


def _rank_correlation(a: np.ndarray, b: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Spearman's rho per sentence over its words; NaN where it is undefined (fewer than 2 words, or
    an explanation constant over the sentence)."""
    out = np.full(len(a), np.nan)
    ok = lengths >= 2
    if ok.any():
        out[ok] = spearman(a[ok], b[ok], lengths=lengths[ok])
    return out


def _check_results(results) -> list:
    if isinstance(results, RandomisationResult):
        results = [results]
    results = list(results)
    if not results or not all(isinstance(r, RandomisationResult) for r in results):
        raise ValueError("results must be a RandomisationResult or a non-empty list of them (one per seed)")
    first = results[0]
    for r in results[1:]:
        if r.stages != first.stages or r.methods != first.methods or not np.array_equal(r.indices, first.indices):
            raise ValueError("every seed's result must have the same stages, methods and sentences")
    return results


#: where each measure lies: an interval is kept within it
_BOUNDS = {"rank correlation": (-1.0, 1.0), "top-k agreement": (0.0, 1.0)}


def curves(results, *, seed: int = 0) -> pd.DataFrame:
    """One row per (measure, method, stage): the mean over seeds and sentences, its 95% interval
    (:func:`~attnlib.uncertainty.over_seeds`: seed and sentence noise; kept within the measure's range,
    -1 to 1 or 0 to 1) and the number of seeds."""
    from ..uncertainty import over_seeds

    results = _check_results(results)
    rows = []
    for measure in MEASURES:
        lowest, highest = _BOUNDS[measure]
        for m in results[0].methods:
            for s, stage in enumerate(results[0].stages):
                matrix = np.stack([r.values[measure][m][s] for r in results])  # (seeds, N)
                if stage == "trained":
                    rows.append(dict(measure=measure, method=m, stage=stage, mean=1.0, low=1.0, high=1.0))
                    continue
                interval = over_seeds(matrix, seed=seed)
                rows.append(dict(measure=measure, method=m, stage=stage, mean=interval.estimate,
                                 low=max(interval.low, lowest), high=min(interval.high, highest)))
    out = pd.DataFrame(rows)
    out.attrs["seeds"] = len(results)
    return out


def verdicts(results, *, line: float = SANITY_LINE, stage: str | None = None, seed: int = 0) -> pd.DataFrame:
    """Per method, at ``stage`` (default the last: every parameter randomised): the rank correlation with
    the trained explanation, its interval, and ``"passes"`` (interval below ``line``), ``"fails"`` (above
    it) or ``"within noise"`` of it; the seeds whose mean lies below the line; ``unchanged``: whether every
    sentence's correlation is 1 (the method does not read what this stage randomised); ``below_from``: the
    first stage after which the interval lies below the line (missing, NaN, where none)."""
    results = _check_results(results)
    stages = results[0].stages
    stage = stages[-1] if stage is None else stage
    if stage not in stages[1:]:
        raise ValueError(f"stage must be one of {', '.join(stages[1:])}, got {stage!r}")
    at = stages.index(stage)
    table = curves(results, seed=seed)
    rows = []
    for m in results[0].methods:
        part = table[(table.measure == "rank correlation") & (table.method == m)].set_index("stage")
        row = part.loc[stage]
        per_seed = np.array([np.nanmean(r.values["rank correlation"][m][at]) for r in results])
        verdict = "passes" if row.high < line else "fails" if row.low > line else "within noise"
        unchanged = all(np.allclose(np.nan_to_num(r.values["rank correlation"][m][at], nan=1.0), 1.0, atol=1e-9,
                                    rtol=0) for r in results)
        below = [s for s in stages[1:] if part.loc[s, "high"] < line]
        rows.append(dict(method=m, correlation=row["mean"], low=row.low, high=row.high, verdict=verdict,
                         seeds_below=int((per_seed < line).sum()), seeds=len(results), unchanged=unchanged,
                         below_from=below[0] if below else None))
    out = pd.DataFrame(rows).set_index("method")
    out.attrs["stage"] = stage
    return out
