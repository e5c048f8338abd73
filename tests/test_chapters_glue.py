"""The committed chapters' glue: every key glued once, every key the prose uses glued.

The book build (-W) fails on both, but only after executing every chapter; this catches them
from the committed outputs in a second.
"""
import collections
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("[0-9]*.ipynb"))
ROLE = re.compile(r"\{glue(?::\w+)?\}`([^`:]+)(?::[^`]*)?`")


def _glued(nb) -> collections.Counter:
    keys = collections.Counter()
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            name = out.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:
                keys[name] += 1
    return keys


def test_there_are_chapters():
    assert len(CHAPTERS) >= 10


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_glue_keys_are_unique_and_every_used_key_is_glued(path):
    nb = nbformat.read(path, as_version=4)
    glued = _glued(nb)
    duplicates = sorted(k for k, n in glued.items() if n > 1)
    assert not duplicates, f"glued more than once: {duplicates}"
    used = {m.group(1) for cell in nb.cells if cell.cell_type == "markdown" for m in ROLE.finditer(cell.source)}
    missing = sorted(used - set(glued))
    assert not missing, f"used in the prose but never glued: {missing}"
