"""Chapter 3's readings (attnlib.presentation.readings.ch03) on small hand-made tables."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib.presentation.readings import ch03, wording

COLS = ("tau_g mean", "tau_loo mean", "tau_g_vs_loo mean", "tau_g sig. frac.", "tau_loo sig. frac.")


def _table(rows):
    """rows: (dataset, model) -> {column: (class 0, class 1)}; other columns 0.5."""
    records = {}
    for (d, m), cols in rows.items():
        for c in (0, 1):
            records[(d, m, c)] = {col: cols.get(col, (0.5, 0.5))[c] for col in COLS}
    table = pd.DataFrame.from_dict(records, orient="index")
    table.index = pd.MultiIndex.from_tuples(table.index, names=["dataset", "model", "predicted class"])
    return table


def _base(**over):
    rows = {
        ("rt-polarity", "lstm+tanh"): {
            "tau_g mean": (0.30, 0.20),
            "tau_loo mean": (0.25, 0.22),
            "tau_g_vs_loo mean": (0.60, 0.55),
        },
        ("rt-polarity", "cnn+tanh"): {
            "tau_g mean": (0.35, 0.33),
            "tau_loo mean": (0.31, 0.30),
            "tau_g_vs_loo mean": (0.50, 0.50),
        },
        ("rt-polarity", "average+tanh"): {
            "tau_g mean": (0.70, 0.68),
            "tau_loo mean": (0.66, 0.64),
            "tau_g_vs_loo mean": (0.69, 0.70),
        },
        ("rt-polarity", "lstm+dot"): {
            "tau_g mean": (0.10, 0.05),
            "tau_loo mean": (0.12, -0.14),
            "tau_g_vs_loo mean": (0.45, 0.40),
        },
        ("imdb", "lstm+tanh"): {"tau_g sig. frac.": (0.91, 0.97), "tau_loo sig. frac.": (0.88, 1.0)},
        ("imdb", "average+tanh"): {"tau_g sig. frac.": (0.99, 0.95)},
        ("synthetic", "lstm+tanh"): {"tau_g mean": (0.40, 0.45), "tau_loo mean": (0.38, 0.41)},
        ("synthetic", "average+tanh"): {"tau_g mean": (0.72, 0.80), "tau_loo mean": (0.75, 0.69)},
    }
    for key, cols in over.items():
        d, m = key.split("__")
        rows[(d.replace("_", "-"), m.replace("_", "+"))].update(cols)
    return _table(rows)


def test_yardstick_when_the_measures_agree_more_with_each_other():
    out = ch03.yardstick(_base())
    assert out["ch03_lstm_gvl"] == "0.60 / 0.55"
    assert out["ch03_lstm_gap"] == "0.30–0.35 higher than"
    # the gap to tau_g: 0.30 (negative), 0.35 (positive); attention agrees least on positive
    assert out["ch03_lstm_widest"] == (
        "the gap to τ_g is widest on sentences predicted positive, where attention agrees least"
    )
    assert out["ch03_avg_rel"] == (
        "attention agrees with gradients (0.70 / 0.68) about as well as gradients agree "
        "with leave-one-out (0.69 / 0.70)"
    )


def test_yardstick_other_branches():
    table = _base(
        rt_polarity__lstm_tanh={"tau_g_vs_loo mean": (0.50, 0.15)},
        rt_polarity__average_tanh={"tau_g mean": (0.80, 0.78)},
    )
    out = ch03.yardstick(table)
    assert out["ch03_lstm_gap"] == "between -0.07 and +0.25 against how well"
    assert out["ch03_lstm_widest"] == "the gap to τ_g is widest on sentences predicted negative"
    assert " better than gradients" in out["ch03_avg_rel"]
    worse = ch03.yardstick(_base(rt_polarity__average_tanh={"tau_g mean": (0.60, 0.58)}))
    assert ") less well than gradients" in worse["ch03_avg_rel"]
    mixed = ch03.yardstick(_base(rt_polarity__average_tanh={"tau_g mean": (0.80, 0.60)}))
    assert ") on one class better and on the other worse than gradients" in mixed["ch03_avg_rel"]


def test_imdb_significance_is_the_range_over_both_measures():
    out = ch03.imdb_significance(_base())
    assert (out["ch03_imdb_sig_min"], out["ch03_imdb_sig_max"]) == (0.5, 1.0)


@pytest.mark.parametrize(
    "g, loo, level, uniform",
    [
        ((0.10, 0.05), (0.12, -0.14), "hardly at all", True),
        ((0.10, 0.05), (0.12, -0.20), "weakly", True),
        ((0.35, 0.05), (0.12, -0.14), "moderately", False),
    ],
)
def test_scaled_dot_levels(g, loo, level, uniform):
    out = ch03.scaled_dot(_base(rt_polarity__lstm_dot={"tau_g mean": g, "tau_loo mean": loo}))
    assert out["ch03_dot"].startswith(f"agrees {level} (τ_g {g[0]:.2f} / {g[1]:.2f}, τ_loo ")
    assert out["ch03_dot"].endswith("agree with each other at 0.45 / 0.40")
    assert out["ch03_dot_why"].startswith("This chapter does not show why.") is uniform
    assert out["ch03_dot_g"] == f"{g[0]:.2f} / {g[1]:.2f}"


def test_summary_pattern_and_every_both_ways():
    out = ch03.summary(_base())
    assert out["ch03_ctx_range"] == "0.20–0.35" and out["ch03_avg_range"] == "0.64–0.70"
    assert out["ch03_pattern"] == "higher, J&W's pattern"
    every = {
        k: {"tau_g_vs_loo mean": (0.9, 0.9)}
        for k in ("rt_polarity__lstm_dot", "imdb__lstm_tanh", "synthetic__lstm_tanh")
    }
    out = ch03.summary(_base(**every))
    assert out["ch03_every"].startswith("for every model with context")
    low = ch03.summary(_base(rt_polarity__average_tanh={"tau_loo mean": (0.30, 0.64)}))
    assert low["ch03_pattern"] == "not clearly higher, unlike in J&W's Table 2"


def test_summary_counts_the_models_that_win_on_both_classes():
    out = ch03.summary(_base())
    # winners: rt-polarity lstm+tanh, cnn+tanh, lstm+dot and synthetic lstm+tanh;
    # imdb lstm+tanh ties at 0.5 (not >) on every column
    assert out["ch03_every"] == "for 4 of the 5 models with context (on both predicted classes)"


def test_synthetic_tau_far_or_below():
    out = ch03.synthetic_tau(_base())
    assert (out["ch03_syn_g"], out["ch03_syn_l"]) == ("0.40 / 0.45", "0.38 / 0.41")
    assert out["ch03_syn_far"] == "far from 1" and out["ch03_syn_avg_range"] == "0.69–0.80"
    near = ch03.synthetic_tau(_base(synthetic__lstm_tanh={"tau_g mean": (0.40, 0.75)}))
    assert near["ch03_syn_far"] == "below 1"


def test_a_missing_column_is_a_clear_error():
    with pytest.raises(ValueError, match="no column 'tau_g_vs_loo mean'"):
        ch03.yardstick(_base().drop(columns="tau_g_vs_loo mean"))


def _agreement(g, loo, g_sd=(0.2, 0.1), n=(100, 25)):
    frame = pd.DataFrame(
        {
            "n": n,
            "tau_g mean": g,
            "tau_g sd": g_sd,
            "tau_g sig. frac.": (0.6, 0.5),
            "tau_loo mean": loo,
            "tau_loo sd": (0.2, 0.2),
            "tau_loo sig. frac.": (0.4, 0.45),
            "tau_g_vs_loo mean": (0.5, 0.5),
        },
        index=pd.Index([0, 1], name="predicted class"),
    )
    return frame


def _paper(g, loo, g_auth=(math.nan, math.nan)):
    return pd.DataFrame(
        {
            "tau_g mean": g,
            "tau_g sd": (0.21, 0.19),
            "tau_g sig. frac.": (0.59, 0.58),
            "tau_g mean (authors' outputs)": g_auth,
            "tau_loo mean": loo,
            "tau_loo sd": (math.nan, math.nan),
            "tau_loo sig. frac.": (0.47, 0.47),
            "tau_loo mean (authors' outputs)": (0.27, 0.32),
        },
        index=pd.Index([0, 1], name="predicted class"),
    )


def _pairs():
    ours = {
        ("rt-polarity", "lstm"): _agreement((0.30, 0.35), (0.25, 0.40)),
        ("rt-polarity", "average"): _agreement((0.65, 0.69), (0.60, 0.61), g_sd=(0.15, 0.3), n=(25, 100)),
        ("imdb", "average"): _agreement((0.70, 0.71), (0.6, 0.6)),
    }
    paper = {
        ("rt-polarity", "lstm"): _paper((0.40, 0.38), (0.34, 0.33), g_auth=(0.34, 0.36)),
        ("rt-polarity", "average"): _paper((0.69, 0.69), (0.61, 0.60)),
        ("imdb", "average"): _paper((0.65, 0.66), (0.6, 0.6)),
    }
    return ours, paper


def test_comparison_tallies_ours_against_each_source_and_skips_missing_figures():
    out = ch03.comparison(*_pairs())
    assert out["ch03_lstm_g"] == "0.30 / 0.35" and out["ch03_lstm_l"] == "0.25 / 0.40"
    # se: tau_g 0.02 / 0.02, tau_loo 0.02 / 0.04. Printed 0.40 / 0.38 and 0.34 / 0.33:
    # below, within noise; below, within noise (0.40 - 0.33 = 0.07 < 1.96 * 0.04)
    assert out["ch03_lstm_vs_printed"] == "below in 2 of the 4 comparisons and within noise in 2"
    # authors': 0.34 / 0.36 and 0.27 / 0.32: below, within noise; within noise, and 0.40 is
    # above 0.32 (0.08 > 1.96 * 0.04)
    assert out["ch03_lstm_vs_auth"] == "within noise in 2 of the 4 comparisons, below in 1 and above in 1"
    assert out["ch03_imdb_avg_vs_printed"] == "above in 2 of the 4 comparisons and within noise in 2"
    # the Average rows have no authors' tau_g (NaN): only tau_loo's two figures are counted
    assert out["ch03_avg_vs_auth"].endswith("in both comparisons")
    assert out["ch03_sources_gap"] == "0.07"  # the BiLSTM's tau_loo: printed 0.34, authors' 0.27
    assert out["ch03_avg_more"] == "and it does"
    ours, paper = _pairs()
    ours[("rt-polarity", "average")] = _agreement((0.32, 0.69), (0.6, 0.6))
    assert ch03.comparison(ours, paper)["ch03_avg_more"].startswith("yet here it does not")
    del ours[("imdb", "average")]
    with pytest.raises(ValueError, match="imdb"):
        ch03.comparison(ours, paper)


@pytest.mark.parametrize("words, said", [
    (["below"] * 4, "below in all 4 comparisons"),
    (["above", "above"], "above in both comparisons"),
    (["below", "below", "below", "within noise"], "below in 3 of the 4 comparisons and within noise in 1"),
    (["within noise", "below", "above", "within noise"],
     "within noise in 2 of the 4 comparisons, below in 1 and above in 1"),
])
def test_the_tally_counts_each_verdict_in_words(words, said):
    assert wording.tally(words) == said


def test_a_tally_of_nothing_is_refused():
    with pytest.raises(ValueError, match="at least one verdict"):
        wording.tally([])


def test_sampling_reads_standard_errors_and_the_largest_gap():
    out = ch03.sampling(*_pairs())
    # se: lstm 0.2/10, 0.1/5; average 0.15/5, 0.3/10 -> 0.02, 0.02, 0.03, 0.03
    assert out["ch03_se_min"] == pytest.approx(0.02) and out["ch03_se_max"] == pytest.approx(0.03)
    assert out["ch03_maxdiff"] == pytest.approx(0.10)
    assert out["ch03_maxdiff_where"] == "lstm+tanh, predicted negative"
    assert out["ch03_maxdiff_se"] == pytest.approx(0.10 / 0.03)


def test_paper_table_has_one_row_per_model_and_measure_with_verdicts_per_class():
    ours, paper = _pairs()
    table = ch03.paper_table(ours, paper)
    assert list(table.index.get_level_values("model").unique()) == ["lstm+tanh", "average+tanh"]
    assert list(table.index.get_level_values("dataset").unique()) == ["rt-polarity", "imdb"]
    assert table.columns.tolist() == ["ours", "ours, 95% interval", "J&W printed", "ours vs printed",
                                      "authors' outputs", "ours vs authors'"]
    row = table.loc[("rt-polarity", "lstm+tanh", "τ_g")]
    assert row["ours"] == "0.30 / 0.35" and row["ours, 95% interval"] == "[0.26, 0.34] / [0.31, 0.39]"
    assert row["J&W printed"] == "0.40 / 0.38" and row["ours vs printed"] == "below / within noise"
    assert row["authors' outputs"] == "0.34 / 0.36"
    sd = table.loc[("rt-polarity", "lstm+tanh", "τ_g sd")]
    assert sd["ours, 95% interval"] == "n/a" and sd["ours vs printed"] == "n/a"  # no interval for an sd
    assert table.loc[("rt-polarity", "average+tanh", "τ_g"), "authors' outputs"] == "n/a"  # NaN there
    # a Sig. Frac. gets Wilson's interval: 0.60 of 100 -> [0.50, 0.69], so 0.59 is within noise
    row = table.loc[("rt-polarity", "lstm+tanh", "τ_g Sig. Frac.")]
    assert row["ours vs printed"] == "within noise / within noise"
    assert row["ours, 95% interval"].startswith("[0.50, 0.69] / ")
    # all 100 sentences significant: Wilson's interval still has width (0.963 to 1), so a
    # printed 0.99 is within noise; a normal interval would have no width and say "above"
    ours[("rt-polarity", "lstm")].loc[:, "tau_g sig. frac."] = 1.0
    ours[("rt-polarity", "lstm")].loc[:, "n"] = 100
    paper[("rt-polarity", "lstm")].loc[:, "tau_g sig. frac."] = 0.99
    full = ch03.paper_table(ours, paper).loc[("rt-polarity", "lstm+tanh", "τ_g Sig. Frac.")]
    assert full["ours vs printed"] == "within noise / within noise"
    assert full["ours, 95% interval"] == "[0.96, 1.00] / [0.96, 1.00]"
    with pytest.raises(ValueError, match="no paper frame"):
        ch03.paper_table(ours, {})


def test_class_gap_sample_sizes_and_first_token():
    assert ch03.class_gap(_base()) == {"ch03_lstm_classes": "0.10"}
    assert ch03.sample_sizes({"rt-polarity": 500, "imdb": np.int64(100)}) == {
        "ch03_n_rt": 500,
        "ch03_n_imdb": 100,
    }
    with pytest.raises(ValueError, match="imdb"):
        ch03.sample_sizes({"rt-polarity": 500})
    attention = [
        np.array([0.5, 0.2, 0.3]),
        np.array([0.1, 0.9]),
        np.array([0.4, 0.4, 0.2]),
        np.array([0.2, 0.3]),
    ]
    assert ch03.first_token(attention) == {"ch03_first": 0.5}
    with pytest.raises(ValueError, match="empty"):
        ch03.first_token([])


@settings(max_examples=60, deadline=None)
@given(st.floats(-1, 1), st.floats(-1, 1), st.floats(0.01, 0.5), st.integers(2, 400))
def test_a_verdict_says_within_noise_exactly_when_the_paper_lies_inside_our_interval(ours, ref, sd, n):
    frame = _agreement((ours, ours), (0.0, 0.0), g_sd=(sd, sd), n=(n, n))
    paper = {key: _paper((ref, ref), (0.0, 0.0)) for key in _pairs()[1]}
    verdict = ch03.paper_table({("rt-polarity", "lstm"): frame}, paper).iloc[0]["ours vs printed"]
    se = sd / math.sqrt(n)
    inside = abs(ours - ref) <= 1.959964 * se
    if abs(abs(ours - ref) - 1.959964 * se) > 1e-9:  # not on the edge, where rounding decides
        word = "within noise" if inside else "above" if ours > ref else "below"
        assert verdict == f"{word} / {word}"
