"""Chapter 8's readings (attnlib.presentation.readings.ch08) on small hand-made results."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from attnlib import uncertainty
from attnlib.presentation.readings import ch08

LAMS = [0.001, 0.01, 0.1, 1.0]
N = 300
SEEDS = (1, 2, 3)


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


def _comparison(jsd, tvd, same=None):
    jsd, tvd = np.asarray(jsd, float), np.asarray(tvd, float)
    return SimpleNamespace(attention_jsd=jsd, output_tvd=tvd, max_attention=np.full(len(jsd), 0.5),
                           predicted_b=np.zeros(len(jsd), int),
                           same_decision=np.ones(len(jsd), bool) if same is None else np.asarray(same, bool))


def _floor(jsd_means=(0.14, 0.15, 0.16), tvd_means=(0.09, 0.10, 0.11), n=N, seed=0, seeds=SEEDS):
    """A SeedVariance-like result: each retrained seed's per-sentence JSD and TVD around its mean."""
    rng = np.random.default_rng(seed)
    rows = []
    for s, j, t in zip(seeds, jsd_means, tvd_means):
        rows.append(pd.DataFrame({"seed": s, "instance": np.arange(n), "jsd": j + rng.normal(0, 0.02, n),
                                  "tvd": t + rng.normal(0, 0.02, n), "same decision": rng.random(n) < 0.9}))
    models = {s: SimpleNamespace(test={"f1": 0.75 + 0.01 * k}) for k, s in enumerate(seeds)}
    return SimpleNamespace(per_seed=pd.concat(rows, ignore_index=True), models=models)


def _per(adversaries: dict, uniform=(0.34, 0.085), floor=None, seed=1):
    """PerInstance from {λ: (mean JSD, mean TVD)} with per-sentence noise."""
    rng = np.random.default_rng(seed)
    comparisons = {v: _comparison(j + rng.normal(0, 0.02, N), t + rng.normal(0, 0.02, N))
                   for v, (j, t) in adversaries.items()}
    uni = _comparison(uniform[0] + rng.normal(0, 0.02, N), uniform[1] + rng.normal(0, 0.02, N))
    return ch08.per_instance(comparisons, floor or _floor(), uni)


ADVERSARIES = {0.001: (0.38, 0.10), 0.01: (0.689, 0.30), 0.1: (0.69, 0.10), 1.0: (0.05, 0.10)}
UNIFORM_MODEL = SimpleNamespace(test={"f1": 0.65})
BASE_MODEL = SimpleNamespace(test={"f1": 0.75})


@pytest.fixture(scope="module")
def sweep():
    per = _per(ADVERSARIES)
    judged = ch08.judge(per)
    frame = _frame([float(per.adv_jsd[v].mean()) for v in LAMS], [float(per.adv_tvd[v].mean()) for v in LAMS])
    return per, judged, frame


def _peak_table(rows: dict, degenerate: dict | None = None) -> pd.DataFrame:
    """A peak table from {row: [first, last, mean peak weight]}; the most common peak is the last
    token with the share of the second entry."""
    out = pd.DataFrame(rows, index=["peak on first token", "peak on last token", "mean peak weight"]).T
    out["most common peak"] = "the last token"
    out["share peaking there"] = out["peak on last token"]
    out["95% interval"] = [f"[{max(v - 0.02, 0):.3f}, {min(v + 0.02, 1):.3f}]" for v in out["share peaking there"]]
    out["degenerate"] = [(degenerate or {}).get(r, "yes" if v > 0.6 else "no")
                         for r, v in zip(out.index, out["share peaking there"])]
    return out


def _peaks_for(lams, degenerate_lams=()):
    rows = {"base": [0.12, 0.0, 0.5], "seed 1": [0.07, 0.01, 0.54], "seed 2": [0.08, 0.0, 0.44],
            "seed 3": [0.06, 0.0, 0.59]}
    for v in lams:
        rows[f"adversary, λ = {v:g}"] = [0.0, 0.96, 0.99] if v in degenerate_lams else [0.2, 0.08, 0.27]
    return _peak_table(rows)


# ----------------------------------------------------------------------------- gathering and judging
def test_per_instance_gathers_seeds_by_row_and_adversaries_by_lambda():
    floor = _floor()
    per = _per(ADVERSARIES, floor=floor)
    assert per.seeds == SEEDS and per.lams == tuple(LAMS)
    assert per.seed_jsd.shape == (3, N) and per.seed_same.shape == (3, N)
    one = floor.per_seed[floor.per_seed.seed == 2].sort_values("instance")
    assert per.seed_tvd[1] == pytest.approx(one.tvd.to_numpy())
    assert per.label == "random seeds 1, 2, 3 (Chapter 7)"
    with pytest.raises(ValueError, match="sentences"):
        ch08.per_instance({0.1: _comparison([0.1] * 5, [0.1] * 5)}, floor, _comparison([0.1] * N, [0.1] * N))
    with pytest.raises(ValueError, match="each λ"):
        ch08.per_instance({}, floor, _comparison([0.1] * N, [0.1] * N))


def test_judge_reads_one_model_against_the_seed_points_interval(sweep):
    per, judged, _ = sweep
    assert judged.seed_tvd.estimate == pytest.approx(per.seed_tvd.mean(1).mean())
    assert judged.seed_tvd.method == "t over seeds and sentences"
    far = judged.tvd[0.01]  # 0.30 against retrained models at 0.09 to 0.11
    assert far.verdict == "higher" and far.seeds_text() == "holds in 3 of 3 seeds"
    # at the seeds' mean: above one retrained model and below another, each beyond noise
    assert judged.tvd[0.001].verdict == uncertainty.SEEDS_DISAGREE and not judged.tvd[0.001].differs
    assert judged.jsd_seed[1.0].verdict == "lower" and judged.jsd_uniform[1.0].verdict == "lower"
    assert judged.adv_jsd[0.1].method == "bootstrap"  # one adversary: an interval over the sentences


def test_a_difference_from_one_retrained_model_of_three_is_no_verdict():
    # the adversary is at the level of two retrained models; the third lies far below it
    per = _per({0.1: (0.5, 0.10)}, floor=_floor(tvd_means=(0.10, 0.10, 0.04)))
    c = ch08.judge(per).tvd[0.1]
    assert c.seeds_showing("higher") == 1
    assert c.verdict == uncertainty.WITHIN_NOISE and not c.differs
    assert c.seeds_text() == "beyond noise in 1 of 3 seeds alone"


def test_judge_needs_two_retrained_models():
    per = _per({0.1: (0.5, 0.1)}, floor=_floor(jsd_means=(0.1,), tvd_means=(0.1,), seeds=(1,)))
    with pytest.raises(ValueError, match="at least 2"):
        ch08.judge(per)


def test_yardstick_points_and_seed_spread(sweep):
    per, judged, _ = sweep
    points = ch08.yardstick_points(per)
    assert list(points) == [per.label, ch08.UNIFORM_LABEL]
    assert points[per.label] == pytest.approx((per.seed_jsd.mean(), per.seed_tvd.mean()))
    spread = ch08.seed_spread(per, judged)[per.label]
    assert len(spread["points"]) == 3 and spread["tvd"] == (judged.seed_tvd.low, judged.seed_tvd.high)


def test_sweep_table_has_intervals_and_the_verdict_against_retraining(sweep):
    per, judged, frame = sweep
    table = ch08.sweep_table(frame, per, judged, uniform=UNIFORM_MODEL, base=BASE_MODEL, seed_f1=[0.7, 0.8, 0.75])
    assert list(table.index) == [f"adversary, λ = {v:g}" for v in LAMS] + [
        per.label, ch08.UNIFORM_LABEL, "base model (itself)"]
    assert table.loc["adversary, λ = 0.01", "output change against retraining"] == "more (3 of 3 seeds)"
    assert table.loc["adversary, λ = 0.001", "output change against retraining"] == "within the seeds' spread"
    noisy = _per({0.1: (0.5, 0.10)}, floor=_floor(tvd_means=(0.10, 0.10, 0.04)))
    within = ch08.sweep_table(_frame([0.5], [0.1], lams=[0.1]), noisy, ch08.judge(noisy), uniform=UNIFORM_MODEL,
                              base=BASE_MODEL, seed_f1=[0.7])
    assert within.loc["adversary, λ = 0.1", "output change against retraining"] == "within noise"
    assert table.loc[per.label, "mean TVD(ŷ, ŷ_b) [95% interval]"] == judged.seed_tvd.format()
    assert table.loc[per.label, "test F1"] == "0.750"
    assert table.loc["base model (itself)", "test F1"] == "0.750"


def test_a_frame_without_its_columns_is_refused(sweep):
    per, judged, frame = sweep
    with pytest.raises(ValueError, match="mean_tvd"):
        ch08.curve(frame.drop(columns="mean_tvd"), per, judged)
    with pytest.raises(ValueError, match="no rows"):
        ch08.verdict(frame.iloc[:0], per, judged, _peaks_for(LAMS))


# ----------------------------------------------------------------------------- settings and yardsticks
def test_settings_by_hand_and_from_the_profiles():
    book = SimpleNamespace(wp=SimpleNamespace(lambdas=(0.0004, 0.001, 0.002, 0.01, 1.0), adversary_epochs=4))
    paper = SimpleNamespace(wp=SimpleNamespace(lambdas=(0.0001, 0.0004, 0.001, 0.002, 0.01, 0.1, 1.0),
                                               adversary_epochs=8))
    r = ch08.settings(book, paper, guide_lam=0.002, wp_range=(0.0004, 0.002))
    assert r == {
        "ch08_ln2": float(np.log(2)),
        "ch08_guide_lam": "0.002",
        "ch08_book_n_lams": 5,
        "ch08_book_lams": "0.0004, 0.001, 0.002, 0.01 and 1",
        "ch08_book_epochs": 4,
        "ch08_paper_extra_lams": "0.0001 and 0.1",
        "ch08_paper_epochs": 8,
        "ch08_wp_low": "0.0004",
        "ch08_wp_high": "0.002",
        "ch08_book_in_range": "0.0004, 0.001 and 0.002",
        "ch08_book_above": "0.01 and 1",
    }
    outside = ch08.settings(book, paper, guide_lam=None, wp_range=(10.0, 20.0))
    assert (outside["ch08_book_in_range"], outside["ch08_book_above"], outside["ch08_guide_lam"]) == (
        "none", "none", "none")
    with pytest.raises(ValueError, match="paper profile"):
        ch08.settings(book, book, guide_lam=0.001, wp_range=(0.0004, 0.002))
    from attnlib import adversarial_training, profiles

    real = ch08.settings(profiles.PROFILES["book"], profiles.PROFILES["paper"], guide_lam=0.002,
                         wp_range=adversarial_training.wp_lambda_range())
    assert real["ch08_book_n_lams"] == len(profiles.PROFILES["book"].wp.lambdas)
    assert real["ch08_book_in_range"] != "none"  # the book's grid covers W&P's range


def test_yardsticks_read_the_uniform_model_against_retraining(sweep):
    per, judged, _ = sweep
    r = ch08.yardsticks(per, judged, uniform=UNIFORM_MODEL, base=BASE_MODEL, seed_f1=[0.7, 0.8, 0.75])
    assert r["ch08_seed_label"] == "seed 1, 2, 3" and r["ch08_n_seeds"] == 3
    assert r["ch08_seed_point"].startswith(
        "3 retrained models (seeds 1, 2 and 3) lie, on average, at mean JSD "
        f"{judged.seed_jsd.estimate:.3f} (95% interval over seeds and sentences {judged.seed_jsd.range_text()}")
    assert r["ch08_seed_tvd"] == pytest.approx(judged.seed_tvd.estimate)
    assert r["ch08_seed_f1"] == pytest.approx(0.75) and (r["ch08_uni_f1"], r["ch08_base_f1"]) == (0.65, 0.75)
    # the uniform model's TVD (0.085) against retrained models at 0.09 to 0.11: within noise
    assert r["ch08_uni_vs_seed"].startswith("it changes the output about as much as retraining does (a difference of")
    assert r["ch08_uni_vs_seed"].endswith(", within noise)")
    low = _per(ADVERSARIES, uniform=(0.34, 0.01))
    said = ch08.yardsticks(low, ch08.judge(low), uniform=UNIFORM_MODEL, base=BASE_MODEL, seed_f1=[0.7])
    assert said["ch08_uni_vs_seed"].startswith("it changes the output less than retraining does")
    assert "3 of the 3 retrained models" in said["ch08_uni_vs_seed"]


def test_lambdas():
    r = ch08.lambdas(_frame([0.1] * 4, [0.1] * 4), lam=0.001)
    assert r == {"ch08_lams": "0.001, 0.01, 0.1 and 1", "ch08_lam": "0.001"}


# ----------------------------------------------------------------------------- the curve and W&P's test
def test_curve_describes_and_judges_each_point_against_the_yardsticks(sweep):
    per, judged, frame = sweep
    r = ch08.curve(frame, per, judged)
    assert r["ch08_tvd_max_lam"] == "0.01" and r["ch08_jsd_min_lam"] == "1"
    assert r["ch08_where"] == (
        "λ = 0.001, 0.01 and 0.1 lie right of both, beyond noise; λ = 1 lies left of both, beyond noise")
    assert r["ch08_cost_vs_seed"] == (
        "λ = 0.01 changes the output more than retraining does, beyond noise; λ = 0.001, 0.1 and 1 do not differ "
        "from it beyond noise")
    assert r["ch08_trend"].startswith("the mean JSD runs ") and "never falling" not in r["ch08_trend"]
    assert r["ch08_trend_verdict"].startswith("Each λ point is one adversary")
    assert r["ch08_trend_verdict"].endswith("only each point against the yardsticks, as above.")
    assert r["ch08_closest"].startswith("None of these models, the uniform model included, is closer")


def test_curve_with_no_cost_and_one_closer_model():
    per = _per({0.1: (0.6, 0.10), 1.0: (0.69, 0.02)})
    judged = ch08.judge(per)
    frame = _frame([0.6, 0.69], [0.1, 0.02], lams=[0.1, 1.0])
    r = ch08.curve(frame, per, judged)
    assert r["ch08_trend_verdict"].endswith("No adversary changes the output more than retraining does, beyond "
                                            "noise, at any λ of the sweep.")
    assert r["ch08_cost_vs_seed"].endswith("λ = 1 changes it less, beyond noise")
    assert r["ch08_closest"] == "The adversary at λ = 1 is closer to the base in output than retraining, beyond noise."


def test_verdict_names_passes_degenerate_ones_the_costly_and_the_left(sweep):
    per, judged, frame = sweep
    text = ch08.verdict(frame, per, judged, _peaks_for(LAMS, degenerate_lams=(0.1,)))["ch08_verdict"]
    assert text.startswith("So on rt-polarity a model *can* be trained to attend further from the base than "
                           "both yardsticks, beyond noise, for no more output change than retraining costs: by "
                           "W&P's criterion λ = 0.001 passes")
    assert "Also by W&P's criterion λ = 0.1 passes (mean TVD" in text
    assert "but it is degenerate: its attention peaks on the last token" in text
    assert "The adversary at λ = 0.01 attends further from the base than both yardsticks but changes" in text
    assert "λ = 1 fails the test: left of both yardsticks, its attention is closer" in text
    assert text.endswith("Each of these verdicts rests on one adversary per λ, read against the spread of 3 "
                         "retrained models.")


def test_verdict_when_only_degenerate_adversaries_pass():
    per = _per({0.01: (0.69, 0.10), 1.0: (0.69, 0.105)})
    judged = ch08.judge(per)
    frame = _frame([0.69, 0.69], [0.1, 0.105], lams=[0.01, 1.0])
    text = ch08.verdict(frame, per, judged, _peaks_for([0.01, 1.0], degenerate_lams=(0.01, 1.0)))["ch08_verdict"]
    assert text.startswith("By W&P's criterion λ = 0.01 and 1 pass (mean TVD 0.100 and 0.105 against the retrained "
                           "models' ")
    assert "but they are degenerate: their attention peaks on the last token in most sentences" in text
    assert "*can*" not in text


def test_verdict_with_no_adversary_right_of_the_yardsticks():
    per = _per({0.1: (0.15, 0.1)})
    text = ch08.verdict(_frame([0.15], [0.1], lams=[0.1]), per, ch08.judge(per), _peaks_for([0.1]))["ch08_verdict"]
    assert text.startswith("No adversary lands right of both yardsticks beyond noise")


# ----------------------------------------------------------------------------- where attention peaks
def test_one_position_counts_from_either_end_and_skips_ties():
    attention = [[0.1, 0.2, 0.7], [0.1, 0.9], [0.6, 0.2, 0.1, 0.1], [0.5, 0.5], [0.2, 0.1, 0.1, 0.6]]
    name, hits = ch08.one_position(attention)
    assert name == "the last token" and hits.tolist() == [1, 1, 0, 0, 1]
    name, hits = ch08.one_position([[0.6, 0.4], [0.7, 0.2, 0.1], [0.1, 0.8, 0.1]])
    assert name == "the first token" and hits.tolist() == [1, 1, 0]
    name, hits = ch08.one_position([[0.1, 0.8, 0.1, 0.0], [0.1, 0.7, 0.2, 0.0, 0.0]])
    assert name == "the second token" and hits.tolist() == [1, 1]
    name, _ = ch08.one_position([[0.1, 0.2, 0.6, 0.1], [0.1, 0.1, 0.1, 0.6, 0.1]])
    assert name == "the second-to-last token"
    assert ch08.one_position([[0.5, 0.5], [1 / 3] * 3]) [0] == "no single position"
    with pytest.raises(ValueError, match="at least one"):
        ch08.one_position([])


def test_attention_peaks_says_degenerate_only_when_most_sentences_peak_on_one_position(monkeypatch):
    from attnlib import train

    rng = np.random.default_rng(0)

    def attention(last_share, n=400):
        rows = []
        for _ in range(n):
            a = rng.dirichlet(np.ones(6)) * 0.3
            a[-1 if rng.random() < last_share else int(rng.integers(0, 5))] += 0.7  # else where the words say
            rows.append(a / a.sum())
        return rows

    models = {"degenerate": attention(0.97), "half": attention(0.5), "words": attention(0.1)}
    monkeypatch.setattr(train, "predict", lambda model, split: SimpleNamespace(attention=model))
    table = ch08.attention_peaks(models, split=None)
    assert table.loc["degenerate", "degenerate"] == "yes"
    assert table.loc["degenerate", "most common peak"] == "the last token"
    assert table.loc["half", "degenerate"] == "about half, within noise"
    assert table.loc["words", "degenerate"] == "no"
    assert table.loc["degenerate", "95% interval"].startswith("[0.9")
    with pytest.raises(ValueError, match="at least one"):
        ch08.attention_peaks({}, split=None)


LAST = pd.Series([0.94, 0.06], index=[".", "!"])


def test_peaks_name_the_degenerate_adversaries():
    table = _peaks_for([0.1, 1.0], degenerate_lams=(0.1, 1.0))
    frame = _frame([0.68, 0.69], [0.1, 0.2], f1=[0.71, 0.72], lams=[0.1, 1.0])
    r = ch08.peaks(table, frame, seed_models=SEEDS, last_tokens=LAST, base_f1=0.75)
    assert (r["ch08_base_first"], r["ch08_base_peakw"]) == (0.12, 0.5)
    assert r["ch08_peak_seeds"] == "1, 2 and 3" and r["ch08_seeds_first"] == "7%, 8% and 6%"
    assert r["ch08_peaks"].startswith("λ = 0.1: peak on the last token in 96% of sentences (95% interval "
                                      "[0.940, 0.980]), mean peak weight 0.990")
    assert r["ch08_collapse"] == (
        "The adversaries at λ = 0.1 and 1 are degenerate: each peaks on the last token in 96% to 96% of the test "
        "sentences (most of them, beyond noise; mean peak weight 0.990 or more); that token is ‘.’ in 94% of them. "
        "The forward half of the last BiLSTM state has read the whole sentence, so a decoder that looks only "
        "there still sees all of it. Their test F1: 0.710 and 0.720, against the base's 0.750."
    )
    assert r["ch08_spread"] == ""


def test_peaks_without_degenerate_adversaries_and_a_flatter_one():
    table = _peaks_for([0.1])
    r = ch08.peaks(table, _frame([0.3], [0.1], lams=[0.1]), seed_models=SEEDS, last_tokens=LAST, base_f1=0.75)
    assert r["ch08_collapse"].startswith("No adversary is degenerate")
    assert r["ch08_spread"].startswith("At λ = 0.1 the adversary's attention is flatter than the base's and than "
                                       "every retrained model's")


def test_peaks_need_every_row():
    table = _peak_table({"base": [0.4, 0.1, 0.5], "seed 1": [0.1, 0.2, 0.45]})
    with pytest.raises(ValueError, match="adversary"):
        ch08.peaks(table, _frame([0.1], [0.01], lams=[0.1]), seed_models=(1,), last_tokens=LAST, base_f1=0.7)
    with pytest.raises(ValueError, match="seed 4"):
        ch08.peaks(_peaks_for([0.1]), _frame([0.1], [0.01], lams=[0.1]), seed_models=(4,), last_tokens=LAST,
                   base_f1=0.7)


# ----------------------------------------------------------------------------- the heatmaps
def _pred(attention, probs):
    probs = np.asarray(probs, dtype=float)
    return SimpleNamespace(attention=[np.asarray(a, dtype=float) for a in attention], probs=probs,
                           predicted=probs.argmax(-1))


def test_heatmaps_in_words():
    from attnlib.metrics import jsd

    p_base = _pred([[0.6, 0.3, 0.1], [0.2, 0.8]], [[0.2, 0.8], [0.6, 0.4]])
    p_adv = _pred([[0.1, 0.3, 0.6], [0.2, 0.8]], [[0.3, 0.7], [0.4, 0.6]])
    frame = _frame([0.5], [0.1], lams=[1.0])
    r = ch08.heatmaps(p_base, p_adv, tokens=[["a", "good", "film"], ["dull", "plot"]],
                      peak_table=_peaks_for([1.0], degenerate_lams=(1.0,)), frame=frame)
    d = float(jsd(np.array([0.1, 0.3, 0.6]), np.array([0.6, 0.3, 0.1])))
    assert r["ch08_heatmaps"] == (
        "In the first, the base puts its largest weight, 0.60, on “a”, the adversary its largest, "
        f"0.60, on “film” (JSD {d:.2f}); the adversary's p(positive) is 0.70 against the base's "
        "0.80, the same decision. In the second, the base puts its largest weight, 0.80, on "
        "“plot”, the adversary its largest, 0.80, on “plot” (JSD 0.00); the adversary's "
        "p(positive) is 0.60 against the base's 0.40, a different decision."
    )
    assert r["ch08_slide"].startswith("Slide to λ = 1 and the adversary moves to the last token in most sentences")
    r = ch08.heatmaps(p_base, p_adv, tokens=[["a", "good", "film"], ["dull", "plot"]],
                      peak_table=_peaks_for([1.0]), frame=frame)
    assert r["ch08_slide"] == "Slide along the sweep and compare each adversary's attention with the peak table."


def test_heatmaps_refuse_mismatched_sentences():
    p = _pred([[0.6, 0.4]], [[0.2, 0.8]])
    table, frame = _peaks_for([1.0]), _frame([0.5], [0.1], lams=[1.0])
    with pytest.raises(ValueError, match="one prediction per sentence"):
        ch08.heatmaps(p, p, tokens=[["a", "b"], ["c", "d"]], peak_table=table, frame=frame)
    with pytest.raises(ValueError, match="1 to 4"):
        ch08.heatmaps(p, p, tokens=[], peak_table=table, frame=frame)


# ----------------------------------------------------------------------------- W&P's Table 4
T4 = {"lambda": 5.25e-4, "f1": 0.823, "tvd": 0.036, "jsd": 0.514}
RANGE = (4e-4, 2e-3)


def test_table4_lambda_applies_the_rule_within_wp_range():
    frame = _frame([0.35, 0.38, 0.68, 0.69, 0.69], [0.12, 0.11, 0.122, 0.139, 0.129],
                   lams=[4e-4, 1e-3, 2e-3, 1e-2, 1.0])
    assert ch08.table4_lambda(frame, wp_range=RANGE) == (0.002, True)
    # none in the range above 0.4: the range's largest JSD, flagged as not picked
    low = _frame([0.35, 0.38, 0.39, 0.69], [0.12, 0.11, 0.1, 0.05], lams=[4e-4, 1e-3, 2e-3, 1.0])
    assert ch08.table4_lambda(low, wp_range=RANGE) == (0.002, False)
    # a range holding no adversary: the sweep's largest JSD
    assert ch08.table4_lambda(low, wp_range=(1e-6, 1e-5)) == (1.0, False)


def test_table4_beside_sets_ours_with_intervals_and_the_degenerate_share_beside_theirs():
    rng = np.random.default_rng(0)
    cmp = _comparison(rng.uniform(0.6, 0.7, 200), rng.uniform(0.0, 0.2, 200))
    frame = _frame([0.3, 0.68, 0.68, 0.69], [0.15, 0.13, 0.11, 0.13])
    peak = {"most common peak": "the last token", "share peaking there": 0.94, "95% interval": "[0.920, 0.960]",
            "degenerate": "yes"}
    t = ch08.table4_beside(cmp, frame, lam=0.1, paper=T4, scale=2.0, peak_row=peak)
    assert list(t.index) == ["λ (our loss)", "λ (W&P's loss)", "test F1", "mean TVD [95% interval]",
                             "mean JSD [95% interval]", "share peaking on one position [95% interval]", "degenerate"]
    ours, theirs = t.iloc[:, 0].tolist(), t.iloc[:, 1].tolist()
    assert ours[:2] == ["0.1", "0.05"] and theirs[:2] == ["0.00105", "0.000525"]
    assert ours[3].startswith(f"{cmp.output_tvd.mean():.3f} [") and theirs[3:5] == ["0.036", "0.514"]
    assert ours[5:] == ["0.940 [0.920, 0.960] (the last token)", "yes"] and theirs[5:] == ["not reported"] * 2
    assert len(ch08.table4_beside(cmp, frame, lam=0.1, paper=T4, scale=2.0)) == 5
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
    adversary = np.where(same, base, 1 - base)
    assert t.iloc[2, 0].startswith(f"{f1_score(labels, adversary):.3f} [")
    with pytest.raises(ValueError, match="one per instance"):
        ch08.table4_beside(cmp, frame, lam=0.1, paper=T4, scale=2.0, labels=labels[:10])


def test_table4_reading_gives_both_scales_the_nearest_and_the_degenerate_share():
    per = _per({4e-4: (0.35, 0.12), 1e-3: (0.38, 0.11), 2e-3: (0.68, 0.12), 1.0: (0.69, 0.13)})
    judged = ch08.judge(per)
    frame = _frame([0.35, 0.38, 0.68, 0.69], [0.12, 0.11, 0.12, 0.13], lams=[4e-4, 1e-3, 2e-3, 1.0])
    far = _comparison(np.full(50, 0.69), np.full(50, 0.11))
    peak = {"most common peak": "the last token", "share peaking there": 0.94, "95% interval": "[0.920, 0.960]",
            "degenerate": "yes"}
    r = ch08.table4(far, frame, judged, lam=2e-3, picked=True, paper=T4, scale=2.0, wp_range=RANGE,
                    whole_grid_lam=1.0, peak_row=peak)
    assert (r["ch08_t4_lam"], r["ch08_t4_lam_wp"], r["ch08_t4_paper_lam_ours"]) == ("0.002", "0.001", "0.00105")
    assert r["ch08_t4_range"] == "0.0004 to 0.002 in our scale (0.0002 to 0.001 in theirs)"
    assert r["ch08_table4"] == "the adversary at λ = 0.002 (mean JSD 0.680, mean TVD 0.120)"
    assert "is above theirs (0.036)" in r["ch08_t4_tvd"] and "is above theirs (0.514)" in r["ch08_t4_jsd"]
    assert r["ch08_t4_nearest"].startswith("Our adversary nearest their SST pick, λ = 0.001 (0.0005 in W&P's "
                                           "scale), reaches a mean JSD of 0.3")
    assert "below their 0.4" in r["ch08_t4_nearest"]
    assert r["ch08_t4_degenerate"].startswith("Our adversary is degenerate: it peaks on the last token in 94% "
                                              "(95% interval [0.920, 0.960])")
    assert r["ch08_t4_grid"].startswith("Over our whole grid the same rule picks λ = 1 (0.5 in W&P's scale), 952 "
                                        "times their SST pick: an adversary trained with a λ unlike theirs")
    rng = np.random.default_rng(1)
    near = ch08.table4(_comparison(rng.normal(0.514, 0.1, 40), rng.normal(0.036, 0.05, 40)), frame, judged,
                       lam=2e-3, picked=False, paper=T4, scale=2.0, wp_range=RANGE, whole_grid_lam=None)
    assert "within noise of theirs" in near["ch08_t4_tvd"] and "within noise of theirs" in near["ch08_t4_jsd"]
    assert near["ch08_table4"].startswith("no adversary: none in that range reaches a mean JSD above 0.4")
    assert near["ch08_t4_grid"] == "Over our whole grid no adversary reaches a mean JSD above 0.4 either."
    assert near["ch08_t4_degenerate"] == ""


def test_the_sweep_figure_shows_the_seed_spread(sweep):
    import matplotlib.pyplot as plt

    from attnlib import viz

    per, judged, frame = sweep
    points = ch08.yardstick_points(per)
    fig = viz.plot_lambda_sweep(frame, points=points, spread=ch08.seed_spread(per, judged))
    labels = fig.axes[0].get_legend_handles_labels()[1]
    assert "random seeds 1, 2, 3: each model" in labels and "random seeds 1, 2, 3: 95% interval" in labels
    assert judged.seed_tvd.high < fig.axes[0].get_ylim()[1]
    plt.close(fig)
    with pytest.raises(ValueError, match="not labels of points"):
        viz.plot_lambda_sweep(frame, points=points, spread={"other": {"points": [(0.1, 0.1)]}})
