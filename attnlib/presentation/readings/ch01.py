"""Chapter 1's readings: the three encoders' scores beside the paper's, and their attention.

Each public function reads one paragraph's numbers off the chapter's results and returns
``{glued name: value}`` for :func:`attnlib.presentation.glue.glue_all`; :func:`scores_table`
and :func:`captions` build what the chapter shows (a table, the heat maps' titles).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ... import uncertainty

__all__ = ["NAMES", "attention_peaks", "captions", "comparison", "encoder_spread", "f1_beside_paper", "scores_table", "threshold",
           "training", "own_data"]

#: How the prose names each encoder.
NAMES = {"lstm": "BiLSTM", "cnn": "CNN", "average": "Average"}


def _check_models(models: Mapping[str, Any]) -> None:
    if "lstm" not in models:
        raise ValueError(f"models must include the 'lstm' encoder, got {list(models)}")
    unknown = [e for e in models if e not in NAMES]
    if unknown:
        raise ValueError(f"unknown encoder(s) {unknown}; the prose names {list(NAMES)}")


def _seed_sets(sets: Mapping[str, Any]) -> None:
    _check_models(sets)
    for e, s in sets.items():
        if not hasattr(s, "scores") or not hasattr(s, "seeds"):
            raise ValueError(f"sets[{e!r}] must be an attnlib.seeds.SeedSet (from seeds.train_seed_sets), "
                             f"got {type(s).__name__}")


def scores_table(
    sets: Mapping[str, Any], data_name: str, *, paper_f1: float, rebuttal_f1: float,
    predicted: Mapping[str, Any] | None = None, labels=None, seed: int = 0,
) -> pd.DataFrame:
    """The comparison table: our models' test scores, means over their training seeds, then the
    two published BiLSTM F1s.

    ``sets``: encoder name -> :class:`attnlib.seeds.SeedSet` (``scores(split, metric)``);
    ``data_name``: our dataset's name; ``paper_f1``: J&W's SST F1; ``rebuttal_f1``: Wiegreffe
    & Pinter's re-trained F1. With ``predicted`` (encoder -> (S, n) test predictions) and
    ``labels``, a column gives each F1's 95% interval over seeds and sentences
    (:func:`attnlib.uncertainty.f1_over_seeds`). Indexed by (model, data), unrounded.
    """
    _seed_sets(sets)
    rows = []
    for encoder, s in sets.items():
        row = {
            "model": f"{encoder} + tanh",
            "data": data_name,
            "seeds": len(s),
            "test accuracy": float(s.scores("test", "accuracy").mean()),
            "test F1": float(s.scores("test", "f1").mean()),
        }
        if predicted is not None:
            row["F1 95% interval"] = uncertainty.f1_over_seeds(labels, predicted[encoder], seed=seed).range_text()
        row["test ROC-AUC"] = float(s.scores("test", "roc_auc").mean())
        rows.append(row)
    rows.append({"model": "lstm + tanh", "data": "SST (Jain & Wallace 2019)", "test F1": paper_f1})
    rows.append(
        {"model": "lstm + tanh", "data": "SST (Wiegreffe & Pinter 2019)", "test F1": rebuttal_f1}
    )
    return pd.DataFrame(rows).set_index(["model", "data"])


def comparison(
    sets: Mapping[str, Any], *, paper_f1: float, rebuttal_f1: float
) -> dict[str, Any]:
    """Reads "Reading the comparison": our F1 against the paper's, the encoders' ranges, epochs.

    ``sets``: encoder name (lstm, cnn, average) -> :class:`attnlib.seeds.SeedSet`; every score
    is the mean over its seeds, and the kept epochs are the first seed's (the figure's models).
    ``paper_f1``: J&W's SST F1; ``rebuttal_f1``: Wiegreffe & Pinter's. The gap is ``paper_f1``
    minus the BiLSTM's mean test F1. No encoder is called best here: :func:`encoder_spread`
    says whether the seeds and sentences can order them.
    """
    _seed_sets(sets)
    f1 = {e: float(s.scores("test", "f1").mean()) for e, s in sets.items()}
    auc = {e: float(s.scores("test", "roc_auc").mean()) for e, s in sets.items()}
    out: dict[str, Any] = {
        "ch01_paper_f1": float(paper_f1),
        "ch01_wp_f1": float(rebuttal_f1),
        "ch01_gap_abs": abs(float(paper_f1) - f1["lstm"]),
        "ch01_f1_min": min(f1.values()),
        "ch01_f1_max": max(f1.values()),
        "ch01_auc_min": min(auc.values()),
        "ch01_auc_max": max(auc.values()),
    }
    for e, s in sets.items():
        out[f"ch01_epoch_{e}"] = int(s.first.best_epoch)
    return out


def _listed(values) -> str:
    words = [f"{v:.3f}" for v in values]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def f1_beside_paper(predicted, labels, *, paper_f1: float, seed: int = 0) -> dict[str, Any]:
    """Our BiLSTM's test F1, the mean over its training seeds, with its 95% interval over seeds
    and test sentences (:func:`attnlib.uncertainty.f1_over_seeds`; ``ch01_f1_ci``: "0.728 to
    0.787"), each seed's F1 (``ch01_f1_seeds``), and where the paper's F1 falls against the
    interval (``ch01_vs_paper``: ours is "above", "below" or "within noise of" theirs).

    ``predicted``: (S, n) the S seeds' predicted labels on the test sentences (one row: one
    model, an interval over the sentences alone)."""
    predicted = np.atleast_2d(np.asarray(predicted))
    interval = uncertainty.f1_over_seeds(labels, predicted, seed=seed)
    per_seed = [uncertainty.f1(labels, row, seed=seed).estimate for row in predicted]
    return {"ch01_f1_mean": interval.estimate, "ch01_f1_ci": interval.range_text(),
            "ch01_f1_seeds": _listed(per_seed), "ch01_vs_paper": interval.relation_to(float(paper_f1))}


def encoder_spread(predicted: Mapping[str, Any], labels, *, seed: int = 0) -> dict[str, Any]:
    """Whether the encoders' test F1s can be told apart over training seeds and sentences: the
    best mean minus the worst, with the 95% interval over seeds and sentences and the verdict of
    :func:`attnlib.uncertainty.compare_f1_over_seeds` (two recipes: ``paired_seeds=False``).

    ``predicted``: encoder name -> (S, n) its S seeds' predicted labels on the same test
    sentences; ``labels``: the gold labels. ``ch01_f1_best`` / ``ch01_f1_worst`` name the
    highest and lowest mean; ``ch01_f1_spread`` is a clause that follows "the X model scores
    highest on average and the Y model lowest": ", a gap of 0.026 (95% interval over seeds and
    sentences -0.012 to 0.063): within noise, so ..." or ", a gap of ..., beyond noise (holds in
    3 of 3 seeds)". ``ch01_f1_seeds_said`` says how the seeds bear it out.
    """
    _check_models(predicted)
    if len(predicted) < 2:
        raise ValueError("encoder_spread needs at least two encoders")
    shape = np.shape(labels)
    matrices = {e: np.atleast_2d(np.asarray(p)) for e, p in predicted.items()}
    for e, p in matrices.items():
        if p.shape[1:] != shape:
            raise ValueError(f"predicted[{e!r}] has {p.shape[1:]} predictions per seed, the labels {shape}")
    f1 = {e: uncertainty.f1_over_seeds(labels, p, seed=seed).estimate for e, p in matrices.items()}
    best, worst = max(f1, key=f1.get), min(f1, key=f1.get)
    c = uncertainty.compare_f1_over_seeds(labels, matrices[best], matrices[worst], seed=seed)
    gap = c.difference
    n, k = len(np.asarray(labels)), c.n_seeds
    over = "over the test sentences" if c.one_model else "over seeds and sentences"
    if c.differs:
        said = f"beyond noise ({c.seeds_text()})"
    elif c.verdict == uncertainty.SEEDS_DISAGREE:
        said = f"and the seeds disagree ({c.seeds_text()}): the encoders cannot be ordered by F1"
    else:
        seeds_part = "" if c.one_model else f" and {k} seeds each ({c.seeds_text()})"
        said = (f"within noise: on {n:,} test sentences{seeds_part} the {len(matrices)} encoders "
                "cannot be ordered by F1")
    digits = 4 if c.differs and 0 < gap.low < 0.0005 else 3
    return {"ch01_f1_best": NAMES[best], "ch01_f1_worst": NAMES[worst],
            "ch01_f1_spread": f", a gap of {gap.estimate:.3f} (95% interval {over} {gap.range_text(digits)}), {said}"}


def threshold(scores: Mapping[str, float], predicted, labels) -> dict[str, Any]:
    """Reads the BiLSTM at the 0.5 cut: F1 against accuracy, misses against false alarms.

    ``scores``: the BiLSTM's test scores (f1, accuracy); ``predicted``: its predicted class per
    test sentence; ``labels``: the true classes (0 negative, 1 positive), as long.
    """
    predicted, labels = np.asarray(predicted), np.asarray(labels)
    if predicted.shape != labels.shape:
        raise ValueError(f"predicted {predicted.shape} and labels {labels.shape} differ in shape")
    fn = int(np.sum((predicted == 0) & (labels == 1)))
    fp = int(np.sum((predicted == 1) & (labels == 0)))
    return {
        "ch01_fn": fn,
        "ch01_fp": fp,
        "ch01_f1_vs_acc": "below" if float(scores["f1"]) < scores["accuracy"] else "above",
        "ch01_fn_vs_fp": "more" if fn > fp else ("fewer" if fn < fp else "as many"),
    }


def captions(
    name: str, probs, labels: Sequence[int], classes: Sequence[str], chosen: Sequence[int]
) -> list[str]:
    """The heat maps' titles: model, true label and p(positive) of each chosen sentence.

    ``name``: the model's name; ``probs``: its output distributions, (N, 2); ``labels``: the
    split's labels; ``classes``: the class names; ``chosen``: the sentences' indices.
    """
    return [
        f"{name}: label {classes[labels[i]]}, p(positive) = {probs[i, 1]:.2f}" for i in chosen
    ]


def _peaks(pred) -> tuple[float, float]:
    """(median largest weight, share of sentences whose largest weight is on the first token)."""
    argmax = np.array([int(np.argmax(a)) for a in pred.attention])
    return float(np.median([a.max() for a in pred.attention])), float(np.mean(argmax == 0))


def attention_peaks(
    preds: Mapping[str, Any], tokens: Sequence[Sequence[str]], chosen: Sequence[int],
    by_seed: Mapping[str, Sequence[Any]] | None = None,
) -> dict[str, Any]:
    """Reads how peaked attention is, which tokens win, and where the chosen six peak.

    ``preds``: encoder name -> predictions on the test split (``.attention``: one array per
    sentence over its real tokens), of the first seed's models (the figures'); ``tokens``: the
    test split's tokens; ``chosen``: the sentences drawn as heat maps (the BiLSTM's,
    ``preds["lstm"]``, are read there). ``by_seed``: encoder -> the predictions of every seed's
    model: then ``ch01_medmax_range_*`` / ``ch01_first_range_*`` give each quantity's range over
    the seeds, and ``ch01_most_peaked`` names an encoder only when its median largest weight
    is above every other encoder's in every seed.
    """
    _check_models(preds)
    out: dict[str, Any] = {}
    for name, pred in preds.items():
        argmax = [int(np.argmax(a)) for a in pred.attention]
        words = pd.Series([tokens[i][k] for i, k in enumerate(argmax)])
        out[f"ch01_medmax_{name}"], out[f"ch01_first_{name}"] = _peaks(pred)
        out[f"ch01_top_{name}"] = ", ".join(f"*{w}*" for w in words.value_counts().index[:8])
    medmax = {n: [out[f"ch01_medmax_{n}"]] for n in preds}
    if by_seed is not None:
        _check_models(by_seed)
        for name, seed_preds in by_seed.items():
            peaks = np.array([_peaks(p) for p in seed_preds])  # (S, 2)
            medmax[name] = list(peaks[:, 0])
            out[f"ch01_medmax_range_{name}"] = f"{peaks[:, 0].min():.2f} to {peaks[:, 0].max():.2f}"
            out[f"ch01_first_range_{name}"] = f"{peaks[:, 1].min():.1%} to {peaks[:, 1].max():.1%}"
    top = max(medmax, key=lambda n: min(medmax[n]))
    if all(min(medmax[top]) > max(v) for n, v in medmax.items() if n != top):
        every = "" if by_seed is None else f" in every one of the {len(medmax[top])} seeds"
        out["ch01_most_peaked"] = f"the most peaked is the {NAMES[top]}{every}"
    else:
        out["ch01_most_peaked"] = "no encoder is the most peaked in every seed"
    median_len = int(np.median([len(t) for t in tokens]))
    out["ch01_median_len"] = median_len
    out["ch01_even"] = 1 / median_len
    six = [int(np.argmax(preds["lstm"].attention[i])) for i in chosen]
    out["ch01_six_peaks"] = ", ".join(f"*{tokens[i][k]}*" for i, k in zip(chosen, six))
    out["ch01_six_first"] = int(sum(k == 0 for k in six))
    return out


def training(lstm, *, n_seeds: int, epochs: int) -> dict[str, Any]:
    """The recipe and seed 0's BiLSTM the first paragraphs quote: its kept epoch of ``epochs``, its test F1
    and accuracy and its dev ROC AUC (``lstm``: an :class:`attnlib.train.TrainedModel`), and how many
    training seeds each encoder has (``n_seeds``)."""
    return {"ch01_lstm_epoch": int(lstm.best_epoch), "ch01_epochs": int(epochs), "ch01_n_seeds": int(n_seeds),
            "ch01_lstm_f1": float(lstm.test["f1"]), "ch01_lstm_acc": float(lstm.test["accuracy"]),
            "ch01_lstm_dev_auc": float(lstm.dev["roc_auc"])}


def own_data(*, n_rows: int, stats: Mapping, scores: Mapping, n_permuted: int, median_tvd) -> dict[str, Any]:
    """The reader's own CSV: its rows, what loading dropped (``stats``: ``load_texts``' counts), the
    model's F1 and ROC AUC on it (``scores``), and the permutation run's sentences and median TVD."""
    return {"ch01_own_rows": int(n_rows), "ch01_own_empty": int(stats["n_empty"]),
            "ch01_own_short": int(stats["n_too_short"]), "ch01_own_kept": int(stats["n_kept"]),
            "ch01_own_f1": float(scores["f1"]), "ch01_own_auc": float(scores["roc_auc"]),
            "ch01_own_n_perm": int(n_permuted), "ch01_own_median_tvd": float(np.median(median_tvd))}
