"""Benchmark of attnlib.erasure: batched ranked removal vs a per-instance loop (Serrano & Smith 2019).

    .venv/bin/python benchmarks/run.py erasure

Ranked removal with all four rankings (attention, random, gradient, attention x gradient)
on the whole rt-polarity test split. The headline compares the erasure stage with the
hidden states h computed beforehand (the encoder runs once per sentence on both sides,
so it is the same cost everywhere):

* batched -- the core of :func:`attnlib.erasure.ranked_removal`: per length bucket (the
  library's, ~256 sentences), one decode with gradient for y-hat and d y-hat / d alpha,
  the four rankings as one sort, and every prefix k = 1 .. T - 1 of every ranking of
  every sentence in ONE ``model.decode`` call with attention (n, 4 (T - 1), T).
* per-instance loop -- the same algorithm one sentence at a time, vectorised within the
  sentence: per sentence one decode with gradient (y-hat and d y-hat / d alpha), then per
  ranking one sort and ONE decode of all its T - 1 prefixes, (1, T - 1, T); so 5 decodes
  and one backward per sentence (4,210 decodes for 842 sentences). Same random keys as
  the library (per sentence), so both sides must find identical flip points (checked).

Also printed: the same end to end (public function vs the loop with one encoder call per
sentence), and, run once, the plainest loop: one decode per removal count k of each
sentence and ranking, stopping at the first flip (as one would write it from the paper).
Target: >= 10x for the headline. Model: BiLSTM + tanh attention trained on rt-polarity
with J&W's recipe, cached after the first run (training takes a few minutes on 2 cores).
Sides are interleaved, on one torch thread by default, and the median of the repeats is kept.
"""
from __future__ import annotations

import statistics
import time

import numpy as np
import torch

TARGET_RATIO = 10.0


def _model_and_data():
    from attnlib import data, train

    ds = data.load_dataset("rt-polarity")
    model = train.train_model(ds, encoder="lstm", attention="tanh", progress=False).model.cpu().eval()
    return ds, model


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


# ----------------------------------------------------------------------------- the two sides
def batched_stage(model, buckets, rankings, seed: int = 0) -> list[torch.Tensor]:
    """The library's core per length bucket, h given: tokens erased at the first flip (n, R), 0 = none."""
    from attnlib import erasure as er
    from attnlib.models import ONLY_SITE, SiteState

    out = []
    for sub, encoded, alpha in buckets:
        state = SiteState(alpha, encoded.mask, ONLY_SITE, encoded)
        y_hat, scores = er._ranking_scores(model, state, sub.index, rankings, seed)
        ranks = er._ranks(scores, encoded.mask)
        out.append(er._first_flips(model, state, y_hat, ranks))
    return out


def _one_instance(model, hidden, alpha, index, rankings, seed: int, per_k: bool = False) -> list[int]:
    """Ranked removal of ONE sentence given h (1, n, H) and alpha (1, n) over its real tokens only.

    Returns, per ranking, the tokens erased at the first flip (0 = never). ``per_k=False``:
    one decode of all n - 1 prefixes of a ranking; ``per_k=True``: one decode per k,
    stopping at the first flip.
    """
    from attnlib import _runs
    from attnlib import erasure as er

    n = alpha.shape[1]
    with torch.enable_grad():
        a = alpha.detach().requires_grad_(True)
        probs, _ = model.decode(hidden, a)
        predicted = int(probs.argmax(-1))
        (grad,) = torch.autograd.grad(probs[0, predicted], a)
    out = []
    for name in rankings:
        if name == "attention":
            score = alpha[0].double()
        elif name == "random":  # the library's key for this sentence; its real tokens sit at padded positions 1..n
            score = runs.instance_uniform(seed, er._STREAM_RANKING, index, n + 1)[0, 1:]
        elif name == "gradient":
            score = grad[0].double()
        else:
            score = (alpha * grad)[0].double()
        order = torch.sort(-score, stable=True).indices  # erasure order
        if per_k:
            first = 0
            for k in range(1, n):
                kept = alpha.clone()
                kept[0, order[:k]] = 0.0
                total = kept.sum()
                if total <= 0:
                    break
                p, _ = model.decode(hidden, kept / total)
                if int(p.argmax(-1)) != predicted:
                    first = k
                    break
            out.append(first)
            continue
        ranks = torch.empty_like(order)
        ranks[order] = torch.arange(n)
        k = torch.arange(1, n)
        remove = ranks[None, :] < k[:, None]  # (n - 1, n)
        kept = alpha.masked_fill(remove, 0.0)  # (n - 1, n)
        total = kept.sum(-1, keepdim=True)
        p, _ = model.decode(hidden, (kept / torch.where(total > 0, total, torch.ones_like(total)))[None])
        flips = (p[0].argmax(-1) != predicted) & (total[:, 0] > 0)
        out.append(int(flips.to(torch.int8).argmax()) + 1 if bool(flips.any()) else 0)
    return out


def loop_stage(model, instances, rankings, seed: int = 0, per_k: bool = False) -> np.ndarray:
    """One sentence at a time (see :func:`_one_instance`), h given: (N, R) in ``instances`` order."""
    return np.array([_one_instance(model, h, a, idx, rankings, seed, per_k) for h, a, idx in instances])


def _per_instance_inputs(model, split, indices):
    """(h, alpha, index) per sentence over its real tokens only, each sentence encoded on its own."""
    out = []
    for i in indices:
        batch = split.batch([i])
        encoded = model.encode(batch)
        alpha = model.attend(encoded)
        n = int(encoded.mask.sum())
        out.append((encoded.hidden[:, 1 : n + 1], alpha[:, 1 : n + 1], batch.index))
    return out


def bench_erasure(repeats: int = 3, threads: int | None = 1) -> dict:
    from attnlib import _runs
    from attnlib import erasure as er

    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        ds, model = _model_and_data()
        split = ds.test
        rankings = er.RANKINGS
        R = len(rankings)
        indices = np.flatnonzero(split.lengths() >= 2)
        n = len(indices)
        with torch.no_grad():
            batch = split.batch(indices)
            lengths = batch.lengths.numpy()
            H = model.config.hidden_size
            chunks = runs.chunks(lengths, er._RANKED_ROWS, lambda T: T * (H + 3 * R * T), er._BUDGET, None)
            buckets = []
            for rows in chunks:
                sub = runs.take(batch, rows)
                encoded = model.encode(sub)
                buckets.append((sub, encoded, model.attend(encoded)))
            order = np.concatenate(chunks)
            instances = []  # each sentence's h and alpha over its real tokens, cut from the buckets
            for sub, encoded, alpha in buckets:
                for j, L in enumerate((sub.lengths - 2).tolist()):
                    h, a = encoded.hidden[j : j + 1, 1 : L + 1], alpha[j : j + 1, 1 : L + 1]
                    instances.append((h, a, sub.index[j : j + 1]))

            # warm-up, and the check that both sides find the same flip points
            fast = torch.cat(batched_stage(model, buckets, rankings)).numpy()
            slow = loop_stage(model, instances, rankings)
            mismatches = int((fast != slow).any(1).sum())
            public = er.ranked_removal(model, split)
            assert np.array_equal(public.indices, indices)

            sides = {
                "stage batched": lambda: batched_stage(model, buckets, rankings),
                "stage loop": lambda: loop_stage(model, instances, rankings),
                "e2e batched": lambda: er.ranked_removal(model, split),
                "e2e loop": lambda: loop_stage(model, _per_instance_inputs(model, split, indices), rankings),
            }
            times = {k: [] for k in sides}
            for _ in range(repeats):  # interleaved: all sides see the same machine load
                for name, fn in sides.items():
                    t, _ = _timed(fn)
                    times[name].append(t)
            t_per_k, per_k = _timed(lambda: loop_stage(model, instances, rankings, per_k=True))
            n_threads = torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
    med = {k: statistics.median(v) for k, v in times.items()}
    b, l_ = med["stage batched"], med["stage loop"]
    n_decodes_k = int(np.where(per_k > 0, per_k, lengths[order][:, None] - 3).sum())
    print(
        f"ranked removal, {R} rankings on {n} rt-polarity test sentences: batched {b:.3f} s, per-instance loop "
        f"{l_:.3f} s, ratio {l_ / b:.1f}x (target >= {TARGET_RATIO:.0f}x)  [h given on both sides; loop: per "
        f"sentence 1 decode with gradient + 1 decode of all prefixes per ranking = {n * (R + 1):,} decodes; "
        f"batched: {len(buckets)} length buckets, 2 decodes each]; flip points differ on {mismatches} sentence(s); "
        f"{n_threads} torch thread(s)"
    )
    e_b, e_l = med["e2e batched"], med["e2e loop"]
    print(
        f"  end to end, encoder included (public ranked_removal vs the loop with one encoder call per sentence): "
        f"batched {e_b:.3f} s, loop {e_l:.3f} s, ratio {e_l / e_b:.1f}x"
    )
    print(
        f"  one decode per removal count k, stopping at the first flip ({n_decodes_k:,} decodes, 1 run): "
        f"{t_per_k:.2f} s = {t_per_k / b:.0f}x the batched stage; flip points differ from batched on "
        f"{int((per_k != fast).any(1).sum())} sentence(s)"
    )
    summary = er.removal_summary(public)
    print("  " + summary.round(3).to_string().replace("\n", "\n  "))
    return {
        "batched_s": b, "loop_s": l_, "ratio": l_ / b, "e2e_batched_s": e_b, "e2e_loop_s": e_l,
        "e2e_ratio": e_l / e_b, "per_k_s": t_per_k, "mismatches": mismatches, "threads": n_threads,
    }


BENCHMARKS = {"erasure": bench_erasure}

if __name__ == "__main__":
    import sys

    bench_erasure(threads=int(sys.argv[1]) if len(sys.argv) > 1 else 1)
