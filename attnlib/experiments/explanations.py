"""Every explanation the book has met, for one model, over the same instances (Chapter 15).

:func:`explain` scores every real token of a split's instances by each method that applies to
the model, so that one set of instances can be judged by plausibility (against a known
rationale: :func:`plausibility`) and by faithfulness
(:func:`attnlib.experiments.faithfulness.faithfulness`, which takes
:meth:`ExplanationResult.by_position` as its ``scores``):

========================  =================================================================
method                    what it is
========================  =================================================================
attention                 J&W's alpha; the transformer's last-layer [CLS] row averaged over
                          its heads, cut to the words and renormalised (as
                          :func:`~attnlib.experiments.importance.importance`)
effective attention       the same row of Brunner et al.'s effective attention
                          (:func:`~attnlib.experiments.identifiability.effective_attention`,
                          last layer, heads averaged, cut to the words, not renormalised: it
                          can be negative); transformer only
rollout, flow             Abnar & Zuidema's [CLS] row after the last layer
                          (:func:`~attnlib.experiments.flow.rollout_cls`,
                          :func:`~attnlib.experiments.flow.flow_cls`); transformer only
gradient × input          |<d y-hat / d e_t, e_t>|, normalised (J&W's gradient importance,
                          :func:`~attnlib.experiments.importance.gradient_importance`)
integrated gradients      |sum over the embedding of captum's integrated gradients| on the
                          word embeddings, from the zero embedding (the <PAD> row) at every
                          word to the sentence, :data:`IG_STEPS` Gauss-Legendre steps, for
                          the predicted class, normalised (:func:`integrated_gradients`)
leave-one-out             J&W's TVD of the output when the word is deleted
random                    a seeded uniform score per token (the floor)
========================  =================================================================

Where a method does not apply to a model (:func:`applies`) its scores are absent and the
book's tables say "n/a". For J&W's one-layer classifiers there is no stack of layers to roll
out, and their effective attention is alpha itself: the values are the hidden states h_t,
and a sentence shorter than the hidden size (every one here) leaves no null space.

Every method except effective attention is non-negative, and the scores rank the tokens
(higher = more important); only the order matters to every metric here.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from .. import _runs
from .._checks import check_positive_int
from .._runs import InstanceResult
from ..data import Split
from ..models.protocol import check_token_model, device_of, model_name, word_mask
from .faithfulness import rationale_ranking
from .flow import flow_cls, rollout_cls
from .identifiability import effective_attention
from .importance import importance

__all__ = [
    "METHODS",
    "IG_STEPS",
    "applies",
    "methods_for",
    "ExplanationResult",
    "explain",
    "integrated_gradients",
    "plausibility",
    "plausibility_by_instance",
]

#: Every explanation of Chapter 15, in the order of its tables.
METHODS = (
    "attention",
    "effective attention",
    "rollout",
    "flow",
    "gradient × input",
    "integrated gradients",
    "leave-one-out",
    "random",
)
_TRANSFORMER_ONLY = frozenset({"effective attention", "rollout", "flow"})

#: Integrated gradients' step count (captum's Gauss-Legendre rule).
IG_STEPS = 16

_STREAM_RANDOM = 15  # the random ranking's stream of attnlib._runs.instance_uniform
_ROWS = 64
_BUDGET = 2**24
_IG_TOKENS = 2**13  # interpolated rows x tokens per forward pass of integrated gradients
# ... and at most this many elements (rows x the model's token_cost): a pretrained model's layers are
# wider than the book's, and 2**13 of its tokens with gradients took 0.9 GB (MiniLM)
_IG_BUDGET = 2**25


def _check_model(model):
    return check_token_model(model, "explain")


def _has_layers(model) -> bool:
    """A stack of attention layers with a row per query and a :meth:`trace` (both transformer families)."""
    return bool(getattr(model, "rows_per_query", False)) and callable(getattr(model, "trace", None))


def applies(model, method: str) -> bool:
    """Whether ``method`` (one of :data:`METHODS`) applies to ``model``.

    Rollout, flow and effective attention need a stack of layers and heads the model can
    :meth:`trace` (the transformers); every other method needs only the token-level protocol.
    """
    _check_model(model)
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    return _has_layers(model) or method not in _TRANSFORMER_ONLY


def methods_for(model) -> tuple:
    """The methods of :data:`METHODS` that apply to ``model``, in order."""
    return tuple(m for m in METHODS if applies(model, m))


@dataclass(kw_only=True)
class ExplanationResult(InstanceResult):
    """Output of :func:`explain`; row i is instance ``indices[i]`` of the split.

    scores:   {method: list of (n_i,) float64 arrays}, one score per real token (no <SOS>/<EOS>).
    ig_delta: (N,) integrated gradients' completeness gap, |sum of attributions - (y-hat(x) -
              y-hat(baseline))| for the predicted class (captum's convergence delta); NaN
              when integrated gradients was not asked for.
    """

    methods: tuple
    scores: dict
    ig_delta: np.ndarray
    settings: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"ExplanationResult({len(self)} instances; {', '.join(self.methods)})"

    def by_position(self) -> dict:
        """{method: {split position: scores}}: the ``scores`` mapping of
        :func:`~attnlib.experiments.faithfulness.faithfulness`."""
        positions = self.indices.tolist()
        return {m: dict(zip(positions, self.scores[m])) for m in self.methods}

    def padded(self, method: str) -> np.ndarray:
        """One method's scores as an (N, n_max) array, 0 past each instance's words."""
        if method not in self.scores:
            raise ValueError(f"method {method!r} is not in this result; it has {', '.join(self.methods)}")
        out = np.zeros((len(self), int(self.lengths.max()) if len(self) else 0))
        for i, s in enumerate(self.scores[method]):
            out[i, : len(s)] = s
        return out


def _rows_over_words(values: torch.Tensor, words: torch.Tensor, normalise: bool) -> list:
    """(B, T) over every position -> per instance an (n,) float64 array over its words."""
    values = values.double().cpu()
    words = words.cpu()
    if normalise:
        values = values.masked_fill(~words, 0.0)
        total = values.sum(-1, keepdim=True)
        values = values / torch.where(total > 0, total, torch.ones_like(total))
    lengths = words.sum(-1).tolist()
    flat = values[words].cpu().numpy()
    return np.split(flat, np.cumsum(lengths)[:-1])


def _ig_rows(model, T: int) -> int:
    """Interpolated rows per forward pass: 2**13 tokens, fewer where the model's cost would pass the budget."""
    return max(1, min(_IG_TOKENS // T, _IG_BUDGET // max(1, model.token_cost(T))))


def integrated_gradients(model, tokens: torch.Tensor, *, steps: int = IG_STEPS, target=None):
    """Integrated gradients of every token, (attributions (B, T), convergence delta (B,)).

    captum's ``IntegratedGradients`` on the token embeddings e_t = ``model.embed_tokens(tokens)``
    (``model.forward_embedded`` runs the interpolated embeddings), from the zero embedding at
    every word (<PAD>'s row in the book's models; the start and end tokens keep theirs) to the
    input, ``steps`` Gauss-Legendre points, for ``target`` (None: the predicted class) of the
    output. This is what captum's ``LayerIntegratedGradients`` on the embedding layer
    computes with that baseline, which it could only express as an input sentence of <PAD>
    words, and the classifiers refuse a sentence without words. The
    attribution of token t is the sum over its embedding dimensions (signed); by completeness
    a row sums to y-hat(x) - y-hat(baseline) up to the returned delta. Instances are
    independent in eval mode, so one call covers the batch.
    """
    from captum.attr import IntegratedGradients

    model = _check_model(model)
    steps = check_positive_int(steps, "steps", minimum=2)
    if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2 or tokens.dtype != torch.long:
        raise ValueError("tokens must be a (B, T) LongTensor of token ids")
    tokens = tokens.to(device_of(model))  # the model's device, wherever the caller's ids live
    words = word_mask(tokens, model.pad_id)
    with torch.no_grad():
        embedded = model.embed_tokens(tokens)
        if target is None:
            target = model(tokens).probs.argmax(-1)
    baseline = embedded.masked_fill(words.unsqueeze(-1), 0.0)

    def forward(e, x):
        return model.forward_embedded(x, e).probs

    with torch.enable_grad():
        attr, delta = IntegratedGradients(forward).attribute(
            embedded, baselines=baseline, target=target, additional_forward_args=(tokens,), n_steps=steps,
            internal_batch_size=_ig_rows(model, tokens.shape[1]), return_convergence_delta=True)
    return attr.sum(-1).detach().masked_fill(~words, 0.0), delta.detach().abs()


def explain(
    model,
    split,
    *,
    methods=None,
    max_instances: int | None = None,
    seed: int = 0,
    ig_steps: int = IG_STEPS,
    chunk_size: int | None = None,
) -> ExplanationResult:
    """Score every real token of a split's instances by every explanation method (see the module docstring).

    Args:
        model: any model with token-level access (:class:`attnlib.models.protocol.TokenModel`):
            :class:`~attnlib.models.AttentionClassifier`,
            :class:`~attnlib.models.TransformerClassifier` or
            :class:`~attnlib.models.PretrainedClassifier`.
        split: an :class:`attnlib.data.Split` (e.g. ``dataset.test``) or a Batch (for a
            PretrainedClassifier: its ``encode_texts`` Batch).
        methods: names from :data:`METHODS` (None: every one that applies to the model,
            :func:`methods_for`). Asking for one that does not apply is a ValueError.
        max_instances, seed: the seeded stratified subset of every experiment (the same
            instances as :func:`~attnlib.experiments.importance.importance` and
            :func:`~attnlib.experiments.faithfulness.faithfulness` with the same values);
            ``seed`` also seeds the random ranking.
        ig_steps: integrated gradients' step count.
        chunk_size: instances per chunk (None: about 64); any value gives the same scores.

    Instances with fewer than 2 real tokens are left out, as by ``importance``.
    """
    model = _check_model(model)
    if methods is None:
        methods = methods_for(model)
    if isinstance(methods, str):
        methods = (methods,)
    methods = tuple(methods)
    if not methods:
        raise ValueError(f"methods must name at least one of {', '.join(METHODS)}")
    for m in methods:
        if not applies(model, m):
            raise ValueError(f"{m!r} does not apply to a {type(model).__name__}; it has {', '.join(methods_for(model))}")
    if len(set(methods)) != len(methods):
        raise ValueError(f"methods must not repeat a name, got {methods!r}")
    ig_steps = check_positive_int(ig_steps, "ig_steps", minimum=2)
    if isinstance(split, Split) and len(split.ids) and max(int(np.max(i)) for i in split.ids) >= model.vocab_size:
        raise ValueError("the split has token ids outside the model's vocabulary: was it trained on this data set?")

    scores: dict = {}
    from_importance = {"attention": "attention", "gradient × input": "gradient", "leave-one-out": "loo"}
    if any(m in from_importance for m in methods):
        imp = importance(model, split, max_instances=max_instances, seed=seed, chunk_size=chunk_size)
        for m, name in from_importance.items():
            if m in methods:
                scores[m] = [np.asarray(s, dtype=np.float64) for s in getattr(imp, name)]
    own = [m for m in methods if m not in from_importance]
    with _runs.experiment(model, split, seed=seed, max_instances=max_instances, chunk_size=chunk_size,
                          rows=_ROWS, cost=lambda T, H: T * (T + H) * 8, budget=_BUDGET, min_tokens=2,
                          checked_model=model) as run:
        n = len(run)
        for m in own:
            scores[m] = [None] * n
        delta = np.full(n, np.nan)
        probs = np.zeros((n, model.n_classes))
        for rows, chunk in run.chunk_batches():
            tokens = chunk.tokens
            words = word_mask(tokens, model.pad_id)
            with torch.no_grad():
                probs[rows] = model(tokens).probs.double().cpu().numpy()
            values = {}
            if "integrated gradients" in own:
                attr, d = integrated_gradients(model, tokens, steps=ig_steps)
                values["integrated gradients"] = (attr.abs(), True)
                delta[rows] = d.double().cpu().numpy()
            if any(m in _TRANSFORMER_ONLY for m in own):
                with torch.no_grad():
                    trace = model.trace(chunk)
                if "rollout" in own:
                    values["rollout"] = (rollout_cls(trace), True)
                if "flow" in own:
                    values["flow"] = (flow_cls(trace), True)
                if "effective attention" in own:
                    last = trace.n_layers - 1
                    eff = effective_attention(trace.attentions[:, last].cpu().numpy(),
                                              trace.value_output(last).cpu().numpy(),
                                              trace.lengths.cpu().numpy())  # (B, h, T, T)
                    values["effective attention"] = (torch.from_numpy(eff[:, :, 0, :].mean(1)), False)
            if "random" in own:
                u = _runs.instance_uniform(seed, _STREAM_RANDOM, chunk.index, tokens.shape[1])
                values["random"] = (u, False)
            for m, (v, normalise) in values.items():
                for row, per_word in zip(rows, _rows_over_words(v, words, normalise)):
                    scores[m][row] = per_word
        fields = run.instance_fields(probs)
    if any(m in from_importance for m in methods) and not np.array_equal(imp.indices, fields["indices"]):
        raise AssertionError("importance() and explain() chose different instances")  # the one runner: never
    return ExplanationResult(
        **fields,
        methods=methods,
        scores={m: scores[m] for m in methods},
        ig_delta=delta,
        settings={"model": model_name(model),
                  "split": getattr(split, "name", "batch"), "max_instances": max_instances,
                  "seed": run.seed, "ig_steps": ig_steps, "ig_baseline": "zero word embeddings (<PAD>)",
                  "loo": "delete"},
    )


def _rationale_truth(result, rationales):
    """(truth per instance, keep: instances with a rationale token), validated."""
    if not isinstance(result, ExplanationResult):
        raise ValueError(f"result must be an ExplanationResult (from explain), got {type(result).__name__}")
    if isinstance(rationales, Split):
        if rationales.rationales is None:
            raise ValueError(f"split {rationales.name!r} has no rationales (only the synthetic data set has them)")
        rationales = rationales.rationales
    if rationales is None or isinstance(rationales, (str, bytes)) or not hasattr(rationales, "__getitem__"):
        raise ValueError("rationales must be the split's list of boolean arrays (split.rationales) or the Split")
    if len(result) and len(rationales) <= int(result.indices.max()):
        raise ValueError(f"rationales has {len(rationales)} entries but the result refers to split position "
                         f"{int(result.indices.max())}: pass the rationales of the split the result was computed on")
    truth = [np.asarray(rationales[i], dtype=bool).reshape(-1) for i in result.indices.tolist()]
    if (np.fromiter(map(len, truth), dtype=np.int64, count=len(truth)) != result.lengths).any():
        raise ValueError("each rationale must have one entry per token of its instance (is it the right split?)")
    keep = np.fromiter((t.any() for t in truth), dtype=bool, count=len(truth))
    if not keep.any():
        raise ValueError("no instance has a rationale token")
    return truth, keep


def plausibility_by_instance(result: ExplanationResult, rationales, metric: str = "average precision",
                             k: int | None = None) -> pd.DataFrame:
    """One of :func:`plausibility`'s metrics per instance: rows = the instances with a rationale
    token (indexed by split position), columns = the methods; for intervals and ranks with ties
    (:func:`attnlib.uncertainty.rank`)."""
    if metric not in ("precision@k", "average precision", "AUC"):
        raise ValueError(f"metric must be 'precision@k', 'average precision' or 'AUC', got {metric!r}")
    truth, keep = _rationale_truth(result, rationales)
    kept = [t for t, ok in zip(truth, keep) if ok]
    columns = {m: rationale_ranking([s for s, ok in zip(result.scores[m], keep) if ok], kept, k=k)[metric].to_numpy()
               for m in result.methods}
    return pd.DataFrame(columns, index=pd.Index(np.asarray(result.indices)[keep], name="instance"))


def plausibility(result: ExplanationResult, rationales, k: int | None = None) -> pd.DataFrame:
    """Mean precision@k, average precision and ROC-AUC of each method against a rationale mask.

    One row per method of ``result`` and a last row ``"random (expected)"``: a uniformly
    random ranking's expectation (R/n, the AP formula of
    :func:`~attnlib.experiments.faithfulness.rationale_recovery`, 1/2), over the instances
    with at least one rationale token (``n``). ``rationales``: the split's (a
    :class:`~attnlib.data.Split` with rationales, or its list), indexed by split position.
    """
    truth, keep = _rationale_truth(result, rationales)
    kept = [t for t, ok in zip(truth, keep) if ok]
    rows = {}
    for m in result.methods:
        per = rationale_ranking([s for s, ok in zip(result.scores[m], keep) if ok], kept, k=k)
        rows[m] = {c: float(np.nanmean(per[c])) for c in ("precision@k", "average precision", "AUC")}
    n_tok = result.lengths[keep].astype(np.int64)
    n_true = np.fromiter((t.sum() for t in kept), dtype=np.int64, count=len(kept))
    harmonic = np.cumsum(np.concatenate([[0.0], 1.0 / np.arange(1, int(n_tok.max()) + 1)]))[n_tok]
    frac = np.where(n_tok > 1, (n_true - 1) / np.maximum(n_tok - 1, 1), 0.0)
    rows["random (expected)"] = {  # a random top-k holds R/n true tokens on average, for any k
        "precision@k": float(np.mean(n_true / n_tok)),
        "average precision": float(np.mean((harmonic + frac * (n_tok - harmonic)) / n_tok)),
        "AUC": 0.5,
    }
    frame = pd.DataFrame(rows).T
    frame.index.name = "method"
    frame["n"] = int(keep.sum())
    return frame
