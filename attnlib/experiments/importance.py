"""Feature importance to compare attention with: gradients and leave-one-out (J&W 2019, Alg. 1).

Jain & Wallace (2019), *Attention is not Explanation*, Sec. 4.1, ask whether attention
alpha agrees with two standard importance measures, on sentences w_1 ... w_T with
embeddings e_t, hidden states h_t and output y-hat:

* :func:`gradient_importance` -- g_t = |<d y-hat / d e_t, e_t>|, the gradient of y-hat
  with respect to the one-hot input at the entry of the word present (which is the
  dot product of the embedding gradient with the embedding), with the attention
  **detached** (no gradient flows through alpha), normalised to sum 1 over the real
  tokens.
* :func:`leave_one_out` -- LOO_t = TVD(y-hat(x), y-hat(x_{-t})): how much the output
  distribution moves when token t is deleted (batched: every deletion of every
  instance of a batch runs as a few padded batches, not one forward per token; for
  the BiLSTM, from the states of x, recomputing only what the deletion changes).
* :func:`importance` -- attention, gradients and leave-one-out for a whole split
  (or a seeded stratified subset), as one :class:`ImportanceResult`.
* :func:`agreement` -- J&W's Table 2: Kendall tau-b between attention and each
  measure (and between the two measures), mean +- sd and the fraction of
  instances with p <= 0.05, grouped by predicted class. :func:`instance_agreement`
  gives the per-instance values behind it (J&W's Fig. 2 histograms).
* how well each measure ranks the synthetic task's known rationale tokens first is
  :func:`attnlib.experiments.faithfulness.rationale_recovery` (a plausibility metric, beside
  ERASER's faithfulness metrics), which builds on this module.

Two model families: J&W's :class:`~attnlib.models.AttentionClassifier` and the book's
:class:`~attnlib.models.TransformerClassifier`. Both measures run the same code on both:
e_t is the word embedding ``model.embedding(tokens)`` (GloVe 50d, for the transformer
before its projection and position embeddings) and x_{-t} goes through ``model(tokens)``.
What differs: the transformer has no single attention to detach (one per layer and head),
so its gradient always flows through all of them (``detach_attention`` False); and the
attention :func:`importance` reports for it is the last layer's [CLS] row averaged over
heads, renormalised over the real words.

Conventions: y-hat is P(class 1) for binary models (the sigmoid output, as J&W); for
more classes it is the probability of the predicted class. Token positions follow
:class:`attnlib.data.Batch`: <SOS> at 0, real tokens, <EOS>, padding; importance is 0
on <SOS>, <EOS> and padding. Every function puts the model in eval mode and restores
its previous mode.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from .. import runs
from ..runs import InstanceResult
from .._checks import check_bool, check_positive_int
from ..data import Split
from ..metrics import kendall_tau, tvd
from ..models.protocol import check_token_model, eval_mode, model_name, word_mask

__all__ = [
    "LOO_MODES",
    "MEASURES",
    "POSITIONS",
    "gradient_importance",
    "leave_one_out",
    "ImportanceResult",
    "importance",
    "instance_agreement",
    "agreement",
]

#: Leave-one-out variants: delete token t (J&W) or replace it (by UNK or PAD).
LOO_MODES = ("delete", "replace")

#: The significance level of J&W's "Sig. Frac." column.
ALPHA_LEVEL = 0.05

#: Default bound on the tokens (rows x padded width) of one leave-one-out forward pass.
MAX_TOKENS = 65_536
# ... and on its rows (perturbed sequences).
_MAX_ROWS = 4096
# importance(): about this many instances per length bucket, fewer where (n, T, H) would pass the budget.
_IMPORTANCE_ROWS = 64
_IMPORTANCE_BUDGET = 2**24


# ----------------------------------------------------------------------------- helpers


def _check_model(model):
    return check_token_model(model, "importance (gradients and leave-one-out)")


def _check_detach(model, detach_attention) -> bool:
    """``detach_attention`` resolved: None is True (J&W) for a single attention, False for a stack of heads."""
    if detach_attention is None:
        return bool(model.single_attention)
    detach_attention = check_bool(detach_attention, "detach_attention")
    if detach_attention and not model.single_attention:
        raise ValueError(
            f"detach_attention=True detaches J&W's single attention alpha; a {type(model).__name__} has an "
            "attention per layer and head and no single one to detach: pass detach_attention=False (or None)"
        )
    return detach_attention


def _batch_tokens(model, batch) -> torch.Tensor:
    """The (B, T) token ids of a Batch or LongTensor, on the model's device, validated by the model."""
    return model.token_ids(batch)


def _target_probability(model, probs: torch.Tensor) -> torch.Tensor:
    """y-hat per row: P(class 1) for binary models, else the probability of the predicted class."""
    if model.n_classes == 2:
        return probs[:, 1]
    return probs.gather(1, probs.detach().argmax(-1, keepdim=True)).squeeze(1)


def _normalise_rows(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """scores / their sum over the mask; 0 off the mask; uniform where a row sums to 0."""
    scores = scores.masked_fill(~mask, 0.0)
    total = scores.sum(-1, keepdim=True)
    uniform = mask.to(scores.dtype) / mask.sum(-1, keepdim=True).to(scores.dtype)
    return torch.where(total > 0, scores / torch.where(total > 0, total, torch.ones_like(total)), uniform)


#: Which positions :func:`importance` scores: the words (J&W; the book's default), or every
#: real position, <SOS> ([CLS]) and <EOS> included (Abnar & Zuidema's code, Chapter 14).
POSITIONS = ("words", "all")


def _scored(model, tokens: torch.Tensor, positions: str) -> torch.Tensor:
    """(B, T) bool: the positions scored, the words or every non-padding position."""
    return word_mask(tokens, model.pad_id) if positions == "words" else tokens != model.pad_id


# ----------------------------------------------------------------------------- gradient


def _gradient(model, tokens: torch.Tensor, detach_attention: bool, positions: str = "words"):
    """(g normalised (B, T), probs (B, C), alpha (B, T)) from ONE forward and ONE backward pass.

    Through the token-level protocol: e_t = ``model.embed_tokens(tokens)`` made a leaf, and
    ``model.forward_embedded`` from it. alpha is the attention the model reports; for a model
    without a single attention (a transformer's [CLS] row, heads averaged) it is cut to the
    words and renormalised over them.
    """
    with torch.enable_grad():
        embedded = model.embed_tokens(tokens).detach().requires_grad_(True)  # e_t, (B, T, E)
        out = model.forward_embedded(tokens, embedded, detach_attention=detach_attention)
        # Instances are independent in eval mode (no batch statistics, no cross-row terms: keys are
        # masked per sentence, LayerNorm is per token), so d(sum_b y-hat_b)/d e_{bt} = d y-hat_b / d e_{bt}:
        # one backward for the batch.
        (grad,) = torch.autograd.grad(_target_probability(model, out.probs).sum(), embedded)
    mask = _scored(model, tokens, positions)
    raw = (grad * embedded.detach()).sum(-1).abs()  # |<d y-hat / d e_t, e_t>|, (B, T)
    alpha = out.attention.detach()
    if not model.single_attention:
        alpha = _normalise_rows(alpha, mask)
    return _normalise_rows(raw, mask), out.probs.detach(), alpha


def gradient_importance(model, batch, *, detach_attention: bool | None = None) -> torch.Tensor:
    """Gradient importance g_t of every token, normalised over the real tokens (J&W 2019, Alg. 1).

    g_t = |<d y-hat / d e_t, e_t>| / sum_s |<d y-hat / d e_s, e_s>|, summed over the real
    tokens s (0 on <SOS>, <EOS> and padding). <d y-hat / d e_t, e_t> is the gradient of
    y-hat with respect to the one-hot input x_t at the entry of the word actually present
    (y-hat depends on x_t through e_t = E^T x_t). y-hat is P(class 1) for binary models,
    as in Jain & Wallace 2019; for more classes the probability of the predicted class.

    For the :class:`~attnlib.models.TransformerClassifier`, e_t is likewise the word
    embedding ``model.embedding(tokens)`` (before the projection to d_model and the
    position embeddings), and y-hat its public forward ``model(tokens).probs``.

    Args:
        model: an :class:`~attnlib.models.AttentionClassifier` or a
            :class:`~attnlib.models.TransformerClassifier`.
        batch: a :class:`~attnlib.data.Batch` or (B, T) LongTensor of token ids.
        detach_attention: True (J&W): alpha is treated as a constant, so the gradient
            flows only through the hidden states h_t in c = sum_t alpha_t h_t. False: the
            variant in which gradients also flow through alpha (identical for uniform
            attention, which does not depend on the input). None (default): True for
            J&W's classifier, False for the transformer. The transformer has an attention
            per layer and head, none of them alpha, so its gradient always flows through
            all of them: True is rejected with a ValueError for it.

    Returns:
        (B, T) float tensor on the model's device; each row sums to 1 over the real tokens
        (a row whose gradients are all exactly 0 gets uniform importance).
    """
    model = _check_model(model)
    detach_attention = _check_detach(model, detach_attention)
    tokens = _batch_tokens(model, batch)
    with eval_mode(model):
        g, _, _ = _gradient(model, tokens, detach_attention)
    return g


# ----------------------------------------------------------------------------- leave-one-out


def _check_loo_args(model, mode, replacement, max_tokens):
    if mode not in LOO_MODES:
        raise ValueError(f"unknown leave-one-out mode {mode!r}; choose one of {', '.join(LOO_MODES)}")
    if replacement is None:
        replacement = model.unk_id
    if isinstance(replacement, bool) or not isinstance(replacement, numbers.Integral):
        raise ValueError(f"replacement must be a token id (an int such as the model's unk_id {model.unk_id} or "
                         f"pad_id {model.pad_id}), got {replacement!r}")
    replacement = int(replacement)
    if not 0 <= replacement < model.vocab_size or replacement in model.special_ids:
        raise ValueError(
            f"replacement must be a token id in [0, {model.vocab_size}) other than the start and end tokens "
            f"{tuple(model.special_ids)}, got {replacement}"
        )
    check_positive_int(max_tokens, "max_tokens")
    return replacement


def _probs_full_rows(model, rows: torch.Tensor) -> torch.Tensor:
    """``model(rows).probs`` for rows without padding (the model's ``unpadded_probs`` where it has one)."""
    unpadded = getattr(model, "unpadded_probs", None)
    return model(rows).probs if unpadded is None else unpadded(rows)


def _base_probs(model, tokens: torch.Tensor) -> torch.Tensor:
    """y-hat(x) for every row of ``tokens`` (with ``unpadded_probs``: rows grouped by length, unpadded)."""
    if getattr(model, "unpadded_probs", None) is None:
        return model(tokens).probs
    lengths = (tokens != model.pad_id).sum(-1)
    out = None
    for n in torch.unique(lengths).tolist():
        rows = (lengths == n).nonzero(as_tuple=True)[0]
        probs = _probs_full_rows(model, tokens[rows, :n])
        if out is None:
            out = probs.new_empty(tokens.shape[0], probs.shape[1])
        out[rows] = probs
    return out


def _loo(
    model,
    tokens: torch.Tensor,
    base_probs: torch.Tensor,
    *,
    mode: str,
    replacement: int,
    max_tokens: int,
    positions: str = "words",
) -> torch.Tensor:
    """Leave-one-out scores (B, T); validated inputs, eval mode, no grad; ``base_probs``: y-hat(x)."""
    device = tokens.device
    B, T = tokens.shape
    mask = _scored(model, tokens, positions)
    n_real = mask.sum(-1)
    delete = mode == "delete"
    if (delete or replacement == model.pad_id) and bool((n_real < 2).any()):
        bad = int((n_real < 2).sum())
        raise ValueError(
            f"{bad} instance(s) have fewer than 2 real tokens: leaving out their only token leaves nothing "
            f"to attend to. Use mode='replace' with replacement=UNK, or drop them (J&W's data sets keep "
            f"sentences of >= 5 tokens)."
        )
    fast = getattr(model, "deletion_tvd", None) if delete and positions == "words" else None
    if fast is not None:  # J&W's BiLSTM: every deletion from the states of x
        return fast(tokens, base_probs, max_tokens)
    # One row per (instance b, real position t): row-major, so rows of an instance are contiguous.
    row_b, row_t = mask.nonzero(as_tuple=True)
    lengths = (tokens != model.pad_id).sum(-1)  # including the start and end tokens
    row_len = lengths[row_b] - (1 if delete else 0)
    # Longest rows first: each chunk is padded only to its own longest row, and rows of
    # similar length share a chunk, so padding waste stays small even for mixed batches.
    order = torch.argsort(row_len, descending=True, stable=True)
    row_b, row_t, row_len = row_b[order], row_t[order], row_len[order]
    lens = row_len.tolist()
    if getattr(model, "unpadded_probs", None) is not None:
        # chunks of rows of ONE length: no padding, so (J&W's BiLSTM) runs them unpacked
        group_end = np.append(np.flatnonzero(np.diff(np.asarray(lens))) + 1, len(lens))
    else:  # rows sorted by length: a chunk's rows have similar lengths, little padding
        group_end = np.asarray([len(lens)])
    scores = torch.zeros(B, T, dtype=base_probs.dtype, device=device)
    start, n_rows, g = 0, len(lens), 0
    while start < n_rows:
        width = lens[start]
        while group_end[g] <= start:
            g += 1
        stop = min(int(group_end[g]), start + _MAX_ROWS, start + runs.rows_per_pass(model, width, max_tokens))
        b, t = row_b[start:stop], row_t[start:stop]
        cols = torch.arange(width, device=device)
        if delete:
            # Row r is x_b without position t_r: column j reads j for j < t_r, j + 1 after.
            src = cols.unsqueeze(0) + (cols.unsqueeze(0) >= t.unsqueeze(1)).long()
            rows = tokens[b.unsqueeze(1), src]
            probs = _probs_full_rows(model, rows)
        else:
            rows = tokens[b, :width]
            hit = cols.unsqueeze(0) == t.unsqueeze(1)
            hiding = getattr(model, "probs_hiding", None) if replacement == model.pad_id else None
            if hiding is not None:  # J&W's classifier: the position made padding-like in place
                probs = hiding(rows, hit)
            else:
                probs = _probs_full_rows(model, rows.masked_fill(hit, replacement))
        scores[b, t] = tvd(base_probs[b], probs, check=False)
        start = stop
    return scores


def leave_one_out(
    model,
    batch,
    *,
    mode: str = "delete",
    replacement: int | None = None,
    max_tokens: int = MAX_TOKENS,
) -> torch.Tensor:
    """Leave-one-out importance: how far the output moves when token t is left out (J&W 2019, Alg. 1).

    LOO_t = TVD(y-hat(x), y-hat(x_{-t})) = 1/2 sum_c |y-hat_c(x) - y-hat_c(x_{-t})|, over the
    output distribution (for binary models |y-hat - y-hat_{-t}|, J&W's output difference).

    Args:
        model: an :class:`~attnlib.models.AttentionClassifier` or a
            :class:`~attnlib.models.TransformerClassifier`. The transformer takes the
            generic path: every x_{-t} of the batch is a padded row through ``model(rows)``
            (the words after t move up one position, as in the shorter sentence alone).
        batch: a :class:`~attnlib.data.Batch` or (B, T) LongTensor of token ids.
        mode: ``"delete"`` (J&W): x_{-t} is x with token t removed, one token shorter.
            ``"replace"``: token t is replaced by ``replacement`` instead; with
            ``replacement=PAD`` the position gets PAD's (zero) embedding and is excluded
            from the attention while the sequence keeps its length (for the transformer:
            the position is masked out of every head's keys, the others keep their
            positions).
        replacement: token id used by ``mode="replace"`` (default UNK).
        max_tokens: the memory bound: rows x padded width of one forward pass (and at
            most 4,096 rows, and at most :data:`attnlib.runs.PASS_ELEMENTS` elements by the
            model's ``token_cost``: about 6,600 tokens of the book's transformer, 65,536 of
            J&W's BiLSTM). All sum_b n_b perturbed sequences of the batch are
            built with index arithmetic (no loop over tokens), sorted by length and run in
            as few such chunks as the bound allows (for the BiLSTM, chunks of rows of one
            length, run without packing). Deletion from a BiLSTM reuses the states of x:
            deleting t changes only the forward states from t on and the backward states
            before t, so each x_{-t} costs n - 1 steps of one direction instead of a full
            bidirectional pass, all deletions of a chunk advancing together (about 2.5x
            faster; the scores are the same up to float rounding).

    Returns:
        (B, T) float tensor on the model's device: LOO_t at real tokens, 0 elsewhere.

    Raises:
        ValueError: for an instance with fewer than 2 real tokens in ``"delete"`` mode (or
        when replacing by PAD): leaving its only token out leaves nothing to attend to, so
        the score is undefined. J&W's data sets keep sentences of at least 5 tokens.
    """
    model = _check_model(model)
    replacement = _check_loo_args(model, mode, replacement, max_tokens)
    tokens = _batch_tokens(model, batch)
    with eval_mode(model), torch.no_grad():
        reuse = mode == "delete" and getattr(model, "deletion_tvd", None) is not None  # y-hat(x) comes with the states
        base = None if reuse else _base_probs(model, tokens)
        return _loo(model, tokens, base, mode=mode, replacement=replacement, max_tokens=max_tokens)


# ----------------------------------------------------------------------------- a whole split


@dataclass
class ImportanceResult(InstanceResult):
    """Attention and importance measures for instances of a split, instance by instance.

    ``attention[i]``, ``gradient[i]`` and ``loo[i]`` are float arrays over the real tokens
    of instance ``indices[i]`` of the split, aligned to ``split.tokens[indices[i]]``.
    ``probs`` (N, C) are the model's output distributions, ``predicted`` (N,) their argmax,
    ``labels`` (N,) the true labels, ``indices`` (N,) the positions in the split
    (increasing), ``lengths`` (N,) the real tokens, ``excluded`` the split indices left out
    (fewer than 2 real tokens). ``settings`` records how the measures were computed.
    """

    attention: list
    gradient: list
    loo: list
    settings: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        counts = np.bincount(self.predicted, minlength=self.probs.shape[1]).tolist() if len(self) else []
        return f"ImportanceResult(n={len(self)}, predicted class counts={counts}, settings={self.settings})"

    def check(self) -> "ImportanceResult":
        """This result, if its fields agree (one entry per instance, as many scores as tokens); else a ValueError."""
        return _check_result(self)

    def padded(self, measure: str) -> np.ndarray:
        """One measure (``"attention"``, ``"gradient"`` or ``"loo"``) as an (N, T_max) array, 0-padded."""
        if measure not in _MEASURES:
            raise ValueError(f"unknown measure {measure!r}; choose one of {', '.join(_MEASURES)}")
        return _pad(getattr(self, measure), self.lengths)


#: The measures of an :class:`ImportanceResult`, in its field order.
MEASURES = ("attention", "gradient", "loo")
_MEASURES = MEASURES


def _pad(arrays, lengths: np.ndarray, fill: float = 0.0, dtype=np.float64) -> np.ndarray:
    out = np.full((len(arrays), int(lengths.max()) if len(arrays) else 0), fill, dtype=dtype)
    if len(arrays):
        out[np.arange(out.shape[1])[None, :] < lengths[:, None]] = np.concatenate(arrays)
    return out


def _importance_cost(model):
    """cost(T, H): elements per instance of one gradient pass (the model's ``token_cost``)."""
    return lambda T, H: model.token_cost(T)


def _split_rows(values: np.ndarray, mask: np.ndarray) -> list:
    """Ragged per-row arrays of the masked entries of (B, T) ``values`` (vectorised)."""
    counts = mask.sum(1)
    return np.split(values[mask].astype(np.float64), np.cumsum(counts)[:-1])


def importance(
    model,
    split,
    *,
    max_instances: int | None = None,
    seed: int = 0,
    chunk_size: int | None = None,
    detach_attention: bool | None = None,
    loo_mode: str = "delete",
    positions: str = "words",
) -> ImportanceResult:
    """Attention, gradient importance and leave-one-out for a split (J&W 2019, Sec. 4.1).

    For each instance: the model's attention alpha, the normalised gradient importance
    g (:func:`gradient_importance`) and leave-one-out scores (:func:`leave_one_out`), all
    over the real tokens; plus the output distribution y-hat(x). Runs in length buckets
    (one forward + backward for alpha and g, a few padded forwards for all deletions of
    the bucket).

    The attention of a :class:`~attnlib.models.TransformerClassifier` is
    ``model(batch).attention``: the last layer's [CLS] (<SOS>) row averaged over the heads,
    the attention the output reads. It also puts weight on [CLS] and [SEP] (<SOS>, <EOS>);
    it is cut to the real words and renormalised to sum 1 over them, so that it is a
    distribution over the same tokens as J&W's alpha, g and LOO.

    Args:
        model: an :class:`~attnlib.models.AttentionClassifier` or a
            :class:`~attnlib.models.TransformerClassifier` (gradient importance
            differentiates with respect to their word embeddings).
        split: an :class:`attnlib.data.Split` (e.g. ``dataset.test``) or a Batch.
        max_instances: use a seeded random subset of this many instances, stratified by
            true label (None: all of them): the same instances as every other experiment
            given the same ``max_instances`` and ``seed`` (:func:`attnlib.data.stratified_positions`).
        seed: seeds that subset.
        chunk_size: instances per bucket; None (default): about 64, fewer for long documents.
        detach_attention: passed to :func:`gradient_importance` (None: True for J&W's
            classifier, as J&W; False for the transformer, which rejects True).
        loo_mode: ``"delete"`` (J&W) or ``"replace"`` (by UNK), see :func:`leave_one_out`.
        positions: ``"words"`` (default): every measure over the real words, as J&W. ``"all"``:
            over every real position, <SOS> ([CLS]) and <EOS> included, as Abnar & Zuidema's code
            correlates them; needs ``loo_mode="replace"`` (deleting <SOS> is not an input the
            model can read). ``lengths`` then counts the positions scored (words + 2), so
            ``padded`` and :func:`agreement` work unchanged.

    Instances with fewer than 2 real tokens are left out after the subset is drawn, with a
    warning: a rank correlation needs 2 tokens and deleting an only token leaves nothing to
    classify (J&W's data sets keep sentences of >= 5 tokens, so this never happens there).
    """
    model = _check_model(model)
    detach_attention = _check_detach(model, detach_attention)
    _check_loo_args(model, loo_mode, None, MAX_TOKENS)
    if positions not in POSITIONS:
        raise ValueError(f"positions must be one of {', '.join(map(repr, POSITIONS))}, got {positions!r}")
    if positions == "all" and loo_mode != "replace":
        raise ValueError('positions="all" needs loo_mode="replace": deleting <SOS> or <EOS> leaves an input '
                         "the model cannot read, while replacing it by UNK (A&Z's blank-out) does not")
    if isinstance(split, Split) and len(split.ids) and int(max(int(np.max(ids)) for ids in split.ids)) >= model.vocab_size:
        raise ValueError("the split has token ids outside the model's vocabulary: was it trained on this data set?")

    with runs.experiment(model, split, seed=seed, max_instances=max_instances, chunk_size=chunk_size,
                          rows=_IMPORTANCE_ROWS, cost=_importance_cost(model), budget=_IMPORTANCE_BUDGET,
                          min_tokens=2, checked_model=model) as run:
        runs.warn_excluded(run, f"importance() on {getattr(split, 'name', 'the batch')!r}", stacklevel=4)
        n, C = len(run), model.n_classes
        probs = np.zeros((n, C), dtype=np.float64)
        attention, gradient, loo = [None] * n, [None] * n, [None] * n
        for rows, chunk in run.chunk_batches():
            tokens = _batch_tokens(model, chunk.tokens)
            g, p, alpha = _gradient(model, tokens, detach_attention, positions)
            with torch.no_grad():
                scores = _loo(model, tokens, p, mode=loo_mode, replacement=model.unk_id, max_tokens=MAX_TOKENS,
                              positions=positions)
            mask = _scored(model, tokens, positions).cpu().numpy()
            probs[rows] = p.double().cpu().numpy()
            for out, values in ((attention, alpha), (gradient, g), (loo, scores)):
                for k, row in zip(rows, _split_rows(values.cpu().numpy(), mask)):
                    out[k] = row
    return ImportanceResult(
        attention=attention,
        gradient=gradient,
        loo=loo,
        settings={
            "model": model_name(model),
            "split": getattr(split, "name", "batch"),
            "detach_attention": detach_attention,
            "loo_mode": loo_mode,
            "positions": positions,
            "max_instances": max_instances,
            "seed": run.seed,
        },
        **run.instance_fields(probs, with_specials=positions == "all"),
    )


# ----------------------------------------------------------------------------- agreement

#: (name, first measure, second measure) of the three rank correlations J&W report.
PAIRS = (("tau_g", "attention", "gradient"), ("tau_loo", "attention", "loo"), ("tau_g_vs_loo", "gradient", "loo"))


def _check_result(result) -> ImportanceResult:
    if not isinstance(result, ImportanceResult):
        raise ValueError(f"expected an ImportanceResult (from attnlib.importance.importance), got {type(result).__name__}")
    n = len(result.indices)
    if n == 0:
        raise ValueError("the ImportanceResult is empty")
    for name in ("attention", "gradient", "loo", "probs", "predicted", "labels"):
        if len(getattr(result, name)) != n:
            raise ValueError(f"ImportanceResult.{name} has {len(getattr(result, name))} entries but indices has {n}")
    lengths = result.lengths
    for name in ("gradient", "loo"):
        other = np.fromiter(map(len, getattr(result, name)), dtype=np.int64, count=n)
        if (other != lengths).any():
            raise ValueError(f"ImportanceResult.{name}[i] must have as many tokens as attention[i]")
    return result


def instance_agreement(result: ImportanceResult) -> pd.DataFrame:
    """Per-instance Kendall tau-b (and p-value) between attention, gradient and leave-one-out.

    One row per instance of ``result`` (indexed by its position in the split); columns
    ``predicted``, ``label``, ``n_tokens`` and, for each pair, ``tau_g``/``p_g``
    (attention vs gradient), ``tau_loo``/``p_loo`` (attention vs LOO) and
    ``tau_g_vs_loo``/``p_g_vs_loo``. One batched :func:`attnlib.metrics.kendall_tau` call
    per pair on the padded arrays. tau is NaN where a row is constant (e.g. uniform
    attention), as in SciPy.
    """
    result = _check_result(result)
    lengths = result.lengths
    if (lengths < 2).any():
        raise ValueError("Kendall tau needs at least 2 tokens per instance; some instances have fewer")
    padded = {m: result.padded(m) for m in _MEASURES}
    columns = {
        "predicted": np.asarray(result.predicted, dtype=np.int64),
        "label": np.asarray(result.labels, dtype=np.int64),
        "n_tokens": lengths,
    }
    for name, a, b in PAIRS:
        tau, p = kendall_tau(padded[a], padded[b], lengths=lengths)
        columns[name] = np.asarray(tau, dtype=np.float64).reshape(-1)
        columns["p" + name[3:]] = np.asarray(p, dtype=np.float64).reshape(-1)
    frame = pd.DataFrame(columns, index=pd.Index(np.asarray(result.indices), name="index"))
    return frame


def agreement(result: ImportanceResult) -> pd.DataFrame:
    """J&W's Table 2: rank agreement of attention with gradients and leave-one-out, by predicted class.

    For each instance, Kendall tau-b between alpha and g (``tau_g``), alpha and the LOO
    scores (``tau_loo``) and g and LOO (``tau_g_vs_loo``), over its real tokens (see
    :func:`instance_agreement`). Rows: predicted class 0, 1, ... (every class of the
    model, n = 0 rows are NaN). Columns: ``n`` and, for each of the three, ``mean`` and
    ``sd`` of tau (population sd, ddof = 0, over the instances where tau is defined) and
    ``sig. frac.``, the fraction of the class's instances with p <= 0.05 (an undefined
    tau counts as not significant). Jain & Wallace 2019, Sec. 4.1, Table 2.
    """
    per = instance_agreement(result)
    n_classes = np.asarray(result.probs).shape[1]
    rows = {}
    for c in range(n_classes):
        group = per[per["predicted"] == c]
        row = {"n": len(group)}
        for name, _, _ in PAIRS:
            tau = group[name].to_numpy()
            p = group["p" + name[3:]].to_numpy()
            defined = tau[~np.isnan(tau)]
            row[f"{name} mean"] = float(defined.mean()) if len(defined) else np.nan
            row[f"{name} sd"] = float(defined.std()) if len(defined) else np.nan
            row[f"{name} sig. frac."] = float(np.mean(np.nan_to_num(p, nan=1.0) <= ALPHA_LEVEL)) if len(p) else np.nan
        rows[c] = row
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index.name = "predicted class"
    return frame
