"""Let the environment choose whether the book build executes the chapters: ``ATTNLIB_BOOK_EXECUTE``.

``make book`` executes every chapter (``_config.yml``: ``execute_notebooks: force``), so the book a
reader builds shows what the code computes now. CI executes every chapter twice after the build
anyway (nbval in ``make test``, which compares the outputs with the committed ones, and
``make papermill``), so ``.ci/run`` builds the pages from the committed outputs with
``ATTNLIB_BOOK_EXECUTE=off`` and spends its time on those two runs: a third execution of every
chapter would add about 12 minutes on a 2-core machine and prove nothing nbval does not.

Any myst-nb execution mode may be given (``off``, ``force``, ``cache``, ``auto``, ``inline``);
unset or empty, the configuration stands. Used as a Sphinx extension by the book build
(``_config.yml``: ``sphinx.local_extensions``); tested in ``tests/test_tools.py``.
"""
from __future__ import annotations

import os

ENV = "ATTNLIB_BOOK_EXECUTE"
MODES = ("off", "force", "cache", "auto", "inline")


def mode_from_environment(environ=os.environ) -> str | None:
    """The execution mode ``$ATTNLIB_BOOK_EXECUTE`` asks for, None when unset or empty; a ValueError otherwise."""
    value = environ.get(ENV, "").strip()
    if not value:
        return None
    if value not in MODES:
        raise ValueError(f"{ENV} must be one of {', '.join(MODES)} (or unset), got {value!r}")
    return value


def apply(app, config) -> None:
    mode = mode_from_environment()
    if mode is not None:
        config.nb_execution_mode = mode


def setup(app) -> dict:
    app.connect("config-inited", apply, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
