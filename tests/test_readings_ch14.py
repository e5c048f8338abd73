"""attnlib.presentation.readings.ch14: Chapter 14's readings, on small hand-made tables."""
import numpy as np
import pandas as pd
import pytest

from attnlib.presentation.readings import ch14

METHODS = ["raw attention", "rollout", "flow"]


def _rho(last_means, n=60, layers=2, seed=0):
    """{(measure, method): (n, layers)} with the last layer's values scattered around the given means."""
    rng = np.random.default_rng(seed)
    out = {}
    for measure, means in last_means.items():
        for method, mean in zip(METHODS, means):
            values = rng.normal(0.1, 0.05, (n, layers))
            values[:, -1] = mean + rng.normal(0, 0.05, n)
            out[measure, method] = values
    return out


def _table(rho):
    rows = []
    for (measure, method), values in rho.items():
        for layer in range(values.shape[1]):
            mean = float(values[:, layer].mean())
            rows.append(dict(measure=measure, method=method, layer=layer + 1, mean=mean, low=mean - 0.02,
                             high=mean + 0.02))
    return pd.DataFrame(rows)


def test_correlations_values_and_a_single_best():
    rho = _rho({"loo": (0.1, 0.5, 0.3), "gradient": (0.3, 0.1, 0.1)})
    table = _table(rho)
    out = ch14.correlations(table, rho, n=60)
    assert out["ch14_n"] == 60 and out["ch14_layers"] == 2
    assert out["ch14_loo_roll_last"] == pytest.approx(rho["loo", "rollout"][:, -1].mean())
    assert out["ch14_loo_raw_first"] == pytest.approx(rho["loo", "raw attention"][:, 0].mean())
    m = out["ch14_loo_flow_last"]
    assert out["ch14_loo_flow_ci"] == f"[{m - 0.02:.2f}, {m + 0.02:.2f}]"
    assert out["ch14_loo_best"] == "rollout"
    assert out["ch14_loo_beats"] == "rollout and flow agree"
    assert out["ch14_gradient_best"] == "raw attention"
    assert out["ch14_gradient_beats"] == "neither rollout nor flow agrees"
    assert len(out) == 2 + 2 * (6 + 3 + 3 + 3 + 2)  # values, last and first intervals, depth, best and beats
    assert out["ch14_loo_flow_ci_first"] == f"[{out['ch14_loo_flow_first'] - 0.02:.2f}, {out['ch14_loo_flow_first'] + 0.02:.2f}]"


def test_correlations_say_a_change_with_depth_only_beyond_noise():
    rho = _rho({"loo": (0.1, 0.5, 0.3), "gradient": (0.3, 0.1, 0.1)})  # layer 1 around 0.1
    out = ch14.correlations(_table(rho), rho, n=60)
    assert out["ch14_loo_roll_depth"].startswith("rose by 0.4")  # 0.1 -> 0.5
    assert out["ch14_loo_raw_depth"].startswith("changed within noise (")  # 0.1 -> 0.1
    rho["loo", "flow"][:, -1] = rho["loo", "flow"][:, 0] - 0.2
    assert ch14.correlations(_table(rho), rho, n=60)["ch14_loo_flow_depth"].startswith("fell by 0.20")


def test_correlations_ties_and_one_method_beating_raw():
    rho = _rho({"loo": (0.1, 0.5, 0.5), "gradient": (0.1, 0.1, 0.5)})
    out = ch14.correlations(_table(rho), rho, n=60)
    tied = out["ch14_loo_best"]  # best mean first
    assert tied in ("rollout and flow, tied within noise", "flow and rollout, tied within noise")
    assert out["ch14_gradient_best"] == "flow"
    assert out["ch14_gradient_beats"] == "flow agrees"


def test_correlations_needs_the_interval_columns():
    rho = _rho({"loo": (0.1, 0.5, 0.3), "gradient": (0.3, 0.1, 0.1)})
    with pytest.raises(ValueError, match="low"):
        ch14.correlations(_table(rho).drop(columns="low"), rho, n=60)


def _synthetic(n=50, T=8, seed=0, good=("rollout",)):
    """Sentences with 2 marker positions; ``good`` methods score them high, the others at random."""
    rng = np.random.default_rng(seed)
    rationales = []
    for _ in range(n):
        r = np.zeros(T, bool)
        r[rng.choice(T, 2, replace=False)] = True
        rationales.append(r)
    names = ["raw attention", "rollout", "flow", "blank-out", "gradient", "random"]
    scores = {name: [rng.random(T) + (2.0 * r if name in good else 0) for r in rationales] for name in names}
    from attnlib import faithfulness

    recovery = pd.DataFrame({name: faithfulness.rationale_ranking(s, rationales)[
        ["precision@k", "average precision", "AUC"]].mean() for name, s in scores.items()}).T
    return recovery, scores, rationales


def test_rationale_values_and_a_single_best():
    recovery, scores, rationales = _synthetic()
    out = ch14.rationale(recovery, scores, rationales, accuracy=0.97)
    assert out["ch14_syn_acc"] == 0.97
    assert out["ch14_syn_best"] == "rollout"
    assert out["ch14_syn_roll_ap"] == pytest.approx(1.0)
    assert out["ch14_syn_best_ap"] == pytest.approx(1.0)
    assert out["ch14_syn_random_ap"] == recovery.loc["random", "average precision"]
    assert out["ch14_syn_raw_ap"] < 0.8
    assert set(out) == {"ch14_syn_acc", "ch14_syn_best", "ch14_syn_best_ap", "ch14_syn_raw_ap",
                        "ch14_syn_roll_ap", "ch14_syn_flow_ap", "ch14_syn_random_ap"}


def test_rationale_ties_are_listed():
    recovery, scores, rationales = _synthetic(good=("rollout", "flow", "gradient"))
    out = ch14.rationale(recovery, scores, rationales, accuracy=0.9)
    assert out["ch14_syn_best"] == "rollout, flow and gradient, tied within noise"


def test_rationale_ignores_random_even_when_it_is_best():
    recovery, scores, rationales = _synthetic(good=("random", "flow"))
    out = ch14.rationale(recovery, scores, rationales, accuracy=0.9)
    assert out["ch14_syn_best"] == "flow"
    assert out["ch14_syn_best_ap"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="average precision"):
        ch14.rationale(recovery.drop(columns="average precision"), scores, rationales, accuracy=0.9)


def test_beside_abnar_gives_ours_their_interval_and_theirs_their_six_layers():
    from attnlib import published

    rho = _rho({"loo": (0.1, 0.5, 0.3), "gradient": (0.3, 0.1, 0.1)}, layers=4)
    table = _table(rho)
    both = ch14.beside_abnar(table, published.ABNAR_CORRELATION)
    ours, theirs = dict.fromkeys(both.columns.get_level_values(0))
    assert ours == "ours (rt-polarity, 4 layers), mean ±95%" and theirs == "A&Z (agreement task, 6 layers)"
    assert list(both[ours].columns) == ["L1", "L2", "L3", "L4"] and list(both[theirs].columns) == [f"L{i}" for i in range(1, 7)]
    row = table[(table.measure == "loo") & (table.method == "rollout") & (table.layer == 4)].iloc[0]
    assert both.loc[("loo", "rollout"), (ours, "L4")] == f"{row['mean']:.2f} ±0.02"  # half of [mean-0.02, mean+0.02]
    assert both.loc[("loo", "raw attention"), (theirs, "L1")] == "0.69"  # their Table 1
    with pytest.raises(ValueError, match="low"):
        ch14.beside_abnar(table.drop(columns="low"), published.ABNAR_CORRELATION)


def _first_layer(raw1, roll1, n=80, layers=3, seed=1):
    """{(loo, method): (n, layers)} with layer 1's per-sentence rho around the given means."""
    rng = np.random.default_rng(seed)
    out = {}
    for method, first in zip(METHODS, (raw1, roll1, roll1)):
        values = rng.normal(0.4, 0.05, (n, layers))
        values[:, 0] = first + rng.normal(0, 0.05, n)
        out["loo", method] = values
    return out


@pytest.mark.parametrize("raw1, roll1, expected", [
    (0.6, 0.3, "raw attention agrees better, by 0.30"),
    (0.3, 0.6, "rollout agrees better, by 0.30"),
    (0.4, 0.4, "within noise of each other"),
])
def test_cls_kept_reads_the_layer_one_gap_paired(raw1, roll1, expected):
    rho = _first_layer(raw1, roll1)
    kept, words = _table(rho), _table(_first_layer(0.2, 0.2, seed=2))
    first = np.arange(80) < 20
    out = ch14.cls_kept(words, kept, rho, first)
    assert expected in out["ch14_kept_gap"]
    assert "interval" in out["ch14_kept_gap"]
    assert out["ch14_kept_raw1"] == pytest.approx(rho["loo", "raw attention"][:, 0].mean())
    assert out["ch14_kept_roll1"] == pytest.approx(rho["loo", "rollout"][:, 0].mean())
    assert out["ch14_kept_cls_first"] == 0.25 and out["ch14_kept_last"] == 3
    assert out["ch14_words_roll1"] == pytest.approx(words[(words.method == "rollout") & (words.layer == 1)]["mean"].item())


def test_cls_kept_identical_maps_are_a_tie():
    """Raw attention and rollout with the same per-sentence rho: no gap to read."""
    rho = _first_layer(0.5, 0.5)
    rho["loo", "rollout"] = rho["loo", "raw attention"].copy()
    out = ch14.cls_kept(_table(rho), _table(rho), rho, np.ones(80, bool))
    assert "within noise" in out["ch14_kept_gap"]
    with pytest.raises(ValueError, match="bools"):
        ch14.cls_kept(_table(rho), _table(rho), rho, np.array([]))


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
