"""Figures for the book: attention heatmaps over text, distributions, training curves.

Every function draws on a matplotlib Axes (made if not given) and returns the Figure,
so a chapter cell is one call. Colours: attention is drawn in one sequential map
(``ATTENTION_CMAP``) everywhere in the book, so heatmaps can be compared across chapters.

Readable on the page: every figure a function here returns goes through :func:`fit_column`,
so it is at most the book's column wide (:data:`COLUMN_INCHES`, 688 px at matplotlib's 100
dpi, drawn 1:1 in the page) and none of its text is under :data:`MIN_FONT_PT` (7 pt, 9.7 px
at 1:1). In a notebook kernel the figures are sent at twice that resolution ("retina": the
PNG has 2x the pixels and is shown at 1x), sharp on a phone or a high-density screen.
Colour bars say what their colour means. Each figure sent from a kernel carries a text
description of itself (:func:`describe`: title, panels, axes, legend, colour bars) in its
PNG, which the book build uses as the image's alt text (``tools/figure_alt.py``).
"""
from __future__ import annotations

from collections.abc import Sequence

import functools

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

__all__ = [
    "ATTENTION_CMAP",
    "COLUMN_INCHES",
    "MIN_FONT_PT",
    "fit_column",
    "unreadable",
    "method_style",
    "LINE_CYCLE",
    "describe",
    "plot_relevance_by_layer",
    "plot_layer_correlations",
    "attention_heatmap",
    "plot_distributions",
    "plot_training_history",
    "plot_metric_relation",
    "plot_scores",
    "plot_jsd_vs_tvd",
    "measures_figure",
    "plot_violins_by_bin",
    "plot_tau_distributions",
    "plot_violin_panels",
    "compare_heatmap",
    "adversary_heatmap",
    "permutation_figure",
    "plot_dilution",
    "plot_needle_attention",
    "plot_uniform_comparison",
    "plot_lambda_sweep",
    "plot_guides",
    "plot_flip_curves",
    "matrix_heatmaps",
    "plot_null_space",
    "plot_group_mass",
    "plot_correlation_by_length",
    "plot_token_identity",
    "plot_head_grid",
    "plot_pruning_curve",
    "plot_adversarial_keys",
    "plot_explanation_mass",
    "plot_audit",
]

ATTENTION_CMAP = "Oranges"
#: The text column of the built book (sphinx-book-theme at 1280 px): 688 px, at 100 dpi.
COLUMN_INCHES = 6.88
#: The smallest text a figure draws: 7 pt is 9.7 px on the page at 1:1 (100 dpi).
MIN_FONT_PT = 7.0
_SLACK = 0.03  # inches (3 px): a tight box moves by a pixel or two when the layout is redone


def _texts(fig):
    return [t for t in fig.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text().strip()]


def fit_column(fig):
    """Make ``fig`` readable in the book's column, in place; returns it.

    Text under :data:`MIN_FONT_PT` is raised to it. A figure wider than :data:`COLUMN_INCHES`
    is narrowed to it (its height kept) and, when its axes are a grid of subplots, laid out
    again, so the page shows it 1:1 instead of shrinking its text.
    """
    for text in _texts(fig):
        if text.get_fontsize() < MIN_FONT_PT:
            text.set_fontsize(MIN_FONT_PT)
    on_grid = fig.axes and all(ax.get_subplotspec() is not None for ax in fig.axes if ax.get_label() != "<colorbar>")
    for _ in range(3):  # the PNG is cut to the drawing's tight box: text outside the axes counts too
        width, height = fig.get_size_inches()
        drawn = max(width, _tight_width(fig))
        if drawn <= COLUMN_INCHES + _SLACK:
            break
        fig.set_size_inches(max(width - (drawn - COLUMN_INCHES) - _SLACK, 0.5 * COLUMN_INCHES), height)
        _wrap_titles(fig)
        if on_grid and not _lays_out_when_drawn(fig):
            fig.tight_layout()
    return fig


def _lays_out_when_drawn(fig) -> bool:
    """Whether the figure's layout engine redoes the layout at every draw (constrained layout)."""
    from matplotlib.layout_engine import PlaceHolderLayoutEngine

    engine = fig.get_layout_engine()
    return engine is not None and not isinstance(engine, PlaceHolderLayoutEngine)


def _wrap_titles(fig) -> None:
    """Break each panel title that is wider than its panel over as many lines as it needs."""
    import textwrap

    try:
        renderer = fig.canvas.get_renderer()
    except AttributeError:  # a canvas that cannot measure text: leave the titles as they are
        return
    for ax in fig.axes:
        room = ax.get_window_extent(renderer).width
        for title in (ax.title, ax._left_title, ax._right_title):
            text = title.get_text()
            wide = title.get_window_extent(renderer).width if text else 0.0
            if wide > room > 0:
                chars = max(8, int(len(text) * room / wide * 0.95))
                title.set_text(textwrap.fill(" ".join(text.split()), chars))


def _tight_width(fig) -> float:
    """The width, in inches, of what the figure draws (the inline backend's ``bbox_inches="tight"``)."""
    try:
        return float(fig.get_tightbbox(fig.canvas.get_renderer()).width)
    except (AttributeError, ValueError):
        return float(fig.get_size_inches()[0])


def unreadable(fig) -> list[str]:
    """What keeps ``fig`` from reading well in the column (empty when nothing): too wide, text too small."""
    problems = []
    width = max(float(fig.get_size_inches()[0]), _tight_width(fig))
    if width > COLUMN_INCHES + _SLACK:
        problems.append(f"{width:.2f} in wide as drawn, more than the column's {COLUMN_INCHES}")
    small = sorted({round(t.get_fontsize(), 1) for t in _texts(fig) if t.get_fontsize() < MIN_FONT_PT})
    if small:
        problems.append(f"text at {small} pt, under {MIN_FONT_PT}")
    return problems


#: The book's line cycle: each series differs from the next by its dash pattern as well as its
#: colour, so lines can be told apart in print, in grey and by a colour-blind reader.
LINE_CYCLE = matplotlib.cycler(
    color=list(matplotlib.colormaps["tab10"].colors[:8]),
    linestyle=["-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)), (0, (3, 1)), (0, (8, 2)), (0, (1, 2, 4, 2))],
)


def _fitted(draw):
    """The public figure functions' decorator: drawn with :data:`LINE_CYCLE`, and what they
    return goes through :func:`fit_column`."""

    @functools.wraps(draw)
    def wrapper(*args, **kwargs):
        with plt.rc_context({"axes.prop_cycle": LINE_CYCLE}):
            result = draw(*args, **kwargs)
        if kwargs.get("ax") is not None:  # drawn into the caller's figure: its size is theirs
            return result
        return fit_column(result) if isinstance(result, matplotlib.figure.Figure) else result

    return wrapper


_LINE_STYLES = ("-", "--", "-.", (0, (1, 1)), (0, (5, 1, 1, 1, 1, 1)), (0, (3, 1)), (0, (8, 2)), (0, (1, 2, 4, 2)))
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def method_style(method: str) -> dict:
    """How an explanation method is drawn in every figure: colour, line style and marker.

    Eight methods in eight colours (tab10) are hard to tell apart, in print and for a
    colour-blind reader; each also gets its own dash pattern and marker. ``random`` (the
    baseline) is a grey dotted line without markers. Keyword arguments for ``Axes.plot``.
    """
    from ..experiments.explanations import METHODS

    if method == "random":
        return dict(color="grey", ls=":", marker="", label=method)
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; the methods are {', '.join(METHODS)} and random")
    k = METHODS.index(method)
    colour = plt.get_cmap("tab10").colors[k % 10]
    return dict(color=colour, ls=_LINE_STYLES[k % len(_LINE_STYLES)], marker=_MARKERS[k % len(_MARKERS)],
                markersize=4, label=method)


def describe(fig, text: str | None = None) -> str:
    """What ``fig`` shows, in words: its alt text on the page.

    ``text``: a description written for this figure, kept with it and returned from then on.
    Otherwise one is made from what the figure says about itself: its title, each panel's
    title and axis labels, the legend's entries and what each colour bar measures.
    """
    if text is not None:
        if not isinstance(text, str) or not text.strip():
            raise ValueError("text must be a non-empty description")
        fig._attnlib_description = text.strip()
    if getattr(fig, "_attnlib_description", None):
        return fig._attnlib_description

    def said(t) -> str:
        return " ".join(t.get_text().split()) if t is not None and t.get_visible() else ""

    bars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>" or getattr(ax, "_colorbar", None) is not None]
    panels = [ax for ax in fig.axes if ax not in bars and ax.axison]
    measured = list(dict.fromkeys(m for ax in bars for m in [said(ax.yaxis.label) or said(ax.xaxis.label)] if m))
    parts = []
    title = said(fig._suptitle)
    if title:
        parts.append(f"{title}.")
    n = len(panels)
    if n:
        parts.append("A figure of one panel." if n == 1 else f"A figure of {n} panels.")
    labels: list[str] = []
    for ax in panels:
        name = " ".join(x for x in (said(ax.title), said(ax._left_title), said(ax._right_title)) if x)
        axes = [f"{k} {v}" for k, v in (("x:", said(ax.xaxis.label)), ("y:", said(ax.yaxis.label))) if v]
        if name or axes:
            parts.append(" ".join(filter(None, [f"{name}:" if name and axes else name, "; ".join(axes)])) + ".")
        legend = ax.get_legend()
        for entry in ([] if legend is None else legend.get_texts()):
            if said(entry) and said(entry) not in labels:
                labels.append(said(entry))
    for legend in fig.legends:
        labels += [said(t) for t in legend.get_texts() if said(t) and said(t) not in labels]
    if labels:
        parts.append("Legend: " + ", ".join(labels) + ".")
    if not panels:  # drawn without axes: words shaded by a weight (attention_heatmap)
        words = [said(t) for ax in fig.axes if ax not in bars for t in ax.texts if said(t)]
        shade = " and ".join(measured) or "weight"
        parts.append(f"Words shaded by {shade}: " + " ".join(words[:60]) + (" ..." if len(words) > 60 else "") + ".")
    elif measured:
        parts.append("Colour: " + ", ".join(measured) + ".")
    return " ".join(parts)


def _png_2x(fig):
    """The inline backend's PNG for a figure, at twice the pixels, shown at 1x, described."""
    from IPython.core.pylabtools import retina_figure

    return retina_figure(fig, metadata={"Description": describe(fig)})


def _send_retina() -> None:
    """In a notebook kernel, send figures at 2x resolution (shown at 1x) with their description."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except ImportError:
        return
    if shell is None or not hasattr(shell, "display_formatter"):
        return
    try:  # the inline backend sets its own PNG formatter when it loads (at the first figure): load it now
        import matplotlib_inline.backend_inline  # noqa: F401
    except ImportError:
        pass
    shell.display_formatter.formatters["image/png"].for_type(matplotlib.figure.Figure, _png_2x)


_send_retina()
_MEASURE_COLOURS = {"p": "#1f77b4", "q": "#d62728"}


def _as_list(a) -> list[float]:
    return [float(x) for x in np.asarray(a, dtype=float).ravel()]


def _text_width_points(text: str, fontsize: float, family: str, bold: bool = False) -> float:
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.font_manager import FontProperties

    renderer = _text_width_points.renderer  # type: ignore[attr-defined]
    prop = FontProperties(family=family, size=fontsize, weight="bold" if bold else "normal")
    w, _, _ = renderer.get_text_width_height_descent(text, prop, ismath=False)
    return w * 72.0 / renderer.dpi


def _init_renderer():
    from matplotlib.backends.backend_agg import RendererAgg

    _text_width_points.renderer = RendererAgg(10, 10, 72)  # type: ignore[attr-defined]


@_fitted
def attention_heatmap(
    sentences: Sequence[Sequence[str]],
    weights: Sequence[Sequence[float]],
    *,
    titles: Sequence[str] | None = None,
    width: float = COLUMN_INCHES,
    vmax: float | None = None,
    highlight: Sequence[Sequence[bool]] | None = None,
    fontsize: float = 11,
    colorbar_label: str = "attention weight",
):
    """Draw sentences with each token's background shaded by its weight (J&W 2019, Fig. 1).

    Args:
        sentences: tokens of each sentence.
        weights: one weight per token (attention, importance, ...), same lengths.
        titles: an optional caption per sentence (e.g. "label 1, p(pos) = 0.93").
        width: figure width in inches; long sentences wrap.
        vmax: colour scale maximum (default: the largest weight shown, shared by all rows).
        highlight: optional per-token booleans, drawn bold and underlined (e.g. a known rationale).
        colorbar_label: what the colour shows (another score than attention: say which).
    """
    if len(sentences) != len(weights):
        raise ValueError(f"got {len(sentences)} sentences but {len(weights)} weight vectors")
    if titles is not None and len(titles) != len(sentences):
        raise ValueError(f"got {len(sentences)} sentences but {len(titles)} titles")
    _init_renderer()
    family = "DejaVu Sans"
    pad = 0.6 * fontsize  # points between tokens
    usable = (width - 1.1) * 72.0  # leave room for the colour bar and its label
    lines: list[tuple[str, list]] = []
    for i, (tokens, w) in enumerate(zip(sentences, weights)):
        w = _as_list(w)
        if len(tokens) != len(w):
            raise ValueError(f"sentence {i} has {len(tokens)} tokens but {len(w)} weights")
        marks = [False] * len(tokens) if highlight is None else [bool(x) for x in highlight[i]]
        if titles is not None:
            lines.append(("title", [(0.0, titles[i], 0.0, False, 0.0)]))
        line, x = [], 0.0
        for tok, weight, mark in zip(tokens, w, marks):
            tw = _text_width_points(tok, fontsize, family, bold=mark)
            if x + tw > usable and line:
                lines.append(("tokens", line))
                line, x = [], 0.0
            line.append((x, tok, weight, mark, tw))
            x += tw + pad
        lines.append(("tokens", line))
    all_w = [v for w in weights for v in _as_list(w)]
    vmax = vmax if vmax is not None else (max(all_w, default=0.0) or 1.0)
    cmap = plt.get_cmap(ATTENTION_CMAP)
    line_h = 1.9 * fontsize  # points
    height_pts = line_h * (len(lines) + 0.6)
    fig = plt.figure(figsize=(width, height_pts / 72.0))
    ax = fig.add_axes([0.01, 0.0, (usable / 72.0) / width, 1.0])
    ax.set_axis_off()
    ax.set_xlim(0, usable)
    ax.set_ylim(height_pts, 0)
    for r, (kind, items) in enumerate(lines):
        y = (r + 0.8) * line_h
        for x, text, weight, mark, tw in items:
            if kind == "title":
                ax.text(0, y, text, fontsize=fontsize * 0.9, color="#444444", va="center", ha="left", family=family, style="italic")
                continue
            level = min(max(weight, 0.0) / vmax, 1.0)
            ax.text(
                x, y, text, fontsize=fontsize, family=family, va="center", ha="left",
                bbox=dict(boxstyle="square,pad=0.15", fc=cmap(level * 0.9), ec="none"),
                color="white" if level > 0.65 else "black", fontweight="bold" if mark else "normal",
            )
            if mark:
                ax.plot([x, x + tw], [y + 0.55 * fontsize] * 2, color="#1f77b4", lw=1.6)
    cax = fig.add_axes([1 - 0.9 / width, 0.15, 0.12 / width, 0.7])
    shown = matplotlib.colors.ListedColormap(cmap(np.linspace(0.0, 0.9, 256)))  # the range used above
    sm = plt.cm.ScalarMappable(cmap=shown, norm=plt.Normalize(0, vmax))
    bar = fig.colorbar(sm, cax=cax)
    bar.set_label(colorbar_label, fontsize=8)
    cax.tick_params(labelsize=7)
    return fig


@_fitted
def plot_distributions(
    distributions: dict[str, Sequence[float]],
    tokens: Sequence[str],
    *,
    ax=None,
    title: str | None = None,
):
    """Grouped bars of several distributions over the same tokens."""
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 3))
    else:
        fig = ax.figure
    names = list(distributions)
    n = len(names)
    x = np.arange(len(tokens))
    width = 0.8 / max(n, 1)
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, name in enumerate(names):
        values = _as_list(distributions[name])
        if len(values) != len(tokens):
            raise ValueError(f"{name} has {len(values)} entries but there are {len(tokens)} tokens")
        colour = _MEASURE_COLOURS.get(name, palette[i % len(palette)])
        bars = ax.bar(x + (i - (n - 1) / 2) * width, values, width, label=name, color=colour, alpha=0.85)
        ax.bar_label(bars, fmt="%.2f", fontsize=8, padding=1)
    ax.set_xticks(x, tokens)
    ax.set_ylabel("weight")
    ax.set_ylim(0, max(1e-9, max(max(_as_list(v)) for v in distributions.values())) * 1.2)
    ax.legend(frameon=False)
    if title:
        ax.set_title(title)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return fig


@_fitted
def plot_training_history(histories: dict[str, Sequence[dict]], *, metric: str = "dev_roc_auc", ax=None, best: dict | None = None):
    """Dev metric per epoch for several models; ``best`` marks each model's kept epoch."""
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 3.2))
    else:
        fig = ax.figure
    for name, history in histories.items():
        epochs = [h["epoch"] for h in history]
        values = [h[metric] for h in history]
        (line,) = ax.plot(epochs, values, marker="o", ms=3, label=name)
        if best and name in best:
            b = best[name]
            ax.plot([b], [values[epochs.index(b)]], marker="*", ms=12, color=line.get_color(), zorder=3)
    ax.set_xlabel("epoch")
    ax.set_ylabel(metric.replace("_", " "))
    ax.legend(frameon=False, fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return fig


@_fitted
def plot_metric_relation(x, y, *, xlabel: str, ylabel: str, line=None, line_label: str | None = None, ax=None, title=None):
    """Scatter of one measure against another, with an optional reference line y = line(x)."""
    if ax is None:
        fig, ax = plt.subplots(figsize=(4.2, 3.4))
    else:
        fig = ax.figure
    ax.scatter(x, y, s=6, alpha=0.4, color="#1f77b4", edgecolor="none")
    if line is not None:
        xs = np.linspace(0, float(np.max(x)), 50)
        ax.plot(xs, line(xs), color="#d62728", lw=1.5, label=line_label)
        if line_label:
            ax.legend(frameon=False, fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return fig


@_fitted
def plot_scores(scores: dict[str, float], *, limits: dict[str, tuple[float, float]] | None = None, ax=None, title=None):
    """Horizontal bars of named scores (e.g. TVD, JSD, tau), each drawn against its own range."""
    if ax is None:
        fig, ax = plt.subplots(figsize=(4.2, 0.45 * len(scores) + 0.6))
    else:
        fig = ax.figure
    names = list(scores)
    limits = limits or {}
    for i, name in enumerate(names):
        lo, hi = limits.get(name, (0.0, 1.0))
        value = scores[name]
        frac = 0.0 if not np.isfinite(value) else (value - lo) / (hi - lo)
        ax.barh(i, 1.0, color="#eeeeee", height=0.6)
        ax.barh(i, frac, color="#1f77b4", height=0.6)
        ax.text(1.02, i, f"{value:.3f}  (range {lo:g} to {hi:.3g})", va="center", fontsize=8)
    ax.set_yticks(range(len(names)), names)
    ax.set_xlim(0, 1.6)
    ax.set_xticks([])
    ax.invert_yaxis()
    ax.spines[["top", "right", "bottom"]].set_visible(False)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


@_fitted
def measures_figure(p, q, tokens: Sequence[str], *, names=("p", "q"), title: str | None = None):
    """Two distributions side by side with their TVD, JSD and Kendall tau (Chapter 2)."""
    from ..metrics import jsd, kendall_tau, tvd

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
    return fig


@_fitted
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
    return fig


@_fitted
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
    import pandas as pd

    if ax is None:
        fig, ax = plt.subplots(figsize=(6.4, 3.4))
    else:
        fig = ax.figure
    bins = list(frame[bin_column].cat.categories) if isinstance(frame[bin_column].dtype, pd.CategoricalDtype) else sorted(frame[bin_column].unique())
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
    return fig


@_fitted
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
    return fig


@_fitted
def compare_heatmap(tokens: Sequence[str], rows: dict, *, header: str | None = None, normalise: bool = True, **kwargs):
    """One sentence shaded several times, one row per named weighting (attention, gradient, ...).

    With ``normalise`` each row is scaled to sum 1 so measures on different scales share a colour map.
    """
    weights, titles = [], []
    for name, w in rows.items():
        w = np.abs(np.asarray(w, dtype=float))
        if normalise and w.sum() > 0:
            w = w / w.sum()
        weights.append(w)
        titles.append(name if header is None or titles else f"{header} | {name}")
    return attention_heatmap([list(tokens)] * len(rows), weights, titles=titles, **kwargs)


@_fitted
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
    return attention_heatmap(sentences, weights, titles=titles, **kwargs)


@_fitted
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
    return fig


@_fitted
def plot_violin_panels(frames: dict, *, ylabel: str, ylim=None, reference=None, reference_label=None, height: float = 2.9,
                       xlabel: str | None = None):
    """One :func:`plot_violins_by_bin` panel per entry of ``frames`` (title -> long frame), stacked."""
    fig, axes = plt.subplots(len(frames), 1, figsize=(6.4, height * len(frames)), sharey=True, squeeze=False)
    for ax, (title, frame) in zip(axes[:, 0], frames.items()):
        plot_violins_by_bin(frame, value="value", ax=ax, ylabel=ylabel, title=title, ylim=ylim,
                            reference=reference, reference_label=reference_label, xlabel=xlabel)
    fig.tight_layout()
    return fig


@_fitted
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
    return fig


@_fitted
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
    return fig


def _finish(fig, ax, title: str | None, *, legend: bool = False):
    """The book's figure finish: legend outside on the right, no top/right spines, title, tight layout."""
    if legend:
        ax.legend(frameon=False, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.spines[["top", "right"]].set_visible(False)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


@_fitted
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
    return _finish(fig, ax, title, legend=True)


@_fitted
def plot_lambda_sweep(frame, *, points: dict | None = None, highlight=None, ax=None, title: str | None = None):
    """W&P's adversarial-training curve: mean attention JSD against mean output TVD, one point per lambda.

    ``frame`` is :attr:`attnlib.adversarial_training.LambdaSweep.frame` (columns ``lambda``,
    ``mean_jsd``, ``mean_tvd``); the points are joined in order of lambda. ``points`` maps a
    label to an extra (jsd, tvd) point drawn on the same axes (the seed-variance and
    uniform-attention models of W&P's Fig. 4); ``highlight`` rings one lambda of the frame.
    """
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.4, 3.8))
    else:
        fig = ax.figure
    f = frame.sort_values("lambda")
    ax.plot(f["mean_jsd"], f["mean_tvd"], "-o", color="#d62728", lw=1.5, ms=5, label="adversaries (one per lambda)")
    groups: list = []  # points that (nearly) coincide share one label, "λ = 0.01, 1"
    for lam, x, y in zip(f["lambda"], f["mean_jsd"], f["mean_tvd"]):
        for g in groups:
            if abs(g["x"] - x) < 0.03 and abs(g["y"] - y) < 0.006:
                g["lams"].append(lam)
                break
        else:
            groups.append({"x": x, "y": y, "lams": [lam]})
    for g in groups:
        ax.annotate("λ = " + ", ".join(f"{v:g}" for v in g["lams"]), (g["x"], g["y"]), textcoords="offset points",
                    xytext=(-6, 4), ha="right", va="bottom", fontsize=7, color="#d62728")
    markers = iter(["s", "D", "^", "v", "P", "X"])
    colours = iter(["#1f77b4", "#7f7f7f", "#2ca02c", "#9467bd", "#8c564b", "#e377c2"])
    for label, (x, y) in (points or {}).items():
        ax.plot([x], [y], linestyle="none", marker=next(markers), ms=8, color=next(colours), label=label)
    if highlight is not None:
        row = f[np.isclose(f["lambda"].to_numpy(dtype=float), float(highlight))]
        if row.empty:
            raise ValueError(f"highlight: no lambda {highlight:g} in the frame ({', '.join(f'{v:g}' for v in f['lambda'])})")
        ax.plot(row["mean_jsd"], row["mean_tvd"], "o", ms=15, mfc="none", mec="black", mew=1.5,
                label=f"shown: λ = {float(highlight):g}")
    ax.set_xlim(0, np.log(2) * 1.05)
    ax.axvline(np.log(2), color="grey", lw=0.8, ls=":")
    ax.set_ylim(0, max([float(f["mean_tvd"].max())] + [p[1] for p in (points or {}).values()]) * 1.35 + 1e-3)
    ax.set_xlabel("mean JSD(α_a, α_b): how different the attention is")
    ax.set_ylabel("mean TVD(ŷ_a, ŷ_b): output change")
    return _finish(fig, ax, title, legend=True)


@_fitted
def plot_guides(frame, *, metric: str = "test f1", title: str | None = None, ax=None):
    """W&P's Table 3 as bars: the diagnostic model's score per guide, with the seeds' sd and W&P's F1.

    ``frame`` is :func:`attnlib.diagnostic.diagnostic_table`'s result (index: guide). Error bars
    show ``<metric> sd`` when present; ``published f1`` (when present and finite) is a black tick.
    """
    if metric not in frame.columns:
        raise ValueError(f"metric {metric!r} is not a column of the frame ({', '.join(map(str, frame.columns))})")
    if ax is None:
        fig, ax = plt.subplots(figsize=(6.4, 0.45 * len(frame) + 1.0))
    else:
        fig = ax.figure
    y = np.arange(len(frame))
    values = frame[metric].to_numpy(dtype=float)
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
    return _finish(fig, ax, title, legend=legend)


_RANKING_STYLE = {"attention": ("#ff7f0e", "-"), "random": ("#7f7f7f", "--"), "gradient": ("#1f77b4", "-"),
                  "attention_x_gradient": ("#2ca02c", "-.")}


@_fitted
def plot_flip_curves(panels: dict, *, title: str | None = None):
    """Serrano & Smith's ranked removal as curves: share of decisions flipped vs fraction of weights erased.

    ``panels`` maps a panel title (a model) to {ranking: fractions}, where ``fractions`` has
    one entry per instance: the fraction of its tokens erased when its decision first
    flipped, NaN when it never flips. A curve that rises sooner is a ranking that finds
    decisive tokens sooner; where it ends below 1 is the share that never flips.
    """
    if not panels:
        raise ValueError("panels must map at least one title to {ranking: fractions}")
    fig, axes = plt.subplots(1, len(panels), figsize=(4.4 * len(panels), 4.3), sharey=True, squeeze=False)
    grid = np.linspace(0, 1, 201)
    for ax, (name, curves) in zip(axes[0], panels.items()):
        for ranking, fractions in curves.items():
            f = np.asarray(fractions, dtype=float)
            if f.ndim != 1 or len(f) == 0:
                raise ValueError(f"{name}/{ranking}: fractions must be a non-empty 1-d array")
            share = (f[None, :] <= grid[:, None]).mean(1)  # NaN (never flips) compares False
            colour, style = _RANKING_STYLE.get(ranking, (None, "-"))
            ax.plot(grid, share, color=colour, ls=style, lw=1.8,
                    label=f"{ranking.replace('_x_', ' × ')} (never: {np.mean(np.isnan(f)):.0%})")
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
    return fig


# ----------------------------------------------------------------------------- Chapter 11: identifiability
@_fitted
def matrix_heatmaps(matrices: dict, tokens: Sequence[str], *, diverging: Sequence[str] = (), title: str | None = None,
                    size: float = 3.6):
    """Attention matrices (queries x keys) side by side, labelled with the tokens.

    ``matrices``: panel title -> (n, n) array. Panels named in ``diverging`` (e.g. effective
    attention, or a difference, whose entries can be negative) use a red-blue map centred on
    0; the others the book's attention map from 0 to the largest weight shown among them.
    """
    if not matrices:
        raise ValueError("matrices must name at least one (n, n) matrix")
    n = len(tokens)
    for name, m in matrices.items():
        if np.shape(m) != (n, n):
            raise ValueError(f"matrix {name!r} has shape {np.shape(m)}; expected ({n}, {n}) for {n} tokens")
    plain = [np.asarray(m, float) for k, m in matrices.items() if k not in diverging]
    vmax = max((float(m.max()) for m in plain), default=1.0) or 1.0
    # at most two panels a row: three or more side by side shrink to stamps in the column
    ncols = min(len(matrices), 2)
    nrows = -(-len(matrices) // ncols)
    side = min(size, (COLUMN_INCHES - 0.2) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(side * ncols + 0.2, (side + 0.6) * nrows), squeeze=False)
    fontsize = 8 if n <= 20 else 7
    step = max(1, -(-n // 24))  # a readable label every `step` tokens
    ticks = list(range(0, n, step))
    for ax, (name, m) in zip(axes.ravel(), matrices.items()):
        m = np.asarray(m, float)
        if name in diverging:
            lim = float(np.abs(m).max()) or 1.0
            im = ax.imshow(m, cmap="RdBu_r", vmin=-lim, vmax=lim)
        else:
            im = ax.imshow(m, cmap=ATTENTION_CMAP, vmin=0, vmax=vmax)
        ax.set_xticks(ticks, [tokens[i] for i in ticks], rotation=90, fontsize=fontsize)
        ax.set_yticks(ticks, [tokens[i] for i in ticks], fontsize=fontsize)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("key" if step == 1 else f"key (a label every {step} tokens)")
        bar = fig.colorbar(im, ax=ax, fraction=0.046, pad=0.03)
        bar.set_label("signed weight (0 at white)" if name in diverging else "attention weight", fontsize=8)
        bar.ax.tick_params(labelsize=7)
    for ax in axes.ravel()[len(matrices):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("query")
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig


@_fitted
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
    return fig


@_fitted
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
    return _finish(fig, ax, title)


@_fitted
def plot_correlation_by_length(panels: dict, *, bins: Sequence[int], reference: dict | None = None,
                               title: str | None = None):
    """Pearson r between raw and effective attention against sentence length (mean +/- sd per length bin).

    ``panels``: name -> frame with ``length``, ``correlation`` and ``d_v``; ``bins``: bin edges
    in tokens; ``reference``: label -> ((lengths), (low, high) ranges) drawn as grey bars
    (a reading of a published figure).
    """
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    edges = np.asarray(bins)
    for i, (name, frame) in enumerate(panels.items()):
        which = np.digitize(frame["length"], edges) - 1
        keep = (which >= 0) & (which < len(edges) - 1)
        stats = frame[keep].groupby(which[keep])["correlation"].agg(["mean", "std", "size"])
        mids = (edges[stats.index] + edges[stats.index + 1] - 1) / 2
        ax.errorbar(mids, stats["mean"], yerr=stats["std"].fillna(0), marker="o", capsize=2, label=name,
                    color=plt.get_cmap("tab10")(i))
        ax.axvline(int(frame["d_v"].iloc[0]), color=plt.get_cmap("tab10")(i), lw=0.8, ls=":")
    for label, (xs, ranges) in (reference or {}).items():
        lo, hi = np.asarray(ranges, float).T
        ax.vlines(xs, lo, hi, color="#555555", lw=4, alpha=0.5, label=label)
        ax.plot(xs, (lo + hi) / 2, ls="none", marker="D", ms=4, color="#555555")  # a range of 0 shows too
    ax.set_xlabel("sentence length $d_s$ (tokens); dotted: $d_v$")
    ax.set_ylabel("Pearson r(raw, effective)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _finish(fig, ax, title)


@_fitted
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
    return _finish(fig, ax, title)


@_fitted
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
    return fig


@_fitted
def plot_pruning_curve(curves: dict, *, reference: dict | None = None, title: str | None = None, ax=None):
    """Accuracy against the fraction of heads pruned, one line per entry of ``curves``.

    ``curves``: label -> frame with columns ``fraction`` and ``accuracy`` (e.g.
    :func:`attnlib.head_importance.prune_by_importance`); a frame with ``min`` and ``max``
    columns (:func:`~attnlib.head_importance.prune_randomly`) is drawn with that range as a
    band, one with ``low`` and ``high`` with its interval as error bars. ``reference``: label ->
    a fraction pruned "without noticeable loss" in a paper, drawn as a shaded span from 0.
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
                            lw=0, label=f"{label}: range")
        elif {"low", "high"} <= set(frame.columns):
            ax.errorbar(frame["fraction"], frame["accuracy"],
                        yerr=[frame["accuracy"] - frame["low"], frame["high"] - frame["accuracy"]],
                        fmt="none", ecolor=line.get_color(), alpha=0.5, capsize=2)
    ax.set_xlabel("fraction of heads pruned")
    ax.set_ylabel("test accuracy")
    ax.set_xlim(0, 1)
    ax.legend(fontsize=7, loc="lower left")
    ax.grid(alpha=0.3)
    return _finish(fig, ax, title)


@_fitted
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
    return _finish(fig, ax, title)


@_fitted
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
    palette = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b"]
    y = np.arange(n_models)
    for j, column in enumerate(shares.columns):
        ax.barh(y - 0.4 + (j + 0.5) * height, np.nan_to_num(values[:, j]), height=height * 0.9,
                color=palette[j % len(palette)], label=str(column))
    if reference is not None:
        ax.axvline(reference, color="black", ls=":", lw=1, label="uniform weights")
    ax.set_yticks(y, [str(i) for i in shares.index], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of the explanation on the marked tokens")
    ax.grid(axis="x", alpha=0.3)
    return _finish(fig, ax, title, legend=True)


@_fitted
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
        ax.imshow(m, cmap=ATTENTION_CMAP, vmin=0, vmax=float(m.max()) or 1.0, aspect="auto", origin="lower")
        ax.set_xticks(range(n), tokens, rotation=90, fontsize=fontsize)
        ax.set_yticks(range(L), [f"layer {l + 1}" for l in range(L)], fontsize=7)
        ax.set_title(name, fontsize=10)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig


@_fitted
def plot_layer_correlations(table, *, measures: dict | None = None, title: str | None = None):
    """Spearman's rho with importance against the layer, one panel per importance measure (A&Z, Tables 1-3).

    ``table``: :func:`attnlib.experiments.flow.layer_correlations` (columns measure, method,
    layer, mean, sd). Each method is a line (mean) in a band (mean +- sd). ``measures``: which
    measures to draw and their panel titles (default: every measure, titled by its name).
    """
    measures = measures or {m: m for m in dict.fromkeys(table["measure"])}
    fig, axes = plt.subplots(1, len(measures), figsize=(3.6 * len(measures) + 0.4, 3.2), squeeze=False,
                             sharey=True)
    palette = ["#7f7f7f", "#1f77b4", "#d62728", "#2ca02c"]
    for ax, (measure, label) in zip(axes[0], measures.items()):
        part = table[table["measure"] == measure]
        for j, (method, rows) in enumerate(part.groupby("method", sort=False)):
            colour = palette[j % len(palette)]
            ax.plot(rows["layer"], rows["mean"], marker="o", ms=4, color=colour, label=method)
            ax.fill_between(rows["layer"], rows["mean"] - rows["sd"], rows["mean"] + rows["sd"],
                            color=colour, alpha=0.12, lw=0)
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
    return fig


@_fitted
def plot_audit(report, *, title: str | None = None):
    """The figure of an attention audit (:func:`attnlib.experiments.audit.audit`).

    Top: per head (layer x head), J&W's median TVD of the output when the head's attention is
    permuted, and (transformers) the mean correlation between raw and effective attention
    (1: nothing of the attention lies in the head's null space). Bottom:
    every explanation's ERASER AOPC comprehensiveness (higher is better) and sufficiency
    (lower is better), means with 95% bootstrap intervals, best first.
    """
    tables = getattr(report, "tables", None)
    if not isinstance(tables, dict) or "permutation" not in tables or "faithfulness" not in tables:
        raise ValueError("report must be an AuditReport (attnlib.experiments.audit.audit)")
    grids = {"median TVD under permutation": tables["permutation"]["median TVD"]}
    if "identifiability" in tables:
        grids["raw vs effective attention (mean r)"] = tables["identifiability"]["raw vs effective r (mean)"]
    faith = tables["faithfulness"]
    fig = plt.figure(figsize=(6.8, 2.6 + 0.22 * len(faith) + 0.9))
    grid = fig.add_gridspec(2, 2, height_ratios=[2.6, 0.22 * len(faith) + 0.9])
    for k, (name, series) in enumerate(grids.items()):
        ax = fig.add_subplot(grid[0, k] if len(grids) > 1 else grid[0, :])
        m = series.unstack("head").to_numpy(dtype=float)
        low = float(np.nanmin(m)) if name.startswith("raw") else 0.0  # r: its own range, TVD: from 0
        im = ax.imshow(m, cmap=ATTENTION_CMAP, vmin=low, vmax=max(float(np.nanmax(m)), low + 1e-9), aspect="auto")
        step = 1 if m.shape[1] <= 8 else 2
        ax.set_xticks(range(0, m.shape[1], step), [str(h + 1) for h in range(0, m.shape[1], step)], fontsize=8)
        ax.set_yticks(range(m.shape[0]), [str(layer + 1) for layer in range(m.shape[0])], fontsize=8)
        ax.set_xlabel("head", fontsize=9)
        ax.set_ylabel("layer", fontsize=9)
        bar = fig.colorbar(im, ax=ax, fraction=0.05, pad=0.03)
        bar.set_label(name, fontsize=8)
        bar.ax.tick_params(labelsize=8)
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
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


# ----------------------------------------------------------------------------- Chapter 10: erasure (moved from the chapter)
@_fitted
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
    return fig


__all__ += ["plot_single_weight"]


@_fitted
def plot_erasure_curves(curves: dict, *, title: str | None = None):
    """ERASER's curves, one column of panels per model: comprehensiveness (top) and sufficiency
    (bottom) against the top % of words deleted or kept, one line per method (Chapter 15).

    ``curves``: model -> :func:`attnlib.experiments.faithfulness.faithfulness_summary` with
    ``by_fraction=True`` (e.g. :func:`attnlib.experiments.faithfulness.erasure_curves`). The
    AOPC of a line is its plain mean over the fractions.
    """
    from ..experiments.faithfulness import METRICS

    if not curves:
        raise ValueError("curves must map at least one model to its by-fraction summary")
    fig, axes = plt.subplots(2, len(curves), figsize=(COLUMN_INCHES, 6.4), sharex=True, squeeze=False)
    for col, (family, by) in enumerate(curves.items()):
        for row, metric in enumerate(("comprehensiveness", "sufficiency")):
            ax = axes[row, col]
            label = METRICS[metric].label
            if label not in by:
                raise ValueError(f"curves[{family!r}] has no column {label!r}: pass faithfulness_summary(..., by_fraction=True)")
            for m, curve in by[label].groupby(level="measure", sort=False):
                x = 100 * curve.index.get_level_values("fraction")
                ax.plot(x, curve.values, **method_style(m))
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
    return fig


__all__ += ["plot_erasure_curves"]


@_fitted
def plot_by_length(curves: dict, *, ylabel: str, title: str | None = None):
    """One panel per model of a measure by length band, one line per method (Chapter 15).

    ``curves``: model -> a frame (rows: the bands, in order; columns: the methods), e.g.
    :func:`attnlib.experiments.explanations.plausibility_by_length`.
    """
    if not curves:
        raise ValueError("curves must map at least one model to its frame by length band")
    fig, axes = plt.subplots(1, len(curves), figsize=(COLUMN_INCHES, 3.6), sharey=True, squeeze=False)
    axes = axes[0]
    for ax, (family, frame) in zip(axes, curves.items()):
        for m in frame.columns:
            curve = frame[m].dropna()
            ax.plot([str(b) for b in curve.index], curve.values, **method_style(m))
        ax.set_title(family, fontsize=10)
        ax.set_xlabel(frame.index.name or "length (words)")
        ax.tick_params(axis="x", labelsize=8)
    axes[0].set_ylabel(ylabel, fontsize=9)
    handles, labels = axes[-1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.17, 1, 1))
    return fig


__all__ += ["plot_by_length"]
