"""Chapter 10's readings (attnlib.presentation.readings.ch10) on small hand-made results over seeds."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib import uncertainty
from attnlib.erasure import RANKINGS, RankedRemovalResult, SingleWeightResult
from attnlib.presentation.readings import ch10
from attnlib.seeds import SeedResults

LSTM, AVG = "lstm + tanh", "average + tanh"


def _over(*results):
    return SeedResults(tuple(range(len(results))), tuple(results))


def _single(top_weight, random_weight, jsd_top, jsd_random, flip_top=None, flip_random=None):
    n = len(top_weight)
    z = np.zeros(n)
    return SingleWeightResult(
        probs=np.full((n, 2), 0.5), predicted=np.zeros(n, int), labels=np.zeros(n, int),
        indices=np.arange(n), lengths=np.full(n, 5),
        jsd_top=np.asarray(jsd_top, float), jsd_random=np.asarray(jsd_random, float),
        flip_top=(z if flip_top is None else np.asarray(flip_top)).astype(bool),
        flip_random=(z if flip_random is None else np.asarray(flip_random)).astype(bool),
        top_weight=np.asarray(top_weight, float), random_weight=np.asarray(random_weight, float),
        top_token=z.astype(int), random_token=z.astype(int),
        probs_top=np.full((n, 2), 0.5), probs_random=np.full((n, 2), 0.5),
    )


def _flips(n, share, rng):
    return rng.random(n) < share


def _model(rng, n=400, changes_more=0.95, flip_top=0.05, flip_random=0.0, top=0.6, seeds=3, gap=0.01):
    """Seeds of a model whose top erasure changes the output more in about ``changes_more`` of sentences."""
    out = []
    for _ in range(seeds):
        more = rng.random(n) < changes_more
        jsd_top = np.where(more, gap + rng.random(n) * gap, 0.0)
        out.append(_single(np.full(n, top) + rng.normal(0, 0.01, n), np.full(n, 0.1), jsd_top,
                           np.where(more, 0.0, gap), _flips(n, flip_top, rng), _flips(n, flip_random, rng)))
    return _over(*out)


def _singles(seed=0, lstm=None, avg=None):
    rng = np.random.default_rng(seed)
    return {LSTM: _model(rng, **(lstm or {})), AVG: _model(rng, **(avg or {"flip_top": 0.2, "top": 0.3,
                                                                           "gap": 0.02}))}


def test_single_weight_values_are_means_over_seeds_with_intervals():
    single = _singles()
    out = ch10.single_weight(single)
    assert out["ch10_n"] == 400 and out["ch10_n_seeds"] == 3
    flips = single[LSTM].stack(lambda r: r.flip_top.astype(float))
    assert out["ch10_flip_top_lstm"] == pytest.approx(flips.mean())
    assert out["ch10_flip_top_ci_lstm"] == uncertainty.over_seeds(flips).range_text()
    medians = [np.median(r.jsd_difference) for r in single[AVG].results]
    assert out["ch10_median_jsd_difference_avg"] == pytest.approx(np.mean(medians))
    assert out["ch10_top_weight_lstm"] == pytest.approx(np.mean([r.top_weight.mean() for r in single[LSTM].results]))
    assert out["ch10_avg_med_dir"] == "larger"  # every Average seed's median gap is above every BiLSTM seed's
    assert all(isinstance(out[k], float) for k in out if k.startswith("ch10_flip") and "_ci_" not in k)


@pytest.mark.parametrize("lstm_more, avg_more, points, first, yes", [
    (0.97, 0.97, "Almost every point lies", "That is", "yes"),
    (0.97, 0.75, "Most points lie", "That is", "yes"),
    (0.97, 0.5, "For one model half the points or fewer lie", "So Serrano", "not for both"),
])
def test_the_first_finding_is_read_from_the_intervals(lstm_more, avg_more, points, first, yes):
    out = ch10.single_weight(_singles(lstm={"changes_more": lstm_more}, avg={"changes_more": avg_more}))
    assert out["ch10_points"] == points
    assert out["ch10_first_finding"].startswith(first)
    assert out["ch10_yes_tcm"] == yes


def test_the_median_gaps_are_ordered_only_when_every_seed_agrees():
    same = ch10.single_weight(_singles(avg={"gap": 0.01}))
    assert same["ch10_avg_med_dir"].startswith("no different in kind")
    assert ch10.single_weight(_singles(lstm={"gap": 0.05}, avg={"gap": 0.01}))["ch10_avg_med_dir"] == "smaller"


def test_the_second_finding_gives_shares_not_a_threshold_verdict():
    out = ch10.second_finding(_singles())
    said = out["ch10_second_finding"]
    assert "no threshold" in said and "95% interval" in said and "one in ten" not in said
    assert "more of the BiLSTM's decisions (holds in" in said  # 5% top flips against none at random
    assert out["ch10_yes_rare"].startswith("the paper sets no threshold")


@pytest.mark.parametrize("avg, clause", [
    ({"flip_top": 0.3, "top": 0.3}, "so erasing its top weight flips more decisions (holds in 3 of 3 seeds), "
                                    "though that weight is smaller in every seed"),
    ({"flip_top": 0.3, "top": 0.9}, "so erasing its top weight flips more decisions (holds in 3 of 3 seeds)"),
    ({"flip_top": 0.05, "top": 0.3}, "yet here erasing its top weight flips no more decisions than for the "
                                     "BiLSTM beyond noise"),
])
def test_the_average_models_clause_over_seeds(avg, clause):
    out = ch10.second_finding(_singles(avg=avg))
    assert out["ch10_avg_flip_clause"].startswith(clause)


def test_one_seed_that_flips_more_is_not_a_finding():
    rng = np.random.default_rng(5)
    lstm = _model(rng)
    base = _model(rng, flip_top=0.05, seeds=2).results
    avg = _over(*base, _model(rng, flip_top=0.6, seeds=1).results[0])  # only the third seed flips more
    out = ch10.second_finding({LSTM: lstm, AVG: avg})
    assert "flips more decisions" not in out["ch10_avg_flip_clause"]


def test_summary_over_seeds_shows_intervals():
    table = ch10.summary_over_seeds(_singles())
    assert list(table.columns) == [LSTM, AVG]
    assert table.loc["seeds", LSTM] == "3"
    assert table.loc["flip_top", AVG].count("[") == 1
    assert "to" in table.loc["median_jsd_difference", LSTM]


def test_wrong_models_or_results_are_refused():
    single = _singles()
    with pytest.raises(ValueError, match="models"):
        ch10.single_weight({LSTM: single[LSTM]})
    with pytest.raises(ValueError, match="over seeds"):
        ch10.single_weight({LSTM: single[LSTM], AVG: single[AVG].results[0]})


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


def test_flip_shares_are_means_over_seeds():
    a = _curves([0.1, NAN, NAN, NAN], [NAN] * 4, [0.1, 0.2, 0.3, NAN], [0.5] * 4)
    b = _curves([0.1, 0.1, NAN, NAN], [NAN] * 4, [0.1, 0.2, 0.3, 0.3], [0.5] * 4)
    out = ch10.flip_shares({LSTM: _over(a, b), AVG: _over(a, a)})
    assert out["ch10_flipped_attention_lstm"] == pytest.approx(0.375)
    assert out["ch10_never_attention_lstm"] == pytest.approx(0.625)
    assert out["ch10_flipped_random_avg"] == 0.0 and out["ch10_never_random_avg"] == 1.0
    assert out["ch10_flipped_gradient_lstm"] == pytest.approx(0.875)
    assert out["ch10_never_ci_attention_avg"].endswith("%")


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.booleans(), min_size=4, max_size=4), min_size=1, max_size=12))
def test_flipped_and_never_add_to_one(rows):
    flips = np.array(rows)
    r = _ranked({k: np.where(flips[:, j], 0.5, np.nan) for j, k in enumerate(RANKINGS)})
    out = ch10.flip_shares({LSTM: _over(r, r), AVG: _over(r)})
    for k in RANKINGS:
        assert out[f"ch10_flipped_{k}_lstm"] + out[f"ch10_never_{k}_lstm"] == pytest.approx(1.0)
        assert out[f"ch10_flipped_{k}_avg"] == pytest.approx(flips[:, RANKINGS.index(k)].mean())


def test_curve_areas():
    r = _curves([0.25, NAN], [NAN, NAN], [0.5, 0.5], [1.0, 0.0])
    assert ch10.curve_areas(r) == pytest.approx({"attention": 0.375, "random": 0.0, "gradient": 0.5,
                                                 "attention_x_gradient": 0.5})


def _with_areas(att, rnd, grad, axg, n=40, seeds=3, seed=0):
    """Seeds of a model whose sentences flip at 1 - area (+ a little noise) under each ranking."""
    rng = np.random.default_rng(seed)
    return _over(*(_curves(*(np.clip(1 - a + rng.normal(0, 0.02, n), 0.01, 1) for a in (att, rnd, grad, axg)))
                   for _ in range(seeds)))


@pytest.mark.parametrize("lstm, avg, att_vs_random, grad_vs_att", [
    ((0.5, 0.1, 0.8, 0.7), (0.5, 0.1, 0.8, 0.7), "yes, for both models", "yes, for both models"),
    ((0.5, 0.1, 0.8, 0.4), (0.05, 0.1, 0.8, 0.7), "only for the BiLSTM", "only for the Average model"),
    ((0.05, 0.1, 0.4, 0.4), (0.05, 0.1, 0.04, 0.7), "no, for neither model", "only for the BiLSTM"),
    ((0.5, 0.1, 0.4, 0.8), (0.5, 0.1, 0.3, 0.3), "yes, for both models", "no, for neither model"),
    ((0.5, 0.5, 0.5, 0.5), (0.3, 0.3, 0.3, 0.3), "no, for neither model", "no, for neither model"),
])
def test_rankings_compared_for_both_one_or_neither(lstm, avg, att_vs_random, grad_vs_att):
    out = ch10.rankings_compared({LSTM: _with_areas(*lstm), AVG: _with_areas(*avg, seed=1)})
    assert out["ch10_att_vs_random"] == att_vs_random
    assert out["ch10_grad_vs_att"] == grad_vs_att


def test_a_ranking_that_wins_in_one_seed_of_three_does_not_win():
    rng = np.random.default_rng(3)
    flat = [_curves(*(np.clip(0.5 + rng.normal(0, 0.02, 40), 0.01, 1) for _ in range(4))) for _ in range(2)]
    one = _with_areas(0.9, 0.1, 0.5, 0.5, seeds=1).results[0]  # attention far ahead in this seed only
    out = ch10.rankings_compared({LSTM: _over(*flat, one), AVG: _with_areas(0.5, 0.1, 0.8, 0.7)})
    assert out["ch10_att_vs_random"] == "only for the Average model"


@pytest.mark.parametrize("att, where", [
    (0.95, "above the gradient orders"),
    (0.6, "closer to the gradient orders than to random"),
    (0.3, "closer to random than to the gradient orders"),
    (0.05, "below random"),
])
def test_where_attentions_curve_lies_when_every_seed_agrees(att, where):
    # random 0.1, the better gradient order 0.9: position (att - 0.1) / 0.8
    out = ch10.rankings_compared({LSTM: _with_areas(att, 0.1, 0.9, 0.5), AVG: _with_areas(0.3, 0.1, 0.9, 0.9)})
    assert out["ch10_att_where_lstm"] == where
    assert out["ch10_att_where_avg"] == "closer to random than to the gradient orders"


def test_where_the_seeds_disagree_both_places_are_said():
    mixed = _over(*_with_areas(0.6, 0.1, 0.9, 0.5, seeds=2).results, _with_areas(0.3, 0.1, 0.9, 0.5, seeds=1)[0])
    out = ch10.rankings_compared({LSTM: mixed, AVG: _with_areas(0.3, 0.1, 0.9, 0.9)})
    assert out["ch10_att_where_lstm"] == ("closer to random than to the gradient orders or closer to the "
                                          "gradient orders than to random, depending on the seed")


def test_often_and_the_gradient_orders_never_flip():
    rng = np.random.default_rng(4)

    def model(never_att, never_grad, n=200):
        def frac(share):
            return np.where(rng.random(n) < share, np.nan, 0.3)
        return _over(*(_curves(frac(never_att), frac(0.0), frac(never_grad), frac(never_grad)) for _ in range(3)))

    out = ch10.rankings_compared({LSTM: model(0.6, 0.2), AVG: model(0.05, 0.0)})
    assert out["ch10_often_lstm"] == "yes" and out["ch10_often_avg"] == "no"
    assert out["ch10_grad_never"].endswith("under the gradient orders") or "either" in out["ch10_grad_never"]
    assert ch10.rankings_compared({LSTM: model(0.25, 0.2), AVG: model(0.05, 0.0)})["ch10_often_lstm"] == \
        "about a quarter, within noise"


def test_removal_table_and_flip_fractions_over_seeds():
    a = _curves([0.1, NAN], [0.2, 0.4], [0.1, 0.2], [0.5, 0.5])
    b = _curves([0.3, 0.2], [0.2, 0.4], [0.1, 0.2], [0.5, 0.5])
    table = ch10.removal_over_seeds({LSTM: _over(a, b), AVG: _over(a, a)})
    assert table.index.names == ["model", "ranking"]
    fractions = ch10.flip_fractions({LSTM: _over(a, b), AVG: _over(a)})
    assert fractions[LSTM]["attention"].shape == (2, 2) and np.isnan(fractions[LSTM]["attention"][0, 1])


def test_a_missing_ranking_is_refused():
    r = _ranked({"attention": [0.1], "random": [0.2]})
    with pytest.raises(ValueError, match="gradient"):
        ch10.rankings_compared({LSTM: _over(r), AVG: _over(r)})
