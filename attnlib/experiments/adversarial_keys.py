"""Adversarial keys: how far can one layer's attention move while the predictions hold?

The poster *Is Attention Explanation in Transformers?* (see ``papers.md``) freezes a trained
transformer and trains a small MLP that rewrites one layer's keys. The queries, values and
every weight of the model stay as they are; only the keys, and so the attention rows, change.
If the MLP can move the attention far from the model's own while the accuracy holds, that
layer's attention is one of many that serve the same predictions, and a poor explanation.

The key map (:class:`AdversarialKeyMap`) acts on the layer's keys k (B, T, d_model), all
heads side by side, as the poster's does (Linear(d_model, 256) -> ReLU -> Linear(256, d_model)):

    k_adv = k + MLP(k),

with the MLP's last layer initialised to zero, so that training starts at the model's own
attention exactly. It enters the model through ``TransformerClassifier.forward(key_edits=...)``.
Only the MLP trains, with Adam, on

    L = alpha * BCE(y_hat(k_adv), y) - (1 - alpha) * D,

y the gold label (cross-entropy for more than two classes), averaged over the batch.
alpha = 1 asks only for the right answers; alpha = 0 only for attention far from the model's.

**How the distance is bounded.** The poster's D = ||k - k_adv||_2 is unbounded: minimising
-D pays for blowing the keys up, however little the attention (a softmax, which saturates)
or the output changes. Here D measures the change in the attention itself: per instance, the
mean over the layer's heads and real query rows (padding rows left out) of

    JSD(attention with k_adv, attention with k),

the Jensen-Shannon divergence over the real keys with natural logs (:func:`attnlib.metrics.jsd`),
so 0 <= D <= ln 2: the loss is bounded below, and the distance term is worth at most
(1 - alpha) ln 2, comparable to the BCE of a classifier. Every query row counts, [CLS] or not;
at the last layer only the [CLS] row reaches the output, so the other rows move at no cost
there.

**The start is stationary at alpha = 0.** D is 0 at the start, its minimum, where its
gradient vanishes (as any smooth distance's does); with alpha > 0 the BCE term moves the keys
off the start and D's gradient then takes over. With alpha = 0 alone the gradient is exactly
zero, so such a run starts from a seeded nudge of the last layer (uniform weights of
:data:`STATIONARY_NUDGE` x nn.Linear's scale: perturbed gradient descent), which moves the
attention by a D of about 1e-8 and is then left to Adam.

Deterministic: the MLP's initial weights come from a ``torch.Generator`` seeded with ``seed``
(never torch's global generator), training batches from ``split.batches(shuffle=True)``
seeded per epoch, and training and evaluation run on :data:`attnlib.train.TRAIN_THREADS`
threads (:func:`attnlib.train.training_threads`): the same call gives the same numbers twice on
a CPU. The model runs in eval mode (no dropout) with ``requires_grad`` off for its parameters
during the call (both restored after); its weights never change. Results are cached
(:mod:`attnlib.cache`) under a key of the model's weights, the data, the settings and the
version of attnlib's code.
"""
from __future__ import annotations

import hashlib
import math
import numbers
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from .. import cache, metrics, portable
from .._checks import check_bool, check_positive_int, check_positive_number, check_seed
from ..cpu import warn_if_unpinned
from ..data import Split, stratified_positions
from ..models import device_of, eval_mode
from ..models.protocol import KeyEditModel, layer_shape, require_capability
from ..train import run_concurrently, training_threads

__all__ = [
    "DEFAULT_ALPHAS",
    "STATIONARY_NUDGE",
    "AdversarialKeyMap",
    "AdversarialKeysResult",
    "attention_jsd",
    "adversarial_keys",
    "adversarial_keys_sweep",
]

#: The loss weights alpha of :func:`adversarial_keys_sweep`: from distance only (0) to labels only (1).
DEFAULT_ALPHAS = (0.0, 0.25, 0.5, 0.75, 1.0)

#: Scale of the alpha = 0 run's starting nudge of the last layer, relative to nn.Linear's (module docstring).
STATIONARY_NUDGE = 1e-3

# Bumped whenever the objective or the training changes, so that old cache entries are not reused.
_OBJECTIVE_VERSION = "alpha-bce-minus-(1-alpha)-mean-row-jsd/v1"


# ----------------------------------------------------------------------------- the key map
def _uniform(shape, bound: float, generator: torch.Generator) -> torch.Tensor:
    return (torch.rand(shape, generator=generator, dtype=torch.float32, device="cpu") * 2 - 1) * bound


class AdversarialKeyMap(nn.Module):
    """The poster's key map k -> k + MLP(k), MLP = Linear(d_model, hidden) -> ReLU -> Linear(hidden, d_model).

    Acts on keys (..., d_model), all heads side by side, as ``key_edits`` passes them. The
    hidden layer starts as nn.Linear starts (uniform in +-1/sqrt(d_model)), drawn from a
    ``torch.Generator`` seeded with ``seed`` (never torch's global one); the last layer starts
    at zero, so an untrained map returns its keys exactly.
    """

    def __init__(self, d_model: int, hidden: int = 256, *, seed: int = 0):
        super().__init__()
        d_model = check_positive_int(d_model, "d_model")
        hidden = check_positive_int(hidden, "hidden")
        seed = check_seed(seed)
        # skip_init: nn.Linear's own initialisation would draw from the global generator
        self.hidden = nn.utils.skip_init(nn.Linear, d_model, hidden)
        self.out = nn.utils.skip_init(nn.Linear, hidden, d_model)
        self.generator = torch.Generator().manual_seed(seed)
        bound = 1.0 / math.sqrt(d_model)
        with torch.no_grad():
            self.hidden.weight.copy_(_uniform((hidden, d_model), bound, self.generator))
            self.hidden.bias.copy_(_uniform((hidden,), bound, self.generator))
            self.out.weight.zero_()
            self.out.bias.zero_()

    def nudge(self, scale: float = STATIONARY_NUDGE) -> None:
        """Set the last layer's weights to uniform in +-scale/sqrt(hidden) (the seeded stream goes on)."""
        bound = scale / math.sqrt(self.out.in_features)
        with torch.no_grad():
            self.out.weight.copy_(_uniform(self.out.weight.shape, bound, self.generator))

    def forward(self, keys: torch.Tensor) -> torch.Tensor:
        return keys + self.out(torch.relu(self.hidden(keys)))


# ----------------------------------------------------------------------------- the distance
def _layer_attention(model: KeyEditModel, tokens: torch.Tensor, layer: int, key_map):
    """Attention at ``layer`` with the mapped keys (differentiable in the map) and without, (B, h, T, T) each,
    and the key mask (B, T). The layers below run once, without gradients."""
    with torch.no_grad():
        h, key_mask = model.embed(tokens)
        visible = model.visibility(tokens, key_mask)
        for block in model.layers[:layer]:
            probs, v = block.attend(h, visible)
            h = block.finish(h, probs, v)
        original, _ = model.layers[layer].attend(h, visible)
    adversarial, _ = model.layers[layer].attend(h, visible, key_edit=key_map)
    return adversarial, original, key_mask


def _row_jsd(adversarial: torch.Tensor, original: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
    """D per instance (B,): the mean over heads and real query rows of JSD over the real keys."""
    B, H, T, _ = adversarial.shape
    rows = metrics.jsd(adversarial, original, mask=key_mask[:, None, None, :].expand(B, H, T, T), check=False)
    real = key_mask.to(rows.dtype)  # (B, T) real query rows
    return (rows * real[:, None, :]).sum((1, 2)) / (H * real.sum(-1))


def attention_jsd(model: KeyEditModel, batch, *, layer: int, key_map) -> torch.Tensor:
    """D per instance of ``batch``, (B,): how far ``key_map`` moves the attention at ``layer``.

    The mean over the layer's heads and real query rows of JSD(attention with the keys
    ``key_map(k)``, attention with k), natural logs, over the real keys: in [0, ln 2]. The
    quantity :func:`adversarial_keys` trades against the BCE (see the module docstring).
    Differentiable in ``key_map``'s parameters (the layers below run without gradients).

    Args:
        model: a :class:`~attnlib.models.TransformerClassifier` (run in eval mode here).
        batch: an :class:`attnlib.data.Batch` (or (B, T) token ids) of ``<SOS> ... <EOS>`` rows.
        layer: the layer whose keys are mapped, 0 .. layers - 1.
        key_map: a function of keys (B, T, d_model) -> keys of that shape, e.g. an
            :class:`AdversarialKeyMap` or :attr:`AdversarialKeysResult.key_map`.
    """
    _check_model(model)
    layer = _check_layer(layer, model)
    if not callable(key_map):
        raise ValueError(f"key_map must be a function keys -> keys, got {type(key_map).__name__}")
    tokens = getattr(batch, "tokens", batch)
    if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2 or tokens.dtype != torch.long:
        raise ValueError("batch must be an attnlib.data.Batch or a LongTensor of token ids with shape (B, T)")
    if tokens.shape[0] == 0:
        raise ValueError("batch is empty")
    if isinstance(key_map, torch.nn.Module):
        key_map.to(device_of(model))  # a map built on the CPU follows a model on a GPU (in place, as Module.to)
    with eval_mode(model):
        adversarial, original, key_mask = _layer_attention(model, tokens.to(device_of(model)), layer, key_map)
        return _row_jsd(adversarial, original, key_mask)


# ----------------------------------------------------------------------------- results
@dataclass
class AdversarialKeysResult:
    """One run of :func:`adversarial_keys`: the keys of ``layer`` trained with loss weight ``alpha``.

    accuracy:      test accuracy with the adversarial keys.
    base_accuracy: test accuracy of the model as it is.
    jsd:           mean over the test instances of D at ``layer`` (in [0, ln 2]).
    output_tvd:    mean over the test instances of TVD(output with adversarial keys, output as it is).
    history:       one dict per epoch: the training means of ``loss``, ``bce`` and ``jsd`` (D).
    key_map:       the trained :class:`AdversarialKeyMap`, on the model's device: apply it with
                   ``model(batch, key_edits={result.layer: result.key_map})``.
    """

    layer: int
    alpha: float
    accuracy: float
    base_accuracy: float
    jsd: float
    output_tvd: float
    history: list = field(default_factory=list)
    n_train: int = 0
    n_test: int = 0
    train_seconds: float = 0.0
    from_cache: bool = False
    key_map: AdversarialKeyMap | None = field(default=None, repr=False)

    def summary(self) -> dict:
        """One row for a results table."""
        return {
            "layer": self.layer,
            "alpha": self.alpha,
            "accuracy": self.accuracy,
            "base_accuracy": self.base_accuracy,
            "jsd": self.jsd,
            "output_tvd": self.output_tvd,
            "final_loss": self.history[-1]["loss"] if self.history else float("nan"),
            "n_train": self.n_train,
            "n_test": self.n_test,
            "train_seconds": self.train_seconds,
            "from_cache": self.from_cache,
        }


# ----------------------------------------------------------------------------- checks
def _check_model(model) -> None:
    require_capability(model, "key_edits", "adversarial keys (e.g. attnlib.models.TransformerClassifier)")


def _check_layer(layer, model: KeyEditModel) -> int:
    n = layer_shape(model)[0]
    if isinstance(layer, bool) or not isinstance(layer, numbers.Integral) or not 0 <= layer < n:
        raise ValueError(f"layer must be an int in 0 .. {n - 1} (the model has {n} layers), got {layer!r}")
    return int(layer)


def _check_alpha(alpha) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not 0 <= alpha <= 1:
        raise ValueError(f"alpha must be a number in [0, 1] (the BCE's weight against the distance), got {alpha!r}")
    return float(alpha)


def _check_split(split, name: str, model: KeyEditModel) -> None:
    if not isinstance(split, Split):
        raise ValueError(f"{name} must be an attnlib.data.Split, got {type(split).__name__}")
    if len(split) == 0:
        raise ValueError(f"{name} ({split.name!r}) is empty")
    top = int(np.concatenate(split.ids).max())
    if top >= model.vocab_size:
        raise ValueError(
            f"{name} has token id {top}, outside the model's vocabulary of {model.vocab_size}: "
            "use the splits of the data set the model was trained on"
        )
    labels = split.labels
    if labels.min() < 0 or labels.max() >= model.n_classes:
        raise ValueError(f"{name} has labels outside 0 .. {model.n_classes - 1} (the model's classes)")


def _settings(model, train_split, test_split, layer, alpha, hidden, epochs, batch_size, lr, seed, max_train,
              use_cache, progress) -> dict:
    """Validated arguments of :func:`adversarial_keys`."""
    _check_model(model)
    _check_split(train_split, "train_split", model)
    _check_split(test_split, "test_split", model)
    return {
        "layer": _check_layer(layer, model),
        "alpha": _check_alpha(alpha),
        "hidden": check_positive_int(hidden, "hidden"),
        "epochs": check_positive_int(epochs, "epochs"),
        "batch_size": check_positive_int(batch_size, "batch_size"),
        "lr": check_positive_number(lr, "lr"),
        "seed": check_seed(seed),
        "max_train": None if max_train is None else check_positive_int(max_train, "max_train"),
        "use_cache": check_bool(use_cache, "use_cache"),
        "progress": check_bool(progress, "progress"),
    }


# ----------------------------------------------------------------------------- training
@contextmanager
def _frozen(model: nn.Module) -> Iterator[None]:
    """Eval mode and ``requires_grad`` off for every parameter inside the block; both restored after."""
    params = list(model.parameters())
    flags = [p.requires_grad for p in params]
    try:
        for p in params:
            p.requires_grad_(False)
        with eval_mode(model):
            yield
    finally:
        for p, flag in zip(params, flags):
            p.requires_grad_(flag)


def _label_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """BCE on the one logit of a binary model, cross-entropy otherwise (batch mean)."""
    if logits.shape[-1] == 1:
        return F.binary_cross_entropy_with_logits(logits.squeeze(-1), labels.to(logits.dtype))
    return F.cross_entropy(logits, labels)


def _train(model, split: Split, key_map: AdversarialKeyMap, s: dict) -> list[dict]:
    """Train ``key_map`` in place (the model frozen); the per-epoch history."""
    from tqdm.auto import tqdm

    device = device_of(model)
    layer, alpha = s["layer"], s["alpha"]
    optimizer = portable.adam(key_map.parameters(), lr=s["lr"])
    edits = {layer: key_map}
    history = []
    bar = tqdm(total=s["epochs"] * split.n_batches(s["batch_size"]), desc=f"adversarial keys, layer {layer}, "
               f"α={alpha:g}", unit="batch", disable=not s["progress"], mininterval=1.0)
    for epoch in range(1, s["epochs"] + 1):
        totals, count = np.zeros(3), 0
        for batch in split.batches(s["batch_size"], shuffle=True, seed=s["seed"] * 1000 + epoch):
            batch = batch.to(device)
            adversarial, original, key_mask = _layer_attention(model, batch.tokens, layer, key_map)
            distance = _row_jsd(adversarial, original, key_mask).mean()
            bce = _label_loss(model(batch, key_edits=edits).logits, batch.labels)
            loss = alpha * bce - (1 - alpha) * distance
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            totals += len(batch) * np.array([loss.item(), bce.item(), distance.item()])
            count += len(batch)
            bar.update(1)
        history.append({"epoch": epoch, **dict(zip(("loss", "bce", "jsd"), (totals / count).tolist()))})
        bar.set_postfix(loss=f"{history[-1]['loss']:.3f}", jsd=f"{history[-1]['jsd']:.3f}")
    bar.close()
    return history


@torch.no_grad()
def _evaluate(model, split: Split, layer: int, key_map) -> dict:
    """Accuracy with and without the mapped keys, mean D and mean output TVD over ``split``."""
    device = device_of(model)
    edits = {layer: key_map}
    sums = np.zeros(4)
    for batch in split.batches(256):
        batch = batch.to(device)
        base = model(batch).probs
        adv = model(batch, key_edits=edits).probs
        adversarial, original, key_mask = _layer_attention(model, batch.tokens, layer, key_map)
        distance = _row_jsd(adversarial.double(), original.double(), key_mask)
        labels = batch.labels
        sums += [
            float((adv.argmax(-1) == labels).sum()),
            float((base.argmax(-1) == labels).sum()),
            float(distance.sum()),
            float(metrics.tvd(adv.double(), base.double(), check=False).sum()),
        ]
    return dict(zip(("accuracy", "base_accuracy", "jsd", "output_tvd"), (sums / len(split)).tolist()))


def _state_fingerprint(module: nn.Module) -> str:
    """SHA-256 of a module's parameters and buffers (names, shapes and values)."""
    h = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        h.update(name.encode() + str(tuple(tensor.shape)).encode())
        h.update(tensor.detach().cpu().contiguous().cpu().numpy().tobytes())
    return h.hexdigest()


def _split_fingerprint(split: Split) -> str:
    """SHA-256 of a split's token ids and labels."""
    h = hashlib.sha256()
    h.update(np.fromiter(map(len, split.ids), dtype=np.int64, count=len(split.ids)).tobytes())
    h.update(np.concatenate(split.ids).astype(np.int64).tobytes())
    h.update(split.labels.astype(np.int64).tobytes())
    return h.hexdigest()


_STORED = ("accuracy", "base_accuracy", "jsd", "output_tvd", "history", "n_train", "n_test", "train_seconds")


def _fingerprints(model, train_split: Split, test_split: Split) -> dict:
    """The cache key's hashes of the model's weights and both splits (computed once per sweep)."""
    return {"model": _state_fingerprint(model), "train": _split_fingerprint(train_split),
            "test": _split_fingerprint(test_split)}


def _run(model, train_split: Split, test_split: Split, s: dict, fingerprints: dict | None = None
         ) -> AdversarialKeysResult:
    """One validated run: from the cache, or trained and evaluated (and saved).

    ``fingerprints``: :func:`_fingerprints` of these arguments, when the caller has them.
    """
    device = device_of(model)
    key = None
    if s["use_cache"]:
        if fingerprints is None:
            fingerprints = _fingerprints(model, train_split, test_split)
        key = cache.cache_key(
            kind="adversarial-keys", objective=_OBJECTIVE_VERSION, model=fingerprints["model"],
            config=model.config.to_dict(), train=fingerprints["train"], test=fingerprints["test"],
            settings={k: v for k, v in s.items() if k not in ("use_cache", "progress")}, device=device.type,
            # the training core, the family's modules and this module's loss
            attnlib=cache.code_version(modules=[__name__], family=getattr(model.config, "training_code", None)),
        )
        with cache.building("adversarial-keys", key):  # a second process waits, then loads
            return _load_or_run(model, train_split, test_split, s, key, device)
    return _load_or_run(model, train_split, test_split, s, key, device)


def _load_or_run(model, train_split: Split, test_split: Split, s: dict, key, device) -> AdversarialKeysResult:
    key_map = AdversarialKeyMap(model.config.d_model, s["hidden"], seed=s["seed"])
    entry = cache.load("adversarial-keys", key) if key is not None else None
    if entry is not None:
        try:
            key_map.load_state_dict(entry["state_dict"])
            values = {name: entry[name] for name in _STORED}
        except (KeyError, RuntimeError, TypeError) as err:
            warnings.warn(f"cached adversarial keys {key[:12]} do not fit ({err}); training again",
                          cache.CacheCorruptionWarning, stacklevel=3)
        else:
            return AdversarialKeysResult(layer=s["layer"], alpha=s["alpha"], from_cache=True,
                                         key_map=key_map.to(device).eval(), **values)

    train = train_split
    if s["max_train"] is not None:
        train = train_split.subset(stratified_positions(train_split.labels, s["max_train"],
                                                        np.random.default_rng(s["seed"])))
    if s["alpha"] == 0:  # the start is stationary: nudge it (module docstring)
        key_map.nudge()
    key_map = key_map.to(device)
    if device.type == "cpu":
        warn_if_unpinned("adversarial keys")
    start = time.perf_counter()
    with _frozen(model), training_threads(device):
        key_map.train()
        history = _train(model, train, key_map, s)
        key_map.eval()
        scores = _evaluate(model, test_split, s["layer"], key_map)
    result = AdversarialKeysResult(layer=s["layer"], alpha=s["alpha"], history=history, n_train=len(train),
                                   n_test=len(test_split), train_seconds=time.perf_counter() - start,
                                   key_map=key_map, **scores)
    if key is not None:
        stored = {name: getattr(result, name) for name in _STORED}
        cache.save("adversarial-keys", key, {**stored, "state_dict": {k: v.detach().cpu() for k, v in
                                                                        key_map.state_dict().items()}})
    return result


def adversarial_keys(
    model: KeyEditModel,
    train_split: Split,
    test_split: Split,
    *,
    layer: int,
    alpha: float,
    hidden: int = 256,
    epochs: int = 2,
    batch_size: int = 64,
    lr: float = 1e-3,
    seed: int = 0,
    max_train: int | None = None,
    use_cache: bool = True,
    progress: bool = True,
) -> AdversarialKeysResult:
    """Train the poster's adversarial keys for one layer of a frozen transformer; score them on ``test_split``.

    Minimises L = alpha * BCE(y_hat(k_adv), y) - (1 - alpha) * D over an
    :class:`AdversarialKeyMap` k_adv = k + MLP(k) of ``layer``'s keys, with D the mean over
    heads and real query rows of JSD(attention with k_adv, attention with k) in [0, ln 2]
    (the poster's ||k - k_adv||_2 bounded; see the module docstring). Adam at ``lr`` for
    ``epochs`` passes over ``train_split`` (length-bucketed batches of ``batch_size``,
    shuffled with seed ``seed * 1000 + epoch``); ``max_train``: a seeded stratified subset of at
    most that many training instances (:func:`attnlib.data.stratified_positions`). The last
    epoch's map is kept and scored on every instance of ``test_split``.

    The model is frozen: eval mode and ``requires_grad`` off during the call (both restored
    after); its weights never change. Deterministic on a CPU for a given ``seed``. Cached
    (``use_cache``) under a key of the model's weights, both splits, the settings and the code.

    Returns an :class:`AdversarialKeysResult`: test accuracy with the adversarial keys and
    without, mean D at ``layer``, mean output TVD from the model's own output, the training
    history and the trained key map.

    Raises ``ValueError`` for a model without the ``key_edits`` capability (adversarial keys need
    the model's ``key_edits``: protocol.KeyEditModel), a layer outside the model, alpha outside [0, 1], an empty split
    or one with token ids or labels the model does not know, and bad training settings.
    """
    s = _settings(model, train_split, test_split, layer, alpha, hidden, epochs, batch_size, lr, seed, max_train,
                  use_cache, progress)
    return _run(model, train_split, test_split, s)


def _check_layers(layers, model: KeyEditModel) -> list[int]:
    if layers is None:
        return list(range(layer_shape(model)[0]))
    if isinstance(layers, (str, bytes, numbers.Number)) or not hasattr(layers, "__iter__"):
        raise ValueError(f"layers must be a sequence of layer numbers (or None for all), got {layers!r}")
    values = [_check_layer(v, model) for v in layers]
    if not values:
        raise ValueError("layers is empty: give at least one layer, or None for all")
    if len(set(values)) != len(values):
        raise ValueError(f"layers has duplicates: {values}")
    return values


def _check_alphas(alphas) -> list[float]:
    if isinstance(alphas, (str, bytes, numbers.Number)) or not hasattr(alphas, "__iter__"):
        raise ValueError(f"alphas must be a sequence of numbers in [0, 1], e.g. {DEFAULT_ALPHAS}, got {alphas!r}")
    values = [_check_alpha(v) for v in alphas]
    if not values:
        raise ValueError(f"alphas is empty: give at least one, e.g. {DEFAULT_ALPHAS}")
    if len(set(values)) != len(values):
        raise ValueError(f"alphas has duplicates: {values}")
    return values


def adversarial_keys_sweep(
    model: KeyEditModel,
    train_split: Split,
    test_split: Split,
    *,
    layers=None,
    alphas=DEFAULT_ALPHAS,
    hidden: int = 256,
    epochs: int = 2,
    batch_size: int = 64,
    lr: float = 1e-3,
    seed: int = 0,
    max_train: int | None = None,
    use_cache: bool = True,
    progress: bool = True,
) -> pd.DataFrame:
    """:func:`adversarial_keys` for every (layer, alpha); one row per run.

    ``layers``: the layers to attack (None: all), ``alphas``: the loss weights (default
    :data:`DEFAULT_ALPHAS`); both without duplicates. Every run has the same ``seed`` (the same
    initial map and batches), so the runs differ only in layer and alpha. Every argument is
    checked before the first run. The runs train at once, one per free core, each on one
    thread (:func:`attnlib.train.run_concurrently`): each gives the bits it gives alone. A
    tqdm bar counts the runs.

    Returns a DataFrame, rows layer-major in the order given, with the columns of
    :meth:`AdversarialKeysResult.summary`: layer, alpha, accuracy (adversarial keys),
    base_accuracy (the model as it is), jsd, output_tvd, final_loss, n_train, n_test,
    train_seconds, from_cache.
    """
    s = _settings(model, train_split, test_split, 0, 0.0, hidden, epochs, batch_size, lr, seed, max_train,
                  use_cache, progress)
    runs = [(layer, alpha) for layer in _check_layers(layers, model) for alpha in _check_alphas(alphas)]
    fingerprints = _fingerprints(model, train_split, test_split) if s["use_cache"] else None
    jobs = [partial(_run, model, train_split, test_split, {**s, "layer": layer, "alpha": alpha, "progress": False},
                    fingerprints) for layer, alpha in runs]
    with _frozen(model):  # once around every run: runs at once must not restore each other's flags
        results = run_concurrently(jobs, progress=s["progress"], description="adversarial keys", unit="run",
                                   labels=[f"layer {layer}, α={alpha:g}" for layer, alpha in runs])
    rows = [result.summary() for result in results]
    return pd.DataFrame(rows)
