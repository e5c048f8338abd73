"""Learning to deceive: a model trained to hide its attention from the tokens it uses.

Pruthi et al. 2020, *Learning to Deceive with Attention-Based Explanations*. Mark some
tokens of every instance "impermissible" (mask m), and train the classifier with its label
loss plus a penalty on the attention it gives them,

    L = label loss + R,    R = -lambda * log(1 - alpha^T m),

averaged over the batch (:func:`impermissible_penalty`). alpha^T m, the attention mass on the
impermissible tokens (:func:`attention_mass`), is pushed towards 0: the penalty is 0 at mass 0
and grows without bound as the mass nears 1. If the model's accuracy survives while the mass
falls to almost nothing -- and deleting the impermissible tokens still drops it to chance
(:meth:`attnlib.data.Split.remove_tokens`) -- then the model still *uses* those tokens while
its attention says it does not: attention can be trained to deceive.

Their SST + Wiki task appends an unrelated Wikipedia sentence to each SST sentence and marks
the SST tokens impermissible; here :func:`attnlib.data.load_deception` builds its offline
stand-in (an rt-polarity sentence, a separator, an IMDB sentence), whose ``rationales`` are
the mask m. Their lambdas: 0, 0.1 and 1 (:data:`PRUTHI_LAMBDAS`). Their BERT is set up as
in their code (``danishpruthi/deceptive-attention``, ``run_classifier.py`` and
``modeling.py``), and so is the book's transformer here:

- R_mean, per head: -lambda/|H| sum_h log(1 - alpha_h^T m) on the last layer's [CLS] rows
  (``TransformerOutput.head_attention``), stricter than penalising the head average (Jensen);
- restricted attention in every layer, at every lambda (0 included): the two segments attend
  only within themselves, [CLS] attends to all and nobody to [CLS]
  (``TransformerConfig(segment_separator=...)``, which :func:`train_deceiver` sets).

Their Table 3 (accuracy / mass in %; from a reproduction report's reprint):
:data:`attnlib.published.PRUTHI_TABLE3`.

Numerics: 1 - alpha^T m is computed as the attention mass *off* the impermissible tokens
(the same number for a distribution, without the cancellation of 1 - mass near mass 1) and
clamped below at 1e-10 (:data:`attnlib.metrics.EPS`) before the log, so the penalty is at most
lambda * ln(1e10), about 23 lambda, and finite with a finite gradient even at mass 1.

:func:`train_deceiver` trains like :func:`attnlib.train.train_model` (same initial weights,
batches, optimiser and epoch selection by dev ROC-AUC, so lambda = 0 gives exactly
``train_model``'s model) and caches the result under a key of lambda, the objective's version,
the data (rationales included), the model and training settings, the seed, the device and
the attnlib version. :func:`deception_table` is Table 3's two columns for any models.
"""
from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import pandas as pd
import torch
from torch import nn

from .. import cache, get_device, metrics
from .._checks import check_distribution, check_positive_int, check_positive_number, check_seed
from ..data import DECEPTION_SEPARATOR, Dataset, Split
from ..models import ModelConfig, TransformerConfig, device_of, eval_mode
from ..train import (
    STORED_FIELDS,
    TRANSFORMER_TRAIN,
    TrainConfig,
    TrainedModel,
    classification_metrics,
    dataset_fingerprint,
    fit,
    label_loss,
    load_or_train,
)

__all__ = [
    "PRUTHI_LAMBDAS",
    "DeceiverModel",
    "attention_mass",
    "impermissible_penalty",
    "train_deceiver",
    "restricted_config",
    "deception_table",
    "score_mass",
]

#: Pruthi et al.'s penalty weights lambda (0: the plain model).
PRUTHI_LAMBDAS = (0.0, 0.1, 1.0)

# Bumped whenever the objective or the selection changes, so old cache entries are not reused.
_OBJECTIVE_VERSION = "label+lambda*-log(mass-off-m, clamp 1e-10)/per-head-batch-mean/select-dev-auc/v2"


# ----------------------------------------------------------------------------- the penalty
def _check_inputs(attention, mask, check: bool, heads: bool = False) -> None:
    dims = (2, 3) if heads else (2,)
    if not isinstance(attention, torch.Tensor) or not attention.is_floating_point() or attention.ndim not in dims:
        shapes = "2-d (B, T) or 3-d (B, H, T)" if heads else "2-d (B, T)"
        raise ValueError(f"attention must be a {shapes} floating-point torch tensor")
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise ValueError("mask must be a boolean torch tensor, True on the impermissible tokens")
    if mask.ndim != 2 or mask.shape != (attention.shape[0], attention.shape[-1]):
        raise ValueError(f"mask has shape {tuple(mask.shape)} but attention has shape {tuple(attention.shape)}")
    if mask.device != attention.device:
        raise ValueError(f"mask is on {mask.device} but attention is on {attention.device}")
    if check:
        check_distribution(attention.detach(), "attention")


def attention_mass(attention, mask, *, check: bool = True) -> torch.Tensor:
    """alpha^T m per instance: the attention on the impermissible tokens, (B,).

    ``attention``: (B, T) torch rows, each a distribution over the positions (0 off the
    real tokens, as both model families give it); ``mask``: (B, T) bool, True on the
    impermissible tokens (e.g. ``Batch.rationale``). ``check`` (default True) also
    verifies that every row is a distribution (non-negative, finite, summing to 1);
    the shapes are always checked. Differentiable in ``attention``.
    """
    _check_inputs(attention, mask, check)
    return attention.masked_fill(~mask, 0.0).sum(-1)


def impermissible_penalty(attention, mask, lam, *, check: bool = True) -> torch.Tensor:
    """Pruthi et al.'s penalty, the batch mean of -lambda * log(1 - alpha^T m), a scalar.

    ``attention`` (B, T) and ``mask`` (B, T) as for :func:`attention_mass`; or ``attention``
    (B, H, T), one row per head: then R_mean, the mean over instances and heads of
    -lambda * log(1 - alpha_h^T m), as their code computes it. ``lam`` >= 0.
    1 - alpha^T m is computed as the mass off the impermissible tokens and clamped below at
    1e-10 (:data:`attnlib.metrics.EPS`), so the value (at most about 23 lambda) and its
    gradient are finite even when all the attention is on them. Differentiable in
    ``attention``; exactly 0 for lambda = 0.

    Raises ValueError for lambda < 0, NaN or inf, mismatched shapes, or (with ``check``,
    the default) a mask row without an impermissible token or attention rows that are
    not distributions.
    """
    lam = check_positive_number(lam, "lam (the penalty weight lambda)", allow_zero=True)
    _check_inputs(attention, mask, check, heads=True)
    if check:
        empty = int((~mask.any(-1)).sum())
        if empty:
            raise ValueError(
                f"{empty} row(s) of mask mark no impermissible token: the penalty needs at least one per instance"
            )
    if attention.ndim == 3:
        mask = mask[:, None, :]
    rest = attention.masked_fill(mask, 0.0).sum(-1).clamp_min(metrics.EPS)  # 1 - alpha^T m, (B,) or (B, H)
    return lam * -torch.log(rest).mean()


def score_mass(scores, masks) -> np.ndarray:
    """The share of each instance's explanation that falls on its impermissible tokens, (N,).

    ``scores``: N arrays over the real tokens (attention, gradient, leave-one-out, rollout:
    any per-token explanation, e.g. an :class:`attnlib.importance.ImportanceResult`'s lists);
    ``masks``: N bool arrays of the same lengths (the split's ``rationales`` for those
    instances). Per instance sum_t |s_t| m_t / sum_t |s_t|: absolute values, so signed
    scores count by size; NaN for an instance whose scores are all 0.
    """
    scores, masks = list(scores), list(masks)
    if len(scores) != len(masks) or not scores:
        raise ValueError(f"scores and masks must be non-empty and of one length, got {len(scores)} and {len(masks)}")
    lengths = np.fromiter(map(len, scores), dtype=np.int64, count=len(scores))
    if not np.array_equal(lengths, np.fromiter(map(len, masks), dtype=np.int64, count=len(masks))):
        raise ValueError("each mask must have one entry per score of its instance")
    flat = np.abs(np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in scores]))
    marked = np.concatenate([np.asarray(m, dtype=bool).ravel() for m in masks])
    if not np.all(np.isfinite(flat)):
        raise ValueError("scores must be finite")
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    total = np.add.reduceat(flat, starts) if len(flat) else np.zeros(len(scores))
    on = np.add.reduceat(flat * marked, starts) if len(flat) else np.zeros(len(scores))
    total = np.where(lengths > 0, total, 0.0)
    on = np.where(lengths > 0, on, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, on / total, np.nan)


# ----------------------------------------------------------------------------- results
@dataclass
class DeceiverModel(TrainedModel):
    """A :class:`~attnlib.train.TrainedModel` trained with Pruthi et al.'s penalty at weight ``lam``.

    ``mass``: the mean attention mass on the impermissible tokens (a fraction, 0..1) on the
    ``"dev"`` and ``"test"`` splits; ``history`` has each epoch's ``dev_impermissible_mass``
    beside the dev scores.
    """

    lam: float = 0.0
    mass: dict = field(default_factory=dict)

    def summary(self) -> dict:
        """One row for a results table."""
        row = super().summary()
        row["lambda"] = self.lam
        row["test impermissible attention (%)"] = 100.0 * self.mass.get("test", float("nan"))
        return row


# ----------------------------------------------------------------------------- evaluation
@torch.no_grad()
def _outputs(model: nn.Module, split: Split, batch_size: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """Output distributions (N, C) and attention mass on the impermissible tokens (N,), in the split's order."""
    device = device_of(model)
    probs: np.ndarray | None = None
    mass = np.zeros(len(split), dtype=np.float64)
    with eval_mode(model):
        for batch in split.batches(batch_size):
            batch = batch.to(device)
            out = model(batch)
            attention = getattr(out, "attention", None)
            if attention is None or attention.shape != batch.rationale.shape:
                raise ValueError(
                    f"{type(model).__name__}'s forward(batch) must give .attention of shape (B, T) "
                    f"{tuple(batch.rationale.shape)}; got {None if attention is None else tuple(attention.shape)}"
                )
            if probs is None:
                probs = np.zeros((len(split), out.probs.shape[-1]), dtype=np.float64)
            idx = batch.index.cpu().numpy()
            probs[idx] = out.probs.double().cpu().numpy()
            mass[idx] = attention_mass(attention.double(), batch.rationale, check=False).cpu().numpy()
    return probs, mass


def _check_split(split, what: str = "split") -> Split:
    if not isinstance(split, Split):
        raise ValueError(f"{what} must be an attnlib.data.Split (e.g. dataset.test), got {type(split).__name__}")
    if split.rationales is None:
        raise ValueError(
            f"{what} {split.name!r} has no rationales to mark the impermissible tokens: use attnlib.data.load_deception"
        )
    if len(split) == 0:
        raise ValueError(f"{what} {split.name!r} is empty")
    return split


def deception_table(models, split, *, batch_size: int = 256) -> pd.DataFrame:
    """Pruthi et al.'s Table 3 columns for each model on ``split``.

    ``models``: a dict of name -> a :class:`~attnlib.train.TrainedModel` (or a model whose
    ``forward(batch)`` gives ``.probs`` and a (B, T) ``.attention``, both families of the
    book); ``split``: a :class:`~attnlib.data.Split` with rationales (the impermissible
    tokens), e.g. ``load_deception().test``, or the same split after
    ``split.remove_tokens(split.rationales)`` (its mass is then 0).

    One row per model (index ``model``): ``accuracy``; ``impermissible attention (%)``, the
    mean over instances of 100 alpha^T m; ``impermissible tokens (%)``, the mean share of
    tokens that are impermissible (what uniform attention would give them); ``n``. Runs in
    eval mode without gradients, in length-bucketed batches; each model's mode is restored.

    The per-instance values behind the two means are kept in two more columns, one array per
    row (as :func:`attnlib.head_importance.prune_by_importance` keeps ``correct``): ``correct``
    ((N,) bool) and ``mass`` ((N,) float, 100 alpha^T m), for intervals
    (:func:`attnlib.uncertainty.bootstrap`) and paired comparisons of two models.
    """
    if not isinstance(models, Mapping) or not models:
        raise ValueError("models must be a non-empty dict of name -> TrainedModel (or model)")
    _check_split(split)
    check_positive_int(batch_size, "batch_size", minimum=1)
    lengths = split.lengths()
    marked = np.fromiter(map(np.count_nonzero, split.rationales), dtype=np.float64, count=len(split))
    share = float(np.mean(np.divide(marked, lengths, out=np.zeros(len(split)), where=lengths > 0)))
    rows = {}
    for name, model in models.items():
        if not isinstance(name, str):
            raise ValueError(f"model names must be str, got {name!r}")
        module = model.model if isinstance(model, TrainedModel) else model
        if not isinstance(module, nn.Module):
            raise ValueError(f"models[{name!r}] must be a TrainedModel or a torch model, got {type(model).__name__}")
        probs, mass = _outputs(module, split, batch_size)
        correct = probs.argmax(-1) == np.asarray(split.labels)
        rows[name] = {
            "accuracy": float(np.mean(correct)),
            "impermissible attention (%)": 100.0 * float(mass.mean()),
            "impermissible tokens (%)": 100.0 * share,
            "n": len(split),
            "correct": correct,
            "mass": 100.0 * mass,
        }
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index.name = "model"
    return frame


# ----------------------------------------------------------------------------- training
def _rationale_fingerprint(dataset: Dataset) -> str:
    """SHA-256 of the three splits' rationales (the penalty's masks; not in the dataset fingerprint)."""
    h = hashlib.sha256()
    for split in (dataset.train, dataset.dev, dataset.test):
        h.update(np.fromiter(map(len, split.rationales), dtype=np.int64, count=len(split)).tobytes())
        if len(split):
            h.update(np.packbits(np.concatenate(split.rationales).astype(bool)).tobytes())
    return h.hexdigest()


def _validate(dataset, config, lam, seed, train_config, epochs):
    if not isinstance(dataset, Dataset):
        raise ValueError(
            f"dataset must be an attnlib.data.Dataset (see attnlib.data.load_deception), got {type(dataset).__name__}"
        )
    if not dataset.has_rationales:
        raise ValueError(
            f"{dataset.name!r} has no rationales to mark the impermissible tokens: use attnlib.data.load_deception"
        )
    if len(dataset.train) == 0 or len(dataset.dev) == 0:
        raise ValueError("the dataset needs non-empty train and dev splits")
    if not isinstance(config, (ModelConfig, TransformerConfig)):
        raise ValueError(
            f"config must be an attnlib.models.ModelConfig or TransformerConfig, got {type(config).__name__}"
        )
    if config.n_classes != len(dataset.classes):
        raise ValueError(
            f"config.n_classes is {config.n_classes} but {dataset.name} has {len(dataset.classes)} classes"
        )
    lam = check_positive_number(lam, "lam (the penalty weight lambda)", allow_zero=True)
    if isinstance(config, ModelConfig) and config.attention == "given":
        raise ValueError("attention='given' takes its attention from the batches: there is no attention to train")
    if isinstance(config, ModelConfig) and lam > 0 and config.attention not in ("tanh", "dot"):
        raise ValueError(f"the penalty needs learned attention ('tanh' or 'dot'), not {config.attention!r}")
    if lam > 0:
        unmarked = int(sum(not r.any() for r in dataset.train.rationales))
        if unmarked:
            raise ValueError(f"{unmarked} training instance(s) mark no impermissible token: the penalty needs one each")
    seed = check_seed(seed)
    if train_config is not None and not isinstance(train_config, TrainConfig):
        raise ValueError(f"train_config must be an attnlib.train.TrainConfig, got {type(train_config).__name__}")
    if train_config is None:
        train_config = TRANSFORMER_TRAIN if isinstance(config, TransformerConfig) else TrainConfig()
    if epochs is not None:
        train_config = TrainConfig(**{**asdict(train_config), "epochs": epochs})
    return lam, seed, train_config


def restricted_config(config: TransformerConfig, dataset: Dataset) -> TransformerConfig:
    """``config`` with Pruthi et al.'s restricted attention between the segments of ``dataset``.

    The segments are split at :data:`attnlib.data.DECEPTION_SEPARATOR`, whose id in the
    data set's vocabulary becomes ``TransformerConfig.segment_separator``. Raises ValueError
    for a config that is not a transformer's or a vocabulary without the separator.
    """
    if not isinstance(config, TransformerConfig):
        raise ValueError(f"restricted attention needs a TransformerConfig, got {type(config).__name__}")
    if DECEPTION_SEPARATOR not in dataset.vocab:
        raise ValueError(
            f"{dataset.name!r} has no separator {DECEPTION_SEPARATOR!r} in its vocabulary: "
            "use attnlib.data.load_deception"
        )
    return replace(config, segment_separator=dataset.vocab.stoi[DECEPTION_SEPARATOR])


def train_deceiver(
    dataset: Dataset,
    config: ModelConfig | TransformerConfig,
    *,
    lam: float,
    seed: int = 0,
    epochs: int | None = None,
    train_config: TrainConfig | None = None,
    restricted: bool | None = None,
    progress: bool = True,
    use_cache: bool = True,
    device=None,
) -> DeceiverModel:
    """Train (or load from the cache) ``config``'s model with Pruthi et al.'s penalty at weight ``lam``.

    Minimises the label loss (:func:`attnlib.train.label_loss`) plus
    :func:`impermissible_penalty` of the model's attention on the batch's rationales, which
    mark the impermissible tokens (:func:`attnlib.data.load_deception`): J&W's attention, or
    the transformer's last-layer [CLS] rows head by head (``head_attention``: R_mean).
    ``restricted`` (default: True for a transformer, as in Pruthi et al.'s code; a BiLSTM has
    no such option): the transformer is built with :func:`restricted_config`, at every
    lambda. Otherwise exactly :func:`attnlib.train.train_model`: GloVe embeddings and weights
    seeded with ``seed``, its batches and optimiser (``train_config``: default
    :data:`~attnlib.train.TRANSFORMER_TRAIN` for a transformer, J&W's ``TrainConfig()``
    otherwise; ``epochs`` overrides its epochs), the epoch with the best dev ROC-AUC kept.
    So lambda = 0 gives ``train_model``'s model of the same config, and every lambda starts
    from the same weights. ``.mass`` holds the mean attention mass on the impermissible
    tokens (dev and test), ``.test`` the test accuracy, F1 and ROC-AUC. Uses a GPU when
    present unless ``device`` says otherwise.

    Raises ValueError for a data set without rationales, lambda < 0, NaN or inf, a model
    whose attention cannot be trained (``"uniform"`` with lambda > 0, ``"given"``), a
    training instance with no impermissible token (lambda > 0), or ``restricted=True``
    for a model that is not a transformer.
    """
    lam, seed, train_config = _validate(dataset, config, lam, seed, train_config, epochs)
    if restricted is None:
        restricted = isinstance(config, TransformerConfig)
    elif not isinstance(restricted, bool):
        raise ValueError(f"restricted must be True, False or None, got {restricted!r}")
    if restricted:
        config = restricted_config(config, dataset)
    device = get_device(device)
    key = cache.cache_key(
        kind="deceiver",
        objective=_OBJECTIVE_VERSION,
        lam=lam,
        dataset=dataset_fingerprint(dataset),
        rationales=_rationale_fingerprint(dataset),
        config=config.to_dict(),
        train=asdict(train_config),
        seed=seed,
        device=device.type,
        # the training core, the family's modules and this module's loss
        attnlib=cache.code_version(modules=[__name__], family=config.training_code),
    )
    result = DeceiverModel(
        model=None, dataset=dataset.name, config=config, train_config=train_config, seed=seed, key=key, lam=lam
    )
    return load_or_train(
        result, dataset, lambda model: _fit_deceiver(model, result, dataset, lam, seed, train_config, progress),
        init_seed=seed, device=device, use_cache=use_cache, stored=(*STORED_FIELDS, "mass"), what="deceiver",
    )


def _fit_deceiver(model, result, dataset, lam, seed, train_config, progress):
    """Train ``model`` with the penalised objective (see :func:`train_deceiver`); fill ``result``.

    Returns the kept epoch's state dict."""
    loss_of = label_loss(model, dataset.train.labels, device_of(model))

    def objective(m: nn.Module, batch) -> torch.Tensor:
        out = m(batch)
        loss = loss_of(out.logits, batch.labels)
        if lam == 0:  # exactly fit's own objective
            return loss
        # R_mean, head by head: (B, h, T); a BiLSTM's one row is one head (the same value)
        return loss + impermissible_penalty(out.head_attention, batch.rationale, lam, check=False)

    def select(m: nn.Module, ds: Dataset) -> tuple[float, dict]:
        probs, mass = _outputs(m, ds.dev)
        dev = classification_metrics(ds.dev.labels, probs)
        score = dev["roc_auc"] if not np.isnan(dev["roc_auc"]) else dev["accuracy"]  # train_model's selection
        record = {f"dev_{k}": v for k, v in dev.items() if k != "n"}
        return score, {**record, "dev_impermissible_mass": float(mass.mean())}

    start = time.perf_counter()
    best_state, history, best_epoch = fit(
        model, dataset, train_config=train_config, seed=seed, progress=progress,
        description=f"{result.config.name} λ={lam:g} on {dataset.name}", objective=objective, select=select,
    )
    result.train_seconds = time.perf_counter() - start
    result.model, result.history, result.best_epoch = model, history, best_epoch
    for name in ("dev", "test"):
        split = dataset[name]
        if len(split) == 0:
            setattr(result, name, {})
            continue
        probs, mass = _outputs(model, split)
        setattr(result, name, classification_metrics(split.labels, probs))
        result.mass[name] = float(mass.mean())
    return best_state
