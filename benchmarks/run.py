"""Benchmarks: print the performance figures the book promises.

    python benchmarks/run.py                   # everything
    python benchmarks/run.py kendall           # one benchmark
    python benchmarks/run.py chapters --chapters 01 02

* ``kendall``  -- attnlib.metrics.kendall_tau batched vs a per-instance scipy.stats.kendalltau
  loop on 10,000 instances of length 30 (target: >= 10x), as a ratio measured in this run.
* every ``BENCHMARKS`` entry of a ``benchmarks/bench_*.py`` module (batched-vs-loop ratios of
  the experiments: leave-one-out, permutation, adversarial search, ``flow`` (SciPy vs networkx
  max-flow, target >= 100x), ``faithfulness`` and ``faithfulness-transformer`` (ERASER's
  metrics batched vs a per-instance loop, target >= 10x), ...).
* ``chapters`` -- the chapters executed in order with papermill in the ``book`` profile,
  starting from an empty model cache that they share (as in CI's first build): wall time and
  the kernel's peak RSS (budget: <= 4 min (a new chapter <= 3 min) and <= 1.8 GB process-tree RSS each, <= 30 min for the whole book).
  With ``--isolated`` every chapter gets its own empty cache: the time a reader pays who opens
  that chapter first (in Binder, say) and trains every model it needs. With ``--busy`` a
  pure-Python loop takes one core meanwhile (a machine shared with other work). Under each
  chapter that trained models: their count and training core-seconds (each model trains on one
  thread), and that divided by the cores, the least time training them can take there.

Ratios, not absolute times, are the targets: machines are noisy, so both sides of a ratio
are measured in the same run, interleaved, and the median of several repeats is kept.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUDGET_CHAPTER_S, BUDGET_BOOK_S, BUDGET_RSS_MB = 240, 30 * 60, 1800  # RSS: the whole process tree (Binder: ~2 GB)


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_kendall(n: int = 10_000, length: int = 30, repeats: int = 3) -> dict:
    import warnings

    import numpy as np
    import scipy.stats

    from attnlib.metrics import kendall_tau

    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, length))
    y = x + rng.normal(size=(n, length))
    kendall_tau(x[:10], y[:10])  # warm-up: torch thread pool, exact-p table

    def loop():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return [scipy.stats.kendalltau(a, b) for a, b in zip(x, y)]

    batched_s, loop_s = [], []
    for _ in range(repeats):  # interleaved, so both sides see the same machine load
        batched_s.append(_median_time(lambda: kendall_tau(x, y), 1))
        loop_s.append(_median_time(loop, 1))
    b, l_ = statistics.median(batched_s), statistics.median(loop_s)
    tau, _ = kendall_tau(x, y)
    ref = np.array([r.statistic for r in loop()])
    print(f"kendall_tau on {n:,} x {length}: batched {b:.3f} s, scipy loop {l_:.3f} s, "
          f"ratio {l_ / b:.1f}x (target >= 10x); max |diff| {np.max(np.abs(tau - ref)):.1e}")
    return {"batched_s": b, "loop_s": l_, "ratio": l_ / b}


def _peak_rss_of_tree(proc: subprocess.Popen, stop: threading.Event, out: dict) -> None:
    """Poll the process tree every 0.2 s; keep the largest RSS of any one process (the kernel)."""
    import psutil

    peak_one, peak_tree = 0, 0
    try:
        root = psutil.Process(proc.pid)
    except psutil.NoSuchProcess:
        return
    while not stop.is_set():
        try:
            procs = [root, *root.children(recursive=True)]
            rss = []
            for p in procs:
                try:
                    rss.append(p.memory_info().rss)
                except psutil.Error:
                    pass
            if rss:
                peak_one, peak_tree = max(peak_one, max(rss)), max(peak_tree, sum(rss))
        except psutil.Error:
            pass
        stop.wait(0.2)
    out["peak_one_mb"] = peak_one / 2**20
    out["peak_tree_mb"] = peak_tree / 2**20


def _training_seconds(cache: Path, since: float) -> tuple[float, int]:
    """Core-seconds the models saved into ``cache`` since ``since`` took to train (their stored
    ``train_seconds``: each trains on one thread), and how many there are."""
    from attnlib import cache as model_cache

    before = os.environ.get("ATTNLIB_CACHE_DIR")
    os.environ["ATTNLIB_CACHE_DIR"] = str(cache)
    try:
        seconds = [
            float(entry.get("train_seconds") or 0.0)
            for path in sorted((cache / "models").glob("*.pt")) if path.stat().st_mtime >= since
            for entry in [model_cache.load("models", path.stem)] if isinstance(entry, dict)
        ]
    finally:
        if before is None:
            os.environ.pop("ATTNLIB_CACHE_DIR", None)
        else:
            os.environ["ATTNLIB_CACHE_DIR"] = before
    return sum(seconds), len(seconds)


def bench_chapters(chapters: list[str] | None = None, profile: str = "book", isolated: bool = False,
                   busy: bool = False) -> list[dict]:
    busy_proc = subprocess.Popen([sys.executable, "-c", "while True:\n    pass\n"]) if busy else None
    try:
        return _bench_chapters(chapters, profile, isolated, busy)
    finally:
        if busy_proc is not None:
            busy_proc.kill()
            busy_proc.wait()


def _bench_chapters(chapters, profile: str, isolated: bool, busy: bool) -> list[dict]:
    notebooks = sorted((ROOT / "chapters").glob("[0-9]*.ipynb"))
    if chapters:
        notebooks = [nb for nb in notebooks if any(nb.name.startswith(c) for c in chapters)]
    results = []
    from attnlib import train

    cores = train.training_slots()  # how many models the chapters train at once
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "ATTNLIB_CACHE_DIR": str(Path(tmp) / "cache"), "ATTNLIB_PROFILE": profile}
        for nb in notebooks:
            if isolated:
                env["ATTNLIB_CACHE_DIR"] = str(Path(tmp) / f"cache-{nb.stem}")
            cmd = [sys.executable, str(ROOT / "tools" / "run_papermill.py"), "-k", "python3", "--cwd", str(nb.parent),
                   "--no-progress-bar", "--execution-timeout", str(BUDGET_CHAPTER_S * 5 if profile == "book" else -1), str(nb), str(Path(tmp) / nb.name), "-p", "profile", profile]
            stop, mem = threading.Event(), {}
            started_at = time.time()
            start = time.perf_counter()
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            watcher = threading.Thread(target=_peak_rss_of_tree, args=(proc, stop, mem), daemon=True)
            watcher.start()
            _, err = proc.communicate()
            wall = time.perf_counter() - start
            stop.set()
            watcher.join()
            trained, n_models = _training_seconds(Path(env["ATTNLIB_CACHE_DIR"]), started_at - 1.0)
            row = {"chapter": nb.stem, "wall_s": wall, "ok": proc.returncode == 0, "train_core_s": trained,
                   "models": n_models, **mem}
            results.append(row)
            flag = "" if row["ok"] else "  FAILED: " + err.strip().splitlines()[-1] if err.strip() else "  FAILED"
            print(f"{nb.stem:<32} {wall:7.1f} s   kernel peak RSS {mem.get('peak_one_mb', float('nan')):7.0f} MB   "
                  f"(tree {mem.get('peak_tree_mb', float('nan')):.0f} MB){flag}")
            if n_models:  # the floor two cores cannot beat without training less
                print(f"{'':<32} trained {n_models} model(s): {trained:6.1f} core-s, "
                      f"{trained / cores:.1f} s on {cores} cores at best")
    total = sum(r["wall_s"] for r in results)
    worst = max((r["wall_s"] for r in results), default=0.0)
    rss = max((r.get("peak_tree_mb", 0.0) for r in results), default=0.0)
    label = "sum (each chapter cold)" if isolated else "whole book (cold cache)"
    if busy:
        label += ", beside a busy process"
    print(f"{label:<32} {total:7.1f} s   (budgets: {BUDGET_CHAPTER_S} s per chapter, "
          f"{BUDGET_BOOK_S} s in all, {BUDGET_RSS_MB} MB)")
    print(f"slowest chapter {worst:.1f} s, largest process-tree RSS {rss:.0f} MB: "
          f"{'within' if worst <= BUDGET_CHAPTER_S and rss <= BUDGET_RSS_MB and (isolated or total <= BUDGET_BOOK_S) else 'OVER'} budget")
    return results


def _registry() -> dict:
    """kendall and chapters, plus every BENCHMARKS dict of a benchmarks/bench_*.py module."""
    import importlib.util

    import attnlib.reproducible  # noqa: F401 - first, as in the chapters: the book's pinned kernels

    found = {"kendall": bench_kendall}
    for path in sorted(Path(__file__).parent.glob("bench_*.py")):
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        found.update(getattr(module, "BENCHMARKS", {}))
    found["chapters"] = None  # last: the slowest
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("which", nargs="*", help="benchmarks to run by name (default: all; see the module docstring)")
    parser.add_argument("--chapters", nargs="*", help="chapter number prefixes, e.g. 01 02")
    parser.add_argument("--profile", default="book")
    parser.add_argument("--isolated", action="store_true", help="chapters: an empty model cache for every chapter")
    parser.add_argument("--busy", action="store_true", help="chapters: beside one busy process (a pure-Python loop)")
    args = parser.parse_args(argv)
    registry = _registry()
    known = list(registry)
    which = args.which or known
    unknown = sorted(set(which) - set(known))
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(known)}")
    print(f"machine: {os.cpu_count()} CPU cores, Python {sys.version.split()[0]}")
    for name in known:
        if name in which and registry[name] is not None:
            registry[name]()
    if "chapters" in which:
        results = bench_chapters(args.chapters, args.profile, args.isolated, args.busy)
        if not all(r["ok"] for r in results):
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
