"""Benchmark: attention flow with SciPy's Dinic (attnlib.flow.flow) vs networkx's max-flow (A&Z's code).

    python benchmarks/run.py flow

A 6-layer model's attentions (random softmax rows, 4 heads: the cost is the graph, not what
the heads learned) for sentences of 20, 40 and 80 tokens. Both sides compute the flow from the
last layer's [CLS] node to every input token, one max-flow per token on the same layer graph
(capacities A^, A&Z's residual 0.5): networkx as Abnar & Zuidema's code does it (the graph from
``nx.from_numpy_array(..., create_using=nx.DiGraph, edge_attr="capacity")``, built once per
sentence, then ``nx.maximum_flow_value`` per token), SciPy on the capacities scaled to
integers (attnlib.flow.FLOW_SCALE). Per sentence, median of the repeats, timed interleaved.

networkx takes about 0.35 s, 3.5 s and 31 s per sentence at 20, 40 and 80 tokens: to keep the
run short it times only the first ``NX_TOKENS[T]`` tokens' max-flows (plus the graph) and
extrapolates to all T tokens (the output says so). The max |difference| is over the raw flows
of the tokens networkx computed. Target: >= 100x.
"""
from __future__ import annotations

import statistics
import time

LAYERS, HEADS, TARGET_RATIO = 6, 4, 100.0
#: networkx's max-flows timed per sentence (all T tokens at 20 and 40, a tenth at 80).
NX_TOKENS = {20: 20, 40: 40, 80: 8}


def _attentions(T: int, seed: int = 0):
    import numpy as np
    import torch

    rng = np.random.default_rng(seed)
    logits = rng.normal(0, 2, (1, LAYERS, HEADS, T, T))
    att = np.exp(logits - logits.max(-1, keepdims=True))
    return torch.as_tensor(att / att.sum(-1, keepdims=True)), torch.ones(1, T, dtype=torch.bool)


def networkx_flows(steps, tokens: int):
    """A&Z's way: the (L + 1) T node adjacency, a networkx DiGraph from it, one max-flow per token (the first ``tokens``)."""
    import networkx as nx
    import numpy as np

    L, T, _ = steps.shape
    adjacency = np.zeros(((L + 1) * T, (L + 1) * T))
    for layer in range(L):  # node l * T + p is (layer l, position p); edges (l + 1, q) -> (l, k)
        adjacency[(layer + 1) * T:(layer + 2) * T, layer * T:(layer + 1) * T] = steps[layer]
    graph = nx.from_numpy_array(adjacency, create_using=nx.DiGraph, edge_attr="capacity")
    return np.array([nx.maximum_flow_value(graph, L * T, k) for k in range(tokens)])


def bench_flow(repeats: int = 3) -> dict:
    import numpy as np

    from attnlib.flow import RESIDUAL, flow, rollout

    results = {}
    for T, k in NX_TOKENS.items():
        att, mask = _attentions(T)
        # A^ of each layer: the rollout of that layer alone
        steps = np.stack([rollout(att[:, [layer]], mask, residual=RESIDUAL)[0, 0].numpy() for layer in range(LAYERS)])
        scipy_s, nx_s = [], []
        for _ in range(repeats if T < 80 else 1):  # interleaved: both sides see the same machine load
            start = time.perf_counter()
            fast = flow(att, mask, normalise=False)[0].numpy()
            scipy_s.append(time.perf_counter() - start)
            start = time.perf_counter()
            slow = networkx_flows(steps, k)
            nx_s.append((time.perf_counter() - start) * T / k)  # extrapolated to all T tokens when k < T
        s, n = statistics.median(scipy_s), statistics.median(nx_s)
        diff = float(np.max(np.abs(fast[:k] - slow)))
        note = f" (extrapolated from {k} of {T} tokens)" if k < T else ""
        print(f"flow, {LAYERS} layers, {T} tokens: scipy {s:.3f} s, networkx {n:.2f} s{note} per sentence, "
              f"ratio {n / s:.0f}x (target >= {TARGET_RATIO:.0f}x); max |diff| {diff:.1e}")
        results[T] = {"scipy_s": s, "networkx_s": n, "ratio": n / s, "max_abs_diff": diff, "extrapolated": k < T}
    return results


BENCHMARKS = {"flow": bench_flow}

if __name__ == "__main__":
    bench_flow()
