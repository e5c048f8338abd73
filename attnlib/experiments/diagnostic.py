"""Diagnostic classifiers guided by attention (Wiegreffe & Pinter 2019, Sec. 5).

Wiegreffe & Pinter ask whether an attention distribution carries information about the
task that a *different* model can use. The diagnostic model is the Average encoder,
h_t = tanh(W e_t + b) on each token with no context, and a linear classifier on

    c = sum_t alpha_t h_t,        y = sigma(w . c + b_out),

where alpha is **given, not learned**: it is fixed per instance by a *guide* and
the model (embeddings, W, w) is trained with Jain & Wallace's recipe around it. If a
guide's attention helps the diagnostic model beyond uniform weights, the attention
encodes something about which tokens matter. The guides of W&P's Table 3:

* ``"uniform"``: alpha_t = 1 / T over the real tokens (the floor);
* ``"trained"`` ("trained MLP"): the Average model learns its own tanh attention
  jointly (an ordinary ``average+tanh`` model);
* a trained model, e.g. the BiLSTM + tanh base model ("base LSTM") or an adversarially
  trained one ("adversary"): its attention on every instance of every split, frozen;
* attention computed any other way, as a dict {"train", "dev", "test"} -> one array per
  instance (e.g. weights on the synthetic task's rationale tokens: an oracle guide).

:func:`guide_attention` computes a guide's attention, :func:`guided_dataset` attaches it
to a data set (:meth:`attnlib.data.Dataset.with_attention`), :func:`train_diagnostic`
trains one diagnostic model and :func:`diagnostic_table` builds Table 3: test F1,
accuracy and ROC-AUC per guide (mean and sd over seeds) beside the published F1.

Over training seeds, :func:`diagnostic_over_seeds` keeps every seed's decision on every test
sentence (:class:`DiagnosticRuns`), so that two guides can be compared with intervals that
carry both the seed noise and the sentence noise; a guide may be one model per seed (the
base of each seed, :func:`adversaries_over_seeds`' adversary against it), so that each seed
retrains the whole chain. :func:`guide_adversary` picks the adversary by W&P's Table 4 rule
within W&P's own lambda range; :func:`peak_on_edge`, :func:`peak_edges` and
:func:`position_guide` say where an adversary peaks and what a guide on that one position
alone gives the diagnostic model.

The guide's attention must be aligned to the diagnostic model's tokens, so a guide model
must have been trained on the same data set (same vocabulary and tokenisation).
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import published as _published
from .._checks import check_seed
from ..data import Dataset
from ..models import ModelConfig, device_of
from ..models.protocol import has_capability
from ..train import (
    TrainConfig,
    TrainedModel,
    predict,
    run_concurrently,
    train_model,
    train_models,
    training_threads,
)
from .adversarial_training import sweep_lambdas, table4_pick, wp_lambda_range

__all__ = [
    "GUIDE_NAMES",
    "PUBLISHED_TABLE3",
    "DIAGNOSTIC_CONFIG",
    "ADVERSARY_LAMBDA",
    "table4_pick",
    "guide_lambdas",
    "guide_adversary",
    "guide_attention",
    "guided_dataset",
    "rationale_guide",
    "train_diagnostic",
    "diagnostic_table",
    "published_table3",
]

#: The guides given by name: uniform weights, or attention learned jointly ("trained MLP").
GUIDE_NAMES = ("uniform", "trained")

#: The diagnostic model: the Average encoder with a given attention (W&P 2019, Sec. 5).
DIAGNOSTIC_CONFIG = ModelConfig(encoder="average", attention="given")

#: The lambda of the adversary whose attention is Table 3's "adversary" guide (W&P footnote 8).
ADVERSARY_LAMBDA = _published.DIAGNOSTIC_ADVERSARY_LAMBDA

_TABLE3 = _published.DIAGNOSTIC_SOURCE


def _in_range(lams, within) -> list:
    """The lambdas of ``lams`` within ``within`` (W&P's own range when None), ends included."""
    if within is None:
        within = wp_lambda_range()
    low, high = (float(x) for x in within)
    if not low <= high:
        raise ValueError(f"within must be (low, high) with low <= high, got {within!r}")
    return [float(v) for v in lams if low * (1 - 1e-9) <= float(v) <= high * (1 + 1e-9)]


def guide_lambdas(lambdas, *, within=None) -> tuple:
    """The lambdas of a sweep's grid that :func:`guide_adversary` chooses among: those within
    W&P's own range (:func:`attnlib.adversarial_training.wp_lambda_range`, or ``within``), or
    the whole grid when none lies there. A chapter that needs only the guide sweeps these."""
    lambdas = tuple(float(v) for v in lambdas)
    return tuple(_in_range(lambdas, within)) or lambdas


def guide_adversary(sweep, *, within=None):
    """(lambda, adversary) for the diagnostic's "adversary" guide, from a lambda sweep
    (:func:`attnlib.adversarial_training.lambda_sweep`): W&P's Table 4 rule (:func:`table4_pick`)
    among the sweep's adversaries whose lambda lies in W&P's own range
    (:func:`attnlib.adversarial_training.wp_lambda_range`, or ``within``), as
    :func:`attnlib.adversarial_training.wp_pick` applies it, so that the guide was trained with
    a lambda like theirs. When none qualifies, the one with the largest mean JSD among them,
    with a warning (a guide that hardly differs from the base tests little); when the sweep has
    no lambda in the range, the rule runs on the whole sweep, with a warning."""
    import warnings

    frame = getattr(sweep, "frame", None)
    if not isinstance(frame, pd.DataFrame) or not {"mean_jsd", "mean_tvd"} <= set(frame.columns):
        raise ValueError("sweep must be a lambda sweep, whose frame has mean_jsd and mean_tvd columns")
    lams = sweep_lambdas(frame).astype(float)
    inside = _in_range(lams, within)
    if not inside:
        warnings.warn("no adversary of the sweep has a lambda in W&P's range; the rule runs on the whole sweep",
                      stacklevel=2)
        inside = [float(v) for v in lams]
    rows = frame[lams.isin(inside)]
    lam = table4_pick(rows)
    if lam is None:
        lam = float(sweep_lambdas(rows)[rows["mean_jsd"].astype(float).idxmax()])
        warnings.warn(f"no adversary of the sweep in the range reaches a mean JSD above "
                      f"{_published.JSD_DIFFERENT_WP}; the guide is the one with the largest, lambda = {lam:g}",
                      stacklevel=2)
    return lam, sweep[lam]


#: Wiegreffe & Pinter 2019, Table 3 (kept in :mod:`attnlib.published` as ``DIAGNOSTIC_F1``).
PUBLISHED_TABLE3 = _published.DIAGNOSTIC_F1

_SPLITS = ("train", "dev", "test")
_METRICS = ("f1", "accuracy", "roc_auc")


# ----------------------------------------------------------------------------- guides
_KINDS = f"one of {', '.join(map(repr, GUIDE_NAMES))}, a TrainedModel, an AttentionClassifier or a dict of attention per split"


def _check_dataset(dataset) -> None:
    if not isinstance(dataset, Dataset):
        raise ValueError(
            f"dataset must be an attnlib.data.Dataset (see attnlib.data.load_dataset), got {type(dataset).__name__}"
        )


def _check_guide(guide, dataset: Dataset) -> None:
    """Raise a ValueError unless ``guide`` is a valid guide for ``dataset`` (nothing is computed)."""
    if isinstance(guide, str):
        if guide not in GUIDE_NAMES:
            raise ValueError(f"unknown guide {guide!r}; give {_KINDS}")
        return
    if isinstance(guide, Mapping):
        if set(guide) != set(_SPLITS):
            raise ValueError(
                f"a guide given as attention must map exactly 'train', 'dev' and 'test' to one array per "
                f"instance, got keys {sorted(map(str, guide))}"
            )
        for name in _SPLITS:
            if len(guide[name]) != len(dataset[name]):
                raise ValueError(
                    f"the guide's attention has {len(guide[name])} arrays for split {name!r} but {dataset.name!r} "
                    f"has {len(dataset[name])} instances there"
                )
        return
    model = guide.model if isinstance(guide, TrainedModel) else guide
    if not has_capability(model, "single_attention"):
        raise ValueError(f"a guide must be {_KINDS}; got {type(guide).__name__}")
    if model.config.attention == "given":
        raise ValueError("the guide model has attention='given': it has no attention of its own to give")
    if model.vocab_size != len(dataset.vocab):
        raise ValueError(
            f"the guide model's vocabulary has {model.vocab_size} entries but {dataset.name!r} has "
            f"{len(dataset.vocab)}: the given attention must be aligned to the diagnostic model's tokens, "
            "so train the guide on this same data set"
        )


def guide_attention(guide, dataset: Dataset, *, batch_size: int = 256) -> dict[str, list[np.ndarray]]:
    """A guide's attention on every instance of every split: {"train", "dev", "test"} -> arrays.

    ``guide`` is ``"uniform"`` (alpha_t = 1 / T over the T real tokens), a model trained on
    ``dataset`` (a :class:`~attnlib.train.TrainedModel` or an
    :class:`~attnlib.models.AttentionClassifier`), whose own attention alpha-hat is computed
    in batches with :func:`attnlib.train.predict` on the training thread
    (:func:`attnlib.train.training_threads`), or attention computed elsewhere: a dict
    with the same keys, returned as given (e.g. weights on the rationale tokens). Each array
    has one weight per real token (no SOS/EOS) and sums to 1 (checked when attached by
    :func:`guided_dataset`). Wiegreffe & Pinter 2019, Sec. 5.
    """
    _check_dataset(dataset)
    _check_guide(guide, dataset)
    if isinstance(guide, str) and guide == "trained":
        raise ValueError(
            "the 'trained' guide learns its attention jointly with the diagnostic model, so it has no "
            "attention to give in advance: use train_diagnostic(dataset, 'trained')"
        )
    if isinstance(guide, str):  # "uniform"
        out = {}
        for name in _SPLITS:
            lengths = dataset[name].lengths()
            weights = np.repeat(np.float32(1.0) / lengths.astype(np.float32), lengths)  # (sum_i T_i,)
            out[name] = np.split(weights, np.cumsum(lengths)[:-1]) if len(lengths) else []
        return out
    if isinstance(guide, Mapping):
        return {name: list(guide[name]) for name in _SPLITS}
    model = guide.model if isinstance(guide, TrainedModel) else guide
    # the weights are the diagnostic model's training data: computed on the training thread, so
    # that their last bits (and a near-chance diagnostic model's fate) depend on no thread count
    with training_threads(device_of(model)):
        return {name: predict(model, dataset[name], batch_size=batch_size).attention for name in _SPLITS}


def guided_dataset(dataset: Dataset, guide, *, batch_size: int = 256) -> Dataset:
    """``dataset`` with a guide's attention attached to every split (see :func:`guide_attention`).

    The diagnostic model trained by :func:`train_diagnostic` reads its attention from the
    batches of this data set: evaluate or inspect it on this, not on ``dataset``.
    """
    return dataset.with_attention(**guide_attention(guide, dataset, batch_size=batch_size))


# ----------------------------------------------------------------------------- training
def _training(dataset: Dataset, guide):
    """(data set, model config) that train a diagnostic model for ``guide``."""
    _check_dataset(dataset)
    _check_guide(guide, dataset)
    n_classes = len(dataset.classes)
    if isinstance(guide, str) and guide == "trained":
        return dataset, ModelConfig(encoder="average", attention="tanh", n_classes=n_classes)
    config = ModelConfig(**{**DIAGNOSTIC_CONFIG.to_dict(), "n_classes": n_classes})
    return guided_dataset(dataset, guide), config


def train_diagnostic(
    dataset: Dataset,
    guide,
    *,
    seed: int = 0,
    train_config: TrainConfig | None = None,
    epochs: int | None = None,
    device=None,
    use_cache: bool = True,
    progress: bool = True,
) -> TrainedModel:
    """Train (or load from the cache) W&P's diagnostic MLP guided by ``guide``'s attention.

    The Average encoder h_t = tanh(W e_t + b) and a linear classifier on
    c = sum_t alpha_t h_t, with alpha given by the guide and frozen (Wiegreffe & Pinter
    2019, Sec. 5, Table 3); trained with J&W's recipe by :func:`attnlib.train.train_model`.
    ``guide``: ``"uniform"``, ``"trained"`` (the "trained MLP": an ``average+tanh`` model
    that learns its attention jointly), a model trained on ``dataset`` (TrainedModel or
    AttentionClassifier) whose attention is taken on every split, or a dict of attention
    per split (see :func:`guide_attention`). The cache key includes the given attention,
    so different guides never share a cached model.

    A diagnostic model with a given attention decodes with ``Batch.attention``: evaluate it
    on ``guided_dataset(dataset, guide)``. Its ``test`` scores are already in the result.
    """
    guided, config = _training(dataset, guide)
    return train_model(
        guided, config, seed=seed, train_config=train_config, epochs=epochs, device=device,
        use_cache=use_cache, progress=progress,
    )


# ----------------------------------------------------------------------------- Table 3
def published_table3(dataset: str) -> dict | None:
    """W&P's Table 3 F1 per guide name for one of our data set names, or None if it has none.

    Our data sets map to the paper's with :data:`attnlib.published.PAPER_DATASET`
    (rt-polarity stands in for SST).
    """
    key = _published.PAPER_DATASET.get(dataset)
    return PUBLISHED_TABLE3.get(key) if key is not None else None


def _check_seeds(seeds) -> tuple[int, ...]:
    if isinstance(seeds, numbers.Integral) and not isinstance(seeds, bool):
        seeds = (seeds,)
    try:
        seeds = tuple(seeds) if not isinstance(seeds, str) else ()
    except TypeError:
        seeds = ()
    if not seeds:
        raise ValueError("seeds must be a non-empty sequence of non-negative ints, e.g. (0, 1, 2)")
    for s in seeds:
        check_seed(s, "seeds")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct (a repeated seed trains the same model twice), got {seeds!r}")
    return tuple(int(s) for s in seeds)


def diagnostic_table(
    dataset: Dataset,
    guides: Mapping[str, object],
    *,
    seeds=(0,),
    train_config: TrainConfig | None = None,
    epochs: int | None = None,
    device=None,
    use_cache: bool = True,
    progress: bool = True,
) -> pd.DataFrame:
    """W&P's Table 3: test scores of a diagnostic MLP per guide, beside the published F1.

    ``guides`` maps a row name to a guide (see :func:`train_diagnostic`), e.g.
    ``{"uniform": "uniform", "trained MLP": "trained", "base LSTM": lstm, "adversary": adv}``;
    rows keep its order. For each guide a diagnostic model is trained per seed (the guide's
    attention is computed once). Columns: ``test f1``, ``test accuracy``, ``test roc_auc``
    (means over seeds), each followed, with several seeds, by its ``... sd`` (sample sd,
    ddof = 1); and when the data set stands in for one of the paper's (rt-polarity -> SST,
    imdb), ``published f1``: W&P 2019 Table 3 for rows named as in the paper ("uniform",
    "trained MLP", "base LSTM", "adversary"), NaN for other rows (checked against the typeset
    table); see :data:`PUBLISHED_TABLE3`.
    """
    _check_dataset(dataset)
    if not isinstance(guides, Mapping) or len(guides) == 0:
        raise ValueError("guides must be a non-empty dict of row name -> guide, e.g. {'uniform': 'uniform'}")
    for name in guides:
        if not isinstance(name, str) or not name:
            raise ValueError(f"guide names must be non-empty strings, got {name!r}")
    seeds = _check_seeds(seeds)
    # Validate every guide before training anything: a typo in the last row should not cost a run.
    for guide in guides.values():
        _check_guide(guide, dataset)

    paper = published_table3(dataset.name)
    specs = []
    for guide in guides.values():
        guided, config = _training(dataset, guide)
        specs += [dict(dataset=guided, config=config, seed=seed, train_config=train_config, epochs=epochs, device=device,
                       use_cache=use_cache) for seed in seeds]
    trained = iter(train_models(specs, progress=progress))  # every (guide, seed) at once
    rows = {}
    for name in guides:
        results = [next(trained).test for _ in seeds]
        scores = np.array([[r[m] for m in _METRICS] for r in results], dtype=np.float64)  # (seeds, metrics)
        row = {}
        for j, m in enumerate(_METRICS):
            row[f"test {m}"] = float(scores[:, j].mean())
            if len(seeds) > 1:
                row[f"test {m} sd"] = float(scores[:, j].std(ddof=1))
        if paper is not None:
            row["published f1"] = paper[name].value if name in paper else math.nan
        rows[name] = row
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index.name = "guide"
    if paper is not None:
        frame.attrs["published f1"] = _TABLE3
    return frame


# ----------------------------------------------------------------------------- the guides' weights
def guides_test_attention(
    guides: Mapping[str, object],
    dataset: Dataset,
    *,
    seed: int = 0,
    epochs: int | None = None,
    batch_size: int = 256,
) -> dict[str, list[np.ndarray]]:
    """The attention each guide hands the diagnostic model on the test split, per guide name.

    ``guides``: row name -> guide, as for :func:`diagnostic_table`. The ``"trained"`` guide
    has no attention in advance (it is learned jointly): its weights are read off the trained
    diagnostic model (:func:`train_diagnostic` with ``seed`` and ``epochs``, from the cache
    when it is there); every other guide's come from :func:`guide_attention`. Returns one
    array per test instance for each guide, in the order of ``guides``.
    """
    _check_dataset(dataset)
    if not isinstance(guides, Mapping) or len(guides) == 0:
        raise ValueError("guides must be a non-empty dict of row name -> guide, e.g. {'uniform': 'uniform'}")
    seed = check_seed(seed)
    for guide in guides.values():  # every guide checked before anything is trained
        _check_guide(guide, dataset)
    out = {}
    for name, guide in guides.items():
        if isinstance(guide, str) and guide == "trained":  # learned jointly: read it off the model
            trained = train_diagnostic(dataset, "trained", seed=seed, epochs=epochs, progress=False)
            out[name] = predict(trained.model, dataset.test, batch_size=batch_size).attention
        else:
            out[name] = guide_attention(guide, dataset, batch_size=batch_size)["test"]
    return out


__all__ += ["guides_test_attention"]


# ----------------------------------------------------------------------------- over training seeds
def _guide_per_seed(name: str, guide, n_seeds: int) -> tuple:
    """``guide`` for every seed: a guide given once (a name, a model, attention) serves every
    seed; a list, a tuple or a :class:`~attnlib.seeds.SeedSet` gives one guide per seed."""
    if isinstance(guide, (str, Mapping, TrainedModel)) or has_capability(guide, "single_attention"):
        return (guide,) * n_seeds
    try:
        per_seed = tuple(guide)
    except TypeError:
        raise ValueError(f"guide {name!r} must be a guide or one guide per seed, got {type(guide).__name__}") from None
    if len(per_seed) != n_seeds:
        raise ValueError(f"guide {name!r} gives {len(per_seed)} guides for {n_seeds} seeds: give one per seed")
    return per_seed


def _guides_per_seed(dataset: Dataset, guides, seeds) -> tuple[tuple, dict]:
    """(checked seeds, {name: one guide per seed}), every guide checked before anything trains."""
    _check_dataset(dataset)
    if not isinstance(guides, Mapping) or len(guides) == 0:
        raise ValueError("guides must be a non-empty dict of row name -> guide, e.g. {'uniform': 'uniform'}")
    for name in guides:
        if not isinstance(name, str) or not name:
            raise ValueError(f"guide names must be non-empty strings, got {name!r}")
    seeds = _check_seeds(seeds)
    rows = {name: _guide_per_seed(name, guide, len(seeds)) for name, guide in guides.items()}
    for row in rows.values():
        for guide in row:
            _check_guide(guide, dataset)
    return seeds, rows


def diagnostic_specs(
    dataset: Dataset,
    guides: Mapping[str, object],
    *,
    seeds,
    train_config: TrainConfig | None = None,
    epochs: int | None = None,
    device=None,
    use_cache: bool = True,
) -> list[dict]:
    """The :func:`attnlib.train.train_model` keyword arguments of every diagnostic model that
    :func:`diagnostic_over_seeds` trains with the same arguments, guide by guide, seed by seed.

    A caller that trains other models first can hand these to the same pool (e.g. a lambda
    sweep's ``also_train``): :func:`diagnostic_over_seeds` then loads them from the cache.
    """
    seeds, rows = _guides_per_seed(dataset, guides, seeds)
    made = _trainings(dataset, [guide for row in rows.values() for guide in row])
    specs = []
    for row in rows.values():
        for guide, seed in zip(row, seeds):
            guided, config = made[id(guide)]
            specs.append(dict(dataset=guided, config=config, seed=seed, train_config=train_config, epochs=epochs,
                              device=device, use_cache=use_cache))
    return specs


def _trainings(dataset: Dataset, guides: list) -> dict:
    """id(guide) -> :func:`_training` of each distinct guide. The models' attention is computed
    at once, one model per core, each on the training thread as :func:`guide_attention` does
    (the same bits as one after the other); a guide listed again is computed once."""
    import functools

    distinct = list({id(g): g for g in guides}.values())
    models = [g for g in distinct if isinstance(g, TrainedModel) or has_capability(g, "single_attention")]
    made = dict(zip(map(id, models), run_concurrently(
        [functools.partial(_training, dataset, g) for g in models], progress=False, unit="guide")))
    return {id(g): made[id(g)] if id(g) in made else _training(dataset, g) for g in distinct}


@dataclass(frozen=True)
class DiagnosticRuns:
    """Diagnostic models per guide and training seed, scored on every test sentence.

    Row k of every guide is the diagnostic model trained with ``seeds[k]``, guided by that
    seed's guide (the seed-k base model's attention, say): one retraining of the whole chain.
    ``labels`` (n,) the test labels; per guide name, ``predicted`` (S, n) the predicted
    classes, ``attention`` S lists of the test attention the diagnostic model was handed (or,
    for the trained MLP, learned), ``trained`` the S :class:`~attnlib.train.TrainedModel`.
    """

    seeds: tuple
    labels: np.ndarray
    predicted: dict
    attention: dict
    trained: dict
    dataset: str = ""

    @property
    def guides(self) -> list:
        return list(self.predicted)

    def correct(self, guide: str) -> np.ndarray:
        """(S, n) 1.0 where the diagnostic model of that seed classifies the sentence right."""
        return (self.predicted[guide] == self.labels[None, :]).astype(np.float64)

    def scores(self, guide: str, metric: str = "f1") -> np.ndarray:
        """(S,) the stored test score of each seed's diagnostic model (f1, accuracy, roc_auc)."""
        return np.array([t.test[metric] for t in self.trained[guide]], dtype=np.float64)

    def peaks(self, guide: str, edge) -> np.ndarray:
        """(S, n) 1.0 where the guide's attention has its single largest weight on the ``edge``
        ("first" or "last") token of the sentence, or on each seed's own edge when ``edge`` is
        one per seed (a tie for the largest counts for neither, as in
        :func:`attnlib.metrics.attention_positions`)."""
        per_seed = self.attention[guide]
        edges = (edge,) * len(per_seed) if isinstance(edge, str) else tuple(edge)
        if len(edges) != len(per_seed):
            raise ValueError(f"edge must be 'first', 'last' or one of them per seed ({len(per_seed)}), got {edge!r}")
        return np.stack([peak_on_edge(a, e) for a, e in zip(per_seed, edges)])

    def positions(self) -> pd.DataFrame:
        """Where each guide puts its weight (:func:`attnlib.metrics.attention_positions`), the
        mean over the seeds; one row per guide."""
        from ..metrics import attention_positions

        rows = {}
        for guide, per_seed in self.attention.items():
            frames = pd.DataFrame([attention_positions(a) for a in per_seed])
            rows[guide] = frames.mean()
        return pd.DataFrame(rows).T


def peak_on_edge(attention, edge: str) -> np.ndarray:
    """(n,) 1.0 where an instance's single largest weight is on its ``edge`` ("first" or "last")
    token, for ragged attention (one array per instance, at least one weight each); a tied
    largest weight gives 0, as in :func:`attnlib.metrics.attention_positions`."""
    if edge not in ("first", "last"):
        raise ValueError(f"edge must be 'first' or 'last', got {edge!r}")
    arrays = [np.asarray(a, dtype=np.float64).ravel() for a in attention]
    if not arrays:
        return np.zeros(0)
    lengths = np.fromiter(map(len, arrays), dtype=np.int64, count=len(arrays))
    if (lengths < 1).any():
        raise ValueError(f"every instance needs at least one weight; instance {int(np.argmin(lengths))} has none")
    flat = np.concatenate(arrays)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    peak = np.maximum.reduceat(flat, starts)
    unique = np.add.reduceat(flat == np.repeat(peak, lengths), starts) == 1
    at = flat[starts] if edge == "first" else flat[starts + lengths - 1]
    return (unique & (at == peak)).astype(np.float64)


def _test_prediction(model: TrainedModel, test):
    """The model's prediction on ``test``, on the training thread (no thread count decides a
    near-chance model's decisions)."""
    with training_threads(device_of(model.model)):
        return predict(model.model, test)


def diagnostic_over_seeds(
    dataset: Dataset,
    guides: Mapping[str, object],
    *,
    seeds,
    train_config: TrainConfig | None = None,
    epochs: int | None = None,
    device=None,
    use_cache: bool = True,
    progress: bool = True,
) -> DiagnosticRuns:
    """W&P's Table 3 over training seeds: one diagnostic model per guide and seed, and its
    prediction on every test sentence, so that a comparison of two guides can carry both the
    seed noise and the sentence noise (:func:`attnlib.uncertainty.compare_f1_over_seeds`).

    ``guides`` maps a row name to a guide (see :func:`train_diagnostic`) given once for every
    seed (``"uniform"``, ``"trained"``, attention), or to one guide per seed, e.g. the base
    models of a :class:`~attnlib.seeds.SeedSet`: row k is then the diagnostic model trained
    with ``seeds[k]`` and guided by guide k, so each row retrains the whole chain (the guide's
    model and the diagnostic model). Every model trains in one pool; the predictions are
    computed on the training thread (:func:`attnlib.train.training_threads`), so a near-chance
    model's decisions do not depend on the thread count.
    """
    import functools

    specs = diagnostic_specs(dataset, guides, seeds=seeds, train_config=train_config, epochs=epochs, device=device,
                             use_cache=use_cache)
    seeds = _check_seeds(seeds)
    trained = train_models(specs, progress=progress)
    outputs = run_concurrently(  # one model per core, each on the training thread
        [functools.partial(_test_prediction, m, spec["dataset"].test) for m, spec in zip(trained, specs)],
        progress=False, unit="model")
    pairs = iter(zip(trained, outputs))  # guide by guide, seed by seed, as the specs are
    predicted, attention, models = {}, {}, {}
    for name in guides:
        row = [next(pairs) for _ in seeds]
        predicted[name] = np.stack([p.predicted for _, p in row])
        attention[name] = tuple(p.attention for _, p in row)
        models[name] = tuple(m for m, _ in row)
    return DiagnosticRuns(seeds, np.asarray(dataset.test.labels), predicted, attention, models, dataset.name)


def adversaries_over_seeds(
    dataset: Dataset,
    bases,
    lam: float,
    *,
    epochs: int | None = None,
    train_config: TrainConfig | None = None,
    use_cache: bool = True,
    progress: bool = True,
) -> tuple:
    """The adversary at ``lam`` against every base model of a seed set: adversary k is
    :func:`attnlib.adversarial_training.train_adversary` against ``bases[k]`` with that base's
    seed (the model :func:`~attnlib.adversarial_training.lambda_sweep` trains for that base and
    seed, so the first seed's comes from the sweep's cache entry). They train at once, one
    per core. ``bases``: a :class:`~attnlib.seeds.SeedSet` or a list of TrainedModels."""
    import functools

    from ..train import run_concurrently
    from .adversarial_training import train_adversary

    bases = tuple(bases)
    if not bases or not all(isinstance(b, TrainedModel) for b in bases):
        raise ValueError("bases must be a non-empty SeedSet or list of TrainedModels (the base models, one per seed)")
    jobs = [functools.partial(train_adversary, dataset, b, lam, seed=b.seed, train_config=train_config, epochs=epochs,
                              use_cache=use_cache, progress=progress) for b in bases]
    return tuple(run_concurrently(jobs, progress=progress, description=f"{len(jobs)} adversaries, λ = {lam:g}"))


def peak_edges(models, split) -> tuple:
    """Per model, ``"first"`` or ``"last"``: the edge of the sentence on which its attention has
    its single largest weight more often on ``split`` (ties: ``"last"``)."""
    out = []
    for m in models:
        model = m.model if isinstance(m, TrainedModel) else m
        with training_threads(device_of(model)):
            alpha = predict(model, split).attention
        out.append("first" if peak_on_edge(alpha, "first").sum() > peak_on_edge(alpha, "last").sum() else "last")
    return tuple(out)


def position_guide(dataset: Dataset, edge: str) -> dict[str, list[np.ndarray]]:
    """A guide that puts all its weight on one position, the ``edge`` ("first" or "last") real
    token of every sentence, on every split: what a guide tells the diagnostic model when
    nothing but the position decides where it looks."""
    _check_dataset(dataset)
    if edge not in ("first", "last"):
        raise ValueError(f"edge must be 'first' or 'last', got {edge!r}")
    out = {}
    for name in _SPLITS:
        lengths = dataset[name].lengths().astype(np.int64)
        flat = np.zeros(int(lengths.sum()), dtype=np.float32)  # (sum_i T_i,)
        ends = np.cumsum(lengths)
        flat[ends - lengths if edge == "first" else ends - 1] = 1.0
        out[name] = np.split(flat, ends[:-1]) if len(lengths) else []
    return out


def rationale_guide(dataset: Dataset) -> dict[str, list[np.ndarray]]:
    """The "oracle" guide of a data set with rationales (the synthetic tasks): each sentence's
    weight spread evenly over its rationale tokens (the markers that decide its label), on
    every split. A sentence without a rationale token is refused."""
    _check_dataset(dataset)
    if not dataset.has_rationales:
        raise ValueError(f"{dataset.name!r} has no rationales: the oracle guide needs the tokens that decide the label")
    out = {}
    for name in _SPLITS:
        marks = [np.asarray(r, dtype=np.float64) for r in dataset[name].rationales]
        empty = [i for i, m in enumerate(marks) if not m.sum() > 0]
        if empty:
            raise ValueError(f"{len(empty)} {name} sentences of {dataset.name!r} have no rationale token "
                             f"(the first: {empty[0]})")
        out[name] = [m / m.sum() for m in marks]
    return out


def edge_tokens(split, edge: str) -> pd.Series:
    """The tokens at the ``edge`` ("first" or "last") of ``split``'s sentences, as shares of the
    sentences, most common first."""
    if edge not in ("first", "last"):
        raise ValueError(f"edge must be 'first' or 'last', got {edge!r}")
    tokens = [t[0] if edge == "first" else t[-1] for t in split.tokens if len(t)]
    return pd.Series(tokens, dtype=object).value_counts(normalize=True)


__all__ += ["diagnostic_specs", "DiagnosticRuns", "diagnostic_over_seeds", "adversaries_over_seeds", "peak_on_edge",
            "peak_edges", "position_guide", "edge_tokens"]
