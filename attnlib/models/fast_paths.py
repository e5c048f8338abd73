"""J&W's classifier's faster paths for leave-one-out (:mod:`attnlib.experiments.importance`).

The token-level protocol (:mod:`attnlib.models.protocol`) lets a family offer these; the
experiments take them where the model has them and the generic path (``model(ids)`` on
shortened or replaced rows) elsewhere, with the same numbers up to float rounding.

* :func:`unpadded_probs` -- rows of one length (no padding) through the BiLSTM unpacked;
* :func:`deletion_tvd` -- every single-word deletion of a BiLSTM's inputs at once, from the
  states of x (see the comment above :func:`_lstm_direction`);
* :func:`cnn_deletion_tvd` -- the same for the CNN: a deletion changes only the 2r positions
  whose windows cross it;
* :func:`probs_hiding` -- positions made padding-like in place ("replace by PAD").
"""
from __future__ import annotations

import torch

from .. import portable
from ..data import PAD, UNK
from ..metrics import tvd
from .encoded import Encoded, real_token_mask
from .packed_lstm import input_projection

__all__ = ["unpadded_probs", "deletion_tvd", "cnn_deletion_tvd", "probs_hiding"]

#: At most this many rows (perturbed sequences) per forward pass of :func:`deletion_tvd`.
_MAX_ROWS = 4096


def _is_bilstm(model) -> bool:
    return getattr(getattr(model, "config", None), "encoder", None) == "lstm"


def probs_hiding(model, tokens: torch.Tensor, hide: torch.Tensor) -> torch.Tensor:
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


def unpadded_probs(model, rows: torch.Tensor) -> torch.Tensor:
    """``model(rows).probs``, with the BiLSTM run unpacked (faster on CPU; its rows have no padding).

    Without padding, packing changes nothing in the recurrence, so this is the same
    function as :meth:`AttentionClassifier.encode` computes (up to float rounding). Every
    other model (the transformer too) takes padded rows through its public forward.
    """
    if not _is_bilstm(model) or portable.uses_chains(model.lstm.weight_hh_l0):
        return model(rows).probs  # attnlib's portable LSTM: packing equal lengths costs nothing
    embedded = model.embedding(rows)
    hidden, _ = model.lstm(embedded)
    lengths = torch.full((rows.shape[0],), rows.shape[1], dtype=torch.long, device=rows.device)
    encoded = Encoded(hidden=hidden, mask=real_token_mask(rows), embedded=embedded, lengths=lengths)
    probs, _ = model.decode(hidden, model.attend(encoded))
    return probs


# ----------------------------------------------------------------------------- BiLSTM deletion
# Deleting token t leaves the forward LSTM's states before t and the backward LSTM's states
# after t unchanged. So x_{-t} needs only the forward recurrence from t on (started from the
# forward state at t - 1) and the backward recurrence from t - 1 down to <SOS> (started from
# the backward state at t + 1): n - 1 steps of ONE direction instead of 2 (n - 1), and the
# input projections W_ih x_j are those of x. For a chunk of m sentences padded to n, all
# deletions t = 1 .. n - 2 are a dense (n - 2, m) grid of rows; step p of the recurrence
# advances every deletion that has reached position p at once, so the loop runs over
# positions, never over instances or deletions.


def _lstm_direction(model, reverse: bool):
    """(W_hh, chains) of one direction of the model's BiLSTM: its recurrent weights (4H, H),
    and whether its cells run on attnlib's portable LSTM (float32 on a CPU), as the model's
    forward does."""
    w_hh = getattr(model.lstm, "weight_hh_l0_reverse" if reverse else "weight_hh_l0")
    return w_hh, portable.uses_chains(w_hh)


def _lstm_step(prev_h: torch.Tensor, w_hh: torch.Tensor, gates_x: torch.Tensor, c: torch.Tensor,
               out_h: torch.Tensor, chains: bool) -> None:
    """One LSTM step, in place: c (r, m, H) is updated and the new h written to ``out_h``.

    prev_h (r, m, H) and out_h may be strided views (rows of a larger buffer); gates_x
    (m, 4H) are the input projections W_ih x + b, the same for all r. Gate order i, f, g, o
    (PyTorch's). ``chains``: attnlib's portable cells (:func:`attnlib.portable.lstm_cells`,
    the bits of the model's own forward); else torch's ops.
    """
    if chains:
        h, c_new = portable.lstm_cells(prev_h, c, gates_x, w_hh)
        c.copy_(c_new)
        out_h.copy_(h)
        return
    r, m, H = c.shape
    pre = torch.mm(prev_h.reshape(r * m, H), w_hh.t()).view(r, m, 4 * H)
    pre += gates_x
    pre[..., : 2 * H].sigmoid_()
    pre[..., 3 * H :].sigmoid_()
    g = pre[..., 2 * H : 3 * H].tanh_()
    c.mul_(pre[..., H : 2 * H]).addcmul_(pre[..., :H], g)
    torch.tanh(c, out=out_h)
    out_h.mul_(pre[..., 3 * H :])


def _bilstm_states(model, tokens: torch.Tensor):
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
        w_hh, chains = _lstm_direction(model, reverse)
        x = input_projection(model.lstm, embedded, int(reverse))  # (B, T, 4H), as the forward's
        h_all, c_all = embedded.new_empty(B, T, H), embedded.new_empty(B, T, H)
        h, c = embedded.new_zeros(1, B, H), embedded.new_zeros(1, B, H)
        for p in (range(T - 1, -1, -1) if reverse else range(T)):
            if reverse:  # a row's backward recurrence starts from 0 at its <EOS>, p = n - 1
                fresh = (p < lengths - 1).to(h.dtype)
                h, c = h * fresh, c * fresh
            _lstm_step(h, w_hh, x[:, p], c, h, chains)
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
    (w_hh_f, chains), (w_hh_b, _) = _lstm_direction(model, False), _lstm_direction(model, True)
    c = torch.zeros_like(hidden[:, :, 0, :H])  # (D, m, H): each row is set when its deletion starts
    # forward: step p reads x_p and writes position p - 1 of x_{-t}, for t = 1 .. p - 1
    for p in range(2, n):
        c[p - 2] = c_f[:, p - 2]  # deletion t = p - 1 starts from x's state at t - 1
        # the previous state at position p - 2: for t = p - 1 it is h_f[t - 1], left from above
        _lstm_step(hidden[: p - 1, :, p - 2, :H], w_hh_f, g_f[:, p], c[: p - 1], hidden[: p - 1, :, p - 1, :H],
                   chains)
    # backward: step p reads x_p and writes position p of x_{-t}, for t = p + 1 .. n - 2
    for p in range(n - 3, -1, -1):
        c[p] = c_b[:, p + 2]  # deletion t = p + 1 starts from x's state at t + 1
        _lstm_step(hidden[p:, :, p + 1, H:], w_hh_b, g_b[:, p], c[p:], hidden[p:, :, p, H:], chains)
    return hidden


def _deletion_chunks(lengths: torch.Tensor, max_tokens: int):
    """Chunks of sentences, longest first, each padded to its longest (n tokens), within
    ``max_tokens`` and :data:`_MAX_ROWS`: yields ``(n, rows, b, t, cols)``, where the chunk's
    deletion rows are (t - 1, sentence): sentence ``b``, deleted position ``t`` (1 .. n - 2),
    and ``cols`` (1, n - 1) the positions of x_{-t}."""
    device = lengths.device
    order = torch.argsort(lengths, descending=True, stable=True).tolist()
    start = 0
    while start < len(order):
        n = int(lengths[order[start]])
        m = max(1, min(_MAX_ROWS // (n - 2), max_tokens // ((n - 2) * (n - 1))))
        rows = torch.as_tensor(order[start : start + m], device=device)
        start += len(rows)
        t = torch.arange(1, n - 1, device=device).repeat_interleave(len(rows))
        yield n, rows, rows.repeat(n - 2), t, torch.arange(n - 1, device=device).unsqueeze(0)


def _source(cols: torch.Tensor, t: torch.Tensor, T: int) -> torch.Tensor:
    """x's position that position ``cols`` of x_{-t} holds (rows of ``t``): j before t, j + 1 after."""
    return (cols + (cols >= t.unsqueeze(1)).long()).clamp(0, T - 1)


def _deletion_rows(tokens, lengths, b, t, cols) -> torch.Tensor:
    """Tokens of x_{-t} for the rows (b, t) at the columns ``cols``, PAD outside 0 .. n - 2."""
    inside = (cols >= 0) & (cols < (lengths[b] - 1).unsqueeze(1))
    return torch.where(inside, tokens[b.unsqueeze(1), _source(cols, t, tokens.shape[1])], PAD)


def deletion_tvd(model, tokens, base_probs, max_tokens: int) -> torch.Tensor:
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
    scores = torch.zeros(B, T, dtype=base_probs.dtype, device=device)
    for n, rows, b, t, cols in _deletion_chunks(lengths, max_tokens):
        hidden = _bilstm_deletion_hidden(model, [g[rows, :n] for g in gates], [s[rows, :n] for s in states], n)
        hidden = hidden.view((n - 2) * len(rows), n - 1, -1)  # rows (t - 1, sentence), (R, n - 1, 2H)
        mask = real_token_mask(_deletion_rows(tokens, lengths, b, t, cols))  # x_{-t}'s words
        mask[:, 1] |= ~mask.any(-1)  # t past the end: any distribution will do, it is not read
        probs, _ = model.decode(hidden, model.attend(Encoded(hidden=hidden, mask=mask, embedded=None, lengths=None)))
        keep = t <= lengths[b] - 2
        scores[b[keep], t[keep]] = tvd(base_probs[b[keep]], probs[keep], check=False)
    return scores * real_token_mask(tokens)


# ----------------------------------------------------------------------------- CNN deletion
# The CNN's position p reads x_{p-r} .. x_{p+r} (r: the widest kernel's half-width, 3). In
# x_{-t}, position j holds x_j for j < t and x_{j+1} after, so its state is x's state at j for
# j < t - r and x's state at j + 1 for j >= t + r: only the 2r positions t - r .. t + r - 1
# change. They are recomputed from a slab of x_{-t}'s tokens t - 2r .. t + 2r - 1 (zeros past
# either end, as padding gives), which holds every input they read. Per deletion that is 4r
# positions through the convolutions instead of n - 1: for a 200-token IMDB review, 12 against 199.




def cnn_deletion_tvd(model, tokens, base_probs, max_tokens: int) -> torch.Tensor:
    """Deletion leave-one-out (B, T) for a CNN model, from the states of x (see above).

    ``base_probs`` (B, C) is y-hat(x); None computes it from the same states. The same
    numbers as one forward pass per deletion, up to float rounding (the changed positions run
    through the convolutions in a narrower batch).
    """
    B, T = tokens.shape
    device = tokens.device
    encoded = model.encode(tokens)
    states = encoded.hidden  # (B, T, H)
    if base_probs is None:
        base_probs, _ = model.decode(states, model.attend(encoded))
    r = max(conv.padding[0] for conv in model.convs)
    lengths = encoded.lengths
    scores = torch.zeros(B, T, dtype=base_probs.dtype, device=device)
    for n, _, b, t, cols in _deletion_chunks(lengths, max_tokens):
        # the unchanged states: x's at j before the deletion, at j + 1 after it
        hidden = states[b.unsqueeze(1), _source(cols, t, T)]
        slab_cols = t.unsqueeze(1) + torch.arange(-2 * r, 2 * r, device=device)  # (R, 4r)
        slab = _deletion_rows(tokens, lengths, b, t, slab_cols)
        changed = model.convolve(model.embedding(slab), slab)[:, r : 3 * r]  # positions t - r .. t + r - 1
        at = slab_cols[:, r : 3 * r]
        i, k = ((at >= 0) & (at < n - 1)).nonzero(as_tuple=True)
        hidden[i, at[i, k]] = changed[i, k]
        mask = real_token_mask(_deletion_rows(tokens, lengths, b, t, cols))
        mask[:, 1] |= ~mask.any(-1)  # t past the end: any distribution will do, it is not read
        probs, _ = model.decode(hidden, model.attend(Encoded(hidden=hidden, mask=mask, embedded=None, lengths=None)))
        keep = t <= lengths[b] - 2
        scores[b[keep], t[keep]] = tvd(base_probs[b[keep]], probs[keep], check=False)
    return scores * real_token_mask(tokens)
