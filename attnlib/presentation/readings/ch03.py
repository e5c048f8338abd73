"""Chapter 3's readings: Kendall τ between attention, gradients and leave-one-out, over training seeds.

The chapter's models are trained with several seeds (:func:`attnlib.seeds.train_seed_sets`;
those of :data:`SEEDED` at least, the others with one where the chapter's time budget says so)
and the importance experiment runs on each (:func:`attnlib.seeds.run_over_seeds`).
:func:`agreement_stacks` turns one model's runs into ``stacks``: column -> (S, n) array, one
row per seed, one column per test sentence (the same sentences for every seed and every model
of a data set): ``predicted`` (the seed's predicted class), ``tau_g``, ``tau_loo``,
``tau_g_vs_loo`` and their p-values ``p_g``, ``p_loo``, ``p_g_vs_loo``
(:func:`attnlib.importance.instance_agreement`), and ``first`` (1 where the largest attention
weight is on the first token). The chapter keeps them by model, ``(dataset, encoder,
attention) -> stacks``; most functions here take that mapping.

J&W split every figure by **predicted** class, and a seed's model predicts its own classes: a
class's values of seed k are the sentences that model predicted in that class (NaN elsewhere),
so a class's mean over seeds is the mean of the seeds' class means, as J&W's Table 2 gives one
model's. Intervals and verdicts come from :func:`attnlib.uncertainty.over_seeds` and
:func:`attnlib.uncertainty.compare_over_seeds` (seed spread plus the sentence bootstrap), and
say in how many seeds a difference holds. Each function returns ``{glued name: value}`` for
:func:`attnlib.presentation.glue.glue_all`, or a frame to show.
"""
from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import pandas as pd

from ... import uncertainty
from ...experiments.faithfulness import rationale_ranking
from ...experiments.importance import ALPHA_LEVEL, instance_agreement
from .wording import listed, tally

__all__ = [
    "CLASS",
    "SEEDED",
    "agreement_stacks",
    "agreement_table",
    "class_gap",
    "comparison",
    "conventions",
    "conventions_table",
    "first_token",
    "first_token_over_seeds",
    "imdb_significance",
    "paper_table",
    "recovery_over_seeds",
    "recovery_stacks",
    "sample_sizes",
    "sampling",
    "scaled_dot",
    "seeds_note",
    "summary",
    "synthetic_tau",
    "yardstick",
    "instance",
]

#: The predicted classes 0 and 1 in words.
CLASS = ("negative", "positive")

#: The models most of the chapter's verdicts rest on, J&W's Table 2 rows on rt-polarity (BiLSTM
#: and Average, tanh): the ones the chapter, on its time budget, trains with every verdict seed.
#: IMDB's Average model would cost about 30 s more opened first (its reviews' leave-one-out).
SEEDED = (("rt-polarity", "lstm", "tanh"), ("rt-polarity", "average", "tanh"))

#: J&W's three rank correlations and their p-value columns.
TAUS = {"tau_g": "p_g", "tau_loo": "p_loo", "tau_g_vs_loo": "p_g_vs_loo"}

# (glue key, (dataset, encoder)) of the rows the prose sets beside the paper.
_PAIRS = {
    "lstm": ("rt-polarity", "lstm"),
    "avg": ("rt-polarity", "average"),
    "imdb_avg": ("imdb", "average"),
}

_NAMES = {"lstm+tanh": "BiLSTM", "cnn+tanh": "CNN"}

#: a verdict as a tally in a sentence says it ("ours comes out split by the seeds in 3 of ...")
_TALLIED = {"seeds disagree": "split by the seeds"}

_WORDS = {"higher": "above", "lower": "below", uncertainty.WITHIN_NOISE: "within noise",
          uncertainty.SEEDS_DISAGREE: "seeds disagree"}


# ----------------------------------------------------------------------------- stacks
def agreement_stacks(runs) -> dict[str, np.ndarray]:
    """One model's per-sentence agreement over its seeds: column -> (S, n), aligned by sentence.

    ``runs``: the importance results over seeds (:func:`attnlib.seeds.run_over_seeds` of
    :func:`attnlib.importance.importance`). Columns: ``predicted``, each τ and its p-value (as
    :func:`attnlib.importance.instance_agreement` names them) and ``first``.
    """
    if not hasattr(runs, "stack") or not hasattr(runs, "results"):
        raise ValueError("runs must be importance results over seeds (seeds.run_over_seeds), "
                         f"got {type(runs).__name__}")
    frames = {id(r): instance_agreement(r) for r in runs.results}
    columns = ["predicted", *[c for pair in TAUS.items() for c in pair]]
    out = {c: runs.stack(lambda r, c=c: frames[id(r)][c].to_numpy()) for c in columns}
    out["first"] = runs.stack(lambda r: np.array([float(np.argmax(a) == 0) for a in r.attention]))
    return out


def _check_stacks(stacks: Mapping, what: str = "stacks") -> None:
    missing = [c for c in ("predicted", *TAUS, *TAUS.values()) if c not in stacks]
    if missing:
        raise ValueError(f"{what} lacks the columns {missing} (see agreement_stacks)")


def _model(stacks: Mapping, dataset: str, model: str) -> Mapping:
    """One model's stacks; ``model`` as the tables write it, ``"lstm+tanh"``."""
    encoder, attention = model.split("+")
    key = (dataset, encoder, attention)
    if key not in stacks:
        raise ValueError(f"stacks has no model {key}; it has {sorted(stacks)}")
    _check_stacks(stacks[key], f"stacks[{key}]")
    return stacks[key]


def _n_seeds(s: Mapping) -> int:
    return int(np.asarray(s["predicted"]).shape[0])


def _values(s: Mapping, column: str, c: int | None = None) -> np.ndarray:
    """(S, n) a τ (``tau_g``) or a Sig. Frac. indicator (``tau_g sig.``: 1 where p <= 0.05, an
    undefined τ not significant), on the sentences each seed predicted in class ``c`` (all:
    None), NaN elsewhere."""
    if column.endswith(" sig."):
        p = np.asarray(s[TAUS[column[:-5]]], dtype=float)
        values = (np.nan_to_num(p, nan=1.0) <= ALPHA_LEVEL).astype(float)
        values[np.isnan(np.asarray(s["predicted"], dtype=float))] = np.nan  # a sentence a seed left out
    else:
        values = np.array(s[column], dtype=float)
    if c is not None:
        values = np.where(np.asarray(s["predicted"]) == c, values, np.nan)
    return values


@contextmanager
def _quiet():
    """NaN means of empty rows (a seed that predicted no sentence in a class) without a warning."""
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def _seed_means(values: np.ndarray) -> np.ndarray:
    """(S,) each seed's mean over its sentences (NaN for a seed with none)."""
    with _quiet():
        return np.nanmean(values, axis=1)


def _seed_sds(values: np.ndarray) -> np.ndarray:
    """(S,) each seed's population sd over its sentences (NaN for a seed with none)."""
    with _quiet():
        return np.nanstd(values, axis=1)


def _mean(values: np.ndarray) -> float:
    """The mean over seeds of the seeds' means."""
    per = _seed_means(values)
    return float(np.mean(per[np.isfinite(per)])) if np.isfinite(per).any() else float("nan")


def _class_means(s: Mapping, column: str) -> list[float]:
    return [_mean(_values(s, column, c)) for c in (0, 1)]


def _pair(values: Sequence[float], spec: str = ".2f") -> str:
    return " / ".join(format(v, spec) for v in values)


def _range(values: Sequence[float]) -> str:
    return f"{min(values):.2f}–{max(values):.2f}"


def agreement_table(stacks: Mapping) -> pd.DataFrame:
    """J&W's Table 2 for every model, each figure the mean over the model's training seeds.

    ``stacks``: (dataset, encoder, attention) -> :func:`agreement_stacks`. Index (dataset,
    model ``"lstm+tanh"``, predicted class); columns ``seeds``, ``n`` (sentences in the class,
    the mean over seeds, rounded), then for each τ its ``mean`` (the mean of the seeds' class
    means), ``sd`` (the mean of the seeds' sds over the sentences, population sd as J&W) and
    ``sig. frac.`` (the share with p <= 0.05, an undefined τ not significant), as
    :func:`attnlib.importance.agreement` names them.
    """
    rows = {}
    for (dataset, encoder, attention), s in stacks.items():
        _check_stacks(s, f"stacks[{(dataset, encoder, attention)}]")
        for c in (0, 1):
            counts = (np.asarray(s["predicted"]) == c).sum(1)
            row: dict[str, Any] = {"seeds": _n_seeds(s), "n": int(round(float(counts.mean())))}
            for tau in TAUS:
                values = _values(s, tau, c)
                row[f"{tau} mean"] = _mean(values)
                sds = _seed_sds(values)
                row[f"{tau} sd"] = float(np.mean(sds[np.isfinite(sds)])) if np.isfinite(sds).any() else np.nan
                row[f"{tau} sig. frac."] = _mean(_values(s, f"{tau} sig.", c))
            rows[(dataset, f"{encoder}+{attention}", c)] = row
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index = pd.MultiIndex.from_tuples(table.index, names=["dataset", "model", "predicted class"])
    return table


# ----------------------------------------------------------------------------- verdicts
def _against(values: np.ndarray, reference: float, seed: int) -> uncertainty.SeedComparison:
    """Our values (S, n) against a published figure, over seeds and sentences."""
    ref = np.where(np.isnan(values), np.nan, float(reference))
    return uncertainty.compare_over_seeds(values, ref, seed=seed)


def _class_difference(values: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """(S, n) per-sentence values whose mean, in each seed, is that seed's class-0 mean minus its
    class-1 mean: the influence values of the difference of two class means,

        z_i = (x_i - m_0) / p_0 + (m_0 - m_1)  for a sentence predicted 0,
        z_i = -(x_i - m_1) / p_1 + (m_0 - m_1) for one predicted 1,

    with m_c the seed's class mean and p_c the share of its sentences in class c. The two
    classes are different sentences, so :func:`attnlib.uncertainty.compare_over_seeds` cannot
    pair them; the mean of z is the difference exactly, and the bootstrap of that mean over
    the sentences is the delta method's variance of the difference of the two ratio means
    (a class mean is a sum over the class divided by its count, and both vary with the
    sentences drawn). NaN where the value is NaN; a seed without both classes is all NaN."""
    values = np.asarray(values, dtype=float)
    predicted = np.asarray(predicted)
    out = np.full(values.shape, np.nan)
    for k in range(values.shape[0]):
        ok = np.isfinite(values[k])
        in_class = [ok & (predicted[k] == c) for c in (0, 1)]
        if not all(m.any() for m in in_class):
            continue
        m = [float(values[k][m_c].mean()) for m_c in in_class]
        p = [m_c.sum() / ok.sum() for m_c in in_class]
        out[k, in_class[0]] = (values[k, in_class[0]] - m[0]) / p[0] + (m[0] - m[1])
        out[k, in_class[1]] = -(values[k, in_class[1]] - m[1]) / p[1] + (m[0] - m[1])
    return out


def _two_models(a: np.ndarray, b: np.ndarray, seed: int) -> uncertainty.SeedComparison:
    """Model a against model b (two recipes, the same sentences) over seeds and sentences; when
    they have different numbers of seeds, their first seeds' models alone (``one_model``)."""
    if a.shape[0] != b.shape[0]:
        a, b = a[:1], b[:1]
    return uncertainty.compare_over_seeds(a, b, paired_seeds=False, seed=seed)


def _classes_compared(s: Mapping, values: np.ndarray, seed: int) -> uncertainty.SeedComparison:
    """Class 0 (predicted negative) against class 1 over seeds and sentences."""
    z = _class_difference(values, s["predicted"])
    return uncertainty.compare_over_seeds(z, np.where(np.isnan(z), np.nan, 0.0), seed=seed)


def _seeds(c: uncertainty.SeedComparison) -> str:
    """How the seeds bear a comparison out (:meth:`~attnlib.uncertainty.SeedComparison.seeds_text`),
    and for a verdict that no seed shows on its own, that it shows only with the seeds pooled."""
    if c.differs and not c.one_model and c.support == 0:
        return f"beyond noise only with the {c.n_seeds} seeds pooled, in none alone"
    return c.seeds_text()


def _said(c: uncertainty.SeedComparison, words: tuple[str, str, str], what: str) -> str:
    """``words`` (higher, lower, tie) chosen by the verdict, then ``what``, then how the seeds bear it out."""
    higher, lower, tie = words
    word = c.says(higher, lower, tie=tie, disagree="higher or lower, by the seed, than")
    return f"{word} {what} ({_seeds(c)})"


def _over(n_seeds: int) -> str:
    """What an interval is over: "over seeds and sentences", or for one model "over the sentences of one model"."""
    return "over seeds and sentences" if n_seeds > 1 else "over the sentences of one model"


def _interval_words(c: uncertainty.SeedComparison, *, size: bool = False) -> str:
    """"95% interval over seeds and sentences -0.01 to 0.06" of the difference; with ``size``, of
    its size when the estimate is negative ("by 0.31 ... 0.29 to 0.33")."""
    d = c.difference
    ends = d.range_text(2) if not (size and d.estimate < 0) else \
        uncertainty.Interval(-d.estimate, -d.high, -d.low, d.n, d.level).range_text(2)
    return f"95% interval {_over(1 if c.one_model else c.n_seeds)} {ends}"


# ----------------------------------------------------------------------------- beside the paper
#: (paper-frame column, row label) of :func:`paper_table`'s rows, per model.
_MEASURES = [
    ("tau_g mean", "τ_g"),
    ("tau_loo mean", "τ_loo"),
    ("tau_g sd", "τ_g sd"),
    ("tau_g sig. frac.", "τ_g Sig. Frac."),
    ("tau_loo sig. frac.", "τ_loo Sig. Frac."),
]


def _ours_column(column: str) -> str:
    """The stacks' column of a paper-frame column: ``tau_g mean`` -> ``tau_g``, ``tau_g sig.
    frac.`` -> ``tau_g sig.``."""
    column = column.split(" (")[0]
    return column.replace(" mean", "").replace(" sig. frac.", " sig.")


def _wilson(values: np.ndarray) -> uncertainty.Interval:
    """Wilson's interval of the share pooled over the seeds, on as many sentences as a seed has
    (the mean count): the seeds score the same sentences, so they do not multiply them."""
    finite = values[np.isfinite(values)]
    n = max(int(round(float(np.isfinite(values).sum(1).mean()))), 1)
    return uncertainty.proportion(int(round(float(finite.mean()) * n)), n)


def _figure_verdict(values: np.ndarray, reference: float, seed: int) -> tuple[str, uncertainty.SeedComparison]:
    """Where our values (S, n) lie against a paper's figure: "above", "below", "within noise" or
    "seeds disagree", and the comparison. A Sig. Frac. (0/1 values) is called above or below
    only when the figure also lies outside Wilson's interval of the pooled share, which keeps a
    width where every sentence is significant (the bootstrap's then has none)."""
    c = _against(values, reference, seed)
    word = _WORDS[c.verdict]
    finite = values[np.isfinite(values)]
    if word in ("above", "below") and finite.size and np.isin(finite, (0.0, 1.0)).all():
        if _wilson(values).contains(float(reference)):
            word = "within noise"
    return word, c


def _verdict_cell(s: Mapping, p_frame: pd.DataFrame, column: str, seed: int) -> str:
    """"below (3 of 3 seeds) / within noise": each class's paper figure against ours; "n/a"
    where the paper gives none, or for an sd."""
    if column not in p_frame or column.endswith(" sd"):
        return "n/a"
    p = [float(p_frame.loc[c, column]) for c in (0, 1)]
    if any(np.isnan(p)):
        return "n/a"
    cells = []
    for c in (0, 1):
        word, comparison = _figure_verdict(_values(s, _ours_column(column), c), p[c], seed)
        support = word in ("above", "below") and not comparison.one_model
        cells.append(f"{word} ({comparison.support} of {comparison.n_seeds} seeds)" if support else word)
    return " / ".join(cells)


def _verdict_words(s: Mapping, p_frame: pd.DataFrame, column: str, seed: int) -> list[tuple[str, Any]]:
    """[(word, comparison)] for the two classes; [] where the paper gives no figure."""
    if column not in p_frame:
        return []
    p = [float(p_frame.loc[c, column]) for c in (0, 1)]
    return [_figure_verdict(_values(s, _ours_column(column), c), p[c], seed) for c in (0, 1) if np.isfinite(p[c])]


def _given(p_frame: pd.DataFrame, column: str) -> str:
    """The paper's two classes, "0.40 / 0.38", or "n/a" where it gives no figure."""
    vals = [float(p_frame.loc[c, column]) for c in (0, 1)] if column in p_frame else [np.nan, np.nan]
    return "n/a" if any(np.isnan(vals)) else _pair(vals)


def _interval_cell(s: Mapping, column: str, seed: int) -> str:
    """Our two classes' 95% intervals over seeds and sentences, "[0.33, 0.41] / [0.27, 0.35]";
    a Sig. Frac.'s reaches as far as Wilson's interval of the pooled share does."""
    cells = []
    for c in (0, 1):
        values = _values(s, _ours_column(column), c)
        iv = uncertainty.over_seeds(values, seed=seed)
        low, high = iv.low, iv.high
        if column.endswith("sig. frac.") and np.isfinite(values).any():
            w = _wilson(values)
            low, high = min(low, w.low), max(high, w.high)
        cells.append(f"[{low:.2f}, {high:.2f}]")
    return " / ".join(cells)


def _ours_cell(s: Mapping, column: str) -> str:
    if column.endswith(" sd"):
        tau = column[: -len(" sd")]
        sds = []
        for c in (0, 1):
            per = _seed_sds(_values(s, tau, c))
            sds.append(float(np.mean(per[np.isfinite(per)])))
        return _pair(sds)
    return _pair(_class_means(s, _ours_column(column)))


def _check_pairs(ours: Mapping, paper: Mapping) -> None:
    missing = [key for key in ours if key not in paper]
    if missing:
        raise ValueError(f"no paper frame for {missing}")
    for key, s in ours.items():
        _check_stacks(s, f"ours[{key}]")


def paper_table(ours: Mapping, paper: Mapping, *, seed: int = 0) -> pd.DataFrame:
    """Our τ beside J&W's, one row per model and measure, the two predicted classes in each cell.

    ``ours``: (dataset, encoder) -> that model's (tanh) :func:`agreement_stacks`; ``paper``:
    the same keys -> :func:`attnlib.published.paper_tau`'s frame. Index (dataset, model,
    measure), in the order of ``ours``; columns: ``seeds``; ours, the mean over seeds
    ("0.37 / 0.31": predicted negative / positive); its 95% interval over seeds and sentences;
    J&W's printed Table 2; its verdict; the authors' committed outputs; their verdict. A verdict
    says where our mean lies against their figure, by
    :func:`attnlib.uncertainty.compare_over_seeds`: "above" or "below" (with the seeds that
    show it on their own: "above (3 of 3 seeds)"), "within noise", or "seeds disagree". For a
    Sig. Frac. the interval and the verdict also heed Wilson's interval of the pooled share. A
    figure the paper does not give is "n/a"; an sd has no interval and no verdict.
    """
    _check_pairs(ours, paper)
    rows = {}
    for (name, encoder), s in ours.items():
        p = paper[(name, encoder)]
        for column, label in _MEASURES:
            auth = column + " (authors' outputs)"
            rows[(name, f"{encoder}+tanh", label)] = {
                "seeds": _n_seeds(s),
                "ours, mean over seeds": _ours_cell(s, column),
                "95% interval over seeds and sentences": "n/a" if column.endswith(" sd")
                else _interval_cell(s, column, seed),
                "J&W printed": _given(p, column),
                "ours vs printed": _verdict_cell(s, p, column, seed),
                "authors' outputs": _given(p, auth),
                "ours vs authors'": _verdict_cell(s, p, auth, seed),
            }
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index = pd.MultiIndex.from_tuples(table.index, names=["dataset", "model", "measure"])
    return table


def _support_clause(comparisons: Sequence[tuple[str, Any]]) -> str:
    """How many seeds bear out the verdicts beyond noise, for a parenthesis; "" when none is."""
    beyond = [c for w, c in comparisons if w in ("above", "below")]
    if not beyond:
        return ""
    if any(c.one_model for c in beyond):
        return "from one model"
    n = beyond[0].n_seeds
    support = sorted({c.support for c in beyond})
    k = f"{support[0]}" if len(support) == 1 else f"{support[0]} to {support[-1]}"
    noun = ("that verdict" if len(beyond) == 1 else "each" if len(beyond) == len(comparisons)
            else "each verdict above or below")
    return f"{noun} shows in {k} of the {n} seeds on its own"


def comparison(ours: Mapping, paper: Mapping, *, seed: int = 0) -> dict[str, Any]:
    """Reads "Reading the comparison": our mean τ per model beside the paper's, and a tally of
    where the paper's mean τ_g and τ_loo (two classes each: four figures) lie against our
    means over seeds and sentences, for the printed table and the authors' outputs.

    ``ours``, ``paper``: as for :func:`paper_table`, with rt-polarity's lstm and average and
    IMDB's average. Keys ``ch03_<row>_g`` / ``_l`` (our means, "0.37 / 0.31"), ``_vs_printed``
    / ``_vs_auth`` ("below in 3 of the 4 comparisons and within noise in 1"; a source with no
    figure for that row is left out), ``_seeds_printed`` / ``_seeds_auth`` (", and each verdict
    above or below shows in 2 to 3 of the 3 seeds on its own", or ""), ``ch03_sources_gap``
    (the largest difference between the printed table and the authors' outputs in the
    BiLSTM's mean τ) and ``ch03_avg_more`` (whether the Average encoder's attention agrees
    with gradients more than the BiLSTM's on rt-polarity, over seeds and sentences, both
    classes together: two recipes, ``paired_seeds=False``).
    """
    _check_pairs(ours, paper)
    out: dict[str, Any] = {}
    source_gaps = []
    for key, pair in _PAIRS.items():
        if pair not in ours or pair not in paper:
            raise ValueError(f"ours and paper need the row {pair}")
        s, p = ours[pair], paper[pair]
        for col, short in (("tau_g", "g"), ("tau_loo", "l")):
            out[f"ch03_{key}_{short}"] = _pair(_class_means(s, col))
        for suffix, tag in (("", "printed"), (" (authors' outputs)", "auth")):
            verdicts = [v for col in ("tau_g mean", "tau_loo mean") for v in _verdict_words(s, p, col + suffix, seed)]
            if verdicts:
                out[f"ch03_{key}_vs_{tag}"] = tally([_TALLIED.get(w, w) for w, _ in verdicts])
                clause = _support_clause(verdicts)
                out[f"ch03_{key}_seeds_{tag}"] = f" ({clause})" if clause else ""
        for col in ("tau_g mean", "tau_loo mean"):
            auth = col + " (authors' outputs)"
            if key == "lstm" and auth in p:
                source_gaps += [abs(float(p.loc[c, col]) - float(p.loc[c, auth])) for c in (0, 1)]
    gaps = [g for g in source_gaps if np.isfinite(g)]
    out["ch03_sources_gap"] = f"{max(gaps):.2f}" if gaps else "n/a"
    c = _two_models(_values(ours[_PAIRS["avg"]], "tau_g"), _values(ours[_PAIRS["lstm"]], "tau_g"), seed)
    out["ch03_avg_more"] = c.says(
        f"and it does, by {c.difference.estimate:.2f} in τ_g over both classes ({_interval_words(c)}; "
        f"{_seeds(c)})",
        f"yet here it agrees less, by {-c.difference.estimate:.2f} in τ_g ({_interval_words(c, size=True)}; "
        f"{_seeds(c)})",
        tie=f"yet here the difference in τ_g, {c.difference.estimate:+.2f} ({_interval_words(c)}), is within noise",
        disagree=f"yet here the seeds disagree on it ({_seeds(c)})",
    )
    return out


def sampling(ours: Mapping, paper: Mapping, *, seed: int = 0) -> dict[str, Any]:
    """Reads what the intervals are made of: the sentence noise of one model (the standard error
    sd / √n of a class's mean τ_g, over the rt-polarity rows compared, every seed), the seed
    noise (the range of the seeds' class means), and the largest gap between our mean τ_g and
    the printed Table 2, with whether it lies outside our interval over seeds and sentences.

    ``ours``, ``paper``: as for :func:`paper_table`, with rt-polarity's lstm and average.
    """
    _check_pairs(ours, paper)
    se, diffs, spread = [], [], {}
    for name, encoder in [("rt-polarity", "lstm"), ("rt-polarity", "average")]:
        s, p = ours[(name, encoder)], paper[(name, encoder)]
        per_seed = []
        for c in (0, 1):
            values = _values(s, "tau_g", c)
            with _quiet():
                se += list(_seed_sds(values) / np.sqrt(np.isfinite(values).sum(1)))
            per_seed += list(_seed_means(values))
            word, comp = _figure_verdict(values, float(p.loc[c, "tau_g mean"]), seed)
            diffs.append((abs(_mean(values) - float(p.loc[c, "tau_g mean"])), f"{encoder}+tanh, predicted {CLASS[c]}",
                          word, comp))
        spread[encoder] = per_seed
    se = [x for x in se if np.isfinite(x)]
    big = max(diffs, key=lambda d: d[0])
    n_seeds = _n_seeds(ours[("rt-polarity", "lstm")])
    outside = big[2] in ("above", "below")
    return {
        "ch03_se_min": float(min(se)),
        "ch03_se_max": float(max(se)),
        "ch03_seed_range_lstm": _range(spread["lstm"]),
        "ch03_seed_range_avg": _range(spread["average"]),
        "ch03_maxdiff": float(big[0]),
        "ch03_maxdiff_where": big[1],
        "ch03_maxdiff_said": (
            f"outside our interval over {n_seeds} seeds and the sentences ({_seeds(big[3])}): a gap "
            "that neither the seed nor the sample explains, a property of our models and data"
            if outside and not big[3].one_model else
            "outside our interval over the sentences, but from one model: another seed might close it"
            if outside else
            "inside our interval over seeds and sentences: the seeds and the sample can explain it"
        ),
    }


# ----------------------------------------------------------------------------- the table's readings
def yardstick(stacks: Mapping, *, seed: int = 0) -> dict[str, Any]:
    """Reads the yardstick: gradients vs leave-one-out against attention vs either.

    ``stacks``: the chapter's stacks by model (rt-polarity's lstm+tanh and average+tanh).
    ``ch03_lstm_gvl``: the BiLSTM's τ(gradient, loo) per class; ``ch03_lstm_gap``: how much
    higher it is than τ_g and τ_loo (the range over classes and measures), with the verdict of
    each comparison over seeds and sentences (both classes together, paired: one model);
    ``ch03_avg_rel``: the Average model's τ_g against its τ(gradient, loo), the same way.
    """
    lstm = _model(stacks, "rt-polarity", "lstm+tanh")
    g, loo, gvl = (_class_means(lstm, t) for t in ("tau_g", "tau_loo", "tau_g_vs_loo"))
    gaps = [v - t for v, a, b in zip(gvl, g, loo) for t in (a, b)]
    vs = [uncertainty.compare_over_seeds(_values(lstm, "tau_g_vs_loo"), _values(lstm, t), seed=seed)
          for t in ("tau_g", "tau_loo")]
    if all(c.verdict == "higher" for c in vs):
        support = sorted({_seeds(c) for c in vs})
        gap = f"{_range(gaps)} higher than attention agrees with either ({' and '.join(support)})"
    else:
        said = [_said(c, ("higher than", "lower than", "within noise of"), t) for c, t in zip(vs, ("τ_g", "τ_loo"))]
        gap = (f"between {min(gaps):+.2f} and {max(gaps):+.2f} against how well attention agrees with "
               f"either: {said[0]}, {said[1]}")
    avg = _model(stacks, "rt-polarity", "average+tanh")
    avg_g, avg_v = _class_means(avg, "tau_g"), _class_means(avg, "tau_g_vs_loo")
    c = uncertainty.compare_over_seeds(_values(avg, "tau_g"), _values(avg, "tau_g_vs_loo"), seed=seed)
    rel = c.says("better than", "less well than", tie="as well as, within noise,",
                 disagree="better or less well, depending on the seed, than")
    return {
        "ch03_lstm_gvl": _pair(gvl),
        "ch03_lstm_gap": gap,
        "ch03_avg_rel": f"attention agrees with gradients ({_pair(avg_g)}) {rel} gradients agree with "
        f"leave-one-out ({_pair(avg_v)}; difference {c.difference.estimate:+.2f}, {_interval_words(c)}, "
        f"{_seeds(c)})",
    }


def class_gap(stacks: Mapping, *, seed: int = 0) -> dict[str, Any]:
    """Reads whether the BiLSTM's two predicted classes differ: in τ_g, and in the gap between
    τ(gradient, loo) and τ_g (where attention agrees least with the measures' own agreement).

    The classes are different sentences: :func:`_class_difference` gives per-sentence values
    whose mean is the difference of the class means, compared with 0 over seeds and sentences.
    ``ch03_lstm_classes``: "0.01 apart in τ_g (95% interval ...; within noise)";
    ``ch03_lstm_widest``: which class, if either, shows the wider gap, and whether attention
    agrees least there; ``ch03_classes_why``: what the chapter can say of a class difference.
    """
    lstm = _model(stacks, "rt-polarity", "lstm+tanh")
    tau = _classes_compared(lstm, _values(lstm, "tau_g"), seed)
    gap = _classes_compared(lstm, _values(lstm, "tau_g_vs_loo") - _values(lstm, "tau_g"), seed)
    size = abs(tau.difference.estimate)
    tau_said = tau.says(
        "higher on sentences predicted negative", "higher on sentences predicted positive", tie="within noise",
        disagree="higher on one class or the other depending on the seed")
    if gap.differs:
        wide = 0 if gap.verdict == "higher" else 1
        least = tau.differs and (tau.verdict == "lower") == (wide == 0)
        widest = (f"the gap to τ_g is wider on sentences predicted {CLASS[wide]} ({_seeds(gap)})"
                  + (", where attention agrees least" if least else ", though τ_g itself does not differ "
                     "between the classes beyond noise" if not tau.differs else ""))
    else:
        widest = (f"that gap is the same on both predicted classes within noise (their difference "
                  f"{gap.difference.estimate:+.2f}, {_interval_words(gap)}), so no class is where attention "
                  "agrees least")
    return {
        "ch03_lstm_classes": f"{size:.2f} apart in τ_g ({_interval_words(tau)} for negative minus positive; "
        f"{tau_said}, {_seeds(tau)})",
        "ch03_lstm_widest": widest,
        "ch03_classes_why": "Where its two predicted classes agree differently, this chapter does not show why; "
        "one candidate, not checked here, is the first-token peak, which gradients and leave-one-out need not "
        "rank first." if tau.differs or gap.differs else
        "Its two predicted classes agree alike within noise, so the class split of J&W's table shows nothing to "
        "explain here.",
    }


def imdb_significance(stacks: Mapping) -> dict[str, Any]:
    """Reads the range of IMDB's Sig. Fracs (τ_g and τ_loo, every model and class, means over seeds)."""
    values = [
        _mean(_values(s, f"{tau} sig.", c))
        for (dataset, _, _), s in stacks.items() if dataset == "imdb"
        for tau in ("tau_g", "tau_loo") for c in (0, 1)
    ]
    if not values:
        raise ValueError("stacks has no imdb model")
    return {"ch03_imdb_sig_min": float(np.nanmin(values)), "ch03_imdb_sig_max": float(np.nanmax(values))}


def scaled_dot(stacks: Mapping, *, seed: int = 0) -> dict[str, Any]:
    """Reads the scaled-dot BiLSTM: how well its attention agrees, against the tanh BiLSTM's (two
    recipes, ``paired_seeds=False``; the first seeds' models when the two have different numbers
    of seeds) and against zero (its interval over seeds and sentences), and its gradients'
    agreement with leave-one-out.

    ``stacks``: the chapter's stacks, with rt-polarity's ``lstm+dot`` and ``lstm+tanh``.
    """
    dot = _model(stacks, "rt-polarity", "lstm+dot")
    tanh = _model(stacks, "rt-polarity", "lstm+tanh")
    g, loo, gvl = (_class_means(dot, t) for t in ("tau_g", "tau_loo", "tau_g_vs_loo"))
    c = _two_models(_values(dot, "tau_g"), _values(tanh, "tau_g"), seed)
    zero = uncertainty.over_seeds(_values(dot, "tau_g"), seed=seed)
    by = f"by {abs(c.difference.estimate):.2f} in τ_g, {_interval_words(c, size=True)}; {_seeds(c)}"
    level = c.says(f"more than the tanh BiLSTM ({by})", f"less than the tanh BiLSTM ({by})",
                   tie=f"no differently, within noise, than the tanh BiLSTM ({by})",
                   disagree=f"more or less than the tanh BiLSTM, by the seed ({_seeds(c)})")
    above_zero = ("above zero beyond noise" if zero.low > 0 else "below zero beyond noise" if zero.high < 0
                  else "within noise of zero")
    return {
        "ch03_dot": f"agrees {level}: τ_g {_pair(g)}, τ_loo {_pair(loo)}, "
        f"its mean τ_g {zero.estimate:.2f} (95% interval {_over(_n_seeds(dot))} {zero.range_text(2)}) {above_zero}; "
        f"its gradients and leave-one-out agree with each other at {_pair(gvl)}",
        "ch03_dot_why": "This chapter does not show why. One candidate, not checked here, is "
        "that its attention is nearly uniform on many sentences, and the order of near-equal "
        "weights is mostly noise."
        if c.verdict == "lower"
        else "What sets it apart from the tanh BiLSTM, if anything, this chapter does not show.",
        "ch03_dot_g": _pair(g),
    }


def summary(stacks: Mapping, *, seed: int = 0) -> dict[str, Any]:
    """Reads the summary: encoders with context against the Average one, and how many models
    have gradients and leave-one-out agreeing better with each other than with attention.

    ``ch03_ctx_range`` / ``ch03_avg_range``: the rt-polarity BiLSTM's and CNN's (tanh) mean τ_g
    and τ_loo per class, and the Average model's; ``ch03_pattern``: whether the Average model's
    τ_g and τ_loo are above both of the others' over seeds and sentences (both classes
    together; two recipes each, their first seeds alone when their numbers of seeds differ);
    ``ch03_every``: for how many models with context (every data set) τ(gradient, loo) is above
    τ_g and above τ_loo on both predicted classes, over seeds and sentences (paired: one model).
    """
    ctx = [x for m in ("lstm+tanh", "cnn+tanh") for t in ("tau_g", "tau_loo")
           for x in _class_means(_model(stacks, "rt-polarity", m), t)]
    avg_s = _model(stacks, "rt-polarity", "average+tanh")
    avg = [x for t in ("tau_g", "tau_loo") for x in _class_means(avg_s, t)]
    above = {
        m: [_two_models(_values(avg_s, t), _values(_model(stacks, "rt-polarity", m), t), seed)
            for t in ("tau_g", "tau_loo")]
        for m in ("lstm+tanh", "cnn+tanh")
    }
    every = [c for cs in above.values() for c in cs]
    how = "; ".join(f"against the {_NAMES[m]}, {listed(sorted({_seeds(c) for c in cs}))}" for m, cs in above.items())
    if all(c.verdict == "higher" for c in every):
        pattern = f"higher in all {len(every)} comparisons, beyond noise ({how}), J&W's pattern"
    else:
        pattern = (f"higher beyond noise in {sum(c.verdict == 'higher' for c in every)} of the {len(every)} "
                   f"comparisons ({how}), so J&W's pattern holds only in part here")
    with_context = [k for k in stacks if k[1] != "average"]
    better, counts = 0, set()
    for key in with_context:
        s = stacks[key]
        _check_stacks(s, f"stacks[{key}]")
        counts.add(_n_seeds(s))
        better += all(
            uncertainty.compare_over_seeds(_values(s, "tau_g_vs_loo", c), _values(s, t, c), seed=seed).verdict
            == "higher"
            for c in (0, 1) for t in ("tau_g", "tau_loo")
        )
    over = ("over the sentences of one model each" if counts == {1} else
            f"over {counts.pop()} seeds and the sentences" if len(counts) == 1 else
            "over seeds and sentences where a model has several seeds, over the sentences where it has one")
    return {
        "ch03_ctx_range": _range(ctx),
        "ch03_avg_range": _range(avg),
        "ch03_pattern": pattern,
        "ch03_every": f"for every model with context (all but the Average encoder, on every data set), on both "
        f"predicted classes and beyond noise {over}: the two importance measures tell one story, attention another"
        if better == len(with_context)
        else f"for {better} of the {len(with_context)} models with context (on both predicted classes, beyond "
        f"noise {over})",
    }


def synthetic_tau(stacks: Mapping, *, seed: int = 0) -> dict[str, Any]:
    """Reads τ on the synthetic task: the BiLSTM's τ_g and τ_loo (means over seeds per class, and
    τ_g's interval over seeds and sentences, both classes), the Average model's range."""
    lstm = _model(stacks, "synthetic", "lstm+tanh")
    avg = _model(stacks, "synthetic", "average+tanh")
    iv = uncertainty.over_seeds(_values(lstm, "tau_g"), seed=seed)
    syn_avg = [x for t in ("tau_g", "tau_loo") for x in _class_means(avg, t)]
    return {
        "ch03_syn_g": _pair(_class_means(lstm, "tau_g")),
        "ch03_syn_l": _pair(_class_means(lstm, "tau_loo")),
        "ch03_syn_far": f"95% interval {_over(_n_seeds(lstm))}, both classes together: {iv.range_text(2)}, "
        + ("below the 1 of identical rankings" if iv.high < 1 else "reaching the 1 of identical rankings"),
        "ch03_syn_avg_range": _range(syn_avg),
    }


def first_token(attention: Sequence[np.ndarray]) -> dict[str, Any]:
    """Reads the fraction of one model's sentences whose largest attention weight is on the first
    token (``ch03_first``; the figure's model).

    ``attention``: one array per sentence, over its real tokens."""
    if len(attention) == 0:
        raise ValueError("attention is empty")
    return {"ch03_first": float(np.mean([int(np.argmax(a)) == 0 for a in attention]))}


def first_token_over_seeds(stacks: Mapping, *, seed: int = 0) -> dict[str, Any]:
    """Reads the share of sentences whose largest attention weight is on the first token for the
    rt-polarity BiLSTM, over its seeds: ``ch03_first_seeds`` ("11% (95% interval ... over seeds and
    sentences; the seeds: 11%, 3% and 25%)")."""
    s = _model(stacks, "rt-polarity", "lstm+tanh")
    if "first" not in s:
        raise ValueError("the BiLSTM's stacks lack 'first' (see agreement_stacks)")
    values = np.asarray(s["first"], dtype=float)
    iv = uncertainty.over_seeds(values, seed=seed)
    per = [f"{v:.0%}" for v in _seed_means(values)]
    seeds = "" if len(per) == 1 else f"; the seeds: {listed(per)}"
    return {"ch03_first_seeds": f"{iv.estimate:.0%} (95% interval {iv.low:.0%} to {iv.high:.0%}{seeds})"}


def sample_sizes(n_eval: Mapping[str, int]) -> dict[str, Any]:
    """Reads how many test instances were scored: ``n_eval``, dataset -> count, for
    rt-polarity and imdb."""
    short = {"rt-polarity": "rt", "imdb": "imdb"}
    if set(n_eval) != set(short):
        raise ValueError(f"n_eval needs exactly {sorted(short)}, got {sorted(n_eval)}")
    return {f"ch03_n_{short[name]}": int(n_eval[name]) for name in short}


def seeds_note(stacks: Mapping) -> dict[str, Any]:
    """Reads how many training seeds the models have: ``ch03_n_seeds`` (the most),
    ``ch03_seeded`` ("over 3 training seeds", or which models have them), and
    ``ch03_one_model``: "" when every model has them, else a sentence naming the models that
    rest on fewer, and why."""
    counts = {key: _n_seeds(s) for key, s in stacks.items()}
    most = max(counts.values())
    fewer = [f"{d} {e}+{a}" for (d, e, a), k in counts.items() if k < most]
    seeded = [f"{d} {e}+{a}" for (d, e, a), k in counts.items() if k == most]
    one = all(k == 1 for k in counts.values() if k < most)
    return {
        "ch03_n_seeds": int(most),
        "ch03_seeded": f"over {most} training seeds" if not fewer else
        f"over {most} training seeds for {listed(seeded)}, " + ("from one model" if one else "fewer")
        + " for the others",
        "ch03_one_model": "" if not fewer else
        f" The other rows of the first table ({listed(fewer)}) rest on "
        + ("one trained model each" if one else "fewer seeds (their `seeds` column)")
        + f": the book profile keeps this chapter, opened first, within its time budget, and spends the "
        f"retraining on {listed(seeded)}, which most of its verdicts rest on. A verdict that involves one of "
        "the others says that it comes from one model.",
    }


# ----------------------------------------------------------------------------- conventions
#: The variants of the conventions' table, as a reader reads them.
VARIANTS = {
    "jw": "J&W: detached gradient, deletion",
    "through": "gradient through attention",
    "unk": "leave-one-out by <UNK> replacement",
}


def _check_variants(variants: Mapping) -> None:
    if not isinstance(variants, Mapping) or set(variants) != set(VARIANTS):
        got = sorted(variants) if isinstance(variants, Mapping) else type(variants).__name__
        raise ValueError(f"variants must be exactly {sorted(VARIANTS)}, got {got}")
    for name, s in variants.items():
        _check_stacks(s, f"variants[{name!r}]")


def conventions_table(variants: Mapping, *, seed: int = 0) -> pd.DataFrame:
    """The BiLSTM's mean τ under each convention, both classes together: one row per variant
    (:data:`VARIANTS`, in words), one column per τ, "0.390 [0.371, 0.409]" (the mean over
    seeds with its 95% interval over seeds and sentences), and ``seeds``."""
    _check_variants(variants)
    rows = {}
    for name, label in VARIANTS.items():
        s = variants[name]
        rows[label] = {"seeds": _n_seeds(s),
                       **{tau: uncertainty.over_seeds(_values(s, tau), seed=seed).format(3) for tau in TAUS}}
    return pd.DataFrame.from_dict(rows, orient="index")


def conventions(variants: Mapping, *, seed: int = 0) -> dict[str, Any]:
    """Reads the conventions: how far detaching attention and replacing by UNK move τ.

    ``variants``: ``"jw"`` (detached gradient, deletion), ``"through"`` (gradient through
    attention) and ``"unk"`` (leave-one-out by UNK replacement) -> the BiLSTM's
    :func:`agreement_stacks` over its seeds (the same sentences). Keys
    ``ch03_conv_{variant}_{tau}`` (means over seeds and sentences), ``ch03_conv_through_change``
    (τ_g's change, "a change of -0.024, 95% interval ... over seeds and sentences"),
    ``ch03_conv_unk_change`` (τ_loo's) and ``ch03_conv_which``: which
    change moves τ more, the replacement (τ_loo) or detaching (τ_g), each move taken in its
    own direction, over seeds and sentences (paired: one model per seed).
    """
    _check_variants(variants)
    out: dict[str, Any] = {}
    for name, s in variants.items():
        for tau in TAUS:
            out[f"ch03_conv_{name}_{tau}"] = _mean(_values(s, tau))
    moves = {}
    for name, tau in (("through", "tau_g"), ("unk", "tau_loo")):
        change = _values(variants[name], tau) - _values(variants["jw"], tau)
        moves[name] = change * (1.0 if _mean(change) >= 0 else -1.0)  # its size, in its own direction
    for name, tau in (("through", "tau_g"), ("unk", "tau_loo")):
        change = uncertainty.over_seeds(_values(variants[name], tau) - _values(variants["jw"], tau), seed=seed)
        out[f"ch03_conv_{name}_change"] = (f"a change of {change.signed_text(3)} "
                                           f"{_over(_n_seeds(variants[name]))}")
    c = uncertainty.compare_over_seeds(moves["unk"], moves["through"], seed=seed)
    out["ch03_conv_which"] = c.says(
        f"here the replacement moves τ more than detaching does ({_seeds(c)})",
        f"here detaching moves τ more than the replacement does ({_seeds(c)})",
        tie=f"here the two moves are the same size within noise ({_seeds(c)})",
        disagree="which of the two moves τ more depends on the seed",
    )
    return out


# ----------------------------------------------------------------------------- the synthetic task
def recovery_stacks(runs, split) -> dict[str, np.ndarray]:
    """One model's per-sentence precision@k over its seeds: measure -> (S, n), and ``random``
    (the expectation of a random ranking, R / n per sentence), by
    :func:`attnlib.experiments.faithfulness.rationale_ranking`; NaN for a sentence without a
    rationale token.

    ``runs``: the importance results over seeds on ``split``, a split with rationales."""
    if not hasattr(runs, "stack") or not hasattr(runs, "results"):
        raise ValueError("runs must be importance results over seeds (seeds.run_over_seeds), "
                         f"got {type(runs).__name__}")
    if getattr(split, "rationales", None) is None:
        raise ValueError("split has no rationales (only the synthetic data set has them)")

    def precision(measure: str):
        def per_sentence(r) -> np.ndarray:
            truth = [np.asarray(split.rationales[int(i)], dtype=bool) for i in r.indices]
            if measure == "random":  # the expectation of a random order: R / n
                share = np.array([t.sum() / len(t) for t in truth], dtype=float)
                return np.where(share > 0, share, np.nan)
            return rationale_ranking(getattr(r, measure), truth)["precision@k"].to_numpy()
        return per_sentence

    return {m: runs.stack(precision(m)) for m in ("attention", "gradient", "loo", "random")}


def recovery_over_seeds(recovery: Mapping, *, seed: int = 0) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Reads the rationale recovery over seeds: a table and the glued minima.

    ``recovery``: model (``"lstm+tanh"``) -> measure (``attention``, ``gradient``, ``loo``,
    ``random``) -> (S, n) per-sentence precision@k (one row per seed). Returns the table
    (model, measure) -> ``seeds``, ``precision@k`` (mean over seeds) and its 95% interval over
    seeds and sentences; and ``ch03_syn_{measure}_min`` (the lowest mean over models),
    ``ch03_syn_{measure}_low`` (the lowest interval end), ``ch03_syn_random`` and
    ``ch03_syn_one_in``, ``ch03_syn_beyond``: whether every measure's interval lies above
    every random row's, in every model (``ch03_syn_found``: the same in four words), and
    ``ch03_syn_over``: what the means are over ("3 seeds each", "one trained model each").
    """
    rows, out = {}, {}
    measures = ("attention", "gradient", "loo")
    intervals: dict[tuple[str, str], uncertainty.Interval] = {}
    for model, by_measure in recovery.items():
        missing = [m for m in (*measures, "random") if m not in by_measure]
        if missing:
            raise ValueError(f"recovery[{model!r}] lacks the measures {missing}")
        for measure, values in by_measure.items():
            values = np.asarray(values, dtype=float)
            iv = uncertainty.over_seeds(values, seed=seed)
            intervals[(model, measure)] = iv
            rows[(model, measure)] = {"seeds": int(values.shape[0]), "precision@k": iv.estimate,
                                      "95% interval": f"[{iv.low:.3f}, {iv.high:.3f}]"}
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index = pd.MultiIndex.from_tuples(table.index, names=["model", "measure"])
    for m in measures:
        out[f"ch03_syn_{m}_min"] = float(min(iv.estimate for (_, mm), iv in intervals.items() if mm == m))
        out[f"ch03_syn_{m}_low"] = float(min(iv.low for (_, mm), iv in intervals.items() if mm == m))
    random = [iv for (_, mm), iv in intervals.items() if mm == "random"]
    out["ch03_syn_random"] = float(np.mean([iv.estimate for iv in random]))
    out["ch03_syn_one_in"] = int(round(1 / out["ch03_syn_random"]))
    beyond = all(intervals[(model, m)].low > intervals[(model, "random")].high for model in recovery for m in measures)
    counts = sorted({row["seeds"] for row in rows.values()})
    over = _over(counts[-1]) if len(counts) == 1 else "over seeds and sentences"
    out["ch03_syn_beyond"] = (f"far more often than chance (every interval {over} lies above the random "
                              "row's)" if beyond else
                              f"more often than chance on average, though not every interval {over} clears "
                              "the random row's")
    out["ch03_syn_found"] = "far more often than chance" if beyond else "more often than chance on average"
    out["ch03_syn_over"] = (f"{counts[0]} seeds each" if len(counts) == 1 and counts[0] > 1 else
                            "one trained model each" if counts == [1] else "their seeds")
    return table, out


def instance(scores: Mapping[str, Any], tokens: Sequence[str]) -> dict[str, Any]:
    """One sentence's three importance orders (``scores``: attention, gradient and leave-one-out, each a
    weight per token of ``tokens``): where each puts its largest weight, and its share on the first token."""
    scores = {k: np.asarray(scores[k], dtype=float) for k in ("attention", "gradient", "leave-one-out")}
    top = {k: tokens[int(np.argmax(v))] for k, v in scores.items()}
    out = {"ch03_inst_top": f"all three put their largest weight on *{top['attention']}*"
           if len(set(top.values())) == 1 else "; ".join(f"{k} puts its largest weight on *{w}*" for k, w in top.items()),
           "ch03_inst_first": f"*{tokens[0]}*"}
    for k, short in (("attention", "att"), ("gradient", "grad"), ("leave-one-out", "loo")):
        out[f"ch03_inst_{short}0"] = float(scores[k][0] / max(scores[k].sum(), 1e-12))
    return out
