"""The exercises of Part II, Chapters 3-5 (Jain & Wallace): each checker's Spec (its cases, edge
cases included, and attnlib's reference).
"""
from __future__ import annotations

import numpy as np
import torch

from .core import CheckResult, Spec, case_generator, case_rng

__all__ = ["SPECS"]


# ----------------------------------------------------------------------------- Chapters 3-5


def _tiny_model_and_instances(encoder: str = "lstm", base: int = 5, seed: int | None = None):
    """A seeded, untrained classifier over a 40-word vocabulary and a few token sequences."""
    from ...data import EOS, SOS
    from ...models import AttentionClassifier, ModelConfig

    g = case_generator(base, seed)
    if seed is None:  # the book's cases, as its check cells have always drawn them
        torch.manual_seed(base)
        model = AttentionClassifier(40, ModelConfig(encoder=encoder, attention="tanh")).eval()
    else:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(torch.randint(2**31, (1,), generator=g)))
            model = AttentionClassifier(40, ModelConfig(encoder=encoder, attention="tanh")).eval()
    instances = []
    for n in (2, 5, 9):
        body = torch.randint(4, 40, (n,), generator=g)
        instances.append(torch.cat([torch.tensor([SOS]), body, torch.tensor([EOS])]))
    return model, instances


def _per_instance_reference(measure):
    from ...data import PAD

    def reference(model, tokens):
        batch = tokens.unsqueeze(0)
        out = measure(model, batch)[0]
        real = (tokens != PAD)
        real[0] = False
        real[-1] = False
        return out[real].detach()

    return reference


def _spec_leave_one_out(seed: int | None = None) -> Spec:
    """Exercise: leave-one-out by deletion for one instance (Chapter 3).

    ``fn(model, tokens)``: ``tokens`` is a 1-D LongTensor ``<SOS> w_1 ... w_n <EOS>``; return
    the n values TVD(y-hat(x), y-hat(x without w_t)).
    """
    from ...experiments.importance import leave_one_out

    cases = []
    for encoder in ("lstm", "average"):
        model, instances = _tiny_model_and_instances(encoder, seed=seed)
        cases += [(model, t) for t in instances]
    return Spec("leave_one_out", cases, _per_instance_reference(leave_one_out), atol=1e-5,
                to_numpy=lambda t: np.asarray(t.detach() if isinstance(t, torch.Tensor) else t, dtype=float),
                modules=("attnlib.models",), withheld=("attnlib.models.fast_paths",))


def _spec_gradient_importance(seed: int | None = None) -> Spec:
    """Exercise: J&W's gradient importance with attention detached, for one instance (Chapter 3)."""
    from ...experiments.importance import gradient_importance

    cases = []
    for encoder in ("lstm", "cnn"):
        model, instances = _tiny_model_and_instances(encoder, 7, seed)
        cases += [(model, t) for t in instances[1:]]
    return Spec("gradient_importance", cases, _per_instance_reference(gradient_importance), atol=1e-5,
                to_numpy=lambda t: np.asarray(t.detach() if isinstance(t, torch.Tensor) else t, dtype=float),
                modules=("attnlib.models",))


_PERMUTATION_DRAWS = 400  # draws, each with its own generator
_PERMUTATION_REPEATS = 20  # generators of the first draws again, in the same state: the same order


def _spec_permutation(seed: int | None = None) -> Spec:
    """Exercise: permute attention among the real tokens only (Chapter 4).

    ``fn(alpha, mask, generator)`` with ``alpha`` (T,), ``mask`` (T,) bool and a
    ``torch.Generator`` returns one permuted copy of ``alpha``. The 400 draws, each with its
    own generator, must be a uniform rearrangement: every one of the 12 orders of the weights
    (0.5, 0.2, 0.2, 0.1) turns up, so a random rotation (4 orders) fails. The order must come
    from the generator: 20 more draws get the first 20 draws' generators again, in the same
    state, and must give the same orders (an answer that ignores its generator fails).
    """
    alpha = torch.tensor([0.0, 0.5, 0.2, 0.2, 0.1, 0.0, 0.0])
    mask = torch.tensor([False, True, True, True, True, False, False])
    rng = case_rng(11, seed)
    numbers = [int(n) for n in rng.integers(0, 2**62, _PERMUTATION_DRAWS)]
    numbers += numbers[:_PERMUTATION_REPEATS]
    cases = [(alpha.clone(), mask.clone(), torch.Generator().manual_seed(n)) for n in numbers]

    def judge_draws(answers):
        for answer in answers:
            if answer.kind == "not_implemented":
                return CheckResult(False, "permutation: not implemented yet "
                                          "(the starter still raises NotImplementedError).")
            if answer.kind == "raised":
                return CheckResult(False, f"permutation: raised {answer.detail}")
            if answer.kind == "invalid":
                return CheckResult(False, f"permutation: {answer.detail}")
            if np.shape(answer.value) != tuple(alpha.shape):
                return CheckResult(False, f"permutation: returned shape {np.shape(answer.value)}, "
                                          f"expected {tuple(alpha.shape)}.")
        if len(answers) < len(cases):
            return CheckResult(False, "permutation: gave fewer draws than asked (the run ended first).")
        stacked = torch.as_tensor(np.stack([np.asarray(a.value, dtype=np.float32) for a in answers]))
        for d in stacked:
            if torch.any(d[~mask] != 0):
                return CheckResult(False, "permutation: moved weight onto <SOS>, <EOS> or padding.")
            if not torch.allclose(d[mask].sort().values, alpha[mask].sort().values):
                return CheckResult(False, "permutation: the real tokens' weights are not a rearrangement "
                                          "of the original ones.")
        draws, again = stacked[:_PERMUTATION_DRAWS], stacked[_PERMUTATION_DRAWS:]
        if not torch.equal(again, draws[:_PERMUTATION_REPEATS]):
            return CheckResult(False, "permutation: the order does not follow the generator: a generator in the "
                                      "same state gave another order (draw from `generator`, e.g. "
                                      "torch.randperm(n, generator=generator)).")
        where_big = (draws[:, mask] == 0.5).float().mean(0)  # the 0.5 weight should land anywhere
        if torch.any(where_big < 0.15):
            return CheckResult(False, "permutation: not uniform: the largest weight rarely reaches some positions.")
        orders = {}
        for d in draws[:, mask]:
            key = tuple(np.round(d.cpu().numpy(), 6))
            orders[key] = orders.get(key, 0) + 1
        if len(orders) < 12 or min(orders.values()) < 10:  # 400 / 12 = 33 each on average
            return CheckResult(False, f"permutation: not uniform: {len(orders)} of the 12 orders of the real tokens' "
                                      "weights turn up, some rarely (a rotation gives only 4).")
        return CheckResult(True, "permutation: correct on 400 random draws "
                                 "(a uniform rearrangement of the real tokens).")

    return Spec("permutation", cases, judge=judge_draws,
                to_numpy=lambda t: np.asarray(t.detach() if isinstance(t, torch.Tensor) else t, dtype=np.float32),
                modules=("attnlib.presentation.exercises.fixtures",))


def _spec_binned_medians(seed: int | None = None) -> Spec:
    """Exercise: median of a value per bin of max attention, J&W's bins (Chapter 4)."""
    import pandas as pd

    from ...experiments.counterfactual import bin_by_max_attention

    rng = case_rng(12, seed)
    cases = []
    for n in (40, 300):
        values, max_attention = rng.exponential(0.05, n), rng.uniform(0, 1, n)
        max_attention[:3] = [0.25, 0.75, 1.0]  # edges: [.25, .5) gets 0.25, the last bin is closed
        if n == 40:  # an empty bin, [.5, .75): its median is NaN, not 0
            max_attention[(max_attention >= 0.5) & (max_attention < 0.75)] = 0.8
        cases.append((values, max_attention))

    def reference(values, max_attention):
        frame = bin_by_max_attention(values, max_attention)
        return frame.groupby("bin", observed=False)["value"].median().to_numpy()

    return Spec("binned medians", cases, reference, to_numpy=lambda x: np.asarray(x, dtype=float))


def _spec_eps_max_jsd(seed: int | None = None) -> Spec:
    """Exercise: J&W's selection: max JSD over candidates within eps, alpha-hat counts as 0 (Chapter 5)."""
    from ...experiments.counterfactual import select_within_eps

    rng = case_rng(13, seed)
    cases = []
    for n, k, eps in ((1, 1, 0.01), (6, 5, 0.01), (50, 5, 0.05)):
        tvd = rng.uniform(0, 0.05, (n, k))
        jsd = rng.uniform(0, np.log(2), (n, k))
        if n == 6:  # on the boundary: a TVD of exactly eps is kept (TVD <= eps), with the largest JSD
            tvd[:, 0], jsd[:, 0] = eps, np.log(2)
        cases.append((tvd, jsd, eps))
    cases.append((np.full((2, 3), 0.5), np.full((2, 3), 0.6), 0.01))  # nothing kept: 0
    return Spec("eps_max_jsd", cases, lambda t, j, e: select_within_eps(t, j, e)[1],
                to_numpy=lambda x: np.asarray(x, dtype=float))


def _spec_pairwise_jsd(seed: int | None = None) -> Spec:
    """Exercise: the adversary's diversity term, the mean JSD over pairs of K candidates (Chapter 5)."""
    from ...metrics import jsd

    rng = case_rng(14, seed)
    cases = [(rng.dirichlet(np.ones(t), size=k),) for k, t in ((2, 4), (5, 9), (3, 30))]
    cases.append((np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]),))

    def reference(c):
        i, j = np.triu_indices(len(c), 1)
        return float(np.mean(jsd(c[i], c[j])))

    return Spec("pairwise JSD", cases, reference, to_numpy=lambda x: np.asarray(x, dtype=float),
                modules=("attnlib.metrics",))


#: checker name -> Spec builder, in the chapters' order
SPECS = {
    "check_leave_one_out": _spec_leave_one_out,
    "check_gradient_importance": _spec_gradient_importance,
    "check_permutation": _spec_permutation,
    "check_binned_medians": _spec_binned_medians,
    "check_eps_max_jsd": _spec_eps_max_jsd,
    "check_pairwise_jsd": _spec_pairwise_jsd,
}
