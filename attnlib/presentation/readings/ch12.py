"""Chapter 12 (heads): the tables and the numbers its prose reads off permuting, searching,
masking and pruning heads, and adversarial keys.

Each function takes the chapter's results and returns ``{glued name: value}`` (the table
builders return the frame a reader sees).
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from ...experiments import head_importance as hi
from .wording import require_columns

__all__ = [
    "permutation_by_layer",
    "permutation_beside_poster",
    "permutation",
    "adversary",
    "masking_grids",
    "masking",
    "keys",
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


def permutation_by_layer(perm) -> pd.DataFrame:
    """Each layer permuted at once beside the poster's reading (only the first layer matters).

    ``perm``: :func:`attnlib.head_perturbation.permute_heads`' result. A change counts when it
    exceeds two standard errors of the paired per-sentence accuracy differences. Rows
    ``layer 0``, ``layer 1``, ...; columns accuracy change, 2 s.e., changed, the poster, agrees.
    """
    layers = _scope(perm, "layer").set_index("layer")
    by_layer = pd.DataFrame(
        {
            "accuracy change": layers["accuracy_change"],
            "2 s.e.": 2 * layers["change_se"],
            "changed": layers["accuracy_change"].abs() > 2 * layers["change_se"],
            "the poster": ["changes"] + ["does not change"] * (len(layers) - 1),
        }
    )
    by_layer["agrees"] = by_layer["changed"] == (by_layer["the poster"] == "changes")
    by_layer.index = [f"layer {i}" for i in by_layer.index]
    return by_layer


def permutation_beside_poster(perm, poster) -> pd.DataFrame:
    """Accuracy unpermuted and with every head permuted, beside the poster's (IMDB) numbers.

    ``perm``: :func:`attnlib.head_perturbation.permute_heads`' result; ``poster``:
    :data:`attnlib.published.POSTER_ACCURACY` (percentages, with ``original`` and ``shuffled``).
    """
    every = _scope(perm, "all").iloc[0]
    return pd.DataFrame(
        {
            "accuracy": [perm.base_accuracy, every.accuracy],
            "poster (IMDB, their model)": [
                poster["original"].value / 100,
                poster["shuffled"].value / 100,
            ],
        },
        index=["original", "every head permuted"],
    )


def permutation(perm, by_layer: pd.DataFrame, poster, *, layers: int, heads: int) -> dict[str, Any]:
    """The reading of the permutation sweep: one head, every head, and layer by layer.

    ``perm``: :func:`attnlib.head_perturbation.permute_heads`' result; ``by_layer``:
    :func:`permutation_by_layer`'s table; ``poster``: :data:`attnlib.published.POSTER_ACCURACY`;
    ``layers``, ``heads``: the model's layers and heads per layer.
    """
    require_columns(by_layer, ("changed", "agrees"), "by_layer")
    every = _scope(perm, "all").iloc[0]
    head_rows = _scope(perm, "head")
    n_heads_changed = int((head_rows.accuracy_change.abs() > 2 * head_rows.change_se).sum())
    changed_layers = [i for i, c in enumerate(by_layer["changed"]) if c]
    poster_drop = poster["original"].value - poster["shuffled"].value
    drop_pts = 100 * float(-every.accuracy_change)
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
        "ch12_poster_drop": poster_drop,
        "ch12_drop_vs_poster": (
            "larger than"
            if drop_pts > poster_drop + 2
            else ("smaller than" if drop_pts < poster_drop - 2 else "about the same as")
        ),
    }


def adversary(
    adv: pd.DataFrame, very: pd.DataFrame, sites, sst, *, threshold: float
) -> dict[str, Any]:
    """The reading of J&W's adversary at one head per layer.

    ``adv``: :func:`attnlib.head_perturbation.adversarial_heads`' frame; ``very``: the share of
    sentences at or above the threshold per head searched (columns: all rows, [CLS] row; rows
    in layer order); ``sites``: the heads searched, bottom up; ``sst``:
    ``published.ADVERSARY_FRACTION["sst"]`` (J&W's two shares, by predicted class);
    ``threshold``: the JSD counted as very different (Chapter 5's).
    """
    require_columns(adv, ("instance",), "adv")
    if very.shape[1] != 2 or not len(very):
        raise ValueError("very must have one row per head searched and two columns (all rows, [CLS])")
    return {
        "ch12_adv_n": int(adv.instance.nunique()),
        "ch12_threshold": threshold,
        "ch12_adv_rows_min": float(very.iloc[:, 0].min()),
        "ch12_adv_rows_max": float(very.iloc[:, 0].max()),
        "ch12_adv_cls_first": float(very.iloc[0, 1]),
        "ch12_adv_cls_last": float(very.iloc[-1, 1]),
        "ch12_adv_last_head": str(sites[-1]),
        "ch12_jw_sst": f"{sst[0].value:.2f} / {sst[1].value:.2f}",
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
    return {
        "ch12_n_significant": len(significant),
        "ch12_n_beyond_seeds": len(beyond_seeds),
        "ch12_seed_noise": seed_noise,
        "ch12_n_seeds": n_seeds,
        "ch12_largest_change": float(ablation.change.abs().max()),
        "ch12_n_up": int((significant.change > 0).sum()),
        "ch12_prunable": prunable,
        "ch12_prunable_random_min": float(min(random_prunable)),
        "ch12_prunable_random_max": float(max(random_prunable)),
        "ch12_importance_vs_random": _versus_random(prunable, random_prunable),
        "ch12_prune_last": float(curve.accuracy.iloc[-2]),
        "ch12_last_head": str(curve.pruned.iloc[-1][-1]),
        "ch12_prune_vs_michel": _versus_michel(prunable, michel),
    }


def keys(keys: pd.DataFrame) -> dict[str, Any]:
    """The reading of the adversarial-keys sweep.

    ``keys``: :func:`attnlib.adversarial_keys.adversarial_keys_sweep`'s frame (layer,
    accuracy, base_accuracy, jsd, n_train, n_test). A run "keeps" the accuracy within one point.
    """
    require_columns(keys, ("layer", "accuracy", "base_accuracy", "jsd", "n_train", "n_test"), "keys")
    kept = keys[keys.accuracy >= keys.base_accuracy - 0.01]
    return {
        "ch12_keys_base": float(keys.base_accuracy.iloc[0]),
        "ch12_keys_kept_jsd": float(kept.jsd.max()) if len(kept) else 0.0,
        "ch12_keys_kept_layer": int(kept.loc[kept.jsd.idxmax(), "layer"]) if len(kept) else -1,
        "ch12_keys_min_acc": float(keys.accuracy.min()),
        "ch12_keys_max_jsd": float(keys.jsd.max()),
        "ch12_keys_n": int(keys.n_train.iloc[0]),
        "ch12_keys_test": int(keys.n_test.iloc[0]),
    }
