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
description of itself (:func:`describe`: title, panels, axes, legend, colour bars, what its
data show) in its PNG, which the book build uses as the image's alt text
(``tools/figure_alt.py``), and in its output's metadata (nbconvert's alt text); and since
Colab and JupyterLab show a PNG with no alt text at all, the kernel follows each figure with
the same words, folded under "Figure in words" (:func:`caption`), in every front end.

The functions live by part (:mod:`.core`, the base and the figures several parts share;
:mod:`.part1` ... :mod:`.part5`), so a new chapter adds to its part's module; every name is
imported here, so ``from attnlib import viz`` and ``viz.plot_...`` are the way to call them.
"""
from __future__ import annotations

from . import core, part1, part2, part3, part4, part5
from .core import *  # noqa: F401,F403
from .part1 import *  # noqa: F401,F403
from .part2 import *  # noqa: F401,F403
from .part3 import *  # noqa: F401,F403
from .part4 import *  # noqa: F401,F403
from .part5 import *  # noqa: F401,F403

__all__ = [*core.__all__, *part1.__all__, *part2.__all__, *part3.__all__, *part4.__all__, *part5.__all__]
