"""Portable arithmetic: ops whose bits do not depend on the CPU's vendor.

An op gives the same bits on every x86-64 CPU when it is plain IEEE arithmetic (add, mul,
div, fma) in a fixed order, or correctly rounded (IEEE's square root). It does not when a
library picks its code by CPU vendor at run time. Measured with ``../shared/cross-cpu``
(torch 2.11 and 2.13, attnlib's kernel pins in force; see :mod:`attnlib.cpu`):

* ``torch.sqrt`` and ``torch.pow(x, 0.5)`` on a CPU go through MKL's vector-math library
  (VML), which dispatches by vendor: an AMD EPYC and an Intel Xeon disagree, and on the AMD
  EPYC 208 of 1,000 float32 square roots (and 16 of 1,000 float64 ones, 0-d tensors too)
  differ from the correctly rounded root. :func:`sqrt` is the correctly rounded one.
* torch's single-tensor and foreach ``Adam`` take their square root that way, so the first
  optimizer step already parted the two CPUs' BiLSTMs. The fused CPU kernel
  (``Adam(fused=True)``) takes the hardware square root, which IEEE requires to be correctly
  rounded: it gave the same bits on both CPUs, pinned or not. :func:`adam` builds it.
* L-BFGS's strong-Wolfe line search takes ``Tensor.sqrt`` of a 0-d tensor:
  :func:`lbfgs_step` runs it with :func:`sqrt` in its place.
* rsqrt, div, reciprocal, addcdiv, addcmul, lerp, maximum, exp, tanh, sigmoid, log, softmax,
  GEMMs under MKL's pinned branch and an LSTM forward: identical on both CPUs.
* :func:`matmul` and :func:`linear`: float32 products on a CPU in which every element is one
  fused multiply-add chain in k order (``c = fma(a[i,k], b[k,j], c)`` from +0), computed by
  attnlib's compiled kernel (``attnlib/_fmagemm.c``). IEEE 754 rounds each fma correctly, so the
  bits are the same on every CPU by construction, for any thread count and any split of the rows;
  MKL's reproducible branch, which attnlib pins, promises that only for its own SSE2 code, at
  about 40% of the speed (``benchmarks/run.py gemm``).
* :func:`lstm_recurrence` and :func:`lstm_cells`: an LSTM's recurrence, forward and backward, on
  the same chains, with the gates' sigmoid and tanh in IEEE adds, multiplies and divides (no
  library call, no fma: the scalar and the AVX2 code give the same bits), in the same kernel
  library. The states and gradients are the same bits on every CPU and thread count.

On a CUDA device ``torch.sqrt`` is already correctly rounded (nvcc's default
``-prec-sqrt=true``), so :func:`sqrt` is ``torch.sqrt`` there. ``tests/test_portable.py``
checks every elementwise op the book uses against numpy's correctly rounded results, and a
static check keeps ``torch.sqrt`` and non-fused optimizers out of attnlib.
"""
from __future__ import annotations

import ctypes
import importlib.util
import math
import os
import threading
import warnings
from collections.abc import Iterable
from contextlib import contextmanager

import numpy as np
import torch

__all__ = ["sqrt", "adam", "lbfgs_step", "LBFGS_PRIVATE", "lbfgs_private_changed", "matmul", "linear", "Linear", "chain_products", "gemm_kernel",
           "uses_chains", "lstm_recurrence", "lstm_cells"]


class _CorrectlyRoundedSqrt(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = torch.from_numpy(np.asarray(np.sqrt(x.detach().cpu().numpy())))  # numpy: the hardware's IEEE sqrt
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad / (2 * out)


def sqrt(x: torch.Tensor) -> torch.Tensor:
    """The correctly rounded square root of a float tensor, on any device; differentiable.

    On a CPU it is numpy's (the hardware's IEEE square root), not torch's, whose vendor-dispatched
    vector-math path rounds differently on Intel and AMD. On other devices it is ``torch.sqrt``.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"sqrt takes a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"sqrt takes a floating-point tensor, got {x.dtype}")
    if x.device.type != "cpu" or x.dtype not in (torch.float32, torch.float64):
        return torch.sqrt(x)
    return _CorrectlyRoundedSqrt.apply(x)


def adam(params: Iterable, *, lr: float, amsgrad: bool = False, weight_decay: float = 0.0) -> torch.optim.Adam:
    """``torch.optim.Adam`` with the fused kernel: the same bits on every x86-64 CPU.

    ``params``: tensors or parameter groups, as ``torch.optim.Adam`` takes them. The fused kernel
    needs floating-point parameters on one device type that it supports (CPU, CUDA, MPS, XPU);
    elsewhere this raises a ValueError rather than fall back to an optimizer whose square root
    depends on the CPU. It is also faster than the single-tensor loop (``benchmarks/run.py adam``).
    """
    try:
        return torch.optim.Adam(params, lr=lr, amsgrad=amsgrad, weight_decay=weight_decay, fused=True)
    except RuntimeError as err:
        raise ValueError(f"the fused Adam kernel cannot take these parameters ({err}); attnlib trains only "
                         "floating-point parameters on a CPU, CUDA or MPS device") from err


_LBFGS_LOCK = threading.Lock()

#: The private torch function :func:`lbfgs_step` swaps out, and what it was written against: the
#: SHA-256 of ``inspect.getsource(torch.optim.lbfgs._cubic_interpolate)`` in torch 2.13.0 (the
#: pinned version, requirements/constraints.txt). :func:`lbfgs_private_changed` compares it.
LBFGS_PRIVATE = ("torch.optim.lbfgs._cubic_interpolate", "2.13.0",
                 "cd63e37c40214ac725596e12f838fad9ae5fa3872ec4574a3c4073339b03d681")


def lbfgs_private_changed() -> str | None:
    """None while torch's private ``_cubic_interpolate`` is the code :func:`lbfgs_step` replaces;
    else what changed and the fix (tests/test_portable.py fails with it)."""
    import hashlib
    import inspect

    from torch.optim import lbfgs

    name, version, digest = LBFGS_PRIVATE
    function = getattr(lbfgs, "_cubic_interpolate", None)
    if function is None:
        return (f"torch {torch.__version__} has no {name} any more: attnlib.portable.lbfgs_step swaps it for "
                f"the portable line search; implement the strong-Wolfe line search in attnlib or pin torch {version}")
    if hashlib.sha256(inspect.getsource(function).encode()).hexdigest() != digest:
        return (f"{name} in torch {torch.__version__} is not the code of torch {version} that "
                f"attnlib.portable._portable_cubic_interpolate restates: compare the two, carry the change "
                f"over (keeping the correctly rounded square root), and update attnlib.portable.LBFGS_PRIVATE")
    return None


def _portable_cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    # torch.optim.lbfgs._cubic_interpolate with its one square root correctly rounded
    if bounds is not None:
        xmin_bound, xmax_bound = bounds
    else:
        xmin_bound, xmax_bound = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1**2 - g1 * g2
    if d2_square >= 0:
        d2 = sqrt(d2_square) if isinstance(d2_square, torch.Tensor) else float(np.sqrt(d2_square))
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    return (xmin_bound + xmax_bound) / 2.0


def lbfgs_step(optimizer: torch.optim.LBFGS, closure):
    """``optimizer.step(closure)`` with the strong-Wolfe line search's square root correctly rounded.

    The line search is module code of ``torch.optim.lbfgs``; its ``_cubic_interpolate`` is
    swapped for the portable one for the duration of the step (under a lock: other threads
    running L-BFGS at the same time see the same function).
    """
    if not isinstance(optimizer, torch.optim.LBFGS):
        raise TypeError(f"lbfgs_step takes a torch.optim.LBFGS, got {type(optimizer).__name__}")
    from torch.optim import lbfgs

    with _LBFGS_LOCK:
        original = lbfgs._cubic_interpolate
        lbfgs._cubic_interpolate = _portable_cubic_interpolate
        try:
            return optimizer.step(closure)
        finally:
            lbfgs._cubic_interpolate = original


# ---------------------------------------------------------------------------------------------
# Products as fused multiply-add chains (attnlib/_fmagemm.c, built by setup.py at install)

_GEMM_LOCK = threading.Lock()
_GEMM: list = []  # [the loaded library or None], once loaded
_KERNEL_NAMES = {1: "AVX2 + FMA", 0: "portable C (fmaf)"}


def _gemm_library():
    """The compiled kernel through ctypes (which releases the GIL for each call), or None."""
    with _GEMM_LOCK:
        if not _GEMM:
            spec = importlib.util.find_spec("attnlib._fmagemm")
            lib = None
            if spec is not None and spec.origin:
                lib = ctypes.CDLL(spec.origin)
                p, s, i = ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int
                lib.pg_sgemm.argtypes = [i, i, i, i, p, s, s, s, p, s, s, s, p, s, s, i, i]
                lib.pg_sgemm.restype = i
                lib.pg_sgemm_reference.argtypes = [i, i, i, p, s, s, p, s, s, p, s]
                lib.pg_sgemm_reference.restype = None
                lib.pg_kernel.restype = i
                lib.pg_lstm.argtypes = [i, i, p, p, i, p, s, p, p, s, p, s, p, s, p, s, i, i, i]
                lib.pg_lstm.restype = i
                lib.pg_lstm_cells.argtypes = [i, i, p, s, p, s, p, s, p, p, p, s, i]
                lib.pg_lstm_cells.restype = i
                lib.pg_activation.argtypes = [i, ctypes.c_long, p, p, i]
                lib.pg_activation.restype = None
            _GEMM.append(lib)
        return _GEMM[0]


#: ``ATTNLIB_CHAINS=0``: products on torch's kernels instead (for comparisons; the models'
#: bits then differ from the book's, and their cache keys say so).
CHAINS_ENV = "ATTNLIB_CHAINS"


def gemm_kernel() -> str | None:
    """Which kernel :func:`matmul` runs on this CPU ("AVX2 + FMA" or "portable C (fmaf)"; the
    same bits either way), or None when the compiled kernel is missing (no C compiler at install)
    or turned off (``ATTNLIB_CHAINS=0``): :func:`matmul` then runs torch's kernels, whose bits
    depend on the CPU."""
    lib = None if _chains_off() else _gemm_library()
    return None if lib is None else _KERNEL_NAMES[int(lib.pg_kernel())]


def _chains_off() -> bool:
    return os.environ.get(CHAINS_ENV, "1").strip() == "0"


def _chains(a: torch.Tensor, b: torch.Tensor, *, shape=None, generic: bool = False,
            reference: bool = False) -> torch.Tensor:
    """(B, m, k) x (B, k, n) -> (B, m, n) float32 CPU tensors, any strides: the kernel's chains.
    ``shape``: the result's shape, B x m x n elements in that order (default (B, m, n))."""
    lib = _gemm_library()
    batch, m, k = a.shape
    n = b.shape[2]
    out = torch.empty(shape if shape is not None else (batch, m, n), dtype=torch.float32)
    if reference:
        for s in range(batch):
            lib.pg_sgemm_reference(m, n, k, a[s].data_ptr(), a.stride(1), a.stride(2),
                                   b[s].data_ptr(), b.stride(1), b.stride(2), out[s].data_ptr(), n)
        return out
    threads = max(1, torch.get_num_threads())
    status = lib.pg_sgemm(batch, m, n, k, a.data_ptr(), a.stride(1), a.stride(2), a.stride(0),
                          b.data_ptr(), b.stride(1), b.stride(2), b.stride(0), out.data_ptr(), n,
                          m * n, threads, int(generic))
    if status:
        raise MemoryError("attnlib's GEMM could not allocate its packing buffers")
    return out


class _ChainProduct(torch.autograd.Function):
    # a (..., m, k) @ b (..., k, n), the same batch shape. The gradients g b^T and a^T g are
    # chains too, through matmul itself: under create_graph they record a graph of their own, so
    # second derivatives are chains as well.
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        shape = (*a.shape[:-1], b.shape[-1])
        return _chains(_three_d(a.detach()), _three_d(b.detach()), shape=shape)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        grad_a = matmul(grad, b.transpose(-1, -2)) if ctx.needs_input_grad[0] else None
        grad_b = matmul(a.transpose(-1, -2), grad) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b


def _rows(t: torch.Tensor) -> torch.Tensor:
    """(..., d) -> (1, rows, d)."""
    return t.reshape(1, math.prod(t.shape[:-1]), t.shape[-1])


def _three_d(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(math.prod(t.shape[:-2]), *t.shape[-2:])


class _ChainLinear(torch.autograd.Function):
    # x (..., in) @ W^T + bias, over all of x's rows at once; the bias's gradient is a chain too: 1^T g
    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        rows = _rows(x.detach())
        out = _chains(rows, weight.detach().t()[None], shape=(*x.shape[:-1], weight.shape[0]))
        return out.add_(bias.detach()) if bias is not None else out

    @staticmethod
    def backward(ctx, grad):
        # through matmul, as _ChainProduct's: differentiable again under create_graph
        x, weight = ctx.saved_tensors
        g = grad.reshape(math.prod(grad.shape[:-1]), grad.shape[-1])
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = matmul(grad, weight)
        if ctx.needs_input_grad[1]:
            grad_w = matmul(g.t(), x.reshape(g.shape[0], x.shape[-1]))
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = matmul(torch.ones(1, g.shape[0]), g)[0]
        return grad_x, grad_w, grad_b


def _uses_chains(*tensors) -> bool:
    """Whether these operands go to the compiled kernel: float32 tensors on a CPU, and the kernel built."""
    if not all(t.device.type == "cpu" and t.dtype == torch.float32 for t in tensors) or _chains_off():
        return False
    if _gemm_library() is None:
        warnings.warn("attnlib's compiled GEMM is missing (it is built at install and needs a C "
                      "compiler): products run on torch's kernels, whose bits differ between CPUs",
                      RuntimeWarning, stacklevel=3)
        return False
    return True


def uses_chains(*tensors: torch.Tensor) -> bool:
    """Whether :func:`matmul`, :func:`linear` and the LSTM functions compute these operands as
    fma chains: float32 tensors on a CPU, the compiled kernel built and not turned off
    (``ATTNLIB_CHAINS=0``). Where it is missing this warns, once per call site."""
    return _uses_chains(*tensors)


def _check_operands(name: str, *tensors) -> None:
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} takes torch.Tensors, got {type(t).__name__}")
        if not t.is_floating_point():
            raise TypeError(f"{name} takes floating-point tensors, got {t.dtype}")


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``torch.matmul(a, b)`` for ``a`` (..., m, k) and ``b`` (..., k, n), batch dimensions
    broadcast; differentiable.

    float32 tensors on a CPU: every element is one fused multiply-add chain in k order, the same
    bits on every CPU and thread count, and each row's bits do not depend on the other rows
    (``matmul(a[:r], b) == matmul(a, b)[:r]``). Elsewhere (float64, a GPU) it is ``torch.matmul``.
    """
    _check_operands("matmul", a, b)
    if a.dim() < 2 or b.dim() < 2:
        raise ValueError(f"matmul takes tensors of 2 or more dimensions, got {a.dim()} and {b.dim()}")
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"matmul: a's last dimension ({a.shape[-1]}) must equal b's second-last "
                         f"({b.shape[-2]}); shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.device != b.device or a.dtype != b.dtype or not _uses_chains(a, b):
        return torch.matmul(a, b)
    if b.dim() == 2:  # (..., m, k) @ (k, n): one product over all of a's rows
        return _ChainLinear.apply(a, b.t(), None)
    batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return _ChainProduct.apply(a.expand(*batch, *a.shape[-2:]), b.expand(*batch, *b.shape[-2:]))


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``torch.nn.functional.linear``: ``x @ weight.T + bias`` for ``x`` (..., in), ``weight``
    (out, in); differentiable. float32 on a CPU: the product is :func:`matmul`'s chains, the bias
    is added after them, and the gradients (of the bias too) are chains as well."""
    _check_operands("linear", x, weight, *(() if bias is None else (bias,)))
    if weight.dim() != 2 or x.dim() < 1 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear: x (..., in) and weight (out, in) must agree on in; got {tuple(x.shape)} "
                         f"and {tuple(weight.shape)}")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"linear: bias must have shape ({weight.shape[0]},), got {tuple(bias.shape)}")
    operands = (x, weight) if bias is None else (x, weight, bias)
    if len({(t.device, t.dtype) for t in operands}) > 1 or not _uses_chains(*operands):
        return torch.nn.functional.linear(x, weight, bias)
    return _ChainLinear.apply(x, weight, bias)


class Linear(torch.nn.Linear):
    """``torch.nn.Linear`` (the same parameters, initialisation and state-dict names) whose
    forward is :func:`linear`: fma chains on a CPU in float32, torch's kernels elsewhere."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)


_LINEAR = torch.nn.functional.linear
_MATMULS = (torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__)


class _ChainMode(torch.overrides.TorchFunctionMode):
    # While it is active (in this thread only: torch's mode stack is thread-local), F.linear,
    # torch.matmul and @ run as chains; inside the handler the mode is off, so the calls that
    # linear and matmul make are torch's own.
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is _LINEAR:
            return linear(*args, **kwargs)
        if func in _MATMULS and not kwargs and len(args) == 2 and \
                all(isinstance(t, torch.Tensor) and t.dim() >= 2 for t in args):
            return matmul(*args)
        return func(*args, **kwargs)


@contextmanager
def chain_products():
    """Inside the block, in this thread, code that is not attnlib's (a ``transformers`` model)
    computes ``F.linear``, ``torch.matmul`` and ``@`` as :func:`linear`'s and :func:`matmul`'s
    fma chains (float32 on a CPU; torch's kernels otherwise). attnlib's own models call
    :class:`Linear` and :func:`matmul` directly."""
    with _ChainMode():
        yield


# ---------------------------------------------------------------------------------------------
# The LSTM's recurrence on the same chains (attnlib/_fmagemm.c, pg_lstm): the products, the
# gates' sigmoid and tanh and the cell update are IEEE adds, multiplies, divides and fmas in a
# fixed order, so the states and every gradient are the same bits on every CPU and thread count.


def _ptr(t: torch.Tensor):
    return ctypes.c_void_p(t.data_ptr())


def _packed_steps(batch_sizes) -> tuple[torch.Tensor, torch.Tensor]:
    """int64 (sizes, offsets) of packed steps, checked: positive, non-increasing."""
    sizes = torch.as_tensor(batch_sizes, dtype=torch.int64).cpu().contiguous()
    if sizes.dim() != 1 or sizes.numel() == 0:
        raise ValueError("batch_sizes must be a non-empty 1-d sequence of step sizes")
    if bool((sizes <= 0).any()) or bool((sizes[1:] > sizes[:-1]).any()):
        raise ValueError("batch_sizes must be positive and non-increasing (a PackedSequence's)")
    offsets = torch.cumsum(sizes, 0) - sizes
    return sizes, offsets.contiguous()


def _previous_rows(sizes: torch.Tensor, offsets: torch.Tensor, reverse: bool) -> torch.Tensor:
    """For each packed row, the row holding its sequence's previous state (N: a zero state)."""
    T, N = len(sizes), int(sizes.sum())
    step = torch.repeat_interleave(torch.arange(T), sizes)
    seq = torch.arange(N) - offsets[step]
    source = step + 1 if reverse else step - 1
    valid = (source >= 0) & (source < T)
    clamped = source.clamp(0, T - 1)
    valid &= seq < sizes[clamped]
    return torch.where(valid, offsets[clamped] + seq, torch.full_like(seq, N))


def _run_lstm(lib, sizes, offsets, H, D, gx, w, gates, c, h, dpre, backward: bool, threads: int | None = None,
              generic: bool = False) -> None:
    status = lib.pg_lstm(D, len(sizes), _ptr(sizes), _ptr(offsets), H,
                         _ptr(gx) if gx is not None else None, 4 * D * H, _ptr(w), _ptr(gates), 4 * D * H,
                         _ptr(c), D * H, _ptr(h), D * H, _ptr(dpre) if dpre is not None else None,
                         4 * D * H, int(backward), threads or max(1, torch.get_num_threads()), int(generic))
    if status:
        raise MemoryError("attnlib's LSTM could not allocate its buffers")


class _Recurrence(torch.autograd.Function):
    @staticmethod
    def forward(ctx, gx, w_hh, sizes, offsets):
        lib = _gemm_library()
        D, G, H = w_hh.shape
        gx, w = gx.detach().contiguous(), w_hh.detach().contiguous()
        N = gx.shape[0]
        gates, c, h = gx.new_empty(N, D * G), gx.new_empty(N, D * H), gx.new_empty(N, D * H)
        _run_lstm(lib, sizes, offsets, H, D, gx, w, gates, c, h, None, backward=False)
        ctx.save_for_backward(gates, c, h, w, sizes, offsets)
        return h

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_h):
        gates, c, h, w, sizes, offsets = ctx.saved_tensors
        D, G, H = w.shape
        N = h.shape[0]
        dpre = gates.new_empty(N, D * G)
        _run_lstm(_gemm_library(), sizes, offsets, H, D, None, w, gates, c, grad_h.contiguous(), dpre,
                  backward=True)
        grad_w = None
        if ctx.needs_input_grad[1]:
            zero = h.new_zeros(1, H)
            grads = []
            for d in range(D):  # dW_hh = dpre^T h_prev: a chain over the packed rows, in order
                h_prev = torch.cat([h[:, d * H:(d + 1) * H], zero])[_previous_rows(sizes, offsets, d == 1)]
                grads.append(matmul(dpre[:, d * G:(d + 1) * G].t(), h_prev))
            grad_w = torch.stack(grads)
        return dpre, grad_w, None, None


def lstm_recurrence(gx: torch.Tensor, w_hh: torch.Tensor, batch_sizes) -> torch.Tensor:
    """The recurrence of a one-layer LSTM with one or two directions (PyTorch's gate order i, f,
    g, o; direction 1 runs backwards, as ``nn.LSTM(bidirectional=True)``'s), over the rows of a
    packed batch; differentiable with respect to ``gx`` and ``w_hh``.

    ``gx`` (N, D * 4H): each row's input projections ``x W_ih^T + b_ih + b_hh``, direction d in
    columns d * 4H .. (d + 1) * 4H (take them from :func:`linear`); ``w_hh`` (D, 4H, H): the
    directions' ``weight_hh``; ``batch_sizes``: a ``PackedSequence``'s, summing to N. Returns the
    hidden states (N, D * H), direction d in columns d * H .. (d + 1) * H: a ``PackedSequence``'s
    data. float32 on a CPU with the compiled kernel (:func:`uses_chains`): each pre-activation
    is one fma chain starting from its ``gx``, and the states and gradients are the same bits on
    every CPU and thread count; a row's bits do not depend on the other sequences of its batch.
    Elsewhere this raises a ValueError: run ``torch.nn.LSTM`` there.
    """
    _check_operands("lstm_recurrence", gx, w_hh)
    if w_hh.dim() != 3 or w_hh.shape[0] not in (1, 2) or w_hh.shape[1] != 4 * w_hh.shape[2]:
        raise ValueError(f"lstm_recurrence: w_hh must be (D, 4H, H) with D 1 or 2, got {tuple(w_hh.shape)}")
    D, G, _ = w_hh.shape
    if gx.dim() != 2 or gx.shape[1] != D * G:
        raise ValueError(f"lstm_recurrence: gx must be (N, {D * G}), got {tuple(gx.shape)}")
    sizes, offsets = _packed_steps(batch_sizes)
    if int(sizes.sum()) != gx.shape[0]:
        raise ValueError(f"lstm_recurrence: batch_sizes sum to {int(sizes.sum())}, gx has {gx.shape[0]} rows")
    if gx.device != w_hh.device or not _uses_chains(gx, w_hh):
        raise ValueError("lstm_recurrence runs float32 CPU tensors on attnlib's compiled kernel "
                         "(uses_chains); run torch.nn.LSTM elsewhere")
    return _Recurrence.apply(gx, w_hh, sizes, offsets)


def lstm_cells(h_prev: torch.Tensor, c_prev: torch.Tensor, gx: torch.Tensor,
               w_hh: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One LSTM step for independent cells, as :func:`lstm_recurrence` computes it (the same
    bits for the same row): ``h_prev`` and ``c_prev`` (..., H), ``gx`` (..., 4H) broadcast to
    them, ``w_hh`` (4H, H). Returns the new (h, c), each (..., H). Not differentiable (for
    inference: leave-one-out's state reuse). float32 on a CPU with the compiled kernel only."""
    _check_operands("lstm_cells", h_prev, c_prev, gx, w_hh)
    if w_hh.dim() != 2 or w_hh.shape[0] != 4 * w_hh.shape[1]:
        raise ValueError(f"lstm_cells: w_hh must be (4H, H), got {tuple(w_hh.shape)}")
    G, H = w_hh.shape
    if h_prev.shape != c_prev.shape or h_prev.shape[-1] != H or gx.shape[-1] != G:
        raise ValueError(f"lstm_cells: h_prev and c_prev (..., {H}) and gx (..., {G}) expected; got "
                         f"{tuple(h_prev.shape)}, {tuple(c_prev.shape)}, {tuple(gx.shape)}")
    if not _uses_chains(h_prev, c_prev, gx, w_hh):
        raise ValueError("lstm_cells runs float32 CPU tensors on attnlib's compiled kernel (uses_chains)")
    shape = h_prev.shape
    R = math.prod(shape[:-1])
    with torch.no_grad():
        hp = h_prev.reshape(R, H).contiguous()
        c = c_prev.reshape(R, H).clone(memory_format=torch.contiguous_format)
        x = gx.expand(*shape[:-1], G).reshape(R, G).contiguous()
        w, gates, h = w_hh.detach().contiguous(), hp.new_empty(R, G), hp.new_empty(R, H)
        if _gemm_library().pg_lstm_cells(R, H, _ptr(hp), H, _ptr(c), H, _ptr(x), G, _ptr(w),
                                         _ptr(gates), _ptr(h), H, 0):
            raise MemoryError("attnlib's LSTM could not allocate its buffers")
    return h.view(shape), c.view(shape)
