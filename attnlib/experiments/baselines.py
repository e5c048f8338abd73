"""The two baselines Wiegreffe & Pinter (2019) hold attention against.

* **Uniform attention** (W&P Sec. 3, Table 2): the same model with alpha_t = 1/T over
  the real tokens, frozen, trained end to end with the same recipe. If it scores as
  well as trained attention, the task does not need attention, and "attention is not
  explanation if you don't need it".
* **Random-seed variance** (W&P Sec. 4, Fig. 3): retrain the base model with other
  seeds; per instance, JSD(alpha_seed, alpha_base) and TVD(y_seed, y_base), median
  over the seeds. Models that differ only in their initialisation already disagree
  this much: the noise floor an adversary (Chapter 5) has to beat.

Every model comes from :func:`attnlib.train.train_model`, so it is cached and a rerun
costs nothing.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .. import uncertainty
from .._checks import check_positive_int, check_seed
from ..data import Dataset
from ..models import ModelConfig
from ..published import UNIFORM_F1, PAPER_DATASET
from ..train import TrainConfig, TrainedModel, compare_models, predict_proba, train_models

__all__ = [
    "UniformComparison", "uniform_comparison", "SeedVariance", "seed_variance", "LONG_SYNTHETIC", "load_wp_dataset",
    "dilution_curve",
]

#: The synthetic task made to need attention (Chapter 6): ONE marker word among 100-200
#: distractors. Under uniform attention the marker is 1/T of the average and so is the
#: gradient reaching it; trained attention can put its weight on the marker.
LONG_SYNTHETIC = {"n": 2000, "min_len": 100, "max_len": 200, "max_majority": 1}

SPLITS = ("train", "dev", "test")


def _check_dataset(dataset) -> Dataset:
    if not isinstance(dataset, Dataset):
        raise ValueError(
            f"dataset must be an attnlib.data.Dataset (see attnlib.data.load_dataset), got {type(dataset).__name__}"
        )
    return dataset


def _published_f1(dataset: str, which: str) -> float:
    key = PAPER_DATASET.get(dataset)
    entry = UNIFORM_F1.get(key, {}).get(which) if key else None
    return math.nan if entry is None else entry.value


def load_wp_dataset(name: str, *, seed: int = 0, profile=None, max_train: int | None = None) -> Dataset:
    """A data set of W&P's experiments under a profile; ``"synthetic-long"`` is :data:`LONG_SYNTHETIC`.

    ``max_train``: keep only the first so many training sentences (dev, test and the
    vocabulary unchanged); None keeps them all.
    """
    from dataclasses import replace

    from ..data import load_dataset
    from ..profiles import get_profile

    if max_train is not None and (isinstance(max_train, bool) or not isinstance(max_train, int) or max_train < 2):
        raise ValueError(f"max_train must be an int >= 2 or None, got {max_train!r}")
    P = get_profile(profile)
    if name == "synthetic-long":
        loaded = replace(load_dataset("synthetic", seed=seed, **LONG_SYNTHETIC), name="synthetic-long")
    else:
        loaded = load_dataset(name, seed=seed, **P.dataset_kwargs(name))
    if max_train is None or max_train >= len(loaded.train):
        return loaded
    return replace(loaded, train=loaded.train.subset(np.arange(max_train)))


# ----------------------------------------------------------------------------- uniform
@dataclass
class UniformComparison:
    """Trained vs uniform attention on one data set, per encoder."""

    dataset: str
    attention: str
    models: dict = field(default_factory=dict)  # (encoder, "trained" | "uniform") -> TrainedModel
    frame: pd.DataFrame = field(default_factory=pd.DataFrame)
    labels: np.ndarray | None = None  # the test split's labels
    predicted: dict = field(default_factory=dict)  # (encoder, "trained" | "uniform") -> (N,) test predictions

    def _pair(self, encoder: str) -> tuple[np.ndarray, np.ndarray]:
        """The (trained, uniform) test predictions of ``encoder``, or a clear ValueError."""
        if (encoder, "trained") not in self.predicted:
            raise ValueError(f"no {encoder!r} models in this comparison (encoders: {sorted({e for e, _ in self.predicted})})")
        return self.predicted[encoder, "trained"], self.predicted[encoder, "uniform"]

    def f1_gap(self, encoder: str, *, seed: int = 0):
        """F1 with trained attention against F1 with uniform attention, on the same test sentences:
        an :class:`attnlib.uncertainty.Comparison` (paired bootstrap over the sentences)."""
        trained, uniform = self._pair(encoder)
        return uncertainty.compare_f1(self.labels, trained, uniform, seed=seed)

    def accuracy_change(self, encoder: str, *, seed: int = 0):
        """Accuracy with uniform attention minus accuracy with trained attention, on the same test
        sentences: an :class:`attnlib.uncertainty.Comparison` (paired bootstrap)."""
        trained, uniform = self._pair(encoder)
        right = {w: (p == self.labels).astype(np.float64) for w, p in (("trained", trained), ("uniform", uniform))}
        return uncertainty.compare(right["uniform"], right["trained"], paired=True, seed=seed)

    def gap(self) -> pd.DataFrame:
        """Per encoder: test F1 with trained attention minus F1 with uniform attention (ours and W&P's).

        Ours carries its 95% interval, ``low`` and ``high``: the paired bootstrap over the test
        sentences of :meth:`f1_gap` (NaN where the comparison holds no predictions).
        """
        f = self.frame.set_index(["encoder", "attention"])
        rows = {}
        for enc in dict.fromkeys(self.frame["encoder"]):
            ours = f.loc[(enc, "trained"), "F1"] - f.loc[(enc, "uniform"), "F1"]
            paper = f.loc[(enc, "trained"), "F1 (W&P)"] - f.loc[(enc, "uniform"), "F1 (W&P)"]
            low = high = math.nan
            if (enc, "trained") in self.predicted:
                interval = self.f1_gap(enc).difference
                low, high = interval.low, interval.high
            rows[enc] = {"dataset": self.dataset, "F1 gap (ours)": ours, "low": low, "high": high,
                         "F1 gap (W&P)": paper}
        out = pd.DataFrame.from_dict(rows, orient="index")
        out.index.name = "encoder"
        return out


def uniform_comparison(
    dataset: Dataset,
    encoders=("lstm",),
    *,
    attention: str = "tanh",
    seed: int = 0,
    train_config: TrainConfig | None = None,
    epochs: int | None = None,
    progress: bool = True,
) -> UniformComparison:
    """Train each encoder twice, with ``attention`` and with uniform attention; compare on test.

    Returns one row per (encoder, trained | uniform): test F1 (positive class), accuracy
    and ROC-AUC, with Wiegreffe & Pinter's Table 2 F1 beside it where the data set has
    one (their models are BiLSTMs with tanh attention; NaN elsewhere). The test predictions
    are kept (``predicted``, two classes) so that :meth:`UniformComparison.gap` carries an interval.
    """
    _check_dataset(dataset)
    seed = check_seed(seed)
    if isinstance(encoders, str):
        encoders = (encoders,)
    encoders = tuple(encoders)
    if not encoders:
        raise ValueError("give at least one encoder")
    if attention not in ("tanh", "dot"):
        raise ValueError(f"attention must be 'tanh' or 'dot' (the trained attention to compare), got {attention!r}")
    result = UniformComparison(dataset=dataset.name, attention=attention, labels=np.asarray(dataset.test.labels))
    rows = []
    pairs = [(enc, which, att) for enc in encoders for which, att in (("trained", attention), ("uniform", "uniform"))]
    specs = [
        dict(dataset=dataset, config=ModelConfig(encoder=enc, attention=att, n_classes=dataset.n_classes), seed=seed,
             train_config=train_config, epochs=epochs)
        for enc, _, att in pairs
    ]
    for (enc, which, _), trained in zip(pairs, train_models(specs, progress=progress)):
        result.models[(enc, which)] = trained
        if dataset.n_classes == 2:  # F1 of the positive class; several classes take macro F1, without an interval
            result.predicted[(enc, which)] = predict_proba(trained.model, dataset.test).argmax(-1)
        paper = _published_f1(dataset.name, which) if (enc, attention) == ("lstm", "tanh") else math.nan
        rows.append(
            {
                "dataset": dataset.name,
                "encoder": enc,
                "attention": which,
                "F1": trained.test["f1"],
                "accuracy": trained.test["accuracy"],
                "ROC-AUC": trained.test["roc_auc"],
                "F1 (W&P)": paper,
            }
        )
    result.frame = pd.DataFrame(rows)
    return result


# ----------------------------------------------------------------------------- seeds
@dataclass
class SeedVariance:
    """How much models that differ only in their seed disagree with the base model."""

    dataset: str
    config: ModelConfig
    base_seed: int
    seeds: tuple
    split: str
    base: TrainedModel
    models: dict  # seed -> TrainedModel
    per_seed: pd.DataFrame  # one row per (seed, instance): jsd, tvd, same decision
    per_instance: pd.DataFrame  # one row per instance: medians over the seeds

    def __len__(self) -> int:
        return len(self.per_instance)

    def summary(self) -> pd.DataFrame:
        """Per predicted class: median and 90th percentile of the per-instance median JSD and TVD."""
        g = self.per_instance.groupby("predicted")
        out = pd.DataFrame(
            {
                "n": g.size(),
                "median JSD": g["jsd"].median(),
                "90th pct JSD": g["jsd"].quantile(0.9),
                "median TVD": g["tvd"].median(),
                "90th pct TVD": g["tvd"].quantile(0.9),
            }
        )
        out.index.name = "predicted class"
        return out

    def test_scores(self) -> pd.DataFrame:
        """Test F1 / accuracy / ROC-AUC of the base model and every seed."""
        rows = {self.base_seed: self.base.test, **{s: m.test for s, m in self.models.items()}}
        out = pd.DataFrame.from_dict(
            {s: {"F1": t["f1"], "accuracy": t["accuracy"], "ROC-AUC": t["roc_auc"]} for s, t in rows.items()},
            orient="index",
        )
        out.index.name = "seed"
        return out


def seed_variance(
    dataset: Dataset,
    config: ModelConfig | None = None,
    *,
    encoder: str = "lstm",
    attention: str = "tanh",
    base_seed: int = 0,
    seeds=(1, 2, 3),
    split: str = "test",
    train_config: TrainConfig | None = None,
    epochs: int | None = None,
    progress: bool = True,
) -> SeedVariance:
    """Retrain the base model with ``seeds``; per instance, compare each with the base.

    For instance i and seed s: JSD(alpha_s(i), alpha_base(i)) over the real tokens and
    TVD(y_s(i), y_base(i)); ``per_instance`` keeps the median over the seeds, with the
    base model's max_t alpha_t and predicted class for plotting against the adversary
    of Chapter 5 (Wiegreffe & Pinter 2019, Sec. 4, Fig. 3).
    """
    _check_dataset(dataset)
    base_seed = check_seed(base_seed, "base_seed")
    if isinstance(seeds, (int, np.integer)):
        raise ValueError("seeds must be a sequence of ints, e.g. (1, 2, 3)")
    seeds = tuple(check_seed(s, "each seed") for s in seeds)
    if not seeds:
        raise ValueError("give at least one seed besides the base seed")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct, got {seeds}")
    if base_seed in seeds:
        raise ValueError(f"seeds must not contain the base seed {base_seed}: a model compared with itself is 0")
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    if config is None:
        config = ModelConfig(encoder=encoder, attention=attention, n_classes=dataset.n_classes)
    if config.attention in ("uniform", "given"):
        raise ValueError(f"seed variance compares learned attention; {config.attention!r} attention is not learned")
    check_positive_int(len(dataset[split]), f"the {split} split's size")

    spec = dict(dataset=dataset, config=config, train_config=train_config, epochs=epochs)
    base, *others = train_models([dict(spec, seed=s) for s in (base_seed, *seeds)], progress=progress)
    data = dataset[split]
    models, frames = dict(zip(seeds, others)), []
    for s in seeds:
        c = compare_models(models[s].model, base.model, data)
        frames.append(
            pd.DataFrame(
                {
                    "seed": s,
                    "instance": np.arange(len(data)),
                    "jsd": c.attention_jsd,
                    "tvd": c.output_tvd,
                    "same decision": c.same_decision,
                    "max_attention": c.max_attention,
                    "predicted": c.predicted_b,
                }
            )
        )
    per_seed = pd.concat(frames, ignore_index=True)
    g = per_seed.groupby("instance", sort=True)
    per_instance = pd.DataFrame(
        {
            "instance": np.arange(len(data)),
            "jsd": g["jsd"].median().to_numpy(),
            "tvd": g["tvd"].median().to_numpy(),
            "max_attention": g["max_attention"].first().to_numpy(),
            "predicted": g["predicted"].first().to_numpy(),
            "length": data.lengths(),
        }
    )
    return SeedVariance(
        dataset=dataset.name,
        config=config,
        base_seed=base_seed,
        seeds=seeds,
        split=split,
        base=base,
        models=models,
        per_seed=per_seed,
        per_instance=per_instance,
    )


# ----------------------------------------------------------------------------- dilution
def dilution_curve(models: dict, vocab, *, marker: str = "superb", lengths=range(10, 301, 10), n_sentences: int = 16, seed: int = 0) -> pd.DataFrame:
    """p(positive) of each model on one marker word hidden among ``length`` distractors.

    For every length, ``n_sentences`` seeded :func:`attnlib.data.needle_sentence` s; all
    sentences of all lengths go through each model in one batch. Columns: model, length,
    mean and sd of p(class 1), and the mean attention weight on the marker. Under
    uniform attention the marker's share of the context is 1/T, so its effect fades with
    T; trained attention can keep its weight on the marker (Chapter 6).
    """
    import torch

    from ..data import collate, needle_sentence
    from ..models import device_of, eval_mode
    from ..models.protocol import has_capability

    if not models:
        raise ValueError("models must map at least one name to a model")
    lengths = [int(n) for n in lengths]
    if not lengths or min(lengths) < 1:
        raise ValueError("lengths must be a non-empty sequence of positive ints")
    check_positive_int(n_sentences, "n_sentences")
    seed = check_seed(seed)
    sentences = [needle_sentence(marker, n, seed=seed * 1_000_003 + 1000 * n + i) for n in lengths for i in range(n_sentences)]
    ids = [vocab.encode(s) for s in sentences]
    batch = collate(ids, labels=np.zeros(len(ids), dtype=np.int64))
    if vocab.stoi.get(marker) is None:
        raise ValueError(f"the marker {marker!r} is not in the vocabulary: use a data set that contains it")
    where = (batch.tokens == vocab.stoi[marker]).cpu().numpy()  # (N, T): exactly one True per row
    frames = []
    for name, model in models.items():
        model = getattr(model, "model", model)
        if not has_capability(model, "single_attention"):
            raise ValueError(f"models[{name!r}] must be a model with one attention over the tokens "
                             f"(single_attention: an AttentionClassifier) or its TrainedModel")
        with torch.no_grad(), eval_mode(model):
            out = model(batch.to(device_of(model)))
        p = out.probs[:, 1].double().cpu().numpy().reshape(len(lengths), n_sentences)
        on_marker = out.attention.double().cpu().numpy()[where].reshape(len(lengths), n_sentences)
        frames.append(pd.DataFrame({"model": name, "length": lengths, "p(positive)": p.mean(1), "sd": p.std(1),
                                    "attention on marker": on_marker.mean(1)}))
    return pd.concat(frames, ignore_index=True)
