"""Chapter 14 (rollout and flow): the numbers and clauses its prose reads off the layer-by-layer
correlations with importance and off the synthetic task's known rationale.

Each function takes the chapter's results and returns ``{glued name: value}``.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ... import published, uncertainty
from ...experiments import faithfulness
from .wording import listed, require_columns

__all__ = ["beside_abnar", "abnar", "correlations", "rationale", "cls_kept_table", "cls_kept"]

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
    cells = table.assign(cell=_cell_text(table))
    ours = cells.pivot(index=["measure", "method"], columns="layer", values="cell")
    ours.columns = [f"L{c}" for c in ours.columns]
    theirs = pd.DataFrame({key: [f"{p.value:.2f}" for p in values] for key, values in paper.items()},
                          index=[f"L{i}" for i in range(1, 1 + max(len(v) for v in paper.values()))]).T
    theirs.index.names = ["measure", "method"]
    n_layers = int(table["layer"].max())
    both = pd.concat({f"ours (rt-polarity, {n_layers} layers), mean ±95%": ours,
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


def correlations(table: pd.DataFrame, rho: dict, *, n: int) -> dict[str, Any]:
    """The reading of the correlations with blank-out and gradients, first and last layer.

    ``table``: :func:`attnlib.flow.layer_correlations`' frame (measure, method, layer, mean,
    low, high); ``rho``: :func:`attnlib.flow.instance_correlations`' per-sentence values
    ``{(measure, method): (N, L)}`` for the same sentences; ``n``: the number of sentences.
    A method is "best" or "agrees better" only beyond noise (paired, sentence by sentence).
    ``ch14_{measure}_{method}_depth``: how its rho moved from layer 1 to the last, "rose" or
    "fell" only when the paired interval of the change excludes 0.
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
            row, top = last.loc[(measure, method)], first.loc[(measure, method)]
            out[f"ch14_{measure}_{key}_ci"] = f"[{row['low']:.2f}, {row['high']:.2f}]"
            out[f"ch14_{measure}_{key}_ci_first"] = f"[{top['low']:.2f}, {top['high']:.2f}]"
            # last layer against layer 1, sentence by sentence: a change only beyond noise
            depth = uncertainty.compare(rho[measure, method][:, -1], rho[measure, method][:, 0], paired=True)
            moved = {"higher": "rose", "lower": "fell"}.get(depth.verdict)
            out[f"ch14_{measure}_{key}_depth"] = (
                f"{moved} by {abs(depth.difference.estimate):.3f} (paired 95% interval of the change "
                f"{depth.difference.range_text(3)})" if moved else
                f"changed {uncertainty.WITHIN_NOISE} ({depth.difference.range_text(3)})"
            )
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

    ``words``, ``kept``: :func:`attnlib.flow.layer_correlations`' frames for the same sentences,
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


def cls_kept(words: pd.DataFrame, kept: pd.DataFrame, rho_kept: dict, cls_blank_out_first) -> dict[str, Any]:
    """The reading of the [CLS]-kept correlations: A&Z's layer-1 gap between raw attention and
    rollout, and why it appears.

    ``words``, ``kept``: :func:`attnlib.flow.layer_correlations`' frames (``positions="words"``
    and ``"all"``, the same sentences); ``rho_kept``: :func:`attnlib.flow.instance_correlations`
    of the kept positions; ``cls_blank_out_first``: per sentence, whether blank-out ranks [CLS]
    above every other position (bool array). The gap is read paired, sentence by sentence.
    """
    require_columns(kept, ("measure", "method", "layer", "mean", "low", "high"), "kept")
    first_kept = np.asarray(cls_blank_out_first, dtype=bool)
    if first_kept.ndim != 1 or not len(first_kept):
        raise ValueError("cls_blank_out_first must be a non-empty 1-D array of bools, one per sentence")
    mean = kept[kept.measure == "loo"].set_index(["method", "layer"])["mean"]
    mean_words = words[words.measure == "loo"].set_index(["method", "layer"])["mean"]
    last = int(kept["layer"].max())
    raw1, roll1 = rho_kept["loo", "raw attention"][:, 0], rho_kept["loo", "rollout"][:, 0]
    gap = uncertainty.compare(raw1, roll1, paired=True)
    d = gap.difference
    if gap.verdict == "higher":
        clause = (f"raw attention agrees better, by {d.estimate:.2f} (paired 95% interval "
                  f"{d.low:.2f} to {d.high:.2f}): the gap of their Table 1 appears")
    elif gap.verdict == "lower":
        clause = (f"rollout agrees better, by {-d.estimate:.2f} (paired 95% interval "
                  f"{-d.high:.2f} to {-d.low:.2f}), the opposite of their Table 1")
    else:
        clause = (f"the two are within noise of each other (paired 95% interval of the difference "
                  f"{d.low:.2f} to {d.high:.2f}), unlike their Table 1")
    return {
        "ch14_kept_raw1": float(mean["raw attention", 1]),
        "ch14_kept_roll1": float(mean["rollout", 1]),
        "ch14_kept_gap": clause,
        "ch14_kept_cls_first": float(first_kept.mean()),
        "ch14_kept_last": last,
        "ch14_kept_roll_last": float(mean["rollout", last]),
        "ch14_kept_flow_last": float(mean["flow", last]),
        "ch14_kept_raw_last": float(mean["raw attention", last]),
        "ch14_words_roll1": float(mean_words["rollout", 1]),
        "ch14_words_roll_last": float(mean_words["rollout", last]),
    }
