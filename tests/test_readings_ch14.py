"""attnlib.presentation.readings.ch14: Chapter 14's readings, on small hand-made tables, over seeds."""
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from attnlib import uncertainty
from attnlib.presentation.readings import ch14

METHODS = ["raw attention", "rollout", "flow"]


def _rho(last_means, n=60, layers=2, seeds=3, seed=0, spread=None):
    """{(measure, method): (seeds, n, layers)}: layer 1 around 0.1, the last layer around the given
    means; ``spread`` {(measure, method): per-seed shifts} moves one method's seeds apart."""
    rng = np.random.default_rng(seed)
    out = {}
    for measure, means in last_means.items():
        for method, mean in zip(METHODS, means):
            values = rng.normal(0.1, 0.05, (seeds, n, layers))
            shifts = np.asarray((spread or {}).get((measure, method), np.zeros(seeds)), float)
            values[:, :, -1] = mean + shifts[:, None] + rng.normal(0, 0.05, (seeds, n))
            out[measure, method] = values
    return out


def _table(rho):
    rows = []
    for (measure, method), values in rho.items():
        values = values if values.ndim == 3 else values[None]
        for layer in range(values.shape[2]):
            mean = float(values[:, :, layer].mean())
            rows.append(dict(measure=measure, method=method, layer=layer + 1, mean=mean, low=mean - 0.02,
                             high=mean + 0.02, seeds=values.shape[0]))
    return pd.DataFrame(rows)


def test_correlations_values_and_a_single_best():
    rho = _rho({"loo": (0.1, 0.5, 0.3), "gradient": (0.3, 0.1, 0.1)})
    table = _table(rho)
    out = ch14.correlations(table, rho, n=60)
    assert out["ch14_n"] == 60 and out["ch14_layers"] == 2 and out["ch14_n_seeds"] == 3
    assert out["ch14_loo_roll_last"] == pytest.approx(rho["loo", "rollout"][:, :, -1].mean())
    assert out["ch14_loo_raw_first"] == pytest.approx(rho["loo", "raw attention"][:, :, 0].mean())
    m = out["ch14_loo_flow_last"]
    assert out["ch14_loo_flow_ci"] == f"[{m - 0.02:.2f}, {m + 0.02:.2f}]"
    assert out["ch14_loo_best"] == "rollout"
    assert out["ch14_loo_beats"] == "rollout (holds in 3 of 3 seeds) and flow (holds in 3 of 3 seeds) agree"
    assert out["ch14_gradient_best"] == "raw attention"
    assert out["ch14_gradient_beats"] == "neither rollout nor flow agrees"
    # values, last and first intervals, depth, per-seed values, best (name and clause) and beats
    assert len(out) == 3 + 2 * (6 + 3 + 3 + 3 + 3 + 3)
    assert out["ch14_loo_best_clause"] == "the best is rollout"
    seeds_roll = rho["loo", "rollout"][:, :, -1].mean(1)
    assert out["ch14_loo_roll_seeds"] == f"{seeds_roll[0]:.2f}, {seeds_roll[1]:.2f} and {seeds_roll[2]:.2f}"
    first = out["ch14_loo_flow_first"]
    assert out["ch14_loo_flow_ci_first"] == f"[{first - 0.02:.2f}, {first + 0.02:.2f}]"


def test_correlations_say_a_change_with_depth_only_beyond_noise():
    rho = _rho({"loo": (0.1, 0.5, 0.3), "gradient": (0.3, 0.1, 0.1)})  # layer 1 around 0.1
    out = ch14.correlations(_table(rho), rho, n=60)
    assert out["ch14_loo_roll_depth"].startswith("rose by 0.3")  # 0.1 -> 0.5, less noise
    assert out["ch14_loo_roll_depth"].endswith("over seeds and sentences; holds in 3 of 3 seeds)")
    assert out["ch14_loo_raw_depth"].startswith("changed within noise (")  # 0.1 -> 0.1
    rho["loo", "flow"][:, :, -1] = rho["loo", "flow"][:, :, 0] - 0.2
    assert ch14.correlations(_table(rho), rho, n=60)["ch14_loo_flow_depth"].startswith("fell by 0.20")


def test_correlations_one_seed_of_three_is_no_verdict():
    """Rollout above raw attention in one seed only (far above there): not "agrees better"."""
    rho = _rho({"loo": (0.1, 0.1, 0.1), "gradient": (0.1, 0.1, 0.1)},
               spread={("loo", "rollout"): (0.6, 0.0, 0.0)})
    out = ch14.correlations(_table(rho), rho, n=60)
    assert out["ch14_loo_beats"] == "neither rollout nor flow agrees"
    assert out["ch14_loo_best"].endswith("tied within noise")
    assert "rollout" in out["ch14_loo_best"]
    change = uncertainty.compare_over_seeds(rho["loo", "rollout"][:, :, -1], rho["loo", "rollout"][:, :, 0])
    assert change.seeds_text() == "beyond noise in 1 of 3 seeds alone"
    assert out["ch14_loo_roll_depth"] == ch14._depth(change)
    assert out["ch14_loo_roll_depth"].startswith("changed within noise")


def test_correlations_seeds_that_disagree_tie_and_say_so():
    """Rollout above raw attention in one seed and below in another: the seeds disagree."""
    rho = _rho({"loo": (0.3, 0.3, 0.1), "gradient": (0.3, 0.1, 0.1)},
               spread={("loo", "rollout"): (0.3, -0.3, 0.0)})
    out = ch14.correlations(_table(rho), rho, n=60)
    assert out["ch14_loo_best"] == "raw attention and rollout, tied within noise, or where the seeds disagree"
    assert out["ch14_loo_best_clause"] == ("the best are raw attention and rollout, tied within noise, or where "
                                           "the seeds disagree")
    assert out["ch14_loo_roll_depth"].startswith("rose in some seeds and fell in others")


def test_correlations_ties_and_one_method_beating_raw():
    rho = _rho({"loo": (0.1, 0.5, 0.5), "gradient": (0.1, 0.1, 0.5)})
    out = ch14.correlations(_table(rho), rho, n=60)
    assert out["ch14_loo_best"] in ("rollout and flow, tied within noise", "flow and rollout, tied within noise")
    same = _rho({"loo": (0.3, 0.3, 0.3), "gradient": (0.3, 0.3, 0.3)})
    assert ch14.correlations(_table(same), same, n=60)["ch14_loo_best_clause"] == (
        "no map is best: all 3 tie, within noise")
    assert out["ch14_gradient_best"] == "flow"
    assert out["ch14_gradient_beats"] == "flow (holds in 3 of 3 seeds) agrees"


def test_correlations_of_one_model_read_over_the_sentences():
    rho = {k: v[0] for k, v in _rho({"loo": (0.1, 0.5, 0.3), "gradient": (0.3, 0.1, 0.1)}).items()}  # (N, L)
    out = ch14.correlations(_table(rho), rho, n=60)
    assert out["ch14_n_seeds"] == 1
    assert out["ch14_loo_beats"] == "rollout (from one model) and flow (from one model) agree"


def test_correlations_needs_the_interval_columns_and_three_axes():
    rho = _rho({"loo": (0.1, 0.5, 0.3), "gradient": (0.3, 0.1, 0.1)})
    with pytest.raises(ValueError, match="low"):
        ch14.correlations(_table(rho).drop(columns="low"), rho, n=60)
    bad = dict(rho)
    bad["loo", "flow"] = np.zeros(5)
    with pytest.raises(ValueError, match="seeds, sentences, layers"):
        ch14.correlations(_table(rho), bad, n=60)


# ----------------------------------------------------------------------------- the synthetic task
def _marks(n=50, T=8, seed=0):
    rng = np.random.default_rng(seed)
    rationales = []
    for _ in range(n):
        r = np.zeros(T, bool)
        r[rng.choice(T, 2, replace=False)] = True
        rationales.append(r)
    return rationales


def _per_seed(rationales, good=("rollout",), seeds=3, only_in=None, seed=0):
    """One {method: scores} per seed: ``good`` methods score the markers high, the others at random;
    ``only_in`` {method: seed index}: that method is good in that seed alone."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(seeds):
        scores = {}
        for name in ch14.SYNTHETIC_METHODS:
            boost = name in good or (only_in or {}).get(name) == k
            scores[name] = [rng.random(len(r)) + (2.0 * r if boost else 0) for r in rationales]
        out.append(scores)
    return out


def test_rationale_values_and_a_single_best():
    rationales = _marks()
    per_seed = _per_seed(rationales)
    out = ch14.rationale(per_seed, rationales, accuracy=[0.97, 0.99, 1.0])
    assert out["ch14_syn_acc"] == pytest.approx(0.9866666) and out["ch14_syn_n_seeds"] == 3
    assert (out["ch14_syn_acc_low"], out["ch14_syn_acc_high"]) == (0.97, 1.0)
    assert out["ch14_syn_best"] == "rollout"
    assert out["ch14_syn_roll_ap"] == pytest.approx(1.0) and out["ch14_syn_best_ap"] == pytest.approx(1.0)
    assert out["ch14_syn_raw_ap"] < 0.8
    assert set(out) == {"ch14_syn_n_seeds", "ch14_syn_acc", "ch14_syn_acc_low", "ch14_syn_acc_high",
                        "ch14_syn_best", "ch14_syn_best_ap", "ch14_syn_raw_ap", "ch14_syn_roll_ap",
                        "ch14_syn_flow_ap", "ch14_syn_random_ap", "ch14_syn_blank_out"}
    assert out["ch14_syn_blank_out"] == ": agreeing with blank-out is not the same as finding the words that decide"
    found = ch14.rationale(_per_seed(rationales, good=("rollout", "blank-out")), rationales, accuracy=[1.0] * 3)
    assert found["ch14_syn_blank_out"] == "; blank-out is among them"
    with pytest.raises(ValueError, match="one value per seed"):
        ch14.rationale(per_seed, rationales, accuracy=[0.9])


def test_rationale_ties_are_listed_and_one_seed_is_no_verdict():
    rationales = _marks()
    out = ch14.rationale(_per_seed(rationales, good=("rollout", "flow", "gradient")), rationales, accuracy=[0.9] * 3)
    assert out["ch14_syn_best"] == "rollout, flow and gradient, tied within noise"
    # flow finds the markers in one seed of three only: it does not beat raw attention
    one = _per_seed(rationales, good=("rollout",), only_in={"flow": 0})
    ranked = ch14.rank_over_seeds({m: ch14._stack(one, rationales, "average precision", [m])[m]
                                   for m in ("raw attention", "flow")})
    assert ranked["rank"].tolist() == [1, 1]


def test_rationale_ignores_random_even_when_it_is_best():
    rationales = _marks()
    out = ch14.rationale(_per_seed(rationales, good=("random", "flow")), rationales, accuracy=[0.9] * 3)
    assert out["ch14_syn_best"] == "flow" and out["ch14_syn_best_ap"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="random"):
        ch14.rationale([{"flow": [np.ones(8)] * 50}], rationales, accuracy=[0.9])


def test_recovery_table_rows_and_the_ap_interval_within_zero_and_one():
    rationales = _marks()
    table = ch14.recovery_table(_per_seed(rationales), rationales)
    assert list(table.index) == list(ch14.SYNTHETIC_METHODS)
    assert list(table.columns) == ["precision@k", "average precision [95% interval]", "AUC"]
    assert table.loc["rollout", "average precision [95% interval]"] == "1.000 [1.000, 1.000]"
    assert table.loc["rollout", "AUC"] == pytest.approx(1.0)
    for cell in table["average precision [95% interval]"]:
        low, high = (float(x) for x in cell.split("[")[1].rstrip("]").split(", "))
        assert 0.0 <= low <= high <= 1.0


def _tied_flow(rationales, strict=False, seeds=3):
    """Flow that ties every marker with two other words at its top value (1); with ``strict``,
    one other word scores strictly above the markers."""
    per_seed = _per_seed(rationales, good=("rollout",), seeds=seeds)
    for scores in per_seed:
        flows = []
        for r in rationales:
            f = np.full(len(r), 0.5)
            f[r] = 1.0
            others = np.flatnonzero(~r)
            f[others[:2]] = 1.0
            if strict:
                f[others[2]] = 2.0
            flows.append(f)
        scores["flow"] = flows
    return per_seed


def test_flow_ties_read_what_the_ties_cost():
    rationales = _marks()
    out = ch14.flow_ties(_tied_flow(rationales), rationales)
    assert out["ch14_tie_sentences"] == 1.0 and out["ch14_tie_markers"] == 1.0
    assert out["ch14_tie_words"] == pytest.approx(4 / 8)
    # two markers in a tied group of four: AP as scored = mean(2/4, 2/4) = 0.5
    assert out["ch14_tie_ap"] == pytest.approx(0.5)
    # broken at random: E[precision at 1st marker] + E[at 2nd], exactly (1/4 places of 4 ...)
    assert 0.5 < out["ch14_tie_random"] < 1.0
    assert out["ch14_tie_favour"] == pytest.approx(1.0) and out["ch14_tie_strict"] == 0.0
    assert out["ch14_tie_cost"].startswith("0.500 of average precision")
    # rollout finds the markers too (AP 1): broken for the markers, flow is within noise of it
    assert out["ch14_tie_verdict"].startswith("With its ties broken for the markers, flow's average precision is "
                                              "1.000, within noise of rollout's 1.000")
    assert out["ch14_tie_verdict"].endswith("its order is right, and the ties alone cost it")
    assert out["ch14_tie_summary"].startswith("flow's low average precision (0.500) is its ties'")
    assert out["ch14_tie_others"] == ("Raw attention and rollout have no such ties (in no sentence do two words "
                                      "share their top score)")


def test_flow_ties_a_wrong_order_is_named():
    rationales = _marks()
    out = ch14.flow_ties(_tied_flow(rationales, strict=True), rationales)
    assert out["ch14_tie_strict"] == 1.0 and out["ch14_tie_favour"] < 1.0
    assert out["ch14_tie_verdict"].startswith("Even with its ties broken for the markers")
    assert "words it ranks strictly above a marker the rest" in out["ch14_tie_verdict"]
    assert "is partly its ties'" in out["ch14_tie_summary"]


def test_flow_ties_within_noise_when_flow_has_no_ties():
    """Flow with the same scores as rollout: breaking ties changes nothing, so they cost nothing."""
    rationales = _marks()
    per_seed = _per_seed(rationales)
    for scores in per_seed:
        scores["flow"] = [s.copy() for s in scores["rollout"]]
    out = ch14.flow_ties(per_seed, rationales)
    assert out["ch14_tie_cost"].startswith("no average precision beyond noise")
    assert out["ch14_tie_sentences"] == 0.0
    for scores in per_seed:  # raw attention ties its top two words in every sentence
        scores["raw attention"] = [np.where(r, 1.0, 0.0) for r in rationales]
    assert ch14.flow_ties(per_seed, rationales)["ch14_tie_others"] == (
        "Raw attention ties at the top in 100% of the sentences and rollout ties at the top in 0% of the sentences")
    with pytest.raises(ValueError, match="flow"):
        ch14.flow_ties([{k: v for k, v in s.items() if k != "flow"} for s in per_seed], rationales)


def test_ties_table_rows_and_columns():
    rationales = _marks()
    table = ch14.ties_table(_tied_flow(rationales), rationales)
    assert list(table.index) == METHODS
    assert table.loc["flow", "AP as scored (ties enter together)"] == pytest.approx(0.5)
    assert table.loc["flow", "AP, ties broken for the markers"] == pytest.approx(1.0)
    assert table.loc["rollout", "sentences whose top score is tied"] == 0.0


# ----------------------------------------------------------------------------- beside A&Z
def test_beside_abnar_gives_ours_their_interval_and_theirs_their_six_layers():
    from attnlib import published

    rho = _rho({"loo": (0.1, 0.5, 0.3), "gradient": (0.3, 0.1, 0.1)}, layers=4)
    table = _table(rho)
    both = ch14.beside_abnar(table, published.ABNAR_CORRELATION)
    ours, theirs = dict.fromkeys(both.columns.get_level_values(0))
    assert ours == "ours (rt-polarity, 4 layers, 3 seeds), mean ±95%" and theirs == "A&Z (agreement task, 6 layers)"
    assert list(both[ours].columns) == ["L1", "L2", "L3", "L4"]
    assert list(both[theirs].columns) == [f"L{i}" for i in range(1, 7)]
    row = table[(table.measure == "loo") & (table.method == "rollout") & (table.layer == 4)].iloc[0]
    assert both.loc[("loo", "rollout"), (ours, "L4")] == f"{row['mean']:.2f} ±0.02"  # half of [mean-0.02, mean+0.02]
    assert both.loc[("loo", "raw attention"), (theirs, "L1")] == "0.69"  # their Table 1
    one = ch14.beside_abnar(table.drop(columns="seeds"), published.ABNAR_CORRELATION)
    assert one.columns.get_level_values(0)[0] == "ours (rt-polarity, 4 layers), mean ±95%"
    with pytest.raises(ValueError, match="low"):
        ch14.beside_abnar(table.drop(columns="low"), published.ABNAR_CORRELATION)


def _first_layer(raw1, roll1, n=80, layers=3, seeds=3, seed=1, spread=(0.0, 0.0, 0.0)):
    """{(loo, method): (seeds, n, layers)} with layer 1's per-sentence rho around the given means;
    ``spread`` shifts raw attention's layer 1 per seed."""
    rng = np.random.default_rng(seed)
    out = {}
    for method, first in zip(METHODS, (raw1, roll1, roll1)):
        values = rng.normal(0.4, 0.05, (seeds, n, layers))
        values[:, :, 0] = first + rng.normal(0, 0.05, (seeds, n))
        if method == "raw attention":
            values[:, :, 0] += np.asarray(spread)[:, None]
        out["loo", method] = values
    return out


def _reference(first_share, n=80, seeds=3):
    """Blank-out importance with [CLS] (position 0) ranked first in the first ``first_share`` of sentences."""
    out = []
    for _ in range(seeds):
        padded = np.ones((n, 5))
        padded[: int(first_share * n), 0] = 2.0
        padded[int(first_share * n):, 1] = 2.0
        out.append(SimpleNamespace(padded=lambda m, p=padded: p))
    return out


@pytest.mark.parametrize("raw1, roll1, expected", [
    (0.6, 0.3, "raw attention agrees better, by 0.2"),
    (0.3, 0.6, "rollout agrees better, by 0.3"),
    (0.4, 0.4, "within noise of each other"),
])
def test_cls_kept_reads_the_layer_one_gap_over_seeds(raw1, roll1, expected):
    rho = _first_layer(raw1, roll1)
    kept, words = _table(rho), _table(_first_layer(0.2, 0.2, seed=2))
    out = ch14.cls_kept(words, kept, rho, _reference(0.25))
    assert expected in out["ch14_kept_gap"]
    assert "over seeds and sentences" in out["ch14_kept_gap"]
    assert out["ch14_kept_raw1"] == pytest.approx(rho["loo", "raw attention"][:, :, 0].mean())
    assert out["ch14_kept_roll1"] == pytest.approx(rho["loo", "rollout"][:, :, 0].mean())
    assert out["ch14_kept_cls_first"] == 0.25 and out["ch14_kept_last"] == 3
    assert out["ch14_words_roll1"] == pytest.approx(words[(words.method == "rollout") & (words.layer == 1)]["mean"].item())


def test_cls_kept_one_seed_of_three_and_identical_maps_are_no_gap():
    rho = _first_layer(0.4, 0.4, spread=(0.5, 0.0, 0.0))  # raw attention above in one seed only
    out = ch14.cls_kept(_table(rho), _table(rho), rho, _reference(1.0))
    assert "within noise of each other" in out["ch14_kept_gap"]
    assert "beyond noise in 1 of 3 seeds alone" in out["ch14_kept_gap"]
    # rollout better beyond noise in every seed, by sizes too different for the interval over seeds
    rho = _first_layer(0.4, 0.4, spread=(-0.02, -0.5, -0.05))
    out = ch14.cls_kept(_table(rho), _table(rho), rho, _reference(1.0))
    assert out["ch14_kept_gap"].startswith("rollout agrees better in each of the 3 models on its own, but by "
                                           "amounts so different")
    rho = _first_layer(0.5, 0.5)
    rho["loo", "rollout"] = rho["loo", "raw attention"].copy()
    out = ch14.cls_kept(_table(rho), _table(rho), rho, _reference(1.0))
    assert "within noise" in out["ch14_kept_gap"] and out["ch14_kept_cls_first"] == 1.0
    with pytest.raises(ValueError, match="one importance result"):
        ch14.cls_kept(_table(rho), _table(rho), rho, [])


def test_cls_kept_table_has_both_blocks_and_fits_a_phone():
    words, kept = _table(_first_layer(0.2, 0.2)), _table(_first_layer(0.6, 0.3))
    table = ch14.cls_kept_table(words, kept)
    assert list(table.columns) == ["L1", "L2", "L3"]
    assert list(table.index.get_level_values(0).unique()) == ["words only", "[CLS] and [SEP] kept"]
    assert list(table.loc["words only"].index) == METHODS
    assert table.loc[("[CLS] and [SEP] kept", "raw attention"), "L1"].startswith(
        f"{kept[(kept.method == 'raw attention') & (kept.layer == 1)]['mean'].item():.2f} ±")
    with pytest.raises(ValueError, match="measure"):
        ch14.cls_kept_table(words, kept, measure="gradient")


def test_abnar_numbers_come_from_published_as_printed():
    from attnlib import published

    out = ch14.abnar()
    assert out["ch14_az_loo_raw_1"] == ".69" and out["ch14_az_loo_roll_1"] == ".32"
    assert out["ch14_az_loo_flow_last"] == f"{published.ABNAR_CORRELATION['loo', 'flow'][-1].value:.2f}".lstrip("0")
    assert out["ch14_az_gradient_raw_last"] == ".46"
    assert (out["ch14_az_sst_low"], out["ch14_az_sst_high"]) == (".08", ".14")


def test_abnar_at_our_depth_reads_their_value_after_that_layer():
    from attnlib import published

    out = ch14.abnar(layers=4)
    assert (out["ch14_az_loo_roll_at"], out["ch14_az_loo_flow_at"]) == (".62", ".70")  # their Table 1, layer 4
    assert out["ch14_az_gradient_raw_at"] == ".00"
    assert ch14.abnar(layers=6)["ch14_az_loo_roll_at"] == ch14.abnar()["ch14_az_loo_roll_last"]
    assert "ch14_az_loo_roll_at" not in ch14.abnar()
    for bad in (0, 7, 2.0, True, "4"):
        with pytest.raises(ValueError, match="layers"):
            ch14.abnar(layers=bad)
    assert len(published.ABNAR_CORRELATION["loo", "rollout"]) == 6
