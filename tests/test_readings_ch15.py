"""attnlib.presentation.readings.ch15: Chapter 15's readings on small hand-made results, over seeds."""
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib import uncertainty
from attnlib.data import Split
from attnlib.experiments.explanations import ExplanationResult
from attnlib.presentation.readings import ch15
from attnlib.presentation.readings.wording import some_of
from attnlib.uncertainty import RankedTable

RNG = np.random.default_rng(0)
NOISE = RNG.normal(0, 0.01, (3, 40))  # three seeds' models, 40 sentences


# ----------------------------------------------------------------------------- the models and the rule
def _correct(rates: dict, n=200, seeds=3, negated_rate=None, seed=0):
    """(task, family) -> (seeds, n) right/wrong at the given rate (on the negated sentences at
    ``negated_rate[family]``); the first half of the sentences have a negated marker."""
    rng = np.random.default_rng(seed)
    negated = np.arange(n) < n // 2
    out = {}
    for (task, family), rate in rates.items():
        p = np.where(negated, (negated_rate or {}).get(family, rate), rate) if task == "synthetic" else rate
        out[(task, family)] = rng.random((seeds, n)) < p
    return out, negated


def test_accuracy_table_means_over_seeds_with_and_without_negation():
    correct, negated = _correct({("rt-polarity", "BiLSTM"): 0.8, ("synthetic", "BiLSTM"): 0.95,
                                 ("synthetic", "Average"): 0.75}, negated_rate={"Average": 0.5})
    table = ch15.accuracy_table(correct, negated)
    assert list(table.columns) == ["seeds", "test accuracy", "with a negated marker", "without"]
    assert table.loc[("synthetic", "Average"), "with a negated marker"] == pytest.approx(
        correct[("synthetic", "Average")][:, negated].mean())
    assert np.isnan(table.loc[("rt-polarity", "BiLSTM"), "without"])
    assert table.loc[("rt-polarity", "BiLSTM"), "seeds"] == 3
    with pytest.raises(ValueError, match="negated has"):
        ch15.accuracy_table(correct, negated[:10])


def test_learned_rule_is_above_the_majority_share_beyond_noise():
    correct, negated = _correct({("synthetic", "BiLSTM"): 0.97, ("synthetic", "Average"): 0.9,
                                 ("synthetic", "transformer"): 0.9},
                                negated_rate={"Average": 0.5, "transformer": 0.53})
    labels = np.tile([0, 1], 100)
    learned = ch15.learned_rule(correct, negated, labels)
    assert learned["BiLSTM"].learned and learned["BiLSTM"].floor == 0.5
    assert not learned["Average"].learned and not learned["transformer"].learned  # within noise of 0.5
    out = ch15.rule(learned, ch15.accuracy_table(correct, negated))
    assert out["ch15_learned"] == "only the BiLSTM gets them right more often than that, beyond noise"
    assert out["ch15_avg_seeds"] == "3 seeds" and out["ch15_rule_floor"] == 0.5
    assert out["ch15_tf_negated_ci"] == learned["transformer"].accuracy.range_text(3)
    # one seed of three above the floor: not learned
    one = {("synthetic", "BiLSTM"): np.vstack([np.ones(200, bool), correct[("synthetic", "Average")][1:]])}
    assert not ch15.learned_rule(one, negated, labels)["BiLSTM"].learned
    # the floor is the majority label's share of the negated sentences
    skewed = np.where(negated, np.arange(200) % 4 != 0, 0)  # 75% positive among them
    assert ch15.learned_rule(correct, negated, skewed)["BiLSTM"].floor == pytest.approx(0.75)
    with pytest.raises(ValueError, match="synthetic"):
        ch15.learned_rule({("rt-polarity", "BiLSTM"): correct[("synthetic", "BiLSTM")]}, negated, labels)


# ----------------------------------------------------------------------------- slices
def _split_and_transformer(shift=0.0):
    tokens = [["w"] * 12, ["w"] * 14, ["w"] * 30, ["w"] * 35]
    rationales = [np.arange(len(t)) < 2 for t in tokens]
    split = Split("test", [" ".join(t) for t in tokens], tokens,
                  [np.zeros(len(t) + 2, np.int64) for t in tokens], np.zeros(4, np.int64), rationales)
    # flow finds the rationale in the short sentences (tied with two other words), puts it last in the long ones
    flow = []
    for r in rationales:
        f = np.where(r, 1.0, 0.5) if len(r) < 20 else np.where(r, 0.0, 0.5)
        if len(r) < 20:
            f[2:4] = 1.0
        flow.append(f + shift)
    n = len(tokens)
    result = ExplanationResult(
        probs=np.full((n, 2), 0.5), predicted=np.zeros(n, int), labels=np.zeros(n, int),
        indices=np.arange(n), lengths=np.array([len(t) for t in tokens]), methods=("flow",),
        scores={"flow": flow}, ig_delta=np.full(n, np.nan))
    return split, result


def test_slices_reads_the_negators_and_flow_by_length_and_its_ties():
    split, transformer = _split_and_transformer()
    found = pd.DataFrame({"BiLSTM": [0.1, 0.8, 0.7, 0.25], "Average": [0.0, 0.0, 0.0, 0.2]},
                         index=["attention", "leave-one-out", "integrated gradients", "random (expected)"])
    plausible = pd.DataFrame({"average precision": [0.5, 0.625]},
                             index=pd.MultiIndex.from_tuples([("transformer", "attention"),
                                                              ("transformer", "gradient × input")]))
    out = ch15.slices(found, plausible, transformer, split, [9, 25, 40], ["10–25", "26–40"])
    assert out["ch15_neg_lstm_att"] == 0.1 and out["ch15_neg_lstm_loo"] == 0.8
    assert out["ch15_neg_lstm_ig"] == 0.7 and out["ch15_neg_random"] == 0.25
    assert out["ch15_flow_short"] == pytest.approx(0.5) and out["ch15_flow_long"] < 0.2  # 2 of 4 tied
    assert (out["ch15_band_short"], out["ch15_band_long"]) == ("10–25", "26–40")
    assert out["ch15_flow_tied_short"] == 4.0  # the 2 markers and 2 others share the top
    assert out["ch15_flow_tied_long"] == pytest.approx((28 + 33) / 2)  # every other word ties at 0.5
    assert out["ch15_gxi_tf"] == 0.625
    assert all(type(out[k]) is float for k in out if not k.startswith("ch15_band"))
    # over seeds: one result per seed, the means of their values
    both = ch15.slices(found, plausible, [transformer, transformer], split, [9, 25, 40], ["10–25", "26–40"])
    assert both["ch15_flow_short"] == out["ch15_flow_short"]
    assert both["ch15_flow_favour"] == out["ch15_flow_favour"]
    with pytest.raises(ValueError, match="BiLSTM"):
        ch15.slices(found.drop(columns="BiLSTM"), plausible, transformer, split, [9, 25, 40], ["a", "b"])


def test_mean_over_seeds_of_tables():
    a = pd.DataFrame({"x": [1.0, 2.0]}, index=["m", "n"])
    assert ch15.mean_over_seeds([a, a * 3])["x"].tolist() == [2.0, 4.0]
    assert ch15.mean_over_seeds(iter([a]))["x"].tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match="one table per seed"):
        ch15.mean_over_seeds([])


# ----------------------------------------------------------------------------- capstone table and ranks
COLUMNS = ["AP, synthetic", "comprehensiveness AOPC, rt", "sufficiency AOPC, rt", "fraction removed to flip, rt"]
HIGHER = {"AP, synthetic": True, "comprehensiveness AOPC, rt": True, "sufficiency AOPC, rt": False,
          "fraction removed to flip, rt": False}


def _table(ranks: dict, tied: dict | None = None, means: dict | None = None) -> RankedTable:
    """RankedTable from {method: [rank per column]} (NaN: the method has no value)."""
    frame = pd.DataFrame(ranks, index=COLUMNS, dtype=float).T
    frame.index.name = "method"
    tied_frame = pd.DataFrame(tied or {m: [False] * 4 for m in ranks}, index=COLUMNS).T.reindex(frame.index)
    mean_frame = pd.DataFrame(means, index=COLUMNS, dtype=float).T if means else frame / 10
    return RankedTable(mean_frame, frame, tied_frame, dict(HIGHER))


def _rule(negated: float, floor: float = 0.5) -> ch15.Rule:
    """A Rule whose accuracy on negated sentences is ``negated`` with a narrow interval."""
    return ch15.Rule(uncertainty.Interval(negated, negated - 0.02, negated + 0.02, 100), floor)


def test_capstone_table_cells_header_and_the_marked_cells():
    nan = np.nan
    table = _table({"attention": [2, 1, 1, 1], "gradient × input": [1, 2, 1, nan], "random": [3, 3, 3, 2]},
                   tied={"attention": [False, False, True, False], "gradient × input": [False, False, True, False],
                         "random": [False] * 4})
    cells = ch15.capstone_table({"BiLSTM": table}, HIGHER)
    assert list(cells.columns) == ["AP syn ↑", "comp rt ↑", "suff rt ↓", "S&S rt ↓"]
    assert cells.index.names == ["model", "method"]
    assert cells.loc[("BiLSTM", "attention"), "suff rt ↓"] == "0.100 (1=)"
    assert cells.loc[("BiLSTM", "attention"), "AP syn ↑"] == "0.200 (2)"
    assert cells.loc[("BiLSTM", "gradient × input"), "S&S rt ↓"] == "n/a"
    assert (cells.loc[("BiLSTM", "flow")] == "n/a").all()  # not a method of this model
    assert list(cells.index.get_level_values("method"))[:2] == ["attention", "effective attention"]
    with pytest.raises(ValueError, match="direction"):
        ch15.capstone_table({"BiLSTM": table}, {c: True for c in COLUMNS[:2]})
    # the answer leaves out S&S (attention against random only) and AP syn of a model that did not learn
    left = ch15.left_out({"BiLSTM": table, "Average": table}, {"BiLSTM": _rule(0.97), "Average": _rule(0.5)})
    assert left["BiLSTM"] == {"fraction removed to flip, rt": "it ranks attention against a random order only"}
    assert set(left["Average"]) == {"fraction removed to flip, rt", "AP, synthetic"}
    marked = ch15.capstone_table({"BiLSTM": table, "Average": table}, HIGHER, left=left)
    assert marked.loc[("BiLSTM", "attention"), "S&S rt ↓"] == "0.100 (1)†"
    assert marked.loc[("BiLSTM", "attention"), "AP syn ↑"] == "0.200 (2)"
    assert marked.loc[("Average", "attention"), "AP syn ↑"] == "0.200 (2)†"
    assert marked.loc[("Average", "gradient × input"), "S&S rt ↓"] == "n/a"  # no value, no mark
    assert ch15.left_out_legend(left) == (
        "† left out of the book's answer: S&S rt (it ranks attention against a random order only); AP syn of "
        "the Average model (the model did not learn the rule).")
    assert ch15.left_out_legend({"BiLSTM": {}}) == "No cell is left out of the book's answer."


def _pair(shift: float, spread=(0.0, 0.0, 0.0)):
    """Two (seeds, sentences) arrays: ``a`` above ``b`` by ``shift`` (0: identical, within noise);
    ``spread`` adds a per-seed shift to ``a``."""
    b = 0.5 + NOISE
    return b + shift + np.asarray(spread)[:, None], b


def test_ranks_best_rank_and_eraser_directions_over_seeds():
    lstm = _table({"attention": [1, 2, 1, 1], "gradient × input": [1, 1, 2, 2], "random": [3, 3, 3, 3]},
                  tied={"attention": [True, False, False, False], "gradient × input": [True, False, False, False],
                        "random": [False] * 4})
    avg = _table({"attention": [2, 1, 1, 1], "gradient × input": [1, 2, 2, 2], "random": [3, 3, 3, 3]})
    hi, lo = _pair(0.3)
    columns = {
        # gradient x input more comprehensive; attention less plausible than gradient x input
        "BiLSTM": {"comprehensiveness AOPC, rt": {"gradient × input": hi, "attention": lo},
                   "AP, synthetic": {"attention": lo, "gradient × input": hi}},
        # the other way round
        "Average": {"comprehensiveness AOPC, rt": {"gradient × input": lo, "attention": hi},
                    "AP, synthetic": {"attention": hi, "gradient × input": lo}},
    }
    out = ch15.ranks({"BiLSTM": lstm, "Average": avg}, columns, {"BiLSTM": 5, "Average": 5})
    assert out["ch15_bilstm_n_methods"] == 5
    assert out["ch15_bilstm_ap_best"] == "attention and gradient × input (tied within noise)"
    assert out["ch15_average_ap_best"] == "gradient × input"
    assert out["ch15_bilstm_att_ap_rank"] == "1=" and out["ch15_average_att_ap_rank"] == "2"
    assert out["ch15_bilstm_comp_best"] == "gradient × input" and out["ch15_bilstm_att_comp_rank"] == "2"
    assert out["ch15_bilstm_suff_best"] == "attention"
    assert out["ch15_bilstm_summary"] == (
        "For the BiLSTM, the most plausible ranking against the truth is attention and gradient × input (tied "
        "within noise); the most comprehensive on rt-polarity, gradient × input; the most sufficient, attention. "
        "Attention comes joint 1st, 2nd and 1st of 5 in these three columns.")
    assert out["ch15_average_summary"].startswith("For the Average model, the most plausible ranking")
    assert out["ch15_average_summary"].endswith("Attention comes 2nd, 1st and 1st of 5 in these three columns.")
    alike = ch15.ranks({"BiLSTM": _table({"attention": [3, 3, 3, 3], "gradient × input": [1, 1, 1, 1],
                                         "random": [2, 2, 2, 2]})},
                       {"BiLSTM": columns["BiLSTM"]}, {"BiLSTM": 12})
    assert alike["ch15_bilstm_summary"].endswith("Attention comes 3rd of 12 in all three columns.")
    assert out["ch15_bilstm_eraser_comp"] == "more comprehensive than"
    assert out["ch15_bilstm_eraser_comp_seeds"] == "holds in 3 of 3 seeds"
    assert out["ch15_average_eraser_comp"] == "less comprehensive than"
    assert out["ch15_bilstm_eraser_ap"] == "less plausible than"
    assert out["ch15_average_eraser_ap"] == "more plausible than"
    # identical: within noise; above in one seed of three only: no verdict
    same, _ = _pair(0.0)
    one, base = _pair(0.0, spread=(0.4, 0.0, 0.0))
    columns["BiLSTM"] = {"comprehensiveness AOPC, rt": {"gradient × input": one, "attention": base},
                         "AP, synthetic": {"attention": same, "gradient × input": same}}
    tie = ch15.ranks({"BiLSTM": lstm}, columns, {"BiLSTM": 5})
    assert tie["ch15_bilstm_eraser_ap"] == "as plausible as, within noise,"
    assert tie["ch15_bilstm_eraser_ap_seeds"] == "beyond noise in none of the 3 seeds alone"
    assert tie["ch15_bilstm_eraser_comp"] == "as comprehensive as, within noise,"
    assert tie["ch15_bilstm_eraser_comp_seeds"] == "beyond noise in 1 of 3 seeds alone"
    # above in one seed, below in another: the seeds disagree
    split, base = _pair(0.0, spread=(0.4, -0.4, 0.0))
    columns["BiLSTM"]["comprehensiveness AOPC, rt"] = {"gradient × input": split, "attention": base}
    assert ch15.ranks({"BiLSTM": lstm}, columns, {"BiLSTM": 5})["ch15_bilstm_eraser_comp"] == (
        "more or less comprehensive, depending on the seed, than")
    # one model: read over its sentences
    one_model = {"comprehensiveness AOPC, rt": {"gradient × input": hi[0], "attention": lo[0]},
                 "AP, synthetic": {"attention": lo[0], "gradient × input": hi[0]}}
    single = ch15.ranks({"transformer": lstm}, {"transformer": one_model}, {"transformer": 8})
    assert single["ch15_transformer_eraser_comp_seeds"] == "from one model"


# ----------------------------------------------------------------------------- deceivers
METHODS = ("attention", "leave-one-out", "integrated gradients", "random")


def _deceiver(shifts: dict, accuracy: float, family: str = "BiLSTM"):
    """One model's per-sentence shares at λ = 0 and λ = 1: each method is random's share + its shift."""
    base = 0.3 + NOISE[0]
    share = {m: base + shifts.get(m, 0.0) for m in METHODS}
    mass = {(family, "λ = 0"): {m: base + 0.2 for m in METHODS}, (family, "λ = 1"): share}
    rows = {(family, "λ = 0"): {"accuracy": 0.9, **{m: float(np.mean(base + 0.2)) for m in METHODS}},
            (family, "λ = 1"): {"accuracy": accuracy, **{m: float(np.mean(v)) for m, v in share.items()}}}
    return mass, rows


def _deceivers(*models):
    mass, rows = {}, {}
    for m, r in models:
        mass.update(m)
        rows.update(r)
    fooled = pd.DataFrame(rows).T.rename_axis(["model", "penalty"])
    return mass, fooled


def test_deceivers_words_each_case():
    hidden_found = _deceiver({"attention": -0.2, "leave-one-out": 0.1, "integrated gradients": 0.2}, 0.9)
    found_only = _deceiver({"leave-one-out": 0.1}, 0.9, "transformer")
    mass, fooled = _deceivers(hidden_found, found_only)
    n = {"BiLSTM": 500, "transformer": 500}
    out = ch15.deceivers(mass, fooled, 1.0, n)
    assert out["ch15_top_lambda"] == "λ = 1"
    lstm = out["ch15_fool_bilstm"]
    assert lstm.startswith("the BiLSTM keeps a test accuracy of 0.900 and its attention moves off them (")
    row = fooled.loc[("BiLSTM", "λ = 1")]
    assert f"({row['attention']:.3f}, against {row['random']:.3f} for a random ranking)" in lstm
    assert (f"while leave-one-out ({row['leave-one-out']:.3f}) and integrated gradients "
            f"({row['integrated gradients']:.3f}) still" in lstm)
    assert lstm.endswith("still put more on them than a random ranking, beyond noise: the model uses words its "
                         "attention hides")
    tf = out["ch15_fool_transformer"]
    assert "its attention does not move below chance" in tf
    assert tf.endswith("while leave-one-out (" + f"{fooled.loc[('transformer', 'λ = 1'), 'leave-one-out']:.3f}"
                       + ") put more on them than a random ranking, beyond noise")
    assert out["ch15_fool_bilstm_att_0"] == pytest.approx(0.5, abs=0.01)
    assert type(out["ch15_fool_bilstm_att_0"]) is float

    # accuracy 0.52 of 500: its Wilson interval reaches one half, a coin
    mass, fooled = _deceivers(_deceiver({}, 0.52))
    none = ch15.deceivers(mass, fooled, 1, {"BiLSTM": 500})["ch15_fool_bilstm"]
    assert "0.520 (95% interval" in none and "no better than a coin" in none
    assert "its attention does not move" in none
    assert none.endswith("are within noise of, or below, a random ranking's share: no method finds the words")
    # the same accuracy on 5,000 sentences is beyond a coin
    assert "coin" not in ch15.deceivers(mass, fooled, 1, {"BiLSTM": 5000})["ch15_fool_bilstm"]
    with pytest.raises(ValueError, match="λ = 2"):
        ch15.deceivers(mass, fooled, 2, {"BiLSTM": 500})
    with pytest.raises(ValueError, match="random"):
        ch15.deceivers(mass, fooled.drop(columns="random"), 1, {"BiLSTM": 500})
    with pytest.raises(ValueError, match="n_test"):
        ch15.deceivers(mass, fooled, 1, {})


# ----------------------------------------------------------------------------- verdict
LEARNED = {"BiLSTM": _rule(0.99), "Average": _rule(0.51), "transformer": _rule(0.44)}  # 0.51: within noise of 0.5
THREE = {"BiLSTM": 3, "Average": 3, "transformer": 3}


def test_verdict_counts_first_places_and_leaves_out_what_the_table_marks():
    nan = np.nan
    # attention first on AP and suff, beaten on comp; S&S compares attention with random only
    lstm = _table({"attention": [1, 2, 1, 1], "gradient × input": [2, 1, 1, nan], "random": [3, 3, 3, 2]})
    # attention first everywhere it is ranked
    avg = _table({"attention": [2, 1, 1, 1], "gradient × input": [1, 1, 2, nan], "random": [3, 3, 3, 2]})
    out = ch15.verdict({"BiLSTM": lstm, "Average": avg}, LEARNED, THREE)
    assert out["ch15_bilstm_verdict"] == ("attention ranks first, alone or tied, on 2 of the 3 yardsticks "
                                          "(plausibility on the synthetic task and sufficiency on rt-polarity), "
                                          "and other methods beat it over seeds and sentences on comprehensiveness "
                                          "on rt-polarity")
    assert out["ch15_average_verdict"] == ("attention ranks first, alone or tied, on both yardsticks "
                                           "(comprehensiveness on rt-polarity and sufficiency on rt-polarity)")
    assert out["ch15_sweep"] == ("only attention (the Average model) ranks first (alone or tied) in every "
                                 "column the answer reads")
    assert out["ch15_basis"] == "Every verdict holds over 3 training seeds of each model."
    assert out["ch15_unlearned_note"] == ("; the answer leaves out the plausibility of the Average model, which "
                                          "did not learn the rule")
    assert out["ch15_answer"].endswith(
        "The plausibility of the Average model is left out, since it did not learn the rule (0.510 on sentences "
        "with a negated marker); S&S rt is left out for the BiLSTM and the Average model, since it ranks "
        "attention against a random order only; attention ranks first there (the cells marked †). Every verdict "
        "holds over 3 training seeds of each model.")
    both = ch15.verdict({"BiLSTM": avg, "Average": avg}, {"BiLSTM": _rule(0.5), "Average": _rule(0.5)},
                        THREE)
    assert both["ch15_sweep"].startswith("only attention (the BiLSTM) and attention (the Average model) rank first")
    none = ch15.verdict({"BiLSTM": lstm}, LEARNED, THREE)
    assert none["ch15_sweep"] == "no method ranks first (alone or tied) in every column the answer reads, for any model"
    never = _table({"attention": [1, 1, 1, 1], "gradient × input": [1, 1, 1, nan], "random": [1, 1, 1, 1]})
    assert ch15.verdict({"BiLSTM": never}, LEARNED, THREE)["ch15_bilstm_verdict"] == (
        "attention ranks first, alone or tied, on all 3 yardsticks (plausibility on the synthetic "
        "task, comprehensiveness on rt-polarity and sufficiency on rt-polarity)")
    beaten = _table({"attention": [2, 2, 3, 1], "gradient × input": [1, 1, 1, nan], "random": [3, 3, 3, 2]})
    assert ch15.verdict({"BiLSTM": beaten}, LEARNED, THREE)["ch15_bilstm_verdict"] == (
        "attention ranks first on none of its 3 yardsticks, and other methods beat it over seeds and sentences "
        "on every one")
    with pytest.raises(ValueError, match="missing"):
        ch15.verdict({"BiLSTM": lstm}, {}, THREE)


def test_verdict_says_on_how_many_models_it_rests():
    beaten = {"attention": [2, 2, 3, 1], "gradient × input": [1, 1, 1, np.nan], "random": [3, 3, 3, 2]}
    ranked = {"BiLSTM": _table(beaten), "Average": _table(beaten), "transformer": _table(beaten)}
    out = ch15.verdict(ranked, LEARNED, {"BiLSTM": 3, "Average": 3, "transformer": 1})
    assert out["ch15_basis"] == ("The verdicts on the BiLSTM and the Average model hold over 3 training seeds "
                                 "each; those on the transformer rest on one trained model per task, read over "
                                 "the sentences alone.")
    # attention below random in S&S for one model: the answer says where it ranks first
    worse = _table({"attention": [2, 2, 3, 2], "gradient × input": [1, 1, 1, np.nan], "random": [3, 3, 3, 1]})
    text = ch15.verdict({"BiLSTM": _table(beaten), "Average": worse}, LEARNED, THREE)["ch15_answer"]
    assert "; attention ranks first there for the BiLSTM (the cells marked †)" in text
    text = ch15.verdict({"Average": worse}, LEARNED, THREE)["ch15_answer"]
    assert "; attention does not rank first there (the cells marked †)" in text
    assert out["ch15_answer"].endswith(out["ch15_basis"])


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=3, max_size=3), st.floats(0, 1))
def test_verdict_first_and_beaten_add_up(att_ranks, negated):
    table = _table({"attention": [*att_ranks, 1], "gradient × input": [1, 2, 1, np.nan], "random": [3, 3, 3, 2]})
    rule = _rule(negated)
    text = ch15.verdict({"BiLSTM": table}, {"BiLSTM": rule}, {"BiLSTM": 3})["ch15_bilstm_verdict"]
    n_yard = 3 if rule.learned else 2
    used = att_ranks if rule.learned else att_ranks[1:]
    k = sum(r == 1 for r in used)
    assert (f"on none of its {n_yard} yardsticks" if k == 0 else
            f"on {some_of(k, n_yard, 'yardsticks')} (") in text
    assert ("beat it over seeds and sentences" in text) == any(r > 1 for r in used)
    answer = ch15.verdict({"BiLSTM": table}, {"BiLSTM": rule}, {"BiLSTM": 3})["ch15_answer"]
    assert ("did not learn the rule" in answer) == (not rule.learned)


def test_the_answer_says_a_verdict_shared_by_every_model_once():
    nan = np.nan
    beaten = {"attention": [2, 2, 3, 1], "gradient × input": [1, 1, 1, nan], "random": [3, 3, 3, 2]}
    ranked = {"BiLSTM": _table(beaten), "Average": _table(beaten), "transformer": _table(beaten)}
    learned = {"BiLSTM": _rule(0.99), "Average": _rule(0.5), "transformer": _rule(0.44)}
    out = ch15.verdict(ranked, learned, THREE)
    assert out["ch15_answer"].startswith(
        "For all three models, attention ranks first on none of the yardsticks that compare methods (3 for the "
        "BiLSTM, 2 for the Average model and 2 for the transformer), and other methods beat it over seeds and "
        "sentences on every one. The plausibility of the Average model and the transformer is left out, since "
        "neither learned the rule (0.500 and 0.440 on sentences with a negated marker); S&S rt is left out for "
        "the BiLSTM, the Average model and the transformer")
    assert out["ch15_unlearned_note"] == ("; the answer leaves out the plausibility of the Average model and the "
                                          "transformer, neither of which learned the rule")
    one = ch15.verdict({"BiLSTM": _table(beaten), "Average": _table(beaten)},
                       {"BiLSTM": _rule(0.99), "Average": _rule(0.5)}, THREE)["ch15_answer"]
    assert one.startswith("For both models,") and "of the Average model is left out, since it did not" in one
    mixed = {"BiLSTM": _table(beaten),
             "Average": _table({"attention": [1, 1, 1, 1], "gradient × input": [2, 2, 2, nan], "random": [3, 3, 3, 2]})}
    rules = {"BiLSTM": _rule(0.99), "Average": _rule(0.99)}
    out = ch15.verdict(mixed, rules, THREE)
    assert out["ch15_unlearned_note"] == ""
    assert out["ch15_answer"].startswith(
        "For the BiLSTM, " + out["ch15_bilstm_verdict"] + "; for the Average model, attention ranks first, alone "
        "or tied, on all 3 yardsticks (plausibility on the synthetic task, comprehensiveness on rt-polarity and "
        "sufficiency on rt-polarity).")
