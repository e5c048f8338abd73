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
* ``rationale_recovery`` -- on the synthetic task, how well each measure ranks the
  known rationale tokens first: now :func:`attnlib.experiments.faithfulness.rationale_recovery`
  (a plausibility metric, beside ERASER's faithfulness metrics), still importable from here.

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

from .. import _runs
from .._runs import InstanceResult
from .._checks import check_bool, check_positive_int
from ..data import EOS, PAD, SOS, UNK, Batch, Split
from ..metrics import kendall_tau, tvd
from ..models import AttentionClassifier, Encoded, TransformerClassifier, eval_mode, real_token_mask

__all__ = [
    "LOO_MODES",
    "MEASURES",
    "gradient_importance",
    "leave_one_out",
    "ImportanceResult",
    "importance",
    "instance_agreement",
    "agreement",
    "rationale_recovery",
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


def _check_model(model) -> AttentionClassifier | TransformerClassifier:
    if not isinstance(model, (AttentionClassifier, TransformerClassifier)):
        raise ValueError(
            f"model must be an attnlib.models.AttentionClassifier (e.g. train_model(...).model) or a "
            f"TransformerClassifier, got {type(model).__name__}"
        )
    return model


def _is_bilstm(model) -> bool:
    """J&W's BiLSTM (which gets its own unpacked and incremental leave-one-out paths)."""
    return isinstance(model, AttentionClassifier) and model.config.encoder == "lstm"


def _check_detach(model, detach_attention) -> bool:
    """``detach_attention`` resolved: None is True (J&W) for their classifier, False for the transformer."""
    transformer = isinstance(model, TransformerClassifier)
    if detach_attention is None:
        return not transformer
    detach_attention = check_bool(detach_attention, "detach_attention")
    if detach_attention and transformer:
        raise ValueError(
            "detach_attention=True detaches J&W's single attention alpha; a TransformerClassifier has an "
            "attention per layer and head and no single one to detach: pass detach_attention=False (or None)"
        )
    return detach_attention


def _batch_tokens(model, batch) -> torch.Tensor:
    """The (B, T) token ids of a Batch or LongTensor, on the model's device, validated."""
    if isinstance(batch, Batch):
        tokens = batch.tokens
    elif isinstance(batch, torch.Tensor):
        tokens = batch
    else:
        raise ValueError(
            f"batch must be an attnlib.data.Batch (e.g. split.batch(...)) or a LongTensor (B, T) of token ids, "
            f"got {type(batch).__name__}"
        )
    if tokens.ndim != 2 or tokens.dtype != torch.long:
        raise ValueError(f"token ids must be a LongTensor of shape (B, T), got {tokens.dtype} {tuple(tokens.shape)}")
    if tokens.shape[0] == 0:
        raise ValueError("the batch is empty")
    if bool(((tokens < 0) | (tokens >= model.vocab_size)).any()):
        raise ValueError(f"token ids must lie in [0, {model.vocab_size}) (the model's vocabulary)")
    tokens = tokens.to(model.embedding.weight.device)
    filled = tokens != PAD
    lengths = filled.sum(-1)
    rows = torch.arange(tokens.shape[0], device=tokens.device)
    if (
        bool((filled[:, 1:] & ~filled[:, :-1]).any())  # padding only at the end
        or bool((tokens[:, 0] != SOS).any())
        or bool((tokens[rows, (lengths - 1).clamp_min(0)] != EOS).any())
    ):
        raise ValueError("every row must be <SOS> tokens <EOS> followed only by padding (see attnlib.data.collate)")
    if not bool(real_token_mask(tokens).any(-1).all()):
        raise ValueError("every instance needs at least one real token between <SOS> and <EOS>")
    return tokens


def _target_probability(model: AttentionClassifier, probs: torch.Tensor) -> torch.Tensor:
    """y-hat per row: P(class 1) for binary models, else the probability of the predicted class."""
    if model.config.n_classes == 2:
        return probs[:, 1]
    return probs.gather(1, probs.detach().argmax(-1, keepdim=True)).squeeze(1)


def _normalise_rows(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """scores / their sum over the mask; 0 off the mask; uniform where a row sums to 0."""
    scores = scores.masked_fill(~mask, 0.0)
    total = scores.sum(-1, keepdim=True)
    uniform = mask.to(scores.dtype) / mask.sum(-1, keepdim=True).to(scores.dtype)
    return torch.where(total > 0, scores / torch.where(total > 0, total, torch.ones_like(total)), uniform)


# ----------------------------------------------------------------------------- gradient


def _gradient(model, tokens: torch.Tensor, detach_attention: bool):
    """(g normalised (B, T), probs (B, C), alpha (B, T)) from ONE forward and ONE backward pass.

    alpha is the model's attention over the real tokens (for the transformer, its [CLS] row
    renormalised there, see :func:`_transformer_gradient`).
    """
    if isinstance(model, TransformerClassifier):
        return _transformer_gradient(model, tokens)
    with torch.enable_grad():
        embedded = model.embedding(tokens).detach().requires_grad_(True)  # e_t, (B, T, E)
        encoded = model.encode(tokens, embedded=embedded)
        alpha = model.attend(encoded)
        probs, _ = model.decode(encoded.hidden, alpha.detach() if detach_attention else alpha)
        # Instances are independent in eval mode (no batch statistics, no cross-row terms),
        # so d(sum_b y-hat_b)/d e_{bt} = d y-hat_b / d e_{bt}: one backward for the batch.
        (grad,) = torch.autograd.grad(_target_probability(model, probs).sum(), embedded)
    raw = (grad * embedded.detach()).sum(-1).abs()  # |<d y-hat / d e_t, e_t>|, (B, T)
    return _normalise_rows(raw, encoded.mask), probs.detach(), alpha.detach()


def _transformer_gradient(model: TransformerClassifier, tokens: torch.Tensor):
    """:func:`_gradient` for the transformer: its public forward, with the word embeddings made a leaf.

    A forward hook on ``model.embedding`` hands the rest of the forward pass a detached copy
    of e_t = E[x_t] (B, T, embed_dim) that requires grad, so autograd stops there (no gradient
    reaches the parameters) and d y-hat / d e_t is the gradient at that leaf. The attention
    returned is ``model(tokens).attention``, the last layer's [CLS] row averaged over the
    heads, cut to the real words and renormalised to sum 1 over them.
    """
    leaves = []

    def make_leaf(module, inputs, output):
        leaves.append(output.detach().requires_grad_(True))
        return leaves[-1]

    with torch.enable_grad():
        handle = model.embedding.register_forward_hook(make_leaf)
        try:
            out = model(tokens)
        finally:
            handle.remove()
        (embedded,) = leaves
        # eval mode: rows never mix (keys are masked per sentence, LayerNorm is per token), so one
        # backward of sum_b y-hat_b gives every instance's own gradient, as for J&W's classifier
        (grad,) = torch.autograd.grad(_target_probability(model, out.probs).sum(), embedded)
    mask = real_token_mask(tokens)
    raw = (grad * embedded.detach()).sum(-1).abs()
    return _normalise_rows(raw, mask), out.probs.detach(), _normalise_rows(out.attention.detach(), mask)


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
    if isinstance(replacement, bool) or not isinstance(replacement, numbers.Integral):
        raise ValueError(f"replacement must be a token id (an int such as UNK={UNK} or PAD={PAD}), got {replacement!r}")
    replacement = int(replacement)
    if not 0 <= replacement < model.vocab_size or replacement in (SOS, EOS):
        raise ValueError(
            f"replacement must be a token id in [0, {model.vocab_size}) other than <SOS>/<EOS>, got {replacement}"
        )
    check_positive_int(max_tokens, "max_tokens")
    return replacement


def _probs_hiding(model: AttentionClassifier, tokens: torch.Tensor, hide: torch.Tensor) -> torch.Tensor:
    """Output distributions with the positions ``hide`` (B, T) made padding-like in place.

    The hidden positions get PAD's embedding and are excluded from the attention, but the
    sequence keeps its length (the LSTM still steps over them; the CNN's windows do not
    shift). This is "replace by PAD"; for the average encoder it equals deletion.
    """
    placeholder = tokens.masked_fill(hide, UNK)  # a non-PAD id so lengths and packing are unchanged
    embedded = model.embedding(tokens.masked_fill(hide, PAD))
    encoded = model.encode(placeholder, embedded=embedded)
    encoded = Encoded(hidden=encoded.hidden, mask=encoded.mask & ~hide, embedded=embedded, lengths=encoded.lengths)
    probs, _ = model.decode(encoded.hidden, model.attend(encoded))
    return probs


def _probs_full_rows(model, rows: torch.Tensor) -> torch.Tensor:
    """``model(rows).probs``, with the BiLSTM run unpacked (faster on CPU; its rows have no padding).

    Without padding, packing changes nothing in the recurrence, so this is the same
    function as :meth:`AttentionClassifier.encode` computes (up to float rounding). Every
    other model (the transformer too) takes padded rows through its public forward.
    """
    if not _is_bilstm(model):
        return model(rows).probs
    embedded = model.embedding(rows)
    hidden, _ = model.lstm(embedded)
    lengths = torch.full((rows.shape[0],), rows.shape[1], dtype=torch.long, device=rows.device)
    encoded = Encoded(hidden=hidden, mask=real_token_mask(rows), embedded=embedded, lengths=lengths)
    probs, _ = model.decode(hidden, model.attend(encoded))
    return probs


def _base_probs(model, tokens: torch.Tensor) -> torch.Tensor:
    """y-hat(x) for every row of ``tokens`` (for the BiLSTM: rows grouped by length, unpacked)."""
    if not _is_bilstm(model):
        return model(tokens).probs
    lengths = (tokens != PAD).sum(-1)
    out = None
    for n in torch.unique(lengths).tolist():
        rows = (lengths == n).nonzero(as_tuple=True)[0]
        probs = _probs_full_rows(model, tokens[rows, :n])
        if out is None:
            out = probs.new_empty(tokens.shape[0], probs.shape[1])
        out[rows] = probs
    return out


# ----------------------------------------------------------------------------- BiLSTM deletion
# Deleting token t leaves the forward LSTM's states before t and the backward LSTM's states
# after t unchanged. So x_{-t} needs only the forward recurrence from t on (started from the
# forward state at t - 1) and the backward recurrence from t - 1 down to <SOS> (started from
# the backward state at t + 1): n - 1 steps of ONE direction instead of 2 (n - 1), and the
# input projections W_ih x_j are those of x. For a chunk of m sentences padded to n, all
# deletions t = 1 .. n - 2 are a dense (n - 2, m) grid of rows; step p of the recurrence
# advances every deletion that has reached position p at once, so the loop runs over
# positions, never over instances or deletions.


def _lstm_direction(model: AttentionClassifier, reverse: bool):
    """(W_ih^T, b_ih + b_hh, W_hh^T) of one direction of the model's BiLSTM."""
    suffix = "_reverse" if reverse else ""
    lstm = model.lstm
    bias = getattr(lstm, f"bias_ih_l0{suffix}") + getattr(lstm, f"bias_hh_l0{suffix}")
    return getattr(lstm, f"weight_ih_l0{suffix}").t(), bias, getattr(lstm, f"weight_hh_l0{suffix}").t()


def _lstm_step(prev_h: torch.Tensor, w_hh_t: torch.Tensor, gates_x: torch.Tensor, c: torch.Tensor, out_h: torch.Tensor) -> None:
    """One LSTM step, in place: c (r, m, H) is updated and the new h written to ``out_h``.

    prev_h (r, m, H) and out_h may be strided views (rows of a larger buffer); gates_x
    (m, 4H) are the input projections W_ih x + b, the same for all r. Gate order i, f, g, o
    (PyTorch's).
    """
    r, m, H = c.shape
    pre = torch.mm(prev_h.reshape(r * m, H), w_hh_t).view(r, m, 4 * H)
    pre += gates_x
    pre[..., : 2 * H].sigmoid_()
    pre[..., 3 * H :].sigmoid_()
    g = pre[..., 2 * H : 3 * H].tanh_()
    c.mul_(pre[..., H : 2 * H]).addcmul_(pre[..., :H], g)
    torch.tanh(c, out=out_h)
    out_h.mul_(pre[..., 3 * H :])


def _bilstm_states(model: AttentionClassifier, tokens: torch.Tensor):
    """Input gates and (h, c) of both directions at every position: the encoder run on x.

    Returns ``gates`` (forward, backward), each (B, T, 4H), and ``h_f, c_f, h_b, c_b``,
    each (B, T, H); the backward recurrence of each row starts at its own <EOS>. Values past
    a row's end are not meaningful (never read for a real deletion).
    """
    B, T = tokens.shape
    H = model.config.hidden
    embedded = model.embedding(tokens)  # (B, T, E)
    lengths = (tokens != PAD).sum(-1, keepdim=True)  # (B, 1)
    gates, states = [], []
    for reverse in (False, True):
        w_ih_t, bias, w_hh_t = _lstm_direction(model, reverse)
        x = torch.matmul(embedded, w_ih_t) + bias  # (B, T, 4H)
        h_all, c_all = embedded.new_empty(B, T, H), embedded.new_empty(B, T, H)
        h, c = embedded.new_zeros(1, B, H), embedded.new_zeros(1, B, H)
        for p in (range(T - 1, -1, -1) if reverse else range(T)):
            if reverse:  # a row's backward recurrence starts from 0 at its <EOS>, p = n - 1
                fresh = (p < lengths - 1).to(h.dtype)
                h, c = h * fresh, c * fresh
            _lstm_step(h, w_hh_t, x[:, p], c, h)
            h_all[:, p], c_all[:, p] = h[0], c[0]
        gates.append(x)
        states += [h_all, c_all]
    return gates, states


def _bilstm_deletion_hidden(model, gates, states, n: int) -> torch.Tensor:
    """Hidden states of x_{-t} for every sentence and every t = 1 .. n - 2, by state reuse.

    ``gates`` and ``states`` are :func:`_bilstm_states` of m sentences, cut to width n.
    Returns (n - 2, m, n - 1, 2H): deletion t - 1, sentence, position j of x_{-t}. In x_{-t}
    position j holds x_j for j < t and x_{j + 1} after, so its forward state is h_f[j] for
    j < t and its backward state h_b[j + 1] for j >= t; the rest is recomputed.
    """
    (g_f, g_b), (h_f, c_f, h_b, c_b) = gates, states
    m, _, H = h_f.shape
    W, D = n - 1, n - 2
    # the unchanged halves, for every deletion at once (overwritten below where they change);
    # built by cat, not empty(): with deterministic algorithms on, torch fills empty() with NaN
    hidden = torch.cat([h_f[:, :W].expand(D, m, W, H), h_b[:, 1 : W + 1].expand(D, m, W, H)], -1)
    w_hh_f, w_hh_b = _lstm_direction(model, False)[2], _lstm_direction(model, True)[2]
    c = torch.zeros_like(hidden[:, :, 0, :H])  # (D, m, H): each row is set when its deletion starts
    # forward: step p reads x_p and writes position p - 1 of x_{-t}, for t = 1 .. p - 1
    for p in range(2, n):
        c[p - 2] = c_f[:, p - 2]  # deletion t = p - 1 starts from x's state at t - 1
        # the previous state at position p - 2: for t = p - 1 it is h_f[t - 1], left from above
        _lstm_step(hidden[: p - 1, :, p - 2, :H], w_hh_f, g_f[:, p], c[: p - 1], hidden[: p - 1, :, p - 1, :H])
    # backward: step p reads x_p and writes position p of x_{-t}, for t = p + 1 .. n - 2
    for p in range(n - 3, -1, -1):
        c[p] = c_b[:, p + 2]  # deletion t = p + 1 starts from x's state at t + 1
        _lstm_step(hidden[p:, :, p + 1, H:], w_hh_b, g_b[:, p], c[p:], hidden[p:, :, p, H:])
    return hidden


def _bilstm_loo(model, tokens, base_probs, max_tokens: int) -> torch.Tensor:
    """Deletion leave-one-out (B, T) for a BiLSTM model, from the states of x (see above).

    ``base_probs`` (B, C) is y-hat(x); None computes it from the same states.

    Every (deletion, sentence) pair of a chunk is decoded, including the few where t is
    past the sentence's end (shorter sentences of the chunk); those are not read.
    """
    B, T = tokens.shape
    device = tokens.device
    gates, states = _bilstm_states(model, tokens)
    lengths = (tokens != PAD).sum(-1)
    if base_probs is None:  # y-hat(x) from the same states
        h_f, _, h_b, _ = states
        encoded = Encoded(hidden=torch.cat([h_f, h_b], -1) * (tokens != PAD).unsqueeze(-1),
                          mask=real_token_mask(tokens), embedded=None, lengths=lengths)
        base_probs, _ = model.decode(encoded.hidden, model.attend(encoded))
    order = torch.argsort(lengths, descending=True, stable=True).tolist()
    scores = torch.zeros(B, T, dtype=base_probs.dtype, device=device)
    start = 0
    while start < B:  # chunks of sentences, each padded to its longest
        n = int(lengths[order[start]])
        m = max(1, min(_MAX_ROWS // (n - 2), max_tokens // ((n - 2) * (n - 1))))
        rows = torch.as_tensor(order[start : start + m], device=device)
        m, start = len(rows), start + m
        hidden = _bilstm_deletion_hidden(model, [g[rows, :n] for g in gates], [s[rows, :n] for s in states], n)
        hidden = hidden.view((n - 2) * m, n - 1, -1)  # rows (t - 1, sentence), (R, n - 1, 2H)
        b = rows.repeat(n - 2)
        t = torch.arange(1, n - 1, device=device).repeat_interleave(m)
        cols = torch.arange(n - 1, device=device).unsqueeze(0)
        deleted = tokens[b.unsqueeze(1), (cols + (cols >= t.unsqueeze(1)).long()).clamp_max(T - 1)]  # x_{-t}
        mask = real_token_mask(deleted) & (cols < (lengths[b] - 1).unsqueeze(1))
        mask[:, 1] |= ~mask.any(-1)  # t past the end: any distribution will do, it is not read
        probs, _ = model.decode(hidden, model.attend(Encoded(hidden=hidden, mask=mask, embedded=None, lengths=None)))
        keep = t <= lengths[b] - 2
        scores[b[keep], t[keep]] = tvd(base_probs[b[keep]], probs[keep], check=False)
    return scores * real_token_mask(tokens)


def _loo(
    model,
    tokens: torch.Tensor,
    base_probs: torch.Tensor,
    *,
    mode: str,
    replacement: int,
    max_tokens: int,
) -> torch.Tensor:
    """Leave-one-out scores (B, T); validated inputs, eval mode, no grad; ``base_probs``: y-hat(x)."""
    device = tokens.device
    B, T = tokens.shape
    mask = real_token_mask(tokens)
    n_real = mask.sum(-1)
    delete = mode == "delete"
    if (delete or replacement == PAD) and bool((n_real < 2).any()):
        bad = int((n_real < 2).sum())
        raise ValueError(
            f"{bad} instance(s) have fewer than 2 real tokens: leaving out their only token leaves nothing "
            f"to attend to. Use mode='replace' with replacement=UNK, or drop them (J&W's data sets keep "
            f"sentences of >= 5 tokens)."
        )
    if delete and _is_bilstm(model):
        return _bilstm_loo(model, tokens, base_probs, max_tokens)
    # One row per (instance b, real position t): row-major, so rows of an instance are contiguous.
    row_b, row_t = mask.nonzero(as_tuple=True)
    lengths = (tokens != PAD).sum(-1)  # including SOS/EOS
    row_len = lengths[row_b] - (1 if delete else 0)
    # Longest rows first: each chunk is padded only to its own longest row, and rows of
    # similar length share a chunk, so padding waste stays small even for mixed batches.
    order = torch.argsort(row_len, descending=True, stable=True)
    row_b, row_t, row_len = row_b[order], row_t[order], row_len[order]
    lens = row_len.tolist()
    if _is_bilstm(model):
        # chunks of rows of ONE length: no padding, so the LSTM can run unpacked
        group_end = np.append(np.flatnonzero(np.diff(np.asarray(lens))) + 1, len(lens))
    else:  # rows sorted by length: a chunk's rows have similar lengths, little padding
        group_end = np.asarray([len(lens)])
    scores = torch.zeros(B, T, dtype=base_probs.dtype, device=device)
    start, n_rows, g = 0, len(lens), 0
    while start < n_rows:
        width = lens[start]
        while group_end[g] <= start:
            g += 1
        stop = min(int(group_end[g]), start + _MAX_ROWS, start + max(1, max_tokens // width))
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
            if replacement == PAD and isinstance(model, AttentionClassifier):
                probs = _probs_hiding(model, rows, hit)
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
    replacement: int = UNK,
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
            most 4,096 rows). All sum_b n_b perturbed sequences of the batch are
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
        reuse = mode == "delete" and _is_bilstm(model)  # y-hat(x) comes with the states
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
    """cost(T, H): elements per instance of one gradient pass (for the transformer: every layer's T x T heads)."""
    if isinstance(model, TransformerClassifier):
        c = model.config
        return lambda T, H: c.layers * T * (c.ffn_mult * H + c.heads * T)
    return lambda T, H: T * H


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

    Instances with fewer than 2 real tokens are left out after the subset is drawn, with a
    warning: a rank correlation needs 2 tokens and deleting an only token leaves nothing to
    classify (J&W's data sets keep sentences of >= 5 tokens, so this never happens there).
    """
    model = _check_model(model)
    detach_attention = _check_detach(model, detach_attention)
    _check_loo_args(model, loo_mode, UNK, MAX_TOKENS)
    if isinstance(split, Split) and len(split.ids) and int(max(int(np.max(ids)) for ids in split.ids)) >= model.vocab_size:
        raise ValueError("the split has token ids outside the model's vocabulary: was it trained on this data set?")

    with _runs.experiment(model, split, seed=seed, max_instances=max_instances, chunk_size=chunk_size,
                          rows=_IMPORTANCE_ROWS, cost=_importance_cost(model), budget=_IMPORTANCE_BUDGET,
                          min_tokens=2, checked_model=model) as run:
        _runs.warn_excluded(run, f"importance() on {getattr(split, 'name', 'the batch')!r}", stacklevel=4)
        n, C = len(run), model.config.n_classes
        probs = np.zeros((n, C), dtype=np.float64)
        attention, gradient, loo = [None] * n, [None] * n, [None] * n
        for rows, chunk in run.chunk_batches():
            tokens = _batch_tokens(model, chunk.tokens)
            g, p, alpha = _gradient(model, tokens, detach_attention)
            with torch.no_grad():
                scores = _loo(model, tokens, p, mode=loo_mode, replacement=UNK, max_tokens=MAX_TOKENS)
            mask = real_token_mask(tokens).cpu().numpy()
            probs[rows] = p.double().cpu().numpy()
            for out, values in ((attention, alpha), (gradient, g), (loo, scores)):
                for k, row in zip(rows, _split_rows(values.cpu().numpy(), mask)):
                    out[k] = row
    return ImportanceResult(
        attention=attention,
        gradient=gradient,
        loo=loo,
        settings={
            "model": model.config.name,
            "split": getattr(split, "name", "batch"),
            "detach_attention": detach_attention,
            "loo_mode": loo_mode,
            "max_instances": max_instances,
            "seed": run.seed,
        },
        **run.instance_fields(probs),
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


# ----------------------------------------------------------------------------- rationales


def __getattr__(name: str):
    """``rationale_recovery`` lives in :mod:`attnlib.experiments.faithfulness` now; this name keeps working.

    Imported on first use, because faithfulness builds on this module (a module-level import
    here would be circular).
    """
    if name == "rationale_recovery":
        from .faithfulness import rationale_recovery

        return rationale_recovery
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
