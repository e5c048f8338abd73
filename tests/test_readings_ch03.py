"""Chapter 3's readings (attnlib.presentation.readings.ch03) on small hand-made stacks over seeds."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from attnlib import uncertainty
from attnlib.experiments.importance import ImportanceResult, agreement
from attnlib.presentation.readings import ch03, wording
from attnlib.seeds import SeedResults

N = 240  # sentences per model


def _model(seed=0, *, g=(0.30, 0.20), loo=(0.25, 0.22), gvl=(0.60, 0.55), S=3, n=N, sd=0.15, seed_sd=0.0,
           shift=None, sig=(0.6, 0.5)):
    """One model's stacks: S seeds x n sentences, class means ``g``, ``loo``, ``gvl`` per predicted
    class (seed k's means moved by ``shift[k]`` or by N(0, seed_sd)), Sig. Fracs about ``sig``."""
    rng = np.random.default_rng(seed)
    predicted = (rng.random((S, n)) < 0.5).astype(float)
    shifts = np.asarray(shift if shift is not None else rng.normal(0, seed_sd, S), float)[:, None]
    out = {"predicted": predicted}
    for (tau, p), means in zip(ch03.TAUS.items(), (g, loo, gvl)):
        centre = np.where(predicted == 0, means[0], means[1]) + shifts
        out[tau] = centre + _noise(rng, predicted, sd)
        share = np.where(predicted == 0, sig[0], sig[1])
        out[p] = np.where(rng.random((S, n)) < share, 0.01, 0.5)
    out["first"] = (rng.random((S, n)) < 0.1).astype(float)
    return out


def _noise(rng, predicted, sd):
    """N(0, sd) noise whose mean is exactly 0 and whose population sd is exactly ``sd`` within
    every seed's class: the stacks' class means and sds are then the ones asked for."""
    noise = rng.normal(0, 1, predicted.shape)
    for k in range(predicted.shape[0]):
        for c in (0, 1):
            cell = predicted[k] == c
            noise[k, cell] = (noise[k, cell] - noise[k, cell].mean()) / noise[k, cell].std() * sd
    return noise


def _stacks(**over):
    models = {
        ("rt-polarity", "lstm", "tanh"): dict(seed=1, g=(0.30, 0.20), loo=(0.25, 0.22), gvl=(0.60, 0.55)),
        ("rt-polarity", "lstm", "dot"): dict(seed=2, g=(0.05, 0.03), loo=(0.04, 0.02), gvl=(0.45, 0.40)),
        ("rt-polarity", "cnn", "tanh"): dict(seed=3, g=(0.35, 0.33), loo=(0.31, 0.30), gvl=(0.50, 0.50)),
        ("rt-polarity", "average", "tanh"): dict(seed=4, g=(0.70, 0.68), loo=(0.66, 0.64), gvl=(0.70, 0.69)),
        ("imdb", "average", "tanh"): dict(seed=5, g=(0.70, 0.71), loo=(0.60, 0.60), gvl=(0.75, 0.75), sig=(1.0, 0.97)),
        ("synthetic", "lstm", "tanh"): dict(seed=6, g=(0.40, 0.45), loo=(0.38, 0.41), gvl=(0.60, 0.60)),
        ("synthetic", "average", "tanh"): dict(seed=7, g=(0.72, 0.80), loo=(0.75, 0.69), gvl=(0.80, 0.80)),
    }
    for key, changes in over.items():
        d, e, a = key.split("__")
        models[(d.replace("_", "-"), e, a)].update(changes)
    return {key: _model(**kw) for key, kw in models.items()}


# ----------------------------------------------------------------------------- stacks and the table
def _result(rng, n_sentences=30, offset=0):
    lengths = rng.integers(4, 9, n_sentences)
    attention = [rng.random(k) for k in lengths]
    gradient = [a + rng.normal(0, 0.3, len(a)) for a in attention]
    loo = [rng.random(k) for k in lengths]
    probs = rng.random((n_sentences, 1))
    probs = np.hstack([1 - probs, probs])
    return ImportanceResult(attention=attention, gradient=gradient, loo=loo, probs=probs,
                            predicted=probs.argmax(1), labels=rng.integers(0, 2, n_sentences),
                            indices=np.arange(n_sentences) + offset, lengths=lengths)


def test_agreement_stacks_stack_every_column_by_sentence_and_match_jw_s_table_for_one_seed():
    rng = np.random.default_rng(0)
    results = (_result(rng), _result(rng))
    runs = SeedResults((0, 1), results)
    stacks = ch03.agreement_stacks(runs)
    assert set(stacks) == {"predicted", "tau_g", "p_g", "tau_loo", "p_loo", "tau_g_vs_loo", "p_g_vs_loo", "first"}
    assert all(v.shape == (2, 30) for v in stacks.values())
    assert stacks["first"][1].tolist() == [float(np.argmax(a) == 0) for a in results[1].attention]
    one = ch03.agreement_table({("d", "lstm", "tanh"): {k: v[:1] for k, v in stacks.items()}})
    table = agreement(results[0])
    for column in ("tau_g mean", "tau_g sd", "tau_g sig. frac.", "tau_g_vs_loo mean"):
        assert one[column].to_numpy() == pytest.approx(table[column].to_numpy())
    assert one["n"].tolist() == table["n"].tolist() and one["seeds"].tolist() == [1, 1]
    with pytest.raises(ValueError, match="run_over_seeds"):
        ch03.agreement_stacks(results[0])


def test_agreement_table_gives_the_mean_of_the_seeds_class_means():
    s = _model(g=(0.30, 0.20), S=3, shift=(0.0, 0.1, 0.2))
    table = ch03.agreement_table({("rt-polarity", "lstm", "tanh"): s})
    per_seed = [np.nanmean(np.where(s["predicted"][k] == 0, s["tau_g"][k], np.nan)) for k in range(3)]
    assert table.loc[("rt-polarity", "lstm+tanh", 0), "tau_g mean"] == pytest.approx(np.mean(per_seed))
    assert table.loc[("rt-polarity", "lstm+tanh", 0), "seeds"] == 3
    assert table.loc[("rt-polarity", "lstm+tanh", 1), "tau_g sig. frac."] == pytest.approx(0.5, abs=0.06)
    with pytest.raises(ValueError, match="lacks the columns"):
        ch03.agreement_table({("d", "lstm", "tanh"): {"predicted": s["predicted"]}})


# ----------------------------------------------------------------------------- the table's readings
def test_yardstick_when_the_measures_agree_more_with_each_other_in_every_seed():
    out = ch03.yardstick(_stacks())
    assert out["ch03_lstm_gvl"] == "0.60 / 0.55"
    # gaps 0.30, 0.35 (negative), 0.35, 0.33 (positive), each beyond noise in every seed
    assert out["ch03_lstm_gap"] == "0.30–0.35 higher than attention agrees with either (holds in 3 of 3 seeds)"
    assert out["ch03_avg_rel"].startswith(
        "attention agrees with gradients (0.70 / 0.68) as well as, within noise, gradients agree "
        "with leave-one-out (0.70 / 0.69; difference ")
    assert out["ch03_avg_rel"].endswith("of 3 seeds alone)")


def test_yardstick_other_branches():
    low = ch03.yardstick(_stacks(rt_polarity__lstm__tanh=dict(gvl=(0.29, 0.21))))
    assert low["ch03_lstm_gap"].startswith("between ")
    assert "within noise of τ_g (in none of 3 seeds alone)" in low["ch03_lstm_gap"]
    better = ch03.yardstick(_stacks(rt_polarity__average__tanh=dict(g=(0.80, 0.78))))
    assert ") better than gradients" in better["ch03_avg_rel"] and "holds in 3 of 3 seeds" in better["ch03_avg_rel"]
    worse = ch03.yardstick(_stacks(rt_polarity__average__tanh=dict(g=(0.60, 0.58))))
    assert ") less well than gradients" in worse["ch03_avg_rel"]


def test_yardstick_a_difference_in_one_seed_of_three_is_no_verdict():
    # the Average model's tau_g above its tau(gradient, loo) by 0.3 in one seed only
    s = _model(seed=4, g=(0.70, 0.68), loo=(0.66, 0.64), gvl=(0.70, 0.69), sd=0.05)
    s["tau_g"] = s["tau_g"] + np.array([0.3, 0.0, 0.0])[:, None]
    stacks = _stacks()
    stacks[("rt-polarity", "average", "tanh")] = s
    out = ch03.yardstick(stacks)["ch03_avg_rel"]
    assert "as well as, within noise," in out and "beyond noise in 1 of 3 seeds alone" in out


def test_class_gap_within_noise_says_no_class_agrees_least():
    stacks = _stacks(rt_polarity__lstm__tanh=dict(g=(0.39, 0.39), gvl=(0.60, 0.60)))
    out = ch03.class_gap(stacks)
    assert "within noise" in out["ch03_lstm_classes"] and out["ch03_lstm_classes"].startswith("0.0")
    assert out["ch03_lstm_widest"].startswith("that gap is the same on both predicted classes within noise")
    assert out["ch03_classes_why"].startswith("Its two predicted classes agree alike within noise")


def test_class_gap_names_the_class_when_every_seed_shows_it():
    # positive: tau_g 0.20 against 0.30, gap 0.40 against 0.30: attention agrees least there
    out = ch03.class_gap(_stacks(rt_polarity__lstm__tanh=dict(gvl=(0.60, 0.60))))
    assert out["ch03_lstm_classes"].startswith("0.10 apart in τ_g (95% interval over seeds and sentences ")
    assert "higher on sentences predicted negative, holds in 3 of 3 seeds" in out["ch03_lstm_classes"]
    assert out["ch03_lstm_widest"] == (
        "the gap to τ_g is wider on sentences predicted positive (holds in 3 of 3 seeds), where attention agrees "
        "least")
    assert out["ch03_classes_why"].startswith("Where its two predicted classes agree differently")


def test_class_difference_is_the_difference_of_the_class_means_and_widens_with_the_seeds():
    s = _model(S=3, shift=(0.0, 0.1, 0.2))
    z = ch03._class_difference(s["tau_g"], s["predicted"])
    for k in range(3):
        m = [np.mean(s["tau_g"][k][s["predicted"][k] == c]) for c in (0, 1)]
        assert np.mean(z[k]) == pytest.approx(m[0] - m[1])
    # a seed-dependent class gap: the seeds' spread widens the interval
    calm = _model(S=3, sd=0.1, seed=9)
    moved = {**calm, "tau_g": calm["tau_g"] + np.where(calm["predicted"] == 0, 1, 0) * np.array([0, 0.1, 0.2])[:, None]}
    w_calm = ch03._classes_compared(calm, calm["tau_g"], 0).difference
    w_moved = ch03._classes_compared(moved, moved["tau_g"], 0).difference
    assert (w_moved.high - w_moved.low) > 3 * (w_calm.high - w_calm.low)


def test_a_class_gap_in_one_seed_of_three_is_not_a_verdict():
    s = _model(g=(0.30, 0.30), gvl=(0.6, 0.6), sd=0.05, seed=11)
    s["tau_g"] = s["tau_g"] + np.where(s["predicted"] == 0, 0.2, 0.0) * np.array([1.0, 0.0, 0.0])[:, None]
    stacks = _stacks()
    stacks[("rt-polarity", "lstm", "tanh")] = s
    out = ch03.class_gap(stacks)
    assert "within noise, beyond noise in 1 of 3 seeds alone" in out["ch03_lstm_classes"]


def test_imdb_significance_is_the_range_over_both_measures():
    out = ch03.imdb_significance(_stacks())
    assert out["ch03_imdb_sig_min"] == pytest.approx(0.97, abs=0.03) and out["ch03_imdb_sig_max"] == 1.0
    with pytest.raises(ValueError, match="imdb"):
        ch03.imdb_significance({k: v for k, v in _stacks().items() if k[0] != "imdb"})


def test_scaled_dot_far_below_the_tanh_bilstm_and_within_noise():
    out = ch03.scaled_dot(_stacks())
    assert out["ch03_dot"].startswith("agrees less than the tanh BiLSTM (by 0.21 in τ_g, 95% interval over seeds and "
                                      "sentences ")
    assert "; holds in 3 of 3 seeds): τ_g 0.05 / 0.03" in out["ch03_dot"]
    low, high = (float(x) for x in out["ch03_dot"].split("sentences ")[1].split(";")[0].split(" to "))
    assert 0 < low < 0.21 < high  # the size's interval, not the negative difference's
    assert out["ch03_dot"].endswith("agree with each other at 0.45 / 0.40")
    assert "above zero beyond noise" in out["ch03_dot"]
    assert out["ch03_dot_why"].startswith("This chapter does not show why.")
    same = ch03.scaled_dot(_stacks(rt_polarity__lstm__dot=dict(g=(0.30, 0.20), seed=1)))
    assert same["ch03_dot"].startswith("agrees no differently, within noise, than the tanh BiLSTM (by 0.00 in τ_g")
    assert same["ch03_dot_why"].startswith("What sets it apart")
    zero = ch03.scaled_dot(_stacks(rt_polarity__lstm__dot=dict(g=(0.0, 0.0))))
    assert "within noise of zero" in zero["ch03_dot"]


def test_summary_pattern_and_every_over_seeds():
    out = ch03.summary(_stacks())
    assert out["ch03_ctx_range"] == "0.20–0.35" and out["ch03_avg_range"] == "0.64–0.70"
    assert out["ch03_pattern"] == ("higher in all 4 comparisons, beyond noise (against the BiLSTM, holds in 3 of 3 "
                                   "seeds; against the CNN, holds in 3 of 3 seeds), J&W's pattern")
    assert out["ch03_every"].startswith("for every model with context")  # lstm+tanh, lstm+dot, cnn+tanh, synthetic
    assert "beyond noise over 3 seeds and the sentences:" in out["ch03_every"]
    low = ch03.summary(_stacks(rt_polarity__average__tanh=dict(loo=(0.25, 0.22))))
    assert low["ch03_pattern"].startswith("higher beyond noise in 2 of the 4 comparisons (against the BiLSTM, ")
    assert low["ch03_pattern"].endswith("so J&W's pattern holds only in part here")
    # the CNN's tau(gradient, loo) no higher than its tau_g on the positive class
    some = ch03.summary(_stacks(rt_polarity__cnn__tanh=dict(gvl=(0.50, 0.33))))
    assert some["ch03_every"] == "for 3 of the 4 models with context (on both predicted classes, beyond noise over 3 " \
                                 "seeds and the sentences)"


def test_models_with_one_seed_are_read_as_one_model():
    stacks = _stacks()
    for key in [k for k in stacks if k not in ch03.SEEDED]:
        stacks[key] = {c: v[:1] for c, v in stacks[key].items()}
    out = ch03.summary(stacks)
    # the Average model (3 seeds) against the CNN (1): their first seeds' models alone
    assert out["ch03_pattern"].startswith("higher in all 4 comparisons, beyond noise (against the BiLSTM, holds in "
                                          "3 of 3 seeds; against the CNN, from one model)")
    assert "over seeds and sentences where a model has several seeds, over the sentences where it has one" in \
        out["ch03_every"]
    dot = ch03.scaled_dot(stacks)["ch03_dot"]
    assert dot.startswith("agrees less than the tanh BiLSTM (by 0.21 in τ_g, 95% interval over the sentences of "
                          "one model ")
    assert "; from one model): τ_g 0.05 / 0.03" in dot
    assert "over the sentences of one model, both classes together" in ch03.synthetic_tau(stacks)["ch03_syn_far"]
    note = ch03.seeds_note(stacks)
    assert note["ch03_n_seeds"] == 3
    assert note["ch03_seeded"] == ("over 3 training seeds for rt-polarity lstm+tanh and rt-polarity average+tanh, "
                                   "from one model for the others")
    assert note["ch03_one_model"].startswith(" The other rows of the first table (rt-polarity lstm+dot, ")
    assert "rest on one trained model each" in note["ch03_one_model"]
    assert "spends the retraining on rt-polarity lstm+tanh and rt-polarity average+tanh, which most" in \
        note["ch03_one_model"]
    # IMDB's Average model, one of the paper's rows, on one seed: its verdicts say so
    ours, paper = _pairs()
    ours[("imdb", "average")] = stacks[("imdb", "average", "tanh")]
    out = ch03.comparison(ours, paper)
    assert out["ch03_imdb_avg_seeds_printed"] == " (from one model)"
    assert out["ch03_lstm_seeds_printed"].endswith("of the 3 seeds on its own)")
    row = ch03.paper_table(ours, paper).loc[("imdb", "average+tanh", "τ_g")]
    assert row["seeds"] == 1 and row["ours vs printed"] == "above / above"
    assert ch03._two_models(np.ones((3, 4)), np.zeros((1, 4)), 0).one_model


def test_synthetic_tau_reads_the_interval_against_one():
    out = ch03.synthetic_tau(_stacks())
    assert (out["ch03_syn_g"], out["ch03_syn_l"]) == ("0.40 / 0.45", "0.38 / 0.41")
    assert out["ch03_syn_far"].startswith("95% interval over seeds and sentences, both classes together: 0.4")
    assert out["ch03_syn_far"].endswith("below the 1 of identical rankings")
    assert out["ch03_syn_avg_range"] == "0.69–0.80"
    near = ch03.synthetic_tau(_stacks(synthetic__lstm__tanh=dict(g=(0.999, 0.999), sd=0.05)))
    assert near["ch03_syn_far"].endswith("reaching the 1 of identical rankings")


def test_a_missing_model_or_column_is_a_clear_error():
    stacks = _stacks()
    with pytest.raises(ValueError, match="no model"):
        ch03.yardstick({k: v for k, v in stacks.items() if k[1] != "average"})
    stacks[("rt-polarity", "lstm", "tanh")].pop("tau_g_vs_loo")
    with pytest.raises(ValueError, match="lacks the columns"):
        ch03.yardstick(stacks)


# ----------------------------------------------------------------------------- beside the paper
def _paper(g, loo, g_auth=(math.nan, math.nan), g_sig=(0.59, 0.58)):
    return pd.DataFrame(
        {
            "tau_g mean": g,
            "tau_g sd": (0.21, 0.19),
            "tau_g sig. frac.": g_sig,
            "tau_g mean (authors' outputs)": g_auth,
            "tau_loo mean": loo,
            "tau_loo sd": (math.nan, math.nan),
            "tau_loo sig. frac.": (0.47, 0.47),
            "tau_loo mean (authors' outputs)": (0.27, 0.32),
        },
        index=pd.Index([0, 1], name="predicted class"),
    )


def _pairs():
    stacks = _stacks()
    ours = {(d, e): stacks[(d, e, "tanh")] for d, e in (("rt-polarity", "lstm"), ("rt-polarity", "average"),
                                                        ("imdb", "average"))}
    paper = {
        ("rt-polarity", "lstm"): _paper((0.40, 0.21), (0.34, 0.22), g_auth=(0.34, 0.36)),
        ("rt-polarity", "average"): _paper((0.69, 0.69), (0.61, 0.60)),
        ("imdb", "average"): _paper((0.65, 0.66), (0.6, 0.6), g_sig=(0.99, 0.99)),
    }
    return ours, paper


def test_comparison_tallies_ours_against_each_source_and_skips_missing_figures():
    out = ch03.comparison(*_pairs())
    assert out["ch03_lstm_g"] == "0.30 / 0.20" and out["ch03_lstm_l"] == "0.25 / 0.22"
    # printed 0.40 / 0.21 and 0.34 / 0.22 against ours 0.30 / 0.20 and 0.25 / 0.22 (se about 0.01)
    assert out["ch03_lstm_vs_printed"] == "below in 2 of the 4 comparisons and within noise in 2"
    assert out["ch03_lstm_seeds_printed"] == " (each verdict above or below shows in 3 of the 3 seeds on its own)"
    # authors': 0.34 / 0.36 and 0.27 / 0.32: below in all four
    assert out["ch03_lstm_vs_auth"] == "below in all 4 comparisons"
    # the Average rows have no authors' tau_g (NaN): only tau_loo's two figures are counted
    assert out["ch03_avg_vs_auth"].endswith("in both comparisons")
    assert out["ch03_imdb_avg_vs_printed"].startswith("above in ")
    assert out["ch03_sources_gap"] == "0.15"  # the BiLSTM's tau_g, positive: printed 0.21, authors' 0.36
    assert out["ch03_avg_more"].startswith("and it does, by 0.4")
    assert "holds in 3 of 3 seeds" in out["ch03_avg_more"]
    ours, paper = _pairs()
    ours[("rt-polarity", "average")] = _model(g=(0.30, 0.20), seed=1)
    assert "within noise" in ch03.comparison(ours, paper)["ch03_avg_more"]
    ours[("rt-polarity", "average")] = _model(g=(0.10, 0.10), seed=1)
    assert ch03.comparison(ours, paper)["ch03_avg_more"].startswith("yet here it agrees less")
    del ours[("imdb", "average")]
    with pytest.raises(ValueError, match="imdb"):
        ch03.comparison(ours, paper)


def test_a_gap_to_the_paper_in_one_seed_of_three_is_not_a_verdict():
    ours, paper = _pairs()
    s = _model(g=(0.40, 0.21), loo=(0.34, 0.22), seed=1, sd=0.05)
    s["tau_g"] = s["tau_g"] - np.array([0.15, 0.0, 0.0])[:, None]  # one seed far below the paper's tau_g
    ours[("rt-polarity", "lstm")] = s
    table = ch03.paper_table(ours, paper)
    assert table.loc[("rt-polarity", "lstm+tanh", "τ_g"), "ours vs printed"] == "within noise / within noise"
    out = ch03.comparison(ours, paper)
    assert out["ch03_lstm_vs_printed"] == "within noise in all 4 comparisons"
    assert out["ch03_lstm_seeds_printed"] == ""


def test_seeds_that_disagree_beyond_noise_are_said_so():
    ours, paper = _pairs()
    ours[("rt-polarity", "lstm")] = _model(g=(0.40, 0.21), loo=(0.34, 0.22), seed=1, sd=0.05,
                                           shift=(0.1, 0.0, -0.1))
    row = ch03.paper_table(ours, paper).loc[("rt-polarity", "lstm+tanh", "τ_g")]
    assert row["ours vs printed"] == "seeds disagree / seeds disagree"
    assert ch03.comparison(ours, paper)["ch03_lstm_vs_printed"].startswith("split by the seeds in ")


def test_the_tally_counts_each_verdict_in_words():
    assert wording.tally(["below"] * 4) == "below in all 4 comparisons"
    assert wording.tally(["within noise", "below", "above", "within noise"]) == \
        "within noise in 2 of the 4 comparisons, below in 1 and above in 1"


def test_sampling_reads_sentence_and_seed_noise_and_the_largest_gap():
    out = ch03.sampling(*_pairs())
    assert 0.005 < out["ch03_se_min"] <= out["ch03_se_max"] < 0.02  # 0.15 / sqrt(about 200)
    assert out["ch03_maxdiff"] == pytest.approx(0.10, abs=0.02)
    assert out["ch03_maxdiff_where"] == "lstm+tanh, predicted negative"
    assert out["ch03_maxdiff_said"].startswith("outside our interval over 3 seeds and the sentences (holds in 3 of 3")
    ours, paper = _pairs()
    paper[("rt-polarity", "lstm")] = _paper((0.30, 0.20), (0.34, 0.22))
    paper[("rt-polarity", "average")] = _paper((0.70, 0.68), (0.61, 0.60))
    inside = ch03.sampling(ours, paper)
    assert inside["ch03_maxdiff_said"].startswith("inside our interval over seeds and sentences")
    spread = ch03.sampling({**ours, ("rt-polarity", "lstm"): _model(shift=(0.0, 0.1, 0.2), seed=1)}, paper)
    lo, hi = (float(x) for x in spread["ch03_seed_range_lstm"].split("–"))
    assert hi - lo > 0.2  # the seeds' class means: 0.20 to 0.50


def test_paper_table_has_one_row_per_model_and_measure_with_verdicts_over_seeds():
    ours, paper = _pairs()
    table = ch03.paper_table(ours, paper)
    assert list(table.index.get_level_values("model").unique()) == ["lstm+tanh", "average+tanh"]
    assert list(table.index.get_level_values("dataset").unique()) == ["rt-polarity", "imdb"]
    assert table.columns.tolist() == ["seeds", "ours, mean over seeds", "95% interval over seeds and sentences",
                                      "J&W printed", "ours vs printed", "authors' outputs", "ours vs authors'"]
    row = table.loc[("rt-polarity", "lstm+tanh", "τ_g")]
    assert row["seeds"] == 3 and row["ours, mean over seeds"] == "0.30 / 0.20"
    iv = uncertainty.over_seeds(np.where(ours[("rt-polarity", "lstm")]["predicted"] == 0,
                                         ours[("rt-polarity", "lstm")]["tau_g"], np.nan))
    assert row["95% interval over seeds and sentences"].startswith(f"[{iv.low:.2f}, {iv.high:.2f}] / ")
    assert row["J&W printed"] == "0.40 / 0.21" and row["ours vs printed"] == "below (3 of 3 seeds) / within noise"
    assert row["authors' outputs"] == "0.34 / 0.36"
    sd = table.loc[("rt-polarity", "lstm+tanh", "τ_g sd")]
    assert sd["95% interval over seeds and sentences"] == "n/a" and sd["ours vs printed"] == "n/a"
    assert sd["ours, mean over seeds"] == "0.15 / 0.15"
    assert table.loc[("rt-polarity", "average+tanh", "τ_g"), "authors' outputs"] == "n/a"
    with pytest.raises(ValueError, match="no paper frame"):
        ch03.paper_table(ours, {})


def test_a_sig_frac_where_every_sentence_is_significant_keeps_wilson_s_width():
    ours, paper = _pairs()
    s = dict(ours[("imdb", "average")])
    s["p_g"] = np.full_like(s["p_g"], 0.001)  # every sentence significant in every seed
    ours[("imdb", "average")] = s
    row = ch03.paper_table(ours, paper).loc[("imdb", "average+tanh", "τ_g Sig. Frac.")]
    # the bootstrap's interval is [1, 1]; Wilson's, on the 120 sentences of a seed's class, reaches
    # below 0.99 (the seeds score the same sentences: they do not count three times)
    assert row["ours vs printed"] == "within noise / within noise"
    assert row["95% interval over seeds and sentences"].startswith("[0.97, 1.00]")
    paper[("imdb", "average")] = _paper((0.65, 0.66), (0.6, 0.6), g_sig=(0.9, 0.9))
    assert ch03.paper_table(ours, paper).loc[("imdb", "average+tanh", "τ_g Sig. Frac."), "ours vs printed"] == \
        "above (3 of 3 seeds) / above (3 of 3 seeds)"


def test_one_model_reads_over_the_sentences_alone():
    ours, paper = _pairs()
    ours = {k: {c: v[:1] for c, v in s.items()} for k, s in ours.items()}
    table = ch03.paper_table(ours, paper)
    assert table.loc[("rt-polarity", "lstm+tanh", "τ_g"), "ours vs printed"] == "below / within noise"
    assert table.loc[("rt-polarity", "lstm+tanh", "τ_g"), "seeds"] == 1
    assert ch03.comparison(ours, paper)["ch03_lstm_seeds_printed"] == " (from one model)"
    out = ch03.sampling(ours, paper)
    assert out["ch03_maxdiff_said"].startswith("outside our interval over the sentences, but from one model")


# ----------------------------------------------------------------------------- the rest
def test_sample_sizes_first_token_and_seeds_note():
    assert ch03.sample_sizes({"rt-polarity": 500, "imdb": np.int64(100)}) == {"ch03_n_rt": 500, "ch03_n_imdb": 100}
    with pytest.raises(ValueError, match="imdb"):
        ch03.sample_sizes({"rt-polarity": 500})
    attention = [np.array([0.5, 0.2, 0.3]), np.array([0.1, 0.9]), np.array([0.4, 0.4, 0.2]), np.array([0.2, 0.3])]
    assert ch03.first_token(attention) == {"ch03_first": 0.5}
    with pytest.raises(ValueError, match="empty"):
        ch03.first_token([])
    stacks = _stacks()
    stacks[("rt-polarity", "lstm", "tanh")]["first"] = np.array([[1.0, 0, 0, 0], [0, 0, 0, 0], [1, 1, 0, 0]])
    said = ch03.first_token_over_seeds(stacks)["ch03_first_seeds"]
    assert said.startswith("25% (95% interval ") and said.endswith("; the seeds: 25%, 0% and 50%)")
    assert ch03.seeds_note(stacks) == {"ch03_n_seeds": 3, "ch03_seeded": "over 3 training seeds",
                                       "ch03_one_model": ""}
    stacks[("imdb", "average", "tanh")] = {k: v[:2] for k, v in stacks[("imdb", "average", "tanh")].items()}
    note = ch03.seeds_note(stacks)
    assert note["ch03_one_model"].startswith(" The other rows of the first table (imdb average+tanh) rest on fewer "
                                             "seeds (their `seeds` column)")
    assert note["ch03_seeded"].endswith(", fewer for the others")


def _variants(unk_shift=-0.15, through_shift=-0.03):
    jw = _model(seed=1, sd=0.1)
    rng = np.random.default_rng(5)
    through = {**jw, "tau_g": jw["tau_g"] + through_shift + _noise(rng, jw["predicted"], 0.05)}
    unk = {**jw, "tau_loo": jw["tau_loo"] + unk_shift + _noise(rng, jw["predicted"], 0.05),
           "tau_g_vs_loo": jw["tau_g_vs_loo"] - 0.2}
    return {"jw": jw, "through": through, "unk": unk}


def test_conventions_compare_the_two_moves_over_seeds():
    v = _variants()
    out = ch03.conventions(v)
    assert out["ch03_conv_through_tau_g"] == pytest.approx(out["ch03_conv_jw_tau_g"] - 0.03)
    assert out["ch03_conv_unk_tau_loo"] == pytest.approx(out["ch03_conv_jw_tau_loo"] - 0.15)
    assert out["ch03_conv_which"] == "here the replacement moves τ more than detaching does (holds in 3 of 3 seeds)"
    assert out["ch03_conv_unk_change"].startswith("a change of -0.150, 95% interval -0.1")
    assert out["ch03_conv_unk_change"].endswith(" over seeds and sentences")
    other = ch03.conventions(_variants(unk_shift=0.01, through_shift=-0.1))
    assert other["ch03_conv_which"].startswith("here detaching moves τ more")
    same = ch03.conventions(_variants(unk_shift=0.05, through_shift=-0.05))
    assert same["ch03_conv_which"].startswith("here the two moves are the same size within noise")
    table = ch03.conventions_table(v)
    assert table.index.tolist() == list(ch03.VARIANTS.values())
    assert table.columns.tolist() == ["seeds", "tau_g", "tau_loo", "tau_g_vs_loo"]
    with pytest.raises(ValueError, match="variants must be exactly"):
        ch03.conventions({"jw": v["jw"]})


def test_recovery_over_seeds_reads_means_intervals_and_the_random_row():
    rng = np.random.default_rng(0)
    recovery = {
        m: {"attention": 1 - 0.05 * rng.random((3, 200)), "gradient": np.ones((3, 200)),
            "loo": 0.9 + 0.1 * rng.random((3, 200)), "random": np.full((3, 200), 0.125)}
        for m in ("lstm+tanh", "average+tanh")
    }
    table, out = ch03.recovery_over_seeds(recovery)
    assert table.loc[("lstm+tanh", "gradient"), "precision@k"] == 1.0
    assert table.loc[("lstm+tanh", "gradient"), "seeds"] == 3
    assert out["ch03_syn_gradient_min"] == 1.0 and out["ch03_syn_loo_min"] == pytest.approx(0.95, abs=0.01)
    assert out["ch03_syn_random"] == 0.125 and out["ch03_syn_one_in"] == 8
    assert out["ch03_syn_beyond"] == "far more often than chance (every interval over seeds and sentences lies above " \
        "the random row's)"
    assert out["ch03_syn_over"] == "3 seeds each" and out["ch03_syn_found"] == "far more often than chance"
    one = {m: {k: v[:1] for k, v in r.items()} for m, r in recovery.items()}
    assert ch03.recovery_over_seeds(one)[1]["ch03_syn_over"] == "one trained model each"
    recovery["lstm+tanh"]["loo"] = np.full((3, 200), 0.125)
    short = ch03.recovery_over_seeds(recovery)[1]
    assert short["ch03_syn_beyond"].startswith("more often than chance on average")
    assert short["ch03_syn_found"] == "more often than chance on average"
    with pytest.raises(ValueError, match="lacks the measures"):
        ch03.recovery_over_seeds({"lstm+tanh": {"attention": np.ones((3, 5))}})


def test_recovery_stacks_score_each_seed_against_the_rationales():
    from types import SimpleNamespace

    rng = np.random.default_rng(2)
    results = (_result(rng, 10), _result(rng, 10))
    truth = [np.arange(k) < 2 for k in results[0].lengths]  # the first two tokens are the rationale
    for r in results:
        r.lengths[:] = results[0].lengths
        for field in ("attention", "gradient", "loo"):
            getattr(r, field)[:] = [np.r_[np.ones(2), np.zeros(k - 2)] for k in r.lengths]
    stacks = ch03.recovery_stacks(SeedResults((0, 1), results), SimpleNamespace(rationales=truth))
    assert stacks["attention"].shape == (2, 10) and np.all(stacks["attention"] == 1.0)
    assert stacks["random"][0] == pytest.approx([2 / k for k in results[0].lengths])
    with pytest.raises(ValueError, match="no rationales"):
        ch03.recovery_stacks(SeedResults((0, 1), results), SimpleNamespace(rationales=None))
