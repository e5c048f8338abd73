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
norm-based                Kobayashi et al.'s ``||sum_h alpha^h f_h(x_j)||``, the last layer's
                          [CLS] row (:mod:`~attnlib.experiments.norm_attention`); Part V
value zeroing             Mohebbi et al.'s value zeroing, rolled out, [CLS] row after the last
                          layer (:mod:`~attnlib.experiments.value_zeroing`); Part V
attention relevance       Chefer et al.'s gradient-weighted attention, accumulated over the
                          layers, [CLS] row (:mod:`~attnlib.experiments.attention_relevance`);
                          Part V
norm + residual + LN      Kobayashi et al. 2021's norm of what token j sends through the last
                          layer's attention block (residual and LayerNorm included), [CLS] row
                          (:mod:`~attnlib.experiments.globenc`); Part V
GlobEnc                   Modarressi et al.'s norms through the whole layer but its feed-forward
                          block, rolled out, [CLS] row after the last layer
                          (:mod:`~attnlib.experiments.globenc`); Part V
========================  =================================================================

The last five (Chapter 17) apply to the transformers only and are not in :func:`explain`'s default
battery (:data:`METHODS`, Chapter 15's): ask for them by name, or with ``methods="all"``.

Where a method does not apply to a model (:func:`applies`) its scores are absent and the
book's tables say "n/a". For J&W's one-layer classifiers there is no stack of layers to roll
out, and their effective attention is alpha itself: the values are the hidden states h_t,
and a sentence shorter than the hidden size (every one here) leaves no null space.

Each method is one :class:`ExplanationMethod` in :data:`REGISTRY` (its name, its
applicability, and either a function that scores a chunk of instances or the
:func:`~attnlib.experiments.importance.importance` output it is); :func:`explain` is a loop
over the ones asked for, and a new method is one :func:`register` call.

Every method except effective attention is non-negative, and the scores rank the tokens
(higher = more important); only the order matters to every metric here.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from .. import runs, uncertainty
from .._checks import check_positive_int
from ..runs import InstanceResult
from ..data import Split
from ..models.protocol import check_token_model, device_of, has_capability, model_name, word_mask
from .faithfulness import rationale_ranking
from .flow import flow_cls, rollout_cls
from .globenc import globenc_cls, norm_residual_ln_cls
from .attention_relevance import relevance_cls
from .identifiability import effective_attention
from .importance import importance
from .norm_attention import norm_attention
from .value_zeroing import value_zeroing_cls

__all__ = [
    "METHODS",
    "PART_V_METHODS",
    "REGISTRY",
    "ExplanationMethod",
    "ChunkInputs",
    "register",
    "IG_STEPS",
    "applies",
    "methods_for",
    "erasure_columns",
    "ExplanationResult",
    "explain",
    "integrated_gradients",
    "plausibility",
    "plausibility_by_instance",
    "plausibility_by_length",
    "explain_and_score",
    "negators_found",
    "yardstick_columns",
    "yardstick_directions",
    "rank_over_seeds",
    "rank_columns_over_seeds",
    "train_seed_sets_each",
    "yardstick_columns_over_seeds",
]

#: Integrated gradients' step count (captum's Gauss-Legendre rule).
IG_STEPS = 16

_STREAM_RANDOM = 15  # the random ranking's stream of attnlib.runs.instance_uniform
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
    return has_capability(model, "layered")


# --- The methods: a registry ------------------------------------------------------------------
# One ExplanationMethod per explanation, behind one call (explain). A method either scores a chunk
# of instances (score: ChunkInputs -> (B, T) values over every position) or is one of importance()'s
# outputs (from_importance: computed once over the whole subset, because leave-one-out and the
# gradient share its pass). A new method is one register(ExplanationMethod(...)) call.


class ChunkInputs:
    """What a method's ``score`` gets for one chunk of instances.

    ``model``, ``batch`` (the chunk's rows), ``tokens`` ((B, T) ids), ``words`` ((B, T) bool:
    real words, not <SOS>/<EOS>/<PAD>), ``seed`` and ``ig_steps`` (explain's). ``trace`` is the
    model's trace of the chunk, computed once for every method that reads it. A method that has a
    per-instance diagnostic calls ``record(name, (B,) values)`` (integrated gradients: its
    convergence delta, ``ig_delta``).
    """

    def __init__(self, model, batch, *, seed: int, ig_steps: int):
        self.model, self.batch, self.seed, self.ig_steps = model, batch, seed, ig_steps
        self.tokens = batch.tokens
        self.words = word_mask(self.tokens, model.pad_id)
        self.recorded: dict = {}
        self._trace = None

    @property
    def trace(self):
        if self._trace is None:
            with torch.no_grad():
                self._trace = self.model.trace(self.batch)
        return self._trace

    def record(self, name: str, values) -> None:
        self.recorded[name] = values


@dataclass(frozen=True)
class ExplanationMethod:
    """One explanation method of :func:`explain`.

    name:            its name in results and tables.
    score:           ``score(inputs: ChunkInputs) -> (B, T)`` tensor over every position (only the
                     words are kept), for a method computed per chunk; None for one of
                     :func:`~attnlib.experiments.importance.importance`'s outputs.
    from_importance: the ImportanceResult field it is (``"attention"``, ``"gradient"``,
                     ``"loo"``), or None.
    normalise:       whether the scores are divided by their sum over the words (ranks do not
                     change; the values become shares).
    needs_layers:    it needs a stack of attention layers the model can ``trace`` (the
                     transformers); otherwise the token-level protocol is enough.
    needs:           a further capability the model must declare (a key of
                     :data:`attnlib.models.protocol.CAPABILITIES`, e.g. ``"value_zeroing"``), or None.
    by_default:      whether :func:`explain` and :func:`methods_for` include it when no methods are
                     named (Chapter 15's battery, :data:`METHODS`, and any method a reader
                     registers); Part V's methods are asked for by name or with ``methods="all"``.
    chapter:         the chapter that introduces it.
    """

    name: str
    score: object = None
    from_importance: str | None = None
    normalise: bool = True
    needs_layers: bool = False
    needs: str | None = None
    by_default: bool = True
    chapter: int = 15

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a method needs a name, got {self.name!r}")
        if (self.score is None) == (self.from_importance is None):
            raise ValueError(f"method {self.name!r}: give exactly one of score (a function of ChunkInputs) "
                             f"and from_importance (an ImportanceResult field)")
        if self.score is not None and not callable(self.score):
            raise ValueError(f"method {self.name!r}: score must be callable, got {type(self.score).__name__}")

    def applies(self, model) -> bool:
        """Whether this method applies to ``model``."""
        return (_has_layers(model) or not self.needs_layers) and \
            (self.needs is None or has_capability(model, self.needs))


REGISTRY: dict[str, ExplanationMethod] = {}


def register(method: ExplanationMethod, *, replace: bool = False) -> ExplanationMethod:
    """Add ``method`` to :data:`REGISTRY` (after the others), so that :func:`explain` offers it.

    A name already registered is a ValueError unless ``replace`` (then it keeps its place).
    """
    if not isinstance(method, ExplanationMethod):
        raise ValueError(f"register() takes an ExplanationMethod, got {type(method).__name__}")
    if method.name in REGISTRY and not replace:
        raise ValueError(f"a method named {method.name!r} is registered already (replace=True to replace it)")
    REGISTRY[method.name] = method
    return method


def _integrated_gradients(inputs: ChunkInputs) -> torch.Tensor:
    attr, delta = integrated_gradients(inputs.model, inputs.tokens, steps=inputs.ig_steps)
    inputs.record("ig_delta", delta)
    return attr.abs()


def _effective_attention(inputs: ChunkInputs) -> torch.Tensor:
    trace = inputs.trace
    last = trace.n_layers - 1
    eff = effective_attention(trace.attentions[:, last].cpu().numpy(), trace.value_output(last).cpu().numpy(),
                              trace.lengths.cpu().numpy())  # (B, h, T, T)
    return torch.from_numpy(eff[:, :, 0, :].mean(1))


def _random(inputs: ChunkInputs) -> torch.Tensor:
    return runs.instance_uniform(inputs.seed, _STREAM_RANDOM, inputs.batch.index, inputs.tokens.shape[1])


for _method in (
    ExplanationMethod("attention", from_importance="attention"),
    ExplanationMethod("effective attention", score=_effective_attention, normalise=False, needs_layers=True),
    ExplanationMethod("rollout", score=lambda inputs: rollout_cls(inputs.trace), needs_layers=True),
    ExplanationMethod("flow", score=lambda inputs: flow_cls(inputs.trace), needs_layers=True),
    ExplanationMethod("gradient × input", from_importance="gradient"),
    ExplanationMethod("integrated gradients", score=_integrated_gradients),
    ExplanationMethod("leave-one-out", from_importance="loo"),
    ExplanationMethod("random", score=_random, normalise=False),
):
    register(_method)
del _method

#: Every explanation of Chapter 15, in the order of its tables: :func:`explain`'s default battery.
METHODS = tuple(REGISTRY)


def _norm_based(inputs: ChunkInputs) -> torch.Tensor:
    """Kobayashi et al.'s norm of what the last layer's heads send to [CLS], summed over heads."""
    return norm_attention(inputs.trace, heads="sum", layer=-1)[:, 0, :]


# Part V (Chapter 17): explanations that count more of the layer than its weights; asked for by name
for _method in (
    ExplanationMethod("norm-based", score=_norm_based, needs_layers=True, by_default=False, chapter=17),
    ExplanationMethod("value zeroing", score=lambda inputs: value_zeroing_cls(inputs.model, inputs.batch),
                      needs_layers=True, needs="value_zeroing", by_default=False, chapter=17),
    ExplanationMethod("attention relevance", score=lambda inputs: relevance_cls(inputs.model, inputs.tokens),
                      needs_layers=True, by_default=False, chapter=17),
    ExplanationMethod("norm + residual + LN", score=lambda inputs: norm_residual_ln_cls(inputs.model, inputs.batch),
                      needs_layers=True, needs="decomposition", by_default=False, chapter=17),
    ExplanationMethod("GlobEnc", score=lambda inputs: globenc_cls(inputs.model, inputs.batch),
                      needs_layers=True, needs="decomposition", by_default=False, chapter=17),
):
    register(_method)
del _method

#: Part V's explanations (Chapter 17), in the order of its tables.
PART_V_METHODS = tuple(name for name, m in REGISTRY.items() if m.chapter == 17)


def applies(model, method: str) -> bool:
    """Whether ``method`` (a name in :data:`REGISTRY`) applies to ``model``.

    Rollout, flow and effective attention need a stack of layers and heads the model can
    :meth:`trace` (the transformers); every other method needs only the token-level protocol.
    """
    _check_model(model)
    if method not in REGISTRY:
        raise ValueError(f"unknown method {method!r}; choose from {', '.join(REGISTRY)}")
    return REGISTRY[method].applies(model)


def methods_for(model, *, every: bool = False) -> tuple:
    """The methods of :data:`REGISTRY` that apply to ``model``, in order: those of the default battery
    (``by_default``), or with ``every`` all of them, Part V's included."""
    _check_model(model)
    if not isinstance(every, bool):
        raise ValueError(f"every must be True or False, got {every!r}")
    return tuple(name for name, m in REGISTRY.items() if m.applies(model) and (every or m.by_default))


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
    return runs.rows_per_pass(model, T, _IG_TOKENS, _IG_BUDGET)


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
        methods: names from :data:`REGISTRY` (None: the default battery that applies to the model,
            :func:`methods_for`; ``"all"``: every registered method that applies, Part V's
            included). Asking for one that does not apply is a ValueError.
        max_instances, seed: the seeded stratified subset of every experiment (the same
            instances as :func:`~attnlib.experiments.importance.importance` and
            :func:`~attnlib.experiments.faithfulness.faithfulness` with the same values);
            ``seed`` also seeds the random ranking.
        ig_steps: integrated gradients' step count.
        chunk_size: instances per chunk (None: about 64); any value gives the same scores.

    Instances with fewer than 2 real tokens are left out, as by ``importance``.
    """
    model = _check_model(model)
    if methods is None or methods == "all":
        methods = methods_for(model, every=methods == "all")
    if isinstance(methods, str):
        methods = (methods,)
    methods = tuple(methods)
    if not methods:
        raise ValueError(f"methods must name at least one of {', '.join(REGISTRY)}")
    for m in methods:
        if not applies(model, m):
            raise ValueError(f"{m!r} does not apply to a {type(model).__name__}; it has {', '.join(methods_for(model))}")
    if len(set(methods)) != len(methods):
        raise ValueError(f"methods must not repeat a name, got {methods!r}")
    ig_steps = check_positive_int(ig_steps, "ig_steps", minimum=2)
    if isinstance(split, Split) and len(split.ids) and max(int(np.max(i)) for i in split.ids) >= model.vocab_size:
        raise ValueError("the split has token ids outside the model's vocabulary: was it trained on this data set?")

    chosen = [REGISTRY[m] for m in methods]
    scores: dict = {}
    if any(m.from_importance for m in chosen):
        imp = importance(model, split, max_instances=max_instances, seed=seed, chunk_size=chunk_size)
        for m in chosen:
            if m.from_importance:
                scores[m.name] = [np.asarray(s, dtype=np.float64) for s in getattr(imp, m.from_importance)]
    per_chunk = [m for m in chosen if m.score is not None]
    with runs.experiment(model, split, seed=seed, max_instances=max_instances, chunk_size=chunk_size,
                          rows=_ROWS, cost=lambda T, H: T * (T + H) * 8, budget=_BUDGET, min_tokens=2,
                          checked_model=model) as run:
        n = len(run)
        for m in per_chunk:
            scores[m.name] = [None] * n
        delta = np.full(n, np.nan)
        probs = np.zeros((n, model.n_classes))
        for rows, chunk in run.chunk_batches():
            inputs = ChunkInputs(model, chunk, seed=seed, ig_steps=ig_steps)
            with torch.no_grad():
                probs[rows] = model(inputs.tokens).probs.double().cpu().numpy()
            for m in per_chunk:
                values = m.score(inputs)
                for row, per_word in zip(rows, _rows_over_words(values, inputs.words, m.normalise)):
                    scores[m.name][row] = per_word
            if "ig_delta" in inputs.recorded:
                delta[rows] = inputs.recorded["ig_delta"].double().cpu().numpy()
        fields = run.instance_fields(probs)
    if any(m.from_importance for m in chosen) and not np.array_equal(imp.indices, fields["indices"]):
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


def plausibility_by_length(result: ExplanationResult, rationales, bins, labels=None,
                           metric: str = "average precision") -> pd.DataFrame:
    """One plausibility metric's mean per length band: rows = the bands (``pd.cut`` of the
    instances' word counts by ``bins``, named by ``labels``; empty bands left out), columns =
    the methods of ``result``. ``rationales``: as :func:`plausibility` (a Split with rationales,
    or its list); ``metric``: "precision@k", "average precision" or "AUC"."""
    if metric not in ("precision@k", "average precision", "AUC"):
        raise ValueError(f"metric must be 'precision@k', 'average precision' or 'AUC', got {metric!r}")
    truth, _ = _rationale_truth(result, rationales)
    band = pd.cut(result.lengths, bins, labels=labels)
    columns = {m: rationale_ranking(result.scores[m], truth)[metric].groupby(band, observed=True).mean()
               for m in result.methods}
    frame = pd.DataFrame(columns)
    frame.index = [str(b) for b in frame.index]
    frame.index.name = "length (words)"
    return frame


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


# ----------------------------------------------------------------------------- Chapter 15's capstone


def explain_and_score(model, split, *, max_instances: int | None = None, seed: int = 0, **settings):
    """Every method that applies to ``model`` (:func:`explain`) and ERASER's deletion scores of
    them (:func:`~attnlib.experiments.faithfulness.faithfulness`), on the same sentences.

    ``max_instances`` and ``seed`` pick the sentences (the same for both); ``settings`` go to
    :func:`explain` (e.g. ``ig_steps``). Returns ``(ExplanationResult, FaithfulnessResult)``.
    """
    from .faithfulness import faithfulness

    expl = explain(model, split, max_instances=max_instances, seed=seed, **settings)
    faith = faithfulness(model, split, expl.by_position(), max_instances=max_instances, seed=seed)
    return expl, faith


def negators_found(result: ExplanationResult, split, negators=None) -> pd.Series:
    """Per method: the share of the negators a method ranks in its top k (k = the sentence's
    rationale size), over every negator of the result's sentences.

    ``result``: :func:`explain` on ``split``, a :class:`~attnlib.data.Split` with rationales
    (the synthetic task's). ``negators``: the words that count (default
    :data:`attnlib.data.NEGATORS`). The last entry, ``"random (expected)"``, is a uniformly
    random ranking's expectation, k/n per negator. Ties: the earlier word first. All methods
    are ranked in one batched argsort.
    """
    from ..data import NEGATORS

    negators = NEGATORS if negators is None else tuple(negators)
    if not isinstance(split, Split):
        raise ValueError(f"split must be the Split the result was computed on, got {type(split).__name__}")
    _rationale_truth(result, split)  # the right split, with rationales
    T = int(result.lengths.max())
    valid = np.arange(T) < result.lengths[:, None]
    neg = np.zeros(valid.shape, dtype=bool)
    neg[valid] = np.isin(np.concatenate([split.tokens[i] for i in result.indices]), negators)
    if not neg.any():
        raise ValueError("no sentence of the result has a negator: there is nothing to find")
    k = np.array([split.rationales[i].sum() for i in result.indices])
    scores = np.stack([np.where(valid, result.padded(m), -np.inf) for m in result.methods])  # (M, N, T)
    rank = np.argsort(np.argsort(-scores, axis=2, kind="stable"), axis=2)
    found = ((rank < k[None, :, None]) & neg[None]).sum(axis=(1, 2)) / neg.sum()
    out = dict(zip(result.methods, found))
    out["random (expected)"] = (neg.sum(1) * k / result.lengths).sum() / neg.sum()
    return pd.Series(out)


def yardstick_columns(explained: ExplanationResult, rationales, erased, flips=None, *,
                      task: str = "synthetic") -> dict:
    """One model's per-sentence values of every yardstick: column -> {method: values}, the
    input of :func:`attnlib.uncertainty.rank_columns`.

    Columns, in order: ``"AP, <task>"``, average precision against the rationale
    (:func:`plausibility_by_instance` of ``explained`` against ``rationales``); for each
    ``short: FaithfulnessResult`` of ``erased``, ``"comprehensiveness AOPC, <short>"`` and
    ``"sufficiency AOPC, <short>"``; for each ``short: {ranking: per-sentence fraction}`` of
    ``flips`` (:func:`~attnlib.experiments.faithfulness.fraction_to_flip`; may be empty where
    it does not apply), ``"fraction removed to flip, <short>"``.
    """
    ap = plausibility_by_instance(explained, rationales)
    columns = {f"AP, {task}": dict(ap.items()), **erasure_columns(erased)}
    for short, per_ranking in (flips or {}).items():
        columns[f"fraction removed to flip, {short}"] = per_ranking
    return columns


def erasure_columns(erased: Mapping) -> dict:
    """ERASER's two yardsticks per task: ``"comprehensiveness AOPC, <short>"`` and ``"sufficiency AOPC,
    <short>"`` -> {method: per-sentence AOPC}, for each ``short: FaithfulnessResult`` of ``erased``
    (the columns of :func:`yardstick_columns` a task without a rationale has)."""
    from .faithfulness import FaithfulnessResult

    if not isinstance(erased, Mapping):
        raise ValueError("erased must map a short task name to a FaithfulnessResult")
    columns = {}
    for short, faith in erased.items():
        if not isinstance(faith, FaithfulnessResult):
            raise ValueError(f"erased[{short!r}] must be a FaithfulnessResult, got {type(faith).__name__}")
        for metric in ("comprehensiveness", "sufficiency"):
            per_sentence = faith.aopc(metric)  # (N, methods)
            columns[f"{metric} AOPC, {short}"] = dict(zip(faith.measures, per_sentence.T))
    return columns


def yardstick_directions(columns) -> dict:
    """Column -> whether higher is better, for the columns of :func:`yardstick_columns`
    (from :data:`~attnlib.experiments.faithfulness.METRICS`)."""
    from .faithfulness import METRICS

    out = {}
    for c in columns:
        name = ("average precision" if c.startswith("AP")
                else "fraction removed" if c.startswith("fraction") else c.split(" AOPC")[0])
        if name not in METRICS:
            raise ValueError(f"column {c!r} is not a yardstick of yardstick_columns")
        out[c] = METRICS[name].higher_is_better
    return out


def _seed_rows(values, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim == 1:  # one model: one row
        array = array[None, :]
    if array.ndim != 2:
        raise ValueError(f"scores[{name!r}] must be (seeds, instances), got shape {array.shape}")
    return array


def rank_over_seeds(scores: Mapping, *, higher_is_better: bool = True, seed: int = 0) -> pd.DataFrame:
    """Methods ranked over training seeds and sentences, with ties where neither settles the order.

    ``scores``: method -> (S, n) per-sentence values, row k from the k-th seed's model, on the
    same n sentences for every method and seed (a 1-D array is one model). Every pair of methods
    is compared with :func:`attnlib.uncertainty.compare_over_seeds` (paired: row k of both comes
    from one model); a method beats another only when that verdict says so (the pooled interval
    over seeds and sentences excludes 0 and most seeds point that way), never when the
    difference is within noise or the seeds disagree. A method's rank is 1 + the number of
    methods that beat it (:func:`attnlib.uncertainty.ranks_from_wins`), so methods nobody beats
    share rank 1.

    Returns a DataFrame indexed by method, best first: ``mean`` (over seeds and sentences),
    ``low``, ``high`` (its :func:`~attnlib.uncertainty.over_seeds` interval), ``rank``, ``tied``
    (another method has the same rank) and ``disagree`` (the seeds disagree, beyond noise each,
    on its order with some other method).
    """
    if not isinstance(scores, Mapping) or not scores:
        raise ValueError("scores must be a non-empty dict: method -> (seeds, instances) values")
    names = list(scores)
    rows = {m: _seed_rows(scores[m], m) for m in names}
    shapes = {v.shape for v in rows.values()}
    if len(shapes) != 1:
        raise ValueError(f"every method needs the same seeds and instances, got shapes {sorted(shapes)}")
    k = len(names)
    wins = np.zeros((k, k), dtype=bool)
    disagree = np.zeros(k, dtype=bool)
    for i in range(k):
        for j in range(i + 1, k):
            c = uncertainty.compare_over_seeds(rows[names[i]], rows[names[j]], seed=seed)
            better_i = "higher" if higher_is_better else "lower"
            if c.verdict == better_i:
                wins[i, j] = True
            elif c.differs:
                wins[j, i] = True
            elif c.verdict == uncertainty.SEEDS_DISAGREE:
                disagree[[i, j]] = True
    own = [uncertainty.over_seeds(rows[m], seed=seed) for m in names]
    frame = pd.DataFrame({"mean": [iv.estimate for iv in own], "low": [iv.low for iv in own],
                          "high": [iv.high for iv in own], "rank": uncertainty.ranks_from_wins(wins)},
                         index=pd.Index(names, name="method"))
    frame["tied"] = frame["rank"].map(frame["rank"].value_counts()) > 1
    frame["disagree"] = disagree
    return frame.sort_values(["rank", "mean"], ascending=[True, not higher_is_better])


def rank_columns_over_seeds(columns: Mapping, higher_is_better: Mapping, *, seed: int = 0):
    """:func:`rank_over_seeds` for every column of a table: an
    :class:`attnlib.uncertainty.RankedTable` (means over seeds and sentences, ranks, ties).

    ``columns``: column -> {method: (S, n) per-sentence values} (each column on its own
    sentences; a method missing from a column gets NaN there); ``higher_is_better``: column ->
    bool. The over-seeds form of :func:`attnlib.uncertainty.rank_columns`.
    """
    return uncertainty.rank_table(
        columns, higher_is_better, lambda scores, better: rank_over_seeds(scores, higher_is_better=better, seed=seed),
        values="(seeds, instances) values")


def train_seed_sets_each(specs: Mapping, seeds_of: Mapping, *, workers: int | None = None,
                         progress: bool = True) -> dict:
    """:func:`attnlib.seeds.train_seed_sets` with each recipe's own seeds, every model in one pool.

    ``specs``: name -> :func:`attnlib.train.train_model` keyword arguments without ``seed``;
    ``seeds_of``: name -> its seeds (e.g. ``seeds.seeds_after(seed, 3)`` for one recipe and
    ``seeds.seeds_after(seed, 1)`` for a costlier one). Returns name -> :class:`attnlib.seeds.SeedSet`,
    each model exactly ``train_model(**spec, seed=s)`` (the same cache entry as everywhere).
    One pool, longest first, instead of one per seed count: on two cores a second pool would
    leave a core idle while its last model trains.
    """
    from ..seeds import SeedSet, check_seeds, check_spec
    from ..train import train_models

    if not isinstance(specs, Mapping) or not specs:
        raise ValueError("specs must be a non-empty dict: name -> train_model keyword arguments (without seed)")
    missing = [name for name in specs if name not in seeds_of]
    if missing:
        raise ValueError(f"seeds_of has no seeds for {missing}")
    checked = {name: check_spec(name, spec) for name, spec in specs.items()}
    own = {name: check_seeds(seeds_of[name]) for name in specs}
    jobs = {(name, s): {**spec, "seed": s} for name, spec in checked.items() for s in own[name]}
    trained = train_models(jobs, workers=workers, progress=progress)
    return {name: SeedSet(own[name], tuple(trained[(name, s)] for s in own[name]), spec)
            for name, spec in checked.items()}


def yardstick_columns_over_seeds(explained, rationales, erased, flips=None, *, task: str = "synthetic") -> dict:
    """:func:`yardstick_columns` for every seed's model of one family, stacked: column -> {method:
    (S, n) per-sentence values}, the input of :func:`rank_columns_over_seeds`.

    ``explained``: one :class:`ExplanationResult` per seed (on the rationale task); ``erased``:
    short task name -> one FaithfulnessResult per seed; ``flips``: short task name -> one
    {ranking: per-sentence fraction} per seed (or an empty list where it does not apply). Every
    seed's results must cover the same sentences (the same ``max_instances`` and ``seed``).
    """
    explained = list(explained)
    if not explained:
        raise ValueError("explained must hold one ExplanationResult per seed")
    erased = {short: list(results) for short, results in erased.items()}
    flips = {short: list(values) for short, values in (flips or {}).items()}
    for short, results in (*erased.items(), *flips.items()):
        if results and len(results) != len(explained):
            raise ValueError(f"{short!r} has {len(results)} results, but there are {len(explained)} seeds")
    per_seed = [
        yardstick_columns(e, rationales, {short: r[k] for short, r in erased.items()},
                          {short: (v[k] if v else {}) for short, v in flips.items()}, task=task)
        for k, e in enumerate(explained)
    ]
    return {column: {m: np.stack([np.asarray(p[column][m], dtype=np.float64) for p in per_seed])
                     for m in per_seed[0][column]} for column in per_seed[0]}
