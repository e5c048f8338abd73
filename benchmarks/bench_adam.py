"""The portable optimizer: torch's fused Adam (attnlib.portable.adam) vs its default Adam.

    .venv/bin/python benchmarks/run.py adam

torch's default CPU Adam (the foreach or single-tensor loop) takes its square root through MKL's
vendor-dispatched vector math, so an Intel and an AMD CPU parted at the first step. The fused
kernel takes the hardware's correctly rounded square root (attnlib.portable). Workload: one epoch
of the book's seed-0 BiLSTM on rt-polarity (the golden-digest recipe), one training thread, each
optimizer in turn, interleaved; the ratio default / fused is the speed-up of the portable one
(above 1: faster). Also prints each side's epoch-1 training loss.
"""
from __future__ import annotations

import statistics
import time


def _one_epoch(ds, fused: bool) -> tuple[float, float]:
    import torch

    from attnlib import portable, train

    original = portable.adam

    def default_adam(params, *, lr, amsgrad=False, weight_decay=0.0):
        return torch.optim.Adam(params, lr=lr, amsgrad=amsgrad, weight_decay=weight_decay)

    if not fused:
        portable.adam = default_adam
    try:
        start = time.perf_counter()
        trained = train.train_model(ds, encoder="lstm", epochs=1, use_cache=False, progress=False)
        return time.perf_counter() - start, trained.history[0]["train_loss"]
    finally:
        portable.adam = original


def bench_adam(repeats: int = 2) -> dict:
    from attnlib import data

    ds = data.load_dataset("rt-polarity", max_eval=60, seed=0)
    fused, default, losses = [], [], {}
    for _ in range(repeats):
        t, losses["fused"] = _one_epoch(ds, True)
        fused.append(t)
        t, losses["default"] = _one_epoch(ds, False)
        default.append(t)
    f, d = statistics.median(fused), statistics.median(default)
    print(f"one BiLSTM epoch on rt-polarity, 1 thread: fused (portable) Adam {f:.1f} s, torch's default Adam "
          f"{d:.1f} s: {d / f:.2f}x; epoch-1 loss {losses['fused']:.11f} (fused), {losses['default']:.11f} (default)",
          flush=True)
    return {"name": "adam", "fused_s": round(f, 2), "default_s": round(d, 2), "ratio": round(d / f, 2),
            "fused_loss": f"{losses['fused']:.11f}", "default_loss": f"{losses['default']:.11f}",
            "target": "portable; the ratio is reported, not a target"}


BENCHMARKS = {"adam": bench_adam}
