"""attnlib.presentation.readings.ch12: Chapter 12's tables and readings, on small hand-made results."""
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib import published
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
    assert list(t.columns) == ["accuracy change", "2 s.e.", "changed", "the poster", "agrees"]
    assert t["changed"].tolist() == [True, False, False]
    assert t["the poster"].tolist() == ["changes", "does not change", "does not change"]
    assert t["agrees"].tolist() == [True, True, True]
    assert np.allclose(t["2 s.e."], 0.02)
    t2 = ch12.permutation_by_layer(_perm(layer_change=(0.0, -0.05, 0.0)))
    assert t2["agrees"].tolist() == [False, False, True]


def test_permutation_beside_poster():
    t = ch12.permutation_beside_poster(_perm(), POSTER)
    assert list(t.index) == ["original", "every head permuted"]
    assert t["accuracy"].tolist() == pytest.approx([0.8, 0.7])
    assert t["poster (IMDB, their model)"].tolist() == pytest.approx([0.8645, 0.794])


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
    assert out["ch12_heads_changed"] == 1
    assert out["ch12_single_verdict"] == "matters for a few heads"
    assert out["ch12_n_heads"] == 6 and out["ch12_layers"] == 3
    assert out["ch12_changed_layers"] == "layer 0"
    assert out["ch12_agree"] == 3
    assert out["ch12_poster_drop"] == pytest.approx(7.05)
    assert out["ch12_drop_vs_poster"] == "larger than"


def test_permutation_reading_other_branches():
    perm = _perm(head_change=(0.001, 0.002), layer_change=(0.0, 0.0, 0.0), all_change=-0.06)
    out = ch12.permutation(perm, ch12.permutation_by_layer(perm), POSTER, layers=3, heads=2)
    assert out["ch12_heads_changed"] == 0
    assert out["ch12_single_verdict"] == "barely matters"
    assert out["ch12_head_max_drop"] == 0.0  # no head lowers the accuracy: clipped at 0
    assert out["ch12_changed_layers"] == "no single layer"
    assert out["ch12_agree"] == 2
    assert out["ch12_drop_vs_poster"] == "about the same as"
    perm = _perm(layer_change=(-0.05, -0.05, 0.0), all_change=-0.02)
    out = ch12.permutation(perm, ch12.permutation_by_layer(perm), POSTER, layers=3, heads=2)
    assert out["ch12_changed_layers"] == "layer 0, layer 1"
    assert out["ch12_drop_vs_poster"] == "smaller than"


@settings(max_examples=60, deadline=None)
@given(st.floats(0.0, 0.3))
def test_drop_vs_poster_follows_the_two_point_band(drop):
    perm = _perm(all_change=-drop)
    words = ch12.permutation(perm, ch12.permutation_by_layer(perm), POSTER, layers=3, heads=2)
    pts = 100 * drop
    expected = "larger than" if pts > 7.05 + 2 else "smaller than" if pts < 7.05 - 2 else "about the same as"
    assert words["ch12_drop_vs_poster"] == expected


def test_permutation_rejects_a_result_without_its_table():
    with pytest.raises(ValueError, match="permute_heads"):
        ch12.permutation_by_layer(SimpleNamespace())
    bad = SimpleNamespace(table=pd.DataFrame({"scope": ["all"]}))
    with pytest.raises(ValueError, match="no column"):
        ch12.permutation_beside_poster(bad, POSTER)


def test_adversary_reading():
    adv = pd.DataFrame({"instance": [0, 1, 2, 0, 1, 2]})
    very = pd.DataFrame({"rows": [0.2, 0.6], "cls": [0.1, 0.05]}, index=["layer 0, head 1", "layer 1, head 0"])
    sst = published.ADVERSARY_FRACTION["sst"]
    out = ch12.adversary(adv, very, ["L0H1", "L1H0"], sst, threshold=0.49)
    assert out == {
        "ch12_adv_n": 3, "ch12_threshold": 0.49, "ch12_adv_rows_min": 0.2, "ch12_adv_rows_max": 0.6,
        "ch12_adv_cls_first": 0.1, "ch12_adv_cls_last": 0.05, "ch12_adv_last_head": "L1H0",
        "ch12_jw_sst": "0.50 / 0.54",
    }
    with pytest.raises(ValueError, match="two columns"):
        ch12.adversary(adv, very[["rows"]], ["a"], sst, threshold=0.49)


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
    assert out["ch12_n_beyond_seeds"] == 2
    assert out["ch12_seed_noise"] == 0.015 and out["ch12_n_seeds"] == 2
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
