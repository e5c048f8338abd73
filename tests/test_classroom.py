"""The student edition (tools/student_edition.py) and the grader (tools/grade.py).

The student edition hands out no solution, and still runs; the grader passes the reference
solutions of every chapter, fails exactly the exercises of an unsolved notebook, and survives
a notebook that raises, one that hangs and a file that is not a notebook; it recognises a
misnamed notebook, grades the newest of two hand-ins and says where a misplaced answer must
go. The kernel tests run every chapter's exercises in two sandboxed kernels (solved,
unsolved), then the grader end to end on a few notebooks of Chapter 2. The adversarial
students are in tests/test_grader_security.py.
"""
import ast
import csv
import os
import re
import sys
import time
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import grade  # noqa: E402
import student_edition  # noqa: E402

CHAPTERS = sorted((ROOT / "chapters").glob("[0-9]*.ipynb"))
CH02 = ROOT / "chapters" / "02_measures.ipynb"


def _tags(cell):
    return cell.get("metadata", {}).get("tags", [])


def _read(path):
    return nbformat.read(path, as_version=4)


_FENCE = re.compile(r"```python\n(.*?)\n```", re.S)


def _solution_sources(nb):
    """Each folded solution's code: the python block of a markdown cell tagged ``solution`` (a
    solution is never a code cell, so that Run-all cannot run it over the reader's answer)."""
    return [_FENCE.search(c.source).group(1) for c in nb.cells if c.cell_type == "markdown" and "solution" in _tags(c)]


def solved(path):
    """The student edition of a chapter with the reference solutions pasted over the starters."""
    nb = _read(path)
    student = student_edition.student_notebook(nb)
    starters = [c for c in student.cells if "exercise" in _tags(c)]
    solutions = _solution_sources(nb)
    assert len(starters) == len(solutions)
    for cell, source in zip(starters, solutions):
        cell.source = source
    return student


def unsolved(path):
    return student_edition.student_notebook(_read(path))


def _cell_index(nb, tag, word):
    return next(i for i, c in enumerate(nb.cells) if tag in _tags(c) and word in c.source)


# ----------------------------------------------------------------------------- the chapters' structure


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_each_exercise_has_a_starter_a_solution_and_a_check(path):
    nb = _read(path)
    exercises = grade.exercises_of(nb)
    assert exercises, "a chapter without exercises"
    tagged = {t: sum(t in _tags(c) and c.cell_type == "code" for c in nb.cells) for t in ("exercise", "exercise-check")}
    assert tagged == dict.fromkeys(tagged, len(exercises))
    assert len(_solution_sources(nb)) == len(exercises)
    assert not any("solution" in _tags(c) for c in nb.cells if c.cell_type == "code")  # no solution runs
    assert len({e.checker for e in exercises}) == len(exercises)  # a verdict names its exercise
    assert len({e.label for e in exercises}) == len(exercises)


def test_checkers_are_unique_across_the_book():
    checkers = [e.checker for path in CHAPTERS for e in grade.exercises_of(_read(path))]
    starts = sum(grade.is_exercise_start(c) for path in CHAPTERS for c in _read(path).cells)
    assert len(checkers) == len(set(checkers)) == starts  # one checker per exercise, none shared
    assert all(len(grade.exercises_of(_read(path))) >= 2 for path in CHAPTERS)  # every chapter: >= 2


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_no_cell_but_the_check_uses_a_solved_function(path):
    """The book runs the reference solution; the student edition must run without it.

    From the first exercise on there are only starters, solutions and checks (and markdown, and
    prose cells, which the grader skips: tests/test_plain_render.py), and no cell outside them names a function that a solution defines: the unsolved student
    edition runs to the end, its starters raising only inside the checkers.
    """
    nb = _read(path)
    solved_names = {node.name for source in _solution_sources(nb)  # the solutions' top-level functions
                    for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)}
    assert solved_names
    first = next(i for i, c in enumerate(nb.cells) if grade.is_exercise_start(c))
    for cell in nb.cells[first:]:
        if cell.cell_type == "code":
            assert {"exercise", "solution", "exercise-check", "prose"} & set(_tags(cell)), cell.source
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, solved_names)) + r")\b")
    for cell in nb.cells:
        if cell.cell_type == "code" and not {"exercise", "solution", "exercise-check"} & set(_tags(cell)):
            assert not pattern.search(cell.source), cell.source


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_the_grader_runs_the_opening_cells_and_the_exercises_only(path):
    student = unsolved(path)
    setup = grade.setup_cells(student)
    assert student.cells[setup[0]].source.startswith("# Colab")
    assert any("parameters" in _tags(student.cells[i]) for i in setup)
    assert "import attnlib" in student.cells[setup[-1]].source and len(setup) == 3
    ran = [student.cells[i] for i in grade.exercise_cells(student)]
    assert all({"exercise", "exercise-check"} & set(_tags(c)) for c in ran)
    assert len(ran) == 2 * len(grade.exercises_of(student))
    assert grade.exercises_of(student) == grade.exercises_of(_read(path))


# ----------------------------------------------------------------------------- the student edition


def test_the_student_edition_has_no_solution_and_no_output(tmp_path):
    assert student_edition.main([str(ROOT / "chapters"), "--out", str(tmp_path)]) == 0
    written = sorted(tmp_path.glob("*.ipynb"))
    assert [p.name for p in written] == [p.name for p in CHAPTERS]
    for path, original in zip(written, CHAPTERS):
        nb, book = _read(path), _read(original)
        nbformat.validate(nb)
        assert not any("solution" in _tags(c) for c in nb.cells)
        text = path.read_text(encoding="utf-8")
        for source in _solution_sources(book):  # not a line of a reference solution survives
            for line in source.splitlines():
                if line.strip() and not any(line in c.source for c in book.cells if "solution" not in _tags(c)):
                    assert line not in "\n".join(c.source for c in nb.cells), (path.name, line)
        assert "solution-start" not in text and "solution-end" not in text
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert all(c.outputs == [] and c.execution_count is None for c in code)
        assert "widgets" not in nb.metadata
        # everything else is kept, in order, with the note right after the title
        assert student_edition.NOTE_TAG in _tags(nb.cells[1]) and "Student edition" in nb.cells[1].source
        kept = [c.source for c in book.cells if "solution" not in _tags(c)]
        assert [c.source for c in nb.cells if student_edition.NOTE_TAG not in _tags(c)] == kept
        assert sum("exercise" in _tags(c) for c in nb.cells) == sum("exercise" in _tags(c) for c in book.cells)
        assert sum("exercise-check" in _tags(c) for c in nb.cells) == len(grade.exercises_of(book))
    # a second pass over a student edition changes nothing (one note, no solutions to remove)
    again = student_edition.student_notebook(_read(written[1]))
    assert [c.source for c in again.cells] == [c.source for c in _read(written[1]).cells]


def test_the_committed_chapters_keep_their_solutions():
    for path in CHAPTERS:
        assert _solution_sources(_read(path))


# ----------------------------------------------------------------------------- grading, in kernels


def _all_chapters_in_one_notebook(make):
    """Every chapter's graded cells in one notebook: the first chapter's opening cells, then each
    chapter's opening cells and its Exercises section (markdown included, so each exercise's
    answers are recorded after its own cells)."""
    combined = nbformat.v4.new_notebook()
    for path in CHAPTERS:
        nb = make(path)
        first = next(i for i, c in enumerate(nb.cells) if grade.is_exercise_start(c))
        combined.cells += [nb.cells[i] for i in grade.setup_cells(nb)] + nb.cells[first:]
    return combined


def _run_and_judge(combined, tmp_path):
    """Run ``combined`` in the sandbox as the grader does, then judge each exercise apart, in a
    sandbox of its own, on the book's cases (seed None: what the check cells print)."""
    from attnlib.presentation.exercises import judge

    expected = [e for path in CHAPTERS for e in grade.exercises_of(_read(path))]
    (tmp_path / "run").mkdir()
    run, job = grade.run_notebook(combined, tmp_path / "run", grade.sandbox.Limits(wall_s=600))
    verdicts = {}
    for k, e in enumerate(expected):
        spec, judged = grade.judge_apart(combined, e, job, None, tmp_path / f"judge-{k}",
                                         grade.sandbox.Limits(wall_s=120))
        assert judged.failed is None and judged.missing is None, (e.checker, judged)
        verdicts[e.checker] = judge(spec, judged.answers)
    return run, verdicts


def test_reference_solutions_pass_every_exercise_of_every_chapter(tmp_path):
    combined = _all_chapters_in_one_notebook(solved)
    start = time.perf_counter()
    run, verdicts = _run_and_judge(combined, tmp_path)
    print(f"{len(CHAPTERS)} solved chapters in one sandboxed kernel: {time.perf_counter() - start:.1f} s")
    assert run.stopped is None
    # Chapter 7's solution ends with a demonstration on the chapter's own results (`both`),
    # which the grader does not compute: that line raises, after the function is defined.
    (where, error), = run.errors.items()
    assert "round(my_beyond_floor(both." in combined.cells[where].source
    assert error == "NameError: name 'both' is not defined"
    assert all(v is not None and v.passed for v in verdicts.values()), verdicts
    assert all("correct on" in v.message for v in verdicts.values())
    # a committed chapter ran no solution: each check cell prints the starter's verdict, as a
    # reader's first Run-all does (tests/test_classroom.py::test_run_all_checks_the_readers_answer_not_the_solution)
    for path in CHAPTERS:
        for cell in _read(path).cells:
            if "exercise-check" in _tags(cell):
                checker = grade._CHECK_CALL.search(cell.source).group(1)
                printed = "".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in cell.outputs)
                assert printed.strip().endswith("not implemented yet (the starter still raises NotImplementedError)."), \
                    (path.name, checker, printed)


def test_the_unsolved_student_edition_runs_and_fails_every_exercise_of_every_chapter(tmp_path):
    combined = _all_chapters_in_one_notebook(unsolved)
    run, verdicts = _run_and_judge(combined, tmp_path)
    assert run.stopped is None and run.errors == {}
    for verdict in verdicts.values():
        assert verdict is not None and not verdict.passed and "not implemented yet" in verdict.message


def _write(nb, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def broken_ch02():
    """Chapter 2 solved, but the JSD answer does not parse and the τ answer ignores ties (τ_a)."""
    nb = solved(CH02)
    nb.cells[_cell_index(nb, "exercise", "def my_jsd")].source = (
        "def my_jsd(p, q):\n    m = (p + q) / 2\n    return 0.5 * (kl(p, m) + kl(q, m)\n")
    nb.cells[_cell_index(nb, "exercise", "def my_kendall_tau")].source = (
        "def my_kendall_tau(x, y):\n"
        "    i, j = np.triu_indices(len(x), 1)\n"
        "    s = np.sign(x[i] - x[j]) * np.sign(y[i] - y[j])\n"
        "    return s.sum() / len(s)\n")
    return nb


def answer_above_the_exercises():
    """Chapter 2 solved, but the TVD answer moved to a new cell above the Exercises heading."""
    nb = solved(CH02)
    where = _cell_index(nb, "exercise", "def my_tvd")
    answer = nb.cells[where].source
    nb.cells[where].source = "# (moved up)"
    first = next(i for i, c in enumerate(nb.cells) if grade.is_exercise_start(c))
    nb.cells.insert(first - 2, nbformat.v4.new_code_cell(answer))
    return nb


def _read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert rows and list(rows[0]) == grade.COLUMNS
    return rows


@pytest.fixture(scope="module")
def class_folder(tmp_path_factory):
    """A class's submissions: solved, unsolved, broken, not a notebook, an unknown name; graded."""
    folder = tmp_path_factory.mktemp("submissions")
    _write(solved(CH02), folder / "alice" / CH02.name)
    _write(unsolved(CH02), folder / "bob" / "02.ipynb")  # named by the chapter's number
    _write(broken_ch02(), folder / "carol" / CH02.name)
    (folder / "carol" / "03_feature_importance.ipynb").write_text('{"cells": [ oops', encoding="utf-8")
    (folder / "carol" / "notes.ipynb").write_text("{}", encoding="utf-8")
    (folder / "carol" / "notes.txt").write_text("not graded", encoding="utf-8")
    _write(solved(CH02), folder / "dan" / "Chapter 2 - measures (1).ipynb")  # recognised by its labels
    _write(unsolved(CH02), folder / "erin" / CH02.name)  # two hand-ins: the newest, solved, is graded
    _write(solved(CH02), folder / "erin" / "02_measures (1).ipynb")
    os.utime(folder / "erin" / CH02.name, (time.time() - 3600, time.time() - 3600))
    _write(answer_above_the_exercises(), folder / "frank" / CH02.name)
    out = folder.parent / "grades.csv"
    start = time.perf_counter()
    assert grade.main([str(folder), "--out", str(out), "--jobs", "2"]) == 0
    print(f"graded 3 kernels' worth of submissions in {time.perf_counter() - start:.1f} s")
    return _read_csv(out)


def _rows(rows, student, chapter):
    return {r["exercise"]: (r["passed"], r["message"]) for r in rows
            if r["student"] == student and r["chapter"] == chapter}


def test_the_grader_writes_a_row_per_student_chapter_and_exercise(class_folder):
    keys = [(r["student"], r["chapter"], r["exercise"]) for r in class_folder]
    assert keys == [
        ("alice", "02_measures", "ex-tvd"), ("alice", "02_measures", "ex-jsd"), ("alice", "02_measures", "ex-tau"),
        ("bob", "02_measures", "ex-tvd"), ("bob", "02_measures", "ex-jsd"), ("bob", "02_measures", "ex-tau"),
        ("carol", "02_measures", "ex-tvd"), ("carol", "02_measures", "ex-jsd"), ("carol", "02_measures", "ex-tau"),
        ("carol", "03_feature_importance", "ex-loo"), ("carol", "03_feature_importance", "ex-grad"),
        ("carol", "notes", "-"),
        ("dan", "02_measures", "ex-tvd"), ("dan", "02_measures", "ex-jsd"), ("dan", "02_measures", "ex-tau"),
        ("erin", "02_measures", "ex-tvd"), ("erin", "02_measures", "ex-jsd"), ("erin", "02_measures", "ex-tau"),
        ("frank", "02_measures", "ex-tvd"), ("frank", "02_measures", "ex-jsd"), ("frank", "02_measures", "ex-tau"),
    ]
    assert {r["sandbox"] for r in class_folder} == {"bwrap"}


def test_a_solved_notebook_passes_and_an_unsolved_one_fails_exactly_the_exercises(class_folder):
    assert _rows(class_folder, "alice", "02_measures") == {
        "ex-tvd": ("True", "tvd: correct on all 7 cases."),
        "ex-jsd": ("True", "jsd: correct on all 7 cases."),
        "ex-tau": ("True", "kendall_tau: correct on all 9 cases."),
    }
    bob = _rows(class_folder, "bob", "02_measures")
    assert set(bob) == {"ex-tvd", "ex-jsd", "ex-tau"}
    for exercise, (passed, message) in bob.items():
        assert passed == "False"
        assert message.endswith("not implemented yet (the starter still raises NotImplementedError).")
        assert "raised" not in message.replace("still raises", "")  # nothing else went wrong


def test_a_notebook_that_raises_is_graded_exercise_by_exercise(class_folder):
    carol = _rows(class_folder, "carol", "02_measures")
    assert carol["ex-tvd"] == ("True", "tvd: correct on all 7 cases.")
    passed, message = carol["ex-jsd"]
    assert passed == "False" and "`def my_jsd(p, q):` raised SyntaxError" in message
    assert "NameError: name 'my_jsd' is not defined" in message  # so there is no answer to check
    passed, message = carol["ex-tau"]
    assert passed == "False" and re.match(r"kendall_tau: case \d+ is off", message)


def test_a_file_that_is_not_a_notebook_is_reported_per_exercise(class_folder):
    carol = _rows(class_folder, "carol", "03_feature_importance")
    assert set(carol) == {"ex-loo", "ex-grad"}
    assert all(p == "False" and m.startswith("not a notebook: NotJSONError") for p, m in carol.values())
    passed, message = _rows(class_folder, "carol", "notes")["-"]
    assert passed == "False" and message.startswith("unknown chapter")


def test_the_messy_cases_misnamed_duplicate_and_misplaced(class_folder):
    dan = [r for r in class_folder if r["student"] == "dan"]
    assert all(r["passed"] == "True" and r["file"] == "Chapter 2 - measures (1).ipynb" for r in dan)
    assert all("recognised by its exercise labels as 02_measures" in r["note"] for r in dan)
    erin = [r for r in class_folder if r["student"] == "erin"]  # one set of rows, from the newest file
    assert all(r["passed"] == "True" and r["file"] == "02_measures (1).ipynb" for r in erin)
    assert all("duplicate hand-ins" in r["note"] and "not graded: 02_measures.ipynb" in r["note"] for r in erin)
    frank = _rows(class_folder, "frank", "02_measures")
    passed, message = frank["ex-tvd"]
    assert passed == "False" and "NameError: name 'my_tvd' is not defined" in message
    assert "above the Exercises heading" in message and "Answers must go in the exercise's own cells" in message
    assert frank["ex-jsd"][0] == frank["ex-tau"][0] == "True"


def test_a_notebook_that_hangs_times_out_and_the_next_is_graded(tmp_path):
    hangs = solved(CH02)
    jsd_start = next(i for i, c in enumerate(hangs.cells) if grade.is_exercise_start(c) and "ex-jsd" in c.source)
    hangs.cells.insert(jsd_start + 1, nbformat.v4.new_code_cell("import time\n\ntime.sleep(600)"))
    _write(hangs, tmp_path / "dave" / CH02.name)
    _write(solved(CH02), tmp_path / "erin" / CH02.name)
    out = tmp_path / "grades.csv"
    start = time.perf_counter()
    assert grade.main([str(tmp_path), "--out", str(out), "--timeout", "45"]) == 0
    assert time.perf_counter() - start < 150  # the hang cost 45 s, not 600
    rows = _read_csv(out)
    dave, erin = _rows(rows, "dave", "02_measures"), _rows(rows, "erin", "02_measures")
    assert dave["ex-tvd"] == ("True", "tvd: correct on all 7 cases.")  # recorded before the hang
    for exercise in ("ex-jsd", "ex-tau"):
        passed, message = dave[exercise]
        assert passed == "False" and message.startswith("timed out after 45 s in cell")
        assert "`import time`" in message
    assert all(p == "True" for p, _ in erin.values()) and len(erin) == 3


def test_answers_travel_as_numbers_and_are_judged_outside(tmp_path):
    """record_answers writes values only; judge_recorded compares them with its own references."""
    import json

    import numpy as np

    from attnlib import exercises

    exercises.record_answers("check_f1", lambda: (lambda y, p: 0.0), tmp_path)
    assert not exercises.judge_recorded("check_f1", tmp_path)
    exercises.record_answers("check_tvd", lambda: (lambda p, q: 0.5 * np.abs(p - q).sum(-1)), tmp_path)
    assert exercises.judge_recorded("check_tvd", tmp_path).message == "tvd: correct on all 7 cases."
    record = json.loads((tmp_path / "check_tvd.json").read_text())
    assert set(record) == {"checker", "imported", "missing", "answers"} and "passed" not in record
    record["answers"] = [{"kind": "value", "detail": "", "passed": True}]  # a forged record is just wrong numbers
    (tmp_path / "check_tvd.json").write_text(json.dumps(record))
    assert not exercises.judge_recorded("check_tvd", tmp_path)
    (tmp_path / "check_tvd.npz").write_bytes(b"\x80\x04 a pickle, never loaded")
    verdict = exercises.judge_recorded("check_tvd", tmp_path)
    assert not verdict and "cannot be read" in verdict.message
    exercises.record_answers("check_jsd", lambda: undefined_name, tmp_path)  # noqa: F821
    verdict = exercises.judge_recorded("check_jsd", tmp_path)
    assert not verdict and "NameError" in verdict.message
    assert exercises.judge_recorded("check_kendall_tau", tmp_path) is None  # nothing recorded
    assert exercises.check_f1.__doc__.startswith("Exercise: F1")


def test_match_chapter_by_name_or_number():
    refs = grade.reference_chapters(ROOT / "chapters")
    assert grade.match_chapter("02_measures.ipynb", refs).name == "02_measures.ipynb"
    assert grade.match_chapter("2.ipynb", refs).name == "02_measures.ipynb"
    assert grade.match_chapter("12_my_heads.ipynb", refs).name == "12_heads.ipynb"
    assert grade.match_chapter("notes.ipynb", refs) is None
    assert grade.match_chapter("99_x.ipynb", refs) is None


def test_every_solution_is_folded_under_its_title_and_numbered_as_its_exercise():
    """A solution is a markdown cell: a <details> block titled "Solution N.M: open it once you
    have tried" (folded in the book, JupyterLab and Colab alike) holding the code, in the
    exercise's own place (after its starter, before its check)."""
    for path in CHAPTERS:
        nb = _read(path)
        for i, cell in enumerate(nb.cells):
            if "solution" not in _tags(cell):
                continue
            title = re.match(r"^<details>\n<summary>Solution (\d+\.\d+): open it once you have tried</summary>", cell.source)
            assert title and cell.source.rstrip().endswith("</details>"), (path.name, cell.source[:80])
            assert title.group(1).split(".")[0] == str(int(path.name[:2])), (path.name, title.group(1))
            assert "exercise" in _tags(nb.cells[i - 1]) and "exercise-check" in _tags(nb.cells[i + 1]), path.name


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_run_all_checks_the_readers_answer_not_the_solution(path):
    """Run-all (or Shift-Enter down the page) from the first exercise on, with a reader's wrong
    answer in each starter: every check reports that answer, never the folded solution's. Each
    solution, pasted in, passes its check (the solutions stay tested)."""
    import numpy as np

    nb = _read(path)
    first = next(i for i, c in enumerate(nb.cells) if grade.is_exercise_start(c))
    solutions = iter(_solution_sources(nb))
    namespace = {"np": np}
    for i in grade.setup_cells(nb)[1:]:  # the parameters and the imports (not the Colab install cell)
        exec(nb.cells[i].source, namespace)
    checked = 0
    for cell in nb.cells[first:]:
        if cell.cell_type != "code" or "prose" in _tags(cell):
            continue
        if "exercise" in _tags(cell):
            solution = next(solutions)
            name = next(n.name for n in ast.parse(cell.source).body if isinstance(n, ast.FunctionDef))
            try:
                exec(solution, namespace)
            except NameError as err:  # Chapter 7's demonstration on the chapter's own results (`both`)
                assert "'both'" in str(err) and name in namespace, (path.name, err)
            right = namespace[name]
            exec(cell.source, namespace)  # the starter, as the page runs it
            starter = namespace[name]
            namespace[name] = _wrong(right)  # the reader's attempt: the right answer, off by a little
        elif "exercise-check" in _tags(cell):
            said = eval(cell.source, namespace)
            assert not said, (path.name, cell.source, repr(said))  # the wrong answer is what is reported
            namespace[name] = starter
            unanswered = eval(cell.source, namespace)
            assert not unanswered and "not implemented yet" in repr(unanswered), (path.name, cell.source)
            namespace[name] = right
            assert eval(cell.source, namespace), (path.name, cell.source)
            checked += 1
        else:
            exec(cell.source, namespace)
    assert checked == len(grade.exercises_of(nb))


def _wrong(right):
    """An answer that returns the right one's values plus a little (or a reversed order, for a
    permutation): a plausible wrong answer for any checker."""
    import numpy as np
    import torch

    def answer(*args, **kwargs):
        value = right(*args, **kwargs)
        if isinstance(value, torch.Tensor):
            return value.flip(-1) if value.dtype == torch.long else value + 0.25
        if isinstance(value, tuple):
            return tuple(v + 0.25 if isinstance(v, (float, np.ndarray)) else v for v in value)
        return np.asarray(value, dtype=float) + 0.25
    return answer