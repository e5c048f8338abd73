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
sandbox (``bwrap``, or ``unsandboxed`` under ``--unsafe``; and the limits this machine could not
give, e.g. no cgroup). Text cells are valid UTF-8 and one that starts like a spreadsheet formula
(``=``, ``+``, ``-``, ``@``) is written behind a ``'``. The exercises of a chapter are
listed from the committed chapter (``--chapters``, default chapters/), so a broken
submission still gets a row per exercise; a file that matches no chapter gets one row with
exercise ``-``. Each student's rows are appended to the CSV and flushed to disk as soon as
that student is graded; ``--resume`` keeps the rows already there and grades only the
students whose rows are not all there.

What runs, in a sandbox (tools/sandbox.py: bubblewrap; another user, a read-only view of the
system and attnlib, no network, no view of the submissions, the CSV or this process, nothing
of the host writable, limits on time, memory, processes and file size for the sandbox in all
where a cgroup can be had; every process killed at the end), in two steps:

1. The notebook, for feedback: in a fresh ``python3`` kernel with the ``book`` profile, the
   chapter's opening code cells (install, ``parameters``, imports) and every code cell of its
   Exercises section (from the first exercise's opening cell) except the check cells and the
   prose cells (tag ``prose``). ``--timeout`` (default 180 s) bounds all of it, the kernel's
   start and the opening cells included. Its runner reports which cells raised and how far
   it got, over a pipe; nothing it reports can make a pass.
2. Each exercise, judged apart (:func:`judge_apart`): a fresh sandboxed process
   (tools/judge_runner.py) gets the student's code for that exercise only, taken from the
   notebook's source (:func:`judge_program`: the exercise's cells, and what they need of the
   student's earlier cells), and of attnlib only the modules the exercise's Spec allows
   (``Spec.modules``), never the checkers, their cases or the exercise's reference. It then
   gets the cases, drawn from a seed picked per run and per student after the notebook has
   finished, calls the answer (named by the committed chapter's check cell, e.g. ``my_tvd``)
   on them and sends back the values, as numbers, over a pipe. This process compares them with
   the references, which it computes itself. An exercise whose cells the run did not finish is
   not judged, and its row says so.

So an answer may use what the opening cells import and what the Exercises section defines,
not a variable from the middle of the chapter (the exercises are written that way), and of
attnlib only the helpers its exercise allows; an answer defined elsewhere is reported with
where it must go. A cell that raises does not stop the run: its error is reported with its
exercise. A notebook that hangs, crashes its kernel or kills the process running it is
reported, and the next one is graded; SIGTERM ends the grader with exit status 143, and
``--resume`` grades again a student whose rows are not all in the CSV.

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
import ast
import contextlib
import copyreg
import csv
import json
import os
import re
import secrets
import shutil
import signal
import struct
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


def _source(cell) -> str:
    return cell.get("source", "") if isinstance(cell.get("source", ""), str) else ""


def read_notebook(path: Path):
    """The notebook at ``path``, each cell's source as text; ValueError when it is too big, has
    no cells, or a cell that is not a cell (a source that is neither text nor a list of lines)."""
    if path.stat().st_size > MAX_NOTEBOOK_BYTES:
        raise ValueError(f"larger than {MAX_NOTEBOOK_BYTES // 2**20} MB")
    nb = nbformat.read(path, as_version=4)
    if not isinstance(nb.get("cells"), list):
        raise ValueError("no cells")
    for i, cell in enumerate(nb.cells):
        if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw"):
            raise ValueError(f"cell {i + 1} is not a notebook cell")
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(line, str) for line in source):
            cell["source"] = "".join(source)
        elif not isinstance(source, str):
            raise ValueError(f"cell {i + 1}'s source is a {type(source).__name__}, not text or a list of lines")
        cell["source"] = _text(cell["source"])
        if not isinstance(cell.get("metadata", {}), dict):
            cell["metadata"] = {}
        elif not isinstance(cell.get("metadata", {}).get("tags", []), list):
            cell["metadata"]["tags"] = []
    return nb


# ----------------------------------------------------------------------------- running one notebook (feedback)


@dataclass
class Run:
    errors: dict  # student's cell index -> "ename: evalue"
    stopped: str | None  # why the run ended early (timeout, dead kernel, ...), else None
    stopped_at: int | None  # the student's cell running then
    done: int  # how many cells of the job the run is known to have finished (all when it finished)
    seconds: float
    note: str = ""  # limits the machine could not give (the row's sandbox column)


def _where(nb, index: int) -> str:
    """A cell as a reader finds it: its position and first line."""
    lines = [line for line in _source(nb.cells[index]).splitlines() if line.strip()]
    first = lines[0].strip() if lines else ""
    return f"cell {index + 1}" + (f" `{first[:40]}{'...' if len(first) > 40 else ''}`" if first else "")


def _text(text) -> str:
    """``text`` as valid UTF-8: a lone surrogate (in a student's message, or a file name's byte
    that is not UTF-8) is written as its escape, ``\\udcff``."""
    text = str(text)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _clean_error(text: str) -> str:
    return _text(re.sub(r"\(\d+\.py, line (\d+)\)", r"(line \1)", str(text)))[:300]  # ipykernel's cell file name


def build_job(nb) -> list[int]:
    """The cells the notebook's run executes, in order: the opening cells and the Exercises
    section's code cells but the check cells."""
    return setup_cells(nb) + [i for i in exercise_cells(nb) if "exercise-check" not in tags(nb.cells[i])]


def _last_state(report: bytes) -> dict:
    """The runner's last complete state line (it comes from inside the sandbox: data, checked)."""
    for line in reversed(report.split(b"\n")):
        try:
            data = json.loads(line.decode("utf-8"))
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    return {}


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


#: Third-party packages that hold exercises' references (scikit-learn's f1_score, SciPy's
#: kendalltau and jensenshannon): a judge process sees their folders empty, as it sees no
#: checker of attnlib, so an answer that wraps them has nothing to call. Answers use NumPy and
#: PyTorch (the chapters' Exercises say so); SciPy's special functions (``xlogy``) stay.
REFERENCE_LIBRARIES = ("sklearn", "scipy.stats", "scipy.spatial")


def _library_folders(names) -> list[str]:
    """The installed folders of the packages ``names`` (those not installed are left out)."""
    import importlib.util

    folders = []
    for name in names:
        spec = importlib.util.find_spec(name)
        folders += [os.path.realpath(p) for p in (spec.submodule_search_locations or []) if os.path.isdir(p)] \
            if spec is not None else []
    return folders


def _run_sandboxed(argv, work: Path, limits: sandbox.Limits, unsafe: bool, *, in_dir: Path, read_only: list[str],
                   pythonpath: str, emptied: list[str] = (), **io) -> sandbox.Finished:
    """``argv`` in a sandbox (or, ``unsafe``, as a plain process) with ``in_dir`` at its input folder."""
    if unsafe:
        env = {**_sandbox_env(str(Path(sys.executable).parent), pythonpath), "HOME": str(work),
               "IPYTHONDIR": str(work / ".ipython"), "MPLCONFIGDIR": str(work / ".matplotlib"),
               "JUPYTER_RUNTIME_DIR": str(work / ".jupyter-runtime"),
               "ATTNLIB_PROFILE": os.environ.get("ATTNLIB_PROFILE", "book")}
        env["PYTHONPATH"] = pythonpath.replace(sandbox.IN, str(in_dir))
        argv = [a.replace(sandbox.IN, str(in_dir)) for a in argv]
        return sandbox.run(argv, limits, work / "log", sandboxed=False, env=env, **io)
    cmd = sandbox.command(argv, read_only=[*sandbox.python_paths(), *read_only], in_dir=in_dir,
                          env=_sandbox_env(str(Path(sys.executable).parent), pythonpath), limits=limits,
                          emptied=list(emptied))
    return sandbox.run(cmd, limits, work / "log", **io)


def run_notebook(nb, work: Path, limits: sandbox.Limits, unsafe: bool = False) -> tuple[Run, list[int]]:
    """Run ``nb``'s graded cells in a kernel (in the sandbox unless ``unsafe``), for feedback: which
    cells raised, and how far the run got. No answer is recorded here. Returns the run and the job
    (the cells run, in order)."""
    in_dir = work / "in"
    in_dir.mkdir()
    for name in ("grade_runner.py", "zmq_poll_fix.py"):
        shutil.copy(TOOLS / name, in_dir / name)
    package = attnlib_dir()
    job = build_job(nb)
    workdir = str(work / "kernel") if unsafe else f"{sandbox.TMP}/work"
    (in_dir / "job.json").write_text(json.dumps({"cells": [_source(nb.cells[i]) for i in job],
                                                 "timeout": limits.wall_s, "workdir": workdir}), encoding="utf-8")
    argv = [sys.executable, f"{sandbox.IN}/grade_runner.py", f"{sandbox.IN}/job.json", sandbox.REPORT_FD]
    # the runner stops itself at the time limit; the sandbox is killed a little later if it does not
    outer = replace(limits, wall_s=limits.wall_s + 20)
    report = bytearray()
    finished = _run_sandboxed(argv, work, outer, unsafe, in_dir=in_dir, read_only=[str(package)],
                              pythonpath=str(package.parent), report=report)
    state = _last_state(bytes(report))
    errors = {}
    raw_errors = state.get("errors") if isinstance(state.get("errors"), dict) else {}
    for key, text in raw_errors.items():
        if str(key).isdigit() and int(key) < len(job) and isinstance(text, str):
            errors[job[int(key)]] = _clean_error(text)
    running = state.get("running")
    running = running if isinstance(running, int) and 0 <= running < len(job) else None
    stopped = None
    if finished.returncode is None:  # the grader killed it: whatever the runner said
        stopped = f"timed out after {limits.wall_s:g} s"
    elif state.get("finished") is not True or finished.returncode != 0:
        reason = state.get("stopped")
        if reason == "timeout":
            stopped = f"timed out after {limits.wall_s:g} s"
        elif reason == "dead kernel":
            stopped = "the kernel died"
        elif isinstance(reason, str) and reason.startswith("could not run"):
            stopped = _clean_error(reason)
        else:
            tail = _log_tail(work / "log")
            stopped = f"the run ended early (exit status {finished.returncode}{': ' + tail if tail else ''})"
    done = len(job) if stopped is None else (running or 0)
    return Run(errors, stopped, job[running] if stopped and running is not None else None, done,
               finished.seconds, finished.note), job


def _log_tail(path: Path, size: int = 200) -> str:
    """The last line of the sandbox's output (its own words: data, shortened)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
            lines = [x for x in f.read().decode("utf-8", "replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return _text(lines[-1].strip()[:size]) if lines else ""


# ----------------------------------------------------------------------------- judging one exercise, apart


def _python(source: str) -> str:
    """A cell's source as plain Python (IPython's magics and shell escapes become calls)."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        return TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 - left as it is: it will not parse, and says so
        return source


def _bound_names(stmt: ast.stmt) -> set[str]:
    """The names a top-level statement binds."""
    names = set()
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    stack = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return names


def _used_names(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def judge_program(nb, ex: Exercise, job: list[int]) -> list[dict]:
    """The student's code for exercise ``ex``, from the notebook's source (not from a kernel):
    the exercise's own cells, whole, and before them each statement of the student's earlier
    cells (the opening cells and the earlier exercises') that they need, by the names they use
    (and that the answer's name needs), an import of several names split into one per name."""
    span = exercise_spans(nb).get(ex.label, range(0))
    setup = set(setup_cells(nb))
    own = [i for i in job if i in span and i not in setup]
    earlier = [i for i in job if not own or i < own[0]]
    units = [{"cell": i, "source": _python(_source(nb.cells[i]))} for i in own]
    needed = {ex.answer.split(".")[0]}
    for unit in units:
        try:
            needed |= _used_names(ast.parse(unit["source"]))
        except SyntaxError:
            pass
    statements = []  # (cell, statement) of the earlier cells, in order
    for i in earlier:
        try:
            tree = ast.parse(_python(_source(nb.cells[i])))
        except SyntaxError:
            continue
        for stmt in tree.body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)) and len(stmt.names) > 1:
                statements += [(i, type(stmt)(**{**{f: getattr(stmt, f) for f in stmt._fields}, "names": [a]}))
                               for a in stmt.names]
            else:
                statements.append((i, stmt))
    chosen: set[int] = set()
    while True:
        more = {k for k, (_, stmt) in enumerate(statements) if k not in chosen and _bound_names(stmt) & needed}
        if not more:
            break
        chosen |= more
        for k in more:
            needed |= _used_names(statements[k][1])
    pulled = [{"cell": i, "source": ast.unparse(stmt)} for k, (i, stmt) in enumerate(statements) if k in chosen]
    return pulled + units


def _module_files(package: Path, modules: tuple, withheld: tuple) -> list[Path]:
    """The files of attnlib (``package``) that the modules ``modules`` need, by their imports at
    any depth, the modules ``withheld`` and their own imports left out unless needed otherwise;
    every package's ``__init__`` on the way, empty unless it is needed itself."""
    def file_of(name: str) -> Path | None:
        parts = name.split(".")[1:]
        base = package.joinpath(*parts) if parts else package
        for candidate in (base / "__init__.py", base.with_suffix(".py")):
            if candidate.is_file():
                return candidate
        return None

    def imports(path: Path, name: str) -> set[str]:
        found = set()
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = name.split(".")
                    base = parts if is_package else parts[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    root = ".".join(base + ([node.module] if node.module else []))
                else:
                    root = node.module or ""
                found.add(root)
                found |= {f"{root}.{a.name}" for a in node.names}
        return {m for m in found if m == "attnlib" or m.startswith("attnlib.")}

    seen, todo, files = set(withheld), [m for m in ("attnlib.cpu", *modules) if m not in withheld], []
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = file_of(name)
        if path is None or name == "attnlib":
            continue
        files.append(path)
        todo += [m for m in imports(path, name) if m not in seen]
    return files


def _judge_library(package: Path, modules: tuple, withheld: tuple, into: Path) -> None:
    """A copy of only the allowed files of attnlib at ``into/attnlib`` (its compiled extensions too)."""
    files = set(_module_files(package, modules, withheld))
    for path in files:
        target = into / "attnlib" / path.relative_to(package)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    for folder in {into / "attnlib", *(p.parent for p in (into / "attnlib").rglob("*.py"))}:
        init = folder / "__init__.py"
        if not init.exists():
            init.write_text("")  # a package's own code only where it is allowed
    if any(p.name in ("portable.py",) for p in files):
        for ext in package.glob("_*.so"):
            shutil.copy(ext, into / "attnlib" / ext.name)


#: The most bytes of answers a judge's process may send back.
MAX_JUDGE_BYTES = 64 * 2**20
_JUDGE_MAGIC = b"ATTNLIB-JUDGE 1\n"


def _part(data: bytes) -> bytes:
    return struct.pack(">Q", len(data)) + data


def _pickle_cases(cases) -> bytes:
    """The cases as a pickle for the judge's process (the grader's own data: trusted there)."""
    import io
    import pickle

    import torch

    from attnlib.presentation.exercises import fixtures

    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = {**copyreg.dispatch_table, torch.Generator: fixtures.reduce_generator}
    pickler.dump(list(cases))
    return buffer.getvalue()


def _decode_answers(data: bytes) -> dict:
    """The judge's reply, checked strictly: sizes, kinds, arrays of numbers that hold what they
    claim, values rebuilt as lists, text and data frames. ValueError when it is not well formed."""
    import numpy as np
    import pandas as pd

    if not data.startswith(_JUDGE_MAGIC) or len(data) < len(_JUDGE_MAGIC) + 8:
        raise ValueError("no reply")
    at = len(_JUDGE_MAGIC)
    (size,) = struct.unpack(">Q", data[at: at + 8])
    if size > len(data) - at - 8:
        raise ValueError("a reply cut short")
    header = json.loads(data[at + 8: at + 8 + size].decode("utf-8"))
    offset = at + 8 + size
    arrays, specs = [], []

    def collect(tree, depth=0):
        if depth > 12 or not isinstance(tree, dict):
            raise ValueError("malformed value")
        if "array" in tree:
            specs.append(tree)
        for key in ("list", "index", "columns"):
            for item in tree.get(key, []) if isinstance(tree.get(key, []), list) else []:
                collect(item, depth + 1)
        for key in ("frame", "series"):
            if key in tree:
                collect(tree[key], depth + 1)
                collect(tree[key].get("values", {}), depth + 1)

    answers = header.get("answers") if isinstance(header, dict) else None
    errors = header.get("errors", []) if isinstance(header, dict) else None
    if not isinstance(answers, list) or not isinstance(errors, list) or not all(
            isinstance(e, list) and len(e) == 3 and isinstance(e[0], int) and all(isinstance(t, str) for t in e[1:])
            for e in errors):
        raise ValueError("malformed reply")
    for answer in answers:
        if not isinstance(answer, dict):
            raise ValueError("malformed answer")
        if answer.get("kind") == "value":
            collect(answer.get("value"))
    for spec in sorted(specs, key=lambda s: s.get("array", -1)):
        dtype = np.dtype(str(spec.get("dtype")))
        shape = tuple(int(n) for n in spec.get("shape", ()))
        if dtype.kind not in "biuf" or any(n < 0 for n in shape) or spec.get("array") != len(arrays):
            raise ValueError("malformed array")
        nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
        if offset + nbytes > len(data):
            raise ValueError("an array claims more than was sent")
        arrays.append(np.frombuffer(data, dtype=dtype, count=nbytes // dtype.itemsize if dtype.itemsize else 0,
                                    offset=offset).reshape(shape).copy())
        offset += nbytes

    def build(tree):
        if "none" in tree:
            return None
        if "text" in tree:
            return str(tree["text"])
        if "array" in tree:
            array = arrays[tree["array"]]
            return array[()] if array.shape == () else array
        if "list" in tree:
            return [build(t) for t in tree["list"]]
        if "frame" in tree:
            frame = tree["frame"]
            return pd.DataFrame(build(frame["values"]), index=pd.Index([build(t) for t in frame["index"]]),
                                columns=[build(t) for t in frame["columns"]])
        if "series" in tree:
            series = tree["series"]
            return pd.Series(build(series["values"]), index=pd.Index([build(t) for t in series["index"]]))
        raise ValueError("malformed value")

    return {"errors": [(cell, _clean_error(first), _clean_error(error)) for cell, first, error in errors],
            "missing": _clean_error(header["missing"]) if isinstance(header.get("missing"), str) else None,
            "answers": [{**a, "value": build(a["value"])} if a.get("kind") == "value" else a for a in answers]}


@dataclass
class Judged:
    """What the judge's process gave for one exercise: the answers, or why there are none."""

    answers: list  # of attnlib.presentation.exercises.Answer
    errors: list  # (cell index, the statement's first line, its error), in the judge's process
    missing: str | None = None  # why there is no answer (the name is not defined)
    failed: str | None = None  # why the judge's process gave no readable reply
    note: str = ""


def judge_apart(nb, ex: Exercise, job: list[int], seed: int, work: Path, limits: sandbox.Limits,
                unsafe: bool = False):
    """Call the student's answer to ``ex`` in a fresh sandboxed process that holds only the
    student's code for it (:func:`judge_program`) and of attnlib only the modules its Spec
    allows, on cases drawn from ``seed``; the answers come back over a pipe. Returns the Spec
    (with the cases the references are computed on, here) and the :class:`Judged`."""
    from attnlib.presentation.exercises import SPECS, Answer, as_answer, shorten

    spec = SPECS[ex.checker](seed)
    work.mkdir()
    in_dir = work / "in"
    in_dir.mkdir()
    shutil.copy(TOOLS / "judge_runner.py", in_dir / "judge_runner.py")
    _judge_library(attnlib_dir(), spec.modules, spec.withheld, in_dir / "lib")
    program = {"answer": ex.answer, "units": judge_program(nb, ex, job)}
    stdin = _part(json.dumps(program).encode("utf-8")) + _part(_pickle_cases(spec.cases))
    output = bytearray()
    finished = _run_sandboxed([sys.executable, f"{sandbox.IN}/judge_runner.py"], work, limits, unsafe,
                              in_dir=in_dir, read_only=[], pythonpath=f"{sandbox.IN}/lib", stdin=stdin,
                              output=output, max_output=MAX_JUDGE_BYTES,
                              emptied=_library_folders(REFERENCE_LIBRARIES))
    if finished.returncode is None:
        return spec, Judged([], [], failed=f"the answer ran past {limits.wall_s:g} s on the grader's cases",
                            note=finished.note)
    if finished.overflow:
        return spec, Judged([], [], failed=f"the answers took more than {MAX_JUDGE_BYTES // 2**20} MB",
                            note=finished.note)
    try:
        reply = _decode_answers(bytes(output))
    except Exception as err:  # noqa: BLE001 - whatever came back, it is data, never a pass
        tail = _log_tail(work / "log")
        why = f"exit status {finished.returncode}{': ' + tail if tail else ''}"
        return spec, Judged([], [], failed=f"its process gave no readable answers ({why}; {type(err).__name__})",
                            note=finished.note)
    answers = []
    for entry in reply["answers"]:
        kind = entry.get("kind")
        if kind == "value":
            answers.append(as_answer(spec, entry["value"]))
        elif kind in ("not_implemented", "raised", "invalid"):
            answers.append(Answer(kind, detail=shorten(_text(entry.get("detail", "")))))
        else:
            answers.append(Answer("invalid", detail="a malformed answer"))
    return spec, Judged(answers, reply["errors"], reply["missing"], note=finished.note)


# ----------------------------------------------------------------------------- grading


def remove_tree(path: Path) -> None:
    """Remove the folder ``path`` and all in it, however deep: no recursion and no long paths
    (each folder is opened relative to the one above it), so a folder nested 1,500 deep by
    student code goes too; a link is removed, never followed."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    names, fd = [], os.open(path, flags)
    try:
        while True:
            sub = None
            with os.scandir(fd) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        sub = entry.name
                        break
                    os.unlink(entry.name, dir_fd=fd)
            if sub is not None:
                try:
                    inner = os.open(sub, flags, dir_fd=fd)
                except PermissionError:
                    os.chmod(sub, 0o700, dir_fd=fd, follow_symlinks=False)
                    inner = os.open(sub, flags, dir_fd=fd)
                os.close(fd)
                fd = inner
                names.append(sub)
                continue
            if not names:
                break
            parent = os.open("..", flags, dir_fd=fd)
            os.close(fd)
            fd = parent
            os.rmdir(names.pop(), dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(path)


@contextlib.contextmanager
def _work_folder():
    """A temporary folder for one notebook's grading, removed on every way out (:func:`remove_tree`)."""
    work = tempfile.mkdtemp(prefix="attnlib-grade-")
    try:
        yield work
    finally:
        try:
            remove_tree(Path(work))
        except OSError as err:  # noqa: BLE001 - never a reason to lose the rows
            print(f"grade.py: could not remove {work}: {err}", file=sys.stderr)


def _defined_above(nb, name: str) -> int | None:
    """A cell above the Exercises section (not an opening cell) that defines ``name``, if any."""
    first = next((i for i, c in enumerate(nb.cells) if is_exercise_start(c)), len(nb.cells))
    pattern = re.compile(rf"^\s*(def\s+{re.escape(name)}\s*\(|{re.escape(name)}\s*=[^=])", re.MULTILINE)
    setup = set(setup_cells(nb))
    return next((i for i in range(first) if i not in setup and nb.cells[i].cell_type == "code"
                 and pattern.search(_source(nb.cells[i]))), None)


def _judge_seconds(limits: sandbox.Limits) -> sandbox.Limits:
    """The limits of one exercise's judge: the notebook's, its time at most 120 s."""
    return replace(limits, wall_s=min(limits.wall_s, 120.0))


def grade_notebook(path: Path, student: str, reference: Path, limits: sandbox.Limits,
                   unsafe: bool = False, note: str = "") -> list[Row]:
    """One row per exercise of ``reference``'s chapter for the submission at ``path``: the
    notebook runs (for feedback: which cells raise, how far it gets), then each exercise whose
    cells the run finished is judged apart (:func:`judge_apart`) on cases drawn from a seed
    picked now, after the student's code has run."""
    from attnlib.presentation.exercises import CheckResult, judge

    chapter = reference.stem
    expected = exercises_of(nbformat.read(reference, as_version=4))
    mode = UNSANDBOXED if unsafe else SANDBOXED

    def rows(passed_message, sandbox_note: str = "") -> list[Row]:
        column = f"{mode}; {sandbox_note}" if sandbox_note else mode
        return [Row(student, chapter, ex.label, *passed_message(ex), _text(path.name), note, column)
                for ex in expected]

    try:
        nb = read_notebook(path)
    except Exception as err:  # noqa: BLE001 - not JSON, not a notebook, unreadable, too big
        text = _text(str(err).strip().splitlines()[0]) if str(err).strip() else ""
        reason = f"not a notebook: {type(err).__name__}: {text}"
        return rows(lambda ex: (False, reason.rstrip(": ")))
    if not exercise_cells(nb):
        return rows(lambda ex: (False, "no exercises found: the exercises' opening cells are missing"))
    setup = setup_cells(nb)
    spans = exercise_spans(nb)
    with _work_folder() as work:
        (Path(work) / "run").mkdir()
        run, job = run_notebook(nb, Path(work) / "run", limits, unsafe)
        seed = secrets.randbits(62)  # picked now: the student's code has finished
        position = {cell: k for k, cell in enumerate(job)}
        judged, notes = {}, {run.note} - {""}
        for ex in expected:
            own = [position[i] for i in job if i in spans.get(ex.label, range(0)) and i not in setup]
            seen_finish = run.stopped is None or (own and max(own) < run.done)
            if seen_finish:
                judged[ex.checker] = judge_apart(nb, ex, job, seed, Path(work) / f"judge-{len(judged)}",
                                                 _judge_seconds(limits), unsafe)
                notes |= {judged[ex.checker][1].note} - {""}
    setup_errors = [f"the opening {_where(nb, i)} raised {e}" for i, e in run.errors.items() if i in setup]

    def stop_message() -> str:
        if run.stopped_at is not None:
            where = f" in the opening {_where(nb, run.stopped_at)}" if run.stopped_at in setup \
                else f" in {_where(nb, run.stopped_at)}"
        else:
            where = ""
        return f"{run.stopped}{where}: not judged, the grader did not see this exercise's cells finish"

    def verdict(ex: Exercise) -> tuple[bool, str]:
        span = spans.get(ex.label, range(0))
        raised = [f"{_where(nb, i)} raised {e}" for i, e in run.errors.items() if i in span]
        if ex.checker not in judged:
            return False, stop_message()
        spec, found = judged[ex.checker]
        if found.failed:
            return False, f"{spec.name}: not judged: {found.failed}"
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
            result = judge(spec, found.answers)
        except Exception as err:  # noqa: BLE001 - an answer the comparison cannot take is a wrong one
            result = CheckResult(False, f"{spec.name}: the answer cannot be compared: {type(err).__name__}: {err}")
        message = result.message
        if not result.passed:
            apart = [f"cell {i + 1} `{first}` raised {e}" for i, first, e in found.errors
                     if run.errors.get(i) != e]
            if raised or setup_errors:
                message = f"{message} ({'; '.join(setup_errors + raised)})"
            if apart:
                allowed = ", ".join(spec.modules) or "no module of attnlib"
                message = (f"{message} (judged apart, with {allowed}: {'; '.join(apart)})")
        return result.passed, _text(message)

    return rows(verdict, "; ".join(sorted(notes)))


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


_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def csv_text(value) -> str:
    """A CSV cell as a spreadsheet reads it safely: valid UTF-8, and a text that starts like a
    formula (``=``, ``+``, ``-``, ``@``; a file named ``=1+2.ipynb``) behind a ``'``."""
    text = _text(value)
    return "'" + text if text.startswith(_FORMULA) and text != "-" else text


def _csv_line(row: Row) -> list:
    return [csv_text(row.student), csv_text(row.chapter), csv_text(row.exercise), row.passed, csv_text(row.message),
            csv_text(row.file), csv_text(row.note), csv_text(row.sandbox)]


def write_csv(rows: list[Row], out) -> None:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for r in rows:
        writer.writerow(_csv_line(r))


def read_grades(path: Path) -> list[list[str]]:
    """The rows of the CSV at ``path``, header left out (ValueError if it is not the grader's CSV)."""
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            return []
        if header != COLUMNS:
            raise ValueError(f"{path} is not a grades CSV of this grader (columns {header}, expected {COLUMNS})")
        return [line for line in reader if line]


def graded_students(path: Path) -> set[str]:
    """The students who have rows in the CSV at ``path`` (ValueError if it is not the grader's CSV)."""
    return {line[0] for line in read_grades(path)}


def complete_students(path: Path, folder: Path, chapters: Path) -> set[str]:
    """The students of ``folder`` whose rows in the CSV at ``path`` are all there (a row per
    exercise of each hand-in: one stopped while its rows were written has fewer), as they are
    named in the CSV. The rows of the others are taken out of the CSV (rewritten in one step),
    so that they are graded again, once."""
    lines = read_grades(path)
    have = {}
    for line in lines:
        have[line[0]] = have.get(line[0], 0) + 1
    expected_rows = {}
    exercises = {}
    for task in plan(folder, chapters):
        if task.reference is not None and task.reference not in exercises:
            exercises[task.reference] = len(exercises_of(nbformat.read(task.reference, as_version=4))) or 1
        name = csv_text(task.student)
        expected_rows[name] = expected_rows.get(name, 0) + (exercises[task.reference] if task.reference else 1)
    complete = {s for s, n in have.items() if n >= expected_rows.get(s, 0)}
    if any(line[0] not in complete for line in lines):
        part = path.with_name(path.name + ".part")
        with open(part, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(COLUMNS)
            writer.writerows(line for line in lines if line[0] in complete)
            f.flush()
            os.fsync(f.fileno())
        os.replace(part, path)
    return complete


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
    import attnlib.reproducible  # noqa: F401  (the references computed here as the chapters compute them)

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
            done = complete_students(args.out, args.submissions, args.chapters)
        except ValueError as err:
            parser.error(str(err))
        skip = {student for student, _ in submissions(args.submissions) if csv_text(student) in done}
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
