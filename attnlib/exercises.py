"""Checkers for the chapters' exercises.

Each ``check_*`` function takes the student's function, runs it on seeded cases
(including the edge cases the chapter warns about), compares it with attnlib's
reference implementation, and returns a :class:`CheckResult`: truthy when every case
passes, and shown as a one-line verdict when it is a cell's last expression. It never
raises for a wrong answer, so a notebook keeps running.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

__all__ = [
    "CheckResult",
    "check_tvd",
    "check_jsd",
    "check_kendall_tau",
    "check_masked_softmax",
    "check_context",
]


class CheckResult:
    """The verdict of a checker: ``bool(result)`` says whether it passed; ``repr`` explains."""

    def __init__(self, passed: bool, message: str):
        self.passed, self.message = passed, message

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return self.message

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython
        printer.text(self.message)


def _report(name: str, fn: Callable, cases: list, reference: Callable, *, atol: float = 1e-6, to_numpy=np.asarray) -> CheckResult:
    for i, args in enumerate(cases):
        expected = to_numpy(reference(*args))
        try:
            got = fn(*args)
        except NotImplementedError:
            return CheckResult(False, f"{name}: not implemented yet (the starter still raises NotImplementedError).")
        except Exception as err:  # noqa: BLE001 - report any student error readably
            return CheckResult(False, f"{name}: case {i + 1} raised {type(err).__name__}: {err}")
        got = to_numpy(got.detach() if isinstance(got, torch.Tensor) else got)
        if np.shape(got) != np.shape(expected):
            return CheckResult(False, f"{name}: case {i + 1} returned shape {np.shape(got)}, expected {np.shape(expected)}.")
        if not np.allclose(got, expected, atol=atol, equal_nan=True):
            where = np.argmax(np.abs(np.nan_to_num(np.asarray(got, float) - np.asarray(expected, float))).ravel())
            return CheckResult(
                False,
                f"{name}: case {i + 1} is off: got {np.asarray(got).ravel()[where]:.6g}, "
                f"expected {np.asarray(expected).ravel()[where]:.6g}.",
            )
    return CheckResult(True, f"{name}: correct on all {len(cases)} cases.")


def _distribution_pairs(seed: int, zeros: bool = True) -> list:
    rng = np.random.default_rng(seed)
    cases = [
        (np.array([0.1, 0.1, 0.5, 0.3]), np.array([0.0, 0.0, 0.3, 0.7])),  # the chapter's example
        (np.array([0.5, 0.5, 0.0]), np.array([0.0, 0.0, 1.0])),  # disjoint supports
        (np.array([0.25, 0.25, 0.25, 0.25]), np.array([0.25, 0.25, 0.25, 0.25])),  # identical
    ]
    for n in (2, 5, 17):
        cases.append((rng.dirichlet(np.ones(n), size=6), rng.dirichlet(np.ones(n) * 0.3, size=6)))  # batched rows
    if zeros:
        p, q = rng.dirichlet(np.ones(8), size=4), rng.dirichlet(np.ones(8), size=4)
        p[:, :3] = 0
        cases.append((p / p.sum(-1, keepdims=True), q))
    return cases


def check_tvd(fn: Callable) -> CheckResult:
    """Exercise: TVD over the last axis, batched (Chapter 2)."""
    from .metrics import tvd

    return _report("tvd", fn, _distribution_pairs(0), tvd)


def check_jsd(fn: Callable) -> CheckResult:
    """Exercise: JSD with natural logs, zeros allowed, batched (Chapter 2)."""
    from .metrics import jsd

    return _report("jsd", fn, _distribution_pairs(1), jsd)


def check_kendall_tau(fn: Callable) -> CheckResult:
    """Exercise: Kendall tau-b of two 1-D arrays, ties included (Chapter 2)."""
    from .metrics import kendall_tau

    rng = np.random.default_rng(2)
    cases = [
        (np.array([0.1, 0.1, 0.5, 0.3]), np.array([0.0, 0.0, 0.3, 0.7])),
        (np.array([1.0, 2.0, 3.0, 4.0]), np.array([4.0, 3.0, 2.0, 1.0])),
        (np.array([1.0, 1.0, 2.0, 2.0, 3.0]), np.array([1.0, 2.0, 2.0, 3.0, 3.0])),
    ]
    cases += [(rng.normal(size=n), rng.normal(size=n)) for n in (3, 10, 25)]
    cases += [(rng.integers(0, 3, size=12).astype(float), rng.integers(0, 4, size=12).astype(float)) for _ in range(3)]
    return _report("kendall_tau", fn, cases, lambda x, y: kendall_tau(x, y)[0])


def check_masked_softmax(fn: Callable) -> CheckResult:
    """Exercise: softmax over the real tokens only; exactly 0 on masked ones (Chapter 1)."""
    from .models import masked_softmax

    g = torch.Generator().manual_seed(3)
    cases = []
    for B, T in ((1, 4), (3, 7), (5, 12)):
        scores = torch.randn(B, T, generator=g) * 3
        mask = torch.rand(B, T, generator=g) > 0.3
        mask[:, 1] = True  # at least one real token per row
        cases.append((scores, mask))
    cases.append((torch.tensor([[1000.0, 1001.0, -5.0]]), torch.tensor([[True, True, False]])))  # overflow trap
    return _report("masked_softmax", fn, cases, masked_softmax, to_numpy=lambda t: np.asarray(t.detach() if isinstance(t, torch.Tensor) else t))


def check_context(fn: Callable) -> CheckResult:
    """Exercise: the context vector c = sum_t alpha_t h_t for a batch (Chapter 1)."""
    g = torch.Generator().manual_seed(4)
    cases = []
    for B, T, H in ((1, 3, 2), (4, 9, 5), (2, 6, 256)):
        hidden = torch.randn(B, T, H, generator=g)
        alpha = torch.softmax(torch.randn(B, T, generator=g), -1)
        cases.append((hidden, alpha))
    return _report("context", fn, cases, lambda h, a: torch.einsum("bt,bth->bh", a, h))
