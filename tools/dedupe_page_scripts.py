"""Drop the second copy of inline scripts that Sphinx 7.4 writes twice into every page.

An extension that calls ``app.add_js_file(None, body=...)`` after the builder is set up (sphinx-thebe
and sphinx-togglebutton do, in ``env-before-read-docs``) reaches the HTML builder twice: at once,
as a script whose file name is ``None``, and again when the builder prepares writing and replays
the registry, now with the file name ``''`` (``js_filename or ''`` in
``StandaloneHTMLBuilder.prepare_writing``). The two copies differ only in that name, so Sphinx's
own de-duplication keeps both, and the page declares ``const THEBE_JS_URL`` twice: the browser
logs "Identifier 'THEBE_JS_URL' has already been declared" on every page.

:func:`dedupe_scripts` runs on ``html-page-context`` and keeps the first of any scripts that are
equal once ``None`` and ``''`` are read as the same name. Used as a Sphinx extension by the book
build (``_config.yml``: ``sphinx.local_extensions``); tested in ``tests/test_tools.py``, and the
page check (``tests/check_pages.py``) fails on any console error.
"""
from __future__ import annotations


def _key(script) -> tuple:
    filename = getattr(script, "filename", script) or ""
    attributes = getattr(script, "attributes", {}) or {}
    return (str(filename), getattr(script, "priority", 500), tuple(sorted(attributes.items())))


def dedupe_scripts(app, pagename, templatename, context, doctree) -> None:
    """Keep the first of each script in ``context['script_files']`` (in place), None and '' alike."""
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        key = _key(script)
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique


def setup(app) -> dict:
    app.connect("html-page-context", dedupe_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
