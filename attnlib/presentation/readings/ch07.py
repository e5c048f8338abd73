"""What Chapter 7 (the noise floor: random seeds against the adversary) reads off its results.

The chapter lines up, sentence by sentence, the seed-variance floor of
:func:`attnlib.baselines.seed_variance` with Chapter 5's adversary in one frame ``both``: one
row per test sentence with ``jsd`` (the median JSD over the retrained seeds), ``tvd`` (their
median output TVD), ``adversary_jsd`` (the adversary's ε-max JSD), ``max_attention`` (the base's
peak weight) and ``predicted`` (the base's class, 0 or 1). Each function below reads one
paragraph's numbers and clauses from it (or from the models' predictions) and returns
``{glued name: value}``.
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
    "bin_trends",
    "example",
    "floor",
    "seed_peaks",
    "verdicts",
]

#: The bin edge at which J&W's fractions are read (Chapter 5).
_EDGE = 0.49

_BOTH_COLUMNS = ("jsd", "tvd", "adversary_jsd", "max_attention", "predicted")


def _check_both(both: pd.DataFrame) -> None:
    require_columns(both, _BOTH_COLUMNS, "both (Chapter 7's floor beside the adversary)")
    if len(both) == 0:
        raise ValueError("both has no rows")


def _beyond_floor(g: pd.DataFrame, eps: float) -> pd.Series:
    return pd.Series(
        {
            "n": int(len(g)),
            "median JSD, seeds": g.jsd.median(),
            "median JSD, adversary": g.adversary_jsd.median(),
            "adversary > seeds": np.mean(g.adversary_jsd > g.jsd),
            "JSD >= 0.49, seeds": np.mean(g.jsd >= _EDGE),
            "JSD >= 0.49, adversary": np.mean(g.adversary_jsd >= _EDGE),
            "seeds' TVD <= eps": np.mean(g.tvd <= eps),
        }
    )


def beyond_floor_table(both: pd.DataFrame, *, eps: float, classes: Sequence[str]) -> pd.DataFrame:
    """The floor against the adversary, one row per measure, one column per predicted class
    (``"negative (n=40)"``) and one for all sentences (``"all (n=90)"``); not rounded.

    both: the chapter's frame (module docstring); eps: the adversary's output budget (TVD);
    classes: the data set's class names, indexed by the predicted class.
    """
    _check_both(both)
    table = both.groupby("predicted").apply(lambda g: _beyond_floor(g, eps))
    table.loc["all"] = _beyond_floor(both, eps)
    table.index = [
        f"{classes[int(c)] if c != 'all' else c} (n={int(n)})"
        for c, n in zip(table.index, table["n"])
    ]
    return table.drop(columns="n").T


def _groups(both: pd.DataFrame) -> dict[str, pd.DataFrame]:
    return {
        "all": both,
        "neg": both[both.predicted == 0],
        "pos": both[both.predicted == 1],
    }


def floor(both: pd.DataFrame, *, eps: float, n_seeds: int) -> dict[str, Any]:
    """The floor's and the adversary's numbers, for all sentences and per predicted class, and
    the counts of sentences by the base's peak weight.

    both: the chapter's frame (module docstring); eps: the adversary's output budget (TVD);
    n_seeds: how many retrained seeds the floor is the median over.
    """
    _check_both(both)
    ln2 = float(np.log(2))
    out: dict[str, Any] = {}
    for key, g in _groups(both).items():
        out[f"ch07_n_{key}"] = int(len(g))
        out[f"ch07_floor_med_{key}"] = float(g.jsd.median())
        out[f"ch07_floor_049_{key}"] = float(np.mean(g.jsd >= _EDGE))
        out[f"ch07_adv_med_{key}"] = float(g.adversary_jsd.median())
        out[f"ch07_adv_049_{key}"] = float(np.mean(g.adversary_jsd >= _EDGE))
        out[f"ch07_beats_{key}"] = float(np.mean(g.adversary_jsd > g.jsd))
        out[f"ch07_tvd_eps_{key}"] = float(np.mean(g.tvd <= eps))
    out["ch07_floor_04_all"] = float(np.mean(both.jsd > 0.4))
    out["ch07_adv_04_all"] = float(np.mean(both.adversary_jsd > 0.4))
    out["ch07_floor_of_ln2"] = float(both.jsd.median() / ln2)
    out["ch07_eps"] = float(eps)
    out["ch07_n_seeds"] = int(n_seeds)
    out["ch07_med_peak"] = float(both.max_attention.median())
    out["ch07_n_top2"] = int((both.max_attention >= 0.5).sum())
    low = both[both.max_attention < 0.25]
    out["ch07_n_low"] = int(len(low))
    out["ch07_n_low_neg"] = int((low.predicted == 0).sum())
    out["ch07_n_low_pos"] = int((low.predicted == 1).sum())
    out["ch07_n_adv_zero"] = int((both.adversary_jsd <= 1e-9).sum())
    return out


def verdicts(both: pd.DataFrame, *, classes: Sequence[str]) -> dict[str, Any]:
    """The clauses that judge the adversary against the floor: by medians
    (``ch07_adv_further``), by class (``ch07_class_why``), where it found nothing within ε
    (``ch07_adv_zero_clause``) and overall (``ch07_verdict``).

    both: the chapter's frame (module docstring); classes: the class names, indexed by the
    predicted class (0 negative, 1 positive).
    """
    _check_both(both)
    ln2 = float(np.log(2))
    groups = _groups(both)
    n_zero = int((both.adversary_jsd <= 1e-9).sum())
    out: dict[str, Any] = {}
    adv_med, floor_med = both.adversary_jsd.median(), both.jsd.median()
    out["ch07_adv_further"] = (
        "goes further than retraining"
        if adv_med > floor_med
        else "does not go further than retraining"
    )
    f_neg, f_pos = groups["neg"].jsd.median(), groups["pos"].jsd.median()
    b_neg = np.mean(groups["neg"].adversary_jsd > groups["neg"].jsd)
    b_pos = np.mean(groups["pos"].adversary_jsd > groups["pos"].jsd)
    hi = classes[0] if f_neg > f_pos else classes[1]
    lo_beat = classes[0] if b_neg < b_pos else classes[1]
    split = uncertainty.compare(
        (groups["neg"].adversary_jsd > groups["neg"].jsd).to_numpy(float),
        (groups["pos"].adversary_jsd > groups["pos"].jsd).to_numpy(float),
        paired=False,
    )
    d = split.difference
    gap = d.signed_text(missing="too few sentences in a class for an interval")
    if not split.differs:
        why = (
            f"The adversary beats the floor about as often for sentences predicted "
            f"{classes[0]} ({b_neg:.3f}) as for those predicted {classes[1]} "
            f"({b_pos:.3f}): the gap ({gap}) is within noise, so this sample does not "
            "say that either class is harder for it."
        )
    elif hi == lo_beat:
        why = (
            f"The adversary beats the floor less often for sentences predicted {hi} "
            f"(a gap of {gap}, beyond noise), where the floor is higher"
        )
        why += (
            ": near ln 2 the adversary has little room left, since no JSD exceeds it."
            if max(f_neg, f_pos) > 0.7 * ln2
            else "."
        )
    else:
        why = (
            f"The floor is higher for sentences predicted {hi}, yet the adversary "
            f"beats it less often for those predicted {lo_beat} (a gap of {gap}, beyond "
            "noise): the height of the floor alone does not explain the difference "
            "between the classes."
        )
    out["ch07_class_why"] = why
    if n_zero:
        zero = (
            f"For {n_zero} of the {len(both)} sentences the adversary found no "
            "candidate within ε (JSD 0, as in Chapter 5): that is where its violins "
            "reach down to 0."
        )
    else:
        zero = "The adversary found a candidate within ε for every sentence."
    out["ch07_adv_zero_clause"] = zero
    share = float(np.mean(both.adversary_jsd > both.jsd))
    out["ch07_verdict"] = (
        "largely"
        if share >= 0.9
        else "only in part"
        if share >= 0.5
        else "for a minority of the sentences only"
    )
    return out


_LOW, _HIGH = "[0.25, 0.5)", "[0.75, 1]"


def _bin_move(g: pd.DataFrame) -> tuple[str, float, float, str] | None:
    """For one class's sentences: (falls / rises / does not change beyond noise, share in the
    low bin, share in the high bin, the change with its interval), or None when the class
    has no sentence in either bin. The change is judged by :func:`attnlib.uncertainty.compare`
    over the sentences of the two bins (two groups)."""
    beat = (g.adversary_jsd > g.jsd).to_numpy(float)
    bins = g["bin"].astype(str).to_numpy()
    low, high = beat[bins == _LOW], beat[bins == _HIGH]
    if not len(low) or not len(high):
        return None
    change = uncertainty.compare(high, low, paired=False)
    word = change.says("rises", "falls", "does not change beyond noise")
    return word, float(low.mean()), float(high.mean()), change.difference.signed_text(
        missing="too few sentences in a bin for an interval")


def bin_trends(by_bin: pd.DataFrame, *, classes: Sequence[str]) -> dict[str, Any]:
    """How the share *adversary > seeds* moves from the peak-weight bin [0.25, 0.5) to
    [0.75, 1], per predicted class (``ch07_trend_neg``, ``ch07_trend_pos``), and both in one
    clause (``ch07_trends``). A class's share "falls" or "rises" only when the interval of the
    change (the sentences of the two bins resampled as two groups) excludes 0; otherwise it
    "does not change beyond noise". The clause: "and it does for both classes, ..." when both
    fall beyond noise; "but it rises for both classes, ..." when both rise; "but for neither
    class does it change beyond noise: ..." when neither does; "but the classes differ: ..."
    otherwise.

    by_bin: the chapter's frame (module docstring) with a ``bin`` column, the peak-weight bin
    of each sentence; classes: the class names.
    """
    _check_both(by_bin)
    require_columns(by_bin, ["bin"], "by_bin")
    moves = [_bin_move(by_bin[by_bin.predicted == c]) for c in (0, 1)]
    out = {}
    for c, key in ((0, "ch07_trend_neg"), (1, "ch07_trend_pos")):
        who = f"sentences predicted {classes[c]}"
        m = moves[c]
        out[key] = (f"for {who} the table lacks {_LOW} or {_HIGH}" if m is None
                    else f"for {who} it {m[0]}, from {m[1]:.3f} in {_LOW} to {m[2]:.3f} in "
                         f"{_HIGH} (a change of {m[3]})")
    words = {m[0] if m else None for m in moves}
    if words == {"falls"} or words == {"rises"}:
        (word, lo0, hi0, ch0), (_, lo1, hi1, ch1) = moves
        out["ch07_trends"] = (
            f"{'and it does' if word == 'falls' else 'but it rises'} for both classes, between the "
            f"bins {_LOW} and {_HIGH}: from {lo0:.3f} to {hi0:.3f} for sentences predicted "
            f"{classes[0]} (a change of {ch0}) and from {lo1:.3f} to {hi1:.3f} for those "
            f"predicted {classes[1]} ({ch1})"
        )
    elif words == {"does not change beyond noise"}:
        out["ch07_trends"] = (f"but for neither class does it change beyond noise: "
                              f"{out['ch07_trend_neg']}; {out['ch07_trend_pos']}")
    else:
        out["ch07_trends"] = f"but the classes differ: {out['ch07_trend_neg']}; {out['ch07_trend_pos']}"
    return out


def _among_seeds(attention: Mapping[int, Sequence[np.ndarray]], others, indices) -> np.ndarray:
    """Per instance of ``indices``, the median JSD over the pairs of ``others``."""
    from attnlib.metrics import jsd as jsd_of

    pairs = [(a, b) for n, a in enumerate(others) for b in others[n + 1 :]]
    return np.median(
        [[float(jsd_of(attention[a][j], attention[b][j])) for j in indices] for a, b in pairs],
        axis=0,
    )


def seed_peaks(
    predictions: Mapping[int, Any],
    *,
    base_seed: int,
    indices: Sequence[int],
    floor_jsd: pd.Series,
) -> dict[str, Any]:
    """Where each model peaks, and the JSD among the retrained seeds themselves against the
    floor (``ch07_among_med``, ``ch07_odd_clause``).

    predictions: seed -> :class:`attnlib.train.Predictions` on the test split, the base's
    included (at least two retrained seeds besides it); base_seed: the base's seed;
    indices: the test positions of the adversary's sentences; floor_jsd: the floor on them
    (``both.jsd``).
    """
    from attnlib.metrics import attention_positions

    if base_seed not in predictions:
        raise ValueError(f"predictions has no entry for the base seed {base_seed}")
    others = [s for s in predictions if s != base_seed]
    if len(others) < 2:
        raise ValueError("the JSD among retrained seeds needs at least two of them")
    pos = {s: attention_positions(p.attention) for s, p in predictions.items()}
    out: dict[str, Any] = {
        "ch07_other_seeds": listed(map(str, others)),
        "ch07_base_first": pos[base_seed]["peak on first token"],
        "ch07_seeds_first": listed(f"{pos[s]['peak on first token']:.3f}" for s in others),
        "ch07_base_peakw": pos[base_seed]["mean peak weight"],
        "ch07_seeds_peakw": listed(f"{pos[s]['mean peak weight']:.3f}" for s in others),
    }
    att = {s: p.attention for s, p in predictions.items()}
    among = _among_seeds(att, others, indices)
    among_med, floor_med = float(np.median(among)), float(floor_jsd.median())
    out["ch07_among_med"] = among_med
    if among_med < 0.85 * floor_med:
        odd = (
            "lower than the floor: the retrained seeds agree with one another more "
            "than with the base, so the floor here measures in large part how far the "
            "base is from the others. That is a real effect of the seed (retraining can "
            "land on a model that attends somewhere else), but it means the floor "
            "depends on which model is the base"
        )
    else:
        odd = (
            "about as high as the floor or higher: the base is not the odd one out, and "
            "retraining itself moves this BiLSTM's attention that far, whichever "
            "model is the base"
        )
    out["ch07_odd_clause"] = odd
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
    """The heatmap's sentence in words: where each model peaks, whether a seed changes the
    decision (``ch07_example_seeds``), and the adversary's attention (``ch07_example_adv``).

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
