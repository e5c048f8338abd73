"""Give every folded solution a toggle that bears its title ("Solution 5.1: open it once you have tried").

    .venv/bin/python tools/solution_toggles.py           # write the cells' metadata where it differs
    .venv/bin/python tools/solution_toggles.py --check   # exit 1, naming the chapters, when any differs

A chapter's solution is two cells tagged ``solution``: a markdown line, "*Solution 5.1*, folded
below: open it once you have tried.", and the reference code, tagged ``hide-input`` (folded in
the book, and in JupyterLab and Colab by ``source_hidden`` / ``cellView``). The book's toggle
said "Show code cell source", so the solution's title was plain text above a toggle without
one. This tool sets MyST-NB's per-cell ``code_prompt_show`` / ``code_prompt_hide`` on the code
cell from the number in the markdown line, and tags that line ``remove-cell``: in the book the
toggle itself reads "Solution 5.1: open it once you have tried"; plain front ends, which ignore
both, still show the line above the folded cell. Only metadata changes: outputs stay valid.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
TITLE = re.compile(r"^\*Solution (\d+\.\d+)\*")


def prompts(number: str) -> dict:
    """The ``mystnb`` metadata of solution ``number``'s code cell."""
    return {"code_prompt_show": f"Solution {number}: open it once you have tried",
            "code_prompt_hide": f"Solution {number}: fold it"}


def apply(nb) -> bool:
    """Set the toggles of ``nb``'s solutions in place; True when anything changed."""
    changed, number = False, None
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if "solution" not in tags:
            continue
        if cell.cell_type == "markdown":
            found = TITLE.match(cell.source)
            if found is None:
                raise SystemExit(f"a solution's markdown line must start '*Solution N.M*': {cell.source[:60]!r}")
            number = found.group(1)
            if "remove-cell" not in tags:
                cell.metadata["tags"] = [*tags, "remove-cell"]
                changed = True
        elif cell.cell_type == "code" and "hide-input" in tags:
            if number is None:
                raise SystemExit("a solution's code cell has no '*Solution N.M*' line above it")
            want = prompts(number)
            if cell.metadata.get("mystnb") != want:
                cell.metadata["mystnb"] = want
                changed = True
            number = None
    return changed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="report chapters whose toggles differ; write nothing")
    args = parser.parse_args(argv)
    stale = []
    for path in sorted((ROOT / "chapters").glob("[0-9]*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        if apply(nb):
            stale.append(path.name)
            if not args.check:
                tmp = path.with_name(path.name + ".tmp")
                nbformat.write(nb, tmp)
                tmp.replace(path)
    if stale:
        print(("differ: " if args.check else "wrote: ") + ", ".join(stale))
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
