"""Figures of Part II (Chapters 3-5, Jain & Wallace): importance, permutation, the adversary."""
from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np

from .core import HATCHES, SAFE_COLOURS, attention_heatmap, fitted, summarise
from .words import finite, heaviest, listing, number, short_label, spread

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
    seed_frames: list | None = None,
):
    """Violins of ``value`` per bin (e.g. max attention), side by side per ``group`` (J&W Figs. 6 and 8).

    ``frame`` is long-format: one row per instance with columns ``value``, ``bin_column`` and,
    optionally, ``group``. Empty bins are drawn as a gap with "n = 0". ``seed_frames``: the
    same frame for each training seed of the model (``frame`` is usually the first's): a dot
    per seed marks that seed's median of each violin's group and bin, so the reader sees how
    far retraining moves the median line (no dots for a single seed).
    """
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.4, 3.4))
    else:
        fig = ax.figure
    bins = _bins(frame, bin_column)
    groups = sorted(frame[group].unique()) if group else [None]
    palette = SAFE_COLOURS  # colour-blind safe, with a hatch per group as a second cue
    if seed_frames is not None and len(seed_frames) < 2:
        seed_frames = None  # one seed: its median is the violin's own line
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
                    body.set_hatch(HATCHES[g_i % len(HATCHES)])
                    body.set_alpha(0.55)
                parts["cmedians"].set_color("black")
            elif len(values):
                ax.plot([x] * len(values), values, "_", color=palette[g_i % len(palette)], ms=12)
            ax.text(x, 1.0, f"n={len(values)}", transform=ax.get_xaxis_transform(), ha="center", va="bottom", fontsize=6)
            for s_i, seed_frame in enumerate(seed_frames or ()):
                sf = seed_frame if g is None else seed_frame[seed_frame[group] == g]
                v = sf.loc[sf[bin_column] == b, value].to_numpy(dtype=float)
                v = v[np.isfinite(v)]
                if len(v):
                    dx = (s_i - (len(seed_frames) - 1) / 2) * width * 0.18
                    ax.plot(x + dx, np.median(v), "o", ms=3.2, mfc="white", mec="black", mew=0.8, zorder=4)
    if seed_frames:
        ax.plot([], [], "o", ms=3.2, mfc="white", mec="black", mew=0.8,
                label=f"each seed's median ({len(seed_frames)} seeds)")
    if group:
        for g_i, g in enumerate(groups):
            ax.fill_between([], [], color=palette[g_i % len(palette)], alpha=0.55, hatch=HATCHES[g_i % len(HATCHES)],
                            label=f"{group} {g}")
    if reference is not None:
        ax.axhline(reference, color="black", lw=0.8, ls=":", label=reference_label)
    if group or reference_label or seed_frames:
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
                       xlabel: str | None = None, seed_frames: dict | None = None):
    """One :func:`plot_violins_by_bin` panel per entry of ``frames`` (title -> long frame), stacked.

    ``seed_frames``: title -> the panel's frame for each training seed (see
    :func:`plot_violins_by_bin`): a dot per seed marks each violin's median in that seed."""
    if seed_frames is not None and set(seed_frames) != set(frames):
        raise ValueError(f"seed_frames must have the titles of frames, got {sorted(seed_frames)}")
    fig, axes = plt.subplots(len(frames), 1, figsize=(6.4, height * len(frames)), sharey=True, squeeze=False)
    for ax, (title, frame) in zip(axes[:, 0], frames.items()):
        plot_violins_by_bin(frame, value="value", ax=ax, ylabel=ylabel, title=title, ylim=ylim,
                            reference=reference, reference_label=reference_label, xlabel=xlabel,
                            seed_frames=None if seed_frames is None else list(seed_frames[title]))
    fig.tight_layout()
    if seed_frames:  # the seeds' medians say more than the first seed's spread
        said = [f"{short_label(title)}: {_seed_medians_range(seed_frames[title])}" for title in frames]
        summarise(fig, f"{ylabel or 'value'}, the violins from the first seed's model; per bin, the lowest to "
                       f"the highest seed's median: {listing(said)}.")
    elif len(frames) == 1:
        frame = next(iter(frames.values()))
        said = listing(f"{b} {s}" for b, s in _by_bin(frame, "value", "bin", _bins(frame)))
        summarise(fig, f"{ylabel or 'value'} per bin: {said}.")
    else:
        said = [f"{short_label(title)}: {spread(frame['value'])}{_highest_bin(frame, 'value', 'bin', _bins(frame))}"
                for title, frame in frames.items()]
        summarise(fig, f"{ylabel or 'value'}: {listing(said)}.")
    return fig


def _seed_medians_range(seed_frames) -> str:
    """Per bin, the lowest to the highest seed's median ("[0, 0.25) 0.05-0.07")."""
    out = []
    for b in _bins(seed_frames[0]):
        medians = [float(np.median(v)) for f in seed_frames
                   for v in [finite(f.loc[f["bin"] == b, "value"])] if len(v)]
        if medians:
            out.append(f"{b} {number(min(medians))}" + (f"-{number(max(medians))}" if len(medians) > 1 else ""))
    return ", ".join(out) or "n = 0"


def _bins(frame, column: str = "bin") -> list:
    """The bins of ``frame[column]`` in the order the violins draw them."""
    import pandas as pd

    if isinstance(frame[column].dtype, pd.CategoricalDtype):
        return list(frame[column].cat.categories)
    return sorted(frame[column].unique())


