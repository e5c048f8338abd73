"""Erasing attention weights: Serrano & Smith 2019, *Is Attention Interpretable?*

Serrano & Smith ask whether the tokens with the highest attention are the ones the
decision rests on. At the attention layer, with the encoder's hidden states h fixed,
they erase attention weights -- set them to 0 and renormalise the rest,

    alpha'_t = alpha-hat_t [t kept] / sum_s alpha-hat_s [s kept],   y' = decode(h, alpha'),

and compare the new output y' with the model's own y-hat = decode(h, alpha-hat):

* :func:`erase` -- the operation itself for any choice of weights (and
  :func:`erased_attention`, the renormalised alpha' it decodes).
* :func:`single_weight` -- erase the top weight i* = argmax_t alpha-hat_t, and separately
  one random other real token r: JSD(y-hat, y'_{i*}) and JSD(y-hat, y'_r), and whether
  each flips the decision. Serrano & Smith's finding: the first is usually larger than
  the second, but only a little, and erasing one weight rarely flips the decision
  (:func:`flip_summary`).
* :func:`ranked_removal` -- erase weights in a ranked order (attention, random, gradient
  d y-hat / d alpha_t, or alpha_t * gradient), 1, 2, ... tokens, until the decision
  flips, and report the fraction of the instance's T real tokens erased at that point
  (or that no prefix up to T - 1 tokens flips it). Serrano & Smith find that attention
  usually flips decisions sooner than a random order, the gradient-based orders usually
  sooner still, and that many decisions flip only after a large share of the weights is
  gone, or never (:func:`removal_summary`).

y-hat here is the output distribution; "the decision" is its argmax, and for the
gradient rankings y-hat means the probability of the predicted class. JSDs use natural
logs (0 <= JSD <= ln 2, :func:`attnlib.metrics.jsd`).

Implementation (as :mod:`attnlib.counterfactual`): the encoder runs once per instance,
without gradient, with the model in eval mode (restored after). Instances are sorted by
length and cut into length buckets; in each bucket every candidate of every instance --
for ranked removal, every prefix k = 1 .. T - 1 of every ranking, as an (n, R (T - 1), T)
attention tensor -- goes through ONE ``model.decode`` call (the decoder mixes the K
candidates in logit space, so the K path is cheap). There is no loop over instances,
rankings or removal counts. Random choices are drawn per instance from a counter-based
generator keyed by (seed, the instance's index in its split, token position), so an
instance's result does not depend on which other instances share its bucket.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from .. import runs, metrics
from ..runs import InstanceResult
from .._checks import check_finite
from ..models import Site, SiteState, check_model, interventions

__all__ = [
    "RANKINGS",
    "SingleWeightResult",
    "RankedRemovalResult",
    "erased_attention",
    "erase",
    "single_weight",
    "ranked_removal",
    "flip_summary",
    "removal_summary",
]

#: Orders in which :func:`ranked_removal` erases weights (Serrano & Smith 2019).
RANKINGS = ("attention", "random", "gradient", "attention_x_gradient")

# Length buckets (see attnlib.runs.chunks): about this many instances per
# tensor program, fewer when one would exceed the budget in tensor elements. Ranked
# removal builds (n, R (T - 1), T) attention candidates per bucket, so long documents get
# small buckets.
_SINGLE_ROWS = 256
_RANKED_ROWS = 256
_BUDGET = 2**24

# Stream labels of the counter-based generator, one per random choice.
_STREAM_SINGLE = 1
_STREAM_RANKING = 2


# ----------------------------------------------------------------------------- results
@dataclass
class SingleWeightResult(InstanceResult):
    """Output of :func:`single_weight`; one entry per instance, in ``indices`` order.

    jsd_top, jsd_random:       (N,) JSD(y-hat, y') after erasing the top weight / a random one.
    flip_top, flip_random:     (N,) bool, argmax y' != argmax y-hat.
    top_weight, random_weight: (N,) the erased weights alpha-hat_{i*} (= max attention) and alpha-hat_r.
    top_token, random_token:   (N,) which tokens were erased: positions among the real
                               tokens (0-based, aligned to ``split.tokens[index]``).
    probs, probs_top, probs_random: (N, C) y-hat and the two y'.
    predicted, labels, indices, lengths: (N,) argmax y-hat, gold label, position in the
                               split, real tokens.
    excluded:                  split indices of the instances left out: fewer than 2 real
                               tokens (no other token to erase at random), or no weight
                               left outside the top token (alpha-hat one-hot in floating
                               point, nothing to renormalise).
    """

    jsd_top: np.ndarray
    jsd_random: np.ndarray
    flip_top: np.ndarray
    flip_random: np.ndarray
    top_weight: np.ndarray
    random_weight: np.ndarray
    top_token: np.ndarray
    random_token: np.ndarray
    probs_top: np.ndarray
    probs_random: np.ndarray
    seed: int = 0

    @property
    def jsd_difference(self) -> np.ndarray:
        """Delta JSD = JSD(y-hat, y'_{i*}) - JSD(y-hat, y'_r): positive when the top weight matters more."""
        return self.jsd_top - self.jsd_random

    def to_frame(self) -> pd.DataFrame:
        """One row per instance: instance, label, predicted, length, weights, JSDs, flips."""
        return self.instance_frame(
            top_weight=self.top_weight,
            random_weight=self.random_weight,
            weight_difference=self.top_weight - self.random_weight,
            jsd_top=self.jsd_top,
            jsd_random=self.jsd_random,
            jsd_difference=self.jsd_difference,
            flip_top=self.flip_top,
            flip_random=self.flip_random,
        )


@dataclass
class RankedRemovalResult(InstanceResult):
    """Output of :func:`ranked_removal`; row i is instance ``indices[i]``, column r is ``rankings[r]``.

    flipped:          (N, R) bool, some prefix of the ranking (at most T - 1 tokens) flips the decision.
    n_removed:        (N, R) tokens erased at the first flip; -1 where it never flips.
    fraction_removed: (N, R) n_removed / T; NaN where it never flips.
    ranks:            (N, R, T_max) the order of erasure: ranks[i, r, t] = k means padded
                      token position t is the (k+1)-th erased by ranking r; -1 off the real
                      tokens (<SOS>, <EOS>, padding).
    probs:            (N, C) y-hat. predicted, labels, indices, lengths: (N,) as in
                      :class:`SingleWeightResult`.
    excluded:         split indices of instances with fewer than 2 real tokens (nothing can
                      be erased while keeping one).
    """

    rankings: tuple
    flipped: np.ndarray
    n_removed: np.ndarray
    fraction_removed: np.ndarray
    ranks: np.ndarray
    seed: int = 0

    def order(self, i: int, ranking: str) -> np.ndarray:
        """The real tokens of instance ``i`` (a row of this result) in erasure order, 0-based among the real tokens."""
        r = _ranking_column(self.rankings, ranking)
        ranks = self.ranks[i, r]
        real = np.flatnonzero(ranks >= 0)
        return np.argsort(ranks[real], kind="stable")

    def to_frame(self) -> pd.DataFrame:
        """One row per (instance, ranking).

        Columns: instance, ranking, label, predicted, length, flipped, n_removed, fraction_removed.

        ``n_removed`` is a nullable integer column (<NA> where the decision never flips).
        """
        N, R = self.flipped.shape
        n_removed = pd.array(np.where(self.flipped, self.n_removed, 0).reshape(-1), dtype="Int64")
        n_removed[~self.flipped.reshape(-1)] = pd.NA
        frame = self.instance_frame(
            repeat=R,
            flipped=self.flipped.reshape(-1),
            n_removed=n_removed,
            fraction_removed=self.fraction_removed.reshape(-1),
        )
        ranking = pd.Categorical(np.tile(np.asarray(self.rankings, dtype=object), N), categories=list(self.rankings))
        frame.insert(1, "ranking", ranking)
        return frame


# ----------------------------------------------------------------------------- helpers


def _check_rankings(rankings) -> tuple:
    if isinstance(rankings, str):
        rankings = (rankings,)
    try:
        rankings = tuple(rankings)
    except TypeError:
        raise ValueError(f"rankings must be a sequence of names from {', '.join(RANKINGS)}; got {rankings!r}") from None
    if not rankings:
        raise ValueError(f"rankings must name at least one of {', '.join(RANKINGS)}")
    unknown = [r for r in rankings if not isinstance(r, str) or r not in RANKINGS]
    if unknown:
        raise ValueError(f"unknown ranking(s) {', '.join(map(repr, unknown))}; choose from {', '.join(RANKINGS)}")
    if len(set(rankings)) != len(rankings):
        raise ValueError(f"rankings must not repeat a name, got {rankings!r}")
    return rankings


def _ranking_column(rankings: tuple, ranking: str) -> int:
    if ranking not in rankings:
        raise ValueError(f"ranking {ranking!r} is not in this result; it has {', '.join(rankings)}")
    return rankings.index(ranking)


def _decode_with_gradient(model, state: SiteState):
    """y-hat (n, C) and d y-hat_c / d alpha_t (n, T), c the predicted class, the state below fixed: one backward."""
    with torch.enable_grad():
        a = state.attention.detach().requires_grad_(True)
        probs = model.decode_at(state, a)
        predicted = probs.detach().argmax(-1, keepdim=True)
        # Instances are independent in decode, so d(sum_b y-hat_b) / d alpha_bt = d y-hat_b / d alpha_bt.
        (grad,) = torch.autograd.grad(probs.gather(1, predicted).sum(), a)
    return probs.detach(), grad


def _ranking_scores(model, state: SiteState, index, rankings: tuple, seed: int):
    """y-hat (n, C) and the score of every token under every ranking (n, R, T); erasure goes by descending score."""
    alpha = state.attention
    needs_gradient = any(r in ("gradient", "attention_x_gradient") for r in rankings)
    if needs_gradient:
        y_hat, grad = _decode_with_gradient(model, state)
    else:
        y_hat = model.decode_at(state, alpha)
    scores = []
    for name in rankings:  # at most 4 names, each a whole-tensor expression
        if name == "attention":
            scores.append(alpha)
        elif name == "random":
            scores.append(runs.instance_uniform(seed, _STREAM_RANKING, index, alpha.shape[-1]).to(alpha.device))
        elif name == "gradient":
            scores.append(grad)
        else:
            scores.append(alpha * grad)
    return y_hat, torch.stack([x.double() for x in scores], 1)  # float64: random keys keep 53 bits


def _ranks(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Rank of every position by descending score among the real tokens (ties: earlier position first).

    (n, R, T) float -> (n, R, T) long; positions off ``mask`` rank last (>= the number of real tokens).
    """
    keys = (-scores).masked_fill(~mask.unsqueeze(1), float("inf"))
    order = torch.sort(keys, dim=-1, stable=True).indices  # (n, R, T): positions in erasure order
    ranks = torch.empty_like(order)
    ranks.scatter_(-1, order, torch.arange(order.shape[-1], device=order.device).expand_as(order))
    return ranks


# ----------------------------------------------------------------------------- erase
def _check_erase_inputs(mask, attention, remove) -> None:
    for name, x in (("mask", mask), ("attention", attention), ("remove", remove)):
        if not isinstance(x, torch.Tensor):
            raise ValueError(f"{name} must be a torch tensor, got {type(x).__name__}")
    if attention.ndim != 2 or not attention.is_floating_point():
        raise ValueError(f"attention must be a float tensor (B, T), got {attention.dtype} {tuple(attention.shape)}")
    B, T = attention.shape
    if mask.dtype != torch.bool or mask.shape != (B, T):
        raise ValueError(f"mask must be a bool tensor of shape ({B}, {T}), got {mask.dtype} {tuple(mask.shape)}")
    if remove.dtype != torch.bool or remove.ndim not in (2, 3) or remove.shape[0] != B or remove.shape[-1] != T:
        raise ValueError(
            f"remove must be a bool tensor of shape ({B}, {T}) or ({B}, K, {T}), "
            f"got {remove.dtype} {tuple(remove.shape)}"
        )
    a = attention.detach()
    check_finite(a, "attention")
    if bool((a < 0).any()):
        raise ValueError("attention must be non-negative")
    if bool((a.masked_select(~mask) != 0).any()):
        raise ValueError("attention must be 0 off the real tokens (<SOS>, <EOS> and padding)")


def erased_attention(attention: torch.Tensor, mask: torch.Tensor, remove: torch.Tensor) -> torch.Tensor:
    """The attention after erasure: alpha'_t = alpha_t [t kept] / sum_s alpha_s [s kept] (Serrano & Smith 2019).

    Args:
        attention: alpha (B, T), non-negative, 0 off the real tokens.
        mask: (B, T) bool, the real tokens.
        remove: (B, T) or (B, K, T) bool, the weights to erase (K erasures per instance).

    Returns:
        alpha' with the shape of ``remove``: exactly 0 at erased and non-real positions, each
        row summing to 1 over the rest.

    Raises:
        ValueError: for malformed input, or when a row keeps no real token with positive
        weight (nothing is left to renormalise).
    """
    _check_erase_inputs(mask, attention, remove)
    weights, total = interventions.erase_rows(attention, mask, remove)
    empty = total.squeeze(-1) <= 0
    if bool(empty.any()):
        raise ValueError(
            f"{int(empty.sum())} row(s) keep no real token with positive weight after erasure: each row of "
            f"remove must leave at least one real token whose attention is > 0"
        )
    return weights


def erase(model, state: SiteState, remove: torch.Tensor, *, attention: torch.Tensor | None = None) -> torch.Tensor:
    """Output distributions after erasing attention weights at a site, the layers below fixed (Serrano & Smith 2019).

    y' = decode(h, alpha'), alpha'_t = alpha_t [t kept] / sum_s alpha_s [s kept]: the
    chosen weights of the model's own attention are set to 0 and the rest renormalised to
    sum to 1 over the real tokens (see :func:`erased_attention`).

    Args:
        model: any model that meets :class:`attnlib.models.protocol.InterventionModel`
            (e.g. an :class:`attnlib.models.AttentionClassifier`); only the part above the
            site runs.
        state: ``model.site_state(batch)``: the hidden states and attention alpha (B, T).
        remove: (B, T) bool, or (B, K, T) for K erasures per instance decoded at once.
        attention: erase from these weights (B, T) instead of the model's own (non-negative,
            0 off the real tokens).

    Returns:
        y' (B, C), or (B, K, C) for a (B, K, T) ``remove``. Differentiable; no grad mode or
        train/eval mode is changed.

    Raises:
        ValueError: for mismatched shapes or dtypes, or a row of ``remove`` that leaves no
        real token with positive weight.
    """
    model = check_model(model)
    if not isinstance(state, SiteState):
        raise ValueError(f"state must be a SiteState (model.site_state(batch)), got {type(state).__name__}")
    alpha = state.attention if attention is None else attention
    weights = erased_attention(alpha, state.mask, remove)
    return model.decode_at(state, weights.to(state.attention.dtype))


# ----------------------------------------------------------------------------- single weight
def single_weight(
    model,
    split,
    *,
    max_instances: int | None = None,
    seed: int = 0,
    chunk_size: int | None = None,
    site: Site | None = None,
) -> SingleWeightResult:
    """Erase the top attention weight vs a random one and compare the outputs (Serrano & Smith 2019).

    For each instance with T >= 2 real tokens, i* = argmax_t alpha-hat_t (the first if tied)
    and r is drawn uniformly from the other T - 1 real tokens. With y'_{i*} and y'_r the
    outputs after erasing that one weight (:func:`erase`), report

        JSD(y-hat, y'_{i*}),  JSD(y-hat, y'_r),  [argmax y'_{i*} != argmax y-hat],  [argmax y'_r != argmax y-hat],

    and the erased weights alpha-hat_{i*} and alpha-hat_r. Serrano & Smith find
    Delta JSD = JSD(y-hat, y'_{i*}) - JSD(y-hat, y'_r) positive for most instances but
    small, and single erasures rarely flip a decision (:func:`flip_summary`).

    Args:
        model: any model that meets :class:`attnlib.models.protocol.InterventionModel`, with
            attention of its own (e.g. an :class:`attnlib.models.AttentionClassifier`; eval
            mode for the call, restored after; no gradients).
        split: a :class:`attnlib.data.Split` or :class:`attnlib.data.Batch`.
        max_instances: with a Split, a seeded stratified subsample of this size (before
            excluding instances with a single real token).
        seed: seeds the random token r (per instance: (seed, split index)) and the subsample.
        chunk_size: instances per tensor program; None (default): length buckets of about
            256 instances. Any value gives the same result (up to float rounding).
        site: where to erase (None: the model's first site).

    Instances with one real token have no other token to erase; they (and any whose
    weight outside i* is exactly 0 in floating point) are left out and listed in
    ``result.excluded``.
    """
    with runs.experiment(model, split, seed=seed, max_instances=max_instances, chunk_size=chunk_size,
                          rows=_SINGLE_ROWS, cost=lambda T, H: T * (H + 16), budget=_BUDGET) as run, torch.no_grad():
        model, seed, N, C = run.model, run.seed, len(run), run.model.n_classes
        probs = np.empty((N, 3, C), dtype=np.float64)  # y-hat, y'_top, y'_random
        weights = np.empty((N, 2), dtype=np.float64)
        tokens = np.empty((N, 2), dtype=np.int64)
        usable = np.empty(N, dtype=bool)
        for rows, chunk, state in run.states(site):
            alpha, mask = state.attention, state.mask  # (n, T)
            T = mask.shape[-1]
            y_hat = model.decode_at(state, alpha)  # (n, C)
            top = alpha.argmax(-1)  # (n,)
            positions = torch.arange(T, device=run.device)
            is_top = positions == top[:, None]  # (n, T)
            u = runs.instance_uniform(seed, _STREAM_SINGLE, chunk.index, T).to(run.device)
            rand = u.masked_fill(~mask | is_top, -1.0).argmax(-1)  # uniform over the other real tokens
            is_rand = positions == rand[:, None]
            remove = torch.stack([is_top, is_rand], 1)  # (n, 2, T)
            erased, total = interventions.erase_rows(alpha, mask, remove)
            ok = (mask.sum(-1) >= 2) & (total[:, 0, 0] > 0)
            y_erased = model.decode_at(state, erased)  # (n, 2, C): one call for both erasures
            probs[rows, 0] = y_hat.double().cpu().numpy()
            probs[rows, 1:] = y_erased.double().cpu().numpy()
            weights[rows] = alpha.gather(1, torch.stack([top, rand], 1)).double().cpu().numpy()
            first = mask.to(torch.int8).argmax(-1)
            tokens[rows] = torch.stack([top - first, rand - first], 1).cpu().numpy()
            usable[rows] = ok.cpu().numpy()

    if not usable.any():
        raise ValueError(
            "no instance can be used: single-weight erasure needs at least 2 real tokens with weight left "
            "outside the top one"
        )
    keep = usable
    fields = run.instance_fields(probs[:, 0], keep=keep)
    p = probs[keep]
    y_hat, y_top, y_rand = p[:, 0], p[:, 1], p[:, 2]
    predicted = fields["predicted"]
    return SingleWeightResult(
        jsd_top=metrics.jsd(y_top, y_hat, check=False),
        jsd_random=metrics.jsd(y_rand, y_hat, check=False),
        flip_top=y_top.argmax(-1) != predicted,
        flip_random=y_rand.argmax(-1) != predicted,
        top_weight=weights[keep, 0],
        random_weight=weights[keep, 1],
        top_token=tokens[keep, 0],
        random_token=tokens[keep, 1],
        probs_top=y_top,
        probs_random=y_rand,
        seed=seed,
        **fields,
    )


# ----------------------------------------------------------------------------- ranked removal
def _first_flips(model, state: SiteState, y_hat, ranks):
    """Tokens erased at the first flip (n, R), 0 where none flips: every prefix of every ranking in ONE decode.

    Candidate (r, k) erases the k top-ranked real tokens of ranking r, k = 1 .. T_max - 1,
    with T_max the most real tokens in the chunk; candidates that would erase all of an
    instance's tokens (k >= its T), or leave no positive weight, never count as flips.
    """
    n, R, T = ranks.shape
    alpha, mask = state.attention, state.mask
    n_real = mask.sum(-1)  # (n,)
    K = int(n_real.max()) - 1
    if K < 1:
        return torch.zeros(n, R, dtype=torch.long, device=mask.device)
    k = torch.arange(1, K + 1, device=mask.device)
    remove = ranks.unsqueeze(2) < k[:, None]  # (n, R, K, T): prefix k of each ranking
    weights, total = interventions.erase_rows(alpha, mask, remove.reshape(n, R * K, T))
    probs = model.decode_at(state, weights)  # (n, R K, C)
    valid = total.reshape(n, R, K) > 0  # (n, R, K); erasing all of an instance's T tokens (k >= T) leaves 0
    flips = (probs.argmax(-1).reshape(n, R, K) != y_hat.argmax(-1)[:, None, None]) & valid
    first = flips.to(torch.int8).argmax(-1) + 1  # (n, R): the first flipping k
    return torch.where(flips.any(-1), first, torch.zeros_like(first))


def ranked_removal(
    model,
    split,
    *,
    rankings=RANKINGS,
    max_instances: int | None = None,
    seed: int = 0,
    chunk_size: int | None = None,
    site: Site | None = None,
) -> RankedRemovalResult:
    """Erase attention weights in ranked order until the decision flips (Serrano & Smith 2019).

    For each instance (T >= 2 real tokens) and each ranking pi of its real tokens, erase
    the top k = 1, 2, ..., T - 1 of them (zero and renormalise, :func:`erase`) and find the
    first k with argmax decode(h, alpha'_k) != argmax y-hat. Report k / T, the fraction of
    the real tokens erased at the flip, or that no k <= T - 1 flips it. Rankings, each by
    descending score (ties: earlier token first):

    * ``"attention"``: alpha-hat_t;
    * ``"random"``: a uniformly random order, seeded per instance;
    * ``"gradient"``: d y-hat / d alpha_t, with y-hat the probability of the predicted
      class, differentiated through ``decode`` at alpha-hat with h fixed;
    * ``"attention_x_gradient"``: alpha-hat_t * d y-hat / d alpha_t.

    Serrano & Smith report, per ranking, the fraction erased among the instances that
    flip and the share that never flips (:func:`removal_summary`): attention usually
    beats a random order, the gradient-based orders usually beat attention, and many
    decisions flip only after a large share of the weights is gone, or never.

    Args:
        model: any model that meets :class:`attnlib.models.protocol.InterventionModel`, with
            attention of its own (eval mode for the call, restored after; its parameters get
            no gradient).
        split: a :class:`attnlib.data.Split` or :class:`attnlib.data.Batch`.
        rankings: names from :data:`RANKINGS` (a subset, in any order).
        max_instances: with a Split, a seeded stratified subsample of this size (before
            excluding instances with a single real token).
        seed: seeds the random ranking (per instance: (seed, split index)) and the subsample.
        chunk_size: instances per tensor program; None (default): length buckets of about
            256 instances, fewer for long documents (a memory budget on the
            (n, R (T - 1), T) candidates). Any value gives the same result.
        site: where to erase (None: the model's first site).

    Per bucket, all R (T - 1) erasures of all its instances are decoded in ONE
    ``model.decode`` call: no loop over instances or over k. Instances with one real
    token cannot lose a token and keep one; they are left out, listed in ``excluded``.
    """
    rankings = _check_rankings(rankings)
    R = len(rankings)
    with runs.experiment(model, split, seed=seed, max_instances=max_instances, chunk_size=chunk_size,
                          rows=_RANKED_ROWS, cost=lambda T, H: T * (H + 3 * R * T), budget=_BUDGET,
                          min_tokens=2) as run, torch.no_grad():
        model, seed, N, T_all = run.model, run.seed, len(run), run.batch.tokens.shape[1]
        probs = np.empty((N, model.n_classes), dtype=np.float64)
        n_removed = np.empty((N, R), dtype=np.int64)
        ranks_all = np.full((N, R, T_all), -1, dtype=np.int32)
        for rows, chunk, state in run.states(site):
            mask = state.mask
            y_hat, scores = _ranking_scores(model, state, chunk.index, rankings, seed)
            ranks = _ranks(scores, mask)  # (n, R, T)
            first = _first_flips(model, state, y_hat, ranks)
            probs[rows] = y_hat.double().cpu().numpy()
            n_removed[rows] = first.cpu().numpy()
            T = mask.shape[-1]
            ranks_all[rows, :, :T] = ranks.masked_fill(~mask.unsqueeze(1), -1).cpu().numpy()

    flipped = n_removed > 0
    real = run.lengths[:, None]
    return RankedRemovalResult(
        rankings=rankings,
        flipped=flipped,
        n_removed=np.where(flipped, n_removed, -1),
        fraction_removed=np.where(flipped, n_removed / real, np.nan),
        ranks=ranks_all,
        seed=seed,
        **run.instance_fields(probs),
    )


# ----------------------------------------------------------------------------- summaries
def flip_summary(result: SingleWeightResult) -> pd.Series:
    """Serrano & Smith's single-weight summary: how often erasing the top vs a random weight flips the decision.

    Returns a Series: n (instances), n_excluded, flip_top and flip_random (fractions of
    instances whose decision flips), both_flip / only_top_flips / only_random_flips
    (fractions), top_changes_more (fraction with JSD(y-hat, y'_{i*}) > JSD(y-hat, y'_r)),
    and the mean and median of Delta JSD = JSD(y-hat, y'_{i*}) - JSD(y-hat, y'_r).
    """
    if not isinstance(result, SingleWeightResult):
        raise ValueError(f"result must be a SingleWeightResult (from single_weight), got {type(result).__name__}")
    top, rand = np.asarray(result.flip_top, bool), np.asarray(result.flip_random, bool)
    diff = result.jsd_difference
    n = len(result)
    return pd.Series(
        {
            "n": n,
            "n_excluded": result.n_excluded,
            "flip_top": top.mean() if n else np.nan,
            "flip_random": rand.mean() if n else np.nan,
            "both_flip": (top & rand).mean() if n else np.nan,
            "only_top_flips": (top & ~rand).mean() if n else np.nan,
            "only_random_flips": (~top & rand).mean() if n else np.nan,
            "top_changes_more": (diff > 0).mean() if n else np.nan,
            "mean_jsd_difference": diff.mean() if n else np.nan,
            "median_jsd_difference": np.median(diff) if n else np.nan,
        },
        name="single-weight erasure",
        dtype=object,
    )


def removal_summary(result: RankedRemovalResult) -> pd.DataFrame:
    """Serrano & Smith's ranked-removal table: per ranking, how much is erased before the decision flips.

    One row per ranking (in the result's order): n (instances), n_flipped,
    never_flipped (fraction of instances that no erasure of up to T - 1 tokens flips),
    mean_fraction_removed and median_fraction_removed (of the real tokens, among the
    instances that flip; NaN if none does).
    """
    if not isinstance(result, RankedRemovalResult):
        raise ValueError(f"result must be a RankedRemovalResult (from ranked_removal), got {type(result).__name__}")
    rows = []
    for r, name in enumerate(result.rankings):
        flipped = result.flipped[:, r]
        fractions = result.fraction_removed[flipped, r]
        n = len(flipped)
        rows.append(
            {
                "ranking": name,
                "n": n,
                "n_flipped": int(flipped.sum()),
                "never_flipped": float((~flipped).mean()) if n else np.nan,
                "mean_fraction_removed": float(fractions.mean()) if len(fractions) else np.nan,
                "median_fraction_removed": float(np.median(fractions)) if len(fractions) else np.nan,
            }
        )
    return pd.DataFrame(rows).set_index("ranking")
