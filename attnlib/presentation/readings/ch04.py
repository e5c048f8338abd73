"""Chapter 4's readings: how far permuting attention moves the output, by max-attention bin,
over every training seed of each model.

The chapter runs :func:`attnlib.counterfactual.permute_attention` on every seed of each model
(:func:`attnlib.seeds.run_over_seeds`): ``runs`` maps (dataset, encoder) to those results (an
:class:`attnlib.seeds.SeedResults`, ``results`` in seed order, each with ``median_tvd``,
``max_attention`` and ``predicted`` per sentence), in the chapter's order.

**What a bin's number is.** J&W read a *median* per bin off their Figure 6, and the range the
chapter compares with is a range of such medians, so a bin's number here is a median too: each
seed's median of the output change over the sentences its model puts in the bin, averaged over
the seeds, with an interval over seeds and sentences
(:mod:`attnlib.presentation.readings.binned`, where the choice is argued). The mean of the
per-sentence changes would be the easier statistic, but it is not the paper's: these changes are
skewed to the right, so a bin's mean lies above its median, and against J&W's medians it would
lean towards "above". Each seed's model bins the sentences by its own largest weight, so a bin
holds other sentences in each seed; a bin with fewer than
:data:`~attnlib.presentation.readings.binned.MIN_FOR_MEDIAN` sentences in some seed gets no
verdict, and the prose gives its counts instead.

:func:`medians_by_bin` and :func:`medians_by_class` compute the medians once; the paragraph
functions read them and return ``{glued name: value}`` for
:func:`attnlib.presentation.glue.glue_all`.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ...experiments import counterfactual
from . import binned as _binned
from .wording import ENCODER_NAMES, listed, some_of

__all__ = ["MIN_FOR_MEDIAN", "medians_by_bin", "medians_by_class", "seed_frames", "bin_estimates", "bin_table",
           "count_table",
           "bilstm", "bilstm_counts", "by_class", "encoders"]

_LSTM = ("rt-polarity", "lstm")
#: the fewest sentences a bin needs in every seed for a 95% interval of its median
MIN_FOR_MEDIAN = _binned.MIN_FOR_MEDIAN


def _check_runs(runs: Mapping) -> None:
    if not isinstance(runs, Mapping) or not runs:
        raise ValueError("runs must map (dataset, encoder) to its results over seeds (attnlib.seeds.run_over_seeds)")
    for key, r in runs.items():
        if not hasattr(r, "stack") or not hasattr(r, "results"):
            raise ValueError(f"runs[{key!r}] must be the results over seeds (attnlib.seeds.run_over_seeds), "
                             f"got {type(r).__name__}")


def _check_lstm(medians: Mapping, what: str) -> None:
    if _LSTM not in medians:
        raise ValueError(f"{what} needs the rt-polarity BiLSTM {_LSTM}, has {list(medians)}")


def medians_by_bin(runs: Mapping, *, seed: int = 0) -> dict:
    """(dataset, encoder) -> its output changes' medians per max-attention bin over seeds and
    sentences (:class:`~attnlib.presentation.readings.binned.GroupMedians`)."""
    _check_runs(runs)
    return {key: _binned.by_bin(r.stack("median_tvd"), r.stack("max_attention"), seed=seed) for key, r in runs.items()}


def medians_by_class(runs: Mapping, classes: Mapping[str, Sequence[str]], *, seed: int = 0) -> dict:
    """(dataset, encoder) -> its output changes' medians per predicted class (over all bins),
    over seeds and sentences; ``classes``: dataset -> the class names."""
    _check_runs(runs)
    missing = sorted({d for d, _ in runs} - set(classes))
    if missing:
        raise ValueError(f"classes lacks the data set(s) {missing}")
    return {key: _binned.by_class(r.stack("median_tvd"), r.stack("predicted"), classes[key[0]], seed=seed)
            for key, r in runs.items()}


def seed_frames(runs: Mapping) -> dict:
    """(dataset, encoder) -> one :func:`attnlib.counterfactual.bin_by_max_attention` frame per
    seed (columns value, max_attention, bin, predicted), the first seed's first: the violins
    and their seed markers (:func:`attnlib.viz.plot_violin_panels`)."""
    _check_runs(runs)
    return {key: [counterfactual.bin_by_max_attention(r.median_tvd, r.max_attention, predicted=r.predicted)
                  for r in runs_.results] for key, runs_ in runs.items()}


def _row(key) -> tuple[str, str]:
    return key[0], f"{key[1]}+tanh"


def _frame(medians: Mapping, cell) -> pd.DataFrame:
    rows = {_row(key): {b: cell(m, b) for b in m.labels} for key, m in medians.items()}
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index = pd.MultiIndex.from_tuples(frame.index, names=["dataset", "model"])
    frame.columns.name = "bin"
    return frame


def bin_estimates(medians: Mapping) -> pd.DataFrame:
    """Index (dataset, "encoder+tanh"), one column per bin: the mean over seeds of each seed's
    median (NaN for a bin no seed fills)."""
    return _frame(medians, lambda m, b: m.estimate(b))


def bin_table(medians: Mapping, digits: int = 3) -> pd.DataFrame:
    """:func:`bin_estimates` as "0.062 [0.048, 0.077]": the mean over seeds of the per-seed
    medians and its 95% interval over seeds and sentences (a model with one seed: over its
    sentences); "n/a" for an empty bin, "0.114 (too few)" where some seed puts fewer sentences
    in the bin than a median's interval needs. The first column, "seeds", counts the models."""
    def cell(m, b):
        if m.empty(b):
            return "n/a"
        if not m.enough(b):
            return f"{m.estimate(b):.{digits}f} (too few)"
        return m.interval(b).format(digits)
    table = _frame(medians, cell)
    table.insert(0, "seeds", [int(m.n_seeds) for m in medians.values()])
    return table


def count_table(medians: Mapping) -> pd.DataFrame:
    """Sentences per bin in each seed ("27, 31 and 22"; one number when every seed agrees)."""
    return _frame(medians, lambda m, b: m.count_text(b))


def _usable(m) -> list:
    return [b for b in m.labels if m.enough(b)]


def _few(m, who: str = "") -> str:
    """"; the bin [0.75, 1] holds too few sentences to judge (4, 2 and 6 in the 3 seeds)", or ""."""
    few = [b for b in m.labels if not m.empty(b) and not m.enough(b)]
    if not few:
        return ""
    counts = listed(f"{b}: {m.count_text(b)}" for b in few)
    return (f"; {'the bin ' + few[0] + ' holds' if len(few) == 1 else 'the bins ' + listed(few) + ' hold'} too few "
            f"{who}sentences for a median's 95% interval (fewer than {_binned.MIN_FOR_MEDIAN} in some seed; "
            f"{counts}), so {'it is' if len(few) == 1 else 'they are'} not judged")


def _against_range(m, bins, low: float, high: float, tolerance: float) -> dict:
    """bin -> "above", "below" or "overlaps": the bin's interval against [low - tol, high + tol]."""
    out = {}
    for b in bins:
        iv = m.interval(b)
        out[b] = "above" if iv.low > high + tolerance else "below" if iv.high < low - tolerance else "overlaps"
    return out


def _trend(m) -> str:
    """Whether the BiLSTM's medians grow with the peak: every step between neighbouring bins
    (with enough sentences) beyond noise over seeds and sentences, or only from the lowest to
    the top bin, or not at all."""
    bins = _usable(m)
    if len(bins) < 2:
        return "cannot be compared across bins: fewer than two bins hold enough sentences"
    steps = [(a, b, m.compare(b, m, a, paired_seeds=True)) for a, b in zip(bins, bins[1:])]
    ends = m.compare(bins[-1], m, bins[0], paired_seeds=True)
    span = f"from {bins[0]} to {bins[-1]}"
    if all(c.verdict == "higher" for *_, c in steps):
        return ("grow steadily as attention gets more peaked: each bin's median lies above the one "
                f"before it beyond noise over seeds and sentences ({span}: {ends.difference.signed_text()}, "
                f"{ends.seeds_text()})")
    unlike_steps: dict[str, list[str]] = {}
    for a, b, c in steps:
        if c.verdict != "higher":
            words = c.says("", "lower", tie="within noise", disagree="up or down, depending on the seed")
            unlike_steps.setdefault(words, []).append(f"from {a} to {b}")
    unlike = "not step by step: " + "; ".join(
        f"the step{'s' if len(v) > 1 else ''} {listed(v)} {'are' if len(v) > 1 else 'is'} {w}"
        for w, v in unlike_steps.items())
    if ends.verdict == "higher":
        return (f"rise {span} ({ends.difference.signed_text()}, {ends.seeds_text()}), but {unlike}")
    if ends.verdict == "lower":
        return f"fall {span} ({ends.difference.signed_text()}, {ends.seeds_text()})"
    if ends.verdict == "within noise":
        return (f"do not grow beyond noise {span}: the difference is {ends.difference.signed_text()} "
                f"over seeds and sentences ({ends.seeds_text()})")
    return f"grow {span} for some seeds and shrink for others ({ends.seeds_text()})"


def bilstm(medians: Mapping, *, low: float, high: float, tolerance: float) -> dict[str, Any]:
    """Reads the BiLSTM's medians on rt-polarity: their range, the top bin, J&W's range, the trend.

    ``medians``: :func:`medians_by_bin`'s; ``low``, ``high``: the range read from J&W's Figure 6
    (``published.PERMUTATION_SST_RANGE``) and ``tolerance`` the reading's ± (a range read off a
    figure: ``published.PERMUTATION_SST_TOLERANCE``). A bin lies *above* that range only when its
    interval over seeds and sentences lies wholly above ``high + tolerance`` (*below*: under
    ``low - tolerance``); otherwise it overlaps it. The medians *grow* only when every step from
    one bin to the next is beyond noise (:func:`_trend`).
    """
    _check_lstm(medians, "medians")
    m = medians[_LSTM]
    filled = [b for b in m.labels if not m.empty(b)]
    bins = _usable(m)
    est = {b: m.estimate(b) for b in filled}
    where = _against_range(m, bins, low, high, tolerance)
    said = {w: sum(v == w for v in where.values()) for w in ("overlaps", "above", "below")}
    parts = []
    noun = "bins with enough sentences" if len(bins) < len(filled) else "non-empty bins"
    if said["overlaps"]:
        parts.append(f"{some_of(said['overlaps'], len(bins), noun)} "
                     f"{'overlaps' if said['overlaps'] == 1 and len(bins) > 1 else 'overlap'} that range"
                     + (", so none lies clearly above or below it" if said["overlaps"] == len(bins) else ""))
    for w in ("above", "below"):
        if said[w]:
            names = listed(b for b, v in where.items() if v == w)
            parts.append(f"{some_of(said[w], len(bins), 'bins') if not parts else said[w]} "
                         f"{'lies' if said[w] == 1 else 'lie'} {w} it ({names})")
    top = m.labels[-1]
    top_iv = m.interval(top) if m.enough(top) else None
    return {
        "ch04_n_seeds": int(m.n_seeds),
        "ch04_lstm_min": float(min(est.values())),
        "ch04_lstm_max": float(max(est.values())),
        "ch04_lstm_top": float(est.get(top, float("nan"))),
        "ch04_lstm_top_ci": (f"95% interval over seeds and sentences {top_iv.range_text()}" if top_iv is not None
                             else f"too few sentences in some seed for an interval: {m.count_text(top)}"),
        "ch04_tolerance": float(tolerance),
        "ch04_lstm_vs_paper": ", ".join(parts) + _few(m),
        "ch04_lstm_trend": _trend(m) + (" (leaving out the bins with too few sentences)" if _few(m) else ""),
    }


def bilstm_counts(runs: Mapping) -> dict[str, Any]:
    """How peaked the BiLSTM's attention is: the first seed's model's sentences per bin
    (``ch04_lstm_bin0`` ...), their number, the share with a largest weight of 0.5 or more,
    and that share's range over the seeds (``ch04_lstm_peaked_range``)."""
    _check_runs(runs)
    if _LSTM not in runs:
        raise ValueError(f"runs needs the rt-polarity BiLSTM {_LSTM}, has {list(runs)}")
    peak = runs[_LSTM].stack("max_attention")
    codes, _ = _binned.bin_codes(peak)
    shares = (peak >= 0.5).mean(1)
    out: dict[str, Any] = {"ch04_lstm_n": int(peak.shape[1]), "ch04_lstm_peaked": float(shares[0])}
    for b in range(4):
        out[f"ch04_lstm_bin{b}"] = int((codes[0] == b).sum())
    lo, hi = f"{shares.min():.0%}", f"{shares.max():.0%}"
    out["ch04_lstm_peaked_range"] = (f"{lo} in every one of the {len(shares)} seeds" if lo == hi
                                     else f"{lo} to {hi} over the {len(shares)} seeds")
    return out


def _class_words(c, c0: str, c1: str) -> str:
    return c.says(f"the sentences predicted {c0} move more", f"the sentences predicted {c1} move more",
                  tie="neither class moves more beyond noise", disagree="which class moves more depends on the seed")


def _models_with_support(models: list) -> str:
    """"the rt-polarity CNN and the IMDB CNN (holds in 3 of 3 seeds each)", or each model with its own."""
    if len({t for _, t in models}) == 1:
        return listed(f"the {m}" for m, _ in models) + f" ({models[0][1]}{' each' if len(models) > 1 else ''})"
    return listed(f"the {m} ({t})" for m, t in models)


def by_class(classed: Mapping, classes: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """Reads the split by predicted class: the BiLSTM's, which class moves more for the
    other models, and the IMDB Average model's class medians.

    ``classed``: :func:`medians_by_class`'s, in the chapter's order (rt-polarity's lstm and
    IMDB's average among them); ``classes``: dataset -> class names. One class moves more than
    the other only when their difference is beyond noise over seeds and sentences (paired
    over seeds: one model gives both) and most seeds agree.
    """
    for key in (_LSTM, ("imdb", "average")):
        if key not in classed:
            raise ValueError(f"classed needs {key}, has {list(classed)}")
    c0, c1 = classes["rt-polarity"]
    m = classed[_LSTM]
    if not (m.enough(c0) and m.enough(c1)):
        raise ValueError(f"the BiLSTM predicts too few sentences in a class to compare them ({c0}: "
                         f"{m.count_text(c0)}, {c1}: {m.count_text(c1)})")
    split = m.compare(c0, m, c1, paired_seeds=True)
    lstm_class = split.says(
        f"the sentences it predicts {c0} move more than those it predicts {c1}",
        f"the sentences it predicts {c1} move more than those it predicts {c0}",
        tie=f"the sentences it predicts {c0} and those it predicts {c1} move alike within noise",
        disagree=f"whether the sentences it predicts {c0} or {c1} move more depends on the seed",
    )
    lstm_class += (f": a median of {m.estimate(c0):.3f} against {m.estimate(c1):.3f} over all bins "
                   f"(the difference {split.difference.signed_text()}, over seeds and sentences; "
                   f"{split.seeds_text()})")
    side: dict[str, list[str]] = {}
    for key, g in classed.items():
        if key == _LSTM:
            continue
        k0, k1 = classes[key[0]]
        where_ = key[0].replace("imdb", "IMDB")
        if not (g.enough(k0) and g.enough(k1)):
            few = k0 if not g.enough(k0) else k1
            side.setdefault(f"too few sentences are predicted {few} to compare the classes", []).append(
                (f"{where_} {ENCODER_NAMES[key[1]]}", f"n = {g.count_text(few)}"))
            continue
        c = g.compare(k0, g, k1, paired_seeds=True)
        words = _class_words(c, k0, k1)
        side.setdefault(words, []).append((f"{where_} {ENCODER_NAMES[key[1]]}", c.seeds_text()))
    avg = classed[("imdb", "average")]
    ia0, ia1 = classes["imdb"]

    def imdb_class(c: str) -> str:
        if avg.empty(c):
            return f"no review predicted {c}"
        if not avg.enough(c):
            return f"{avg.estimate(c):.3f} for reviews predicted {c} (too few for an interval: {avg.count_text(c)})"
        over = "over reviews, one model" if avg.n_seeds == 1 else "over seeds and reviews"
        return f"{avg.estimate(c):.3f} (95% interval {over}: {avg.interval(c).range_text()}) for reviews predicted {c}"

    return {
        "ch04_lstm_class": lstm_class,
        "ch04_class_more": "; ".join(f"{w} for {_models_with_support(v)}" for w, v in side.items()),
        "ch04_imdb_avg_classes": f"{imdb_class(ia0)} and {imdb_class(ia1)}",
    }


def _vs_lstm(m, lstm, name: str) -> str:
    """One encoder against the BiLSTM, bin by bin (two recipes: paired_seeds=False)."""
    shared = [b for b in lstm.labels if not m.empty(b) and not lstm.empty(b)]
    judged = [b for b in shared if m.enough(b) and lstm.enough(b)]
    verdicts = {b: m.compare(b, lstm, b, paired_seeds=False) for b in judged}
    above = [b for b in judged if verdicts[b].verdict == "higher"]
    noun = "bins the two share" if len(judged) == len(shared) else "bins with enough sentences in both"
    text = f"the {name}'s median is above the BiLSTM's beyond noise in {some_of(len(above), len(judged), noun)}"
    if above:
        support = sorted({verdicts[b].seeds_text() for b in above})
        text += f" ({listed(support)})"
    rest = {}
    for b in judged:
        if b not in above:
            words = verdicts[b].says("above", "below", tie="within noise", disagree="seeds disagree")
            rest.setdefault(words, []).append(b)
    if rest:
        text += ", " + listed(f"{w} in {listed(bs)}" for w, bs in rest.items())
    few = [b for b in shared if b not in judged]
    if few:
        counts = listed(("" if len(few) == 1 else f"{b}: ") + f"{m.count_text(b)} for the {name}, "
                        f"{lstm.count_text(b)} for the BiLSTM" for b in few)
        text += (f", and {listed(few)} {'holds' if len(few) == 1 else 'hold'} too few sentences in some seed "
                 f"to judge ({counts})")
    return text


def encoders(medians: Mapping) -> dict[str, Any]:
    """Reads the CNN and Average encoders against the BiLSTM, on rt-polarity and IMDB.

    ``medians``: :func:`medians_by_bin`'s, in the chapter's order (the prose names
    rt-polarity's encoders in that order). An encoder's median is above the BiLSTM's in a bin
    only when the difference is beyond noise over both models' seeds and the sentences
    (:meth:`~attnlib.presentation.readings.binned.GroupMedians.compare`, ``paired_seeds=False``:
    two recipes); bins with too few sentences in some seed are named, not judged.
    """
    _check_lstm(medians, "medians")
    lstm = medians[_LSTM]
    others = [e for d, e in medians if d == "rt-polarity" and e != "lstm"]
    rest = [medians[("rt-polarity", e)].estimate(b) for e in others for b in lstm.labels]
    rest = [v for v in rest if np.isfinite(v)]
    imdb = [(e, m) for (d, e), m in medians.items() if d == "imdb"]
    imdb_seeds = sorted({int(m.n_seeds) for _, m in imdb})
    ranges = []
    for e, m in sorted(imdb, key=lambda em: em[0]):
        values = [m.estimate(b) for b in m.labels if not m.empty(b)]
        ranges.append(f"{min(values):.3f} to {max(values):.3f} ({ENCODER_NAMES[e]})")
    return {
        "ch04_rt_vs_lstm": "; ".join(_vs_lstm(medians[("rt-polarity", e)], lstm, ENCODER_NAMES[e]) for e in others),
        "ch04_rt_others_lo": float(min(rest)) if rest else float("nan"),
        "ch04_rt_others_hi": float(max(rest)) if rest else float("nan"),
        "ch04_imdb_ranges": " and ".join(ranges),
        "ch04_imdb_seeds": ("one model per encoder (one training seed: IMDB's models cost more to train than "
                            "this profile's time allows for more seeds), so these numbers and the IMDB class "
                            "verdicts below describe one model, and their intervals carry the reviews' noise alone"
                            if imdb_seeds == [1] else
                            f"{listed(str(k) for k in imdb_seeds)} training seeds per model, like rt-polarity's"
                            if imdb_seeds else "no model"),
    }
