"""attnlib.presentation.readings.ch12: Chapter 12's tables and readings, on small hand-made results."""
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib import published
from attnlib.models import Site
from attnlib.presentation.readings import ch12

POSTER = published.POSTER_ACCURACY  # 86.45 -> 79.4: a drop of 7.05 points
MICHEL = published.MICHEL_PRUNABLE  # WMT 0.2, BERT 0.4


def _perm(*, layer_change=(-0.05, 0.0, 0.001), layer_se=(0.01, 0.01, 0.01), head_change=(0.0, -0.02),
          head_se=(0.005, 0.005), all_change=-0.1, base=0.8):
    rows = [dict(scope="head", layer=i // 2, head=i % 2, accuracy=base + c, accuracy_change=c, change_se=s,
                 median_tvd=0.01 * (i + 1), flipped=0.0) for i, (c, s) in enumerate(zip(head_change, head_se))]
    rows += [dict(scope="layer", layer=i, head=-1, accuracy=base + c, accuracy_change=c, change_se=s,
                  median_tvd=0.1, flipped=0.0) for i, (c, s) in enumerate(zip(layer_change, layer_se))]
    rows.append(dict(scope="all", layer=-1, head=-1, accuracy=base + all_change, accuracy_change=all_change,
                     change_se=0.01, median_tvd=0.3, flipped=0.25))
    return SimpleNamespace(table=pd.DataFrame(rows), n_instances=50, n_permutations=10, base_accuracy=base)


def test_permutation_by_layer_table():
    t = ch12.permutation_by_layer(_perm())
    assert list(t.index) == ["layer 0", "layer 1", "layer 2"]
    assert list(t.columns) == ["accuracy change", "2 s.e.", "p", "changed (Holm)", "the poster", "agrees"]
    assert t["changed (Holm)"].tolist() == [True, False, False]
    assert t["the poster"].tolist() == ["changes", "does not change", "does not change"]
    assert t["agrees"].tolist() == [True, True, True]
    assert np.allclose(t["2 s.e."], 0.02)
    t2 = ch12.permutation_by_layer(_perm(layer_change=(0.0, -0.05, 0.0)))
    assert t2["agrees"].tolist() == [False, False, True]


def test_permutation_beside_poster():
    t = ch12.permutation_beside_poster(_perm(), POSTER)
    assert list(t.index) == ["accuracy, original", "accuracy, every head permuted", "drop in points (95% interval)"]
    assert t["ours"].tolist() == ["0.800", "0.700", "10.0 [8.0, 12.0]"]  # se 0.01: 1.96 points
    assert t["poster (IMDB, their model)"].tolist() == ["0.865", "0.794", "7.05"]


def test_permutation_reading_values():
    perm = _perm()
    out = ch12.permutation(perm, ch12.permutation_by_layer(perm), POSTER, layers=3, heads=2)
    assert out["ch12_n_perm_sentences"] == 50 and out["ch12_n_perm"] == 10
    assert out["ch12_base_acc"] == 0.8
    assert out["ch12_all_acc"] == pytest.approx(0.7)
    assert out["ch12_all_drop"] == pytest.approx(0.1)
    assert out["ch12_all_drop_pts"] == pytest.approx(10.0)
    assert out["ch12_all_tvd"] == 0.3 and out["ch12_all_flipped"] == 0.25
    assert out["ch12_head_max_drop"] == pytest.approx(0.02)
    assert out["ch12_head_max_tvd"] == pytest.approx(0.02)
    assert out["ch12_heads_changed"] == 1 and out["ch12_heads_changed_words"] == "1 of the 6 heads"
    assert out["ch12_single_verdict"] == "matters for a few heads"
    assert out["ch12_n_heads"] == 6 and out["ch12_layers"] == 3
    assert out["ch12_changed_layers"] == "layer 0"
    assert out["ch12_agree"] == 3
    assert out["ch12_poster_drop"] == pytest.approx(7.05)
    assert out["ch12_drop_vs_poster"] == "larger than"


def test_permutation_reading_other_branches():
    perm = _perm(head_change=(0.001, 0.002), layer_change=(0.0, 0.0, 0.0), all_change=-0.06)
    out = ch12.permutation(perm, ch12.permutation_by_layer(perm), POSTER, layers=3, heads=2)
    assert out["ch12_heads_changed"] == 0 and out["ch12_heads_changed_words"] == "none of the 6 heads"
    assert out["ch12_single_verdict"] == "barely matters"
    assert out["ch12_head_max_drop"] == 0.0  # no head lowers the accuracy: clipped at 0
    assert out["ch12_changed_layers"] == "no single layer"
    assert out["ch12_agree"] == 2
    assert out["ch12_drop_vs_poster"] == "within noise of"  # 6.0 [4.0, 8.0] points against 7.05
    perm = _perm(layer_change=(-0.05, -0.05, 0.0), all_change=-0.02)
    out = ch12.permutation(perm, ch12.permutation_by_layer(perm), POSTER, layers=3, heads=2)
    assert out["ch12_changed_layers"] == "layer 0, layer 1"
    assert out["ch12_drop_vs_poster"] == "smaller than"


@settings(max_examples=60, deadline=None)
@given(st.floats(0.0, 0.3), st.floats(0.001, 0.05))
def test_drop_vs_poster_follows_the_interval(drop, se):
    perm = _perm(all_change=-drop)
    perm.table.loc[perm.table.scope == "all", "change_se"] = se
    words = ch12.permutation(perm, ch12.permutation_by_layer(perm), POSTER, layers=3, heads=2)
    low, high = 100 * (drop - 1.959964 * se), 100 * (drop + 1.959964 * se)
    expected = "larger than" if low > 7.05 else "smaller than" if high < 7.05 else "within noise of"
    assert words["ch12_drop_vs_poster"] == expected
    assert words["ch12_all_drop_ci"] == f"{low:.1f} to {high:.1f}"


def test_holm_over_the_sweep_not_two_standard_errors():
    # layer 2 at z = 2.3 passes an uncorrected 2-s.e. rule, but not Holm over 6 tests
    perm = _perm(layer_change=(0.007, 0.0, -0.053), layer_se=(0.022, 0.01, 0.023), head_change=(0.0, 0.0))
    t = ch12.tested(perm)
    assert len(t) == 6 and t.loc[t.scope == "layer", "p"].iloc[2] < 0.05
    assert t["changed"].tolist() == [False, False, False, False, False, True]  # only "all"
    by_layer = ch12.permutation_by_layer(perm)
    out = ch12.permutation(perm, by_layer, POSTER, layers=3, heads=2)
    assert out["ch12_n_tests"] == 6
    assert "no layer's shuffling changes it beyond noise" in out["ch12_poster_layers"]
    assert "+0.007 (2 s.e. 0.044)" in out["ch12_poster_layers"]
    assert out["ch12_poster_layers_summary"].startswith("is not borne out")


def test_poster_layers_other_branches():
    perm = _perm()  # layer 0 alone changes
    out = ch12.permutation(perm, ch12.permutation_by_layer(perm), POSTER, layers=3, heads=2)
    assert out["ch12_poster_layers"].startswith("as the poster says")
    assert out["ch12_poster_layers_summary"] == "holds in our model too"
    perm = _perm(layer_change=(0.0, -0.05, -0.06))  # other layers change, the first does not
    out = ch12.permutation(perm, ch12.permutation_by_layer(perm), POSTER, layers=3, heads=2)
    assert "does not change it beyond noise" in out["ch12_poster_layers"]
    assert "layer 1 and layer 2 change it" in out["ch12_poster_layers"]
    assert out["ch12_poster_layers_summary"] == "does not hold in our model"


def test_permutation_rejects_a_result_without_its_table():
    with pytest.raises(ValueError, match="permute_heads"):
        ch12.permutation_by_layer(SimpleNamespace())
    bad = SimpleNamespace(table=pd.DataFrame({"scope": ["all"]}))
    with pytest.raises(ValueError, match="no column"):
        ch12.permutation_beside_poster(bad, POSTER)


def _adv(rows0, cls0, rows1, cls1):
    n = len(rows0)
    frame = lambda layer, head, r, c: pd.DataFrame({  # noqa: E731
        "layer": layer, "head": head, "instance": np.arange(n)[::-1],  # any order: sorted inside
        "eps_max_jsd": np.where(r, 0.6, 0.1)[::-1], "cls_jsd": np.where(c, 0.6, 0.1)[::-1]})
    return pd.concat([frame(0, 1, rows0, cls0), frame(1, 0, rows1, cls1)], ignore_index=True)


SITES = [Site(0, 1), Site(1, 0)]


def test_adversary_shares_with_intervals():
    adv = _adv([1, 0, 0, 0, 1], [1, 0, 0, 0, 0], [1, 1, 1, 0, 1], [0, 0, 0, 0, 0])
    t = ch12.adversary_shares(adv, SITES, threshold=0.49)
    assert list(t.index) == ["layer 0, head 1", "layer 1, head 0"]
    rows, cls = "share ≥ 0.49, all rows", "share ≥ 0.49, [CLS] row"
    assert t[rows].tolist() == pytest.approx([0.4, 0.8])
    assert t[cls].tolist() == pytest.approx([0.2, 0.0])
    assert (t["95% low"] <= t[rows]).all() and (t[rows] <= t["95% high"]).all()
    assert t.loc["layer 1, head 0", "[CLS] 95% low"] == 0 and t.loc["layer 1, head 0", "[CLS] 95% high"] == 0


def test_adversary_reading():
    n = 40
    rng = np.random.default_rng(0)
    same = rng.random(n) < 0.5
    sst = published.ADVERSARY_FRACTION["sst"]
    out = ch12.adversary(_adv(same, same, ~same, same), SITES, sst, threshold=0.49, eps=0.01, paper_eps=0.05)
    assert out["ch12_adv_n"] == n and out["ch12_threshold"] == 0.49
    assert out["ch12_adv_cls_first"] == out["ch12_adv_cls_last"] == same.mean()
    assert out["ch12_adv_cls_gap"].startswith("as often in the last layer as in the first, within noise")
    assert "difference, 0.00 to 0.00, contains 0" in out["ch12_adv_cls_gap"]  # no "+0.00" or "-0.00"
    assert out["ch12_adv_last_head"] == str(Site(1, 0)) and out["ch12_jw_sst"] == "0.50 / 0.54"
    assert "could only rise" in out["ch12_adv_eps_caveat"]
    assert "ch12_adv_cls_first_ci" in out and out["ch12_adv_rows_low"] <= out["ch12_adv_rows_min"]
    # every sentence fools the first layer's [CLS] row and none the last's: beyond noise
    out = ch12.adversary(_adv(same, np.ones(n, bool), same, np.zeros(n, bool)), SITES, sst,
                         threshold=0.49, eps=0.05, paper_eps=0.05)
    assert out["ch12_adv_cls_gap"] == "less often in the last layer than in the first, beyond noise"
    assert "could only rise" not in out["ch12_adv_eps_caveat"]


def test_adversary_refuses_unpaired_heads():
    adv = _adv([1, 0, 1], [1, 0, 0], [1, 1, 1], [0, 0, 0])
    adv.loc[adv.layer == 1, "instance"] += 10
    with pytest.raises(ValueError, match="same sentences"):
        ch12.adversary_shares(adv, SITES, threshold=0.49)
    with pytest.raises(ValueError, match="no rows"):
        ch12.adversary_shares(adv[adv.layer == 0], SITES, threshold=0.49)
    with pytest.raises(ValueError, match="cls_jsd"):
        ch12.adversary_shares(adv.drop(columns="cls_jsd"), SITES, threshold=0.49)


def test_masking_grids():
    ablation = pd.DataFrame({"layer": [0, 0, 1, 1], "head": [0, 1, 0, 1], "change": [0.01, -0.02, 0.0, 0.03]})
    grids = ch12.masking_grids(ablation, np.array([[0.6, 0.8], [1.0, 0.0]]))
    assert list(grids) == [ch12.MASKED, ch12.IMPORTANCE]
    for g in grids.values():
        assert list(g.index) == ["layer 0", "layer 1"] and list(g.columns) == ["head 0", "head 1"]
    assert grids[ch12.MASKED].to_numpy().tolist() == [[0.01, -0.02], [0.0, 0.03]]
    assert grids[ch12.IMPORTANCE].to_numpy().tolist() == [[0.6, 0.8], [1.0, 0.0]]
    assert list(ablation.columns) == ["layer", "head", "change"]  # the input is left alone
    with pytest.raises(ValueError, match="change"):
        ch12.masking_grids(ablation.drop(columns="change"), np.zeros((2, 2)))


FRACTIONS = [0.0, 0.25, 0.5, 0.75, 0.9375]


def _curve(lost_at=None, n=200):
    """A pruning curve whose accuracy is 1 until level ``lost_at``, where every sentence fails."""
    correct = [np.ones(n, bool) if lost_at is None or i < lost_at else np.zeros(n, bool)
               for i in range(len(FRACTIONS))]
    pruned = [[f"L{j}H0" for j in range(i)] for i in range(len(FRACTIONS))]
    return pd.DataFrame({"n_pruned": range(len(FRACTIONS)), "fraction": FRACTIONS,
                         "accuracy": [c.mean() for c in correct], "correct": correct, "pruned": pruned})


def _curves(imp, randoms):
    rand = pd.DataFrame({"fraction": FRACTIONS})
    rand.attrs["orders"] = [_curve(r) for r in randoms]
    return {"by increasing importance": _curve(imp), "in random orders (mean of 5)": rand}


ABLATION = pd.DataFrame({"layer": [0, 0, 1, 1], "head": [0, 1, 0, 1], "change": [0.02, -0.03, 0.001, 0.0],
                         "significant": [True, True, False, False]})


def test_masking_reading_values():
    out = ch12.masking(ABLATION, _curves(3, [1, 2]), MICHEL, seed_noise=0.015, n_seeds=2)
    assert out["ch12_n_significant"] == 2 and out["ch12_n_up"] == 1
    assert out["ch12_n_beyond_seeds"] == 2 and out["ch12_beyond_seeds_words"] == "2 of the 4 heads"
    assert out["ch12_significant_words"] == "2 (1 of them upward)"
    assert out["ch12_seed_noise"] == 0.015 and out["ch12_n_seeds"] == 2
    assert out["ch12_other_seeds"] == "2 other seeds"
    assert out["ch12_largest_change"] == pytest.approx(0.03)
    assert out["ch12_prunable"] == 0.5
    assert out["ch12_prunable_random_min"] == 0.0 and out["ch12_prunable_random_max"] == 0.25
    assert out["ch12_importance_vs_random"].startswith("more than any of the random orders")
    assert out["ch12_prune_vs_michel"] == "more"
    assert out["ch12_prune_last"] == 0.0  # the second-to-last level: lost
    assert out["ch12_last_head"] == "L3H0"


@pytest.mark.parametrize("imp, randoms, versus, michel", [
    (None, [1, 2], "more than any", "more"),  # everything prunable: 0.9375
    (1, [2, 3], "less than every random order", "less"),  # 0.0
    (2, [1, 3], "within the range of the random orders", "between their WMT and BERT shares"),  # 0.25
    (2, [2, 2], "within the range of the random orders", "between their WMT and BERT shares"),
])
def test_masking_reading_branches(imp, randoms, versus, michel):
    out = ch12.masking(ABLATION, _curves(imp, randoms), MICHEL, seed_noise=0.5, n_seeds=1)
    assert out["ch12_importance_vs_random"].startswith(versus)
    assert out["ch12_prune_vs_michel"] == michel
    assert out["ch12_n_beyond_seeds"] == 0


def test_masking_rejects_a_frame_without_significance():
    with pytest.raises(ValueError, match="significant"):
        ch12.masking(ABLATION.drop(columns="significant"), _curves(3, [1]), MICHEL, seed_noise=0.1, n_seeds=1)


def test_keys_reading():
    keys = pd.DataFrame({"layer": [0, 0, 1, 1], "alpha": [0.1, 0.5, 0.1, 0.5],
                         "accuracy": [0.70, 0.795, 0.79, 0.60], "base_accuracy": [0.8] * 4,
                         "jsd": [0.5, 0.1, 0.2, 0.6], "n_train": [100] * 4, "n_test": [40] * 4})
    out = ch12.keys(keys)
    assert out == {"ch12_keys_base": 0.8, "ch12_keys_kept_jsd": 0.2, "ch12_keys_kept_layer": 1,
                   "ch12_keys_min_acc": 0.6, "ch12_keys_max_jsd": 0.6, "ch12_keys_n": 100, "ch12_keys_test": 40}
    none_kept = ch12.keys(keys.assign(accuracy=0.5))
    assert none_kept["ch12_keys_kept_jsd"] == 0.0 and none_kept["ch12_keys_kept_layer"] == -1
    with pytest.raises(ValueError, match="jsd"):
        ch12.keys(keys.drop(columns="jsd"))


def test_keys_beside_poster_gives_our_accuracies_wilson_intervals():
    import scipy.stats

    keys = pd.DataFrame({"layer": [0, 0, 1, 1], "alpha": [0.1, 0.5, 0.1, 0.5],
                         "accuracy": [0.70, 0.800, 0.775, 0.60], "base_accuracy": [0.775] * 4,
                         "jsd": [0.5, 0.1, 0.2, 0.6], "n_train": [100] * 4, "n_test": [40] * 4})
    t = ch12.keys_beside_poster(keys, published.POSTER_ACCURACY)
    ours = t.iloc[:, 0].tolist()
    assert t.columns[0] == "ours (rt-polarity, layer 1)"  # the furthest move that keeps the accuracy: 31 of 40
    wilson = scipy.stats.binomtest(31, 40).proportion_ci(method="wilson")
    assert ours[1] == f"0.775 [{wilson.low:.3f}, {wilson.high:.3f}]" and ours[2] == "0.200"
    assert ours[0] == ours[1]  # the model's own accuracy is 31 of 40 too
    assert t.iloc[:, 1].tolist() == ["0.865", "0.835", "n/a"]  # the poster's 86.45% and 83.5%, no JSD
    furthest = ch12.keys_beside_poster(keys.assign(accuracy=0.5), published.POSTER_ACCURACY)
    assert furthest.columns[0].endswith("layer 1)") and furthest.iloc[2, 0] == "0.600"  # none kept: the furthest



def test_pruning_table_is_one_row_per_level_with_intervals_and_the_random_band():
    imp = pd.DataFrame({"n_pruned": [0, 1, 2], "fraction": [0.0, 0.5, 1.0], "accuracy": [0.8, 0.75, 0.5],
                        "low": [0.78, 0.72, 0.46], "high": [0.82, 0.78, 0.54]})
    rnd = pd.DataFrame({"n_pruned": [0, 1, 2], "fraction": [0.0, 0.5, 1.0], "accuracy": [0.8, 0.7, 0.5],
                        "min": [0.8, 0.65, 0.5], "max": [0.8, 0.74, 0.5]})
    rnd.attrs["orders"] = [None] * 5
    table = ch12.pruning_table(imp, rnd)
    assert table.index.name == "heads pruned" and table.index.tolist() == [0, 1, 2]
    assert table.loc[1].tolist() == ["50%", "0.750 [0.720, 0.780]", "0.700 (0.650–0.740)"]
    assert table.columns[-1] == "5 random orders: mean (range)"
    with pytest.raises(ValueError, match="same levels"):
        ch12.pruning_table(imp, rnd.assign(n_pruned=[0, 2, 4]))
    with pytest.raises(ValueError, match="low"):
        ch12.pruning_table(imp.drop(columns="low"), rnd)


def test_masking_reading_says_none_when_no_head_is_significant():
    quiet = ABLATION.assign(significant=False, change=[0.001, -0.001, 0.0, 0.0])
    out = ch12.masking(quiet, _curves(3, [1, 2]), MICHEL, seed_noise=0.015, n_seeds=1)
    assert out["ch12_significant_words"] == "none"
    assert out["ch12_beyond_seeds_words"] == "none of the 4 heads"
    assert out["ch12_other_seeds"] == "1 other seed"
