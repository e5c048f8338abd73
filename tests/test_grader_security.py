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
import json
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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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

    # Wrappers around the book's own functions, one kind per exercise: none is there when judged.
    wrapper = _insert_in(unsolved(CH02), "ex-tvd", "my_tvd = lambda p, q: tvd(p, q)", "end")
    _insert_in(wrapper, "ex-jsd", "import functools\n\nmy_jsd = functools.partial(jsd)", "end")
    _insert_in(wrapper, "ex-tau", TAU_WRAPPER, "end")
    _write(wrapper, folder / "j_wrapper" / CH02.name)

    # The references of other libraries: SciPy's Kendall tau and Jensen-Shannon distance.
    scipy_user = _insert_in(unsolved(CH02), "ex-tau", SCIPY_TAU, "end")
    _insert_in(scipy_user, "ex-jsd", SCIPY_JSD, "end")
    _write(scipy_user, folder / "q_scipy" / CH02.name)

    # The kernel patched: the "imported" detector blinded, the recording function replaced; and a
    # lone surrogate in an error message (which once stopped the grader).
    blinder = _insert_in(unsolved(CH02), "ex-tvd", BLINDER, "end")
    _insert_in(blinder, "ex-jsd", "my_jsd = jsd", "end")
    _insert_in(blinder, "ex-tau", SURROGATE, "end")
    _write(blinder, folder / "k_blinder" / CH02.name)

    # Recorded files overwritten by a daemon, and a folder nested 1,500 deep where the kernel writes.
    _write(_insert_in(unsolved(CH02), "ex-tvd", OVERWRITER, "end"), folder / "l_overwriter" / CH02.name)

    # The runner's report forged ("finished") through its file descriptors, then the runner killed:
    # Chapter 2 with only its first exercise solved.
    runner_killer = unsolved(CH02)
    starter = next(c for c in runner_killer.cells if "exercise" in grade.tags(c) and "def my_tvd" in c.source)
    starter.source = next(c.source for c in solved(CH02).cells if "exercise" in grade.tags(c) and "def my_tvd" in c.source)
    _write(_insert_in(runner_killer, "ex-jsd", RUNNER_KILLER, "end"), folder / "m_runner_killer" / CH02.name)

    # Hand-ins that once stopped the grader: each is a row.
    not_utf8 = os.fsdecode(b"n_caf\xe9")
    (folder / not_utf8).mkdir()
    (folder / not_utf8 / CH02.name).write_text("{not json", encoding="utf-8")
    numbered = json.loads(nbformat.writes(unsolved(CH02)))
    numbered["cells"][5]["source"] = 42
    (folder / "o_numbered").mkdir()
    (folder / "o_numbered" / CH02.name).write_text(json.dumps(numbered), encoding="utf-8")
    (folder / "p_formula").mkdir()
    (folder / "p_formula" / "=1+2.ipynb").write_text("{}", encoding="utf-8")
    (folder / "y_partial").mkdir()  # one row of three in the CSV: graded again
    (folder / "y_partial" / CH02.name).write_text("{not json", encoding="utf-8")


TAU_WRAPPER = '''import attnlib.metrics


def _tau(x, y):
    return attnlib.metrics.kendall_tau(x, y)[0]


class _Tau:
    def __call__(self, x, y):
        return _tau(x, y)


my_kendall_tau = _Tau()'''

BLINDER = '''import attnlib.presentation.exercises as ex
import attnlib.presentation.exercises.core as core

core._attnlib_function = lambda fn: None
ex.record_answers = core.record_answers = lambda *args, **kwargs: None
my_tvd = tvd'''

SCIPY_TAU = '''from scipy.stats import kendalltau


def my_kendall_tau(x, y):
    return kendalltau(x, y)[0]'''

SCIPY_JSD = '''import numpy as np


def my_jsd(p, q):
    from scipy.spatial.distance import jensenshannon
    return np.array([jensenshannon(a, b) ** 2 for a, b in zip(p, q)])'''

SURROGATE = '''def my_kendall_tau(x, y):
    raise ValueError("\\udcff")


raise ValueError("\\udcff")'''

_FORGED = '{"checker": "check_tvd", "imported": null, "missing": null, "answers": [{"kind": "value"}]}'
OVERWRITER = f"""import os, sys
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        code = '''import glob, os, time
while True:
    for folder in glob.glob("/grade-out*") + glob.glob("/grade-out/*") + ["/tmp", "."]:
        for name in ("check_tvd", "check_jsd", "check_kendall_tau"):
            try:
                os.makedirs(folder + "/answers", exist_ok=True)
                open(folder + "/answers/" + name + ".json", "w").write({_FORGED!r})
            except OSError:
                pass
    time.sleep(0.05)'''
        os.execv(sys.executable, [sys.executable, "-c", code, "{MARKER}"])
    os._exit(0)
os.wait()
start = os.getcwd()
for _ in range(1500):
    os.mkdir("d")
    os.chdir("d")
os.chdir(start)"""

RUNNER_KILLER = '''import json, os
my_jsd = jsd
state = json.dumps({"running": None, "errors": {}, "stopped": None, "finished": True})
parent = os.getppid()
for fd in range(64):  # its descriptors, if it let them be opened
    try:
        with open(f"/proc/{parent}/fd/{fd}", "w") as f:
            f.write(state + "\\n")
    except OSError:
        pass
os.kill(parent, 9)'''


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
    with open(out, "w", newline="") as f:  # z_resumed was graded by an earlier run; y_partial's stopped
        csv.writer(f, lineterminator="\n").writerows(
            [grade.COLUMNS] + [["z_resumed", "02_measures", label, "False", "graded before", CH02.name, "", "bwrap"]
                               for label in LABELS]
            + [["y_partial", "02_measures", "ex-tvd", "True", "cut short", CH02.name, "", "bwrap"]])
    before = {"class": _tree_hashes(folder), "attnlib": _tree_hashes(ROOT / "attnlib"),
              "old": old.read_bytes(), "processes": _sandbox_processes()}
    env = {**os.environ, "TMPDIR": str(grader_tmp), "ATTNLIB_GRADE_LOG": str(log), "PYTHONPATH": str(ROOT),
           "ATTNLIB_GRADE_RUN": RUN_ID}
    command = [sys.executable, str(ROOT / "tools" / "grade.py"), str(folder), "--out", str(out), "--resume",
               "--timeout", str(TIMEOUT), "--memory", "2"]
    start = time.perf_counter()
    first = subprocess.Popen(command + ["--jobs", "1"], cwd=grader_cwd, env=env, stderr=subprocess.PIPE, text=True)
    seen_running = False  # our sandboxes are found while they run: the run's name reaches them
    while first.poll() is None and len(_read_csv(out)) < 6:  # z_resumed's rows and a_honest's three
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
    said = bytearray()  # through sandbox.run: as root, it mounts what user 65534's bwrap could not reach
    done = sandbox.run(cmd, sandbox.Limits(wall_s=60), tmp_path / "log", output=said, max_output=100)
    assert done.returncode == 0 and said.decode().strip() == "visible", (tmp_path / "log").read_text()[-500:]



def test_the_input_folder_is_a_copy_that_names_no_host_path(tmp_path):
    """Issue 50: the sandbox's input folder is copied in (a read-only tmpfs), not bind-mounted: its
    files and subfolders are all there, it cannot be written, and neither ``/proc/self/mountinfo`` nor
    any other mount names the grader's temporary folder."""
    script = r"""import json, os
seen = {"files": sorted(os.path.relpath(os.path.join(d, f), "%s") for d, _, fs in os.walk("%s") for f in fs),
        "mountinfo": open("/proc/self/mountinfo").read(), "nested": open("%s/lib/pkg/a.py").read()}
try:
    open("%s/new.txt", "w").close()
    seen["write"] = "wrote"
except OSError as err:
    seen["write"] = err.strerror
print(json.dumps(seen))
""" % ((sandbox.IN,) * 4)
    with grade._work_folder() as work:
        in_dir = Path(work, "in")
        (in_dir / "lib" / "pkg").mkdir(parents=True)
        (in_dir / "student.py").write_text(script)
        (in_dir / "lib" / "pkg" / "a.py").write_text("A = 1\n")
        said = bytearray()
        done = grade._run_sandboxed([sys.executable, f"{sandbox.IN}/student.py"], Path(work),
                                    sandbox.Limits(wall_s=60), False, in_dir=in_dir,
                                    read_only=[str(grade.attnlib_dir())], pythonpath="",
                                    output=said, max_output=100_000)
        log = Path(work, "log").read_text(errors="replace")[-1000:]
    assert done.returncode == 0, log
    seen = json.loads(said.decode())
    assert seen["files"] == ["lib/pkg/a.py", "student.py"] and seen["nested"] == "A = 1\n"
    assert seen["write"] != "wrote"
    assert str(work) not in seen["mountinfo"] and "attnlib-grade" not in seen["mountinfo"], seen["mountinfo"]
    assert "attnlib-stage" not in seen["mountinfo"]
    assert any(line.split()[4] == sandbox.IN and " tmpfs " in line for line in seen["mountinfo"].splitlines())


NESTED_USERNS = r'''import ctypes, json, os, subprocess

libc = ctypes.CDLL(None, use_errno=True)
seen = {"uid": os.getuid(), "unshare": libc.unshare(0x10000000)}  # CLONE_NEWUSER: -1 when refused
# a tmpfs of its own past the /tmp cap, in a user namespace of its own, then 32 MB written in it
script = ("mount -t tmpfs -o size=1G own /tmp && head -c 33554432 /dev/zero > /tmp/big && echo wrote")
mounted = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
                         capture_output=True, text=True)
seen["own_tmpfs"] = mounted.stdout.strip()
try:  # the sandbox's own /tmp holds 8 MB
    with open("/tmp/big", "wb") as f:
        f.write(bytes(32 * 2**20))
    seen["tmp"] = "wrote"
except OSError as err:
    seen["tmp"] = err.strerror
print(json.dumps(seen))
'''


def test_student_code_can_make_no_user_namespace_nor_a_tmpfs_past_the_cap(tmp_path):
    """Issue 50: as root too, the sandbox forbids user namespaces inside it, so student code cannot
    mount a tmpfs of its own that the /tmp cap does not bound. Run as the grader runs a judge: its
    input folder in the grader's 0700 working folder, Python and attnlib bound read-only."""
    limits = sandbox.Limits(wall_s=60, tmp_bytes=8 * 2**20)
    with grade._work_folder() as work:
        in_dir = Path(work, "in")
        in_dir.mkdir()
        (in_dir / "student.py").write_text(NESTED_USERNS)
        said = bytearray()
        done = grade._run_sandboxed([sys.executable, f"{sandbox.IN}/student.py"], Path(work), limits, False,
                                    in_dir=in_dir, read_only=[str(grade.attnlib_dir())], pythonpath="",
                                    output=said, max_output=10_000)
        log = Path(work, "log").read_text(errors="replace")[-1000:]
    assert done.returncode == 0, log
    seen = json.loads(said.decode())
    assert seen["uid"] == sandbox.SANDBOX_UID and seen["tmp"] != "wrote", seen  # the cap holds for /tmp
    if sandbox.USERNS_NOTE in done.note:  # a machine without unprivileged user namespaces: said in the row
        assert os.geteuid() == 0 and not sandbox.root_userns()
        pytest.skip(f"root's sandbox cannot forbid nested user namespaces on this machine: {done.note}")
    assert seen["unshare"] == -1 and seen["own_tmpfs"] != "wrote", seen


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
    rollout = _rows(graded["rows"], "c_patcher", "14_rollout_and_flow")
    assert rollout["ex-rollout"][0] == "False", rollout
    poisoned = [p for p in (ROOT / "attnlib").rglob("*.py") if p.read_bytes().endswith(b"\n# poisoned\n")]
    assert poisoned == []  # attnlib is read-only (other work on the tree may change it meanwhile: not hashed)


#: Every forgery of the class: (student, exercise) -> the passes it tried to forge. m_runner_killer's
#: ex-tvd is its own honest answer.
FORGERIES = {(student, label) for student in ("b_forger", "c_patcher", "j_wrapper", "k_blinder", "l_overwriter")
             for label in LABELS} | {("c_patcher", "ex-rollout"), ("c_patcher", "ex-augmented-attention"),
                                     ("m_runner_killer", "ex-jsd"), ("m_runner_killer", "ex-tau")}


def test_no_forgery_passes(graded):
    passed = sorted((r["student"], r["exercise"]) for r in graded["rows"]
                    if (r["student"], r["exercise"]) in FORGERIES and r["passed"] == "True")
    assert passed == [], passed
    assert len({(r["student"], r["exercise"]) for r in graded["rows"]} & FORGERIES) == len(FORGERIES)


def test_a_wrapper_around_the_books_function_finds_nothing_to_call(graded):
    wrapper = _verdicts(graded, "j_wrapper")
    assert all(passed == "False" for passed, _ in wrapper.values()), wrapper
    assert "NameError: name 'tvd' is not defined" in wrapper["ex-tvd"][1]  # the import of tvd failed
    assert "ImportError" in wrapper["ex-jsd"][1] or "NameError" in wrapper["ex-jsd"][1], wrapper["ex-jsd"]
    assert "attnlib.metrics" in wrapper["ex-tau"][1] or "AttributeError" in wrapper["ex-tau"][1], wrapper["ex-tau"]


def test_another_librarys_reference_finds_nothing_to_call(graded):
    scipy_user = _verdicts(graded, "q_scipy")
    for label in ("ex-tau", "ex-jsd"):
        passed, message = scipy_user[label]
        assert passed == "False" and ("ModuleNotFoundError" in message or "ImportError" in message), message


def test_a_patched_kernel_and_a_lone_surrogate(graded):
    blinder = _verdicts(graded, "k_blinder")
    assert all(passed == "False" for passed, _ in blinder.values()), blinder
    assert "\\udcff" in blinder["ex-tau"][1]  # the student's message, escaped, in valid UTF-8


def test_runner_reports_forged_and_the_runner_killed_judge_nothing_unseen(graded):
    killer = _verdicts(graded, "m_runner_killer")
    assert killer["ex-tvd"] == ("True", "tvd: correct on all 7 cases.")  # its cells finished before
    for label in ("ex-jsd", "ex-tau"):
        passed, message = killer[label]
        assert passed == "False" and message.startswith("the run ended early") and "not judged" in message, message


def test_crash_cases_are_rows(graded):
    rows = graded["rows"]
    caf = [r for r in rows if r["student"] == "n_caf\\udce9"]
    assert len(caf) == 3 and all(r["message"].startswith("not a notebook") for r in caf), caf
    numbered = _verdicts(graded, "o_numbered")
    assert all(m.startswith("not a notebook") and "cell 6's source is a int" in m for _, m in numbered.values())
    formula = [r for r in rows if r["student"] == "p_formula"]
    assert [(r["chapter"], r["exercise"], r["file"]) for r in formula] == [("'=1+2", "-", "'=1+2.ipynb")]
    overwriter = _verdicts(graded, "l_overwriter")  # a daemon and a folder 1,500 deep
    assert all(passed == "False" and "not implemented yet" in m for passed, m in overwriter.values()), overwriter


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
    assert killer["ex-tvd"] == ("True", "tvd: correct on all 7 cases.")  # its cells finished before the kill
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
    assert rc == 143, err[-2000:]  # stopped by SIGTERM, as the README says ...
    assert "Traceback" not in err and "UnboundLocalError" not in err, err[-2000:]
    assert [r["student"] for r in after_stop["rows"]][:6] == ["z_resumed"] * 3 + ["a_honest"] * 3
    assert len(after_stop["rows"]) in (6, 9)  # ... with whole students only (y_partial's cut row taken out)
    assert after_stop["tmp"] == []  # ... and its temporary folders removed
    keys = [(r["student"], r["exercise"]) for r in graded["rows"]]
    assert len(keys) == len(set(keys))  # nobody graded twice
    students = sorted({r["student"] for r in graded["rows"]})
    assert students == sorted(grade.csv_text(p.name) for p in graded["folder"].iterdir())
    for student in students:
        if student not in ("z_resumed", "p_formula"):
            assert sorted(e for s, e in keys if s == student and e.startswith("ex-")) == sorted(
                LABELS + (("ex-augmented-attention", "ex-rollout") if student == "c_patcher" else ()))
    assert _rows(graded["rows"], "z_resumed", "02_measures") == {label: ("False", "graded before") for label in LABELS}
    assert all(m.startswith("not a notebook") for _, m in _rows(graded["rows"], "y_partial", "02_measures").values())
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


def _binned(values, max_attention):
    bins = np.clip(np.searchsorted(np.array([0.0, 0.25, 0.5, 0.75, 1.0]), max_attention, side="right") - 1, 0, 3)
    return np.array([np.median(values[bins == b]) if np.any(bins == b) else np.nan for b in range(4)])


def _norm_sum(attention, values, projection):
    sent = np.einsum("htd,hde->hte", values, projection)
    return np.linalg.norm(np.einsum("hqt,hte->qte", attention, sent), axis=-1)


def _relevance(attention, gradient, reverse=False, clamp=True):
    attention, gradient = np.asarray(attention), np.asarray(gradient)
    R = np.eye(attention.shape[-1])
    for a, g in zip(attention, gradient):
        mixed = (np.maximum(a * g, 0) if clamp else a * g).mean(0)
        R = R + (R @ mixed if reverse else mixed @ R)
    return R


def _first_flip(flips, lengths, shift=1.0):
    return np.where(flips.any(-1), (flips.argmax(-1) + shift) / lengths, np.nan)


def _top_words(x, k, signed=False, later=False):
    """The top-k words of one sentence: by |score| (or the signed score), ties the earlier word first (or the later)."""
    x = np.asarray(x, float)
    key = x if signed else np.abs(x)
    order = sorted(range(len(x)), key=lambda w: (-key[w], -w if later else w))
    return order[:k]


def _agreement(a, b, k, rank=False, signed=False, later=False, by_words=False, uncapped=False):
    """Krishna et al.'s feature (or rank) agreement of one sentence; the flags are plausible mistakes."""
    ta, tb = _top_words(a, k, signed, later), _top_words(b, k, signed, later)
    shared = sum(x == y for x, y in zip(ta, tb)) if rank else len(set(ta) & set(tb))
    return shared / (len(a) if by_words else k if uncapped else min(k, len(a)))


RIGHT_AND_WRONG = {
    "check_tvd": (_tvd, {"no 1/2": lambda p, q: 2 * _tvd(p, q), "unnormalised": lambda p, q: _tvd(10 * p, 10 * q)}),
    "check_jsd": (_jsd, {"log base 2": lambda p, q: _jsd(p, q, np.log2), "tvd instead": _tvd}),
    "check_kendall_tau": (_tau_b, {"0 for a constant array": lambda x, y: _tau_b(x, y, constant=0.0),
                                   "tau-a": lambda x, y: _tau_b(x, y) if len(set(x)) == len(x) and len(set(y)) == len(y)
                                   else 0.5}),
    "check_permutation": (_permute, {"rotation": _rotate, "the identity": lambda a, m, g: a.clone(),
                                     "the generator ignored": lambda a, m, g: _permute(a, m, None)}),
    "check_masked_softmax": (_softmax, {"unnormalised weights": lambda s, m: torch.exp(s - s.max()) * m,
                                        "padding included": lambda s, m: torch.softmax(s, -1)}),
    "check_first_flip_fraction": (_first_flip, {"off by one": lambda f, n: _first_flip(f, n, 0.0)}),
    "check_aopc": (lambda v: np.asarray(v).mean(-1), {"off by one (F - 1)": lambda v: np.asarray(v).sum(-1) / 4,
                                                     "one number": lambda v: np.asarray(v).mean()}),
    "check_eps_max_jsd": (lambda t, j, e: np.maximum(np.where(t <= e, j, 0.0).max(1), 0.0),
                          {"TVD < eps (the boundary dropped)": lambda t, j, e: np.maximum(
                              np.where(t < e, j, 0.0).max(1), 0.0)}),
    "check_binned_medians": (_binned, {"0 for an empty bin": lambda v, m: np.nan_to_num(_binned(v, m))}),
    "check_norm_attention": (_norm_sum, {"the heads' norms summed": lambda a, v, p: np.linalg.norm(
        np.einsum("hqt,hte->hqte", a, np.einsum("htd,hde->hte", v, p)), axis=-1).sum(0),
        "the weight alone": lambda a, v, p: np.asarray(a).sum(0)}),
    "check_relevance": (_relevance, {"no identity to start from": lambda a, g: _relevance(a, g) - np.eye(a.shape[-1]),
                                     "the product reversed": lambda a, g: _relevance(a, g, reverse=True),
                                     "without the positive part": lambda a, g: _relevance(a, g, clamp=False)}),
    "check_feature_agreement": (_agreement, {
        "top-k by signed value, not magnitude": lambda a, b, k: _agreement(a, b, k, signed=True),
        "divided by the number of words, not k": lambda a, b, k: _agreement(a, b, k, by_words=True),
        "k not capped at the sentence": lambda a, b, k: _agreement(a, b, k, uncapped=True),
        "ties broken by the later word": lambda a, b, k: _agreement(a, b, k, later=True)}),
    "check_rank_agreement": (lambda a, b, k: _agreement(a, b, k, rank=True), {
        "feature agreement instead": _agreement,
        "top-k by signed value, not magnitude": lambda a, b, k: _agreement(a, b, k, rank=True, signed=True),
        "divided by the number of words, not k": lambda a, b, k: _agreement(a, b, k, rank=True, by_words=True),
        "k not capped at the sentence": lambda a, b, k: _agreement(a, b, k, rank=True, uncapped=True),
        "ties broken by the later word": lambda a, b, k: _agreement(a, b, k, rank=True, later=True)}),
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


def test_a_folder_nested_1500_deep_is_removed(tmp_path):
    deep = tmp_path / "work"
    deep.mkdir()
    fd = os.open(deep, os.O_RDONLY)
    for _ in range(1500):  # relative to the folder above: the whole path is past PATH_MAX
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(os.open("f", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
    os.close(fd)
    os.symlink(str(tmp_path / "keep"), str(deep / "link"))  # a link is removed, never followed
    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "x").write_text("x")
    grade.remove_tree(deep)
    assert not deep.exists() and (tmp_path / "keep" / "x").read_text() == "x"


def test_the_judges_reply_is_read_strictly():
    """What comes back over the judge's pipe is data: a short reply, an array that claims more
    than was sent, a dtype of objects, are errors, never values."""
    header = {"errors": [], "missing": None, "answers": [{"kind": "value", "value": {"array": 0, "dtype": "<f8",
                                                                                     "shape": [2]}}]}
    body = json.dumps(header).encode()
    reply = grade._JUDGE_MAGIC + len(body).to_bytes(8, "big") + body + np.array([1.0, 2.0]).tobytes()
    assert grade._decode_answers(reply)["answers"][0]["value"].tolist() == [1.0, 2.0]
    with pytest.raises(ValueError):
        grade._decode_answers(reply[:-8])  # an array that claims more than was sent
    header["answers"][0]["value"]["shape"] = [10**12]  # terabytes claimed: refused before any allocation
    body = json.dumps(header).encode()
    with pytest.raises(ValueError):
        grade._decode_answers(grade._JUDGE_MAGIC + len(body).to_bytes(8, "big") + body)
    header["answers"][0]["value"].update(shape=[1], dtype="|O")
    body = json.dumps(header).encode()
    with pytest.raises((ValueError, TypeError)):
        grade._decode_answers(grade._JUDGE_MAGIC + len(body).to_bytes(8, "big") + body + b"x" * 8)
    with pytest.raises(ValueError):
        grade._decode_answers(b"tvd: correct on all 7 cases.")


def test_a_zip_bomb_in_recorded_answers_is_not_expanded(tmp_path):
    """read_answers (kept for the notebooks' own use) checks what an .npz expands to before loading it."""
    import zipfile

    exercises.record_answers("check_tvd", lambda: (lambda p, q: _tvd(p, q)), tmp_path)
    header = np.lib.format.header_data_from_array_1_0(np.zeros(1))
    header["shape"] = (2**31,)  # 16 GB of zeros, a few MB compressed
    with zipfile.ZipFile(tmp_path / "check_tvd.npz", "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("a0.npy", "w", force_zip64=True) as f:
            np.lib.format.write_array_header_1_0(f, header)
            chunk = bytes(2**24)
            for _ in range(8):  # 128 MB written, the header claims 16 GB
                f.write(chunk)
    recorded = exercises.read_answers("check_tvd", tmp_path)
    assert recorded.unreadable and "claims more" in recorded.unreadable or "expand" in recorded.unreadable


def test_csv_cells_that_look_like_formulas_are_escaped():
    assert grade.csv_text("=1+2.ipynb") == "'=1+2.ipynb"
    assert [grade.csv_text(t) for t in ("+x", "-x", "@x", "-", "ok")] == ["'+x", "'-x", "'@x", "-", "ok"]
    assert grade.csv_text(os.fsdecode(b"caf\xe9")) == "caf\\udce9"
    assert grade.csv_text("\udcff") == "\\udcff"


def _solutions() -> dict:
    """Each checker's right answer: the book's own solution, from its chapter's solution cells."""
    from test_classroom import CHAPTERS, _read, _solution_sources

    found = {}
    for path in CHAPTERS:
        nb = _read(path)
        namespace = {"np": np, "torch": torch, "pd": __import__("pandas")}
        exec("from attnlib.metrics import jsd", namespace)  # noqa: S102 - the helper Chapter 5 allows
        for source in _solution_sources(nb):
            try:
                exec(source, namespace)  # noqa: S102 - the book's own code
            except NameError:  # Chapter 7's demonstration on the chapter's results
                pass
        for ex in grade.exercises_of(nb):
            found[ex.checker] = namespace[ex.answer]
    return found


def _nudged(value, factor=1.001):
    """``value`` (an array, a tensor, a number, a tuple, a data frame) times ``factor``: off by 0.1 %."""
    import pandas as pd

    if isinstance(value, torch.Tensor):
        return value * factor
    if isinstance(value, pd.DataFrame):
        return value * factor
    if isinstance(value, (tuple, list)):
        return type(value)(_nudged(v, factor) for v in value)
    return np.asarray(value, dtype=float) * factor + (np.asarray(value) == 0) * 1e-3


def _nan_as_zero(value):
    import pandas as pd

    if isinstance(value, torch.Tensor):
        return torch.nan_to_num(value)
    if isinstance(value, pd.DataFrame):
        return value.fillna(0.0)
    return np.nan_to_num(np.asarray(value, dtype=float))


SOLUTIONS = _solutions()


@pytest.mark.parametrize("checker", sorted(exercises.SPECS))
def test_every_checker_has_a_right_answer_from_its_chapter(checker):
    spec = exercises.SPECS[checker]()
    assert exercises.judge(spec, exercises.answers_of(spec, SOLUTIONS[checker])), checker


@pytest.mark.parametrize("checker", sorted(exercises.SPECS))
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**62))
def test_on_any_seed_each_checker_passes_its_right_answer_and_fails_plausible_wrong_ones(checker, seed):
    """The grader draws each student's cases from a seed of its own: whatever the seed, the book's
    solution passes, and wrong answers fail: off by 0.1 %, NaN written as 0 (where a case's
    expected value is NaN: an empty bin, a constant array, no flip), and the checker's own
    plausible mistakes (the boundary dropped, the generator ignored, ...)."""
    spec = exercises.SPECS[checker](seed)
    right = SOLUTIONS[checker]

    def verdict(fn):
        return exercises.judge(spec, exercises.answers_of(spec, fn))

    assert verdict(right), (checker, seed, verdict(right).message)
    wrong = {"off by 0.1 %": lambda *a: _nudged(right(*a))}
    if spec.reference is not None and any(np.isnan(np.asarray(spec.to_numpy(spec.reference(*c)), float)).any()
                                          for c in spec.cases):
        wrong["NaN written as 0"] = lambda *a: _nan_as_zero(right(*a))
    if checker in RIGHT_AND_WRONG:
        wrong.update(RIGHT_AND_WRONG[checker][1])
    for what, answer in wrong.items():
        assert not verdict(answer), f"{checker} passed a wrong answer on seed {seed}: {what}"
