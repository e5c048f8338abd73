"""Thread contention: chapter 3's gradients + leave-one-out and chapter 5's adversary, idle and
beside one busy process, under attnlib's thread rule and under torch's defaults.

    python benchmarks/run.py contention

Each measurement is a fresh Python process (the thread rule and OpenMP's wait policy are
fixed at import), so the two rules are compared as a reader's kernel would see them:

* ``attnlib``: what importing attnlib does (:mod:`attnlib.cpu`): threads = the cores the
  process may use (cgroup quota, affinity, visible cores), OpenMP spins briefly before sleeping;
* ``torch defaults``: torch imported before attnlib (so OpenMP keeps its spinning wait) and
  as many threads as visible cores, which is what the book did before the rule.

The busy process is one pure-Python loop (one core's worth of load). Target: the attnlib rule
is at most 1.3x slower beside it than idle. Times are medians of ``repeats`` runs, the idle
and loaded runs interleaved.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

_WORKER = r"""
import os, sys, time
if os.environ.get("BENCH_TORCH_DEFAULTS"):
    import torch  # before attnlib: OpenMP keeps its default (long spinning) wait
    torch.set_num_threads(os.cpu_count())
import attnlib.reproducible
from attnlib import counterfactual, cpu, data, importance, train
import torch
if os.environ.get("BENCH_TORCH_DEFAULTS"):
    torch.set_num_threads(os.cpu_count())
ds = data.load_dataset("rt-polarity", seed=0)
model = train.train_model(ds, encoder="lstm", seed=0, progress=False).model
work = sys.argv[1]
n = int(sys.argv[2])
start = time.perf_counter()
if work == "loo":
    importance.importance(model, ds.test, max_instances=n, seed=0)
else:
    counterfactual.adversarial_attention(model, ds.test, eps=0.01, k=5, steps=100, max_instances=n, seed=0)
print(time.perf_counter() - start, torch.get_num_threads())
"""

_BUSY = "while True:\n    pass\n"


def _run(work: str, n: int, torch_defaults: bool) -> tuple[float, int]:
    env = dict(os.environ)
    for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT"):
        env.pop(name, None)  # as a fresh shell: only attnlib's own import may set them
    if torch_defaults:
        env["BENCH_TORCH_DEFAULTS"] = "1"
    out = subprocess.run([sys.executable, "-c", _WORKER, work, str(n)], env=env, capture_output=True,
                         text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    seconds, threads = out.stdout.split()[-2:]
    return float(seconds), int(threads)


def bench_contention(repeats: int = 3) -> dict:
    # train (or load) the BiLSTM once, outside the timed runs
    subprocess.run([sys.executable, "-c", "import attnlib.reproducible; from attnlib import data, train; "
                    "train.train_model(data.load_dataset('rt-polarity', seed=0), encoder='lstm', seed=0, progress=False)"],
                   check=True, timeout=1800)
    results = {}
    for work, n in (("loo", 300), ("adversary", 300)):
        for rule, torch_defaults in (("attnlib", False), ("torch defaults", True)):
            idle, loaded, threads = [], [], 0
            for _ in range(repeats):
                seconds, threads = _run(work, n, torch_defaults)
                idle.append(seconds)
                busy = subprocess.Popen([sys.executable, "-c", _BUSY])
                try:
                    time.sleep(0.5)
                    loaded.append(_run(work, n, torch_defaults)[0])
                finally:
                    busy.kill()
                    busy.wait()
            i, l_ = statistics.median(idle), statistics.median(loaded)
            label = "ch03 gradients + LOO" if work == "loo" else "ch05 adversary (100 steps)"
            target = " (target <= 1.3x)" if rule == "attnlib" else ""
            print(f"{label}, {n} sentences, {rule} ({threads} threads): idle {i:.2f} s, "
                  f"beside a busy process {l_:.2f} s, ratio {l_ / i:.2f}x{target}")
            results[(work, rule)] = {"idle_s": i, "loaded_s": l_, "ratio": l_ / i, "threads": threads}
    return results


BENCHMARKS = {"contention": bench_contention}
