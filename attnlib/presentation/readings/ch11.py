"""Chapter 11 (identifiability): what the prose reads off effective attention and token identity.

Each function takes the chapter's results and returns ``{glued name: value}`` for
:func:`attnlib.presentation.glue.glue_all`.
"""
from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from ... import uncertainty
from .wording import listed, require_columns

__all__ = ["layer_list", "effective_mass", "token_identity", "token_identity_beside_brunner", "on_the_line",
           "correlation_wording", "f1_beside_bilstm"]

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


_LINE_COLUMNS = ("dim = d_s - d_v where d_s > d_v", "dim = 0 where d_s <= d_v", "d_s > d_v", "max dim")


def on_the_line(line: pd.DataFrame) -> dict[str, Any]:
    """How many (sentence, head) pairs sit on Brunner's line dim = max(d_s - d_v, 0).

    ``line``: one row per model, MiniLM first, with the shares ``"dim = d_s - d_v where d_s >
    d_v"``, ``"dim = 0 where d_s <= d_v"`` and ``"d_s > d_v"`` and the largest null-space
    dimension ``"max dim"`` (the chapter's on-the-line table).
    """
    require_columns(line, _LINE_COLUMNS, "line (one row per model)")
    if len(line) == 0:
        raise ValueError("line has no model")
    first = line.iloc[0]
    return {
        "ch11_on_line_minilm": float(first[_LINE_COLUMNS[0]]),
        "ch11_zero_minilm": float(first[_LINE_COLUMNS[1]]),
        "ch11_long_minilm": float(first[_LINE_COLUMNS[2]]),
        "ch11_on_line_min": float(line[_LINE_COLUMNS[0]].min()),
        "ch11_max_dim": int(line["max dim"].max()),
    }


def correlation_wording(panel: pd.DataFrame, *, head_dim: int) -> dict[str, Any]:
    """Raw against effective attention by sentence length, for one model.

    ``panel``: one row per (sentence, head) with ``length`` (tokens) and ``correlation``
    (Pearson r of the raw and effective attention rows, :func:`identifiability.correlation_by_length`'s
    input); ``head_dim``: the model's d_v. Up to d_v tokens nothing is projected away, so r is
    exactly 1 except where T is numerically rank-deficient; the means are read over
    (d_v, 2 d_v] tokens and beyond 3 d_v tokens, which must both hold pairs.
    """
    require_columns(panel, ("length", "correlation"), "panel (one row per sentence and head)")
    if isinstance(head_dim, bool) or not isinstance(head_dim, numbers.Integral) or head_dim < 1:
        raise ValueError(f"head_dim must be a whole number >= 1, got {head_dim!r}")
    length, r = panel["length"], panel["correlation"]
    short = panel[length <= head_dim]
    exact = short["correlation"] == 1
    off = short.loc[~exact, "length"]
    if len(off) == 0:
        exceptions = "There is no exception."
    else:
        where = (
            f"all at {head_dim} tokens, the head dimension itself, where T is square and its smallest "
            "singular value can fall below the rank tolerance"
            if (off == head_dim).all()
            else "at lengths where T is numerically rank-deficient"
        )
        exceptions = f"The {len(off)} exception{'s are' if len(off) > 1 else ' is'} {where}."
    mid = r[(length > head_dim) & (length <= 2 * head_dim)]
    far = r[length > 3 * head_dim]
    if len(mid) == 0 or len(far) == 0:
        raise ValueError(f"the panel needs pairs of {head_dim + 1}-{2 * head_dim} tokens and beyond "
                         f"{3 * head_dim} tokens; it has {len(mid)} and {len(far)}")
    return {
        "ch11_corr_exact": float(exact.mean()) if len(short) else float("nan"),
        "ch11_corr_exceptions": exceptions,
        "ch11_corr_mid": float(mid.mean()),
        "ch11_corr_mid_range": f"{head_dim + 1}–{2 * head_dim}",
        "ch11_corr_long": float(far.mean()),
        "ch11_corr_long_from": int(3 * head_dim),
        "ch11_corr_long_n": int(len(far)),
    }


def _difference(interval) -> str:
    """ "a difference of -0.016", or "a difference under 0.001" where three decimals would show 0."""
    d = interval.estimate
    return "a difference under 0.001" if abs(d) < 0.0005 else f"a difference of {d:+.3f}"


def f1_beside_bilstm(labels, predicted: Mapping[str, Any], *, small: str, small8: str, lstm: str,
                     seed: int = 0) -> dict[str, Any]:
    """The small transformers' test F1 beside the BiLSTM's, on the same test sentences.

    ``predicted``: model label -> predicted labels; ``small``, ``small8``, ``lstm``: the labels
    of the d_v = 32 and d_v = 8 transformers and of the BiLSTM. ``ch11_small_vs_lstm`` reads the
    paired bootstrap of F1(small) - F1(BiLSTM) (:func:`attnlib.uncertainty.compare_f1`): "within
    noise of", "above" or "below", with the interval of the difference; ``ch11_no_advantage``
    says whether either transformer is above the BiLSTM beyond noise.
    """
    for name in (small, small8, lstm):
        if name not in predicted:
            raise ValueError(f"predicted has no model {name!r}; it has {list(predicted)}")
    gap = uncertainty.compare_f1(labels, predicted[small], predicted[lstm], seed=seed)
    word = {"higher": "above", "lower": "below"}.get(gap.verdict, "within noise of")
    eight = uncertainty.compare_f1(labels, predicted[small8], predicted[lstm], seed=seed)
    return {
        "ch11_small_vs_lstm": f"{word} the BiLSTM's {gap.b.estimate:.3f} ({_difference(gap.difference)}, "
        f"95% interval {gap.difference.range_text()}; at $d_v$ = 8 {_difference(eight.difference)}, "
        f"interval {eight.difference.range_text()})",
        "ch11_no_advantage": "a transformer has no advantage on a few thousand short sentences without "
        "pretraining" if gap.verdict != "higher" and eight.verdict != "higher"
        else "even without pretraining, a transformer does better here",
    }
