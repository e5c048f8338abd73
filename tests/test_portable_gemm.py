"""attnlib.portable.matmul / linear: products whose every element is one fma chain in k order.

The chain (c = +0; c = fma(a[i,k], b[k,j], c) for k = 0 .. K-1) is fixed by the code, and IEEE 754
rounds each fma correctly, so its bits are the same on every CPU. These tests check the compiled
kernel against that definition computed independently in exact rational arithmetic, against the
kernel's own one-element-at-a-time reference, across its two kernels (AVX2 + FMA and portable C),
thread counts, layouts and splits of the rows, and the autograd wrappers against torch's.
"""
import ctypes
import warnings
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib import portable



def test_the_kernel_is_built():
    # not a skip: without the kernel the transformers train other bits than the committed book's
    assert portable.gemm_kernel() is not None, (
        "attnlib's compiled GEMM is missing: `make install` builds it (it needs a C compiler)")


def _round_to_float32(x: Fraction) -> np.float32:
    """x rounded to the nearest float32, ties to even (exact: candidates compared as fractions)."""
    guess = np.float32(float(x))
    candidates = {guess, np.nextafter(guess, np.float32(np.inf)), np.nextafter(guess, np.float32(-np.inf))}
    best = min(candidates, key=lambda c: (abs(Fraction(float(c)) - x), int(c.view(np.uint32)) & 1))
    return np.float32(best)


def _exact_chains(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.empty((a.shape[0], b.shape[1]), np.float32)
    for i in range(a.shape[0]):
        for j in range(b.shape[1]):
            c = np.float32(0.0)
            for k in range(a.shape[1]):
                c = _round_to_float32(Fraction(float(a[i, k])) * Fraction(float(b[k, j])) + Fraction(float(c)))
            out[i, j] = c
    return out


def test_every_element_is_the_correctly_rounded_fma_chain():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((7, 19)).astype(np.float32)
    b = (rng.standard_normal((19, 18)) * np.exp(rng.uniform(-8, 8, (19, 18)))).astype(np.float32)
    ours = portable.matmul(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    assert np.array_equal(ours, _exact_chains(a, b))


def _layout(x: np.ndarray, transposed: bool) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(x.T)).t() if transposed else torch.from_numpy(x)


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 40), n=st.integers(1, 40), k=st.one_of(st.integers(0, 40), st.integers(250, 300)),
       batch=st.integers(1, 3), ta=st.booleans(), tb=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_kernels_threads_and_layouts_agree_with_the_reference(m, n, k, batch, ta, tb, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((batch, m, k)).astype(np.float32)
    b = rng.standard_normal((batch, k, n)).astype(np.float32)
    at = torch.stack([_layout(x, ta) for x in a])
    bt = torch.stack([_layout(x, tb) for x in b])
    reference = portable._chains(at, bt, reference=True)
    before = torch.get_num_threads()
    try:
        for threads in (1, 3):
            torch.set_num_threads(threads)
            for generic in (False, True):
                assert torch.equal(portable._chains(at, bt, generic=generic), reference)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(portable.matmul(at, bt), reference)
    # a row's bits do not depend on the other rows (MKL's and OpenBLAS's do, by the split)
    r = max(1, m // 2)
    assert torch.equal(portable.matmul(at[:, :r], bt), reference[:, :r])


def test_large_products_cross_every_block_and_stay_near_the_exact_product():
    rng = np.random.default_rng(1)
    for m, k, n in ((200, 300, 70), (13, 600, 530), (837, 256, 128)):
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        ours = portable.matmul(torch.from_numpy(a), torch.from_numpy(b))
        assert torch.equal(ours, portable._chains(torch.from_numpy(a)[None], torch.from_numpy(b)[None],
                                                  reference=True)[0])
        exact = a.astype(np.float64) @ b.astype(np.float64)
        bound = k * 2.0**-24 * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)) * 1.01
        assert (np.abs(ours.numpy() - exact) <= bound).all()


def test_linear_and_matmul_gradients_are_chains_and_match_torch():
    torch.manual_seed(0)
    x = torch.randn(3, 5, 33, requires_grad=True)
    w = torch.randn(12, 33, requires_grad=True)
    bias = torch.randn(12, requires_grad=True)
    y = portable.linear(x, w, bias)
    assert y.shape == (3, 5, 12)
    y.add_(1.0)  # the output is an ordinary tensor: in-place ops work on it
    g = torch.randn(3, 5, 12)
    y.backward(g)
    ours = [t.grad.clone() for t in (x, w, bias)]
    for t in (x, w, bias):
        t.grad = None
    torch.nn.functional.linear(x, w, bias).backward(g)
    for mine, theirs in zip(ours, (x.grad, w.grad, bias.grad)):
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-5)
    g2 = g.reshape(1, -1, 12)
    assert torch.equal(ours[0], portable._chains(g2, w.detach()[None], reference=True).reshape(x.shape))
    assert torch.equal(ours[1], portable._chains(g2.transpose(1, 2), x.detach().reshape(1, -1, 33),
                                                 reference=True)[0])
    assert torch.equal(ours[2], portable._chains(torch.ones(1, 1, 15), g2, reference=True)[0, 0])

    q = torch.randn(2, 3, 9, 8, requires_grad=True)
    k = torch.randn(2, 3, 8, 10, requires_grad=True)
    out = portable.matmul(q, k)
    out.backward(torch.ones_like(out))
    q2, k2 = q.detach().requires_grad_(), k.detach().requires_grad_()
    torch.matmul(q2, k2).backward(torch.ones(2, 3, 9, 10))
    torch.testing.assert_close(q.grad, q2.grad)
    torch.testing.assert_close(k.grad, k2.grad)


def test_broadcast_batches_and_two_dimensional_right_operands():
    a = torch.randn(4, 6, 5)
    assert torch.equal(portable.matmul(a, torch.ones(5, 3)), portable.matmul(a, torch.ones(1, 5, 3)))
    b = torch.randn(3, 1, 5, 2)
    out = portable.matmul(a, b)
    assert out.shape == (3, 4, 6, 2)
    torch.testing.assert_close(out, torch.matmul(a, b))


def test_other_dtypes_and_devices_are_torch_and_bad_input_is_refused():
    a64, b64 = torch.randn(4, 5, dtype=torch.float64), torch.randn(5, 2, dtype=torch.float64)
    assert torch.equal(portable.matmul(a64, b64), torch.matmul(a64, b64))
    with pytest.raises(ValueError, match="2 or more dimensions"):
        portable.matmul(torch.ones(3), torch.ones(3, 2))
    with pytest.raises(ValueError, match="last dimension"):
        portable.matmul(torch.ones(2, 3), torch.ones(4, 2))
    with pytest.raises(TypeError, match="floating-point"):
        portable.matmul(torch.ones(2, 3, dtype=torch.long), torch.ones(3, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="agree on in"):
        portable.linear(torch.ones(2, 3), torch.ones(4, 5))
    with pytest.raises(ValueError, match="bias must have shape"):
        portable.linear(torch.ones(2, 3), torch.ones(4, 3), torch.ones(3))
    with pytest.raises(TypeError, match="torch.Tensor"):
        portable.linear(np.ones((2, 3)), torch.ones(4, 3))


def test_without_the_compiled_kernel_products_fall_back_to_torch_and_say_so(monkeypatch):
    monkeypatch.setattr(portable, "_GEMM", [None])
    a, b = torch.randn(4, 5), torch.randn(5, 2)
    with pytest.warns(RuntimeWarning, match="compiled GEMM is missing"):
        out = portable.matmul(a, b)
    assert torch.equal(out, torch.matmul(a, b))
    assert portable.gemm_kernel() is None


def test_the_kernel_is_called_without_the_gil():
    lib = portable._gemm_library()
    assert isinstance(lib, ctypes.CDLL) and not isinstance(lib, ctypes.PyDLL)  # ctypes.CDLL releases it
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert portable.gemm_kernel() in ("AVX2 + FMA", "portable C (fmaf)")


def test_chain_products_reroutes_foreign_code_in_this_thread_only():
    import threading

    x, w, b = torch.randn(6, 20), torch.randn(9, 20), torch.randn(9)
    q, k = torch.randn(2, 5, 20), torch.randn(2, 20, 7)
    seen = {}
    with portable.chain_products():
        inside = (torch.nn.functional.linear(x, w, b), torch.matmul(q, k), q @ k, q.matmul(k))
        other = threading.Thread(target=lambda: seen.update(out=torch.nn.functional.linear(x, w, b)))
        other.start()
        other.join()
    assert torch.equal(inside[0], portable.linear(x, w, b))
    for product in inside[1:]:
        assert torch.equal(product, portable.matmul(q, k))
    assert torch.equal(seen["out"], torch.nn.functional.linear(x, w, b))  # the other thread: torch's
    with portable.chain_products():
        assert torch.equal(torch.matmul(torch.ones(3), torch.ones(3)), torch.tensor(3.0))  # 1-D: torch's


def test_attnlib_chains_0_turns_the_kernel_off_without_a_warning(monkeypatch):
    monkeypatch.setenv(portable.CHAINS_ENV, "0")
    a, b = torch.randn(4, 5), torch.randn(5, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert torch.equal(portable.matmul(a, b), torch.matmul(a, b))
    assert portable.gemm_kernel() is None


def test_chain_products_leaves_what_it_cannot_take_to_torch():
    a = torch.randn(3, 4)
    expected = torch.matmul(a, torch.ones(4, 2))
    with portable.chain_products():
        assert torch.equal(a @ torch.ones(4), torch.matmul(a, torch.ones(4)))  # a vector: torch's
        out = torch.empty(3, 2)
        torch.matmul(a, torch.ones(4, 2), out=out)  # out=: torch's
        assert torch.equal(out, expected)
        assert torch.equal(a.double() @ torch.ones(4, 2, dtype=torch.float64),
                           torch.matmul(a.double(), torch.ones(4, 2, dtype=torch.float64)))


def test_second_derivatives_are_chains_too():
    torch.manual_seed(1)
    x = torch.randn(4, 3, requires_grad=True)
    w = torch.randn(2, 3, requires_grad=True)
    q = torch.randn(2, 4, 3, requires_grad=True)
    k = torch.randn(2, 3, 5, requires_grad=True)

    def second(lin, mm):
        (gx,) = torch.autograd.grad(lin(x, w).tanh().sum(), x, create_graph=True)
        (gq,) = torch.autograd.grad(mm(q, k).tanh().sum(), q, create_graph=True)
        return torch.autograd.grad((gx.square().sum(), gq.square().sum()), (w, k))

    ours = second(portable.linear, portable.matmul)
    theirs = second(torch.nn.functional.linear, torch.matmul)
    for mine, torch_s in zip(ours, theirs):
        torch.testing.assert_close(mine, torch_s, rtol=1e-4, atol=1e-5)
