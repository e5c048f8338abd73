"""J&W's counterfactual tests moved inside a transformer: permute or replace one head's attention.

A transformer has a site per (layer, head) (:class:`attnlib.models.protocol.Site`), and each
head has a row per query. The book's two counterfactual experiments
(:mod:`attnlib.experiments.counterfactual`) already run at such a site: every query row is
permuted (or searched) on its own and the layers above the head are recomputed. This module
asks the same questions of a whole model:

* :func:`permute_heads` -- the poster's "shuffled attention", J&W's Alg. 2: every head on
  its own (through :func:`~attnlib.experiments.counterfactual.permute_attention`, the same
  code as Chapter 4), all heads of a layer at once, and every head of every layer at once.
  Accuracy under permutation (every instance x permutation pair) and the median output TVD.
* :func:`adversarial_heads` -- J&W's Alg. 3 at one head per layer
  (:func:`~attnlib.experiments.counterfactual.adversarial_attention`).

For a layer or the whole model several heads are permuted at once, so the model is run from
its input with ``model(batch, edits={Site: edit})`` on every instance x permutation; each
edit permutes its head's rows with :func:`attnlib.models.interventions.permute_rows`, its
sources drawn by :func:`~attnlib.experiments.counterfactual.query_row_sources`, chunked
under a memory budget like every experiment (:mod:`attnlib.runs`).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd
import torch

from .. import runs, metrics
from .._checks import check_positive_int, check_seed
from ..data import PAD
from ..models import Site, interventions
from ..models.heads import check_sites
from ..models.protocol import check_model, device_of, eval_mode, has_capability, layer_shape
from ..train import run_concurrently, training_threads
from . import counterfactual
from .counterfactual import ADVERSARY

__all__ = ["HeadPermutationResult", "permute_heads", "adversarial_heads", "SCOPES"]

#: What :func:`permute_heads` can permute at once: one head, all heads of a layer, every head.
SCOPES = ("head", "layer", "all")

# Rows per chunk and the memory budget (elements of the largest activation, float32) when
# every instance x permutation runs the whole model.
_ROWS = 128
_BUDGET = 2**25


def _shape(model) -> tuple[int, int]:
    if not has_capability(model, "layered"):
        raise ValueError(
            "this experiment needs a transformer: a model whose sites are heads (rows_per_query = True), "
            "e.g. attnlib.models.TransformerClassifier"
        )
    return layer_shape(model)


@dataclass
class HeadPermutationResult:
    """Output of :func:`permute_heads`.

    table:          one row per permuted scope: scope ("head", "layer", "all"), layer and
                    head (-1 where the scope spans them), accuracy (over every instance x
                    permutation), accuracy_change (minus the model's own), change_se (the
                    standard error of that change, from the per-sentence paired
                    differences), median_tvd (the
                    median over instances of each instance's median TVD over permutations),
                    flipped (the fraction of instance x permutation pairs whose predicted
                    class differs from the model's own).
    base_accuracy:  the model's own accuracy on the instances.
    n_instances, n_permutations, seed: the run.
    median_tvd:     {(scope, layer, head): (N,) per-instance median TVDs}, instances in split order.
    paired:         {(scope, layer, head): (N,) per-instance accuracy change}: each instance's
                    accuracy over its permutations minus its own correctness (the paired
                    differences behind accuracy_change and change_se), instances in split order.
    indices:        (N,) the instances' positions in the split (the same for every scope), so
                    results on several models of one recipe stack by instance
                    (:func:`attnlib.seeds.run_over_seeds`).
    """

    table: pd.DataFrame
    base_accuracy: float
    n_instances: int
    n_permutations: int
    seed: int
    median_tvd: dict
    paired: dict | None = None
    indices: np.ndarray | None = None

    def __len__(self) -> int:
        return self.n_instances

    def change(self, scope: str, layer: int = -1, head: int = -1) -> np.ndarray:
        """(N,) the per-instance accuracy change of one scope: ``change("all")``,
        ``change("layer", 2)``, ``change("head", 1, 3)``."""
        key = (scope, layer, head)
        if self.paired is None or key not in self.paired:
            raise ValueError(f"this result has no scope {key}; it has {sorted(self.paired or ())}")
        return self.paired[key]

    def grid(self, value: str = "accuracy") -> pd.DataFrame:
        """``value`` as a layer x head table with an "all heads" column and an "all layers" row.

        The "all layers" row has its value in the "all heads" column only (NaN elsewhere).
        """
        if value not in self.table.columns:
            raise ValueError(f"value must be one of {list(self.table.columns[3:])}, got {value!r}")
        t = self.table
        heads = t[t.scope == "head"].pivot(index="layer", columns="head", values=value)
        heads.columns = [f"head {h}" for h in heads.columns]
        layer = t[t.scope == "layer"].set_index("layer")[value]
        grid = heads.copy()
        grid["all heads"] = layer.reindex(grid.index)
        grid.index = [f"layer {i}" for i in grid.index]
        every = t[t.scope == "all"][value]
        if len(every):
            grid.loc["all layers"] = np.nan
            grid.loc["all layers", "all heads"] = float(every.iloc[0])
        return grid


def _permute_scope(run, sites: list[Site], P: int, rng: np.random.Generator):
    """TVD (N, P) and predictions (N, P) with every site of ``sites`` permuted at once (one forward per chunk)."""
    N = len(run)
    tvd = np.empty((N, P), dtype=np.float64)
    predicted = np.empty((N, P), dtype=np.int64)
    y_hat_all = np.empty((N, run.model.n_classes), dtype=np.float64)
    for rows, chunk in run.chunk_batches():
        n, T = chunk.tokens.shape
        mask = chunk.tokens != PAD  # the transformer's keys: every real position, [CLS] and [SEP] included
        identity = torch.arange(T, device="cpu").expand(n, 1, T, T)  # sources live on the CPU
        sources = {  # per site (n * (1 + P), T, T): row 0 of each instance unpermuted (alpha-hat)
            site: torch.cat([identity, counterfactual.query_row_sources(mask.cpu(), T, P, rng)], 1).reshape(-1, T, T)
            for site in sites
        }
        tokens = chunk.tokens.repeat_interleave(1 + P, 0)

        def edit_for(src):
            def edit(rows, _key_mask):
                return interventions.permute_rows(rows, src.unsqueeze(1).to(rows.device)).squeeze(1)
            return edit

        with torch.no_grad():
            probs = run.model(tokens, edits={site: edit_for(src) for site, src in sources.items()}).probs
        probs = probs.view(n, 1 + P, -1)
        y_hat = probs[:, 0]
        tvd[rows] = metrics.tvd(probs[:, 1:], y_hat.unsqueeze(1).expand_as(probs[:, 1:]), check=False).double().cpu().numpy()
        predicted[rows] = probs[:, 1:].argmax(-1).cpu().numpy()
        y_hat_all[rows] = y_hat.double().cpu().numpy()
    return tvd, predicted, y_hat_all


def permute_heads(
    model,
    split,
    *,
    n_permutations: int = 100,
    seed: int = 0,
    max_instances: int | None = None,
    chunk_size: int | None = None,
    scopes=SCOPES,
    progress: bool = False,
) -> HeadPermutationResult:
    """Accuracy and output change when attention heads are permuted (J&W Alg. 2; the poster's shuffling).

    Each query row of a permuted head is permuted on its own among the real keys, P =
    ``n_permutations`` times per instance, seeded. Scopes:

    * ``"head"``: every (layer, head) alone, through
      :func:`attnlib.experiments.counterfactual.permute_attention` (the layers below the
      head run once; the layers above are recomputed for the permutations);
    * ``"layer"``: all heads of one layer at once, every layer;
    * ``"all"``: every head of every layer at once.

    Args:
        model: a transformer classifier (a model whose sites are heads).
        split: a :class:`attnlib.data.Split` or Batch; ``max_instances`` a seeded
            stratified subset (the same instances for every scope).
        n_permutations: P (J&W: 100). seed: the permutations and the subset.
        chunk_size: instances per tensor program (None: sized by a memory budget). As in
            :func:`~attnlib.experiments.counterfactual.permute_attention`, the permutations
            drawn follow the chunks; what the model computes for a given permutation does not.
        scopes: any of :data:`SCOPES`.
        progress: a tqdm bar over the scopes.

    Every scope uses the same instances; each draws its permutations from its own
    generator seeded with (seed, scope, layer, head).
    """
    model = check_model(model)
    layers, heads = _shape(model)
    P = check_positive_int(n_permutations, "n_permutations")
    seed = check_seed(seed)
    scopes = tuple(scopes)
    unknown = [s for s in scopes if s not in SCOPES]
    if unknown or not scopes:
        raise ValueError(f"scopes must be a non-empty subset of {SCOPES}, got {scopes!r}")

    jobs = []
    if "head" in scopes:
        jobs += [("head", s.layer, s.head) for s in model.sites]
    if "layer" in scopes:
        jobs += [("layer", layer, -1) for layer in range(layers)]
    if "all" in scopes:
        jobs.append(("all", -1, -1))

    from tqdm.auto import tqdm

    # one scope at a time, on every core: two at once held about 0.7 GB more (chapter 12)
    rows, medians, changes, base, indices = [], {}, {}, None, None
    for scope, layer, head in tqdm(jobs, desc="permuting heads", unit="scope", disable=not progress, mininterval=1.0):
        job_seed = int(np.random.SeedSequence([seed, SCOPES.index(scope), layer + 1, head + 1]).generate_state(1)[0])
        if scope == "head":
            r = counterfactual.permute_attention(model, split, n_permutations=P, seed=seed,
                                                 max_instances=max_instances, site=Site(layer, head),
                                                 permutation_seed=job_seed, chunk_size=chunk_size)
            tvd, predicted, labels, own, where = r.all_tvd, r.all_predicted, r.labels, r.predicted, r.indices
        else:
            sites = [s for s in model.sites if scope == "all" or s.layer == layer]
            with runs.experiment(model, split, seed=seed, max_instances=max_instances, chunk_size=chunk_size,
                                  rows=_ROWS, cost=lambda T, H: (P + 1) * T * 8 * H, budget=_BUDGET) as run:
                tvd, predicted, y_hat = _permute_scope(run, sites, P, np.random.default_rng(job_seed))
                labels, own, where = run.labels, y_hat.argmax(-1), run.indices
        if base is None:
            base, indices = float((own == labels).mean()), np.asarray(where)
        median = np.median(tvd, axis=1)
        medians[(scope, layer, head)] = median
        # per sentence: accuracy over its permutations minus its own correctness (a paired difference)
        paired = (predicted == labels[:, None]).mean(1) - (own == labels)
        changes[(scope, layer, head)] = paired
        rows.append({
            "scope": scope, "layer": layer, "head": head,
            "accuracy": float((predicted == labels[:, None]).mean()),
            "accuracy_change": float(paired.mean()),
            "change_se": float(paired.std(ddof=1) / np.sqrt(len(paired))) if len(paired) > 1 else float("nan"),
            "median_tvd": float(np.median(median)),
            "flipped": float((predicted != own[:, None]).mean()),
        })
    table = pd.DataFrame(rows)
    return HeadPermutationResult(table=table, base_accuracy=base, n_instances=len(next(iter(medians.values()))),
                                 n_permutations=P, seed=seed, median_tvd=medians, paired=changes,
                                 indices=indices)


def adversarial_heads(
    model,
    split,
    sites,
    *,
    eps: float = ADVERSARY.eps,
    k: int = ADVERSARY.k,
    steps: int = ADVERSARY.steps,
    lr: float = ADVERSARY.lr,
    seed: int = 0,
    max_instances: int | None = None,
    chunk_size: int | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """J&W's adversarial search (Alg. 3) at each of ``sites``: one row per (site, instance).

    Each site runs :func:`attnlib.experiments.counterfactual.adversarial_attention` on the
    same instances: every query row of the head is searched, the layers above are
    recomputed, and a candidate's JSD is the mean over the real query rows. Columns:
    layer, head, instance, predicted, eps_max_jsd (that mean), cls_jsd (the JSD of the
    [CLS] row alone, of the same eps-max candidate), kept (candidates within eps).
    ``chunk_size``: instances per tensor program (None: sized by a memory budget); any value
    gives the same rows.

    The sites are searched at once, one per free core, each on one thread
    (:func:`attnlib.train.run_concurrently`, longest first: a lower head recomputes more
    layers), so the rows are the same bits on any number of cores.
    """
    layers, heads = _shape(model)
    sites = check_sites(sites, layers, heads)
    if not sites:
        raise ValueError("sites must name at least one head")

    def search(site: Site):
        with training_threads(device_of(model)):
            return counterfactual.adversarial_attention(model, split, eps=eps, k=k, steps=steps, lr=lr, seed=seed,
                                                        max_instances=max_instances, site=site,
                                                        chunk_size=chunk_size)

    with eval_mode(model):  # once around every search: searches at once must not restore each other's mode
        found = run_concurrently([partial(search, site) for site in sites], progress=progress,
                                 description="adversarial heads", unit="head",
                                 costs=[layers - site.layer for site in sites])  # the layers each recomputes
    frames = []
    for site, r in zip(sites, found):
        n = len(r)
        best = np.where(r.best[:, None, None] < 0, r.alpha, r.candidates[np.arange(n), np.maximum(r.best, 0)])
        cls = metrics.jsd(torch.from_numpy(best[:, 0]).double(), torch.from_numpy(r.alpha[:, 0]).double(),
                          check=False).cpu().numpy()
        frames.append(pd.DataFrame({
            "layer": site.layer, "head": site.head, "instance": r.indices, "predicted": r.predicted,
            "eps_max_jsd": r.eps_max_jsd, "cls_jsd": cls, "kept": r.kept.sum(1),
        }))
    return pd.concat(frames, ignore_index=True)
