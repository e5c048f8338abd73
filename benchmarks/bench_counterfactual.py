"""Benchmarks of attnlib.counterfactual: batched tensor programs vs J&W's loops.

    .venv/bin/python benchmarks/run.py permutation adversary

* ``permutation`` -- 100 permutations per instance on 500 rt-polarity test sentences
  (seeded stratified sample). The headline compares the permutation stage, with the
  hidden states h computed beforehand (J&W run the encoder once too, so it is the same
  cost on every side): the batched core of :func:`attnlib.counterfactual.permute_attention`
  (every permutation of every instance of a length bucket in ONE ``model.decode`` call)
  vs the loop of J&W's code (``Model.permute_attn``: batches of 32 sorted by length; per
  batch 100 decodes, one per permutation; each permutation drawn per instance with
  ``np.random.permutation``, like their ``generate_permutation``). Target: >= 20x.
  Also printed: the same end to end (encoder included, public function vs J&W loop),
  and three other loops over the stage -- one decode per permutation of each sentence
  (50,000 decodes), one decode per permutation over all 500 sentences (100 decodes), and
  J&W's loop exactly as written, which also re-runs the attention layer for every
  permutation (the headline loop computes it once per batch: the stronger baseline).
* ``adversary`` -- the adversarial attention search on the whole rt-polarity test split
  (842 sentences, k = 5): the default (length buckets of ~256 sentences, 4 tensor
  programs) and a single (842, 5, T) tensor program vs the same code run batch by batch
  (32 per batch, as J&W did), all with 100 Adam steps to keep the benchmark short (the
  search uses 500). Seconds per 1,000 instances at 500 steps are EXTRAPOLATED from the
  measured time per step.

Model: BiLSTM + tanh attention trained on rt-polarity with J&W's recipe, cached in the
user cache folder after the first run (training takes a few minutes on 2 cores).
Sides are interleaved and the median of the repeats is reported.
"""
from __future__ import annotations

import statistics
import time

import numpy as np
import torch


def _model_and_data():
    from attnlib import data, train

    ds = data.load_dataset("rt-polarity")
    model = train.train_model(ds, encoder="lstm", attention="tanh", progress=False).model.eval()
    return ds, model


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def _encode(model, split, rows):
    batch = split.batch(rows)
    encoded = model.encode(batch)
    alpha = model.attend(encoded)
    return batch, encoded, alpha


# ----------------------------------------------------------------------------- permutation
def _jw_stage(model, prepared, n_permutations: int, rng, as_written: bool = False) -> list[np.ndarray]:
    """J&W's permute_attn given h: per batch of 32, one decode per permutation, per-instance permutations.

    ``as_written=True``: also recompute the attention layer for every permutation, as
    their ``AttnDecoder.forward`` does (the default computes it once per batch).
    """
    from attnlib import metrics

    out = []
    for batch, encoded, alpha in prepared:
        y_hat, _ = model.decode(encoded.hidden, alpha)
        B, T = batch.tokens.shape
        lengths = batch.lengths.tolist()
        changes = np.empty((B, n_permutations))
        for p in range(n_permutations):
            perm = np.tile(np.arange(T), (B, 1))  # J&W's BatchHolder.generate_permutation
            for i, n in enumerate(lengths):
                perm[i, 1 : n - 1] = rng.permutation(n - 2) + 1
            a = model.attend(encoded) if as_written else alpha
            y_p, _ = model.decode(encoded.hidden, a.gather(-1, torch.from_numpy(perm)))
            changes[:, p] = metrics.tvd(y_p, y_hat, check=False).numpy()
        out.append(np.median(changes, axis=1))
    return out


def _per_sentence_stage(model, prepared, n_permutations: int, rng) -> list[np.ndarray]:
    """One decode per permutation of each sentence (no batching at all)."""
    from attnlib import metrics

    out = []
    for batch, encoded, alpha in prepared:
        for i, n in enumerate(batch.lengths.tolist()):
            h, a = encoded.hidden[i : i + 1, :n], alpha[i : i + 1, :n]
            y_hat, _ = model.decode(h, a)
            changes = np.empty(n_permutations)
            for p in range(n_permutations):
                perm = np.arange(n)
                perm[1 : n - 1] = rng.permutation(n - 2) + 1
                y_p, _ = model.decode(h, a[:, torch.from_numpy(perm)])
                changes[p] = float(metrics.tvd(y_p, y_hat, check=False)[0])
            out.append(np.median(changes))
    return out


def _flat_stage(model, prepared_all, n_permutations: int, g) -> np.ndarray:
    """One decode per permutation over all sentences at once (permutations vectorised)."""
    from attnlib import metrics

    batch, encoded, alpha = prepared_all
    y_hat, _ = model.decode(encoded.hidden, alpha)
    T = alpha.shape[1]
    pos = torch.arange(T, dtype=torch.float32)
    fixed = torch.where(pos < 1, pos - T, pos + 1.0).expand_as(alpha)
    changes = np.empty((len(batch), n_permutations))
    for p in range(n_permutations):
        keys = torch.where(encoded.mask, torch.rand(alpha.shape, generator=g), fixed)
        y_p, _ = model.decode(encoded.hidden, alpha.gather(-1, keys.argsort(-1)))
        changes[:, p] = metrics.tvd(y_p, y_hat, check=False).numpy()
    return np.median(changes, axis=1)


def _jw_end_to_end(model, split, indices, n_permutations: int, rng) -> list[np.ndarray]:
    order = np.asarray(indices)[np.argsort(split.lengths()[indices], kind="stable")]
    prepared = [_encode(model, split, order[i : i + 32]) for i in range(0, len(order), 32)]
    return _jw_stage(model, prepared, n_permutations, rng)


def bench_permutation(n: int = 500, n_permutations: int = 100, repeats: int = 3) -> dict:
    from attnlib import _runs
    from attnlib import counterfactual as cf
    from attnlib.models import ONLY_SITE, SiteState

    ds, model = _model_and_data()
    split = ds.test
    P = n_permutations
    indices = cf.permute_attention(model, split, n_permutations=2, max_instances=n).indices  # warm-up too
    n = len(indices)
    lengths = split.lengths()[indices] + 2
    with torch.no_grad():
        # the library's length buckets, and J&W's batches of 32 sorted by length, encoded once
        H = model.config.hidden_size
        chunks = runs.chunks(lengths, cf._PERMUTATION_ROWS, lambda T: (P + 1) * (H + 4 * T), cf._PERMUTATION_BUDGET, None)
        buckets = [_encode(model, split, indices[c]) for c in chunks]
        order = indices[np.argsort(lengths, kind="stable")]
        batches32 = [_encode(model, split, order[i : i + 32]) for i in range(0, n, 32)]
        everything = _encode(model, split, indices)

        def batched_stage():
            rng = np.random.default_rng(0)
            return [cf._permutation_changes(model, SiteState(a, e.mask, ONLY_SITE, e), P, rng)[0] for _, e, a in buckets]

        sides = {
            "stage batched": batched_stage,
            "stage J&W": lambda: _jw_stage(model, batches32, P, np.random.default_rng(0)),
            "e2e batched": lambda: cf.permute_attention(model, split, n_permutations=P, max_instances=n),
            "e2e J&W": lambda: _jw_end_to_end(model, split, indices, P, np.random.default_rng(0)),
            "stage flat": lambda: _flat_stage(model, everything, P, torch.Generator().manual_seed(0)),
            "stage J&W as written": lambda: _jw_stage(model, batches32, P, np.random.default_rng(0), as_written=True),
        }
        times = {k: [] for k in sides}
        outputs = {}
        for _ in range(repeats):  # interleaved: all sides see the same machine load
            for name, fn in sides.items():
                t, outputs[name] = _timed(fn)
                times[name].append(t)
        t_sentence, per_sentence = _timed(lambda: _per_sentence_stage(model, batches32, P, np.random.default_rng(0)))
    med = {k: statistics.median(v) for k, v in times.items()}
    b, j = med["stage batched"], med["stage J&W"]
    print(
        f"permutation, {P} per instance on {n} sentences: batched {b:.3f} s, loop {j:.3f} s, ratio {j / b:.1f}x "
        f"(target >= 20x)  [h given on both sides; loop = J&W's: batches of 32, one decode per permutation, "
        f"per-instance np.random.permutation]"
    )
    e_b, e_j = med["e2e batched"], med["e2e J&W"]
    print(
        f"  end to end, encoder included (once per sentence on both sides): batched {e_b:.3f} s, "
        f"J&W loop {e_j:.3f} s, ratio {e_j / e_b:.1f}x"
    )
    print(
        f"  other loops over the stage: one decode per permutation of each sentence ({n * P:,} decodes, 1 run) "
        f"{t_sentence:.2f} s = {t_sentence / b:.0f}x; one decode per permutation over all {n} at once "
        f"({P} decodes) {med['stage flat']:.3f} s = {med['stage flat'] / b:.1f}x; J&W's loop as written "
        f"(attention layer re-run for every permutation) {med['stage J&W as written']:.3f} s = "
        f"{med['stage J&W as written'] / b:.0f}x"
    )
    result = outputs["e2e batched"]
    print(
        f"  sanity (different random permutations on each side): mean median TVD batched "
        f"{result.median_tvd.mean():.4f}, J&W loop {np.concatenate(outputs['e2e J&W']).mean():.4f}, "
        f"per sentence {np.mean(per_sentence):.4f}"
    )
    return {
        "batched_s": b, "loop_s": j, "ratio": j / b, "e2e_batched_s": e_b, "e2e_loop_s": e_j,
        "e2e_ratio": e_j / e_b, "per_sentence_s": t_sentence, "flat_s": med["stage flat"],
        "as_written_s": med["stage J&W as written"],
    }


# ----------------------------------------------------------------------------- adversary
def bench_adversary(steps: int = 100, repeats: int = 3, full_steps: int = 500) -> dict:
    from attnlib import counterfactual as cf

    ds, model = _model_and_data()
    split = ds.test
    n = len(split)
    cf.adversarial_attention(model, split, steps=2, max_instances=64)  # warm-up
    sides = {
        "default": lambda: cf.adversarial_attention(model, split, steps=steps),
        "one": lambda: cf.adversarial_attention(model, split, steps=steps, chunk_size=n),
        "loop": lambda: cf.adversarial_attention(model, split, steps=steps, chunk_size=32),
    }
    times = {k: [] for k in sides}
    outputs = {}
    for _ in range(repeats):
        for name, fn in sides.items():
            t, outputs[name] = _timed(fn)
            times[name].append(t)
    med = {k: statistics.median(v) for k, v in times.items()}
    d, o, l_ = med["default"], med["one"], med["loop"]
    diff = max(float(np.abs(outputs[k].eps_max_jsd - outputs["loop"].eps_max_jsd).max()) for k in ("default", "one"))
    print(
        f"adversary, whole rt-polarity test split ({n} sentences, k=5), {steps} steps on every side: "
        f"length buckets of ~256 (default) {d:.2f} s, one ({n}, 5, T) tensor program {o:.2f} s, "
        f"batches of 32 (as J&W) {l_:.2f} s; ratio {l_ / d:.1f}x (default) / {l_ / o:.1f}x (one program); "
        f"max |eps-max JSD difference| {diff:.1e}"
    )
    per_1000 = {k: v / steps * full_steps * 1000 / n for k, v in med.items()}
    print(
        f"  EXTRAPOLATED to {full_steps} steps from the measured time per step: {per_1000['default']:.1f} s per "
        f"1,000 instances (default), {per_1000['one']:.1f} s (one program), {per_1000['loop']:.1f} s (batches of 32)"
    )
    return {"default_s": d, "one_program_s": o, "loop_s": l_, "ratio": l_ / d, "s_per_1000_full": per_1000["default"]}


BENCHMARKS = {"permutation": bench_permutation, "adversary": bench_adversary}
