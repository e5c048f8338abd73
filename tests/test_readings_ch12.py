"""attnlib.presentation.readings.ch12: Chapter 12's tables and readings, on small hand-made results
over seeds."""
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib import published
from attnlib.experiments.head_perturbation import HeadPermutationResult
from attnlib.models import Site
from attnlib.presentation.readings import ch12
from attnlib.seeds import SeedResults

POSTER = published.POSTER_ACCURACY  # 86.45 -> 79.4: a drop of 7.05 points
MICHEL = published.MICHEL_PRUNABLE  # WMT 0.2, BERT 0.4
N = 200


def _changes(mean: float, n: int = N, spread: float = 0.3, seed: int = 0) -> np.ndarray:
    """n per-sentence accuracy changes with the given mean (centred noise of the given spread)."""
    noise = np.random.default_rng(seed).normal(0, spread, n)
    return mean + noise - noise.mean()


def _perm(*, layer_change=(-0.08, 0.0, 0.001), head_change=(0.0, -0.02), all_change=-0.1, base=0.8,
          spread=0.3, seed=0):
    """A permute_heads result for a 3-layer x 2-head model (heads only in layer 0): per-sentence
    changes with the given means; the table's change_se from them."""
    paired, rows = {}, []

    def add(scope, layer, head, mean, k):
        d = _changes(mean, spread=spread, seed=seed * 100 + k)
        paired[(scope, layer, head)] = d
        rows.append(dict(scope=scope, layer=layer, head=head, accuracy=base + d.mean(),
                         accuracy_change=d.mean(), change_se=d.std(ddof=1) / np.sqrt(N),
                         median_tvd=0.01 * (k + 1), flipped=0.25 if scope == "all" else 0.0))

    for i, c in enumerate(head_change):
        add("head", 0, i, c, i)
    for i, c in enumerate(layer_change):
        add("layer", i, -1, c, 10 + i)
    add("all", -1, -1, all_change, 20)
    return HeadPermutationResult(table=pd.DataFrame(rows), base_accuracy=base, n_instances=N, n_permutations=10,
                                 seed=0, median_tvd={}, paired=paired, indices=np.arange(N))


def _over(*results):
    return SeedResults(tuple(range(len(results))), tuple(results))


def _three(**kwargs):
    return _over(*(_perm(seed=s, **kwargs) for s in range(3)))


def test_head_permutation_result_stacks_over_seeds():
    runs = _three()
    assert runs.stack(lambda r: r.change("all")).shape == (3, N)
    with pytest.raises(ValueError, match="no scope"):
        runs[0].change("layer", 7)


def test_permutation_by_layer_table():
    t = ch12.permutation_by_layer(_three())
    assert list(t.index) == ["layer 0", "layer 1", "layer 2"]
    assert list(t.columns) == ["accuracy change [95% interval]", "Holm rejects, seeds", "changed", "the poster",
                               "agrees"]
    assert t["changed"].tolist() == [True, False, False]
    assert t["Holm rejects, seeds"].tolist() == ["3 of 3", "0 of 3", "0 of 3"]
    assert t["accuracy change [95% interval]"].iloc[0].startswith("-0.080 [")
    assert t["agrees"].tolist() == [True, True, True]
    t2 = ch12.permutation_by_layer(_three(layer_change=(0.0, -0.08, 0.0)))
    assert t2["agrees"].tolist() == [False, False, True]


def test_a_layer_that_changes_in_one_seed_of_three_is_not_a_change():
    runs = _over(_perm(seed=0, layer_change=(-0.15, 0.0, 0.0)), _perm(seed=1, layer_change=(0.0, 0.0, 0.0)),
                 _perm(seed=2, layer_change=(0.0, 0.0, 0.0)))
    t = ch12.permutation_by_layer(runs)
    assert t["Holm rejects, seeds"].iloc[0] == "1 of 3"
    assert not t["changed"].iloc[0]
    out = ch12.permutation(runs, POSTER, layers=3, heads=2)
    assert out["ch12_changed_layers"] == "no single layer"
    assert "rejects \"no change\" in 1 of the 3 seeds" in out["ch12_poster_layers"]


def test_permutation_beside_poster():
    t = ch12.permutation_beside_poster(_three(), POSTER)
    assert list(t.index) == ["accuracy, original", "accuracy, every head permuted", "drop in points (95% interval)"]
    ours = t["ours (mean over 3 seeds)"].tolist()
    assert ours[:2] == ["0.800", "0.700"] and ours[2].startswith("10.0 [")
    assert t["poster (IMDB, their model)"].tolist() == ["0.865", "0.794", "7.05"]
    one = ch12.permutation_beside_poster(_over(_perm()), POSTER)
    assert one.columns[0] == "ours (mean over one model)"


def test_permutation_reading_values():
    out = ch12.permutation(_three(), POSTER, layers=3, heads=2)
    assert out["ch12_n_perm_sentences"] == N and out["ch12_n_perm"] == 10 and out["ch12_perm_seeds"] == 3
    assert out["ch12_base_acc"] == pytest.approx(0.8) and out["ch12_all_acc"] == pytest.approx(0.7)
    assert out["ch12_all_drop"] == pytest.approx(0.1) and out["ch12_all_drop_pts"] == pytest.approx(10.0)
    assert out["ch12_all_flipped"] == 0.25
    assert out["ch12_head_max_drop"] == pytest.approx(0.02)
    assert out["ch12_heads_changed"] == 0
    assert out["ch12_heads_changed_words"] == "none of the 6 heads in any of the 3 seeds"
    assert out["ch12_single_verdict"] == "barely matters"
    assert out["ch12_changed_layers"] == "layer 0" and out["ch12_agree"] == 3
    assert out["ch12_poster_drop"] == pytest.approx(7.05)
    assert out["ch12_drop_vs_poster"] == "larger than"
    assert out["ch12_all_drop_range"].endswith("points across the seeds")


def test_permutation_reading_heads_and_poster_branches():
    strong = _three(head_change=(0.0, -0.2))  # one head changes in every seed
    out = ch12.permutation(strong, POSTER, layers=3, heads=2)
    assert out["ch12_heads_changed_words"] == "1, 1 and 1 of the 6 heads in the 3 seeds"
    assert out["ch12_single_verdict"] == "matters for a few heads"
    one_seed = _over(_perm(seed=0, head_change=(0.0, -0.2)), _perm(seed=1), _perm(seed=2))
    out = ch12.permutation(one_seed, POSTER, layers=3, heads=2)
    assert out["ch12_heads_changed_words"] == "1 of the 6 heads in one seed of 3 and none in the others"
    assert out["ch12_single_verdict"].startswith("barely matters: a head passes the test in 1 of the 3 seeds")
    quiet = _three(layer_change=(0.0, 0.0, 0.0), all_change=-0.07)
    out = ch12.permutation(quiet, POSTER, layers=3, heads=2)
    assert out["ch12_changed_layers"] == "no single layer" and out["ch12_agree"] == 2
    assert out["ch12_drop_vs_poster"] == "within noise of"  # 7 points against 7.05
    assert out["ch12_poster_layers_summary"].startswith("is not borne out")
    small = _three(layer_change=(-0.08, -0.08, 0.0), all_change=-0.02)
    out = ch12.permutation(small, POSTER, layers=3, heads=2)
    assert out["ch12_changed_layers"] == "layer 0 and layer 1"
    assert out["ch12_drop_vs_poster"] == "smaller than"
    assert "layer 1 changes it too" in out["ch12_poster_layers"]


@settings(max_examples=30, deadline=None)
@given(st.floats(0.0, 0.3))
def test_drop_vs_poster_follows_the_pooled_interval(drop):
    runs = _three(all_change=-drop)
    out = ch12.permutation(runs, POSTER, layers=3, heads=2)
    low, high = (float(x) for x in out["ch12_all_drop_ci"].split(" to "))
    expected = "larger than" if low > 7.05 else "smaller than" if high < 7.05 else "within noise of"
    if abs(low - 7.05) > 0.06 and abs(high - 7.05) > 0.06:  # the printed ends are rounded
        assert out["ch12_drop_vs_poster"] == expected


def test_holm_over_the_sweep_not_two_standard_errors():
    """A layer at z of about 2.3 passes an uncorrected 2-s.e. rule but not Holm over the sweep."""
    se = 0.3 / np.sqrt(N)
    runs = _three(layer_change=(0.0, 0.0, -2.3 * se), head_change=(0.0, 0.0))
    t = ch12.tested(runs[0])
    assert len(t) == 6 and t.loc[t.scope == "layer", "p"].iloc[2] < 0.05
    assert t["changed"].tolist() == [False, False, False, False, False, True]  # only "all"
    out = ch12.permutation(runs, POSTER, layers=3, heads=2)
    assert out["ch12_n_tests"] == 6
    assert "no layer's shuffling changes it beyond noise" in out["ch12_poster_layers"]


def test_permutation_rejects_a_result_without_its_table_or_changes():
    with pytest.raises(ValueError, match="run_over_seeds"):
        ch12.permutation_by_layer(SimpleNamespace())
    bad = _over(SimpleNamespace(table=pd.DataFrame({"scope": ["all"]})))
    with pytest.raises(ValueError, match="no column"):
        ch12.permutation_beside_poster(bad, POSTER)
    old = _perm()
    old.paired = None
    with pytest.raises(ValueError, match="per-sentence changes"):
        ch12.permutation(_over(old), POSTER, layers=3, heads=2)


def test_searched_sites_take_each_layers_most_moving_head():
    perm = _perm()
    perm.table.loc[(perm.table.scope == "head") & (perm.table["head"] == 0), "median_tvd"] = 0.5
    assert ch12.searched_sites(perm) == [Site(0, 0)]


def _adv(rows0, cls0, rows1, cls1, heads=(1, 0)):
    n = len(rows0)
    frame = lambda layer, head, r, c: pd.DataFrame({  # noqa: E731
        "layer": layer, "head": head, "instance": np.arange(n)[::-1],  # any order: sorted inside
        "eps_max_jsd": np.where(r, 0.6, 0.1)[::-1], "cls_jsd": np.where(c, 0.6, 0.1)[::-1]})
    return pd.concat([frame(0, heads[0], rows0, cls0), frame(1, heads[1], rows1, cls1)], ignore_index=True)


SITES = [Site(0, 1), Site(1, 0)]


def test_adversary_shares_over_seeds_with_intervals():
    a = _adv([1, 0, 0, 0, 1], [1, 0, 0, 0, 0], [1, 1, 1, 0, 1], [0, 0, 0, 0, 0])
    b = _adv([1, 1, 0, 0, 1], [1, 0, 0, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0], heads=(0, 1))
    t = ch12.adversary_shares([a, b], [SITES, [Site(0, 0), Site(1, 1)]], threshold=0.49)
    assert list(t.index) == ["layer 0", "layer 1"]
    assert t["heads searched"].tolist() == ["1, 0", "0, 1"]
    rows, cls = "share ≥ 0.49, all rows", "share ≥ 0.49, [CLS] row"
    assert t[rows].tolist() == pytest.approx([0.5, 0.9])
    assert t[cls].tolist() == pytest.approx([0.2, 0.0])
    assert (t["95% low"] <= t[rows]).all() and (t[rows] <= t["95% high"]).all()
    one = ch12.adversary_shares([a], [SITES], threshold=0.49)
    assert one[rows].tolist() == pytest.approx([0.4, 0.8]) and one["heads searched"].tolist() == ["1", "0"]


def test_adversary_reading_over_seeds():
    n = 40
    rng = np.random.default_rng(0)
    same = [rng.random(n) < 0.5 for _ in range(3)]
    sst = published.ADVERSARY_FRACTION["sst"]
    advs = [_adv(s, s, ~s, s) for s in same]
    out = ch12.adversary(advs, [SITES] * 3, sst, threshold=0.49, eps=0.01, paper_eps=0.05)
    assert out["ch12_adv_n"] == n and out["ch12_adv_seeds"] == 3 and out["ch12_threshold"] == 0.49
    assert out["ch12_adv_cls_first"] == out["ch12_adv_cls_last"]
    assert out["ch12_adv_cls_gap"].startswith("as often in the last layer as in the first, within noise")
    assert "difference, 0.00 to 0.00, contains 0" in out["ch12_adv_cls_gap"]  # no "+0.00" or "-0.00"
    assert out["ch12_adv_last_head"] == "layer 1, head 0; layer 1, head 0; layer 1, head 0, in the 3 seeds"
    assert out["ch12_jw_sst"] == "0.50 / 0.54" and "could only rise" in out["ch12_adv_eps_caveat"]
    # every sentence fools the first layer's [CLS] row and none the last's, in every seed
    advs = [_adv(s, np.ones(n, bool), s, np.zeros(n, bool)) for s in same]
    out = ch12.adversary(advs, [SITES] * 3, sst, threshold=0.49, eps=0.05, paper_eps=0.05)
    assert out["ch12_adv_cls_gap"].startswith("less often in the last layer than in the first, beyond noise")
    assert "holds in 3 of 3 seeds" in out["ch12_adv_cls_gap"]
    assert "could only rise" not in out["ch12_adv_eps_caveat"]


def test_adversary_one_seed_of_three_is_no_verdict():
    n = 40
    base = np.random.default_rng(1).random(n) < 0.5
    advs = [_adv(base, np.ones(n, bool), base, np.zeros(n, bool))] + [_adv(base, base, base, base)] * 2
    out = ch12.adversary(advs, [SITES] * 3, published.ADVERSARY_FRACTION["sst"], threshold=0.49, eps=0.01,
                         paper_eps=0.05)
    assert out["ch12_adv_cls_gap"].startswith("as often in the last layer as in the first, within noise")
    assert "beyond noise in 1 of 3 seeds alone" in out["ch12_adv_cls_gap"]


def test_adversary_refuses_unpaired_heads():
    adv = _adv([1, 0, 1], [1, 0, 0], [1, 1, 1], [0, 0, 0])
    moved = adv.copy()
    moved.loc[moved.layer == 1, "instance"] += 10
    with pytest.raises(ValueError, match="same sentences"):
        ch12.adversary_shares([moved], [SITES], threshold=0.49)
    with pytest.raises(ValueError, match="no rows"):
        ch12.adversary_shares([adv[adv.layer == 0]], [SITES], threshold=0.49)
    with pytest.raises(ValueError, match="cls_jsd"):
        ch12.adversary_shares([adv.drop(columns="cls_jsd")], [SITES], threshold=0.49)
    with pytest.raises(ValueError, match="one frame and one list"):
        ch12.adversary_shares(adv, SITES, threshold=0.49)


def test_masking_grids():
    ablation = pd.DataFrame({"layer": [0, 0, 1, 1], "head": [0, 1, 0, 1], "change": [0.01, -0.02, 0.0, 0.03]})
    grids = ch12.masking_grids(ablation, np.array([[0.6, 0.8], [1.0, 0.0]]))
    assert list(grids) == [ch12.MASKED, ch12.IMPORTANCE]
    for g in grids.values():
        assert list(g.index) == ["layer 0", "layer 1"] and list(g.columns) == ["head 0", "head 1"]
    assert grids[ch12.MASKED].to_numpy().tolist() == [[0.01, -0.02], [0.0, 0.03]]
    assert list(ablation.columns) == ["layer", "head", "change"]  # the input is left alone
    with pytest.raises(ValueError, match="change"):
        ch12.masking_grids(ablation.drop(columns="change"), np.zeros((2, 2)))


def test_seed_noise_is_the_largest_gap_between_seeds():
    assert ch12.seed_noise([0.76, 0.75, 0.78]) == pytest.approx(0.03)
    assert ch12.seed_noise([0.7]) == 0.0
    with pytest.raises(ValueError):
        ch12.seed_noise([])


def test_masking_by_seed_counts_each_models_heads():
    quiet = ABLATION.assign(p_value=[0.5, 0.6, 0.8, 1.0])
    t = ch12.masking_by_seed([ABLATION, quiet], [0.76, 0.78], seeds=(3, 4))
    assert t.index.tolist() == [3, 4] and t.index.name == "seed"
    assert t["heads significant (Holm)"].tolist() == [1, 0] and t["of them upward"].tolist() == [1, 0]
    assert t["heads beyond the seed noise"].tolist() == [1, 1]  # |change| > 0.02: only -0.03
    assert t["largest change"].tolist() == pytest.approx([0.03, 0.03])
    with pytest.raises(ValueError, match="one test accuracy"):
        ch12.masking_by_seed([ABLATION], [0.7, 0.8])


def test_ablation_tested_applies_holm_over_the_heads():
    t = ch12.ablation_tested(ABLATION)
    assert t["significant (Holm)"].tolist() == [True, False, False, False]  # 0.04 fails Holm over 4 heads
    assert "significant (Holm)" not in ABLATION.columns


FRACTIONS = [0.0, 0.25, 0.5, 0.75, 0.9375]


def _curve(lost_at=None, n=200):
    """A pruning curve whose accuracy is 1 until level ``lost_at``, where every sentence fails."""
    correct = [np.ones(n, bool) if lost_at is None or i < lost_at else np.zeros(n, bool)
               for i in range(len(FRACTIONS))]
    pruned = [[f"L{j}H0" for j in range(i)] for i in range(len(FRACTIONS))]
    return pd.DataFrame({"n_pruned": range(len(FRACTIONS)), "fraction": FRACTIONS,
                         "accuracy": [c.mean() for c in correct], "correct": correct, "pruned": pruned})


def _curves(imp, randoms):
    orders = [_curve(r) for r in randoms]
    acc = np.stack([o["accuracy"].to_numpy() for o in orders])
    rand = pd.DataFrame({"n_pruned": range(len(FRACTIONS)), "fraction": FRACTIONS, "accuracy": acc.mean(0),
                         "min": acc.min(0), "max": acc.max(0)})
    rand.attrs["orders"] = orders
    return {ch12.BY_IMPORTANCE: _curve(imp), ch12.RANDOMLY: rand}


ABLATION = pd.DataFrame({"layer": [0, 0, 1, 1], "head": [0, 1, 0, 1], "change": [0.02, -0.03, 0.001, 0.0],
                         "p_value": [0.001, 0.04, 0.8, 1.0]})


def test_masking_reading_values_over_seeds():
    out = ch12.masking([ABLATION] * 3, [_curves(3, [1, 2])] * 3, MICHEL, seed_accuracy=[0.76, 0.775, 0.765])
    assert out["ch12_seed_noise"] == pytest.approx(0.015) and out["ch12_mask_seeds"] == 3
    assert out["ch12_n_significant"] == 3 and out["ch12_n_up"] == 3
    assert out["ch12_significant_words"] == "1, 1 and 1 of the 4 heads in the 3 seeds (3 of them upward)"
    assert out["ch12_n_beyond_seeds"] == 6
    assert out["ch12_beyond_seeds_words"] == "2, 2 and 2 of the 4 heads in the 3 seeds"
    assert out["ch12_largest_change"] == pytest.approx(0.03)
    assert out["ch12_prunable"] == 0.5 and out["ch12_prunable_seeds"] == "50%, 50% and 50%"
    assert out["ch12_prunable_random_min"] == 0.0 and out["ch12_prunable_random_max"] == 0.25
    assert out["ch12_importance_vs_random"] == "more than any of its random orders (in all 3 seeds)"
    assert out["ch12_curve_vs_random"].startswith("keeps more sentences right than the random orders do")
    assert out["ch12_prune_vs_michel"] == "more (in all 3 seeds)"
    assert out["ch12_prune_last"] == 0.0 and out["ch12_last_head"] == "L3H0; L3H0; L3H0, in the 3 seeds"


def test_masking_reading_names_the_direction_of_a_single_significant_head():
    quiet = ABLATION.assign(p_value=[0.5, 0.6, 0.8, 1.0])
    down = ABLATION.assign(p_value=[0.5, 0.001, 0.8, 1.0])  # the head that lowers the accuracy
    out = ch12.masking([down, quiet, quiet], [_curves(3, [1, 2])] * 3, MICHEL, seed_accuracy=[0.7, 0.7, 0.7])
    assert out["ch12_significant_words"] == "1 of the 4 heads in one seed of 3 and none in the others (downward)"


def test_masking_reading_when_the_seeds_disagree_or_tie():
    curves = [_curves(3, [1, 2]), _curves(1, [2, 3]), _curves(2, [2, 2])]
    out = ch12.masking([ABLATION] * 3, curves, MICHEL, seed_accuracy=[0.7, 0.7, 0.7], seeds=(4, 5, 6))
    assert out["ch12_importance_vs_random"] == ("more than any of its random orders in seed 4, less than every "
                                                "one of its random orders in seed 5 and within the range of its "
                                                "random orders in seed 6")
    assert out["ch12_prune_vs_michel"] == ("more in seed 4, less in seed 5 and between their WMT and BERT shares "
                                           "in seed 6")
    assert out["ch12_curve_vs_random"].endswith("the seeds disagree")
    same = [_curves(2, [2, 2])] * 3  # importance and random identical: a tie
    out = ch12.masking([ABLATION] * 3, same, MICHEL, seed_accuracy=[0.7, 0.71, 0.72])
    assert out["ch12_curve_vs_random"].startswith("is within noise of the random orders")


def test_masking_one_seed_of_three_better_is_no_verdict():
    curves = [_curves(None, [1, 1]), _curves(2, [2, 2]), _curves(2, [2, 2])]
    out = ch12.masking([ABLATION] * 3, curves, MICHEL, seed_accuracy=[0.7, 0.7, 0.7])
    assert not out["ch12_curve_vs_random"].startswith("keeps more")
    assert "1 of 3" in out["ch12_curve_vs_random"]


def test_masking_reading_says_none_when_no_head_is_significant():
    quiet = ABLATION.assign(p_value=[0.5, 0.6, 0.8, 1.0], change=[0.001, -0.001, 0.0, 0.0])
    out = ch12.masking([quiet] * 3, [_curves(3, [1, 2])] * 3, MICHEL, seed_accuracy=[0.7, 0.71, 0.72])
    assert out["ch12_significant_words"] == "none of the 4 heads in any of the 3 seeds"
    assert out["ch12_beyond_seeds_words"] == "none of the 4 heads in any of the 3 seeds"
    one = ch12.masking([quiet], [_curves(3, [1, 2])], MICHEL, seed_accuracy=[0.7])
    assert one["ch12_significant_words"] == "none of the 4 heads" and one["ch12_prune_vs_michel"] == "more"


def test_masking_rejects_mismatched_inputs():
    with pytest.raises(ValueError, match="p_value"):
        ch12.masking([ABLATION.drop(columns="p_value")], [_curves(3, [1])], MICHEL, seed_accuracy=[0.7])
    with pytest.raises(ValueError, match="one ablation and one set of curves per seed"):
        ch12.masking([ABLATION] * 2, [_curves(3, [1])], MICHEL, seed_accuracy=[0.7, 0.7])
    with pytest.raises(ValueError, match="list with one dict"):
        ch12.masking([ABLATION], _curves(3, [1]), MICHEL, seed_accuracy=[0.7])


def test_pruning_over_seeds_gives_the_mean_and_the_seed_band():
    curves = [_curves(3, [1, 2]), _curves(2, [2, 3]), _curves(4, [1, 1])]
    fig = ch12.pruning_over_seeds(curves)
    imp, rnd = fig.values()
    assert list(fig) == ["by increasing importance (mean of 3 seeds)", "in random orders (mean of 2 x 3 seeds)"]
    assert imp["accuracy"].tolist() == pytest.approx([1, 1, 2 / 3, 1 / 3, 0])
    assert imp["min"].tolist() == [1, 1, 0, 0, 0] and imp["max"].tolist() == [1, 1, 1, 1, 0]
    assert rnd["min"].tolist() == [1, 0, 0, 0, 0] and rnd["max"].tolist() == [1, 1, 1, 0, 0]
    assert imp.attrs["band"] == "importance: lowest to highest seed"
    assert rnd.attrs["band"] == "random: lowest to highest of 2 orders x 3 seeds"
    single = ch12.pruning_over_seeds([_curves(3, [1]), _curves(2, [2]), _curves(4, [3])])
    assert list(single)[1] == "in random orders (one per seed, mean of 3)"
    assert list(single.values())[1].attrs["band"] == "random: lowest to highest of the 3 seeds' orders"
    assert ch12.pruning_table([_curves(3, [1])] * 3).columns[-1] == "the 3 seeds' orders: mean (range)"
    one = ch12.pruning_over_seeds(curves[:1])
    assert list(one)[0] == "by increasing importance"


def test_pruning_table_is_one_row_per_level_with_intervals_over_seeds_and_the_random_band():
    curves = [_curves(3, [1, 2]), _curves(3, [2, 3]), _curves(3, [1, 1])]
    table = ch12.pruning_table(curves)
    assert table.index.name == "heads pruned" and table.index.tolist() == [0, 1, 2, 3, 4]
    assert table.columns.tolist() == ["share pruned", "by importance [95% interval], mean of 3 seeds",
                                      "2 orders x 3 seeds: mean (range)"]
    assert table.iloc[1, 0] == "25%" and table.iloc[1, 1].startswith("1.000")
    assert table.iloc[1, 2] == "0.500 (0.000–1.000)"
    bad = _curves(3, [1])
    bad[ch12.RANDOMLY] = bad[ch12.RANDOMLY].assign(n_pruned=[0, 2, 4, 6, 8])
    with pytest.raises(ValueError, match="same levels"):
        ch12.pruning_table([bad])


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
