"""attnlib.portable.lstm_recurrence / lstm_cells: the LSTM on fma chains and portable gates.

Checked against nn.LSTM in float64 (outputs and every gradient), against itself across its two
kernels (AVX2 and portable C: the same bits), thread counts and batches (a sequence's bits do not
depend on the other sequences of its batch), and the gates' sigmoid and tanh against float64.
"""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnlib import portable
from attnlib.models.packed_lstm import chains_apply, input_projection, packed_bilstm


def _lstm(E=5, H=6, seed=0):
    torch.manual_seed(seed)
    return torch.nn.LSTM(E, H, batch_first=True, bidirectional=True)


def _run(lstm, emb, lengths, run):
    """Padded hidden states, and the gradients of the input and every parameter of a fixed loss."""
    lstm.zero_grad()
    emb = emb.detach().clone().requires_grad_()
    packed = pack_padded_sequence(emb, lengths, batch_first=True, enforce_sorted=False)
    hidden, _ = pad_packed_sequence(run(packed), batch_first=True, total_length=emb.shape[1])
    gen = torch.Generator().manual_seed(3)
    head = torch.randn(hidden.shape[-1], dtype=hidden.dtype, generator=gen)
    (hidden.tanh() @ head).sum().backward()
    return [hidden.detach(), emb.grad] + [p.grad.clone() for p in lstm.parameters()]


@pytest.mark.parametrize("lengths", [[7, 7, 7], [9, 3, 5, 1, 9, 2], [1], [12, 4, 4, 11, 1, 6, 8, 12]])
def test_the_portable_lstm_is_nn_lstm_in_float64_within_float32_rounding(lengths):
    lstm = _lstm()
    lengths = torch.tensor(lengths)
    emb = torch.randn(len(lengths), int(lengths.max()) + 1, 5, generator=torch.Generator().manual_seed(1))
    packed = pack_padded_sequence(emb, lengths, batch_first=True, enforce_sorted=False)
    assert chains_apply(lstm, packed)
    ours = _run(lstm, emb, lengths, lambda p: packed_bilstm(lstm, p))
    lstm64 = _lstm().double()
    theirs = _run(lstm64, emb.double(), lengths, lambda p: lstm64(p)[0])
    names = ["hidden", "input"] + [n for n, _ in lstm.named_parameters()]
    for name, a, b in zip(names, ours, theirs):
        assert a.dtype == torch.float32
        err = (a.double() - b).abs().max().item()
        assert err <= 2e-6 * max(1.0, b.abs().max().item()), (name, err)


def _pieces(lengths, seed=0, E=5, H=6):
    lstm = _lstm(E, H, seed)
    emb = torch.randn(len(lengths), max(lengths), E, generator=torch.Generator().manual_seed(seed + 1))
    return lstm, emb


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=2, max_size=7), st.integers(0, 10**6))
def test_a_sequences_bits_do_not_depend_on_its_batch(lengths, seed):
    lstm, emb = _pieces(lengths, seed % 1000)
    run = lambda p: packed_bilstm(lstm, p)  # noqa: E731
    together = _run(lstm, emb, torch.tensor(lengths), run)
    for b, n in enumerate(lengths):
        alone = _run(lstm, emb[b:b + 1, :n], torch.tensor([n]), run)
        assert torch.equal(together[0][b, :n], alone[0][0])
        assert torch.equal(together[1][b, :n], alone[1][0])  # the input's gradient too


def _raw(lengths, seed, E=5, H=8):
    """gx, w_hh and batch sizes of a random packed batch, as packed_bilstm builds them."""
    lstm, emb = _pieces(lengths, seed, E, H)
    packed = pack_padded_sequence(emb, torch.tensor(lengths), batch_first=True, enforce_sorted=False)
    with torch.no_grad():
        gx = input_projection(lstm, packed.data)
    return gx, torch.stack([lstm.weight_hh_l0, lstm.weight_hh_l0_reverse]).detach(), packed.batch_sizes


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(1, 12), min_size=1, max_size=9), st.sampled_from([8, 13, 64, 70]),
       st.integers(0, 1000))
def test_kernels_and_threads_give_the_same_bits_forward_and_backward(lengths, H, seed):
    gx, w, batch_sizes = _raw(sorted(lengths, reverse=True), seed, H=H)
    sizes, offsets = portable._packed_steps(batch_sizes)
    lib, N, D = portable._gemm_library(), gx.shape[0], 2
    dh = torch.randn(N, D * H, generator=torch.Generator().manual_seed(seed))
    results = []
    for generic, threads in ((False, 1), (False, 2), (True, 1), (True, 2)):
        gates, c, h, dpre = (torch.empty(N, D * 4 * H), torch.empty(N, D * H), torch.empty(N, D * H),
                             torch.empty(N, D * 4 * H))
        portable._run_lstm(lib, sizes, offsets, H, D, gx, w, gates, c, h, None, False, threads, generic)
        portable._run_lstm(lib, sizes, offsets, H, D, None, w, gates, c, dh, dpre, True, threads, generic)
        results.append((gates, c, h, dpre))
    for other in results[1:]:
        assert all(torch.equal(a, b) for a, b in zip(results[0], other))


def test_the_gates_sigmoid_and_tanh_are_accurate_and_the_same_on_both_kernels():
    lib = portable._gemm_library()
    x = np.concatenate([np.linspace(-100, 100, 40001), np.linspace(-1e-3, 1e-3, 2001),
                        [0.0, -0.0, 1e-30, -1e-30, 88.0, -88.0, 1e4, -1e4, 3.4e38, -3.4e38]]).astype(np.float32)
    for which, exact, name in ((0, lambda v: 1 / (1 + np.exp(-v)), "sigmoid"), (1, np.tanh, "tanh")):
        outs = []
        for generic in (0, 1):
            y = np.empty_like(x)
            lib.pg_activation(which, len(x), x.ctypes.data, y.ctypes.data, generic)
            outs.append(y)
        assert np.array_equal(outs[0].view(np.uint32), outs[1].view(np.uint32)), name
        with np.errstate(over="ignore"):
            ref = exact(x.astype(np.float64))
        err = np.abs(outs[0] - ref)
        if which == 0:  # relative where exp is (|x| <= 87), saturated beyond
            inside = np.abs(x) <= 87
            ulps = err[inside] / np.spacing(np.float32(ref[inside])).astype(np.float64)
            assert ulps.max() <= 4, ulps.max()
            assert err[~inside].max() <= 1e-37
        else:  # absolute, as the docstring says
            assert err.max() <= 2.0**-22, err.max()
        assert ((outs[0] >= (0 if which == 0 else -1)) & (outs[0] <= 1)).all()


def test_cells_are_the_recurrences_steps_to_the_bit():
    torch.manual_seed(0)
    H, B = 16, 5
    gx = torch.randn(2 * B, 8 * H)  # two steps of five sequences, both directions
    w = torch.randn(2, 4 * H, H) / 4
    h = portable.lstm_recurrence(gx, w, [B, B])
    zeros = torch.zeros(B, H)
    # forward direction: step 0 from zero state, then step 1
    h0, c0 = portable.lstm_cells(zeros, zeros, gx[:B, :4 * H], w[0])
    h1, _ = portable.lstm_cells(h0, c0, gx[B:, :4 * H], w[0])
    assert torch.equal(h[:B, :H], h0) and torch.equal(h[B:, :H], h1)
    # reverse direction: step 1 first
    r1, c1 = portable.lstm_cells(zeros, zeros, gx[B:, 4 * H:], w[1])
    r0, _ = portable.lstm_cells(r1, c1, gx[:B, 4 * H:], w[1])
    assert torch.equal(h[B:, H:], r1) and torch.equal(h[:B, H:], r0)
    # broadcast gx over leading rows, as leave-one-out's state reuse takes it
    hb, _ = portable.lstm_cells(zeros.expand(3, B, H), zeros.expand(3, B, H), gx[:B, :4 * H], w[0])
    assert all(torch.equal(hb[i], h0) for i in range(3))


def test_bad_input_gets_a_clear_error():
    gx, w = torch.zeros(3, 32), torch.zeros(1, 32, 8)
    with pytest.raises(ValueError, match="non-increasing"):
        portable.lstm_recurrence(gx, w, [1, 2])
    with pytest.raises(ValueError, match="sum to"):
        portable.lstm_recurrence(gx, w, [2])
    with pytest.raises(ValueError, match=r"\(D, 4H, H\)"):
        portable.lstm_recurrence(gx, torch.zeros(1, 30, 8), [3])
    with pytest.raises(ValueError, match="gx must be"):
        portable.lstm_recurrence(torch.zeros(3, 31), w, [3])
    with pytest.raises(ValueError, match="float32 CPU"):
        portable.lstm_recurrence(gx.double(), w.double(), [3])
    with pytest.raises(TypeError):
        portable.lstm_recurrence(gx.long(), w, [3])
    with pytest.raises(ValueError, match="lstm_cells"):
        portable.lstm_cells(torch.zeros(2, 8), torch.zeros(2, 7), torch.zeros(2, 32), torch.zeros(32, 8))


def test_chains_off_or_float64_run_nn_lstm(monkeypatch):
    lstm = _lstm()
    packed = pack_padded_sequence(torch.randn(2, 4, 5), torch.tensor([4, 2]), batch_first=True)
    assert chains_apply(lstm, packed)
    monkeypatch.setenv(portable.CHAINS_ENV, "0")
    assert not chains_apply(lstm, packed)
    with torch.no_grad():
        assert torch.equal(packed_bilstm(lstm, packed).data, lstm(packed)[0].data)
