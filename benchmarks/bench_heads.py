"""Benchmark: head importance from one backward pass vs masking the heads one at a time.

    python benchmarks/run.py heads

The book's transformer shape (TransformerConfig(layers=4, heads=4, head_dim=32), random
weights: the cost is the passes, not what they learned) on 256 random sentences of 23 to 27
words (25 to 29 tokens with <SOS> and <EOS>), in length-sorted batches of 128.

* one backward pass: attnlib.head_importance.head_importance -- per batch one forward pass
  with a gate on every head and one backward pass to the gates (Michel et al. 2019's
  I_h = E_x |dL/d xi_h|);
* masking: one forward pass without edits and one per head (L x h = 16) with that head
  masked (attnlib.head_importance.mask_heads), the importance proxy being the change of the
  mean cross-entropy.

The two are different scores of the same thing (a first-order estimate vs the actual
change); their Spearman correlation over the heads is printed alongside. Timed interleaved
on one torch thread, median of the repeats. The ratio is roughly L x h forward passes
against one forward and one backward pass (about three forwards' worth).
"""
from __future__ import annotations

import statistics
import time

N_SENTENCES, MIN_WORDS, MAX_WORDS, VOCAB, BATCH_SIZE = 256, 23, 27, 1_000, 128


def _setup(seed: int = 0):
    import numpy as np
    import torch

    from attnlib.data import EOS, SOS, collate
    from attnlib.models import TransformerClassifier, TransformerConfig

    torch.manual_seed(seed)
    model = TransformerClassifier(VOCAB, TransformerConfig(layers=4, heads=4, head_dim=32)).eval()
    rng = np.random.default_rng(seed)
    lengths = rng.integers(MIN_WORDS, MAX_WORDS + 1, N_SENTENCES)
    ids = [np.concatenate([[SOS], rng.integers(4, VOCAB, n), [EOS]]) for n in lengths]
    labels = rng.integers(0, 2, N_SENTENCES)
    order = np.argsort(lengths, kind="stable")
    batches = [collate([ids[i] for i in chunk], labels[chunk], chunk)
               for chunk in (order[s:s + BATCH_SIZE] for s in range(0, N_SENTENCES, BATCH_SIZE))]
    return model, batches


def _mean_loss(model, batches, edits=None) -> float:
    import torch

    total, n = 0.0, 0
    with torch.no_grad():
        for batch in batches:
            probs = model(batch, edits=edits).probs
            total += float(-torch.log(probs.gather(-1, batch.labels[:, None])).sum())
            n += len(batch)
    return total / n


def masking_loop(model, batches):
    """(L, h) loss change per masked head: one forward pass without edits, then one per head."""
    import numpy as np

    from attnlib.head_importance import mask_heads

    base = _mean_loss(model, batches)
    out = np.zeros((model.config.layers, model.config.heads))
    for site in model.sites:
        out[site.layer, site.head] = _mean_loss(model, batches, mask_heads(site)) - base
    return out


def one_backward(model, batches):
    from attnlib.head_importance import head_importance

    return head_importance(model, batches, normalise=False)


def bench_heads(repeats: int = 3, threads: int | None = 1) -> dict:
    """Time the gate gradients against masking every head, both on ``threads`` torch threads."""
    import attnlib.reproducible  # noqa: F401  (first: it sizes torch's thread pool, which is set below)
    import torch
    from scipy.stats import spearmanr

    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        model, batches = _setup()
        importance, change = one_backward(model, batches), masking_loop(model, batches)  # warm-up
        rho = float(spearmanr(importance.ravel(), change.ravel()).statistic)
        fast, slow = [], []
        for _ in range(repeats):  # interleaved: both sides see the same machine load
            start = time.perf_counter()
            one_backward(model, batches)
            fast.append(time.perf_counter() - start)
            start = time.perf_counter()
            masking_loop(model, batches)
            slow.append(time.perf_counter() - start)
        n_threads = torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
    b, l_ = statistics.median(fast), statistics.median(slow)
    heads = len(model.sites)
    print(
        f"head importance, {model.config.name} on {N_SENTENCES} random sentences of {MIN_WORDS}-{MAX_WORDS} words: "
        f"one backward pass {b:.3f} s, masking each head ({heads} + 1 forward passes) {l_:.3f} s, "
        f"ratio {l_ / b:.1f}x; Spearman(I_h, loss change) {rho:.2f}, {n_threads} torch thread(s)"
    )
    return {"backward_s": b, "masking_s": l_, "ratio": l_ / b, "spearman": rho, "heads": heads,
            "threads": n_threads}


def _permutation_data(n: int = 96, seed: int = 0):
    """The benchmark's model and ``n`` random sentences as one Batch (split order = sentence order)."""
    import numpy as np

    from attnlib.data import EOS, SOS, collate

    model, _ = _setup(seed)
    rng = np.random.default_rng(seed + 1)
    lengths = rng.integers(MIN_WORDS, MAX_WORDS + 1, n)
    ids = [np.concatenate([[SOS], rng.integers(4, VOCAB, k), [EOS]]) for k in lengths]
    return model, collate(ids, rng.integers(0, 2, n))


def per_site_loop(model, batch, n_permutations: int, batch_size: int = 32):
    """Every head permuted on its own the plain way: per site, per permutation, per batch of 32 sentences,
    the whole model run with ``edits={site: permuted rows}``; (sites, N, P) output TVDs."""
    import numpy as np
    import torch

    from attnlib.counterfactual import query_row_sources
    from attnlib.data import PAD
    from attnlib.metrics import tvd
    from attnlib.models.interventions import permute_rows

    rng = np.random.default_rng(0)
    order = np.argsort(batch.lengths.numpy(), kind="stable")
    chunks = [order[s:s + batch_size] for s in range(0, len(order), batch_size)]
    out = np.zeros((len(model.sites), len(batch), n_permutations))
    with torch.no_grad():
        for k, site in enumerate(model.sites):
            for rows in chunks:
                T = int(batch.lengths[rows].max())
                tokens = batch.tokens[rows, :T]
                base = model(tokens).probs
                src = query_row_sources(tokens != PAD, T, n_permutations, rng)  # (n, P, T, T)
                for p in range(n_permutations):
                    edit = lambda a, m, s=src[:, p]: permute_rows(a, s.unsqueeze(1)).squeeze(1)  # noqa: E731
                    out[k, rows, p] = tvd(model(tokens, edits={site: edit}).probs, base, check=False).numpy()
    return out


def batched(model, batch, n_permutations: int):
    """attnlib.head_perturbation.permute_heads, every head alone: below each head once, its permutations decoded
    in groups of candidates (the layers above recomputed once per group)."""
    from attnlib.head_perturbation import permute_heads

    return permute_heads(model, batch, n_permutations=n_permutations, scopes=("head",))


def bench_head_permutations(repeats: int = 2, threads: int | None = 1, n_permutations: int = 10) -> dict:
    """Time permute_heads (every head alone) against a per-site, per-permutation loop, both on ``threads`` threads."""
    import attnlib.reproducible  # noqa: F401  (first: it sizes torch's thread pool, which is set below)
    import numpy as np
    import torch

    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        model, batch = _permutation_data()
        fast_result = batched(model, batch, n_permutations)  # warm-up, and the two agree in distribution
        slow_result = per_site_loop(model, batch, n_permutations)
        fast, slow = [], []
        for _ in range(repeats):
            start = time.perf_counter()
            batched(model, batch, n_permutations)
            fast.append(time.perf_counter() - start)
            start = time.perf_counter()
            per_site_loop(model, batch, n_permutations)
            slow.append(time.perf_counter() - start)
        n_threads = torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
    b, l_ = statistics.median(fast), statistics.median(slow)
    heads = fast_result.table
    loop_medians = np.median(np.median(slow_result, axis=2), axis=1)  # per site: median over sentences
    gap = float(np.max(np.abs(heads["median_tvd"].to_numpy() - loop_medians)))
    print(
        f"head permutations, {model.config.name}, {len(batch)} sentences x {n_permutations} permutations x "
        f"{len(model.sites)} heads: batched {b:.2f} s, per-site loop (batches of 32) {l_:.2f} s, ratio {l_ / b:.1f}x; "
        f"largest gap between their per-head median TVDs (other random permutations) {gap:.3f}; "
        f"{n_threads} torch thread(s)"
    )
    return {"batched_s": b, "loop_s": l_, "ratio": l_ / b, "median_tvd_gap": gap, "threads": n_threads}


def _pruning_masks(model, orders: int = 5, seed: int = 0) -> list:
    """Every distinct set of heads that Michel et al.'s pruning visits in ``orders`` random orders
    (attnlib.head_importance.prune_randomly's orders, levels 0 .. L x h)."""
    import numpy as np

    L, h = model.config.layers, model.config.heads
    sets = {}
    for r in range(orders):
        scores = np.random.default_rng([seed, r]).random((L, h))
        ranked = [model.sites[i] for i in np.argsort(scores.ravel(), kind="stable")]
        sets.update({frozenset(ranked[:n]): None for n in range(L * h + 1)})
    return list(sets)


def bench_masking(repeats: int = 3, threads: int | None = 1) -> dict:
    """Chapter 12's pruning masks through TransformerClassifier.masked_probabilities (layers shared
    between masks) against one forward pass per mask; the outputs must be the same bits."""
    import attnlib.reproducible  # noqa: F401  (first: it sizes torch's thread pool, which is set below)
    import torch

    from attnlib.head_importance import mask_heads

    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        model, batches = _setup()
        masks = _pruning_masks(model)

        def shared():
            with torch.no_grad():
                return torch.cat([model.masked_probabilities(b, masks) for b in batches], 1)

        def per_mask():
            with torch.no_grad():
                return torch.cat([torch.stack([model(b, edits=mask_heads(m) if m else None).probs for m in masks])
                                  for b in batches], 1)

        if not torch.equal(shared(), per_mask()):
            raise AssertionError("masked_probabilities differs from one forward pass per mask")
        fast, slow = [], []
        for _ in range(repeats):  # interleaved: both sides see the same machine load
            start = time.perf_counter()
            shared()
            fast.append(time.perf_counter() - start)
            start = time.perf_counter()
            per_mask()
            slow.append(time.perf_counter() - start)
        n_threads = torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
    a, b = statistics.median(fast), statistics.median(slow)
    print(
        f"head masking, {model.config.name} on {N_SENTENCES} random sentences, the {len(masks)} distinct masks of "
        f"5 random pruning orders: shared layers {a:.3f} s, one forward pass per mask {b:.3f} s, ratio {b / a:.1f}x "
        f"(the same bits), {n_threads} torch thread(s)"
    )
    return {"shared_s": a, "per_mask_s": b, "ratio": b / a, "masks": len(masks), "threads": n_threads}


BENCHMARKS = {"heads": bench_heads, "head_permutations": bench_head_permutations, "masking": bench_masking}

if __name__ == "__main__":
    import sys

    bench_heads(threads=int(sys.argv[1]) if len(sys.argv) > 1 else 1)
