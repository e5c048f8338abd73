"""Grade a folder of submitted student notebooks with the chapters' own checkers; write a CSV.

    .venv/bin/python tools/grade.py SUBMISSIONS --out grades.csv [--timeout 120]

Folder convention: ``SUBMISSIONS/<student>/<chapter>.ipynb``, one folder per student, each
notebook named as its chapter (the student edition's file name, e.g. ``02_measures.ipynb``;
any name that starts with the chapter's number, e.g. ``02.ipynb``, is matched too).

The CSV has one row per (student, chapter, exercise) with the columns student, chapter,
exercise (the exercise's ``:label:``), passed (True/False) and message (the checker's verdict,
or why there is none). The exercises of a chapter are listed from the committed chapter
(``--chapters``, default chapters/), so a broken submission still gets a row per exercise;
a file whose name matches no chapter gets one row with exercise ``-``.

What runs: not the whole chapter (that would train models for minutes), but, in a fresh
``python3`` kernel with a temporary working folder and the ``book`` profile,

1. the chapter's opening code cells: the first run of code cells after the title (the install
   cell, ``parameters`` and the imports), and
2. every code cell from the first exercise (its ``{exercise-start}`` cell) to the end: the
   starters, the student's answers and any cells the student added there, and the check cells.

So an answer may use what the opening cells import and what the Exercises section defines,
not a variable from the middle of the chapter (the exercises are written that way).
A cell that raises does not stop the run: its error is reported with the exercise it belongs
to (the cells from one ``{exercise-start}`` to the next), and the other exercises are graded.
``--timeout`` (default 60 s) bounds the Exercises section's cells in all; past it the kernel
is stopped, and the exercises not yet checked are reported "timed out after N s". The opening
cells have their own limit (300 s), so a busy grading machine's slow import of torch does not
eat into the students' time; neither counts the kernel's start.
A file that is not a notebook is reported "not a notebook: ...". The grader never stops at a
broken notebook.

How verdicts leave the kernel: the kernel runs with ``ATTNLIB_GRADE_LOG`` set to a file, and
every ``attnlib.exercises.check_*`` appends its verdict there as a JSON line (checker, passed,
message). A verdict belongs to the exercise whose check cell calls that checker in the
committed chapter; if a checker runs more than once, its last verdict counts.

Why not nbgrader or otter-grader: both need their own markup in the notebooks (nbgrader's cell
metadata and ``### BEGIN SOLUTION`` fences, otter's question and test cells), which would make
the book's notebooks harder to read, and their own layouts (nbgrader's gradebook database,
otter's test files and Docker by default). The book already has the tags and the checkers;
this file adds the few lines that run them (nbclient).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError

sys.path.insert(0, str(Path(__file__).resolve().parent))
import zmq_poll_fix  # noqa: E402

zmq_poll_fix.apply()  # a lost wake-up must not hang a grade (see tools/zmq_poll_fix.py)

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ["student", "chapter", "exercise", "passed", "message"]
GRADE_LOG_ENV = "ATTNLIB_GRADE_LOG"  # attnlib.presentation.exercises.GRADE_LOG_ENV
DEFAULT_TIMEOUT = 60  # seconds for a notebook's Exercises section (the student's code and the checks)
SETUP_TIMEOUT = 300  # seconds for its opening cells (importing attnlib and torch on a busy machine)

_EXERCISE_START = re.compile(r"\{exercise-start\}")
_LABEL = re.compile(r"^:label:\s*(\S+)", re.MULTILINE)
_CHECKER = re.compile(r"\b(check_\w+)\s*\(")


@dataclass(frozen=True)
class Exercise:
    label: str
    checker: str  # the attnlib.exercises function its check cell calls


@dataclass
class Row:
    student: str
    chapter: str
    exercise: str
    passed: bool
    message: str


def tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def is_exercise_start(cell) -> bool:
    return cell.cell_type == "markdown" and bool(_EXERCISE_START.search(cell.source))


def exercises_of(nb) -> list[Exercise]:
    """Each exercise of a chapter: the label of an ``{exercise-start}`` cell and the checker its
    ``exercise-check`` cell calls."""
    found, label = [], None
    for cell in nb.cells:
        if is_exercise_start(cell):
            match = _LABEL.search(cell.source)
            label = match.group(1) if match else None
        elif "exercise-check" in tags(cell) and label is not None:
            match = _CHECKER.search(cell.source)
            if match:
                found.append(Exercise(label, match.group(1)))
                label = None
    return found


def setup_cells(nb) -> list[int]:
    """The chapter's opening code cells: the first run of code cells (install, parameters, imports)."""
    first = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), len(nb.cells))
    cells = []
    for i in range(first, len(nb.cells)):
        if nb.cells[i].cell_type != "code":
            break
        cells.append(i)
    return cells


def exercise_spans(nb) -> dict[str, range]:
    """label -> the cell indices from that exercise's ``{exercise-start}`` to the next one (or the end)."""
    starts = [(i, _LABEL.search(c.source)) for i, c in enumerate(nb.cells) if is_exercise_start(c)]
    spans = {}
    for k, (i, match) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(nb.cells)
        if match:
            spans[match.group(1)] = range(i, end)
    return spans


def exercise_cells(nb) -> list[int]:
    """Every code cell from the first exercise (its ``{exercise-start}`` cell) to the end."""
    first = next((i for i, c in enumerate(nb.cells) if is_exercise_start(c)), None)
    if first is None:
        return []
    setup = setup_cells(nb)
    return [i for i in range(first, len(nb.cells)) if nb.cells[i].cell_type == "code" and i not in setup]


def reference_chapters(chapters: Path) -> dict[str, Path]:
    return {p.name: p for p in sorted(chapters.glob("[0-9]*.ipynb"))}


def match_chapter(name: str, references: dict[str, Path]) -> Path | None:
    """The committed chapter a submission's file name stands for: the same name, else the same number."""
    if name in references:
        return references[name]
    number = re.match(r"\d+", name)
    if number:
        same = [p for n, p in references.items() if int(re.match(r"\d+", n).group()) == int(number.group())]
        if len(same) == 1:
            return same[0]
    return None


# ----------------------------------------------------------------------------- running one notebook


@dataclass
class Run:
    verdicts: dict  # checker -> (passed, message), the last verdict of each
    errors: dict  # cell index -> "ename: evalue"
    stopped: str | None  # why the run ended early (timeout, dead kernel), else None
    stopped_at: int | None  # the cell that was running then


def _where(nb, index: int) -> str:
    """A cell as a reader finds it: its position and first line."""
    lines = [line for line in nb.cells[index].source.splitlines() if line.strip()]
    first = lines[0].strip() if lines else ""
    return f"cell {index + 1}" + (f" `{first[:40]}{'...' if len(first) > 40 else ''}`" if first else "")


def _error_of(cell) -> str | None:
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            value = str(out.get("evalue", "")).strip().splitlines()
            value = re.sub(r"\(\d+\.py, line (\d+)\)", r"(line \1)", value[0]) if value else ""  # ipykernel's cell file
            return f"{out.get('ename', 'Error')}: {value}".rstrip(": ")
    return None


def run_cells(nb, setup: list[int], cells: list[int], timeout: float, setup_timeout: float = SETUP_TIMEOUT) -> Run:
    """Run the ``setup`` cells, then ``cells``, of ``nb`` in a fresh kernel; collect verdicts and errors.

    ``setup`` runs within ``setup_timeout`` seconds and ``cells`` within ``timeout``, each in all.
    """
    errors, stopped, stopped_at = {}, None, None
    with tempfile.TemporaryDirectory(prefix="attnlib-grade-") as work:
        log = Path(work) / "verdicts.jsonl"
        env = {**os.environ, GRADE_LOG_ENV: str(log)}
        env.setdefault("ATTNLIB_PROFILE", "book")
        client = NotebookClient(nb, timeout=int(timeout), kernel_name="python3", allow_errors=True,
                                shutdown_kernel="immediate", resources={"metadata": {"path": work}})
        try:
            with client.setup_kernel(env=env):
                for part, limit, what in ((setup, setup_timeout, "the opening cells timed out"),
                                          (cells, timeout, "timed out")):
                    deadline = time.monotonic() + limit
                    for index in part:
                        client.timeout = max(1, int(deadline - time.monotonic() + 0.999))
                        try:
                            if time.monotonic() >= deadline:
                                raise CellTimeoutError("no time left")
                            client.execute_cell(nb.cells[index], index)
                        except CellTimeoutError:
                            stopped, stopped_at = f"{what} after {limit:g} s", index
                            break
                        except DeadKernelError:
                            stopped, stopped_at = "the kernel died", index
                            break
                        error = _error_of(nb.cells[index])
                        if error:
                            errors[index] = error
                    if stopped:
                        break
        except Exception as err:  # noqa: BLE001 - a kernel that cannot start is a row, not a crash
            if stopped is None:
                stopped = f"could not run: {type(err).__name__}: {err}"
        verdicts = {}
        if log.exists():
            for line in log.read_text(encoding="utf-8").splitlines():
                try:
                    v = json.loads(line)
                    verdicts[v["checker"]] = (bool(v["passed"]), str(v["message"]))
                except (ValueError, KeyError, TypeError):
                    continue
    return Run(verdicts, errors, stopped, stopped_at)


# ----------------------------------------------------------------------------- grading


def grade_notebook(path: Path, student: str, reference: Path, timeout: float) -> list[Row]:
    """One row per exercise of ``reference``'s chapter for the submission at ``path``."""
    chapter = reference.stem
    expected = exercises_of(nbformat.read(reference, as_version=4))

    def rows(passed_message) -> list[Row]:
        return [Row(student, chapter, ex.label, *passed_message(ex)) for ex in expected]

    try:
        nb = nbformat.read(path, as_version=4)
        if not isinstance(nb.get("cells"), list):
            raise ValueError("no cells")
    except Exception as err:  # noqa: BLE001 - not JSON, not a notebook, unreadable
        reason = f"not a notebook: {type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"
        return rows(lambda ex: (False, reason.rstrip(": ")))
    cells = exercise_cells(nb)
    if not cells:
        return rows(lambda ex: (False, "no exercises found: the {exercise-start} cells are missing"))
    setup = setup_cells(nb)
    run = run_cells(nb, setup, cells, timeout)
    spans = exercise_spans(nb)
    setup_errors = [f"the opening {_where(nb, i)} raised {e}" for i, e in run.errors.items() if i in setup]

    def verdict(ex: Exercise) -> tuple[bool, str]:
        span = spans.get(ex.label, range(0))
        raised = [f"{_where(nb, i)} raised {e}" for i, e in run.errors.items() if i in span]
        if ex.checker in run.verdicts:
            passed, message = run.verdicts[ex.checker]
            if not passed and raised:
                message = f"{message} ({'; '.join(raised)})"
            return passed, message
        if run.stopped:
            where = f" in {_where(nb, run.stopped_at)}" if run.stopped_at is not None else ""
            return False, f"{run.stopped}{where}"
        if raised or setup_errors:
            return False, "; ".join(setup_errors + raised)
        return False, f"not checked: no cell ran attnlib.exercises.{ex.checker}"

    return rows(verdict)


def submissions(folder: Path) -> list[tuple[str, Path]]:
    """(student, notebook) for every ``folder/<student>/*.ipynb``, sorted."""
    found = []
    for student in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        found += [(student.name, nb) for nb in sorted(student.glob("*.ipynb"))]
    return found


def grade_folder(folder: Path, chapters: Path = ROOT / "chapters", timeout: float = DEFAULT_TIMEOUT,
                 jobs: int = 1, progress=None) -> list[Row]:
    """Rows for every ``folder/<student>/<chapter>.ipynb``, in that order; ``jobs`` kernels at once."""
    references = reference_chapters(chapters)
    example = next(iter(references), "02_measures.ipynb")
    tasks = []  # (student, path, reference or None)
    for student, path in submissions(folder):
        tasks.append((student, path, match_chapter(path.name, references)))

    def one(task) -> list[Row]:
        student, path, reference = task
        if reference is None:
            return [Row(student, path.stem, "-", False,
                        f"unknown chapter: name the notebook as its chapter (e.g. {example})")]
        if progress:
            progress(f"grading {student}/{path.name}")
        return grade_notebook(path, student, reference, timeout)

    if jobs <= 1 or len(tasks) <= 1:
        results = [one(task) for task in tasks]
    else:  # each notebook in its own process (and kernel)
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = []
            for student, path, reference in tasks:
                if reference is not None and progress:
                    progress(f"grading {student}/{path.name}")
                futures.append(pool.submit(grade_notebook, path, student, reference, timeout)
                               if reference is not None else None)
            results = [f.result() if f is not None else one(task) for f, task in zip(futures, tasks)]
    return [row for rows in results for row in rows]


def write_csv(rows: list[Row], out) -> None:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for r in rows:
        writer.writerow([r.student, r.chapter, r.exercise, r.passed, r.message])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("submissions", type=Path, help="folder of <student>/<chapter>.ipynb")
    parser.add_argument("--out", type=Path, default=None, help="the CSV to write (default: standard output)")
    parser.add_argument("--chapters", type=Path, default=ROOT / "chapters",
                        help="the committed chapters, which list each chapter's exercises (default: chapters/)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help="seconds for a notebook's Exercises section, its cells in all "
                             f"(default: {DEFAULT_TIMEOUT}; the opening cells get {SETUP_TIMEOUT})")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks graded at once (default: 1)")
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        parser.error(f"{args.submissions} is not a folder")
    if not submissions(args.submissions):
        parser.error(f"no notebooks in {args.submissions}/<student>/")
    rows = grade_folder(args.submissions, args.chapters, args.timeout, args.jobs,
                        progress=lambda line: print(line, file=sys.stderr, flush=True))
    if args.out is None:
        write_csv(rows, sys.stdout)
    else:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "w", newline="", encoding="utf-8") as out:
            write_csv(rows, out)
    passed = sum(r.passed for r in rows)
    print(f"{passed} of {len(rows)} exercises passed" + (f" -> {args.out}" if args.out else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
