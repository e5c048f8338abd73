"""Chapter 12 (heads): the tables and the numbers its prose reads off permuting, searching,
masking and pruning heads, and adversarial keys.

Each function takes the chapter's results and returns ``{glued name: value}`` (the table
builders return the frame a reader sees).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ... import uncertainty
from ...experiments import head_importance as hi
from .wording import listed, require_columns, some_of

__all__ = [
    "tested",
    "permutation_by_layer",
    "permutation_beside_poster",
    "permutation",
    "adversary_shares",
    "adversary",
    "masking_grids",
    "masking",
    "pruning_table",
    "keys",
    "keys_beside_poster",
    "MASKED",
    "IMPORTANCE",

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


def permutation_by_layer(perm) -> pd.DataFrame:
    """Each layer permuted at once beside the poster's reading (only the first layer matters).

    ``perm``: :func:`attnlib.head_perturbation.permute_heads`' result. A change counts when
    Holm's correction over the whole sweep (:func:`tested`) rejects "no change". Rows
    ``layer 0``, ``layer 1``, ...; columns accuracy change, 2 s.e., p, changed (Holm), the
    poster, agrees.
    """
    table = tested(perm)
    layers = table[table.scope == "layer"].set_index("layer")
    by_layer = pd.DataFrame(
        {
            "accuracy change": layers["accuracy_change"],
            "2 s.e.": 2 * layers["change_se"],
            "p": layers["p"],
            "changed (Holm)": layers["changed"],
            "the poster": ["changes"] + ["does not change"] * (len(layers) - 1),
        }
    )
    by_layer["agrees"] = by_layer["changed (Holm)"] == (by_layer["the poster"] == "changes")
    by_layer.index = [f"layer {i}" for i in by_layer.index]
    return by_layer


def _poster_layers(by_layer: pd.DataFrame, n_tests: int) -> dict[str, str]:
    """The reading of the layer-by-layer test against the poster (only the first layer matters)."""
    changed = by_layer["changed (Holm)"].to_numpy(bool)
    first = by_layer.iloc[0]
    first_words = f"{first['accuracy change']:+.3f} (2 s.e. {first['2 s.e.']:.3f})"
    others = [name for name, c in zip(by_layer.index[1:], changed[1:]) if c]
    if changed[0] and not others:
        return {
            "ch12_poster_layers": (
                f"as the poster says, only the first layer's shuffling changes it beyond noise "
                f"({first_words}), after Holm's correction for the {n_tests} tests of this sweep"
            ),
            "ch12_poster_layers_summary": "holds in our model too",
        }
    if not changed.any():
        return {
            "ch12_poster_layers": (
                f"no layer's shuffling changes it beyond noise once the {n_tests} tests of this "
                f"sweep are corrected for (Holm's method at 5%); the first layer's change is "
                f"{first_words}. The poster's one positive claim, that the first layer matters, "
                "is therefore not reproduced, and its other layers' \"no change\" holds only in "
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
            f"too, after Holm's correction for the {n_tests} tests of this sweep, so the poster's "
            "reading does not hold in our model"
        ),
        "ch12_poster_layers_summary": "does not hold in our model",
    }


def _drop_interval(perm) -> tuple[float, float]:
    """The 95% interval, in points, of the accuracy drop with every head permuted (normal, from
    the paired per-sentence standard error)."""
    every = _scope(perm, "all").iloc[0]
    iv = uncertainty.normal_interval(-float(every.accuracy_change), float(every.change_se), int(perm.n_instances))
    return 100 * iv.low, 100 * iv.high


def permutation_beside_poster(perm, poster) -> pd.DataFrame:
    """Accuracy unpermuted and with every head permuted, beside the poster's (IMDB) numbers.

    ``perm``: :func:`attnlib.head_perturbation.permute_heads`' result; ``poster``:
    :data:`attnlib.published.POSTER_ACCURACY` (percentages, with ``original`` and ``shuffled``).
    Rows original, every head permuted, drop (points); ours carries the drop's 95% interval.
    """
    every = _scope(perm, "all").iloc[0]
    low, high = _drop_interval(perm)
    return pd.DataFrame(
        {
            "ours": [f"{perm.base_accuracy:.3f}", f"{float(every.accuracy):.3f}",
                     f"{-100 * float(every.accuracy_change):.1f} [{low:.1f}, {high:.1f}]"],
            "poster (IMDB, their model)": [
                f"{poster['original'].value / 100:.3f}",
                f"{poster['shuffled'].value / 100:.3f}",
                f"{poster['original'].value - poster['shuffled'].value:.2f}",
            ],
        },
        index=["accuracy, original", "accuracy, every head permuted", "drop in points (95% interval)"],
    )


def permutation(perm, by_layer: pd.DataFrame, poster, *, layers: int, heads: int) -> dict[str, Any]:
    """The reading of the permutation sweep: one head, every head, and layer by layer.

    ``perm``: :func:`attnlib.head_perturbation.permute_heads`' result; ``by_layer``:
    :func:`permutation_by_layer`'s table; ``poster``: :data:`attnlib.published.POSTER_ACCURACY`;
    ``layers``, ``heads``: the model's layers and heads per layer.
    """
    require_columns(by_layer, ("changed (Holm)", "agrees", "accuracy change", "2 s.e."), "by_layer")
    every = _scope(perm, "all").iloc[0]
    table = tested(perm)
    head_rows = table[table.scope == "head"]
    n_heads_changed = int(head_rows["changed"].sum())
    changed_layers = [i for i, c in enumerate(by_layer["changed (Holm)"]) if c]
    poster_drop = poster["original"].value - poster["shuffled"].value
    drop_pts = 100 * float(-every.accuracy_change)
    drop_low, drop_high = _drop_interval(perm)
    return {
        "ch12_n_perm_sentences": perm.n_instances,
        "ch12_n_perm": perm.n_permutations,
        "ch12_base_acc": perm.base_accuracy,
        "ch12_all_acc": float(every.accuracy),
        "ch12_all_drop": float(-every.accuracy_change),
        "ch12_all_drop_pts": drop_pts,
        "ch12_all_tvd": float(every.median_tvd),
        "ch12_all_flipped": float(every.flipped),
        "ch12_head_max_drop": max(0.0, float(-head_rows.accuracy_change.min())),
        "ch12_head_max_tvd": float(head_rows.median_tvd.max()),
        "ch12_heads_changed": n_heads_changed,
        "ch12_heads_changed_words": some_of(n_heads_changed, layers * heads, "heads"),
        "ch12_single_verdict": (
            "barely matters" if n_heads_changed == 0 else "matters for a few heads"
        ),
        "ch12_n_heads": layers * heads,
        "ch12_changed_layers": (
            "no single layer"
            if not changed_layers
            else ", ".join(f"layer {i}" for i in changed_layers)
        ),
        "ch12_agree": int(by_layer["agrees"].sum()),
        "ch12_layers": layers,
        "ch12_n_tests": len(table),
        **_poster_layers(by_layer, len(table)),
        "ch12_poster_drop": poster_drop,
        "ch12_all_drop_ci": f"{drop_low:.1f} to {drop_high:.1f}",
        "ch12_drop_vs_poster": (
            "larger than"
            if drop_low > poster_drop
            else ("smaller than" if drop_high < poster_drop else "within noise of")
        ),
    }


def _signed(x: float) -> str:
    """``+0.12``, ``-0.50``, and ``0.00`` for anything that rounds to zero."""
    return "0.00" if round(x, 2) == 0 else f"{x:+.2f}"


def _site_name(layer: int, head: int) -> str:
    return f"layer {layer}, head {head}"


def _very(adv: pd.DataFrame, sites, threshold: float) -> dict:
    """Per head searched, in ``sites`` order: (all rows, [CLS] row) indicators of JSD >= threshold,
    one per sentence, the sentences in one order for every head (so heads pair)."""
    require_columns(adv, ("layer", "head", "instance", "eps_max_jsd", "cls_jsd"), "adv")
    if not len(sites):
        raise ValueError("sites must name at least one head")
    out, instances = {}, None
    for site in sites:
        rows = adv[(adv["layer"] == site.layer) & (adv["head"] == site.head)].sort_values("instance")
        if not len(rows):
            raise ValueError(f"adv has no rows for {site}")
        if instances is not None and not np.array_equal(rows.instance.to_numpy(), instances):
            raise ValueError("every head must be searched on the same sentences")
        instances = rows.instance.to_numpy()
        out[_site_name(site.layer, site.head)] = (
            (rows.eps_max_jsd.to_numpy() >= threshold).astype(float),
            (rows.cls_jsd.to_numpy() >= threshold).astype(float),
        )
    return out


def adversary_shares(adv: pd.DataFrame, sites, *, threshold: float, seed: int = 0) -> pd.DataFrame:
    """The share of sentences whose eps-max attention is at JSD >= ``threshold`` from the model's,
    per head searched, with 95% bootstrap intervals over the sentences.

    ``adv``: :func:`attnlib.head_perturbation.adversarial_heads`' frame; ``sites``: the heads
    searched, bottom up. Rows ``layer l, head h``; columns ``share ≥ {threshold}, all rows``,
    ``95% low``, ``95% high``, ``share ≥ {threshold}, [CLS] row``, ``[CLS] 95% low``,
    ``[CLS] 95% high`` (in that order).
    """
    rows = {}
    for name, (all_rows, cls) in _very(adv, sites, threshold).items():
        a, c = uncertainty.bootstrap(np.stack([all_rows, cls], axis=1), seed=seed)
        rows[name] = [a.estimate, a.low, a.high, c.estimate, c.low, c.high]
    columns = [f"share ≥ {threshold:g}, all rows", "95% low", "95% high",
               f"share ≥ {threshold:g}, [CLS] row", "[CLS] 95% low", "[CLS] 95% high"]
    return pd.DataFrame.from_dict(rows, orient="index", columns=columns)


def adversary(
    adv: pd.DataFrame, sites, sst, *, threshold: float, eps: float, paper_eps: float, seed: int = 0
) -> dict[str, Any]:
    """The reading of J&W's adversary at one head per layer.

    ``adv``: :func:`attnlib.head_perturbation.adversarial_heads`' frame, searched and selected
    at ``eps``; ``sites``: the heads searched, bottom up (the same sentences at each); ``sst``:
    ``published.ADVERSARY_FRACTION["sst"]`` (J&W's two shares, by predicted class), selected at
    ``paper_eps``; ``threshold``: the JSD counted as very different (Chapter 5's). The shares
    carry 95% bootstrap intervals, and the first and last layers' [CLS] rows are compared on
    the same sentences.
    """
    shares = adversary_shares(adv, sites, threshold=threshold, seed=seed)
    very = _very(adv, sites, threshold)
    first, last = very[shares.index[0]][1], very[shares.index[-1]][1]
    gap = uncertainty.compare(last, first, paired=True, seed=seed)
    cls_first, cls_last = shares.iloc[0], shares.iloc[-1]
    stricter = paper_eps > eps
    return {
        "ch12_adv_n": int(adv.instance.nunique()),
        "ch12_threshold": threshold,
        "ch12_adv_eps": eps,
        "ch12_adv_paper_eps": paper_eps,
        "ch12_adv_rows_min": float(shares.iloc[:, 0].min()),
        "ch12_adv_rows_max": float(shares.iloc[:, 0].max()),
        "ch12_adv_rows_low": float(shares.iloc[:, 1].min()),
        "ch12_adv_cls_first": float(cls_first.iloc[3]),
        "ch12_adv_cls_last": float(cls_last.iloc[3]),
        "ch12_adv_cls_first_ci": f"{cls_first.iloc[4]:.0%} to {cls_first.iloc[5]:.0%}",
        "ch12_adv_cls_last_ci": f"{cls_last.iloc[4]:.0%} to {cls_last.iloc[5]:.0%}",
        "ch12_adv_cls_gap": gap.says(
            "more often in the last layer than in the first, beyond noise",
            "less often in the last layer than in the first, beyond noise",
            "as often in the last layer as in the first, within noise (the paired interval of "
            f"the difference, {_signed(gap.difference.low)} to {_signed(gap.difference.high)}, contains 0)",
        ),
        "ch12_adv_last_head": str(sites[-1]),
        "ch12_jw_sst": f"{sst[0].value:.2f} / {sst[1].value:.2f}",
        "ch12_adv_eps_caveat": (
            f"They were selected at ε = {paper_eps:g}, a looser budget than our {eps:g}: a larger "
            "ε keeps every candidate a smaller one keeps, so at their ε our shares could only rise"
            if stricter else
            f"They were selected at ε = {paper_eps:g}, ours at {eps:g}"
        ),
    }


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


def _versus_random(prunable: float, random_prunable: list) -> str:
    if prunable > max(random_prunable):
        return "more than any of the random orders, as Michel et al.'s importance score promises"
    if prunable < min(random_prunable):
        return "less than every random order: the opposite of Michel et al.'s premise, on this model"
    return (
        "within the range of the random orders: on this model the importance order is not "
        "distinguishable from chance"
    )


def _versus_michel(prunable: float, michel) -> str:
    if prunable > michel["BERT (MNLI)"].value:
        return "more"
    if prunable >= michel["WMT"].value:
        return "between their WMT and BERT shares"
    return "less"


def masking(
    ablation: pd.DataFrame, curves: dict, michel, *, seed_noise: float, n_seeds: int
) -> dict[str, Any]:
    """The reading of masking one head at a time and of pruning by importance.

    ``ablation``: :func:`attnlib.head_importance.head_ablation`'s frame; ``curves``: the
    pruning curves ``{"by increasing importance": prune_by_importance(...), "in random orders
    (mean of 5)": prune_randomly(...)}``; ``michel``: :data:`attnlib.published.MICHEL_PRUNABLE`;
    ``seed_noise``: the largest test-accuracy gap between seeds; ``n_seeds``: how many other
    seeds that gap is over.
    """
    require_columns(ablation, ("significant", "change"), "ablation")
    curve = curves["by increasing importance"]
    # the largest share pruned before the accuracy falls by more than a point, beyond noise
    prunable = hi.prunable(curve)
    random_prunable = [
        hi.prunable(c) for c in curves["in random orders (mean of 5)"].attrs["orders"]
    ]
    significant = ablation[ablation.significant]
    beyond_seeds = ablation[ablation.change.abs() > seed_noise]
    n_up = int((significant.change > 0).sum())
    return {
        "ch12_n_significant": len(significant),
        "ch12_n_beyond_seeds": len(beyond_seeds),
        "ch12_seed_noise": seed_noise,
        "ch12_n_seeds": n_seeds,
        "ch12_other_seeds": f"{n_seeds} other seed" + ("" if n_seeds == 1 else "s"),
        "ch12_largest_change": float(ablation.change.abs().max()),
        "ch12_n_up": n_up,
        "ch12_beyond_seeds_words": some_of(len(beyond_seeds), len(ablation), "heads"),
        "ch12_significant_words": (
            "none" if not len(significant)
            else f"{len(significant)} ({n_up} of them upward)"
        ),
        "ch12_prunable": prunable,
        "ch12_prunable_random_min": float(min(random_prunable)),
        "ch12_prunable_random_max": float(max(random_prunable)),
        "ch12_importance_vs_random": _versus_random(prunable, random_prunable),
        "ch12_prune_last": float(curve.accuracy.iloc[-2]),
        "ch12_last_head": str(curve.pruned.iloc[-1][-1]),
        "ch12_prune_vs_michel": _versus_michel(prunable, michel),
    }


_KEYS_COLUMNS = ("layer", "accuracy", "base_accuracy", "jsd", "n_train", "n_test")


def pruning_table(by_importance: pd.DataFrame, randomly: pd.DataFrame) -> pd.DataFrame:
    """The pruning curves as a reader's table, one row per level of heads pruned.

    ``by_importance``: :func:`attnlib.head_importance.prune_by_importance` (n_pruned, fraction,
    accuracy, low, high); ``randomly``: :func:`attnlib.head_importance.prune_randomly` at the
    same levels (accuracy, min, max over the orders). Columns: the share of heads pruned, the
    accuracy by importance with its 95% interval, and the random orders' mean and range.
    """
    require_columns(by_importance, ("n_pruned", "fraction", "accuracy", "low", "high"), "by_importance")
    require_columns(randomly, ("n_pruned", "accuracy", "min", "max"), "randomly")
    if not np.array_equal(by_importance["n_pruned"].to_numpy(), randomly["n_pruned"].to_numpy()):
        raise ValueError("the two curves must be measured at the same levels of heads pruned")
    imp, rnd = by_importance, randomly
    orders = len(randomly.attrs.get("orders", ())) or "the"
    table = pd.DataFrame({
        "share pruned": [f"{f:.0%}" for f in imp["fraction"]],
        "by importance (95% interval)": [f"{a:.3f} [{lo:.3f}, {hi:.3f}]"
                                         for a, lo, hi in zip(imp["accuracy"], imp["low"], imp["high"])],
        f"{orders} random orders: mean (range)": [f"{a:.3f} ({lo:.3f}–{hi:.3f})"
                                                  for a, lo, hi in zip(rnd["accuracy"], rnd["min"], rnd["max"])],
    }, index=pd.Index(imp["n_pruned"].astype(int).to_numpy(), name="heads pruned"))
    return table


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
