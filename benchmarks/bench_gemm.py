"""The price of portable GEMMs: MKL's reproducible branch (torch) vs numpy's pinned OpenBLAS.

    .venv/bin/python benchmarks/run.py gemm

attnlib pins MKL to ``MKL_CBWR=COMPATIBLE,STRICT`` (attnlib.cpu): the branch Intel documents as
giving the same bits on Intel and AMD, and the one the cross-CPU kit found identical on both. It
runs SSE2 code. numpy's and SciPy's OpenBLAS is pinned too, to its AVX2 + FMA ``Haswell``
kernels on one thread, whose blocking sizes are compile-time constants for that core type (no
cache-size probe), so the same instructions run in the same order on any AVX2 CPU.

Workload: float32 products at the shapes the book's models multiply (the BiLSTM's gates, the
small transformer's projections and FFN, MiniLM's, and the kit's k = 256 shapes), one thread,
each library in turn, interleaved; the median of several repeats; and attnlib's own fma-chain
kernel (:func:`attnlib.portable.matmul`, which the small transformer uses), portable by
construction. The ratio MKL / OpenBLAS is what leaving MKL would save on the GEMMs (above 1:
OpenBLAS faster). It also prints a SHA-256
of each library's products of seeded inputs (numpy's PCG64, the same on every machine), to
compare across CPUs. Neither library gives a row the same bits in every split of its batch (MKL
does at splits that are multiples of 8), so the book's fixed chunking stays what fixes them.

    .venv/bin/python benchmarks/run.py gemm-training

End to end: one training epoch of the small transformer (whose products are attnlib's chains)
and of J&W's BiLSTM (whose recurrence is attnlib's portable LSTM), as the book trains them and
with ``ATTNLIB_CHAINS=0`` (torch's kernels: MKL's pinned branch, ATen's LSTM), one thread,
interleaved.

    .venv/bin/python benchmarks/run.py gemm-gate

Digests to compare between an Intel and an AMD CPU, with the same wheels on both: OpenBLAS's and
attnlib's chains' products of the seeded inputs, and the state dict after one epoch of the
golden-digest recipe (J&W's BiLSTM, seed 0, rt-polarity) and of the small transformer, as the
book trains them. Equal lines on both CPUs pass; the CPU and attnlib's kernel status are printed
beside them.
"""
from __future__ import annotations

import contextlib
import hashlib
import statistics
import time

#: (m, k, n): rows x inner x columns, as the book's models multiply them.
SHAPES = (
    (2048, 50, 512),     # BiLSTM: embeddings -> gates (B*T x E x 4H), one direction
    (64, 128, 512),      # BiLSTM: one step's recurrent product
    (2560, 128, 384),    # small transformer: Q, K, V of 64 sentences x 40 tokens
    (2560, 128, 512),    # small transformer: FFN up
    (2560, 512, 128),    # small transformer: FFN down
    (1000, 384, 1536),   # MiniLM: FFN up
    (32, 256, 128),      # the kit's k = 256 shapes (MKL's AVX2 branch differed there on AMD)
    (837, 256, 128),
)


def _inputs(seed: int = 0) -> list:
    import numpy as np

    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32))
            for m, k, n in SHAPES]


def _digest(products) -> str:
    h = hashlib.sha256()
    for p in products:
        h.update(p.tobytes())
    return h.hexdigest()


def bench_gemm(repeats: int = 5, inner: int = 5) -> dict:
    import numpy as np
    import torch

    from attnlib import cpu, portable

    status = cpu.status()
    pairs = _inputs()
    tensors = [(torch.from_numpy(a), torch.from_numpy(b)) for a, b in pairs]
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        def mkl():
            for _ in range(inner):
                for a, b in tensors:
                    torch.mm(a, b)

        def openblas():
            for _ in range(inner):
                for a, b in pairs:
                    np.matmul(a, b)

        def chains():
            for _ in range(inner):
                for a, b in tensors:
                    portable.matmul(a, b)

        sides = {"MKL": mkl, "OpenBLAS": openblas, "chains": chains}
        times = {name: [] for name in sides}
        for round_ in range(repeats + 1):  # interleaved; round 0 warms up
            for name, fn in sides.items():
                start = time.perf_counter()
                fn()
                if round_:
                    times[name].append(time.perf_counter() - start)
        with torch.no_grad():
            mkl_products = [torch.mm(a, b).numpy() for a, b in tensors]
            chain_products = [portable.matmul(a, b).numpy() for a, b in tensors]
    finally:
        torch.set_num_threads(before)
    blas_products = [np.matmul(a, b) for a, b in pairs]
    same = sum(np.array_equal(x, y) for x, y in zip(mkl_products, blas_products))
    m, o = statistics.median(times["MKL"]), statistics.median(times["OpenBLAS"])
    flops = 2 * inner * sum(m_ * k * n for m_, k, n in SHAPES)
    print(f"float32 GEMMs at the book's shapes, 1 thread: MKL ({status.mkl_branch}) {m * 1e3:.0f} ms "
          f"({flops / m / 1e9:.0f} GFLOP/s), OpenBLAS ({status.blas}) {o * 1e3:.0f} ms ({flops / o / 1e9:.0f} GFLOP/s): "
          f"{m / o:.2f}x", flush=True)
    c = statistics.median(times["chains"])
    print(f"  attnlib's fma chains ({portable.gemm_kernel()}) {c * 1e3:.0f} ms ({flops / c / 1e9:.0f} GFLOP/s): "
          f"{m / c:.2f}x MKL's pinned branch", flush=True)
    print(f"  digests: MKL {_digest(mkl_products)[:16]}…, OpenBLAS {_digest(blas_products)[:16]}…, "
          f"chains {_digest(chain_products)[:16]}…; MKL and OpenBLAS give the same bits in {same} of "
          f"{len(SHAPES)} shapes", flush=True)
    return {"name": "gemm", "mkl_s": round(m, 3), "openblas_s": round(o, 3), "ratio": round(m / o, 2),
            "chains_s": round(c, 3), "chains_ratio": round(m / c, 2), "chains_digest": _digest(chain_products),
            "mkl_branch": status.mkl_branch, "blas": status.blas, "mkl_digest": _digest(mkl_products),
            "openblas_digest": _digest(blas_products),
            "target": "a measurement for the choice of GEMM library; the ratio is reported, not a target"}


@contextlib.contextmanager
def _torch_products():
    """attnlib's products on torch's kernels (MKL's pinned branch): ``ATTNLIB_CHAINS=0``."""
    import os

    from attnlib import portable

    before = os.environ.get(portable.CHAINS_ENV)
    os.environ[portable.CHAINS_ENV] = "0"
    try:
        yield
    finally:
        if before is None:
            del os.environ[portable.CHAINS_ENV]
        else:
            os.environ[portable.CHAINS_ENV] = before


def bench_gemm_training(repeats: int = 2) -> dict:
    from attnlib import data, train
    from attnlib.models import TransformerConfig

    ds = data.load_dataset("rt-polarity", max_eval=60, seed=0)
    # (recipe, its products on MKL, its products as chains): both run chains as the book trains
    # them (the BiLSTM's recurrence on attnlib's portable LSTM), and torch's kernels beside them
    recipes = {"transformer": (dict(config=TransformerConfig(layers=4, heads=4, head_dim=32)), _torch_products,
                               contextlib.nullcontext),
               "BiLSTM": (dict(encoder="lstm"), _torch_products, contextlib.nullcontext)}
    times: dict = {}
    for _ in range(repeats):
        for name, (recipe, mkl, chains) in recipes.items():
            for side, context in (("MKL", mkl), ("chains", chains)):
                with context():
                    start = time.perf_counter()
                    train.train_model(ds, **recipe, epochs=1, use_cache=False, progress=False)
                    times.setdefault((name, side), []).append(time.perf_counter() - start)
    out = {"name": "gemm-training"}
    for name in recipes:
        m, c = statistics.median(times[(name, "MKL")]), statistics.median(times[(name, "chains")])
        print(f"one {name} epoch on rt-polarity, 1 thread: products on MKL's pinned branch {m:.1f} s, "
              f"as attnlib's fma chains {c:.1f} s: {m / c:.2f}x", flush=True)
        out[f"{name}_ratio"] = round(m / c, 2)
    out["target"] = "a measurement for the choice of GEMM kernel; the ratios are reported, not targets"
    return out


def bench_gemm_gate() -> dict:
    import platform

    import numpy as np
    import torch

    from attnlib import cpu, data, portable, train
    from attnlib.models import TransformerConfig

    cpu_name = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                    platform.processor())
    print(f"{cpu_name}; {cpu.status()}; numpy {np.__version__}", flush=True)
    products = _digest([np.matmul(a, b) for a, b in _inputs()])
    print(f"OpenBLAS products of the seeded inputs: {products}", flush=True)
    chains = _digest([portable.matmul(torch.from_numpy(a), torch.from_numpy(b)).numpy() for a, b in _inputs()])
    print(f"attnlib's fma chains ({portable.gemm_kernel()}) of the same inputs: {chains}", flush=True)
    ds = data.load_dataset("rt-polarity", max_eval=60, seed=0)  # the golden-digest recipe's data
    out = {"name": "gemm-gate", "cpu": cpu_name, "products": products, "chains": chains}
    for name, recipe in (("BiLSTM", dict(encoder="lstm")),
                         ("transformer", dict(config=TransformerConfig(layers=4, heads=4, head_dim=32)))):
        trained = train.train_model(ds, **recipe, epochs=1, use_cache=False, progress=False)
        h = hashlib.sha256()
        for value in trained.model.state_dict().values():
            h.update(value.numpy().tobytes())
        loss = trained.history[0]["train_loss"]
        print(f"one {name} epoch as the book trains it: {h.hexdigest()} (epoch-1 loss {loss:.11f})", flush=True)
        out[name] = h.hexdigest()
    out["target"] = "equal digests on an Intel and an AMD CPU (the chains and the models: the same wheels on both)"
    return out


BENCHMARKS = {"gemm": bench_gemm, "gemm-training": bench_gemm_training, "gemm-gate": bench_gemm_gate}
