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

On a CUDA device ``torch.sqrt`` is already correctly rounded (nvcc's default
``-prec-sqrt=true``), so :func:`sqrt` is ``torch.sqrt`` there. ``tests/test_portable.py``
checks every elementwise op the book uses against numpy's correctly rounded results, and a
static check keeps ``torch.sqrt`` and non-fused optimizers out of attnlib.
"""
from __future__ import annotations

import threading
from collections.abc import Iterable

import numpy as np
import torch

__all__ = ["sqrt", "adam", "lbfgs_step"]


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
