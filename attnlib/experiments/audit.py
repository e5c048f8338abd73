"""An attention audit of your own model: the book's battery in one call.

    from attnlib.audit import audit
    report = audit("path/to/bert-checkpoint", "reviews.csv", text="review", label="score")
    report.tables["faithfulness"]          # every explanation, ERASER's AOPC, ranks with ties
    attnlib.viz.plot_audit(report)         # the figure

:func:`audit` takes a model -- a :class:`~attnlib.models.PretrainedClassifier`, a local
BERT-family checkpoint directory, or any model of the book (a ``TrainedModel`` or its
``.model``) -- and data: your texts (a CSV / TSV / JSON / JSONL / Parquet path, a pandas
DataFrame, a Hugging Face ``datasets.Dataset`` or a dict of splits, read by
:func:`attnlib.data.load_texts`), or a :class:`~attnlib.data.Split` or
:class:`~attnlib.data.Batch` the model reads. It runs, on the same instances (a seeded
stratified subset of the test split):

=================  ==========================================================================
table              what it holds
=================  ==========================================================================
``summary``        accuracy, and one line per check, each with its 95% bootstrap interval over
                   the audited instances (a mean over heads: each instance's mean over the
                   heads, resampled by instance, since the instances are what was sampled)
``identifiability`` per head: the share of sentences whose head has a null space (Brunner
                   et al.: other attention rows give the same output), the mean null-space
                   dimension, and how far effective attention departs from raw attention
                   (:func:`~attnlib.experiments.identifiability.trace_statistics`);
                   transformers only (a one-layer classifier's values are its hidden states,
                   with no null space for a sentence shorter than the hidden size)
``permutation``    per head (one site for J&W's classifier): J&W's median TVD of the output
                   when the head's rows are permuted, with its interval, and the share of
                   permutations that flip the prediction
                   (:func:`~attnlib.experiments.counterfactual.permute_attention`)
``faithfulness``   every explanation that applies (:func:`~attnlib.experiments.explanations.explain`)
                   by ERASER's AOPC comprehensiveness (higher is better) and sufficiency
                   (lower is better), means with intervals and ranks with ties within noise
``plausibility``   where the data carry rationales (the synthetic task's): average precision
                   and ROC-AUC against them, ranked the same way
=================  ==========================================================================

A :class:`~attnlib.models.PretrainedClassifier` whose head has not been fitted gets it fitted
on the training split first (``fit_head=None``), so the audit explains a classifier, not a
random head. Your texts reach a pretrained model as their tokens joined by spaces (the
book's tokenizer splits punctuation and lowercases; an uncased WordPiece tokenizer then sees
the same words); plausibility needs rationales aligned to the model's tokens, so it is
reported for the book's models only.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from .. import runs
from .._checks import check_positive_int, check_seed
from ..data import Batch, Dataset, Split, load_texts
from ..models.protocol import check_token_model, eval_mode, model_name
from ..uncertainty import bootstrap, rank_columns
from .counterfactual import permute_attention
from .explanations import IG_STEPS, explain, plausibility_by_instance
from .faithfulness import faithfulness
from .identifiability import trace_statistics

__all__ = ["AuditReport", "audit"]

#: The traces of the identifiability check are taken this many sentences at a time.
_TRACE_ROWS = 32


@dataclass
class AuditReport:
    """What :func:`audit` found; ``tables`` maps a check's name to its table (see the module docstring).

    model: the model's name; n_instances: the audited instances; settings: how it ran;
    notes: what was left out and why; explanations, faithfulness_result: the raw results behind
    the tables (for figures and your own analysis).
    """

    model: str
    n_instances: int
    tables: dict
    notes: list
    settings: dict
    explanations: object = None
    faithfulness_result: object = None
    permutation: dict = field(default_factory=dict)

    def readable(self, name: str, digits: int = 3) -> pd.DataFrame:
        """Table ``name`` for reading: "mean [low, high]" cells (ranked tables add the rank, "=" a tie
        within noise), values rounded to ``digits``, "n/a" for a missing value."""
        if name not in self.tables:
            raise ValueError(f"no table {name!r}; the report has {', '.join(self.tables)}")
        table = self.tables[name]

        def cell(mean, low, high, rank=None):
            if not np.isfinite(mean):
                return "n/a"
            out = f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"
            return out + (f" ({rank})" if rank is not None else "")

        if name in ("faithfulness", "plausibility"):
            metrics = [c for c in table.columns if f"{c} low" in table.columns]
            direction = {"sufficiency": "lower"}
            return pd.DataFrame({f"{m} ({direction.get(m, 'higher')} is better)": [
                cell(r[m], r[f"{m} low"], r[f"{m} high"], r[f"{m} rank"]) for _, r in table.iterrows()]
                for m in metrics}, index=table.index)
        if name in ("summary", "permutation"):
            value = "mean" if name == "summary" else "median TVD"
            out = pd.DataFrame({f"{value} [95% interval]": [cell(r[value], r["low"], r["high"])
                                                           for _, r in table.iterrows()]}, index=table.index)
            rest = table.drop(columns=[value, "low", "high"])
            return out.join(rest.round(digits) if name == "permutation" else rest)
        return table.round(digits).fillna("n/a")

    def __repr__(self) -> str:
        return (f"AuditReport({self.model}, {self.n_instances} instances; tables: {', '.join(self.tables)}"
                + (f"; {len(self.notes)} note(s)" if self.notes else "") + ")")


# ----------------------------------------------------------------------------- inputs
def _resolve_model(model):
    if isinstance(model, (str, os.PathLike)):
        from ..models import PretrainedClassifier

        return PretrainedClassifier(model)
    inner = getattr(model, "model", None)
    if isinstance(inner, torch.nn.Module) and hasattr(model, "history"):  # a TrainedModel
        model = inner
    return check_token_model(model, "audit")


def _is_pretrained(model) -> bool:
    """A model that tokenizes texts itself (PretrainedClassifier, or a family with encode_texts)."""
    return callable(getattr(model, "encode_texts", None))


def _texts(split: Split) -> list[str]:
    return [" ".join(tokens) for tokens in split.tokens]


def _resolve_data(model, data, *, text, label, name, seed, notes):
    """(what the experiments run on, its rationales or None, the training texts and labels or None)."""
    pretrained = _is_pretrained(model)
    if isinstance(data, Batch):
        return data, None, None
    if isinstance(data, Dataset):
        train, data = data.train, data.test
    elif isinstance(data, Split):
        train = None
    else:
        ds = load_texts(data, text=text, label=label, name=name, seed=seed)
        if not pretrained:
            raise ValueError(
                "a model of the book reads its own vocabulary, not your texts': audit it on a Split of the data "
                "set it was trained on, or train one on your texts first (attnlib.train.train_model(load_texts(...)))"
            )
        train, data = ds.train, ds.test
    if not pretrained:
        return data, data.rationales, None
    if data.rationales is not None:
        notes.append("plausibility: the rationales mark the book's tokens, not the model's word pieces: left out")
    fit = (train.labels.tolist(), _texts(train)) if train is not None else None
    # index: the positions in the audited split (encode_texts numbers the texts 0 .. n - 1)
    return model.encode_texts(_texts(data), data.labels, max_tokens=model.config.max_length), None, fit


# ----------------------------------------------------------------------------- the checks
def _interval_columns(values: np.ndarray, seed: int) -> dict:
    iv = bootstrap(values, seed=seed)
    return {"mean": iv.estimate, "low": iv.low, "high": iv.high}


def _identifiability(model, batch: Batch, notes: list):
    """(the per-head table, (n,) each sentence's share of heads with a null space), or None."""
    if not (getattr(model, "rows_per_query", False) and callable(getattr(model, "trace", None))):
        notes.append("identifiability: the model has no stack of heads to trace (J&W's classifier: its values are "
                     "its hidden states, with no null space for a sentence shorter than the hidden size)")
        return None
    frames = []
    with torch.no_grad():
        for start in range(0, len(batch), _TRACE_ROWS):
            part = runs.take(batch, np.arange(start, min(start + _TRACE_ROWS, len(batch))))
            stats = trace_statistics(model.trace(part))
            stats["sentence"] += start  # the row of the audited batch, not of the part
            frames.append(stats)
    stats = pd.concat(frames, ignore_index=True)
    by_head = stats.groupby(["layer", "head"])
    table = pd.DataFrame({
        "sentences": by_head.size(),
        "null space (share)": by_head["null_dim"].apply(lambda d: float((d > 0).mean())),
        "null-space dim (mean)": by_head["null_dim"].mean(),
        "raw vs effective r (mean)": by_head["correlation"].mean(),
    })
    by_sentence = (stats["null_dim"] > 0).groupby(stats["sentence"]).mean()
    return table, by_sentence.sort_index().to_numpy(dtype=float)


def _permutation(model, batch: Batch, n_permutations: int, seed: int, max_instances, progress: bool):
    rows, per_site = [], {}
    sites = list(model.sites)
    from tqdm.auto import tqdm

    for site in tqdm(sites, desc="permuting heads", unit="head", disable=not progress or len(sites) < 2):
        res = permute_attention(model, batch, site=site, n_permutations=n_permutations, seed=seed,
                                max_instances=max_instances)
        per_site[site] = res
        flipped = float(np.mean(res.all_predicted != res.predicted[:, None])) if res.all_predicted is not None \
            else float("nan")
        rows.append({"layer": site.layer, "head": site.head, **_interval_columns(res.median_tvd, seed),
                     "flipped (share)": flipped})
    table = pd.DataFrame(rows).set_index(["layer", "head"])
    table.columns = ["median TVD", "low", "high", "flipped (share)"]
    return table, per_site


def _per_instance(per_site: dict, field: str) -> np.ndarray:
    """(sites, instances): a per-instance field of every site's permutation result; every site
    permutes the same instances (the same seeded subset)."""
    results = list(per_site.values())
    indices = np.asarray(results[0].indices)
    if any(not np.array_equal(np.asarray(r.indices), indices) for r in results):
        raise RuntimeError("the heads were permuted on different instances")
    return np.stack([np.asarray(getattr(r, field), dtype=np.float64) for r in results])


def _ranked(columns: dict, directions: dict, seed: int) -> pd.DataFrame:
    ranked = rank_columns(columns, directions, seed=seed)
    out = {}
    for column in columns:
        for method, values in columns[column].items():
            iv = bootstrap(values, seed=seed)
            out.setdefault(method, {})[column] = iv.estimate
            out[method][f"{column} low"] = iv.low
            out[method][f"{column} high"] = iv.high
            rank = ranked.ranks.at[method, column]
            out[method][f"{column} rank"] = f"{int(rank)}{'=' if ranked.tied.at[method, column] else ''}"
    frame = pd.DataFrame.from_dict(out, orient="index")
    frame.index.name = "method"
    return frame


# ----------------------------------------------------------------------------- the one call
def audit(
    model,
    data,
    *,
    text: str = "text",
    label: str = "label",
    name: str | None = None,
    max_instances: int | None = 64,
    n_permutations: int = 20,
    permutation_instances: int | None = None,
    seed: int = 0,
    ig_steps: int = IG_STEPS,
    methods=None,
    fit_head: bool | None = None,
    progress: bool = True,
) -> AuditReport:
    """The book's battery on one model and your data: one report (see the module docstring).

    Args:
        model: a :class:`~attnlib.models.PretrainedClassifier`, the path of a local BERT-family
            checkpoint, or a model of the book (``TrainedModel`` or its ``.model``).
        data: your texts (a file path, DataFrame, ``datasets.Dataset`` or dict of splits; read by
            :func:`attnlib.data.load_texts` with ``text``, ``label`` and ``name``; the test
            split is audited), a :class:`~attnlib.data.Dataset` (its test split), a
            :class:`~attnlib.data.Split`, or a Batch the model reads.
        max_instances: the audited instances, a seeded stratified subset (None: all).
        n_permutations: permutations per instance and head (J&W: 100).
        permutation_instances: permute on a seeded stratified subset of this many of the audited
            instances (None: all of them): every head of a pretrained model is a pass through the
            layers above it per instance and permutation, the audit's slowest step.
        seed: the subset, the permutations, the random ranking and the bootstrap.
        ig_steps: integrated gradients' steps. methods: the explanations (None: all that apply).
        fit_head: fit a PretrainedClassifier's head on the training split first (None: when it
            has not been fitted and the data have a training split).
        progress: progress bars for the long steps.
    """
    notes: list = []
    seed = check_seed(seed)
    n_permutations = check_positive_int(n_permutations, "n_permutations")
    if permutation_instances is not None:
        permutation_instances = check_positive_int(permutation_instances, "permutation_instances")
    if max_instances is not None:
        max_instances = check_positive_int(max_instances, "max_instances")
    if fit_head not in (None, True, False):
        raise ValueError(f"fit_head must be None, True or False, got {fit_head!r}")
    model = _resolve_model(model)
    source, rationales, train = _resolve_data(model, data, text=text, label=label, name=name, seed=seed,
                                              notes=notes)
    if _is_pretrained(model):
        fitted = bool(getattr(model, "head_fitted", False))
        want = (not fitted) if fit_head is None else fit_head
        if want and train is None:
            raise ValueError("fit_head: these data have no training split to fit the head on; give texts with one "
                             "(a file or DataFrame: load_texts splits it), or fit the head first (model.fit_head)")
        if want:
            labels, texts = train
            info = model.fit_head(texts, labels, seed=seed, progress=progress)
            notes.append(f"the head was fitted on {info['n']} training texts (train accuracy "
                         f"{info['train_accuracy']:.3f})")
        elif not fitted:
            notes.append("the head was never fitted (fit_head=False): the predictions explained are a random head's")

    result = explain(model, source, methods=methods, max_instances=max_instances, seed=seed, ig_steps=ig_steps)
    positions = result.indices
    batch = source.batch(positions) if isinstance(source, Split) else _rows_of(source, positions)
    correct = (result.predicted == result.labels).astype(np.float64)
    faith = faithfulness(model, source, result.by_position(), max_instances=max_instances, seed=seed)
    tables = {}
    summary = [{"check": "accuracy", **_interval_columns(correct, seed), "n": len(result)}]

    with eval_mode(model):
        ident = _identifiability(model, batch, notes)
    if ident is not None:
        ident, by_sentence = ident
        tables["identifiability"] = ident
        summary.append({"check": "sentences whose head has a null space (share; mean over heads)",
                        **_interval_columns(by_sentence, seed), "n": len(by_sentence)})
    perm, per_site = _permutation(model, batch, n_permutations, seed, permutation_instances, progress)
    tables["permutation"] = perm
    tvd = _per_instance(per_site, "median_tvd")  # (heads, instances): each instance's mean over the heads
    summary.append({"check": "output change when a head is permuted (median TVD; mean over heads)",
                    **_interval_columns(tvd.mean(0), seed), "n": tvd.shape[1]})
    aopc = {m: {"comprehensiveness": faith.aopc("comprehensiveness")[:, j],
                "sufficiency": faith.aopc("sufficiency")[:, j]} for j, m in enumerate(faith.measures)}
    tables["faithfulness"] = _ranked(
        {"comprehensiveness": {m: v["comprehensiveness"] for m, v in aopc.items()},
         "sufficiency": {m: v["sufficiency"] for m, v in aopc.items()}},
        {"comprehensiveness": True, "sufficiency": False}, seed)
    if rationales is not None:
        ap = plausibility_by_instance(result, rationales, "average precision")
        auc = plausibility_by_instance(result, rationales, "AUC")
        tables["plausibility"] = _ranked(
            {"average precision": {m: ap[m].to_numpy() for m in ap.columns},
             "AUC": {m: auc[m].to_numpy() for m in auc.columns}},
            {"average precision": True, "AUC": True}, seed)
    elif not any(n.startswith("plausibility") for n in notes):
        notes.append("plausibility: the data carry no rationales")
    tables = {"summary": pd.DataFrame(summary).set_index("check"), **tables}
    if len(result) < 10:
        warnings.warn(f"audit: only {len(result)} instances: the intervals are wide", stacklevel=2)
    return AuditReport(
        model=model_name(model), n_instances=len(result), tables=tables, notes=notes,
        settings={"max_instances": max_instances, "n_permutations": n_permutations,
                  "permutation_instances": permutation_instances, "seed": seed,
                  "ig_steps": ig_steps, "methods": result.methods},
        explanations=result, faithfulness_result=faith, permutation=per_site)


def _rows_of(batch: Batch, positions: np.ndarray) -> Batch:
    """The rows of ``batch`` whose ``index`` is in ``positions``, in that order (:func:`attnlib.runs.take`)."""
    where = {int(i): r for r, i in enumerate(batch.index.tolist())}
    return runs.take(batch, [where[int(p)] for p in positions])
