"""Chapter 12 (heads): the tables and the numbers its prose reads off permuting, searching,
masking and pruning heads, and adversarial keys, over every training seed of the small transformer.

Each function takes the chapter's results and returns ``{glued name: value}`` (the table
builders return the frame a reader sees).

**Seeds.** The chapter trains the small transformer with several seeds
(:func:`attnlib.seeds.train_seeds`) and runs each experiment on every seed's model. Heads are not
aligned across seeds (head 2 of layer 1 in one model has no counterpart in another), so a
per-head verdict is made within each model, with Holm's correction over that model's tests, and
the prose says in how many seeds it holds. What is aligned across seeds is read over seeds and
sentences (:func:`attnlib.uncertainty.over_seeds`, :func:`~attnlib.uncertainty.compare_over_seeds`):
a layer (its depth), every head at once, a pruning level, a share of sentences. An experiment
that runs on one seed's model only (a list of one result) is read over its sentences, and its
words say "from one model".
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from ... import uncertainty
from ...experiments import head_importance as hi
from ...models import Site
from .wording import listed, require_columns, some_of

__all__ = [
    "tested",
    "permutation_by_layer",
    "permutation_beside_poster",
    "permutation",
    "searched_sites",
    "adversary_shares",
    "adversary",
    "ablation_tested",
    "masking_grids",
    "seed_noise",
    "masking_by_seed",
    "pruning_over_seeds",
    "pruning_table",
    "masking",
    "keys",
    "keys_beside_poster",
    "MASKED",
    "IMPORTANCE",
    "BY_IMPORTANCE",
    "RANDOMLY",
]

#: The book's masking grids, by title: the accuracy change of each masked head and its importance.
MASKED = "accuracy change, head masked"
IMPORTANCE = "importance I_h (dev, per-layer l2)"


def _scope(perm, scope: str) -> pd.DataFrame:
    table = getattr(perm, "table", None)
    if not isinstance(table, pd.DataFrame):
        raise ValueError("perm must be head_perturbation.permute_heads' result (with a .table)")
    require_columns(table, ("scope", "layer", "accuracy", "accuracy_change", "change_se", "median_tvd"),
                    "perm.table")
    return table[table.scope == scope]


def tested(perm, *, alpha: float = 0.05) -> pd.DataFrame:
    """``perm.table`` with each row's test: ``p`` (two-sided, the change against its paired
    standard error, :func:`attnlib.uncertainty.normal_p`) and ``changed`` (Holm's correction over
    every row of the sweep, each head, each layer and all heads at once: a family of tests, so one
    in twenty passing at 5% by chance is not read as a change)."""
    _scope(perm, "head")  # validates perm
    table = perm.table.copy()
    table["p"] = uncertainty.normal_p(table["accuracy_change"], table["change_se"])
    table["changed"] = uncertainty.holm(table["p"].to_numpy(), alpha=alpha)
    return table


def _results(runs, what: str = "perm_runs") -> list:
    """The per-seed results of a run over seeds (:func:`attnlib.seeds.run_over_seeds`), checked."""
    results = getattr(runs, "results", None)
    if results is None or not hasattr(runs, "stack") or not len(results):
        raise ValueError(f"{what} must be the results over seeds (attnlib.seeds.run_over_seeds), "
                         f"got {type(runs).__name__}")
    for r in results:
        _scope(r, "head")
        if getattr(r, "paired", None) is None:
            raise ValueError(f"{what}: every result needs its per-sentence changes (permute_heads' .paired)")
    return list(results)


def _seeds_word(n: int) -> str:
    return "one model" if n == 1 else f"{n} seeds"


def _layer_tests(perm_runs, *, seed: int) -> list[dict]:
    """Per layer: the change pooled over seeds and sentences, and per seed Holm's verdict (within
    that seed's sweep). A layer "changes" when the pooled interval excludes 0 and more than half
    of the seeds' own Holm tests reject in that direction."""
    results = _results(perm_runs)
    per_seed = [tested(r) for r in results]
    layers = sorted(int(x) for x in per_seed[0][per_seed[0].scope == "layer"]["layer"])
    out = []
    for layer in layers:
        pooled = uncertainty.over_seeds(perm_runs.stack(lambda r, layer=layer: r.change("layer", layer)), seed=seed)
        rows = [t[(t.scope == "layer") & (t.layer == layer)].iloc[0] for t in per_seed]
        direction = 1 if pooled.low > 0 else -1 if pooled.high < 0 else 0
        agreeing = sum(bool(r.changed) and np.sign(r.accuracy_change) == direction for r in rows) if direction else 0
        rejected = sum(bool(r.changed) for r in rows)
        out.append({"layer": layer, "pooled": pooled, "rejected": rejected, "n_seeds": len(rows),
                    "changed": bool(direction and 2 * agreeing > len(rows))})
    return out


def permutation_by_layer(perm_runs, *, seed: int = 0) -> pd.DataFrame:
    """Each layer permuted at once beside the poster's reading (only the first layer matters).

    ``perm_runs``: :func:`attnlib.head_perturbation.permute_heads` run over seeds
    (:func:`attnlib.seeds.run_over_seeds`). Rows ``layer 0``, ``layer 1``, ...; columns: the
    accuracy change, mean over seeds with its 95% interval over seeds and sentences; in how many
    seeds Holm's correction over that seed's sweep (:func:`tested`) rejects "no change"; whether
    the layer changes the accuracy (the pooled interval excludes 0 and most seeds' tests reject
    in that direction); the poster's reading; whether we agree.
    """
    tests = _layer_tests(perm_runs, seed=seed)
    table = pd.DataFrame({
        "accuracy change [95% interval]": [t["pooled"].format(3) for t in tests],
        "Holm rejects, seeds": [f"{t['rejected']} of {t['n_seeds']}" for t in tests],
        "changed": [t["changed"] for t in tests],
        "the poster": ["changes"] + ["does not change"] * (len(tests) - 1),
    }, index=[f"layer {t['layer']}" for t in tests])
    table["agrees"] = table["changed"] == (table["the poster"] == "changes")
    return table


def _poster_layers(tests: list[dict], n_tests: int) -> dict[str, str]:
    """The reading of the layer-by-layer test against the poster (only the first layer matters)."""
    changed = np.array([t["changed"] for t in tests], bool)
    first = tests[0]
    seeds = first["n_seeds"]
    rejected = (f"in none of the {seeds} seeds" if not first["rejected"] else
                f"in {first['rejected']} of the {seeds} seeds" if seeds > 1 else "in this model")
    first_words = (f"{first['pooled'].signed_text()}, over {_seeds_word(seeds)} and the sentences; Holm's "
                   f"test rejects \"no change\" {rejected}")
    others = [f"layer {t['layer']}" for t, c in zip(tests[1:], changed[1:]) if c]
    corrected = f"after Holm's correction for the {n_tests} tests of each seed's sweep"
    if changed[0] and not others:
        return {
            "ch12_poster_layers": (f"as the poster says, only the first layer's shuffling changes it beyond "
                                   f"noise ({first_words}), {corrected}"),
            "ch12_poster_layers_summary": "holds in our model too",
        }
    if not changed.any():
        return {
            "ch12_poster_layers": (
                f"no layer's shuffling changes it beyond noise, {corrected} and over the seeds; the first "
                f"layer's change is {first_words}. The poster's one positive claim, that the first layer "
                "matters, is therefore not reproduced, and its other layers' \"no change\" holds only in "
                "the weak sense that our test detects nothing there either"
            ),
            "ch12_poster_layers_summary": (
                "is not borne out: no single layer's shuffling changes our accuracy beyond noise, "
                "the first layer's included"
            ),
        }
    named = listed(others) if others else "no other layer"
    return {
        "ch12_poster_layers": (
            f"the first layer's shuffling {'changes' if changed[0] else 'does not change'} it beyond "
            f"noise ({first_words}), and {named} {'changes' if len(others) == 1 else 'change'} it "
            f"too, {corrected}, so the poster's reading does not hold in our model"
        ),
        "ch12_poster_layers_summary": "does not hold in our model",
    }


def _all_drop(perm_runs, seed: int) -> uncertainty.Interval:
    """The accuracy drop with every head permuted, in points: mean over seeds, 95% interval over
    seeds and sentences."""
    return uncertainty.over_seeds(-100 * perm_runs.stack(lambda r: r.change("all")), seed=seed)


def _all_rows(perm_runs) -> pd.DataFrame:
    return pd.DataFrame([_scope(r, "all").iloc[0] for r in _results(perm_runs)])


def permutation_beside_poster(perm_runs, poster, *, seed: int = 0) -> pd.DataFrame:
    """Accuracy unpermuted and with every head permuted, beside the poster's (IMDB) numbers.

    ``perm_runs``: :func:`attnlib.head_perturbation.permute_heads` over seeds; ``poster``:
    :data:`attnlib.published.POSTER_ACCURACY` (percentages, with ``original`` and ``shuffled``).
    Rows original, every head permuted, drop (points). Ours: means over the seeds; the drop
    carries its 95% interval over seeds and sentences.
    """
    results = _results(perm_runs)
    every = _all_rows(perm_runs)
    base = float(np.mean([r.base_accuracy for r in results]))
    return pd.DataFrame(
        {
            f"ours (mean over {_seeds_word(len(results))})": [
                f"{base:.3f}", f"{float(every.accuracy.mean()):.3f}", _all_drop(perm_runs, seed).format(1)],
            "poster (IMDB, their model)": [
                f"{poster['original'].value / 100:.3f}",
                f"{poster['shuffled'].value / 100:.3f}",
                f"{poster['original'].value - poster['shuffled'].value:.2f}",
            ],
        },
        index=["accuracy, original", "accuracy, every head permuted", "drop in points (95% interval)"],
    )


def _per_seed_counts(counts: Sequence[int], n: int, noun: str) -> str:
    """How many of n things passed in each seed: "none of the 16 heads in any of the 3 seeds",
    "1 of the 16 heads in one seed of 3 and none in the others", "2, 0 and 1 of the 16 heads in
    the 3 seeds"; one seed: :func:`some_of`."""
    counts = [int(c) for c in counts]
    if len(counts) == 1:
        return some_of(counts[0], n, noun)
    if not any(counts):
        return f"none of the {n} {noun} in any of the {len(counts)} seeds"
    if sum(c > 0 for c in counts) == 1:
        k = max(counts)
        return f"{some_of(k, n, noun)} in one seed of {len(counts)} and none in the others"
    return f"{listed(str(c) for c in counts)} of the {n} {noun} in the {len(counts)} seeds"


def permutation(perm_runs, poster, *, layers: int, heads: int, seed: int = 0) -> dict[str, Any]:
    """The reading of the permutation sweep: one head, every head, and layer by layer, over seeds.

    ``perm_runs``: :func:`attnlib.head_perturbation.permute_heads` over seeds (the same
    sentences and permutations for every seed's model); ``poster``:
    :data:`attnlib.published.POSTER_ACCURACY`; ``layers``, ``heads``: the model's layers and heads
    per layer. Per-head tests are within each seed (Holm over its sweep); every head at once and
    each layer are read over seeds and sentences. A head "matters" only when most seeds have one
    that passes.
    """
    results = _results(perm_runs)
    S = len(results)
    tables = [tested(r) for r in results]
    head_rows = [t[t.scope == "head"] for t in tables]
    counts = [int(h["changed"].sum()) for h in head_rows]
    seeds_with = sum(c > 0 for c in counts)
    every = _all_rows(perm_runs)
    tests = _layer_tests(perm_runs, seed=seed)
    poster_drop = poster["original"].value - poster["shuffled"].value
    drop = _all_drop(perm_runs, seed)
    drops = -100 * every.accuracy_change.to_numpy(float)
    verdict = ("barely matters" if seeds_with == 0 else "matters for a few heads" if 2 * seeds_with > S
               else f"barely matters: a head passes the test in {seeds_with} of the {S} seeds only")
    return {
        "ch12_n_perm_sentences": results[0].n_instances,
        "ch12_n_perm": results[0].n_permutations,
        "ch12_perm_seeds": S,
        "ch12_perm_models": "the first seed's model" if S == 1 else f"each of the {S} seeds' models",
        "ch12_base_acc": float(np.mean([r.base_accuracy for r in results])),
        "ch12_all_acc": float(every.accuracy.mean()),
        "ch12_all_drop": float(drop.estimate / 100),
        "ch12_all_drop_pts": float(drop.estimate),
        "ch12_all_drop_range": (f"{drops.min():.1f} to {drops.max():.1f} points across the seeds" if S > 1
                                else "one model"),
        "ch12_all_tvd": float(every.median_tvd.mean()),
        "ch12_all_flipped": float(every.flipped.mean()),
        "ch12_head_max_drop": max(0.0, float(max(-h.accuracy_change.min() for h in head_rows))),
        "ch12_head_max_tvd": float(max(h.median_tvd.max() for h in head_rows)),
        "ch12_heads_changed": int(sum(counts)),
        "ch12_heads_changed_words": _per_seed_counts(counts, layers * heads, "heads"),
        "ch12_single_verdict": verdict,
        "ch12_n_heads": layers * heads,
        "ch12_changed_layers": listed(f"layer {t['layer']}" for t in tests if t["changed"])
        if any(t["changed"] for t in tests) else "no single layer",
        "ch12_agree": int(sum(t["changed"] == (i == 0) for i, t in enumerate(tests))),
        "ch12_layers": layers,
        "ch12_n_tests": len(tables[0]),
        **_poster_layers(tests, len(tables[0])),
        "ch12_poster_drop": poster_drop,
        "ch12_all_drop_ci": f"{drop.low:.1f} to {drop.high:.1f}",
        "ch12_drop_vs_poster": {"above": "larger than", "below": "smaller than"}.get(
            drop.relation_to(poster_drop), "within noise of"),
    }


def searched_sites(perm) -> list[Site]:
    """Per layer, bottom up, the head whose permutation moved the output most (the largest
    median TVD of one model's sweep): where J&W's adversary is run."""
    heads = _scope(perm, "head")
    require_columns(heads, ("head",), "perm.table")
    top = heads.loc[heads.groupby("layer")["median_tvd"].idxmax()]
    return [Site(int(r.layer), int(r.head)) for r in top.itertuples()]


def _signed(x: float) -> str:
    """``+0.12``, ``-0.50``, and ``0.00`` for anything that rounds to zero."""
    return "0.00" if round(x, 2) == 0 else f"{x:+.2f}"


def _very(adv: pd.DataFrame, sites, threshold: float) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per head searched, in ``sites`` order: (instances, all-rows indicators, [CLS]-row indicators)
    of JSD >= threshold, one per sentence, the sentences in one order for every head (so heads pair)."""
    require_columns(adv, ("layer", "head", "instance", "eps_max_jsd", "cls_jsd"), "adv")
    if not len(sites):
        raise ValueError("sites must name at least one head")
    out, instances = [], None
    for site in sites:
        rows = adv[(adv["layer"] == site.layer) & (adv["head"] == site.head)].sort_values("instance")
        if not len(rows):
            raise ValueError(f"adv has no rows for {site}")
        if instances is not None and not np.array_equal(rows.instance.to_numpy(), instances):
            raise ValueError("every head must be searched on the same sentences")
        instances = rows.instance.to_numpy()
        out.append((instances, (rows.eps_max_jsd.to_numpy() >= threshold).astype(float),
                    (rows.cls_jsd.to_numpy() >= threshold).astype(float)))
    return out


def _adversary_stacks(advs: Sequence, sites: Sequence, threshold: float) -> tuple[list, list, list]:
    """Per layer searched (bottom up): (S, n) all-rows and [CLS]-row indicators, one row per seed,
    and the head searched in each seed. ``advs[k]``, ``sites[k]``: seed k's frame and heads."""
    if isinstance(advs, pd.DataFrame) or not len(advs) or len(advs) != len(sites):
        raise ValueError("advs and sites must be lists, one frame and one list of heads per seed, of one length")
    found = [_very(adv, s, threshold) for adv, s in zip(advs, sites)]
    depth = {len(f) for f in found}
    if len(depth) != 1:
        raise ValueError("every seed must search one head per layer, the same layers")
    instances = found[0][0][0]
    for f in found:
        if not all(np.array_equal(i, instances) for i, _, _ in f):
            raise ValueError("every seed's heads must be searched on the same sentences")
    layers = range(depth.pop())
    rows = [np.stack([f[j][1] for f in found]) for j in layers]
    cls = [np.stack([f[j][2] for f in found]) for j in layers]
    return rows, cls, [[s[j] for s in sites] for j in layers]


def adversary_shares(advs: Sequence, sites: Sequence, *, threshold: float, seed: int = 0) -> pd.DataFrame:
    """The share of sentences whose eps-max attention is at JSD >= ``threshold`` from the model's,
    per layer searched, with 95% intervals over seeds and sentences.

    ``advs``: one :func:`attnlib.head_perturbation.adversarial_heads` frame per seed; ``sites``:
    per seed, the heads searched, bottom up (one per layer, the same sentences everywhere). Rows
    ``layer l``; columns ``heads searched`` (the head in each seed), ``share ≥ {threshold}, all
    rows``, ``95% low``, ``95% high``, ``share ≥ {threshold}, [CLS] row``, ``[CLS] 95% low``,
    ``[CLS] 95% high`` (in that order). With one seed the intervals are over the sentences.
    """
    rows, cls, searched = _adversary_stacks(advs, sites, threshold)
    table = {}
    for a_rows, c_rows, heads in zip(rows, cls, searched):
        a = uncertainty.over_seeds(a_rows, seed=seed)
        c = uncertainty.over_seeds(c_rows, seed=seed)
        table[f"layer {heads[0].layer}"] = [", ".join(str(s.head) for s in heads),
                                            a.estimate, a.low, a.high, c.estimate, c.low, c.high]
    columns = ["heads searched", f"share ≥ {threshold:g}, all rows", "95% low", "95% high",
               f"share ≥ {threshold:g}, [CLS] row", "[CLS] 95% low", "[CLS] 95% high"]
    return pd.DataFrame.from_dict(table, orient="index", columns=columns)


def adversary(
    advs: Sequence, sites: Sequence, sst, *, threshold: float, eps: float, paper_eps: float, seed: int = 0
) -> dict[str, Any]:
    """The reading of J&W's adversary at one head per layer, over seeds.

    ``advs``, ``sites``: as for :func:`adversary_shares` (searched and selected at ``eps``);
    ``sst``: ``published.ADVERSARY_FRACTION["sst"]`` (J&W's two shares, by predicted class),
    selected at ``paper_eps``; ``threshold``: the JSD counted as very different (Chapter 5's).
    The shares carry 95% intervals over seeds and sentences, and the last and first layers'
    [CLS] rows are compared on the same sentences and models
    (:func:`attnlib.uncertainty.compare_over_seeds`, paired).
    """
    shares = adversary_shares(advs, sites, threshold=threshold, seed=seed)
    _, cls, searched = _adversary_stacks(advs, sites, threshold)
    gap = uncertainty.compare_over_seeds(cls[-1], cls[0], seed=seed)
    cls_first, cls_last = shares.iloc[0], shares.iloc[-1]
    S = len(advs)
    stricter = paper_eps > eps
    last = [f"layer {s.layer}, head {s.head}" for s in searched[-1]]
    return {
        "ch12_adv_n": int(cls[0].shape[1]),
        "ch12_adv_seeds": S,
        "ch12_adv_models": "the first seed's model" if S == 1 else f"each of the {S} seeds' models",
        "ch12_adv_over": "the sentences" if S == 1 else "seeds and sentences",
        "ch12_threshold": threshold,
        "ch12_adv_eps": eps,
        "ch12_adv_paper_eps": paper_eps,
        "ch12_adv_rows_min": float(shares.iloc[:, 1].min()),
        "ch12_adv_rows_max": float(shares.iloc[:, 1].max()),
        "ch12_adv_rows_low": float(shares.iloc[:, 2].min()),
        "ch12_adv_cls_first": float(cls_first.iloc[4]),
        "ch12_adv_cls_last": float(cls_last.iloc[4]),
        "ch12_adv_cls_first_ci": f"{cls_first.iloc[5]:.0%} to {cls_first.iloc[6]:.0%}",
        "ch12_adv_cls_last_ci": f"{cls_last.iloc[5]:.0%} to {cls_last.iloc[6]:.0%}",
        "ch12_adv_cls_gap": gap.says(
            f"more often in the last layer than in the first, beyond noise ({gap.seeds_text()})",
            f"less often in the last layer than in the first, beyond noise ({gap.seeds_text()})",
            "as often in the last layer as in the first, within noise (the paired interval of the "
            f"difference, {_signed(gap.difference.low)} to {_signed(gap.difference.high)}, contains 0; "
            f"{gap.seeds_text()})",
            disagree="more often in the last layer in one seed and less often in another",
        ),
        "ch12_adv_last_head": last[0] if S == 1 else f"{'; '.join(last)}, in the {S} seeds",
        "ch12_jw_sst": f"{sst[0].value:.2f} / {sst[1].value:.2f}",
        "ch12_adv_eps_caveat": (
            f"They were selected at ε = {paper_eps:g}, a looser budget than our {eps:g}: a larger "
            "ε keeps every candidate a smaller one keeps, so at their ε our shares could only rise"
            if stricter else
            f"They were selected at ε = {paper_eps:g}, ours at {eps:g}"
        ),
    }


def ablation_tested(ablation: pd.DataFrame, *, alpha: float = 0.05) -> pd.DataFrame:
    """:func:`attnlib.head_importance.head_ablation`'s frame with ``significant (Holm)``: the
    exact McNemar tests of one model's heads corrected with Holm's method over its L x h heads
    (a family of tests: one head in twenty passing at 5% by chance is not read as a change)."""
    require_columns(ablation, ("layer", "head", "change", "p_value"), "ablation")
    table = ablation.copy()
    table["significant (Holm)"] = uncertainty.holm(table["p_value"].to_numpy(float), alpha=alpha)
    return table


def masking_grids(ablation: pd.DataFrame, importance) -> dict[str, pd.DataFrame]:
    """The two (layer x head) grids of the masking figure, rows ``layer i``, columns ``head j``.

    ``ablation``: :func:`attnlib.head_importance.head_ablation`'s frame (layer, head, change);
    ``importance``: :func:`attnlib.head_importance.head_importance`'s (L, H) array. Keys:
    :data:`MASKED` and :data:`IMPORTANCE`.
    """
    require_columns(ablation, ("layer", "head", "change"), "ablation")
    grids = {
        MASKED: ablation.pivot(index="layer", columns="head", values="change"),
        IMPORTANCE: pd.DataFrame(importance),
    }
    for g in grids.values():
        g.index = [f"layer {i}" for i in g.index]
        g.columns = [f"head {j}" for j in g.columns]
    return grids


def seed_noise(accuracies) -> float:
    """The seed-to-seed noise of test accuracy: the largest gap between any two seeds' models
    (max - min; 0 for one seed)."""
    a = np.asarray(accuracies, dtype=float)
    if a.ndim != 1 or not len(a):
        raise ValueError("accuracies must be one test accuracy per seed (a non-empty 1-D array)")
    return float(a.max() - a.min())


def masking_by_seed(ablations: Sequence, seed_accuracy, *, seeds: Sequence[int] | None = None) -> pd.DataFrame:
    """One row per seed's model: its test accuracy, the heads whose masking is significant (exact
    McNemar, Holm over the model's heads: :func:`ablation_tested`), of them upward, the heads
    whose change exceeds the seed-to-seed noise (:func:`seed_noise`), and the largest change."""
    if isinstance(ablations, pd.DataFrame) or not len(ablations):
        raise ValueError("ablations must be a list with one head_ablation frame per seed")
    accuracy = np.asarray(seed_accuracy, dtype=float)
    seeds = list(range(len(ablations))) if seeds is None else [int(k) for k in seeds]
    if len(accuracy) != len(ablations) or len(seeds) != len(ablations):
        raise ValueError("one test accuracy and one seed per ablation")
    noise = seed_noise(accuracy)
    rows = {}
    for k, a, acc in zip(seeds, ablations, accuracy):
        t = ablation_tested(a)
        sig = t[t["significant (Holm)"]]
        rows[k] = {"test accuracy": float(acc), "heads significant (Holm)": len(sig),
                   "of them upward": int((sig.change > 0).sum()),
                   "heads beyond the seed noise": int((t.change.abs() > noise).sum()) if len(seeds) > 1 else 0,
                   "largest change": float(t.change.abs().max())}
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.name = "seed"
    return table


#: The two curves of the pruning figure, as the chapter names them (one dict per seed).
BY_IMPORTANCE, RANDOMLY = "by increasing importance", "in random orders"


def _check_curves(curves: Sequence) -> list:
    if isinstance(curves, dict) or not len(curves):
        raise ValueError("curves must be a list with one dict of pruning curves per seed")
    for c in curves:
        if not isinstance(c, dict) or set(c) != {BY_IMPORTANCE, RANDOMLY}:
            raise ValueError(f"each seed's curves must be {{{BY_IMPORTANCE!r}: prune_by_importance(...), "
                             f"{RANDOMLY!r}: prune_randomly(...)}}")
        require_columns(c[BY_IMPORTANCE], ("n_pruned", "fraction", "accuracy", "correct"), "by_importance")
        require_columns(c[RANDOMLY], ("n_pruned", "fraction", "accuracy", "min", "max"), "randomly")
        if not np.array_equal(c[BY_IMPORTANCE]["n_pruned"].to_numpy(), c[RANDOMLY]["n_pruned"].to_numpy()):
            raise ValueError("the two curves must be measured at the same levels of heads pruned")
    levels = [c[BY_IMPORTANCE]["n_pruned"].to_numpy() for c in curves]
    if any(not np.array_equal(lv, levels[0]) for lv in levels):
        raise ValueError("every seed's curves must be measured at the same levels")
    return list(curves)


def _orders(frame: pd.DataFrame) -> list[pd.DataFrame]:
    orders = frame.attrs.get("orders")
    if not orders:
        raise ValueError("the random curve must keep its orders (prune_randomly's frame.attrs['orders'])")
    return orders


def pruning_over_seeds(curves: Sequence) -> dict[str, pd.DataFrame]:
    """The pruning figure's curves over seeds: label -> frame (``fraction``, ``accuracy`` the mean
    over seeds, ``min`` and ``max`` the band) for :func:`attnlib.viz.plot_pruning_curve`.

    ``curves``: one ``{BY_IMPORTANCE: prune_by_importance(...), RANDOMLY: prune_randomly(...)}``
    per seed. Importance's band spans the lowest to the highest seed; the random orders' spans
    every order of every seed (the band importance must beat). Each frame's ``attrs["band"]``
    names its band for the legend.
    """
    curves = _check_curves(curves)
    S = len(curves)
    imp = np.stack([c[BY_IMPORTANCE]["accuracy"].to_numpy(float) for c in curves])  # (S, levels)
    rnd = np.stack([o["accuracy"].to_numpy(float) for c in curves for o in _orders(c[RANDOMLY])])
    per_seed_rnd = np.stack([c[RANDOMLY]["accuracy"].to_numpy(float) for c in curves])
    fraction = curves[0][BY_IMPORTANCE]["fraction"].to_numpy(float)
    n_orders = len(_orders(curves[0][RANDOMLY]))
    if S == 1:
        imp_label, rnd_label = BY_IMPORTANCE, f"in random orders (mean of {n_orders})"
    else:
        imp_label = f"by increasing importance (mean of {S} seeds)"
        rnd_label = (f"in random orders (one per seed, mean of {S})" if n_orders == 1
                     else f"in random orders (mean of {n_orders} x {S} seeds)")
    a = pd.DataFrame({"fraction": fraction, "accuracy": imp.mean(0), "min": imp.min(0), "max": imp.max(0)})
    a.attrs["band"] = "importance: lowest to highest seed" if S > 1 else "importance: one model"
    b = pd.DataFrame({"fraction": fraction, "accuracy": per_seed_rnd.mean(0), "min": rnd.min(0), "max": rnd.max(0)})
    b.attrs["band"] = f"random: lowest to highest of {_orders_words(n_orders, S)}"
    return {imp_label: a, rnd_label: b}


def _orders_words(n_orders: int, S: int) -> str:
    """"5 random orders", "2 orders x 3 seeds", "the 3 seeds' orders" (one order per seed)."""
    if S == 1:
        return f"{n_orders} random order{'s' if n_orders > 1 else ''}"
    return f"the {S} seeds' orders" if n_orders == 1 else f"{n_orders} orders x {S} seeds"


def _correct_stack(curves: list, level: int) -> np.ndarray:
    """(S, n) the importance curve's per-sentence correctness at one level, one row per seed."""
    return np.stack([np.asarray(c[BY_IMPORTANCE]["correct"].iloc[level], float) for c in curves])


def pruning_table(curves: Sequence, *, seed: int = 0) -> pd.DataFrame:
    """The pruning curves as a reader's table, one row per level of heads pruned.

    ``curves``: as for :func:`pruning_over_seeds`. Columns: the share of heads pruned; the
    accuracy by importance, the mean over seeds with its 95% interval over seeds and sentences;
    the random orders' mean and range over every order of every seed.
    """
    curves = _check_curves(curves)
    S = len(curves)
    imp = curves[0][BY_IMPORTANCE]
    rnd = np.stack([o["accuracy"].to_numpy(float) for c in curves for o in _orders(c[RANDOMLY])])
    n_orders = len(_orders(curves[0][RANDOMLY]))
    by_imp = [uncertainty.over_seeds(_correct_stack(curves, j), seed=seed).format(3) for j in range(len(imp))]
    return pd.DataFrame({
        "share pruned": [f"{f:.0%}" for f in imp["fraction"]],
        f"by importance [95% interval], mean of {_seeds_word(S)}": by_imp,
        f"{_orders_words(n_orders, S)}: mean (range)": [f"{m:.3f} ({lo:.3f}–{hi:.3f})"
                                                        for m, lo, hi in zip(rnd.mean(0), rnd.min(0), rnd.max(0))],
    }, index=pd.Index(imp["n_pruned"].astype(int).to_numpy(), name="heads pruned"))


def _versus_random(prunable: float, random_prunable: list) -> str:
    if prunable > max(random_prunable):
        return "more than any of its random orders"
    if prunable < min(random_prunable):
        return "less than every one of its random orders"
    return "within the range of its random orders"


def _versus_michel(prunable: float, michel) -> str:
    if prunable > michel["BERT (MNLI)"].value:
        return "more"
    if prunable >= michel["WMT"].value:
        return "between their WMT and BERT shares"
    return "less"


def _same_or_each(words: list[str], seeds: Sequence[int]) -> str:
    """One word when every seed says it; else each seed's word ("more in seeds 0 and 1, less in seed 2")."""
    S = len(words)
    if len(set(words)) == 1:
        return words[0] if S == 1 else f"{words[0]} (in all {S} seeds)"
    parts = {}
    for k, w in zip(seeds, words):
        parts.setdefault(w, []).append(k)
    return listed(f"{w} in seed{'s' if len(ks) > 1 else ''} {listed(str(k) for k in ks)}" for w, ks in parts.items())


def _area(curve: pd.DataFrame) -> np.ndarray:
    """(n,) per sentence: the share of pruning levels at which it is classified right (the
    curve's area, per sentence)."""
    return np.stack([np.asarray(c, float) for c in curve["correct"]]).mean(0)


def masking(ablations: Sequence, curves: Sequence, michel, *, seed_accuracy, seeds: Sequence[int] | None = None,
            seed: int = 0) -> dict[str, Any]:
    """The reading of masking one head at a time and of pruning by importance, over seeds.

    ``ablations``: one :func:`attnlib.head_importance.head_ablation` frame per seed; ``curves``:
    one ``{BY_IMPORTANCE: ..., RANDOMLY: ...}`` per seed (:func:`pruning_over_seeds`);
    ``michel``: :data:`attnlib.published.MICHEL_PRUNABLE`; ``seed_accuracy``: the seeds' test
    accuracies (the seed-to-seed noise, :func:`seed_noise`). Per-head verdicts are within each
    seed (McNemar with Holm over its heads; the change against the seed noise). Importance
    against random orders is judged on the whole curve: per sentence the share of levels it is
    right at, importance against the mean of the random orders, paired over seeds and sentences
    (:func:`attnlib.uncertainty.compare_over_seeds`). The prunable share (:func:`hi.prunable`)
    is reported per seed, and against Michel et al.'s 20% and 40% per seed. ``seeds``: the
    training seeds, to name them where they disagree (default 0, 1, ...).
    """
    if isinstance(ablations, pd.DataFrame) or not len(ablations):
        raise ValueError("ablations must be a list with one head_ablation frame per seed")
    curves = _check_curves(curves)
    if len(curves) != len(ablations):
        raise ValueError(f"one ablation and one set of curves per seed, got {len(ablations)} and {len(curves)}")
    S = len(ablations)
    seeds = list(range(S)) if seeds is None else [int(k) for k in seeds]
    if len(seeds) != S:
        raise ValueError(f"seeds must name the {S} seeds, got {seeds}")
    tested_ = [ablation_tested(a) for a in ablations]
    noise = seed_noise(seed_accuracy)
    n_heads = len(tested_[0])
    significant = [t[t["significant (Holm)"]] for t in tested_]
    beyond = [int((t.change.abs() > noise).sum()) if S > 1 else 0 for t in tested_]
    n_up = int(sum((s.change > 0).sum() for s in significant))
    prunable = [hi.prunable(c[BY_IMPORTANCE]) for c in curves]
    random_prunable = [[hi.prunable(o) for o in _orders(c[RANDOMLY])] for c in curves]
    flat = [p for ps in random_prunable for p in ps]
    area_imp = np.stack([_area(c[BY_IMPORTANCE]) for c in curves])
    area_rnd = np.stack([np.mean([_area(o) for o in _orders(c[RANDOMLY])], axis=0) for c in curves])
    versus = uncertainty.compare_over_seeds(area_imp, area_rnd, seed=seed)
    last = [float(c[BY_IMPORTANCE].accuracy.iloc[-2]) for c in curves]
    last_heads = [str(c[BY_IMPORTANCE].pruned.iloc[-1][-1]) for c in curves]
    n_significant = [len(s) for s in significant]
    return {
        "ch12_n_significant": int(sum(n_significant)),
        "ch12_n_beyond_seeds": int(sum(beyond)),
        "ch12_seed_noise": noise,
        "ch12_mask_seeds": S,
        "ch12_largest_change": float(max(t.change.abs().max() for t in tested_)),
        "ch12_n_up": n_up,
        "ch12_beyond_seeds_words": _per_seed_counts(beyond, n_heads, "heads"),
        "ch12_significant_words": (
            _per_seed_counts(n_significant, n_heads, "heads") if not sum(n_significant)
            else f"{_per_seed_counts(n_significant, n_heads, 'heads')} "
                 + (f"({'upward' if n_up else 'downward'})" if sum(n_significant) == 1
                    else f"({n_up} of them upward)")
        ),
        "ch12_prunable": float(np.mean(prunable)),
        "ch12_prunable_seeds": listed(f"{p:.0%}" for p in prunable),
        "ch12_prunable_random_min": float(min(flat)),
        "ch12_prunable_random_max": float(max(flat)),
        "ch12_importance_vs_random": _same_or_each(
            [_versus_random(p, r) for p, r in zip(prunable, random_prunable)], seeds),
        "ch12_curve_vs_random": versus.says(
            f"keeps more sentences right than the random orders do, beyond noise ({versus.seeds_text()})",
            f"keeps fewer sentences right than the random orders do, beyond noise ({versus.seeds_text()})",
            tie=f"is within noise of the random orders ({versus.difference.signed_text()}, over seeds and "
                f"sentences; {versus.seeds_text()})",
            disagree=f"keeps more sentences right than the random orders in some seeds and fewer in others "
                     f"({versus.seeds_text()}): the seeds disagree",
        ),
        "ch12_curve_gap": versus.difference.signed_text(),
        "ch12_prune_last": float(np.mean(last)),
        "ch12_prune_last_range": f"{min(last):.3f} to {max(last):.3f}" if S > 1 else f"{last[0]:.3f}",
        "ch12_last_head": f"{'; '.join(last_heads)}, in the {S} seeds" if S > 1 else last_heads[0],
        "ch12_prune_vs_michel": _same_or_each([_versus_michel(p, michel) for p in prunable], seeds),
    }


_KEYS_COLUMNS = ("layer", "accuracy", "base_accuracy", "jsd", "n_train", "n_test")


def _kept(keys: pd.DataFrame) -> pd.DataFrame:
    """The runs that keep the accuracy within one point of the model's own."""
    return keys[keys.accuracy >= keys.base_accuracy - 0.01]


def keys(keys: pd.DataFrame) -> dict[str, Any]:
    """The reading of the adversarial-keys sweep.

    ``keys``: :func:`attnlib.adversarial_keys.adversarial_keys_sweep`'s frame (layer,
    accuracy, base_accuracy, jsd, n_train, n_test). A run "keeps" the accuracy within one point.
    """
    require_columns(keys, _KEYS_COLUMNS, "keys")
    kept = _kept(keys)
    return {
        "ch12_keys_base": float(keys.base_accuracy.iloc[0]),
        "ch12_keys_kept_jsd": float(kept.jsd.max()) if len(kept) else 0.0,
        "ch12_keys_kept_layer": int(kept.loc[kept.jsd.idxmax(), "layer"]) if len(kept) else -1,
        "ch12_keys_min_acc": float(keys.accuracy.min()),
        "ch12_keys_max_jsd": float(keys.jsd.max()),
        "ch12_keys_n": int(keys.n_train.iloc[0]),
        "ch12_keys_test": int(keys.n_test.iloc[0]),
    }


def _accuracy_interval(accuracy: float, n: int) -> uncertainty.Interval:
    """An accuracy over ``n`` test sentences, kept as a share, with Wilson's interval."""
    return uncertainty.proportion(int(round(float(accuracy) * n)), n)


def keys_beside_poster(keys: pd.DataFrame, poster) -> pd.DataFrame:
    """The run that moves attention furthest while keeping the accuracy within one point (else
    the furthest of all), beside the poster's IMDB figures.

    ``poster``: ``published.POSTER_ACCURACY`` (``original`` and ``adversarial keys``, in %).
    Our two accuracies carry 95% Wilson intervals over the ``n_test`` test sentences (the sweep
    keeps counts, not per-sentence predictions); the poster gives no interval and no JSD.
    Rows: accuracy original, accuracy with adversarial keys, the attention's mean JSD moved.
    """
    require_columns(keys, _KEYS_COLUMNS, "keys")
    kept = _kept(keys)
    best = kept.loc[kept.jsd.idxmax()] if len(kept) else keys.loc[keys.jsd.idxmax()]
    n = int(best.n_test)
    theirs = [f"{float(poster[k].value) / 100:.3f}" for k in ("original", "adversarial keys")]
    return pd.DataFrame(
        {
            f"ours (rt-polarity, layer {int(best.layer)})": [str(_accuracy_interval(best.base_accuracy, n)),
                                                            str(_accuracy_interval(best.accuracy, n)),
                                                            f"{float(best.jsd):.3f}"],
            "poster (IMDB, their model)": [*theirs, "n/a"],
        },
        index=["accuracy, original [95% interval]", "accuracy, adversarial keys [95% interval]",
               "attention JSD moved"],
    )
