"""Checkers for the chapters' exercises.

Each ``check_*`` function takes the student's function, runs it on seeded cases
(including the edge cases the chapter warns about), compares it with attnlib's
reference implementation, and returns a :class:`CheckResult`: truthy when every case
passes, and shown as a one-line verdict when it is a cell's last expression. It never
raises for a wrong answer, so a notebook keeps running. An answer that is attnlib's own
function (``my_tvd = tvd``) is reported as such and does not pass.

Each checker is two halves that can run in different processes (``tools/grade.py``):
:func:`record_answers` runs the student's function on the checker's cases and writes what
it returned to a folder, as numbers only (JSON and ``.npz`` without pickles), and
:func:`judge_recorded` reads them back and compares them with the reference, computed
on its own copy of the cases. The grader runs the first half in its sandbox and the
second in its own process, so nothing the student's code does can write a verdict.
:data:`SPECS` maps each checker's name to the :class:`Spec` it is made of.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

__all__ = [
    "CheckResult",
    "Spec",
    "Answer",
    "SPECS",
    "answers_of",
    "judge",
    "record_answers",
    "read_answers",
    "judge_recorded",
    "Recorded",
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
    "check_null_space_share",
    "check_ranks_with_ties",
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


#: The kinds of :class:`Answer`: a value, or why there is none.
ANSWER_KINDS = ("value", "not_implemented", "raised", "invalid")
_DETAIL_CHARS = 300  # a student's error message, as much of it as a verdict quotes


@dataclass(frozen=True)
class Answer:
    """What a student's function gave on one case: ``kind`` "value" with ``value`` (an array of
    numbers), "not_implemented", "raised" (``detail``: the error) or "invalid" (``detail``: why
    the value is not an array of numbers of the right form)."""

    kind: str
    value: np.ndarray | None = None
    detail: str = ""

    def __post_init__(self):
        if self.kind not in ANSWER_KINDS:
            raise ValueError(f"Answer kind must be one of {ANSWER_KINDS}, got {self.kind!r}")
        if (self.kind == "value") != (self.value is not None):
            raise ValueError("an Answer has a value exactly when its kind is 'value'")


@dataclass(frozen=True)
class Spec:
    """A checker: seeded ``cases`` (argument tuples), the ``reference`` that gives each case's
    expected value, the tolerance ``atol`` and ``to_numpy``, which turns a returned value into
    an array. ``call(fn, *case)`` calls the answer (default ``fn(*case)``). A checker whose
    answer is not one value per case (Chapter 4's permutation) gives ``collect(fn)``, its list
    of :class:`Answer`, and ``judge(answers)``, its :class:`CheckResult`, instead."""

    name: str
    cases: list = field(default_factory=list)
    reference: Callable | None = None
    atol: float = 1e-6
    to_numpy: Callable = np.asarray
    call: Callable | None = None
    collect: Callable[[Callable], list] | None = None
    judge: Callable[[list], CheckResult] | None = None


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 3] + "..."


def _numbers(value) -> np.ndarray:
    """``value`` as an array of bools, integers or floats; TypeError for anything else."""
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"not an array of numbers (dtype {array.dtype})")
    return array


def _answer(spec: Spec, fn: Callable, args: tuple) -> Answer:
    """Run ``fn`` on one case of ``spec``."""
    try:
        got = spec.call(fn, *args) if spec.call else fn(*args)
    except NotImplementedError:
        return Answer("not_implemented")
    except Exception as err:  # noqa: BLE001 - report any student error readably
        return Answer("raised", detail=_short(f"{type(err).__name__}: {err}"))
    try:
        return Answer("value", _numbers(spec.to_numpy(got.detach() if isinstance(got, torch.Tensor) else got)))
    except Exception as err:  # noqa: BLE001 - a value of the wrong kind is a wrong answer
        return Answer("invalid", detail=_short(err if isinstance(err, ValueError) else f"{type(err).__name__}: {err}"))


def _case_verdict(spec: Spec, i: int, answer: Answer, expected) -> CheckResult | None:
    """The failing verdict of case ``i`` (0-based), or None when the answer is right."""
    name = spec.name
    if answer.kind == "not_implemented":
        return CheckResult(False, f"{name}: not implemented yet (the starter still raises NotImplementedError).")
    if answer.kind == "raised":
        return CheckResult(False, f"{name}: case {i + 1} raised {answer.detail}")
    if answer.kind == "invalid":
        return CheckResult(False, f"{name}: {answer.detail}")
    got = answer.value
    if np.shape(got) != np.shape(expected):
        return CheckResult(False, f"{name}: case {i + 1} returned shape {np.shape(got)}, "
                                  f"expected {np.shape(expected)}.")
    if not np.allclose(got, expected, atol=spec.atol, equal_nan=True):
        where = np.argmax(np.abs(np.nan_to_num(np.asarray(got, float) - np.asarray(expected, float))).ravel())
        return CheckResult(
            False,
            f"{name}: case {i + 1} is off: got {np.asarray(got).ravel()[where]:.6g}, "
            f"expected {np.asarray(expected).ravel()[where]:.6g}.",
        )
    return None


def _attnlib_function(fn) -> str | None:
    """``attnlib.metrics.tvd`` when ``fn`` is a function of attnlib itself (an imported answer), else None."""
    module = getattr(fn, "__module__", None)
    if isinstance(module, str) and (module == "attnlib" or module.startswith("attnlib.")) and callable(fn):
        return f"{module}.{getattr(fn, '__qualname__', getattr(fn, '__name__', '?'))}"
    return None


def _imported(name: str, where: str) -> CheckResult:
    return CheckResult(False, f"{name}: the answer is attnlib's own {where}, imported, not written: "
                              "write the function yourself.")


def answers_of(spec: Spec, fn: Callable) -> list[Answer]:
    """The student's function ``fn`` run on every case of ``spec``, up to the first that gives no value."""
    if spec.collect is not None:
        return list(spec.collect(fn))
    answers = []
    for args in spec.cases:
        answers.append(_answer(spec, fn, args))
        if answers[-1].kind != "value":
            break
    return answers


def judge(spec: Spec, answers: list[Answer], imported: str | None = None) -> CheckResult:
    """The verdict on ``answers`` (from :func:`answers_of`, perhaps in another process), computed
    with the reference on this process's own ``spec``; ``imported`` names the attnlib function
    that was handed in as the answer, if any."""
    if imported:
        return _imported(spec.name, imported)
    if spec.judge is not None:
        return spec.judge(answers)
    for i, args in enumerate(spec.cases):
        if i >= len(answers):
            return CheckResult(False, f"{spec.name}: case {i + 1} gave no answer (the run ended first).")
        bad = _case_verdict(spec, i, answers[i], spec.to_numpy(spec.reference(*args)))
        if bad is not None:
            return bad
    return CheckResult(True, f"{spec.name}: correct on all {len(spec.cases)} cases.")


def _check(spec: Spec, fn: Callable) -> CheckResult:
    """A checker in the notebook: each case's reference, then the student's answer, in turn."""
    imported = _attnlib_function(fn)
    if imported:
        return _imported(spec.name, imported)
    if spec.collect is not None:
        return spec.judge(spec.collect(fn))
    for i, args in enumerate(spec.cases):
        expected = spec.to_numpy(spec.reference(*args))
        bad = _case_verdict(spec, i, _answer(spec, fn, args), expected)
        if bad is not None:
            return bad
    return CheckResult(True, f"{spec.name}: correct on all {len(spec.cases)} cases.")


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


def _spec_tvd() -> Spec:
    """Exercise: TVD over the last axis, batched (Chapter 2)."""
    from ..metrics import tvd

    return Spec("tvd", _distribution_pairs(0), tvd)


def _spec_jsd() -> Spec:
    """Exercise: JSD with natural logs, zeros allowed, batched (Chapter 2)."""
    from ..metrics import jsd

    return Spec("jsd", _distribution_pairs(1), jsd)


def _spec_kendall_tau() -> Spec:
    """Exercise: Kendall tau-b of two 1-D arrays, ties included (Chapter 2)."""
    from ..metrics import kendall_tau

    rng = np.random.default_rng(2)
    cases = [
        (np.array([0.1, 0.1, 0.5, 0.3]), np.array([0.0, 0.0, 0.3, 0.7])),
        (np.array([1.0, 2.0, 3.0, 4.0]), np.array([4.0, 3.0, 2.0, 1.0])),
        (np.array([1.0, 1.0, 2.0, 2.0, 3.0]), np.array([1.0, 2.0, 2.0, 3.0, 3.0])),
    ]
    cases += [(rng.normal(size=n), rng.normal(size=n)) for n in (3, 10, 25)]
    cases += [(rng.integers(0, 3, size=12).astype(float), rng.integers(0, 4, size=12).astype(float)) for _ in range(2)]
    cases.append((np.full(5, 2.0), np.array([0.3, 0.1, 0.4, 0.1, 0.5])))  # x constant: no tau, NaN (not 0)
    return Spec("kendall_tau", cases, lambda x, y: kendall_tau(x, y)[0])


def _spec_masked_softmax() -> Spec:
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
    return Spec("masked_softmax", cases, masked_softmax,
                to_numpy=lambda t: np.asarray(t.detach() if isinstance(t, torch.Tensor) else t))


def _spec_context() -> Spec:
    """Exercise: the context vector c = sum_t alpha_t h_t for a batch (Chapter 1)."""
    g = torch.Generator().manual_seed(4)
    cases = []
    for B, T, H in ((1, 3, 2), (4, 9, 5), (2, 6, 256)):
        hidden = torch.randn(B, T, H, generator=g)
        alpha = torch.softmax(torch.randn(B, T, generator=g), -1)
        cases.append((hidden, alpha))
    return Spec("context", cases, lambda h, a: torch.einsum("bt,bth->bh", a, h))


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


def _spec_leave_one_out() -> Spec:
    """Exercise: leave-one-out by deletion for one instance (Chapter 3).

    ``fn(model, tokens)``: ``tokens`` is a 1-D LongTensor ``<SOS> w_1 ... w_n <EOS>``; return
    the n values TVD(y-hat(x), y-hat(x without w_t)).
    """
    from ..experiments.importance import leave_one_out

    cases = []
    for encoder in ("lstm", "average"):
        model, instances = _tiny_model_and_instances(encoder)
        cases += [(model, t) for t in instances]
    return Spec("leave_one_out", cases, _per_instance_reference(leave_one_out), atol=1e-5,
                   to_numpy=lambda t: np.asarray(t.detach() if isinstance(t, torch.Tensor) else t, dtype=float))


def _spec_gradient_importance() -> Spec:
    """Exercise: J&W's gradient importance with attention detached, for one instance (Chapter 3)."""
    from ..experiments.importance import gradient_importance

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
            return [Answer("raised", detail=_short(f"{type(err).__name__}: {err}"))]
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

    return Spec("binned medians", cases, reference, to_numpy=lambda x: np.asarray(x, dtype=float))


def _spec_eps_max_jsd() -> Spec:
    """Exercise: J&W's selection: max JSD over candidates within eps, alpha-hat counts as 0 (Chapter 5)."""
    from ..experiments.counterfactual import select_within_eps

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
    from ..metrics import jsd

    rng = np.random.default_rng(14)
    cases = [(rng.dirichlet(np.ones(t), size=k),) for k, t in ((2, 4), (5, 9), (3, 30))]
    cases.append((np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]),))

    def reference(c):
        i, j = np.triu_indices(len(c), 1)
        return float(np.mean(jsd(c[i], c[j])))

    return Spec("pairwise JSD", cases, reference, to_numpy=lambda x: np.asarray(x, dtype=float))


# ----------------------------------------------------------------------------- Chapters 6-7


def _spec_uniform_attention() -> Spec:
    """Exercise: alpha_t = 1/T over the real tokens, exactly 0 elsewhere, batched (Chapter 6)."""
    from ..models import uniform_attention

    g = torch.Generator().manual_seed(15)
    cases = []
    for B, T in ((1, 3), (4, 8), (6, 20)):
        mask = torch.rand(B, T, generator=g) > 0.4
        mask[:, 0] = True  # at least one real token per row
        cases.append((mask,))
    cases.append((torch.tensor([[False, True, False, False]]),))  # one real token: weight 1
    return Spec("uniform attention", cases, uniform_attention,
                   to_numpy=lambda t: np.asarray(t.detach() if isinstance(t, torch.Tensor) else t, dtype=float))


def _spec_f1() -> Spec:
    """Exercise: F1 of the positive class from labels and p(positive), threshold 0.5 (Chapter 6)."""
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(16)
    cases = [(np.array([1, 0, 1, 1]), np.array([0.9, 0.2, 0.4, 0.7]))]
    for n in (10, 200):
        labels = rng.integers(0, 2, n)
        cases.append((labels, np.clip(labels * 0.3 + rng.uniform(0, 0.7, n), 0, 1)))
    cases.append((np.array([0, 0, 1]), np.array([0.1, 0.2, 0.3])))  # no positive prediction: F1 = 0
    return Spec("f1", cases, lambda y, p: f1_score(y, (p > 0.5).astype(int), zero_division=0),
                   to_numpy=lambda x: np.asarray(x, dtype=float))


def _spec_median_jsd_over_seeds() -> Spec:
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
    return Spec("median JSD over seeds", cases,
                   lambda seeds, base: np.median(jsd(seeds, np.broadcast_to(base, seeds.shape).copy()), axis=0),
                   to_numpy=lambda x: np.asarray(x, dtype=float))


def _spec_noise_floor_fraction() -> Spec:
    """Exercise: the share of instances whose adversarial JSD beats the seeds' JSD (Chapter 7)."""
    rng = np.random.default_rng(18)
    cases = [(np.array([0.5, 0.1, 0.3]), np.array([0.2, 0.2, 0.3]))]  # ties do not count as beating
    for n in (10, 500):
        cases.append((rng.uniform(0, 0.69, n), rng.uniform(0, 0.3, n)))
    return Spec("noise-floor fraction", cases, lambda adv, seeds: float(np.mean(adv > seeds)),
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


def _spec_masked_kl() -> Spec:
    """Exercise: KL(alpha_a || alpha_b) over the real tokens, finite with exact zeros on padding (Chapter 8)."""
    from ..experiments.adversarial_training import attention_kl

    return Spec("masked KL", _attention_cases(19), attention_kl, to_numpy=_as_float)


def _spec_adversarial_loss() -> Spec:
    """Exercise: W&P's per-instance loss TVD(y_a, y_b) - lambda KL(alpha_a || alpha_b) (Chapter 8)."""
    from ..experiments.adversarial_training import adversarial_loss

    g = torch.Generator().manual_seed(20)
    cases = []
    for (a, b, mask), lam in zip(_attention_cases(21), (0.0, 0.01, 1.0)):
        pa = torch.softmax(torch.randn(a.shape[0], 2, generator=g, dtype=torch.float64), -1)
        pb = torch.softmax(torch.randn(a.shape[0], 2, generator=g, dtype=torch.float64), -1)
        cases.append((pa, pb, a, b, mask, lam))
    return Spec("adversarial loss", cases, adversarial_loss, to_numpy=_as_float)


def _spec_guided_context() -> Spec:
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

    return Spec("guided context", cases, reference, to_numpy=_as_float)


def _spec_guide_gain() -> Spec:
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

    return Spec("guide gain", cases, reference, to_numpy=to_numpy)


def _spec_erase() -> Spec:
    """Exercise: zero the chosen attention weights and renormalise over the rest (Chapter 10)."""
    from ..experiments.erasure import erased_attention

    g = torch.Generator().manual_seed(24)
    cases = []
    for a, _, mask in _attention_cases(25, min_real=2):
        remove = (torch.rand(mask.shape, generator=g) < 0.4) & mask
        first = mask.float().argmax(-1)  # keep the first real token of every row
        remove[torch.arange(len(mask)), first] = False
        cases.append((a, mask, remove))
    return Spec("erase and renormalise", cases, erased_attention, to_numpy=_as_float)


def _spec_first_flip_fraction() -> Spec:
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

    return Spec("first-flip fraction", cases, reference, to_numpy=lambda x: np.asarray(x, dtype=float))


def _head_cases(seed: int) -> list:
    """One head's (A, T) pairs: short and long sentences, full rank and rank-deficient T."""
    rng = np.random.default_rng(seed)
    cases = []
    for n, d, rank in ((5, 8, 5), (12, 4, 4), (20, 6, 3), (9, 9, 9), (16, 8, 1)):
        T = rng.normal(size=(n, rank)) @ rng.normal(size=(rank, d))  # rank <= rank
        A = rng.dirichlet(np.ones(n), size=n)
        cases.append((A, T))
    return cases


def _spec_null_dim() -> Spec:
    """Exercise: the dimension of T's left null space, n - rank(T), with the book's tolerance (Chapter 11)."""
    from ..experiments.identifiability import null_space_dim

    cases = [(T,) for _, T in _head_cases(21)] + [(np.zeros((4, 3)),)]
    return Spec("null-space dimension", cases, lambda T: null_space_dim(T[None])[0],
                   to_numpy=lambda x: np.asarray(x, dtype=float))


def _spec_effective_attention() -> Spec:
    """Exercise: A's rows projected onto the column space of T (Chapter 11)."""
    from ..experiments.identifiability import effective_attention

    return Spec("effective attention", _head_cases(22), lambda A, T: effective_attention(A[None], T[None])[0],
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


def _spec_head_permutation() -> Spec:
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

    return Spec("per-head permutation", cases, reference, atol=1e-5,
                   to_numpy=lambda x: np.asarray(x, dtype=float))


def _spec_head_importance() -> Spec:
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

    return Spec("head importance", cases, reference, atol=1e-6, to_numpy=lambda x: np.asarray(x, dtype=float))


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


def _spec_attention_mass() -> Spec:
    """Exercise: alpha^T m, the attention on the impermissible tokens, per instance (Chapter 13)."""
    from ..experiments.deception import attention_mass

    return Spec("attention mass", _mask_cases(31), lambda a, m: attention_mass(a, m), atol=1e-9,
                   to_numpy=lambda x: np.asarray(x, dtype=float))


def _spec_impermissible_penalty() -> Spec:
    """Exercise: Pruthi et al.'s penalty, the batch mean of -lambda log(1 - alpha^T m) (Chapter 13).

    ``fn(attention, mask, lam)`` -> a scalar. The last case puts all the attention on the
    impermissible tokens: the log's argument must be clamped (at 1e-10) to stay finite.
    """
    from ..experiments.deception import impermissible_penalty

    cases = [(a, m, lam) for (a, m), lam in zip(_mask_cases(32), (0.1, 1.0, 0.0, 1.0))]
    return Spec("impermissible penalty", cases, lambda a, m, lam: impermissible_penalty(a, m, lam),
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


def _spec_augmented_attention() -> Spec:
    """Exercise: A^ = r I + (1 - r) mean_h A, rows renormalised, for one layer (Chapter 14).

    ``fn(attention, residual)``: attention (h, T, T) of one layer, residual r in [0, 1) -> (T, T).
    Cases include r = 0 (the head average alone) and a one-token sentence.
    """
    from ..experiments.flow import rollout

    cases = [(a[-1], r) for a, r in zip(_layer_cases(41), (0.5, 0.0, 0.5, 0.3))]
    cases.append((_layer_cases(42)[2][0], 0.9))

    def reference(attention, residual):  # a one-layer rollout is that layer's A^
        return rollout(*_one_sentence(attention[None]), residual=residual)[0, 0]

    return Spec("augmented attention", cases, reference, atol=1e-9,
                   to_numpy=lambda x: np.asarray(x, dtype=float))


def _spec_rollout() -> Spec:
    """Exercise: the rollout after the last layer, R_L = A^_L ... A^_1, for one sentence (Chapter 14).

    ``fn(attentions)``: (L, h, T, T) -> (T, T), with A&Z's residual weight 0.5. The first case
    has one layer (R_1 = A^_1); the order of the product matters from two layers on.
    """
    from ..experiments.flow import rollout

    return Spec("rollout", [(a,) for a in _layer_cases(43)], lambda a: rollout(*_one_sentence(a))[0, -1], atol=1e-9,
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


def _spec_erasure_one_instance() -> Spec:
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

    return Spec("comprehensiveness and sufficiency", _erasure_cases(51), reference, atol=1e-9,
                call=lambda fn, *a: np.asarray(fn(*a), dtype=float).reshape(-1))


def _spec_aopc() -> Spec:
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
    return Spec("AOPC", cases, aopc, atol=1e-12)


def _spec_null_space_share() -> Spec:
    """Exercise: the share of sentences whose head has a left null space, from their lengths alone (Chapter 16).

    ``fn(lengths, d_v) -> share``: ``lengths`` (N,) tokens per sentence, [CLS] and [SEP]
    included. A head's T = V W^O has n rows and rank at most d_v (exactly min(n, d_v) for
    weights in general position), so a sentence has a null space when n > d_v. The reference
    ranks random T of each length with :func:`attnlib.experiments.identifiability.null_space_dim`;
    the cases include n = d_v (no null space) and n = d_v + 1.
    """
    from ..experiments.identifiability import null_space_dim

    def reference(lengths, d_v):
        rng = np.random.default_rng(61)
        lengths = np.asarray(lengths, dtype=np.int64)
        T = rng.standard_normal((len(lengths), int(lengths.max()), d_v))
        return float(np.mean(null_space_dim(T, lengths) > 0))

    rng = np.random.default_rng(60)
    cases = [(np.array([5, 32, 33, 60]), 32), (rng.integers(3, 40, 25), 16), (np.array([4, 5, 6]), 8),
             (np.array([9, 9]), 8)]
    return Spec("null-space share", cases, reference, atol=1e-12, to_numpy=lambda x: np.asarray(x, dtype=float))


def _spec_ranks_with_ties() -> Spec:
    """Exercise: ranks with ties from who beats whom beyond noise (Chapter 16; :func:`attnlib.uncertainty.rank`).

    ``fn(wins) -> ranks``: ``wins`` (M, M) bool, ``wins[i, j]`` when method i is better than
    method j beyond noise; a method's rank is 1 + the number of methods that beat it (ties share
    a rank, and the next rank is not skipped to). Cases: no wins (all rank 1), a strict order,
    ties at the top and in the middle, one method.
    """
    from ..uncertainty import ranks_from_wins

    def strict(m):
        return np.triu(np.ones((m, m), dtype=bool), 1)

    rng = np.random.default_rng(62)
    upper = np.triu(rng.random((6, 6)) < 0.4, 1)
    perm = rng.permutation(6)
    cases = [(np.zeros((4, 4), dtype=bool),), (strict(5),), (upper[np.ix_(perm, perm)],),
             (np.array([[False, False, True], [False, False, True], [False, False, False]]),),
             (np.zeros((1, 1), dtype=bool),)]
    return Spec("ranks with ties", cases, ranks_from_wins, atol=0,
                to_numpy=lambda x: np.asarray(x, dtype=float).reshape(-1))


# ----------------------------------------------------------------------------- the checkers


#: Each checker's name -> the function that builds its :class:`Spec` (cases are built afresh each time).
SPECS: dict[str, Callable[[], Spec]] = {name: globals()["_spec_" + name[len("check_"):]]
                                        for name in __all__ if name.startswith("check_")}


def _checker(name: str, build: Callable[[], Spec]) -> Callable[[Callable], CheckResult]:
    def check(fn: Callable) -> CheckResult:
        return _check(build(), fn)

    check.__name__ = check.__qualname__ = name
    check.__doc__ = build.__doc__
    return check


for _name, _build in SPECS.items():
    globals()[_name] = _checker(_name, _build)
del _name, _build


# ----------------------------------------------------------------------------- answers as data (tools/grade.py)

#: The most bytes :func:`read_answers` reads of one checker's answers (its JSON and its arrays).
MAX_ANSWER_BYTES = 64 * 2**20


def _write_atomic(path: Path, write) -> None:
    part = path.with_name(path.name + ".part")
    with open(part, "wb") as out:
        write(out)
    os.replace(part, path)


def record_answers(checker: str, get_answer: Callable[[], Callable], folder) -> None:
    """Run the answer that ``get_answer()`` returns on the cases of ``checker`` (a name in
    :data:`SPECS`) and write what it gave to ``folder``: ``<checker>.npz``, the values
    (``a0``, ``a1``, ...), and ``<checker>.json``: each answer's kind and detail, the attnlib
    function handed in as the answer if any, and why there is no answer at all (``missing``,
    e.g. the answer's name is not defined). No pickles: the reader trusts none of it."""
    if checker not in SPECS:
        raise ValueError(f"unknown checker {checker!r}; expected one of {sorted(SPECS)}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    record = {"checker": checker, "imported": None, "missing": None, "answers": []}
    arrays = {}
    try:
        fn = get_answer()
    except Exception as err:  # noqa: BLE001 - e.g. NameError: the answer is not defined
        record["missing"] = _short(f"{type(err).__name__}: {err}")
    else:
        record["imported"] = _attnlib_function(fn)
        if record["imported"] is None:
            for i, answer in enumerate(answers_of(SPECS[checker](), fn)):
                record["answers"].append({"kind": answer.kind, "detail": answer.detail})
                if answer.value is not None:
                    arrays[f"a{i}"] = np.asarray(answer.value)
    _write_atomic(folder / f"{checker}.npz", lambda out: np.savez(out, **arrays))
    _write_atomic(folder / f"{checker}.json", lambda out: out.write(json.dumps(record).encode("utf-8")))


@dataclass(frozen=True)
class Recorded:
    """What :func:`read_answers` found: the answers, the attnlib function handed in (if any),
    why there is no answer (``missing``) or why the record cannot be read (``unreadable``)."""

    answers: list
    imported: str | None = None
    missing: str | None = None
    unreadable: str | None = None


def read_answers(checker: str, folder, max_bytes: int = MAX_ANSWER_BYTES) -> Recorded | None:
    """The answers :func:`record_answers` wrote to ``folder`` for ``checker``, checked strictly
    (sizes, kinds, arrays of numbers; ``np.load`` without pickles); None when there are none."""
    folder = Path(folder)
    meta, data = folder / f"{checker}.json", folder / f"{checker}.npz"
    if folder.is_symlink() or not meta.is_file() or meta.is_symlink():
        return None
    try:
        if data.is_symlink() or not data.is_file():  # a link, a pipe or nothing: never opened
            raise ValueError("the arrays are missing or not a plain file")
        if meta.stat().st_size + data.stat().st_size > max_bytes:
            raise ValueError(f"the answers take more than {max_bytes} bytes")
        record = json.loads(meta.read_text(encoding="utf-8"))
        if not isinstance(record, dict) or record.get("checker") != checker:
            raise ValueError("not a record of this checker")
        texts = {k: record.get(k) for k in ("imported", "missing")}
        if any(v is not None and not isinstance(v, str) for v in texts.values()):
            raise ValueError("a field that should be text is not")
        answers = []
        entries = record.get("answers")
        if not isinstance(entries, list):
            raise ValueError("no list of answers")
        with np.load(data, allow_pickle=False) as arrays:
            for i, entry in enumerate(entries):
                kind, detail = entry.get("kind"), entry.get("detail", "")
                if kind not in ANSWER_KINDS or not isinstance(detail, str):
                    raise ValueError(f"answer {i + 1} is malformed")
                value = _numbers(arrays[f"a{i}"]) if kind == "value" else None
                answers.append(Answer(kind, value, _short(detail)))
        return Recorded(answers, texts["imported"] and _short(texts["imported"]),
                        texts["missing"] and _short(texts["missing"]))
    except Exception as err:  # noqa: BLE001 - whatever the sandbox left, it is data, never a pass
        return Recorded([], unreadable=_short(f"{type(err).__name__}: {err}"))


def judge_recorded(checker: str, folder) -> CheckResult | None:
    """The verdict on the answers recorded in ``folder`` for ``checker``, computed here with the
    reference on this process's own cases; None when nothing was recorded (see :func:`read_answers`)."""
    recorded = read_answers(checker, folder)
    if recorded is None:
        return None
    spec = SPECS[checker]()
    if recorded.unreadable:
        return CheckResult(False, f"{spec.name}: the recorded answers cannot be read ({recorded.unreadable}).")
    if recorded.missing:
        return CheckResult(False, f"{spec.name}: no answer to check: {recorded.missing}")
    return judge(spec, recorded.answers, recorded.imported)
