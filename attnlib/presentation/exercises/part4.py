"""The exercises of Part IV, Chapters 11-16 (transformers): each checker's Spec (its cases, edge
cases included, and attnlib's reference).
"""
from __future__ import annotations

import numpy as np
import torch

from .core import Spec, case_generator, case_rng
from .fixtures import ToyPredict

__all__ = ["SPECS"]


def _head_cases(base: int, seed: int | None = None) -> list:
    """One head's (A, T) pairs: short and long sentences, full rank and rank-deficient T."""
    rng = case_rng(base, seed)
    cases = []
    for n, d, rank in ((5, 8, 5), (12, 4, 4), (20, 6, 3), (9, 9, 9), (16, 8, 1)):
        T = rng.normal(size=(n, rank)) @ rng.normal(size=(rank, d))  # rank <= rank
        A = rng.dirichlet(np.ones(n), size=n)
        cases.append((A, T))
    return cases


def _spec_null_dim(seed: int | None = None) -> Spec:
    """Exercise: the dimension of T's left null space, n - rank(T), with the book's tolerance (Chapter 11)."""
    from ...experiments.identifiability import null_space_dim

    cases = [(T,) for _, T in _head_cases(21, seed)] + [(np.zeros((4, 3)),)]
    return Spec("null-space dimension", cases, lambda T: null_space_dim(T[None])[0],
                   to_numpy=lambda x: np.asarray(x, dtype=float))


def _spec_effective_attention(seed: int | None = None) -> Spec:
    """Exercise: A's rows projected onto the column space of T (Chapter 11)."""
    from ...experiments.identifiability import effective_attention

    return Spec("effective attention", _head_cases(22, seed), lambda A, T: effective_attention(A[None], T[None])[0],
                   atol=1e-8, to_numpy=lambda x: np.asarray(x, dtype=float))


def _tiny_transformer(base: int, seed: int | None = None):
    """A tiny random transformer (2 layers x 2 heads) and a padded batch of token ids, seeded."""
    from ...data import PAD
    from ...models import TransformerConfig

    g = case_generator(base, seed)
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(base if seed is None else int(torch.randint(2**31, (1,), generator=g)))
        model = TransformerConfig(layers=2, heads=2, head_dim=4, embed_dim=8, dropout=0.0).build(30)
    finally:
        torch.random.set_rng_state(state)
    with torch.no_grad():  # weights large enough that the heads matter
        for param in model.parameters():
            param.mul_(3.0)
    lengths = torch.tensor([7, 5, 9, 3])
    tokens = torch.randint(4, 30, (4, 9), generator=g)
    tokens[torch.arange(9)[None, :] >= lengths[:, None]] = PAD
    tokens[:, 0] = 2  # <SOS>
    tokens[torch.arange(4), lengths - 1] = 3  # <EOS>
    return model.eval(), tokens


def _spec_head_permutation(seed: int | None = None) -> Spec:
    """Exercise: the output change when one head's rows are permuted by given sources (Chapter 12).

    ``fn(model, tokens, site, sources)`` -> (B,) TVD between the model's output and its output
    with head ``site``'s attention rows permuted: A'[b, q, t] = A[b, q, sources[b, q, t]].
    """
    from ...experiments.counterfactual import query_row_sources
    from ...metrics import tvd
    from ...models import Site
    from ...models.interventions import permute_rows

    cases = []
    for base in (0, 1):
        model, tokens = _tiny_transformer(base, seed)
        mask = tokens != 0
        src = query_row_sources(mask, tokens.shape[1], 1, case_rng(base, seed))[:, 0]
        for site in (Site(0, 1), Site(1, 0)):
            cases.append((model, tokens, site, src))

    def reference(model, tokens, site, sources):
        with torch.no_grad():
            edit = lambda rows, _mask: permute_rows(rows, sources.unsqueeze(1)).squeeze(1)  # noqa: E731
            return tvd(model(tokens).probs, model(tokens, edits={site: edit}).probs, check=False)

    return Spec("per-head permutation", cases, reference, atol=1e-5,
                to_numpy=lambda x: np.asarray(x, dtype=float), modules=("attnlib.models",))


def _spec_head_importance(seed: int | None = None) -> Spec:
    """Exercise: Michel et al.'s head importance from attention and its gradient (Chapter 12).

    ``fn(attention, grad)``: both (B, L, h, T, T), a toy model's attention and dL/dA per
    instance -> (L, h): I = mean over instances of |sum_{q,t} A * dL/dA|, each layer's row
    divided by its l2 norm. Cases come from a tiny random transformer (gradients by autograd)
    and random arrays.
    """
    cases = []
    for base in (2, 3):
        model, tokens = _tiny_transformer(base, seed)
        trace = model.trace(tokens)
        A = trace.attentions.clone().requires_grad_(True)  # (B, L, h, T, T)
        edits = {s: A[:, s.layer, s.head] for s in model.sites}
        out = model(tokens, edits=edits)
        labels = torch.arange(len(tokens)) % 2
        loss = torch.nn.functional.binary_cross_entropy(out.probs[:, 1], labels.float(), reduction="sum")
        (grad,) = torch.autograd.grad(loss, A)
        cases.append((trace.attentions.cpu().numpy(), grad.cpu().numpy()))
    rng = case_rng(4, seed)
    cases.append((rng.dirichlet(np.ones(5), size=(3, 3, 2, 5)), rng.normal(size=(3, 3, 2, 5, 5))))

    def reference(attention, grad):
        scores = np.abs((np.asarray(attention) * np.asarray(grad)).sum((-1, -2))).mean(0)  # (L, h)
        norm = np.linalg.norm(scores, axis=1, keepdims=True)
        return scores / np.where(norm > 0, norm, 1.0)

    return Spec("head importance", cases, reference, atol=1e-6, to_numpy=lambda x: np.asarray(x, dtype=float))


def _mask_cases(base: int, seed: int | None = None) -> list:
    """(attention (B, T), mask (B, T) bool) pairs with at least one impermissible token per row, some padding."""
    rng = case_rng(base, seed)
    cases = []
    for B, T in ((1, 4), (5, 9), (3, 16)):
        lengths = rng.integers(2, T + 1, size=B)
        real = np.arange(T)[None, :] < lengths[:, None]
        attention = rng.dirichlet(np.ones(T) * 0.5, size=B) * real
        attention /= attention.sum(-1, keepdims=True)
        mask = (rng.random((B, T)) < 0.5) & real
        mask[np.arange(B), rng.integers(0, lengths)] = True
        cases.append((torch.tensor(attention), torch.tensor(mask)))
    peaked = torch.tensor([[0.0, 1.0, 0.0], [0.999, 0.001, 0.0]], dtype=torch.float64)  # all mass on the mask
    cases.append((peaked, torch.tensor([[False, True, False], [True, False, False]])))
    return cases


def _spec_attention_mass(seed: int | None = None) -> Spec:
    """Exercise: alpha^T m, the attention on the impermissible tokens, per instance (Chapter 13)."""
    from ...experiments.deception import attention_mass

    return Spec("attention mass", _mask_cases(31, seed), lambda a, m: attention_mass(a, m), atol=1e-9,
                   to_numpy=lambda x: np.asarray(x, dtype=float))


def _spec_impermissible_penalty(seed: int | None = None) -> Spec:
    """Exercise: Pruthi et al.'s penalty, the batch mean of -lambda log(1 - alpha^T m) (Chapter 13).

    ``fn(attention, mask, lam)`` -> a scalar. The last case puts all the attention on the
    impermissible tokens: the log's argument must be clamped (at 1e-10) to stay finite.
    """
    from ...experiments.deception import impermissible_penalty

    cases = [(a, m, lam) for (a, m), lam in zip(_mask_cases(32, seed), (0.1, 1.0, 0.0, 1.0))]
    return Spec("impermissible penalty", cases, lambda a, m, lam: impermissible_penalty(a, m, lam),
                   atol=1e-6, to_numpy=lambda x: np.asarray(x, dtype=float))


def _layer_cases(base: int, seed: int | None = None) -> list:
    """Attentions (L, h, T, T) of one sentence (all positions real): softmax rows, some peaked, one T = 1."""
    rng = case_rng(base, seed)
    cases = []
    for L, h, T, spread in ((1, 1, 3, 1.0), (2, 2, 5, 2.0), (3, 4, 8, 4.0), (2, 3, 1, 1.0)):
        logits = rng.normal(0, spread, (L, h, T, T))
        a = np.exp(logits - logits.max(-1, keepdims=True))
        cases.append(torch.tensor(a / a.sum(-1, keepdims=True)))
    return cases


def _one_sentence(attentions: torch.Tensor):
    """(L, h, T, T) -> the batch of one (1, L, h, T, T) and its key mask (1, T), every position real."""
    return attentions[None], torch.ones(1, attentions.shape[-1], dtype=torch.bool)


def _spec_augmented_attention(seed: int | None = None) -> Spec:
    """Exercise: A^ = r I + (1 - r) mean_h A, rows renormalised, for one layer (Chapter 14).

    ``fn(attention, residual)``: attention (h, T, T) of one layer, residual r in [0, 1) -> (T, T).
    Cases include r = 0 (the head average alone) and a one-token sentence.
    """
    from ...experiments.flow import rollout

    cases = [(a[-1], r) for a, r in zip(_layer_cases(41, seed), (0.5, 0.0, 0.5, 0.3))]
    cases.append((_layer_cases(42, seed)[2][0], 0.9))

    def reference(attention, residual):  # a one-layer rollout is that layer's A^
        return rollout(*_one_sentence(attention[None]), residual=residual)[0, 0]

    return Spec("augmented attention", cases, reference, atol=1e-9,
                   to_numpy=lambda x: np.asarray(x, dtype=float))


def _spec_rollout(seed: int | None = None) -> Spec:
    """Exercise: the rollout after the last layer, R_L = A^_L ... A^_1, for one sentence (Chapter 14).

    ``fn(attentions)``: (L, h, T, T) -> (T, T), with A&Z's residual weight 0.5. The first case
    has one layer (R_1 = A^_1); the order of the product matters from two layers on.
    """
    from ...experiments.flow import rollout

    return Spec("rollout", [(a,) for a in _layer_cases(43, seed)], lambda a: rollout(*_one_sentence(a))[0, -1], atol=1e-9,
                   to_numpy=lambda x: np.asarray(x, dtype=float))


def _erasure_cases(base: int, seed: int | None = None) -> list:
    """(predict, words, scores, fraction): ties in the scores, k = 1, k = n, an instance predicted negative."""
    rng = case_rng(base, seed)
    vocab = [f"w{i}" for i in range(12)]
    predict = ToyPredict({w: float(x) for w, x in zip(vocab, rng.normal(0, 1.5, len(vocab)))})
    cases = []
    for n, fraction in ((10, 0.2), (7, 0.01), (20, 0.05), (9, 0.5), (4, 1.0), (15, 0.1)):
        words = [vocab[i] for i in rng.integers(0, len(vocab), n)]
        scores = np.round(rng.random(n), 1)  # rounding makes ties: the earlier token goes first
        cases.append((predict, words, scores, fraction))
    return cases


def _spec_erasure_one_instance(seed: int | None = None) -> Spec:
    """Exercise: ERASER's comprehensiveness and sufficiency of one instance at one fraction (Chapter 15).

    ``fn(predict, words, scores, fraction) -> (comprehensiveness, sufficiency)``: ``predict``
    maps a list of words to class probabilities (C,); the rationale is the top
    k = ceil(fraction * n) words by score (at least 1; ties: the earlier word first); j is the
    class predicted for all the words. Cases include ties, k = 1 and k = n (nothing left
    without the rationale: ``predict([])``).
    """
    from ...experiments.faithfulness import probability_drop, rationale_mask

    def reference(predict, words, scores, fraction):
        keep = rationale_mask(scores, fraction)
        full = predict(words)
        without = predict([w for w, r in zip(words, keep) if not r])
        alone = predict([w for w, r in zip(words, keep) if r])
        return np.array([probability_drop(full, without), probability_drop(full, alone)])

    return Spec("comprehensiveness and sufficiency", _erasure_cases(51, seed), reference, atol=1e-9,
                to_numpy=lambda x: np.asarray(x, dtype=float).reshape(-1),
                modules=("attnlib.presentation.exercises.fixtures",))


def _spec_aopc(seed: int | None = None) -> Spec:
    """Exercise: AOPC of curves over ERASER's fractions (Chapter 15).

    ``fn(values) -> aopc``: ``values`` (..., F) holds a metric at the fractions 1, 5, 10, 20,
    50 % (last axis); the AOPC is one number per curve, (...). Cases: one curve, a batch of
    curves (N, F), instances x methods (N, M, F), and curves that are not monotone (an
    area under a line through the points is not ERASER's AOPC).
    """
    from ...experiments.faithfulness import aopc

    rng = case_rng(52, seed)
    cases = [(np.array([0.05, 0.12, 0.2, 0.31, 0.4]),), (rng.normal(0.2, 0.2, (6, 5)),),
             (rng.random((4, 3, 5)),), (np.array([[0.3, -0.1, 0.2, 0.0, 0.5]]),)]
    return Spec("AOPC", cases, aopc, atol=1e-12)


def _spec_null_space_share(seed: int | None = None) -> Spec:
    """Exercise: the share of sentences whose head has a left null space, from their lengths alone (Chapter 16).

    ``fn(lengths, d_v) -> share``: ``lengths`` (N,) tokens per sentence, [CLS] and [SEP]
    included. A head's T = V W^O has n rows and rank at most d_v (exactly min(n, d_v) for
    weights in general position), so a sentence has a null space when n > d_v. The reference
    ranks random T of each length with :func:`attnlib.experiments.identifiability.null_space_dim`;
    the cases include n = d_v (no null space) and n = d_v + 1.
    """
    from ...experiments.identifiability import null_space_dim

    def reference(lengths, d_v):
        rng = np.random.default_rng(61)
        lengths = np.asarray(lengths, dtype=np.int64)
        T = rng.standard_normal((len(lengths), int(lengths.max()), d_v))
        return float(np.mean(null_space_dim(T, lengths) > 0))

    rng = case_rng(60, seed)
    cases = [(np.array([5, 32, 33, 60]), 32), (rng.integers(3, 40, 25), 16), (np.array([4, 5, 6]), 8),
             (np.array([9, 9]), 8)]
    return Spec("null-space share", cases, reference, atol=1e-12, to_numpy=lambda x: np.asarray(x, dtype=float))


def _spec_ranks_with_ties(seed: int | None = None) -> Spec:
    """Exercise: ranks with ties from who beats whom beyond noise (Chapter 16; :func:`attnlib.uncertainty.rank`).

    ``fn(wins) -> ranks``: ``wins`` (M, M) bool, ``wins[i, j]`` when method i is better than
    method j beyond noise; a method's rank is 1 + the number of methods that beat it (ties share
    a rank, and the next rank is not skipped to). Cases: no wins (all rank 1), a strict order,
    ties at the top and in the middle, one method.
    """
    from ...uncertainty import ranks_from_wins

    def strict(m):
        return np.triu(np.ones((m, m), dtype=bool), 1)

    rng = case_rng(62, seed)
    upper = np.triu(rng.random((6, 6)) < 0.4, 1)
    perm = rng.permutation(6)
    cases = [(np.zeros((4, 4), dtype=bool),), (strict(5),), (upper[np.ix_(perm, perm)],),
             (np.array([[False, False, True], [False, False, True], [False, False, False]]),),
             (np.zeros((1, 1), dtype=bool),)]
    return Spec("ranks with ties", cases, ranks_from_wins, atol=0,
                to_numpy=lambda x: np.asarray(x, dtype=float).reshape(-1))


#: checker name -> Spec builder, in the chapters' order
SPECS = {
    "check_null_dim": _spec_null_dim,
    "check_effective_attention": _spec_effective_attention,
    "check_head_permutation": _spec_head_permutation,
    "check_head_importance": _spec_head_importance,
    "check_attention_mass": _spec_attention_mass,
    "check_impermissible_penalty": _spec_impermissible_penalty,
    "check_augmented_attention": _spec_augmented_attention,
    "check_rollout": _spec_rollout,
    "check_erasure_one_instance": _spec_erasure_one_instance,
    "check_aopc": _spec_aopc,
    "check_null_space_share": _spec_null_space_share,
    "check_ranks_with_ties": _spec_ranks_with_ties,
}
