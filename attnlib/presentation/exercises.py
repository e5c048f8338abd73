"""Checkers for the chapters' exercises.

Each ``check_*`` function takes the student's function, runs it on seeded cases
(including the edge cases the chapter warns about), compares it with attnlib's
reference implementation, and returns a :class:`CheckResult`: truthy when every case
passes, and shown as a one-line verdict when it is a cell's last expression. It never
raises for a wrong answer, so a notebook keeps running.

Grading (``tools/grade.py``): when the environment variable ``ATTNLIB_GRADE_LOG`` names a
file, every checker also appends its verdict there as one JSON line,
``{"checker": "check_tvd", "passed": true, "message": "tvd: correct on all 7 cases."}``.
"""
from __future__ import annotations

import functools
import json
import os
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
    "check_leave_one_out",
    "check_gradient_importance",
    "check_permutation",
    "check_binned_medians",
    "check_eps_max_jsd",
    "check_pairwise_jsd",
    "check_uniform_attention",
    "check_f1",
    "check_median_jsd_over_seeds",
    "check_noise_floor_fraction",
    "check_masked_kl",
    "check_adversarial_loss",
    "check_guided_context",
    "check_guide_gain",
    "check_erase",
    "check_first_flip_fraction",
    "check_null_dim",
    "check_effective_attention",
    "check_head_permutation",
    "check_head_importance",
    "check_impermissible_penalty",
    "check_attention_mass",
    "check_augmented_attention",
    "check_rollout",
    "check_erasure_one_instance",
    "check_aopc",
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
    from ..metrics import tvd

    return _report("tvd", fn, _distribution_pairs(0), tvd)


def check_jsd(fn: Callable) -> CheckResult:
    """Exercise: JSD with natural logs, zeros allowed, batched (Chapter 2)."""
    from ..metrics import jsd

    return _report("jsd", fn, _distribution_pairs(1), jsd)


def check_kendall_tau(fn: Callable) -> CheckResult:
    """Exercise: Kendall tau-b of two 1-D arrays, ties included (Chapter 2)."""
    from ..metrics import kendall_tau

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
    from ..models import masked_softmax

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


# ----------------------------------------------------------------------------- Chapters 3-5


def _tiny_model_and_instances(encoder: str = "lstm", seed: int = 5):
    """A seeded, untrained classifier over a 40-word vocabulary and a few token sequences."""
    from ..data import EOS, SOS
    from ..models import AttentionClassifier, ModelConfig

    torch.manual_seed(seed)
    model = AttentionClassifier(40, ModelConfig(encoder=encoder, attention="tanh")).eval()
    g = torch.Generator().manual_seed(seed)
    instances = []
    for n in (2, 5, 9):
        body = torch.randint(4, 40, (n,), generator=g)
        instances.append(torch.cat([torch.tensor([SOS]), body, torch.tensor([EOS])]))
    return model, instances


def _per_instance_reference(measure):
    from ..data import PAD

    def reference(model, tokens):
        batch = tokens.unsqueeze(0)
        out = measure(model, batch)[0]
        real = (tokens != PAD)
        real[0] = False
        real[-1] = False
        return out[real].detach()

    return reference


def check_leave_one_out(fn: Callable) -> CheckResult:
    """Exercise: leave-one-out by deletion for one instance (Chapter 3).

    ``fn(model, tokens)``: ``tokens`` is a 1-D LongTensor ``<SOS> w_1 ... w_n <EOS>``; return
    the n values TVD(y-hat(x), y-hat(x without w_t)).
    """
    from ..experiments.importance import leave_one_out

    cases = []
    for encoder in ("lstm", "average"):
        model, instances = _tiny_model_and_instances(encoder)
        cases += [(model, t) for t in instances]
    return _report("leave_one_out", fn, cases, _per_instance_reference(leave_one_out), atol=1e-5,
                   to_numpy=lambda t: np.asarray(t.detach() if isinstance(t, torch.Tensor) else t, dtype=float))


def check_gradient_importance(fn: Callable) -> CheckResult:
    """Exercise: J&W's gradient importance with attention detached, for one instance (Chapter 3)."""
    from ..experiments.importance import gradient_importance

    cases = []
    for encoder in ("lstm", "cnn"):
        model, instances = _tiny_model_and_instances(encoder, seed=7)
        cases += [(model, t) for t in instances[1:]]
    return _report("gradient_importance", fn, cases, _per_instance_reference(gradient_importance), atol=1e-5,
                   to_numpy=lambda t: np.asarray(t.detach() if isinstance(t, torch.Tensor) else t, dtype=float))


def check_permutation(fn: Callable) -> CheckResult:
    """Exercise: permute attention among the real tokens only (Chapter 4).

    ``fn(alpha, mask, generator)`` with ``alpha`` (T,), ``mask`` (T,) bool and a
    ``torch.Generator`` returns one permuted copy of ``alpha``.
    """
    g = torch.Generator().manual_seed(11)
    alpha = torch.tensor([0.0, 0.5, 0.2, 0.2, 0.1, 0.0, 0.0])
    mask = torch.tensor([False, True, True, True, True, False, False])
    try:
        draws = [torch.as_tensor(fn(alpha, mask, g), dtype=torch.float32) for _ in range(400)]
    except NotImplementedError:
        return CheckResult(False, "permutation: not implemented yet (the starter still raises NotImplementedError).")
    except Exception as err:  # noqa: BLE001
        return CheckResult(False, f"permutation: raised {type(err).__name__}: {err}")
    for d in draws:
        if d.shape != alpha.shape:
            return CheckResult(False, f"permutation: returned shape {tuple(d.shape)}, expected {tuple(alpha.shape)}.")
        if torch.any(d[~mask] != 0):
            return CheckResult(False, "permutation: moved weight onto <SOS>, <EOS> or padding.")
        if not torch.allclose(d[mask].sort().values, alpha[mask].sort().values):
            return CheckResult(False, "permutation: the real tokens' weights are not a rearrangement of the original ones.")
    stacked = torch.stack(draws)
    where_big = (stacked[:, mask] == 0.5).float().mean(0)  # the 0.5 weight should land anywhere
    if torch.any(where_big < 0.15):
        return CheckResult(False, "permutation: not uniform: the largest weight rarely reaches some positions.")
    return CheckResult(True, "permutation: correct on 400 random draws (a uniform rearrangement of the real tokens).")


def check_binned_medians(fn: Callable) -> CheckResult:
    """Exercise: median of a value per bin of max attention, J&W's bins (Chapter 4)."""
    import pandas as pd

    from ..experiments.counterfactual import bin_by_max_attention

    rng = np.random.default_rng(12)
    cases = []
    for n in (40, 300):
        values, max_attention = rng.exponential(0.05, n), rng.uniform(0, 1, n)
        max_attention[:3] = [0.25, 0.75, 1.0]  # edges: [.25, .5) gets 0.25, the last bin is closed
        cases.append((values, max_attention))

    def reference(values, max_attention):
        frame = bin_by_max_attention(values, max_attention)
        return frame.groupby("bin", observed=False)["value"].median().to_numpy()

    return _report("binned medians", fn, cases, reference, to_numpy=lambda x: np.asarray(x, dtype=float))


def check_eps_max_jsd(fn: Callable) -> CheckResult:
    """Exercise: J&W's selection: max JSD over candidates within eps, alpha-hat counts as 0 (Chapter 5)."""
    from ..experiments.counterfactual import select_within_eps

    rng = np.random.default_rng(13)
    cases = []
    for n, k, eps in ((1, 1, 0.01), (6, 5, 0.01), (50, 5, 0.05)):
        tvd = rng.uniform(0, 0.05, (n, k))
        jsd = rng.uniform(0, np.log(2), (n, k))
        cases.append((tvd, jsd, eps))
    cases.append((np.full((2, 3), 0.5), np.full((2, 3), 0.6), 0.01))  # nothing kept: 0
    return _report("eps_max_jsd", fn, cases, lambda t, j, e: select_within_eps(t, j, e)[1], to_numpy=lambda x: np.asarray(x, dtype=float))


def check_pairwise_jsd(fn: Callable) -> CheckResult:
    """Exercise: the adversary's diversity term, the mean JSD over pairs of K candidates (Chapter 5)."""
    from ..metrics import jsd

    rng = np.random.default_rng(14)
    cases = [(rng.dirichlet(np.ones(t), size=k),) for k, t in ((2, 4), (5, 9), (3, 30))]
    cases.append((np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]),))

    def reference(c):
        i, j = np.triu_indices(len(c), 1)
        return float(np.mean(jsd(c[i], c[j])))

    return _report("pairwise JSD", fn, cases, reference, to_numpy=lambda x: np.asarray(x, dtype=float))


# ----------------------------------------------------------------------------- Chapters 6-7


def check_uniform_attention(fn: Callable) -> CheckResult:
    """Exercise: alpha_t = 1/T over the real tokens, exactly 0 elsewhere, batched (Chapter 6)."""
    from ..models import uniform_attention

    g = torch.Generator().manual_seed(15)
    cases = []
    for B, T in ((1, 3), (4, 8), (6, 20)):
        mask = torch.rand(B, T, generator=g) > 0.4
        mask[:, 0] = True  # at least one real token per row
        cases.append((mask,))
    cases.append((torch.tensor([[False, True, False, False]]),))  # one real token: weight 1
    return _report("uniform attention", fn, cases, uniform_attention,
                   to_numpy=lambda t: np.asarray(t.detach() if isinstance(t, torch.Tensor) else t, dtype=float))


def check_f1(fn: Callable) -> CheckResult:
    """Exercise: F1 of the positive class from labels and p(positive), threshold 0.5 (Chapter 6)."""
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(16)
    cases = [(np.array([1, 0, 1, 1]), np.array([0.9, 0.2, 0.4, 0.7]))]
    for n in (10, 200):
        labels = rng.integers(0, 2, n)
        cases.append((labels, np.clip(labels * 0.3 + rng.uniform(0, 0.7, n), 0, 1)))
    cases.append((np.array([0, 0, 1]), np.array([0.1, 0.2, 0.3])))  # no positive prediction: F1 = 0
    return _report("f1", fn, cases, lambda y, p: f1_score(y, (p > 0.5).astype(int), zero_division=0),
                   to_numpy=lambda x: np.asarray(x, dtype=float))


def check_median_jsd_over_seeds(fn: Callable) -> CheckResult:
    """Exercise: per instance, the median over seeds of JSD(alpha_seed, alpha_base) (Chapter 7)."""
    from ..metrics import jsd

    rng = np.random.default_rng(17)
    cases = []
    for S, N, T in ((1, 2, 4), (3, 5, 7), (4, 10, 12)):
        base = rng.dirichlet(np.ones(T), size=N)
        seeds = rng.dirichlet(np.ones(T) * 0.5, size=(S, N))
        if T > 5:
            base[:, -2:], seeds[..., -2:] = 0, 0  # padding: zero in every model
            base, seeds = base / base.sum(-1, keepdims=True), seeds / seeds.sum(-1, keepdims=True)
        cases.append((seeds, base))
    return _report("median JSD over seeds", fn, cases,
                   lambda seeds, base: np.median(jsd(seeds, np.broadcast_to(base, seeds.shape).copy()), axis=0),
                   to_numpy=lambda x: np.asarray(x, dtype=float))


def check_noise_floor_fraction(fn: Callable) -> CheckResult:
    """Exercise: the share of instances whose adversarial JSD beats the seeds' JSD (Chapter 7)."""
    rng = np.random.default_rng(18)
    cases = [(np.array([0.5, 0.1, 0.3]), np.array([0.2, 0.2, 0.3]))]  # ties do not count as beating
    for n in (10, 500):
        cases.append((rng.uniform(0, 0.69, n), rng.uniform(0, 0.3, n)))
    return _report("noise-floor fraction", fn, cases, lambda adv, seeds: float(np.mean(adv > seeds)),
                   to_numpy=lambda x: np.asarray(x, dtype=float))


# ----------------------------------------------------------------------------- Chapters 8-10
_as_float = lambda t: np.asarray(t.detach() if isinstance(t, torch.Tensor) else t, dtype=float)  # noqa: E731


def _attention_cases(seed: int, shapes=((1, 3), (4, 7), (5, 12)), *, min_real: int = 1):
    """(alpha_a, alpha_b, mask) triples: softmax attention over random real tokens, exactly 0 on padding."""
    g = torch.Generator().manual_seed(seed)
    cases = []
    for B, T in shapes:
        n_real = torch.randint(min_real, T + 1, (B,), generator=g)
        mask = torch.arange(T)[None, :] < n_real[:, None]
        a = torch.softmax(torch.randn(B, T, generator=g, dtype=torch.float64).masked_fill(~mask, -torch.inf), -1)
        b = torch.softmax(torch.randn(B, T, generator=g, dtype=torch.float64).masked_fill(~mask, -torch.inf), -1)
        cases.append((a, b, mask))
    return cases


def check_masked_kl(fn: Callable) -> CheckResult:
    """Exercise: KL(alpha_a || alpha_b) over the real tokens, finite with exact zeros on padding (Chapter 8)."""
    from ..experiments.adversarial_training import attention_kl

    return _report("masked KL", fn, _attention_cases(19), attention_kl, to_numpy=_as_float)


def check_adversarial_loss(fn: Callable) -> CheckResult:
    """Exercise: W&P's per-instance loss TVD(y_a, y_b) - lambda KL(alpha_a || alpha_b) (Chapter 8)."""
    from ..experiments.adversarial_training import adversarial_loss

    g = torch.Generator().manual_seed(20)
    cases = []
    for (a, b, mask), lam in zip(_attention_cases(21), (0.0, 0.01, 1.0)):
        pa = torch.softmax(torch.randn(a.shape[0], 2, generator=g, dtype=torch.float64), -1)
        pb = torch.softmax(torch.randn(a.shape[0], 2, generator=g, dtype=torch.float64), -1)
        cases.append((pa, pb, a, b, mask, lam))
    return _report("adversarial loss", fn, cases, adversarial_loss, to_numpy=_as_float)


def check_guided_context(fn: Callable) -> CheckResult:
    """Exercise: the context sum_t alpha_t h_t of a diagnostic model with given, ragged attention (Chapter 9).

    ``fn(hidden, given)``: hidden (B, T, H), given a list of B arrays (one weight per real
    token, real tokens first); returns (B, H), padding contributing nothing.
    """
    g = torch.Generator().manual_seed(22)
    cases = []
    for B, T, H in ((1, 4, 3), (3, 6, 5), (5, 9, 2)):
        lengths = torch.randint(1, T + 1, (B,), generator=g).tolist()
        hidden = torch.randn(B, T, H, generator=g, dtype=torch.float64)
        given = [torch.softmax(torch.randn(n, generator=g, dtype=torch.float64), -1).cpu().numpy() for n in lengths]
        cases.append((hidden, given))

    def reference(hidden, given):
        alpha = torch.zeros(hidden.shape[:2], dtype=hidden.dtype)
        for i, w in enumerate(given):
            alpha[i, : len(w)] = torch.as_tensor(w)
        return (alpha.unsqueeze(-1) * hidden).sum(1)

    return _report("guided context", fn, cases, reference, to_numpy=_as_float)


def check_guide_gain(fn: Callable) -> CheckResult:
    """Exercise: each guide's F1 gain over the uniform guide, mean and sd over seeds (Chapter 9).

    ``fn(frame)``: a frame with columns guide, seed, f1 (one row per guide and seed);
    returns a frame indexed by guide (sorted) with columns ``mean gain`` and ``sd gain``
    (sample sd, ddof=1; NaN for one seed), the gain taken seed by seed against the
    uniform guide's F1 for the same seed.
    """
    import pandas as pd

    rng = np.random.default_rng(23)
    cases = []
    for seeds in ((0,), (0, 1, 2), (3, 5, 7, 9)):
        guides = ["uniform", "trained", "lstm"] + (["adversary"] if len(seeds) > 1 else [])
        rows = [{"guide": gd, "seed": sd, "f1": float(rng.uniform(0.6, 0.9))} for gd in guides for sd in seeds]
        cases.append((pd.DataFrame(rows).sample(frac=1.0, random_state=len(seeds)).reset_index(drop=True),))

    def reference(frame):
        wide = frame.pivot(index="seed", columns="guide", values="f1")
        gain = wide.sub(wide["uniform"], axis=0)
        return pd.DataFrame({"mean gain": gain.mean(), "sd gain": gain.std(ddof=1)}).sort_index()

    def to_numpy(f):
        if not isinstance(f, pd.DataFrame) or not {"mean gain", "sd gain"} <= set(f.columns):
            raise ValueError("return a DataFrame with columns 'mean gain' and 'sd gain'")
        return f.sort_index()[["mean gain", "sd gain"]].to_numpy(dtype=float)

    try:
        return _report("guide gain", fn, cases, reference, to_numpy=to_numpy)
    except ValueError as err:
        return CheckResult(False, f"guide gain: {err}")


def check_erase(fn: Callable) -> CheckResult:
    """Exercise: zero the chosen attention weights and renormalise over the rest (Chapter 10)."""
    from ..experiments.erasure import erased_attention

    g = torch.Generator().manual_seed(24)
    cases = []
    for a, _, mask in _attention_cases(25, min_real=2):
        remove = (torch.rand(mask.shape, generator=g) < 0.4) & mask
        first = mask.float().argmax(-1)  # keep the first real token of every row
        remove[torch.arange(len(mask)), first] = False
        cases.append((a, mask, remove))
    return _report("erase and renormalise", fn, cases, erased_attention, to_numpy=_as_float)


def check_first_flip_fraction(fn: Callable) -> CheckResult:
    """Exercise: the fraction of tokens removed at the first decision flip, NaN if none (Chapter 10).

    ``fn(flips, lengths)``: flips (N, K) bool, flips[i, k] True when erasing the k+1 top-ranked
    tokens of instance i flips its decision; lengths (N,) real tokens. Returns (N,).
    """
    rng = np.random.default_rng(26)
    cases = [(np.array([[False, True, True], [False, False, False]]), np.array([4, 3]))]
    for N, K in ((6, 5), (40, 12)):
        cases.append((rng.uniform(size=(N, K)) < 0.25, rng.integers(K + 1, K + 10, N)))

    def reference(flips, lengths):
        first = flips.argmax(-1) + 1.0
        return np.where(flips.any(-1), first / lengths, np.nan)

    return _report("first-flip fraction", fn, cases, reference, to_numpy=lambda x: np.asarray(x, dtype=float))


def _head_cases(seed: int) -> list:
    """One head's (A, T) pairs: short and long sentences, full rank and rank-deficient T."""
    rng = np.random.default_rng(seed)
    cases = []
    for n, d, rank in ((5, 8, 5), (12, 4, 4), (20, 6, 3), (9, 9, 9), (16, 8, 1)):
        T = rng.normal(size=(n, rank)) @ rng.normal(size=(rank, d))  # rank <= rank
        A = rng.dirichlet(np.ones(n), size=n)
        cases.append((A, T))
    return cases


def check_null_dim(fn: Callable) -> CheckResult:
    """Exercise: the dimension of T's left null space, n - rank(T), with the book's tolerance (Chapter 11)."""
    from ..experiments.identifiability import null_space_dim

    cases = [(T,) for _, T in _head_cases(21)] + [(np.zeros((4, 3)),)]
    return _report("null-space dimension", fn, cases, lambda T: null_space_dim(T[None])[0],
                   to_numpy=lambda x: np.asarray(x, dtype=float))


def check_effective_attention(fn: Callable) -> CheckResult:
    """Exercise: A's rows projected onto the column space of T (Chapter 11)."""
    from ..experiments.identifiability import effective_attention

    return _report("effective attention", fn, _head_cases(22), lambda A, T: effective_attention(A[None], T[None])[0],
                   atol=1e-8, to_numpy=lambda x: np.asarray(x, dtype=float))


def _tiny_transformer(seed: int):
    """A tiny random transformer (2 layers x 2 heads) and a padded batch of token ids, seeded."""
    from ..data import PAD
    from ..models import TransformerConfig

    g = torch.Generator().manual_seed(seed)
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
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


def check_head_permutation(fn: Callable) -> CheckResult:
    """Exercise: the output change when one head's rows are permuted by given sources (Chapter 12).

    ``fn(model, tokens, site, sources)`` -> (B,) TVD between the model's output and its output
    with head ``site``'s attention rows permuted: A'[b, q, t] = A[b, q, sources[b, q, t]].
    """
    from ..experiments.counterfactual import query_row_sources
    from ..metrics import tvd
    from ..models import Site
    from ..models.interventions import permute_rows

    cases = []
    for seed in (0, 1):
        model, tokens = _tiny_transformer(seed)
        mask = tokens != 0
        src = query_row_sources(mask, tokens.shape[1], 1, np.random.default_rng(seed))[:, 0]
        for site in (Site(0, 1), Site(1, 0)):
            cases.append((model, tokens, site, src))

    def reference(model, tokens, site, sources):
        with torch.no_grad():
            edit = lambda rows, _mask: permute_rows(rows, sources.unsqueeze(1)).squeeze(1)  # noqa: E731
            return tvd(model(tokens).probs, model(tokens, edits={site: edit}).probs, check=False)

    return _report("per-head permutation", fn, cases, reference, atol=1e-5,
                   to_numpy=lambda x: np.asarray(x, dtype=float))


def check_head_importance(fn: Callable) -> CheckResult:
    """Exercise: Michel et al.'s head importance from attention and its gradient (Chapter 12).

    ``fn(attention, grad)``: both (B, L, h, T, T), a toy model's attention and dL/dA per
    instance -> (L, h): I = mean over instances of |sum_{q,t} A * dL/dA|, each layer's row
    divided by its l2 norm. Cases come from a tiny random transformer (gradients by autograd)
    and random arrays.
    """
    cases = []
    for seed in (2, 3):
        model, tokens = _tiny_transformer(seed)
        trace = model.trace(tokens)
        A = trace.attentions.clone().requires_grad_(True)  # (B, L, h, T, T)
        edits = {s: A[:, s.layer, s.head] for s in model.sites}
        out = model(tokens, edits=edits)
        labels = torch.arange(len(tokens)) % 2
        loss = torch.nn.functional.binary_cross_entropy(out.probs[:, 1], labels.float(), reduction="sum")
        (grad,) = torch.autograd.grad(loss, A)
        cases.append((trace.attentions.cpu().numpy(), grad.cpu().numpy()))
    rng = np.random.default_rng(4)
    cases.append((rng.dirichlet(np.ones(5), size=(3, 3, 2, 5)), rng.normal(size=(3, 3, 2, 5, 5))))

    def reference(attention, grad):
        scores = np.abs((np.asarray(attention) * np.asarray(grad)).sum((-1, -2))).mean(0)  # (L, h)
        norm = np.linalg.norm(scores, axis=1, keepdims=True)
        return scores / np.where(norm > 0, norm, 1.0)

    return _report("head importance", fn, cases, reference, atol=1e-6, to_numpy=lambda x: np.asarray(x, dtype=float))


def _mask_cases(seed: int) -> list:
    """(attention (B, T), mask (B, T) bool) pairs with at least one impermissible token per row, some padding."""
    rng = np.random.default_rng(seed)
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


def check_attention_mass(fn: Callable) -> CheckResult:
    """Exercise: alpha^T m, the attention on the impermissible tokens, per instance (Chapter 13)."""
    from ..experiments.deception import attention_mass

    return _report("attention mass", fn, _mask_cases(31), lambda a, m: attention_mass(a, m), atol=1e-9,
                   to_numpy=lambda x: np.asarray(x, dtype=float))


def check_impermissible_penalty(fn: Callable) -> CheckResult:
    """Exercise: Pruthi et al.'s penalty, the batch mean of -lambda log(1 - alpha^T m) (Chapter 13).

    ``fn(attention, mask, lam)`` -> a scalar. The last case puts all the attention on the
    impermissible tokens: the log's argument must be clamped (at 1e-10) to stay finite.
    """
    from ..experiments.deception import impermissible_penalty

    cases = [(a, m, lam) for (a, m), lam in zip(_mask_cases(32), (0.1, 1.0, 0.0, 1.0))]
    return _report("impermissible penalty", fn, cases, lambda a, m, lam: impermissible_penalty(a, m, lam),
                   atol=1e-6, to_numpy=lambda x: np.asarray(x, dtype=float))


def _layer_cases(seed: int) -> list:
    """Attentions (L, h, T, T) of one sentence (all positions real): softmax rows, some peaked, one T = 1."""
    rng = np.random.default_rng(seed)
    cases = []
    for L, h, T, spread in ((1, 1, 3, 1.0), (2, 2, 5, 2.0), (3, 4, 8, 4.0), (2, 3, 1, 1.0)):
        logits = rng.normal(0, spread, (L, h, T, T))
        a = np.exp(logits - logits.max(-1, keepdims=True))
        cases.append(torch.tensor(a / a.sum(-1, keepdims=True)))
    return cases


def _one_sentence(attentions: torch.Tensor):
    """(L, h, T, T) -> the batch of one (1, L, h, T, T) and its key mask (1, T), every position real."""
    return attentions[None], torch.ones(1, attentions.shape[-1], dtype=torch.bool)


def check_augmented_attention(fn: Callable) -> CheckResult:
    """Exercise: A^ = r I + (1 - r) mean_h A, rows renormalised, for one layer (Chapter 14).

    ``fn(attention, residual)``: attention (h, T, T) of one layer, residual r in [0, 1) -> (T, T).
    Cases include r = 0 (the head average alone) and a one-token sentence.
    """
    from ..experiments.flow import rollout

    cases = [(a[-1], r) for a, r in zip(_layer_cases(41), (0.5, 0.0, 0.5, 0.3))]
    cases.append((_layer_cases(42)[2][0], 0.9))

    def reference(attention, residual):  # a one-layer rollout is that layer's A^
        return rollout(*_one_sentence(attention[None]), residual=residual)[0, 0]

    return _report("augmented attention", fn, cases, reference, atol=1e-9,
                   to_numpy=lambda x: np.asarray(x, dtype=float))


def check_rollout(fn: Callable) -> CheckResult:
    """Exercise: the rollout after the last layer, R_L = A^_L ... A^_1, for one sentence (Chapter 14).

    ``fn(attentions)``: (L, h, T, T) -> (T, T), with A&Z's residual weight 0.5. The first case
    has one layer (R_1 = A^_1); the order of the product matters from two layers on.
    """
    from ..experiments.flow import rollout

    return _report("rollout", fn, [(a,) for a in _layer_cases(43)], lambda a: rollout(*_one_sentence(a))[0, -1], atol=1e-9,
                   to_numpy=lambda x: np.asarray(x, dtype=float))


def _toy_predict(weights: dict):
    """A bag-of-words classifier over a list of words: P(positive) = sigmoid(bias + sum of word weights)."""

    def predict(words):
        z = -0.2 + sum(weights.get(w, 0.0) for w in words)
        p = 1.0 / (1.0 + np.exp(-z))
        return np.array([1.0 - p, p])

    return predict


def _erasure_cases(seed: int) -> list:
    """(predict, words, scores, fraction): ties in the scores, k = 1, k = n, an instance predicted negative."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(12)]
    predict = _toy_predict({w: float(x) for w, x in zip(vocab, rng.normal(0, 1.5, len(vocab)))})
    cases = []
    for n, fraction in ((10, 0.2), (7, 0.01), (20, 0.05), (9, 0.5), (4, 1.0), (15, 0.1)):
        words = [vocab[i] for i in rng.integers(0, len(vocab), n)]
        scores = np.round(rng.random(n), 1)  # rounding makes ties: the earlier token goes first
        cases.append((predict, words, scores, fraction))
    return cases


def check_erasure_one_instance(fn: Callable) -> CheckResult:
    """Exercise: ERASER's comprehensiveness and sufficiency of one instance at one fraction (Chapter 15).

    ``fn(predict, words, scores, fraction) -> (comprehensiveness, sufficiency)``: ``predict``
    maps a list of words to class probabilities (C,); the rationale is the top
    k = ceil(fraction * n) words by score (at least 1; ties: the earlier word first); j is the
    class predicted for all the words. Cases include ties, k = 1 and k = n (nothing left
    without the rationale: ``predict([])``).
    """
    from ..experiments.faithfulness import probability_drop, rationale_mask

    def reference(predict, words, scores, fraction):
        keep = rationale_mask(scores, fraction)
        full = predict(words)
        without = predict([w for w, r in zip(words, keep) if not r])
        alone = predict([w for w, r in zip(words, keep) if r])
        return np.array([probability_drop(full, without), probability_drop(full, alone)])

    return _report("comprehensiveness and sufficiency", lambda *a: np.asarray(fn(*a), dtype=float).reshape(-1),
                   _erasure_cases(51), reference, atol=1e-9)


def check_aopc(fn: Callable) -> CheckResult:
    """Exercise: AOPC of curves over ERASER's fractions (Chapter 15).

    ``fn(values) -> aopc``: ``values`` (..., F) holds a metric at the fractions 1, 5, 10, 20,
    50 % (last axis); the AOPC is one number per curve, (...). Cases: one curve, a batch of
    curves (N, F), instances x methods (N, M, F), and curves that are not monotone (an
    area under a line through the points is not ERASER's AOPC).
    """
    from ..experiments.faithfulness import aopc

    rng = np.random.default_rng(52)
    cases = [(np.array([0.05, 0.12, 0.2, 0.31, 0.4]),), (rng.normal(0.2, 0.2, (6, 5)),),
             (rng.random((4, 3, 5)),), (np.array([[0.3, -0.1, 0.2, 0.0, 0.5]]),)]
    return _report("AOPC", fn, cases, aopc, atol=1e-12)


# ----------------------------------------------------------------------------- the grade log

#: Environment variable naming the file that every checker appends its verdict to (tools/grade.py).
GRADE_LOG_ENV = "ATTNLIB_GRADE_LOG"


def _logs_verdict(checker: Callable[[Callable], CheckResult]) -> Callable[[Callable], CheckResult]:
    """``checker``, which also appends its verdict to ``$ATTNLIB_GRADE_LOG`` when that is set."""

    @functools.wraps(checker)
    def run(fn: Callable) -> CheckResult:
        result = checker(fn)
        path = os.environ.get(GRADE_LOG_ENV)
        if path:
            line = {"checker": checker.__name__, "passed": bool(result), "message": result.message}
            with open(path, "a", encoding="utf-8") as log:
                log.write(json.dumps(line) + "\n")
        return result

    return run


for _name in __all__:
    if _name.startswith("check_"):
        globals()[_name] = _logs_verdict(globals()[_name])
del _name
