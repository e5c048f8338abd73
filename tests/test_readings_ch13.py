"""attnlib.presentation.readings.ch13: Chapter 13's readings over training seeds, on small hand-made tables."""
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnlib import uncertainty
from attnlib.presentation.readings import ch13
from attnlib.presentation.readings.ch13 import label
from attnlib.seeds import SeedResults, SeedSet

TOP = 1.0
N = 400  # test sentences


@given(st.sampled_from(["BiLSTM + tanh", "transformer"]), st.floats(0, 10, allow_nan=False))
def test_label_names_a_model_as_the_tables_do(family, lam):
    assert label(family, lam) == f"{family}, λ = {lam:g}"
    assert label(family, lam).startswith(family + ", λ = ")


def test_label_examples():
    assert label("transformer", 1.0) == "transformer, λ = 1"
    assert label("BiLSTM + tanh", 0.1) == "BiLSTM + tanh, λ = 0.1"
    assert label("BiLSTM + tanh", 0.0) == "BiLSTM + tanh, λ = 0"


# ----------------------------------------------------------------------------- the models over seeds
def test_seed_sets_group_the_runs_by_model_in_seed_order():
    runs = {("transformer", 1.0, 2): "t1s2", ("transformer", 1.0, 0): "t1s0", ("transformer", 1.0, 1): "t1s1",
            ("BiLSTM + tanh", 0.0, 0): "l0s0"}
    sets = ch13.seed_sets(runs)
    assert set(sets) == {("transformer", 1.0), ("BiLSTM + tanh", 0.0)}
    s = sets["transformer", 1.0]
    assert isinstance(s, SeedSet) and s.seeds == (0, 1, 2) and s.trained == ("t1s0", "t1s1", "t1s2")
    assert s.first == "t1s0"
    by_seed = ch13.models_by_seed(sets)
    assert by_seed == [{"transformer, λ = 1": "t1s0", "BiLSTM + tanh, λ = 0": "l0s0"},
                       {"transformer, λ = 1": "t1s1"}, {"transformer, λ = 1": "t1s2"}]
    with pytest.raises(ValueError, match="non-empty dict"):
        ch13.seed_sets({("transformer", 1.0): "no seed"})
    with pytest.raises(ValueError, match="non-empty dict"):
        ch13.models_by_seed({})


# ----------------------------------------------------------------------------- the deception tables
def _correct(accuracy: float, shift: int = 0) -> np.ndarray:
    """N sentences, accuracy x N of them right: those from ``shift`` on. A penalised model (shift
    60) gets some sentences right that the unpenalised one (shift 0) gets wrong, and the reverse,
    as real models do, so that a small change is within noise and a large one beyond it."""
    return (np.arange(N) - shift) % N < round(accuracy * N)


def _tables(acc: dict, mass: dict | None = None, shift=60, seeds=3):
    """One deception table per seed: ``acc[(family, λ)]`` the accuracy of each seed (a float: the
    same in every seed), ``mass`` the attention mass (%) likewise."""
    mass = mass or {}
    tables = []
    for k in range(seeds):
        rows = {}
        for (family, lam), a in acc.items():
            a = a[k] if isinstance(a, tuple) else a
            m = mass.get((family, lam), 40.0 if lam == 0 else 0.01)
            m = m[k] if isinstance(m, tuple) else m
            rows[label(family, lam)] = {
                "accuracy": a, "impermissible attention (%)": m, "impermissible tokens (%)": 55.0, "n": N,
                "correct": _correct(a, 0 if lam == 0 else shift), "mass": np.full(N, m)}
        frame = pd.DataFrame.from_dict(rows, orient="index")
        frame.index.name = "model"
        tables.append(frame)
    return tables


def _acc(lstm=(0.75, 0.74), tf=(0.78, 0.70)):
    return {("BiLSTM + tanh", 0.0): lstm[0], ("BiLSTM + tanh", TOP): lstm[1],
            ("transformer", 0.0): tf[0], ("transformer", TOP): tf[1]}


DELETED = _tables(_acc(lstm=(0.5, 0.5), tf=(0.5, 0.5)), shift=0)
SUMMARY = pd.Series({"impermissible tokens (mean share)": 0.4})


def test_accuracy_and_mass_reads_means_over_seeds():
    out = ch13.accuracy_and_mass(_tables(_acc()), DELETED, SUMMARY, top=TOP)
    assert out["ch13_top_lambda"] == "1" and out["ch13_share"] == 0.4
    assert out["ch13_lstm_0_acc"] == pytest.approx(0.75) and out["ch13_lstm_top_mass"] == pytest.approx(0.01)
    assert out["ch13_tf_top_acc"] == pytest.approx(0.70) and out["ch13_tf_0_mass"] == pytest.approx(40.0)
    assert out["ch13_tf_top_deleted"] == pytest.approx(0.5)
    assert out["ch13_lstm_drop"] == pytest.approx(0.01) and out["ch13_tf_drop"] == pytest.approx(0.08)
    # identical seeds: 60 lost and 56 gained of 400 in each is no change; 60 lost, 28 gained is a loss
    assert out["ch13_lstm_verdict"] == "keeps its accuracy within noise, in each of the 3 seeds alone too"
    assert out["ch13_lstm_verdict_short"] == "keeps its accuracy within noise"
    assert out["ch13_tf_verdict"] == "loses accuracy beyond noise (holds in 3 of 3 seeds)"
    assert out["ch13_tf_verdict_short"] == "loses accuracy beyond noise"
    assert out["ch13_lstm_state"] == "at 0.740"
    assert out["ch13_tf_top_chance"].startswith("above chance beyond noise (95% interval ")
    assert out["ch13_deceives"].startswith("So attention can be made to deceive: with 0.010% of its attention")
    assert out["ch13_deleted_state"] == "each within noise of chance (0.5) over seeds and sentences"
    low, high = map(float, out["ch13_tf_drop_ci"].split(" to "))
    assert 0 < low <= 0.08 <= high


def test_a_loss_in_one_seed_of_three_is_no_verdict():
    one = _tables(_acc(tf=(0.78, (0.78, 0.78, 0.60))), shift=0)
    out = ch13.accuracy_and_mass(one, DELETED, SUMMARY, top=TOP)
    assert out["ch13_tf_verdict"] == ("keeps its accuracy within noise over seeds and sentences, though 1 of "
                                      "its 3 seeds alone loses accuracy beyond noise")
    assert out["ch13_tf_verdict_short"] == "keeps its accuracy within noise"


def test_seeds_that_disagree_are_said_to():
    both = _tables(_acc(tf=(0.70, (0.80, 0.60, 0.70))), shift=0)
    out = ch13.accuracy_and_mass(both, DELETED, SUMMARY, top=TOP)
    assert out["ch13_tf_verdict"] == ("loses accuracy in some seeds and gains it in others, each beyond noise "
                                      "(1 of 3 lose it, 1 gain it)")
    assert out["ch13_tf_verdict_short"] == "loses or gains accuracy, depending on the seed"


def test_accuracy_and_mass_other_branches():
    out = ch13.accuracy_and_mass(_tables(_acc(lstm=(0.75, 0.52), tf=(0.70, 0.78))), DELETED, SUMMARY, top=TOP)
    assert out["ch13_lstm_verdict"] == "loses accuracy beyond noise (holds in 3 of 3 seeds)"
    assert out["ch13_lstm_state"] == "at chance"  # 0.52 of 400: 0.5 lies inside its interval
    assert out["ch13_tf_verdict"] == "gains accuracy beyond noise (holds in 3 of 3 seeds)"
    chance = ch13.accuracy_and_mass(_tables(_acc(tf=(0.78, 0.51))), DELETED, SUMMARY, top=TOP)
    assert chance["ch13_tf_top_chance"].startswith("within noise of chance")
    assert chance["ch13_deceives"].startswith("Whether attention was made to deceive here is open")
    informative = _tables(_acc(lstm=(0.5, 0.5), tf=(0.5, 0.6)), shift=0)
    said = ch13.accuracy_and_mass(_tables(_acc()), informative, SUMMARY, top=TOP)
    assert said["ch13_deleted_state"] == ("within noise of chance (0.5) for 3 of the 4 models; transformer, λ = 1 "
                                          "stays off it beyond noise")
    assert said["ch13_deleted_max"] == pytest.approx(0.6)
    assert said["ch13_deceives"].startswith("Whether attention was made to deceive")  # not at chance without them


def test_the_reading_needs_the_per_sentence_values():
    bare = [t.drop(columns=["correct"]) for t in _tables(_acc())]
    with pytest.raises(ValueError, match="per-sentence values"):
        ch13.accuracy_and_mass(bare, DELETED, SUMMARY, top=TOP)
    with pytest.raises(ValueError, match="one per seed"):
        ch13.accuracy_and_mass(_tables(_acc())[0], DELETED, SUMMARY, top=TOP)


def test_table_over_seeds_shows_the_interval_over_seeds_and_sentences():
    tables = _tables(_acc(tf=(0.78, (0.70, 0.72, 0.74))))
    shown = ch13.table_over_seeds(tables, DELETED)
    assert list(shown.columns) == ["accuracy [95% interval]", "impermissible attention (%) [95% interval]",
                                   "impermissible tokens (%)", "accuracy, impermissible tokens deleted [95% interval]",
                                   "seeds"]
    row = shown.loc[label("transformer", TOP)]
    stack = np.stack([t.at[label("transformer", TOP), "correct"] for t in tables]).astype(float)
    assert row["accuracy [95% interval]"] == str(uncertainty.over_seeds(stack))
    assert shown.loc[label("transformer", 0.0), "impermissible attention (%) [95% interval]"] == \
        "40.000 [40.000, 40.000]"  # constant: no spread
    assert row["seeds"] == "3" and row["impermissible tokens (%)"] == "55.000"
    spread = ch13.table_over_seeds(_tables(_acc(), mass={("transformer", TOP): (0.0, 0.0, 0.3)}), DELETED)
    low = float(spread.loc[label("transformer", TOP), "impermissible attention (%) [95% interval]"]
                .split("[")[1].split(",")[0])
    assert low == 0.0  # a share's interval is cut at 0


def test_the_bilstm_is_compared_with_pruthi_at_the_same_lambda():
    tables = _tables(_acc())
    assert "no BiLSTM at λ = 0.1" in ch13.accuracy_and_mass(tables, DELETED, SUMMARY, top=TOP)["ch13_lstm_at_pruthi"]
    lost = _tables({**_acc(), ("BiLSTM + tanh", 0.1): 0.53})
    words = ch13.accuracy_and_mass(lost, DELETED, SUMMARY, top=TOP)["ch13_lstm_at_pruthi"]
    assert words == ("ours goes from 0.750 to 0.530 at λ = 0.1, so at the same λ both lose accuracy (ours beyond "
                     "noise, holds in 3 of 3 seeds)")
    kept = _tables({**_acc(), ("BiLSTM + tanh", 0.1): 0.74})
    assert "ours keeps its accuracy within noise, where theirs does not" in ch13.accuracy_and_mass(
        kept, DELETED, SUMMARY, top=TOP)["ch13_lstm_at_pruthi"]


# ----------------------------------------------------------------------------- Pruthi et al.
def test_pruthi_numbers_come_from_published():
    from attnlib import published

    out = ch13.pruthi()
    table = published.PRUTHI_TABLE3
    assert out["ch13_p_bert_0_acc"] == table["BERT (mean over heads)", 0.0][0].value
    assert out["ch13_p_bert_01_mass"] == table["BERT (mean over heads)", 0.1][1].value
    assert out["ch13_p_lstm_1_acc"] == table["BiLSTM + attention", 1.0][0].value
    lo, hi = published.PRUTHI_TOKENS_REMOVED
    assert out["ch13_p_deleted"] == f"{lo.value:g}–{hi.value:g}"
    assert not any(k.startswith("ch13_p_emb") for k in out)  # the Emb model is not quoted


def test_beside_pruthi_is_ours_over_seeds_and_sentences_beside_their_table():
    from attnlib import published

    acc = {("transformer", 0.0): (0.80, 0.82, 0.78), ("transformer", 1.0): (0.79, 0.81, 0.80),
           ("BiLSTM + tanh", 0.0): (0.70, 0.72, 0.71), ("BiLSTM + tanh", 1.0): (0.60, 0.50, 0.55)}
    mass = {("transformer", 1.0): (0.1, 0.2, 0.3), ("BiLSTM + tanh", 1.0): (0.1, 0.2, 0.3),
            ("transformer", 0.0): 50.0, ("BiLSTM + tanh", 0.0): 50.0}
    tables = _tables(acc, mass)
    table, out = ch13.beside_pruthi(tables)
    assert set(out) == ({f"ch13_{f}_{w}_{k}_seeds" for f in ("tf", "lstm") for w in ("0", "top") for k in ("acc", "mass")}
                        | {"ch13_tf_seeds", "ch13_lstm_seeds", "ch13_tf_seeds_text", "ch13_lstm_seeds_text",
                           "ch13_lstm_seeds_sentence"})
    assert out["ch13_lstm_seeds_sentence"] == "The BiLSTM's rows come from 3 seeds too."
    assert out["ch13_tf_seeds"] == 3
    stack = np.stack([t.at["transformer, λ = 0", "correct"] for t in tables]).astype(float)
    iv = uncertainty.over_seeds(stack)  # oracle: the pooled interval, in percent
    want = f"{100 * iv.estimate:.1f} [{100 * iv.low:.1f}, {100 * iv.high:.1f}]"
    assert table.loc["transformer, λ = 0", "accuracy %, ours"] == want
    assert out["ch13_tf_0_acc_seeds"] == want
    assert table.loc["transformer, λ = 1", "mass %, theirs"] == "< 0.001"
    assert table.loc["BiLSTM + tanh, λ = 1", "accuracy %, theirs"] == (
        f"{published.PRUTHI_TABLE3['BiLSTM + attention', 1.0][0].value:.1f}")  # 61.0, as printed
    assert table.loc["transformer, λ = 0", "mass %, ours"] == "50.0 [50.0, 50.0]"  # large: 1 decimal
    assert table.loc["transformer, λ = 0", "mass %, theirs"] == "59.0"
    low = float(table.loc["transformer, λ = 1", "mass %, ours"].split("[")[1].split(",")[0])
    assert low >= 0  # a share's interval is cut at 0
    one = [t if k == 0 else t.drop(index=[n for n in t.index if n.startswith("BiLSTM")])
           for k, t in enumerate(tables)]
    table, out = ch13.beside_pruthi(one)  # a family of one seed: its value, said to be one seed
    assert table.loc["BiLSTM + tanh, λ = 0", "accuracy %, ours"] == "70.0 (1 seed)"
    assert table.loc["BiLSTM + tanh, λ = 1", "mass %, ours"] == "0.100 (1 seed)"
    assert out["ch13_lstm_seeds"] == 1 and out["ch13_tf_seeds"] == 3
    assert (out["ch13_lstm_seeds_text"], out["ch13_tf_seeds_text"]) == ("one seed", "3 seeds")
    assert out["ch13_lstm_seeds_sentence"].startswith("The BiLSTM's rows come from one seed: a BiLSTM")
    uneven = [t if k == 0 else t.drop(index=["transformer, λ = 1"]) for k, t in enumerate(tables)]
    with pytest.raises(ValueError, match="differ in their number of seeds"):
        ch13.beside_pruthi(uneven)
    with pytest.raises(ValueError, match="one per seed"):
        ch13.beside_pruthi([])


def test_pruthi_table_shows_every_row_as_printed():
    from attnlib import published

    table = ch13.pruthi_table()
    assert len(table) == len(published.PRUTHI_TABLE3)
    assert table.loc["BERT (mean over heads), λ = 0.1", "impermissible attention (%)"] == "< 0.01"
    assert table.loc["BERT (mean over heads), λ = 1", "impermissible attention (%)"] == "< 0.001"
    assert table.loc["BiLSTM + attention, λ = 1"].tolist() == ["61.0", "0.07"]
    assert not any(cell.startswith("<") for cell in table["accuracy (%)"])


def test_seeds_plan_names_each_familys_seeds():
    assert ch13.seeds_plan(lstm_seeds=3, tf_seeds=3) == {"ch13_seeds_plan": "every model trains with 3 seeds"}
    assert ch13.seeds_plan(lstm_seeds=1, tf_seeds=3)["ch13_seeds_plan"] == (
        "the transformers train with 3 seeds and the BiLSTMs with one seed")
    with pytest.raises(ValueError, match="lstm_seeds"):
        ch13.seeds_plan(lstm_seeds=0, tf_seeds=3)


def test_minilm_cost_scales_our_transformers_epoch_by_the_measured_ratio():
    m = ch13.MINILM_STEP
    out = ch13.minilm_cost(n_train=2000, n_models=9, epochs=6)
    epoch = m["epoch_vs_ours"] * m["ours_epoch_seconds"] / 60  # 2,000 sentences: our measured epoch
    assert out["ch13_minilm_epoch_min"] == pytest.approx(epoch)
    assert out["ch13_minilm_one_epoch_min"] == pytest.approx(9 * epoch)
    assert out["ch13_minilm_full_hours"] == pytest.approx(9 * 6 * epoch / 60)
    assert out["ch13_minilm_models"] == 9 and out["ch13_minilm_epochs"] == 6
    assert out["ch13_minilm_ratio"] == m["epoch_vs_ours"]
    assert out["ch13_minilm_budget"] == f"{9 * epoch / 4:.0f} to {54 * epoch / 4:.0f} times the chapter's 4-minute budget"
    twice = ch13.minilm_cost(n_train=4000, n_models=9, epochs=6)  # twice the sentences: twice the epoch
    assert twice["ch13_minilm_epoch_min"] == pytest.approx(2 * epoch)
    with pytest.raises(ValueError, match="n_train"):
        ch13.minilm_cost(n_train=0, n_models=9, epochs=6)
    with pytest.raises(ValueError, match="budget_minutes"):
        ch13.minilm_cost(n_train=10, n_models=1, epochs=1, budget_minutes=0)


# ----------------------------------------------------------------------------- the explanations
MEASURES = ["attention", "gradient", "leave-one-out", "rollout"]
M = 60  # explained sentences


def _shares(means, seeds=3, scatter=0.01, seed=0):
    """{explanation: (S, M) shares}: ``means[m]`` a float (every seed) or a tuple (one per seed),
    scattered a little sentence by sentence."""
    rng = np.random.default_rng(seed)
    out = {}
    for m, v in zip(MEASURES, means):
        if v is None:
            continue
        per_seed = v if isinstance(v, tuple) else (v,) * seeds
        out[m] = np.stack([np.clip(p + rng.normal(0, scatter, M), 0, 1) for p in per_seed])
    return out


def _per_sentence(tf_top, tf_0=(0.6, 0.7, 0.7, 0.65), lstm_top=(0.001, 0.05, 0.06, None)):
    return {label("transformer", TOP): _shares(tf_top), label("transformer", 0.0): _shares(tf_0, seed=1),
            label("BiLSTM + tanh", TOP): _shares(lstm_top, seed=2)}


UNIFORM = np.full(M, 0.55)


def test_explanations_values_and_verdicts():
    per_sentence = _per_sentence((0.0005, 0.65, 0.55, 0.25))
    out = ch13.explanations(per_sentence, UNIFORM, top=TOP, n_explained=M)
    assert out["ch13_n_explained"] == M
    assert out["ch13_tf_top_grad"] == pytest.approx(0.65, abs=0.005)
    assert out["ch13_tf_0_roll"] == pytest.approx(0.65, abs=0.005)
    assert out["ch13_lstm_top_grad"] == pytest.approx(0.05, abs=0.005)
    assert out["ch13_moves"].startswith("gradient importance from 70% to 65%, leave-one-out from 70% to 55% and "
                                        "rollout from 65% to 25%. Each falls less than attention does, beyond noise")
    assert out["ch13_moves"].endswith("(each holds in 3 of 3 seeds)")
    parts = out["ch13_uniform"].split("; ")
    assert parts[0] == "gradient importance (65%) lies above it beyond noise (holds in 3 of 3 seeds)"
    assert parts[1].startswith("leave-one-out (55%) is within noise of it")
    assert parts[2] == "rollout (25%) lies below it beyond noise (holds in 3 of 3 seeds)"
    assert out["ch13_seeing"] == "gradient importance" and out["ch13_fooled"] == "rollout"
    assert out["ch13_seeing_sentence"] == ("gradient importance still points at the tokens the model decides with, "
                                           "above uniform weights' share beyond noise")
    assert out["ch13_others_fooled"] == ("rollout is fooled too: in the deceptive model it puts less on the "
                                         "impermissible tokens than uniform weights would, beyond noise, though it "
                                         "is not pushed as far as attention")


def test_an_explanation_above_uniform_in_one_seed_of_three_is_not_seeing():
    per_sentence = _per_sentence(((0.0005,) * 3, (0.55, 0.55, 0.80), 0.55, 0.55))
    out = ch13.explanations(per_sentence, UNIFORM, top=TOP, n_explained=M)
    assert out["ch13_uniform"].split("; ")[0].startswith("gradient importance (63%) is within noise of it "
                                                        "(beyond noise in 1 of 3 seeds alone)")
    assert out["ch13_seeing"] == "none of them" and out["ch13_fooled"] == "none of them"
    assert out["ch13_seeing_sentence"].startswith("none of them singles out the tokens the model decides with")
    assert out["ch13_others_fooled"] == "none of them is pushed below uniform weights' share the way attention is"


def test_explanations_other_branches():
    # gradient: above uniform in one seed, below in another; everything falls as far as attention
    per_sentence = _per_sentence((0.0005, (0.8, 0.3, 0.55), 0.0005, 0.0005), tf_0=(0.6, 0.6, 0.6, 0.6))
    out = ch13.explanations(per_sentence, UNIFORM, top=TOP, n_explained=M)
    assert out["ch13_uniform"].split("; ")[0] == ("gradient importance (55%) lies above it in some seeds and below "
                                                  "it in others, each beyond noise")
    assert "Each falls less" not in out["ch13_moves"]
    assert out["ch13_moves"].endswith(". Gradient importance, leave-one-out and rollout do not fall less than "
                                      "attention beyond noise over seeds and sentences")  # 3 seeds: t with 2 df
    mixed = ch13.explanations(_per_sentence((0.0005, 0.5, 0.0005, 0.0005), tf_0=(0.6,) * 4), UNIFORM, top=TOP,
                              n_explained=M)
    assert mixed["ch13_moves"].endswith(". Gradient importance falls less than attention does, beyond noise; "
                                        "leave-one-out and rollout do not fall less than attention beyond noise "
                                        "over seeds and sentences")
    assert out["ch13_fooled"] == "leave-one-out and rollout"
    assert out["ch13_others_fooled"].startswith("leave-one-out and rollout are fooled too: in the deceptive model "
                                                "they put less")
    assert "not pushed as far as attention" not in out["ch13_others_fooled"]  # 0.01 against 0.0005: not shown


def test_explanations_needs_every_measure_of_the_transformer():
    per_sentence = _per_sentence((0.001, 0.5, 0.45, None))
    with pytest.raises(ValueError, match="rollout"):
        ch13.explanations(per_sentence, UNIFORM, top=TOP, n_explained=M)


def test_mean_shares_skips_nan_sentences_and_averages_the_seeds():
    per_sentence = {"m1": {"attention": np.array([0.1, np.nan, 0.3]), "gradient": np.array([0.5, 0.5])},
                    "m2": {"attention": np.array([[0.0, 1.0], [0.2, 0.2]])}}
    shares = ch13.mean_shares(per_sentence)
    assert list(shares.index) == ["m1", "m2"] and list(shares.columns) == ["attention", "gradient"]
    assert shares.loc["m1", "attention"] == pytest.approx(0.2)
    assert shares.loc["m2", "attention"] == pytest.approx(0.35) and np.isnan(shares.loc["m2", "gradient"])
    with pytest.raises(ValueError):
        ch13.mean_shares({})


def test_shares_table_shows_intervals_inside_zero_and_one():
    per_sentence = {"m": {"attention": np.array([[0.0] * 5, [0.0] * 5, [0.03] * 5]),
                          "gradient": np.array([[0.99] * 5, [0.99] * 5, [0.5] * 5])}, "n": {"attention": np.zeros(5)}}
    shown = ch13.shares_table(per_sentence, np.full(5, 0.4))
    low = float(shown.loc["m", "attention"].split("[")[1].split(",")[0])
    high = float(shown.loc["m", "gradient"].split(", ")[1].rstrip("]"))
    assert low == 0.0 and high == 1.0
    assert shown.loc["n", "gradient"] == "n/a" and shown.loc["m", "impermissible tokens"] == "0.400"


def _importance(indices, attention, gradient, loo):
    return SimpleNamespace(indices=np.asarray(indices), attention=attention, gradient=gradient, loo=loo)


def test_explanation_shares_score_every_seed_on_the_same_sentences():
    rationales = [np.array([True, False]), np.array([True, True, False, False]), np.array([False, True])]
    r = _importance([0, 1], [np.array([1.0, 0.0]), np.array([0.25, 0.25, 0.25, 0.25])],
                    [np.array([1.0, 1.0]), np.array([1.0, 0.0, 0.0, 1.0])], [np.array([0.0, 2.0]), np.ones(4)])
    runs = SeedResults((0, 1), (r, r))
    rollout = [np.array([0.5, 0.5]), np.array([1.0, 1.0, 0.0, 0.0])]
    per_sentence, token_share = ch13.explanation_shares({("transformer", 1.0): runs}, {("transformer", 1.0):
                                                                                      [rollout, rollout]}, rationales)
    shares = per_sentence["transformer, λ = 1"]
    assert shares["attention"].shape == (2, 2) and shares["attention"][0].tolist() == [1.0, 0.5]
    assert shares["leave-one-out"][1].tolist() == [0.0, 0.5] and shares["rollout"][0].tolist() == [0.5, 1.0]
    assert token_share.tolist() == [0.5, 0.5]
    other = _importance([0, 2], r.attention, r.gradient, r.loo)
    with pytest.raises(ValueError, match="same sentences"):
        ch13.explanation_shares({("transformer", 1.0): SeedResults((0, 1), (r, other))}, {}, rationales)
    with pytest.raises(ValueError, match="one rollout per seed"):
        ch13.explanation_shares({("transformer", 1.0): runs}, {("transformer", 1.0): [rollout]}, rationales)


# ----------------------------------------------------------------------------- erasure
RANKINGS = ("attention", "gradient", "random")


def _removal_result(flipped, fraction):
    """One seed's ranked removal: ``flipped`` (n, 3) bool, ``fraction`` (n, 3) erased at the flip."""
    flipped = np.asarray(flipped, bool)
    return SimpleNamespace(indices=np.arange(len(flipped)), rankings=RANKINGS, flipped=flipped,
                           fraction_removed=np.where(flipped, fraction, np.nan))


def _removal(top_flips=(1.0, 1.0, 0.5), zero_flips=(0.8, 0.7, 0.1), seeds=3, n=40):
    def runs(shares):
        results = []
        for k in range(seeds):
            flipped = np.stack([np.arange(n) < round(s * n) for s in shares], axis=1)
            results.append(_removal_result(flipped, np.tile([0.3, 0.2, 0.6], (n, 1))))
        return SeedResults(tuple(range(seeds)), tuple(results))

    return {label("BiLSTM + tanh", 0.0): runs(zero_flips), label("BiLSTM + tanh", TOP): runs(top_flips)}


def test_erasure_reading_over_seeds():
    out = ch13.erasure(_removal(), top=TOP)
    assert out["ch13_erase0_attention_flips"] == pytest.approx(0.8)
    assert out["ch13_erase0_gradient_flips"] == pytest.approx(0.7)
    assert out["ch13_erase0_random_flips"] == pytest.approx(0.1)
    assert out["ch13_erasetop_attention_flips"] == pytest.approx(1.0)
    assert out["ch13_erase0_att"] == pytest.approx(0.3) and out["ch13_erase0_grad"] == pytest.approx(0.2)
    assert out["ch13_erase_top_att_vs_random"] == ("more decisions than a random order, beyond noise (holds in 3 of "
                                                   "3 seeds)")
    same = ch13.erasure(_removal(top_flips=(0.5, 0.5, 0.5)), top=TOP)
    assert same["ch13_erase_top_att_vs_random"].startswith("as many decisions as a random order, within noise")
    with pytest.raises(ValueError, match="results over seeds"):
        ch13.erasure({label("BiLSTM + tanh", 0.0): "one result"}, top=TOP)
    with pytest.raises(ValueError, match="has no"):
        ch13.erasure({label("BiLSTM + tanh", 0.0): _removal()[label("BiLSTM + tanh", 0.0)]}, top=TOP)


def test_removal_table_shows_shares_over_seeds():
    table = ch13.removal_table(_removal())
    assert list(table.columns) == ["flipped [95% interval]", "mean share erased (where it flips)"]
    assert table.loc[(label("BiLSTM + tanh", 0.0), "attention"), "flipped [95% interval]"].startswith("0.800 [")
    assert table.loc[(label("BiLSTM + tanh", TOP), "random"), "mean share erased (where it flips)"] == \
        pytest.approx(0.6)
