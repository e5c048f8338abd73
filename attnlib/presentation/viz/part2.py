"""Figures of Part II (Chapters 3-5, Jain & Wallace): importance, permutation, the adversary."""
from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np

from .core import attention_heatmap, fitted, summarise
from .words import heaviest, listing, number, short_label, spread

__all__ = [
    "plot_violins_by_bin",
    "plot_tau_distributions",
    "adversary_heatmap",
    "permutation_figure",
    "plot_violin_panels",
]


@fitted
def plot_violins_by_bin(
    frame,
    *,
    value: str,
    bin_column: str = "bin",
    group: str | None = "predicted",
    ylabel: str = "",
    title: str | None = None,
    ax=None,
    ylim: tuple[float, float] | None = None,
    reference: float | None = None,
    reference_label: str | None = None,
    xlabel: str | None = None,
):
    """Violins of ``value`` per bin (e.g. max attention), side by side per ``group`` (J&W Figs. 6 and 8).

    ``frame`` is long-format: one row per instance with columns ``value``, ``bin_column`` and,
    optionally, ``group``. Empty bins are drawn as a gap with "n = 0".
    """
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.4, 3.4))
    else:
        fig = ax.figure
    bins = _bins(frame, bin_column)
    groups = sorted(frame[group].unique()) if group else [None]
    palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    width = 0.8 / len(groups)
    for g_i, g in enumerate(groups):
        sub = frame if g is None else frame[frame[group] == g]
        for b_i, b in enumerate(bins):
            values = sub.loc[sub[bin_column] == b, value].to_numpy(dtype=float)
            x = b_i + (g_i - (len(groups) - 1) / 2) * width
            if len(values) >= 2 and np.ptp(values) > 0:
                parts = ax.violinplot(values, positions=[x], widths=width * 0.95, showmedians=True, showextrema=False)
                for body in parts["bodies"]:
                    body.set_facecolor(palette[g_i % len(palette)])
                    body.set_alpha(0.55)
                parts["cmedians"].set_color("black")
            elif len(values):
                ax.plot([x] * len(values), values, "_", color=palette[g_i % len(palette)], ms=12)
            ax.text(x, 1.0, f"n={len(values)}", transform=ax.get_xaxis_transform(), ha="center", va="bottom", fontsize=6)
    if group:
        for g_i, g in enumerate(groups):
            ax.plot([], [], "s", color=palette[g_i % len(palette)], alpha=0.55, label=f"{group} {g}")
    if reference is not None:
        ax.axhline(reference, color="black", lw=0.8, ls=":", label=reference_label)
    if group or reference_label:
        ax.legend(frameon=False, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_xticks(range(len(bins)), [str(b) for b in bins])
    ax.set_xlim(-0.5, len(bins) - 0.5)  # every bin gets its slot, empty ones included
    ax.set_xlabel(xlabel or bin_column)
    ax.set_ylabel(ylabel or value)
    if ylim:
        ax.set_ylim(*ylim)
    if title:
        ax.set_title(title, fontsize=10, pad=14)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    said = listing(f"{b} {s}" for b, s in _by_bin(frame, value, bin_column, bins))
    summarise(fig, f"{value} per {bin_column}: {said}.", ax=ax)
    return fig


def _by_bin(frame, value: str, bin_column: str, bins) -> list[tuple[str, str]]:
    """Each bin of ``frame`` with its values' median and n ("median 0.012, n = 200")."""
    return [(str(b), spread(frame.loc[frame[bin_column] == b, value])) for b in bins]


def _highest_bin(frame, value: str, bin_column: str, bins) -> str:
    """The bin whose values have the largest median, "highest median 0.1 in [0.75, 1)"; empty if none."""
    medians = {str(b): np.nanmedian(v) for b in bins
               for v in [frame.loc[frame[bin_column] == b, value].to_numpy(dtype=float)] if np.isfinite(v).any()}
    if not medians:
        return ""
    top = max(medians, key=medians.get)
    return f", highest median {number(medians[top])} in {bin_column} {top}"


@fitted
def plot_tau_distributions(taus: dict, *, title: str | None = None, ax=None, bins: int = 30):
    """Overlaid histograms of per-instance Kendall tau for several comparisons (J&W Figs. 3-4)."""
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.4, 3.2))
    else:
        fig = ax.figure
    edges = np.linspace(-1, 1, bins + 1)
    for name, values in taus.items():
        v = np.asarray(values, dtype=float)
        v = v[np.isfinite(v)]
        ax.hist(v, bins=edges, histtype="stepfilled", alpha=0.35, label=f"{name} (mean {v.mean():.2f})" if len(v) else name)
        ax.hist(v, bins=edges, histtype="step", lw=1.2, color=ax.patches[-1].get_facecolor()[:3] if ax.patches else None)
    ax.axvline(0, color="black", lw=0.6)
    ax.set_xlabel("Kendall tau per instance")
    ax.set_ylabel("instances")
    ax.legend(frameon=False, fontsize=8)
    if title:
        ax.set_title(title, fontsize=10)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    summarise(fig, f"Kendall tau: {listing(f'{short_label(name, 40)} {spread(v)}' for name, v in taus.items())}.", ax=ax)
    return fig


@fitted
def adversary_heatmap(result, split, positions: Sequence[int] | None = None, **kwargs):
    """Original vs eps-max adversarial attention, two rows per sentence (J&W 2019, Fig. 1).

    ``result`` is an :class:`attnlib.counterfactual.AdversaryResult` on ``split``;
    ``positions`` pick rows of the result (default: all).
    """
    positions = range(len(result)) if positions is None else positions
    sentences, weights, titles = [], [], []
    for i in positions:
        tokens = list(split.tokens[int(result.indices[i])])
        b = int(result.best[i])
        change = float(result.tvd[i, b]) if b >= 0 else 0.0
        sentences += [tokens, tokens]
        weights += [result.attention[i], result.best_attention[i]]
        titles += [f"original attention: p(positive) = {result.probs[i, -1]:.2f}",
                   f"adversarial attention: JSD {result.eps_max_jsd[i]:.2f} from the original, "
                   f"output change {change:.3f} (eps = {result.eps:g})"]
    fig = attention_heatmap(sentences, weights, titles=titles, **kwargs)
    pairs = [f"{heaviest(s, a)} → {heaviest(s, b)}" for s, a, b in zip(sentences[::2], weights[::2], weights[1::2])]
    summarise(fig, f"Heaviest word, original → adversarial: {listing(pairs)}.")
    return fig


@fitted
def permutation_figure(result, split, i: int, attention: Sequence, *, name: str = ""):
    """One instance of a permutation experiment: its attention, and the output change of every permutation.

    ``result`` is an :class:`attnlib.counterfactual.PermutationResult` on ``split``; ``attention``
    holds the model's attention per split position (e.g. ``attnlib.train.predict(...).attention``).
    """
    index = int(result.indices[i])
    tokens = list(split.tokens[index])
    heat = attention_heatmap([tokens], [attention[index]], titles=[
        f"{name} test instance {index}: p(positive) = {result.probs[i, -1]:.2f}, max attention {result.max_attention[i]:.2f}"])
    heat.canvas.draw()
    image = np.asarray(heat.canvas.buffer_rgba())
    plt.close(heat)
    h, w = image.shape[:2]
    fig = plt.figure(figsize=(7.5, 7.5 * h / w + 2.4))
    top = fig.add_axes([0.0, 2.4 / (7.5 * h / w + 2.4), 1.0, 1 - 2.4 / (7.5 * h / w + 2.4)])
    top.imshow(image)
    top.set_axis_off()
    ax = fig.add_axes([0.1, 0.12 * 2.4 / (7.5 * h / w + 2.4) + 0.02, 0.85, 0.75 * 2.4 / (7.5 * h / w + 2.4)])
    values = np.asarray(result.all_tvd[i], dtype=float)
    ax.hist(values, bins=30, color="#1f77b4", alpha=0.7)
    ax.axvline(result.median_tvd[i], color="black", ls="--", lw=1, label=f"median {result.median_tvd[i]:.3f}")
    ax.set_xlabel(f"output change (TVD) under each of {len(values)} permutations")
    ax.set_ylabel("permutations")
    ax.legend(frameon=False, fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    finite = values[np.isfinite(values)]
    change = f"median {number(np.median(finite))}, largest {number(finite.max())}" if len(finite) else "n/a"
    summarise(fig, f"Heaviest words: {heaviest(tokens, attention[index], 3)}. "
                   f"Output change (TVD) over {len(values)} permutations: {change}.")
    return fig


@fitted
def plot_violin_panels(frames: dict, *, ylabel: str, ylim=None, reference=None, reference_label=None, height: float = 2.9,
                       xlabel: str | None = None):
    """One :func:`plot_violins_by_bin` panel per entry of ``frames`` (title -> long frame), stacked."""
    fig, axes = plt.subplots(len(frames), 1, figsize=(6.4, height * len(frames)), sharey=True, squeeze=False)
    for ax, (title, frame) in zip(axes[:, 0], frames.items()):
        plot_violins_by_bin(frame, value="value", ax=ax, ylabel=ylabel, title=title, ylim=ylim,
                            reference=reference, reference_label=reference_label, xlabel=xlabel)
    fig.tight_layout()
    if len(frames) == 1:
        frame = next(iter(frames.values()))
        said = listing(f"{b} {s}" for b, s in _by_bin(frame, "value", "bin", _bins(frame)))
        summarise(fig, f"{ylabel or 'value'} per bin: {said}.")
    else:
        said = [f"{short_label(title)}: {spread(frame['value'])}{_highest_bin(frame, 'value', 'bin', _bins(frame))}"
                for title, frame in frames.items()]
        summarise(fig, f"{ylabel or 'value'}: {listing(said)}.")
    return fig


def _bins(frame, column: str = "bin") -> list:
    """The bins of ``frame[column]`` in the order the violins draw them."""
    import pandas as pd

    if isinstance(frame[column].dtype, pd.CategoricalDtype):
        return list(frame[column].cat.categories)
    return sorted(frame[column].unique())


