"""Chapter 7's readings (attnlib.presentation.readings.ch07) on small hand-made frames."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, strategies as st

from attnlib.presentation.readings import ch07

CLASSES = ("negative", "positive")
LN2 = float(np.log(2))


def _both(jsd, adversary_jsd, tvd=None, max_attention=None, predicted=None) -> pd.DataFrame:
    n = len(jsd)
    return pd.DataFrame(
        {
            "jsd": np.asarray(jsd, dtype=float),
            "tvd": np.zeros(n) if tvd is None else np.asarray(tvd, dtype=float),
            "adversary_jsd": np.asarray(adversary_jsd, dtype=float),
            "max_attention": np.full(n, 0.5) if max_attention is None else np.asarray(max_attention, dtype=float),
            "predicted": np.asarray([0, 1] * (n // 2) if predicted is None else predicted),
        }
    )


@pytest.fixture
def both():
    return _both(
        jsd=[0.1, 0.2, 0.5, 0.6],
        adversary_jsd=[0.3, 0.1, 0.55, 0.0],
        tvd=[0.005, 0.02, 0.0, 0.3],
        max_attention=[0.2, 0.6, 0.8, 0.3],
        predicted=[0, 0, 1, 1],
    )


# ----------------------------------------------------------------------------- the table
def test_beyond_floor_table_by_hand(both):
    table = ch07.beyond_floor_table(both, eps=0.01, classes=CLASSES)
    assert list(table.columns) == ["negative (n=2)", "positive (n=2)", "all (n=4)"]
    assert list(table.index) == [
        "median JSD, seeds", "median JSD, adversary", "adversary > seeds",
        "JSD >= 0.49, seeds", "JSD >= 0.49, adversary", "seeds' TVD <= eps",
    ]
    assert table.loc["median JSD, seeds"].tolist() == pytest.approx([0.15, 0.55, 0.35])
    assert table.loc["median JSD, adversary"].tolist() == pytest.approx([0.2, 0.275, 0.2])
    assert table.loc["adversary > seeds"].tolist() == [0.5, 0.5, 0.5]
    assert table.loc["JSD >= 0.49, seeds"].tolist() == [0.0, 1.0, 0.5]
    assert table.loc["JSD >= 0.49, adversary"].tolist() == [0.0, 0.5, 0.25]
    assert table.loc["seeds' TVD <= eps"].tolist() == [0.5, 0.5, 0.5]


def test_the_tables_eps_counts(both):
    table = ch07.beyond_floor_table(both, eps=0.5, classes=CLASSES)
    assert table.loc["seeds' TVD <= eps", "all (n=4)"] == 1.0


@pytest.mark.parametrize("column", ["jsd", "tvd", "adversary_jsd", "max_attention", "predicted"])
def test_a_missing_column_is_refused(both, column):
    with pytest.raises(ValueError, match=column):
        ch07.beyond_floor_table(both.drop(columns=column), eps=0.01, classes=CLASSES)
    with pytest.raises(ValueError, match=column):
        ch07.floor(both.drop(columns=column), eps=0.01, n_seeds=3)


def test_an_empty_frame_is_refused(both):
    with pytest.raises(ValueError, match="no rows"):
        ch07.verdicts(both.iloc[:0], classes=CLASSES)


# ----------------------------------------------------------------------------- the floor's numbers
def test_floor_by_hand(both):
    r = ch07.floor(both, eps=0.01, n_seeds=3)
    assert r["ch07_n_all"] == 4 and r["ch07_n_neg"] == 2 and r["ch07_n_pos"] == 2
    assert r["ch07_floor_med_all"] == pytest.approx(0.35)
    assert r["ch07_floor_med_neg"] == pytest.approx(0.15)
    assert r["ch07_floor_med_pos"] == pytest.approx(0.55)
    assert (r["ch07_floor_049_all"], r["ch07_floor_049_neg"], r["ch07_floor_049_pos"]) == (0.5, 0.0, 1.0)
    assert r["ch07_adv_med_all"] == pytest.approx(0.2)
    assert (r["ch07_adv_049_all"], r["ch07_adv_049_pos"]) == (0.25, 0.5)
    assert (r["ch07_beats_all"], r["ch07_beats_neg"], r["ch07_beats_pos"]) == (0.5, 0.5, 0.5)
    assert (r["ch07_tvd_eps_all"], r["ch07_tvd_eps_neg"], r["ch07_tvd_eps_pos"]) == (0.5, 0.5, 0.5)
    assert r["ch07_floor_04_all"] == 0.5 and r["ch07_adv_04_all"] == 0.25
    assert r["ch07_floor_of_ln2"] == pytest.approx(0.35 / LN2)
    assert r["ch07_eps"] == 0.01 and r["ch07_n_seeds"] == 3
    assert r["ch07_med_peak"] == pytest.approx(0.45)
    assert r["ch07_n_top2"] == 2
    assert (r["ch07_n_low"], r["ch07_n_low_neg"], r["ch07_n_low_pos"]) == (1, 1, 0)
    assert r["ch07_n_adv_zero"] == 1
    assert all(type(v) in (int, float) for v in r.values())


@given(
    st.lists(
        st.tuples(
            st.floats(0, LN2), st.floats(0, LN2), st.floats(0, 1), st.floats(0, 1), st.integers(0, 1)
        ),
        min_size=1,
        max_size=30,
    ),
    st.sampled_from([0.01, 0.05, 0.5]),
)
def test_the_tables_all_column_is_the_floors_reading(rows, eps):
    jsd, adv, tvd, peak, predicted = map(list, zip(*rows))
    frame = _both(jsd, adv, tvd=tvd, max_attention=peak, predicted=predicted)
    table = ch07.beyond_floor_table(frame, eps=eps, classes=CLASSES)
    r = ch07.floor(frame, eps=eps, n_seeds=3)
    column = table[f"all (n={len(frame)})"]
    assert column["median JSD, seeds"] == r["ch07_floor_med_all"]
    assert column["median JSD, adversary"] == r["ch07_adv_med_all"]
    assert column["adversary > seeds"] == r["ch07_beats_all"]
    assert column["JSD >= 0.49, seeds"] == r["ch07_floor_049_all"]
    assert column["seeds' TVD <= eps"] == r["ch07_tvd_eps_all"]
    assert 0.0 <= r["ch07_beats_all"] <= 1.0
    assert r["ch07_n_neg"] + r["ch07_n_pos"] == r["ch07_n_all"]


# ----------------------------------------------------------------------------- the verdicts
def test_verdicts_by_hand(both):
    r = ch07.verdicts(both, classes=CLASSES)
    assert r["ch07_adv_further"] == "does not go further than retraining"
    # the adversary beats the floor on one of two sentences in each class: no class difference
    assert r["ch07_class_why"].startswith(
        "The adversary beats the floor about as often for sentences predicted negative (0.500) as "
        "for those predicted positive (0.500): the gap (0.000, 95% interval"
    )
    assert "within noise" in r["ch07_class_why"]
    assert r["ch07_adv_zero_clause"].startswith("For 1 of the 4 sentences the adversary found no")
    assert r["ch07_verdict"] == "only in part"


def test_the_adversary_going_further_and_finding_everywhere():
    frame = _both(jsd=[0.1, 0.1], adversary_jsd=[0.3, 0.3], predicted=[0, 1])
    r = ch07.verdicts(frame, classes=CLASSES)
    assert r["ch07_adv_further"] == "goes further than retraining"
    assert r["ch07_adv_zero_clause"] == "The adversary found a candidate within ε for every sentence."
    assert r["ch07_verdict"] == "largely"


def test_one_sentence_per_class_is_within_noise():
    # floor higher for positive (0.2 > 0.1), the adversary beats it less often there, but one
    # sentence per class carries no interval: no class reading
    frame = _both(jsd=[0.1, 0.2], adversary_jsd=[0.3, 0.0], predicted=[0, 1])
    why = ch07.verdicts(frame, classes=CLASSES)["ch07_class_why"]
    assert "within noise" in why and "less often" not in why


def _classes_frame(neg_floor, pos_floor, neg_beats, pos_beats, n=200):
    """n sentences per class: the floor's JSD per class, and the share the adversary beats."""
    jsd = [neg_floor] * n + [pos_floor] * n
    adv = [neg_floor + 0.1 if i < neg_beats * n else 0.0 for i in range(n)]
    adv += [pos_floor + 0.1 if i < pos_beats * n else 0.0 for i in range(n)]
    return _both(jsd=jsd, adversary_jsd=adv, predicted=[0] * n + [1] * n)


def test_a_low_floor_gets_no_ln2_clause():
    # the floor is higher for positive and the adversary beats it there far less often
    why = ch07.verdicts(_classes_frame(0.1, 0.2, 0.9, 0.5), classes=CLASSES)["ch07_class_why"]
    assert why.startswith("The adversary beats the floor less often for sentences predicted positive (a gap of ")
    assert why.endswith("beyond noise), where the floor is higher.")


def test_a_high_floor_gets_the_ln2_clause():
    why = ch07.verdicts(_classes_frame(0.1, 0.6, 0.9, 0.5), classes=CLASSES)["ch07_class_why"]
    assert why.endswith("where the floor is higher: near ln 2 the adversary has little room left, since "
                        "no JSD exceeds it.")


def test_a_small_gap_between_many_sentences_is_within_noise():
    # 0.933 of 267 against 0.970 of 233 (chapter 7's run): about two standard errors apart
    why = ch07.verdicts(_classes_frame(0.1, 0.12, 0.93, 0.95), classes=CLASSES)["ch07_class_why"]
    assert "within noise" in why


def test_a_class_difference_the_floor_does_not_explain():
    # the floor is higher for negative, yet the adversary beats it less often for positive
    frame = _both(jsd=[0.5, 0.5, 0.1, 0.1], adversary_jsd=[0.6, 0.6, 0.0, 0.0], predicted=[0, 0, 1, 1])
    r = ch07.verdicts(frame, classes=CLASSES)
    assert r["ch07_class_why"].startswith("The floor is higher for sentences predicted negative, yet the "
                                          "adversary beats it less often for those predicted positive")
    assert r["ch07_verdict"] == "only in part"


def test_a_minority_verdict():
    frame = _both(jsd=[0.5, 0.5, 0.5, 0.1], adversary_jsd=[0.1, 0.1, 0.1, 0.2], predicted=[0, 0, 1, 1])
    assert ch07.verdicts(frame, classes=CLASSES)["ch07_verdict"] == "for a minority of the sentences only"


# ----------------------------------------------------------------------------- the per-bin trend
LOW, HIGH = "[0.25, 0.5)", "[0.75, 1]"


def _by_bin(cells: dict) -> pd.DataFrame:
    """Chapter 7's frame with a bin column: (bin, predicted) -> (sentences where the adversary
    beats the floor, sentences)."""
    rows = []
    for (b, c), (beat, n) in cells.items():
        rows += [dict(bin=b, predicted=c, jsd=0.3, adversary_jsd=0.5 if i < beat else 0.1) for i in range(n)]
    frame = pd.DataFrame(rows)
    return frame.assign(tvd=0.0, max_attention=0.5)


def test_bin_trends_fall_beyond_noise_and_stay_within_it():
    r = ch07.bin_trends(_by_bin({(LOW, 0): (95, 100), (HIGH, 0): (60, 100),
                                 (LOW, 1): (40, 100), (HIGH, 1): (41, 100)}), classes=CLASSES)
    assert r["ch07_trend_neg"].startswith(
        f"for sentences predicted negative it falls, from 0.950 in {LOW} to 0.600 in {HIGH} "
        "(a change of -0.350, 95% interval -")
    assert r["ch07_trend_pos"].startswith(
        f"for sentences predicted positive it does not change beyond noise, from 0.400 in {LOW} to "
        f"0.410 in {HIGH} (a change of +0.010, 95% interval -")
    assert r["ch07_trends"].startswith("but the classes differ: for sentences predicted negative it falls")


def test_bin_trends_a_drop_of_a_few_sentences_is_noise():
    """0.972 -> 0.828 on 36 and 29 sentences is beyond noise; the same shares on 6 and 5 are not."""
    big = ch07.bin_trends(_by_bin({(LOW, 0): (35, 36), (HIGH, 0): (24, 29),
                                   (LOW, 1): (35, 36), (HIGH, 1): (24, 29)}), classes=CLASSES)
    assert big["ch07_trends"].startswith(f"and it does for both classes, between the bins {LOW} and {HIGH}: "
                                         "from 0.972 to 0.828 for sentences predicted negative (a change of -0.145")
    small = ch07.bin_trends(_by_bin({(LOW, 0): (6, 6), (HIGH, 0): (4, 5),
                                     (LOW, 1): (6, 6), (HIGH, 1): (4, 5)}), classes=CLASSES)
    assert small["ch07_trends"].startswith("but for neither class does it change beyond noise: "
                                           "for sentences predicted negative it does not change beyond noise")


def test_bin_trends_rise_for_both_classes():
    r = ch07.bin_trends(_by_bin({(LOW, 0): (10, 100), (HIGH, 0): (60, 100),
                                 (LOW, 1): (20, 100), (HIGH, 1): (90, 100)}), classes=CLASSES)
    assert r["ch07_trends"].startswith("but it rises for both classes")
    assert "from 0.200 to 0.900 for those predicted positive (+0.700, 95% interval +" in r["ch07_trends"]


def test_bin_trends_identical_bins_are_a_tie():
    r = ch07.bin_trends(_by_bin({(LOW, 0): (30, 50), (HIGH, 0): (30, 50),
                                 (LOW, 1): (30, 50), (HIGH, 1): (30, 50)}), classes=CLASSES)
    assert " does not change beyond noise, from 0.600 " in r["ch07_trend_neg"]
    assert r["ch07_trends"].startswith("but for neither class")


def test_bin_trends_lack_a_bin_or_a_class():
    r = ch07.bin_trends(_by_bin({(LOW, 0): (2, 10), (HIGH, 0): (9, 10), (LOW, 1): (4, 10)}), classes=CLASSES)
    assert " it rises, from 0.200 " in r["ch07_trend_neg"]
    assert r["ch07_trend_pos"] == f"for sentences predicted positive the table lacks {LOW} or {HIGH}"
    assert r["ch07_trends"].startswith("but the classes differ")
    one = ch07.bin_trends(_by_bin({(LOW, 0): (2, 10), (HIGH, 0): (9, 10)}), classes=CLASSES)
    assert one["ch07_trend_pos"].endswith(f"lacks {LOW} or {HIGH}")


def test_bin_trends_a_bin_of_one_sentence_has_no_interval():
    r = ch07.bin_trends(_by_bin({(LOW, 0): (1, 1), (HIGH, 0): (0, 20)}), classes=CLASSES)
    assert r["ch07_trend_neg"] == (
        f"for sentences predicted negative it does not change beyond noise, from 1.000 in {LOW} to 0.000 "
        f"in {HIGH} (a change of -1.000, too few sentences in a bin for an interval)")


def test_bin_trends_want_the_bin_column(both):
    with pytest.raises(ValueError, match="bin"):
        ch07.bin_trends(both, classes=CLASSES)



# ----------------------------------------------------------------------------- the seeds' peaks
def _pred(attention, probs=None):
    attention = [np.asarray(a, dtype=float) for a in attention]
    probs = np.asarray(probs if probs is not None else [[0.5, 0.5]] * len(attention), dtype=float)
    return SimpleNamespace(attention=attention, probs=probs, predicted=probs.argmax(-1))


BASE_ATT = [[0.6, 0.3, 0.1], [0.5, 0.25, 0.25]]
SEED_ATT = [[0.1, 0.3, 0.6], [0.2, 0.6, 0.2]]


def test_seed_peaks_with_seeds_that_agree_with_one_another():
    predictions = {0: _pred(BASE_ATT), 1: _pred(SEED_ATT), 2: _pred(SEED_ATT)}
    r = ch07.seed_peaks(predictions, base_seed=0, indices=[0, 1], floor_jsd=pd.Series([0.2, 0.4]))
    assert r["ch07_other_seeds"] == "1 and 2"
    assert r["ch07_base_first"] == 1.0
    assert r["ch07_seeds_first"] == "0.000 and 0.000"
    assert r["ch07_base_peakw"] == pytest.approx(0.55)
    assert r["ch07_seeds_peakw"] == "0.600 and 0.600"
    assert r["ch07_among_med"] == 0.0
    assert r["ch07_odd_clause"].startswith("lower than the floor: the retrained seeds agree")


def test_seed_peaks_when_the_base_is_not_the_odd_one_out():
    from attnlib.metrics import jsd

    predictions = {0: _pred(BASE_ATT), 1: _pred(SEED_ATT), 2: _pred(BASE_ATT)}
    r = ch07.seed_peaks(predictions, base_seed=0, indices=[1], floor_jsd=pd.Series([0.0]))
    assert r["ch07_among_med"] == pytest.approx(float(jsd(np.array(SEED_ATT[1]), np.array(BASE_ATT[1]))))
    assert r["ch07_odd_clause"].startswith("about as high as the floor or higher")


def test_seed_peaks_need_the_base_and_two_seeds():
    with pytest.raises(ValueError, match="base seed 5"):
        ch07.seed_peaks({0: _pred(BASE_ATT)}, base_seed=5, indices=[0], floor_jsd=pd.Series([0.1]))
    with pytest.raises(ValueError, match="two"):
        ch07.seed_peaks({0: _pred(BASE_ATT), 1: _pred(SEED_ATT)}, base_seed=0, indices=[0],
                        floor_jsd=pd.Series([0.1]))


# ----------------------------------------------------------------------------- the example sentence
def test_example_with_a_flip_and_an_adversary():
    predictions = {
        0: _pred([BASE_ATT[0]], probs=[[0.2, 0.8]]),
        1: _pred([SEED_ATT[0]], probs=[[0.7, 0.3]]),
    }
    r = ch07.example(predictions, base_seed=0, instance=0, tokens=["a", "good", "film"],
                     adversary_jsd=0.3, adversary_attention=np.array([0.1, 0.8, 0.1]))
    assert r["ch07_example_seeds"] == (
        "The base model puts its largest weight on “a” (0.60); seed 1 on “film” (0.60). Their "
        "p(positive) is 0.30 against the base's 0.80. 1 of the 1 seeds predict a different class "
        "from the base: a change the adversary is not allowed."
    )
    assert r["ch07_example_adv"] == (
        "The adversary's attention lies at JSD 0.30 from the base's, its largest weight on "
        "“good” (0.80), with the output within ε."
    )


def test_example_without_a_flip_or_an_adversary():
    predictions = {
        3: _pred([BASE_ATT[0]], probs=[[0.2, 0.8]]),
        1: _pred([SEED_ATT[0]], probs=[[0.4, 0.6]]),
        2: _pred([SEED_ATT[0]], probs=[[0.1, 0.9]]),
    }
    r = ch07.example(predictions, base_seed=3, instance=0, tokens=["a", "good", "film"],
                     adversary_jsd=0.0, adversary_attention=np.array(BASE_ATT[0]))
    assert "seed 1 on “film” (0.60); seed 2 on “film” (0.60)" in r["ch07_example_seeds"]
    assert "Their p(positive) is 0.60 and 0.90 against the base's 0.80." in r["ch07_example_seeds"]
    assert r["ch07_example_seeds"].endswith("No seed changes the base's decision on it, though their "
                                            "probabilities move.")
    assert r["ch07_example_adv"].startswith("The adversary found no candidate within ε")


def test_example_needs_the_base():
    with pytest.raises(ValueError, match="base seed"):
        ch07.example({1: _pred(BASE_ATT)}, base_seed=0, instance=0, tokens=["a", "b", "c"],
                     adversary_jsd=0.0, adversary_attention=np.array(BASE_ATT[0]))
