"""Write the student edition of the chapters: the same notebooks without the solutions or any output.

    .venv/bin/python tools/student_edition.py                      # every chapter -> _build/student
    .venv/bin/python tools/student_edition.py chapters/02_measures.ipynb --out handout/

Decided by the cells' tags only (set in the chapters, and read by the book build):

* ``solution`` cells (the folded reference solutions, markdown that never runs) are removed;
* ``exercise`` cells (the starters, which raise NotImplementedError) and ``exercise-check``
  cells (``attnlib.exercises.check_...(my_fn)``) are kept, as is every other cell: the student
  runs the whole chapter;
* every output, execution count and the stored widget state are cleared;
* a short note after the title says that this is the student edition and how to check an answer.

The committed chapters are not changed: the book keeps its solutions, folded and never run. No
cell after an exercise uses the answered function except that exercise's check cell, and the
checkers catch the starter's NotImplementedError, so the book and the student edition run to
the end unanswered (tests/test_classroom.py).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]

#: The tag of the cells left out of the student edition.
SOLUTION_TAG = "solution"

#: Tag of the note this tool adds after the title (so a second pass does not add another).
NOTE_TAG = "student-edition"

NOTE = """\
**Student edition.** The solutions are left out. Run the chapter from the top. In each
exercise, replace the starter's `raise NotImplementedError(...)` with your code and run the
cell below it, `attnlib.exercises.check_...(my_fn)`: it prints a one-line verdict and never
stops the notebook. Hand in this notebook under its own file name."""


def tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def student_notebook(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of ``nb`` without the cells tagged ``solution``, with no outputs, and with the note."""
    out = nbformat.from_dict(nb)  # a deep copy
    cells = [c for c in out.cells if SOLUTION_TAG not in tags(c) and NOTE_TAG not in tags(c)]
    for cell in cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        cell.metadata.pop("execution", None)
    note = nbformat.v4.new_markdown_cell(NOTE, metadata={"tags": [NOTE_TAG]})
    note.id = "student-edition-note"
    title = next((i for i, c in enumerate(cells) if c.cell_type == "markdown"), -1)
    cells.insert(title + 1, note)
    out.cells = cells
    out.metadata.pop("widgets", None)  # the saved widget views belonged to the cleared outputs
    return out


def chapter_paths(inputs: list[Path]) -> list[Path]:
    """The notebooks named, and the chapter notebooks (NN_*.ipynb) of every folder named."""
    paths = []
    for item in inputs:
        paths += sorted(item.glob("[0-9]*.ipynb")) if item.is_dir() else [item]
    return paths


def write_student_edition(inputs: list[Path], out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in chapter_paths(inputs):
        nb = nbformat.read(path, as_version=4)
        student = student_notebook(nb)
        nbformat.validate(student)
        target = out_dir / path.name
        nbformat.write(student, target)
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="*", type=Path, default=[ROOT / "chapters"],
                        help="chapter notebooks or folders of them (default: chapters/)")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "student",
                        help="output folder (default: _build/student)")
    args = parser.parse_args(argv)
    written = write_student_edition(args.inputs, args.out)
    if not written:
        parser.error("no chapter notebooks found")
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
