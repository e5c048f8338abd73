"""Chapter 17's readings: the explanations that count more of a layer than its weights, beside raw
attention, rollout and flow, on the capstone's yardsticks.

Each public function reads one paragraph's numbers off the chapter's results and returns
``{glued name: value}`` for :func:`attnlib.presentation.glue.glue_all`; :func:`table` builds the
chapter's table.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ... import uncertainty
from . import ch15
from .wording import listed

__all__ = ["METHODS", "NEW", "OLD", "setup", "accuracy", "table", "beside_attention", "at_random", "minilm_head"]

#: The methods of the chapter's tables, in order: Chapter 15's attention family, then Part V's, then the floor.
OLD = ("attention", "rollout", "flow")
NEW = ("norm-based", "norm + residual + LN", "GlobEnc", "value zeroing", "attention relevance")
METHODS = (*OLD, *NEW, "random")


def setup(*, n_seeds: int, n_train: int, n_sentences: int, epochs: int, minilm_train: int) -> dict[str, Any]:
    """What the chapter runs: the transformer's seeds, its training sentences and epochs, the test
    sentences every method is scored on, and the reviews MiniLM's head is fitted on."""
    return {"ch17_n_seeds": int(n_seeds), "ch17_n_train": f"{n_train:,}", "ch17_n": int(n_sentences),
            "ch17_epochs": int(epochs), "ch17_minilm_train": f"{minilm_train:,}"}


def accuracy(correct, *, key: str, seed: int = 0) -> dict[str, Any]:
    """A model's test accuracy: ``correct`` (seeds, sentences) bool, right or wrong; the mean over seeds and
    sentences with its 95% interval over both (one row: one model, over the sentences)."""
    rows = _rows(correct)
    interval = uncertainty.over_seeds(rows, seed=seed)
    return {f"ch17_{key}_acc": interval.estimate, f"ch17_{key}_acc_ci": interval.range_text()}


def table(ranked: Mapping, higher: Mapping, *, model: str | None = None) -> pd.DataFrame:
    """The chapter's table: per model (``ranked``: model -> RankedTable), every method of :data:`METHODS`
    it has, each column's mean with its rank ("=" a shared rank), as Chapter 15's capstone table.
    ``model``: that model's table alone, one row per method and only its own columns (a table per model
    reads on a phone, where two models that share no column would fill half the cells with "n/a")."""
    if model is not None:
        if model not in ranked:
            raise ValueError(f"no model {model!r}; the models are {', '.join(ranked)}")
        ranked = {model: ranked[model]}
    methods = [m for m in METHODS if any(m in r.means.index for r in ranked.values())]
    cells = ch15.capstone_table(ranked, higher, methods=methods)
    return cells.droplevel("model") if model is not None else cells


def _rows(values) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    return array[None, :] if array.ndim == 1 else array


def _column_name(column: str) -> str:
    metric, _, task = column.partition(", ")
    return {"AP": "average precision against the rationale", "comprehensiveness AOPC": "comprehensiveness",
            "sufficiency AOPC": "sufficiency"}.get(metric, metric) + (f" ({task})" if task else "")


def beside_attention(columns: Mapping[str, Mapping[str, Any]], higher: Mapping[str, bool], *, model: str,
                     key: str, seed: int = 0) -> dict[str, Any]:
    """For one model (``columns``: column -> {method: (seeds, sentences) values}), each of Part V's
    methods against raw attention in every column, over seeds and sentences: better, worse, within noise
    or the seeds disagreeing, by the column's direction (``higher``). ``ch17_<key>_<column>``: one
    sentence per column; ``ch17_<key>_better``: how many (method, column) pairs are better."""
    if "attention" not in next(iter(columns.values())):
        raise ValueError("columns must hold raw attention's values to compare with")
    out, better = {}, 0
    for c, values in columns.items():
        found = {"better": [], "worse": [], "within noise": [], "disagree": []}
        for m in NEW:
            if m not in values:
                continue
            comparison = uncertainty.compare_over_seeds(_rows(values[m]), _rows(values["attention"]), seed=seed)
            word = comparison.says("better" if higher[c] else "worse", "worse" if higher[c] else "better",
                                   "within noise", "disagree")
            found[word].append(f"{m} ({comparison.seeds_text()})" if word in ("better", "worse") else m)
        better += len(found["better"])
        parts = [f"{listed(found[w])} {'is' if len(found[w]) == 1 else 'are'} {w} than raw attention"
                 if w in ("better", "worse") else
                 f"{listed(found[w])} {'is' if len(found[w]) == 1 else 'are'} within noise of it" if w == "within noise"
                 else f"on {listed(found[w])} the seeds disagree"
                 for w in ("better", "within noise", "worse", "disagree") if found[w]]
        short = c.split(",")[0].split()[0].lower()
        out[f"ch17_{key}_{short}"] = f"{_column_name(c)}: " + "; ".join(parts)
    out[f"ch17_{key}_better"] = better
    out[f"ch17_{key}_compared"] = sum(m in values for values in columns.values() for m in NEW)
    out[f"ch17_{key}_model"] = model
    return out


def at_random(columns: Mapping[str, Mapping[str, Any]], higher: Mapping[str, bool], *, key: str,
              seed: int = 0) -> dict[str, Any]:
    """Which of all the methods do not beat a random ranking in some column, over seeds and sentences
    (``ch17_<key>_floor``: a sentence)."""
    stuck = []
    for c, values in columns.items():
        for m in (*OLD, *NEW):
            if m not in values:
                continue
            comparison = uncertainty.compare_over_seeds(_rows(values[m]), _rows(values["random"]), seed=seed)
            if comparison.verdict != ("higher" if higher[c] else "lower"):
                stuck.append(f"{m} on {_column_name(c).split(' (')[0]}")
    text = ("every method beats it in every column" if not stuck
            else f"{listed(stuck)} {'does' if len(stuck) == 1 else 'do'} not beat it")
    return {f"ch17_{key}_floor": text}


def minilm_head(info: Mapping, correct, *, seed: int = 0) -> dict[str, Any]:
    """MiniLM's fitted head: its training accuracy (``info``: ``fit_head``'s), and its accuracy on the scored
    reviews (``correct``: one bool per review) with its 95% interval over the reviews."""
    return {"ch17_minilm_train_acc": float(info["train_accuracy"]), **accuracy(correct, key="minilm", seed=seed)}
