"""The exercises of Part II, Chapters 3-5 (Jain & Wallace): each checker's Spec (its cases, edge
cases included, and attnlib's reference).
"""
from __future__ import annotations

import numpy as np
import torch

from .core import Answer, CheckResult, shorten, Spec

__all__ = ["SPECS"]


# ----------------------------------------------------------------------------- Chapters 3-5


def _tiny_model_and_instances(encoder: str = "lstm", seed: int = 5):
    """A seeded, untrained classifier over a 40-word vocabulary and a few token sequences."""
    from ...data import EOS, SOS
    from ...models import AttentionClassifier, ModelConfig

    torch.manual_seed(seed)
    model = AttentionClassifier(40, ModelConfig(encoder=encoder, attention="tanh")).eval()
    g = torch.Generator().manual_seed(seed)
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


def _spec_leave_one_out() -> Spec:
    """Exercise: leave-one-out by deletion for one instance (Chapter 3).

    ``fn(model, tokens)``: ``tokens`` is a 1-D LongTensor ``<SOS> w_1 ... w_n <EOS>``; return
    the n values TVD(y-hat(x), y-hat(x without w_t)).
    """
    from ...experiments.importance import leave_one_out

    cases = []
    for encoder in ("lstm", "average"):
        model, instances = _tiny_model_and_instances(encoder)
        cases += [(model, t) for t in instances]
    return Spec("leave_one_out", cases, _per_instance_reference(leave_one_out), atol=1e-5,
                   to_numpy=lambda t: np.asarray(t.detach() if isinstance(t, torch.Tensor) else t, dtype=float))


def _spec_gradient_importance() -> Spec:
    """Exercise: J&W's gradient importance with attention detached, for one instance (Chapter 3)."""
    from ...experiments.importance import gradient_importance

    cases = []
    for encoder in ("lstm", "cnn"):
        model, instances = _tiny_model_and_instances(encoder, seed=7)
        cases += [(model, t) for t in instances[1:]]
    return Spec("gradient_importance", cases, _per_instance_reference(gradient_importance), atol=1e-5,
                   to_numpy=lambda t: np.asarray(t.detach() if isinstance(t, torch.Tensor) else t, dtype=float))


_PERMUTATION_DRAWS = 400


def _spec_permutation() -> Spec:
    """Exercise: permute attention among the real tokens only (Chapter 4).

    ``fn(alpha, mask, generator)`` with ``alpha`` (T,), ``mask`` (T,) bool and a
    ``torch.Generator`` returns one permuted copy of ``alpha``. The 400 draws must be a
    uniform rearrangement: every one of the 12 orders of the weights (0.5, 0.2, 0.2, 0.1)
    turns up, so a random rotation (4 orders) fails.
    """
    alpha = torch.tensor([0.0, 0.5, 0.2, 0.2, 0.1, 0.0, 0.0])
    mask = torch.tensor([False, True, True, True, True, False, False])

    def collect(fn):
        g = torch.Generator().manual_seed(11)
        try:
            draws = [torch.as_tensor(fn(alpha, mask, g), dtype=torch.float32) for _ in range(_PERMUTATION_DRAWS)]
        except NotImplementedError:
            return [Answer("not_implemented")]
        except Exception as err:  # noqa: BLE001
            return [Answer("raised", detail=shorten(f"{type(err).__name__}: {err}"))]
        for d in draws:
            if d.shape != alpha.shape:
                return [Answer("invalid", detail=f"returned shape {tuple(d.shape)}, expected {tuple(alpha.shape)}.")]
        return [Answer("value", torch.stack(draws).cpu().numpy())]

    def judge_draws(answers):
        answer = answers[0] if answers else Answer("invalid", detail="gave no answer (the run ended first).")
        if answer.kind == "not_implemented":
            return CheckResult(False, "permutation: not implemented yet "
                                      "(the starter still raises NotImplementedError).")
        if answer.kind == "raised":
            return CheckResult(False, f"permutation: raised {answer.detail}")
        if answer.kind == "invalid":
            return CheckResult(False, f"permutation: {answer.detail}")
        if np.shape(answer.value) != (_PERMUTATION_DRAWS, len(alpha)):
            return CheckResult(False, f"permutation: returned {np.shape(answer.value)} draws, "
                                      f"expected {(_PERMUTATION_DRAWS, len(alpha))}.")
        stacked = torch.as_tensor(np.asarray(answer.value, dtype=np.float32))
        for d in stacked:
            if torch.any(d[~mask] != 0):
                return CheckResult(False, "permutation: moved weight onto <SOS>, <EOS> or padding.")
            if not torch.allclose(d[mask].sort().values, alpha[mask].sort().values):
                return CheckResult(False, "permutation: the real tokens' weights are not a rearrangement "
                                          "of the original ones.")
        where_big = (stacked[:, mask] == 0.5).float().mean(0)  # the 0.5 weight should land anywhere
        if torch.any(where_big < 0.15):
            return CheckResult(False, "permutation: not uniform: the largest weight rarely reaches some positions.")
        orders = {}
        for d in stacked[:, mask]:
            key = tuple(np.round(d.cpu().numpy(), 6))
            orders[key] = orders.get(key, 0) + 1
        if len(orders) < 12 or min(orders.values()) < 10:  # 400 / 12 = 33 each on average
            return CheckResult(False, f"permutation: not uniform: {len(orders)} of the 12 orders of the real tokens' "
                                      "weights turn up, some rarely (a rotation gives only 4).")
        return CheckResult(True, "permutation: correct on 400 random draws "
                                 "(a uniform rearrangement of the real tokens).")

    return Spec("permutation", collect=collect, judge=judge_draws)


def _spec_binned_medians() -> Spec:
    """Exercise: median of a value per bin of max attention, J&W's bins (Chapter 4)."""
    import pandas as pd

    from ...experiments.counterfactual import bin_by_max_attention

    rng = np.random.default_rng(12)
    cases = []
    for n in (40, 300):
        values, max_attention = rng.exponential(0.05, n), rng.uniform(0, 1, n)
        max_attention[:3] = [0.25, 0.75, 1.0]  # edges: [.25, .5) gets 0.25, the last bin is closed
        cases.append((values, max_attention))

    def reference(values, max_attention):
        frame = bin_by_max_attention(values, max_attention)
        return frame.groupby("bin", observed=False)["value"].median().to_numpy()

    return Spec("binned medians", cases, reference, to_numpy=lambda x: np.asarray(x, dtype=float))


def _spec_eps_max_jsd() -> Spec:
    """Exercise: J&W's selection: max JSD over candidates within eps, alpha-hat counts as 0 (Chapter 5)."""
    from ...experiments.counterfactual import select_within_eps

    rng = np.random.default_rng(13)
    cases = []
    for n, k, eps in ((1, 1, 0.01), (6, 5, 0.01), (50, 5, 0.05)):
        tvd = rng.uniform(0, 0.05, (n, k))
        jsd = rng.uniform(0, np.log(2), (n, k))
        cases.append((tvd, jsd, eps))
    cases.append((np.full((2, 3), 0.5), np.full((2, 3), 0.6), 0.01))  # nothing kept: 0
    return Spec("eps_max_jsd", cases, lambda t, j, e: select_within_eps(t, j, e)[1],
                to_numpy=lambda x: np.asarray(x, dtype=float))


def _spec_pairwise_jsd() -> Spec:
    """Exercise: the adversary's diversity term, the mean JSD over pairs of K candidates (Chapter 5)."""
    from ...metrics import jsd

    rng = np.random.default_rng(14)
    cases = [(rng.dirichlet(np.ones(t), size=k),) for k, t in ((2, 4), (5, 9), (3, 30))]
    cases.append((np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]),))

    def reference(c):
        i, j = np.triu_indices(len(c), 1)
        return float(np.mean(jsd(c[i], c[j])))

    return Spec("pairwise JSD", cases, reference, to_numpy=lambda x: np.asarray(x, dtype=float))


#: checker name -> Spec builder, in the chapters' order
SPECS = {
    "check_leave_one_out": _spec_leave_one_out,
    "check_gradient_importance": _spec_gradient_importance,
    "check_permutation": _spec_permutation,
    "check_binned_medians": _spec_binned_medians,
    "check_eps_max_jsd": _spec_eps_max_jsd,
    "check_pairwise_jsd": _spec_pairwise_jsd,
}
