"""Adversarial training: a model that keeps the base's predictions but attends elsewhere.

Wiegreffe & Pinter 2019, *Attention is not not Explanation* (Sec. 4): Jain & Wallace's
adversary (:func:`attnlib.counterfactual.adversarial_attention`) edits the attention of
ONE trained model per instance, with its hidden states fixed. W&P ask for more: a whole
new model M_a, trained end to end, whose attention is far from a frozen base model M_b's
on every instance while its output stays the same. If such a model is easy to train,
the base's attention is one of many that explain the same predictions equally well.

M_a has the base's architecture (same :class:`~attnlib.models.ModelConfig`) and starts
like :func:`attnlib.train.train_model` starts a model (GloVe embeddings, seeded). It
never sees the labels; its per-instance loss is

    L(M_a, M_b) = TVD(y_a, y_b) - lambda * KL(alpha_a || alpha_b),

    TVD(y_a, y_b)         = 1/2 sum_c |y_a,c - y_b,c|,
    KL(alpha_a || alpha_b) = sum_t alpha_a,t (log alpha_a,t - log alpha_b,t),

with t over the real tokens only (not <SOS>, <EOS>, padding), averaged over the batch.
lambda >= 0 trades output agreement against attention divergence: lambda = 0 asks only
for the same predictions (attention unconstrained), a large lambda for different
attention at the cost of the predictions. W&P sweep lambda over about 1e-4 ... 1
(:data:`DEFAULT_LAMBDAS`) and plot, per adversary, mean JSD(alpha_a, alpha_b) against
mean TVD(y_a, y_b) on the test split (:func:`lambda_sweep`).

The adversaries W&P *report* sit in a narrow part of that sweep: their Table 4 picks
lambda = 2e-4 ... 8e-4 and their footnote 8 names 1e-3 for Table 3's adversary, in their
loss's scale, which is 4e-4 ... 2e-3 here (point 4 below; :func:`wp_lambda_range`).
:func:`wp_pick` applies their Table 4 rule (the smallest mean output TVD among the
adversaries whose mean attention JSD is above 0.4) within that range, so that the adversary
set beside theirs was trained with a lambda like theirs.

How this relates to the authors' code (``sarahwie/attention``, ``model/Binary_Classification.py``; our
reading of it, to verify against their repository):

1. **The KL direction is written out.** They computed the KL term as
   ``nn.KLDivLoss()(alpha_b.log(), alpha_a)``. Their issue #6 reported the arguments as
   swapped against PyTorch's (input, target) convention, and the authors agreed it was a
   bug. By PyTorch's definition, KLDivLoss(input, target) = sum target * (log target -
   input), so that call evaluates sum_t alpha_a,t (log alpha_a,t - log alpha_b,t) =
   KL(alpha_a || alpha_b), the paper's direction; the order the issue proposes would
   give KL(alpha_b || alpha_a). Here the paper's KL(alpha_a || alpha_b) is written out
   term by term, so its direction does not hang on a library's argument convention, and
   a test checks the direction against both the formula and the authors' call.
2. **No log(0).** They took ``alpha_b.log()`` over the padded batch: -inf at <SOS>, <EOS>
   and padding, and 0 * (-inf) = NaN in current torch. Here masked positions are
   replaced by 1 (log 1 = 0) *before* any log and their terms are zeroed, so neither the
   loss nor its gradient sees NaN or inf.
3. **alpha_b = 0 at a real token** (softmax underflow in float32) is guarded by a tiny
   clamp, log(max(alpha, 1e-10)) (:data:`attnlib.metrics.EPS`), so each token's term is
   at most alpha_a,t * ln(1e10), about 23 nats: the adversary cannot earn an infinite
   reward by moving mass onto a word the base ignores entirely. The same clamp on
   alpha_a keeps the gradient finite where alpha_a,t = 0 (its term is exactly 0 there).
4. **Scale.** Their TVD term was 1/2 |p_a - p_b| on the positive-class probability
   (half the TVD of the two output distributions), both terms were summed over the
   batch, and the batch loss was multiplied by the batch's total label ``pos_weight``.
   Here L is the mean over instances of the paper's equation, with no label weights (the
   adversary has no use for labels). Up to an overall scale, which Adam largely ignores,
   their lambda = l corresponds to lambda = 2 l here.

Implementation: the frozen base runs once, in eval mode and without gradients, over the
train and dev splits; its outputs y_b and attention alpha_b are looked up per batch by
instance index, so training costs one forward and backward pass of M_a per batch and
the base's parameters are never touched. Training is :func:`attnlib.train.fit` with J&W's
optimiser and batches; the kept epoch is the one with the lowest mean dev loss L (the
history also records dev mean TVD and JSD). Results are cached like
:func:`~attnlib.train.train_model`'s, under a key of the base model, lambda, the training
settings, the seed, the data, the device and the attnlib version.
"""
from __future__ import annotations

import functools
import hashlib
import math
import numbers
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import pandas as pd
import torch

from .. import cache, metrics, published
from .._checks import check_distribution, check_positive_number, check_seed
from ..data import Dataset, Split
from ..models import AttentionClassifier, device_of, eval_mode
from ..models.protocol import has_capability
from ..train import (
    STORED_FIELDS,
    Comparison,
    TrainConfig,
    TrainedModel,
    compare_models,
    dataset_fingerprint,
    evaluate,
    fit,
    load_or_train,
    run_concurrently,
    training_cost,
    train_model,
)

__all__ = [
    "DEFAULT_LAMBDAS",
    "ADVERSARY_SEED_OFFSET",
    "AdversaryModel",
    "LambdaSweep",
    "adversarial_loss",
    "attention_kl",
    "train_adversary",
    "lambda_sweep",
    "wp_lambdas",
    "wp_lambda_range",
    "wp_pick",
    "table4_pick",
    "sweep_lambdas",
]

#: W&P's sweep of the attention weight lambda, about 1e-4 ... 1 (lambda = 0 is allowed too), with
#: the two ends of the range where their reported adversaries sit (4e-4 and 2e-3 here,
#: :func:`wp_lambda_range`).
DEFAULT_LAMBDAS = (1e-4, 4e-4, 1e-3, 2e-3, 1e-2, 1e-1, 1.0)

#: Added to ``seed`` to seed the adversary's initial weights, unknown-word vectors and batch
#: order, so that an adversary never starts from its base's initial weights (nor from a
#: seed-variance model's): :func:`~attnlib.train.train_model` with seed s and
#: :func:`train_adversary` with seed s start from different models.
ADVERSARY_SEED_OFFSET = 1_000_000

# Bumped whenever the objective or the selection changes, so old cache entries are not reused.
_OBJECTIVE_VERSION = "tvd-minus-lambda-kl(a||b)/mean/v1"


# ----------------------------------------------------------------------------- W&P's own lambdas
def wp_lambdas() -> dict[str, float]:
    """The lambda of every adversary W&P report, in *their* loss's scale: their Table 4's pick per
    data set (SST 5.25e-4, IMDb 8e-4, Diabetes 2e-4, Anemia 5e-4) and footnote 8's adversary
    behind Table 3 (1e-3). Multiply by :data:`attnlib.published.WP_LAMBDA_SCALE` for this
    module's scale."""
    out = {f"Table 4, {name}": float(row["lambda"].value) for name, row in published.WP_TABLE4.items()}
    out["footnote 8 (Table 3)"] = float(published.DIAGNOSTIC_ADVERSARY_LAMBDA)
    return out


def wp_lambda_range(*, scale: float = published.WP_LAMBDA_SCALE) -> tuple[float, float]:
    """(smallest, largest) lambda of W&P's reported adversaries (:func:`wp_lambdas`), in this
    module's loss scale (their lambda = l is ``scale`` x l here): (4e-4, 2e-3)."""
    values = list(wp_lambdas().values())
    return min(values) * scale, max(values) * scale


def sweep_lambdas(frame):
    """A sweep frame's lambdas, aligned with its rows: its ``lambda`` column, or its index."""
    return frame["lambda"] if "lambda" in frame.columns else pd.Series(frame.index, index=frame.index)


def table4_pick(frame, *, threshold: float = published.JSD_DIFFERENT_WP):
    """W&P's Table 4 rule: the lambda of the adversary with the smallest mean output TVD among
    those whose mean attention JSD from the base is above ``threshold`` (0.4), or None when no
    adversary reaches it.

    ``frame``: :attr:`LambdaSweep.frame` (one row per lambda, with
    ``mean_jsd`` and ``mean_tvd``; indexed by lambda or with a ``lambda`` column). Ties in TVD go
    to the smaller lambda. This is how W&P chose the adversary they report per data set, and so
    the adversary whose attention is the diagnostic's "adversary" guide (an attention that is
    not different from the base's would test nothing).
    """
    if not isinstance(frame, pd.DataFrame) or not {"mean_jsd", "mean_tvd"} <= set(frame.columns):
        raise ValueError("frame must be a lambda sweep's frame, with mean_jsd and mean_tvd columns")
    lams = sweep_lambdas(frame)
    candidates = frame[frame["mean_jsd"].astype(float) > threshold]
    if candidates.empty:
        return None
    order = sorted(candidates.index, key=lambda i: (float(candidates.at[i, "mean_tvd"]), float(lams[i])))
    return float(lams[order[0]])


def wp_pick(frame, *, within: tuple | None = None, threshold: float = published.JSD_DIFFERENT_WP):
    """W&P's Table 4 rule within the range of their own adversaries' lambda: the lambda of the
    adversary with the smallest mean output TVD among those of the sweep whose lambda lies in
    ``within`` (default :func:`wp_lambda_range`, ends included) and whose mean attention JSD is
    above ``threshold`` (0.4, W&P's Table 4); None when none qualifies.

    ``frame``: :attr:`LambdaSweep.frame` (a ``lambda`` column, or indexed by lambda). Without the
    range the rule can pick an adversary trained with a lambda a thousand times theirs, which
    is then a different object from the one their Table 4 reports."""
    if not isinstance(frame, pd.DataFrame) or not {"mean_jsd", "mean_tvd"} <= set(frame.columns):
        raise ValueError("frame must be a lambda sweep's frame, with mean_jsd and mean_tvd columns")
    low, high = wp_lambda_range() if within is None else (float(within[0]), float(within[1]))
    if not low <= high:
        raise ValueError(f"within must be (low, high) with low <= high, got {within!r}")
    lams = sweep_lambdas(frame).astype(float)
    inside = frame[(lams >= low * (1 - 1e-9)) & (lams <= high * (1 + 1e-9))]
    return table4_pick(inside, threshold=threshold) if len(inside) else None


# ----------------------------------------------------------------------------- the loss
def _check_lambda(lam, name: str = "lam") -> float:
    """lambda: a finite real number >= 0."""
    return check_positive_number(lam, f"{name} (the attention weight lambda)", allow_zero=True)


def _loss_terms(probs_a, probs_b, alpha_a, alpha_b, mask, lam: float):
    """Per-instance (L, TVD, KL), each (B,); no checks. Masked positions never reach a log."""
    output_tvd = 0.5 * (probs_a - probs_b).abs().sum(-1)  # (B,)
    ones = torch.ones((), dtype=alpha_a.dtype, device=alpha_a.device)
    # Off the real tokens both logs read log 1 = 0 (the value is replaced before the log, so
    # no -inf is ever formed, not even in the backward pass); on them, the clamp guards zeros.
    log_a = torch.log(torch.where(mask, alpha_a, ones).clamp_min(metrics.EPS))  # (B, T)
    log_b = torch.log(torch.where(mask, alpha_b, ones).clamp_min(metrics.EPS))  # (B, T)
    terms = torch.where(mask, alpha_a * (log_a - log_b), torch.zeros_like(log_a))  # (B, T)
    attention_kl = terms.sum(-1)  # (B,)
    return output_tvd - lam * attention_kl, output_tvd, attention_kl


def attention_kl(alpha_a, alpha_b, mask) -> torch.Tensor:
    """KL(alpha_a || alpha_b) per instance over the real tokens (``mask``), the term W&P's loss weighs by lambda.

    Natural logs; logs of values clamped at 1e-10 and masked positions excluded before the
    log, so the value and its gradient are finite even with zeros at real tokens.
    ``alpha_a``, ``alpha_b``: (B, T) distributions over the real tokens; ``mask`` (B, T) bool.
    Returns (B,).
    """
    probs = torch.full((len(alpha_a), 2), 0.5, dtype=alpha_a.dtype, device=alpha_a.device)
    _check_loss_inputs(probs, probs, alpha_a, alpha_b, mask)
    return _loss_terms(probs, probs, alpha_a, alpha_b, mask, 0.0)[2]


def adversarial_loss(probs_a, probs_b, alpha_a, alpha_b, mask, lam: float, *, check: bool = True) -> torch.Tensor:
    """W&P's per-instance adversarial loss, TVD(y_a, y_b) - lambda * KL(alpha_a || alpha_b).

    KL(alpha_a || alpha_b) = sum_t alpha_a,t (log alpha_a,t - log alpha_b,t) over the real
    tokens (``mask``), natural logs; logs of values clamped at 1e-10, and masked positions
    are excluded before the log, so the loss and its gradient are finite for any
    distributions, including zeros at real tokens (Wiegreffe & Pinter 2019, Sec. 4; see
    the module docstring for how this differs from the authors' code).

    Args:
        probs_a, probs_b: (B, C) output distributions of the adversary and the base.
        alpha_a, alpha_b: (B, T) attention distributions over the real tokens.
        mask: (B, T) bool, True on the real tokens.
        lam: lambda >= 0, finite.
        check: validate shapes and distributions (``False`` inside training loops).

    Returns the loss per instance, shape (B,); differentiable in every floating input.
    """
    lam = _check_lambda(lam)
    if check:
        _check_loss_inputs(probs_a, probs_b, alpha_a, alpha_b, mask)
    return _loss_terms(probs_a, probs_b, alpha_a, alpha_b, mask, lam)[0]


def _check_loss_inputs(probs_a, probs_b, alpha_a, alpha_b, mask) -> None:
    tensors = {"probs_a": probs_a, "probs_b": probs_b, "alpha_a": alpha_a, "alpha_b": alpha_b}
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor) or not t.is_floating_point() or t.ndim != 2:
            raise ValueError(f"{name} must be a 2-d floating-point torch tensor")
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise ValueError("mask must be a boolean torch tensor (True on the real tokens)")
    if probs_a.shape != probs_b.shape:
        raise ValueError(f"probs_a and probs_b must have the same shape, got {tuple(probs_a.shape)} and {tuple(probs_b.shape)}")
    if not (alpha_a.shape == alpha_b.shape == mask.shape):
        raise ValueError(
            f"alpha_a, alpha_b and mask must have the same shape, got {tuple(alpha_a.shape)}, "
            f"{tuple(alpha_b.shape)} and {tuple(mask.shape)}"
        )
    if alpha_a.shape[0] != probs_a.shape[0]:
        raise ValueError(f"{probs_a.shape[0]} output rows but {alpha_a.shape[0]} attention rows")
    if not bool(mask.any(-1).all()):
        raise ValueError("every row of mask needs at least one real token")
    for name, t in tensors.items():
        m = mask if name.startswith("alpha") else None
        check_distribution(t.detach().masked_fill(~mask, 0.0) if m is not None else t.detach(), name, m)


# ----------------------------------------------------------------------------- results
@dataclass
class AdversaryModel(TrainedModel):
    """A :class:`~attnlib.train.TrainedModel` trained adversarially against ``base``.

    ``test`` holds the adversary's own accuracy, F1 and ROC-AUC against the gold labels;
    ``agreement`` its distance from the base on the test split: mean JSD(alpha_a, alpha_b)
    (``jsd``), mean TVD(y_a, y_b) (``tvd``), the fraction of instances with the same
    predicted class (``same_decision``) and ``n``. ``history`` has, per epoch, the mean
    train loss and the dev loss, TVD and JSD; ``best_epoch`` has the lowest dev loss.
    """

    lam: float = 0.0
    base_key: str = ""
    agreement: dict = field(default_factory=dict)
    base: TrainedModel | None = field(default=None, repr=False)

    def compare(self, split: Split) -> Comparison:
        """Per-instance JSD(alpha_a, alpha_b), TVD(y_a, y_b), ... against the base on ``split``."""
        if self.base is None:
            raise ValueError("this adversary does not hold its base model; use train.compare_models(adv.model, base.model, split)")
        return compare_models(self.model, self.base.model, split)

    def summary(self) -> dict:
        """One row for a results table."""
        return {
            "dataset": self.dataset,
            "model": self.config.name,
            "lambda": self.lam,
            "seed": self.seed,
            "best epoch": self.best_epoch,
            "mean JSD": self.agreement.get("jsd", float("nan")),
            "mean TVD": self.agreement.get("tvd", float("nan")),
            **{f"test {k}": v for k, v in self.test.items() if k != "n"},
        }


@dataclass
class LambdaSweep:
    """Adversaries trained against one base for several lambdas (:func:`lambda_sweep`).

    frame:  one row per lambda, in the order given: lambda, mean_jsd, mean_tvd,
            same_decision (test split, against the base), accuracy, f1, roc_auc (the
            adversary's own, test split), best_epoch, train_seconds, from_cache.
    models: lambda -> :class:`AdversaryModel`.
    also_trained: the models of ``lambda_sweep(also_train=...)``, in order.
    """

    frame: pd.DataFrame
    models: dict
    base: TrainedModel = field(repr=False)
    dataset: Dataset = field(repr=False)
    also_trained: tuple = field(default=(), repr=False)

    def __getitem__(self, lam) -> AdversaryModel:
        return self.models[self._key(lam)]

    def _key(self, lam) -> float:
        lam = _check_lambda(lam)
        for key in self.models:
            if math.isclose(key, lam, rel_tol=1e-9, abs_tol=0.0):
                return key
        raise ValueError(f"no adversary for lambda = {lam:g}; the sweep has {', '.join(f'{k:g}' for k in self.models)}")

    def comparison(self, lam, split: Split | str = "test") -> Comparison:
        """Per-instance :class:`~attnlib.train.Comparison` of the adversary for ``lam`` with the base.

        ``split`` is a :class:`~attnlib.data.Split` or the name of a split of the sweep's
        data set (``"train"``, ``"dev"`` or ``"test"``).
        """
        model = self[lam]
        split = self.dataset[split] if isinstance(split, str) else split
        return compare_models(model.model, self.base.model, split)


# ----------------------------------------------------------------------------- training
def _model_fingerprint(model: torch.nn.Module) -> str:
    """SHA-256 of a model's parameters and buffers (names and values)."""
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(str(tuple(tensor.shape)).encode())
        h.update(tensor.detach().cpu().contiguous().cpu().numpy().tobytes())
    return h.hexdigest()


@torch.no_grad()
def _base_outputs(model: AttentionClassifier, split: Split, device, batch_size: int = 256):
    """The frozen base's y_b (N, C) and alpha_b (N, T_max), indexed by instance and token position."""
    n, t_max = len(split), int(split.lengths().max()) + 2
    probs = torch.zeros(n, model.config.n_classes, device=device)
    alpha = torch.zeros(n, t_max, device=device)
    with eval_mode(model):  # the base runs where it lives; its outputs go where the adversary trains
        for batch in split.batches(batch_size):
            out = model(batch.to(device_of(model)))
            index = batch.index.to(device)
            probs[index] = out.probs.float().to(device)
            alpha[index, : out.attention.shape[1]] = out.attention.float().to(device)
    return probs, alpha


def _validate(dataset, base, lam, seed, train_config, epochs):
    if not isinstance(dataset, Dataset):
        raise ValueError(f"dataset must be an attnlib.data.Dataset (see attnlib.data.load_dataset), got {type(dataset).__name__}")
    if not isinstance(base, TrainedModel) or not has_capability(base.model, "single_attention"):
        raise ValueError(f"base must be a TrainedModel from attnlib.train.train_model, got {type(base).__name__}")
    if base.config.attention not in ("tanh", "dot"):
        raise ValueError(
            f"the base model's attention is {base.config.attention!r}: adversarial training needs a learned "
            "attention ('tanh' or 'dot') to move away from"
        )
    if base.model.vocab_size != len(dataset.vocab) or base.dataset != dataset.name:
        raise ValueError(
            f"base was trained on {base.dataset!r} with {base.model.vocab_size} vocabulary entries, but the dataset "
            f"is {dataset.name!r} with {len(dataset.vocab)}: train the base on this dataset"
        )
    if len(dataset.train) == 0 or len(dataset.dev) == 0:
        raise ValueError("the dataset needs non-empty train and dev splits")
    lam = _check_lambda(lam)
    seed = check_seed(seed)
    if train_config is not None and not isinstance(train_config, TrainConfig):
        raise ValueError(f"train_config must be an attnlib.train.TrainConfig, got {type(train_config).__name__}")
    train_config = train_config or TrainConfig()
    if epochs is not None:
        train_config = TrainConfig(**{**asdict(train_config), "epochs": epochs})
    return lam, int(seed), train_config


def train_adversary(
    dataset: Dataset,
    base: TrainedModel,
    lam: float,
    *,
    seed: int = 0,
    train_config: TrainConfig | None = None,
    epochs: int | None = None,
    use_cache: bool = True,
    progress: bool = True,
) -> AdversaryModel:
    """Train (or load from the cache) W&P's adversary M_a against the frozen ``base`` M_b.

    Minimises the batch mean of L = TVD(y_a, y_b) - lambda * KL(alpha_a || alpha_b)
    (:func:`adversarial_loss`) with J&W's optimiser and batches (``train_config``,
    ``epochs`` overrides its epochs); keeps the epoch with the lowest mean dev L.
    M_a has the base's :class:`~attnlib.models.ModelConfig` and is initialised as
    :func:`~attnlib.train.train_model` initialises a model (GloVe embeddings, seeded
    weights and batch order), seeded with ``seed + ADVERSARY_SEED_OFFSET``: a fresh
    start, never the base's own initial weights (which would leave a lambda = 0
    adversary's attention close to the base's for no reason but the shared start).
    The same ``seed`` gives the same adversary twice on a CPU. The base is frozen: it runs
    once in eval mode without gradients, and its parameters are never changed.
    Reports on the test split the adversary's own accuracy, F1 and ROC-AUC (``.test``)
    and its mean JSD(alpha_a, alpha_b) and TVD(y_a, y_b) from the base (``.agreement``).
    Wiegreffe & Pinter 2019, Sec. 4.

    Raises ``ValueError`` for lambda < 0, NaN or inf, a base trained on another data
    set, or a base without learned attention.
    """
    lam, seed, train_config = _validate(dataset, base, lam, seed, train_config, epochs)
    device = device_of(base.model)
    config = base.config
    base_state = _model_fingerprint(base.model)
    key = cache.cache_key(
        kind="adversary",
        objective=_OBJECTIVE_VERSION,
        base=base.key,
        base_state=base_state,
        lam=lam,
        dataset=dataset_fingerprint(dataset),
        config=config.to_dict(),
        train=asdict(train_config),
        seed=seed,
        init_seed=seed + ADVERSARY_SEED_OFFSET,
        device=device.type,
        # the training core, the family's modules and this module's loss
        attnlib=cache.code_version(modules=[__name__], family=config.training_code),
    )
    result = AdversaryModel(
        model=None, dataset=dataset.name, config=config, train_config=train_config, seed=seed, key=key,
        lam=lam, base_key=base.key, base=base,
    )
    init_seed = seed + ADVERSARY_SEED_OFFSET
    return load_or_train(
        result, dataset, lambda model: _fit_adversary(model, result, dataset, base, lam, init_seed, train_config, progress),
        init_seed=init_seed, device=device, use_cache=use_cache, stored=(*STORED_FIELDS, "agreement"), what="adversary",
    )


def _fit_adversary(model, result, dataset, base, lam, init_seed, train_config, progress):
    """Train the adversary ``model`` against ``base`` (see :func:`train_adversary`); fill ``result``.

    Returns the kept epoch's state dict."""
    device = device_of(model)
    train_probs, train_alpha = _base_outputs(base.model, dataset.train, device)  # (N, C), (N, T_max)
    dev_probs, dev_alpha = _base_outputs(base.model, dataset.dev, device)

    def objective(m: AttentionClassifier, batch) -> torch.Tensor:
        out = m(batch)
        T = out.attention.shape[1]
        loss, _, _ = _loss_terms(
            out.probs, train_probs[batch.index], out.attention, train_alpha[batch.index, :T], out.encoded.mask, lam
        )
        return loss.mean()

    def select(m: AttentionClassifier, _dataset: Dataset) -> tuple[float, dict]:
        n = len(dataset.dev)
        total = {"loss": 0.0, "tvd": 0.0, "jsd": 0.0}
        with eval_mode(m):
            for batch in dataset.dev.batches(256):
                batch = batch.to(device)
                out = m(batch)
                T, mask = out.attention.shape[1], out.encoded.mask
                alpha_b = dev_alpha[batch.index, :T]
                loss, tvd, _ = _loss_terms(out.probs, dev_probs[batch.index], out.attention, alpha_b, mask, lam)
                jsd = metrics.jsd(out.attention.double(), alpha_b.double(), mask=mask, check=False)
                total["loss"] += loss.sum().item()
                total["tvd"] += tvd.sum().item()
                total["jsd"] += jsd.sum().item()
        record = {f"dev_{k}": v / n for k, v in total.items()}
        return -record["dev_loss"], record

    start = time.perf_counter()
    best_state, history, best_epoch = fit(
        model, dataset, train_config=train_config, seed=init_seed, progress=progress,
        description=f"adversary λ={lam:g} on {dataset.name}", objective=objective, select=select,
    )
    result.train_seconds = time.perf_counter() - start
    result.model, result.history, result.best_epoch = model, history, best_epoch
    result.dev, result.test = evaluate(model, dataset.dev), evaluate(model, dataset.test)
    comparison = compare_models(model, base.model, dataset.test)
    result.agreement = {
        "jsd": float(comparison.attention_jsd.mean()),
        "tvd": float(comparison.output_tvd.mean()),
        "same_decision": float(comparison.same_decision.mean()),
        "n": int(len(comparison.output_tvd)),
    }
    return best_state


def _check_lambdas(lambdas) -> list[float]:
    if isinstance(lambdas, (str, bytes)) or isinstance(lambdas, numbers.Number) or not hasattr(lambdas, "__iter__"):
        raise ValueError(f"lambdas must be a sequence of numbers, e.g. {DEFAULT_LAMBDAS}, got {lambdas!r}")
    values = [_check_lambda(v, "each lambda") for v in lambdas]
    if not values:
        raise ValueError("lambdas is empty: give at least one lambda, e.g. attnlib.adversarial_training.DEFAULT_LAMBDAS")
    seen = set()
    for v in values:
        if v in seen:
            raise ValueError(f"lambda = {v:g} appears twice in lambdas")
        seen.add(v)
    return values


def lambda_sweep(
    dataset: Dataset,
    base: TrainedModel,
    lambdas=DEFAULT_LAMBDAS,
    *,
    seed: int = 0,
    train_config: TrainConfig | None = None,
    epochs: int | None = None,
    use_cache: bool = True,
    progress: bool = True,
    also_train: Sequence[Mapping] = (),
) -> LambdaSweep:
    """One adversary per lambda against ``base`` (:func:`train_adversary`), tabulated.

    The frame has one row per lambda: mean JSD(alpha_a, alpha_b) and mean TVD(y_a, y_b)
    on the test split (W&P's x and y axes), the fraction of same decisions, the
    adversary's own accuracy, F1 and ROC-AUC, the kept epoch and the training time.
    Wiegreffe & Pinter 2019, Sec. 4. ``lambdas`` must be non-empty, finite, >= 0 and
    without duplicates.

    ``also_train``: keyword arguments of :func:`attnlib.train.train_model` (each with its
    ``dataset``) of other models the caller needs, e.g. retrained seeds of the base, or small
    models to fill the cores. They train in the same pool as the adversaries, every job
    longest first (:func:`attnlib.train.training_cost`; an adversary costs what its base's
    encoder costs for ``epochs``), so that no core idles while the last adversary trains;
    each is exactly the model ``train_model(**spec)`` gives (and lands in the cache like
    it). ``sweep.also_trained`` holds them in the order given.
    """
    values = _check_lambdas(lambdas)
    _validate(dataset, base, values[0], seed, train_config, epochs)  # fail before the first training run
    if isinstance(also_train, (str, bytes, Mapping)) or not isinstance(also_train, Sequence):
        raise ValueError(f"also_train must be a list of train_model keyword arguments, got {type(also_train).__name__}")
    for spec in also_train:
        if not isinstance(spec, Mapping) or "dataset" not in spec:
            raise ValueError(f"each also_train spec must be a dict of train_model keyword arguments with a "
                             f"'dataset', got {spec!r:.80}")
    others = [functools.partial(train_model, **{"progress": progress, **spec}) for spec in also_train]
    jobs = [
        functools.partial(train_adversary, dataset, base, lam, seed=seed, train_config=train_config, epochs=epochs,
                          use_cache=use_cache, progress=progress)
        for lam in values
    ]
    description = f"{len(jobs)} adversaries" + (f" and {len(others)} more models" if others else "")
    adversary_cost = training_cost(dataset, encoder=base.model.config.encoder, epochs=epochs,
                                   train_config=train_config)
    costs = [training_cost(**spec) for spec in also_train] + [adversary_cost] * len(jobs)
    results = run_concurrently(others + jobs, progress=progress, description=description, costs=costs)
    also_trained, adversaries = tuple(results[: len(others)]), results[len(others):]
    models, rows = {}, []
    for lam, adv in zip(values, adversaries):
        models[lam] = adv
        rows.append(
            {
                "lambda": lam,
                "mean_jsd": adv.agreement["jsd"],
                "mean_tvd": adv.agreement["tvd"],
                "same_decision": adv.agreement["same_decision"],
                "accuracy": adv.test["accuracy"],
                "f1": adv.test["f1"],
                "roc_auc": adv.test["roc_auc"],
                "best_epoch": adv.best_epoch,
                "train_seconds": adv.train_seconds,
                "from_cache": adv.from_cache,
            }
        )
    return LambdaSweep(frame=pd.DataFrame(rows), models=models, base=base, dataset=dataset,
                       also_trained=also_trained)
