"""What Chapter 7 (the noise floor: random seeds against the adversary) reads off its results.

W&P's noise floor takes one model as *the base* and retrains it with other seeds. A verdict
read from one base rests on one trained model: another seed for the base gives another floor
and another adversary. So the chapter takes each of several models in turn as the base (the
chapter's ``seed`` and the next ones, :func:`attnlib.seeds.seeds_after`), computes the floor
against the remaining models and runs Chapter 5's adversary on it, and judges every claim over
the bases and the sentences (:func:`attnlib.uncertainty.over_seeds`,
:func:`attnlib.uncertainty.compare_over_seeds`: "holds in 3 of 3 seeds" counts base models).

The frame ``stacked`` (:func:`line_up`) has one row per base and test sentence: ``base``,
``instance`` (the position in the test split; every base sees the same sentences), ``jsd``
(the median JSD over the other models, the floor), ``tvd`` (their median output TVD),
``adversary_jsd`` (the adversary's ε-max JSD on that base), ``max_attention`` (that base's
peak weight) and ``predicted`` (that base's class, 0 or 1); the chapter adds ``bin``, the
peak-weight bin. A class or a bin is the base's own, so it can hold other sentences for
another base. A share or mean within a group (a class, a bin) is compared between groups
through the delta method's influence values of the difference of two group means
(:func:`_group_gap`). Each function reads one paragraph's numbers and clauses and returns
``{glued name: value}`` or a table.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from attnlib import uncertainty

from .wording import listed, require_columns

__all__ = [
    "beyond_floor_table",
    "bin_table",
    "bin_trends",
    "example",
    "floor",
    "line_up",
    "seed_peaks",
    "verdicts",
    "setup",
]

#: The bin edge at which J&W's fractions are read (Chapter 5).
_EDGE = 0.49

_STACKED_COLUMNS = ("base", "instance", "jsd", "tvd", "adversary_jsd", "max_attention", "predicted")


def _check_stacked(stacked: pd.DataFrame) -> list:
    """The bases in ``stacked``, after a check that every base has the same sentences."""
    require_columns(stacked, _STACKED_COLUMNS, "stacked (Chapter 7's floor beside the adversary, per base)")
    if len(stacked) == 0:
        raise ValueError("stacked has no rows")
    bases = list(pd.unique(stacked["base"]))
    first = stacked.loc[stacked.base == bases[0], "instance"].to_numpy()
    for b in bases[1:]:
        if not np.array_equal(stacked.loc[stacked.base == b, "instance"].to_numpy(), first):
            raise ValueError(f"base {b} has other sentences than base {bases[0]}: every base must see the same ones")
    return bases


def line_up(floors: Mapping, adversaries: Mapping) -> pd.DataFrame:
    """The floor and the adversary per base and sentence, stacked (module docstring).

    floors: base seed -> :class:`attnlib.baselines.SeedVariance` with that base (its
    ``per_instance`` over the whole test split); adversaries: base seed -> Chapter 5's
    :class:`attnlib.counterfactual.AdversaryResult` on that base (the same sentences for
    every base: the same ``max_instances`` and ``seed``).
    """
    if not isinstance(floors, Mapping) or not floors or set(floors) != set(adversaries):
        raise ValueError("floors and adversaries must map the same base seeds")
    frames = []
    for b in floors:
        adv = adversaries[b]
        rows = floors[b].per_instance.iloc[np.asarray(adv.indices)].reset_index(drop=True)
        if not np.allclose(rows.max_attention.to_numpy(), np.asarray(adv.max_attention)):
            raise ValueError(f"the adversary of base {b} was run on another model than its floor's base")
        frames.append(pd.DataFrame({
            "base": b, "instance": np.asarray(adv.indices), "jsd": rows.jsd.to_numpy(), "tvd": rows.tvd.to_numpy(),
            "adversary_jsd": np.asarray(adv.eps_max_jsd, dtype=np.float64),
            "max_attention": rows.max_attention.to_numpy(), "predicted": rows.predicted.to_numpy(),
        }))
    stacked = pd.concat(frames, ignore_index=True)
    _check_stacked(stacked)
    return stacked


def _matrix(stacked: pd.DataFrame, values, bases) -> np.ndarray:
    """(B, n): ``values`` (a column name or a Series aligned with ``stacked``) per base and sentence."""
    column = stacked[values] if isinstance(values, str) else values
    return np.stack([np.asarray(column[stacked.base == b], dtype=np.float64) for b in bases])


def _masked(matrix: np.ndarray, keep: np.ndarray) -> np.ndarray:
    return np.where(keep, matrix, np.nan)


def _measures(stacked: pd.DataFrame, eps: float) -> dict[str, pd.Series]:
    """The per-row measures of the table, as columns aligned with ``stacked``."""
    return {
        "mean JSD, seeds (the floor)": stacked.jsd,
        "mean JSD, adversary": stacked.adversary_jsd,
        "adversary > seeds": (stacked.adversary_jsd > stacked.jsd).astype(float),
        "JSD >= 0.49, seeds": (stacked.jsd >= _EDGE).astype(float),
        "JSD >= 0.49, adversary": (stacked.adversary_jsd >= _EDGE).astype(float),
        "seeds' TVD <= eps": (stacked.tvd <= eps).astype(float),
    }


def beyond_floor_table(stacked: pd.DataFrame, *, eps: float, classes: Sequence[str], seed: int = 0) -> pd.DataFrame:
    """The floor against the adversary over the base models: one row per measure, one column per
    predicted class and one for all sentences; each cell the mean over the bases of each base's
    mean (a share for the 0/1 rows), with its 95% interval over bases and sentences, as
    ``"0.950 [0.931, 0.969]"``. The first row gives each base's count of sentences.

    stacked: :func:`line_up`; eps: the adversary's output budget (TVD); classes: the class names.
    """
    bases = _check_stacked(stacked)
    predicted = _matrix(stacked, "predicted", bases)
    groups = {f"predicted {classes[0]}": predicted == 0, f"predicted {classes[1]}": predicted == 1,
              "all": np.ones_like(predicted, dtype=bool)}
    table = {"sentences per base": {g: ", ".join(str(int(k)) for k in keep.sum(1)) for g, keep in groups.items()}}
    for name, column in _measures(stacked, eps).items():
        m = _matrix(stacked, column, bases)
        table[name] = {g: uncertainty.over_seeds(_masked(m, keep), seed=seed).format() for g, keep in groups.items()}
    return pd.DataFrame(table).T


def _interval(stacked, column, bases, keep=None, seed: int = 0) -> uncertainty.Interval:
    m = _matrix(stacked, column, bases)
    return uncertainty.over_seeds(m if keep is None else _masked(m, keep), seed=seed)


def floor(stacked: pd.DataFrame, *, eps: float, n_seeds: int, shown: int, seed: int = 0) -> dict[str, Any]:
    """The floor's and the adversary's numbers over the bases, for all sentences and per
    predicted class (each a mean over bases with its interval, ``*_ci``), and the counts of
    sentences by the peak weight of the base the figures show.

    stacked: :func:`line_up`; eps: the adversary's output budget (TVD); n_seeds: how many
    models each floor is the median over; shown: the base of the figures (the chapter's seed).
    """
    bases = _check_stacked(stacked)
    if shown not in bases:
        raise ValueError(f"shown = {shown} is not among the bases {bases}")
    predicted = _matrix(stacked, "predicted", bases)
    keeps = {"all": None, "neg": predicted == 0, "pos": predicted == 1}
    measures = _measures(stacked, eps)
    named = {"floor_mean": "mean JSD, seeds (the floor)", "adv_mean": "mean JSD, adversary",
             "floor_049": "JSD >= 0.49, seeds", "adv_049": "JSD >= 0.49, adversary", "beats": "adversary > seeds",
             "tvd_eps": "seeds' TVD <= eps"}
    out: dict[str, Any] = {"ch07_n_bases": len(bases), "ch07_bases": listed(map(str, bases))}
    for key, keep in keeps.items():
        out[f"ch07_n_{key}"] = int(len(stacked[stacked.base == bases[0]])) if keep is None else \
            listed(str(int(k)) for k in keep.sum(1))
        for short, row in named.items():
            iv = _interval(stacked, measures[row], bases, keep, seed)
            out[f"ch07_{short}_{key}"] = float(iv.estimate)
            out[f"ch07_{short}_ci_{key}"] = iv.range_text()
    out["ch07_floor_04_all"] = float(_interval(stacked, (stacked.jsd > 0.4).astype(float), bases, None, seed).estimate)
    out["ch07_floor_of_ln2"] = float(out["ch07_floor_mean_all"] / np.log(2))
    out["ch07_eps"] = float(eps)
    out["ch07_n_seeds"] = int(n_seeds)
    one = stacked[stacked.base == shown]
    out["ch07_shown"] = int(shown)
    out["ch07_n_shown"] = int(len(one))
    out["ch07_med_peak"] = float(one.max_attention.median())
    out["ch07_n_top2"] = int((one.max_attention >= 0.5).sum())
    low = one[one.max_attention < 0.25]
    out["ch07_n_low"] = int(len(low))
    out["ch07_n_low_neg"] = int((low.predicted == 0).sum())
    out["ch07_n_low_pos"] = int((low.predicted == 1).sum())
    return out


def _group_gap(values: np.ndarray, in_a: np.ndarray, in_b: np.ndarray, seed: int):
    """mean(values | a) - mean(values | b), per base, over bases and sentences; None when a base
    has fewer than two sentences in a group.

    Each base's gap is written as the mean over its n sentences of the delta method's influence
    values, v_i = gap + (n / n_a) a_i (x_i - mean_a) - (n / n_b) b_i (x_i - mean_b): their mean
    is the gap, and a bootstrap of their mean resamples the gap to first order (the two groups'
    sizes held at their observed shares). :func:`attnlib.uncertainty.compare_over_seeds` against
    0 then gives the interval over bases and sentences and the per-base verdicts."""
    n = values.shape[1]
    na, nb = in_a.sum(1), in_b.sum(1)
    if (na < 2).any() or (nb < 2).any():
        return None
    mean_a = np.array([values[k, in_a[k]].mean() for k in range(len(values))])
    mean_b = np.array([values[k, in_b[k]].mean() for k in range(len(values))])
    gap = (mean_a - mean_b)[:, None]
    influence = (gap + (n / na)[:, None] * in_a * (values - mean_a[:, None])
                 - (n / nb)[:, None] * in_b * (values - mean_b[:, None]))
    return uncertainty.compare_over_seeds(influence, np.zeros_like(influence), seed=seed)


def _gap_text(c, *, missing: str) -> str:
    return missing if c is None else c.difference.signed_text()


def _bases_text(c) -> str:
    """How the bases bear a verdict out: "holds for 3 of 3 base models"."""
    return c.seeds_text().replace("seeds", "base models")


def verdicts(stacked: pd.DataFrame, *, classes: Sequence[str], seed: int = 0) -> dict[str, Any]:
    """The clauses that judge the adversary against the floor, over the bases and sentences: the
    mean JSDs (``ch07_adv_further``), the classes (``ch07_class_why``), where it found nothing
    within ε (``ch07_adv_zero_clause``) and overall (``ch07_verdict``).

    stacked: :func:`line_up`; classes: the class names (0 negative, 1 positive).
    """
    bases = _check_stacked(stacked)
    adv, flo = _matrix(stacked, "adversary_jsd", bases), _matrix(stacked, "jsd", bases)
    further = uncertainty.compare_over_seeds(adv, flo, seed=seed)
    d = further.difference.signed_text()
    out: dict[str, Any] = {}
    out["ch07_adv_further"] = further.says(
        f"goes further than retraining: its mean JSD lies above the floor's by {d} ({_bases_text(further)})",
        f"does not go as far as retraining: its mean JSD lies below the floor's by {d} ({_bases_text(further)})",
        tie=f"goes no further than retraining beyond noise: the difference, {d}, is within noise",
        disagree=f"goes further than retraining for some base models and not for others ({d}): the bases disagree",
    )
    predicted = _matrix(stacked, "predicted", bases)
    beats = (adv > flo).astype(float)
    neg, pos = predicted == 0, predicted == 1
    beat_gap = _group_gap(beats, neg, pos, seed)
    floor_gap = _group_gap(flo, neg, pos, seed)
    b_neg = uncertainty.over_seeds(_masked(beats, neg), seed=seed).estimate
    b_pos = uncertainty.over_seeds(_masked(beats, pos), seed=seed).estimate
    missing = "too few sentences in a class for an interval"
    if beat_gap is None or not beat_gap.differs:
        why = (f"The adversary beats the floor about as often for sentences predicted {classes[0]} ({b_neg:.3f}) as "
               f"for those predicted {classes[1]} ({b_pos:.3f}): the gap ({_gap_text(beat_gap, missing=missing)}) is "
               "within noise over the base models and sentences, so they do not say that either class is harder "
               "for it.")
        if beat_gap is not None and beat_gap.verdict == uncertainty.SEEDS_DISAGREE:
            why = why.replace("is within noise over", "goes one way for some base models and the other way for "
                              "others, so it is not a finding over")
    else:
        lo_beat = classes[0] if beat_gap.verdict == "lower" else classes[1]
        gap = f"{beat_gap.difference.signed_text()}, negative minus positive; {_bases_text(beat_gap)}"
        if floor_gap is None or not floor_gap.differs:
            why = (f"The adversary beats the floor less often for sentences predicted {lo_beat} (a gap of {gap}), "
                   f"while the floor itself is no higher for one class than for the other beyond noise "
                   f"({_gap_text(floor_gap, missing=missing)}): the height of the floor does not explain the "
                   "difference.")
        else:
            hi = classes[0] if floor_gap.verdict == "higher" else classes[1]
            if hi == lo_beat:
                why = (f"The adversary beats the floor less often for sentences predicted {hi} (a gap of {gap}), where "
                       f"the floor is higher ({floor_gap.difference.signed_text()}, {_bases_text(floor_gap)}): a "
                       "higher floor leaves the adversary less room below ln 2.")
            else:
                why = (f"The floor is higher for sentences predicted {hi} ({floor_gap.difference.signed_text()}, "
                       f"{_bases_text(floor_gap)}), yet the adversary beats it less often for those predicted "
                       f"{lo_beat} (a gap of {gap}): the height of the floor alone does not explain the difference "
                       "between the classes.")
    out["ch07_class_why"] = why
    zeros = [int((stacked[stacked.base == b].adversary_jsd <= 1e-9).sum()) for b in bases]
    n = int((stacked.base == bases[0]).sum())
    if any(zeros):
        out["ch07_adv_zero_clause"] = (
            f"For {listed(map(str, zeros))} of the {n} sentences (base models {listed(map(str, bases))}) the "
            "adversary found no candidate within ε (JSD 0, as in Chapter 5): that is where its violins reach "
            "down to 0.")
    else:
        out["ch07_adv_zero_clause"] = "The adversary found a candidate within ε for every sentence and base model."
    share = uncertainty.over_seeds(beats, seed=seed)
    most = ("most of them" if share.low > 0.5 else "a minority of them" if share.high < 0.5
            else "about half of them, within noise")
    if further.verdict == "higher":
        head = (f"So on this BiLSTM J&W's finding survives W&P's control over all {len(bases)} base models"
                if further.support == len(bases) else
                f"So on this BiLSTM J&W's finding survives W&P's control over the {len(bases)} base models taken "
                f"together ({_bases_text(further)})")
    elif further.verdict == "lower":
        head = "So on this BiLSTM J&W's finding does not survive W&P's control"
    else:
        head = "So on this BiLSTM W&P's control leaves J&W's finding undecided"
    out["ch07_verdict"] = (
        f"{head}: the adversarial attention lies beyond what retraining produces for {share.estimate:.1%} of the "
        f"sentences (95% interval over base models and sentences {share.low:.1%} to {share.high:.1%}), "
        f"{most}.")
    out["ch07_beats_word"] = most
    return out


_LOW, _HIGH = "[0.25, 0.5)", "[0.75, 1]"


def bin_table(by_bin: pd.DataFrame, *, classes: Sequence[str], seed: int = 0) -> pd.DataFrame:
    """The share *adversary > seeds* per bin of the base's peak weight (rows) and predicted class
    (columns), each a mean over the bases of each base's share with its 95% interval over bases
    and sentences; "n/a" where a base has no sentence in the cell.

    by_bin: :func:`line_up` with a ``bin`` column (the peak-weight bin of each row); classes:
    the class names.
    """
    bases = _check_stacked(by_bin)
    require_columns(by_bin, ["bin"], "by_bin")
    beats = _matrix(by_bin, (by_bin.adversary_jsd > by_bin.jsd).astype(float), bases)
    predicted = _matrix(by_bin, "predicted", bases)
    bins = np.stack([by_bin.loc[by_bin.base == b, "bin"].astype(str).to_numpy() for b in bases])
    labels = [str(c) for c in by_bin["bin"].cat.categories] if hasattr(by_bin["bin"], "cat") else sorted(set(bins.ravel()))
    table = {}
    for label in labels:
        row = {}
        for c in (0, 1):
            keep = (bins == label) & (predicted == c)
            row[f"predicted {classes[c]}"] = ("n/a" if (keep.sum(1) == 0).any() else
                                              uncertainty.over_seeds(_masked(beats, keep), seed=seed).format())
        table[label] = row
    frame = pd.DataFrame(table).T
    frame.index.name = "bin"
    return frame


def _bin_move(beats, bins, predicted, c, seed):
    """For one class: (falls / rises / does not change beyond noise / the bases disagree, share in
    the low bin, share in the high bin, the change with its interval), or None when a base has
    fewer than two of the class's sentences in either bin."""
    low, high = (bins == _LOW) & (predicted == c), (bins == _HIGH) & (predicted == c)
    change = _group_gap(beats, high, low, seed)
    if change is None:
        return None
    word = change.says("rises", "falls", "does not change beyond noise", disagree="moves one way for some base models "
                       "and the other way for others")
    lo = uncertainty.over_seeds(_masked(beats, low), seed=seed).estimate
    hi = uncertainty.over_seeds(_masked(beats, high), seed=seed).estimate
    said = change.difference.signed_text()
    if change.differs:
        said += f"; {_bases_text(change)}"
    return word, float(lo), float(hi), said


def bin_trends(by_bin: pd.DataFrame, *, classes: Sequence[str], seed: int = 0) -> dict[str, Any]:
    """How the share *adversary > seeds* moves from the peak-weight bin [0.25, 0.5) to [0.75, 1],
    per predicted class (``ch07_trend_neg``, ``ch07_trend_pos``), and both in one clause
    (``ch07_trends``), over the bases and sentences. A class's share "falls" or "rises" only when
    the interval of the change excludes 0 and most bases agree (:func:`_group_gap`); otherwise
    it "does not change beyond noise" (or moves both ways when the bases disagree). The clause:
    "and it does for both classes, ..." when both fall; "but it rises for both classes, ..."
    when both rise; "but for neither class does it change beyond noise: ..." when neither does;
    "but the classes differ: ..." otherwise.

    by_bin: :func:`line_up` with a ``bin`` column; classes: the class names.
    """
    bases = _check_stacked(by_bin)
    require_columns(by_bin, ["bin"], "by_bin")
    beats = _matrix(by_bin, (by_bin.adversary_jsd > by_bin.jsd).astype(float), bases)
    predicted = _matrix(by_bin, "predicted", bases)
    bins = np.stack([by_bin.loc[by_bin.base == b, "bin"].astype(str).to_numpy() for b in bases])
    moves = [_bin_move(beats, bins, predicted, c, seed) for c in (0, 1)]
    out = {}
    for c, key in ((0, "ch07_trend_neg"), (1, "ch07_trend_pos")):
        who = f"sentences predicted {classes[c]}"
        m = moves[c]
        out[key] = (f"for {who} some base model has fewer than two sentences in {_LOW} or {_HIGH}" if m is None
                    else f"for {who} it {m[0]}, from {m[1]:.3f} in {_LOW} to {m[2]:.3f} in {_HIGH} (a change of {m[3]})")
    words = {m[0] if m else None for m in moves}
    if words == {"falls"} or words == {"rises"}:
        (word, lo0, hi0, ch0), (_, lo1, hi1, ch1) = moves
        out["ch07_trends"] = (
            f"{'and it does' if word == 'falls' else 'but it rises'} for both classes, between the bins {_LOW} and "
            f"{_HIGH}: from {lo0:.3f} to {hi0:.3f} for sentences predicted {classes[0]} (a change of {ch0}) and from "
            f"{lo1:.3f} to {hi1:.3f} for those predicted {classes[1]} ({ch1})"
        )
    elif words == {"does not change beyond noise"}:
        out["ch07_trends"] = (f"but for neither class does it change beyond noise: "
                              f"{out['ch07_trend_neg']}; {out['ch07_trend_pos']}")
    else:
        out["ch07_trends"] = f"but the classes differ: {out['ch07_trend_neg']}; {out['ch07_trend_pos']}"
    return out


def _among(attention: Mapping[int, Sequence[np.ndarray]], others, indices) -> np.ndarray:
    """Per instance of ``indices``, the median JSD over the pairs of ``others``."""
    from attnlib.metrics import jsd as jsd_of

    pairs = [(a, b) for n, a in enumerate(others) for b in others[n + 1:]]
    return np.median([[float(jsd_of(attention[a][j], attention[b][j])) for j in indices] for a, b in pairs], axis=0)


def seed_peaks(predictions: Mapping[int, Any], stacked: pd.DataFrame, *, shown: int, seed: int = 0) -> dict[str, Any]:
    """Where each model peaks, and the JSD among the other models themselves against the floor,
    per base (``ch07_among_mean``, ``ch07_odd_clause``).

    predictions: model seed -> :class:`attnlib.train.Predictions` on the test split, for every
    model (each base and the models its floor compares it with; at least two besides each
    base); stacked: :func:`line_up`; shown: the base of the figures. For each base, "among" is,
    per sentence, the median JSD over the pairs of the other models, measured like the floor;
    the floor and "among" are compared over bases and sentences (paired: the same base).
    """
    from attnlib.metrics import attention_positions

    bases = _check_stacked(stacked)
    if any(b not in predictions for b in bases) or shown not in bases:
        raise ValueError("predictions must hold every base model, and shown must be one of the bases")
    models = list(predictions)
    if len(models) < 3:
        raise ValueError("the JSD among the other models needs at least two of them besides each base")
    pos = {s: attention_positions(p.attention) for s, p in predictions.items()}
    others = [s for s in models if s != shown]
    out: dict[str, Any] = {
        "ch07_other_seeds": listed(map(str, others)),
        "ch07_base_first": pos[shown]["peak on first token"],
        "ch07_seeds_first": listed(f"{pos[s]['peak on first token']:.3f}" for s in others),
        "ch07_base_peakw": pos[shown]["mean peak weight"],
        "ch07_seeds_peakw": listed(f"{pos[s]['mean peak weight']:.3f}" for s in others),
    }
    attention = {s: p.attention for s, p in predictions.items()}
    indices = stacked.loc[stacked.base == bases[0], "instance"].to_numpy()
    among = np.stack([_among(attention, [s for s in models if s != b], indices) for b in bases])
    flo = _matrix(stacked, "jsd", bases)
    c = uncertainty.compare_over_seeds(among, flo, seed=seed)
    out["ch07_among_mean"] = float(c.a.estimate)
    out["ch07_floor_mean"] = float(c.b.estimate)
    d = c.difference.signed_text()
    out["ch07_odd_clause"] = c.says(
        f"higher than the floor ({d}, {_bases_text(c)}): the other models differ from one another more than from "
        "the base, so the floor, if anything, understates how far retraining moves this BiLSTM's attention",
        f"lower than the floor ({d}, {_bases_text(c)}): the other models agree with one another more than with "
        "the base, so the floor measures in part how far each base is from the rest. That is a real effect of the "
        "seed (retraining can land on a model that attends somewhere else), but it means the floor depends on "
        "which model is the base",
        tie=(f"about as high as the floor (a difference of {d}, within noise over the base models and sentences): "
             "no base is the odd one out, and retraining itself moves this BiLSTM's attention that far, whichever "
             "model is the base"),
        disagree=(f"higher than the floor for some base models and lower for others ({d}): which model is the odd "
                  "one out depends on the base"),
    )
    return out


def example(
    predictions: Mapping[int, Any],
    *,
    base_seed: int,
    instance: int,
    tokens: Sequence[str],
    adversary_jsd: float,
    adversary_attention: np.ndarray,
) -> dict[str, Any]:
    """The heatmap's sentence in words (one base model, the chapter's): where each model peaks,
    whether another model changes the decision (``ch07_example_seeds``), and the adversary's
    attention (``ch07_example_adv``).

    predictions: seed -> Predictions on the test split, the base's included; base_seed: the
    base's seed; instance: the sentence's test position; tokens: its tokens;
    adversary_jsd, adversary_attention: the adversary's ε-max JSD and attention on it.
    """
    if base_seed not in predictions:
        raise ValueError(f"predictions has no entry for the base seed {base_seed}")
    i = int(instance)
    toks = tokens
    others = [s for s in predictions if s != base_seed]
    if not others:
        raise ValueError("predictions needs at least one retrained seed besides the base")

    def top(attention):
        j = int(np.argmax(attention))
        return f"“{toks[j]}” ({float(attention[j]):.2f})"

    base_p = predictions[base_seed]
    flips = [s for s in others if predictions[s].predicted[i] != base_p.predicted[i]]
    text = (
        f"The base model puts its largest weight on {top(base_p.attention[i])}; "
        + "; ".join(f"seed {s} on {top(predictions[s].attention[i])}" for s in others)
        + ". Their p(positive) is "
        + listed(f"{predictions[s].probs[i, -1]:.2f}" for s in others)
        + f" against the base's {base_p.probs[i, -1]:.2f}. "
    )
    if flips:
        text += (
            f"{len(flips)} of the {len(others)} seeds predict a different class "
            "from the base: a change the adversary is not allowed."
        )
    else:
        text += "No seed changes the base's decision on it, though their probabilities move."
    d = float(adversary_jsd)
    if d <= 1e-9:
        a_text = (
            "The adversary found no candidate within ε for this sentence "
            "(JSD 0.00): its row is the base's attention."
        )
    else:
        a_text = (
            f"The adversary's attention lies at JSD {d:.2f} from the base's, its "
            f"largest weight on {top(adversary_attention)}, with the output "
            "within ε."
        )
    return {"ch07_example_seeds": text, "ch07_example_adv": a_text}


def setup(*, base_seed: int, seeds: Sequence[int], bases: Sequence[int]) -> dict[str, Any]:
    """The seeds the chapter trains: the base model's seed, the other seeds' models, the bases of the set."""
    return {"ch07_base_seed": int(base_seed), "ch07_n_models": len(seeds), "ch07_models": ", ".join(map(str, seeds)),
            "ch07_bases_text": ", ".join(map(str, bases)), "ch07_n_bases_set": len(bases)}
