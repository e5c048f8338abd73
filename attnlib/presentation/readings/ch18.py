"""Chapter 18's readings: the randomisation cascade (Adebayo et al. 2018), the two measures that read it
(Neely et al. 2022), and the disagreement between methods (Krishna et al. 2022).

Each public function reads one paragraph's numbers off the chapter's results and returns
``{glued name: value}`` for :func:`attnlib.presentation.glue.glue_all`; :func:`cascade_table` builds
the chapter's table.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ... import uncertainty
from .wording import listed, some_of

__all__ = ["METHODS", "setup", "accuracy", "cascade_table", "verdicts", "first_below", "two_measures",
           "disagreement", "chance_agreement", "agreement_table", "signs", "medians"]

#: Every method of Chapters 15 and 17 that the book's transformer has, in the order of the figures.
METHODS = ("attention", "effective attention", "rollout", "flow", "gradient × input", "integrated gradients",
           "leave-one-out", "norm-based", "norm + residual + LN", "GlobEnc", "value zeroing",
           "attention relevance", "random")


def setup(*, n_seeds: int, n_train: int, n_sentences: int, epochs: int, k: int, stages: Sequence[str],
          methods: Sequence[str], ig_steps: int) -> dict[str, Any]:
    """What the chapter runs: seeds, training sentences, epochs, the sentences every stage explains, the
    k of the top-k measures, the cascade's stages (the trained model first), the methods, and integrated
    gradients' steps (beside Chapter 15's)."""
    from ...experiments.explanations import IG_STEPS

    stages = list(stages)
    return {"ch18_n_seeds": int(n_seeds), "ch18_n_train": f"{n_train:,}", "ch18_n": int(n_sentences),
            "ch18_epochs": int(epochs), "ch18_k": int(k), "ch18_n_stages": len(stages) - 1,
            "ch18_stages": listed(stages[1:]), "ch18_n_methods": len(methods),
            "ch18_n_explanations": len(stages) * int(n_seeds), "ch18_ig_steps": int(ig_steps),
            "ch18_ig_steps_book": IG_STEPS}


def accuracy(correct, *, seed: int = 0) -> dict[str, Any]:
    """The transformer's test accuracy over seeds and sentences (``correct``: (seeds, sentences) bool)."""
    interval = uncertainty.over_seeds(np.asarray(correct, dtype=np.float64), seed=seed)
    return {"ch18_acc": interval.estimate, "ch18_acc_ci": interval.range_text()}


def cascade_table(curves: pd.DataFrame, verdict: pd.DataFrame) -> pd.DataFrame:
    """One row per method: the rank correlation with the trained explanation (mean [95% interval] over
    seeds and sentences) once the output layer, then also the top attention layer, then every parameter is
    random, and the first stage after which its interval lies below the sanity line ("never": none)."""
    stages = list(dict.fromkeys(curves["stage"]))
    shown = {"output": "ρ, output", stages[2]: f"ρ, + {stages[2]}", stages[-1]: "ρ, all"}
    rows = {}
    for m in verdict.index:
        part = curves[(curves.measure == "rank correlation") & (curves.method == m)].set_index("stage")
        rows[m] = {label: uncertainty.Interval(part.loc[s, "mean"], part.loc[s, "low"], part.loc[s, "high"],
                                               n=0).format(2) for s, label in shown.items()}
        below = verdict.loc[m, "below_from"]
        rows[m]["below the line from"] = below if isinstance(below, str) else "never"
    return pd.DataFrame.from_dict(rows, orient="index")


def _group(methods: Sequence[str], n: int, verb: str, verbs: str) -> str:
    """ "3 of the 13 methods (a, b and c) pass" / "1 of the 13 methods (a) passes" / "none of the 13 ..." """
    head = some_of(len(methods), n, "methods")
    return f"{head}{f' ({listed(methods)})' if methods else ''} {verb if len(methods) == 1 else verbs}"


def verdicts(at_output: pd.DataFrame, at_last: pd.DataFrame, *, line: float,
             control: str = "random") -> dict[str, Any]:
    """The cascade read at two stages: the output layer alone random (``at_output``: which methods stay
    exactly as trained, which change, and whether beyond the line or with the seeds disagreeing), and
    every parameter random (``at_last``: pass, fail, within noise of the line);
    :func:`attnlib.experiments.randomisation.verdicts`' tables. ``control``, the random ranking, is read
    apart (it never reads the model)."""
    n = len(at_last)
    read = [m for m in at_output.index if m != control]
    unchanged = [m for m in read if at_output.loc[m, "unchanged"]]
    moved = {w: [m for m in read if not at_output.loc[m, "unchanged"] and at_output.loc[m, "verdict"] == w]
             for w in ("passes", "within noise", "fails")}
    said = []
    if moved["passes"]:
        said.append(f"{listed(moved['passes'])} {'changes' if len(moved['passes']) == 1 else 'change'} "
                    "beyond the line")
    if moved["within noise"]:
        seeds = listed(f"{m} {at_output.loc[m, 'seeds_below']} of {at_output.loc[m, 'seeds']}"
                       for m in moved["within noise"])
        said.append(f"{listed(moved['within noise'])} {'changes' if len(moved['within noise']) == 1 else 'change'}"
                    f", but within noise of the line, the seeds disagreeing (seeds below it: {seeds})")
    if moved["fails"]:
        said.append(f"{listed(moved['fails'])} {'changes' if len(moved['fails']) == 1 else 'change'} "
                    "less than the line asks")
    groups = {w: [m for m in at_last.index if at_last.loc[m, "verdict"] == w]
              for w in ("passes", "fails", "within noise")}
    full = [_group(groups["passes"], n, "passes", "pass") + _seeds(at_last, groups["passes"], below=True),
            _group(groups["fails"], n, "fails", "fail") + _seeds(at_last, groups["fails"], below=False)]
    if groups["within noise"]:
        full.append(_group(groups["within noise"], n, "is", "are") + " within noise of the line")
    moved_text = "; ".join(said) if said else "no other method's explanation changes"
    return {"ch18_line": f"{line:g}",
            "ch18_unchanged": f"{listed(unchanged)} {'is' if len(unchanged) == 1 else 'are'} exactly as trained"
            if unchanged else "no method's explanation stays exactly as trained",
            "ch18_moved": moved_text[0].upper() + moved_text[1:],
            "ch18_full": "; ".join(full), "ch18_pass": some_of(len(groups["passes"]), n, "methods"),
            "ch18_n_pass": len(groups["passes"]), "ch18_n_unchanged": len(unchanged)}


def _seeds(verdict: pd.DataFrame, methods: Sequence[str], *, below: bool) -> str:
    """How many seeds agree with a group's verdict: " (in 3 of 3 seeds each)", or the least of them."""
    if not methods:
        return ""
    n = int(verdict.loc[methods[0], "seeds"])
    agree = [int(verdict.loc[m, "seeds_below"]) if below else n - int(verdict.loc[m, "seeds_below"]) for m in methods]
    each = " each" if len(methods) > 1 else ""
    least = "" if len(set(agree)) == 1 else "at least "
    return f" (in {least}{min(agree)} of {n} seeds{each})"


def first_below(verdict: pd.DataFrame) -> dict[str, Any]:
    """For each method that goes below the line at some stage: the first stage after which its rank
    correlation's interval lies below it (where in the model the explanation reads), as one sentence."""
    by_stage: dict[str, list] = {}
    for m in verdict.index:
        if isinstance(verdict.loc[m, "below_from"], str):
            by_stage.setdefault(verdict.loc[m, "below_from"], []).append(m)
    layers = sorted((s for s in by_stage if s.startswith("layer")), key=lambda s: -int(s.split()[-1]))
    what = {"output": "the output layer is", "embeddings": "the embeddings too are"}
    parts = [f"{listed(by_stage[s])} once {what.get(s, s + ' is')} random"
             for s in ["output", *layers, "embeddings"] if s in by_stage]
    return {"ch18_first_below": "; ".join(parts) if parts else "no method's interval goes below it at any stage"}


def chance_agreement(lengths, k: int) -> float:
    """The top-k agreement of two rankings drawn at random, averaged over sentences: min(k, n) / n."""
    n = np.asarray(lengths, dtype=float)
    if n.ndim != 1 or not len(n) or (n < 1).any():
        raise ValueError("lengths must be a non-empty 1-D array of sentence lengths >= 1")
    return float(np.mean(np.minimum(k, n) / n))


def two_measures(results: Sequence, *, line: float, chance: float, seed: int = 0) -> dict[str, Any]:
    """Neely et al.'s caution, read off the last stage: methods whose rank correlation is below ``line``
    (passing) while their top-k agreement is above ``chance`` beyond noise (their top words survive), and
    methods whose top-k agreement is at or below chance while the rank correlation stays above the line."""
    results = list(results)
    methods = results[0].methods
    hidden, other = [], []
    for m in methods:
        rho = uncertainty.over_seeds(np.stack([r.values["rank correlation"][m][-1] for r in results]), seed=seed)
        top = uncertainty.over_seeds(np.stack([r.values["top-k agreement"][m][-1] for r in results]), seed=seed)
        if rho.high < line and top.low > chance:
            hidden.append(f"{m} (top-k {top.estimate:.2f})")
        if rho.low > line and top.high <= chance:
            other.append(m)
    return {"ch18_chance": chance,
            "ch18_hidden": (f"{listed(hidden)} {'passes' if len(hidden) == 1 else 'pass'} by rank correlation "
                            f"while {'its' if len(hidden) == 1 else 'their'} top {results[0].k} words still agree "
                            f"with the trained model's beyond chance") if hidden else
                           "no method passes by rank correlation while its top words still agree beyond chance",
            "ch18_n_hidden": len(hidden),
            "ch18_other": listed(other) if other else "none"}


def _pairs(matrix, exclude: Sequence[str]) -> list:
    methods = [m for m in matrix.methods if m not in exclude]
    return [(a, b) for i, a in enumerate(methods) for b in methods[i + 1:]]


def _ordered(matrix, exclude: Sequence[str]) -> tuple[dict, list]:
    """Each pair's interval, and the pairs from the least alike to the most."""
    intervals = {p: matrix.interval(*p) for p in _pairs(matrix, exclude)}
    return intervals, sorted(intervals, key=lambda p: intervals[p].estimate)


def agreement_table(agree: Mapping, *, exclude: Sequence[str] = ("random",)) -> pd.DataFrame:
    """Per measure of ``agree`` (measure -> ``disagreement_matrix``), three rows: the median pair's mean,
    and the most and the least alike pairs with their means and 95% intervals over seeds and sentences
    (the random ranking left out). Two columns, so that it reads on a phone."""
    rows = {}
    for metric, matrix in agree.items():
        intervals, ordered = _ordered(matrix, exclude)
        rows[(metric, "median pair")] = {"pair": "", "mean [95% interval]":
                                         f"{np.median([i.estimate for i in intervals.values()]):.2f}"}
        for which, pair in (("most alike", ordered[-1]), ("least alike", ordered[0])):
            rows[(metric, which)] = {"pair": " – ".join(pair), "mean [95% interval]": intervals[pair].format(2)}
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.names = ["measure", ""]
    return table


def disagreement(matrix, *, chance: float, exclude: Sequence[str] = ("random",)) -> dict[str, Any]:
    """The disagreement matrix in sentences: the pairs that agree most and least (with their 95%
    intervals over seeds and sentences), and how many pairs agree beyond a random pair's ``chance``."""
    intervals, ordered = _ordered(matrix, exclude)
    pairs = list(intervals)
    above = [p for p in pairs if intervals[p].low > chance]

    def pair(p) -> str:
        return f"{p[0]} and {p[1]} ({intervals[p].format(2)})"

    return {"ch18_agree_most": pair(ordered[-1]), "ch18_agree_least": pair(ordered[0]),
            "ch18_n_pairs": len(pairs), "ch18_above_chance": some_of(len(above), len(pairs), "pairs"),
            "ch18_median_agreement": float(np.median([intervals[p].estimate for p in pairs])),
            "ch18_metric": matrix.metric}


def signs(feature, sign, *, exclude: Sequence[str] = ("random",)) -> dict[str, Any]:
    """The pairs whose mean sign agreement is below their mean feature agreement (``feature`` and ``sign``:
    the two ``disagreement_matrix`` results): only there does a shared top word carry opposite signs. When
    every such pair has one method in common, it is named once."""
    differ = [(a, b) for a, b in _pairs(feature, exclude) if sign.mean.loc[a, b] < feature.mean.loc[a, b] - 1e-12]
    common = set(differ[0]).intersection(*differ[1:]) if differ else set()
    if not differ:
        text = "no pair"
    elif len(differ) > 1 and len(common) == 1:
        text = f"the {len(differ)} pairs with {common.pop()} and no other"
    else:
        text = listed(f"{a} and {b}" for a, b in differ)
    return {"ch18_sign_differs": text, "ch18_n_sign_differs": len(differ)}


def medians(agree: Mapping, *, exclude: Sequence[str] = ("random",)) -> dict[str, Any]:
    """The median pair's mean of each measure of ``agree`` (measure -> ``disagreement_matrix``):
    ``ch18_median_<first word>`` (feature, rank, sign)."""
    out = {}
    for metric, matrix in agree.items():
        values = [matrix.mean.loc[a, b] for a, b in _pairs(matrix, exclude)]
        out[f"ch18_median_{metric.split()[0]}"] = float(np.median(values))
    return out
