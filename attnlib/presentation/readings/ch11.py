"""Chapter 11 (identifiability): what the prose reads off effective attention and token identity.

Each function takes the chapter's results and returns ``{glued name: value}`` for
:func:`attnlib.presentation.glue.glue_all` (the table builders return the frame a reader sees).

Two kinds of model, two kinds of noise. The small transformers and the BiLSTM are trained here,
each with several seeds (:func:`attnlib.seeds.train_seed_sets`): what the chapter says about
them as trained models (their F1) is read over seeds and sentences
(:func:`attnlib.uncertainty.compare_f1_over_seeds`). MiniLM is one pretrained checkpoint: there
is no training seed to vary, so what is read off it (attention mass, the alternatives' reach)
carries intervals over the sentences alone, and says so.
"""
from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from ... import uncertainty
from .wording import listed, require_columns

__all__ = ["layer_list", "mass_by_layer", "mass_differences", "effective_mass", "token_identity",
           "token_identity_beside_brunner", "on_the_line", "correlation_wording", "scores_over_seeds",
           "one_model_scores", "f1_beside_bilstm", "reach_by_length", "alternative_reach", "recipe",
           "imdb_length", "sizes", "alternative", "long_sentences"]

_GROUPS = ("[CLS]", "[SEP]", "punctuation")
_MASS_COLUMNS = tuple(f"{k} {g}" for g in _GROUPS for k in ("raw", "effective"))


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


def _check_stats(stats: pd.DataFrame) -> None:
    require_columns(stats, ("sentence", "layer", "head", *_MASS_COLUMNS),
                    "stats (one row per sentence, layer and head: trace_statistics)")
    if len(stats) == 0:
        raise ValueError("stats has no row")


def _per_sentence(stats: pd.DataFrame) -> pd.DataFrame:
    """(sentence, layer) -> each mass column's mean over the layer's heads; layers 1-based."""
    _check_stats(stats)
    frame = stats.groupby(["layer", "sentence"])[list(_MASS_COLUMNS)].mean()
    return frame.rename(index=lambda layer: int(layer) + 1, level="layer")


def mass_by_layer(stats: pd.DataFrame) -> pd.DataFrame:
    """The mass table: one row per layer (1-based), the mean over sentences and heads of every
    ``raw <g>`` and ``effective <g>`` column (g: [CLS], [SEP], punctuation).

    ``stats``: :func:`attnlib.identifiability.trace_statistics`' frame over a corpus (one row
    per sentence, layer and head, ``layer`` 0-based)."""
    return _per_sentence(stats).groupby(level="layer").mean()


def _mass_tests(stats: pd.DataFrame, *, seed: int, alpha: float) -> dict:
    """(group, layer) -> (Comparison of effective against raw over the sentences, changed by
    Holm's correction over every group and layer)."""
    per = _per_sentence(stats)
    tests, p = {}, []
    for g in _GROUPS:
        for layer, rows in per.groupby(level="layer"):
            eff, raw = rows[f"effective {g}"].to_numpy(), rows[f"raw {g}"].to_numpy()
            diff = eff - raw
            se = diff.std(ddof=1) / np.sqrt(len(diff)) if len(diff) > 1 else float("nan")
            tests[(g, int(layer))] = uncertainty.compare(eff, raw, paired=True, seed=seed)
            p.append(float(uncertainty.normal_p(np.array([diff.mean()]), np.array([se]))[0]))
    changed = uncertainty.holm(np.array(p), alpha=alpha)
    return {key: (c, bool(k)) for (key, c), k in zip(tests.items(), changed)}


def _direction(comparison, changed: bool) -> str:
    """"higher", "lower" or "within noise": the Holm decision, in the direction of the difference."""
    if not changed:
        return uncertainty.WITHIN_NOISE
    return "higher" if comparison.difference.estimate > 0 else "lower"


def _signed(value: float, digits: int) -> str:
    text = f"{value:+.{digits}f}"
    return text[1:] if float(text) == 0 else text  # no sign on a value that rounds to 0


def _cell(interval, digits: int = 4) -> str:
    """"-0.0012 [-0.0015, -0.0009]": a small signed difference with its interval."""
    return f"{_signed(interval.estimate, digits)} [{_signed(interval.low, digits)}, {_signed(interval.high, digits)}]"


def mass_differences(stats: pd.DataFrame, *, seed: int = 0, alpha: float = 0.05) -> pd.DataFrame:
    """Effective minus raw attention mass on each group, by layer, with its 95% interval over the
    sentences and the verdict after Holm's correction over every group and layer.

    ``stats``: as for :func:`mass_by_layer`. Per sentence and layer the mass is the mean over the
    layer's heads; the difference is paired by sentence (:func:`attnlib.uncertainty.compare`,
    the bootstrap interval) and tested against 0 with the normal p-value of its mean
    (:func:`attnlib.uncertainty.normal_p`); Holm's method (:func:`attnlib.uncertainty.holm`)
    corrects for the 3 x L tests, so that one difference in twenty passing at 5% by chance is
    not read as a finding. Rows: layers (1-based); one column per group, each cell
    "-0.018 [-0.020, -0.016], lower" (or "within noise").
    """
    tests = _mass_tests(stats, seed=seed, alpha=alpha)
    layers = sorted({layer for _, layer in tests})
    table = {g: [f"{_cell(tests[(g, layer)][0].difference)}, {_direction(*tests[(g, layer)])}"
                 for layer in layers] for g in _GROUPS}
    return pd.DataFrame(table, index=pd.Index(layers, name="layer"))


def _directions(tests: Mapping, group: str, layers: list[int]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {"higher": [], "lower": [], uncertainty.WITHIN_NOISE: []}
    for layer in layers:
        out[_direction(*tests[(group, layer)])].append(layer)
    return out


def _said(found: Mapping[str, list[int]], layers: list[int], *, than: str = "raw") -> str:
    """"*lower* than raw in layer 1 and *higher* in layers 2–6", with "within noise" where neither."""
    lower, higher, tie = found["lower"], found["higher"], found[uncertainty.WITHIN_NOISE]
    if not lower and not higher:
        return f"within noise of {than} in every layer"
    parts = []
    if lower:
        parts.append(f"*lower* than {than} in {layer_list(lower, of=layers)}")
    if higher:
        parts.append(("*higher* in " if lower else f"*higher* than {than} in ") + layer_list(higher, of=layers))
    if tie:
        parts.append(f"within noise in {layer_list(tie, of=layers)}")
    return "; ".join(parts) if len(parts) > 2 else listed(parts)  # lists of layers hold "and" already


def effective_mass(stats: pd.DataFrame, *, brunner: Mapping, seed: int = 0, alpha: float = 0.05) -> dict[str, Any]:
    """Where raw and effective attention put their mass on [CLS], [SEP] and punctuation, by layer.

    ``stats``: :func:`attnlib.identifiability.trace_statistics`' frame over the corpus (one row
    per sentence, layer and head, with ``raw <g>`` and ``effective <g>`` for g in [CLS], [SEP]
    and punctuation). ``brunner``: :data:`attnlib.published.BRUNNER_SEP_MASS` (its ``"raw,
    layers 5-10"`` range and ``"effective, at most"`` value). A layer counts as higher or lower
    only when the paired difference over the sentences survives Holm's correction over every
    group and layer (:func:`mass_differences`); otherwise it is within noise. ``ch11_sep_said``,
    ``ch11_cls_said``, ``ch11_punct_said``: the verdicts in words; ``ch11_sep_up`` /
    ``_down`` / ``_tie`` (and the same for [CLS] and punctuation): the layers; ``ch11_sep_gap``
    and ``ch11_punct_gap``: the largest difference in size.
    """
    mass = mass_by_layer(stats)
    layers = [int(x) for x in mass.index]
    tests = _mass_tests(stats, seed=seed, alpha=alpha)
    lo, hi = brunner["raw, layers 5-10"]
    out: dict[str, Any] = {
        "ch11_raw_sep_max": float(mass["raw [SEP]"].max()),
        "ch11_raw_sep_max_layer": int(mass["raw [SEP]"].idxmax()),
        "ch11_eff_sep_max": float(mass["effective [SEP]"].max()),
        "ch11_raw_cls_max": float(mass["raw [CLS]"].max()),
        "ch11_parks": "[CLS]" if mass["raw [CLS]"].mean() > mass["raw [SEP]"].mean() else "[SEP]",
        "ch11_brunner_sep_raw": f"{lo.value:.2f}–{hi.value:.2f}",
        "ch11_brunner_sep_eff": f"{brunner['effective, at most'].value:.1f}",
        "ch11_mass_n": int(stats["sentence"].nunique()),
        "ch11_mass_tests": len(tests),
    }
    for g, k in (("[SEP]", "sep"), ("[CLS]", "cls"), ("punctuation", "punct")):
        found = _directions(tests, g, layers)
        out[f"ch11_{k}_up"] = layer_list(found["higher"], of=layers)
        out[f"ch11_{k}_down"] = layer_list(found["lower"], of=layers)
        out[f"ch11_{k}_tie"] = layer_list(found[uncertainty.WITHIN_NOISE], of=layers)
        out[f"ch11_{k}_said"] = _said(found, layers)
        out[f"ch11_{k}_gap"] = float(max(abs(tests[(g, layer)][0].difference.estimate) for layer in layers))
    return out


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


def _rows(predicted, name: str) -> np.ndarray:
    """(S, n): one row of predictions per training seed (a 1-D array is one model)."""
    matrix = np.asarray(predicted)
    if matrix.ndim == 1:
        matrix = matrix[None]
    if matrix.ndim != 2:
        raise ValueError(f"predicted[{name!r}] must be (seeds, sentences) predictions, got shape {matrix.shape}")
    return matrix


def scores_over_seeds(sets: Mapping, labels, predicted: Mapping, *, seed: int = 0) -> pd.DataFrame:
    """The trained models' test scores, one row per model: accuracy and ROC-AUC as the mean over
    its seeds (the models' stored scores), F1 as the mean with its 95% interval over seeds and
    sentences (:func:`attnlib.uncertainty.f1_over_seeds`), the number of seeds and of test
    sentences.

    ``sets``: name -> :class:`attnlib.seeds.SeedSet` (its ``scores("test", metric)``);
    ``labels``: the test labels; ``predicted``: name -> (S, n) predictions, one row per seed
    (``SeedSet.predicted(split)``).
    """
    rows = {}
    for name, runs in sets.items():
        if name not in predicted:
            raise ValueError(f"predicted has no model {name!r}; it has {list(predicted)}")
        matrix = _rows(predicted[name], name)
        rows[name] = {
            "seeds": str(matrix.shape[0]),
            "accuracy": float(runs.scores("test", "accuracy").mean()),
            "F1 [95% interval]": uncertainty.f1_over_seeds(labels, matrix, seed=seed).format(3),
            "ROC-AUC": float(runs.scores("test", "roc_auc").mean()),
            "test sentences": int(matrix.shape[1]),
        }
    return pd.DataFrame.from_dict(rows, orient="index")


def one_model_scores(labels, probabilities, *, seeds: str = "1 (pretrained)", seed: int = 0) -> dict[str, Any]:
    """One model's row of :func:`scores_over_seeds`: its scores on ``labels`` from its class
    ``probabilities`` (n, C), F1 with its 95% interval over the sentences alone (there is no
    seed to vary: ``seeds`` says why)."""
    from ...train import classification_metrics

    probabilities = np.asarray(probabilities, dtype=np.float64)
    scores = classification_metrics(labels, probabilities)
    f1 = uncertainty.f1(labels, probabilities.argmax(-1), seed=seed)
    return {"seeds": seeds, "accuracy": float(scores["accuracy"]), "F1 [95% interval]": f1.format(3),
            "ROC-AUC": float(scores["roc_auc"]), "test sentences": int(len(probabilities))}


def _seeds_text(comparison) -> str:
    """:meth:`~attnlib.uncertainty.SeedComparison.seeds_text`, with "beyond noise" where no seed shows it."""
    text = comparison.seeds_text()
    return f"beyond noise {text.replace('in none of', 'in none of the')}" if text.startswith("in none of") else text


def _verdict_words(comparison) -> str:
    return {"higher": "above", "lower": "below", uncertainty.SEEDS_DISAGREE: "above or below, depending on the seed,"}.get(
        comparison.verdict, "within noise of")


def f1_beside_bilstm(labels, predicted: Mapping[str, Any], *, small: str, small8: str, lstm: str,
                     seed: int = 0) -> dict[str, Any]:
    """The small transformers' test F1 beside the BiLSTM's, on the same test sentences, over seeds.

    ``predicted``: model label -> (S, n) predicted labels, one row per training seed (a 1-D
    array: one model); ``small``, ``small8``, ``lstm``: the labels of the d_v = 32 and d_v = 8
    transformers and of the BiLSTM. Two recipes, each with its own seeds:
    :func:`attnlib.uncertainty.compare_f1_over_seeds` with ``paired_seeds=False``, over the
    first k seeds of both, k the fewer of the two (a model trained once is compared with the
    other recipe's model of the same seed, and the words say "from one model").
    ``ch11_small_vs_lstm``: "within noise of", "above" or "below" the BiLSTM, with the
    interval of the difference and how many seeds bear it out; ``ch11_no_advantage`` says
    whether either transformer is above the BiLSTM.
    """
    for name in (small, small8, lstm):
        if name not in predicted:
            raise ValueError(f"predicted has no model {name!r}; it has {list(predicted)}")

    def against_lstm(name):
        a, b = _rows(predicted[name], name), _rows(predicted[lstm], lstm)
        k = min(len(a), len(b))
        return uncertainty.compare_f1_over_seeds(labels, a[:k], b[:k], paired_seeds=False, seed=seed)

    gap, eight = against_lstm(small), against_lstm(small8)
    over = "seeds and sentences" if not gap.one_model else "sentences"
    eight_words = (f"at $d_v$ = 8, {eight.seeds_text()} of each, {_difference(eight.difference)}, interval "
                   f"{eight.difference.range_text()}" if eight.one_model else
                   f"at $d_v$ = 8 {_difference(eight.difference)}, interval {eight.difference.range_text()}, "
                   f"{_seeds_text(eight)}")
    return {
        "ch11_small_vs_lstm": f"{_verdict_words(gap)} the BiLSTM's {gap.b.estimate:.3f} "
        f"({_difference(gap.difference)}, 95% interval over {over} {gap.difference.range_text()}, "
        f"{_seeds_text(gap)}; {eight_words})",
        "ch11_no_advantage": "a transformer has no advantage on a few thousand short sentences without "
        "pretraining" if gap.verdict != "higher" and eight.verdict != "higher"
        else "even without pretraining, a transformer does better here",
        "ch11_f1_seeds": int(gap.n_seeds),
        "ch11_f1_small": float(gap.a.estimate),
        "ch11_f1_small8": float(eight.a.estimate),
        "ch11_f1_lstm": float(gap.b.estimate),
    }


_REACH_COLUMNS = ("sentence", "layer", "head", "length", "d_v", "mean_jsd", "max_jsd")


def reach_by_length(reach: pd.DataFrame, bins) -> pd.DataFrame:
    """How far the alternatives reach, by sentence length: one row per length bin [left, right)
    with the (sentence, head) pairs, the median, 90th percentile and largest mean row JSD, and the
    largest single row's JSD.

    ``reach``: :func:`attnlib.identifiability.alternative_reach`'s frame."""
    require_columns(reach, _REACH_COLUMNS, "reach (alternative_reach's frame)")
    edges = list(bins)
    if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"bins must be at least two increasing edges, got {edges}")
    which = pd.cut(reach["length"], edges, right=False)
    grouped = reach.groupby(which, observed=True)
    table = pd.DataFrame({
        "(sentence, head) pairs": grouped.size(),
        "median": grouped["mean_jsd"].median(),
        "90th percentile": grouped["mean_jsd"].quantile(0.9),
        "largest": grouped["mean_jsd"].max(),
        "largest row": grouped["max_jsd"].max(),
    })
    table.index = [f"{int(i.left)}–{int(i.right) - 1}" for i in table.index]
    table.index.name = "tokens"
    return table


def alternative_reach(reach: pd.DataFrame, *, very_different: float) -> dict[str, Any]:
    """How far attention moves while the output stays the same, over a corpus of one model.

    ``reach``: :func:`attnlib.identifiability.alternative_reach`'s frame (one row per sentence
    longer than d_v and head, ``mean_jsd`` the mean over its query rows, ``max_jsd`` its largest
    row). ``very_different``: the JSD at which the book calls two attentions very different
    (:data:`attnlib.published.JSD_VERY_DIFFERENT`, read off J&W's histograms). The reach is a
    lower bound (the farthest of a few random directions per row), and MiniLM is one pretrained
    model: these describe its heads, with no seed to vary.
    """
    require_columns(reach, _REACH_COLUMNS, "reach (alternative_reach's frame)")
    if len(reach) == 0:
        raise ValueError("reach has no (sentence, head) pair: no sentence is longer than the head dimension")
    mean, row = reach["mean_jsd"], reach["max_jsd"]
    far = float(row.max())
    return {
        "ch11_reach_sentences": int(reach["sentence"].nunique()),
        "ch11_reach_pairs": int(len(reach)),
        "ch11_reach_median": float(mean.median()),
        "ch11_reach_p90": float(mean.quantile(0.9)),
        "ch11_reach_max": float(mean.max()),
        "ch11_reach_row_max": far,
        "ch11_reach_row_median": float(row.median()),
        "ch11_very_different": float(very_different),
        "ch11_reach_vs_very": (
            f"no row reaches it: the farthest moves {far:.3f}, {far / very_different:.0%} of the way"
            if far < very_different else
            f"{float((row >= very_different).mean()):.1%} of the (sentence, head) pairs have a row that reaches it"
        ),
    }


def recipe(*, lr: float, n_seeds: int) -> dict[str, Any]:
    """The transformers' learning rate and the training seeds a verdict reads."""
    return {"ch11_lr": f"{lr:g}", "ch11_n_seeds": int(n_seeds)}


def imdb_length(tokens: int) -> dict[str, Any]:
    """The length the IMDB reviews are cut to."""
    return {"ch11_imdb_tokens": int(tokens)}


def sizes(*, over, n_rt: int, n_imdb: int, n_probe: int, epochs: int, minilm_f1) -> dict[str, Any]:
    """What the statistics run on: the share of sentences longer than d_v (``over``, as written), the
    sentences of each data set, the probes' sentences, the transformers' epochs and MiniLM's F1 cell."""
    return {"ch11_over_dv": over, "ch11_n_rt": int(n_rt), "ch11_n_imdb": int(n_imdb), "ch11_n_probe": int(n_probe),
            "ch11_epochs": int(epochs), "ch11_f1_minilm": minilm_f1}


def alternative(summary: Mapping, alt, *, n: int, row_jsd, layer: int, head: int) -> dict[str, Any]:
    """The worked alternative at one head (``layer``, ``head``: 0-based): how far its output and the model's
    output moved (``summary``), its scale and null-space dimension (``alt``), its rows' JSD on the
    sentence's ``n`` tokens and the median JSD over rows (``row_jsd``)."""
    jsd = np.asarray(alt.jsd[0, :n], dtype=float)
    return {"ch11_alt_out": summary["head output: max |Ã T|"], "ch11_alt_scale": float(alt.output_scale[0]),
            "ch11_alt_prob": summary["model: |change in p(positive)|"], "ch11_alt_jsd": float(jsd.mean()),
            "ch11_alt_jsd_max": float(jsd.max()), "ch11_alt_n": int(n), "ch11_alt_median": float(np.median(row_jsd)),
            "ch11_alt_layer": int(layer) + 1, "ch11_alt_head": int(head) + 1, "ch11_alt_dim": int(alt.null_dim[0])}


def long_sentences(n_long: int) -> dict[str, Any]:
    """How many sentences are longer than d_v, where the reach is measured."""
    return {"ch11_long_n": int(n_long)}
