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

__all__ = ["NAMES", "attention_peaks", "captions", "comparison", "encoder_spread", "f1_beside_paper", "scores_table", "threshold"]

#: How the prose names each encoder.
NAMES = {"lstm": "BiLSTM", "cnn": "CNN", "average": "Average"}


def _check_models(models: Mapping[str, Any]) -> None:
    if "lstm" not in models:
        raise ValueError(f"models must include the 'lstm' encoder, got {list(models)}")
    unknown = [e for e in models if e not in NAMES]
    if unknown:
        raise ValueError(f"unknown encoder(s) {unknown}; the prose names {list(NAMES)}")


def scores_table(
    models: Mapping[str, Any], data_name: str, *, paper_f1: float, rebuttal_f1: float
) -> pd.DataFrame:
    """The comparison table: our models' test scores, then the two published BiLSTM F1s.

    ``models``: encoder name -> trained result (``.test`` with accuracy, f1 and roc_auc);
    ``data_name``: our dataset's name; ``paper_f1``: J&W's SST F1; ``rebuttal_f1``: Wiegreffe
    & Pinter's re-trained F1. Indexed by (model, data), unrounded.
    """
    rows = []
    for encoder, result in models.items():
        rows.append(
            {
                "model": f"{encoder} + tanh",
                "data": data_name,
                "test accuracy": result.test["accuracy"],
                "test F1": result.test["f1"],
                "test ROC-AUC": result.test["roc_auc"],
            }
        )
    rows.append({"model": "lstm + tanh", "data": "SST (Jain & Wallace 2019)", "test F1": paper_f1})
    rows.append(
        {"model": "lstm + tanh", "data": "SST (Wiegreffe & Pinter 2019)", "test F1": rebuttal_f1}
    )
    return pd.DataFrame(rows).set_index(["model", "data"])


def comparison(
    models: Mapping[str, Any], *, paper_f1: float, rebuttal_f1: float
) -> dict[str, Any]:
    """Reads "Reading the comparison": our F1 against the paper's, the encoders' spread, epochs.

    ``models``: encoder name (lstm, cnn, average) -> trained result (``.test``, ``.dev`` with
    f1 and roc_auc, ``.best_epoch``); ``paper_f1``: J&W's SST F1; ``rebuttal_f1``: Wiegreffe
    & Pinter's. The gap is ``paper_f1`` minus the BiLSTM's test F1.
    """
    _check_models(models)
    gap = paper_f1 - models["lstm"].test["f1"]
    f1 = {e: float(m.test["f1"]) for e, m in models.items()}
    auc = {e: float(m.test["roc_auc"]) for e, m in models.items()}
    dev_auc = {e: float(m.dev["roc_auc"]) for e, m in models.items()}
    out: dict[str, Any] = {
        "ch01_paper_f1": float(paper_f1),
        "ch01_wp_f1": float(rebuttal_f1),
        "ch01_gap_abs": abs(float(gap)),
        "ch01_f1_min": min(f1.values()),
        "ch01_f1_max": max(f1.values()),
        "ch01_f1_best": NAMES[max(f1, key=f1.get)],
        "ch01_f1_worst": NAMES[min(f1, key=f1.get)],
        "ch01_auc_min": min(auc.values()),
        "ch01_auc_max": max(auc.values()),
        "ch01_auc_best": NAMES[max(auc, key=auc.get)],
        "ch01_devauc_best": NAMES[max(dev_auc, key=dev_auc.get)],
        "ch01_devauc_best_v": max(dev_auc.values()),
    }
    for e, m in models.items():
        out[f"ch01_epoch_{e}"] = int(m.best_epoch)
    return out


def f1_beside_paper(predicted, labels, *, paper_f1: float, seed: int = 0) -> dict[str, Any]:
    """Our BiLSTM's test F1 with its 95% bootstrap interval over the test sentences
    (``ch01_f1_ci``: "0.728 to 0.787"), and where the paper's F1 falls against it
    (``ch01_vs_paper``: ours is "above", "below" or "within noise of" theirs)."""
    interval = uncertainty.f1(labels, predicted, seed=seed)
    return {"ch01_f1_ci": interval.range_text(), "ch01_vs_paper": interval.relation_to(float(paper_f1))}


def encoder_spread(predicted: Mapping[str, Any], labels, *, seed: int = 0) -> dict[str, Any]:
    """Whether the encoders' test F1s can be told apart: the best minus the worst, with the 95%
    interval of a paired bootstrap over the test sentences (:func:`attnlib.uncertainty.compare_f1`).

    ``predicted``: encoder name -> its predicted labels on the same test sentences; ``labels``:
    the gold labels. ``ch01_f1_spread`` is a clause that follows "the X model scores highest and
    the Y model lowest": ", a gap of 0.026 (95% interval -0.012 to 0.063), within noise: ..."
    or ", a gap of ... beyond noise".
    """
    _check_models(predicted)
    if len(predicted) < 2:
        raise ValueError("encoder_spread needs at least two encoders")
    shape = np.shape(labels)
    for e, p in predicted.items():
        if np.shape(p) != shape:
            raise ValueError(f"predicted[{e!r}] has shape {np.shape(p)}, the labels {shape}")
    f1 = {e: uncertainty.f1(labels, p, seed=seed).estimate for e, p in predicted.items()}
    best, worst = max(f1, key=f1.get), min(f1, key=f1.get)
    gap = uncertainty.compare_f1(labels, predicted[best], predicted[worst], seed=seed).difference
    n = len(np.asarray(labels))
    beyond = gap.low > 0
    said = (
        "beyond noise" + (", if barely" if gap.low < 0.005 else "")
        if beyond
        else f"within noise: on {n:,} test sentences the {len(predicted)} encoders cannot be ordered by F1"
    )
    # an end that rounds to 0.000 would read as "includes 0": show it to the digit that tells
    digits = 4 if beyond and gap.low < 0.0005 else 3
    return {"ch01_f1_spread": f", a gap of {gap.estimate:.3f} (95% interval {gap.range_text(digits)}), {said}"}


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


def attention_peaks(
    preds: Mapping[str, Any], tokens: Sequence[Sequence[str]], chosen: Sequence[int]
) -> dict[str, Any]:
    """Reads how peaked attention is, which tokens win, and where the chosen six peak.

    ``preds``: encoder name -> predictions on the test split (``.attention``: one array per
    sentence over its real tokens); ``tokens``: the test split's tokens; ``chosen``: the
    sentences drawn as heat maps (the BiLSTM's, ``preds["lstm"]``, are read there).
    """
    _check_models(preds)
    out: dict[str, Any] = {}
    for name, pred in preds.items():
        argmax = [int(np.argmax(a)) for a in pred.attention]
        words = pd.Series([tokens[i][k] for i, k in enumerate(argmax)])
        out[f"ch01_medmax_{name}"] = float(np.median([a.max() for a in pred.attention]))
        out[f"ch01_first_{name}"] = float(np.mean(np.array(argmax) == 0))
        out[f"ch01_top_{name}"] = ", ".join(f"*{w}*" for w in words.value_counts().index[:8])
    medmax = {n: np.median([a.max() for a in p.attention]) for n, p in preds.items()}
    out["ch01_most_peaked"] = NAMES[max(medmax, key=medmax.get)]
    median_len = int(np.median([len(t) for t in tokens]))
    out["ch01_median_len"] = median_len
    out["ch01_even"] = 1 / median_len
    six = [int(np.argmax(preds["lstm"].attention[i])) for i in chosen]
    out["ch01_six_peaks"] = ", ".join(f"*{tokens[i][k]}*" for i, k in zip(chosen, six))
    out["ch01_six_first"] = int(sum(k == 0 for k in six))
    return out
