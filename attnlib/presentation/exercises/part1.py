"""The exercises of Chapters 1-2: the measures and the attention classifier: each checker's Spec
(its cases, edge cases included, and attnlib's reference).
"""
from __future__ import annotations

import numpy as np
import torch

from .core import Spec, case_generator, case_rng

__all__ = ["SPECS"]


def _distribution_pairs(base: int, seed: int | None = None, zeros: bool = True) -> list:
    rng = case_rng(base, seed)
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


def _spec_tvd(seed: int | None = None) -> Spec:
    """Exercise: TVD over the last axis, batched (Chapter 2)."""
    from ...metrics import tvd

    return Spec("tvd", _distribution_pairs(0, seed), tvd)


def _spec_jsd(seed: int | None = None) -> Spec:
    """Exercise: JSD with natural logs, zeros allowed, batched (Chapter 2)."""
    from ...metrics import jsd

    return Spec("jsd", _distribution_pairs(1, seed), jsd)


def _spec_kendall_tau(seed: int | None = None) -> Spec:
    """Exercise: Kendall tau-b of two 1-D arrays, ties included (Chapter 2)."""
    from ...metrics import kendall_tau

    rng = case_rng(2, seed)
    cases = [
        (np.array([0.1, 0.1, 0.5, 0.3]), np.array([0.0, 0.0, 0.3, 0.7])),
        (np.array([1.0, 2.0, 3.0, 4.0]), np.array([4.0, 3.0, 2.0, 1.0])),
        (np.array([1.0, 1.0, 2.0, 2.0, 3.0]), np.array([1.0, 2.0, 2.0, 3.0, 3.0])),
    ]
    cases += [(rng.normal(size=n), rng.normal(size=n)) for n in (3, 10, 25)]
    cases += [(rng.integers(0, 3, size=12).astype(float), rng.integers(0, 4, size=12).astype(float)) for _ in range(2)]
    cases.append((np.full(5, 2.0), np.array([0.3, 0.1, 0.4, 0.1, 0.5])))  # x constant: no tau, NaN (not 0)
    return Spec("kendall_tau", cases, lambda x, y: kendall_tau(x, y)[0])


def _spec_masked_softmax(seed: int | None = None) -> Spec:
    """Exercise: softmax over the real tokens only; exactly 0 on masked ones (Chapter 1)."""
    from ...models import masked_softmax

    g = case_generator(3, seed)
    cases = []
    for B, T in ((1, 4), (3, 7), (5, 12)):
        scores = torch.randn(B, T, generator=g) * 3
        mask = torch.rand(B, T, generator=g) > 0.3
        mask[:, 1] = True  # at least one real token per row
        cases.append((scores, mask))
    cases.append((torch.tensor([[1000.0, 1001.0, -5.0]]), torch.tensor([[True, True, False]])))  # overflow trap
    return Spec("masked_softmax", cases, masked_softmax,
                to_numpy=lambda t: np.asarray(t.detach() if isinstance(t, torch.Tensor) else t))


def _spec_context(seed: int | None = None) -> Spec:
    """Exercise: the context vector c = sum_t alpha_t h_t for a batch (Chapter 1)."""
    g = case_generator(4, seed)
    cases = []
    for B, T, H in ((1, 3, 2), (4, 9, 5), (2, 6, 256)):
        hidden = torch.randn(B, T, H, generator=g)
        alpha = torch.softmax(torch.randn(B, T, generator=g), -1)
        cases.append((hidden, alpha))
    return Spec("context", cases, lambda h, a: torch.einsum("bt,bth->bh", a, h))


#: checker name -> Spec builder, in the chapters' order
SPECS = {
    "check_tvd": _spec_tvd,
    "check_jsd": _spec_jsd,
    "check_kendall_tau": _spec_kendall_tau,
    "check_masked_softmax": _spec_masked_softmax,
    "check_context": _spec_context,
}
