"""Figures of Part III (Chapters 6-10, Wiegreffe & Pinter; Serrano & Smith): baselines, seeds,
adversarial training, diagnostic MLPs, erasure.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from .core import (COLUMN_INCHES, finish, fitted, plot_metric_relation,
                   summarise)
from .words import ends, finite, listing, number, short_label

__all__ = [
    "plot_dilution",
    "plot_needle_attention",
    "plot_uniform_comparison",
    "plot_lambda_sweep",
    "plot_guides",
    "plot_flip_curves",
    "plot_single_weight",
]


@fitted
def plot_dilution(frame, *, trained_range: tuple[int, int] | None = None, title: str | None = None):
    """p(positive) and the attention on the marker against sentence length (Chapter 6).

    ``frame`` comes from :func:`attnlib.baselines.dilution_curve`; ``trained_range`` shades
    the lengths the models were trained on.
    """
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.2))
    for name, sub in frame.groupby("model", sort=False):
        line = axes[0].plot(sub["length"], sub["p(positive)"], lw=1.8, label=name)[0]
        axes[0].fill_between(sub["length"], sub["p(positive)"] - sub["sd"], sub["p(positive)"] + sub["sd"],
                             color=line.get_color(), alpha=0.15, lw=0)
        axes[1].plot(sub["length"], sub["attention on marker"], lw=1.8, color=line.get_color(), label=name)
    n = np.linspace(frame["length"].min(), frame["length"].max(), 200)
    axes[1].plot(n, 1 / n, color="grey", ls="--", lw=1, label="1 / T (uniform)")
    axes[0].axhline(0.5, color="black", lw=0.8, ls=":")
    axes[0].set_ylim(0, 1)
    axes[0].set_ylabel("p(positive)")
    axes[1].set_ylabel("attention on the marker")
    axes[1].set_yscale("log")
    for ax in axes:
        ax.set_xlabel("sentence length T (tokens)")
        if trained_range is not None:
            ax.axvspan(*trained_range, color="grey", alpha=0.1, lw=0)
        ax.spines[["top", "right"]].set_visible(False)
    axes[0].legend(frameon=False, fontsize=7, loc="lower left")
    axes[1].legend(frameon=False, fontsize=7, loc="lower left")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    lengths = finite(frame["length"])
    span = f"From T = {number(lengths.min())} to {number(lengths.max())}" if len(lengths) else "No lengths"
    said = []
    for name, sub in frame.groupby("model", sort=False):
        sub = sub.sort_values("length", kind="stable")
        said.append(f"{short_label(name)}: p(positive) {ends(sub['p(positive)'])}, attention on the marker "
                    f"{ends(sub['attention on marker'])}")
    summarise(fig, f"{span}: {listing(said)}.")
    return fig


@fitted
def plot_needle_attention(rows: dict, marker_position: int, *, title: str | None = None):
    """Attention over the positions of one long sentence, one panel per model; the marker in red.

    ``rows`` maps a panel title (e.g. "Average + tanh: p(positive) = 0.97") to the weights.
    """
    fig, axes = plt.subplots(len(rows), 1, figsize=(7.5, 1.6 * len(rows) + 0.4), sharex=True, squeeze=False)
    for ax, (name, w) in zip(axes[:, 0], rows.items()):
        w = np.asarray(w, dtype=float)
        colours = np.where(np.arange(len(w)) == marker_position, "#d62728", "#bbbbbb")
        ax.bar(np.arange(len(w)), w, color=colours, width=1.0)
        ax.set_ylim(0, max(1e-3, float(w.max())) * 1.1)
        ax.set_title(name, fontsize=9, loc="left")
        ax.set_ylabel("α")
        ax.spines[["top", "right"]].set_visible(False)
    axes[-1, 0].set_xlabel("token position (red: the marker)")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    said = []
    for name, w in rows.items():
        w = np.asarray(w, dtype=float)
        on = w[marker_position] if 0 <= marker_position < len(w) else np.nan
        rank = f" (rank {int(np.sum(w > on)) + 1} of {len(w)})" if np.isfinite(on) else ""
        said.append(f"{' '.join(str(name).split()).replace(': ', ', ')}: {number(on)}{rank}")
    summarise(fig, f"Attention on the marker: {listing(said)}.")
    return fig


@fitted
def plot_uniform_comparison(table, *, title: str | None = "test F1: trained vs uniform attention"):
    """Paired bars of F1 with trained and with uniform attention per (dataset, encoder), W&P's values as ticks.

    ``table`` is :attr:`attnlib.baselines.UniformComparison.frame` rows (concatenated).
    """
    groups = list(dict.fromkeys(zip(table["dataset"], table["encoder"])))
    fig, ax = plt.subplots(figsize=(6.4, 0.62 * len(groups) + 0.9))
    colours = {"trained": "#1f77b4", "uniform": "#bbbbbb"}
    for i, (d, e) in enumerate(groups):
        for j, which in enumerate(("trained", "uniform")):
            row = table[(table.dataset == d) & (table.encoder == e) & (table.attention == which)]
            if row.empty:
                continue
            y = i + (j - 0.5) * 0.36
            f1 = float(row["F1"].iloc[0])
            ax.barh(y, f1, height=0.34, color=colours[which], label=which if i == 0 else None)
            # the value inside the bar, at its base: the W&P tick near the bar's end stays clear
            ax.text(0.01, y, f"{f1:.3f}", va="center", fontsize=7, color="white" if which == "trained" else "black")
            paper = float(row["F1 (W&P)"].iloc[0])
            if np.isfinite(paper):
                ax.plot([paper, paper], [y - 0.17, y + 0.17], color="black", lw=2,
                        label="W&P 2019, Table 2" if (i, j) == (0, 0) else None)
    ax.set_yticks(range(len(groups)), [f"{d}\n{e}" for d, e in groups], fontsize=8)
    ax.set_xlim(0, 1.08)
    ax.set_xlabel("test F1 (positive class)")
    ax.invert_yaxis()
    said = []
    for d, e in groups:
        f1 = {w: table.loc[(table.dataset == d) & (table.encoder == e) & (table.attention == w), "F1"]
              for w in ("trained", "uniform")}
        said.append(f"{d} {e} " + " vs ".join(number(v.iloc[0] if len(v) else np.nan, 3) for v in f1.values()))
    summarise(fig, f"Test F1, trained vs uniform attention: {listing(said)}.")
    return finish(fig, ax, title, legend=True)


@fitted
def plot_lambda_sweep(frame, *, points: dict | None = None, highlight=None, ax=None, title: str | None = None,
                      spread: dict | None = None):
    """W&P's adversarial-training curve: mean attention JSD against mean output TVD, one point per lambda.

    ``frame`` is :attr:`attnlib.adversarial_training.LambdaSweep.frame` (columns ``lambda``,
    ``mean_jsd``, ``mean_tvd``); the points are joined in order of lambda. ``points`` maps a
    label to an extra (jsd, tvd) point drawn on the same axes (the seed-variance and
    uniform-attention models of W&P's Fig. 4); ``highlight`` rings one lambda of the frame.
    ``spread`` maps a label of ``points`` to the models behind it and its intervals,
    ``{"points": [(jsd, tvd), ...], "jsd": (low, high), "tvd": (low, high)}`` (either part may be
    left out): each model is drawn as a small hollow marker, the intervals as error bars.
    """
    unknown = set(spread or {}) - set(points or {})
    if unknown:
        raise ValueError(f"spread names {sorted(unknown)}, which are not labels of points")
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.4, 3.8))
    else:
        fig = ax.figure
    f = frame.sort_values("lambda")
    ax.plot(f["mean_jsd"], f["mean_tvd"], "-o", color="#d62728", lw=1.5, ms=5, label="adversaries (one per lambda)")
    highs = [p[1] for p in (points or {}).values()]
    for extra in (spread or {}).values():
        highs += [float(y) for _, y in extra.get("points", [])] + [float(extra["tvd"][1])] * ("tvd" in extra)
    top = max([float(f["mean_tvd"].max())] + highs) * 1.35 + 1e-3
    groups: list = []  # points whose labels would overlap share one label, "λ = 0.01, 1"
    for lam, x, y in zip(f["lambda"], f["mean_jsd"], f["mean_tvd"]):
        for g in groups:  # a label is about 0.1 JSD wide and 4% of the TVD axis high
            if abs(g["x"] - x) < 0.1 and abs(g["y"] - y) < 0.045 * top:
                g["lams"].append(lam)
                break
        else:
            groups.append({"x": x, "y": y, "lams": [lam]})
    for g in groups:
        ax.annotate("λ = " + ", ".join(f"{v:g}" for v in g["lams"]), (g["x"], g["y"]), textcoords="offset points",
                    xytext=(-6, 4), ha="right", va="bottom", fontsize=7, color="#d62728")
    markers = iter(["s", "D", "^", "v", "P", "X"])
    colours = iter(["#1f77b4", "#7f7f7f", "#2ca02c", "#9467bd", "#8c564b", "#e377c2"])
    said_spread = []
    for label, (x, y) in (points or {}).items():
        marker, colour = next(markers), next(colours)
        ax.plot([x], [y], linestyle="none", marker=marker, ms=8, color=colour, label=label)
        extra = (spread or {}).get(label)
        if not extra:
            continue
        each = np.asarray(extra.get("points", []), dtype=float).reshape(-1, 2)
        if len(each):
            ax.plot(each[:, 0], each[:, 1], linestyle="none", marker=marker, ms=4, mfc="white", color=colour,
                    zorder=4, label=f"{short_label(label)}: each model")
        if "jsd" in extra and "tvd" in extra:
            (xl, xh), (yl, yh) = extra["jsd"], extra["tvd"]
            ax.errorbar([x], [y], xerr=[[x - xl], [xh - x]], yerr=[[y - yl], [yh - y]], fmt="none", ecolor=colour,
                        elinewidth=1, capsize=3, label=f"{short_label(label)}: 95% interval")
            said_spread.append(f"{short_label(label)}: 95% interval JSD {number(xl)} to {number(xh)}, "
                               f"TVD {number(yl)} to {number(yh)}")
    if highlight is not None:
        row = f[np.isclose(f["lambda"].to_numpy(dtype=float), float(highlight))]
        if row.empty:
            raise ValueError(f"highlight: no lambda {highlight:g} in the frame ({', '.join(f'{v:g}' for v in f['lambda'])})")
        ax.plot(row["mean_jsd"], row["mean_tvd"], "o", ms=15, mfc="none", mec="black", mew=1.5,
                label=f"shown: λ = {float(highlight):g}")
    ax.set_xlim(0, np.log(2) * 1.05)
    ax.axvline(np.log(2), color="grey", lw=0.8, ls=":")
    ax.set_ylim(0, top)
    ax.set_xlabel("mean JSD(α_a, α_b): how different the attention is")
    ax.set_ylabel("mean TVD(ŷ_a, ŷ_b): output change")
    lams = f["lambda"].to_numpy(dtype=float)
    said = (f"Adversaries from λ = {lams[0]:g} to {lams[-1]:g}: mean JSD {ends(f['mean_jsd'])}, "
            f"mean TVD {ends(f['mean_tvd'])}" if len(f) else "No adversaries")
    extra = [f"{short_label(label)}: JSD {number(x)}, TVD {number(y)}" for label, (x, y) in (points or {}).items()]
    extra += said_spread
    summarise(fig, said + "." + (f" {listing(extra)}." if extra else ""), ax=ax)
    return finish(fig, ax, title, legend=True)


@fitted
def plot_guides(frame, *, metric: str = "test f1", title: str | None = None, ax=None):
    """W&P's Table 3 as bars: the diagnostic model's score per guide, with its interval (or the
    seeds' sd) and W&P's F1.

    ``frame`` is :func:`attnlib.diagnostic.diagnostic_table`'s result, or a table over seeds
    such as :func:`attnlib.presentation.readings.ch09.guide_table`'s (index: guide). Error bars
    span ``<metric> low`` to ``<metric> high`` (an interval) when present, else ``<metric> sd``;
    ``published f1`` (when present and finite) is a black tick.
    """
    if metric not in frame.columns:
        raise ValueError(f"metric {metric!r} is not a column of the frame ({', '.join(map(str, frame.columns))})")
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.4, 0.45 * len(frame) + 1.0))
    else:
        fig = ax.figure
    y = np.arange(len(frame))
    values = frame[metric].to_numpy(dtype=float)
    if {f"{metric} low", f"{metric} high"} <= set(frame.columns):  # an interval: asymmetric bars
        low, high = frame[f"{metric} low"].to_numpy(dtype=float), frame[f"{metric} high"].to_numpy(dtype=float)
        sd = np.vstack([np.clip(values - low, 0, None), np.clip(high - values, 0, None)])
    else:
        sd = frame[f"{metric} sd"].to_numpy(dtype=float) if f"{metric} sd" in frame.columns else None
    baseline = values[0]
    colours = ["#bbbbbb"] + ["#2ca02c" if v > baseline else "#d62728" for v in values[1:]]
    ax.barh(y, values, xerr=sd, height=0.6, color=colours, error_kw={"lw": 1, "capsize": 3})
    legend = False
    if "published f1" in frame.columns and metric == "test f1":
        paper = frame["published f1"].to_numpy(dtype=float)
        ok = np.isfinite(paper)
        ax.plot(paper[ok], y[ok], "|", color="black", ms=14, mew=2.5, label="W&P 2019, Table 3")
        legend = bool(ok.any())
    ax.axvline(baseline, color="grey", lw=0.8, ls=":")
    everything = np.r_[values, frame["published f1"].to_numpy(dtype=float) if "published f1" in frame.columns else []]
    left = max(0.0, np.nanmin(everything) - 0.08)
    ax.set_xlim(left, min(1.0, np.nanmax(everything) + 0.06))
    for yi, v, colour in zip(y, values, colours):  # the value inside the bar, at its base: clear of ticks and error bars
        ax.text(left + 0.004, yi, f"{v:.3f}", fontsize=7, va="center", color="black" if colour == "#bbbbbb" else "white")
    ax.set_yticks(y, [str(i) for i in frame.index], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(metric.replace("f1", "F1 (positive class)"))
    said = [f"{short_label(g)} {number(v, 3)}" + (" (the baseline)" if k == 0 else "") for k, (g, v) in
            enumerate(zip(frame.index, values))]
    summarise(fig, f"{metric.replace('f1', 'F1')} per guide: {listing(said)}.", ax=ax)
    return finish(fig, ax, title, legend=legend)


_RANKING_STYLE = {"attention": ("#ff7f0e", "-"), "random": ("#7f7f7f", "--"), "gradient": ("#1f77b4", "-"),
                  "attention_x_gradient": ("#2ca02c", "-.")}


@fitted
def plot_flip_curves(panels: dict, *, title: str | None = None):
    """Serrano & Smith's ranked removal as curves: share of decisions flipped vs fraction of weights erased.

    ``panels`` maps a panel title (a model) to {ranking: fractions}, where ``fractions`` has
    one entry per instance: the fraction of its tokens erased when its decision first
    flipped, NaN when it never flips. A curve that rises sooner is a ranking that finds
    decisive tokens sooner; where it ends below 1 is the share that never flips.
    ``fractions`` may also be (S, n), one row per training seed: the line is the mean of the
    seeds' curves and a band of the ranking's colour spans the lowest to the highest seed.
    """
    if not panels:
        raise ValueError("panels must map at least one title to {ranking: fractions}")
    fig, axes = plt.subplots(1, len(panels), figsize=(4.4 * len(panels), 4.3), sharey=True, squeeze=False)
    grid = np.linspace(0, 1, 201)
    seeded = False
    for ax, (name, curves) in zip(axes[0], panels.items()):
        for ranking, fractions in curves.items():
            f = np.asarray(fractions, dtype=float)
            if f.ndim not in (1, 2) or f.size == 0:
                raise ValueError(f"{name}/{ranking}: fractions must be a non-empty (n,) or (seeds, n) array")
            rows = np.atleast_2d(f)
            share = (rows[:, None, :] <= grid[None, :, None]).mean(2)  # (S, G); NaN (never flips) compares False
            colour, style = _RANKING_STYLE.get(ranking, (None, "-"))
            line, = ax.plot(grid, share.mean(0), color=colour, ls=style, lw=1.8,
                            label=f"{ranking.replace('_x_', ' × ')} (never: {np.mean(np.isnan(rows)):.0%})")
            if len(rows) > 1:
                seeded = True
                ax.fill_between(grid, share.min(0), share.max(0), color=line.get_color(), alpha=0.15, lw=0)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("fraction of attention weights erased")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.legend(frameon=False, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1)
        ax.spines[["top", "right"]].set_visible(False)
    axes[0, 0].set_ylabel("share of decisions flipped")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    said = []
    for name, curves in panels.items():
        for ranking, fractions in curves.items():
            f = np.asarray(fractions, dtype=float)
            flipped = f[f <= 1]  # NaN: never flips
            where = f", median {number(np.median(flipped))} erased" if len(flipped) else ""
            said.append(f"{short_label(name) + ', ' if len(panels) > 1 else ''}{ranking.replace('_x_', ' × ')} "
                        f"{len(flipped) / f.size:.0%} flipped{where}")
    band = " Lines are means over the training seeds; bands span the lowest to the highest seed." if seeded else ""
    summarise(fig, f"Decisions flipped by the end: {listing(said)}.{band}")
    return fig


# ----------------------------------------------------------------------------- Chapter 11: identifiability
@fitted
def plot_single_weight(results: dict):
    """Serrano & Smith's single-weight test, one panel per model: Delta JSD against the weight gap.

    ``results``: panel title (a model) -> :class:`attnlib.erasure.SingleWeightResult`. Each
    point is a sentence: x the erased top weight minus the erased random one, y
    JSD(y-hat, y'_top) - JSD(y-hat, y'_random); above the red line (no difference) erasing
    the top weight moved the output more.
    """
    if not results:
        raise ValueError("results must map at least one title to a SingleWeightResult")
    fig, axes = plt.subplots(1, len(results), figsize=(COLUMN_INCHES, 3.4), sharey=True)
    for ax, (name, r) in zip(np.atleast_1d(axes), results.items()):
        plot_metric_relation(
            r.top_weight - r.random_weight,
            r.jsd_difference,
            ax=ax,
            title=name,
            xlabel="top weight − random weight",
            ylabel="Δ JSD (top − random)",
            line=lambda x: 0 * x,
            line_label="no difference",
        )
    fig.tight_layout()
    said = []
    for name, r in results.items():
        d = finite(r.jsd_difference)
        said.append(f"{short_label(name)}: {len(d)} sentences, Δ JSD above 0 for {np.mean(d > 0):.0%}, "
                    f"from {number(d.min())} to {number(d.max())}" if len(d) else f"{short_label(name)}: no sentences")
    summarise(fig, f"{listing(said)}.")
    return fig


