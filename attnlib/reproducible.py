"""The book's reproducible CPU kernels and thread rule, asked for in one visible line::

    import attnlib.reproducible  # first: before torch, numpy or SciPy compute anything

Importing this module applies :func:`attnlib.cpu.configure` to the process: ATen's AVX2 kernels,
MKL's SSE2 branch in strict mode, oneDNN off, OpenBLAS's Haswell kernels on one thread, numpy's
AVX2 dispatch and torch's threads sized to the CPU quota (the reasons and their cost:
:mod:`attnlib.cpu`). With them a run gives the book's numbers bit for bit on every x86-64 CPU;
every chapter starts with this line, and so do the tests and the benchmarks.

Plain ``import attnlib`` (``from attnlib.audit import audit`` in a training script or a service)
changes none of these: the host's torch and numpy settings stay its own. :func:`attnlib.cpu.status`
then says the pins are not in force, training warns (:class:`attnlib.cpu.ReproducibilityWarning`)
and the model cache keeps what it trains apart from the pinned runs'
(:func:`attnlib.cpu.kernel_signature` is part of every cache key).
"""
from __future__ import annotations

from . import cpu

#: What the process computes with after the pins (:class:`attnlib.cpu.CpuStatus`).
STATUS = cpu.configure()

__all__ = ["STATUS"]
