"""Training several models at once: :func:`attnlib.train.train_models` vs one after the other.

    .venv/bin/python benchmarks/run.py train-at-once

Every model trains on one CPU thread (``attnlib.train.TRAIN_THREADS``: the model must not depend
on the thread count), so a chapter that trains its models one by one leaves all cores but one
idle. ``train_models`` trains them on as many threads as attnlib gives torch (the CPU quota).
Workload: one epoch each of two BiLSTMs (seeds 0 and 1), a CNN and an Average encoder on
rt-polarity, as chapter 3 trains them, without the cache. Both sides must give bit-identical
models (checked). Target: >= 0.8 x the number of workers as a speed-up (>= 1.6x on 2 cores);
on one core there is nothing to gain and the ratio is about 1.
"""
from __future__ import annotations

import statistics
import time

import torch

TARGET_EFFICIENCY = 0.8


def bench_train_at_once(repeats: int = 2) -> dict:
    from attnlib import data, train

    ds = data.load_dataset("rt-polarity", seed=0)
    specs = [dict(dataset=ds, encoder=e, attention="tanh", seed=s, epochs=1, use_cache=False, progress=False)
             for e, s in (("lstm", 0), ("lstm", 1), ("cnn", 0), ("average", 0))]
    workers = train.training_slots()
    one_by_one, at_once = [], []
    for _ in range(repeats):  # interleaved
        start = time.perf_counter()
        alone = [train.train_model(**spec) for spec in specs]
        one_by_one.append(time.perf_counter() - start)
        start = time.perf_counter()
        together = train.train_models(specs, workers=workers, progress=False)
        at_once.append(time.perf_counter() - start)
        for a, b in zip(alone, together):
            sa, sb = a.model.state_dict(), b.model.state_dict()
            if not all(torch.equal(sa[k], sb[k]) for k in sa):
                raise AssertionError(f"{a.config.name}: trained at once, the model differs from training it alone")
    seq, par = statistics.median(one_by_one), statistics.median(at_once)
    ratio = seq / par
    target = max(1.0, TARGET_EFFICIENCY * workers) if workers > 1 else 0.0
    print(f"4 models, 1 epoch each on rt-polarity: one by one {seq:.1f} s, at once on {workers} threads {par:.1f} s: "
          f"{ratio:.2f}x (target >= {target:.1f}x: {'met' if ratio >= target else 'NOT met'}); models identical")
    return {"one_by_one_s": seq, "at_once_s": par, "ratio": ratio, "workers": workers, "target": target}


#: The O(T) packed BiLSTM's speed-up of a training epoch over nn.LSTM's own (1.25x measured).
PACKED_TARGET = 1.15


def bench_packed_lstm(repeats: int = 2) -> dict:
    """One BiLSTM epoch with :func:`attnlib.models.packed_lstm.packed_bilstm` against ``nn.LSTM``'s
    own packed path (ATen's composite LSTM, whose backward adds a zero-padded N x 4H gradient per
    step): the same model to the bit (checked), in less time. Target: >= 1.15x. Both run with
    ``ATTNLIB_CHAINS=0``: the O(T) path is the fallback where attnlib's portable LSTM (which the
    book trains on, ``benchmarks/run.py gemm-training``) does not apply."""
    import os
    from unittest import mock

    from attnlib import data, portable, train
    from attnlib.models import packed_lstm

    ds = data.load_dataset("rt-polarity", seed=0)
    spec = dict(dataset=ds, encoder="lstm", attention="tanh", seed=0, epochs=1, use_cache=False, progress=False)
    ours, theirs = [], []
    with mock.patch.dict(os.environ, {portable.CHAINS_ENV: "0"}):
        for _ in range(repeats):  # interleaved
            with mock.patch.object(packed_lstm, "applies", return_value=False):
                start = time.perf_counter()
                plain = train.train_model(**spec)
                theirs.append(time.perf_counter() - start)
            start = time.perf_counter()
            fast = train.train_model(**spec)
            ours.append(time.perf_counter() - start)
            sa, sb = plain.model.state_dict(), fast.model.state_dict()
            if not all(torch.equal(sa[k], sb[k]) for k in sa):
                raise AssertionError("the packed BiLSTM trained another model than nn.LSTM")
    slow, quick = statistics.median(theirs), statistics.median(ours)
    ratio = slow / quick
    print(f"BiLSTM on rt-polarity, 1 epoch: nn.LSTM {slow:.1f} s, packed_bilstm {quick:.1f} s: {ratio:.2f}x "
          f"(target >= {PACKED_TARGET}x: {'met' if ratio >= PACKED_TARGET else 'NOT met'}); models identical")
    return {"nn_lstm_s": slow, "packed_s": quick, "ratio": ratio, "target": PACKED_TARGET}


BENCHMARKS = {"train-at-once": bench_train_at_once, "packed-lstm": bench_packed_lstm}
