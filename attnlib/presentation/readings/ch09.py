"""What Chapter 9 (diagnostic classifiers) reads off its run, for the prose to quote.

Each function takes the chapter's results (the diagnostic table per guide, where each
guide puts its weight, the long-task table) and returns ``{glued name: value}`` for
:func:`attnlib.presentation.glue.glue_all`.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from ... import uncertainty

__all__ = ["GUIDES", "adversary", "oracle", "positions", "ranking", "span"]

#: The four guides of W&P's Table 3 and the short name their glued numbers carry.
GUIDES = {"uniform": "uniform", "trained MLP": "trained", "base LSTM": "base", "adversary": "adv"}
_OWNER = {
    "uniform": "uniform guide",
    "trained MLP": "trained MLP's",
    "base LSTM": "base LSTM's",
    "adversary": "adversary's",
}
_POSITIONS = ("mean weight on first token", "mean weight on last token", "mean peak weight")


def _scores(table: pd.DataFrame, dataset: str) -> tuple[pd.Series, pd.Series]:
    """(mean test F1, its sd over seeds) per guide of ``dataset``; checks the four guides."""
    for c in ("test f1", "test f1 sd"):
        if c not in table.columns:
            raise ValueError(f"table has no column {c!r} (a table over several seeds has both)")
    f1, sd = table.loc[dataset, "test f1"], table.loc[dataset, "test f1 sd"]
    missing = [g for g in GUIDES if g not in f1.index]
    if missing:
        raise ValueError(f"table has no row for the guide {', '.join(map(repr, missing))}")
    return f1, sd


def _paper(paper: Mapping) -> dict[str, float]:
    """Published F1 per guide, from numbers or from published values (with ``.value``)."""
    out = {g: getattr(p, "value", p) for g, p in paper.items()}
    missing = [g for g in GUIDES if g not in out]
    if missing:
        raise ValueError(f"paper has no F1 for the guide {', '.join(map(repr, missing))}")
    return out


def _versus(f1: pd.Series, sd: pd.Series, a: str, b: str, n_seeds: int) -> str:
    """Guide a against guide b over the seeds: "higher", "lower" or "within noise" (Welch's t
    interval of the difference of the mean F1s, 95%)."""
    return uncertainty.welch(float(f1[a]), float(sd[a]), n_seeds, float(f1[b]), float(sd[b]), n_seeds).verdict


def _points(f1: pd.Series, a: str, b: str, ref: str = "uniform's") -> str:
    """"1.2 points above uniform's": the F1 gap of guide ``a`` over ``b`` in points."""
    gap = float(f1[a] - f1[b])
    return f"{abs(gap) * 100:.1f} points {'above' if gap > 0 else 'below'} {ref}"


def _accuracy_versus(table: pd.DataFrame, dataset: str, n_seeds: int):
    """(verdict, gap) of the adversary's test accuracy against uniform's over the seeds, or None
    when the table has no accuracy sd."""
    if not {"test accuracy", "test accuracy sd"} <= set(table.columns):
        return None
    acc, sd = table.loc[dataset, "test accuracy"], table.loc[dataset, "test accuracy sd"]
    return (_versus(acc, sd, "adversary", "uniform", n_seeds), float(acc["adversary"] - acc["uniform"]))


def ranking(
    table: pd.DataFrame, *, n_seeds: int, paper: Mapping, dataset: str = "rt-polarity"
) -> dict[str, Any]:
    """The guides' order by mean F1, the seed spread, the best guide, and each guide against
    uniform's.

    table: :func:`~attnlib.experiments.diagnostic.diagnostic_table` per data set,
    concatenated with index level ``dataset`` (columns ``test f1`` and ``test f1 sd``, rows
    the four guides); n_seeds: seeds per guide; paper: W&P's Table 3 F1 per guide (numbers,
    or published values with ``.value``); dataset: the data set read.
    """
    f1, sd = _scores(table, dataset)
    paper = _paper(paper)
    out: dict[str, Any] = {f"ch09_f1_{k}": float(f1[g]) for g, k in GUIDES.items()}
    best = str(f1.idxmax())
    lower = all(f1[g] < paper[g] for g in ("uniform", "trained MLP"))
    out.update(
        {
            "ch09_sd_min": float(sd.min()),
            "ch09_sd_max": float(sd.max()),
            "ch09_n_seeds": n_seeds,
            "ch09_order": " > ".join(f1.sort_values(ascending=False).index),
            "ch09_best": _OWNER[best]
            + (
                ", as in the paper"
                if best == "base LSTM"
                else ", not the base LSTM's as in the paper"
            ),
            "ch09_trained_vs_uni": _points(f1, "trained MLP", "uniform"),
            "ch09_base_vs_uni": _points(f1, "base LSTM", "uniform"),
            "ch09_level": "Our uniform and trained-MLP scores are below the paper's, for the "
            "reasons of Chapter 1 (no phrase labels, less data, 50-d vectors)"
            if lower
            else "Our absolute level differs from the paper's (a different data set, no phrase "
            "labels, 50-d vectors), so compare the order of the guides, not the F1s",
        }
    )
    return out


def adversary(
    table: pd.DataFrame, *, paper: Mapping, n_seeds: int, dataset: str = "rt-polarity"
) -> dict[str, Any]:
    """The adversary's guide against uniform's and the BiLSTM's, and whether the paper's
    clearest result (far below uniform) holds.

    table, paper, n_seeds, dataset: as for :func:`ranking`. A gap counts only where Welch's
    95% interval over the seeds excludes 0.
    """
    f1, sd = _scores(table, dataset)
    paper = _paper(paper)
    same = (f1["adversary"] < f1["base LSTM"]) == (paper["adversary"] < paper["base LSTM"])
    adv_gap = float(f1["adversary"] - f1["uniform"])
    verdict = _versus(f1, sd, "adversary", "uniform", n_seeds)
    accuracy = _accuracy_versus(table, dataset, n_seeds)
    if adv_gap <= -0.10 and verdict == "lower":
        adv_clause = "Ours, too, falls far below uniform: the paper's finding holds here."
    elif adv_gap <= -0.10 and accuracy is not None and accuracy[0] == "lower" and accuracy[1] <= -0.10:
        acc = table.loc[dataset, "test accuracy"]
        adv_clause = (
            f"Ours, too, falls far below uniform: its accuracy, {acc['adversary']:.3f} against "
            f"uniform's {acc['uniform']:.3f}, is lower beyond the seed spread. Its F1 alone would "
            f"not show it: it swings from seed to seed (sd {sd['adversary']:.3f}), because a model "
            "near chance scores an F1 near 0 or near 0.67 depending on which class it guesses, so "
            "the interval of its F1 gap is wide."
        )
    elif verdict == "lower":
        adv_clause = (
            "Ours falls below uniform too, beyond the seed spread, but by "
            "less than the paper's 22 points."
        )
    elif verdict == uncertainty.WITHIN_NOISE:
        adv_clause = (
            "Ours stays within the seed spread of uniform: the paper's clearest "
            "result, a guide far worse than uniform, is not reproduced here."
        )
    else:
        adv_clause = (
            "Ours is above uniform, beyond the seed spread: the paper's clearest "
            "result is not reproduced here."
        )
    return {
        "ch09_adv_vs_uni": _points(f1, "adversary", "uniform"),
        "ch09_adv_vs_base": _points(f1, "adversary", "base LSTM", "the BiLSTM's"),
        "ch09_adv_base_order": "the same order as the paper's"
        if same
        else "the reverse of the paper's order",
        "ch09_adv_clause": adv_clause,
    }


def positions(
    pos: Mapping[str, Mapping[str, float]], table: pd.DataFrame, *, n_seeds: int, dataset: str = "rt-polarity"
) -> dict[str, Any]:
    """Where each guide puts its weight (first token, last token, peak), and what that says
    about the BiLSTM's and the adversary's guides.

    pos: guide -> :func:`attnlib.metrics.attention_positions` of its test attention (the four
    guides); table, n_seeds, dataset: as for :func:`ranking` (for the F1 gaps over the seeds).
    """
    missing = [g for g in GUIDES if g not in pos]
    if missing:
        raise ValueError(f"pos has no entry for the guide {', '.join(map(repr, missing))}")
    f1, sd = _scores(table, dataset)
    base_verdict = _versus(f1, sd, "base LSTM", "uniform", n_seeds)
    out: dict[str, Any] = {}
    for g, k in GUIDES.items():
        out[f"ch09_first_{k}"] = pos[g]["mean weight on first token"]
        out[f"ch09_last_{k}"] = pos[g]["mean weight on last token"]
        out[f"ch09_peak_{k}"] = pos[g]["mean peak weight"]
    out["ch09_base_peak_first"] = pos["base LSTM"]["peak on first token"]
    first = {g: p["mean weight on first token"] for g, p in pos.items()}
    peak = {g: p["mean peak weight"] for g, p in pos.items()}
    if base_verdict == "lower" and first["base LSTM"] > 2 * first["uniform"]:
        base_reading = (
            "Here the BiLSTM's guide is below uniform beyond the seed "
            "spread, and it favours the first position: a likely reason is "
            "that the diagnostic model, handed weight on a word like "
            '"the", sees too little of the rest of many sentences.'
        )
    elif base_verdict == "lower":
        base_reading = (
            "Here the BiLSTM's guide is below uniform beyond the seed "
            "spread, although it does not favour the first position much; "
            "position bias does not explain that loss."
        )
    elif base_verdict == uncertainty.WITHIN_NOISE:
        base_reading = (
            "Here the BiLSTM's guide is within the seed spread of uniform: its "
            "weights neither help nor hurt the context-free model much."
        )
    else:
        base_reading = (
            "Here the BiLSTM's guide is above uniform beyond the seed spread: "
            "whatever weight it puts on the first position, its other weights "
            "pick out words that help a model without context."
        )
    out["ch09_base_reading"] = base_reading
    out["ch09_trained_first_dir"] = "less" if first["trained MLP"] < first["uniform"] else "more"
    out["ch09_adv_first_dir"] = "less" if first["adversary"] < first["base LSTM"] else "more"
    out["ch09_adv_peak_dir"] = "below" if peak["adversary"] < peak["base LSTM"] else "above"
    dist = {g: abs(peak["adversary"] - peak[g]) for g in ("uniform", "base LSTM")}
    u = f"{peak['uniform']:.3f}"
    out["ch09_adv_peak_closer"] = (
        f"closer to uniform's ({u}) than to the base's"
        if dist["uniform"] < dist["base LSTM"]
        else f"closer to the base's than to uniform's ({u})"
    )
    on = {e: pos["adversary"][f"mean weight on {e} token"] for e in ("first", "last")}
    edge = max(on, key=on.get)
    w_edge, u_edge = on[edge], pos["uniform"][f"mean weight on {edge} token"]
    out["ch09_adv_edge"] = (
        f"Our adversary's weight favours a position: on "
        f"average {w_edge:.3f} of it sits on the {edge} token (uniform: {u_edge:.3f})."
        if w_edge > 3 * u_edge
        else "Our adversary does not favour the first or the last position much."
    )
    return out


def oracle(long_table: pd.DataFrame) -> dict[str, Any]:
    """The long synthetic task: F1 with the oracle, trained and uniform guides, uniform's sd and
    accuracy, and the oracle's gain over uniform in F1 points.

    long_table: :func:`~attnlib.experiments.diagnostic.diagnostic_table` of the long task
    (rows ``oracle (rationale)``, ``trained MLP``, ``uniform``; columns ``test f1``,
    ``test f1 sd``, ``test accuracy``).
    """
    for c in ("test f1", "test f1 sd", "test accuracy"):
        if c not in long_table.columns:
            raise ValueError(f"long_table has no column {c!r}")
    lt = long_table["test f1"]
    for g in ("oracle (rationale)", "trained MLP", "uniform"):
        if g not in lt.index:
            raise ValueError(f"long_table has no row {g!r}")
    return {
        "ch09_long_oracle": float(lt["oracle (rationale)"]),
        "ch09_long_trained": float(lt["trained MLP"]),
        "ch09_long_uniform": float(lt["uniform"]),
        "ch09_long_uniform_sd": float(long_table.loc["uniform", "test f1 sd"]),
        "ch09_long_uniform_acc": float(long_table.loc["uniform", "test accuracy"]),
        "ch09_long_gap": float(lt["oracle (rationale)"] - lt["uniform"]) * 100,
    }


def span(table: pd.DataFrame, *, dataset: str = "rt-polarity") -> dict[str, Any]:
    """How far apart the four guides' mean F1 lie (in points), and the worst and best guide.

    table, dataset: as for :func:`ranking`.
    """
    f1, _ = _scores(table, dataset)
    return {
        "ch09_span": float(f1.max() - f1.min()) * 100,
        "ch09_worst": str(f1.idxmin()),
        "ch09_best_name": str(f1.idxmax()),
    }
