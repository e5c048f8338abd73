"""K training seeds of one recipe against one: what the seeds of "Honest numbers" cost.

    .venv/bin/python benchmarks/run.py k-seeds

Workload: J&W's BiLSTM + tanh on rt-polarity, one epoch, without the cache: seed 0 alone, then
seeds 0..K-1 (K = 5) through :func:`attnlib.train.train_models`, which trains as many at once as
attnlib gives torch threads (each model on one thread, so every seed is the model it would be
alone; checked for seed 0). Target (issue "A book that computes in half the time"): K seeds
cost <= 1.5x one seed.

It also prints the floor that batching the K seeds into one tensor program (stacked weights,
batched matmuls) could not go below on this machine, measured in the same run:

* the seconds one seed's epoch spends in matrix products (``aten::mm``, ``addmm``, ``bmm``,
  ...: the self time of torch's profiler over one profiled epoch);
* how much faster per floating-point operation K stacked products run through one ``bmm``
  than one product alone, at the BiLSTM's recurrent shape (batch 32 x 128 -> 512), under the
  book's pinned kernels (MKL's COMPATIBLE branch);
* a batched program still does K seeds' products, K / cores of them per core at best (its
  ``bmm`` split over the cores, each product on one thread): the floor is
  K / cores x (product seconds / bmm gain) / one seed's seconds, as if every other op (the
  gates, the softmax, the optimiser, Python) cost nothing.

Seeds trained side by side (what attnlib does) cost at least K / cores = 2.5x one seed on 2
cores.
"""
from __future__ import annotations

import time

import torch

K = 5
TARGET = 1.5
#: the matrix-product ops whose self time the floor counts
GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm", "aten::_addmm_activation")


def _gemm_seconds(spec) -> float:
    """Self seconds in matrix products over one profiled epoch of seed 0 (one thread, as trained)."""
    from torch.profiler import ProfilerActivity, profile

    from attnlib import train

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        train.train_model(seed=0, **spec)
    return sum(e.self_cpu_time_total for e in prof.key_averages() if e.key in GEMM_OPS) / 1e6


def _bmm_gain(k: int, batch: int = 32, hidden: int = 128, repeats: int = 400) -> float:
    """Floating-point operations per second of K products in one bmm over one product alone (one thread)."""
    from attnlib import train

    with train.training_threads("cpu"):
        a, w = torch.randn(batch, hidden), torch.randn(hidden, 4 * hidden)
        stacked_a, stacked_w = torch.randn(k, batch, hidden), torch.randn(k, hidden, 4 * hidden)

        def rate(fn, products: int) -> float:
            fn()
            start = time.perf_counter()
            for _ in range(repeats):
                fn()
            return products * repeats / (time.perf_counter() - start)

        return rate(lambda: torch.bmm(stacked_a, stacked_w), k) / rate(lambda: a @ w, 1)


def bench_k_seeds(k: int = K) -> dict:
    from attnlib import data, train

    ds = data.load_dataset("rt-polarity", seed=0)
    spec = dict(dataset=ds, encoder="lstm", attention="tanh", epochs=1, use_cache=False, progress=False)
    start = time.perf_counter()
    alone = train.train_model(seed=0, **spec)
    one = time.perf_counter() - start
    start = time.perf_counter()
    together = train.train_models([dict(seed=s, **spec) for s in range(k)], progress=False)
    many = time.perf_counter() - start
    sa, sb = alone.model.state_dict(), together[0].model.state_dict()
    if not all(torch.equal(sa[name], sb[name]) for name in sa):
        raise AssertionError("seed 0 trained beside other seeds differs from seed 0 trained alone")
    ratio = many / one
    cores = train.training_slots()
    print(f"BiLSTM on rt-polarity, 1 epoch: 1 seed {one:.1f} s, {k} seeds {many:.1f} s on "
          f"{cores} thread(s): {ratio:.2f}x one seed "
          f"(target <= {TARGET}x: {'met' if ratio <= TARGET else 'NOT met'}); seed 0 identical either way")
    gemm, gain = _gemm_seconds(spec), _bmm_gain(k)
    floor = k / cores * gemm / gain / one
    print(f"  one seed spends {gemm:.1f} s of its {one:.1f} s in matrix products ({gemm / one:.0%}); "
          f"{k} products in one bmm run {gain:.2f}x faster per flop than one alone: "
          f"batching the {k} seeds could not go below {floor:.2f}x one seed on {cores} core(s) "
          f"were everything else free (side by side: at least {k / cores:.2f}x)")
    return {"one_s": one, "k_s": many, "k": k, "ratio": ratio, "target": TARGET, "gemm_s": gemm,
            "bmm_gain": gain, "batched_floor": floor}


BENCHMARKS = {"k-seeds": bench_k_seeds}
