"""attnlib.presentation.readings.ch13: Chapter 13's readings, on small hand-made tables."""
import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnlib import uncertainty
from attnlib.presentation.readings import ch13
from attnlib.presentation.readings.ch13 import label

TOP = 1.0
DELETED = "accuracy, impermissible tokens deleted"


@given(st.sampled_from(["BiLSTM + tanh", "transformer"]), st.floats(0, 10, allow_nan=False))
def test_label_names_a_model_as_the_tables_do(family, lam):
    assert label(family, lam) == f"{family}, λ = {lam:g}"
    assert label(family, lam).startswith(family + ", λ = ")


def test_label_examples():
    assert label("transformer", 1.0) == "transformer, λ = 1"
    assert label("BiLSTM + tanh", 0.1) == "BiLSTM + tanh, λ = 0.1"
    assert label("BiLSTM + tanh", 0.0) == "BiLSTM + tanh, λ = 0"


N = 400  # test sentences


def _correct(accuracy: float, shift: int = 0) -> np.ndarray:
    """N sentences, accuracy x N of them right: those from ``shift`` on. A penalised model (shift
    60) gets some sentences right that the unpenalised one (shift 0) gets wrong, and the reverse,
    as real models do, so that a small change is within noise and a large one beyond it."""
    return (np.arange(N) - shift) % N < round(accuracy * N)


def _table(lstm=(0.75, 0.74), tf=(0.78, 0.70), deleted=(0.5, 0.51, 0.49, 0.52), shift=60):
    rows = {label("BiLSTM + tanh", 0.0): (lstm[0], 40.0, deleted[0]),
            label("BiLSTM + tanh", TOP): (lstm[1], 0.01, deleted[1]),
            label("transformer", 0.0): (tf[0], 30.0, deleted[2]),
            label("transformer", TOP): (tf[1], 0.002, deleted[3])}
    table = pd.DataFrame.from_dict(rows, orient="index",
                                   columns=["accuracy", "impermissible attention (%)", DELETED])
    return _with_values(table, shift)


def _with_values(table, shift=60):
    """deception_table's per-sentence values behind each row's accuracy and mass."""
    table["correct"] = [_correct(a, 0 if n.endswith("λ = 0") else shift) for n, a in table["accuracy"].items()]
    table["mass"] = [np.full(N, m) for m in table["impermissible attention (%)"]]
    return table


SUMMARY = pd.Series({"impermissible tokens (mean share)": 0.4})


def test_accuracy_and_mass_values():
    out = ch13.accuracy_and_mass(_table(), SUMMARY, top=TOP)
    assert out["ch13_top_lambda"] == "1" and out["ch13_share"] == 0.4
    assert out["ch13_lstm_0_acc"] == 0.75 and out["ch13_lstm_top_mass"] == 0.01
    assert out["ch13_tf_top_acc"] == 0.70 and out["ch13_tf_0_mass"] == 30.0
    assert out["ch13_tf_top_deleted"] == 0.52 and out["ch13_lstm_0_deleted"] == 0.5
    assert out["ch13_lstm_drop"] == pytest.approx(0.01)
    assert out["ch13_tf_drop"] == pytest.approx(0.08)
    assert out["ch13_deleted_max"] == 0.52
    assert out["ch13_lstm_verdict"] == "keeps its accuracy within noise"  # 60 lost, 56 gained of 400
    assert out["ch13_lstm_state"] == "at 0.740"
    assert out["ch13_tf_verdict"] == "loses accuracy beyond noise"  # 60 lost, 28 gained of 400
    low, high = map(float, out["ch13_tf_drop_ci"].split(" to "))
    assert 0 < low <= 0.08 <= high
    assert len(out) == 2 + 12 + 6 + 1 + 2


def test_accuracy_and_mass_other_branches():
    out = ch13.accuracy_and_mass(_table(lstm=(0.75, 0.52), tf=(0.78, 0.76)), SUMMARY, top=TOP)
    assert out["ch13_lstm_verdict"] == "loses accuracy beyond noise"
    assert out["ch13_lstm_state"] == "at chance"  # 0.52 of 400: 0.5 lies inside its interval
    assert out["ch13_tf_verdict"] == "keeps its accuracy within noise"
    gained = ch13.accuracy_and_mass(_table(tf=(0.70, 0.78)), SUMMARY, top=TOP)
    assert gained["ch13_tf_verdict"] == "gains accuracy beyond noise"


def test_identical_models_keep_their_accuracy():
    out = ch13.accuracy_and_mass(_table(lstm=(0.75, 0.75), tf=(0.7, 0.7), shift=0), SUMMARY, top=TOP)
    assert out["ch13_lstm_verdict"] == out["ch13_tf_verdict"] == "keeps its accuracy within noise"
    assert out["ch13_tf_drop_ci"] == "0.000 to 0.000"


def test_the_reading_needs_the_per_sentence_values():
    bare = _table().drop(columns=["correct"])
    with pytest.raises(ValueError, match="per-sentence values"):
        ch13.accuracy_and_mass(bare, SUMMARY, top=TOP)


def test_with_intervals_shows_ours_with_bootstrap_intervals():
    t = _table()
    shown = ch13.with_intervals(t.assign(n=N))
    assert list(shown.columns) == ["accuracy [95% interval]", "impermissible attention (%) [95% interval]", DELETED]
    row = shown.loc[label("transformer", 0.0)]
    assert row["accuracy [95% interval]"] == str(uncertainty.bootstrap(_correct(0.78).astype(float)))
    assert row["impermissible attention (%) [95% interval]"] == "30.000 [30.000, 30.000]"  # constant: no spread
    assert row[DELETED] == "0.490"


def test_accuracy_and_mass_needs_the_deleted_column():
    with pytest.raises(ValueError, match="deleted"):
        ch13.accuracy_and_mass(_table().drop(columns=DELETED), SUMMARY, top=TOP)


def test_mean_shares_skips_nan_sentences():
    per_sentence = {"m1": {"attention": np.array([0.1, np.nan, 0.3]), "gradient": np.array([0.5, 0.5])},
                    "m2": {"attention": np.array([0.0, 1.0])}}
    shares = ch13.mean_shares(per_sentence)
    assert list(shares.index) == ["m1", "m2"] and list(shares.columns) == ["attention", "gradient"]
    assert shares.loc["m1", "attention"] == pytest.approx(0.2)
    assert shares.loc["m2", "attention"] == 0.5 and np.isnan(shares.loc["m2", "gradient"])
    with pytest.raises(ValueError):
        ch13.mean_shares({})


MEASURES = ["attention", "gradient", "leave-one-out", "rollout"]


def _per_sentence(tf_top, tf_0, lstm_top, n=40, seed=0):
    """Per-sentence shares scattered (a little) around the given means."""
    rng = np.random.default_rng(seed)
    make = lambda means: {m: v + rng.normal(0, 0.005, n) for m, v in zip(MEASURES, means) if v is not None}
    return {label("transformer", TOP): make(tf_top), label("transformer", 0.0): make(tf_0),
            label("BiLSTM + tanh", TOP): make(lstm_top)}


def test_explanations_values_and_one_branch_each():
    per_sentence = _per_sentence((0.001, 0.5, 0.45, 0.6), (0.5, 0.55, 0.5, 0.62), (0.002, 0.3, 0.35, None))
    shares = ch13.mean_shares(per_sentence)
    token_share = np.full(40, 0.4)
    out = ch13.explanations(shares, per_sentence, token_share, top=TOP, n_explained=40)
    assert out["ch13_n_explained"] == 40
    assert out["ch13_tf_top_att"] == pytest.approx(0.001, abs=0.003)
    assert out["ch13_tf_0_roll"] == pytest.approx(0.62, abs=0.003)
    assert out["ch13_lstm_top_grad"] == pytest.approx(0.3, abs=0.003)
    assert out["ch13_lstm_top_loo"] == pytest.approx(0.35, abs=0.003)
    assert out["ch13_others_move"] == "far less"
    assert out["ch13_others_fooled"] == "none of them is fooled the way attention is"
    assert out["ch13_seeing"] == "gradient, leave-one-out, rollout"


def test_explanations_other_branches():
    per_sentence = _per_sentence((0.01, 0.05, 0.3, 0.2), (0.5, 0.55, 0.5, 0.62), (0.002, 0.3, 0.35, None))
    shares = ch13.mean_shares(per_sentence)
    out = ch13.explanations(shares, per_sentence, np.full(40, 0.4), top=TOP, n_explained=40)
    assert out["ch13_others_move"] == "almost as much"  # gradient fell by 0.5, attention by 0.49
    assert out["ch13_others_fooled"] == "some of them are fooled too"  # gradient 0.05 < 10 x 0.01
    assert out["ch13_seeing"] == "none of them: each is within noise of, or below, that share"


def test_explanations_needs_every_measure():
    per_sentence = _per_sentence((0.001, 0.5, 0.45, 0.6), (0.5, 0.55, 0.5, 0.62), (0.002, 0.3, 0.35, None))
    shares = ch13.mean_shares(per_sentence).drop(columns="rollout")
    with pytest.raises(ValueError, match="rollout"):
        ch13.explanations(shares, per_sentence, np.full(40, 0.4), top=TOP, n_explained=40)


def _removal(never0=(0.2, 0.3, 0.9), never1=(0.95, 0.6, 1.0)):
    frames = {
        label("BiLSTM + tanh", lam): pd.DataFrame(
            {"never_flipped": never, "mean_fraction_removed": [0.3, 0.2, 0.6]},
            index=["attention", "gradient", "random"])
        for lam, never in ((0.0, never0), (TOP, never1))
    }
    return pd.concat(frames, axis=0)


def test_erasure_reading():
    out = ch13.erasure(_removal(), top=TOP)
    assert out["ch13_erase0_attention_flips"] == pytest.approx(0.8)
    assert out["ch13_erase0_gradient_flips"] == pytest.approx(0.7)
    assert out["ch13_erase0_random_flips"] == pytest.approx(0.1)
    assert out["ch13_erasetop_attention_flips"] == pytest.approx(0.05)
    assert out["ch13_erasetop_random_flips"] == 0.0
    assert out["ch13_erase0_att"] == 0.3 and out["ch13_erase0_grad"] == 0.2
    assert len(out) == 8
    with pytest.raises(ValueError, match="never_flipped"):
        ch13.erasure(_removal().drop(columns="never_flipped"), top=TOP)


def test_the_bilstm_is_compared_with_pruthi_at_the_same_lambda():
    t = _table()
    assert "no BiLSTM at λ = 0.1" in ch13.accuracy_and_mass(t, SUMMARY, top=TOP)["ch13_lstm_at_pruthi"]
    rows = dict(zip(t.columns, (0.53, 0.02, 0.5)))
    lost = _with_values(pd.concat([t, pd.DataFrame([rows], index=[label("BiLSTM + tanh", 0.1)])]))
    words = ch13.accuracy_and_mass(lost, SUMMARY, top=TOP)["ch13_lstm_at_pruthi"]
    assert words == "ours goes from 0.750 to 0.530 at λ = 0.1, so at the same λ both lose accuracy (ours beyond noise)"
    kept = _with_values(pd.concat([t, pd.DataFrame([dict(rows, accuracy=0.74)], index=[label("BiLSTM + tanh", 0.1)])]))
    assert "ours keeps its accuracy within noise, where theirs does not" in ch13.accuracy_and_mass(
        kept, SUMMARY, top=TOP)["ch13_lstm_at_pruthi"]


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


class _Run:
    def __init__(self, accuracy, mass):
        self.test, self.mass = {"accuracy": accuracy}, {"test": mass}


def test_beside_pruthi_is_ours_over_seeds_beside_their_table():
    from scipy import stats

    from attnlib import published

    acc = {("transformer", 0.0): (0.80, 0.82, 0.78), ("transformer", 1.0): (0.79, 0.81, 0.80),
           ("BiLSTM + tanh", 0.0): (0.70, 0.72, 0.71), ("BiLSTM + tanh", 1.0): (0.60, 0.50, 0.55)}
    runs = {(*key, i): _Run(a, 0.001 * (i + 1) if key[1] else 0.5)
            for key, values in acc.items() for i, a in enumerate(values)}
    table, out = ch13.beside_pruthi(runs)
    assert set(out) == ({f"ch13_{f}_{w}_{k}_seeds" for f in ("tf", "lstm") for w in ("0", "top") for k in ("acc", "mass")}
                        | {"ch13_tf_seeds", "ch13_lstm_seeds", "ch13_tf_seeds_text", "ch13_lstm_seeds_text",
                           "ch13_lstm_seeds_sentence"})
    assert out["ch13_lstm_seeds_sentence"] == "The BiLSTM's rows come from 3 seeds too."
    assert out["ch13_tf_seeds"] == 3
    x = 100 * np.array(acc["transformer", 0.0])  # oracle: the t interval written out
    half = stats.t.ppf(0.975, 2) * x.std(ddof=1) / np.sqrt(3)
    want = f"{x.mean():.1f} [{x.mean() - half:.1f}, {x.mean() + half:.1f}]"
    assert table.loc["transformer, λ = 0", "accuracy %, ours"] == want
    assert out["ch13_tf_0_acc_seeds"] == want
    assert table.loc["transformer, λ = 1", "mass %, theirs"] == "< 0.001"
    assert table.loc["BiLSTM + tanh, λ = 1", "accuracy %, theirs"] == (
        f"{published.PRUTHI_TABLE3['BiLSTM + attention', 1.0][0].value:.1f}")  # 61.0, as printed
    assert table.loc["transformer, λ = 0", "mass %, ours"] == "50.0 [50.0, 50.0]"  # large: 1 decimal
    assert table.loc["transformer, λ = 0", "mass %, theirs"] == "59.0"
    low = float(table.loc["transformer, λ = 1", "mass %, ours"]
                .split("[")[1].split(",")[0])
    assert low >= 0  # a share's interval is cut at 0
    one = {key: run for key, run in runs.items() if key[0] != "BiLSTM + tanh" or key[2] == 0}
    table, out = ch13.beside_pruthi(one)  # a family of one seed: its value, said to be one seed
    assert table.loc["BiLSTM + tanh, λ = 0", "accuracy %, ours"] == "70.0 (1 seed)"
    assert table.loc["BiLSTM + tanh, λ = 1", "mass %, ours"] == "0.100 (1 seed)"  # 0.001 of the attention
    assert out["ch13_lstm_seeds"] == 1 and out["ch13_tf_seeds"] == 3
    assert (out["ch13_lstm_seeds_text"], out["ch13_tf_seeds_text"]) == ("one seed", "3 seeds")
    assert out["ch13_lstm_seeds_sentence"].startswith("The BiLSTM's rows come from one seed: a BiLSTM")
    with pytest.raises(ValueError, match="non-empty dict"):
        ch13.beside_pruthi({})
    with pytest.raises(ValueError, match="non-empty dict"):
        ch13.beside_pruthi({("transformer", 0.0): runs["transformer", 0.0, 0]})
    with pytest.raises(ValueError, match="differ in their number of seeds"):
        ch13.beside_pruthi({**runs, ("transformer", 0.1, 0): runs["transformer", 0.0, 0]})


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
