"""The exercises of Part V, Chapters 17-18 (beyond raw attention; sanity checks and the disagreement
problem): each checker's Spec (its cases, edge cases included, and attnlib's reference).
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


def _tie_case(rng) -> tuple:
    """Two explanations whose top-2 depends on how ties are broken: a ties its three largest words by
    magnitude (one of them negative), b its first and fourth. Earlier word first: a's top-2 is {0, 1}
    and b's {0, 3}; later word first: {2, 1} and {3, 0}."""
    v, w = rng.uniform(1, 2), rng.uniform(0.1, 0.5)
    a = np.array([v, -v, v, w, w / 2]) * rng.uniform(0.5, 3)
    b = np.array([v, w, w / 2, v, w / 3]) * rng.uniform(0.5, 3)
    return a, b, 2


def _sign_case(rng) -> tuple:
    """Two explanations that agree on their three largest scores by magnitude, all negative, and rank
    their small positive ones oppositely: by magnitude they agree fully, by signed value barely."""
    big = -np.sort(rng.uniform(5, 9, size=3))[::-1]
    small = np.sort(rng.uniform(0.1, 3, size=5))[::-1]
    return np.concatenate([big, small]), np.concatenate([big, small[::-1]]), 3


def _agreement_cases(base: int, seed: int | None, rank: bool) -> list:
    """One sentence's two explanations and k: signed scores, ties, k beyond the sentence, one word;
    for rank agreement, top sets that agree with their order rotated."""
    rng = case_rng(base, seed)
    cases = [(rng.normal(size=7), rng.normal(size=7), 3),  # negative scores: the top-k is by magnitude
             _sign_case(rng),
             _tie_case(rng),
             tuple(rng.integers(-3, 4, size=(2, 9)).astype(float)) + (4,),  # many ties, by magnitude too
             (rng.normal(size=4), rng.normal(size=4), 6),  # k beyond the sentence: capped at its 4 words
             (rng.normal(size=1), rng.normal(size=1), 1),  # a one-word sentence ...
             (rng.normal(size=1), rng.normal(size=1), 3),  # ... and k beyond it
             (rng.normal(size=5), rng.normal(size=5), 5)]
    if rank:  # the same top-4 words, each explanation in its own order: feature agreement 1, rank agreement 0
        top = np.sort(rng.uniform(5, 10, size=4))[::-1] * rng.choice([-1.0, 1.0], size=4)
        rest = rng.uniform(0, 1, size=3)
        order = rng.permutation(7)
        cases.append((np.concatenate([top, rest])[order], np.concatenate([np.roll(top, 1), rest])[order], 4))
        a = rng.normal(size=6)
        first, second = np.argsort(-np.abs(a), kind="stable")[:2]
        b = a.copy()
        b[[first, second]] = a[[second, first]]
        cases.append((a, b, 3))  # the first two ranks swapped, the third shared: 1/3
    return [(np.asarray(a, dtype=float), np.asarray(b, dtype=float), int(k)) for a, b, k in cases]


def _spec_agreement(metric: str, base: int, seed: int | None) -> Spec:
    from ...experiments.disagreement import agreement

    def reference(a, b, k):
        return float(agreement(np.asarray(a)[None], np.asarray(b)[None], lengths=[len(a)], k=k, metric=metric)[0])

    return Spec(metric, _agreement_cases(base, seed, rank=metric == "rank agreement"), reference, atol=1e-9,
                to_numpy=lambda x: np.asarray(x, dtype=float))


def _spec_feature_agreement(seed: int | None = None) -> Spec:
    """Exercise: Krishna et al.'s feature agreement of two explanations of one sentence (Chapter 18).

    ``fn(a, b, k)``: two (n,) score arrays over the sentence's words and an int k -> float: the share
    of the top-k words (by absolute score, ties the earlier word first, k capped at n) that both name,
    ``|topk(a) ∩ topk(b)| / min(k, n)``.
    """
    return _spec_agreement("feature agreement", 53, seed)


def _spec_rank_agreement(seed: int | None = None) -> Spec:
    """Exercise: Krishna et al.'s rank agreement of two explanations of one sentence (Chapter 18).

    ``fn(a, b, k)``: two (n,) score arrays and an int k -> float: the share of the first min(k, n) ranks
    (by absolute score, ties the earlier word first) at which a and b put the same word.
    """
    return _spec_agreement("rank agreement", 54, seed)


SPECS = {
    "check_norm_attention": _spec_norm_attention,
    "check_relevance": _spec_relevance,
    "check_feature_agreement": _spec_feature_agreement,
    "check_rank_agreement": _spec_rank_agreement,
}
