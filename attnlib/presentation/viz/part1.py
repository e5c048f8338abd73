"""Figures of Part I (Chapters 1-2): the measures of agreement."""
from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np

from .core import fitted, plot_distributions, plot_metric_relation, plot_scores, summarise
from .words import heaviest, number, scatter_words

__all__ = [
    "measures_figure",
    "plot_jsd_vs_tvd",
]


@fitted
def measures_figure(p, q, tokens: Sequence[str], *, names=("p", "q"), title: str | None = None):
    """Two distributions side by side with their TVD, JSD and Kendall tau (Chapter 2)."""
    from ...metrics import jsd, kendall_tau, tvd

    p = np.asarray(p, dtype=float)
    q = np.asarray(q, dtype=float)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 2.9), gridspec_kw={"width_ratios": [1.4, 1]})
    plot_distributions({names[0]: p, names[1]: q}, tokens, ax=left, title=title)
    tau, pvalue = kendall_tau(p, q)
    scores = {
        f"TVD({names[0]},{names[1]})": tvd(p, q),
        f"JSD({names[0]},{names[1]})": jsd(p, q),
        "Kendall tau_b": tau,
    }
    limits = {
        f"TVD({names[0]},{names[1]})": (0.0, 1.0),
        f"JSD({names[0]},{names[1]})": (0.0, float(np.log(2))),
        "Kendall tau_b": (-1.0, 1.0),
    }
    plot_scores(scores, limits=limits, ax=right, title=f"p-value of tau: {pvalue:.2f}" if np.isfinite(pvalue) else "tau undefined (constant)")
    fig.tight_layout()
    summarise(fig, ", ".join(f"{k} {number(v)}" for k, v in scores.items()) + ". Heaviest: "
              f"{names[0]} {heaviest(tokens, p)}, {names[1]} {heaviest(tokens, q)}.")
    return fig


@fitted
def plot_jsd_vs_tvd(d_tvd, d_jsd, *, threshold: float | None = 0.49, title: str | None = None):
    """JSD against TVD for many pairs, with the bounds TVD^2/2 <= JSD <= ln2 * TVD (Chapter 2)."""
    fig = plot_metric_relation(d_tvd, d_jsd, xlabel="TVD(p, q)", ylabel="JSD(p, q)", title=title)
    ax = fig.axes[0]
    xs = np.linspace(0, 1, 100)
    ax.plot(xs, np.log(2) * xs, color="#d62728", lw=1.5, label="ln 2 · TVD (upper bound)")
    ax.plot(xs, xs**2 / 2, color="grey", lw=1.2, ls="--", label="TVD² / 2 (lower bound)")
    if threshold is not None:
        ax.axhline(threshold, color="black", lw=0.8, ls=":", label=f"JSD = {threshold} (the book's 'very different')")
    ax.legend(frameon=False, fontsize=7, loc="upper left")
    said = scatter_words(d_tvd, d_jsd, "pair").replace("; x from", "; TVD from").replace(", y from", ", JSD from")
    jsd = np.asarray(d_jsd, dtype=float).ravel()
    if threshold is not None and np.isfinite(jsd).any():
        said += f"; {np.mean(jsd[np.isfinite(jsd)] > threshold):.0%} of them above JSD = {threshold}"
    summarise(fig, said + ".")
    return fig


