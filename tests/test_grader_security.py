"""The grader against adversarial students (tools/grade.py, tools/sandbox.py; issue 26).

One class of Chapter 2 hand-ins is graded in one grader run (two notebooks at once): an
honest student, and students who forge the verdicts (a grade log, forged answer records),
monkeypatch the checker and the reference (Chapter 2's ``tvd``, Chapter 14's ``rollout``), snoop on and overwrite other hand-ins and the
grader's files, leave a double-forked daemon behind, kill the process that runs their
notebook, print 50 MB, allocate without end, and loop forever in an opening cell. The run is
stopped (SIGTERM) after the first student, then resumed (``--resume``), which also skips a
student already in the CSV. Each test then checks one student's verdicts, files outside the
sandbox, processes left behind, or the CSV. Without bubblewrap these tests fail: install it
(``apt-get install bubblewrap``; .ci/run does).

The last tests need no kernel: each checker rejects plausible wrong answers.
"""
import csv
import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import grade  # noqa: E402
import sandbox  # noqa: E402
from test_classroom import CH02, _read_csv, _rows, _write, solved, unsolved  # noqa: E402

from attnlib import exercises  # noqa: E402

TIMEOUT = 60  # seconds per notebook: the honest ones need 10 to 30 on a busy 2-core machine
MARKER = "attnlib-test-daemon-7f3c"
CH14 = ROOT / "chapters" / "14_rollout_and_flow.ipynb"
LABELS = ("ex-tvd", "ex-jsd", "ex-tau")


def _insert_in(nb, label: str, source: str, where: str = "start"):
    """A new code cell in exercise ``label``'s span: right after its {exercise-start} cell, or at its end."""
    spans = grade.exercise_spans(nb)
    index = spans[label].start + 1 if where == "start" else spans[label].stop
    nb.cells.insert(index, nbformat.v4.new_code_cell(source))
    return nb


def _tree_hashes(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


#: This module's grading runs (tools/grade.py puts it into every sandbox's environment), so that
#: sandboxes of another grader on the machine (tests/test_classroom.py in the other pytest -n
#: worker) are not taken for ours.
RUN_ID = f"test-security-{os.getpid()}"


def _sandbox_processes() -> list[str]:
    """Processes carrying the daemon's marker, or of the sandbox's user in this module's grading runs."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            uid = entry.stat().st_uid
            ours = os.geteuid() == 0 and uid == sandbox.SANDBOX_UID and (
                f"ATTNLIB_GRADE_RUN={RUN_ID}".encode() in (entry / "environ").read_bytes().split(b"\0"))
        except OSError:
            continue
        if MARKER in cmdline or ours:
            found.append(f"{entry.name}: {cmdline[:120]}")
    return found


def _class(folder: Path, outside: dict) -> None:
    """The adversarial class (``outside``: the paths of the grader's world a snoop tries)."""
    _write(solved(CH02), folder / "a_honest" / CH02.name)

    forger = _insert_in(unsolved(CH02), "ex-tau", f'''import glob, json, os
verdict = {{"checker": "check_tvd", "passed": True, "message": "tvd: correct on all 7 cases."}}
for path in [os.environ.get("ATTNLIB_GRADE_LOG", ""), {str(outside["log"])!r}] + glob.glob("/grade-out/*"):
    try:
        with open(path, "a") as f:
            f.write(json.dumps(verdict) + "\\n")
    except OSError:
        pass
for name in ("check_tvd", "check_jsd"):  # records claiming a pass
    for path in glob.glob(f"/grade-out/answers/{{name}}.json"):
        with open(path, "w") as f:
            json.dump({{"checker": name, "passed": True, "answers": [{{"kind": "value", "passed": True}}]}}, f)''', "end")
    _write(forger, folder / "b_forger" / CH02.name)

    patcher = _insert_in(unsolved(CH02), "ex-tvd", '''import attnlib, attnlib.metrics
import numpy as np
from attnlib.presentation import exercises as ex

zeros = lambda p, q: np.zeros(np.shape(p)[:-1])
attnlib.exercises.check_tvd = lambda fn: ex.CheckResult(True, "tvd: correct on all 7 cases.")
attnlib.metrics.tvd = attnlib.metrics.jsd = zeros  # the references the checkers compare with
ex.judge = lambda *args, **kwargs: ex.CheckResult(True, "correct")
ex.SPECS["check_jsd"] = lambda: ex.Spec("jsd", [(np.ones((1, 2)), np.ones((1, 2)))], zeros)
my_tvd = my_jsd = zeros
for path in (attnlib.__file__, ex.__file__):
    try:
        with open(path, "a") as f:
            f.write("\\n# poisoned\\n")
    except OSError:
        pass''', "end")
    _write(patcher, folder / "c_patcher" / CH02.name)
    rollout = _insert_in(unsolved(CH14), "ex-rollout", '''import attnlib.experiments.flow as flow
import torch

fake = lambda attentions, mask, residual=0.5: torch.zeros(attentions.shape[0], attentions.shape[1],
                                                          *attentions.shape[-2:], dtype=attentions.dtype)
flow.rollout = fake  # the reference check_rollout compares with
my_rollout = lambda a: fake(a[None], None)[0, -1]''', "end")
    _write(rollout, folder / "c_patcher" / CH14.name)

    # The snoop's answers are right only if it sees nothing of the grader's world: a pass proves it.
    snoop = _insert_in(solved(CH02), "ex-tvd", f'''import os, socket
leaks = [p for p in {[str(p) for p in outside["paths"]]!r} if os.path.exists(p)]
for target in {[str(p) for p in outside["targets"]]!r}:
    try:
        with open(target, "w") as f:
            f.write("overwritten")
        leaks.append(target)
    except OSError:
        pass
    try:
        os.remove(target)
        leaks.append(target)
    except OSError:
        pass
for pid in os.listdir("/proc"):
    try:
        if pid.isdigit() and {str(outside["root"])!r}.encode() in open(f"/proc/{{pid}}/cmdline", "rb").read():
            leaks.append(pid)
    except OSError:
        pass
try:
    socket.create_connection(("1.1.1.1", 53), timeout=3).close()
    leaks.append("network")
except OSError:
    pass
_right_tvd = my_tvd


def my_tvd(p, q):
    return _right_tvd(p, q) + len(leaks)''', "end")
    _write(snoop, folder / "d_snoop" / CH02.name)

    daemon_code = (f"import time\\nwhile True:\\n    for t in {[str(p) for p in outside['targets']]!r}:\\n"
                   "        try:\\n            open(t, 'w').write('daemon')\\n        except OSError:\\n            pass\\n"
                   "    time.sleep(0.1)")
    daemon = _insert_in(solved(CH02), "ex-tvd", f'''import os, sys
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "{daemon_code}", "{MARKER}"])
    os._exit(0)
os.wait()''')
    _write(daemon, folder / "e_daemon" / CH02.name)

    killer = _insert_in(solved(CH02), "ex-jsd", "import os\n\nos.kill(os.getppid(), 9)\nos.kill(-1, 9)")
    _write(killer, folder / "f_killer" / CH02.name)

    printer = _insert_in(solved(CH02), "ex-jsd", 'import sys\n\nprint("x" * 50_000_000)\n'
                                                 'sys.__stdout__.write("y" * 50_000_000)')
    _write(printer, folder / "g_printer" / CH02.name)

    bomb = _insert_in(solved(CH02), "ex-jsd", "import numpy as np\n\nhoard = []\nwhile True:\n"
                                              "    hoard.append(np.ones(2**25))  # 256 MB a time, written")
    _insert_in(bomb, "ex-jsd", "del hoard\nbig = bytearray(64 * 2**30)")
    _write(bomb, folder / "h_bomb" / CH02.name)

    looper = solved(CH02)
    parameters = next(i for i in grade.setup_cells(looper) if "parameters" in grade.tags(looper.cells[i]))
    looper.cells[parameters].source += "\n\nwhile True:\n    pass"
    _write(looper, folder / "i_looper" / CH02.name)

    _write(looper, folder / "z_resumed" / CH02.name)  # already in the CSV: never run


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Grade the class: stop the grader (SIGTERM) after the first student, then resume."""
    assert sandbox.bwrap(), "bubblewrap is missing: apt-get install bubblewrap (see README, For instructors)"
    base = tmp_path_factory.mktemp("security")
    folder, results, grader_cwd, grader_tmp = base / "class", base / "results", base / "grader", base / "tmp"
    for d in (results, grader_cwd, grader_tmp):
        d.mkdir()
    out = results / "grades.csv"
    old = results / "old_grades.csv"
    old.write_text("student,mark\nalice,100\n")
    (grader_cwd / "keep.txt").write_text("the grader's own file")
    log = results / "grade_log.jsonl"
    outside = {"root": base, "log": log,
               "paths": [folder, results, grader_cwd, grader_tmp, folder / "a_honest" / CH02.name, out, ROOT / "tools"],
               "targets": [folder / "a_honest" / CH02.name, out, old, grader_cwd / "keep.txt"]}
    _class(folder, outside)
    with open(out, "w", newline="") as f:  # z_resumed was graded by an earlier run
        csv.writer(f, lineterminator="\n").writerows(
            [grade.COLUMNS, ["z_resumed", "02_measures", "ex-tvd", "False", "graded before", CH02.name, "", "bwrap"]])
    before = {"class": _tree_hashes(folder), "attnlib": _tree_hashes(ROOT / "attnlib"),
              "old": old.read_bytes(), "processes": _sandbox_processes()}
    env = {**os.environ, "TMPDIR": str(grader_tmp), "ATTNLIB_GRADE_LOG": str(log), "PYTHONPATH": str(ROOT),
           "ATTNLIB_GRADE_RUN": RUN_ID}
    command = [sys.executable, str(ROOT / "tools" / "grade.py"), str(folder), "--out", str(out), "--resume",
               "--timeout", str(TIMEOUT), "--memory", "2"]
    start = time.perf_counter()
    first = subprocess.Popen(command + ["--jobs", "1"], cwd=grader_cwd, env=env, stderr=subprocess.PIPE, text=True)
    seen_running = False  # our sandboxes are found while they run: the run's name reaches them
    while first.poll() is None and len(_read_csv(out)) < 4:  # the seeded row and a_honest's three
        seen_running = seen_running or bool(_sandbox_processes())
        time.sleep(0.5)
    first.send_signal(signal.SIGTERM)
    first_rc, first_err = first.wait(timeout=60), first.stderr.read()
    after_stop = {"rows": _read_csv(out), "tmp": sorted(os.listdir(grader_tmp)), "processes": _sandbox_processes()}
    second = subprocess.run(command + ["--jobs", "2"], cwd=grader_cwd, env=env, stderr=subprocess.PIPE, text=True,
                            timeout=900)
    seconds = time.perf_counter() - start
    print(f"graded the adversarial class in {seconds:.1f} s\n{second.stderr}")
    time.sleep(1)  # a surviving daemon would have written by now
    return {"rows": _read_csv(out), "before": before, "folder": folder, "old": old, "log": log,
            "grader_cwd": grader_cwd, "grader_tmp": grader_tmp, "first": (first_rc, first_err, after_stop),
            "second": second, "processes": _sandbox_processes(), "seconds": seconds, "seen_running": seen_running}


def _verdicts(graded, student):
    return _rows(graded["rows"], student, "02_measures")


def test_the_sandbox_tool_is_here():
    """Fails (not skips) where bubblewrap is missing or cannot start a sandbox."""
    assert sandbox.unavailable([*sandbox.python_paths(), str(grade.attnlib_dir())]) is None


def test_a_python_or_checkout_under_tmp_stays_visible_in_the_sandbox(tmp_path):
    """CI's fresh clone (and its .venv) may live under /tmp: the sandbox's private /tmp must not hide it."""
    venv = tmp_path / "clone" / ".venv"
    (venv / "bin").mkdir(parents=True)
    script = venv / "bin" / "hello.py"
    script.write_text("print('visible')\n")
    (tmp_path / "in").mkdir()
    out = tmp_path / "out"
    out.mkdir()
    sandbox.prepare_out(out)
    cmd = sandbox.command([sys.executable, str(script)], read_only=[*sandbox.python_paths(), str(venv)],
                          in_dir=tmp_path / "in", out_dir=out, env={}, limits=sandbox.Limits())
    assert cmd.index("--tmpfs") < cmd.index(str(venv))  # the tmpfs first, the folder bound on top of it
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "visible", done.stderr[-500:]


def test_the_honest_student_passes(graded):
    assert _verdicts(graded, "a_honest") == {
        "ex-tvd": ("True", "tvd: correct on all 7 cases."), "ex-jsd": ("True", "jsd: correct on all 7 cases."),
        "ex-tau": ("True", "kendall_tau: correct on all 9 cases.")}


def test_a_forged_log_and_forged_records_do_not_pass(graded):
    forger = _verdicts(graded, "b_forger")
    assert set(forger) == set(LABELS) and all(passed == "False" for passed, _ in forger.values()), forger
    assert "not implemented yet" in forger["ex-tau"][1]
    assert not graded["log"].exists()  # the grade log of the grader's environment is out of reach


def test_a_patched_checker_and_reference_do_not_pass(graded):
    patcher = _verdicts(graded, "c_patcher")
    assert all(passed == "False" for passed, _ in patcher.values()), patcher
    assert patcher["ex-tvd"][1].startswith("tvd: case") and "is off" in patcher["ex-tvd"][1]
    rollout = _rows(graded["rows"], "c_patcher", "14_rollout_and_flow")
    assert rollout["ex-rollout"][0] == "False" and rollout["ex-rollout"][1].startswith("rollout: case 1 is off")
    assert _tree_hashes(ROOT / "attnlib") == graded["before"]["attnlib"]  # attnlib is read-only


def test_other_hand_ins_the_csv_and_the_grader_folder_are_out_of_reach(graded):
    snoop = _verdicts(graded, "d_snoop")  # its answers are right only where it found no way out
    assert all(passed == "True" for passed, _ in snoop.values()), snoop
    assert _tree_hashes(graded["folder"]) == graded["before"]["class"]
    assert graded["old"].read_bytes() == graded["before"]["old"]
    assert (graded["grader_cwd"] / "keep.txt").read_text() == "the grader's own file"


def test_a_daemon_dies_with_the_sandbox(graded):
    assert all(passed == "True" for passed, _ in _verdicts(graded, "e_daemon").values())
    assert graded["seen_running"]  # the check below can see a sandbox of ours
    assert graded["processes"] == graded["before"]["processes"] == []
    assert graded["first"][2]["processes"] == []


def test_killing_the_parent_ends_only_that_notebook(graded):
    killer = _verdicts(graded, "f_killer")
    assert killer["ex-tvd"] == ("True", "tvd: correct on all 7 cases.")  # recorded before the kill
    for label in ("ex-jsd", "ex-tau"):
        passed, message = killer[label]
        assert passed == "False" and message.startswith("the run ended early"), message
    assert graded["second"].returncode == 0


def test_a_huge_print_and_a_memory_bomb_cost_only_their_cells(graded):
    for student in ("g_printer", "h_bomb"):
        verdicts = _verdicts(graded, student)
        assert all(passed == "True" for passed, _ in verdicts.values()), (student, verdicts)


def test_an_infinite_loop_in_an_opening_cell_times_out(graded):
    looper = _verdicts(graded, "i_looper")
    for passed, message in looper.values():
        assert passed == "False" and message.startswith(f"timed out after {TIMEOUT} s in the opening cell"), message


def test_the_csv_is_complete_resumable_and_nothing_is_left_behind(graded):
    rc, err, after_stop = graded["first"]
    assert rc != 0  # stopped by SIGTERM ...
    assert [r["student"] for r in after_stop["rows"]][:4] == ["z_resumed"] + ["a_honest"] * 3
    assert len(after_stop["rows"]) in (4, 7)  # ... with whole students only
    assert after_stop["tmp"] == []  # ... and its temporary folders removed
    keys = [(r["student"], r["exercise"]) for r in graded["rows"]]
    assert len(keys) == len(set(keys))  # nobody graded twice
    students = sorted({r["student"] for r in graded["rows"]})
    assert students == sorted(p.name for p in graded["folder"].iterdir())
    for student in students:
        if student != "z_resumed":
            assert sorted(e for s, e in keys if s == student and e.startswith("ex-")) == sorted(
                LABELS + (("ex-augmented-attention", "ex-rollout") if student == "c_patcher" else ()))
    assert _rows(graded["rows"], "z_resumed", "02_measures") == {"ex-tvd": ("False", "graded before")}
    assert {r["sandbox"] for r in graded["rows"]} == {"bwrap"}
    assert os.listdir(graded["grader_tmp"]) == []
    assert sorted(os.listdir(graded["grader_cwd"])) == ["keep.txt"]


def test_without_the_sandbox_the_grader_refuses_unless_unsafe(tmp_path, monkeypatch, capsys):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / CH02.name).write_text("not a notebook")
    out = tmp_path / "grades.csv"
    monkeypatch.setattr(sandbox, "bwrap", lambda: None)
    assert grade.main([str(tmp_path), "--out", str(out)]) == 2
    assert "refusing to grade without the sandbox" in capsys.readouterr().err and not out.exists()
    assert grade.main([str(tmp_path), "--out", str(out), "--unsafe"]) == 0
    rows = _read_csv(out)
    assert rows and all(r["sandbox"] == "unsandboxed" and r["passed"] == "False" for r in rows)


# ----------------------------------------------------------------------------- checkers catch wrong answers


def _tvd(p, q):
    return 0.5 * np.abs(np.asarray(p, float) - np.asarray(q, float)).sum(-1)


def _jsd(p, q, log=np.log):
    p, q = np.asarray(p, float), np.asarray(q, float)
    m = (p + q) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        kl = lambda a, b: np.where(a > 0, a * log(np.where(a > 0, a, 1) / np.where(b > 0, b, 1)), 0).sum(-1)  # noqa: E731
    return 0.5 * kl(p, m) + 0.5 * kl(q, m)


def _tau_b(x, y, constant=np.nan):
    x, y = np.asarray(x, float), np.asarray(y, float)
    i, j = np.triu_indices(len(x), 1)
    sx, sy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
    n0, n1, n2 = len(i), np.sum(sx == 0), np.sum(sy == 0)
    if n1 == n0 or n2 == n0:
        return constant
    return float(np.sum(sx * sy) / np.sqrt((n0 - n1) * (n0 - n2)))


def _permute(alpha, mask, generator):
    out = alpha.clone()
    real = mask.nonzero().squeeze(1)
    out[real] = alpha[real[torch.randperm(len(real), generator=generator)]]
    return out


def _rotate(alpha, mask, generator):
    out = alpha.clone()
    real = mask.nonzero().squeeze(1)
    out[real] = alpha[real.roll(int(torch.randint(len(real), (1,), generator=generator)))]
    return out


def _softmax(scores, mask):
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), -1).masked_fill(~mask, 0.0)


def _first_flip(flips, lengths, shift=1.0):
    return np.where(flips.any(-1), (flips.argmax(-1) + shift) / lengths, np.nan)


RIGHT_AND_WRONG = {
    "check_tvd": (_tvd, {"no 1/2": lambda p, q: 2 * _tvd(p, q), "unnormalised": lambda p, q: _tvd(10 * p, 10 * q)}),
    "check_jsd": (_jsd, {"log base 2": lambda p, q: _jsd(p, q, np.log2), "tvd instead": _tvd}),
    "check_kendall_tau": (_tau_b, {"0 for a constant array": lambda x, y: _tau_b(x, y, constant=0.0),
                                   "tau-a": lambda x, y: _tau_b(x, y) if len(set(x)) == len(x) and len(set(y)) == len(y)
                                   else 0.5}),
    "check_permutation": (_permute, {"rotation": _rotate, "the identity": lambda a, m, g: a.clone()}),
    "check_masked_softmax": (_softmax, {"unnormalised weights": lambda s, m: torch.exp(s - s.max()) * m,
                                        "padding included": lambda s, m: torch.softmax(s, -1)}),
    "check_first_flip_fraction": (_first_flip, {"off by one": lambda f, n: _first_flip(f, n, 0.0)}),
    "check_aopc": (lambda v: np.asarray(v).mean(-1), {"off by one (F - 1)": lambda v: np.asarray(v).sum(-1) / 4,
                                                     "one number": lambda v: np.asarray(v).mean()}),
}


@pytest.mark.parametrize("checker", sorted(RIGHT_AND_WRONG))
def test_each_checker_passes_a_right_answer_and_rejects_plausible_wrong_ones(checker):
    right, wrong = RIGHT_AND_WRONG[checker]
    check = getattr(exercises, checker)
    assert check(right), check(right).message
    for what, answer in wrong.items():
        assert not check(answer), f"{checker} passed a wrong answer: {what}"
        # and the same verdict when the answers travel as numbers, judged in another process
        spec = exercises.SPECS[checker]()
        assert not exercises.judge(spec, exercises.answers_of(spec, answer)), what


def test_an_imported_reference_is_reported_not_passed():
    from attnlib.metrics import tvd

    verdict = exercises.check_tvd(tvd)
    assert not verdict and "attnlib's own attnlib.metrics.tvd" in verdict.message
    assert exercises.check_tvd(lambda p, q: tvd(p, q))  # a function of one's own that calls it is an answer


def test_links_and_pipes_left_in_the_answers_folder_are_never_opened(tmp_path):
    """Student code may leave a link to a file of the grader's or a pipe that would block a reader."""
    secret = tmp_path / "secret.json"
    secret.write_text('{"checker": "check_tvd", "imported": null, "missing": null, "answers": []}')
    answers = tmp_path / "answers"
    answers.mkdir()
    (answers / "check_tvd.json").symlink_to(secret)
    assert exercises.read_answers("check_tvd", answers) is None
    exercises.record_answers("check_jsd", lambda: (lambda p, q: 0.0), answers)
    (answers / "check_jsd.npz").unlink()
    os.mkfifo(answers / "check_jsd.npz")
    recorded = exercises.read_answers("check_jsd", answers)  # returns at once, does not block on the pipe
    assert recorded.unreadable and not exercises.judge_recorded("check_jsd", answers)
    (tmp_path / "linked").symlink_to(answers, target_is_directory=True)
    assert exercises.read_answers("check_jsd", tmp_path / "linked") is None
    (tmp_path / "run.json").symlink_to(secret)
    assert grade._read_run(tmp_path / "run.json") == {}
    os.mkfifo(tmp_path / "fifo.json")
    assert grade._read_run(tmp_path / "fifo.json") == {}
