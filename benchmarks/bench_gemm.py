"""The price of portable GEMMs: MKL's reproducible branch (torch) vs numpy's pinned OpenBLAS.

    .venv/bin/python benchmarks/run.py gemm

attnlib pins MKL to ``MKL_CBWR=COMPATIBLE,STRICT`` (attnlib.cpu): the branch Intel documents as
giving the same bits on Intel and AMD, and the one the cross-CPU kit found identical on both. It
runs SSE2 code. numpy's and SciPy's OpenBLAS is pinned too, to its AVX2 + FMA ``Haswell``
kernels on one thread, whose blocking sizes are compile-time constants for that core type (no
cache-size probe), so the same instructions run in the same order on any AVX2 CPU.

Workload: float32 products at the shapes the book's models multiply (the BiLSTM's gates, the
small transformer's projections and FFN, MiniLM's, and the kit's k = 256 shapes), one thread,
each library in turn, interleaved; the median of several repeats. The ratio MKL / OpenBLAS is
what leaving MKL would save on the GEMMs (above 1: OpenBLAS faster). It also prints a SHA-256
of each library's products of seeded inputs (numpy's PCG64, the same on every machine), to
compare across CPUs. Neither library gives a row the same bits in every split of its batch (MKL
does at splits that are multiples of 8), so the book's fixed chunking stays what fixes them.
"""
from __future__ import annotations

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

    from attnlib import cpu

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

        mkl(), openblas()  # warm up
        t_mkl, t_blas = [], []
        for _ in range(repeats):
            start = time.perf_counter()
            mkl()
            t_mkl.append(time.perf_counter() - start)
            start = time.perf_counter()
            openblas()
            t_blas.append(time.perf_counter() - start)
        with torch.no_grad():
            mkl_products = [torch.mm(a, b).numpy() for a, b in tensors]
    finally:
        torch.set_num_threads(before)
    blas_products = [np.matmul(a, b) for a, b in pairs]
    same = sum(np.array_equal(x, y) for x, y in zip(mkl_products, blas_products))
    m, o = statistics.median(t_mkl), statistics.median(t_blas)
    flops = 2 * inner * sum(m_ * k * n for m_, k, n in SHAPES)
    print(f"float32 GEMMs at the book's shapes, 1 thread: MKL ({status.mkl_branch}) {m * 1e3:.0f} ms "
          f"({flops / m / 1e9:.0f} GFLOP/s), OpenBLAS ({status.blas}) {o * 1e3:.0f} ms ({flops / o / 1e9:.0f} GFLOP/s): "
          f"{m / o:.2f}x", flush=True)
    print(f"  digests: MKL {_digest(mkl_products)[:16]}…, OpenBLAS {_digest(blas_products)[:16]}…; "
          f"the same bits in {same} of {len(SHAPES)} shapes",
          flush=True)
    return {"name": "gemm", "mkl_s": round(m, 3), "openblas_s": round(o, 3), "ratio": round(m / o, 2),
            "mkl_branch": status.mkl_branch, "blas": status.blas, "mkl_digest": _digest(mkl_products),
            "openblas_digest": _digest(blas_products),
            "target": "a measurement for the choice of GEMM library; the ratio is reported, not a target"}


BENCHMARKS = {"gemm": bench_gemm}
