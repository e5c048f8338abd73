"""Chapter 14 (rollout and flow): the numbers and clauses its prose reads off the layer-by-layer
correlations with importance and off the synthetic task's known rationale.

Each function takes the chapter's results and returns ``{glued name: value}``.
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from ... import uncertainty
from ...experiments import faithfulness
from .wording import listed, require_columns

__all__ = ["beside_abnar", "correlations", "rationale"]

#: The three relevance methods, and the short names the glued names use.
_METHODS = (("raw attention", "raw"), ("rollout", "roll"), ("flow", "flow"))


def beside_abnar(table: pd.DataFrame, paper: dict) -> pd.DataFrame:
    """Our mean rho per layer, with the half-width of its 95% interval ("0.19 ±0.03"), beside Abnar &
    Zuidema's Tables 1-2 per layer.

    ``table``: :func:`attnlib.flow.layer_correlations`' frame (measure, method, layer, mean, low,
    high); ``paper``: :data:`attnlib.published.ABNAR_CORRELATION` ({(measure, method): one value per
    layer}). Rows (measure, method); columns ours L1.., then theirs L1.. (their model has 6 layers).
    """
    require_columns(table, ("measure", "method", "layer", "mean", "low", "high"), "table")
    cells = table.assign(cell=[f"{m:.2f} ±{uncertainty.Interval(m, lo, h, 0).half_width:.2f}"
                               for m, lo, h in zip(table["mean"], table["low"], table["high"])])
    ours = cells.pivot(index=["measure", "method"], columns="layer", values="cell")
    ours.columns = [f"L{c}" for c in ours.columns]
    theirs = pd.DataFrame({key: [f"{p.value:.2f}" for p in values] for key, values in paper.items()},
                          index=[f"L{i}" for i in range(1, 1 + max(len(v) for v in paper.values()))]).T
    theirs.index.names = ["measure", "method"]
    n_layers = int(table["layer"].max())
    both = pd.concat({f"ours (rt-polarity, {n_layers} layers), mean ±95%": ours,
                      f"A&Z (agreement task, {len(theirs.columns)} layers)": theirs}, axis=1)
    return both.fillna("n/a")


def correlations(table: pd.DataFrame, rho: dict, *, n: int) -> dict[str, Any]:
    """The reading of the correlations with blank-out and gradients, first and last layer.

    ``table``: :func:`attnlib.flow.layer_correlations`' frame (measure, method, layer, mean,
    low, high); ``rho``: :func:`attnlib.flow.instance_correlations`' per-sentence values
    ``{(measure, method): (N, L)}`` for the same sentences; ``n``: the number of sentences.
    A method is "best" or "agrees better" only beyond noise (paired, sentence by sentence).
    """
    require_columns(table, ("measure", "method", "layer", "mean", "low", "high"), "table")
    last = table[table.layer == table.layer.max()].set_index(["measure", "method"])
    first = table[table.layer == 1].set_index(["measure", "method"])
    out: dict[str, Any] = {"ch14_n": n, "ch14_layers": int(table.layer.max())}
    for measure in ("loo", "gradient"):
        for method, key in _METHODS:
            for where, frame in (("last", last), ("first", first)):
                out[f"ch14_{measure}_{key}_{where}"] = float(frame.loc[(measure, method), "mean"])
        for method, key in _METHODS:
            row = last.loc[(measure, method)]
            out[f"ch14_{measure}_{key}_ci"] = f"[{row['low']:.2f}, {row['high']:.2f}]"
        # the last layer's rho per sentence: methods compared on the same sentences
        at_last = {m: rho[measure, m][:, -1] for m, _ in _METHODS}
        ranked = uncertainty.rank(at_last)
        top = list(ranked.index[ranked["rank"] == 1])
        out[f"ch14_{measure}_best"] = (
            top[0] if len(top) == 1 else " and ".join(top) + ", tied within noise"
        )
        beats = [
            m
            for m in ("rollout", "flow")
            if uncertainty.compare(at_last[m], at_last["raw attention"], paired=True).verdict
            == "higher"
        ]
        out[f"ch14_{measure}_beats"] = (
            " and ".join(beats) + (" agree" if len(beats) > 1 else " agrees")
            if beats
            else "neither rollout nor flow agrees"
        )
    return out


def rationale(recovery: pd.DataFrame, scores: dict, rationales, *, accuracy: float) -> dict[str, Any]:
    """The reading of the synthetic task: which method's ranking finds the known markers.

    ``recovery``: the mean of :func:`attnlib.faithfulness.rationale_ranking` per method (rows:
    raw attention, rollout, flow, blank-out, gradient, random; with "average precision");
    ``scores``: ``{method: per-sentence scores}`` it was computed from; ``rationales``: the
    sentences' marker masks; ``accuracy``: the synthetic model's test accuracy. The best
    method is ranked on the per-sentence average precision, ties within noise shared
    (``random`` left out).
    """
    require_columns(recovery, ("average precision",), "recovery")
    ap = recovery["average precision"]
    per_sentence = {  # average precision per sentence: methods ranked with ties within noise
        name: faithfulness.rationale_ranking(s, rationales)["average precision"].to_numpy()
        for name, s in scores.items()
        if name != "random"
    }
    ranked = uncertainty.rank(per_sentence)
    top = list(ranked.index[ranked["rank"] == 1])
    out: dict[str, Any] = {
        "ch14_syn_acc": float(accuracy),
        "ch14_syn_best": top[0] if len(top) == 1 else listed(top) + ", tied within noise",
        "ch14_syn_best_ap": float(ap.drop("random").max()),
    }
    for name, key in (*_METHODS, ("random", "random")):
        out[f"ch14_syn_{key}_ap"] = float(ap[name])
    return out
