"""J&W's BiLSTM over a packed batch: attnlib's portable LSTM, or ATen's with an O(T) backward.

On a CPU in float32, with attnlib's compiled kernel built (:func:`chains_apply`), the
recurrence runs on :func:`attnlib.portable.lstm_recurrence`: the input projections are
:func:`attnlib.portable.linear`'s fma chains, each pre-activation one fma chain starting from
them, and the gates' sigmoid and tanh plain IEEE adds, multiplies and divides in a fixed order.
The states and every gradient are then the same bits on every CPU and for any thread count, and
a sequence's bits do not depend on the other sequences of its batch. It runs with and without
gradients, so training, inference and leave-one-out's state reuse
(:mod:`attnlib.models.fast_paths`, through :func:`input_projection` and
:func:`attnlib.portable.lstm_cells`) compute one function. Its bits are not ``nn.LSTM``'s (other
roundings of the same function, within float32 rounding of ``nn.LSTM`` in float64: tested).

Elsewhere (float64, a GPU, ``ATTNLIB_CHAINS=0``, no compiled kernel) ``nn.LSTM`` runs, on a CPU
with gradients through :func:`packed_bilstm`'s O(T) backward. ``nn.LSTM`` over a
:class:`~torch.nn.utils.rnn.PackedSequence` runs ATen's composite LSTM (``PackedLayer`` and
``ReversedPackedLayer`` in ATen's ``RNN.cpp``): it projects every input at once
(``W_ih x + b_ih``), then takes step t's rows with ``narrow``. Autograd answers each of those T
``narrow`` calls with a zero tensor of the whole projection (N x 4H, N the batch's tokens)
holding that step's rows, and adds the T of them up: two passes over N x 4H floats per step.
The O(T) path runs the same ops in the same order, from Python, except that it takes the steps'
rows with one ``split``, whose backward is one ``cat``: the outputs and every gradient are the
bits ``nn.LSTM`` gives (``tests/test_models.py`` checks them with ``torch.equal``). It is used
on a CPU with oneDNN off (attnlib's kernel pins, :mod:`attnlib.cpu`), with gradients recorded,
for a one-layer bidirectional LSTM with biases (:func:`applies`).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import PackedSequence

from .. import portable

__all__ = ["packed_bilstm", "applies", "chains_apply", "input_projection"]


def applies(lstm: nn.LSTM, packed: PackedSequence) -> bool:
    """Whether :func:`packed_bilstm` replaces ``lstm(packed)`` here (CPU, gradients, the book's shape)."""
    return (
        isinstance(lstm, nn.LSTM)
        and isinstance(packed, PackedSequence)
        and packed.data.device.type == "cpu"
        and torch.is_grad_enabled()
        and not torch.backends.mkldnn.enabled  # attnlib's CPU pins turn oneDNN off; with it on, its GEMMs differ
        and (packed.data.requires_grad or any(p.requires_grad for p in lstm.parameters()))
        and lstm.num_layers == 1
        and lstm.bidirectional
        and lstm.bias
        and getattr(lstm, "proj_size", 0) == 0
    )


def _cell(step_input, h, c, w_hh, b_hh):
    """ATen's ``LSTMCell`` with a precomputed input projection, op for op."""
    gates = F.linear(h, w_hh, b_hh).add_(step_input)
    ingate, forgetgate, cellgate, outgate = gates.unsafe_chunk(4, 1)
    ingate, forgetgate = ingate.sigmoid_(), forgetgate.sigmoid_()
    cellgate, outgate = cellgate.tanh_(), outgate.sigmoid_()
    cy = (forgetgate * c).add_(ingate * cellgate)
    return outgate * cy.tanh(), cy


def _direction(data, sizes, w_ih, w_hh, b_ih, b_hh, reverse: bool) -> torch.Tensor:
    """One direction over the packed rows (ATen's ``PackedLayer`` / ``ReversedPackedLayer``)."""
    steps = F.linear(data, w_ih, b_ih).split(sizes)
    zeros = data.new_zeros(sizes[0], w_hh.shape[1])
    outputs = []
    if not reverse:
        h = c = zeros
        for size, step in zip(sizes, steps):
            if size < h.shape[0]:  # the shorter rows have ended
                h, c = h.narrow(0, 0, size), c.narrow(0, 0, size)
            h, c = _cell(step, h, c, w_hh, b_hh)
            outputs.append(h)
    else:
        h = c = zeros.narrow(0, 0, sizes[-1])
        for i in range(len(sizes) - 1, -1, -1):
            last, size = h.shape[0], sizes[i]
            if size > last:  # rows that start here join with zero states
                h = torch.cat([h, zeros.narrow(0, last, size - last)])
                c = torch.cat([c, zeros.narrow(0, last, size - last)])
            h, c = _cell(steps[i], h, c, w_hh, b_hh)
            outputs.append(h)
        outputs.reverse()
    return torch.cat(outputs, 0)


def chains_apply(lstm: nn.LSTM, packed: PackedSequence) -> bool:
    """Whether :func:`packed_bilstm` runs this on attnlib's portable LSTM (float32 on a CPU, the
    compiled kernel built and on; a one-layer bidirectional LSTM with biases), with or without
    gradients."""
    return (
        isinstance(lstm, nn.LSTM)
        and isinstance(packed, PackedSequence)
        and lstm.num_layers == 1
        and lstm.bidirectional
        and lstm.bias
        and getattr(lstm, "proj_size", 0) == 0
        and portable.uses_chains(packed.data, lstm.weight_hh_l0)
    )


def input_projection(lstm: nn.LSTM, x: torch.Tensor, direction: int | None = None) -> torch.Tensor:
    """``x W_ih^T + (b_ih + b_hh)`` as :func:`attnlib.portable.linear`'s chains: both directions
    side by side (..., 8H), or one (..., 4H) (0 forward, 1 reverse). The same bits per element
    either way (a chain reads one row of x and one row of W_ih)."""
    suffixes = ("", "_reverse") if direction is None else (("", "_reverse")[direction],)
    weights = [getattr(lstm, f"weight_ih_l0{s}") for s in suffixes]
    biases = [getattr(lstm, f"bias_ih_l0{s}") + getattr(lstm, f"bias_hh_l0{s}") for s in suffixes]
    if len(suffixes) == 1:
        return portable.linear(x, weights[0], biases[0])
    return portable.linear(x, torch.cat(weights), torch.cat(biases))


def packed_bilstm(lstm: nn.LSTM, packed: PackedSequence) -> PackedSequence:
    """``lstm(packed)[0]``: on attnlib's portable LSTM where :func:`chains_apply` (the same bits
    on every CPU); else with an O(T) backward where :func:`applies` (nn.LSTM's bits); else
    ``lstm(packed)[0]``."""
    if chains_apply(lstm, packed):
        gx = input_projection(lstm, packed.data)
        w_hh = torch.stack([lstm.weight_hh_l0, lstm.weight_hh_l0_reverse])
        out = portable.lstm_recurrence(gx, w_hh, packed.batch_sizes)
        return PackedSequence(out, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices)
    if not applies(lstm, packed):
        return lstm(packed)[0]
    sizes = packed.batch_sizes.tolist()
    directions = [
        _direction(packed.data, sizes, *(getattr(lstm, f"{name}_l0{suffix}") for name in
                                          ("weight_ih", "weight_hh", "bias_ih", "bias_hh")), reverse=bool(suffix))
        for suffix in ("", "_reverse")
    ]
    return PackedSequence(torch.cat(directions, -1), packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices)
