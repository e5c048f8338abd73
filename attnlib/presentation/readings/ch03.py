"""Chapter 3's readings: Kendall τ between attention, gradients and leave-one-out.

Most functions read the chapter's agreement ``table``: :func:`attnlib.importance.agreement`
frames concatenated with the index (dataset, model, predicted class), model as ``"lstm+tanh"``,
columns ``tau_g mean``, ``tau_loo mean``, ``tau_g_vs_loo mean``, ``... sig. frac.``. The
comparisons with the paper take ``ours`` and ``paper``: (dataset, encoder) -> our agreement
frame and :func:`attnlib.published.paper_tau`'s frame, indexed by predicted class 0 and 1.
Each returns ``{glued name: value}`` for :func:`attnlib.presentation.glue.glue_all`.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ... import uncertainty
from .wording import tally

__all__ = [
    "CLASS",
    "class_gap",
    "first_token",
    "imdb_significance",
    "paper_table",
    "sample_sizes",
    "sampling",
    "scaled_dot",
    "summary",
    "synthetic_tau",
    "comparison",
    "interval_text",
    "yardstick",
]

#: The predicted classes 0 and 1 in words.
CLASS = ("negative", "positive")

# (glue key, (dataset, encoder)) of the rows the prose sets beside the paper.
_PAIRS = {
    "lstm": ("rt-polarity", "lstm"),
    "avg": ("rt-polarity", "average"),
    "imdb_avg": ("imdb", "average"),
}


def _per_class(table: pd.DataFrame, dataset: str, model: str, column: str) -> list[float]:
    if column not in table.columns:
        raise ValueError(f"the table has no column {column!r}; it has {list(table.columns)}")
    return [float(table.loc[(dataset, model, c), column]) for c in (0, 1)]


def _pair(values: Sequence[float], spec: str = ".2f") -> str:
    return " / ".join(format(v, spec) for v in values)


def yardstick(table: pd.DataFrame) -> dict[str, Any]:
    """Reads the yardstick bullet: gradients vs leave-one-out against attention vs either.

    ``table``: the chapter's agreement table (rt-polarity's lstm+tanh and average+tanh rows).
    """
    lstm_g = _per_class(table, "rt-polarity", "lstm+tanh", "tau_g mean")
    lstm_l = _per_class(table, "rt-polarity", "lstm+tanh", "tau_loo mean")
    lstm_v = _per_class(table, "rt-polarity", "lstm+tanh", "tau_g_vs_loo mean")
    gaps = [v - t for v, g, l in zip(lstm_v, lstm_g, lstm_l) for t in (g, l)]
    wide = int(np.argmax([v - g for v, g in zip(lstm_v, lstm_g)]))
    least = int(np.argmin(lstm_g))
    avg_g = _per_class(table, "rt-polarity", "average+tanh", "tau_g mean")
    avg_v = _per_class(table, "rt-polarity", "average+tanh", "tau_g_vs_loo mean")
    diff = [g - v for g, v in zip(avg_g, avg_v)]
    rel = (
        "about as well as"
        if max(map(abs, diff)) <= 0.05
        else "better than"
        if min(diff) > 0
        else "less well than"
        if max(diff) < 0
        else "on one class better and on the other worse than"
    )
    return {
        "ch03_lstm_gvl": _pair(lstm_v),
        "ch03_lstm_gap": f"{min(gaps):.2f}–{max(gaps):.2f} higher than"
        if min(gaps) > 0
        else f"between {min(gaps):+.2f} and {max(gaps):+.2f} against how well",
        "ch03_lstm_widest": f"the gap to τ_g is widest on sentences predicted {CLASS[wide]}"
        + (", where attention agrees least" if wide == least else ""),
        "ch03_avg_rel": f"attention agrees with gradients ({avg_g[0]:.2f} / {avg_g[1]:.2f}) "
        f"{rel} gradients agree with leave-one-out ({avg_v[0]:.2f} / {avg_v[1]:.2f})",
    }


def imdb_significance(table: pd.DataFrame) -> dict[str, Any]:
    """Reads the range of IMDB's Sig. Fracs (τ_g and τ_loo, every model and class).

    ``table``: the chapter's agreement table, with an ``imdb`` dataset.
    """
    imdb = table.loc["imdb", ["tau_g sig. frac.", "tau_loo sig. frac."]]
    return {
        "ch03_imdb_sig_min": float(imdb.min().min()),
        "ch03_imdb_sig_max": float(imdb.max().max()),
    }


def scaled_dot(table: pd.DataFrame) -> dict[str, Any]:
    """Reads the scaled-dot BiLSTM: how well its attention agrees, and what may explain it.

    ``table``: the chapter's agreement table, with rt-polarity's ``lstm+dot`` rows.
    """
    dot = [
        _per_class(table, "rt-polarity", "lstm+dot", c)
        for c in ("tau_g mean", "tau_loo mean", "tau_g_vs_loo mean")
    ]
    top = max(map(abs, dot[0] + dot[1]))
    level = "hardly at all" if top < 0.15 else "weakly" if top < 0.3 else "moderately"
    return {
        "ch03_dot": f"agrees {level} (τ_g {dot[0][0]:.2f} / {dot[0][1]:.2f}, τ_loo "
        f"{dot[1][0]:.2f} / {dot[1][1]:.2f}), while its gradients and leave-one-out "
        f"agree with each other at {dot[2][0]:.2f} / {dot[2][1]:.2f}",
        "ch03_dot_why": "This chapter does not show why. One candidate, not checked here, is "
        "that its attention is nearly uniform on many sentences, and the order of near-equal "
        "weights is mostly noise."
        if top < 0.3
        else "Why it differs from the tanh BiLSTM, this chapter does not show.",
        "ch03_dot_g": _pair(dot[0]),
    }


def summary(table: pd.DataFrame) -> dict[str, Any]:
    """Reads the summary: encoders with context against the Average one, and how many models
    have gradients and leave-one-out agreeing better with each other than with attention.

    ``table``: the chapter's agreement table (every dataset and model).
    """
    ctx = [
        x
        for m in ("lstm+tanh", "cnn+tanh")
        for c in ("tau_g mean", "tau_loo mean")
        for x in _per_class(table, "rt-polarity", m, c)
    ]
    avg = [
        x
        for c in ("tau_g mean", "tau_loo mean")
        for x in _per_class(table, "rt-polarity", "average+tanh", c)
    ]
    with_context = [(d, m) for d, m, _ in table.index if not m.startswith("average")]
    with_context = sorted(set(with_context))
    better = sum(
        all(
            float(table.loc[(d, m, c), "tau_g_vs_loo mean"])
            > max(
                float(table.loc[(d, m, c), "tau_g mean"]),
                float(table.loc[(d, m, c), "tau_loo mean"]),
            )
            for c in (0, 1)
        )
        for d, m in with_context
    )
    return {
        "ch03_ctx_range": f"{min(ctx):.2f}–{max(ctx):.2f}",
        "ch03_avg_range": f"{min(avg):.2f}–{max(avg):.2f}",
        "ch03_pattern": "higher, J&W's pattern"
        if min(avg) > max(ctx)
        else "not clearly higher, unlike in J&W's Table 2",
        "ch03_every": "for every model with context (all but the Average encoder, on every "
        "dataset): the two importance measures tell one story, attention another"
        if better == len(with_context)
        else f"for {better} of the {len(with_context)} models with context "
        "(on both predicted classes)",
    }


def synthetic_tau(table: pd.DataFrame) -> dict[str, Any]:
    """Reads τ on the synthetic task: the BiLSTM's τ_g and τ_loo, the Average model's range.

    ``table``: the chapter's agreement table, with a ``synthetic`` dataset.
    """
    syn_g = _per_class(table, "synthetic", "lstm+tanh", "tau_g mean")
    syn_l = _per_class(table, "synthetic", "lstm+tanh", "tau_loo mean")
    syn_avg = [
        x
        for c in ("tau_g mean", "tau_loo mean")
        for x in _per_class(table, "synthetic", "average+tanh", c)
    ]
    return {
        "ch03_syn_g": _pair(syn_g),
        "ch03_syn_l": _pair(syn_l),
        "ch03_syn_far": "far from 1" if max(syn_g) < 0.7 else "below 1",
        "ch03_syn_avg_range": f"{min(syn_avg):.2f}–{max(syn_avg):.2f}",
    }


def _our_interval(frame: pd.DataFrame, column: str, c) -> uncertainty.Interval | None:
    """Our 95% interval of a class's mean τ (mean ± 1.96 sd / √n) or of its Sig. Frac. (Wilson's
    interval of the share of n sentences, which stays sensible at 0 and 1, where a normal one
    has no width); None without ``n`` >= 2."""
    if "n" not in frame or float(frame.loc[c, "n"]) < 2:
        return None
    n = int(frame.loc[c, "n"])
    value = float(frame.loc[c, column])
    if column.endswith("sig. frac."):
        return uncertainty.proportion(int(round(value * n)), n)
    se = _se(frame, column, c)
    return uncertainty.normal_interval(value, se, n) if np.isfinite(se) else None


def _interval_cell(frame: pd.DataFrame, column: str, c) -> str:
    """Our 95% interval of a class's mean (or Sig. Frac.), "[0.33, 0.41]"; "n/a" without n >= 2."""
    iv = _our_interval(frame, column, c)
    return "n/a" if iv is None else f"[{iv.low:.2f}, {iv.high:.2f}]"


#: (paper-frame column, row label) of :func:`paper_table`'s rows, per model.
_MEASURES = [
    ("tau_g mean", "τ_g"),
    ("tau_loo mean", "τ_loo"),
    ("tau_g sd", "τ_g sd"),
    ("tau_g sig. frac.", "τ_g Sig. Frac."),
    ("tau_loo sig. frac.", "τ_loo Sig. Frac."),
]


def _verdicts(o_frame: pd.DataFrame, p_frame: pd.DataFrame, column: str) -> str:
    """"below / within noise": each class's paper figure against our interval; "n/a" where the
    paper gives none, or for an sd (no interval here)."""
    if column not in p_frame or column.endswith(" sd") or "n" not in o_frame:
        return "n/a"
    p = [float(p_frame.loc[c, column]) for c in (0, 1)]
    if any(np.isnan(p)):
        return "n/a"
    ours = column.split(" (")[0]
    return " / ".join(_side(float(o_frame.loc[c, ours]), p[c], _our_interval(o_frame, ours, c)) for c in (0, 1))


def _given(p_frame: pd.DataFrame, column: str) -> str:
    """The paper's two classes, "0.40 / 0.38", or "n/a" where it gives no figure."""
    vals = [float(p_frame.loc[c, column]) for c in (0, 1)] if column in p_frame else [np.nan, np.nan]
    return "n/a" if any(np.isnan(vals)) else _pair(vals)


def paper_table(
    ours: Mapping[tuple[str, str], pd.DataFrame], paper: Mapping[tuple[str, str], pd.DataFrame]
) -> pd.DataFrame:
    """Our τ beside J&W's, one row per model and measure, the two predicted classes in each cell.

    ``ours``: (dataset, encoder) -> our agreement frame (with ``n``); ``paper``: the same keys
    -> ``published.paper_tau``'s frame. Index (dataset, model, measure), in the order of
    ``ours``; columns: ours ("0.37 / 0.31", predicted negative / positive), our 95% interval,
    J&W's printed Table 2, its verdict (where the printed figure lies against our interval:
    "above", "below" or "within noise", per class), the authors' committed outputs and their
    verdict. A figure the paper does not give is "n/a".
    """
    missing = [key for key in ours if key not in paper]
    if missing:
        raise ValueError(f"no paper frame for {missing}")
    rows = {}
    for (name, encoder), o in ours.items():
        p = paper[(name, encoder)]
        for column, label in _MEASURES:
            auth = column + " (authors' outputs)"
            rows[(name, f"{encoder}+tanh", label)] = {
                "ours": _pair([float(o.loc[c, column]) for c in (0, 1)]),
                "ours, 95% interval": "n/a" if column.endswith(" sd") else interval_text(o, column),
                "J&W printed": _given(p, column),
                "ours vs printed": _verdicts(o, p, column),
                "authors' outputs": _given(p, auth),
                "ours vs authors'": _verdicts(o, p, auth),
            }
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index = pd.MultiIndex.from_tuples(table.index, names=["dataset", "model", "measure"])
    return table


def comparison(
    ours: Mapping[tuple[str, str], pd.DataFrame], paper: Mapping[tuple[str, str], pd.DataFrame]
) -> dict[str, Any]:
    """Reads "Reading the comparison": our mean τ per model beside the paper's, and a tally of
    where the paper's mean τ_g and τ_loo (two classes each: four figures) lie against our 95%
    intervals, for the printed table and the authors' outputs.

    ``ours``, ``paper``: as for :func:`paper_table`, with rt-polarity's lstm and average and
    IMDB's average. Keys ``ch03_<row>_g`` / ``_l`` (ours, "0.37 / 0.31"), ``_vs_printed`` /
    ``_vs_auth`` ("below in 3 of 4 and within noise in 1"; a source with no figure for that row
    is left out), ``ch03_sources_gap`` (the largest difference between the printed table and the
    authors' outputs in the BiLSTM's mean τ), and ``ch03_avg_more`` (whether the Average encoder's
    attention agrees more than the BiLSTM's on rt-polarity).
    """
    out: dict[str, Any] = {}
    source_gaps = []
    for key, pair in _PAIRS.items():
        if pair not in ours or pair not in paper:
            raise ValueError(f"ours and paper need the row {pair}")
        o, p = ours[pair], paper[pair]
        for col, short in (("tau_g mean", "g"), ("tau_loo mean", "l")):
            out[f"ch03_{key}_{short}"] = _pair([float(o.loc[c, col]) for c in (0, 1)])
        for suffix, tag in (("", "printed"), (" (authors' outputs)", "auth")):
            words = [
                w
                for col in ("tau_g mean", "tau_loo mean")
                for w in _verdicts(o, p, col + suffix).split(" / ")
                if w != "n/a"
            ]
            if words:
                out[f"ch03_{key}_vs_{tag}"] = tally(words)
        for col in ("tau_g mean", "tau_loo mean"):
            auth = col + " (authors' outputs)"
            if key == "lstm" and auth in p:
                source_gaps += [abs(float(p.loc[c, col]) - float(p.loc[c, auth])) for c in (0, 1)]
    gaps = [g for g in source_gaps if np.isfinite(g)]
    out["ch03_sources_gap"] = f"{max(gaps):.2f}" if gaps else "n/a"
    lstm = [float(ours[_PAIRS["lstm"]].loc[c, "tau_g mean"]) for c in (0, 1)]
    avg = [float(ours[_PAIRS["avg"]].loc[c, "tau_g mean"]) for c in (0, 1)]
    out["ch03_avg_more"] = (
        "and it does" if min(avg) > max(lstm) else "yet here it does not on both predicted classes"
    )
    return out


def _side(o: float, r: float, interval: uncertainty.Interval | None = None) -> str:
    """Where ours lies against a reference r: by our interval ("above", "below", "within noise"),
    or without one by ours rounded to 2 decimals ("above", "below", "equal")."""
    if interval is not None:
        relation = interval.relation_to(r)
        return relation if relation in ("above", "below") else "within noise"
    o = round(o, 2)
    return "above" if o > r else "below" if o < r else "equal"


def _se(frame: pd.DataFrame, column: str, c: int) -> float:
    """The standard error of a class's mean tau: population sd / sqrt(n)."""
    n = float(frame.loc[c, "n"])
    if n < 2:
        return float("nan")
    return float(frame.loc[c, column.replace(" mean", " sd")]) / float(np.sqrt(n))


def interval_text(frame: pd.DataFrame, column: str) -> str:
    """Our two classes' 95% intervals, "[0.33, 0.41] / [0.27, 0.35]" (mean +- 1.96 se)."""
    return " / ".join(_interval_cell(frame, column, c) for c in (0, 1))


def class_gap(table: pd.DataFrame) -> dict[str, Any]:
    """Reads how far apart the BiLSTM's two predicted classes' τ_g are (2 decimals, a string).

    ``table``: the chapter's agreement table."""
    lg = _per_class(table, "rt-polarity", "lstm+tanh", "tau_g mean")
    return {"ch03_lstm_classes": f"{abs(lg[0] - lg[1]):.2f}"}


def sampling(
    ours: Mapping[tuple[str, str], pd.DataFrame], paper: Mapping[tuple[str, str], pd.DataFrame]
) -> dict[str, Any]:
    """Reads whether sampling explains the gaps: standard errors of τ_g on rt-polarity, and
    the largest gap to the printed Table 2 in standard errors.

    ``ours``, ``paper``: (dataset, encoder) -> agreement frame (with ``n``) / ``paper_tau``
    frame, for rt-polarity's lstm and average.
    """
    se, diffs = [], []
    for name, encoder in [("rt-polarity", "lstm"), ("rt-polarity", "average")]:
        o, p = ours[(name, encoder)], paper[(name, encoder)]
        se += list(o["tau_g sd"] / np.sqrt(o["n"]))
        diffs += [
            (
                abs(float(o.loc[c, "tau_g mean"]) - float(p.loc[c, "tau_g mean"])),
                f"{encoder}+tanh, predicted {CLASS[c]}",
            )
            for c in (0, 1)
        ]
    big = max(diffs)
    return {
        "ch03_se_min": float(min(se)),
        "ch03_se_max": float(max(se)),
        "ch03_maxdiff": float(big[0]),
        "ch03_maxdiff_where": big[1],
        "ch03_maxdiff_se": float(big[0] / max(se)),
    }


def sample_sizes(n_eval: Mapping[str, int]) -> dict[str, Any]:
    """Reads how many test instances were scored: ``n_eval``, dataset -> count, for
    rt-polarity and imdb."""
    short = {"rt-polarity": "rt", "imdb": "imdb"}
    if set(n_eval) != set(short):
        raise ValueError(f"n_eval needs exactly {sorted(short)}, got {sorted(n_eval)}")
    return {f"ch03_n_{short[name]}": int(n_eval[name]) for name in short}


def first_token(attention: Sequence[np.ndarray]) -> dict[str, Any]:
    """Reads the fraction of sentences whose largest attention weight is on the first token.

    ``attention``: one array per sentence, over its real tokens."""
    if len(attention) == 0:
        raise ValueError("attention is empty")
    return {"ch03_first": float(np.mean([int(np.argmax(a)) == 0 for a in attention]))}
