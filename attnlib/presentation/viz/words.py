"""Figures in words: the small phrases a figure's alt text uses to say what its data show.

:func:`attnlib.presentation.viz.core.summarise` adds such a phrase to a figure's description;
the figure functions of :mod:`.core` and :mod:`.part1` ... :mod:`.part4` build it from their
data with these helpers ("flow: 0.23 at layer 1 to 0.22 at layer 4"). Not part of ``viz``'s
names: a chapter never calls them.
"""
from __future__ import annotations

import numpy as np

__all__ = ["number", "listing", "short_label", "finite", "trend", "heaviest", "spread", "scatter_words", "ends"]


def number(value, digits: int = 2) -> str:
    """A number as a reader reads it: ``digits`` significant digits ("0.41", "12", "1,200"); "n/a" if NaN."""
    try:
        v = float(f"{float(value):.{digits}g}")
    except (TypeError, ValueError):
        return "n/a"
    if not np.isfinite(v):
        return "n/a"
    if v == 0:
        return "0"
    return f"{v:,.0f}" if abs(v) >= 100 else format(v, "g")


def listing(items, limit: int = 6, sep: str = "; ") -> str:
    """At most ``limit`` items joined by ``sep``, then "…" when there are more; "n/a" when none."""
    items = [str(i) for i in items]
    if not items:
        return "n/a"
    return sep.join(items[:limit]) + (sep + "…" if len(items) > limit else "")


def short_label(label, chars: int = 32) -> str:
    """A legend or panel label without its parenthesis, at most ``chars`` characters."""
    text = " ".join(str(label).split(" (")[0].split()) or " ".join(str(label).split())
    return text if len(text) <= chars else text[: chars - 1].rstrip() + "…"


def finite(values) -> np.ndarray:
    """The finite entries of ``values``, flattened, as floats (non-numbers are skipped)."""
    try:
        a = np.asarray(values, dtype=float).ravel()
    except (TypeError, ValueError):
        return np.zeros(0)
    return a[np.isfinite(a)]


def trend(xs, ys, at: str = "at ", unit=str) -> str:
    """A line in words: its first and last finite value (and its peak, when between them).

    ``at``: what precedes each x ("at layer "); ``unit``: how an x is written.
    """
    x = list(xs)
    y = np.asarray(ys, dtype=float).ravel() if len(x) else np.zeros(0)
    keep = [i for i in range(min(len(x), len(y))) if np.isfinite(y[i])]
    if not keep:
        return "n/a"
    first, last = keep[0], keep[-1]
    if first == last:
        return f"{number(y[first])} {at}{unit(x[first])}"
    text = f"{number(y[first])} {at}{unit(x[first])} to {number(y[last])} {at}{unit(x[last])}"
    top = max(keep, key=lambda i: y[i])
    low = min(keep, key=lambda i: y[i])
    for k, word in ((top, "peak"), (low, "lowest")):
        if k not in (first, last) and number(y[k]) not in (number(y[first]), number(y[last])):
            return text + f" ({word} {number(y[k])} {at}{unit(x[k])})"
    return text


def heaviest(tokens, weights, k: int = 1) -> str:
    """The ``k`` tokens with the largest finite weights, as "'bad' (0.41)"; "n/a" when none."""
    w = np.asarray(weights, dtype=float).ravel()
    order = [i for i in np.argsort(-np.where(np.isfinite(w), w, -np.inf), kind="stable") if np.isfinite(w[i])]
    return ", ".join(f"'{tokens[i]}' ({number(w[i])})" for i in order[:k] if i < len(tokens)) or "n/a"


def spread(values) -> str:
    """A group of values in words: its median and n ("median 0.012, n = 200"); NaN skipped."""
    v = finite(values)
    return f"median {number(np.median(v))}, n = {len(v)}" if len(v) else "n = 0"


def scatter_words(x, y, what: str = "point") -> str:
    """Points in words: how many, Pearson r (when defined) and the ranges of x and y; NaN skipped."""
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    n = min(len(x), len(y))
    ok = np.isfinite(x[:n]) & np.isfinite(y[:n])
    x, y = x[:n][ok], y[:n][ok]
    if not len(x):
        return f"No {what}s"
    text = f"{len(x):,} {what}{'s' if len(x) != 1 else ''}"
    if len(x) > 2 and np.ptp(x) > 0 and np.ptp(y) > 0:
        text += f", Pearson r = {number(np.corrcoef(x, y)[0, 1])}"
    return text + f"; x from {number(x.min())} to {number(x.max())}, y from {number(y.min())} to {number(y.max())}"


def ends(values) -> str:
    """The first and last finite value of a line, "0.97 to 0.6"; "n/a" when none."""
    v = finite(values)
    return "n/a" if not len(v) else number(v[0]) if len(v) == 1 else f"{number(v[0])} to {number(v[-1])}"
