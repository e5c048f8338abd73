"""Chapter 11 (identifiability): what the prose reads off effective attention and token identity.

Each function takes the chapter's results and returns ``{glued name: value}`` for
:func:`attnlib.presentation.glue.glue_all`.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from ... import uncertainty
from .wording import listed

__all__ = ["layer_list", "effective_mass", "token_identity", "token_identity_beside_brunner"]

_MASS_COLUMNS = tuple(f"{k} {g}" for g in ("[CLS]", "[SEP]", "punctuation") for k in ("raw", "effective"))


def layer_list(layers: Iterable[int], *, of: Iterable[int] | None = None) -> str:
    """Layers in words: ``[]`` -> "no layer", ``[3]`` -> "layer 3", ``[1, 2, 4]`` -> "layers 1, 2
    and 4"; three or more consecutive layers as a range, ``[2, 3, 4, 5, 6]`` -> "layers 2–6"; and
    "every layer" when ``of`` (all the model's layers) is given and every one of them is listed."""
    layers = [int(x) for x in layers]
    if not layers:
        return "no layer"
    if of is not None and len(layers) > 1 and sorted(set(layers)) == sorted({int(x) for x in of}):
        return "every layer"
    if len(layers) == 1:
        return "layer " + str(layers[0])
    runs: list[list[int]] = []
    for layer in layers:
        if runs and layer == runs[-1][-1] + 1:
            runs[-1].append(layer)
        else:
            runs.append([layer])
    parts = []
    for r in runs:
        parts += [f"{r[0]}–{r[-1]}"] if len(r) >= 3 else [str(x) for x in r]
    return "layers " + listed(parts)


def effective_mass(mass: pd.DataFrame, *, brunner: Mapping) -> dict[str, Any]:
    """Where raw and effective attention put their mass on [CLS], [SEP] and punctuation, by layer.

    ``mass``: one row per layer (1-based index), the columns ``raw <g>`` and ``effective <g>``
    for g in [CLS], [SEP] and punctuation (means of
    :func:`attnlib.identifiability.trace_statistics`). ``brunner``:
    :data:`attnlib.published.BRUNNER_SEP_MASS` (its ``"raw, layers 5-10"`` range and
    ``"effective, at most"`` value).
    """
    missing = [c for c in _MASS_COLUMNS if c not in getattr(mass, "columns", ())]
    if missing:
        raise ValueError(f"mass lacks the columns {missing}")
    if len(mass) == 0:
        raise ValueError("mass has no layer")
    sep_up = [int(layer) for layer in mass.index if mass.loc[layer, "effective [SEP]"] > mass.loc[layer, "raw [SEP]"]]
    sep_down = [int(layer) for layer in mass.index if mass.loc[layer, "effective [SEP]"] < mass.loc[layer, "raw [SEP]"]]
    cls_drop = mass["raw [CLS]"] - mass["effective [CLS]"]
    punct_down = [
        int(layer)
        for layer in mass.index
        if mass.loc[layer, "effective punctuation"] < mass.loc[layer, "raw punctuation"]
    ]
    lo, hi = brunner["raw, layers 5-10"]
    return {
        "ch11_sep_up": layer_list(sep_up, of=mass.index),
        "ch11_sep_down": layer_list(sep_down, of=mass.index),
        "ch11_raw_sep_max": float(mass["raw [SEP]"].max()),
        "ch11_raw_sep_max_layer": int(mass["raw [SEP]"].idxmax()),
        "ch11_eff_sep_max": float(mass["effective [SEP]"].max()),
        "ch11_raw_cls_max": float(mass["raw [CLS]"].max()),
        "ch11_parks": "[CLS]" if mass["raw [CLS]"].mean() > mass["raw [SEP]"].mean() else "[SEP]",
        "ch11_cls_down": layer_list([int(layer) for layer in mass.index if cls_drop[layer] > 0], of=mass.index),
        "ch11_punct_down": layer_list(punct_down, of=mass.index),
        "ch11_brunner_sep_raw": f"{lo.value:.2f}–{hi.value:.2f}",
        "ch11_brunner_sep_eff": f"{brunner['effective, at most'].value:.1f}",
    }


def token_identity(table: pd.DataFrame, identity, *, probe_tokens: int, brunner: Mapping) -> dict[str, Any]:
    """What the token-identity paragraph reads: the last layer's scores, the naive probe's low, vs Brunner.

    ``table``: layer x "probe/distance" accuracies (:meth:`TokenIdentity.pivot`), with the
    columns naive/cosine, naive/l2, linear/cosine, linear/l2, mlp/cosine and mlp/l2; the last
    layer is its largest index. ``identity``: the :class:`attnlib.token_identity.TokenIdentity`
    it came from (training tokens, chance). ``probe_tokens``: the longest sentence the probes
    saw. ``brunner``: :data:`attnlib.published.BRUNNER_TOKEN_IDENTITY`. Our naive cosine score
    is "about as many" as Brunner's within 0.2 either way, else "far more" or "far fewer"; the
    cosine probes "identify more tokens than" their L2 twins when both (linear and MLP) are at
    least as high at the last layer.
    """
    need = [f"{p}/{d}" for p in ("naive", "linear", "mlp") for d in ("cosine", "l2")]
    missing = [c for c in need if c not in getattr(table, "columns", ())]
    if missing:
        raise ValueError(f"table lacks the columns {missing} (TokenIdentity.pivot() of all probes and distances)")
    last = int(table.index.max())
    out: dict[str, Any] = {
        "ch11_probe_tokens": probe_tokens,
        "ch11_n_train_tokens": int(identity.n_train_tokens),
        "ch11_tid_last": last,
    }
    for col in table.columns:
        out[f"ch11_tid_{col.replace('/', '_')}_last"] = float(table.loc[last, col])
    out["ch11_tid_naive_min"] = float(table[["naive/cosine", "naive/l2"]].min().min())
    out["ch11_tid_naive_min_layer"] = int(table[["naive/cosine", "naive/l2"]].min(axis=1).idxmin())
    out["ch11_tid_chance"] = float(identity.chance)
    best = table.loc[last].idxmax()
    out["ch11_tid_best"] = best
    out["ch11_tid_best_value"] = float(table.loc[last, best])
    naive_last = float(table.loc[last, "naive/cosine"])
    theirs = brunner["naive/cosine"].value
    out["ch11_tid_vs_brunner"] = (
        "far more" if naive_last > theirs + 0.2 else "about as many" if naive_last > theirs - 0.2 else "far fewer"
    )
    out["ch11_brunner_naive_cos"] = theirs
    cos_better = all(table.loc[last, f"{p}/cosine"] >= table.loc[last, f"{p}/l2"] for p in ("linear", "mlp"))
    out["ch11_tid_cos"] = "identify more tokens than" if cos_better else "do not always beat"
    return out


def token_identity_beside_brunner(identity, *, brunner: Mapping) -> pd.DataFrame:
    """Our first and last layer's token identifiability beside Brunner et al.'s (their Fig. 2a).

    ``identity``: :class:`attnlib.token_identity.TokenIdentity`; ours carry their 95% Wilson
    intervals over the test tokens ("0.954 [0.949, 0.958]"). ``brunner``:
    :data:`attnlib.published.BRUNNER_TOKEN_IDENTITY` (``"first layers (1-2)"`` and one entry per
    "probe/distance", read from their figure). One row per probe/distance.
    """
    table, low, high = (identity.pivot(v) for v in ("accuracy", "low", "high"))
    first, last = 1, int(table.index.max())
    if first not in table.index:
        raise ValueError(f"identity has no layer {first} (the first transformer layer)")

    def ours(layer: int) -> list[str]:
        return [str(uncertainty.Interval(table.loc[layer, c], low.loc[layer, c], high.loc[layer, c], identity.n_test_tokens))
                for c in table.columns]

    last_layers = {k: v.value for k, v in brunner.items() if "/" in k}
    return pd.DataFrame(
        {
            "ours, layer 1 [95% interval]": ours(first),
            f"ours, layer {last} (last) [95% interval]": ours(last),
            "Brunner, layers 1-2": [f"{brunner['first layers (1-2)'].value:.2f}"] * len(table.columns),
            "Brunner, last layers": [f"{last_layers[c]:.2f}" if c in last_layers else "n/a" for c in table.columns],
        },
        index=pd.Index(table.columns, name="probe/distance"),
    )
