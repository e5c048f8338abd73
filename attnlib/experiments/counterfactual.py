"""Counterfactual attention: permute it (J&W Alg. 2) or search for adversarial attention (Alg. 3).

Both experiments of Jain & Wallace 2019, *Attention is not Explanation* (Sec. 4.2-4.3),
keep the encoder's hidden states h fixed and ask what the output y-hat would have been
under a *different* attention alpha over the same tokens:

* :func:`permute_attention` -- scramble alpha-hat among the real tokens, 100 times per
  instance, and report the median output change, median_p TVD(y-hat, y-hat_p). If the
  output barely moves, the particular ordering of the weights did not matter.
* :func:`adversarial_attention` -- optimise k attention distributions per instance that
  are as different as possible (JSD) from alpha-hat and from each other while the output
  stays within eps in TVD, and report the eps-max JSD: the largest JSD(alpha, alpha-hat)
  among the candidates that keep the output. The book counts JSD >= 0.49 as "very
  different" (:func:`fraction_very_different`): the bin edge at which J&W's fractions were
  read off their committed histograms, not a threshold of the paper.
* :func:`bin_by_max_attention` -- the long table behind J&W's violin plots: a quantity per
  instance against bins of max_t alpha-hat_t.

Implementation: the encoder runs once (no gradient, model in eval mode, restored
after); instances are padded into one tensor and all permutations / candidates of all
of them go through ONE call of ``model.decode(hidden, attention)`` with attention of
shape (n, K, T) -- no loop over instances, permutations or candidates. A test split is
sorted by length and cut into a few large length buckets (about 256 sentences for the
adversary, 128 for permutations, fewer when a memory budget requires), each padded only
to its own longest sentence: on 2 CPU cores that is faster than padding everything to
the longest sentence of the split, and several times faster than J&W's batches of 32
(``benchmarks/bench_counterfactual.py``). Attention is always a distribution over the
real tokens: exactly 0 on <SOS>, <EOS> and padding. Distances use :mod:`attnlib.metrics`
(natural logs, so 0 <= JSD <= ln 2; logs clamped, finite gradients at zeros).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
import torch

from .. import runs, metrics, portable, uncertainty
from ..runs import InstanceResult
from .._checks import check_positive_int, check_positive_number, check_seed
from ..models import Site, interventions, masked_softmax

__all__ = [
    "PermutationResult",
    "AdversaryResult",
    "permute_attention",
    "adversarial_attention",
    "fraction_very_different",
    "bin_by_max_attention",
    "select_within_eps",
    "query_row_sources",
    "VERY_DIFFERENT_JSD",
    "MAX_ATTENTION_BINS",
    "ADVERSARY",
    "AdversarySettings",
]

#: The book's threshold for a "very different" adversarial attention (about 70% of ln 2): the bin
#: edge at which J&W's fractions were read off their committed histograms (the paper states no
#: threshold; their notebooks and W&P's Table 4 use 0.4). Same as attnlib.published.JSD_VERY_DIFFERENT.
VERY_DIFFERENT_JSD = 0.49
#: J&W's bins of max attention for the violin plots: [0, .25), [.25, .5), [.5, .75), [.75, 1].
MAX_ATTENTION_BINS = (0.0, 0.25, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class AdversarySettings:
    """J&W's adversary (Alg. 3 and their code): the output budget ``eps`` (TVD), ``k`` candidates,
    ``steps`` of Adam at learning rate ``lr``. The one place these defaults live: every search
    of the book (a J&W classifier's attention, a transformer head's, the explorer) starts here."""

    eps: float = 0.01
    k: int = 5
    steps: int = 500
    lr: float = 0.01


#: The adversary's defaults (:class:`AdversarySettings`).
ADVERSARY = AdversarySettings()

# How many instances share one tensor program. Instances are sorted by length and cut
# into chunks of about this many rows (equal sizes), each padded only to its own longest
# sentence; a chunk is cut further if it would exceed the memory budget (in tensor
# elements, float32: 4 bytes each). Measured on 2 CPU cores with rt-polarity: padding a
# whole test split to its longest sentence costs more than a few chunks do, and chunks
# of 32 (J&W's batches) cost more in per-call overhead.
_PERMUTATION_ROWS = 128
_ADVERSARY_ROWS = 256
_PERMUTATION_BUDGET = 2**23
_ADVERSARY_BUDGET = 2**25
# A transformer head's permutations: elements per group of candidates decoded at once (see _permutation_changes).
_QUERY_ROW_BUDGET = 2**25


# ----------------------------------------------------------------------------- results
@dataclass
class PermutationResult(InstanceResult):
    """Output of :func:`permute_attention`; one entry per instance, in ``indices`` order.

    median_tvd:    (N,) median over permutations of TVD(y-hat, y-hat_p).
    max_attention: (N,) max_t alpha-hat_t (the x axis of J&W's violin plots).
    predicted:     (N,) argmax of y-hat.
    labels:        (N,) gold labels.
    indices:       (N,) positions of the instances in their split.
    all_tvd:       (N, n_permutations) every TVD(y-hat, y-hat_p).
    all_predicted: (N, n_permutations) the predicted class under each permutation.
    probs:         (N, C) y-hat.
    lengths:       (N,) real tokens per instance (no <SOS>/<EOS>).
    permutations:  (N, n_permutations, T) or None (``keep_permutations=True``): source
                   positions, alpha_p[t] = alpha-hat[permutations[p, t]], over the padded
                   token positions (identity on <SOS>, <EOS>, padding).

    At a site with a row per query (a transformer head), max_attention is the largest
    weight of the [CLS] (first) query row.
    """

    median_tvd: np.ndarray
    max_attention: np.ndarray
    all_tvd: np.ndarray | None
    n_permutations: int
    seed: int
    permutations: np.ndarray | None = None
    all_predicted: np.ndarray | None = None

    @property
    def permuted_accuracy(self) -> float:
        """Accuracy over every (instance, permutation) pair: the poster's "shuffled" accuracy."""
        if self.all_predicted is None:
            raise ValueError("this result has no per-permutation predictions")
        return float((self.all_predicted == self.labels[:, None]).mean())

    @property
    def accuracy(self) -> float:
        """Accuracy of the model's own predictions on these instances."""
        return float((self.predicted == self.labels).mean())

    def to_frame(self) -> pd.DataFrame:
        """One row per instance: instance, label, predicted, length, max_attention, median_tvd."""
        return self.instance_frame(max_attention=self.max_attention, median_tvd=self.median_tvd)


@dataclass
class AdversaryResult(InstanceResult):
    """Output of :func:`adversarial_attention`; one entry per instance, in ``indices`` order.

    Padded arrays share the token axis T of ``mask`` (True on real tokens):

    eps:           the eps this result is selected at (see :meth:`select`).
    search_eps:    the eps in the search's penalty term.
    candidates:    (N, K, T) the K adversarial attentions, 0 off the real tokens.
    alpha:         (N, T) the model's own attention alpha-hat.
    tvd:           (N, K) TVD(y-hat, y_k), the output change of each candidate.
    jsd:           (N, K) JSD(alpha_k, alpha-hat).
    kept:          (N, K) bool, tvd <= eps.
    eps_max_jsd:   (N,) max JSD over the kept candidates and alpha-hat itself (so >= 0).
    best:          (N,) index of that candidate, -1 when it is alpha-hat (none kept).
    probs:         (N, C) y-hat; candidate_probs (N, K, C) y_k.
    max_attention, predicted, labels, indices, lengths: (N,) as in :class:`PermutationResult`.
    settings:      k, steps, lr, penalty, init_noise, seed of the search.

    ``attention``, ``best_attention`` and :meth:`candidate` give per-instance arrays over
    the real tokens only.
    """

    eps: float
    search_eps: float
    candidates: np.ndarray
    mask: np.ndarray
    alpha: np.ndarray
    tvd: np.ndarray
    jsd: np.ndarray
    kept: np.ndarray
    eps_max_jsd: np.ndarray
    best: np.ndarray
    candidate_probs: np.ndarray
    max_attention: np.ndarray
    settings: dict = field(default_factory=dict)

    @property
    def attention(self) -> list[np.ndarray]:
        """alpha-hat per instance, over its real tokens."""
        return [a[m] for a, m in zip(self.alpha, self.mask)]

    @property
    def best_attention(self) -> list[np.ndarray]:
        """The eps-max candidate per instance over its real tokens (alpha-hat if none is kept)."""
        out = []
        for i, b in enumerate(self.best):
            row = self.alpha[i] if b < 0 else self.candidates[i, b]
            out.append(row[self.mask[i]])
        return out

    def candidate(self, i: int) -> np.ndarray:
        """The K candidates of instance ``i`` (a position in this result), shape (K, n_i)."""
        return self.candidates[i][:, self.mask[i]]

    def select(self, eps: float) -> "AdversaryResult":
        """The same candidates re-selected at another ``eps``, without re-running the search.

        kept = TVD <= eps, eps_max_jsd and best are recomputed; nothing else changes.
        A larger eps keeps a superset, so eps_max_jsd never decreases. Selecting at an eps
        smaller than ``search_eps`` is valid too: it only drops candidates. Either way the
        candidates were optimised against ``search_eps``, so the result is a lower bound on
        what a search run at the new eps would find (J&W searched at 0.01 for
        classification; their plotting code selected at 0.05).
        """
        eps = check_positive_number(eps, "eps")
        kept, eps_max, best = _select(self.tvd, self.jsd, eps)
        return replace(self, eps=eps, kept=kept, eps_max_jsd=eps_max, best=best)

    def to_frame(self) -> pd.DataFrame:
        """One row per instance: instance, label, predicted, length, max_attention, eps_max_jsd, n_kept."""
        return self.instance_frame(
            max_attention=self.max_attention, eps_max_jsd=self.eps_max_jsd, n_kept=self.kept.sum(1)
        )


# ----------------------------------------------------------------------------- helpers
def select_within_eps(tvd, jsd, eps: float):
    """J&W's selection: kept = TVD <= eps; the eps-max JSD over the kept candidates and alpha-hat (JSD 0).

    ``tvd``, ``jsd``: (N, K) arrays, each candidate's output change and JSD from alpha-hat.
    Returns (kept (N, K) bool, eps_max_jsd (N,) >= 0, best (N,) the candidate's index, -1 where
    it is alpha-hat itself).
    """
    tvd, jsd = np.asarray(tvd, dtype=np.float64), np.asarray(jsd, dtype=np.float64)
    if tvd.ndim != 2 or tvd.shape != jsd.shape:
        raise ValueError(f"tvd and jsd must be (N, K) arrays of one shape, got {tvd.shape} and {jsd.shape}")
    return _select(tvd, jsd, check_positive_number(eps, "eps"))


def _select(tvd: np.ndarray, jsd: np.ndarray, eps: float):
    """:func:`select_within_eps` without checks."""
    kept = tvd <= eps
    masked = np.where(kept, jsd, -np.inf)
    best = masked.argmax(1) if masked.shape[1] else np.zeros(len(masked), dtype=np.int64)
    best_value = masked[np.arange(len(masked)), best] if masked.shape[1] else np.full(len(masked), -np.inf)
    use_hat = ~(best_value > 0.0)
    eps_max = np.where(use_hat, 0.0, best_value)
    best = np.where(use_hat, -1, best).astype(np.int64)
    return kept, eps_max, best


def _xlogx(p: torch.Tensor) -> torch.Tensor:
    """p log p, exactly 0 at p = 0 (log clamped at metrics.EPS, as in attnlib.metrics)."""
    return p * torch.log(p.clamp_min(metrics.EPS))


def _loss_jsd(p: torch.Tensor, q: torch.Tensor, neg_entropy_p: torch.Tensor, neg_entropy_q: torch.Tensor) -> torch.Tensor:
    """JSD(p, q) = 1/2 (sum p log p + sum q log q) - sum m log m, m = (p + q) / 2 (natural logs).

    The same value and gradient (1/2 log(p / m)) as :func:`attnlib.metrics.jsd`, which
    computes 1/2 KL(p || m) + 1/2 KL(q || m); written with the per-distribution terms
    sum p log p passed in, so that for all pairs of candidates they are computed once.
    It takes about a third of the elementwise work of the KL form inside the
    optimisation loop; reported JSDs use :func:`attnlib.metrics.jsd`.
    """
    return 0.5 * (neg_entropy_p + neg_entropy_q) - _xlogx(0.5 * (p + q)).sum(-1)


def _row_mean(mask: torch.Tensor, ndim: int):
    """(n, k, Q) per-row values -> (n, k), the mean over each instance's real query rows; identity for (n, k)."""
    if ndim == 2:
        return lambda values: values
    weights = mask.to(torch.get_default_dtype())
    weights = (weights / weights.sum(-1, keepdim=True)).unsqueeze(1)  # (n, 1, Q)
    return lambda values: (values * weights.to(values.dtype)).sum(-1)


def _initial_logits(first, n_real, index, k: int, seed: int, init_noise: float, T: int,
                    by_query: bool = False) -> torch.Tensor:
    """J&W's start: log(uniform over the real tokens) + init_noise * N(0, 1), seeded per instance.

    Each instance draws its own noise from a generator seeded by (seed, its split index),
    so its start -- and hence its whole search -- does not depend on which other
    instances share the tensor (the loss is a sum of per-instance terms and Adam is
    elementwise). Entries off the real tokens are 0 (masked out of every softmax).
    ``by_query``: a row per query position (a transformer head), (n, k, T, T): the instance
    draws (k, L, L) for its L real query rows, so neither the noise nor its place depends on
    how far the chunk is padded; padded query rows start uniform (they are in no loss).
    """
    n = len(first)
    out = torch.zeros(n, k, *((T,) if by_query else ()), T, device="cpu")  # set-up on the CPU
    g = torch.Generator()
    for i in range(n):  # set-up only (a few microseconds per instance), not the optimisation
        L, f = int(n_real[i]), int(first[i])
        g.manual_seed(runs.instance_seed(seed, int(index[i])))
        if by_query:
            noise = torch.randn(k, L, L, generator=g, device="cpu")
            out[i, :, f : f + L, f : f + L] = -math.log(L) + init_noise * noise
        else:
            out[i, :, f : f + L] = -math.log(L) + init_noise * torch.randn(k, L, generator=g, device="cpu")
    return out


# ----------------------------------------------------------------------------- permutation
def query_row_sources(mask: torch.Tensor, n_queries: int, n_permutations: int, rng: np.random.Generator) -> torch.Tensor:
    """Source positions (n, P, Q, T) that permute every query row of a head on its own.

    :func:`attnlib.models.interventions.permutation_sources` over the key mask repeated once
    per query row: each of the Q rows of each instance gets its own uniformly random
    permutation of the real keys (identity elsewhere), drawn from ``rng``.
    """
    n, T = mask.shape
    src = interventions.permutation_sources(mask.repeat_interleave(n_queries, 0), n_permutations, rng)
    return src.view(n, n_queries, n_permutations, T).transpose(1, 2)


def _permutation_changes(model, state, n_permutations: int, rng: np.random.Generator, budget: int = _QUERY_ROW_BUDGET):
    """The batched core of Alg. 2 for one chunk's state (below the site, computed once).

    Returns TVD(y-hat, y-hat_p) (n, P), y-hat (n, C), the predicted class under each
    permutation (n, P) and the source positions (n, P, T) (one row per instance) or
    (n, P, Q, T) (a row per query, :func:`query_row_sources`).

    One row per instance: alpha-hat is decoded as row 0 next to the P permutations in ONE
    ``model.decode_at`` call with attention (n, 1 + P, T), so y-hat and the y-hat_p come
    from the same kernel. A row per query (a transformer head): the layers above the site
    are recomputed once per group of candidates, as many as fit ``budget`` elements, each
    group decoded with alpha-hat as its row 0 (its TVDs measured against that row).
    """
    alpha = state.attention
    if alpha.ndim == 2:
        src = interventions.permutation_sources(state.mask, n_permutations, rng)  # (n, P, T), CPU
        groups = [slice(0, n_permutations)]
    else:
        n, Q, T = alpha.shape
        src = query_row_sources(state.mask, Q, n_permutations, rng)  # (n, P, Q, T)
        per_candidate = n * Q * 8 * int(getattr(model, "hidden_size", 1))
        size = max(1, min(n_permutations, budget // max(per_candidate, 1)))
        groups = [slice(a, min(a + size, n_permutations)) for a in range(0, n_permutations, size)]
    changes, predicted, y_hat = [], [], None
    for group in groups:
        permuted = interventions.permute_rows(alpha, src[:, group])
        probs = model.decode_at(state, torch.cat([alpha.unsqueeze(1), permuted], 1))  # (n, 1 + p, C)
        n, p = probs.shape[0], probs.shape[1] - 1
        changes.append(metrics.tvd(probs[:, 1:], probs[:, :1].expand(n, p, probs.shape[-1]), check=False))
        predicted.append(probs[:, 1:].argmax(-1))
        y_hat = probs[:, 0] if y_hat is None else y_hat
    return torch.cat(changes, 1), y_hat, torch.cat(predicted, 1), src


def permute_attention(
    model,
    split,
    *,
    n_permutations: int = 100,
    seed: int = 0,
    max_instances: int | None = None,
    chunk_size: int | None = None,
    keep_permutations: bool = False,
    site: Site | None = None,
    permutation_seed: int | None = None,
) -> PermutationResult:
    """Output change when attention is permuted among the real tokens (J&W 2019, Alg. 2).

    For each instance, with h the (fixed) hidden states and alpha-hat the model's
    attention, draw P = ``n_permutations`` uniformly random permutations pi_p of the real
    tokens and compute

        Delta y-hat = median_p TVD(y-hat, y-hat_p),  y-hat_p = decode(h, alpha-hat o pi_p).

    Weight is only moved among real tokens, never onto <SOS>, <EOS> or padding. For
    binary outputs TVD(y-hat, y-hat_p) = |y-hat_1 - y-hat_p,1|, J&W's output difference.
    J&W plot violins of Delta y-hat against bins of max_t alpha-hat_t
    (:func:`bin_by_max_attention`).

    Args:
        model: any model that meets :class:`attnlib.models.protocol.InterventionModel`
            (e.g. an :class:`attnlib.models.AttentionClassifier`); put in eval mode for
            the call (restored after), no gradients.
        split: a :class:`attnlib.data.Split` (all instances, or a seeded
            stratified ``max_instances``) or a :class:`attnlib.data.Batch`.
        n_permutations: P, J&W use 100.
        seed: seeds the permutations (one NumPy ``default_rng(seed)``) and the subsample.
        chunk_size: instances per tensor program; None (default): length buckets of
            about 128 sentences (fewer for long documents, by a memory budget).
            Instances are sorted by length and each chunk is padded to its longest. The
            same arguments give the same permutations; another ``chunk_size`` draws
            other (equally random) ones.
        keep_permutations: also return the permutations (N, P, T).
        permutation_seed: seeds the permutations alone (None: ``seed``), e.g. other
            permutations of the same subset at each head of a transformer.
        site: where to permute (None: the model's first site; J&W's classifier has one).
            At a transformer head, every query row is permuted on its own
            (:func:`query_row_sources`) and the layers above it are recomputed.

    All permutations of all instances of a chunk go through ONE ``model.decode_at`` call
    with attention of shape (n, 1 + P, T) (alpha-hat itself is row 0, so y-hat and the
    y-hat_p come from the same kernel: an attention invariant to permutation, e.g.
    uniform, gives exactly 0).
    """
    P = check_positive_int(n_permutations, "n_permutations")
    rng = np.random.default_rng(check_seed(seed if permutation_seed is None else permutation_seed))
    with runs.experiment(model, split, seed=seed, max_instances=max_instances, chunk_size=chunk_size,
                          rows=_PERMUTATION_ROWS, cost=lambda T, H: (P + 1) * (H + 4 * T),
                          budget=_PERMUTATION_BUDGET) as run, torch.no_grad():
        N, T_all = run.batch.tokens.shape
        all_tvd = np.empty((N, P), dtype=np.float64)
        all_predicted = np.empty((N, P), dtype=np.int64)
        max_attention = np.empty(N, dtype=np.float64)
        probs_out = np.empty((N, run.model.n_classes), dtype=np.float64)
        perms = np.broadcast_to(np.arange(T_all), (N, P, T_all)).copy() if keep_permutations else None
        for rows, _, state in run.states(site, query_rows=True):
            if perms is not None and state.attention.ndim == 3:
                raise ValueError("keep_permutations keeps one row per instance; this site has a row per query")
            change, y_hat, predicted, src = _permutation_changes(run.model, state, P, rng)
            all_tvd[rows] = change.double().cpu().numpy()
            all_predicted[rows] = predicted.cpu().numpy()
            first_row = state.attention if state.attention.ndim == 2 else state.attention[:, 0]
            max_attention[rows] = first_row.max(-1).values.double().cpu().numpy()
            probs_out[rows] = y_hat.double().cpu().numpy()
            if perms is not None:
                perms[rows, :, : src.shape[-1]] = src.cpu().numpy()
    return PermutationResult(
        median_tvd=np.median(all_tvd, axis=1),  # the mean of the middle two for even P, as np.median in J&W
        max_attention=max_attention,
        all_tvd=all_tvd,
        n_permutations=P,
        seed=seed,
        permutations=perms,
        all_predicted=all_predicted,
        **run.instance_fields(probs_out),
    )


# ----------------------------------------------------------------------------- adversary
def adversarial_attention(
    model,
    split,
    *,
    eps: float = ADVERSARY.eps,
    k: int = ADVERSARY.k,
    steps: int = ADVERSARY.steps,
    lr: float = ADVERSARY.lr,
    penalty: float = 500.0,
    init_noise: float = 3.0,
    seed: int = 0,
    max_instances: int | None = None,
    chunk_size: int | None = None,
    progress: bool = False,
    site: Site | None = None,
) -> AdversaryResult:
    """Adversarial attention search (J&W 2019, Alg. 3, Eq. 1-2): k alphas that keep y-hat.

    For each instance find k attention distributions alpha_1..alpha_k over its real
    tokens, as different as possible from alpha-hat and from each other, whose outputs
    y_i = decode(h, alpha_i) stay within ``eps`` of y-hat in TVD. With h fixed
    (detached; the encoder runs once) and alpha_i = softmax over the real tokens of free
    logits, Adam (lr 0.01, amsgrad, as in J&W's code) minimises, for ``steps`` steps,

        L = sum_n sum_i [ -JSD(alpha_i, alpha-hat) + penalty * relu(TVD(y_i, y-hat) - eps) ]
            - sum_n mean_{i, j} JSD(alpha_i, alpha_j),

    where the last mean runs over all k^2 ordered pairs (diagonal included), exactly as
    J&W's code computes it; that is (k-1)/k times the mean over the pairs i < j. The
    logits start at log(uniform) + init_noise * N(0, 1), seeded per instance (so an
    instance's search does not depend on what else is in the tensor).

    Selection: a candidate is kept when TVD(y_i, y-hat) <= eps; alpha-hat itself always
    counts (JSD 0), so the reported eps-max JSD = max over the kept of JSD(alpha_i,
    alpha-hat) lies in [0, ln 2]. The book counts JSD >= 0.49 as "very different"
    (:func:`fraction_very_different`; J&W's committed outputs, selected at eps = 0.05, put
    0.50 / 0.54 of SST instances there by predicted class 0 / 1 and 0.97 / 0.93 for IMDB). Use :meth:`AdversaryResult.select`
    to re-select at another eps without searching again.

    Args:
        eps: the output tolerance. J&W's paper states 0.01 for classification (0.05 for
            QA); their plotting code selected at 0.05 -- ``result.select(0.05)``.
        k: candidates per instance (J&W: 5). steps: Adam steps (J&W: 500).
        lr, penalty, init_noise: J&W's 0.01, 500 and 3.
        seed: seeds the initial logits (per instance) and the subsample.
        max_instances: with a Split, a seeded stratified subsample of this size.
        chunk_size: instances per tensor program; None (default): length buckets of
            about 256 sentences (the 842 rt-polarity test sentences: 4 programs of
            (210, k, T)), fewer for long documents by a memory budget of about 128 MB per
            (n, T, H) tensor. ``chunk_size=len(split)`` makes the whole split one program;
            ``chunk_size=32`` runs the same algorithm batch by batch like J&W. All give
            the same result up to float rounding (about 1e-6), since every instance is
            seeded on its own and the loss is a sum of per-instance terms.
        progress: show a tqdm bar over the optimisation steps.
        site: where to search (None: the model's first site), for any model that meets
            :class:`attnlib.models.protocol.InterventionModel`. At a transformer head (a
            model with ``rows_per_query = True``) every query row of the head is a
            searched distribution, candidates are (k, Q, T) per instance, the layers above
            the head are recomputed, and a candidate's JSD from alpha-hat is the mean over
            the instance's real query rows (``candidates`` (N, K, T, T), ``alpha`` (N, T, T),
            ``max_attention`` the [CLS] row's largest weight).

    The model is put in eval mode (restored after); its parameters receive no
    gradient (only the attention logits are differentiated, with torch.autograd.grad).
    """
    eps = check_positive_number(eps, "eps")
    k = check_positive_int(k, "k")
    steps = check_positive_int(steps, "steps")
    lr = check_positive_number(lr, "lr")
    penalty = check_positive_number(penalty, "penalty", allow_zero=True)
    init_noise = check_positive_number(init_noise, "init_noise", allow_zero=True)
    seed = check_seed(seed)
    n_pairs = k * (k - 1) // 2
    from tqdm.auto import tqdm

    by_query = bool(getattr(model, "rows_per_query", False))
    if by_query:  # every candidate runs the layers above the site, forward and backward
        cost = lambda T, H: T * k * 16 * H  # noqa: E731
    else:
        cost = lambda T, H: T * (H + 8 * k + 8 * n_pairs)  # noqa: E731
    with runs.experiment(model, split, seed=seed, max_instances=max_instances, chunk_size=chunk_size,
                          rows=_ADVERSARY_ROWS, cost=cost, budget=_ADVERSARY_BUDGET) as run:
        model, device = run.model, run.device
        N, T_all = run.batch.tokens.shape
        C = model.n_classes
        pairs = torch.triu_indices(k, k, offset=1, device=device)
        rows_shape = (T_all, T_all) if by_query else (T_all,)
        candidates = np.zeros((N, k, *rows_shape), dtype=np.float32)
        alpha_all = np.zeros((N, *rows_shape), dtype=np.float32)
        tvd_all = np.empty((N, k), dtype=np.float64)
        jsd_all = np.empty((N, k), dtype=np.float64)
        probs_all = np.empty((N, C), dtype=np.float64)
        cand_probs_all = np.empty((N, k, C), dtype=np.float64)
        bar = tqdm(total=steps * len(run.chunks), desc="adversarial attention", unit="step", disable=not progress,
                   mininterval=1.0)  # one redraw a second at most (see attnlib.train.fit)
        with bar:
            for rows, chunk, state in run.states(site, query_rows=by_query):
                attention, y, y_hat, hat3, y_hat3, rows_of = _search_chunk(
                    model, state, chunk, k=k, steps=steps, lr=lr, penalty=penalty, init_noise=init_noise, seed=seed,
                    eps=eps, pairs=pairs, device=device, bar=bar)
                alpha_hat, mask = state.attention, state.mask
                n, T = mask.shape
                with torch.no_grad():
                    tvd_all[rows] = metrics.tvd(y, y_hat3, check=False).double().cpu().numpy()
                    jsd_all[rows] = rows_of(metrics.jsd(attention, hat3, check=False)).double().cpu().numpy()
                    span = (slice(None, T),) * (alpha_hat.ndim - 1)
                    if by_query:  # padded query rows are in no loss: stored as 0, whatever the chunk's padding
                        attention = attention * mask.view(n, 1, T, 1).to(attention.dtype)
                    candidates[(rows, slice(None), *span)] = attention.float().cpu().numpy()
                    alpha_all[(rows, *span)] = alpha_hat.float().cpu().numpy()
                    probs_all[rows] = y_hat.double().cpu().numpy()
                    cand_probs_all[rows] = y.double().cpu().numpy()

    kept, eps_max, best = _select(tvd_all, jsd_all, eps)
    return AdversaryResult(
        eps=eps,
        search_eps=eps,
        candidates=candidates,
        mask=run.batch.mask.cpu().numpy().copy(),
        alpha=alpha_all,
        tvd=tvd_all,
        jsd=jsd_all,
        kept=kept,
        eps_max_jsd=eps_max,
        best=best,
        candidate_probs=cand_probs_all,
        max_attention=(alpha_all[:, 0] if by_query else alpha_all).max(-1).astype(np.float64),
        settings={"k": k, "steps": steps, "lr": lr, "penalty": penalty, "init_noise": init_noise, "seed": seed},
        **run.instance_fields(probs_all),
    )


def _search_chunk(model, state, chunk, *, k, steps, lr, penalty, init_noise, seed, eps, pairs, device, bar):
    """J&W's search on one chunk of instances: ``k`` candidate attentions per instance at the state's
    site, each pushed away from the model's own (JSD) and from the others while the output stays within
    ``eps`` (TVD), ``steps`` Adam steps on their logits. (the candidates (n, k, [Q,] T), their outputs
    (n, k, C), the model's own output (n, C), the own rows and output repeated k times, and the
    per-head row mean of a JSD)."""
    alpha_hat, mask = state.attention, state.mask  # (n, T), or (n, Q, T) with a row per query
    with torch.no_grad():
        y_hat = model.decode_at(state, alpha_hat)  # (n, C)
    n, T = mask.shape
    C = y_hat.shape[-1]
    first, n_real = interventions.real_span(mask.cpu())
    if alpha_hat.ndim == 3 and alpha_hat.shape[1] != T:
        raise ValueError(f"a head's attention must have a row per position, got {tuple(alpha_hat.shape)}")
    logits = _initial_logits(first, n_real, chunk.index.cpu(), k, seed, init_noise, T,
                             by_query=alpha_hat.ndim == 3)
    logits = logits.to(device=device, dtype=alpha_hat.dtype).requires_grad_(True)
    optimizer = portable.adam([logits], lr=lr, amsgrad=True)
    keys = mask.view(n, 1, *([1] * (alpha_hat.ndim - 2)), T)  # (n, 1, [1,] T)
    hat3 = alpha_hat.unsqueeze(1).expand(n, k, *alpha_hat.shape[1:])
    y_hat3 = y_hat.unsqueeze(1).expand(n, k, C)
    hat_terms = _xlogx(alpha_hat).sum(-1).unsqueeze(1)  # (n, 1[, Q]): sum alpha-hat log alpha-hat
    rows_of = _row_mean(mask, alpha_hat.ndim)  # a head's JSD: the mean over its real query rows
    pair_i, pair_j = pairs
    for _ in range(steps):
        attention = masked_softmax(logits, keys)  # (n, k, T) or (n, k, Q, T)
        y = model.decode_at(state, attention)  # (n, k, C)
        output_change = metrics.tvd(y, y_hat3, check=False)  # (n, k)
        terms = _xlogx(attention).sum(-1)  # (n, k[, Q])
        to_hat = rows_of(_loss_jsd(attention, hat3, terms, hat_terms))  # (n, k) JSD(alpha_i, alpha-hat)
        loss = (penalty * torch.relu(output_change - eps) - to_hat).sum()
        if len(pair_i):  # JSD(alpha_i, alpha_j) for i < j; J&W's mean over all k^2 ordered pairs
            cross = rows_of(
                _loss_jsd(attention[:, pair_i], attention[:, pair_j], terms[:, pair_i], terms[:, pair_j])
            )
            loss = loss - cross.sum() * (2.0 / (k * k))
        (grad,) = torch.autograd.grad(loss, [logits])
        logits.grad = grad
        optimizer.step()
        bar.update(1)
    with torch.no_grad():
        attention = masked_softmax(logits, keys)
        y = model.decode_at(state, attention)
    return attention, y, y_hat, hat3, y_hat3, rows_of


# ----------------------------------------------------------------------------- summaries
def fraction_very_different(result, threshold: float = VERY_DIFFERENT_JSD, *, classes=None) -> pd.DataFrame:
    """Fraction of instances whose eps-max JSD >= ``threshold``, by predicted class.

    The fractions at or above 0.49 of J&W's committed eps-max JSD histograms (selected at
    eps = 0.05; the paper prints none) are, per predicted class, SST 0.50 / 0.54 and IMDB
    0.97 / 0.93 (:data:`attnlib.published.ADVERSARY_FRACTION`). ``result``: an :class:`AdversaryResult` (or
    anything with ``eps_max_jsd`` and ``predicted``); ``classes``: optional class names.
    Returns one row per predicted class: n, n_very_different, fraction, and ``low`` and ``high``,
    the fraction's 95% bootstrap interval over the class's instances
    (:func:`attnlib.uncertainty.bootstrap`).
    """
    threshold = check_positive_number(threshold, "threshold", allow_zero=True)
    try:
        values = np.asarray(result.eps_max_jsd, dtype=np.float64)
        predicted = np.asarray(result.predicted)
    except AttributeError:
        raise ValueError("result must be an AdversaryResult (with eps_max_jsd and predicted)") from None
    if values.shape != predicted.shape or values.ndim != 1:
        raise ValueError("eps_max_jsd and predicted must be 1-d arrays of the same length")
    rows = []
    for c in np.unique(predicted):
        sel = predicted == c
        hits = int((values[sel] >= threshold).sum())
        interval = uncertainty.bootstrap((values[sel] >= threshold).astype(np.float64))
        row = {"predicted": int(c), "n": int(sel.sum()), "n_very_different": hits, "fraction": hits / int(sel.sum()),
               "low": interval.low, "high": interval.high}
        if classes is not None:
            row["class"] = classes[int(c)]
        rows.append(row)
    columns = ["predicted", *(["class"] if classes is not None else []), "n", "n_very_different", "fraction",
               "low", "high"]
    return pd.DataFrame(rows, columns=columns).set_index("predicted")


def _bin_labels(bins: np.ndarray) -> list[str]:
    labels = [f"[{a:g}, {b:g})" for a, b in zip(bins[:-2], bins[1:-1])]
    return labels + [f"[{bins[-2]:g}, {bins[-1]:g}]"]


def bin_by_max_attention(values, max_attention, bins=MAX_ATTENTION_BINS, **columns) -> pd.DataFrame:
    """Long table for J&W's violin plots: ``values`` per instance against bins of max attention.

    J&W 2019 (Figs. 6-7) plot the median output change under permutation, and the
    eps-max JSD, against max_t alpha-hat_t in the bins [0, .25), [.25, .5), [.5, .75),
    [.75, 1] (the last bin is closed). Returns columns ``value``, ``max_attention`` and
    ``bin`` (an ordered categorical, so empty bins still appear on a plot's axis), plus
    any per-instance ``columns`` given as keywords (e.g. ``predicted=result.predicted``).
    """
    v = np.asarray(values, dtype=np.float64)
    m = np.asarray(max_attention, dtype=np.float64)
    if v.ndim != 1 or m.ndim != 1 or len(v) != len(m):
        raise ValueError(f"values and max_attention must be 1-d and of the same length, got {v.shape} and {m.shape}")
    if not np.all(np.isfinite(m)) or not np.all(np.isfinite(v)):
        raise ValueError("values and max_attention must be finite")
    edges = np.asarray(bins, dtype=np.float64)
    if edges.ndim != 1 or len(edges) < 2 or not np.all(np.diff(edges) > 0):
        raise ValueError("bins must be at least 2 strictly increasing edges")
    if len(m) and (m.min() < edges[0] or m.max() > edges[-1]):
        raise ValueError(f"max_attention must lie in [{edges[0]:g}, {edges[-1]:g}], the range of bins")
    codes = np.clip(np.searchsorted(edges, m, side="right") - 1, 0, len(edges) - 2)
    labels = _bin_labels(edges)
    frame = pd.DataFrame(
        {
            "value": v,
            "max_attention": m,
            "bin": pd.Categorical.from_codes(codes, categories=labels, ordered=True),
        }
    )
    for name, col in columns.items():
        col = np.asarray(col)
        if col.shape != (len(v),):
            raise ValueError(f"column {name!r} must have one entry per instance ({len(v)}), got shape {col.shape}")
        frame[name] = col
    return frame
