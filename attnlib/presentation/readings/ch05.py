"""What Chapter 5 (adversarial attention) reads off its run, for the prose to quote, over every
training seed of each model.

The chapter runs J&W's adversary (:func:`~attnlib.experiments.counterfactual.adversarial_attention`)
on every seed of each encoder (:func:`attnlib.seeds.run_over_seeds`, the same test sentences
for each): ``runs`` maps the encoder (``"lstm"``, ``"cnn"``, ``"average"``) to those results
(an :class:`attnlib.seeds.SeedResults`: ``results`` in seed order, ``stack(field)`` seeds x
sentences), the BiLSTM's among them. A sentence counts as *very different* when its eps-max
JSD reaches :data:`~attnlib.experiments.counterfactual.VERY_DIFFERENT_JSD`.

A share is the mean over seeds of each seed's share, with its 95% interval over seeds and
sentences (:func:`attnlib.uncertainty.over_seeds`). A share *by predicted class* is taken over
the sentences each seed's model predicts in that class, so the two classes are two groups of
sentences in each seed; their comparison is
:func:`attnlib.presentation.readings.binned.group_means`' (paired over seeds: one model gives
both). Against the paper's number, and one encoder against another on the same sentences, it
is :func:`attnlib.uncertainty.compare_over_seeds`. Every verdict says in how many seeds it
holds. Each function returns ``{glued name: value}`` for
:func:`attnlib.presentation.glue.glue_all`, or a table for the reader.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from attnlib import uncertainty
from attnlib.experiments import counterfactual

from . import binned as _binned
from .wording import ENCODER_NAMES, listed, some_of

__all__ = [
    "against_paper",
    "budget",
    "bins",
    "class_split",
    "counts",
    "fractions_table",
    "last_shown",
    "other_models",
    "paper_table",
    "seed_frames",
]


def _check_runs(runs: Mapping, *, lstm: bool = True) -> None:
    if not isinstance(runs, Mapping) or not runs:
        raise ValueError("runs must map each encoder to its results over seeds (attnlib.seeds.run_over_seeds)")
    for e, r in runs.items():
        if not hasattr(r, "stack") or not hasattr(r, "results"):
            raise ValueError(f"runs[{e!r}] must be the results over seeds (attnlib.seeds.run_over_seeds), "
                             f"got {type(r).__name__}")
    if lstm and "lstm" not in runs:
        raise ValueError(f"runs needs an 'lstm' entry (the BiLSTM), got {list(runs)}")


def _hits(runs, eps: float | None = None) -> np.ndarray:
    """(S, n) 1.0 where the adversary found a very different attention (re-selected at ``eps``)."""
    def hit(r):
        values = r.eps_max_jsd if eps is None else r.select(eps).eps_max_jsd
        return (np.asarray(values) >= counterfactual.VERY_DIFFERENT_JSD).astype(float)
    return runs.stack(hit)


def _classes(runs, classes: Sequence[str], eps: float | None = None, seed: int = 0):
    """The shares by predicted class (each seed's own predictions): a GroupMedians of means."""
    return _binned.by_class(_hits(runs, eps), runs.stack("predicted"), tuple(classes), seed=seed, statistic="mean")


def _n(runs) -> int:
    return int(len(runs.results[0].eps_max_jsd))


def counts(runs: Mapping, *, classes: Sequence[str], eps: float, seed: int = 0) -> dict[str, Any]:
    """How often the adversary finds a very different attention, per model: ``ch05_{e}_frac``
    (the mean over seeds; ``ch05_{e}_frac_ci`` its interval over seeds and sentences),
    ``ch05_{e}_n`` the sentences, ``ch05_{e}_{class}`` the share by predicted class, and
    ``ch05_n_seeds``. ``eps``: the output bound of the search."""
    _check_runs(runs, lstm=False)
    out: dict[str, Any] = {"ch05_ln2": float(np.log(2)), "ch05_eps": float(eps)}
    for e, r in runs.items():
        iv = uncertainty.over_seeds(_hits(r), seed=seed)
        out[f"ch05_{e}_n"] = _n(r)
        out[f"ch05_{e}_frac"] = float(iv.estimate)
        out[f"ch05_{e}_frac_ci"] = iv.range_text(2)
        by_class = _classes(r, classes, seed=seed)
        for c in classes:
            out[f"ch05_{e}_{c}"] = by_class.estimate(c)
    out["ch05_n_seeds"] = int(len(next(iter(runs.values())).results))
    return out


def fractions_table(runs: Mapping, *, classes: Sequence[str], seed: int = 0) -> pd.DataFrame:
    """One row per model and predicted class (and "all"): the sentences each seed's model
    predicts in the class, and the share of them with a very different attention, "0.596
    [0.536, 0.659]": the mean over seeds and its 95% interval over seeds and sentences."""
    _check_runs(runs, lstm=False)
    rows = {}
    for e, r in runs.items():
        by_class = _classes(r, classes, seed=seed)
        for c in classes:
            rows[(f"{e}+tanh", c)] = {"sentences per seed": by_class.count_text(c),
                                      "fraction very different": by_class.interval(c).format(3)}
        rows[(f"{e}+tanh", "all")] = {"sentences per seed": str(_n(r)),
                                      "fraction very different": uncertainty.over_seeds(_hits(r), seed=seed).format(3)}
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index = pd.MultiIndex.from_tuples(frame.index, names=["model", "predicted"])
    return frame


def _against(lstm, paper: Mapping, eps: float, c: int, seed: int) -> uncertainty.SeedComparison:
    """The BiLSTM's share of class ``c`` (its own predictions, per seed) against the paper's number."""
    hits = _hits(lstm, eps)
    mine = lstm.stack("predicted") == c
    ours = np.where(mine, hits, np.nan)
    theirs = np.where(mine, float(paper[c].value), np.nan)
    return uncertainty.compare_over_seeds(ours, theirs, seed=seed)


def paper_table(runs: Mapping, paper: Mapping, *, eps: float, paper_eps: float, classes: Sequence[str],
                seed: int = 0) -> pd.DataFrame:
    """The BiLSTM's shares by predicted class at ``eps`` and at ``paper_eps`` (the means over
    seeds with their 95% intervals over seeds and sentences) beside the authors' numbers."""
    _check_runs(runs)
    lstm, n_seeds = runs["lstm"], len(runs["lstm"].results)
    rows = {}
    for e in sorted({eps, paper_eps}):
        by_class = _classes(lstm, classes, eps=e, seed=seed)
        rows[f"ours, BiLSTM, eps = {e:g} (mean over {n_seeds} seeds)"] = {
            f"predicted {c}": by_class.interval(c).format(3) for c in classes}
    rows[f"J&W, SST, BiLSTM (authors' outputs, eps = {paper_eps:g})"] = {
        f"predicted {c}": f"{paper[k].value:.2f}" for k, c in enumerate(classes)}
    return pd.DataFrame.from_dict(rows, orient="index")


def against_paper(runs: Mapping, paper: Mapping, *, eps: float, paper_eps: float, classes: Sequence[str],
                  seed: int = 0) -> dict[str, Any]:
    """Our BiLSTM shares against the authors', at their eps and at ours, over seeds and sentences.

    runs: encoder -> results over seeds (an ``"lstm"`` entry needed); paper: class (0, 1) ->
    published value (with ``.value``); eps: the run's eps; paper_eps: the eps behind the
    authors' committed outputs; classes: the two class names. Ours is above (below) theirs
    for a class when :func:`attnlib.uncertainty.compare_over_seeds` says so: the interval of
    the difference over seeds and sentences excludes 0 and most seeds agree.
    """
    _check_runs(runs)
    lstm = runs["lstm"]
    c0, c1 = classes
    pe = _classes(lstm, classes, eps=paper_eps, seed=seed)
    run = _classes(lstm, classes, eps=eps, seed=seed)
    out: dict[str, Any] = {
        "ch05_paper_eps": float(paper_eps),
        "ch05_pe_neg": pe.estimate(c0),
        "ch05_pe_pos": pe.estimate(c1),
    }
    verdicts, supports = {}, {}
    for key, e in (("ch05_pe_vs_paper", paper_eps), ("ch05_run_vs_paper", eps)):
        comparisons = [_against(lstm, paper, e, c, seed) for c in (0, 1)]
        words = [c.says("above", "below", tie="within noise of", disagree="above or below, by seed,")
                 for c in comparisons]
        support = [c.seeds_text() for c in comparisons]
        verdicts[key] = words
        supports[key] = (f"{support[0]} for each class" if support[0] == support[1] else
                         f"{support[0]} for predicted {c0}, {support[1]} for predicted {c1}")
        out[key] = (
            f"{words[0]} theirs for both classes ({supports[key]})"
            if words[0] == words[1]
            else f"{words[0]} theirs for sentences predicted {c0} ({support[0]}) and {words[1]} "
            f"theirs for those predicted {c1} ({support[1]})"
        )
    at_paper = f"{pe.estimate(c0):.3f} and {pe.estimate(c1):.3f}"
    at_run = f"{run.estimate(c0):.3f} and {run.estimate(c1):.3f}"
    n_seeds = len(lstm.results)
    if verdicts["ch05_pe_vs_paper"] == verdicts["ch05_run_vs_paper"]:  # one verdict: said once
        words = verdicts["ch05_run_vs_paper"]
        same = (f"{words[0]} theirs for both classes at either ε" if words[0] == words[1] else
                f"at either ε {words[0]} theirs for sentences predicted {c0} and {words[1]} theirs for those "
                f"predicted {c1}")
        sp, sr = supports["ch05_pe_vs_paper"], supports["ch05_run_vs_paper"]
        support = f"{sp}, at either ε" if sp == sr else f"at {paper_eps:g}: {sp}; at {eps:g}: {sr}"
        out["ch05_against_paper"] = (f"Over {n_seeds} training seeds, at {paper_eps:g} ours are {at_paper}, and at "
                                     f"{eps:g} {at_run}: {same} ({support}).")
    else:
        out["ch05_against_paper"] = (f"Over {n_seeds} training seeds, at {paper_eps:g} ours are {at_paper}, "
                                     f"{out['ch05_pe_vs_paper']}; at {eps:g} they are {at_run}, "
                                     f"{out['ch05_run_vs_paper']}.")
    return out


def class_split(runs: Mapping, *, classes: Sequence[str], seed: int = 0) -> dict[str, Any]:
    """Whether the adversary succeeds more often on one predicted class of the BiLSTM, over seeds
    and sentences (the two classes' shares, each seed over its own predictions; paired over seeds).

    runs: encoder -> results over seeds (an ``"lstm"`` entry needed); classes: the two class names.
    """
    _check_runs(runs)
    c0, c1 = classes
    g = _classes(runs["lstm"], classes, seed=seed)
    split = g.compare(c0, g, c1, paired_seeds=True)
    difference = split.difference.signed_text(missing="too few sentences in a class for an interval")
    gap = f"({difference}; {split.seeds_text()})"
    return {
        "ch05_lstm_class_split": split.says(
            f"the adversary succeeds more often on the BiLSTM's sentences predicted {c0} "
            f"than on those predicted {c1}, and the gap {gap} is beyond noise over seeds and sentences",
            f"the adversary succeeds less often on the BiLSTM's sentences predicted {c0} "
            f"than on those predicted {c1}, and the gap {gap} is beyond noise over seeds and sentences",
            tie=f"the gap between the BiLSTM's two classes {gap} is within noise over seeds and sentences: "
            "these runs do not say which class the adversary finds easier",
            disagree=f"which of the BiLSTM's two classes the adversary finds easier depends on the seed {gap}",
        )
    }


def other_models(runs: Mapping, *, classes: Sequence[str], seed: int = 0) -> dict[str, Any]:
    """The CNN's and the Average model's success against the BiLSTM's, overall and by class, over
    seeds and sentences (two recipes: ``paired_seeds=False``; the same test sentences).

    runs: encoder -> results over seeds (an ``"lstm"`` entry needed); classes: the two class names.
    """
    _check_runs(runs)
    c0, c1 = classes
    hits = {e: _hits(r) for e, r in runs.items()}
    share = {e: uncertainty.over_seeds(h, seed=seed) for e, h in hits.items()}
    others = [e for e in runs if e != "lstm"]
    said, support = {}, {}
    for e in others:
        same = np.array_equal(runs[e].indices, runs["lstm"].indices)
        if not same:
            raise ValueError(f"the {e} and lstm runs must score the same sentences")
        c = uncertainty.compare_over_seeds(hits[e], hits["lstm"], paired_seeds=False, seed=seed)
        said[e] = c.says("more often than with the BiLSTM", "less often than with the BiLSTM",
                         tie="as often as with the BiLSTM, within noise",
                         disagree="more or less often than with the BiLSTM, depending on the seed")
        support[e] = c.seeds_text()
    shares = {e: f"{share[e].estimate:.2f} of the sentences with the {ENCODER_NAMES[e]}" for e in others}
    lstm_share = f"{share['lstm'].estimate:.2f}"
    if len(set(said.values())) == 1:  # one verdict: said once
        seeds_said = (next(iter(support.values())) + (" for each" if len(others) > 1 else "")
                      if len(set(support.values())) == 1
                      else "; ".join(f"the {ENCODER_NAMES[e]}: {support[e]}" for e in others))
        vs_lstm = (f"on {listed(shares.values())}, against {lstm_share} with the BiLSTM: "
                   + ("each " if len(others) > 1 else "") + f"{next(iter(said.values()))} ({seeds_said})")
    else:
        vs_lstm = (f"on {listed(shares[e] + ', ' + said[e] + ' (' + support[e] + ')' for e in others)}; "
                   f"with the BiLSTM, on {lstm_share}")
    parts = []
    for e in others:
        g = _classes(runs[e], classes, seed=seed)
        c = g.compare(c0, g, c1, paired_seeds=True)
        words = c.says(f"more often on predicted {c0}", f"more often on predicted {c1}",
                       tie="the classes within noise", disagree="the class depends on the seed")
        parts.append(f"the {ENCODER_NAMES[e]}: " + ", ".join(f"{g.estimate(k):.3f} predicted {k}" for k in classes)
                     + f" ({words}; {c.seeds_text()})")
    return {"ch05_others_vs_lstm": vs_lstm, "ch05_others_classes": "; ".join(parts)}


def seed_frames(runs: Mapping) -> dict:
    """encoder -> one :func:`~attnlib.experiments.counterfactual.bin_by_max_attention` frame of
    the eps-max JSD per seed (columns value, bin, predicted), the first seed's first: the
    violins of J&W's Figure 8 and their seed markers."""
    _check_runs(runs, lstm=False)
    return {e: [counterfactual.bin_by_max_attention(r.eps_max_jsd, r.max_attention, predicted=r.predicted)
                for r in seeds_.results] for e, seeds_ in runs.items()}


def _against_line(g, name: str, classes: Sequence[str], threshold: float) -> str:
    """"For the BiLSTM's sentences predicted negative, the median lies at or above the line in
    [0, 0.25) and [0.25, 0.5), within noise of it in [0.5, 0.75); for those predicted positive,
    ..." (groups with too few sentences in some seed named, not judged)."""
    parts = []
    for c in classes:
        groups = [lab for lab in g.labels if lab[0] == c and not g.empty(lab)]
        judged = [lab for lab in groups if g.enough(lab)]
        where: dict[str, list[str]] = {}
        for lab in judged:
            iv = g.interval(lab)
            w = ("at or above the line" if iv.low >= threshold else "below it" if iv.high < threshold
                 else "within noise of it")
            where.setdefault(w, []).append(lab[1])
        few = [lab[1] for lab in groups if lab not in judged]
        noun = "bins with enough sentences" if few else "non-empty bins"
        text = (", ".join(f"{w} in {some_of(len(bs), len(judged), noun) if len(where) == 1 else listed(bs)}"
                          for w, bs in where.items()) if judged else "no bin holds enough sentences to judge")
        if few:
            text += f" ({listed(few)}: too few sentences in some seed to judge)"
        parts.append(text)
    c0, c1 = classes
    return (f"For the {name}'s sentences predicted {c0}, the median lies {parts[0]}; for those predicted {c1}, "
            f"{parts[1]}.")


def bins(runs: Mapping, *, classes: Sequence[str], threshold: float, seed: int = 0) -> dict[str, Any]:
    """Where the eps-max JSD's median sits against the "very different" line, bin by bin of max
    attention and by predicted class, over seeds and sentences: at or above it when the
    interval of the bin's median (mean over seeds of the per-seed medians,
    :func:`attnlib.presentation.readings.binned.by_class_and_bin`) lies at or above the line,
    below it when it lies below, else within noise of it; groups with too few sentences in some
    seed are named, not judged.

    runs: encoder -> results over seeds, the BiLSTM's first; classes: the class names;
    threshold: the line. ``ch05_lstm_top`` and ``ch05_lstm_bottom``: the first seed's BiLSTM's
    sentences in the top and the lowest bin.
    """
    _check_runs(runs)
    lines = []
    for e, r in runs.items():
        g = _binned.by_class_and_bin(r.stack("eps_max_jsd"), r.stack("predicted"), r.stack("max_attention"),
                                     tuple(classes), seed=seed)
        lines.append(_against_line(g, ENCODER_NAMES[e], classes, threshold))
    codes, _ = _binned.bin_codes(runs["lstm"].results[0].max_attention)
    return {
        "ch05_lstm_top": int((codes[0] == 3).sum()),
        "ch05_lstm_bottom": int((codes[0] == 0).sum()),
        "ch05_line": " ".join(lines),
    }


def last_shown(result, shown: Sequence[int], *, threshold: float) -> dict[str, Any]:
    """The eps-max JSD of the last sentence shown, and whether it reaches the line.

    result: the first seed's BiLSTM's AdversaryResult; shown: the positions (in ``result``) of
    the sentences shown; threshold: the "very different" line.
    """
    if not len(shown):
        raise ValueError("shown must hold at least one position")
    last_jsd = float(result.eps_max_jsd[shown[-1]])
    return {
        "ch05_last_jsd": last_jsd,
        "ch05_last_side": "falls below" if last_jsd < threshold else "still reaches",
    }


def budget(steps: int) -> dict[str, Any]:
    """This profile's adversary steps (its time budget), for the prose."""
    return {"ch05_steps": int(steps)}
