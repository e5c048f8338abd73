"""Glue a computed value to a name, for the book's prose (``{glue:text}`name```), without the book build.

The chapters quote their run's numbers through MyST-NB's *glue*: a cell displays the value
with a ``scrapbook`` entry in the output's metadata, and the book build puts that output where
the prose names it. MyST-NB's own ``myst_nb.glue`` lives in the book-build stack (Sphinx,
docutils, MyST-NB), which a reader running a chapter in Colab or Binder does not need and
should not install into a runtime that has its own ipywidgets and transformers
(``pip install "attnlib[run]"`` holds only what the chapters import). :func:`glue` writes the
very same output (its mime bundle, metadata and hidden-value prefix are MyST-NB 1.x's, which
``tests/test_viz_widgets_exercises.py`` checks against ``myst_nb.glue`` where it is
installed), so the book reads it as before and ``pytest --nbval`` compares the same outputs.
"""
from __future__ import annotations

from typing import Any

__all__ = ["GLUE_PREFIX", "glue"]

#: The mime-type prefix of a value glued with ``display=False`` (MyST-NB's ``GLUE_PREFIX``):
#: front ends show no output for it, the book build still finds it.
GLUE_PREFIX = "application/papermill.record/"


def glue(name: str, variable: Any, display: bool = True) -> None:
    """Glue ``variable`` to ``name`` in this cell's output, as MyST-NB's ``glue`` does.

    ``name``: the key the prose uses (``{glue:text}`name:.3f```); ``display``: show the value
    in the cell's output too (False: only the book build sees it). Needs a running IPython
    kernel (Jupyter, Colab, papermill, nbval); elsewhere IPython prints the value's repr.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty str (the key the prose uses), got {name!r}")
    if not isinstance(display, bool):
        raise ValueError(f"display must be True or False, got {display!r}")
    from IPython.core.formatters import format_display_data
    from IPython.display import display as ipy_display

    bundle, metadata = format_display_data(variable)
    prefix = "" if display else GLUE_PREFIX
    metadata["scrapbook"] = dict(name=name, mime_prefix=prefix)
    ipy_display({prefix + k: v for k, v in bundle.items()}, raw=True, metadata=metadata)
