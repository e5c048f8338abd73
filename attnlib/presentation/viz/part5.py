"""Figures of Part V (Chapters 17-18, beyond raw attention): the randomisation cascade and the
disagreement between explanation methods.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .core import COLUMN_INCHES, fitted, summarise
from .words import listing, number

__all__ = ["plot_randomisation", "plot_disagreement"]


@fitted
def plot_randomisation(curves: pd.DataFrame, *, line: float | None = None, title: str | None = None,
                       columns: int = 3):
    """Adebayo et al.'s cascade, one small panel per method: how like the trained model's explanation each
    stage's explanation is (x: the stages, from the trained model to every parameter randomised).

    ``curves``: :func:`attnlib.experiments.randomisation.curves` (columns measure, method, stage, mean,
    low, high). Rank correlation is a solid line in its 95% band, top-k agreement a dashed line;
    ``line``: the sanity line drawn across every panel (a method passes below it).
    """
    needed = {"measure", "method", "stage", "mean", "low", "high"}
    if not isinstance(curves, pd.DataFrame) or not needed <= set(curves.columns):
        raise ValueError(f"curves must be a DataFrame with the columns {sorted(needed)}")
    methods = list(dict.fromkeys(curves["method"]))
    stages = list(dict.fromkeys(curves["stage"]))
    rows = -(-len(methods) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(COLUMN_INCHES, 1.55 * rows + 0.9), squeeze=False,
                             sharex=True, sharey=True)
    x = np.arange(len(stages))
    said = []
    for ax, method in zip(axes.flat, methods):
        part = curves[curves["method"] == method]
        rho = part[part["measure"] == "rank correlation"].set_index("stage").loc[stages]
        top = part[part["measure"] == "top-k agreement"].set_index("stage").loc[stages]
        ax.fill_between(x, rho["low"], rho["high"], color="#1f77b4", alpha=0.2, lw=0)
        ax.plot(x, rho["mean"], color="#1f77b4", marker="o", ms=3, lw=1.4, label="rank correlation")
        ax.plot(x, top["mean"], color="#d62728", ls="--", marker="s", ms=3, lw=1.1, label="top-k agreement")
        if line is not None:
            ax.axhline(line, color="black", lw=0.7, ls=":")
        ax.axhline(0, color="grey", lw=0.5)
        ax.set_title(method, fontsize=9)
        ax.grid(alpha=0.3)
        said.append(f"{method} {number(rho['mean'].iloc[-1])}")
    for ax in axes.flat[len(methods):]:
        ax.set_visible(False)
    for ax in axes.flat[len(methods) - columns:len(methods)]:
        ax.xaxis.set_tick_params(labelbottom=True)
        ax.set_xticks(x, [_short_stage(s) for s in stages], rotation=60, fontsize=7)
    for ax in axes[:, 0]:
        ax.set_ylabel("vs trained", fontsize=8)
    ax0 = axes.flat[0]
    ax0.set_ylim(-0.45, 1.08)
    handles, labels = ax0.get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=2, fontsize=8, frameon=False,
               bbox_to_anchor=(0.5, 1.0))
    if title:
        fig.suptitle(title, fontsize=11, y=1.04)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    summarise(fig, f"Rank correlation with the trained explanation once every parameter is randomised: "
                   f"{listing(said, limit=len(said))}.")
    return fig


def _short_stage(stage: str) -> str:
    return {"trained": "trained", "output": "+output", "embeddings": "+embed."}.get(stage, "+" + stage.replace("layer ", "L"))


@fitted
def plot_disagreement(matrix: pd.DataFrame, *, title: str | None = None, label: str = "feature agreement",
                      ax=None):
    """A method x method matrix of agreement (:func:`attnlib.experiments.disagreement.disagreement_matrix`'s
    ``mean``), each cell written; the diagonal (a method with itself) left blank."""
    if not isinstance(matrix, pd.DataFrame) or list(matrix.index) != list(matrix.columns):
        raise ValueError("matrix must be a square DataFrame with the same methods as rows and columns")
    values = matrix.to_numpy(dtype=float).copy()
    n = len(values)
    np.fill_diagonal(values, np.nan)
    own = ax is None
    if own:
        fig, ax = plt.subplots(figsize=(COLUMN_INCHES, 0.42 * n + 1.6))
    else:
        fig = ax.figure
    image = ax.imshow(values, cmap="viridis", vmin=0, vmax=1)
    for i in range(n):
        for j in range(n):
            if i != j:
                ax.text(j, i, f"{values[i, j]:.2f}".lstrip("0") if values[i, j] >= 0 else f"{values[i, j]:.1f}",
                        ha="center", va="center", fontsize=7, color="white" if values[i, j] < 0.55 else "black")
    ax.set_xticks(range(n), list(matrix.columns), rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(n), list(matrix.index), fontsize=7)
    bar = fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02)
    bar.set_label(label, fontsize=8)
    if title:
        ax.set_title(title, fontsize=10)
    pairs = [(values[i, j], matrix.index[i], matrix.columns[j]) for i in range(n) for j in range(i + 1, n)]
    pairs.sort(key=lambda p: p[0])
    if pairs:
        summarise(fig, f"Mean {label} per pair of methods: highest {pairs[-1][1]} and {pairs[-1][2]} "
                       f"({number(pairs[-1][0])}); lowest {pairs[0][1]} and {pairs[0][2]} ({number(pairs[0][0])}); "
                       f"median {number(np.median([p[0] for p in pairs]))}.", ax=None if own else ax)
    if own:
        fig.tight_layout()
    return fig
