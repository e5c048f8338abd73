"""Figures of Part IV (Chapters 11-16, transformers): identifiability, heads, deception, rollout
and flow, the capstone, the audit.
"""
from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np

from .core import (ATTENTION_CMAP, COLUMN_INCHES, HATCHES, SAFE_COLOURS, finish,
                   fitted, method_style, summarise)
from .words import ends, finite, heaviest, listing, number, short_label, trend

__all__ = [
    "plot_null_space",
    "plot_group_mass",
    "plot_correlation_by_length",
    "plot_token_identity",
    "plot_head_grid",
    "plot_pruning_curve",
    "plot_adversarial_keys",
    "plot_explanation_mass",
    "plot_relevance_by_layer",
    "plot_layer_correlations",
    "plot_audit",
    "plot_erasure_curves",
    "plot_by_length",
]


@fitted
def plot_null_space(panels: dict, *, title: str | None = None, height: float = 3.3):
    """Null-space dimension against sentence length, one panel per model, with the line d_s - d_v.

    ``panels``: name -> a frame with columns ``length``, ``null_dim`` and ``d_v`` (one row
    per sentence and head, e.g. from :func:`attnlib.identifiability.trace_statistics`).
    Points are the distinct (length, dimension) pairs, their area growing with how many
    (sentence, head) pairs share them.
    """
    fig, axes = plt.subplots(1, len(panels), figsize=(3.9 * len(panels), height), squeeze=False)
    for ax, (name, frame) in zip(axes[0], panels.items()):
        counts = frame.groupby(["length", "null_dim"]).size().reset_index(name="n")
        ax.scatter(counts["length"], counts["null_dim"], s=6 + 60 * np.sqrt(counts["n"] / counts["n"].max()),
                   alpha=0.6, color="#1f77b4", edgecolor="none", label="measured (sentence, head)")
        d_v = int(frame["d_v"].iloc[0])
        x = np.arange(0, int(frame["length"].max()) + 2)
        ax.plot(x, np.maximum(x - d_v, 0), color="#d62728", lw=1.2, ls="--",
                label=f"max(0, $d_s - d_v$), $d_v$ = {d_v}")
        ax.axvline(d_v, color="#888888", lw=0.8, ls=":")
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("sentence length $d_s$ (tokens)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    axes[0][0].set_ylabel("null-space dimension")
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    said = []
    for name, frame in panels.items():
        dims, lengths = finite(frame["null_dim"]), finite(frame["length"])
        said.append(f"{short_label(name)}: {len(frame):,} (sentence, head) pairs, lengths {number(lengths.min())} to "
                    f"{number(lengths.max())}, a null space in {np.mean(dims > 0):.0%} (largest {number(dims.max())})"
                    if len(dims) and len(lengths) else f"{short_label(name)}: n/a")
    summarise(fig, f"{listing(said)}.")
    return fig


@fitted
def plot_group_mass(frame, groups: Sequence[str], *, title: str | None = None, reference: dict | None = None):
    """Mean attention mass on each group of tokens by layer, raw (solid) vs effective (dashed).

    ``frame``: rows per sentence, layer and head with ``raw <g>`` and ``effective <g>``
    columns (:func:`attnlib.identifiability.trace_statistics`); layers are drawn 1-based.
    ``reference``: optional label -> (layers, values) drawn as grey markers (a paper's reading).
    """
    means = frame.groupby("layer")[[f"{k} {g}" for g in groups for k in ("raw", "effective")]].mean()
    layers = means.index.to_numpy() + 1
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    colours = plt.get_cmap("tab10")
    for i, g in enumerate(groups):
        ax.plot(layers, means[f"raw {g}"], color=colours(i), marker="o", label=f"raw, {g}")
        ax.plot(layers, means[f"effective {g}"], color=colours(i), marker="s", ls="--", label=f"effective, {g}")
    for j, (label, (xs, ys)) in enumerate((reference or {}).items()):
        ax.plot(xs, ys, ls="none", marker="x^v"[j % 3], color="#555555", label=label)
    ax.axhline(0, color="#888888", lw=0.6)
    ax.set_xlabel("layer")
    ax.set_ylabel("attention mass (mean over queries)")
    ax.set_xticks(layers)
    ax.legend(fontsize=7, ncol=2, loc="best")
    ax.grid(alpha=0.3)
    said = [f"{g}: raw {ends(means[f'raw {g}'])}, effective {ends(means[f'effective {g}'])}" for g in groups]
    span = f"From layer {layers[0]} to {layers[-1]}" if len(layers) else "No layers"
    summarise(fig, f"{span}, mean mass on {listing(said)}.")
    return finish(fig, ax, title)


@fitted
def plot_correlation_by_length(panels: dict, *, bins: Sequence[int], reference: dict | None = None,
                               title: str | None = None):
    """Pearson r between raw and effective attention against sentence length (mean +/- sd per length bin).

    ``panels``: name -> frame with ``length``, ``correlation`` and ``d_v``; ``bins``: bin edges
    in tokens; ``reference``: label -> ((lengths), (low, high) ranges) drawn as grey bars
    (a reading of a published figure).
    """
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    edges = np.asarray(bins)
    said = []
    for i, (name, frame) in enumerate(panels.items()):
        which = np.digitize(frame["length"], edges) - 1
        keep = (which >= 0) & (which < len(edges) - 1)
        stats = frame[keep].groupby(which[keep])["correlation"].agg(["mean", "std", "size"])
        mids = (edges[stats.index] + edges[stats.index + 1] - 1) / 2
        ax.errorbar(mids, stats["mean"], yerr=stats["std"].fillna(0), marker="o", capsize=2, label=name,
                    color=plt.get_cmap("tab10")(i))
        ax.axvline(int(frame["d_v"].iloc[0]), color=plt.get_cmap("tab10")(i), lw=0.8, ls=":")
        bands = [f"{edges[k]}-{edges[k + 1] - 1} tokens" for k in stats.index]
        said.append(f"{short_label(name)} {trend(bands, stats['mean'], 'at ')}")
    for label, (xs, ranges) in (reference or {}).items():
        lo, hi = np.asarray(ranges, float).T
        ax.vlines(xs, lo, hi, color="#555555", lw=4, alpha=0.5, label=label)
        ax.plot(xs, (lo + hi) / 2, ls="none", marker="D", ms=4, color="#555555")  # a range of 0 shows too
    ax.set_xlabel("sentence length $d_s$ (tokens); dotted: $d_v$")
    ax.set_ylabel("Pearson r(raw, effective)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    summarise(fig, f"Mean r: {listing(said)}.")
    return finish(fig, ax, title)


@fitted
def plot_token_identity(table, *, reference: dict | None = None, title: str | None = None, chance: float | None = None):
    """Token identifiability by layer: one line per probe/distance column of ``table`` (index: layer).

    ``reference``: label -> (layers, values), a paper's reading, drawn as grey markers;
    ``chance``: the random-guess rate, drawn as a dotted line.
    """
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    for column in table.columns:
        ax.plot(table.index, table[column], marker="o", label=str(column))
    for j, (label, (xs, ys)) in enumerate((reference or {}).items()):
        ax.plot(xs, ys, ls="none", marker="x^v+"[j % 4], color="#555555", label=label)
    if chance is not None:
        ax.axhline(chance, color="#888888", ls=":", lw=1, label="chance")
    ax.set_xlabel("layer (0: input embeddings)")
    ax.set_ylabel("tokens identified")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    said = [f"{short_label(column)} {trend(table.index, table[column], 'at layer ')}" for column in table.columns]
    summarise(fig, f"Share identified: {listing(said)}" + (f"; chance {number(chance)}." if chance is not None else "."))
    return finish(fig, ax, title)


@fitted
def plot_head_grid(grids: dict, *, formats: dict | None = None, cmaps: dict | None = None, limits: dict | None = None,
                   title: str | None = None):
    """Layer x head tables as annotated heatmaps, side by side (e.g. accuracy and output TVD under permutation).

    ``grids``: panel title -> DataFrame (rows "layer 0".., optionally "all layers"; columns
    "head 0".., optionally "all heads"), as :meth:`attnlib.head_perturbation.HeadPermutationResult.grid`
    gives. The "all heads" column and "all layers" row are set off by a white gap; NaN cells
    are left blank. ``formats``/``cmaps``/``limits``: per panel, the number format (default
    ".3f"), the colour map (default the attention map) and (vmin, vmax).
    """
    if not grids:
        raise ValueError("grids must name at least one table")
    formats, cmaps, limits = formats or {}, cmaps or {}, limits or {}
    first = next(iter(grids.values()))
    n_rows, n_cols = first.shape
    # panels stacked: a page is narrow, and side by side they shrink to unreadable numbers
    fig, axes = plt.subplots(len(grids), 1, figsize=(0.95 * n_cols + 2.0, (0.5 * n_rows + 1.0) * len(grids)),
                             squeeze=False)
    for ax, (name, grid) in zip(axes[:, 0], grids.items()):
        values = grid.to_numpy(dtype=float)
        vmin, vmax = limits.get(name, (np.nanmin(values), np.nanmax(values)))
        im = ax.imshow(np.ma.masked_invalid(values), cmap=cmaps.get(name, ATTENTION_CMAP), vmin=vmin, vmax=vmax,
                       aspect="auto")
        fmt = formats.get(name, ".3f")
        span = (vmax - vmin) or 1.0
        for i in range(values.shape[0]):
            for j in range(values.shape[1]):
                if np.isfinite(values[i, j]):
                    dark = (values[i, j] - vmin) / span > 0.6
                    ax.text(j, i, format(values[i, j], fmt), ha="center", va="center", fontsize=7,
                            color="white" if dark else "black")
        columns, rows = [str(c) for c in grid.columns], [str(r) for r in grid.index]
        ax.set_xticks(range(len(columns)), columns, rotation=30, ha="right", fontsize=8)
        ax.set_yticks(range(len(rows)), rows, fontsize=8)
        if "all heads" in columns:
            ax.axvline(columns.index("all heads") - 0.5, color="white", lw=4)
        if "all layers" in rows:
            ax.axhline(rows.index("all layers") - 0.5, color="white", lw=4)
        ax.set_title(name, fontsize=10)
        bar = fig.colorbar(im, ax=ax, fraction=0.046, pad=0.03)
        bar.set_label(name, fontsize=8)
        bar.ax.tick_params(labelsize=7)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    summarise(fig, f"{listing(_grid_said(name, grid) for name, grid in grids.items())}.")
    return fig


def _grid_said(name: str, grid) -> str:
    """A layer x head table in words: its lowest and highest cell, the "all" row and column left out."""
    rows = [r for r in grid.index if str(r) != "all layers"] or list(grid.index)
    columns = [c for c in grid.columns if str(c) != "all heads"] or list(grid.columns)
    values = grid.loc[rows, columns].to_numpy(dtype=float)
    if not np.isfinite(values).any():
        return f"{short_label(name)}: n/a"
    values = np.where(np.isfinite(values), values, np.nan)
    lo, hi = (np.unravel_index(pick(values), values.shape) for pick in (np.nanargmin, np.nanargmax))
    return (f"{short_label(name)}: lowest {number(values[lo])} ({rows[lo[0]]}, {columns[lo[1]]}), "
            f"highest {number(values[hi])} ({rows[hi[0]]}, {columns[hi[1]]})")


@fitted
def plot_pruning_curve(curves: dict, *, reference: dict | None = None, title: str | None = None, ax=None):
    """Accuracy against the fraction of heads pruned, one line per entry of ``curves``.

    ``curves``: label -> frame with columns ``fraction`` and ``accuracy`` (e.g.
    :func:`attnlib.head_importance.prune_by_importance`); a frame with ``min`` and ``max``
    columns (:func:`~attnlib.head_importance.prune_randomly`, or a curve over seeds) is drawn
    with that range as a band, named in the legend by the frame's ``attrs["band"]`` (default
    "<label>: range"), one with ``low`` and ``high`` with its interval as error bars.
    ``reference``: label -> a fraction pruned "without noticeable loss" in a paper, drawn as a
    shaded span from 0.
    """
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.4, 3.4))
    else:
        fig = ax.figure
    spans = sorted((reference or {}).items(), key=lambda item: -item[1])  # widest first, narrower on top
    shades = ["#f0f0f0", "#d9d9d9", "#bdbdbd"]
    for j, (label, frac) in enumerate(spans):
        ax.axvspan(0, frac, color=shades[min(j, len(shades) - 1)], zorder=0, label=label)
    for j, (label, frame) in enumerate(curves.items()):
        style = {"ls": ("-", "--", ":", "-.")[j % 4], "marker": ("o", "s", "^", "D")[j % 4], "ms": 3}
        line, = ax.plot(frame["fraction"], frame["accuracy"], label=label, **style)
        if {"min", "max"} <= set(frame.columns):
            ax.fill_between(frame["fraction"], frame["min"], frame["max"], color=line.get_color(), alpha=0.2,
                            lw=0, label=frame.attrs.get("band", f"{label}: range"))
        elif {"low", "high"} <= set(frame.columns):
            ax.errorbar(frame["fraction"], frame["accuracy"],
                        yerr=[frame["accuracy"] - frame["low"], frame["high"] - frame["accuracy"]],
                        fmt="none", ecolor=line.get_color(), alpha=0.5, capsize=2)
    ax.set_xlabel("fraction of heads pruned")
    ax.set_ylabel("test accuracy")
    ax.set_xlim(0, 1)
    ax.legend(fontsize=7, loc="lower left")
    ax.grid(alpha=0.3)
    said = [f"{short_label(label)} {trend(frame['fraction'], frame['accuracy'], 'at ', lambda f: f'{float(f):.0%}')}"
            for label, frame in curves.items()]
    summarise(fig, f"Accuracy by share of heads pruned: {listing(said)}.", ax=ax)
    return finish(fig, ax, title)


@fitted
def plot_adversarial_keys(frame, *, reference: dict | None = None, title: str | None = None, ax=None):
    """Accuracy against the attention's JSD from the original, one line per layer across the alphas.

    ``frame``: one row per (layer, alpha) with columns ``layer``, ``alpha``, ``jsd`` and
    ``accuracy`` (e.g. :func:`attnlib.adversarial_keys.adversarial_keys_sweep`).
    ``reference``: label -> accuracy, drawn as horizontal lines (a paper's numbers).
    """
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.4, 3.6))
    else:
        fig = ax.figure
    for layer, sub in frame.sort_values("alpha").groupby("layer"):
        line, = ax.plot(sub["jsd"], sub["accuracy"], marker="o", label=f"keys of layer {layer}")
        for _, row in sub.iterrows():
            ax.annotate(f"{row['alpha']:g}", (row["jsd"], row["accuracy"]), textcoords="offset points",
                        xytext=(3, 3), fontsize=6, color=line.get_color())
    for j, (label, value) in enumerate((reference or {}).items()):
        ax.axhline(value, color="#555555", ls=["--", ":", "-."][j % 3], lw=1, label=label)
    ax.set_xlabel("JSD of the layer's attention from the original (mean over heads and queries)")
    ax.set_ylabel("test accuracy")
    ax.set_xlim(0, np.log(2) * 1.02)
    ax.legend(fontsize=7, loc="lower left")
    ax.grid(alpha=0.3)
    said = [f"keys of layer {layer}: {trend(sub['jsd'], sub['accuracy'], 'at JSD ', number)}"
            for layer, sub in frame.sort_values("alpha").groupby("layer")]
    summarise(fig, f"Accuracy from the smallest to the largest alpha: {listing(said)}.", ax=ax)
    return finish(fig, ax, title)


@fitted
def plot_explanation_mass(shares, *, reference: float | None = None, title: str | None = None, ax=None):
    """The share of each explanation on a set of marked tokens, as grouped bars: one group per model (row).

    ``shares``: a DataFrame, index the models, columns the explanations (e.g. attention,
    gradient, leave-one-out, rollout), values in [0, 1]; NaN (an explanation a model does not
    have) leaves a gap. ``reference``: the marked tokens' share of all tokens (what uniform
    weights would give them), drawn as a dotted line.
    """
    values = shares.to_numpy(dtype=float)
    n_models, n_measures = values.shape
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.8, 0.42 * n_models * n_measures / 2 + 1.4))
    else:
        fig = ax.figure
    height = 0.8 / n_measures
    y = np.arange(n_models)
    for j, column in enumerate(shares.columns):  # colour-blind-safe colours, and a hatch per explanation
        ax.barh(y - 0.4 + (j + 0.5) * height, np.nan_to_num(values[:, j]), height=height * 0.9,
                color=SAFE_COLOURS[j % len(SAFE_COLOURS)], hatch=HATCHES[j % len(HATCHES)], edgecolor="white",
                linewidth=0.3, label=str(column))
    if reference is not None:
        ax.axvline(reference, color="black", ls=":", lw=1, label="uniform weights")
    ax.set_yticks(y, [str(i) for i in shares.index], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of the explanation on the marked tokens")
    ax.grid(axis="x", alpha=0.3)
    said = [f"{short_label(model)}: " + ", ".join(f"{short_label(c)} {number(v)}" for c, v in zip(shares.columns, row))
            for model, row in zip(shares.index, values)]
    uniform = f" Uniform weights: {number(reference)}." if reference is not None else ""
    summarise(fig, f"Share on the marked tokens: {listing(said)}.{uniform}", ax=ax)
    return finish(fig, ax, title, legend=True)


@fitted
def plot_relevance_by_layer(tokens: Sequence[str], panels: dict, *, title: str | None = None,
                            width: float = 2.6):
    """One sentence's relevance after every layer, one heatmap per method (Abnar & Zuidema 2020, Fig. 3).

    ``panels``: method name -> an (L, n) array, row l the relevance of each of the n ``tokens``
    after layer l + 1 (e.g. ``RelevanceResult.scores[method][i]``). Each panel has its own
    colour scale from 0 to its largest weight, layers from the bottom (layer 1) up.
    """
    if not panels:
        raise ValueError("panels must name at least one (layers, tokens) array")
    n = len(tokens)
    for name, m in panels.items():
        if np.ndim(m) != 2 or np.shape(m)[1] != n:
            raise ValueError(f"panel {name!r} has shape {np.shape(m)}; expected (layers, {n}) for {n} tokens")
    L = np.shape(next(iter(panels.values())))[0]
    fontsize = 8 if n <= 20 else 6 if n <= 40 else 4
    fig, axes = plt.subplots(1, len(panels), figsize=(max(width, 0.2 * n + 0.9) * len(panels), 0.34 * L + 1.6),
                             squeeze=False)
    for ax, (name, m) in zip(axes[0], panels.items()):
        m = np.asarray(m, float)
        im = ax.imshow(m, cmap=ATTENTION_CMAP, vmin=0, vmax=float(m.max()) or 1.0, aspect="auto", origin="lower")
        bar = fig.colorbar(im, ax=ax, fraction=0.05, pad=0.02)
        bar.set_label("relevance (this panel's scale)", fontsize=7)
        bar.ax.tick_params(labelsize=6)
        ax.set_xticks(range(n), tokens, rotation=90, fontsize=fontsize)
        ax.set_yticks(range(L), [f"layer {l + 1}" for l in range(L)], fontsize=7)
        ax.set_title(name, fontsize=10)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    said = [f"{short_label(name)} " + " → ".join(heaviest(tokens, np.asarray(m, float)[l]) for l in sorted({0, L - 1}))
            for name, m in panels.items()] if L else []
    summarise(fig, f"Heaviest word after layer {' and after layer '.join(str(l) for l in sorted({1, L}))}: "
                   f"{listing(said)}." if L else "No layers.")
    return fig


@fitted
def plot_layer_correlations(table, *, measures: dict | None = None, title: str | None = None):
    """Spearman's rho with importance against the layer, one panel per importance measure (A&Z, Tables 1-3).

    ``table``: :func:`attnlib.experiments.flow.layer_correlations` (columns measure, method,
    layer, mean, sd). Each method is a line (mean) in a band (mean +- sd). ``measures``: which
    measures to draw and their panel titles (default: every measure, titled by its name).
    """
    measures = measures or {m: m for m in dict.fromkeys(table["measure"])}
    fig, axes = plt.subplots(1, len(measures), figsize=(3.6 * len(measures) + 0.4, 3.2), squeeze=False,
                             sharey=True)
    palette = ["#7f7f7f", *SAFE_COLOURS]
    markers = ["o", "s", "^", "D", "v", "P"]  # a second cue beside the colour
    said: list[str] = []
    for ax, (measure, label) in zip(axes[0], measures.items()):
        part = table[table["measure"] == measure]
        for j, (method, rows) in enumerate(part.groupby("method", sort=False)):
            colour = palette[j % len(palette)]
            ax.plot(rows["layer"], rows["mean"], marker=markers[j % len(markers)], ms=4, color=colour, label=method)
            ax.fill_between(rows["layer"], rows["mean"] - rows["sd"], rows["mean"] + rows["sd"],
                            color=colour, alpha=0.12, lw=0)
        said += [f"{short_label(label) + ', ' if len(measures) > 1 else ''}{method} "
                 f"{trend(rows['layer'], rows['mean'], 'at layer ')}"
                 for method, rows in part.groupby("method", sort=False)]
        ax.axhline(0, color="black", lw=0.6)
        ax.set_xticks(sorted(part["layer"].unique()))
        ax.set_xlabel("layer")
        ax.set_title(label, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("Spearman's rho (mean ± sd)")
    axes[0][-1].legend(fontsize=8, loc="lower right")
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    summarise(fig, f"Mean rho: {listing(said)}.")
    return fig


#: the least top of the audit's TVD colour scale: smaller TVDs are drawn pale, not stretched to full colour
AUDIT_TVD_FLOOR = 0.01


@fitted
def plot_audit(report, *, title: str | None = None):
    """The figure of an attention audit (:func:`attnlib.experiments.audit.audit`).

    Top: per head (layer x head), J&W's median TVD of the output when the head's attention is
    permuted, and (transformers) the mean correlation between raw and effective attention
    (1: nothing of the attention lies in the head's null space). The TVD scale runs from 0 to at
    least :data:`AUDIT_TVD_FLOOR`, so that differences of a few 1e-5 do not fill the colour
    range; each colour bar states its range. One site (J&W's classifier) and an r that is the
    same at every head are written as a value, not drawn as a flat heatmap. Bottom:
    every explanation's ERASER AOPC comprehensiveness (higher is better) and sufficiency
    (lower is better), means with 95% bootstrap intervals, best first.
    """
    tables = getattr(report, "tables", None)
    if not isinstance(tables, dict) or "permutation" not in tables or "faithfulness" not in tables:
        raise ValueError("report must be an AuditReport (attnlib.experiments.audit.audit)")
    grids = {"median TVD under permutation": tables["permutation"]["median TVD"]}
    said = []
    if "identifiability" in tables:
        grids["raw vs effective attention (mean r)"] = tables["identifiability"]["raw vs effective r (mean)"]
    faith = tables["faithfulness"]
    fig = plt.figure(figsize=(6.8, 2.6 + 0.22 * len(faith) + 0.9))
    grid = fig.add_gridspec(2, 2, height_ratios=[2.6, 0.22 * len(faith) + 0.9])
    for k, (name, series) in enumerate(grids.items()):
        ax = fig.add_subplot(grid[0, k] if len(grids) > 1 else grid[0, :])
        m = series.unstack("head").to_numpy(dtype=float)
        finite = m[np.isfinite(m)]
        if m.size == 1 or (finite.size and np.ptp(finite) < 1e-6 and name.startswith("raw")):
            # one site (J&W's classifier), or every head the same r: a value, not a colour field
            ax.axis("off")
            where = "the one attention" if m.size == 1 else f"every one of the {m.size} heads"
            value = number(float(finite[0])) if finite.size else "n/a"
            ax.text(0.5, 0.5, f"{name}\n{where}: {value}", ha="center", va="center", fontsize=9,
                    transform=ax.transAxes)
            said.append(f"{name}: {value} at {where}")
            continue
        low = float(np.nanmin(m)) if name.startswith("raw") else 0.0  # r: its own range, TVD: from 0
        high = float(np.nanmax(m))
        if not name.startswith("raw"):
            high = max(high, AUDIT_TVD_FLOOR)  # TVDs near 0 stay pale: noise must not read as structure
        im = ax.imshow(m, cmap=ATTENTION_CMAP, vmin=low, vmax=high, aspect="auto")
        step = 1 if m.shape[1] <= 8 else 2
        ax.set_xticks(range(0, m.shape[1], step), [str(h + 1) for h in range(0, m.shape[1], step)], fontsize=8)
        ax.set_yticks(range(m.shape[0]), [str(layer + 1) for layer in range(m.shape[0])], fontsize=8)
        ax.set_xlabel("head", fontsize=9)
        ax.set_ylabel("layer", fontsize=9)
        bar = fig.colorbar(im, ax=ax, fraction=0.05, pad=0.03)
        bar.formatter.set_useOffset(False)
        bar.set_label(f"{name}\n(scale {number(low)} to {number(high)})", fontsize=8)
        bar.ax.tick_params(labelsize=8)
        if np.isfinite(m).any():
            i, j = np.unravel_index(np.nanargmax(m), m.shape)  # drawn 1-based
            said.append(f"{name}: largest {number(m[i, j])} (layer {i + 1}, head {j + 1})"
                        + (f", smallest {number(np.nanmin(m))}" if name.startswith("raw") else ""))
    for k, (metric, better) in enumerate((("comprehensiveness", "higher"), ("sufficiency", "lower"))):
        ax = fig.add_subplot(grid[1, k])
        order = faith.assign(_rank=faith[f"{metric} rank"].str.rstrip("=").astype(int)).sort_values(
            ["_rank", metric], ascending=[True, better == "lower"])
        y = np.arange(len(order))[::-1]
        mean = order[metric].to_numpy(dtype=float)
        err = np.vstack([mean - order[f"{metric} low"].to_numpy(dtype=float),
                         order[f"{metric} high"].to_numpy(dtype=float) - mean])
        ax.errorbar(mean, y, xerr=err, fmt="o", ms=4, color="#1f77b4", ecolor="#1f77b4", capsize=2, lw=1)
        ax.set_yticks(y, [f"{m} ({r})" for m, r in zip(order.index, order[f"{metric} rank"])], fontsize=8)
        ax.set_xlabel(f"AOPC {metric}\n({better} is better)", fontsize=9)
        ax.tick_params(axis="x", labelsize=8)
        ax.grid(axis="x", alpha=0.3)
        ax.spines[["top", "right"]].set_visible(False)
        if len(order):
            said.append(f"best {metric}: {order.index[0]} ({number(mean[0])})")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    summarise(fig, f"{listing(said)}.")
    return fig


# ----------------------------------------------------------------------------- Chapter 10: erasure (moved from the chapter)
@fitted
def plot_erasure_curves(curves: dict, *, title: str | None = None):
    """ERASER's curves, one column of panels per model: comprehensiveness (top) and sufficiency
    (bottom) against the top % of words deleted or kept, one line per method (Chapter 15).

    ``curves``: model -> :func:`attnlib.experiments.faithfulness.faithfulness_summary` with
    ``by_fraction=True`` (e.g. :func:`attnlib.experiments.faithfulness.erasure_curves`). The
    AOPC of a line is its plain mean over the fractions.
    """
    from ...experiments.faithfulness import METRICS

    if not curves:
        raise ValueError("curves must map at least one model to its by-fraction summary")
    fig, axes = plt.subplots(2, len(curves), figsize=(COLUMN_INCHES, 6.4), sharex=True, squeeze=False)
    said = []
    for col, (family, by) in enumerate(curves.items()):
        for row, metric in enumerate(("comprehensiveness", "sufficiency")):
            ax = axes[row, col]
            label = METRICS[metric].label
            if label not in by:
                raise ValueError(f"curves[{family!r}] has no column {label!r}: pass faithfulness_summary(..., by_fraction=True)")
            for m, curve in by[label].groupby(level="measure", sort=False):
                x = 100 * curve.index.get_level_values("fraction")
                ax.plot(x, curve.values, **method_style(m))
            said.append(f"{short_label(family)} {metric}: {_best_aopc(by[label], METRICS[metric].higher_is_better)}")
            ax.set_xscale("log")
            ax.set_xticks([1, 5, 10, 20, 50], ["1", "5", "10", "20", "50"])
            ax.set_title(f"{family}: {metric}", fontsize=9)
            if col == 0:
                ax.set_ylabel(label, fontsize=9)
            if row == 1:
                ax.set_xlabel("top % of words")
    handles, labels = axes[0, -1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.09, 1, 1))
    summarise(fig, f"Best AOPC (the mean over the fractions): {listing(said)}.")
    return fig


def _best_aopc(curves, higher: bool) -> str:
    """The method whose curve has the best mean over the fractions (its AOPC), "gradient (0.31)"."""
    aopc = {m: float(np.nanmean(v)) for m, v in curves.groupby(level="measure", sort=False) if np.isfinite(v).any()}
    if not aopc:
        return "n/a"
    best = (max if higher else min)(aopc, key=aopc.get)
    return f"{best} ({number(aopc[best])})"


@fitted
def plot_by_length(curves: dict, *, ylabel: str, title: str | None = None):
    """One panel per model of a measure by length band, one line per method (Chapter 15).

    ``curves``: model -> a frame (rows: the bands, in order; columns: the methods), e.g.
    :func:`attnlib.experiments.explanations.plausibility_by_length`.
    """
    if not curves:
        raise ValueError("curves must map at least one model to its frame by length band")
    fig, axes = plt.subplots(1, len(curves), figsize=(COLUMN_INCHES, 3.6), sharey=True, squeeze=False)
    axes = axes[0]
    said = []
    for ax, (family, frame) in zip(axes, curves.items()):
        for m in frame.columns:
            curve = frame[m].dropna()
            ax.plot([str(b) for b in curve.index], curve.values, **method_style(m))
        said.append(f"{short_label(family)}: {_by_length_said(frame)}")
        ax.set_title(family, fontsize=10)
        ax.set_xlabel(frame.index.name or "length (words)")
        ax.tick_params(axis="x", labelsize=8)
    axes[0].set_ylabel(ylabel, fontsize=9)
    handles, labels = axes[-1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.17, 1, 1))
    summarise(fig, f"{ylabel}: {listing(said)}.")
    return fig


def _by_length_said(frame) -> str:
    """The methods highest and lowest on average over the bands, each from its first band to its last."""
    means = {m: float(np.nanmean(v)) for m, v in frame.items() if np.isfinite(v.to_numpy(dtype=float)).any()}
    if not means:
        return "n/a"
    said = []
    for word, m in (("highest", max(means, key=means.get)), ("lowest", min(means, key=means.get))):
        curve = frame[m].dropna()
        said.append(f"{word} {m} {trend([str(b) for b in curve.index], curve.values, 'in ')}")
    return ", ".join(said[:1] if len(means) == 1 else said)


