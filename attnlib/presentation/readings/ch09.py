"""What Chapter 9 (diagnostic classifiers) reads off its run, for the prose to quote, over
every training seed.

The chapter trains the whole chain once per seed of ``seeds_after(seed, P.verdict_seeds)``:
the guide's model (the BiLSTM base, the adversary against it) and, guided by it, the
diagnostic model. Its results are an :class:`attnlib.diagnostic.DiagnosticRuns` (``runs``):
``labels`` (n,) and, per guide, ``predicted`` (S, n), the diagnostic model's decision on
every test sentence for every seed, and ``attention``, the weights it was handed. Row k of
two guides shares the diagnostic seed (initialisation and batch order), so two guides are
compared seed by seed (``paired_seeds=True``): the seed part of a difference's variance is
the spread of the per-seed differences. A mean carries its 95% interval over seeds and
sentences (:func:`attnlib.uncertainty.f1_over_seeds`, :func:`~attnlib.uncertainty.over_seeds`),
a comparison is :func:`~attnlib.uncertainty.compare_f1_over_seeds` or
:func:`~attnlib.uncertainty.compare_over_seeds` and says in how many seeds it holds, and the
guides are ranked with ties where noise cannot order them
(:func:`~attnlib.uncertainty.ranks_from_wins`).

Each function returns ``{glued name: value}`` for :func:`attnlib.presentation.glue.glue_all`.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ... import uncertainty
from .wording import listed

__all__ = ["GUIDES", "guide_table", "guide_cells", "ranking", "adversary", "degenerate", "positions", "oracle",
           "span", "lambdas", "guide_lambda", "long_train"]

#: The four guides of W&P's Table 3 and the short name their glued numbers carry.
GUIDES = {"uniform": "uniform", "trained MLP": "trained", "base LSTM": "base", "adversary": "adv"}
_LN2 = math.log(2.0)


# ----------------------------------------------------------------------------- checks and helpers
def _check_runs(runs, guides=tuple(GUIDES)) -> None:
    for name in ("labels", "predicted"):
        if not hasattr(runs, name):
            raise ValueError(f"runs must be a DiagnosticRuns (attnlib.diagnostic.diagnostic_over_seeds), no {name!r}")
    missing = [g for g in guides if g not in runs.predicted]
    if missing:
        raise ValueError(f"runs has no guide {', '.join(map(repr, missing))}")
    n = len(runs.labels)
    for g in guides:
        p = np.asarray(runs.predicted[g])
        if p.ndim != 2 or p.shape[1] != n:
            raise ValueError(f"runs.predicted[{g!r}] must be (seeds, {n} sentences), got shape {p.shape}")


def _predicted(runs, guide: str) -> np.ndarray:
    return np.asarray(runs.predicted[guide])


def _correct(runs, guide: str) -> np.ndarray:
    """(S, n) 1.0 where a seed's diagnostic model classifies the sentence right."""
    return (_predicted(runs, guide) == np.asarray(runs.labels)[None, :]).astype(np.float64)


def _f1(runs, guide: str, seed: int) -> uncertainty.Interval:
    return uncertainty.f1_over_seeds(runs.labels, _predicted(runs, guide), seed=seed)


def _f1_versus(runs, a: str, b: str, seed: int) -> uncertainty.SeedComparison:
    """F1(a) - F1(b), row k of both sharing the diagnostic seed."""
    return uncertainty.compare_f1_over_seeds(runs.labels, _predicted(runs, a), _predicted(runs, b),
                                             paired_seeds=True, seed=seed)


def _accuracy_versus(runs, a: str, b: str, seed: int) -> uncertainty.SeedComparison:
    return uncertainty.compare_over_seeds(_correct(runs, a), _correct(runs, b), seed=seed)


def _paper(paper: Mapping) -> dict[str, float]:
    """Published F1 per guide, from numbers or from published values (with ``.value``)."""
    out = {g: float(getattr(p, "value", p)) for g, p in paper.items()}
    missing = [g for g in GUIDES if g not in out]
    if missing:
        raise ValueError(f"paper has no F1 for the guide {', '.join(map(repr, missing))}")
    return out


def _n_seeds(runs) -> int:
    return int(_predicted(runs, next(iter(runs.predicted))).shape[0])


def _seeds_words(n: int) -> str:
    return "one model" if n == 1 else f"{n} seeds"


def _points(diff: float, ref: str) -> str:
    """"0.9 points above uniform's": a difference of F1s in points."""
    return f"{abs(diff) * 100:.1f} points {'above' if diff > 0 else 'below'} {ref}"


def _verdict_words(c: uncertainty.SeedComparison) -> str:
    """"beyond noise, holds in 3 of 3 seeds", "within noise (in none of 3 seeds alone)", ..."""
    if c.verdict == uncertainty.SEEDS_DISAGREE:
        return f"the seeds disagree ({c.seeds_text()})"
    if c.differs:
        return f"beyond noise, {c.seeds_text()}"
    return f"within noise ({c.seeds_text()})"


def _word(c: uncertainty.SeedComparison) -> str:
    return "the seeds disagree" if c.verdict == uncertainty.SEEDS_DISAGREE else (
        "beyond noise" if c.differs else "within noise")


def _versus_text(c: uncertainty.SeedComparison, ref: str) -> str:
    """"1.7 points below uniform's, within noise (difference -0.017, 95% interval -0.045 to
    +0.011; beyond noise in 1 of 3 seeds alone)"."""
    d = c.difference
    return f"{_points(d.estimate, ref)}, {_word(c)} (difference {d.signed_text()}; {c.seeds_text()})"


def _short(c: uncertainty.SeedComparison, ref: str) -> str:
    """"0.9 points below uniform's, within noise"."""
    return f"{_points(c.difference.estimate, ref)}, {_word(c)}"


def _direction(c: uncertainty.SeedComparison, more: str, less: str, ref: str) -> str:
    """"less than uniform's, beyond noise (holds in 3 of 3 seeds)", "within noise of the base's
    0.501 (beyond noise in 3 of 3 seeds alone)", ..."""
    st = c.seeds_text()
    return c.says(f"{more} than {ref}, beyond noise ({st})", f"{less} than {ref}, beyond noise ({st})",
                  tie=f"within noise of {ref} ({st})", disagree=f"{more} than {ref} in some seeds and {less} in "
                                                             f"others ({st})")


def _pairwise(runs, guides: Sequence[str], seed: int) -> dict:
    """(a, b) -> F1(a) against F1(b) for every pair of ``guides`` (a before b in their order)."""
    return {(a, b): _f1_versus(runs, a, b, seed) for i, a in enumerate(guides) for b in guides[i + 1:]}


def _ranks(pairs: Mapping, guides: Sequence[str]) -> dict[str, int]:
    """Rank of each guide by F1: 1 + the number of guides above it beyond noise over seeds and
    sentences (guides noise cannot order share a rank); ``pairs`` from :func:`_pairwise`."""
    k = len(guides)
    wins = np.zeros((k, k), dtype=bool)
    for (a, b), c in pairs.items():
        i, j = guides.index(a), guides.index(b)
        if c.verdict == "higher":
            wins[i, j] = True
        elif c.verdict == "lower":
            wins[j, i] = True
    return dict(zip(guides, (int(r) for r in uncertainty.ranks_from_wins(wins))))


def _order_text(ranks: Mapping[str, int], means: Mapping[str, float]) -> str:
    """"trained MLP and uniform (rank 1, within noise of each other), then base LSTM (rank 3), then
    adversary (rank 4)"."""
    groups: dict[int, list] = {}
    for g in sorted(ranks, key=lambda g: (ranks[g], -means[g])):
        groups.setdefault(ranks[g], []).append(g)
    parts = []
    for r, members in groups.items():
        tie = ", within noise of each other" if len(members) > 1 else ""
        parts.append(f"{listed(members)} (rank {r}{tie})")
    return ", then ".join(parts)


# ----------------------------------------------------------------------------- the table
def _all_ranks(runs, guides: Sequence[str], seed: int) -> dict[str, dict[str, int]]:
    """{"f1": ranks, "accuracy": ranks} of ``guides``, each with ties within noise."""
    f1 = _ranks(_pairwise(runs, guides, seed), guides)
    acc = {(a, b): _accuracy_versus(runs, a, b, seed) for i, a in enumerate(guides) for b in guides[i + 1:]}
    return {"f1": f1, "accuracy": _ranks(acc, guides)}


def guide_table(runs, *, paper: Mapping | None = None, ranked: bool = True, seed: int = 0) -> pd.DataFrame:
    """Table 3 over seeds, numeric: one row per guide of ``runs`` (in its order), with the test F1
    (the mean over seeds) and its 95% interval over seeds and sentences (``test f1``, ``test f1
    low``, ``test f1 high``), its rank among W&P's four guides by F1 (``f1 rank``; NaN for another
    guide), the accuracy, its interval and rank likewise, and W&P's F1 (``published f1``; NaN
    where the paper has no such row). ``paper``: W&P's Table 3 F1 per guide, or None;
    ``ranked=False`` leaves the ranks NaN (a table of other guides, e.g. the long task's)."""
    guides = list(runs.predicted)
    _check_runs(runs, guides)
    wp = [g for g in GUIDES if g in guides]
    ranks = _all_ranks(runs, wp, seed) if ranked and len(wp) > 1 else {"f1": {}, "accuracy": {}}
    published = {g: float(getattr(v, "value", v)) for g, v in (paper or {}).items()}
    rows = {}
    for g in guides:
        f1 = _f1(runs, g, seed)
        acc = uncertainty.over_seeds(_correct(runs, g), seed=seed)
        rows[g] = {"test f1": f1.estimate, "test f1 low": f1.low, "test f1 high": f1.high,
                   "f1 rank": float(ranks["f1"].get(g, math.nan)), "published f1": published.get(g, math.nan),
                   "test accuracy": acc.estimate, "test accuracy low": acc.low, "test accuracy high": acc.high,
                   "accuracy rank": float(ranks["accuracy"].get(g, math.nan))}
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index.name = "guide"
    return frame


_TABLE_COLUMNS = ("test f1", "test f1 low", "test f1 high", "f1 rank", "published f1", "test accuracy",
                  "test accuracy low", "test accuracy high", "accuracy rank")


def guide_cells(table: pd.DataFrame) -> pd.DataFrame:
    """The reader's view of :func:`guide_table`: "0.778 [0.760, 0.795]" cells, the ranks with "="
    where one is shared, and W&P's F1 ("n/a" where they have no such row); a rank or W&P
    column with no value at all is left out."""
    missing = [c for c in _TABLE_COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"table lacks the column(s) {', '.join(missing)} (give guide_table's frame)")

    def cells(metric):
        return [uncertainty.Interval(r[metric], r[f"{metric} low"], r[f"{metric} high"], 0).format(3)
                for _, r in table.iterrows()]

    def ranks(column):
        shared = table[column].map(table[column].value_counts())
        return ["n/a" if not np.isfinite(r) else f"{int(r)}{'=' if shared[g] > 1 else ''}"
                for g, r in table[column].items()]

    out = pd.DataFrame(index=table.index)
    out["test F1 [95% interval]"] = cells("test f1")
    out["rank by F1"] = ranks("f1 rank")
    out["W&P F1"] = ["n/a" if not np.isfinite(v) else f"{v:.3f}" for v in table["published f1"]]
    out["test accuracy [95% interval]"] = cells("test accuracy")
    out["rank by accuracy"] = ranks("accuracy rank")
    empty = [c for c, source in (("rank by F1", "f1 rank"), ("W&P F1", "published f1"),
                                 ("rank by accuracy", "accuracy rank")) if table[source].isna().all()]
    return out.drop(columns=empty)


# ----------------------------------------------------------------------------- the readings
#: a guide as a list of guides names it ("the uniform, trained-MLP and adversary guides")
_NAMED = {"uniform": "uniform", "trained MLP": "trained-MLP", "base LSTM": "BiLSTM", "adversary": "adversary"}


def _first(ranks: Mapping[str, int]) -> str:
    """"goes to the uniform guide" or "is shared by the uniform and trained-MLP guides"."""
    first = [_NAMED[g] for g in GUIDES if ranks[g] == 1]
    if len(first) == 1:
        return f"goes to the {first[0]} guide"
    return f"is shared by the {listed(first)} guides"


def _best(ranks: Mapping[str, dict]) -> str:
    """Who ranks first by F1 and by accuracy, and where the BiLSTM's guide, first in the paper, stands."""
    firsts = {m: _first(r) for m, r in ranks.items()}
    if firsts["f1"] == firsts["accuracy"]:
        where = f"By F1 and by accuracy alike the first rank {firsts['f1']}."
    else:
        where = f"By F1 the first rank {firsts['f1']}; by accuracy it {firsts['accuracy']}."
    base = {m: r["base LSTM"] for m, r in ranks.items()}
    if all(b == 1 for b in base.values()):
        alone = all(sum(v == 1 for v in r.values()) == 1 for r in ranks.values())
        return where + (" The BiLSTM's guide ranks first, as in the paper." if alone else
                        " The BiLSTM's guide, first alone in the paper, shares the first rank here.")
    if base["f1"] == base["accuracy"]:
        return where + f" The BiLSTM's guide, first in the paper, ranks {base['f1']} by both."
    return where + (f" The BiLSTM's guide, first in the paper, ranks {base['f1']} by F1 and {base['accuracy']} "
                    "by accuracy.")


def ranking(runs, *, paper: Mapping, seed: int = 0) -> dict[str, Any]:
    """The guides' ranks by F1 (the paper's measure) and by accuracy, with ties within noise, the
    BiLSTM's place against the paper's, and the trained MLP's and the BiLSTM's guides against
    uniform's, over seeds and sentences.

    runs: :class:`attnlib.diagnostic.DiagnosticRuns` with the four guides of :data:`GUIDES`;
    paper: W&P's Table 3 F1 per guide (numbers, or published values with ``.value``); seed:
    the bootstrap's. Accuracy is ranked too because F1 cannot rank a guide near chance: such a
    model scores an F1 near 0 or near 0.67 depending on the class it guesses, so its F1 swings
    between seeds and its interval spans most of [0, 1].
    """
    _check_runs(runs)
    paper = _paper(paper)
    f1 = {g: _f1(runs, g, seed) for g in GUIDES}
    ranks = _all_ranks(runs, list(GUIDES), seed)
    means = {g: iv.estimate for g, iv in f1.items()}
    acc_means = {g: float(_correct(runs, g).mean()) for g in GUIDES}
    out: dict[str, Any] = {}
    for g, k in GUIDES.items():
        out[f"ch09_f1_{k}"] = f1[g].estimate
        out[f"ch09_f1_ci_{k}"] = f1[g].range_text()
    n = _n_seeds(runs)
    out["ch09_n_seeds"] = n
    out["ch09_seeds_words"] = _seeds_words(n)
    out["ch09_order"] = _order_text(ranks["f1"], means)
    out["ch09_order_acc"] = _order_text(ranks["accuracy"], acc_means)
    out["ch09_best"] = _best(ranks)
    for g, k in (("trained MLP", "trained"), ("base LSTM", "base")):
        c = _f1_versus(runs, g, "uniform", seed)
        out[f"ch09_{k}_vs_uni"] = _versus_text(c, "uniform's")
        out[f"ch09_{k}_vs_uni_short"] = _short(c, "uniform's")
    below = all(f1[g].high < paper[g] for g in ("uniform", "trained MLP"))
    out["ch09_level"] = (
        "Our uniform and trained-MLP scores lie below the paper's, beyond their intervals, for the reasons "
        "of Chapter 1 (no phrase labels, less data, 50-d vectors)"
        if below else
        "Our absolute level differs from the paper's (a different data set, no phrase labels, 50-d "
        "vectors), so compare the order of the guides, not the F1s"
    )
    return out


def adversary(runs, *, paper: Mapping, seed: int = 0) -> dict[str, Any]:
    """The adversary's guide against uniform's and the BiLSTM's, over seeds and sentences, and
    whether the paper's clearest result (far below uniform) holds.

    runs, paper, seed: as for :func:`ranking`. The F1 gap is read with its interval; a model
    near chance scores an F1 near 0 or near 0.67 depending on the class it guesses, so when the
    F1 gap is within noise the accuracy gap is read too. The paper's gap (22.0 points on SST)
    is set against our interval of the gap, not against a band of our own.
    """
    _check_runs(runs)
    paper = _paper(paper)
    vs_uni = _f1_versus(runs, "adversary", "uniform", seed)
    vs_base = _f1_versus(runs, "adversary", "base LSTM", seed)
    acc = _accuracy_versus(runs, "adversary", "uniform", seed)
    acc_base = _accuracy_versus(runs, "adversary", "base LSTM", seed)
    paper_gap = paper["adversary"] - paper["uniform"]
    d = vs_uni.difference
    where = "lies within" if d.contains(paper_gap) else "lies outside"
    paper_text = (f"the paper's gap, {paper_gap * 100:.1f} points, {where} our interval of the gap "
                  f"({d.low * 100:.1f} to {d.high * 100:.1f} points)")
    if vs_uni.verdict == "lower":
        clause = f"Ours, too, falls below uniform, beyond noise ({vs_uni.seeds_text()}); {paper_text}."
    elif vs_uni.verdict == uncertainty.SEEDS_DISAGREE:
        clause = (f"Whether ours falls below uniform depends on the seed ({vs_uni.seeds_text()}), so this run "
                  "neither reproduces nor refutes the paper's clearest result.")
    elif vs_uni.verdict == "higher":
        clause = (f"Ours is above uniform, beyond noise ({vs_uni.seeds_text()}): the paper's clearest result is "
                  "not reproduced here.")
    elif acc.verdict == "lower":
        clause = (
            f"Its F1 gap is within noise ({vs_uni.seeds_text()}), but its accuracy, {acc.a.estimate:.3f} "
            f"against uniform's {acc.b.estimate:.3f} (difference {acc.difference.signed_text()}), is lower "
            f"beyond noise ({acc.seeds_text()}). The F1 alone does not show it because a model near chance "
            "scores an F1 near 0 or near 0.67 depending on which class it guesses, so the interval of its "
            "F1 gap is wide."
        )
    else:
        clause = (f"Ours stays within noise of uniform in F1 ({vs_uni.seeds_text()}) and in accuracy "
                  f"({acc.seeds_text()}): the paper's clearest result, a guide far worse than uniform, is not "
                  "reproduced here.")
    paper_lower = paper["adversary"] < paper["base LSTM"]
    same, reverse = "the same order as the paper's", "the reverse of the paper's order"
    order = vs_base.says(reverse if paper_lower else same, same if paper_lower else reverse,
                         tie="so by F1 noise does not order the two", disagree="and the seeds disagree on the order")
    if not vs_base.differs and acc_base.differs:
        order += acc_base.says(
            f"; by accuracy ours is above the BiLSTM's beyond noise ({acc_base.seeds_text()}), "
            + (reverse if paper_lower else same),
            f"; by accuracy ours is below the BiLSTM's beyond noise ({acc_base.seeds_text()}), "
            + (same if paper_lower else reverse))
    return {
        "ch09_adv_vs_uni": _versus_text(vs_uni, "uniform's"),
        "ch09_adv_vs_uni_short": _short(vs_uni, "uniform's"),
        "ch09_adv_vs_base": _versus_text(vs_base, "the BiLSTM's"),
        "ch09_adv_base_order": order,
        "ch09_adv_clause": clause,
        "ch09_adv_acc_short": acc.says(f"above uniform's beyond noise ({acc.seeds_text()})",
                                       f"below uniform's beyond noise ({acc.seeds_text()})",
                                       tie=f"within noise of uniform's ({acc.seeds_text()})",
                                       disagree=f"above or below uniform's depending on the seed ({acc.seeds_text()})"),
        "ch09_acc_adv": acc.a.estimate,
        "ch09_acc_uniform": acc.b.estimate,
    }


def _per_seed_list(values, fmt: str) -> str:
    """"96%, 16% and 99%": one value per seed, in seed order."""
    return listed(format(v, fmt) for v in values)


def degenerate(
    runs,
    *,
    position: str,
    edges: Sequence[str],
    edge_tokens: Mapping[str, pd.Series],
    adversary_jsd: Sequence[float],
    paper_jsd: float,
    seed: int = 0,
) -> dict[str, Any]:
    """Whether the adversary is degenerate, seed by seed (its attention peaks on one position in
    most sentences, whatever they say), and what its guide tells the diagnostic model beyond
    that position.

    runs: :class:`attnlib.diagnostic.DiagnosticRuns` with the guides ``"adversary"``, ``"base
    LSTM"`` and ``position``, whose row k puts all the weight on ``edges[k]``, the edge ("first"
    or "last" token) where seed k's adversary peaks most often (:func:`attnlib.diagnostic.peak_edges`,
    :func:`~attnlib.diagnostic.position_guide`); edge_tokens: edge -> the test sentences' tokens
    there, as shares, most common first (:func:`attnlib.diagnostic.edge_tokens`); adversary_jsd:
    each seed's adversary's mean JSD from its base; paper_jsd: W&P's Table 4 mean JSD (SST).

    A seed's adversary is degenerate when it peaks on its edge token in *most* sentences: the
    bootstrap interval of that share over the sentences lies above one half (the word's own
    threshold, not one of ours). Whether its guide tells the diagnostic model more than that
    position is read seed by seed against the position guide's accuracy (paired by sentence).
    The adversary is called degenerate when every seed's is, "degenerate in k of S seeds"
    otherwise.
    """
    _check_runs(runs, ("adversary", "base LSTM", position))
    n = _n_seeds(runs)
    edges = tuple(edges)
    if len(edges) != n or any(e not in ("first", "last") for e in edges):
        raise ValueError(f"edges must give 'first' or 'last' for each of the {n} seeds, got {edges!r}")
    missing = [e for e in set(edges) if e not in edge_tokens or len(edge_tokens[e]) == 0]
    if missing:
        raise ValueError(f"edge_tokens has no tokens for the edge {', '.join(map(repr, sorted(missing)))}")
    jsd = np.asarray(adversary_jsd, dtype=float)
    if jsd.shape != (n,):
        raise ValueError(f"adversary_jsd must hold one mean JSD per seed ({n}), got shape {jsd.shape}")
    shares = [uncertainty.bootstrap(row, seed=seed) for row in np.asarray(runs.peaks("adversary", edges), float)]
    base = np.asarray(runs.peaks("base LSTM", edges), float).mean(1)
    vs_pos = _accuracy_versus(runs, "adversary", position, seed)
    informs = [c.verdict == "higher" for c in vs_pos.per_seed]
    flags = [iv.low > 0.5 for iv in shares]
    k = sum(flags)
    seed_names = [str(s) for s in getattr(runs, "seeds", range(n))]
    each = "" if n == 1 else "seed by seed, "
    tokens = "; ".join(f"‘{edge_tokens[e].index[0]}’ is the {e} token of {float(edge_tokens[e].iloc[0]):.0%} of them"
                       for e in ("first", "last") if e in edges)
    facts = (
        f"{each}its largest weight is on the {listed(edges)} token in "
        f"{_per_seed_list([iv.estimate for iv in shares], '.0%')} of the test sentences (the BiLSTM base's, on the "
        f"same token: {_per_seed_list(base, '.1%')}); {tokens}"
    )
    beyond = sum(informs)
    meaning = ("so the weight it leaves off that token still tells the diagnostic model something" if beyond == n
               else "so it tells the diagnostic model no more than that position" if beyond == 0
               else "so in some seeds the weight it leaves off that token still tells the diagnostic model "
                    "something, in the others no more than the position")
    guide = (
        f"As a guide it scores, {each}an accuracy of {_per_seed_list([c.a.estimate for c in vs_pos.per_seed], '.3f')} "
        f"against {_per_seed_list([c.b.estimate for c in vs_pos.per_seed], '.3f')} for a guide that puts all the "
        "weight on that token"
        + ("" if n == 1 else f" (above it beyond noise in {beyond} of {n} seeds)") + f": {meaning}."
    )
    jsd_text = (f"Its mean JSD from its base is {jsd.mean():.3f}"
                + (f" ({jsd.min():.3f} to {jsd.max():.3f} over the seeds)" if n > 1 else "")
                + f", against at most ln 2 ≈ {_LN2:.3f} and W&P's {paper_jsd:.3f} on SST (Table 4).")
    differs = ("W&P do not report where their adversaries peak, so where ours is degenerate the adversary row "
               "may compare a different object with theirs: an attention whose peak sits on one position, not "
               "one that differs from the base's on the words.")
    if k == n:
        head = ("Our adversary is degenerate" + ("" if n == 1 else f" in all {n} seeds")
                + ": its attention peaks on one position in most sentences, whatever they say")
    elif k:
        which = listed(name for name, f in zip(seed_names, flags) if f)
        head = (f"Our adversary is degenerate in {k} of {n} seeds (seed{'s' if k > 1 else ''} {which}): there its "
                "attention peaks on one position in most sentences, whatever they say")
    else:
        head = ("Our adversary is not degenerate" + ("" if n == 1 else " in any seed")
                + ": in no seed does one position take its peak in most sentences")
    text = f"{head}. {facts[0].upper()}{facts[1:]}. {guide} {jsd_text}" + (f" {differs}" if k else "")
    if k == n:
        summary = (f"Our adversary is degenerate{'' if n == 1 else f' in all {n} seeds'}: it peaks on one position "
                   "in most sentences. W&P do not report where theirs peak, so this row may compare different "
                   "objects.")
    elif k:
        summary = (f"Our adversary is degenerate in {k} of {n} seeds: there it peaks on one position in most "
                   "sentences. W&P do not report where theirs peak, so this row may compare different objects.")
    else:
        summary = f"Our adversary is not degenerate{'' if n == 1 else ' in any seed'}."
    return {
        "ch09_degenerate": text,
        "ch09_degenerate_summary": summary,
        "ch09_degenerate_seeds": k,
        "ch09_adv_peak_share": float(np.mean([iv.estimate for iv in shares])),
    }


def _per_sentence(attention: Sequence, statistic: str) -> np.ndarray:
    """(n,) the weight on the first or last token, or the largest weight, of each sentence."""
    pick = {"first": lambda a: a[0], "last": lambda a: a[-1], "peak": np.max}[statistic]
    return np.array([float(pick(np.asarray(a, dtype=float).ravel())) for a in attention])


def _weights(runs, guide: str, statistic: str) -> np.ndarray:
    """(S, n): per seed and sentence, the guide's weight on the first or last token, or its peak."""
    return np.stack([_per_sentence(a, statistic) for a in runs.attention[guide]])


def positions(pos: pd.DataFrame, runs, *, seed: int = 0) -> dict[str, Any]:
    """Where each guide puts its weight (first token, last token, peak), and what that says
    about the BiLSTM's and the adversary's guides, over seeds and sentences.

    pos: guide -> :func:`attnlib.metrics.attention_positions` of its test attention, the mean
    over seeds (:meth:`attnlib.diagnostic.DiagnosticRuns.positions`; a DataFrame or a dict of
    dicts); runs: the diagnostic runs (F1 gaps; per-sentence weights from ``runs.attention``).
    """
    table = pd.DataFrame(pos).T if isinstance(pos, Mapping) else pos
    missing = [g for g in GUIDES if g not in table.index]
    if missing:
        raise ValueError(f"pos has no entry for the guide {', '.join(map(repr, missing))}")
    _check_runs(runs)
    out: dict[str, Any] = {}
    for g, k in GUIDES.items():
        out[f"ch09_first_{k}"] = float(table.loc[g, "mean weight on first token"])
        out[f"ch09_last_{k}"] = float(table.loc[g, "mean weight on last token"])
        out[f"ch09_peak_{k}"] = float(table.loc[g, "mean peak weight"])
    out["ch09_base_peak_first"] = float(table.loc["base LSTM", "peak on first token"])

    def versus(a, b, statistic):
        return uncertainty.compare_over_seeds(_weights(runs, a, statistic), _weights(runs, b, statistic), seed=seed)

    base_first = versus("base LSTM", "uniform", "first")
    base = _f1_versus(runs, "base LSTM", "uniform", seed)
    favours = base_first.verdict == "higher"
    if base.verdict == "lower":
        base_reading = (
            f"Here the BiLSTM's guide is below uniform beyond noise ({base.seeds_text()}), "
            + ("and it favours the first position (more weight there than uniform, beyond noise): a likely reason "
               "is that the diagnostic model, handed weight on a word like \"the\", sees too little of the rest "
               "of many sentences." if favours else
               "although it does not favour the first position beyond noise; position bias does not explain "
               "that loss.")
        )
    elif base.verdict == "higher":
        base_reading = (f"Here the BiLSTM's guide is above uniform beyond noise ({base.seeds_text()}): whatever "
                        "weight it puts on the first position, its other weights pick out words that help a "
                        "model without context.")
    elif base.verdict == uncertainty.SEEDS_DISAGREE:
        base_reading = (f"Here whether the BiLSTM's guide helps or hurts depends on the seed "
                        f"({base.seeds_text()}).")
    else:
        base_reading = (f"Here the BiLSTM's guide is within noise of uniform ({base.seeds_text()}): over these "
                        "seeds its weights neither clearly help nor clearly hurt the context-free model.")
    out["ch09_base_reading"] = base_reading
    base_first, base_peak = out["ch09_first_base"], out["ch09_peak_base"]
    out["ch09_trained_first_dir"] = _direction(versus("trained MLP", "uniform", "first"), "more", "less",
                                               "uniform's")
    out["ch09_adv_first_dir"] = _direction(versus("adversary", "base LSTM", "first"), "more", "less",
                                           f"the base's {base_first:.3f}")
    out["ch09_adv_peak_dir"] = _direction(versus("adversary", "base LSTM", "peak"), "higher", "lower",
                                          f"the base's {base_peak:.3f}")
    return out


def oracle(long_runs, *, seed: int = 0) -> dict[str, Any]:
    """The long synthetic task over seeds: F1 with the oracle, trained and uniform guides,
    uniform's accuracy and the spread of its F1 over seeds, and the oracle's gain over uniform
    in accuracy, with its interval and verdict.

    long_runs: :class:`attnlib.diagnostic.DiagnosticRuns` of the long task with the guides
    ``oracle (rationale)``, ``trained MLP`` and ``uniform``.
    """
    guides = ("oracle (rationale)", "trained MLP", "uniform")
    _check_runs(long_runs, guides)
    f1 = {g: _f1(long_runs, g, seed) for g in guides}
    per_seed = [uncertainty.f1(long_runs.labels, row).estimate for row in _predicted(long_runs, "uniform")]
    gain = _accuracy_versus(long_runs, "oracle (rationale)", "uniform", seed)
    n = _n_seeds(long_runs)
    return {
        "ch09_long_oracle": f1["oracle (rationale)"].estimate,
        "ch09_long_trained": f1["trained MLP"].estimate,
        "ch09_long_uniform": f1["uniform"].estimate,
        "ch09_long_uniform_f1_range": f"{min(per_seed):.3f} to {max(per_seed):.3f}",
        "ch09_long_uniform_acc": gain.b.estimate,
        "ch09_long_oracle_acc": gain.a.estimate,
        "ch09_long_gap": gain.difference.estimate * 100,
        "ch09_long_gap_ci": f"{gain.difference.low * 100:.0f} to {gain.difference.high * 100:.0f}",
        "ch09_long_verdict": _verdict_words(gain),
        "ch09_long_n_seeds": n,
    }


def span(runs, *, seed: int = 0) -> dict[str, Any]:
    """How far apart the four guides' mean F1 lie (in points), and the guides with the lowest
    and the highest mean.

    runs: as for :func:`ranking`.
    """
    _check_runs(runs)
    means = {g: _f1(runs, g, seed).estimate for g in GUIDES}
    return {
        "ch09_span": (max(means.values()) - min(means.values())) * 100,
        "ch09_worst": min(means, key=means.get),
        "ch09_best_name": max(means, key=means.get),
    }


def lambdas(*, adversary_lambda: float, wp_range: Sequence[float]) -> dict[str, Any]:
    """W&P's adversary's λ (their footnote 8) and the range their adversaries span, both in our scale."""
    low, high = wp_range
    return {"ch09_wp_lam": f"{adversary_lambda:g}", "ch09_wp_range": f"{low:g} to {high:g}"}


def guide_lambda(lam: float, *, wp_scale: float) -> dict[str, Any]:
    """The λ of the adversaries the guides come from, in our scale and in W&P's (ours / ``wp_scale``)."""
    return {"ch09_lam": f"{lam:g}", "ch09_lam_wp": f"{lam / wp_scale:g}"}


def long_train(n_train: int) -> dict[str, Any]:
    """The oracle section's training sentences."""
    return {"ch09_long_train": f"{n_train:,}"}
