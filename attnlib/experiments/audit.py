"""An attention audit of your own model: the book's battery in one call.

    from attnlib.audit import audit
    report = audit("path/to/bert-checkpoint", "reviews.csv", text="review", label="score")
    report.tables["faithfulness"]          # every explanation, ERASER's AOPC, ranks with ties
    attnlib.viz.plot_audit(report)         # the figure

:func:`audit` takes a model -- your fine-tuned classifier (a local folder saved as a
BERT-family ``…ForSequenceClassification``, or that model loaded), a
:class:`~attnlib.models.PretrainedClassifier`, an encoder-only checkpoint folder, or any model
of the book (a ``TrainedModel`` or its ``.model``) -- and data: your texts (a CSV / TSV / JSON /
JSONL / Parquet path, a pandas DataFrame, a Hugging Face ``datasets.Dataset`` or a dict of
splits), or a :class:`~attnlib.data.Split` or :class:`~attnlib.data.Batch` the model reads.

**Your model as you use it.** A classifier checkpoint is audited with its own head (its
pooling, its ``num_labels``, its label names) and its own tokenizer, on your texts exactly as
given (:func:`attnlib.data.read_texts`: no lowercasing, no rewriting), every one of them
(``max_instances`` draws a seeded stratified subset instead). Labels that are the checkpoint's
label names map by name, integers pass as they are, other strings map in sorted order (the
notes say so); the data must have as many classes as the model. Only an encoder without a
head (MiniLM's package, a ``BertModel`` folder) gets a head fitted (logistic regression on the
mean-pooled states) on a seeded stratified half of the texts, and the other half is audited:
the report's first note says so. Texts longer than the model's limit are an error unless
``max_tokens`` crops them; the notes count the cropped texts and by how much. With more than
two classes every check reads the predicted class: faithfulness as ERASER does (the predicted
class's probability), the permutation check by the TVD of the whole output distribution and
the share of flipped predictions. A model of the book reads a Split of its own data set.

It runs, on the same instances:

=================  ==========================================================================
table              what it holds
=================  ==========================================================================
``summary``        accuracy (with Wilson's interval), and one line per check, each with its 95%
                   bootstrap interval over the audited instances (a mean over heads: each
                   instance's mean over the heads, resampled by instance, since the instances
                   are what was sampled); none where one value or only equal values leave a
                   bootstrap nothing to resample
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
                   (lower is better), means with intervals and ranks with ties (the pairwise
                   tests Holm-corrected, as Chapter 12 corrects its per-head tests) within noise
``plausibility``   where the data carry rationales (the synthetic task's): average precision
                   and ROC-AUC against them, ranked the same way
=================  ==========================================================================

Plausibility needs rationales aligned to the model's tokens, so it is reported for the book's
models only. A book data set (a Split) has no raw text: it reaches a pretrained model as its
tokens joined by spaces, and the notes say so.
"""
from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from .. import runs
from .._checks import check_positive_int, check_seed
from ..data import Batch, Dataset, Split, read_texts, stratified_positions
from ..models.protocol import check_token_model, eval_mode, has_capability, model_name
from ..uncertainty import bootstrap, proportion, rank_columns
from .counterfactual import permute_attention
from .explanations import IG_STEPS, REGISTRY, explain, plausibility_by_instance
from .faithfulness import faithfulness
from .identifiability import trace_statistics

__all__ = ["AuditReport", "audit"]

#: The traces of the identifiability check are taken this many sentences at a time.
_TRACE_ROWS = 32
#: Integrated gradients' completeness gap (in probability of the predicted class: five points,
#: a tenth of the largest move a binary prediction can make from 0.5) above which a text's
#: attribution counts as unconverged; ``ig_steps=None`` doubles the steps from
#: :data:`IG_STEPS` until at most :data:`IG_UNCONVERGED_SHARE` of the texts are above it, or
#: :data:`IG_MAX_STEPS` is reached (then the notes flag the method).
IG_TOLERANCE = 0.05
IG_UNCONVERGED_SHARE = 0.1
IG_MAX_STEPS = 128
_IG = "integrated gradients"
#: The defaults' audited texts: about two minutes for MiniLM on two CPU cores (issue 49's budget);
#: ``max_instances=None`` audits every text, and the notes say what that adds.
DEFAULT_INSTANCES = 48


@dataclass
class AuditReport:
    """What :func:`audit` found; ``tables`` maps a check's name to its table (see the module docstring).

    model: the model's name; n_instances: the audited instances; settings: how it ran;
    notes: what was left out and why; explanations, faithfulness_result: the raw results behind
    the tables (for figures and your own analysis); texts: your audited texts as given (None for
    a Split or Batch), in the order of the audited batch (``explanations.indices`` index it).
    """

    model: str
    n_instances: int
    tables: dict
    notes: list
    settings: dict
    explanations: object = None
    faithfulness_result: object = None
    permutation: dict = field(default_factory=dict)
    texts: list | None = None
    tokenizer: object = field(default=None, repr=False)

    def word_scores(self, row: int) -> pd.DataFrame:
        """Row ``row`` of the explanations (0 .. n_instances - 1) as the words of your text: one
        row per word as written, one column per method. The rule: a word's score is the **sum**
        of its word pieces' scores (attributions add up over the pieces of a word, and so does
        attention mass); a word cropped away by ``max_tokens`` is left out.
        """
        if self.texts is None or self.tokenizer is None or self.explanations is None:
            raise ValueError("word scores need the texts you audited (a file, DataFrame or Dataset of texts)")
        result = self.explanations
        if isinstance(row, bool) or not isinstance(row, (int, np.integer)) or not 0 <= row < len(result):
            raise ValueError(f"row must be an int in 0..{len(result) - 1}, got {row!r}")
        text = self.texts[int(np.asarray(result.indices)[row])]
        limit = self.settings.get("max_tokens")
        encoding = self.tokenizer(text, add_special_tokens=True, truncation=limit is not None, max_length=limit)
        words = encoding.word_ids()[1:-1]  # the real pieces, without [CLS] and [SEP]
        order = list(dict.fromkeys(w for w in words if w is not None))
        spans = [encoding.word_to_chars(w) for w in order]
        out = {}
        for method in result.methods:
            pieces = np.asarray(result.scores[method][row], dtype=np.float64)
            if len(pieces) != len(words):
                raise RuntimeError("the explanation's pieces do not match the tokenizer's")
            out[method] = [float(pieces[[j for j, w in enumerate(words) if w == word]].sum()) for word in order]
        return pd.DataFrame(out, index=pd.Index([text[a:b] for a, b in spans], name="word"))

    def readable(self, name: str, digits: int = 3) -> pd.DataFrame:
        """Table ``name`` for reading: "mean [low, high]" cells (ranked tables add the rank, "=" a tie
        within noise), values rounded to ``digits``, "n/a" for a missing value."""
        if name not in self.tables:
            raise ValueError(f"no table {name!r}; the report has {', '.join(self.tables)}")
        table = self.tables[name]

        def cell(mean, low, high, rank=None):
            if not np.isfinite(mean):
                return "n/a"
            if not (np.isfinite(low) and np.isfinite(high)):
                out = f"{mean:.{digits}f} (no interval: one value, or all equal)"
            else:
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
def _resolve_model(model, tokenizer, n_classes=None):
    if isinstance(model, (str, os.PathLike)) or type(model).__name__.endswith("ForSequenceClassification"):
        from ..models import PretrainedClassifier

        return PretrainedClassifier(model, tokenizer=tokenizer, n_classes=n_classes)
    if tokenizer is not None:
        raise ValueError("tokenizer= goes with a checkpoint folder or a loaded transformers classifier")
    inner = getattr(model, "model", None)
    if isinstance(inner, torch.nn.Module) and hasattr(model, "history"):  # a TrainedModel
        model = inner
    return check_token_model(model, "audit")


def _is_pretrained(model) -> bool:
    """A model that tokenizes texts itself (PretrainedClassifier, or a family with encode_texts)."""
    return callable(getattr(model, "encode_texts", None))


def _is_table(data) -> bool:
    return not isinstance(data, (Batch, Dataset, Split))


def _texts(split: Split) -> list[str]:
    return [" ".join(tokens) for tokens in split.tokens]


def _label_codes(values, model, notes: list) -> np.ndarray:
    """Your label column as the model's class ids (module docstring), checked against its classes."""
    names = tuple(getattr(model.config, "labels", ()) or ())
    C = int(model.n_classes)
    values = list(values)
    integral = all(isinstance(v, (int, np.integer, bool, np.bool_)) or
                   (isinstance(v, (float, np.floating)) and float(v).is_integer()) for v in values)
    if integral:
        codes = np.asarray([int(v) for v in values], dtype=np.int64)
        seen = sorted(set(codes.tolist()))
    else:
        text = [str(v) for v in values]
        seen_names = sorted(set(text))
        if names and set(seen_names) <= set(names):
            order = list(names)
        else:
            order = seen_names
            notes.append("labels: " + ", ".join(f"{v!r} -> {k}" for k, v in enumerate(order)) + " (sorted order"
                         + (f"; the checkpoint names its labels {', '.join(names)}" if names else "") + ")")
        codes = np.asarray([order.index(t) for t in text], dtype=np.int64)
        seen = sorted(set(codes.tolist()))
    if len(seen) != C or seen[0] < 0 or seen[-1] >= C:
        said = f" ({', '.join(names)})" if names else ""
        raise ValueError(
            f"the model has {C} classes{said}, and your data's label column holds {len(seen)} "
            f"({', '.join(map(str, sorted(set(map(str, values)))[:8]))}): audit it on data of its {C} classes"
            + ("" if names else f", or build the model with n_classes={len(seen)}"))
    return codes


def _split_for_head(labels: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(fit, audited) positions: a seeded stratified half to fit a head on, and the rest."""
    fit = stratified_positions(labels, len(labels) // 2, np.random.default_rng(seed))
    return fit, np.setdiff1d(np.arange(len(labels)), fit)


def _cropped_note(model, texts: list, max_tokens: int) -> str | None:
    lengths = np.fromiter((len(ids) for ids in model.tokenizer(texts, add_special_tokens=True, truncation=False,
                                                               verbose=False)["input_ids"]), dtype=np.int64)
    over = lengths[lengths > max_tokens]
    if not len(over):
        return None
    cut = over - max_tokens
    return (f"{len(over)} of {len(texts)} texts were longer than max_tokens = {max_tokens} word pieces ([CLS] and "
            f"[SEP] included) and were cropped to it: by a median of {int(np.median(cut))} pieces, at most "
            f"{int(cut.max())}; the audit explains the cropped texts, as the model read them")


def _pretrained_texts(model_arg, data, *, text, label, tokenizer, fit_head, max_tokens, seed, notes):
    """(model, the audited Batch, the fitting texts and labels or None) for texts of your own."""
    raw = read_texts(data, text=text, label=label)
    if raw.n_missing:
        notes.append(f"{raw.n_missing} of the {raw.n_rows} rows had no text (missing or blank) and were dropped")
    model = model_arg
    if not _is_pretrained(model):
        model = _resolve_model(model_arg, tokenizer)
        if getattr(model, "config", None) is not None and model.config.head == "fitted" and not model.head_fitted:
            k = len(set(map(str, raw.labels)))
            if k != model.n_classes:
                model = _resolve_model(model_arg, tokenizer, n_classes=k)
    codes = _label_codes(raw.labels, model, notes)
    texts = list(raw.texts)
    limit = model.config.max_length
    if max_tokens is not None:
        max_tokens = check_positive_int(max_tokens, "max_tokens", minimum=3)
        if max_tokens > limit:
            raise ValueError(f"max_tokens {max_tokens} exceeds the model's limit of {limit} tokens")
        said = _cropped_note(model, texts, max_tokens)
        if said:
            notes.append(said)
    fitted = bool(getattr(model, "head_fitted", False))
    want = (not fitted) if fit_head is None else fit_head
    head = getattr(model.config, "head", "fitted")
    if want and head == "checkpoint":
        raise ValueError("fit_head=True: this checkpoint has its own classifier head, which the audit explains as it "
                         "is; to fit a new one instead, pass PretrainedClassifier(path, head='fit')")
    if want:
        fit, audited = _split_for_head(codes, seed)
        notes.insert(0, f"the model has no classifier head: a logistic head on the mean-pooled states is fitted on a "
                        f"seeded stratified half of your texts ({len(fit)}), and the other {len(audited)} are audited")
        train = ([texts[i] for i in fit], codes[fit])
    else:
        audited, train = np.arange(len(texts)), None
        if head == "checkpoint":
            kind = type(model.checkpoint).__name__
            notes.insert(0, f"the checkpoint's own head ({kind}, {model.n_classes} labels: "
                            f"{', '.join(model.config.labels)}) and tokenizer are audited as they are, "
                            f"on your {len(texts)} texts as given")
        elif not fitted:
            notes.insert(0, "the head was never fitted (fit_head=False): the predictions explained are a random head's")
    kept = [texts[i] for i in audited]
    return model, model.encode_texts(kept, codes[audited], max_tokens=max_tokens), train, kept


def _resolve_data(model, data, notes):
    """(what the experiments run on, its rationales or None, the training texts and labels or None)
    for a Batch, a Split or a Dataset of the book."""
    if isinstance(data, Batch):
        return data, None, None
    if isinstance(data, Dataset):
        train, data = data.train, data.test
    else:
        train = None
    if not _is_pretrained(model):
        return data, data.rationales, None
    notes.append("a data set of the book keeps no raw text: its tokens reach the model joined by spaces")
    if data.rationales is not None:
        notes.append("plausibility: the rationales mark the book's tokens, not the model's word pieces: left out")
    fit = (_texts(train), train.labels) if train is not None else None
    # index: the positions in the audited split (encode_texts numbers the texts 0 .. n - 1)
    return model.encode_texts(_texts(data), data.labels, max_tokens=model.config.max_length), None, fit


# ----------------------------------------------------------------------------- the checks
def _interval_columns(values: np.ndarray, seed: int) -> dict:
    """The mean and its 95% bootstrap interval; no interval (NaN) from fewer than two values or
    from values that are all equal, where a percentile bootstrap is degenerate."""
    values = np.asarray(values, dtype=np.float64)
    finite = values[np.isfinite(values)]
    if len(finite) < 2 or np.ptp(finite) == 0:
        return {"mean": float(finite.mean()) if len(finite) else float("nan"), "low": float("nan"),
                "high": float("nan")}
    iv = bootstrap(values, seed=seed)
    return {"mean": iv.estimate, "low": iv.low, "high": iv.high}


def _accuracy_columns(correct: np.ndarray) -> dict:
    """An accuracy with Wilson's interval, valid at 0 and at n (a bootstrap is not)."""
    iv = proportion(int(correct.sum()), len(correct))
    return {"mean": iv.estimate, "low": iv.low, "high": iv.high}


def _identifiability(model, batch: Batch, notes: list):
    """(the per-head table, (n,) each sentence's share of heads with a null space), or None."""
    if not has_capability(model, "layered"):
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
    ranked = rank_columns(columns, directions, seed=seed, correction="holm")
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
    tokenizer=None,
    max_instances: int | None = DEFAULT_INSTANCES,
    max_tokens: int | None = None,
    n_permutations: int = 5,
    permutation_instances: int | None = 16,
    seed: int = 0,
    ig_steps: int | None = None,
    methods=None,
    explanations=None,
    fit_head: bool | None = None,
    progress: bool = True,
) -> AuditReport:
    """The book's battery on one model and your data: one report (see the module docstring).

    Args:
        model: your classifier checkpoint (a local folder of a BERT-family
            ``…ForSequenceClassification``, or that model loaded: pass ``tokenizer=`` when it
            was not loaded from a folder), a :class:`~attnlib.models.PretrainedClassifier`, an
            encoder-only checkpoint folder (a head is fitted), or a model of the book
            (``TrainedModel`` or its ``.model``).
        data: your texts (a file path, DataFrame, ``datasets.Dataset`` or dict of splits, read
            as given by :func:`attnlib.data.read_texts` with ``text`` and ``label``; every
            text is audited), or, for a model of the book, a :class:`~attnlib.data.Dataset` (its
            test split), a :class:`~attnlib.data.Split`, or a Batch the model reads.
        name: unused (kept for older calls). tokenizer: the tokenizer of a loaded model.
        max_instances: audit a seeded stratified subset of this many texts (None: all; the
            default keeps a run near two minutes on two CPU cores, and the notes say what
            auditing every text would add).
        max_tokens: crop longer texts to this many word pieces ([CLS] and [SEP] included); the
            notes count them. Without it a text over the model's limit is an error.
        n_permutations: permutations per instance and head (J&W: 100).
        permutation_instances: permute on a seeded stratified subset of this many of the audited
            instances (None: all of them): every head of a pretrained model is a pass through the
            layers above it per instance and permutation, the audit's slowest step.
        seed: the subsets, the permutations, the random ranking and the bootstrap.
        ig_steps: integrated gradients' steps; None: chosen by the completeness gap (from
            :data:`~attnlib.experiments.explanations.IG_STEPS`, doubled while more than
            :data:`IG_UNCONVERGED_SHARE` of the texts have a gap above :data:`IG_TOLERANCE`, up
            to :data:`IG_MAX_STEPS`); the notes give the gap's distribution either way.
        methods: the built-in explanations (None: Chapter 15's battery, those that apply;
            ``"all"``: Part V's too; or a list of names).
        explanations: explanations computed elsewhere (captum, SHAP, ferret, inseq, by hand), scored
            on the same yardsticks and shown in the same tables: ``{name: one array per text}``, in
            the order the audit reads the texts (a table's rows that have a text; a Split's or
            Batch's instances). Each array scores one text's tokens as the model reads them: one
            value per word piece between [CLS] and [SEP] (or per position, [CLS] and [SEP]
            included: those two are dropped); higher means more important, and only the order
            counts (pass absolute values for signed attributions if that is what you mean).
        fit_head: fit a PretrainedClassifier's head first (None: when it has no head of its
            own and none was fitted; True with a checkpoint's own head is an error).
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
    model, source, rationales, audited_texts = _prepare(
        model, data, text=text, label=label, tokenizer=tokenizer, fit_head=fit_head, max_tokens=max_tokens,
        max_instances=max_instances, seed=seed, progress=progress, notes=notes)

    if ig_steps is not None:
        ig_steps = check_positive_int(ig_steps, "ig_steps")
    from tqdm.auto import tqdm

    steps = tqdm(total=3, desc="audit: explanations", unit="step", disable=not progress)
    result = explain(model, source, methods=methods, max_instances=max_instances, seed=seed,
                     ig_steps=ig_steps or IG_STEPS)
    ig_steps = _converge_ig(model, source, result, ig_steps, max_instances, seed, notes)
    _add_explanations(result, explanations, source, model)
    positions = result.indices
    batch = source.batch(positions) if isinstance(source, Split) else _rows_of(source, positions)
    correct = (result.predicted == result.labels).astype(np.float64)
    steps.update()
    steps.set_description("audit: faithfulness")
    faith = faithfulness(model, source, result.by_position(), max_instances=max_instances, seed=seed)
    steps.update()
    steps.set_description("audit: identifiability")
    tables = {}
    summary = [{"check": "accuracy", **_accuracy_columns(correct), "n": len(result)}]

    with eval_mode(model):
        ident = _identifiability(model, batch, notes)
    steps.update()
    steps.close()
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
    tables.update(_explanation_tables(faith, result, rationales, seed, notes))
    tables = {"summary": pd.DataFrame(summary).set_index("check"), **tables}
    if len(result) < 10:
        warnings.warn(f"audit: only {len(result)} instances: the intervals are wide", stacklevel=2)
    config = getattr(model, "config", None)
    described = config.to_dict() if callable(getattr(config, "to_dict", None)) else {}
    return AuditReport(
        model=model_name(model), n_instances=len(result), tables=tables, notes=notes,
        settings={"max_instances": max_instances, "n_permutations": n_permutations,
                  "permutation_instances": permutation_instances, "seed": seed,
                  "ig_steps": ig_steps, "methods": result.methods, "max_tokens": max_tokens,
                  "model": described},
        explanations=result, faithfulness_result=faith, permutation=per_site, texts=audited_texts,
        tokenizer=getattr(model, "tokenizer", None) if audited_texts is not None else None)


def _prepare(model, data, *, text, label, tokenizer, fit_head, max_tokens, max_instances, seed, progress, notes):
    """The model and the instances the audit reads (its head fitted first where it has to be), the data's
    rationales (or None) and the texts as given (or None, for a model of the book); ``notes`` gets what a
    reader should know about each choice."""
    rationales, audited_texts = None, None
    if _is_table(data):
        if not (_is_pretrained(model) or isinstance(model, (str, os.PathLike))
                or type(model).__name__.endswith("ForSequenceClassification")):
            raise ValueError(
                "a model of the book reads its own vocabulary, not your texts': audit it on a Split of the data "
                "set it was trained on, or train one on your texts first (attnlib.train.train_model(load_texts(...)))"
            )
        model, source, train, audited_texts = _pretrained_texts(
            model, data, text=text, label=label, tokenizer=tokenizer, fit_head=fit_head, max_tokens=max_tokens,
            seed=seed, notes=notes)
    else:
        if max_tokens is not None:
            raise ValueError("max_tokens crops your texts; with a Split or Batch the model reads them as they are")
        model = _resolve_model(model, tokenizer)
        source, rationales, train = _resolve_data(model, data, notes)
        if _is_pretrained(model):
            fitted = bool(getattr(model, "head_fitted", False))
            want = (not fitted) if fit_head is None else fit_head
            if want and train is None:
                raise ValueError("fit_head: these data have no training split to fit the head on; give texts (a "
                                 "file or DataFrame), or fit the head first (model.fit_head)")
            if not want and not fitted:
                notes.insert(0, "the head was never fitted (fit_head=False): the predictions explained are a "
                                "random head's")
            elif not want:
                train = None
    if train is not None:
        texts, labels = train
        info = model.fit_head(list(texts), np.asarray(labels), seed=seed, progress=progress)
        notes.insert(1 if notes and notes[0].startswith("the model has no") else 0,
                     f"the head was fitted on {info['n']} texts (train accuracy {info['train_accuracy']:.3f})")
    if max_instances is not None and max_instances < len(source):
        n = len(source)
        notes.append(f"audited: a seeded stratified subset of {max_instances} of the {n} texts; max_instances=None "
                     f"audits all {n}, with intervals about {np.sqrt(n / max_instances):.1f} times narrower at "
                     f"about {n / max_instances:.1f} times the cost")
    return model, source, rationales, audited_texts


def _explanation_tables(faith, result, rationales, seed: int, notes: list) -> dict:
    """The faithfulness table (ERASER's AOPC comprehensiveness and sufficiency, ranked with intervals) and,
    where the data carry rationales, the plausibility table."""
    tables = {}
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
    return tables


def _word_counts(source, pad_id: int) -> np.ndarray:
    """How many words (word pieces between the start and end tokens) each instance of ``source`` has."""
    if isinstance(source, Split):
        return np.asarray([len(ids) - 2 for ids in source.ids], dtype=np.int64)
    return ((source.tokens != pad_id).sum(-1) - 2).cpu().numpy().astype(np.int64)


def _add_explanations(result, explanations, source, model) -> None:
    """``explanations`` (see :func:`audit`) checked and put beside the built-in methods in ``result``, for
    the audited instances; a ValueError says what does not fit."""
    if explanations is None:
        return
    if not isinstance(explanations, Mapping) or not explanations:
        raise ValueError("explanations must be a dict {name: one array of scores per text}, got "
                         f"{type(explanations).__name__}")
    words = _word_counts(source, model.pad_id)
    for name, arrays in explanations.items():
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"explanations: each name must be a non-empty str, got {name!r}")
        if name in result.methods or name in REGISTRY:
            raise ValueError(f"explanations: {name!r} is the name of a built-in method; call yours something else")
        if isinstance(arrays, (str, bytes)) or not hasattr(arrays, "__len__"):
            raise ValueError(f"explanations[{name!r}] must hold one array per text, got {type(arrays).__name__}")
        if len(arrays) != len(words):
            raise ValueError(f"explanations[{name!r}] has {len(arrays)} arrays, but the audit reads {len(words)} texts "
                             "(a table's rows without a text are left out: give no array for them)")
        result.scores[name] = [_words_of(arrays[int(p)], int(words[int(p)]), name, int(p))
                               for p in np.asarray(result.indices).tolist()]
        result.methods = (*result.methods, name)


def _words_of(scores, n_words: int, name: str, text: int) -> np.ndarray:
    """One text's external scores over its words: checked, [CLS] and [SEP] dropped when given."""
    try:
        values = np.asarray(scores.detach().cpu() if hasattr(scores, "detach") else scores, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"explanations[{name!r}][{text}] must be numbers, got {type(scores).__name__}") from None
    if values.ndim != 1:
        raise ValueError(f"explanations[{name!r}][{text}] must be one score per token (1-D), got shape {values.shape}")
    if not np.isfinite(values).all():
        raise ValueError(f"explanations[{name!r}][{text}] holds NaN or infinite scores")
    if len(values) == n_words + 2:
        values = values[1:-1]
    elif len(values) != n_words:
        raise ValueError(f"explanations[{name!r}][{text}] has {len(values)} scores, but the model reads text {text} as "
                         f"{n_words} word pieces ({n_words + 2} with the start and end tokens): score the tokens the "
                         "model's own tokenizer makes")
    return values


def _unconverged(delta: np.ndarray) -> float:
    return float(np.mean(delta > IG_TOLERANCE))


def _converge_ig(model, source, result, ig_steps, max_instances, seed, notes) -> int | None:
    """Integrated gradients with enough steps (``ig_steps=None``), in place in ``result``; a note
    with the completeness gap's distribution. The steps used (None when IG did not run)."""
    if _IG not in result.methods:
        return None
    steps = ig_steps or IG_STEPS
    while ig_steps is None and _unconverged(result.ig_delta) > IG_UNCONVERGED_SHARE and steps < IG_MAX_STEPS:
        steps *= 2
        again = explain(model, source, methods=[_IG], max_instances=max_instances, seed=seed, ig_steps=steps)
        if not np.array_equal(np.asarray(again.indices), np.asarray(result.indices)):
            raise RuntimeError("integrated gradients ran on other instances than the other methods")
        result.scores[_IG] = again.scores[_IG]
        result.ig_delta = again.ig_delta
    delta = np.asarray(result.ig_delta, dtype=np.float64)
    share = _unconverged(delta)
    said = (f"integrated gradients at {steps} steps: completeness gap median {np.median(delta):.4f}, 90th "
            f"percentile {np.quantile(delta, 0.9):.4f}, largest {delta.max():.4f} (probability of the predicted "
            f"class); {share:.0%} of the texts above {IG_TOLERANCE}")
    if share > IG_UNCONVERGED_SHARE:
        said += (f": unconverged on more than {IG_UNCONVERGED_SHARE:.0%} of the texts, so read its ranks with care "
                 f"(raise ig_steps)")
    notes.append(said)
    return steps


def _rows_of(batch: Batch, positions: np.ndarray) -> Batch:
    """The rows of ``batch`` whose ``index`` is in ``positions``, in that order (:func:`attnlib.runs.take`)."""
    where = {int(i): r for r, i in enumerate(batch.index.tolist())}
    return runs.take(batch, [where[int(p)] for p in positions])
