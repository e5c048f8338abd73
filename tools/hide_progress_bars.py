"""Keep the training and search progress bars out of the built pages.

A chapter run in Jupyter shows tqdm bars while it trains or searches; executed for the book they
are stored as widgets (an HBox of an HTML label, a FloatProgress and an HTML counter), and the
page would show a finished bar with the build machine's timings, which looks live and says nothing
to a reader. This Sphinx extension removes those widget outputs from each chapter's page after
MyST-NB has read it (the chapter and its other outputs, interactive figures included, are kept;
the notebooks keep their bars). It reads the page's widget state, which MyST-NB keeps per page in
``env.nb_metadata[docname]["js_files"]["ipywidgets_state"]``, so it works whether the build
executed the chapter or used its committed outputs. Used as a local extension (``_config.yml``);
tested in ``tests/test_tools.py``.
"""
from __future__ import annotations

import json
import re

from docutils import nodes

_VIEW = re.compile(r'<script type="application/vnd\.jupyter\.widget-view\+json">(.*?)</script>', re.S)


def progress_bar_ids(state: dict) -> set[str]:
    """The model ids of the tqdm bars in a widget state: HBoxes with a FloatProgress child."""
    models = state.get("state", {})

    def name(ref: str) -> str:
        return models.get(ref.removeprefix("IPY_MODEL_"), {}).get("model_name", "")

    return {
        model_id
        for model_id, model in models.items()
        if model.get("model_name") == "HBoxModel"
        and any(name(child) == "FloatProgressModel" for child in model.get("state", {}).get("children", []))
    }


def _view_id(raw: nodes.raw) -> str | None:
    match = _VIEW.fullmatch(raw.astext().strip())
    if not match:
        return None
    try:
        return json.loads(match.group(1)).get("model_id")
    except (ValueError, AttributeError):
        return None


def remove_progress_bars(doctree: nodes.Node, state: dict) -> int:
    """Remove each widget view of a progress bar from ``doctree``; returns how many were removed."""
    bars = progress_bar_ids(state)
    removed = 0
    if not bars:
        return removed
    for raw in list(doctree.findall(nodes.raw)):
        if _view_id(raw) in bars:
            parent = raw.parent
            parent.remove(raw)
            removed += 1
            # the output's own container, now empty, goes too
            while parent is not None and not parent.children and parent.parent is not None:
                grand = parent.parent
                grand.remove(parent)
                parent = grand
    return removed


def _state_of(env, docname: str) -> dict:
    js_files = getattr(env, "nb_metadata", {}).get(docname, {}).get("js_files", {})
    _, kwargs = js_files.get("ipywidgets_state", (None, {}))
    body = (kwargs or {}).get("body")
    if not body:
        return {}
    try:
        return json.loads(body)
    except ValueError:
        return {}


def on_doctree_read(app, doctree) -> None:
    state = _state_of(app.env, app.env.docname)
    if state:
        remove_progress_bars(doctree, state)


def setup(app) -> dict:
    app.connect("doctree-read", on_doctree_read)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
