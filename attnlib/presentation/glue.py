"""Quote a run's numbers in the chapters' prose, in a way every notebook front end renders.

A chapter glues each number it quotes to a name, ``glue("ch05_lstm_frac", frac)``, and a
paragraph that quotes the run is the Markdown output of a cell (its input hidden in the book,
folded in JupyterLab and Colab)::

    prose(r\"\"\"For {ch05_lstm_frac:.2f} of the sentences (ε = {ch05_eps:g}) ...\"\"\")

Why not MyST-NB's ``{glue:text}`` roles in markdown cells: only the Jupyter Book build
resolves them. Colab, JupyterLab (with or without jupyterlab-myst), VS Code and GitHub show the
raw role where the number should be. A Markdown *output* renders everywhere, a re-run with
another seed or profile regenerates it, and ``pytest --nbval`` compares its text (the output's
``text/plain`` is the paragraph itself), so the prose's numbers are checked as the tables are.

``{name}`` and ``{name:spec}`` (a Python format spec, as in an f-string) are replaced outside
``$...$`` / ``$$...$$`` math and ```code``` spans; ``{{`` and ``}}`` give literal braces. A
percentage never rounds a share that is not 1 up to "100%" (">99.9%") or one that is not 0
down to "0%" ("<0.1%").
"""
from __future__ import annotations

import numbers
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["Prose", "glue", "glue_all", "glued", "prose"]

_GLUED: dict[str, Any] = {}

# Math and code spans are left as they are: their braces are LaTeX's or code's, not names.
_PROTECTED = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$|```.*?```|`[^`\n]*`", re.S)
_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z_]\w*)(?::([^{}]*))?\}")


def glue(name: str, variable: Any, display: bool = True) -> None:
    """Give ``variable`` the name ``name``, for :func:`prose` to quote.

    ``display``: also show the value as the cell's output (False: record it only). A name glued
    again takes the new value (a re-run cell). Raises ValueError for a name that is not a Python
    identifier (the prose writes ``{name}``).
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(
            f"name must be a Python identifier (the prose quotes it as {{name}}), got {name!r}"
        )
    if not isinstance(display, bool):
        raise ValueError(f"display must be True or False, got {display!r}")
    _GLUED[name] = variable
    if display:
        from IPython.display import display as ipy_display

        ipy_display(variable)


def glue_all(values: "Mapping[str, Any]") -> None:
    """Glue every ``name: value`` of ``values`` (not displayed): what a chapter does with the
    readings an :mod:`attnlib.presentation.readings` function computes from its results."""
    if not isinstance(values, Mapping):
        raise TypeError(f"values must be a mapping of name to value, got {type(values).__name__}")
    for name, value in values.items():
        glue(name, value, display=False)


def glued() -> dict[str, Any]:
    """A copy of every name glued so far in this kernel, with its value."""
    return dict(_GLUED)


class Prose(str):
    """A paragraph of Markdown: front ends render it, its plain text is the paragraph itself."""

    def _repr_markdown_(self) -> str:
        return str(self)

    def __repr__(self) -> str:  # what a terminal, and nbval's text/plain, shows
        return str(self)

    def _repr_pretty_(self, p, cycle) -> None:  # IPython's text/plain
        p.text(str(self))


_PERCENT = re.compile(r"^(?P<head>.*?)\.(?P<digits>\d+)%$")


def _honest(value: Any, spec: str) -> str:
    """``format(value, spec)``, except that a share strictly between 0 and 1 never reads as
    100% or 0%: 0.99974 with ``.1%`` is ">99.9%", not "100.0%"; 0.0001 is "<0.1%"."""
    text = format(value, spec)
    m = _PERCENT.match(spec)
    if m is None or isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < 1:
        return text
    digits = int(m.group("digits"))
    step = 10.0 ** -digits
    if float(text.rstrip("%")) >= 100:
        return f">{100 - step:.{digits}f}%"
    if float(text.rstrip("%")) <= 0:
        return f"<{step:.{digits}f}%"
    return text


def _fill(segment: str, values: dict[str, Any]) -> str:
    def one(m: re.Match) -> str:
        token, name, spec = m.group(0), m.group(1), m.group(2)
        if name is None:
            return token[0]  # {{ or }}
        if name not in values:
            raise KeyError(
                f"the prose quotes {{{name}}}, which no cell has glued yet: run the cells above "
                f"this one first (a cell calls glue({name!r}, value))"
            )
        try:
            return _honest(values[name], spec or "")
        except (TypeError, ValueError) as err:
            raise ValueError(
                f"{{{name}:{spec}}}: cannot format {type(values[name]).__name__} "
                f"{values[name]!r} with {spec!r}: {err}"
            ) from None

    return _FIELD.sub(one, segment)


def prose(text: str, **values: Any) -> Prose:
    """``text`` (Markdown) with every ``{name}`` / ``{name:spec}`` replaced by its glued value.

    ``values``: names given here instead of (or over) glued ones. Math (``$...$``) and code
    spans are copied unchanged. Raises KeyError for a name nothing glued, ValueError for a
    spec that does not fit the value, TypeError when ``text`` is not a str.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str of Markdown, got {type(text).__name__}")
    known = {**_GLUED, **values}
    out, last = [], 0
    for m in _PROTECTED.finditer(text):
        out += [_fill(text[last : m.start()], known), m.group(0)]
        last = m.end()
    out.append(_fill(text[last:], known))
    return Prose("".join(out).strip("\n"))
