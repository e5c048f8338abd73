"""The exercises of Part III, Chapters 6-10 (Wiegreffe & Pinter; Serrano & Smith): each checker's
Spec (its cases, edge cases included, and attnlib's reference).
"""
from __future__ import annotations

import numpy as np
import torch

from .core import Spec, case_generator, case_rng

__all__ = ["SPECS"]


# ----------------------------------------------------------------------------- Chapters 6-7


def _spec_uniform_attention(seed: int | None = None) -> Spec:
    """Exercise: alpha_t = 1/T over the real tokens, exactly 0 elsewhere, batched (Chapter 6)."""
    from ...models import uniform_attention

    g = case_generator(15, seed)
    cases = []
    for B, T in ((1, 3), (4, 8), (6, 20)):
        mask = torch.rand(B, T, generator=g) > 0.4
        mask[:, 0] = True  # at least one real token per row
        cases.append((mask,))
    cases.append((torch.tensor([[False, True, False, False]]),))  # one real token: weight 1
    return Spec("uniform attention", cases, uniform_attention,
                   to_numpy=lambda t: np.asarray(t.detach() if isinstance(t, torch.Tensor) else t, dtype=float))


def _spec_f1(seed: int | None = None) -> Spec:
    """Exercise: F1 of the positive class from labels and p(positive), threshold 0.5 (Chapter 6)."""
    from sklearn.metrics import f1_score

    rng = case_rng(16, seed)
    cases = [(np.array([1, 0, 1, 1]), np.array([0.9, 0.2, 0.4, 0.7]))]
    for n in (10, 200):
        labels = rng.integers(0, 2, n)
        cases.append((labels, np.clip(labels * 0.3 + rng.uniform(0, 0.7, n), 0, 1)))
    cases.append((np.array([0, 0, 1]), np.array([0.1, 0.2, 0.3])))  # no positive prediction: F1 = 0
    return Spec("f1", cases, lambda y, p: f1_score(y, (p > 0.5).astype(int), zero_division=0),
                   to_numpy=lambda x: np.asarray(x, dtype=float))


def _spec_median_jsd_over_seeds(seed: int | None = None) -> Spec:
    """Exercise: per instance, the median over seeds of JSD(alpha_seed, alpha_base) (Chapter 7)."""
    from ...metrics import jsd

    rng = case_rng(17, seed)
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
                   to_numpy=lambda x: np.asarray(x, dtype=float), modules=("attnlib.metrics",))


def _spec_noise_floor_fraction(seed: int | None = None) -> Spec:
    """Exercise: the share of instances whose adversarial JSD beats the seeds' JSD (Chapter 7)."""
    rng = case_rng(18, seed)
    cases = [(np.array([0.5, 0.1, 0.3]), np.array([0.2, 0.2, 0.3]))]  # ties do not count as beating
    for n in (10, 500):
        cases.append((rng.uniform(0, 0.69, n), rng.uniform(0, 0.3, n)))
    return Spec("noise-floor fraction", cases, lambda adv, seeds: float(np.mean(adv > seeds)),
                   to_numpy=lambda x: np.asarray(x, dtype=float))


# ----------------------------------------------------------------------------- Chapters 8-10
_as_float = lambda t: np.asarray(t.detach() if isinstance(t, torch.Tensor) else t, dtype=float)  # noqa: E731


def _attention_cases(base: int, seed: int | None = None, shapes=((1, 3), (4, 7), (5, 12)), *, min_real: int = 1):
    """(alpha_a, alpha_b, mask) triples: softmax attention over random real tokens, exactly 0 on padding."""
    g = case_generator(base, seed)
    cases = []
    for B, T in shapes:
        n_real = torch.randint(min_real, T + 1, (B,), generator=g)
        mask = torch.arange(T)[None, :] < n_real[:, None]
        a = torch.softmax(torch.randn(B, T, generator=g, dtype=torch.float64).masked_fill(~mask, -torch.inf), -1)
        b = torch.softmax(torch.randn(B, T, generator=g, dtype=torch.float64).masked_fill(~mask, -torch.inf), -1)
        cases.append((a, b, mask))
    return cases


def _spec_masked_kl(seed: int | None = None) -> Spec:
    """Exercise: KL(alpha_a || alpha_b) over the real tokens, finite with exact zeros on padding (Chapter 8)."""
    from ...experiments.adversarial_training import attention_kl

    return Spec("masked KL", _attention_cases(19, seed), attention_kl, to_numpy=_as_float)


def _spec_adversarial_loss(seed: int | None = None) -> Spec:
    """Exercise: W&P's per-instance loss TVD(y_a, y_b) - lambda KL(alpha_a || alpha_b) (Chapter 8)."""
    from ...experiments.adversarial_training import adversarial_loss

    g = case_generator(20, seed)
    cases = []
    for (a, b, mask), lam in zip(_attention_cases(21, seed), (0.0, 0.01, 1.0)):
        pa = torch.softmax(torch.randn(a.shape[0], 2, generator=g, dtype=torch.float64), -1)
        pb = torch.softmax(torch.randn(a.shape[0], 2, generator=g, dtype=torch.float64), -1)
        cases.append((pa, pb, a, b, mask, lam))
    return Spec("adversarial loss", cases, adversarial_loss, to_numpy=_as_float)


def _spec_guided_context(seed: int | None = None) -> Spec:
    """Exercise: the context sum_t alpha_t h_t of a diagnostic model with given, ragged attention (Chapter 9).

    ``fn(hidden, given)``: hidden (B, T, H), given a list of B arrays (one weight per real
    token, real tokens first); returns (B, H), padding contributing nothing.
    """
    g = case_generator(22, seed)
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


def _spec_guide_gain(seed: int | None = None) -> Spec:
    """Exercise: each guide's F1 gain over the uniform guide, mean and sd over seeds (Chapter 9).

    ``fn(frame)``: a frame with columns guide, seed, f1 (one row per guide and seed);
    returns a frame indexed by guide (sorted) with columns ``mean gain`` and ``sd gain``
    (sample sd, ddof=1; NaN for one seed), the gain taken seed by seed against the
    uniform guide's F1 for the same seed.
    """
    import pandas as pd

    rng = case_rng(23, seed)
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


def _spec_erase(seed: int | None = None) -> Spec:
    """Exercise: zero the chosen attention weights and renormalise over the rest (Chapter 10)."""
    from ...experiments.erasure import erased_attention

    g = case_generator(24, seed)
    cases = []
    for a, _, mask in _attention_cases(25, seed, min_real=2):
        remove = (torch.rand(mask.shape, generator=g) < 0.4) & mask
        first = mask.float().argmax(-1)  # keep the first real token of every row
        remove[torch.arange(len(mask)), first] = False
        cases.append((a, mask, remove))
    return Spec("erase and renormalise", cases, erased_attention, to_numpy=_as_float)


def _spec_first_flip_fraction(seed: int | None = None) -> Spec:
    """Exercise: the fraction of tokens removed at the first decision flip, NaN if none (Chapter 10).

    ``fn(flips, lengths)``: flips (N, K) bool, flips[i, k] True when erasing the k+1 top-ranked
    tokens of instance i flips its decision; lengths (N,) real tokens. Returns (N,).
    """
    rng = case_rng(26, seed)
    cases = [(np.array([[False, True, True], [False, False, False]]), np.array([4, 3]))]
    for N, K in ((6, 5), (40, 12)):
        cases.append((rng.uniform(size=(N, K)) < 0.25, rng.integers(K + 1, K + 10, N)))

    def reference(flips, lengths):
        first = flips.argmax(-1) + 1.0
        return np.where(flips.any(-1), first / lengths, np.nan)

    return Spec("first-flip fraction", cases, reference, to_numpy=lambda x: np.asarray(x, dtype=float))


#: checker name -> Spec builder, in the chapters' order
SPECS = {
    "check_uniform_attention": _spec_uniform_attention,
    "check_f1": _spec_f1,
    "check_median_jsd_over_seeds": _spec_median_jsd_over_seeds,
    "check_noise_floor_fraction": _spec_noise_floor_fraction,
    "check_masked_kl": _spec_masked_kl,
    "check_adversarial_loss": _spec_adversarial_loss,
    "check_guided_context": _spec_guided_context,
    "check_guide_gain": _spec_guide_gain,
    "check_erase": _spec_erase,
    "check_first_flip_fraction": _spec_first_flip_fraction,
}
