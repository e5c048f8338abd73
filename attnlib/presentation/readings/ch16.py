"""Chapter 16 (audit your own model): what the prose reads off an attention audit's report.

Each function takes the chapter's :class:`attnlib.experiments.audit.AuditReport` (and what it
needs besides) and returns ``{glued name: value}`` for :func:`attnlib.presentation.glue.glue_all`.

The audited model is one model: a classifier checkpoint the chapter makes and loads back from
its folder, MiniLM's published encoder with its ``BertForSequenceClassification`` head trained on
other reviews by L2-regularised softmax regression with the encoder frozen, a convex fit whose
seed moves the result only within the solver's tolerance
(:func:`attnlib.models.pretrained.fine_tune_head`). There is no training seed to vary, so the
audit's intervals carry the noise of the audited reviews, and its verdicts are about this one
classifier.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ... import uncertainty
from .wording import listed, some_of

__all__ = ["classifier", "null_space", "flip_shares", "heads", "faithfulness"]


def _table(report, name: str) -> pd.DataFrame:
    tables = getattr(report, "tables", None)
    if not isinstance(tables, dict) or name not in tables:
        raise ValueError(f"report must be an AuditReport with a {name!r} table (attnlib.audit.audit)")
    return tables[name]


def _head(site) -> str:
    """A (layer, head) index of the audit's tables, 1-based as the figure draws it."""
    layer, head = site
    return f"layer {int(layer) + 1}, head {int(head) + 1}"


def classifier(report) -> dict[str, Any]:
    """The audited classifier's accuracy on the audited reviews, and what it means for the audit.

    ``ch16_acc`` (with ``_low``, ``_high``: Wilson's 95% interval over the reviews),
    ``ch16_n``, ``ch16_acc_span`` (the interval's width in points) and ``ch16_acc_meaning``: where
    the interval reaches chance (0.5, two balanced labels), the classifier is not shown to beat a
    coin on these reviews, and the audit explains the decisions of a classifier that may be
    guessing on many of them.
    """
    acc = _table(report, "summary").loc["accuracy"]
    mean, low, high = float(acc["mean"]), float(acc["low"]), float(acc["high"])
    out: dict[str, Any] = {"ch16_acc": mean, "ch16_acc_low": low, "ch16_acc_high": high,
                           "ch16_n": int(report.n_instances), "ch16_acc_span": round(100 * (high - low))}
    if low <= 0.5 <= high:
        out["ch16_acc_meaning"] = (
            "The interval reaches down to chance (50%): on these reviews the classifier is not shown to beat a "
            "coin. The audit explains this classifier's decisions, right or wrong, so what it finds describes a "
            "weak model that may be guessing on many of the reviews; a model that had learned the task could "
            "lean on other heads and other tokens, and nothing below says it would not")
    elif low > 0.5:
        out["ch16_acc_meaning"] = (
            "The interval lies above chance (50%): the audit explains a classifier that has learned something of "
            "the task, though with this few reviews how much is uncertain, and what it finds describes this "
            "classifier, not sentiment models in general")
    else:
        out["ch16_acc_meaning"] = (
            "The interval lies below chance (50%): the classifier's head is worse than a coin on these reviews, "
            "and the audit explains decisions that are mostly wrong")
    return out


def null_space(report, *, d_v: int, lengths) -> dict[str, Any]:
    """The identifiability check: which reviews give every head a null space, and how much of the
    attention lies in it.

    ``d_v``: the model's head dimension; ``lengths``: the audited reviews' word pieces without
    [CLS] and [SEP] (``report.explanations.lengths``). ``ch16_longer``: the share of reviews longer
    than ``d_v`` with [CLS] and [SEP]; ``ch16_null_heads``: the per-head shares ("the same 42% of
    the reviews for every head" or their range); ``ch16_null_mean`` and ``ch16_null_ci``: the
    summary's mean over heads and its 95% interval over the reviews ("21% to 63%"); ``ch16_r_min`` / ``_max`` and ``ch16_r_min_head``:
    the mean correlation of raw and effective attention, lowest and highest head.
    """
    ident = _table(report, "identifiability")
    line = _table(report, "summary").loc["sentences whose head has a null space (share; mean over heads)"]
    share = ident["null space (share)"].astype(float)
    r = ident["raw vs effective r (mean)"].astype(float)
    lengths = np.asarray(lengths)
    return {
        "ch16_d_v": int(d_v),
        "ch16_longer": float(np.mean(lengths + 2 > d_v)),
        "ch16_null_heads": (f"the same {share.min():.0%} of the reviews for every head" if share.nunique() == 1
                            else f"{share.min():.0%} to {share.max():.0%} of the reviews, by head"),
        "ch16_null_mean": float(line["mean"]),
        "ch16_null_ci": f"{float(line['low']):.0%} to {float(line['high']):.0%}",
        "ch16_r_min": float(r.min()), "ch16_r_max": float(r.max()), "ch16_r_min_head": _head(r.idxmin()),
    }


def flip_shares(report) -> pd.DataFrame:
    """(reviews, heads): per permuted review, the share of its permutations that flip the
    prediction, one column per head (a (layer, head) MultiIndex), from ``report.permutation``."""
    per_site = getattr(report, "permutation", None)
    if not isinstance(per_site, dict) or not per_site:
        raise ValueError("report must be an AuditReport with its permutation results (report.permutation)")
    columns = {}
    for site, res in per_site.items():
        if getattr(res, "all_predicted", None) is None:
            raise ValueError(f"the permutation of {site} kept no predictions (all_predicted)")
        columns[(site.layer, site.head)] = np.mean(np.asarray(res.all_predicted) != np.asarray(res.predicted)[:, None],
                                                   axis=1)
    frame = pd.DataFrame(columns)
    frame.columns = pd.MultiIndex.from_tuples(frame.columns, names=["layer", "head"])
    return frame


def _t_p(values: np.ndarray) -> float:
    """Two-sided p-value of a one-sample t test of the mean of ``values`` against 0 (n - 1 df):
    1 where every value is 0, 0 where every value is the same positive number."""
    from scipy import stats

    values = np.asarray(values, dtype=np.float64)
    mean = float(values.mean())
    if mean == 0:
        return 1.0
    sd = float(values.std(ddof=1)) if len(values) > 1 else 0.0
    if sd <= 1e-12 * abs(mean):  # every value the same (up to rounding): no spread to test against
        return 0.0
    t = abs(mean) / (sd / np.sqrt(len(values)))
    return float(2 * stats.t.sf(t, len(values) - 1))


def heads(report, *, alpha: float = 0.05, seed: int = 0) -> dict[str, Any]:
    """The permutation check: does any single head's attention carry the decision?

    Per head, each permuted review's share of flipped predictions (:func:`flip_shares`); its mean
    over the reviews is tested against 0 with a one-sample t test over the reviews (the reviews
    are the sampled units; a review's permutations are not independent of one another), and the
    heads' p-values are corrected with Holm's method (:func:`attnlib.uncertainty.holm`), as
    Chapter 12 corrects its per-head tests: the largest of 72 shares, each from a dozen reviews,
    is large by chance alone. Glued: ``ch16_tvd_max`` and ``ch16_tvd_head``, the largest median
    TVD; ``ch16_flip_max``, ``ch16_flip_head`` and ``ch16_flip_ci`` (its 95% bootstrap interval
    over the reviews); ``ch16_n_heads``, ``ch16_n_permuted``, ``ch16_n_permutations``;
    ``ch16_heads_verdict``, the sentence: "some heads matter" only where Holm rejects.
    """
    perm = _table(report, "permutation")
    flips = flip_shares(report)
    p = np.array([_t_p(flips[c].to_numpy()) for c in flips.columns])
    changed = uncertainty.holm(p, alpha=alpha)
    means = flips.mean()
    top = means.idxmax()
    interval = uncertainty.bootstrap(flips[top].to_numpy(), seed=seed)
    n_heads, n_reviews = flips.shape[1], flips.shape[0]
    first = next(iter(report.permutation.values()))
    out: dict[str, Any] = {
        "ch16_tvd_max": float(perm["median TVD"].max()), "ch16_tvd_head": _head(perm["median TVD"].idxmax()),
        "ch16_flip_max": float(means.max()), "ch16_flip_head": _head(top),
        "ch16_flip_ci": f"{interval.low:.0%} to {interval.high:.0%}",
        "ch16_n_heads": n_heads, "ch16_n_permuted": n_reviews,
        "ch16_n_permutations": int(np.asarray(first.all_predicted).shape[1]),
        "ch16_alpha": f"{alpha:.0%}",
    }
    k = int(changed.sum())
    tests = (f"once the {n_heads} tests are corrected for (Holm's method at {alpha:.0%}, as Chapter 12 does, "
             "each a t test over the reviews)")
    if k == 0:
        out["ch16_heads_verdict"] = (
            f"but {tests}, no head's flips are beyond noise: with {n_reviews} reviews and "
            f"{out['ch16_n_permutations']} permutations per head, the audit cannot say that any single head's "
            "attention carries the decision, nor that none does")
    else:
        named = [_head(c) for c, hit in zip(flips.columns, changed) if hit]
        out["ch16_heads_verdict"] = (
            f"and {tests}, permuting {some_of(k, n_heads, 'heads')} flips predictions beyond noise "
            f"({listed(named) if k <= 4 else listed(named[:4]) + ' and others'}): some heads matter")
    return out


def faithfulness(report) -> dict[str, Any]:
    """The faithfulness ranking's reading: which methods rank first, and where attention stands.

    ``ch16_comp_first``: the method(s) ranked first by comprehensiveness, as a clause ("leave-one-out
    ranks first: deleting its top tokens" / "a and b rank first: deleting their top tokens");
    ``ch16_suff_first``: the sufficiency sentence (a tie for first place is said to be one);
    ``ch16_att_comp_rank``, ``ch16_att_suff_rank``, ``ch16_att_comp``, ``ch16_random_comp``.
    """
    faith = _table(report, "faithfulness")
    firsts = {m: list(faith.index[faith[f"{m} rank"].astype(str).str.rstrip("=") == "1"])
              for m in ("comprehensiveness", "sufficiency")}
    best, sufficient = firsts["comprehensiveness"], firsts["sufficiency"]
    if not best or not sufficient:
        raise ValueError("the faithfulness table must rank some method first in each metric")
    many = len(best) > 1
    att, rnd = faith.loc["attention"], faith.loc["random"]
    return {
        "ch16_comp_first": (f"{listed(best)} {'rank' if many else 'ranks'} first: deleting "
                            f"{'their' if many else 'its'} top tokens"),
        "ch16_suff_first": (f"By sufficiency, {len(sufficient)} of the {len(faith)} methods tie for first place: on "
                            f"{report.n_instances} reviews the intervals overlap too much to order them."
                            if len(sufficient) > 1 else f"By sufficiency, {sufficient[0]} alone ranks first."),
        "ch16_att_comp_rank": str(att["comprehensiveness rank"]),
        "ch16_att_suff_rank": str(att["sufficiency rank"]),
        "ch16_att_comp": float(att["comprehensiveness"]), "ch16_random_comp": float(rnd["comprehensiveness"]),
    }
