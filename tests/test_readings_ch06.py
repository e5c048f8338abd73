"""attnlib.presentation.readings.ch06: Chapter 6's readings on small hand-made tables."""
import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnlib import uncertainty
from attnlib.presentation.readings import ch06


def make_table(scores=None):
    """One encoder per data set; scores: (dataset, attention) -> (F1, accuracy, ROC-AUC)."""
    base = {
        ("rt-polarity", "trained"): (0.80, 0.78, 0.86),
        ("rt-polarity", "uniform"): (0.79, 0.79, 0.86),
        ("imdb", "trained"): (0.85, 0.85, 0.92),
        ("imdb", "uniform"): (0.86, 0.84, 0.93),
        ("synthetic", "trained"): (0.99, 0.99, 1.0),
        ("synthetic", "uniform"): (0.985, 0.98, 1.0),
        ("synthetic-long", "trained"): (0.95, 0.95, 0.99),
        ("synthetic-long", "uniform"): (0.66, 0.50, 0.52),
    }
    base.update(scores or {})
    encoder = {"rt-polarity": "lstm", "imdb": "cnn", "synthetic": "average",
               "synthetic-long": "average"}
    return pd.DataFrame(
        [{"dataset": d, "encoder": encoder[d], "attention": a, "F1": f, "accuracy": acc,
          "ROC-AUC": auc} for (d, a), (f, acc, auc) in base.items()]
    )


def gaps_of(table, wp=0.009, half=0.0005):
    """UniformComparison.gap()'s frame: ours with an interval of +- ``half``."""
    t = table.set_index(["dataset", "encoder", "attention"])["F1"]
    gap = {(d, e): t[(d, e, "trained")] - t[(d, e, "uniform")] for d, e in zip(table["dataset"], table["encoder"])}
    rows = [{"dataset": d, "encoder": e, "F1 gap (ours)": gap[d, e], "low": gap[d, e] - half,
             "high": gap[d, e] + half, "F1 gap (W&P)": wp if d == "rt-polarity" else np.nan}
            for d, e in dict.fromkeys(zip(table["dataset"], table["encoder"]))]
    return pd.DataFrame(rows).set_index(["dataset", "encoder"])


@given(st.floats(-1, 1), st.floats(-1, 1))
def test_ahead_is_antisymmetric(a, b):
    there, back = ch06.ahead(a, b), ch06.ahead(b, a)
    assert {there, back} == ({"level"} if a == b else {"ahead", "behind"})


def test_scores_glues_every_dataset_metric_and_gap():
    table = make_table()
    out = ch06.scores(table, gaps_of(table, half=0.002))
    assert out["ch06_rt_f1_t"] == 0.80 and out["ch06_rt_f1_u"] == 0.79
    assert out["ch06_imdb_acc_u"] == 0.84 and out["ch06_long_auc_t"] == 0.99
    assert out["ch06_syn_gap"] == pytest.approx(0.005)
    assert out["ch06_long_gap"] == pytest.approx(0.29)
    assert out["ch06_syn_gap_ci"] == "0.003 to 0.007"  # 0.005 +- 0.002, as an interval
    assert len(out) == 4 * (6 + 2)


def _accuracy_change(uniform_right: int, trained_right: int, n: int = 400):
    """A paired accuracy comparison, uniform minus trained: the models get the first
    ``uniform_right`` and the last ``trained_right`` of ``n`` sentences right."""
    uniform = (np.arange(n) < uniform_right).astype(float)
    trained = (np.arange(n) >= n - trained_right).astype(float)
    return uncertainty.compare(uniform, trained, paired=True)


def test_gaps_without_our_interval_are_refused():
    table = make_table()
    with pytest.raises(ValueError, match="'low'"):
        ch06.rt_polarity(table, gaps_of(table).drop(columns=["low"]), accuracy_change=_accuracy_change(300, 300))


def test_scores_needs_every_dataset():
    table = make_table()
    with pytest.raises(ValueError, match="imdb"):
        ch06.scores(table[table.dataset != "imdb"], gaps_of(table))


def test_rt_polarity_directions():
    table = make_table()
    out = ch06.rt_polarity(table, gaps_of(table), accuracy_change=_accuracy_change(300, 296))
    assert out["ch06_rt_gap_pts"] == pytest.approx(1.0)
    assert out["ch06_rt_f1_dir"] == "below"
    assert out["ch06_rt_vs_paper"] == "above"  # our gap 0.010 +- 0.0005 against W&P's 0.009
    wide = ch06.rt_polarity(table, gaps_of(table, half=0.02), accuracy_change=_accuracy_change(300, 296))
    assert wide["ch06_rt_vs_paper"] == "within noise of"  # the same gap, an interval that holds 0.009
    assert out["ch06_rt_acc_dir"] == "level within noise"  # 4 sentences of 400 apart, 200 discordant pairs
    low, high = map(float, out["ch06_rt_acc_ci"].split(" to "))
    assert low < 0.01 < high


def test_rt_polarity_other_branches():
    table = make_table({("rt-polarity", "uniform"): (0.805, 0.77, 0.85)})
    ahead = ch06.rt_polarity(table, gaps_of(table), accuracy_change=_accuracy_change(390, 200))
    assert ahead["ch06_rt_f1_dir"] == "above"
    assert ahead["ch06_rt_vs_paper"] == "below"
    assert ahead["ch06_rt_acc_dir"] == "ahead beyond noise"
    behind = ch06.rt_polarity(table, gaps_of(table), accuracy_change=_accuracy_change(200, 390))
    assert behind["ch06_rt_acc_dir"] == "behind beyond noise"


def test_imdb_says_whether_the_gap_is_beyond_noise():
    table = make_table()
    narrow = ch06.imdb(table, gaps_of(table, half=0.002), encoder="cnn")  # IMDB gap 0.01 +- 0.002
    assert narrow == {"ch06_imdb_enc": "CNN", "ch06_imdb_gap_verdict": "beyond noise"}
    wide = ch06.imdb(table, gaps_of(table, half=0.05), encoder="cnn")
    assert wide["ch06_imdb_gap_verdict"] == "within noise"
    with pytest.raises(ValueError, match="encoder"):
        ch06.imdb(table, gaps_of(table), encoder="gru")


def test_long_task_attention_needed():
    out = ch06.long_task(make_table(), predicted=[1, 1, 1, 0], labels=[1, 0, 1, 0])
    assert out["ch06_long_predpos"] == 0.75
    assert out["ch06_allpos_f1"] == pytest.approx(2 * 0.5 / 1.5)
    assert out["ch06_syn_clause"] == "its 1–5 markers among 10–40 words survive averaging"
    assert out["ch06_long_acc_gap"] == pytest.approx(0.45)
    assert out["ch06_long_needed"] == "Here attention is needed."


def test_long_task_uniform_keeps_up():
    table = make_table({("synthetic", "uniform"): (0.95, 0.95, 1.0),
                        ("synthetic-long", "uniform"): (0.9, 0.9, 0.95)})
    out = ch06.long_task(table, predicted=[1, 0], labels=[1, 0])
    assert out["ch06_syn_clause"] == "averaging costs it F1 even here"
    assert out["ch06_long_needed"] == "Even here, in this run, uniform attention nearly keeps up."
    with pytest.raises(ValueError, match="1-d of one length"):
        ch06.long_task(table, predicted=[1, 0, 1], labels=[1, 0])


def curve(tanh_p, uniform_p):
    lengths = [10, 50, 150, 300]
    return pd.concat([
        pd.DataFrame({"model": "average + tanh", "length": lengths, "p(positive)": tanh_p,
                      "attention on marker": [0.9, 0.8, 0.7, 0.6]}),
        pd.DataFrame({"model": "average + uniform", "length": lengths, "p(positive)": uniform_p,
                      "attention on marker": [1 / n for n in lengths]}),
    ], ignore_index=True)


def test_dilution_reads_the_curve():
    c = curve([0.97, 0.96, 0.95, 0.93], [0.8, 0.55, 0.52, 0.51])
    out = ch06.dilution(c, ["average + tanh", "average + uniform"])
    assert (out["ch06_dil_att_10"], out["ch06_dil_att_150"], out["ch06_dil_att_300"]) == (0.9, 0.7, 0.6)
    assert out["ch06_dil_t_p"] == "stays between 0.93 and 0.97"
    assert (out["ch06_dil_u_p10"], out["ch06_dil_u_lo"], out["ch06_dil_u_hi"]) == (0.8, 0.51, 0.55)


def test_dilution_flat_curve_and_bad_names():
    c = curve([0.971, 0.972, 0.973, 0.972], [0.8, 0.55, 0.52, 0.51])
    assert ch06.dilution(c, ["average + tanh", "average + uniform"])["ch06_dil_t_p"] == "stays at 0.97"
    with pytest.raises(ValueError, match="tanh and a uniform"):
        ch06.dilution(c, ["average + tanh"])


def test_with_intervals_shows_f1_with_its_bootstrap_interval():
    from types import SimpleNamespace

    from sklearn.metrics import f1_score

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 200)
    trained = np.where(rng.random(200) < 0.8, labels, 1 - labels)
    uniform = np.where(rng.random(200) < 0.7, labels, 1 - labels)
    table = make_table({("rt-polarity", "trained"): (f1_score(labels, trained), 0.8, 0.9),
                        ("rt-polarity", "uniform"): (f1_score(labels, uniform), 0.7, 0.8)})
    table["F1 (W&P)"] = np.where(table.dataset == "rt-polarity", 0.83, np.nan)
    rt = SimpleNamespace(labels=labels, predicted={("lstm", "trained"): trained, ("lstm", "uniform"): uniform})
    others = {d: SimpleNamespace(labels=None, predicted={}) for d in ("imdb", "synthetic", "synthetic-long")}
    shown = ch06.with_intervals(table, {"rt-polarity": rt, **others})
    cell = shown.loc[("rt-polarity", "lstm", "trained"), "F1 [95% interval]"]
    assert cell == uncertainty.f1(labels, trained).format(3)
    assert cell.startswith(f"{f1_score(labels, trained):.3f} [")
    low, high = (float(x) for x in cell.split("[")[1].rstrip("]").split(", "))
    assert low < f1_score(labels, trained) < high
    assert shown.loc[("imdb", "cnn", "uniform"), "F1 [95% interval]"] == "0.860"  # no predictions kept
    assert list(shown.columns) == ["F1 [95% interval]", "accuracy", "ROC-AUC", "F1 (W&P)"]
    with pytest.raises(ValueError, match="no entry"):
        ch06.with_intervals(table, {"rt-polarity": rt})
    with pytest.raises(ValueError, match="F1 \\(W&P\\)"):
        ch06.with_intervals(table.drop(columns="F1 (W&P)"), {"rt-polarity": rt, **others})
