"""Head masking, head importance and pruning (Michel, Levy & Neubig 2019, *Are Sixteen Heads Really Better than One?*).

Every head h of a transformer adds ``xi_h A_h V_h W^O_h`` to the residual stream, with a gate
xi_h = 1 in the model as trained. Michel et al. ask what the gates are worth:

* :func:`mask_heads` -- the edits that set xi_h = 0 for some heads (their rows become 0, so
  the head adds nothing; the bias of the output projection, shared by all heads, stays).
* :func:`head_ablation` -- their Table 1: the accuracy with one head masked at a time, its
  change against the unmasked model, and an exact McNemar test of the change on the same
  instances (a two-sided binomial test of the discordant pairs, :func:`scipy.stats.binomtest`).
* :func:`head_importance` -- their proxy score, from ONE forward and ONE backward pass per
  batch::

      I_h = E_x | Att_h(x)^T dL(x) / dAtt_h(x) | = E_x | dL(x) / d xi_h |,

  L(x) the cross-entropy of the model's output against the gold label. The gates are per
  instance, shape (B, L, h), so the absolute value is taken per instance before the mean
  (the paper's formula; their code takes it per batch). Normalised per layer by the l2 norm
  of that layer's scores, as they do. :func:`gate_gradients` gives the signed gradients
  dL(x)/d xi_h themselves, per instance.
* :func:`prune_by_importance` -- their Fig. 3: heads masked cumulatively by increasing
  importance, over the whole model, and the accuracy after each step.

Any model with ``edits=`` support runs through the same code:
:class:`attnlib.models.TransformerClassifier` on an :class:`attnlib.data.Split` (its
``batches(batch_size)``), and both it and :class:`attnlib.models.PretrainedClassifier` on an
iterable of batches (e.g. ``model.batches(texts, labels, batch_size=...)``); anything with
``.labels`` that the model takes. Instances are batched (no loop over instances), the model
runs in eval mode (its previous mode restored after), its parameters never get gradients,
and a run gives the same numbers twice.

Optional, for speed, like the token-level ones of :mod:`attnlib.models.protocol`:
``masked_probabilities(batch, masks)``, the probabilities (K, B, C) with each of K sets of
heads masked, bit for bit those of ``model(batch, edits=mask_heads(mask))``. The book's
transformer has it (masks share the layers below their first masked head); a family
without it (None or absent) runs one forward pass per mask, with the same numbers.
"""
from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd
import torch
from scipy.stats import binomtest

from .. import uncertainty
from .._checks import check_bool, check_positive_int, check_positive_number, check_seed
from ..data import Batch, Split
from ..models.heads import MASK, check_sites
from ..models.protocol import Site, device_of, eval_mode, has_capability, layer_shape

__all__ = ["mask_heads", "gate_gradients", "head_importance", "head_ablation", "prune_by_importance",
           "prune_randomly", "prunable", "ALPHA"]

#: Significance level of :func:`head_ablation`'s McNemar test (the default of ``alpha``).
ALPHA = 0.05


# ----------------------------------------------------------------------------- validation
def _shape(model) -> tuple[int, int]:
    """(layers, heads) of a model with edits= support, or a clear ValueError."""
    if not has_capability(model, "layered"):
        raise ValueError(
            f"model must be a transformer with edits= support (attnlib.models.TransformerClassifier or "
            f"PretrainedClassifier: an nn.Module with .sites, rows_per_query and trace), got {type(model).__name__}"
        )
    return layer_shape(model)


def _check_sites(sites, model=None) -> list[Site]:
    """``sites`` (one Site or an iterable of them) as a list, inside ``model`` if given."""
    return check_sites(sites) if model is None else check_sites(sites, *_shape(model))


def _batches(split, batch_size: int) -> list:
    """The batches of ``split`` (a Split, a Batch, or an iterable of batches), as a list; never empty."""
    batch_size = check_positive_int(batch_size, "batch_size")
    if isinstance(split, Split):
        if len(split) == 0:
            raise ValueError(f"split {split.name!r} is empty: it has no instances")
        return list(split.batches(batch_size))
    if isinstance(split, Batch):
        batches = [split]
    elif isinstance(split, (str, bytes, Mapping, torch.Tensor, np.ndarray)) or not isinstance(split, Iterable):
        raise ValueError(
            f"split must be an attnlib.data.Split, a Batch, or an iterable of batches (e.g. "
            f"PretrainedClassifier.batches(texts, labels)), got {type(split).__name__}"
        )
    else:
        batches = list(split)
    for i, batch in enumerate(batches):
        labels = getattr(batch, "labels", None)
        if not isinstance(labels, torch.Tensor) or labels.ndim != 1:
            raise ValueError(f"split's batch {i} must have .labels, a 1-d tensor (a Batch), got {type(batch).__name__}")
    batches = [b for b in batches if len(b.labels)]
    if not batches:
        raise ValueError("split is empty: no instances to evaluate")
    return batches


def _labels(batch, n_classes: int, device) -> torch.Tensor:
    labels = batch.labels.to(device).long()
    if bool(((labels < 0) | (labels >= n_classes)).any()):
        raise ValueError(f"labels must lie in 0..{n_classes - 1}")
    return labels


def _n_classes(model) -> int:
    return int(getattr(model, "n_classes", getattr(model.config, "n_classes", 2)))


def _check_importance(importance, L: int, h: int) -> np.ndarray:
    try:
        scores = np.asarray(importance.detach().cpu() if isinstance(importance, torch.Tensor) else importance,
                            dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"importance must be an array of numbers of shape ({L}, {h}): {err}") from None
    if scores.shape != (L, h):
        raise ValueError(f"importance must have shape ({L}, {h}) (the model's layers x heads), got {scores.shape}")
    if not np.isfinite(scores).all():
        raise ValueError("importance must be finite")
    return scores


# ----------------------------------------------------------------------------- edits
def mask_heads(sites, *, model=None) -> dict:
    """The edits ``{Site: edit}`` that mask the heads at ``sites`` (gate xi_h = 0), for ``model(batch, edits=...)``.

    A masked head's attention rows become 0 (:data:`attnlib.models.heads.MASK`), so it adds
    nothing to the residual stream (A V W^O_h = 0); the output projection's bias, shared by
    all heads, stays. ``sites``: one :class:`~attnlib.models.Site` or an iterable of them.
    ``model``: if given, every site must lie inside it (else a ValueError naming its layers x heads).
    """
    return {site: MASK for site in _check_sites(sites, model)}


def _gate_edits(gates: torch.Tensor) -> dict:
    """Each head's rows times its gate: gates (B, L, h) -> {Site(l, h): rows * gates[:, l, h]}."""
    _, L, h = gates.shape
    return {Site(layer, head): (lambda a, m, layer=layer, head=head: a * gates[:, layer, head, None, None])
            for layer in range(L) for head in range(h)}


def _log_likelihood(out, n_classes: int) -> torch.Tensor:
    """log p(class) (B, C) from the logits: log-sigmoid for one binary logit, log-softmax otherwise."""
    logits = out.logits
    if n_classes == 2 and logits.shape[-1] == 1:
        return torch.cat([torch.nn.functional.logsigmoid(-logits), torch.nn.functional.logsigmoid(logits)], -1)
    return torch.log_softmax(logits, -1)


def _gate_gradient(model, batch, L: int, h: int, n_classes: int) -> torch.Tensor:
    """dL(x)/d xi_h (B, L, h) at xi = 1: one forward and one backward pass, gradients for the gates only."""
    device = device_of(model)
    labels = _labels(batch, n_classes, device)
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)
    gates = torch.ones(len(labels), L, h, device=device, dtype=dtype, requires_grad=True)
    with torch.enable_grad():
        out = model(batch, edits=_gate_edits(gates))
        loss = -_log_likelihood(out, n_classes).gather(-1, labels[:, None]).sum()
        (grad,) = torch.autograd.grad(loss, gates)
    return grad.detach()


def gate_gradients(model, split, *, batch_size: int = 128) -> np.ndarray:
    """dL(x)/d xi_h for every instance and head, at xi = 1: (N, L, h) float64, one backward pass per batch.

    L(x) is the cross-entropy of the model's output against the gold label; xi_h is head h's
    gate, per instance. Equal to sum over the head's rows of Att_h(x) * dL(x)/dAtt_h(x).
    Instances come in the order the batches give them (a Split's batches are sorted by
    length; each batch's ``index`` says which instance is which).
    """
    L, h = _shape(model)
    batches = _batches(split, batch_size)
    n_classes = _n_classes(model)
    with eval_mode(model):
        grads = [_gate_gradient(model, batch, L, h, n_classes).double().cpu() for batch in batches]
    return torch.cat(grads).cpu().numpy()


def _normalise_layers(scores: np.ndarray) -> np.ndarray:
    """Each layer's row divided by its l2 norm (a row of zeros stays 0)."""
    norms = np.linalg.norm(scores, axis=-1, keepdims=True)
    return np.divide(scores, norms, out=np.zeros_like(scores), where=norms > 0)


def head_importance(model, split, *, normalise: bool = True, batch_size: int = 128) -> np.ndarray:
    """Michel et al.'s head importance I_h = E_x |dL(x)/d xi_h|: (L, h) float64.

    One forward and one backward pass per batch (see :func:`gate_gradients`); the mean over
    instances of the absolute gate gradients. ``normalise``: divide each layer's scores by
    their l2 norm (Michel et al.'s per-layer normalisation; a layer of zeros stays 0).
    ``split``: a Split (its ``batches(batch_size)``), a Batch, or an iterable of batches.
    """
    normalise = check_bool(normalise, "normalise")
    grads = gate_gradients(model, split, batch_size=batch_size)
    scores = np.abs(grads).mean(0)
    return _normalise_layers(scores) if normalise else scores


# ----------------------------------------------------------------------------- masking and pruning
def _correct(model, batches: list, masks: list, n_classes: int) -> list[np.ndarray]:
    """Per mask (a collection of Sites, empty: none masked), (N,) bool: is the model's prediction
    right with those heads masked, for every instance (batch order).

    A model with the optional ``masked_probabilities`` (module docstring) runs all the masks
    of a batch in one call; any other runs ``model(batch, edits=mask_heads(mask))`` per mask.
    Both give the same bits.
    """
    device = device_of(model)
    shared = getattr(model, "masked_probabilities", None)
    out: list[list] = [[] for _ in masks]
    with torch.no_grad():
        for batch in batches:
            labels = _labels(batch, n_classes, device)
            if shared is not None:
                probs = shared(batch, masks)
            else:
                probs = [model(batch, edits=mask_heads(mask) if mask else None).probs for mask in masks]
            for k, p in enumerate(probs):
                out[k].append((p.argmax(-1) == labels).cpu())
    return [torch.cat(rows).cpu().numpy() for rows in out]


def _mcnemar(base: np.ndarray, masked: np.ndarray) -> tuple[int, int, float]:
    """(lost, gained, exact two-sided p): discordant pairs and the binomial test of them at 1/2."""
    lost = int((base & ~masked).sum())
    gained = int((~base & masked).sum())
    p = 1.0 if lost + gained == 0 else float(binomtest(gained, lost + gained, 0.5).pvalue)
    return lost, gained, p


def head_ablation(model, split, *, batch_size: int = 128, alpha: float = ALPHA) -> pd.DataFrame:
    """Each head masked alone (Michel et al.'s Table 1): one row per (layer, head), in site order.

    Columns: ``layer``, ``head``, ``site``, ``n`` (instances), ``base_accuracy`` (no head
    masked), ``accuracy`` (this head masked), ``change`` (accuracy - base_accuracy),
    ``lost`` / ``gained`` (instances right before and wrong after, and the reverse: the
    discordant pairs), ``p_value`` (exact McNemar test: two-sided binomial test of ``gained``
    among ``lost + gained`` at 1/2; 1 without discordant pairs) and ``significant``
    (p_value < ``alpha``). One forward pass per head and batch.
    """
    L, h = _shape(model)
    alpha = check_positive_number(alpha, "alpha")
    if alpha >= 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha!r}")
    batches = _batches(split, batch_size)
    n_classes = _n_classes(model)
    rows = []
    with eval_mode(model):
        base, *each = _correct(model, batches, [(), *([site] for site in model.sites)], n_classes)
        for site, masked in zip(model.sites, each):
            lost, gained, p = _mcnemar(base, masked)
            rows.append({"layer": site.layer, "head": site.head, "site": site, "n": len(base),
                         "base_accuracy": float(base.mean()), "accuracy": float(masked.mean()),
                         "change": float(masked.mean() - base.mean()), "lost": lost, "gained": gained,
                         "p_value": p, "significant": p < alpha})
    return pd.DataFrame(rows)


def _levels(fractions, n_heads: int) -> list[int]:
    """Heads to prune per level: 0..n_heads, or round-half-up(fraction x n_heads) per fraction."""
    if fractions is None:
        return list(range(n_heads + 1))
    if isinstance(fractions, numbers.Real):
        fractions = [fractions]
    if isinstance(fractions, (str, bytes, Mapping)) or not isinstance(fractions, Iterable):
        raise ValueError(f"fractions must be a list of numbers in [0, 1], got {type(fractions).__name__}")
    fractions = list(fractions)
    if not fractions:
        raise ValueError("fractions is empty")
    out = []
    for f in fractions:
        if isinstance(f, bool) or not isinstance(f, numbers.Real) or not 0 <= f <= 1:
            raise ValueError(f"fractions must be numbers in [0, 1], got {f!r}")
        out.append(int(np.floor(float(f) * n_heads + 0.5)))
    return out


def _ranked(model, importance) -> list[Site]:
    """The model's sites by increasing ``importance``, ties by site order."""
    L, h = _shape(model)
    scores = _check_importance(importance, L, h)
    sites = list(model.sites)
    order = np.argsort(np.array([scores[s.layer, s.head] for s in sites]), kind="stable")
    return [sites[i] for i in order]


def _curves(model, batches: list, rankings: list, levels: list) -> list[pd.DataFrame]:
    """Per ranking of the sites, the accuracy after pruning each level's first heads of it.

    Every distinct set of pruned heads runs once (curves share none pruned and all pruned),
    all of them in one :func:`_correct` call, so that sets that prune the same heads in the
    lower layers share those layers.
    """
    sets = {frozenset(ranked[:n]): None for ranked in rankings for n in levels}
    with eval_mode(model):
        for key, correct in zip(sets, _correct(model, batches, list(sets), _n_classes(model))):
            sets[key] = correct
    curves = []
    for ranked in rankings:
        rows = []
        for n_pruned in levels:
            correct = sets[frozenset(ranked[:n_pruned])]
            interval = uncertainty.bootstrap(correct.astype(np.float64))
            rows.append({"n_pruned": n_pruned, "fraction": n_pruned / len(ranked), "accuracy": float(correct.mean()),
                         "low": interval.low, "high": interval.high, "pruned": ranked[:n_pruned],
                         "correct": correct})
        curves.append(pd.DataFrame(rows))
    return curves


def prune_by_importance(model, split, importance, *, fractions=None, batch_size: int = 128) -> pd.DataFrame:
    """Heads masked cumulatively by increasing ``importance`` (Michel et al.'s Fig. 3): accuracy per level.

    ``importance``: (L, h) scores, e.g. :func:`head_importance` (normalised per layer); heads
    are ranked over the whole model, ties by site order (layer, then head). ``fractions``:
    None prunes 0, 1, 2, ..., L x h heads; else a list of shares of the heads, each pruning
    round-half-up(fraction x L x h) of them. One forward pass per level and batch (fewer
    with a model that shares layers between masks: :func:`_correct`).

    Columns: ``n_pruned``, ``fraction`` (n_pruned / (L x h)), ``accuracy``, ``low`` and
    ``high`` (the accuracy's 95% bootstrap interval over the instances), ``pruned`` (the list of
    masked Sites, least important first) and ``correct`` (the (N,) bool array behind the
    accuracy, for paired comparisons: :func:`prunable`). One row per level, in the order given.
    """
    ranked = _ranked(model, importance)
    levels = _levels(fractions, len(ranked))
    return _curves(model, _batches(split, batch_size), [ranked], levels)[0]


def prune_randomly(model, split, *, orders: int = 5, seed: int = 0, fractions=None,
                   batch_size: int = 128) -> pd.DataFrame:
    """:func:`prune_by_importance` in ``orders`` random orders: the band that importance must beat.

    Order r ranks the heads by ``numpy.random.default_rng([seed, r]).random((L, h))``. Returns
    one row per level: ``n_pruned``, ``fraction``, the ``accuracy`` averaged over the orders,
    its ``min`` and ``max`` over the orders, and ``curves`` (the list of the orders' frames is
    in ``frame.attrs["orders"]``). A set of pruned heads that several orders share (none, all)
    runs once.
    """
    orders = check_positive_int(orders, "orders")
    seed = check_seed(seed)
    L, h = _shape(model)
    levels = _levels(fractions, L * h)
    batches = _batches(split, batch_size)
    rankings = [_ranked(model, np.random.default_rng([seed, r]).random((L, h))) for r in range(orders)]
    curves = _curves(model, batches, rankings, levels)
    accuracy = np.stack([c["accuracy"].to_numpy() for c in curves])  # (orders, levels)
    frame = pd.DataFrame({"n_pruned": curves[0]["n_pruned"], "fraction": curves[0]["fraction"],
                          "accuracy": accuracy.mean(0), "min": accuracy.min(0), "max": accuracy.max(0)})
    frame.attrs["orders"] = curves
    return frame


def prunable(curve: pd.DataFrame, *, tolerance: float = 0.01) -> float:
    """The largest share of heads pruned before the accuracy falls below the unpruned model's beyond noise.

    Walks the levels of ``curve`` (:func:`prune_by_importance`, first row unpruned) in order and
    stops at the first whose accuracy is lower than the first row's by more than ``tolerance``
    *and* lower beyond noise: the paired 95% bootstrap interval of the difference, sentence by
    sentence (the same sentences at every level), excludes zero. A dip of a few sentences is
    noise, not a loss.
    """
    if not isinstance(curve, pd.DataFrame) or not {"fraction", "accuracy", "correct"} <= set(curve.columns):
        raise ValueError("curve must be prune_by_importance's frame (with fraction, accuracy and correct)")
    tolerance = check_positive_number(tolerance, "tolerance", allow_zero=True)
    base = curve["correct"].iloc[0].astype(np.float64)
    kept = float(curve["fraction"].iloc[0])
    for _, row in curve.iloc[1:].iterrows():
        now = row["correct"].astype(np.float64)
        lost = uncertainty.compare(now, base, paired=True).verdict == "lower"
        if lost and base.mean() - now.mean() > tolerance:
            break
        kept = float(row["fraction"])
    return kept
