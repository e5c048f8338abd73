"""Training and evaluation with Jain & Wallace's recipe, and a model cache.

Recipe (J&W 2019, Sec. 3 and their code): Adam with amsgrad, lr 1e-3, weight decay
1e-5 on every parameter except the attention layer's; binary cross-entropy with
``pos_weight = N / N_pos - 1``; batches of 32 sorted by length, batch order shuffled
each epoch; 8 epochs; keep the epoch with the best dev ROC-AUC.

The book's transformer (:class:`attnlib.models.TransformerClassifier`) trains with the same
loop, selection and cache, and its own optimisation settings, :data:`TRANSFORMER_TRAIN`
(a smaller learning rate with linear warm-up and decay: at J&W's 1e-3 a probe of this
model collapsed to chance by its third epoch).

:func:`train_model` caches the kept model under a key of the dataset's content, the
model and training configuration, the seed, the device type and the version of
attnlib's training code (:func:`attnlib.cache.code_version`), so a chapter run twice
trains once, and a change to the code retrains.
"""
from __future__ import annotations

import copy
import hashlib
import random
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from torch import nn

from . import cache, get_device, seed_everything
from . import cpu, portable
from .cpu import warn_if_unpinned
from ._checks import check_positive_int, check_positive_number, check_seed
from .data import Dataset, Split, glove_embeddings
from .models import AttentionClassifier, ModelConfig, TransformerConfig, device_of, eval_mode

__all__ = [
    "TrainConfig",
    "TRANSFORMER_TRAIN",
    "lr_schedule",
    "TrainedModel",
    "train_model",
    "training_cost",
    "fit",
    "label_loss",
    "evaluate",
    "predict_proba",
    "predict",
    "Predictions",
    "Comparison",
    "compare_models",
    "classification_metrics",
    "dataset_fingerprint",
    "make_optimizer",
    "load_or_train",
    "STORED_FIELDS",
]


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings (the defaults are J&W's).

    warmup: the fraction of all steps over which the learning rate rises linearly from 0;
    after it the rate falls linearly to 0 at the last step (BERT's schedule). 0 (J&W): a
    constant rate.
    """

    epochs: int = 8
    batch_size: int = 32
    lr: float = 1e-3
    weight_decay: float = 1e-5
    amsgrad: bool = True
    warmup: float = 0.0

    def __post_init__(self):
        check_positive_int(self.epochs, "epochs")
        check_positive_int(self.batch_size, "batch_size")
        check_positive_number(self.lr, "lr")
        check_positive_number(self.weight_decay, "weight_decay", allow_zero=True)
        check_positive_number(self.warmup, "warmup", allow_zero=True)
        if self.warmup >= 1:
            raise ValueError(f"warmup is a fraction of the training steps, below 1; got {self.warmup}")


#: The book's transformer's settings: Adam at 3e-4 with a 10% linear warm-up and linear decay.
TRANSFORMER_TRAIN = TrainConfig(epochs=6, batch_size=32, lr=3e-4, weight_decay=1e-5, amsgrad=False, warmup=0.1)


@dataclass
class TrainedModel:
    """A trained model with its provenance and scores."""

    model: nn.Module  # an AttentionClassifier or a TransformerClassifier
    dataset: str
    config: ModelConfig | TransformerConfig
    train_config: TrainConfig
    seed: int
    history: list = field(default_factory=list)  # one dict per epoch
    best_epoch: int = 0
    dev: dict = field(default_factory=dict)  # accuracy, f1, roc_auc, n
    test: dict = field(default_factory=dict)
    from_cache: bool = False
    train_seconds: float = 0.0
    key: str = ""

    def summary(self) -> dict:
        """One row for a results table."""
        return {
            "dataset": self.dataset,
            "model": self.config.name,
            "seed": self.seed,
            "best epoch": self.best_epoch,
            **{f"test {k}": v for k, v in self.test.items() if k != "n"},
        }


def dataset_fingerprint(dataset: Dataset) -> str:
    """SHA-256 of a dataset's content: its name, vocabulary, token ids and labels."""
    h = hashlib.sha256()
    h.update(dataset.name.encode())
    h.update("\x00".join(dataset.vocab.itos).encode())
    for split in (dataset.train, dataset.dev, dataset.test):
        h.update(np.asarray([len(x) for x in split.ids], dtype=np.int64).tobytes())
        if len(split):
            h.update(np.concatenate(split.ids).astype(np.int64).tobytes())
        h.update(np.asarray(split.labels, dtype=np.int64).tobytes())
        if split.attention is not None and len(split):  # given attention is part of the data
            h.update(b"attention")
            h.update(np.concatenate(split.attention).astype(np.float32).tobytes())
    return h.hexdigest()


def make_optimizer(model: nn.Module, train_config: TrainConfig) -> torch.optim.Optimizer:
    """Adam (amsgrad) with weight decay on everything but the attention layer.

    The fused kernel (:func:`attnlib.portable.adam`): the same bits on every x86-64 CPU.
    """
    attention_ids = {id(p) for p in getattr(model, "attention_parameters", lambda: [])()}
    decayed = [p for p in model.parameters() if p.requires_grad and id(p) not in attention_ids]
    plain = [p for p in model.parameters() if p.requires_grad and id(p) in attention_ids]
    groups = [{"params": decayed, "weight_decay": train_config.weight_decay}]
    if plain:
        groups.append({"params": plain, "weight_decay": 0.0})
    return portable.adam(groups, lr=train_config.lr, amsgrad=train_config.amsgrad)


def classification_metrics(labels: np.ndarray, probs: np.ndarray) -> dict:
    """Accuracy, F1 (positive class; macro over classes when more than 2) and ROC-AUC."""
    from sklearn.metrics import accuracy_score, f1_score, roc_auc_score

    labels = np.asarray(labels)
    probs = np.asarray(probs)
    pred = probs.argmax(-1)
    binary = probs.shape[-1] == 2
    out = {
        "accuracy": float(accuracy_score(labels, pred)),
        "f1": float(f1_score(labels, pred, average="binary" if binary else "macro", zero_division=0)),
        "roc_auc": float("nan"),
        "n": int(len(labels)),
    }
    if len(np.unique(labels)) > 1:
        out["roc_auc"] = float(
            roc_auc_score(labels, probs[:, 1]) if binary else roc_auc_score(labels, probs, multi_class="ovr")
        )
    return out


@torch.no_grad()
def predict_proba(model: AttentionClassifier, split: Split, *, batch_size: int = 256, device=None) -> np.ndarray:
    """Output distributions (N, C) for every instance of ``split``, in the split's order."""
    device = device_of(model) if device is None else torch.device(device)
    out = np.zeros((len(split), model.config.n_classes), dtype=np.float64)
    with eval_mode(model), torch.no_grad():  # no autograd graph: it held every batch's activations
        for batch in split.batches(batch_size):
            probs = model(batch.to(device)).probs
            out[batch.index.cpu().numpy()] = probs.double().cpu().numpy()
    cpu.release_memory()  # the batches' freed heap (about 230 MB after three models in chapter 11)
    return out


@dataclass
class Predictions:
    """A model's outputs on every instance of a split, in the split's order."""

    probs: np.ndarray  # (N, C)
    attention: list  # N arrays, each over that instance's real tokens (no SOS/EOS)

    @property
    def predicted(self) -> np.ndarray:
        return self.probs.argmax(-1)


@torch.no_grad()
def predict(model: AttentionClassifier, split: Split, *, batch_size: int = 256) -> Predictions:
    """Output distributions and attention (over real tokens) for every instance of ``split``.

    Works for every model family: the real tokens are the batch's own (not SOS, EOS or
    padding). A BiLSTM's or Average's attention sums to 1 over them; a transformer's (its
    last-layer [CLS] row, averaged over heads) also weighs <SOS> and <EOS>, so its slice sums
    to at most 1.
    """
    device = device_of(model)
    probs = np.zeros((len(split), model.config.n_classes), dtype=np.float64)
    attention: list = [None] * len(split)
    with eval_mode(model):
        for batch in split.batches(batch_size):
            out = model(batch.to(device))
            idx = batch.index.cpu().numpy()
            probs[idx] = out.probs.double().cpu().numpy()
            alpha = out.attention.cpu().numpy()
            mask = batch.mask.cpu().numpy()
            for row, i in enumerate(idx):  # ragged per-instance arrays: one cheap slice each
                attention[i] = alpha[row][mask[row]]
    cpu.release_memory()  # the batches' freed heap back to the system
    return Predictions(probs=probs, attention=attention)


@dataclass
class Comparison:
    """Per-instance differences between two models on the same split (in the split's order)."""

    attention_jsd: np.ndarray  # (N,) JSD(alpha_a, alpha_b) over the real tokens
    output_tvd: np.ndarray  # (N,) TVD(y_a, y_b)
    max_attention: np.ndarray  # (N,) max_t alpha_b (the reference model's peak weight)
    predicted_b: np.ndarray  # (N,) the reference model's predicted class
    same_decision: np.ndarray  # (N,) bool: both models predict the same class


@torch.no_grad()
def compare_models(model_a: AttentionClassifier, model_b: AttentionClassifier, split: Split, *, batch_size: int = 256) -> Comparison:
    """How far model a's attention and output are from model b's, per instance of ``split``.

    JSD(alpha_a, alpha_b) over the real tokens and TVD(y_a, y_b) of the output
    distributions, computed batch by batch (Wiegreffe & Pinter 2019, Sec. 4: seeds
    and adversaries are compared with the base model this way). Both models must
    share the vocabulary of ``split``.
    """
    from .metrics import jsd, tvd

    for m, name in ((model_a, "model_a"), (model_b, "model_b")):
        if not isinstance(m, AttentionClassifier):
            raise ValueError(f"{name} must be an AttentionClassifier (e.g. TrainedModel.model), got {type(m).__name__}")
    if model_a.vocab_size != model_b.vocab_size:
        raise ValueError("the two models have different vocabularies: train both on the same data set")
    n = len(split)
    out = {k: np.zeros(n, dtype=np.float64) for k in ("attention_jsd", "output_tvd", "max_attention")}
    predicted = np.zeros(n, dtype=np.int64)
    same = np.zeros(n, dtype=bool)
    device = device_of(model_b)
    with eval_mode(model_a), eval_mode(model_b):
        for batch in split.batches(batch_size):
            batch = batch.to(device)
            a, b = model_a(batch), model_b(batch)
            idx = batch.index.cpu().numpy()
            mask = b.encoded.mask
            out["attention_jsd"][idx] = jsd(a.attention.double(), b.attention.double(), mask=mask, check=False).cpu().numpy()
            out["output_tvd"][idx] = tvd(a.probs.double(), b.probs.double(), check=False).cpu().numpy()
            out["max_attention"][idx] = b.attention.max(-1).values.double().cpu().numpy()
            predicted[idx] = b.prediction.cpu().numpy()
            same[idx] = (a.prediction == b.prediction).cpu().numpy()
    return Comparison(predicted_b=predicted, same_decision=same, **out)


def evaluate(model: AttentionClassifier, split: Split, *, batch_size: int = 256) -> dict:
    """Accuracy, F1 and ROC-AUC of ``model`` on ``split``."""
    return classification_metrics(split.labels, predict_proba(model, split, batch_size=batch_size))


def label_loss(
    model: AttentionClassifier, labels: np.ndarray, device
) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """J&W's label loss for ``model``, as a function ``loss(logits, y) -> scalar`` (the batch mean).

    Two classes: binary cross-entropy on the one logit with ``pos_weight = N / N_pos - 1``
    (``labels``: the training labels, N of them); more classes: plain cross-entropy. The
    objective :func:`fit` minimises by default, and what a penalised objective adds its
    penalty to (e.g. :func:`attnlib.deception.train_deceiver`).
    """
    if model.config.n_classes == 2:
        n, n_pos = len(labels), int(np.sum(labels == 1))
        pos_weight = torch.tensor([n / max(n_pos, 1) - 1.0], device=device)
        bce = nn.BCEWithLogitsLoss(pos_weight=pos_weight)
        return lambda logits, y: bce(logits.squeeze(-1), y.float())
    ce = nn.CrossEntropyLoss()
    return lambda logits, y: ce(logits, y)


def _select_by_dev_auc(model: AttentionClassifier, dataset: Dataset) -> tuple[float, dict]:
    """J&W's model selection: dev ROC-AUC (accuracy when the dev split has one class)."""
    dev = evaluate(model, dataset.dev)
    score = dev["roc_auc"] if not np.isnan(dev["roc_auc"]) else dev["accuracy"]
    return score, {f"dev_{k}": v for k, v in dev.items() if k != "n"}


#: torch's CPU threads while a model trains, whatever the machine. One thread means no
#: run-time choice anywhere in training: the sums of a backward pass are split across threads,
#: so a thread count changes the float rounding and, over 8 epochs, the trained model (on
#: rt-polarity the BiLSTM's test F1 moves by about 0.01 between 1 and 2 threads); and with two,
#: the OpenMP runtime may grant fewer threads than asked (``OMP_DYNAMIC=TRUE`` changed the
#: model), and some book builds trained a different BiLSTM from the same seed. One thread
#: leaves no such choice (``torch.set_num_threads`` sets MKL's BLAS to the same count).
#: One thread is also robust to a busy machine: beside one competing busy process on 2 cores,
#: a BiLSTM epoch took 8x (plain Python) to 45x (a Jupyter kernel) longer on two threads, as
#: each parallel region waited for a descheduled thread, and 2x longer on one. On an idle
#: machine one thread with oneDNN's LSTM is as fast as two were (8.1 s against 9.0 s an epoch).
#: A fixed count also keeps a model trained by a caller with another setting (the benchmarks
#: use 1 and 2) from entering the cache under a different rounding.
TRAIN_THREADS = 1


_THREADS_LOCK = threading.Lock()
_THREADS_STATE = {"users": 0, "before": None}


@contextmanager
def training_threads(device) -> Iterator[None]:
    """Run the block on :data:`TRAIN_THREADS` torch CPU threads; restore after.

    CPU only. ``torch.set_num_threads`` also sets MKL's BLAS to that count, so with one
    thread the trained model depends on no run-time thread choice (see :data:`TRAIN_THREADS`).
    Safe to nest and to enter from several threads at once (:func:`run_concurrently`): the
    count in force before the first block is restored when the last block ends.
    """
    if torch.device(device).type != "cpu":
        yield
        return
    with _THREADS_LOCK:
        if _THREADS_STATE["users"] == 0:
            _THREADS_STATE["before"] = torch.get_num_threads()
        _THREADS_STATE["users"] += 1
    torch.set_num_threads(TRAIN_THREADS)  # this thread's OpenMP count, and MKL's
    try:
        yield
    finally:
        with _THREADS_LOCK:
            _THREADS_STATE["users"] -= 1
            if _THREADS_STATE["users"] == 0:
                torch.set_num_threads(_THREADS_STATE["before"])


#: Held while a model draws its initial weights from the global random generators, so that
#: models trained at once by :func:`run_concurrently` get exactly the weights they get alone.
_INIT_LOCK = threading.RLock()


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Seed every global random generator (:func:`attnlib.seed_everything`) and keep them to this block.

    Wrap the construction of a model whose initial weights come from the global generators
    in it: no other *building* thread draws from them until the block ends. Training itself
    must not draw from the global generators at all: a model trained in another thread would
    draw between this block's seed and its weights, and the model built here would depend on
    the threads' timing. (An ``nn.Dropout`` in the transformer did exactly that: under load, a
    BiLSTM trained beside it ended at test F1 0.774 instead of 0.765. The transformer's dropout
    now has its own generator.)

    On leaving the block the global generators (Python's, numpy's, torch's CPU one) are put back
    as they were: training a model in someone's script leaves their random streams alone.
    """
    with _INIT_LOCK:
        states = random.getstate(), np.random.get_state(), torch.random.get_rng_state()
        try:
            seed_everything(seed)
            yield
        finally:
            random.setstate(states[0])
            np.random.set_state(states[1])
            torch.random.set_rng_state(states[2])


class TrainingCancelled(RuntimeError):
    """A job of :func:`run_concurrently` stopped early because another one failed."""


# Set in the threads of run_concurrently: the shared stop flag and the progress reporter.
_JOB = threading.local()


def _report(description: str, epoch: int, epochs: int) -> None:
    reporter = getattr(_JOB, "reporter", None)
    if reporter is not None:
        reporter(description, epoch, epochs)


def _stop_requested() -> bool:
    stop = getattr(_JOB, "stop", None)
    return stop is not None and stop.is_set()


def training_slots(device=None) -> int:
    """How many models :func:`run_concurrently` trains at once by default.

    Each model trains on one CPU thread (:data:`TRAIN_THREADS`), so a CPU trains as many at
    once as attnlib gives torch threads (:func:`attnlib.cpu.status`: the CPU quota, or
    ``ATTNLIB_THREADS``). A GPU trains one at a time.
    """
    if get_device(device).type != "cpu":
        return 1
    return max(1, cpu.status().threads)


def run_concurrently(
    jobs: Sequence[Callable[[], object]],
    *,
    workers: int | None = None,
    progress: bool = True,
    description: str = "training",
    costs: Sequence[float] | None = None,
    unit: str = "model",
    labels: Sequence[str] | None = None,
) -> list:
    """Run independent training jobs at once, one per free core; return their results in order.

    ``jobs`` are callables without arguments, e.g. ``functools.partial(train_model, ds, seed=1)``.
    Training runs on one thread per model (:data:`TRAIN_THREADS`), so on a machine with two
    cores two models train in about the time of one. The results are exactly those of calling
    the jobs one after the other: each model trains on one thread with its own seeded batches,
    and draws its initial weights under a lock (:func:`seeded`). ``workers`` defaults to
    :func:`training_slots`; with one worker (or one job), and inside a job of another
    ``run_concurrently``, the jobs run here, in order.

    ``costs`` (optional, one number per job) start the costliest jobs first, so that a long job
    does not start last and run alone (longest-processing-time-first scheduling).

    One progress bar counts the models; it names the models in training and their epochs.
    ``labels`` (optional, one string per job) name the running jobs on the bar until their
    training reports an epoch, e.g. for jobs that are not :func:`train_model`.
    When a job raises, the others stop at their next batch and the first error (in job
    order) is raised.
    """
    jobs, workers, costs, labels = _check_jobs(jobs, workers, costs, labels)
    if getattr(_JOB, "stop", None) is not None:
        workers = 1  # called from a job of an outer run_concurrently: its cores are taken already
    if workers <= 1:
        return [job() for job in jobs]
    board = _Board(len(jobs), f"{description} ({workers} at once)", unit, progress, labels)
    before = torch.get_num_threads()
    try:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="attnlib-train") as pool:
            order = sorted(range(len(jobs)), key=lambda i: -costs[i]) if costs is not None else range(len(jobs))
            submitted = {i: pool.submit(board.run, i, jobs[i]) for i in order}
            return _results([submitted[i] for i in range(len(jobs))], board.stop)
    finally:
        board.close()
        torch.set_num_threads(before)
        cpu.release_memory()  # the worker threads' freed arenas (about 200 MB after two models)


def _check_jobs(jobs, workers, costs, labels) -> tuple[list, int, list | None, list | None]:
    """:func:`run_concurrently`'s arguments checked: the jobs, the workers (at most one per job), the costs
    and the labels."""
    jobs = list(jobs)
    for job in jobs:
        if not callable(job):
            raise ValueError(f"each job must be a callable without arguments (e.g. functools.partial(train_model, ...)), "
                             f"got {type(job).__name__}")
    if workers is None:
        workers = training_slots()
    elif isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive int, got {workers!r}")
    if costs is not None:
        costs = [float(c) for c in costs]
        if len(costs) != len(jobs) or not all(np.isfinite(costs)):
            raise ValueError(f"costs must be {len(jobs)} finite numbers, one per job")
    if labels is not None:
        labels = list(labels)
        if len(labels) != len(jobs) or not all(isinstance(label, str) for label in labels):
            raise ValueError(f"labels must be {len(jobs)} strings, one per job")
    return jobs, min(workers, len(jobs)), costs, labels


class _Board:
    """What :func:`run_concurrently`'s jobs share: one progress bar that counts the finished jobs and
    names the running ones (a job's training reports its epochs through :func:`_report`), and the
    stop flag a failed job raises for the others (:func:`_stop_requested`)."""

    def __init__(self, total: int, description: str, unit: str, progress: bool, labels: list | None):
        from tqdm.auto import tqdm

        self.bar = tqdm(total=total, desc=description, unit=unit, disable=not progress, mininterval=1.0)
        self.labels, self.lock, self.running, self.stop = labels, threading.Lock(), {}, threading.Event()

    def _show(self) -> None:  # under the lock
        self.bar.set_postfix_str("; ".join(self.running[k] for k in sorted(self.running)), refresh=False)

    def _set(self, i: int, text: str) -> None:
        with self.lock:
            self.running[i] = text
            self._show()

    def run(self, i: int, job):
        """Job ``i`` on this worker thread, its epochs shown on the bar; the bar counts it when it ends."""
        _JOB.stop = self.stop
        _JOB.reporter = lambda name, epoch, epochs: self._set(i, f"{name}: epoch {epoch}/{epochs}")
        if self.labels is not None:
            self._set(i, self.labels[i])
        try:
            return job()
        finally:
            _JOB.stop = _JOB.reporter = None
            with self.lock:
                self.running.pop(i, None)
                self._show()
                self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def _results(futures: list, stop: threading.Event) -> list:
    """The jobs' results in order; on the first failure the others are stopped (at their next batch)
    and cancelled, and the first error in job order that is not a cancellation is raised."""
    try:
        wait(futures, return_when=FIRST_EXCEPTION)
    except BaseException:  # KeyboardInterrupt: stop the others too
        stop.set()
        raise
    finally:
        if any(f.done() and not f.cancelled() and f.exception() is not None for f in futures):
            stop.set()
            for f in futures:
                f.cancel()
    wait(futures)
    failed = [f.exception() for f in futures if not f.cancelled() and f.exception() is not None]
    first = next((e for e in failed if not isinstance(e, TrainingCancelled)), failed[0] if failed else None)
    if first is not None:
        raise first
    return [f.result() for f in futures]


#: Relative cost of one token through each encoder in training (measured on an Intel Xeon, one
#: thread: an rt-polarity epoch takes about 12.5 s with the BiLSTM, 29 s with the 4 x 4 x 32
#: transformer; earlier, 5.4 s with the CNN and 2 s with the Average encoder against 11.5 s).
#: A transformer's scales with layers x d_model, from the 4 x 4 x 32 one (d_model 128).
_ENCODER_COST = {"lstm": 6.0, "cnn": 3.0, "average": 1.0, "transformer": 14.0}


def training_cost(dataset, config=None, encoder=None, epochs=None, train_config=None, **_) -> float:
    """A rough relative cost of training a model (tokens x encoder x epochs) from
    :func:`train_model`'s keyword arguments: what :func:`run_concurrently`'s ``costs`` takes,
    to start long jobs first."""
    name = getattr(config, "encoder", "transformer") if config is not None else (encoder or "lstm")
    per_token = _ENCODER_COST.get(name, 6.0)
    if name == "transformer" and hasattr(config, "layers"):
        per_token *= config.layers * config.heads * config.head_dim / (4 * 128)
    n_epochs = epochs or (train_config or TrainConfig()).epochs
    tokens = float(sum(len(x) for x in dataset.train.ids)) if isinstance(dataset, Dataset) else 0.0
    return tokens * per_token * n_epochs


def train_models(specs, *, workers: int | None = None, progress: bool = True):
    """Train (or load from the cache) several models at once with :func:`train_model`.

    ``specs`` is a dict of name -> keyword arguments of :func:`train_model` (``dataset``
    included), or a list of such dicts; the result is a dict of name -> :class:`TrainedModel`
    (or a list), each exactly the model ``train_model(**spec)`` gives. Models train
    concurrently, one per core (:func:`run_concurrently`).
    """
    import functools

    if isinstance(specs, Mapping):
        names, kwargs = list(specs), list(specs.values())
    elif isinstance(specs, Sequence) and not isinstance(specs, (str, bytes)):
        names, kwargs = None, list(specs)
    else:
        raise ValueError(f"specs must be a dict of name -> train_model keyword arguments, or a list of them, got {type(specs).__name__}")
    for spec in kwargs:
        if not isinstance(spec, Mapping) or "dataset" not in spec:
            raise ValueError(f"each spec must be a dict of train_model keyword arguments with a 'dataset', got {spec!r:.80}")
    jobs = [functools.partial(train_model, **{"progress": progress, **spec}) for spec in kwargs]
    results = run_concurrently(jobs, workers=workers, progress=progress, description=f"training {len(jobs)} models",
                               costs=[training_cost(**spec) for spec in kwargs])
    return dict(zip(names, results)) if names is not None else results


def lr_schedule(optimizer: torch.optim.Optimizer, train_config: TrainConfig, steps: int):
    """Linear warm-up over ``train_config.warmup`` of the steps, then linear decay to 0; None for a constant rate."""
    if train_config.warmup == 0:
        return None
    warm = max(1, round(train_config.warmup * steps))

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return max(0.0, (steps - step) / max(1, steps - warm))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def fit(
    model: AttentionClassifier,
    dataset: Dataset,
    *,
    train_config: TrainConfig = TrainConfig(),
    seed: int = 0,
    progress: bool = True,
    description: str = "",
    objective=None,
    select=None,
) -> tuple[dict, list, int]:
    """Train ``model`` in place with J&W's recipe; restore the epoch with the best dev ROC-AUC.

    ``objective(model, batch) -> loss`` replaces the label loss (e.g. Wiegreffe & Pinter's
    adversarial loss); ``select(model, dataset) -> (score, record)`` replaces the epoch
    selection (higher score is better; ``record`` is a dict logged in the history).
    Returns ``(best_state_dict, history, best_epoch)``.
    """
    from tqdm.auto import tqdm

    device = device_of(model)
    if device.type == "cpu":
        warn_if_unpinned("training")  # the book's models need the pinned kernels (attnlib.cpu)
    optimizer = make_optimizer(model, train_config)
    n_batches = -(-len(dataset.train) // train_config.batch_size)
    scheduler = lr_schedule(optimizer, train_config, train_config.epochs * n_batches)
    if objective is None:
        loss_of = label_loss(model, dataset.train.labels, device)
        objective = lambda m, batch: loss_of(m(batch).logits, batch.labels)  # noqa: E731
    if select is None:
        select = _select_by_dev_auc
    history: list[dict] = []
    best_auc, best_state, best_epoch = -np.inf, None, 0
    # mininterval: at most one redraw a second. In a notebook each redraw is a few widget messages,
    # and a client that reads them only after the cell (nbval) loses the kernel's last messages once
    # more than about 2,000 are queued (ZMQ's high-water marks): a 4-minute training cell at tqdm's
    # default 10 redraws a second failed nbval that way.
    # In run_concurrently's threads one shared bar reports the epochs instead of a bar per model.
    in_job = getattr(_JOB, "reporter", None) is not None
    bar = tqdm(total=train_config.epochs * n_batches, desc=description or "training", disable=not progress or in_job,
               unit="batch", mininterval=1.0)
    _report(description or "training", 0, train_config.epochs)
    with training_threads(device):  # the same model on every CPU machine
        for epoch in range(1, train_config.epochs + 1):
            model.train()
            total, count = 0.0, 0
            for batch in dataset.train.batches(train_config.batch_size, shuffle=True, seed=seed * 1000 + epoch):
                batch = batch.to(device)
                optimizer.zero_grad()
                loss = objective(model, batch)
                loss.backward()
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()
                total += loss.detach().item() * len(batch)
                count += len(batch)
                bar.update(1)
                if _stop_requested():
                    raise TrainingCancelled("stopped: another model trained at the same time failed")
            with torch.no_grad():
                score, record = select(model, dataset)
            history.append({"epoch": epoch, "train_loss": total / max(count, 1), **record})
            if score > best_auc:
                best_auc, best_epoch = score, epoch
                best_state = copy.deepcopy({k: v.detach().cpu() for k, v in model.state_dict().items()})
            bar.set_postfix(epoch=epoch, dev=f"{score:.3f}")
            _report(description or "training", epoch, train_config.epochs)
    bar.close()
    model.load_state_dict(best_state)
    model.eval()
    return best_state, history, best_epoch


def train_model(
    dataset: Dataset,
    config: ModelConfig | TransformerConfig | None = None,
    *,
    encoder: str | None = None,
    attention: str | None = None,
    seed: int = 0,
    train_config: TrainConfig | None = None,
    epochs: int | None = None,
    device=None,
    use_cache: bool = True,
    progress: bool = True,
) -> TrainedModel:
    """Train (or load from the cache) J&W's classifier, or the book's transformer, on ``dataset``.

    ``config`` or the shortcuts ``encoder=`` / ``attention=`` choose the model
    (defaults: BiLSTM + tanh attention); a :class:`~attnlib.models.TransformerConfig` builds
    the transformer, trained by default with :data:`TRANSFORMER_TRAIN`;
    ``epochs`` overrides ``train_config.epochs``.
    Embeddings start from GloVe 6B 50d. Seeded: on a CPU the same call gives the same
    model twice. Uses a GPU when present unless ``device`` says otherwise.
    """
    if not isinstance(dataset, Dataset):
        raise ValueError(f"dataset must be an attnlib.data.Dataset (see attnlib.data.load_dataset), got {type(dataset).__name__}")
    if config is None:
        config = ModelConfig(encoder=encoder or "lstm", attention=attention or "tanh", n_classes=len(dataset.classes))
    elif encoder is not None or attention is not None:
        raise ValueError("give either config or encoder=/attention=, not both")
    if not isinstance(config, (ModelConfig, TransformerConfig)):
        raise ValueError(f"config must be a ModelConfig or a TransformerConfig, got {type(config).__name__}")
    if config.n_classes != len(dataset.classes):
        raise ValueError(f"config.n_classes is {config.n_classes} but {dataset.name} has {len(dataset.classes)} classes")
    if train_config is None:
        train_config = TRANSFORMER_TRAIN if isinstance(config, TransformerConfig) else TrainConfig()
    if epochs is not None:
        train_config = TrainConfig(**{**asdict(train_config), "epochs": epochs})
    seed = check_seed(seed)
    device = get_device(device)

    key = cache.cache_key(
        kind="classifier",
        dataset=dataset_fingerprint(dataset),
        config=config.to_dict(),
        train=asdict(train_config),
        seed=seed,
        device=device.type,
        attnlib=cache.code_version(family=config.training_code),
    )
    result = TrainedModel(
        model=None, dataset=dataset.name, config=config, train_config=train_config, seed=seed, key=key
    )

    def train(model: AttentionClassifier) -> dict:
        start = time.perf_counter()
        best_state, history, best_epoch = fit(
            model, dataset, train_config=train_config, seed=seed, progress=progress,
            description=f"{config.name} on {dataset.name}",
        )
        result.train_seconds = time.perf_counter() - start
        result.model, result.history, result.best_epoch = model, history, best_epoch
        result.dev, result.test = evaluate(model, dataset.dev), evaluate(model, dataset.test)
        return best_state

    return load_or_train(result, dataset, train, init_seed=seed, device=device, use_cache=use_cache)


#: The TrainedModel fields a model cache entry stores beside the state dict.
STORED_FIELDS = ("history", "best_epoch", "dev", "test", "train_seconds")


def load_or_train(
    result: TrainedModel,
    dataset: Dataset,
    train: Callable[[nn.Module], dict],
    *,
    init_seed: int,
    device,
    use_cache: bool = True,
    stored: Sequence[str] = STORED_FIELDS,
    what: str = "model",
):
    """The model cache around one training run: load ``result.key``, or train and save it.

    ``result``: a :class:`TrainedModel` (or subclass) with ``key`` and ``config`` set; it is
    filled and returned; ``result.config.build(vocab_size, embeddings)`` makes the model
    (a :class:`ModelConfig` or a :class:`TransformerConfig`). From the cache: the model is built (seeded with ``init_seed``:
    building it draws from the global generators), its state loaded, and the ``stored``
    fields set; ``from_cache`` is True. An entry that does not fit (a missing field, other
    shapes) warns with :class:`attnlib.cache.CacheCorruptionWarning` and is retrained.
    Otherwise a fresh classifier is initialised as every model of the book is (GloVe 6B
    50d embeddings and weights seeded with ``init_seed``) on ``device``, and
    ``train(model)`` trains it on one thread (see :func:`training_threads`), fills
    ``result``'s fields and returns the state dict to keep; the entry is saved atomically.
    """
    if not use_cache:
        return _load_or_train(result, dataset, train, init_seed=init_seed, device=device, use_cache=False,
                              stored=stored, what=what)
    with cache.building("models", result.key):  # a second process needing this model waits, then loads it
        return _load_or_train(result, dataset, train, init_seed=init_seed, device=device, use_cache=True,
                              stored=stored, what=what)


def _load_or_train(result, dataset, train, *, init_seed, device, use_cache, stored, what):
    if use_cache:
        entry = cache.load("models", result.key)
        if entry is not None:
            with seeded(init_seed):  # building the module draws from the global generators
                model = result.config.build(len(dataset.vocab))
            try:
                model.load_state_dict(entry["state_dict"])
                values = {name: entry[name] for name in stored}
            except (KeyError, RuntimeError, TypeError) as err:
                warnings.warn(
                    f"cached {what} {result.key[:12]} does not fit ({err}); retraining",
                    cache.CacheCorruptionWarning, stacklevel=3,
                )
            else:
                for name, value in values.items():
                    setattr(result, name, value)
                result.model, result.from_cache = model.to(device).eval(), True
                return result

    with seeded(init_seed):
        embeddings, _ = glove_embeddings(dataset.vocab, seed=init_seed)
        model = result.config.build(len(dataset.vocab), embeddings).to(device)
    with training_threads(device):  # the scores too: the same on every core count
        best_state = train(model)
    if use_cache:
        cache.save("models", result.key, {"state_dict": best_state, **{name: getattr(result, name) for name in stored}})
    return result
