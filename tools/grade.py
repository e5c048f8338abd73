"""Grade a folder of submitted student notebooks with the chapters' own checkers; write a CSV.

    .venv/bin/python tools/grade.py SUBMISSIONS --out grades.csv [--timeout 180] [--resume] [--unsafe]

Folder convention: ``SUBMISSIONS/<student>/<chapter>.ipynb``, one folder per student. A
notebook's chapter is recognised by its exercises' labels (the anchor of each exercise's
opening cell, ``<a id="ex-tvd"></a>``, or an older edition's ``:label:``), else by its file name: the student edition's (``02_measures.ipynb``)
or any name that starts with the chapter's number (``02.ipynb``). When a student hands in
one chapter twice, the newest file (by modification time, then name) is graded and the
rows say so in ``note``; a warning is printed.

The CSV has one row per (student, chapter, exercise): student, chapter, exercise (the
exercise's label), passed (True/False), message (the verdict, or why there is none),
file (the notebook graded), note (duplicates, a chapter recognised by its labels) and
sandbox (``bwrap``, or ``unsandboxed`` under ``--unsafe``). The exercises of a chapter are
listed from the committed chapter (``--chapters``, default chapters/), so a broken
submission still gets a row per exercise; a file that matches no chapter gets one row with
exercise ``-``. Each student's rows are appended to the CSV and flushed to disk as soon as
that student is graded; ``--resume`` keeps the rows already there and grades only the
students without any.

What runs, in a sandbox (tools/sandbox.py: bubblewrap; another user, a read-only view of the
system and attnlib, no network, no view of the submissions, the CSV or this process, limits
on time, memory, processes and file size; every process killed at the end), in a fresh
``python3`` kernel with the ``book`` profile: the chapter's opening code cells (install,
``parameters``, imports) and every code cell of its Exercises section (from the first
exercise's opening cell) except the check cells and the prose cells (tag ``prose``). ``--timeout`` (default 180 s) bounds all of it,
the kernel's start and the opening cells included. After each exercise's cells, a cell of
the grader's calls the student's function (named by the committed chapter's check cell,
e.g. ``my_tvd``) on the checker's own inputs and writes the values it returns to the
sandbox's one writable folder, as numbers (JSON and ``.npz``, no pickles). When the sandbox
has ended, this process reads those numbers and compares them with the references, which
it computes itself (``attnlib.presentation.exercises.judge_recorded``): nothing the
student's code writes, patches or prints can turn into a pass; its wrong numbers are a fail.

So an answer may use what the opening cells import and what the Exercises section defines,
not a variable from the middle of the chapter (the exercises are written that way); an
answer defined elsewhere is reported with where it must go. A cell that raises does not
stop the run: its error is reported with its exercise. A notebook that hangs, crashes its
kernel or kills the process running it is reported, and the next one is graded.

Without bubblewrap the grader refuses to grade; ``--unsafe`` runs the kernels without the
sandbox (time limit and rlimits only; student code can then read other hand-ins and leave
processes behind) and writes ``unsandboxed`` into every row.

Why not nbgrader or otter-grader: both need their own markup in the notebooks (nbgrader's cell
metadata and ``### BEGIN SOLUTION`` fences, otter's question and test cells), which would make
the book's notebooks harder to read, and their own layouts (nbgrader's gradebook database,
otter's test files and Docker by default). The book already has the tags and the checkers;
this file adds the few lines that run them (nbclient, bubblewrap).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sandbox  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOOLS = Path(__file__).resolve().parent
COLUMNS = ["student", "chapter", "exercise", "passed", "message", "file", "note", "sandbox"]
DEFAULT_TIMEOUT = 180  # seconds for a notebook in all: the kernel's start, the opening cells, the Exercises
MAX_NOTEBOOK_BYTES = 64 * 2**20  # a bigger hand-in is not read
MAX_RUN_BYTES = 2**20  # the runner's report (run.json)
SANDBOXED, UNSANDBOXED = "bwrap", "unsandboxed"

# An exercise opens with a markdown cell that carries its label as an anchor,
# ``> <a id="ex-tvd"></a>**Exercise 2.1: ...**``; hand-ins from editions before issue 25 have a
# sphinx-exercise ``{exercise-start}`` fence with ``:label: ex-tvd`` instead. Both are read.
_EXERCISE_START = re.compile(r"\{exercise-start\}|<a id=\"ex-[\w-]+\"></a>")
_LABEL = re.compile(r"^:label:\s*(\S+)|<a id=\"(ex-[\w-]+)\"></a>", re.MULTILINE)
#: The tag of a cell whose output is a paragraph of the chapter's prose (``prose(...)``): it
#: quotes numbers from the middle of the chapter, which the grader does not run.
PROSE_TAG = "prose"
_CHECK_CALL = re.compile(r"\b(check_\w+)\s*\(\s*([A-Za-z_][\w.]*)\s*\)")


@dataclass(frozen=True)
class Exercise:
    label: str
    checker: str  # the attnlib.exercises function its check cell calls
    answer: str = ""  # what the check cell hands to it: the student's function, e.g. my_tvd


@dataclass
class Row:
    student: str
    chapter: str
    exercise: str
    passed: bool
    message: str
    file: str = ""
    note: str = ""
    sandbox: str = SANDBOXED


def tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def is_exercise_start(cell) -> bool:
    return cell.cell_type == "markdown" and bool(_EXERCISE_START.search(cell.source))


def _label(source: str) -> str | None:
    match = _LABEL.search(source)
    return (match.group(1) or match.group(2)) if match else None


def exercises_of(nb) -> list[Exercise]:
    """Each exercise of a chapter: the label of its opening cell, the checker its
    ``exercise-check`` cell calls and the function it hands over."""
    found, label = [], None
    for cell in nb.cells:
        if is_exercise_start(cell):
            label = _label(cell.source)
        elif "exercise-check" in tags(cell) and label is not None:
            match = _CHECK_CALL.search(cell.source)
            if match:
                found.append(Exercise(label, match.group(1), match.group(2)))
                label = None
    return found


def labels_of(nb) -> list[str]:
    """The label of every exercise's opening cell, in order."""
    return [label for c in nb.cells if is_exercise_start(c) for label in [_label(c.source)] if label]


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
    """label -> the cell indices from that exercise's opening cell to the next one's (or the end)."""
    starts = [(i, _label(c.source)) for i, c in enumerate(nb.cells) if is_exercise_start(c)]
    spans = {}
    for k, (i, label) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(nb.cells)
        if label:
            spans[label] = range(i, end)
    return spans


def exercise_cells(nb) -> list[int]:
    """Every code cell from the first exercise's opening cell to the end, but prose cells."""
    first = next((i for i, c in enumerate(nb.cells) if is_exercise_start(c)), None)
    if first is None:
        return []
    setup = setup_cells(nb)
    return [
        i
        for i in range(first, len(nb.cells))
        if nb.cells[i].cell_type == "code" and i not in setup and PROSE_TAG not in tags(nb.cells[i])
    ]


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


def chapter_by_labels(labels: list[str], chapter_labels: dict[Path, set]) -> Path | None:
    """The one committed chapter that shares the most exercise labels with ``labels`` (None if none or a tie)."""
    overlap = {path: len(set(labels) & known) for path, known in chapter_labels.items()}
    best = max(overlap.values(), default=0)
    winners = [path for path, n in overlap.items() if n == best]
    return winners[0] if best > 0 and len(winners) == 1 else None


def read_notebook(path: Path):
    """The notebook at ``path``; ValueError when it is too big or has no cells."""
    if path.stat().st_size > MAX_NOTEBOOK_BYTES:
        raise ValueError(f"larger than {MAX_NOTEBOOK_BYTES // 2**20} MB")
    nb = nbformat.read(path, as_version=4)
    if not isinstance(nb.get("cells"), list):
        raise ValueError("no cells")
    return nb


# ----------------------------------------------------------------------------- running one notebook


@dataclass
class Run:
    errors: dict  # student's cell index -> "ename: evalue"
    capture_errors: dict  # checker -> the error of the grader's own cell that records its answers
    stopped: str | None  # why the run ended early (timeout, dead kernel, ...), else None
    stopped_at: int | None  # the student's cell running then
    stopped_in: str | None  # or the checker whose answers were being recorded then
    seconds: float


def _where(nb, index: int) -> str:
    """A cell as a reader finds it: its position and first line."""
    lines = [line for line in nb.cells[index].source.splitlines() if line.strip()]
    first = lines[0].strip() if lines else ""
    return f"cell {index + 1}" + (f" `{first[:40]}{'...' if len(first) > 40 else ''}`" if first else "")


def _clean_error(text: str) -> str:
    return re.sub(r"\(\d+\.py, line (\d+)\)", r"(line \1)", str(text))[:300]  # ipykernel's cell file name


def _capture_source(ex: Exercise, answers_dir: str) -> str:
    return ("import attnlib.presentation.exercises as _attnlib_grading\n"
            f"_attnlib_grading.record_answers({ex.checker!r}, lambda: ({ex.answer}), {answers_dir!r})\n"
            "del _attnlib_grading")


def build_job(nb, expected: list[Exercise], answers_dir: str) -> list[dict]:
    """The cells the runner executes, in order: the opening cells, the Exercises section's code
    cells but the check cells, and after each exercise's last cell the grader's cell that
    records that exercise's answers (exercises not found in ``nb`` last)."""
    setup = setup_cells(nb)
    graded = setup + [i for i in exercise_cells(nb) if "exercise-check" not in tags(nb.cells[i])]
    spans = exercise_spans(nb)
    after, at_end = {}, []
    for ex in expected:
        mine = [i for i in graded if i in spans.get(ex.label, range(0)) and i not in setup]
        (after.setdefault(mine[-1], []) if mine else at_end).append(ex)
    job = []
    for i in graded:
        job.append({"cell": i, "checker": None, "source": nb.cells[i].source})
        job += [{"cell": None, "checker": ex.checker, "source": _capture_source(ex, answers_dir)}
                for ex in after.get(i, [])]
    job += [{"cell": None, "checker": ex.checker, "source": _capture_source(ex, answers_dir)} for ex in at_end]
    return job


def _read_run(path: Path) -> dict:
    """The runner's report, checked: it comes from inside the sandbox."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_RUN_BYTES:
            return {}  # a link or a pipe left by student code is never opened
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


#: This grading run's name, in every sandbox's environment (``ATTNLIB_GRADE_RUN``; the caller's, else
#: one of this process's): processes of two graders on one machine (two classes, two test workers)
#: can be told apart under the sandbox's shared user.
RUN_ID = os.environ.get("ATTNLIB_GRADE_RUN") or f"{os.getpid()}-{os.urandom(4).hex()}"


def _sandbox_env(python_bin: str, pythonpath: str) -> dict[str, str]:
    env = {"ATTNLIB_GRADE_RUN": RUN_ID, "PATH": f"{python_bin}:/usr/local/bin:/usr/bin:/bin", "HOME": f"{sandbox.TMP}/home",
           "PYTHONPATH": pythonpath, "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg",
           "IPYTHONDIR": f"{sandbox.TMP}/home/.ipython", "MPLCONFIGDIR": f"{sandbox.TMP}/home/.matplotlib",
           "JUPYTER_RUNTIME_DIR": f"{sandbox.TMP}/home/.jupyter-runtime", "ATTNLIB_PROFILE": "book"}
    for key, value in os.environ.items():  # the machine's pins and language, never a path of the grader's
        if key.startswith(("OMP_", "OPENBLAS_", "MKL_", "NPY_", "LC_")) or key in ("LANG", "ATTNLIB_PROFILE"):
            env[key] = value
    return env


def attnlib_dir() -> Path:
    """The attnlib package this process grades with (the sandbox sees the same one, read-only)."""
    import attnlib

    return Path(attnlib.__file__).resolve().parent


def run_notebook(nb, expected: list[Exercise], work: Path, limits: sandbox.Limits, unsafe: bool = False) -> Run:
    """Run ``nb``'s graded cells in a kernel (in the sandbox unless ``unsafe``); the answers land in
    ``work/out/answers``."""
    in_dir, out_dir = work / "in", work / "out"
    in_dir.mkdir()
    sandbox.prepare_out(out_dir)
    for name in ("grade_runner.py", "zmq_poll_fix.py"):
        shutil.copy(TOOLS / name, in_dir / name)
    package = attnlib_dir()
    if unsafe:
        in_path, out_path, workdir = str(in_dir), str(out_dir), str(work / "kernel")
    else:
        in_path, out_path, workdir = sandbox.IN, sandbox.OUT, f"{sandbox.TMP}/work"
    job = build_job(nb, expected, f"{out_path}/answers")
    (in_dir / "job.json").write_text(json.dumps({"cells": [j["source"] for j in job], "timeout": limits.wall_s,
                                                 "workdir": workdir}), encoding="utf-8")
    argv = [sys.executable, f"{in_path}/grade_runner.py", f"{in_path}/job.json", out_path]
    # the runner stops itself at the time limit; the sandbox is killed a little later if it does not
    outer = replace(limits, wall_s=limits.wall_s + 20)
    if unsafe:
        env = {**os.environ, "PYTHONPATH": str(package.parent),
               "ATTNLIB_PROFILE": os.environ.get("ATTNLIB_PROFILE", "book")}
        finished = _run_unsafe(argv, env, outer, work / "log")
    else:
        cmd = sandbox.command(argv, read_only=[*sandbox.python_paths(), str(package)], in_dir=in_dir,
                              out_dir=out_dir, env=_sandbox_env(str(Path(sys.executable).parent), str(package.parent)),
                              limits=limits)
        finished = sandbox.run(cmd, outer, work / "log")
    state = _read_run(out_dir / "run.json")
    errors, capture_errors = {}, {}
    raw_errors = state.get("errors") if isinstance(state.get("errors"), dict) else {}
    for key, text in raw_errors.items():
        if str(key).isdigit() and int(key) < len(job) and isinstance(text, str):
            entry = job[int(key)]
            if entry["cell"] is not None:
                errors[entry["cell"]] = _clean_error(text)
            else:
                capture_errors[entry["checker"]] = _clean_error(text)
    running = state.get("running")
    entry = job[running] if isinstance(running, int) and 0 <= running < len(job) else None
    stopped = None
    if state.get("finished") is not True:
        reason = state.get("stopped")
        if finished.returncode is None or reason == "timeout":
            stopped = f"timed out after {limits.wall_s:g} s"
        elif reason == "dead kernel":
            stopped = "the kernel died"
        elif isinstance(reason, str) and reason.startswith("could not run"):
            stopped = _clean_error(reason)
        else:
            tail = _log_tail(work / "log")
            stopped = f"the run ended early (exit status {finished.returncode}{': ' + tail if tail else ''})"
    return Run(errors, capture_errors, stopped, entry["cell"] if stopped and entry else None,
               entry["checker"] if stopped and entry else None, finished.seconds)


def _log_tail(path: Path, size: int = 200) -> str:
    """The last line of the sandbox's output (its own words: data, shortened)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
            lines = [x for x in f.read().decode("utf-8", "replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return lines[-1].strip()[:size] if lines else ""


def _run_unsafe(argv, env, limits, log) -> sandbox.Finished:
    import subprocess

    start = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            code = proc.wait(timeout=limits.wall_s)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return sandbox.Finished(code, time.monotonic() - start)


# ----------------------------------------------------------------------------- grading


def _defined_above(nb, name: str) -> int | None:
    """A cell above the Exercises section (not an opening cell) that defines ``name``, if any."""
    first = next((i for i, c in enumerate(nb.cells) if is_exercise_start(c)), len(nb.cells))
    pattern = re.compile(rf"^\s*(def\s+{re.escape(name)}\s*\(|{re.escape(name)}\s*=[^=])", re.MULTILINE)
    setup = set(setup_cells(nb))
    return next((i for i in range(first) if i not in setup and nb.cells[i].cell_type == "code"
                 and pattern.search(nb.cells[i].source)), None)


def grade_notebook(path: Path, student: str, reference: Path, limits: sandbox.Limits,
                   unsafe: bool = False, note: str = "") -> list[Row]:
    """One row per exercise of ``reference``'s chapter for the submission at ``path``."""
    from attnlib.presentation.exercises import SPECS, CheckResult, judge, read_answers

    chapter = reference.stem
    expected = exercises_of(nbformat.read(reference, as_version=4))
    mode = UNSANDBOXED if unsafe else SANDBOXED

    def rows(passed_message) -> list[Row]:
        return [Row(student, chapter, ex.label, *passed_message(ex), path.name, note, mode) for ex in expected]

    try:
        nb = read_notebook(path)
    except Exception as err:  # noqa: BLE001 - not JSON, not a notebook, unreadable, too big
        reason = f"not a notebook: {type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"
        return rows(lambda ex: (False, reason.rstrip(": ")))
    if not exercise_cells(nb):
        return rows(lambda ex: (False, "no exercises found: the exercises' opening cells are missing"))
    setup = setup_cells(nb)
    with tempfile.TemporaryDirectory(prefix="attnlib-grade-") as work:
        run = run_notebook(nb, expected, Path(work), limits, unsafe)
        answers_dir = Path(work) / "out" / "answers"
        recorded = {ex.checker: read_answers(ex.checker, answers_dir) for ex in expected}
    spans = exercise_spans(nb)
    setup_errors = [f"the opening {_where(nb, i)} raised {e}" for i, e in run.errors.items() if i in setup]

    def stop_message() -> str:
        if run.stopped_at is not None:
            where = f" in the opening {_where(nb, run.stopped_at)}" if run.stopped_at in setup \
                else f" in {_where(nb, run.stopped_at)}"
        elif run.stopped_in is not None:
            where = " while checking the answers"
        else:
            where = ""
        return f"{run.stopped}{where}"

    def verdict(ex: Exercise) -> tuple[bool, str]:
        span = spans.get(ex.label, range(0))
        raised = [f"{_where(nb, i)} raised {e}" for i, e in run.errors.items() if i in span]
        found = recorded[ex.checker]
        spec = SPECS[ex.checker]()
        if found is None:
            if run.stopped:
                return False, stop_message()
            if ex.checker in run.capture_errors:
                return False, f"{spec.name}: the answer could not be checked: {run.capture_errors[ex.checker]}"
            return False, "; ".join(setup_errors + raised) or f"not checked: the answer {ex.answer} was not recorded"
        if found.unreadable:
            return False, f"{spec.name}: the recorded answers cannot be read ({found.unreadable})"
        if found.missing:
            if raised or setup_errors:  # the answer's own cell (or an import it needs) failed
                return False, f"{spec.name}: no answer to check: {'; '.join(setup_errors + raised)}; so {found.missing}"
            above = _defined_above(nb, ex.answer)
            where = (f"; {ex.answer} is defined in {_where(nb, above)}, above the Exercises heading, "
                     "where the grader does not run it" if above is not None else "")
            return False, (f"{spec.name}: no answer to check: {found.missing}{where}. Answers must go in the "
                           "exercise's own cells, below the Exercises heading (the grader runs only the "
                           "opening cells and the Exercises section)")
        try:
            result = judge(spec, found.answers, found.imported)
        except Exception as err:  # noqa: BLE001 - an answer the comparison cannot take is a wrong one
            result = CheckResult(False, f"{spec.name}: the answer cannot be compared: {type(err).__name__}: {err}")
        message = result.message
        if not result.passed and (raised or setup_errors):
            message = f"{message} ({'; '.join(setup_errors + raised)})"
        return result.passed, message

    return rows(verdict)


def submissions(folder: Path) -> list[tuple[str, Path]]:
    """(student, notebook) for every ``folder/<student>/*.ipynb``, sorted."""
    found = []
    for student in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        found += [(student.name, nb) for nb in sorted(student.glob("*.ipynb")) if nb.is_file()]
    return found


@dataclass
class Task:
    student: str
    path: Path
    reference: Path | None
    note: str = ""


def plan(folder: Path, chapters: Path, skip: set = frozenset(), warn=None) -> list[Task]:
    """What to grade: each hand-in's chapter (by its labels, else its name); of a student's
    hand-ins for one chapter only the newest, noted; the students in ``skip`` left out."""
    references = reference_chapters(chapters)
    chapter_labels = {p: set(labels_of(nbformat.read(p, as_version=4))) for p in references.values()}
    tasks = []
    for student, path in submissions(folder):
        if student in skip:
            continue
        by_name, by_labels = match_chapter(path.name, references), None
        try:
            by_labels = chapter_by_labels(labels_of(read_notebook(path)), chapter_labels)
        except Exception:  # noqa: BLE001 - a broken file is graded (and reported) under its name
            pass
        note = ""
        if by_labels is not None and by_labels != by_name:
            note = f"chapter recognised by its exercise labels as {by_labels.stem}"
        tasks.append(Task(student, path, by_labels or by_name, note))
    groups = {}
    for task in tasks:
        if task.reference is not None:
            groups.setdefault((task.student, task.reference), []).append(task)
    dropped = set()
    for (student, reference), same in groups.items():
        if len(same) > 1:
            newest = max(same, key=lambda t: (t.path.stat().st_mtime, t.path.name))
            others = ", ".join(t.path.name for t in same if t is not newest)
            text = (f"duplicate hand-ins for {reference.stem}: graded the newest, {newest.path.name}; "
                    f"not graded: {others}")
            newest.note = "; ".join(filter(None, [newest.note, text]))
            dropped |= {id(t) for t in same if t is not newest}
            if warn:
                warn(f"warning: {student}: {text}")
    return [t for t in tasks if id(t) not in dropped]


def grade_folder(folder: Path, chapters: Path = ROOT / "chapters", timeout: float = DEFAULT_TIMEOUT,
                 jobs: int = 1, progress=None, *, limits: sandbox.Limits | None = None, unsafe: bool = False,
                 skip: set = frozenset(), on_student=None) -> list[Row]:
    """Rows for every ``folder/<student>/<chapter>.ipynb``, student by student; ``jobs`` notebooks
    at once. ``on_student(rows)`` gets each student's rows as soon as they are all graded."""
    limits = limits or sandbox.Limits(wall_s=timeout)
    references = reference_chapters(chapters)
    example = next(iter(references), "02_measures.ipynb")
    tasks = plan(folder, chapters, skip, warn=progress)
    mode = UNSANDBOXED if unsafe else SANDBOXED

    def one(task: Task) -> list[Row]:
        if task.reference is None:
            return [Row(task.student, task.path.stem, "-", False,
                        f"unknown chapter: name the notebook as its chapter (e.g. {example})",
                        task.path.name, task.note, mode)]
        start = time.monotonic()
        rows = grade_notebook(task.path, task.student, task.reference, limits, unsafe, task.note)
        if progress:
            progress(f"graded {task.student}/{task.path.name} in {time.monotonic() - start:.1f} s")
        return rows

    students = list(dict.fromkeys(t.student for t in tasks))
    all_rows = []

    def finish(student_rows):
        all_rows.extend(student_rows)
        if on_student:
            on_student(student_rows)

    if jobs <= 1 or len(tasks) <= 1:
        for student in students:
            finish([row for t in tasks if t.student == student for row in one(t)])
        return all_rows
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_exit_on_sigterm)
    try:
        futures = {id(t): pool.submit(_grade_task, t, limits, unsafe, example, mode) for t in tasks}
        for student in students:
            student_rows = []
            for t in tasks:
                if t.student == student:
                    student_rows += futures[id(t)].result()
                    if progress and t.reference is not None:
                        progress(f"graded {t.student}/{t.path.name}")
            finish(student_rows)
    except BaseException:  # stopped: each worker kills its sandbox and removes its folder on SIGTERM
        for process in list(getattr(pool, "_processes", {}).values()):
            process.terminate()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return all_rows


def _exit_on_sigterm() -> None:
    """SIGTERM ends this process through SystemExit, so that ``with`` blocks clean up (temporary folders)."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def _grade_task(task: Task, limits, unsafe, example, mode) -> list[Row]:
    if task.reference is None:
        return [Row(task.student, task.path.stem, "-", False,
                    f"unknown chapter: name the notebook as its chapter (e.g. {example})",
                    task.path.name, task.note, mode)]
    return grade_notebook(task.path, task.student, task.reference, limits, unsafe, task.note)


# ----------------------------------------------------------------------------- the CSV


def _csv_line(row: Row) -> list:
    return [row.student, row.chapter, row.exercise, row.passed, row.message, row.file, row.note, row.sandbox]


def write_csv(rows: list[Row], out) -> None:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for r in rows:
        writer.writerow(_csv_line(r))


def graded_students(path: Path) -> set[str]:
    """The students who have rows in the CSV at ``path`` (ValueError if it is not the grader's CSV)."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            return set()
        if header != COLUMNS:
            raise ValueError(f"{path} is not a grades CSV of this grader (columns {header}, expected {COLUMNS})")
        return {line[0] for line in reader if line}


class Appender:
    """Appends each student's rows to a CSV, flushed and synced to disk at once."""

    def __init__(self, path: Path, fresh: bool):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(path, "w" if fresh or not path.exists() or path.stat().st_size == 0 else "a",
                         newline="", encoding="utf-8")
        self.writer = csv.writer(self.file, lineterminator="\n")
        if self.file.mode == "w":
            self.writer.writerow(COLUMNS)
            self._sync()

    def _sync(self):
        self.file.flush()
        os.fsync(self.file.fileno())

    def __call__(self, rows: list[Row]) -> None:
        for r in rows:
            self.writer.writerow(_csv_line(r))
        self._sync()

    def close(self):
        self.file.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("submissions", type=Path, help="folder of <student>/<chapter>.ipynb")
    parser.add_argument("--out", type=Path, default=None, help="the CSV to write (default: standard output)")
    parser.add_argument("--chapters", type=Path, default=ROOT / "chapters",
                        help="the committed chapters, which list each chapter's exercises (default: chapters/)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help="seconds for a notebook in all: kernel start, opening cells and Exercises "
                             f"(default: {DEFAULT_TIMEOUT})")
    parser.add_argument("--memory", type=float, default=4.0,
                        help="GiB of memory per process in the sandbox (default: 4)")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks graded at once (default: 1)")
    parser.add_argument("--resume", action="store_true",
                        help="keep the rows already in --out and grade only the students who have none")
    parser.add_argument("--unsafe", action="store_true",
                        help="grade without the sandbox (no bubblewrap): every row says 'unsandboxed'")
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        parser.error(f"{args.submissions} is not a folder")
    if not submissions(args.submissions):
        parser.error(f"no notebooks in {args.submissions}/<student>/")
    if args.resume and args.out is None:
        parser.error("--resume needs --out (the CSV to resume)")
    if args.timeout <= 0 or args.memory <= 0 or args.jobs < 1:
        parser.error("--timeout and --memory must be positive and --jobs at least 1")
    limits = sandbox.Limits(wall_s=args.timeout, memory_bytes=int(args.memory * 2**30))
    if not args.unsafe:
        why = sandbox.unavailable([*sandbox.python_paths(), str(attnlib_dir())])
        if why:
            print(f"grade.py: refusing to grade without the sandbox: {why}.\n"
                  "Install bubblewrap, or pass --unsafe to run student code unsandboxed "
                  "(every row then says 'unsandboxed').", file=sys.stderr)
            return 2
    skip = set()
    if args.resume and args.out.exists():
        try:
            skip = graded_students(args.out)
        except ValueError as err:
            parser.error(str(err))
    _exit_on_sigterm()  # temporary folders are removed on the way out
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    if args.out is None:
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(COLUMNS)

        def sink(rows):
            for r in rows:
                writer.writerow(_csv_line(r))
            sys.stdout.flush()
        close = lambda: None  # noqa: E731
    else:
        sink = Appender(args.out, fresh=not args.resume)
        close = sink.close
    start = time.monotonic()
    try:
        rows = grade_folder(args.submissions, args.chapters, args.timeout, args.jobs, progress=log, limits=limits,
                            unsafe=args.unsafe, skip=skip, on_student=sink)
    finally:
        close()
    passed = sum(r.passed for r in rows)
    notebooks = len({(r.student, r.file) for r in rows})
    log(f"{passed} of {len(rows)} exercises passed, {notebooks} notebooks in {time.monotonic() - start:.1f} s"
        + (f" ({len(skip)} students already graded)" if skip else "") + (f" -> {args.out}" if args.out else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
