"""Put every chapter's notebook, as committed (outputs included), in one zip beside the book's pages.

The book's first page links ``notebooks.zip``: a reader downloads the whole book in one file,
to open in JupyterLab or upload to Colab (each notebook's first cell installs attnlib where it
is missing). Written when the HTML build finishes, from ``chapters/*.ipynb`` in the order of
their numbers, with a fixed timestamp and file mode, so the same notebooks give the same bytes;
the file is written under a temporary name and renamed. Used as a local extension
(``_config.yml``); tested in ``tests/test_tools.py``.
"""
from __future__ import annotations

import os
import zipfile
from pathlib import Path

NAME = "notebooks.zip"
FOLDER = "attention-explanation-notebooks"  # the one folder the zip unpacks to
_STAMP = (2026, 1, 1, 0, 0, 0)


def write_zip(chapters: Path, out: Path) -> Path:
    """Zip ``chapters``' numbered notebooks into ``out``/:data:`NAME` (atomically); the zip's path."""
    notebooks = sorted(chapters.glob("[0-9]*.ipynb"))
    if not notebooks:
        raise FileNotFoundError(f"no chapter notebooks in {chapters}")
    out.mkdir(parents=True, exist_ok=True)
    target = out / NAME
    partial = out / f".{NAME}.partial"
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in notebooks:
            info = zipfile.ZipInfo(f"{FOLDER}/{path.name}", date_time=_STAMP)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, path.read_bytes())
    os.replace(partial, target)
    return target


def on_build_finished(app, exception) -> None:
    if exception is None and app.builder.format == "html":
        write_zip(Path(app.srcdir) / "chapters", Path(app.outdir))


def setup(app) -> dict:
    app.connect("build-finished", on_build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
