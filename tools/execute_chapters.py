"""Re-execute chapter notebooks in place, so their committed outputs are what the code produces.

    .venv/bin/python tools/execute_chapters.py                 # every chapter
    .venv/bin/python tools/execute_chapters.py chapters/02_measures.ipynb

Runs each notebook top to bottom in a fresh kernel with chapters/ as the working directory,
the ``book`` profile, and the widget state stored (the built book embeds it). `make test`
(nbval) then proves the committed outputs are reproducible.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def execute(path: Path) -> float:
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    client = NotebookClient(nb, timeout=900, kernel_name="python3", store_widget_state=True,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    for cell in nb.cells:  # keep diffs quiet: no per-run timestamps
        cell.get("metadata", {}).pop("execution", None)
    nbformat.write(nb, path)
    return time.perf_counter() - start


def main(argv: list[str]) -> int:
    os.environ.setdefault("ATTNLIB_PROFILE", "book")
    paths = [Path(p) for p in argv] or sorted((ROOT / "chapters").glob("[0-9]*.ipynb"))
    for path in paths:
        print(f"executing {path} ...", flush=True)
        print(f"  done in {execute(path.resolve()):.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
