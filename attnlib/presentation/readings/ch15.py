"""Chapter 15 (which explanation should you trust?): what its prose reads off its results.

Every model family is trained with several seeds where the budget allows (the profile's
``verdict_seeds``; :meth:`attnlib.profiles.CapstoneSizes.seeds_of`), and every per-sentence
value comes stacked seeds x sentences. A mean carries its interval over seeds and sentences
(:func:`attnlib.uncertainty.over_seeds`), a comparison is
:func:`attnlib.uncertainty.compare_over_seeds` (it says in how many seeds it holds), and the
capstone table's ranks come from
:func:`attnlib.experiments.explanations.rank_columns_over_seeds`: one method beats another only
where the verdict over seeds and sentences says so, and they tie where the difference is within
noise or the seeds disagree. A family trained with one seed is read over its sentences alone,
and the prose says so.

One function per paragraph: the models' accuracy and whether they learned the synthetic rule
(:func:`accuracy_table`, :func:`learned_rule`, :func:`rule`), the hard slices of the synthetic
task (:func:`slices`), the capstone table's ranks (:func:`ranks`), the deceivers
(:func:`deceivers`) and the book's answer (:func:`verdict`); each returns ``{glued name:
value}``. :func:`capstone_table` builds the table a reader sees, marking with
:data:`LEFT_OUT_MARK` the cells the answer leaves out (:func:`left_out`).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from ... import uncertainty
from ...experiments import faithfulness
from ...experiments.explanations import METHODS
from .wording import listed, some_of

__all__ = [
    "SHORT",
    "YARDSTICKS",
    "LEFT_OUT_MARK",
    "accuracy_table",
    "learned_rule",
    "rule",
    "mean_over_seeds",
    "slices",
    "left_out",
    "capstone_table",
    "left_out_legend",
    "ranks",
    "deceivers",
    "verdict",
    "ig_steps",
    "synthetic_task",
    "epochs",
    "n_scored",
    "n_deceived",
]

#: The capstone table's columns, as its header (and the verdict) names them.
SHORT = {
    "AP, synthetic": "AP syn",
    "comprehensiveness AOPC, rt": "comp rt",
    "sufficiency AOPC, rt": "suff rt",
    "comprehensiveness AOPC, synthetic": "comp syn",
    "sufficiency AOPC, synthetic": "suff syn",
    "fraction removed to flip, rt": "S&S rt",
}

#: The capstone table's columns as a sentence names them.
YARDSTICKS = {
    "AP, synthetic": "plausibility on the synthetic task",
    "comprehensiveness AOPC, rt": "comprehensiveness on rt-polarity",
    "sufficiency AOPC, rt": "sufficiency on rt-polarity",
    "comprehensiveness AOPC, synthetic": "comprehensiveness on the synthetic task",
    "sufficiency AOPC, synthetic": "sufficiency on the synthetic task",
    "fraction removed to flip, rt": "S&S's decision flips on rt-polarity",
}

#: The mark of a capstone cell that the book's answer leaves out (:func:`left_out`).
LEFT_OUT_MARK = "†"

_NEGATED = "with a negated marker"
_PLAUSIBILITY = "AP, synthetic"
#: Why a column leaves the answer (:func:`left_out`).
_ONLY_RANDOM = "it ranks attention against a random order only"
_UNLEARNED = "the model did not learn the rule"


def _need(frame, labels, what: str, axis: str = "index") -> None:
    have = getattr(frame, axis)
    missing = [label for label in labels if label not in have]
    if missing:
        raise ValueError(f"{what} has no {axis} entry {missing}")


def _model_name(family: str) -> str:
    return "the Average model" if family.lower() == "average" else f"the {family}"


def _held(change: uncertainty.SeedComparison) -> str:
    """:meth:`~attnlib.uncertainty.SeedComparison.seeds_text`, with "in none of 3 seeds alone"
    said in full: "beyond noise in none of the 3 seeds alone"."""
    text = change.seeds_text()
    return "beyond noise " + text.replace("in none of ", "in none of the ") if text.startswith("in none of") else text


def _rows(values, what: str) -> np.ndarray:
    """(S, n) float: one row per seed (a 1-D array is one model)."""
    array = np.asarray(values, dtype=np.float64)
    if array.ndim == 1:
        array = array[None]
    if array.ndim != 2:
        raise ValueError(f"{what} must be (seeds, sentences), got shape {array.shape}")
    return array


# ----------------------------------------------------------------------------- the models and the rule
def accuracy_table(correct: dict, negated) -> pd.DataFrame:
    """Test accuracy per (task, model), the mean over its seeds; on the synthetic task also on the
    sentences with a negated marker and on the others.

    ``correct``: (task, family) -> (S, n) whether each seed's model got each test sentence right
    (``SeedSet.predicted(split) == split.labels``); ``negated``: (n,) bool over the synthetic test
    sentences. Columns ``seeds``, ``test accuracy``, ``with a negated marker``, ``without``.
    """
    negated = np.asarray(negated, dtype=bool)
    rows = {}
    for (task, family), right in correct.items():
        right = _rows(right, f"correct[{task!r}, {family!r}]")
        row = {"seeds": right.shape[0], "test accuracy": float(right.mean())}
        if task == "synthetic":
            if right.shape[1] != len(negated):
                raise ValueError(f"negated has {len(negated)} sentences, the synthetic test split {right.shape[1]}")
            row[_NEGATED] = float(right[:, negated].mean())
            row["without"] = float(right[:, ~negated].mean())
        rows[(task, family)] = row
    return pd.DataFrame(rows).T.rename_axis(["task", "model"])


class Rule(NamedTuple):
    """Whether a model learned the synthetic rule: its accuracy on the sentences with a negated
    marker (over seeds and sentences) against the best a model that ignores the words gets there
    (the majority label's share of those sentences)."""

    accuracy: uncertainty.Interval
    floor: float

    @property
    def learned(self) -> bool:
        return bool(self.accuracy.low > self.floor)


def learned_rule(correct: dict, negated, labels, *, seed: int = 0) -> dict[str, Rule]:
    """family -> :class:`Rule`, from ``correct[("synthetic", family)]`` (S, n) on the synthetic test
    split, ``negated`` (n,) bool and the split's ``labels`` (n,). A model learned the rule when
    its accuracy on the sentences with a negated marker lies above the majority label's share of
    them, beyond noise over seeds and sentences: the floor any rule that ignores the words
    reaches, not a number of our choosing."""
    negated, labels = np.asarray(negated, dtype=bool), np.asarray(labels)
    if not negated.any():
        raise ValueError("no sentence has a negated marker")
    share = float(np.mean(labels[negated] == 1))
    floor = max(share, 1 - share)
    out = {}
    for (task, family), right in correct.items():
        if task == "synthetic":
            right = _rows(right, f"correct[{task!r}, {family!r}]")
            out[family] = Rule(uncertainty.over_seeds(right[:, negated].astype(float), seed=seed), floor)
    if not out:
        raise ValueError("correct has no synthetic-task model")
    return out


def _seeds_said(n: int) -> str:
    return "one model" if n == 1 else f"{n} seeds"


def rule(learned: dict, accuracy: pd.DataFrame) -> dict[str, Any]:
    """The paragraph on negation: each model's accuracy with and without a negated marker, and
    which learned the rule (:func:`learned_rule`). ``accuracy``: :func:`accuracy_table`."""
    _need(accuracy, [_NEGATED, "without", "seeds"], "accuracy", "columns")
    out: dict[str, Any] = {}
    short = {"BiLSTM": "lstm", "Average": "avg", "transformer": "tf"}
    for family, r in learned.items():
        key = short.get(family, family.lower())
        row = accuracy.loc[("synthetic", family)]
        out[f"ch15_{key}_negated"] = r.accuracy.estimate
        out[f"ch15_{key}_negated_ci"] = r.accuracy.range_text(3)
        out[f"ch15_{key}_plain"] = float(row["without"])
        out[f"ch15_{key}_seeds"] = _seeds_said(int(row["seeds"]))
    out["ch15_rule_floor"] = next(iter(learned.values())).floor
    who = [f for f, r in learned.items() if r.learned]
    out["ch15_learned"] = (
        "none of the models gets them right more often than that, beyond noise" if not who else
        f"only {listed(_model_name(f) for f in who)} {'gets' if len(who) == 1 else 'get'} them right more "
        "often than that, beyond noise" if len(who) < len(learned) else
        "every model gets them right more often than that, beyond noise"
    )
    return out


def mean_over_seeds(frames) -> pd.DataFrame:
    """The element-wise mean of one numeric table per seed (the same index and columns), e.g.
    :func:`attnlib.explanations.plausibility` of every seed's model."""
    frames = list(frames)
    if not frames:
        raise ValueError("frames must hold one table per seed")
    return sum(frames[1:], frames[0]) / len(frames)


# ----------------------------------------------------------------------------- slices
def slices(found: pd.DataFrame, plausible: pd.DataFrame, transformer, split, bands, names) -> dict[str, Any]:
    """Reads the two hard slices: the negators the BiLSTM's methods find, and flow by sentence length.

    found: method x model share of the negators in the top k (column "BiLSTM";
    :func:`attnlib.experiments.explanations.negators_found` per model, with "random (expected)"),
    the mean over seeds. plausible: (model, method) x plausibility metric (the mean over seeds of
    :func:`~attnlib.experiments.explanations.plausibility`). transformer: the transformer's
    ExplanationResult on ``split`` (with "flow"), or one per seed. split: the synthetic test Split
    (its rationales). bands, names: the length bins and their labels (``pd.cut``). Flow's
    average precision by length band, how many words tie at flow's top value there
    (``ch15_flow_tied_short`` / ``_long``) and its average precision with the ties broken for
    the rationale (``ch15_flow_favour``, :func:`attnlib.faithfulness.rationale_ties`) are means
    over the transformer's seeds.
    """
    _need(found, ["BiLSTM"], "found", "columns")
    _need(found, ["attention", "leave-one-out", "integrated gradients", "random (expected)"], "found")
    out = {
        "ch15_neg_lstm_att": float(found.loc["attention", "BiLSTM"]),
        "ch15_neg_lstm_loo": float(found.loc["leave-one-out", "BiLSTM"]),
        "ch15_neg_lstm_ig": float(found.loc["integrated gradients", "BiLSTM"]),
        "ch15_neg_random": float(found.loc["random (expected)", "BiLSTM"]),
    }
    results = list(transformer) if isinstance(transformer, (list, tuple)) else [transformer]
    if any("flow" not in r.scores for r in results):
        raise ValueError("transformer must be the transformer's ExplanationResult (it has no flow scores)")
    by_band, tied, favour = [], [], []
    for r in results:
        truth = [split.rationales[i] for i in r.indices]
        ties = faithfulness.rationale_ties(r.scores["flow"], truth)
        band = pd.cut(r.lengths, bands, labels=names)
        by_band.append(ties["average precision"].groupby(band, observed=True).mean())
        tied.append((ties["share tied at the top"] * ties["n_tokens"]).groupby(band, observed=True).mean())
        favour.append(float(ties["AP, ties to the rationale"].mean()))
    flow_by_band, tied_by_band = mean_over_seeds(by_band), mean_over_seeds(tied)
    out["ch15_flow_short"] = float(flow_by_band.iloc[0])
    out["ch15_flow_long"] = float(flow_by_band.iloc[-1])
    out["ch15_band_short"] = str(flow_by_band.index[0])
    out["ch15_band_long"] = str(flow_by_band.index[-1])
    out["ch15_flow_tied_short"] = float(tied_by_band.iloc[0])
    out["ch15_flow_tied_long"] = float(tied_by_band.iloc[-1])
    out["ch15_flow_favour"] = float(np.mean(favour))
    out["ch15_gxi_tf"] = float(plausible.loc[("transformer", "gradient × input"), "average precision"])
    return out


# ----------------------------------------------------------------------------- the capstone table
def _compares_methods(table, column: str) -> bool:
    """Whether a column ranks two or more explanations (S&S's has attention and random alone)."""
    return int(table.ranks[column].drop("random", errors="ignore").notna().sum()) > 1


def left_out(ranked: dict, learned: dict) -> dict[str, dict[str, str]]:
    """model -> {column: why the book's answer leaves it out}: a column that ranks attention against
    a random order only (Serrano & Smith's), and the plausibility column of a model that did not
    learn the synthetic rule (:func:`learned_rule`). The table marks those cells with
    :data:`LEFT_OUT_MARK`, and :func:`verdict` reads the other columns."""
    out = {}
    for family, table in ranked.items():
        reasons = {c: _ONLY_RANDOM for c in table.ranks.columns
                   if table.ranks[c].notna().any() and not _compares_methods(table, c)}
        if family in learned and not learned[family].learned and _PLAUSIBILITY in table.ranks.columns:
            reasons[_PLAUSIBILITY] = _UNLEARNED
        out[family] = reasons
    return out


def capstone_table(ranked: dict, higher: dict, methods=METHODS, left: dict | None = None) -> pd.DataFrame:
    """The capstone table a reader sees: (model, method) x yardstick, "mean (rank)" or "n/a", and
    :data:`LEFT_OUT_MARK` after a cell of a column the answer leaves out for that model.

    ranked: model -> :class:`attnlib.uncertainty.RankedTable` (columns named as :data:`SHORT`'s
    keys). higher: column -> whether higher is better (the header's arrow). methods: the row
    order. left: :func:`left_out`'s model -> {column: reason} (None: nothing marked).
    """
    if not ranked:
        raise ValueError("ranked must map at least one model to its RankedTable")
    blocks = {}
    for family, table in ranked.items():
        cells = table.cells().reindex(methods)
        for column in (left or {}).get(family, {}):
            marked = cells[column].notna() & (cells[column] != "n/a")
            cells.loc[marked, column] = cells.loc[marked, column] + LEFT_OUT_MARK
        blocks[family] = cells
    cells = pd.concat(blocks, names=["model", "method"]).fillna("n/a")
    unknown = [c for c in cells.columns if c not in SHORT or c not in higher]
    if unknown:
        raise ValueError(f"no short name or direction for column(s) {unknown}")
    cells.columns = [f"{SHORT[c]} {'↑' if higher[c] else '↓'}" for c in cells.columns]
    return cells


def left_out_legend(left: dict) -> str:
    """The table's note on its marked cells, one clause per reason: "† left out of the book's
    answer: S&S rt (it ranks attention against a random order only); AP syn of the Average model
    and the transformer (the model did not learn the rule)"."""
    by_reason: dict[str, dict[str, list]] = {}
    for family, reasons in left.items():
        for column, why in reasons.items():
            by_reason.setdefault(why, {}).setdefault(column, []).append(family)
    if not by_reason:
        return "No cell is left out of the book's answer."
    clauses = []
    for why, columns in by_reason.items():
        for column, families in columns.items():
            whose = "" if len(families) == len(left) else " of " + listed(_model_name(f) for f in families)
            reason = "they did not learn the rule" if why == _UNLEARNED and len(families) > 1 else why
            clauses.append(f"{SHORT[column]}{whose} ({reason})")
    return f"{LEFT_OUT_MARK} left out of the book's answer: " + "; ".join(clauses) + "."


def _rank_text(table, column: str) -> str:
    return f"{int(table.ranks.at['attention', column])}" + ("=" if table.tied.at["attention", column] else "")


def _place(rank_text: str) -> str:
    """A rank as a sentence says it: "4" -> "4th", "2=" -> "joint 2nd"."""
    joint = rank_text.endswith("=")
    k = int(rank_text.rstrip("="))
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return ("joint " if joint else "") + f"{k}{suffix}"


def _places(ranks: list[str], n_methods: int) -> str:
    """Attention's places in the three columns: "4th of 5 in all three columns", or "joint 1st,
    3rd and 3rd of 5 in these three columns"."""
    if len(set(ranks)) == 1:
        return f"{_place(ranks[0])} of {n_methods} in all three columns"
    return f"{listed(_place(r) for r in ranks)} of {n_methods} in these three columns"


def ranks(ranked: dict, columns: dict, n_methods: dict, *, seed: int = 0) -> dict[str, Any]:
    """Reads the capstone table: per model, the best methods and attention's rank per column,
    and ERASER's two directions (gradient x input against attention, over seeds and sentences).

    ranked: model -> RankedTable. columns: model -> {column: {method: (S, n) per-sentence
    values}} (what was ranked). n_methods: model -> how many methods apply to it.
    """
    out: dict[str, Any] = {}
    for family in ranked:
        key, table = family.lower(), ranked[family]
        out[f"ch15_{key}_n_methods"] = n_methods[family]
        for column, short in (
            ("AP, synthetic", "ap"),
            ("comprehensiveness AOPC, rt", "comp"),
            ("sufficiency AOPC, rt", "suff"),
        ):
            first = table.best(column, exclude=["random"])
            out[f"ch15_{key}_{short}_best"] = listed(first) + (
                " (tied within noise)" if len(first) > 1 else ""
            )
            out[f"ch15_{key}_att_{short}_rank"] = _rank_text(table, column)
        name = _model_name(family)
        out[f"ch15_{key}_summary"] = (
            f"For {name}, the most plausible ranking against the truth is {out[f'ch15_{key}_ap_best']}; "
            f"the most comprehensive on rt-polarity, {out[f'ch15_{key}_comp_best']}; the most sufficient, "
            f"{out[f'ch15_{key}_suff_best']}. Attention comes "
            + _places([out[f"ch15_{key}_att_{c}_rank"] for c in ("ap", "comp", "suff")], n_methods[family])
            + "."
        )
        # ERASER's two directions, paired by model and sentence
        comp = uncertainty.compare_over_seeds(_rows(columns[family]["comprehensiveness AOPC, rt"]["gradient × input"],
                                                    "comp"),
                                              _rows(columns[family]["comprehensiveness AOPC, rt"]["attention"], "comp"),
                                              seed=seed)
        ap = uncertainty.compare_over_seeds(_rows(columns[family]["AP, synthetic"]["attention"], "ap"),
                                            _rows(columns[family]["AP, synthetic"]["gradient × input"], "ap"),
                                            seed=seed)
        out[f"ch15_{key}_eraser_comp"] = comp.says(
            "more comprehensive than", "less comprehensive than", "as comprehensive as, within noise,",
            "more or less comprehensive, depending on the seed, than")
        out[f"ch15_{key}_eraser_ap"] = ap.says(
            "more plausible than", "less plausible than", "as plausible as, within noise,",
            "more or less plausible, depending on the seed, than")
        out[f"ch15_{key}_eraser_comp_seeds"] = _held(comp)
        out[f"ch15_{key}_eraser_ap_seeds"] = _held(ap)
    return out


# ----------------------------------------------------------------------------- the deceivers
def _fooled(family: str, row: pd.Series, vs_random: dict, chance: uncertainty.Interval) -> str:
    finders = [
        f"{m} ({row[m]:.3f})"
        for m in ("leave-one-out", "integrated gradients")
        if vs_random[m].verdict == "higher"
    ]
    hidden = vs_random["attention"].verdict == "lower"
    at_chance = (f" (95% interval {chance.range_text(3)}: no better than a coin, so there is little left to hide)"
                 if chance.low <= 0.5 else "")
    return (
        f"the {family} keeps a test accuracy of {row['accuracy']:.3f}{at_chance} and "
        "its attention "
        f"{'moves off them' if hidden else 'does not move below chance'} "
        f"({row['attention']:.3f}, against {row['random']:.3f} for a random "
        "ranking), while "
        + (
            " and ".join(finders)
            + " still put more on them than a random ranking, beyond "
            "noise: the model uses words its attention hides"
            if finders and hidden
            else (
                " and ".join(finders)
                + " put more on them than a random ranking, beyond noise"
                if finders
                else f"leave-one-out ({row['leave-one-out']:.3f}) and integrated "
                "gradients "
                f"({row['integrated gradients']:.3f}) are within noise of, or "
                "below, a random "
                "ranking's share: no method finds the words"
            )
        )
    )


def deceivers(per_sentence_mass: dict, fooled: pd.DataFrame, top_lambda: float, n_test: dict) -> dict[str, Any]:
    """Reads the deceivers: each model at the largest penalty judged against a random ranking's
    share of the impermissible words, sentence by sentence (one trained model per family and
    penalty), and attention's share at λ = 0.

    per_sentence_mass: (model, "λ = <lam>") -> {method: per-sentence share on the impermissible
    words}. fooled: (model, penalty) x ["accuracy", methods...], the means. top_lambda: the
    largest penalty (a number). n_test: model -> its test sentences (for the accuracy's Wilson
    interval: a model whose interval reaches one half is no better than a coin). The models are
    those of ``fooled``'s index, in order.
    """
    _need(fooled, ["accuracy", "attention", "random", "leave-one-out", "integrated gradients"], "fooled", "columns")
    top_lam = f"λ = {top_lambda:g}"
    out: dict[str, Any] = {}
    for family in dict.fromkeys(fooled.index.get_level_values(0)):
        if (family, top_lam) not in per_sentence_mass:
            raise ValueError(f"per_sentence_mass has no entry ({family!r}, {top_lam!r})")
        if family not in n_test:
            raise ValueError(f"n_test has no test size for {family!r}")
        share, row = per_sentence_mass[(family, top_lam)], fooled.loc[(family, top_lam)]
        vs_random = {
            m: uncertainty.compare(share[m], share["random"], paired=True)
            for m in ("attention", "leave-one-out", "integrated gradients")
        }
        n = int(n_test[family])
        chance = uncertainty.proportion(int(round(row["accuracy"] * n)), n)
        out[f"ch15_fool_{family.lower()}"] = _fooled(family, row, vs_random, chance)
        out[f"ch15_fool_{family.lower()}_att_0"] = float(fooled.loc[(family, "λ = 0"), "attention"])
    out["ch15_top_lambda"] = top_lam
    return out


# ----------------------------------------------------------------------------- the book's answer
def _verdict(first: list, beaten: list, yardsticks: list, dropped: dict) -> str:
    n = len(yardsticks)
    if not n:
        return "no yardstick compares attention with other methods"
    if first:
        text = (f"attention ranks first, alone or tied, on "
                f"{some_of(len(first), n, 'yardsticks')} ({listed(YARDSTICKS[c] for c in first)})")
    else:
        text = f"attention ranks first on none of its {n} yardsticks"
    if beaten:
        text += ", and other methods beat it over seeds and sentences on " + (
            ("both" if n == 2 else "every one") if len(beaten) == n else listed(YARDSTICKS[c] for c in beaten))
    return text


class _Reading(NamedTuple):
    """One model's verdict, as :func:`verdict` found it."""

    first: list  # the yardsticks where attention ranks first
    beaten: list  # those where other methods beat it
    yardsticks: list
    dropped: dict  # column -> why it is left out
    text: str  # the verdict in words


def _left_out_sentence(rows: dict, learned: dict, ranked: dict) -> str:
    """Which marked cells the answer leaves out, and why, in one or two sentences."""
    parts = []
    unlearned = [f for f, r in rows.items() if _PLAUSIBILITY in r.dropped and r.dropped[_PLAUSIBILITY] == _UNLEARNED]
    if unlearned:
        names = listed(_model_name(f) for f in unlearned)
        scores = listed(f"{learned[f].accuracy.estimate:.3f}" for f in unlearned)
        who = ("it did not learn" if len(unlearned) == 1 else "neither learned" if len(unlearned) == 2
               else "none of them learned")
        parts.append(f"The plausibility of {names} is left out, since {who} the rule "
                     f"({scores} on sentences with a negated marker)")
    random_only = [f for f, r in rows.items() if _ONLY_RANDOM in r.dropped.values()]
    if random_only:
        columns = sorted({c for f in random_only for c, why in rows[f].dropped.items() if why == _ONLY_RANDOM})
        first = [f for f in random_only if all(ranked[f].ranks.at["attention", c] == 1 for c in columns
                                               if c in rows[f].dropped)]
        where = ("; attention ranks first there" + ("" if len(first) == len(random_only) else
                                                     f" for {listed(_model_name(f) for f in first)}")
                 if first else "; attention does not rank first there")
        parts.append(f"{listed(SHORT[c] for c in columns)} is left out for "
                     f"{listed(_model_name(f) for f in random_only)}, since {_ONLY_RANDOM}{where}")
    if not parts:
        return ""
    return " " + "; ".join(parts) + f" (the cells marked {LEFT_OUT_MARK})."


def _answer(rows: dict, learned: dict, basis: str, ranked: dict) -> str:
    """The book's answer: when attention is first nowhere and beaten everywhere for every model,
    that is said once; otherwise model by model. Then what is left out, and on how many models
    it rests."""
    never = [f for f, r in rows.items() if r.yardsticks and not r.first and len(r.beaten) == len(r.yardsticks)]
    if len(rows) < 2 or len(never) < len(rows):
        clauses = [f"for {_model_name(f)}, {r.text}" for f, r in rows.items()]
        text = "F" + "; ".join(clauses)[1:] + "."
    else:
        every = {2: "both models", 3: "all three models"}.get(len(rows), f"all {len(rows)} models")
        counts = listed(f"{len(r.yardsticks)} for {_model_name(f)}" for f, r in rows.items())
        text = (f"For {every}, attention ranks first on none of the yardsticks that compare methods "
                f"({counts}), and other methods beat it over seeds and sentences on every one.")
    return text + _left_out_sentence(rows, learned, ranked) + (f" {basis}" if basis else "")


def _basis(n_seeds: dict) -> str:
    """On how many trained models each family's verdict rests, in a sentence."""
    groups: dict[int, list] = {}
    for family, n in n_seeds.items():
        groups.setdefault(int(n), []).append(family)
    if len(groups) == 1 and next(iter(groups)) > 1:
        return f"Every verdict holds over {next(iter(groups))} training seeds of each model."
    parts = []
    for n, families in sorted(groups.items(), reverse=True):
        names = listed(_model_name(f) for f in families)
        parts.append(f"those on {names} hold over {n} training seeds each" if n > 1 else
                     f"those on {names} rest on one trained model per task, read over the sentences alone")
    text = "; ".join(parts)
    return "The verdicts on" + text[len("those on"):] + "."


def verdict(ranked: dict, learned: dict, n_seeds: dict) -> dict[str, Any]:
    """Reads the book's answer: per model, on how many yardsticks attention ranks first, and
    which methods (if any) rank first in every column the answer reads. ``ch15_answer`` says it
    in one go (a verdict shared by every model is said once), then which cells it leaves out and
    on how many trained models each model's verdict rests.

    ranked: model -> RankedTable (ranks over seeds and sentences). learned: model -> :class:`Rule`
    (:func:`learned_rule`); a model that did not learn the rule leaves its "AP, synthetic" column
    out. n_seeds: model -> its training seeds. The columns left out are :func:`left_out`'s, the
    cells the table marks.
    """
    missing = [f for f in ranked if f not in learned or f not in n_seeds]
    if missing:
        raise ValueError(f"learned and n_seeds need every model of ranked; missing {missing}")
    dropped = left_out(ranked, learned)
    out: dict[str, Any] = {}
    winners = []
    rows = {}
    for family in ranked:
        table = ranked[family]
        yardsticks = [c for c in table.ranks.columns if table.ranks[c].notna().any() and c not in dropped[family]]
        firsts = [
            m
            for m in table.ranks.index
            if m != "random"
            and all(table.ranks.at[m, c] == 1 for c in yardsticks if np.isfinite(table.ranks.at[m, c]))
        ]
        winners += [
            f"{m} ({_model_name(family)})"
            for m in firsts
            if all(np.isfinite(table.ranks.at[m, c]) for c in yardsticks)
        ]
        first = [c for c in yardsticks if table.ranks.at["attention", c] == 1]
        beaten = [c for c in yardsticks if table.ranks.at["attention", c] > 1]
        text = _verdict(first, beaten, yardsticks, dropped[family])
        out[f"ch15_{family.lower()}_verdict"] = text
        rows[family] = _Reading(first, beaten, yardsticks, dropped[family], text)
    basis = _basis(n_seeds)
    out["ch15_basis"] = basis
    unlearned = [f for f, r in rows.items() if r.dropped.get(_PLAUSIBILITY) == _UNLEARNED]
    verb = {1: "which did not learn the rule", 2: "neither of which learned the rule"}.get(
        len(unlearned), "none of which learned the rule")
    out["ch15_unlearned_note"] = (f"; the answer leaves out the plausibility of "
                                  f"{listed(_model_name(f) for f in unlearned)}, {verb}" if unlearned else "")
    out["ch15_answer"] = _answer(rows, learned, basis, ranked)
    out["ch15_sweep"] = (
        "no method ranks first (alone or tied) in every column the answer reads, for any model"
        if not winners
        else "only "
        + listed(winners)
        + (" rank" if len(winners) > 1 else " ranks")
        + " first (alone or tied) in every column the answer reads"
    )
    return out


def ig_steps(steps: int) -> dict[str, Any]:
    """Integrated gradients' steps."""
    return {"ch15_ig_steps": steps}


def synthetic_task(settings: Mapping) -> dict[str, Any]:
    """The synthetic task's sentence lengths and its share of negated sentences (``settings``)."""
    return {"ch15_syn_lengths": f"{settings['min_len']}–{settings['max_len']}",
            "ch15_negation_pct": f"{settings['negation']:.0%}"}


def epochs(transformer_epochs: int) -> dict[str, Any]:
    """The transformers' epochs."""
    return {"ch15_tf_epochs": transformer_epochs}


def n_scored(n: int) -> dict[str, Any]:
    """The test sentences every method is scored on."""
    return {"ch15_n": int(n)}


def n_deceived(n: int) -> dict[str, Any]:
    """The sentences the deceivers' explanations are read on."""
    return {"ch15_n_dec": int(n)}
