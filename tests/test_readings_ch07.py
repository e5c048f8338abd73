"""Chapter 7's readings (attnlib.presentation.readings.ch07) on small hand-made results over base models."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from attnlib import uncertainty
from attnlib.presentation.readings import ch07

CLASSES = ("negative", "positive")
BASES = (0, 1, 2)
N = 400


def _base(rng, n=N, floor=0.12, adv=0.5, tvd=0.05, beats=None, peak=None, pos_share=0.5):
    """One base's rows: floor JSD around ``floor``, the adversary's around ``adv`` (or, with
    ``beats``, above the floor on that share of the sentences and below it elsewhere)."""
    jsd = np.clip(floor + rng.normal(0, 0.03, n), 0, 0.69)
    if beats is None:
        adversary = np.clip(adv + rng.normal(0, 0.05, n), 0, 0.69)
    else:
        above = rng.random(n) < beats
        adversary = np.where(above, jsd + 0.2, np.maximum(jsd - 0.05, 0))
    predicted = (rng.random(n) < pos_share).astype(int)
    return dict(jsd=jsd, tvd=np.clip(tvd + rng.normal(0, 0.02, n), 0, 1), adversary_jsd=adversary,
                max_attention=rng.uniform(0.2, 1.0, n) if peak is None else np.asarray(peak, float),
                predicted=predicted)


def _stacked(per_base: list[dict], bases=BASES) -> pd.DataFrame:
    frames = [pd.DataFrame({"base": b, "instance": np.arange(len(rows["jsd"])), **rows})
              for b, rows in zip(bases, per_base)]
    return pd.concat(frames, ignore_index=True)


def _make(seed=0, **each):
    rng = np.random.default_rng(seed)
    return _stacked([_base(rng, **each) for _ in BASES])


def _with_bins(stacked):
    from attnlib import counterfactual

    return stacked.assign(bin=counterfactual.bin_by_max_attention(stacked.jsd, stacked.max_attention)["bin"].values)


# ----------------------------------------------------------------------------- lining up
def _floor_result(n, peak, predicted):
    per_instance = pd.DataFrame({"instance": np.arange(n), "jsd": np.linspace(0.1, 0.2, n),
                                 "tvd": np.full(n, 0.05), "max_attention": peak, "predicted": predicted})
    return SimpleNamespace(per_instance=per_instance)


def test_line_up_stacks_each_base_with_its_adversary():
    peak = np.linspace(0.3, 0.9, 10)
    floors = {b: _floor_result(10, peak + 0.01 * b, np.arange(10) % 2) for b in BASES}
    adversaries = {b: SimpleNamespace(indices=np.array([1, 3, 5]), eps_max_jsd=np.array([0.5, 0.6, 0.0]) + b,
                                      max_attention=(peak + 0.01 * b)[[1, 3, 5]]) for b in BASES}
    stacked = ch07.line_up(floors, adversaries)
    assert list(stacked.columns) == ["base", "instance", "jsd", "tvd", "adversary_jsd", "max_attention", "predicted"]
    assert stacked.base.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert stacked[stacked.base == 2].adversary_jsd.tolist() == [2.5, 2.6, 2.0]
    assert stacked[stacked.base == 1].instance.tolist() == [1, 3, 5]
    wrong = {**adversaries, 1: SimpleNamespace(indices=np.array([1, 3, 5]), eps_max_jsd=np.zeros(3),
                                               max_attention=np.zeros(3))}
    with pytest.raises(ValueError, match="another model"):
        ch07.line_up(floors, wrong)
    other = {**adversaries, 2: SimpleNamespace(indices=np.array([1, 3, 7]), eps_max_jsd=np.zeros(3),
                                               max_attention=(peak + 0.02)[[1, 3, 7]])}
    with pytest.raises(ValueError, match="same ones"):
        ch07.line_up(floors, other)
    with pytest.raises(ValueError, match="same base seeds"):
        ch07.line_up(floors, {0: adversaries[0]})


@pytest.mark.parametrize("column", ["base", "jsd", "tvd", "adversary_jsd", "max_attention", "predicted"])
def test_a_missing_column_is_refused(column):
    stacked = _make()
    with pytest.raises(ValueError, match=column):
        ch07.beyond_floor_table(stacked.drop(columns=column), eps=0.01, classes=CLASSES)


def test_an_empty_frame_is_refused():
    with pytest.raises(ValueError, match="no rows"):
        ch07.verdicts(_make().iloc[:0], classes=CLASSES)


# ----------------------------------------------------------------------------- the table and the numbers
def test_beyond_floor_table_gives_means_over_the_bases_with_intervals():
    stacked = _make()
    table = ch07.beyond_floor_table(stacked, eps=0.05, classes=CLASSES)
    assert list(table.columns) == ["predicted negative", "predicted positive", "all"]
    assert list(table.index) == ["sentences per base", "mean JSD, seeds (the floor)", "mean JSD, adversary",
                                 "adversary > seeds", "JSD >= 0.49, seeds", "JSD >= 0.49, adversary",
                                 "seeds' TVD <= eps"]
    per_base = [stacked[stacked.base == b] for b in BASES]
    assert table.loc["sentences per base", "all"] == f"{N}, {N}, {N}"
    assert table.loc["sentences per base", "predicted negative"] == ", ".join(
        str(int((g.predicted == 0).sum())) for g in per_base)
    mean = np.mean([g.adversary_jsd.mean() for g in per_base])
    assert table.loc["mean JSD, adversary", "all"].startswith(f"{mean:.3f} [")
    neg = np.mean([(g.jsd[g.predicted == 0] >= 0.49).mean() for g in per_base])
    assert table.loc["JSD >= 0.49, seeds", "predicted negative"].startswith(f"{neg:.3f} [")


def test_floor_numbers_over_the_bases_and_the_shown_base():
    stacked = _make(peak=np.r_[np.full(100, 0.2), np.full(300, 0.8)])
    r = ch07.floor(stacked, eps=0.05, n_seeds=3, shown=0)
    per_base = [stacked[stacked.base == b] for b in BASES]
    assert r["ch07_n_bases"] == 3 and r["ch07_bases"] == "0, 1 and 2" and r["ch07_n_all"] == N
    assert r["ch07_beats_all"] == pytest.approx(np.mean([(g.adversary_jsd > g.jsd).mean() for g in per_base]))
    beats = np.stack([(g.adversary_jsd > g.jsd).to_numpy(float) for g in per_base])
    assert r["ch07_beats_ci_all"] == uncertainty.over_seeds(beats).range_text()
    assert r["ch07_floor_of_ln2"] == pytest.approx(r["ch07_floor_mean_all"] / np.log(2))
    assert (r["ch07_n_shown"], r["ch07_n_top2"], r["ch07_n_low"]) == (N, 300, 100)
    assert r["ch07_n_low_neg"] + r["ch07_n_low_pos"] == 100
    with pytest.raises(ValueError, match="shown"):
        ch07.floor(stacked, eps=0.05, n_seeds=3, shown=7)


def test_group_gap_is_the_gap_and_a_tie_for_identical_bases():
    rng = np.random.default_rng(3)
    x = rng.random((1, 200))
    a = rng.random((1, 200)) < 0.4
    values, in_a, in_b = np.repeat(x, 3, 0), np.repeat(a, 3, 0), np.repeat(~a, 3, 0)
    c = ch07._group_gap(values, in_a, in_b, seed=0)
    assert c.difference.estimate == pytest.approx(x[0, a[0]].mean() - x[0, ~a[0]].mean())
    assert c.verdict == uncertainty.WITHIN_NOISE  # two groups of one uniform variable
    assert ch07._group_gap(values, in_a & False, in_b, seed=0) is None  # an empty group
    # the interval widens with the spread between the bases
    shifted = values + np.array([[0.0], [0.0], [0.0]]) + in_a * np.array([[0.0], [0.2], [-0.2]])
    wide = ch07._group_gap(shifted, in_a, in_b, seed=0)
    assert wide.difference.high - wide.difference.low > c.difference.high - c.difference.low


# ----------------------------------------------------------------------------- the verdicts
def test_an_adversary_beyond_the_floor_in_every_base_survives_the_control():
    r = ch07.verdicts(_make(), classes=CLASSES)
    assert r["ch07_adv_further"].startswith("goes further than retraining: its mean JSD lies above the floor's by")
    assert r["ch07_adv_further"].endswith("(holds in 3 of 3 base models)")
    assert r["ch07_verdict"].startswith("So on this BiLSTM J&W's finding survives W&P's control over all 3 base "
                                        "models: the adversarial attention lies beyond what retraining produces")
    assert r["ch07_verdict"].endswith("most of them.") and r["ch07_beats_word"] == "most of them"


def test_an_adversary_beyond_the_floor_in_one_base_of_three_is_no_verdict():
    rng = np.random.default_rng(1)
    stacked = _stacked([_base(rng, adv=0.12), _base(rng, adv=0.12), _base(rng, adv=0.6)])
    r = ch07.verdicts(stacked, classes=CLASSES)
    assert r["ch07_adv_further"].startswith("goes no further than retraining beyond noise: the difference")
    assert r["ch07_verdict"].startswith("So on this BiLSTM W&P's control leaves J&W's finding undecided")


def test_a_minority_and_a_half_share_in_words():
    r = ch07.verdicts(_make(beats=0.3), classes=CLASSES)
    assert r["ch07_beats_word"] == "a minority of them"
    assert ch07.verdicts(_make(beats=0.5), classes=CLASSES)["ch07_beats_word"] == "about half of them, within noise"


def test_a_class_gap_within_noise_and_beyond_it():
    same = ch07.verdicts(_make(beats=0.9), classes=CLASSES)["ch07_class_why"]
    assert same.startswith("The adversary beats the floor about as often for sentences predicted negative")
    assert "is within noise over the base models and sentences" in same
    # every base: negatives beaten on 60% of sentences, positives on 99%, at the same floor
    rng = np.random.default_rng(2)
    rows = []
    for _ in BASES:
        neg, pos = _base(rng, beats=0.6, n=300, pos_share=0.0), _base(rng, beats=0.99, n=300, pos_share=1.0)
        rows.append({k: np.r_[neg[k], pos[k]] for k in neg})
    split = ch07.verdicts(_stacked(rows), classes=CLASSES)["ch07_class_why"]
    assert split.startswith("The adversary beats the floor less often for sentences predicted negative (a gap of -0.")
    assert "holds in 3 of 3 base models" in split
    assert "the floor itself is no higher for one class than for the other beyond noise" in split


def test_a_class_gap_where_the_floor_is_higher():
    rng = np.random.default_rng(4)
    rows = []
    for _ in BASES:
        neg = _base(rng, beats=0.6, n=300, pos_share=0.0, floor=0.4)
        pos = _base(rng, beats=0.99, n=300, pos_share=1.0, floor=0.1)
        rows.append({k: np.r_[neg[k], pos[k]] for k in neg})
    why = ch07.verdicts(_stacked(rows), classes=CLASSES)["ch07_class_why"]
    assert why.startswith("The adversary beats the floor less often for sentences predicted negative")
    assert "where the floor is higher" in why


def test_the_zero_clause_counts_each_base():
    stacked = _make()
    stacked.loc[stacked.index[:3], "adversary_jsd"] = 0.0
    said = ch07.verdicts(stacked, classes=CLASSES)["ch07_adv_zero_clause"]
    assert said.startswith(f"For 3, 0 and 0 of the {N} sentences (base models 0, 1 and 2)")
    assert ch07.verdicts(_make(), classes=CLASSES)["ch07_adv_zero_clause"].startswith("The adversary found a "
                                                                                      "candidate")


# ----------------------------------------------------------------------------- the bins
def _binned(seed=0, high_beats=(0.6, 0.6, 0.6), low_beats=0.99):
    rng = np.random.default_rng(seed)
    rows = []
    for hb in high_beats:
        low = _base(rng, n=200, beats=low_beats, peak=np.full(200, 0.3))
        high = _base(rng, n=200, beats=hb, peak=np.full(200, 0.9))
        rows.append({k: np.r_[low[k], high[k]] for k in low})
    return _with_bins(_stacked(rows))


def test_bin_table_gives_the_share_per_bin_and_class_over_the_bases():
    by_bin = _binned()
    table = ch07.bin_table(by_bin, classes=CLASSES)
    assert list(table.columns) == ["predicted negative", "predicted positive"]
    assert list(table.index) == ["[0, 0.25)", "[0.25, 0.5)", "[0.5, 0.75)", "[0.75, 1]"]
    assert table.loc["[0, 0.25)", "predicted negative"] == "n/a"
    assert table.loc["[0.75, 1]", "predicted positive"].startswith("0.")
    with pytest.raises(ValueError, match="bin"):
        ch07.bin_table(by_bin.drop(columns="bin"), classes=CLASSES)


def test_bin_trends_fall_for_both_classes_over_the_bases():
    r = ch07.bin_trends(_binned(), classes=CLASSES)
    assert r["ch07_trends"].startswith("and it does for both classes, between the bins [0.25, 0.5) and [0.75, 1]")
    assert "holds in 3 of 3 base models" in r["ch07_trend_neg"]


def test_bin_trends_a_fall_in_one_base_of_three_is_no_verdict():
    r = ch07.bin_trends(_binned(high_beats=(0.99, 0.99, 0.3)), classes=CLASSES)
    assert "falls" not in r["ch07_trend_neg"] and "falls" not in r["ch07_trend_pos"]
    assert r["ch07_trends"].startswith("but for neither class does it change beyond noise") or \
        "moves one way for some base models" in r["ch07_trends"]


def test_bin_trends_identical_bins_are_a_tie_and_a_missing_bin_is_said():
    r = ch07.bin_trends(_binned(high_beats=(0.99, 0.99, 0.99)), classes=CLASSES)
    assert r["ch07_trends"].startswith("but for neither class does it change beyond noise")
    rng = np.random.default_rng(0)
    no_high = _with_bins(_stacked([_base(rng, n=100, peak=np.full(100, 0.3)) for _ in BASES]))
    said = ch07.bin_trends(no_high, classes=CLASSES)
    assert said["ch07_trend_neg"] == ("for sentences predicted negative some base model has fewer than two "
                                      "sentences in [0.25, 0.5) or [0.75, 1]")
    assert said["ch07_trends"].startswith("but the classes differ")


# ----------------------------------------------------------------------------- the other models' peaks
def _pred(attention, probs=None):
    attention = [np.asarray(a, dtype=float) for a in attention]
    probs = np.asarray(probs if probs is not None else [[0.5, 0.5]] * len(attention), dtype=float)
    return SimpleNamespace(attention=attention, probs=probs, predicted=probs.argmax(-1))


BASE_ATT = [[0.6, 0.3, 0.1], [0.5, 0.25, 0.25]]
SEED_ATT = [[0.1, 0.3, 0.6], [0.2, 0.6, 0.2]]


def _peaks_stacked(floor_values, n=2):
    """n sentences per base; the floor of base b is floor_values[b] on every sentence."""
    return pd.concat([pd.DataFrame({"base": b, "instance": np.arange(n), "jsd": f, "tvd": 0.0, "adversary_jsd": 0.5,
                                    "max_attention": 0.6, "predicted": np.arange(n) % 2})
                      for b, f in zip(BASES, floor_values)], ignore_index=True)


def test_seed_peaks_compare_the_other_models_among_themselves_with_the_floor():
    rng = np.random.default_rng(0)
    predictions = {s: _pred([rng.dirichlet(np.ones(4)) for _ in range(40)]) for s in range(4)}
    predictions[0] = _pred([[0.7, 0.1, 0.1, 0.1]] * 20 + [[0.1, 0.1, 0.1, 0.7]] * 20)
    r = ch07.seed_peaks(predictions, _peaks_stacked([0.9] * 3, n=40), shown=0)
    assert r["ch07_other_seeds"] == "1, 2 and 3" and r["ch07_base_first"] == 0.5
    assert r["ch07_odd_clause"].startswith("lower than the floor (")
    assert "holds in 3 of 3 base models" in r["ch07_odd_clause"]
    assert r["ch07_floor_mean"] == pytest.approx(0.9)
    high = ch07.seed_peaks(predictions, _peaks_stacked([0.0] * 3, n=40), shown=0)
    assert high["ch07_odd_clause"].startswith("higher than the floor (")
    tie = ch07.seed_peaks(predictions, _peaks_stacked([r["ch07_among_mean"]] * 3, n=40), shown=0)
    assert tie["ch07_odd_clause"].startswith("about as high as the floor") or "depends on the base" in \
        tie["ch07_odd_clause"]


def test_seed_peaks_need_every_base_and_enough_models():
    predictions = {0: _pred(BASE_ATT), 1: _pred(SEED_ATT)}
    with pytest.raises(ValueError, match="every base"):
        ch07.seed_peaks(predictions, _peaks_stacked([0.1] * 3), shown=0)
    with pytest.raises(ValueError, match="at least two"):
        ch07.seed_peaks(predictions, _peaks_stacked([0.1] * 3)[lambda f: f.base < 2], shown=0)


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
