"""Benchmark: the grader's time per notebook, judging apart against the old design, in one run.

    python benchmarks/run.py grading

Three hand-ins, each graded alone by ``tools/grade.py`` (start to CSV, the sandbox's one-off probe
included): a solved Chapter 2 and an unsolved one (three exercises each), a solved Chapter 14
(two exercises whose judges import torch). Two designs, timed interleaved, median of the repeats:

* **judged apart** (the grader as it is): the notebook runs for feedback only; each exercise is
  judged in a fresh sandboxed process, on cases drawn after the notebook ended;
* **recorded in the kernel** (the design before issue 50, commit ``OLD_DESIGN``'s parent, checked
  out in a temporary git worktree): the answers were recorded inside the student's own kernel,
  which is why a notebook could forge them.

It writes ``benchmarks/grading_times.md`` (the figures the README and ``docs/grading.md`` point
to) and prints the ratio. The price of judging apart is starting Python and importing what each
judge needs once per exercise; a ratio, not a target.
"""
from __future__ import annotations

import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The commit that moved judging out of the kernel: its parent is the old design.
OLD_DESIGN = "05b490a"
CASES = (("solved", "02_measures"), ("unsolved", "02_measures"), ("solved", "14_rollout_and_flow"))
OUT = ROOT / "benchmarks" / "grading_times.md"


def _old_worktree(into: Path) -> Path | None:
    """The old design checked out at ``into`` (with this checkout's compiled kernel), or None without git history."""
    done = subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(into), f"{OLD_DESIGN}^"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        print(f"grading: the old design is not in this checkout's history ({done.stderr.strip()[-200:]})")
        return None
    for ext in (ROOT / "attnlib").glob("_*.so"):
        shutil.copy(ext, into / "attnlib" / ext.name)
    return into


def _hand_in(root: Path, kind: str, chapter: str, folder: Path) -> Path:
    """A class folder with one student's ``kind`` hand-in of ``chapter``, made by ``root``'s own tests."""
    code = ("import json, sys; sys.path.insert(0, 'tests'); import test_classroom as tc; "
            f"nb = tc.{kind}(__import__('pathlib').Path('chapters/{chapter}.ipynb')); "
            f"open({str(folder / 'nb.ipynb')!r}, 'w', encoding='utf-8').write(json.dumps(nb))")
    student = folder / "class" / "student"
    student.mkdir(parents=True)
    subprocess.run([sys.executable, "-c", code], cwd=root, check=True, env={**os.environ, "PYTHONPATH": str(root)})
    (folder / "nb.ipynb").rename(student / f"{chapter}.ipynb")
    return folder / "class"


def _grade_once(root: Path, hand_in: Path, out: Path) -> float:
    out.unlink(missing_ok=True)
    start = time.perf_counter()
    subprocess.run([sys.executable, str(root / "tools" / "grade.py"), str(hand_in), "--out", str(out)], check=True,
                   capture_output=True, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    seconds = time.perf_counter() - start
    if len(out.read_text(encoding="utf-8").splitlines()) < 2:
        raise RuntimeError(f"{root}: no row for {hand_in}")
    return seconds


def bench_grading(repeats: int = 3, write: bool = True) -> dict:
    with tempfile.TemporaryDirectory(prefix="attnlib-bench-grading-") as tmp:
        designs = {"judged apart": ROOT}
        old = _old_worktree(Path(tmp, "old"))
        if old is not None:
            designs["recorded in the kernel"] = old
        try:
            times = {(d, c): [] for d in designs for c in CASES}
            hand_ins = {(d, c): _hand_in(root, *c, Path(tmp, f"{i}-{j}"))
                        for i, (d, root) in enumerate(designs.items()) for j, c in enumerate(CASES)}
            for _ in range(repeats):
                for case in CASES:
                    for design, root in designs.items():  # interleaved: both designs see the same machine
                        times[design, case].append(_grade_once(root, hand_ins[design, case], Path(tmp, "out.csv")))
        finally:
            if old is not None:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], capture_output=True)
    medians = {key: statistics.median(value) for key, value in times.items()}
    rows = []
    for case in CASES:
        new = medians["judged apart", case]
        before = medians.get(("recorded in the kernel", case))
        ratio = f"{new / before:.2f}" if before else "n/a"
        rows.append(f"| {case[0]} Chapter {int(case[1][:2])} | {new:.1f} s | "
                    f"{f'{before:.1f} s' if before else 'n/a'} | {ratio} |")
        print(f"grading {case[0]} {case[1]}: judged apart {new:.1f} s, "
              f"recorded in the kernel {f'{before:.1f} s' if before else 'n/a'} (x{ratio})")
    if write:
        text = "\n".join([
            "# Grading time per notebook",
            "",
            f"Written by `python benchmarks/run.py grading` on {datetime.date.today().isoformat()}, "
            f"{os.cpu_count()} CPU cores; each hand-in graded alone by `tools/grade.py`, start to CSV, "
            f"median of {repeats} runs, the two designs interleaved. Measure it idle: it is a wall time.",
            "",
            "| hand-in | judged apart (now) | recorded in the kernel (before issue 50) | ratio |",
            "|---|---|---|---|",
            *rows,
            "",
        ])
        tmp_out = OUT.with_suffix(".tmp")
        tmp_out.write_text(text, encoding="utf-8")
        os.replace(tmp_out, OUT)
    return {"medians": {f"{d}|{c[0]}|{c[1]}": round(v, 2) for (d, c), v in medians.items()}}


BENCHMARKS = {"grading": bench_grading}

if __name__ == "__main__":
    print(json.dumps(bench_grading(), indent=1))
