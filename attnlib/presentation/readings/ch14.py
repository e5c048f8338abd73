"""Chapter 14 (rollout and flow): the numbers and clauses its prose reads off the layer-by-layer
correlations with importance and off the synthetic task's known rationale, over every training
seed of the two transformers.

Each function takes the chapter's results and returns ``{glued name: value}`` (or a table a
reader sees). Per-sentence values come stacked seeds x sentences (one row per training seed,
the same sentences in every row, as :func:`attnlib.seeds.run_over_seeds` picks them); a mean
carries its 95% interval over seeds and sentences (:func:`attnlib.uncertainty.over_seeds`), a
comparison is :func:`attnlib.uncertainty.compare_over_seeds`, which says in how many seeds it
holds, and methods are ranked with :func:`attnlib.experiments.explanations.rank_over_seeds`:
one beats another only where the verdict over seeds says so, and they tie where the difference
is within noise or the seeds disagree.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ... import published, uncertainty
from ...experiments import faithfulness
from ...experiments.explanations import rank_over_seeds
from .wording import listed, require_columns

__all__ = ["SYNTHETIC_METHODS", "beside_abnar", "abnar", "correlations", "recovery_table", "rationale",
           "ties_table", "flow_ties", "cls_kept_table", "cls_kept", "setup"]

#: The three relevance methods, and the short names the glued names use.
_METHODS = (("raw attention", "raw"), ("rollout", "roll"), ("flow", "flow"))

#: The synthetic task's methods, as the recovery table lists them (``random`` last: the floor).
SYNTHETIC_METHODS = ("raw attention", "rollout", "flow", "blank-out", "gradient", "random")

_TABLE = ("measure", "method", "layer", "mean", "low", "high")


def _stacked(rho: dict) -> dict:
    """``{(measure, method): (S, N, L)}``; an (N, L) array (one model) gets a seed axis of 1."""
    out = {}
    for key, values in rho.items():
        array = np.asarray(values, dtype=np.float64)
        if array.ndim == 2:
            array = array[None]
        if array.ndim != 3:
            raise ValueError(f"rho[{key!r}] must be (seeds, sentences, layers), got shape {array.shape}")
        out[key] = array
    return out


def _ours_header(table: pd.DataFrame) -> str:
    n_layers = int(table["layer"].max())
    seeds = int(table["seeds"].max()) if "seeds" in table else 1
    return (f"ours (rt-polarity, {n_layers} layers, {seeds} seeds), mean ±95%" if seeds > 1
            else f"ours (rt-polarity, {n_layers} layers), mean ±95%")


def beside_abnar(table: pd.DataFrame, paper: dict) -> pd.DataFrame:
    """Our mean rho per layer, with the half-width of its 95% interval ("0.19 ±0.03"), beside Abnar &
    Zuidema's Tables 1-2 per layer.

    ``table``: :func:`attnlib.flow.correlations_over_seeds`' (or :func:`~attnlib.flow.layer_correlations`')
    frame (measure, method, layer, mean, low, high; with ``seeds``, the header says how many);
    ``paper``: :data:`attnlib.published.ABNAR_CORRELATION` ({(measure, method): one value per
    layer}). Rows (measure, method); columns ours L1.., then theirs L1.. (their model has 6 layers).
    """
    require_columns(table, _TABLE, "table")
    cells = table.assign(cell=_cell_text(table))
    ours = cells.pivot(index=["measure", "method"], columns="layer", values="cell")
    ours.columns = [f"L{c}" for c in ours.columns]
    theirs = pd.DataFrame({key: [f"{p.value:.2f}" for p in values] for key, values in paper.items()},
                          index=[f"L{i}" for i in range(1, 1 + max(len(v) for v in paper.values()))]).T
    theirs.index.names = ["measure", "method"]
    both = pd.concat({_ours_header(table): ours,
                      f"A&Z (agreement task, {len(theirs.columns)} layers)": theirs}, axis=1)
    return both.fillna("n/a")


def _as_printed(value: float) -> str:
    """A correlation as A&Z's tables print it: two decimals, no leading zero (".69", "−.11")."""
    text = f"{abs(value):.2f}".lstrip("0")
    return ("−" if value < 0 else "") + text


def abnar(layers: int | None = None) -> dict[str, Any]:
    """Abnar & Zuidema's numbers the prose quotes, from :mod:`attnlib.published`, as printed.

    ``ch14_az_{loo,gradient}_{raw,roll,flow}_{1,last}``: mean Spearman's rho with blank-out
    (Table 1) or input gradients (Table 2) after layer 1 and the last (6th) layer of their
    agreement model; ``ch14_az_sst_low`` / ``_high``: the range of every method and layer
    on DistilBERT / SST-2 (Table 3). With ``layers`` (our model's depth, 1 to 6) also
    ``ch14_az_{measure}_{method}_at``: theirs after that layer, to set beside our last layer.
    """
    short = {"raw attention": "raw", "rollout": "roll", "flow": "flow"}
    depth = len(next(iter(published.ABNAR_CORRELATION.values())))
    if layers is not None and (isinstance(layers, bool) or not isinstance(layers, (int, np.integer))
                               or not 1 <= layers <= depth):
        raise ValueError(f"layers must be an int from 1 to {depth} (their model's layers), got {layers!r}")
    out: dict[str, Any] = {}
    for (measure, method), values in published.ABNAR_CORRELATION.items():
        out[f"ch14_az_{measure}_{short[method]}_1"] = _as_printed(values[0].value)
        out[f"ch14_az_{measure}_{short[method]}_last"] = _as_printed(values[-1].value)
        if layers is not None:
            out[f"ch14_az_{measure}_{short[method]}_at"] = _as_printed(values[layers - 1].value)
    sst = [v.value for by_layer in published.ABNAR_SST.values() for v in by_layer.values()]
    out["ch14_az_sst_low"], out["ch14_az_sst_high"] = _as_printed(min(sst)), _as_printed(max(sst))
    return out

def _clipped(iv: uncertainty.Interval, low: float = 0.0, high: float = 1.0) -> uncertainty.Interval:
    """An interval with its ends kept where the quantity lies (an average precision in [0, 1])."""
    return uncertainty.Interval(iv.estimate, max(iv.low, low), min(iv.high, high), iv.n, iv.level, method=iv.method)


def _held(change: uncertainty.SeedComparison) -> str:
    """:meth:`~attnlib.uncertainty.SeedComparison.seeds_text`, with "in none of 3 seeds alone"
    said in full: "beyond noise in none of the 3 seeds alone"."""
    text = change.seeds_text()
    return "beyond noise " + text.replace("in none of ", "in none of the ") if text.startswith("in none of") else text


def _one_way(change: uncertainty.SeedComparison) -> str | None:
    """"higher" or "lower" when every seed shows that direction beyond noise on its own and yet the
    interval over seeds and sentences includes zero (the seeds agree on the sign, not the size)."""
    if change.one_model or change.verdict != uncertainty.WITHIN_NOISE:
        return None
    return next((v for v in ("higher", "lower") if change.seeds_showing(v) == change.n_seeds), None)


def _depth(change: uncertainty.SeedComparison) -> str:
    """How a method's rho moved from layer 1 to the last: "rose" or "fell" only over seeds and sentences."""
    d = change.difference
    where = f"95% interval of the change {d.range_text(3)}, over seeds and sentences; {_held(change)}"
    each = _one_way(change)
    if each:
        return (f"{'rose' if each == 'higher' else 'fell'} in each of the {change.n_seeds} models on its own, "
                f"by amounts so different that the 95% interval of the change over seeds and sentences, "
                f"{d.range_text(3)}, includes zero")
    return change.says(f"rose by {d.estimate:.3f} ({where})", f"fell by {-d.estimate:.3f} ({where})",
                       tie=f"changed {uncertainty.WITHIN_NOISE} ({where})",
                       disagree=f"rose in some seeds and fell in others ({_held(change)})")


def _best(ranked: pd.DataFrame) -> str:
    """The methods ranked first: one name, or several "tied within noise" (or where the seeds disagree)."""
    top = list(ranked.index[ranked["rank"] == 1])
    if len(top) == 1:
        return top[0]
    why = "within noise, or where the seeds disagree" if ranked.loc[top, "disagree"].any() else "within noise"
    return listed(top) + f", tied {why}"


def _best_clause(ranked: pd.DataFrame) -> str:
    """"the best is rollout"; "the best are rollout and flow, tied within noise"; or, when every
    method shares the first place, "no map is best: all three tie, ..."."""
    top = list(ranked.index[ranked["rank"] == 1])
    if len(top) == 1:
        return f"the best is {top[0]}"
    if len(top) == len(ranked):
        why = "within noise, or where the seeds disagree" if ranked["disagree"].any() else "within noise"
        return f"no map is best: all {len(top)} tie, {why}"
    return f"the best are {_best(ranked)}"


def _seed_values(values: np.ndarray) -> str:
    """Each seed's mean, in seed order: "-0.01, 0.53 and 0.48"."""
    return listed(f"{v:.2f}" for v in np.nanmean(values, axis=1))


def correlations(table: pd.DataFrame, rho: dict, *, n: int, seed: int = 0) -> dict[str, Any]:
    """The reading of the correlations with blank-out and gradients, first and last layer.

    ``table``: :func:`attnlib.flow.correlations_over_seeds`' frame (measure, method, layer, mean,
    low, high); ``rho``: its per-sentence values ``{(measure, method): (S, N, L)}`` (seeds x
    sentences x layers; an (N, L) array is one model); ``n``: the number of sentences. A method
    is "best" or "agrees better" only where the verdict over seeds and sentences says so
    (:func:`attnlib.uncertainty.compare_over_seeds`, paired: every seed's methods explain one
    model), and the clause says in how many seeds it holds. ``ch14_{measure}_{method}_depth``:
    how its rho moved from layer 1 to the last, "rose" or "fell" only beyond noise;
    ``ch14_{measure}_{method}_seeds``: its last-layer mean in each seed's model.
    """
    require_columns(table, _TABLE, "table")
    rho = _stacked(rho)
    last = table[table.layer == table.layer.max()].set_index(["measure", "method"])
    first = table[table.layer == 1].set_index(["measure", "method"])
    n_seeds = next(iter(rho.values())).shape[0]
    out: dict[str, Any] = {"ch14_n": n, "ch14_layers": int(table.layer.max()), "ch14_n_seeds": n_seeds}
    for measure in ("loo", "gradient"):
        for method, key in _METHODS:
            for where, frame in (("last", last), ("first", first)):
                out[f"ch14_{measure}_{key}_{where}"] = float(frame.loc[(measure, method), "mean"])
        for method, key in _METHODS:
            row, top = last.loc[(measure, method)], first.loc[(measure, method)]
            out[f"ch14_{measure}_{key}_ci"] = f"[{row['low']:.2f}, {row['high']:.2f}]"
            out[f"ch14_{measure}_{key}_ci_first"] = f"[{top['low']:.2f}, {top['high']:.2f}]"
            values = rho[measure, method]
            out[f"ch14_{measure}_{key}_depth"] = _depth(
                uncertainty.compare_over_seeds(values[:, :, -1], values[:, :, 0], seed=seed))
        # the last layer's rho: the methods compared on the same sentences and models
        at_last = {m: rho[measure, m][:, :, -1] for m, _ in _METHODS}
        for method, key in _METHODS:
            out[f"ch14_{measure}_{key}_seeds"] = _seed_values(at_last[method])
        ranked = rank_over_seeds(at_last, seed=seed)
        out[f"ch14_{measure}_best"] = _best(ranked)
        out[f"ch14_{measure}_best_clause"] = _best_clause(ranked)
        beats = []
        for m in ("rollout", "flow"):
            c = uncertainty.compare_over_seeds(at_last[m], at_last["raw attention"], seed=seed)
            if c.verdict == "higher":
                beats.append(f"{m} ({_held(c)})")
        out[f"ch14_{measure}_beats"] = (
            listed(beats) + (" agree" if len(beats) > 1 else " agrees") if beats
            else "neither rollout nor flow agrees"
        )
    return out


def _check_synthetic(per_seed, rationales) -> list:
    per_seed = list(per_seed)
    if not per_seed:
        raise ValueError("per_seed must hold one {method: scores} dict per training seed")
    for k, scores in enumerate(per_seed):
        if not isinstance(scores, dict) or "random" not in scores:
            raise ValueError(f"per_seed[{k}] must be a dict of method -> per-sentence scores, with 'random'")
        for m, s in scores.items():
            if len(s) != len(rationales):
                raise ValueError(f"per_seed[{k}][{m!r}] scores {len(s)} sentences, the rationales {len(rationales)}")
    return per_seed


def _stack(per_seed: list, rationales, column: str, methods=None) -> dict:
    """{method: (S, N)}: one per-sentence column of :func:`attnlib.faithfulness.rationale_ranking`."""
    methods = methods or list(per_seed[0])
    return {m: np.stack([faithfulness.rationale_ranking(scores[m], rationales)[column].to_numpy(dtype=float)
                         for scores in per_seed]) for m in methods}


def recovery_table(per_seed, rationales, *, seed: int = 0) -> pd.DataFrame:
    """The synthetic task's recovery table: each method's mean precision@k, average precision
    (with its 95% interval over seeds and sentences) and ROC-AUC against the known markers.

    ``per_seed``: one ``{method: per-sentence scores}`` per training seed
    (:func:`attnlib.flow.rationale_scores`); ``rationales``: the sentences' marker masks. Rows in
    :data:`SYNTHETIC_METHODS`' order (those present).
    """
    per_seed = _check_synthetic(per_seed, rationales)
    methods = [m for m in SYNTHETIC_METHODS if m in per_seed[0]] + [m for m in per_seed[0]
                                                                     if m not in SYNTHETIC_METHODS]
    ranked = {k: {m: faithfulness.rationale_ranking(scores[m], rationales) for m in methods}
              for k, scores in enumerate(per_seed)}
    rows = {}
    for m in methods:
        stack = {c: np.stack([ranked[k][m][c].to_numpy(dtype=float) for k in ranked])
                 for c in ("precision@k", "average precision", "AUC")}
        ap = _clipped(uncertainty.over_seeds(stack["average precision"], seed=seed))
        rows[m] = {"precision@k": float(np.nanmean(stack["precision@k"])),
                   "average precision [95% interval]": ap.format(3),
                   "AUC": float(np.nanmean(stack["AUC"]))}
    frame = pd.DataFrame(rows).T
    frame.index.name = "method"
    return frame


def rationale(per_seed, rationales, *, accuracy, seed: int = 0) -> dict[str, Any]:
    """The reading of the synthetic task: which method's ranking finds the known markers.

    ``per_seed``: one ``{method: per-sentence scores}`` per training seed (raw attention,
    rollout, flow, blank-out, gradient, random: :func:`attnlib.flow.rationale_scores`);
    ``rationales``: the sentences' marker masks; ``accuracy``: the synthetic models' test
    accuracy, one per seed. The best method is ranked on the per-sentence average precision
    over seeds and sentences, ties shared (``random`` left out); ``ch14_syn_blank_out`` says
    whether blank-out is among the best.
    """
    per_seed = _check_synthetic(per_seed, rationales)
    accuracy = np.atleast_1d(np.asarray(accuracy, dtype=float))
    if len(accuracy) != len(per_seed):
        raise ValueError(f"accuracy needs one value per seed ({len(per_seed)}), got {len(accuracy)}")
    ap = _stack(per_seed, rationales, "average precision")
    means = {m: float(np.nanmean(np.nanmean(v, axis=1))) for m, v in ap.items()}
    ranked = rank_over_seeds({m: v for m, v in ap.items() if m != "random"}, seed=seed)
    out: dict[str, Any] = {
        "ch14_syn_n_seeds": len(per_seed),
        "ch14_syn_acc": float(accuracy.mean()),
        "ch14_syn_acc_low": float(accuracy.min()),
        "ch14_syn_acc_high": float(accuracy.max()),
        "ch14_syn_best": _best(ranked),
        "ch14_syn_best_ap": max(v for m, v in means.items() if m != "random"),
    }
    top = list(ranked.index[ranked["rank"] == 1])
    out["ch14_syn_blank_out"] = (
        "; blank-out is among them" if "blank-out" in top else
        ": agreeing with blank-out is not the same as finding the words that decide"
    )
    for name, key in (*_METHODS, ("random", "random")):
        out[f"ch14_syn_{key}_ap"] = means[name]
    return out


#: The columns of :func:`ties_table`, from :func:`attnlib.faithfulness.rationale_ties`' columns.
_TIES = {
    "average precision": "AP as scored (ties enter together)",
    "AP, ties at random": "AP, ties broken at random",
    "AP, ties to the rationale": "AP, ties broken for the markers",
    "top tied": "sentences whose top score is tied",
    "share tied at the top": "words tied at the top",
    "rationale at the top": "markers among them",
}


def ties_table(per_seed, rationales, methods=("raw attention", "rollout", "flow")) -> pd.DataFrame:
    """How much of each method's average precision its ties decide
    (:func:`attnlib.faithfulness.rationale_ties`), means over seeds and sentences: rows
    ``methods``, columns the AP as scored, with its ties broken at random (expected) and in the
    markers' favour, the share of sentences whose top score several words share, the share of a
    sentence's words that share it, and the share of the markers among them."""
    per_seed = _check_synthetic(per_seed, rationales)
    ties = [{m: faithfulness.rationale_ties(scores[m], rationales) for m in methods} for scores in per_seed]
    rows = {m: {label: float(np.nanmean([np.nanmean(t[m][c]) for t in ties])) for c, label in _TIES.items()}
            for m in methods}
    frame = pd.DataFrame(rows).T
    frame.index.name = "method"
    return frame


def flow_ties(per_seed, rationales, *, seed: int = 0) -> dict[str, Any]:
    """Why flow's average precision is low: its ties, read over seeds and sentences.

    ``per_seed``, ``rationales``: as for :func:`rationale`. Glued: the share of sentences whose
    top flow is tied (``ch14_tie_sentences``), the share of a sentence's words tied there
    (``ch14_tie_words``) and of its markers (``ch14_tie_markers``); flow's AP as scored, with its
    ties broken at random (expected, ``ch14_tie_random`` and its interval) and in the markers'
    favour (``ch14_tie_favour``); the share of sentences where flow puts some other word strictly
    above a marker (``ch14_tie_strict``); what the ties cost (``ch14_tie_cost``: the favour AP
    against the AP as scored); and ``ch14_tie_verdict``: flow with its ties broken for the
    markers against the best other method's AP (raw attention, rollout, blank-out, gradient).
    """
    per_seed = _check_synthetic(per_seed, rationales)
    if "flow" not in per_seed[0]:
        raise ValueError("per_seed has no flow scores")
    ties = [faithfulness.rationale_ties(scores["flow"], rationales) for scores in per_seed]
    tied = {c: np.stack([t[c].to_numpy(dtype=float) for t in ties]) for c in _TIES}
    scored, at_random, favour = tied["average precision"], tied["AP, ties at random"], tied["AP, ties to the rationale"]
    strict = np.where(np.isnan(favour), np.nan, (favour < 1 - 1e-12).astype(float))
    random_iv = _clipped(uncertainty.over_seeds(at_random, seed=seed))
    favour_iv = _clipped(uncertainty.over_seeds(favour, seed=seed))
    strict_iv = uncertainty.over_seeds(strict, seed=seed)
    cost = uncertainty.compare_over_seeds(favour, scored, seed=seed)
    others = _stack(per_seed, rationales, "average precision",
                    [m for m in ("raw attention", "rollout", "blank-out", "gradient") if m in per_seed[0]])
    best = max(others, key=lambda m: np.nanmean(others[m]))
    against = uncertainty.compare_over_seeds(favour, others[best], seed=seed)
    fav, theirs = favour_iv.estimate, float(np.nanmean(others[best]))
    verdict = against.says(
        f"With its ties broken for the markers, flow's average precision is {fav:.3f}, above "
        f"{best}'s {theirs:.3f} ({_held(against)}): its order is right, and the ties alone cost it",
        f"Even with its ties broken for the markers, flow's average precision ({fav:.3f}) stays below "
        f"{best}'s ({theirs:.3f}; {_held(against)}): the ties explain part of its low score, "
        f"and words it ranks strictly above a marker the rest",
        tie=f"With its ties broken for the markers, flow's average precision is {fav:.3f}, within noise "
            f"of {best}'s {theirs:.3f} ({_held(against)}): its order is right, and the ties alone cost it",
        disagree=f"With its ties broken for the markers, flow's average precision is {fav:.3f}; whether "
                 f"that reaches {best}'s {theirs:.3f} depends on the seed ({_held(against)})",
    )
    d = cost.difference
    top_tied = {m: float(np.mean([np.nanmean(faithfulness.rationale_ties(scores[m], rationales)["top tied"])
                                  for scores in per_seed])) for m in ("raw attention", "rollout") if m in per_seed[0]}
    elsewhere = (
        f"{listed(top_tied)} have no such ties (in no sentence do two words share their top score)"
        if not any(top_tied.values()) else
        listed(f"{m} ties at the top in {v:.0%} of the sentences" for m, v in top_tied.items())
    )
    summary = against.says(
        f"flow's low average precision ({float(np.nanmean(scored)):.3f}) is its ties': broken for the "
        f"markers, it reaches {fav:.3f}, above {best}'s {theirs:.3f}",
        f"flow's low average precision ({float(np.nanmean(scored)):.3f}) is partly its ties': broken for "
        f"the markers, it reaches {fav:.3f}, still below {best}'s {theirs:.3f}",
        tie=f"flow's low average precision ({float(np.nanmean(scored)):.3f}) is its ties': broken for the "
            f"markers, it reaches {fav:.3f}, within noise of {best}'s {theirs:.3f}",
        disagree=f"flow's low average precision ({float(np.nanmean(scored)):.3f}) is at least partly its "
                 f"ties': broken for the markers, it reaches {fav:.3f}",
    )
    return {
        "ch14_tie_sentences": float(np.nanmean(tied["top tied"])),
        "ch14_tie_words": float(np.nanmean(tied["share tied at the top"])),
        "ch14_tie_markers": float(np.nanmean(tied["rationale at the top"])),
        "ch14_tie_ap": float(np.nanmean(scored)),
        "ch14_tie_random": random_iv.estimate,
        "ch14_tie_random_ci": random_iv.range_text(3),
        "ch14_tie_favour": fav,
        "ch14_tie_favour_ci": favour_iv.range_text(3),
        "ch14_tie_strict": strict_iv.estimate,
        "ch14_tie_strict_ci": f"{strict_iv.low:.0%} to {strict_iv.high:.0%}",
        "ch14_tie_cost": cost.says(
            f"{d.estimate:.3f} of average precision (95% interval {d.range_text(3)} over seeds and "
            f"sentences; {_held(cost)})",
            f"nothing: broken for the markers they lower it ({d.range_text(3)})",
            tie=f"no average precision beyond noise ({d.range_text(3)}; {_held(cost)})",
            disagree=f"average precision in some seeds only ({_held(cost)})"),
        "ch14_tie_verdict": verdict,
        "ch14_tie_summary": summary,
        "ch14_tie_others": elsewhere[0].upper() + elsewhere[1:],
    }


def _cell_text(table: pd.DataFrame) -> list[str]:
    """Each row's mean rho with the half-width of its 95% interval: "0.19 ±0.03"."""
    return [f"{m:.2f} ±{uncertainty.Interval(m, lo, h, 0).half_width:.2f}"
            for m, lo, h in zip(table["mean"], table["low"], table["high"])]


def _cells(table: pd.DataFrame) -> pd.DataFrame:
    """Mean rho "0.19 ±0.03" (half-width of the 95% interval), rows method, columns L1.."""
    cells = table.assign(cell=_cell_text(table))
    out = cells.pivot(index="method", columns="layer", values="cell")
    out.columns = [f"L{c}" for c in out.columns]
    return out.reindex([m for m, _ in _METHODS])


def cls_kept_table(words: pd.DataFrame, kept: pd.DataFrame, *, measure: str = "loo") -> pd.DataFrame:
    """Mean rho with blank-out per layer, correlated over the words alone (the book) and over
    every position with [CLS] and [SEP] kept (Abnar & Zuidema's notebook), one block each.

    ``words``, ``kept``: :func:`attnlib.flow.correlations_over_seeds`' (or ``layer_correlations``')
    tables for the same sentences,
    from ``positions="words"`` and ``positions="all"``. Rows (positions, method); columns L1..
    """
    for frame, what in ((words, "words"), (kept, "kept")):
        require_columns(frame, ("measure", "method", "layer", "mean", "low", "high"), what)
        if measure not in set(frame["measure"]):
            raise ValueError(f"{what} has no rows for measure {measure!r}")
    blocks = {"words only": _cells(words[words.measure == measure]),
              "[CLS] and [SEP] kept": _cells(kept[kept.measure == measure])}
    both = pd.concat(blocks, names=["positions", "method"])
    return both.fillna("n/a")

def cls_kept(words: pd.DataFrame, kept: pd.DataFrame, rho_kept: dict, reference_kept, *,
             seed: int = 0) -> dict[str, Any]:
    """The reading of the [CLS]-kept correlations: A&Z's layer-1 gap between raw attention and
    rollout, and why it appears.

    ``words``, ``kept``: :func:`attnlib.flow.correlations_over_seeds`' tables (``positions="words"``
    and ``"all"``, the same sentences); ``rho_kept``: the kept positions' per-sentence rho
    ``{("loo", method): (S, N, L)}``; ``reference_kept``: the blank-out importance with
    ``positions="all"``, one :class:`~attnlib.experiments.importance.ImportanceResult` per seed
    (for the share of sentences where blank-out ranks [CLS] first). The gap is read paired,
    over seeds and sentences.
    """
    require_columns(kept, _TABLE, "kept")
    require_columns(words, _TABLE, "words")
    rho_kept = _stacked(rho_kept)
    firsts = [np.asarray(r.padded("loo")).argmax(1) == 0 for r in reference_kept]
    if not firsts or any(f.ndim != 1 or not len(f) for f in firsts):
        raise ValueError("reference_kept must hold one importance result (positions='all') per seed")
    first_kept = np.stack(firsts).astype(float)
    mean = kept[kept.measure == "loo"].set_index(["method", "layer"])["mean"]
    mean_words = words[words.measure == "loo"].set_index(["method", "layer"])["mean"]
    last = int(kept["layer"].max())
    raw1, roll1 = rho_kept["loo", "raw attention"][:, :, 0], rho_kept["loo", "rollout"][:, :, 0]
    gap = uncertainty.compare_over_seeds(raw1, roll1, seed=seed)
    d, held = gap.difference, _held(gap)
    each = _one_way(gap)
    clause = (
        f"{'raw attention' if each == 'higher' else 'rollout'} agrees better in each of the {gap.n_seeds} "
        f"models on its own, but by amounts so different that the 95% interval of the difference over "
        f"seeds and sentences, {d.low:.2f} to {d.high:.2f}, includes zero"
    ) if each else gap.says(
        f"raw attention agrees better, by {d.estimate:.2f} (95% interval {d.low:.2f} to {d.high:.2f} over "
        f"seeds and sentences; {held}): the gap of their Table 1 appears",
        f"rollout agrees better, by {-d.estimate:.2f} (95% interval {-d.high:.2f} to {-d.low:.2f} over seeds "
        f"and sentences; {held}), the opposite of their Table 1",
        tie=f"the two are within noise of each other (95% interval of the difference {d.low:.2f} to "
            f"{d.high:.2f} over seeds and sentences; {held}), unlike their Table 1",
        disagree=f"which agrees better depends on the seed ({held}), unlike their Table 1",
    )
    return {
        "ch14_kept_raw1": float(mean["raw attention", 1]),
        "ch14_kept_roll1": float(mean["rollout", 1]),
        "ch14_kept_gap": clause,
        "ch14_kept_cls_first": uncertainty.over_seeds(first_kept, seed=seed).estimate,
        "ch14_kept_last": last,
        "ch14_kept_roll_last": float(mean["rollout", last]),
        "ch14_kept_flow_last": float(mean["flow", last]),
        "ch14_kept_raw_last": float(mean["raw attention", last]),
        "ch14_words_roll1": float(mean_words["rollout", 1]),
        "ch14_words_roll_last": float(mean_words["rollout", last]),
    }


def setup(*, n_train: int, sets: Mapping) -> dict[str, Any]:
    """The synthetic task's training sentences, its seeds, and the models the chapter trains in all
    (``sets``: task -> SeedSet)."""
    return {"ch14_syn_train": f"{n_train:,}", "ch14_seeds": len(sets["synthetic"]),
            "ch14_models": sum(len(s) for s in sets.values())}
