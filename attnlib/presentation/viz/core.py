"""The base of every figure: the page's column and type sizes, line styles, descriptions
(alt text), the 2x PNGs a kernel sends, and the figures several parts share (heatmaps,
distributions, scores). :func:`fitted` is the decorator every figure function wears.
"""
from __future__ import annotations

from collections.abc import Sequence

import functools

import matplotlib
import matplotlib.pyplot as plt
import matplotlib.colors as mcolors
from matplotlib.ticker import MaxNLocator
import numpy as np

from .words import heaviest, listing, number, scatter_words, short_label, trend


__all__ = [
    "SAFE_COLOURS",
    "HATCHES",
    "ATTENTION_CMAP",
    "COLUMN_INCHES",
    "LINE_CYCLE",
    "MIN_FONT_PT",
    "attention_heatmap",
    "compare_heatmap",
    "CAPTION_TITLE",
    "caption",
    "describe",
    "finish",
    "fit_column",
    "fitted",
    "matrix_heatmaps",
    "method_style",
    "plot_distributions",
    "plot_metric_relation",
    "plot_scores",
    "plot_training_history",
    "summarise",
    "unreadable",
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


def fitted(draw):
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
    from ...experiments.explanations import METHODS

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
    title and axis labels, the legend's entries and what each colour bar measures, followed
    by what its data show when the function that drew it said so (:func:`summarise`).
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
    panels = [ax for ax in fig.axes if ax not in bars and ax.axison and ax.get_visible()]
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
    said_by = getattr(fig, "_attnlib_summaries", {})
    parts += [said_by[k] for k in [None, *fig.axes] if k in said_by]
    return " ".join(parts)


#: The longest data summary a figure's description carries (:func:`summarise`), in characters.
SUMMARY_CHARS = 300


def summarise(fig, summary: str, *, ax=None) -> None:
    """Say what ``fig``'s data show: :func:`describe` adds ``summary`` after the description it makes.

    Every figure function ends with one, computed from its data ("flow: 0.23 at layer 1 to
    0.22 at layer 4"), so a screen reader hears the result, not only the axes. The summary
    is kept apart from the rest of the description, which is made when the figure is shown
    (a title set afterwards is in it). A summary for the whole figure replaces the ones
    before it (a function that draws with another says what the whole shows); with ``ax``
    it is that panel's (a function drawn into the caller's figure), beside the others.
    Cut to :data:`SUMMARY_CHARS` at a word. A description given to :func:`describe` wins.
    """
    if not isinstance(summary, str) or not summary.strip():
        raise ValueError("summary must be a non-empty description of the data")
    text = " ".join(summary.split())
    if len(text) > SUMMARY_CHARS:
        text = text[: SUMMARY_CHARS - 1].rsplit(" ", 1)[0].rstrip(",;:") + " …"
    said_by = getattr(fig, "_attnlib_summaries", None)
    if said_by is None or ax is None:
        said_by = fig._attnlib_summaries = {}
    said_by[ax] = text


#: The title of the folded text under every figure a kernel sends (:func:`caption`).
CAPTION_TITLE = "Figure in words"


def caption(text: str) -> dict:
    """The output that follows a figure in every front end: its description, folded.

    Colab, JupyterLab and nbconvert show a PNG without alt text (only the book's build reads
    the description the PNG carries), so each figure a kernel sends is followed by this
    display bundle: Markdown holding one raw-HTML line, ``<details>`` titled
    :data:`CAPTION_TITLE` (folded: a sighted reader is not made to read the figure twice,
    a screen reader hears the title and can open it), and the same words as plain text for
    a terminal and for nbval to compare.
    """
    import html

    if not isinstance(text, str) or not text.strip():
        raise ValueError("a caption needs the figure's description")
    words = " ".join(text.split())
    folded = (f'<details class="figure-words"><summary>{CAPTION_TITLE}</summary>'
              f"{html.escape(words, quote=False)}</details>")
    return {"text/markdown": folded, "text/plain": f"{CAPTION_TITLE}: {words}"}


def _png_2x(fig):
    """The inline backend's PNG for a figure, at twice the pixels, shown at 1x, described:
    in the PNG (the book's alt text) and in the output's metadata (nbconvert's alt text),
    where :func:`_send_captions` finds it to send the visible :func:`caption` after it."""
    from IPython.core.pylabtools import retina_figure

    text = describe(fig)
    made = retina_figure(fig, metadata={"Description": text})
    if made is None:  # an empty figure: nothing is shown
        return None
    png, shape = made
    return png, {**(shape or {}), "alt": text}


def _plain_text(fig, printer, cycle) -> None:
    """A figure's text/plain, the form a front end shows when it cannot show the image (a
    terminal, a text-only renderer, nbval's comparison): its description, not matplotlib's
    ``<Figure size ...>``."""
    printer.text(f"Figure: {describe(fig)}")


def _send_captions(shell) -> None:
    """After each figure the kernel publishes (a cell's end, ``display(fig)``, a widget's
    output), publish its :func:`caption`, into the same place. An update of a display in
    place (``update=True``) sends none: its caption is already there."""
    publisher = shell.display_pub
    if getattr(publisher, "_attnlib_captions", False):
        return
    publish = publisher.publish

    def publish_then_caption(data, metadata=None, *args, **kwargs):
        publish(data, metadata, *args, **kwargs)
        alt = ((metadata or {}).get("image/png") or {}).get("alt")
        if alt and isinstance(data, dict) and "image/png" in data and not kwargs.get("update"):
            publish(caption(alt), {})

    publisher.publish = publish_then_caption
    publisher._attnlib_captions = True


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
    shell.display_formatter.formatters["text/plain"].for_type(matplotlib.figure.Figure, _plain_text)
    _send_captions(shell)


_send_retina()
#: Okabe & Ito's colour-blind-safe palette (no red/green pair), for figures that tell methods or
#: groups apart; pair it with a second cue (:data:`HATCHES` on bars, a marker or a direct label)
SAFE_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#F0E442")
#: bar fills told apart without colour, in :data:`SAFE_COLOURS`' order
HATCHES = ("", "///", "...", "xxx", "\\\\\\", "---", "+++", "ooo")
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


@fitted
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
    if len(sentences) == 1:
        summarise(fig, f"Heaviest words: {heaviest(sentences[0], weights[0], 3)}.")
    else:
        tops = [heaviest(tokens, w) for tokens, w in zip(sentences, weights)]
        summarise(fig, f"Heaviest word per row: {listing(tops, sep=', ')}.")
    return fig


@fitted
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


@fitted
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
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # epochs are whole numbers
    ax.set_ylabel(metric.replace("_", " "))
    ax.legend(frameon=False, fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    lines = [f"{short_label(name)} {trend([h['epoch'] for h in history], [h[metric] for h in history], 'at epoch ')}"
             + (f", kept epoch {best[name]}" if best and name in best else "") for name, history in histories.items()]
    summarise(fig, f"{metric.replace('_', ' ')}: {listing(lines)}.", ax=ax)
    return fig


@fitted
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
    summarise(fig, scatter_words(x, y) + ".", ax=ax)
    return fig


@fitted
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


@fitted
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
    fig = attention_heatmap([list(tokens)] * len(rows), weights, titles=titles, **kwargs)
    tops = [f"{short_label(name)} {heaviest(list(tokens), w)}" for name, w in zip(rows, weights)]
    summarise(fig, f"Heaviest word per row{' (each row scaled to sum 1)' if normalise else ''}: {listing(tops)}.")
    return fig


def finish(fig, ax, title: str | None, *, legend: bool = False):
    """The book's figure finish: legend outside on the right, no top/right spines, title, tight layout."""
    if legend:
        ax.legend(frameon=False, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.spines[["top", "right"]].set_visible(False)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


@fitted
def matrix_heatmaps(matrices: dict, tokens: Sequence[str], *, diverging: Sequence[str] = (), title: str | None = None,
                    size: float = 3.6):
    """Attention matrices (queries x keys) side by side, labelled with the tokens.

    ``matrices``: panel title -> (n, n) array. Panels named in ``diverging`` (e.g. effective
    attention, or a difference, whose entries can be negative) use a red-blue map centred on
    0; the others the book's attention map from 0 to the largest weight shown among them, on a
    square-root scale (the small weights between words stay visible beside a few large ones).
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
            # square-root scale: a head's few large weights (on [CLS] or [SEP]) would otherwise
            # leave the weights between words, mostly below 0.1, a blank white
            im = ax.imshow(m, cmap=ATTENTION_CMAP, norm=mcolors.PowerNorm(0.5, vmin=0, vmax=vmax))
        ax.set_xticks(ticks, [tokens[i] for i in ticks], rotation=90, fontsize=fontsize)
        ax.set_yticks(ticks, [tokens[i] for i in ticks], fontsize=fontsize)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("key" if step == 1 else f"key (a label every {step} tokens)")
        bar = fig.colorbar(im, ax=ax, fraction=0.046, pad=0.03)
        bar.set_label("signed weight (0 at white)" if name in diverging else "attention weight (square-root scale)",
                      fontsize=8)
        bar.ax.tick_params(labelsize=7)
    for ax in axes.ravel()[len(matrices):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("query")
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    summarise(fig, listing(_matrix_said(name, np.asarray(m, float), tokens, name in diverging)
                            for name, m in matrices.items()) + ".")
    return fig


def _matrix_said(name: str, m: np.ndarray, tokens: Sequence[str], signed: bool) -> str:
    """One attention matrix (queries x keys) in words: its most attended key and largest cell, or its range."""
    m = np.where(np.isfinite(m), m, np.nan)
    if np.isnan(m).all():
        return f"{short_label(name)}: n/a"

    def cell(pick) -> str:
        i, j = np.unravel_index(pick(m), m.shape)
        return f"{number(m[i, j])} (query '{tokens[i]}', key '{tokens[j]}')"

    if signed:
        return f"{short_label(name)}: from {cell(np.nanargmin)} to {cell(np.nanargmax)}"
    if not np.nanmax(np.abs(m)) > 0:
        return f"{short_label(name)}: all 0"
    seen = (~np.isnan(m)).sum(0)
    key = np.where(seen > 0, np.nansum(m, 0) / np.maximum(seen, 1), -np.inf)  # mean over the queries
    j = int(np.argmax(key))
    return f"{short_label(name)}: most attended key '{tokens[j]}' (mean {number(key[j])}), largest {cell(np.nanargmax)}"
