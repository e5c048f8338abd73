"""attnlib.presentation.readings.ch15: Chapter 15's readings on small hand-made results."""
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib.data import Split
from attnlib.experiments.explanations import ExplanationResult
from attnlib.presentation.readings import ch15
from attnlib.presentation.readings.wording import some_of
from attnlib.uncertainty import RankedTable

RNG = np.random.default_rng(0)
NOISE = RNG.normal(0, 0.01, 40)


# ----------------------------------------------------------------------------- slices
def _split_and_transformer():
    tokens = [["w"] * 12, ["w"] * 14, ["w"] * 30, ["w"] * 35]
    rationales = [np.arange(len(t)) < 2 for t in tokens]
    split = Split("test", [" ".join(t) for t in tokens], tokens,
                  [np.zeros(len(t) + 2, np.int64) for t in tokens], np.zeros(4, np.int64), rationales)
    # flow finds the rationale in the short sentences, puts it last in the long ones
    flow = [np.where(r, 1.0, 0.5) if len(r) < 20 else np.where(r, 0.0, 0.5) for r in rationales]
    n = len(tokens)
    result = ExplanationResult(
        probs=np.full((n, 2), 0.5), predicted=np.zeros(n, int), labels=np.zeros(n, int),
        indices=np.arange(n), lengths=np.array([len(t) for t in tokens]), methods=("flow",),
        scores={"flow": flow}, ig_delta=np.full(n, np.nan))
    return split, result


def test_slices_reads_the_negators_and_flow_by_length():
    split, transformer = _split_and_transformer()
    found = pd.DataFrame({"BiLSTM": [0.1, 0.8, 0.7, 0.25], "Average": [0.0, 0.0, 0.0, 0.2]},
                         index=["attention", "leave-one-out", "integrated gradients", "random (expected)"])
    plausible = pd.DataFrame({"average precision": [0.5, 0.625]},
                             index=pd.MultiIndex.from_tuples([("transformer", "attention"),
                                                              ("transformer", "gradient × input")]))
    out = ch15.slices(found, plausible, transformer, split, [9, 25, 40], ["10–25", "26–40"])
    assert out["ch15_neg_lstm_att"] == 0.1 and out["ch15_neg_lstm_loo"] == 0.8
    assert out["ch15_neg_lstm_ig"] == 0.7 and out["ch15_neg_random"] == 0.25
    assert out["ch15_flow_short"] == pytest.approx(1.0) and out["ch15_flow_long"] < 0.2
    assert (out["ch15_band_short"], out["ch15_band_long"]) == ("10–25", "26–40")
    assert out["ch15_gxi_tf"] == 0.625
    assert all(type(out[k]) is float for k in out if not k.startswith("ch15_band"))
    with pytest.raises(ValueError, match="BiLSTM"):
        ch15.slices(found.drop(columns="BiLSTM"), plausible, transformer, split, [9, 25, 40], ["a", "b"])


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


def test_capstone_table_cells_and_header():
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


def _pair(shift: float):
    """Two per-sentence arrays: ``a`` above ``b`` by ``shift`` (0: identical, within noise)."""
    b = 0.5 + NOISE
    return b + shift, b


def test_ranks_best_rank_and_eraser_directions():
    lstm = _table({"attention": [1, 2, 1, 1], "gradient × input": [1, 1, 2, 2], "random": [3, 3, 3, 3]},
                  tied={"attention": [True, False, False, False], "gradient × input": [True, False, False, False],
                        "random": [False] * 4})
    avg = _table({"attention": [2, 1, 1, 1], "gradient × input": [1, 2, 2, 2], "random": [3, 3, 3, 3]})
    hi, lo = _pair(0.3)
    same, _ = _pair(0.0)
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
    assert out["ch15_average_eraser_comp"] == "less comprehensive than"
    assert out["ch15_bilstm_eraser_ap"] == "less plausible than"
    assert out["ch15_average_eraser_ap"] == "more plausible than"
    columns["BiLSTM"] = {"comprehensiveness AOPC, rt": {"gradient × input": same, "attention": same},
                         "AP, synthetic": {"attention": same, "gradient × input": same}}
    tie = ch15.ranks({"BiLSTM": lstm}, columns, {"BiLSTM": 5})
    assert tie["ch15_bilstm_eraser_comp"] == "as comprehensive as, within noise,"
    assert tie["ch15_bilstm_eraser_ap"] == "as plausible as, within noise,"


# ----------------------------------------------------------------------------- deceivers
METHODS = ("attention", "leave-one-out", "integrated gradients", "random")


def _deceiver(shifts: dict, accuracy: float, family: str = "BiLSTM"):
    """One model's per-sentence shares at λ = 0 and λ = 1: each method is random's share + its shift."""
    base = 0.3 + NOISE
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
    out = ch15.deceivers(mass, fooled, 1.0)
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

    mass, fooled = _deceivers(_deceiver({}, 0.5))
    none = ch15.deceivers(mass, fooled, 1)["ch15_fool_bilstm"]
    assert "0.500 (near chance: there is little left to hide) and its attention does not move" in none
    assert none.endswith("are within noise of, or below, a random ranking's share: no method finds the words")
    with pytest.raises(ValueError, match="λ = 2"):
        ch15.deceivers(mass, fooled, 2)
    with pytest.raises(ValueError, match="random"):
        ch15.deceivers(mass, fooled.drop(columns="random"), 1)


# ----------------------------------------------------------------------------- verdict
def _accuracy(negated: dict) -> pd.DataFrame:
    rows = {("synthetic", f): {"test accuracy": 0.9, "with a negated marker": v} for f, v in negated.items()}
    return pd.DataFrame(rows).T.rename_axis(["task", "model"])


def test_verdict_counts_first_places_and_leaves_out_an_unlearned_rule():
    nan = np.nan
    # attention first on AP and suff, beaten on comp; S&S compares attention with random only
    lstm = _table({"attention": [1, 2, 1, 1], "gradient × input": [2, 1, 1, nan], "random": [3, 3, 3, 2]})
    # attention first everywhere it is ranked
    avg = _table({"attention": [2, 1, 1, 1], "gradient × input": [1, 1, 2, nan], "random": [3, 3, 3, 2]})
    out = ch15.verdict({"BiLSTM": lstm, "Average": avg}, _accuracy({"BiLSTM": 0.99, "Average": 0.6}))
    assert out["ch15_bilstm_verdict"] == ("attention ranks first, alone or tied within noise, on 2 of the 3 "
                                          "yardsticks (plausibility on the synthetic task and sufficiency on "
                                          "rt-polarity), and other methods beat it beyond noise on "
                                          "comprehensiveness on rt-polarity")
    assert out["ch15_average_verdict"] == ("attention ranks first, alone or tied within noise, on both yardsticks "
                                           "(comprehensiveness on rt-polarity and sufficiency on rt-polarity); its "
                                           "plausibility is left out, since the model did not learn the rule (it "
                                           "reaches 0.600 on sentences with a negated marker)")
    assert out["ch15_sweep"] == ("only attention (the Average model) ranks first (alone or tied) in every "
                                 "column that compares methods")
    both = ch15.verdict({"BiLSTM": avg, "Average": avg}, _accuracy({"BiLSTM": 0.6, "Average": 0.6}))
    assert both["ch15_sweep"].startswith("only attention (the BiLSTM model) and attention (the Average model) "
                                         "rank first")
    none = ch15.verdict({"BiLSTM": lstm}, _accuracy({"BiLSTM": 0.99}))
    assert none["ch15_sweep"] == "no method ranks first (alone or tied) in every column for any model"
    never = _table({"attention": [1, 1, 1, 1], "gradient × input": [1, 1, 1, nan], "random": [1, 1, 1, 1]})
    assert ch15.verdict({"BiLSTM": never}, _accuracy({"BiLSTM": 0.99}))["ch15_bilstm_verdict"] == (
        "attention ranks first, alone or tied within noise, on all 3 yardsticks (plausibility on the synthetic "
        "task, comprehensiveness on rt-polarity and sufficiency on rt-polarity)")
    beaten = _table({"attention": [2, 2, 3, 1], "gradient × input": [1, 1, 1, nan], "random": [3, 3, 3, 2]})
    assert ch15.verdict({"BiLSTM": beaten}, _accuracy({"BiLSTM": 0.99}))["ch15_bilstm_verdict"] == (
        "attention ranks first on none of its 3 yardsticks, and other methods beat it beyond noise on every one")
    with pytest.raises(ValueError, match="negated"):
        ch15.verdict({"BiLSTM": lstm}, _accuracy({"BiLSTM": 0.9}).drop(columns="with a negated marker"))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=3, max_size=3), st.floats(0, 1))
def test_verdict_first_and_beaten_add_up(att_ranks, negated):
    table = _table({"attention": [*att_ranks, 1], "gradient × input": [1, 2, 1, np.nan], "random": [3, 3, 3, 2]})
    text = ch15.verdict({"BiLSTM": table}, _accuracy({"BiLSTM": negated}))["ch15_bilstm_verdict"]
    n_yard = 3 if negated >= ch15.LEARNED else 2
    used = att_ranks if negated >= ch15.LEARNED else att_ranks[1:]
    k = sum(r == 1 for r in used)
    assert (f"on none of its {n_yard} yardsticks" if k == 0 else
            f"on {some_of(k, n_yard, 'yardsticks')} (") in text
    assert ("beat it beyond noise" in text) == any(r > 1 for r in used)
    assert ("did not learn the rule" in text) == (negated < ch15.LEARNED)


def test_the_answer_says_a_verdict_shared_by_every_model_once():
    nan = np.nan
    beaten = {"attention": [2, 2, 3, 1], "gradient × input": [1, 1, 1, nan], "random": [3, 3, 3, 2]}
    ranked = {"BiLSTM": _table(beaten), "Average": _table(beaten), "transformer": _table(beaten)}
    out = ch15.verdict(ranked, _accuracy({"BiLSTM": 0.99, "Average": 0.5, "transformer": 0.44}))
    assert out["ch15_answer"] == (
        "For all three models, attention ranks first on none of their yardsticks (3 for the BiLSTM, 2 for "
        "the Average model and 2 for the transformer), and other methods beat it beyond noise on every one. "
        "The plausibility of the Average model and the transformer is left out, since neither learned the "
        "rule (0.500 and 0.440 on sentences with a negated marker).")
    one = ch15.verdict({"BiLSTM": _table(beaten), "Average": _table(beaten)},
                       _accuracy({"BiLSTM": 0.99, "Average": 0.5}))["ch15_answer"]
    assert one.startswith("For both models,") and "of the Average model is left out, since it did not" in one
    mixed = {"BiLSTM": _table(beaten),
             "Average": _table({"attention": [1, 1, 1, 1], "gradient × input": [2, 2, 2, nan], "random": [3, 3, 3, 2]})}
    text = ch15.verdict(mixed, _accuracy({"BiLSTM": 0.99, "Average": 0.99}))["ch15_answer"]
    assert text == ("For the BiLSTM, " + ch15.verdict(mixed, _accuracy({"BiLSTM": 0.99, "Average": 0.99}))[
        "ch15_bilstm_verdict"] + "; for the Average model, attention ranks first, alone or tied within noise, on "
        "all 3 yardsticks (plausibility on the synthetic task, comprehensiveness on rt-polarity and sufficiency on "
        "rt-polarity).")
