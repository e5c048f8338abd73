"""The exercises of Part V, Chapters 17-18 (beyond raw attention): each checker's Spec (its cases, edge
cases included, and attnlib's reference).
"""
from __future__ import annotations

import numpy as np
import torch

from .core import Spec, case_rng

__all__ = ["SPECS"]


def _sent_cases(base: int, seed: int | None = None) -> list:
    """One layer's heads: (attention (h, T, T), values (h, T, d_v), projection (h, d_v, d_model)), with two
    heads that send opposite vectors (their sum cancels) and a single-token sentence."""
    rng = case_rng(base, seed)
    cases = []
    for h, T, dv, d in ((1, 4, 3, 5), (2, 6, 4, 8), (4, 9, 2, 6), (3, 1, 2, 3)):
        attention = rng.dirichlet(np.ones(T), size=(h, T))
        cases.append((attention, rng.normal(size=(h, T, dv)), rng.normal(size=(h, dv, d))))
    attention = rng.dirichlet(np.ones(5), size=(1, 5))
    values = rng.normal(size=(1, 5, 3))
    projection = rng.normal(size=(1, 3, 4))
    cases.append((np.concatenate([attention, attention]), np.concatenate([values, values]),
                  np.concatenate([projection, -projection])))  # the second head undoes the first
    return cases


def _spec_norm_attention(seed: int | None = None) -> Spec:
    """Exercise: Kobayashi et al.'s norm of what a layer's heads send together from token j to token i,
    ``||sum_h alpha^h_ij v^h_j W^O_h||`` (Chapter 17).

    ``fn(attention, values, projection)``: (h, T, T), (h, T, d_v), (h, d_v, d_model) -> (T, T).
    """
    from ...experiments.norm_attention import norm_attention
    from ...models import Trace

    def reference(attention, values, projection):
        h, T, _ = np.shape(attention)
        d = np.shape(projection)[-1]
        trace = Trace(tokens=torch.zeros(1, T, dtype=torch.long), lengths=torch.tensor([T]),
                      key_mask=torch.ones(1, T, dtype=torch.bool),
                      attentions=torch.as_tensor(attention, dtype=torch.float64)[None, None],
                      values=torch.as_tensor(values, dtype=torch.float64)[None, None],
                      output_projection=torch.as_tensor(projection, dtype=torch.float64)[None],
                      hidden_states=torch.zeros(1, 2, T, d, dtype=torch.float64))
        return norm_attention(trace, heads="sum")[0, 0]

    return Spec("norm-based attention", _sent_cases(51, seed), reference, atol=1e-8,
                to_numpy=lambda x: np.asarray(x, dtype=float))


def _spec_relevance(seed: int | None = None) -> Spec:
    """Exercise: Chefer et al.'s gradient-weighted attention over the layers (Chapter 17).

    ``fn(attention, gradient)``: both (L, h, T, T), one sentence's attention and the gradient of the
    explained logit with respect to it -> (T, T): ``R = I``, then from the bottom layer up
    ``R <- R + mean_h((gradient * attention)^+) R``.
    """
    from ...experiments.attention_relevance import accumulate_relevance

    rng = case_rng(52, seed)
    cases = []
    for L, h, T in ((1, 1, 3), (2, 2, 5), (3, 4, 7), (2, 3, 1)):
        attention = rng.dirichlet(np.ones(T), size=(L, h, T))
        cases.append((attention, rng.normal(size=(L, h, T, T))))

    def reference(attention, gradient):
        return accumulate_relevance(torch.as_tensor(attention)[None], torch.as_tensor(gradient)[None])[0]

    return Spec("attention relevance", cases, reference, atol=1e-8, to_numpy=lambda x: np.asarray(x, dtype=float))


SPECS = {
    "check_norm_attention": _spec_norm_attention,
    "check_relevance": _spec_relevance,
}
