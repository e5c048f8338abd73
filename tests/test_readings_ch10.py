"""Chapter 10's readings (attnlib.presentation.readings.ch10) on small hand-made results."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib.erasure import RANKINGS, RankedRemovalResult, SingleWeightResult
from attnlib.presentation.readings import ch10

LSTM, AVG = "lstm + tanh", "average + tanh"


def _single(top_weight, random_weight, jsd_top, jsd_random):
    n = len(top_weight)
    z = np.zeros(n)
    return SingleWeightResult(
        probs=np.full((n, 2), 0.5), predicted=np.zeros(n, int), labels=np.zeros(n, int),
        indices=np.arange(n), lengths=np.full(n, 5),
        jsd_top=np.asarray(jsd_top, float), jsd_random=np.asarray(jsd_random, float),
        flip_top=z.astype(bool), flip_random=z.astype(bool),
        top_weight=np.asarray(top_weight, float), random_weight=np.asarray(random_weight, float),
        top_token=z.astype(int), random_token=z.astype(int),
        probs_top=np.full((n, 2), 0.5), probs_random=np.full((n, 2), 0.5),
    )


def _summary(tcm=(0.95, 0.92), flip_top=(0.05, 0.2), med=(0.01, 0.02), n=842):
    rows = {
        "n": (n, n), "flip_top": flip_top, "flip_random": (0.002, 0.03),
        "top_changes_more": tcm, "median_jsd_difference": med,
    }
    return pd.DataFrame({m: {r: v[i] for r, v in rows.items()} for i, m in enumerate((LSTM, AVG))}, dtype=object)


def _singles(lstm_top=(0.9, 0.8, 0.7, 0.6), avg_top=(0.3, 0.2, 0.1, 0.4)):
    rw = [0.1, 0.1, 0.1, 0.1]
    return {
        LSTM: _single(lstm_top, rw, [0.1, 0.2, 0.3, 0.9], [0.0, 0.0, 0.0, 0.0]),
        AVG: _single(avg_top, rw, [0.5, 0.1, 0.1, 0.1], [0.0, 0.0, 0.0, 0.0]),
    }


def test_single_weight_values():
    out = ch10.single_weight(_summary(), _singles())
    assert out["ch10_n"] == 842
    assert out["ch10_flip_top_lstm"] == 0.05 and out["ch10_flip_top_avg"] == 0.2
    assert out["ch10_flip_random_avg"] == 0.03
    assert out["ch10_top_changes_more_lstm"] == 0.95
    assert out["ch10_median_jsd_difference_avg"] == 0.02
    # the largest Delta JSD of the BiLSTM is its 4th sentence (gap 0.6 - 0.1), of the Average model its 1st
    assert out["ch10_bigdiff_weight_lstm"] == pytest.approx(0.5)
    assert out["ch10_bigdiff_weight_avg"] == pytest.approx(0.2)
    assert out["ch10_top_weight_lstm"] == pytest.approx(0.75)
    assert out["ch10_top_weight_lstm_median"] == pytest.approx(0.75)
    assert out["ch10_top_weight_avg_median"] == pytest.approx(0.25)
    assert all(isinstance(out[k], float) for k in out if k.startswith("ch10_flip"))


@pytest.mark.parametrize("tcm, points, first, yes", [
    ((0.95, 0.9), "Almost every point lies", "That is", "yes"),
    ((0.95, 0.6), "Most points lie", "That is", "yes"),
    ((0.95, 0.5), "For one model at most half the points lie", "So Serrano", "not for both"),
])
def test_the_first_finding_follows_the_smaller_share(tcm, points, first, yes):
    out = ch10.single_weight(_summary(tcm=tcm), _singles())
    assert out["ch10_points"] == points
    assert out["ch10_first_finding"].startswith(first)
    assert out["ch10_yes_tcm"] == yes


@pytest.mark.parametrize("med, word", [((0.01, 0.02), "larger"), ((0.02, 0.01), "smaller"), ((0.02, 0.02), "smaller")])
def test_the_average_models_median_gap_in_words(med, word):
    assert ch10.single_weight(_summary(med=med), _singles())["ch10_avg_med_dir"] == word


@pytest.mark.parametrize("flip_top, yes_rare, start", [
    ((0.05, 0.09), "yes", "Their second finding holds too"),
    ((0.05, 0.2), "BiLSTM yes, Average no", "Their second finding holds for the BiLSTM model"),
    ((0.2, 0.05), "Average yes, BiLSTM no", "Their second finding holds for the Average model"),
    ((0.1, 0.2), "no", "Their second finding does not hold"),
])
def test_the_second_finding_reads_fewer_than_one_in_ten(flip_top, yes_rare, start):
    out = ch10.second_finding(_summary(flip_top=flip_top), _singles())
    assert out["ch10_yes_rare"] == yes_rare
    assert out["ch10_second_finding"].startswith(start)


@pytest.mark.parametrize("flip_top, avg_top, clause", [
    ((0.05, 0.2), (0.3, 0.2, 0.1, 0.4), "so erasing its top weight flips more decisions, though that weight is smaller"),
    ((0.05, 0.2), (0.9, 0.9, 0.9, 0.9), "so erasing its top weight flips more decisions"),
    ((0.2, 0.2), (0.3, 0.2, 0.1, 0.4), "yet here erasing its top weight flips no more decisions than for the BiLSTM"),
])
def test_the_average_models_clause(flip_top, avg_top, clause):
    out = ch10.second_finding(_summary(flip_top=flip_top), _singles(avg_top=avg_top))
    assert out["ch10_avg_flip_clause"] == clause


def test_wrong_models_or_rows_are_refused():
    with pytest.raises(ValueError, match="models"):
        ch10.single_weight(_summary().rename(columns={LSTM: "lstm"}), _singles())
    with pytest.raises(ValueError, match="flip_top"):
        ch10.second_finding(_summary().drop(index="flip_top"), _singles())
    with pytest.raises(ValueError, match="single"):
        ch10.single_weight(_summary(), {LSTM: _singles()[LSTM]})


# ----------------------------------------------------------------------------- ranked removal
def _ranked(fractions):
    """fractions: {ranking: per-sentence fraction erased at the flip, NaN where it never flips}."""
    rankings = tuple(fractions)
    frac = np.column_stack([np.asarray(fractions[k], float) for k in rankings])
    n = frac.shape[0]
    flipped = ~np.isnan(frac)
    return RankedRemovalResult(
        probs=np.full((n, 2), 0.5), predicted=np.zeros(n, int), labels=np.zeros(n, int),
        indices=np.arange(n), lengths=np.full(n, 10), rankings=rankings, flipped=flipped,
        n_removed=np.where(flipped, np.nan_to_num(frac) * 10, -1).astype(int), fraction_removed=frac,
        ranks=np.zeros((n, len(rankings), 10), int),
    )


NAN = np.nan


def _curves(att, rnd, grad, axg):
    return _ranked({"attention": att, "random": rnd, "gradient": grad, "attention_x_gradient": axg})


def test_flip_shares():
    r = _curves([0.1, NAN, NAN, NAN], [NAN] * 4, [0.1, 0.2, 0.3, NAN], [0.5] * 4)
    out = ch10.flip_shares({LSTM: r, AVG: r})
    assert out["ch10_flipped_attention_lstm"] == 0.25 and out["ch10_never_attention_lstm"] == 0.75
    assert out["ch10_flipped_random_avg"] == 0.0 and out["ch10_never_random_avg"] == 1.0
    assert out["ch10_flipped_gradient_avg"] == 0.75
    assert out["ch10_flipped_attention_x_gradient_lstm"] == 1.0
    assert len(out) == 2 * 2 * len(RANKINGS)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.booleans(), min_size=4, max_size=4), min_size=1, max_size=12))
def test_flipped_and_never_add_to_one(rows):
    flips = np.array(rows)
    r = _ranked({k: np.where(flips[:, j], 0.5, np.nan) for j, k in enumerate(RANKINGS)})
    out = ch10.flip_shares({LSTM: r, AVG: r})
    for k in RANKINGS:
        assert out[f"ch10_flipped_{k}_lstm"] + out[f"ch10_never_{k}_lstm"] == pytest.approx(1.0)
        assert out[f"ch10_flipped_{k}_avg"] == pytest.approx(flips[:, RANKINGS.index(k)].mean())


def test_curve_areas():
    r = _curves([0.25, NAN], [NAN, NAN], [0.5, 0.5], [1.0, 0.0])
    areas = ch10.curve_areas({LSTM: r})[LSTM]
    assert areas == pytest.approx({"attention": 0.375, "random": 0.0, "gradient": 0.5, "attention_x_gradient": 0.5})


# areas: attention, random, gradient, attention_x_gradient (4 sentences that all flip at 1 - area)
def _with_areas(att, rnd, grad, axg):
    return _curves(*([1 - a] * 4 for a in (att, rnd, grad, axg)))


@pytest.mark.parametrize("lstm, avg, att_vs_random, grad_vs_att", [
    ((0.5, 0.1, 0.8, 0.7), (0.5, 0.1, 0.8, 0.7), "yes, for both models", "yes, for both models"),
    ((0.5, 0.1, 0.8, 0.4), (0.05, 0.1, 0.8, 0.7), "only for the BiLSTM", "only for the Average model"),
    ((0.05, 0.1, 0.4, 0.4), (0.05, 0.1, 0.04, 0.7), "no, for neither model", "only for the BiLSTM"),
    ((0.5, 0.1, 0.4, 0.8), (0.5, 0.1, 0.3, 0.3), "yes, for both models", "no, for neither model"),
])
def test_rankings_compared_for_both_one_or_neither(lstm, avg, att_vs_random, grad_vs_att):
    out = ch10.rankings_compared({LSTM: _with_areas(*lstm), AVG: _with_areas(*avg)})
    assert out["ch10_att_vs_random"] == att_vs_random
    assert out["ch10_grad_vs_att"] == grad_vs_att


@pytest.mark.parametrize("att, where", [
    (0.95, "above the gradient orders"),
    (0.6, "closer to the gradient orders than to random"),
    (0.5, "closer to the gradient orders than to random"),  # exactly halfway
    (0.3, "closer to random than to the gradient orders"),
    (0.1, "closer to random than to the gradient orders"),  # at random
    (0.05, "below random"),
])
def test_where_attentions_curve_lies(att, where):
    # random 0.1, the better gradient order 0.9: position (att - 0.1) / 0.8
    r = _with_areas(att, 0.1, 0.9, 0.5)
    out = ch10.rankings_compared({LSTM: r, AVG: _with_areas(0.3, 0.1, 0.9, 0.9)})
    assert out["ch10_att_where_lstm"] == where
    assert out["ch10_att_where_avg"] == "closer to random than to the gradient orders"


def test_often_and_the_gradient_orders_never_flip():
    never_half = _curves([0.1, 0.1, NAN, NAN], [0.1] * 4, [0.1, NAN, NAN, NAN], [0.1, 0.1, 0.1, NAN])
    never_fifth = _curves([0.1, 0.1, 0.1, 0.1, NAN], [0.1] * 5, [0.1, 0.1, NAN, NAN, 0.1],
                          [0.1, 0.1, NAN, NAN, 0.1])
    out = ch10.rankings_compared({LSTM: never_half, AVG: never_fifth})
    assert out["ch10_often_lstm"] == "yes" and out["ch10_often_avg"] == "no"
    assert out["ch10_grad_never"] == "25% to 75% under the gradient orders"
    out = ch10.rankings_compared({LSTM: never_fifth, AVG: never_half})
    assert out["ch10_grad_never"] == "40% under either gradient order"


def test_a_missing_ranking_is_refused():
    r = _ranked({"attention": [0.1], "random": [0.2]})
    with pytest.raises(ValueError, match="gradient"):
        ch10.rankings_compared({LSTM: r, AVG: r})
