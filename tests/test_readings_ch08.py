"""Chapter 8's readings (attnlib.presentation.readings.ch08) on small hand-made frames."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, strategies as st

from attnlib.presentation.readings import ch08

LAMS = [0.001, 0.01, 0.1, 1.0]
SEED = "random seed 1 (Chapter 7)"
UNIFORM = "uniform attention (Chapter 6)"
POINTS = {SEED: (0.2, 0.05), UNIFORM: (0.3, 0.1)}


def _frame(jsd, tvd, same=None, f1=None, lams=LAMS) -> pd.DataFrame:
    n = len(lams)
    return pd.DataFrame(
        {
            "lambda": lams,
            "mean_jsd": jsd,
            "mean_tvd": tvd,
            "same_decision": same if same is not None else [0.9] * n,
            "f1": f1 if f1 is not None else [0.7] * n,
            "best_epoch": [1] * n,
        }
    )


def _floor():
    return SimpleNamespace(
        per_seed=pd.DataFrame({"seed": [1, 2], "jsd": [0.1, 0.3], "tvd": [0.02, 0.04],
                               "same decision": [True, False]}),
        models={1: SimpleNamespace(test={"f1": 0.7}), 2: SimpleNamespace(test={"f1": 0.8})},
    )


def _uniform_vs_base():
    return SimpleNamespace(attention_jsd=np.array([0.2, 0.4]), output_tvd=np.array([0.1, 0.3]),
                           same_decision=np.array([True, True, False, True]))


UNIFORM_MODEL = SimpleNamespace(test={"f1": 0.65})
BASE_MODEL = SimpleNamespace(test={"f1": 0.75})


# ----------------------------------------------------------------------------- the table
def test_yardstick_points_by_hand():
    points = ch08.yardstick_points(_floor(), _uniform_vs_base(), (1, 2))
    assert list(points) == ["random seeds 1, 2 (Chapter 7)", UNIFORM]
    assert points["random seeds 1, 2 (Chapter 7)"] == pytest.approx((0.2, 0.03))
    assert points[UNIFORM] == pytest.approx((0.3, 0.2))
    assert list(ch08.yardstick_points(_floor(), _uniform_vs_base(), (3,)))[0] == "random seed 3 (Chapter 7)"
    with pytest.raises(ValueError, match="at least one"):
        ch08.yardstick_points(_floor(), _uniform_vs_base(), ())


def test_sweep_table_by_hand():
    frame = _frame([0.1, 0.2, 0.3, 0.4], [0.01, 0.02, 0.03, 0.04], f1=[0.71, 0.72, 0.73, 0.74])
    points = ch08.yardstick_points(_floor(), _uniform_vs_base(), (1,))
    table = ch08.sweep_table(frame, points, floor=_floor(), uniform=UNIFORM_MODEL,
                             uniform_vs_base=_uniform_vs_base(), base=BASE_MODEL)
    assert list(table.columns) == ["mean JSD(α, α_b)", "mean TVD(ŷ, ŷ_b)", "same decision", "test F1"]
    assert list(table.index) == [
        "adversary, λ = 0.001", "adversary, λ = 0.01", "adversary, λ = 0.1", "adversary, λ = 1",
        "random seed 1 (Chapter 7)", UNIFORM, "base model (itself)",
    ]
    assert table.loc["adversary, λ = 0.1"].tolist() == pytest.approx([0.3, 0.03, 0.9, 0.73])
    assert table.loc["random seed 1 (Chapter 7)"].tolist() == pytest.approx([0.2, 0.03, 0.5, 0.75])
    assert table.loc[UNIFORM].tolist() == pytest.approx([0.3, 0.2, 0.75, 0.65])
    assert table.loc["base model (itself)"].tolist() == [0.0, 0.0, 1.0, 0.75]


def test_a_frame_without_its_columns_is_refused():
    frame = _frame([0.1] * 4, [0.1] * 4)
    with pytest.raises(ValueError, match="mean_tvd"):
        ch08.curve(frame.drop(columns="mean_tvd"), POINTS)
    with pytest.raises(ValueError, match="no rows"):
        ch08.verdict(frame.iloc[:0], POINTS)
    with pytest.raises(ValueError, match="seed point"):
        ch08.curve(frame, {SEED: (0.2, 0.05)})


# ----------------------------------------------------------------------------- settings and yardsticks
def test_settings_by_hand_and_from_the_profiles():
    book = SimpleNamespace(wp=SimpleNamespace(lambdas=(0.001, 0.01, 0.1, 1.0), adversary_epochs=4))
    paper = SimpleNamespace(wp=SimpleNamespace(lambdas=(0.0001, 0.0005, 0.001, 0.01, 0.1, 1.0), adversary_epochs=8))
    r = ch08.settings(book, paper, guide_lam=0.001)
    assert r == {
        "ch08_ln2": float(np.log(2)),
        "ch08_guide_lam": "0.001",
        "ch08_book_n_lams": 4,
        "ch08_book_lams": "0.001, 0.01, 0.1 and 1",
        "ch08_book_epochs": 4,
        "ch08_paper_extra_lams": "0.0001 and 0.0005",
        "ch08_paper_epochs": 8,
    }
    with pytest.raises(ValueError, match="paper profile"):
        ch08.settings(book, book, guide_lam=0.001)
    from attnlib import profiles

    real = ch08.settings(profiles.PROFILES["book"], profiles.PROFILES["paper"], guide_lam=0.001)
    assert real["ch08_book_n_lams"] == len(profiles.PROFILES["book"].wp.lambdas)


def test_yardsticks_by_hand():
    r = ch08.yardsticks(POINTS, floor=_floor(), uniform=UNIFORM_MODEL, uniform_vs_base=_uniform_vs_base(),
                        base=BASE_MODEL, seed_models=(1, 2))
    assert r["ch08_seed_label"] == "seed 1, 2"
    assert (r["ch08_seed_jsd"], r["ch08_seed_tvd"], r["ch08_uni_jsd"], r["ch08_uni_tvd"]) == (0.2, 0.05, 0.3, 0.1)
    assert r["ch08_seed_same"] == 0.5 and r["ch08_uni_same"] == 0.75
    assert r["ch08_seed_f1"] == pytest.approx(0.75)
    assert (r["ch08_uni_f1"], r["ch08_base_f1"]) == (0.65, 0.75)
    assert r["ch08_seed_point"] == (
        "2 retrained models (seeds 1 and 2) lie, on average, at mean JSD 0.200 (the two: 0.100 and "
        "0.300) and mean TVD 0.030 (0.020 and 0.040)")
    three = SimpleNamespace(per_seed=pd.DataFrame({"seed": [1, 1, 2, 3], "jsd": [0.1, 0.3, 0.3, 0.4],
                                                   "tvd": [0.0, 0.2, 0.1, 0.2]}))
    assert ch08._seed_point(three, (1, 2, 3), 0.0, 0.0) == (
        "3 retrained models (seeds 1, 2 and 3) lie, on average, at mean JSD 0.300 (95% interval "
        "over the seeds 0.052 to 0.548) and mean TVD 0.133 (-0.010 to 0.277)")
    assert all(type(v) is float for k, v in r.items() if k not in ("ch08_seed_label", "ch08_seed_point"))
    one = ch08.yardsticks(POINTS, floor=_floor(), uniform=UNIFORM_MODEL, uniform_vs_base=_uniform_vs_base(),
                          base=BASE_MODEL, seed_models=(1,))
    assert one["ch08_seed_point"] == "a retrained model (seed 1) lies at mean JSD 0.200 and mean TVD 0.050"


def test_lambdas():
    r = ch08.lambdas(_frame([0.1] * 4, [0.1] * 4), lam=0.001)
    assert r == {"ch08_lams": "0.001, 0.01, 0.1 and 1", "ch08_lam": "0.001"}


# ----------------------------------------------------------------------------- the curve
def test_curve_rising_to_the_ceiling():
    frame = _frame([0.1, 0.25, 0.5, 0.68], [0.01, 0.04, 0.06, 0.2], same=[0.99, 0.95, 0.9, 0.6],
                   f1=[0.7, 0.7, 0.7, 0.55])
    r = ch08.curve(frame, POINTS)
    assert (r["ch08_jsd_max"], r["ch08_jsd_max_lams"]) == (0.68, "1")
    assert (r["ch08_jsd_min"], r["ch08_jsd_min_lam"]) == (0.1, "0.001")
    assert (r["ch08_tvd_max"], r["ch08_tvd_max_lam"], r["ch08_tvd_max_same"], r["ch08_tvd_max_f1"]) == (
        0.2, "1", 0.6, 0.55)
    assert (r["ch08_tvd_min"], r["ch08_tvd_min_lam"]) == (0.01, "0.001")
    assert r["ch08_trend"] == (
        "the mean JSD runs 0.100, 0.250, 0.500 and 0.680 over λ = 0.001, 0.01, 0.1 and 1, never "
        "falling as λ grows (up to its ceiling, ln 2); the mean TVD runs 0.010, 0.040, 0.060 and "
        "0.200 over λ = 0.001, 0.01, 0.1 and 1, never falling as λ grows."
    )
    assert r["ch08_trend_verdict"].startswith("Our points trace that trade-off, up to differences")
    assert r["ch08_where"] == (
        "λ = 0.1 and 1 lie right of both; λ = 0.01 lies between them; λ = 0.001 lies left of both"
    )
    assert r["ch08_cost_vs_seed"] == (
        "λ = 0.001 and 0.01 change the output no more than the seed does; λ = 0.1 and 1 change it more"
    )
    assert r["ch08_closest"] == "the adversary at λ = 0.001"
    assert r["ch08_table4"] == "the adversary at λ = 0.1 (mean JSD 0.500, mean TVD 0.060)"


def test_curve_in_part_and_two_lambdas_at_the_top():
    frame = _frame([0.5, 0.498, 0.3, 0.1], [0.01, 0.011, 0.009, 0.3])
    r = ch08.curve(frame, POINTS)
    assert r["ch08_jsd_max_lams"] == "0.001 and 0.01"  # within 0.005 of the largest
    assert "not rising steadily with λ" in r["ch08_trend"]
    assert "never falling by more than 0.005 as λ grows." in r["ch08_trend"]
    assert "ceiling" not in r["ch08_trend"]
    assert r["ch08_trend_verdict"].startswith("Our points trace it only in part; with one run per λ")
    assert r["ch08_where"] == (
        "λ = 0.001 and 0.01 lie right of both; λ = 0.1 lies between them; λ = 1 lies left of both"
    )
    assert r["ch08_cost_vs_seed"].endswith("; λ = 1 change it more")
    assert r["ch08_table4"] == "the adversary at λ = 0.001 (mean JSD 0.500, mean TVD 0.010)"


def test_curve_with_nothing_to_show():
    frame = _frame([0.15, 0.1, 0.12, 0.05], [0.3, 0.2, 0.25, 0.12])
    r = ch08.curve(frame, POINTS)
    assert r["ch08_trend_verdict"].startswith("Our points do not trace it; with one run per λ")
    assert r["ch08_where"] == "λ = 0.001, 0.01, 0.1 and 1 lie left of both"
    assert r["ch08_cost_vs_seed"] == "λ = 0.001, 0.01, 0.1 and 1 change the output more than the seed does"
    assert r["ch08_closest"] == "the seed"
    assert r["ch08_table4"] == "none: no adversary reaches a mean JSD above 0.4"


# ----------------------------------------------------------------------------- W&P's verdict
def test_verdict_over_and_left():
    frame = _frame([0.1, 0.25, 0.5, 0.68], [0.01, 0.04, 0.06, 0.2])
    text = ch08.verdict(frame, POINTS)["ch08_verdict"]
    assert text == (
        "The adversaries at λ = 0.1 and 1 attend further from the base than both yardsticks but "
        "change the output more than retraining does (mean TVD 0.060 and 0.200 against 0.050). "
        "λ = 0.001 fails the test: left of both yardsticks, its attention is no further from the "
        "base than a retrained model's."
    )


def test_verdict_passes_and_one_over():
    frame = _frame([0.5, 0.45, 0.35, 0.25], [0.01, 0.011, 0.3, 0.06])
    text = ch08.verdict(frame, POINTS)["ch08_verdict"]
    assert text.startswith(
        "So on rt-polarity a model *can* be trained to attend further from the base than both "
        "yardsticks for no more output change than retraining costs: by W&P's criterion λ = 0.001 "
        "and 0.01 pass (mean TVD 0.010 and 0.011 against the seed's 0.050)."
    )
    assert "The adversary at λ = 0.1 attends further from the base than both yardsticks but changes" in text
    assert "fail" not in text


def test_verdict_one_pass_and_none_right():
    one = ch08.verdict(_frame([0.5], [0.01], lams=[0.1]), POINTS)["ch08_verdict"]
    assert "λ = 0.1 passes (mean TVD 0.010 against the seed's 0.050)." in one
    none = ch08.verdict(_frame([0.1, 0.25], [0.01, 0.02], lams=[0.1, 1.0]), POINTS)["ch08_verdict"]
    assert none == (
        "No adversary lands right of both yardsticks: on this run a trained model does not attend "
        "further from the base than retraining does. λ = 0.1 fails the test: left of both "
        "yardsticks, its attention is no further from the base than a retrained model's."
    )


@given(st.lists(st.tuples(st.floats(0, 0.69), st.floats(0, 1)), min_size=1, max_size=6))
def test_every_lambda_has_exactly_one_side(rows):
    lams = [10.0 ** -k for k in range(len(rows))]
    jsd, tvd = map(list, zip(*rows))
    where = ch08.curve(_frame(jsd, tvd, lams=lams), POINTS)["ch08_where"]
    named = sum(part.split(" lie")[0].removeprefix("λ = ").replace(" and ", ", ").count(",") + 1
                for part in where.split("; "))
    assert named == len(lams)


# ----------------------------------------------------------------------------- the peak table
def _peak_table(rows: dict) -> pd.DataFrame:
    return pd.DataFrame(rows, index=["peak on first token", "peak on last token", "mean peak weight"]).T


LAST = pd.Series([0.94, 0.06], index=[".", "!"])


def test_peaks_with_a_collapse():
    table = _peak_table({
        "base": [0.4, 0.1, 0.5],
        "adversary, λ = 0.1": [0.0, 0.95, 0.97],
        "adversary, λ = 1": [0.0, 0.92, 0.93],
        "seed 1": [0.1, 0.2, 0.45],
    })
    frame = _frame([0.1, 0.2], [0.01, 0.02], f1=[0.71, 0.72], lams=[0.1, 1.0])
    r = ch08.peaks(table, frame, seed_model=1, last_tokens=LAST, base_f1=0.75)
    assert (r["ch08_base_first"], r["ch08_seed_first"], r["ch08_base_peakw"], r["ch08_seed_peakw"]) == (
        0.4, 0.1, 0.5, 0.45)
    assert r["ch08_peak_seed"] == "1"
    assert r["ch08_peaks"] == (
        "λ = 0.1: peak on the first token in 0% of sentences, on the last in 95%, mean peak weight "
        "0.970; λ = 1: peak on the first token in 0% of sentences, on the last in 92%, mean peak "
        "weight 0.930"
    )
    assert r["ch08_collapse"] == (
        "At λ = 0.1 and 1 the adversary puts nearly all of its weight (mean peak weight at least "
        "0.930) on the last token in at least 92% of the test sentences; that token is ‘.’ in 94% "
        "of them. The forward half of the last BiLSTM state has read the whole sentence, so a "
        "decoder that looks only there can still classify: test F1 0.710 and 0.720 against the "
        "base's 0.750."
    )
    assert r["ch08_spread"] == ""


def test_peaks_spread_without_a_collapse():
    table = _peak_table({
        "base": [0.4, 0.1, 0.5],
        "adversary, λ = 0.1": [0.3, 0.95, 0.44],  # on the last token, but not with its weight
        "seed 2": [0.1, 0.2, 0.45],
    })
    frame = _frame([0.1], [0.01], lams=[0.1])
    r = ch08.peaks(table, frame, seed_model=2, last_tokens=LAST, base_f1=0.75)
    assert r["ch08_collapse"].startswith("No adversary collapses onto the last token")
    assert r["ch08_spread"] == ("At λ = 0.1 the adversary's attention is flatter than the base's "
                                "(a lower mean peak weight).")


def test_peaks_need_every_adversary_row():
    table = _peak_table({"base": [0.4, 0.1, 0.5], "seed 1": [0.1, 0.2, 0.45]})
    with pytest.raises(ValueError, match="adversary"):
        ch08.peaks(table, _frame([0.1], [0.01], lams=[0.1]), seed_model=1, last_tokens=LAST, base_f1=0.7)


# ----------------------------------------------------------------------------- the heatmaps
def _pred(attention, probs):
    probs = np.asarray(probs, dtype=float)
    return SimpleNamespace(attention=[np.asarray(a, dtype=float) for a in attention], probs=probs,
                           predicted=probs.argmax(-1))


def test_heatmaps_in_words():
    from attnlib.metrics import jsd

    p_base = _pred([[0.6, 0.3, 0.1], [0.2, 0.8]], [[0.2, 0.8], [0.6, 0.4]])
    p_adv = _pred([[0.1, 0.3, 0.6], [0.2, 0.8]], [[0.3, 0.7], [0.4, 0.6]])
    collapsed = _peak_table({"base": [0.4, 0.1, 0.5], "adversary, λ = 1": [0.0, 0.95, 0.97]})
    frame = _frame([0.5], [0.1], lams=[1.0])
    r = ch08.heatmaps(p_base, p_adv, tokens=[["a", "good", "film"], ["dull", "plot"]],
                      peak_table=collapsed, frame=frame)
    d = float(jsd(np.array([0.1, 0.3, 0.6]), np.array([0.6, 0.3, 0.1])))
    assert r["ch08_heatmaps"] == (
        "In the first, the base puts its largest weight, 0.60, on “a”, the adversary its largest, "
        f"0.60, on “film” (JSD {d:.2f}); the adversary's p(positive) is 0.70 against the base's "
        "0.80, the same decision. In the second, the base puts its largest weight, 0.80, on "
        "“plot”, the adversary its largest, 0.80, on “plot” (JSD 0.00); the adversary's "
        "p(positive) is 0.60 against the base's 0.40, a different decision."
    )
    assert r["ch08_slide"].startswith("Slide to λ = 1 and the adversary moves to the final token")
    flat = _peak_table({"base": [0.4, 0.1, 0.5], "adversary, λ = 1": [0.3, 0.5, 0.5]})
    r = ch08.heatmaps(p_base, p_adv, tokens=[["a", "good", "film"], ["dull", "plot"]],
                      peak_table=flat, frame=frame)
    assert r["ch08_slide"] == ("Slide along the sweep and compare each adversary's attention with the "
                               "peak table.")


def test_heatmaps_refuse_mismatched_sentences():
    p = _pred([[0.6, 0.4]], [[0.2, 0.8]])
    table = _peak_table({"base": [0.4, 0.1, 0.5], "adversary, λ = 1": [0.3, 0.5, 0.5]})
    frame = _frame([0.5], [0.1], lams=[1.0])
    with pytest.raises(ValueError, match="one prediction per sentence"):
        ch08.heatmaps(p, p, tokens=[["a", "b"], ["c", "d"]], peak_table=table, frame=frame)
    with pytest.raises(ValueError, match="1 to 4"):
        ch08.heatmaps(p, p, tokens=[], peak_table=table, frame=frame)


# ----------------------------------------------------------------------------- W&P's Table 4
def _comparison(tvd, jsd):
    return SimpleNamespace(output_tvd=np.asarray(tvd, float), attention_jsd=np.asarray(jsd, float))


T4 = {"lambda": 5.25e-4, "f1": 0.823, "tvd": 0.036, "jsd": 0.514}


def test_table4_beside_sets_ours_with_intervals_beside_theirs():
    rng = np.random.default_rng(0)
    cmp = _comparison(rng.uniform(0.0, 0.2, 200), rng.uniform(0.6, 0.7, 200))
    frame = _frame([0.3, 0.68, 0.68, 0.69], [0.15, 0.13, 0.11, 0.13])
    t = ch08.table4_beside(cmp, frame, lam=0.1, paper=T4, scale=2.0)
    assert list(t.index) == ["λ (our loss)", "λ (W&P's loss)", "test F1", "mean TVD [95% interval]",
                             "mean JSD [95% interval]"]
    ours, theirs = t.iloc[:, 0].tolist(), t.iloc[:, 1].tolist()
    assert ours[:2] == ["0.1", "0.05"] and theirs[:2] == ["0.00105", "0.000525"]
    assert ours[3].startswith(f"{cmp.output_tvd.mean():.3f} [") and theirs[3:] == ["0.036", "0.514"]
    with pytest.raises(ValueError, match="not in the sweep"):
        ch08.table4_beside(cmp, frame, lam=0.5, paper=T4, scale=2.0)
    with pytest.raises(ValueError, match="per-instance comparison"):
        ch08.table4_beside(SimpleNamespace(), frame, lam=0.1, paper=T4, scale=2.0)


def test_table4_beside_gives_our_f1_its_interval_from_the_adversarys_predictions():
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(2)
    labels = rng.integers(0, 2, 200)
    base = np.where(rng.random(200) < 0.85, labels, 1 - labels)
    same = rng.random(200) < 0.9
    cmp = SimpleNamespace(output_tvd=rng.uniform(0, 0.2, 200), attention_jsd=rng.uniform(0.6, 0.7, 200),
                          predicted_b=base, same_decision=same)
    frame = _frame([0.3, 0.68, 0.68, 0.69], [0.15, 0.13, 0.11, 0.13])
    t = ch08.table4_beside(cmp, frame, lam=0.1, paper=T4, scale=2.0, labels=labels)
    assert t.index[2] == "test F1 [95% interval]"
    adversary = np.where(same, base, 1 - base)  # the adversary decides as the base where "same", else not
    ours = t.iloc[2, 0]
    assert ours.startswith(f"{f1_score(labels, adversary):.3f} [") and ours.endswith("]")
    with pytest.raises(ValueError, match="one per instance"):
        ch08.table4_beside(cmp, frame, lam=0.1, paper=T4, scale=2.0, labels=labels[:10])


def test_table4_reading_uses_the_interval():
    far = ch08.table4(_comparison(np.full(50, 0.11), np.full(50, 0.69)), lam=0.1, paper=T4, scale=2.0)
    assert far["ch08_t4_lam_wp"] == "0.05" and far["ch08_t4_paper_lam_ours"] == "0.00105"
    assert "is above theirs (0.036)" in far["ch08_t4_tvd"] and "is above theirs (0.514)" in far["ch08_t4_jsd"]
    rng = np.random.default_rng(1)
    near = ch08.table4(_comparison(rng.normal(0.036, 0.05, 40), rng.normal(0.514, 0.1, 40)), lam=0.1,
                       paper=T4, scale=2.0)
    assert "within noise of theirs" in near["ch08_t4_tvd"] and "within noise of theirs" in near["ch08_t4_jsd"]
