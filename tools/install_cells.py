"""Write every chapter's first cell, the Colab / Binder install cell, from ``_config.yml``.

    .venv/bin/python tools/install_cells.py           # rewrite the cells that differ
    .venv/bin/python tools/install_cells.py --check   # exit 1, naming them, when any differs

The repository URL has one home, ``repository: url:`` in ``_config.yml`` (the book's launch,
repository and issue buttons are built from it too). A chapter opened alone in Colab cannot
read that file before attnlib is installed, so each chapter carries the URL in its first cell;
this tool writes that cell from the config, and ``tests/test_viz_widgets_exercises.py`` fails
when a chapter's cell is not exactly :func:`install_cell` of the configured URL. Change the URL
in ``_config.yml``, run this tool, commit.

The cell installs ``attnlib[run]``: what the chapters import (captum and the pretrained
transformer included) and nothing of the book build, so Colab's own ipywidgets and Jupyter
stack are left as they are (transformers is raised to 5.x where a runtime has 4.x). Only the cell's source changes: it has no output, so
the committed outputs stay valid.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]

#: The extra the install cell asks for (pyproject.toml).
RUN_EXTRA = "run"


def repository_url(config: Path = ROOT / "_config.yml") -> str:
    """``repository: url:`` of the book's config."""
    found = re.search(r"^repository:\s*\n(?:\s+#.*\n)*\s+url:\s*(\S+)", config.read_text(), re.M)
    if found is None:
        raise SystemExit(f"{config}: no 'repository:' section with a 'url:'")
    return found.group(1)


def install_cell(url: str) -> str:
    """The source of a chapter's first cell, installing ``attnlib[run]`` from ``url`` where attnlib is missing."""
    return (
        "# Colab / Binder: install attnlib when it is missing (nothing happens where it is).\n"
        f"# [{RUN_EXTRA}]: what the chapters import, nothing of the book build. The URL is\n"
        "# _config.yml's (tools/install_cells.py writes this cell).\n"
        "import importlib.util\n"
        "\n"
        f'REPOSITORY = "{url}"\n'
        'if importlib.util.find_spec("attnlib") is None:\n'
        f'    %pip install -q "attnlib[{RUN_EXTRA}] @ git+{{REPOSITORY}}"'
    )


def chapters() -> list[Path]:
    return sorted((ROOT / "chapters").glob("[0-9]*.ipynb"))


def stale(url: str) -> list[Path]:
    """The chapters whose first code cell is not :func:`install_cell` of ``url``."""
    want = install_cell(url)
    out = []
    for path in chapters():
        nb = nbformat.read(path, as_version=4)
        first = next(c for c in nb.cells if c.cell_type == "code")
        if first.source != want:
            out.append(path)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report the chapters whose cell differs")
    args = parser.parse_args(argv)
    url = repository_url()
    paths = stale(url)
    if args.check:
        for path in paths:
            print(f"{path.relative_to(ROOT)}: the install cell is not tools/install_cells.py's for {url}")
        return 1 if paths else 0
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        first = next(c for c in nb.cells if c.cell_type == "code")
        first.source = install_cell(url)
        tmp = path.with_suffix(".ipynb.tmp")
        nbformat.write(nb, tmp)
        tmp.replace(path)  # atomic: a chapter is never half written
        print(f"rewrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
