"""Chapter 11's readings (attnlib.presentation.readings.ch11) on small hand-made tables."""
from __future__ import annotations

import types

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnlib import published
from attnlib.presentation.readings import ch11


@pytest.mark.parametrize("layers, words", [
    ([], "no layer"), ([3], "layer 3"), ([1, 4], "layers 1 and 4"), ([1, 2, 6], "layers 1, 2 and 6"),
    ([2, 3, 4, 5, 6], "layers 2–6"), ([1, 3, 4, 5, 9], "layers 1, 3–5 and 9"),
])
def test_layer_list(layers, words):
    assert ch11.layer_list(layers) == words


def test_layer_list_says_every_layer_only_when_all_are_listed():
    assert ch11.layer_list([1, 2, 3, 4, 5, 6], of=range(1, 7)) == "every layer"
    assert ch11.layer_list([2, 3, 4, 5, 6], of=range(1, 7)) == "layers 2–6"
    assert ch11.layer_list([1], of=[1]) == "layer 1"  # one layer in all: named, not "every"


@given(st.lists(st.integers(1, 99), max_size=8))
def test_layer_list_names_every_layer_in_order(layers):
    words = ch11.layer_list(layers)
    numbers = []
    for w in words.replace(",", " ").split():
        if "–" in w:
            lo, hi = map(int, w.split("–"))
            numbers += list(range(lo, hi + 1))
        elif w.isdigit():
            numbers.append(int(w))
    assert numbers == layers
    assert words.startswith("no layer" if not layers else "layer " if len(layers) == 1 else "layers ")


def _stats(per_layer: dict, n: int = 60, heads: int = 2, noise: float = 0.01, seed: int = 0) -> pd.DataFrame:
    """A trace_statistics-like frame: per_layer = {layer (0-based): {column: (raw mean, effective mean)}};
    every sentence's values scatter around the means (the effective side by its own noise)."""
    rng = np.random.default_rng(seed)
    rows = []
    for layer, means in per_layer.items():
        for sentence in range(n):
            for head in range(heads):
                row = {"sentence": sentence, "layer": layer, "head": head}
                for g in ("[CLS]", "[SEP]", "punctuation"):
                    raw, eff = means.get(g, (0.2, 0.2))
                    base = raw + noise * rng.normal()
                    row[f"raw {g}"] = base
                    row[f"effective {g}"] = base + (eff - raw) + noise * rng.normal()
                rows.append(row)
    return pd.DataFrame(rows)


def test_mass_by_layer_is_the_mean_over_sentences_and_heads_with_layers_from_1():
    stats = _stats({0: {"[SEP]": (0.1, 0.2)}, 1: {}}, noise=0.0)
    mass = ch11.mass_by_layer(stats)
    assert list(mass.index) == [1, 2]
    assert mass.loc[1, "raw [SEP]"] == pytest.approx(0.1) and mass.loc[1, "effective [SEP]"] == pytest.approx(0.2)
    assert mass.loc[2, "raw [CLS]"] == pytest.approx(0.2)


def test_effective_mass_calls_a_difference_only_when_holm_rejects_it():
    stats = _stats({0: {"[SEP]": (0.05, 0.10), "[CLS]": (0.5, 0.4), "punctuation": (0.1, 0.05)},
                    1: {"[SEP]": (0.10, 0.05), "[CLS]": (0.4, 0.3)},
                    2: {"[SEP]": (0.05, 0.05)}}, seed=1)  # layer 3: no difference at all
    out = ch11.effective_mass(stats, brunner=published.BRUNNER_SEP_MASS)
    assert out["ch11_sep_up"] == "layer 1" and out["ch11_sep_down"] == "layer 2"
    assert out["ch11_sep_tie"] == "layer 3"
    assert out["ch11_sep_said"] == "*lower* than raw in layer 2; *higher* in layer 1; within noise in layer 3"
    assert out["ch11_cls_down"] == "layers 1 and 2" and out["ch11_punct_down"] == "layer 1"
    assert out["ch11_sep_gap"] == pytest.approx(0.05, abs=0.01)
    assert out["ch11_parks"] == "[CLS]" and out["ch11_mass_n"] == 60 and out["ch11_mass_tests"] == 9
    assert out["ch11_brunner_sep_raw"] == "0.50–0.57" and out["ch11_brunner_sep_eff"] == "0.1"


def test_effective_mass_says_within_noise_for_a_difference_of_noise_size():
    """A tiny difference in noise is no verdict, in any layer."""
    stats = _stats({0: {"[SEP]": (0.05, 0.0502)}, 1: {"[SEP]": (0.05, 0.0499)}}, noise=0.02)
    out = ch11.effective_mass(stats, brunner=published.BRUNNER_SEP_MASS)
    assert out["ch11_sep_said"] == "within noise of raw in every layer"
    assert out["ch11_sep_up"] == "no layer" and out["ch11_sep_down"] == "no layer"
    assert out["ch11_sep_tie"] == "every layer"


def test_holm_can_withdraw_a_difference_that_passes_alone():
    """One of many tests at p just under 0.05 passes alone but not after Holm's correction."""
    from attnlib import uncertainty

    stats = _stats({layer: {} for layer in range(6)}, n=200, noise=0.01, seed=3)
    shift = 2.05 * 0.01 * np.sqrt(2) / np.sqrt(200)  # about z = 2: p of about 0.04 on its own
    rows = (stats["layer"] == 0)
    stats.loc[rows, "effective [SEP]"] += shift
    per = stats[rows].groupby("sentence")[["raw [SEP]", "effective [SEP]"]].mean()
    d = per["effective [SEP]"] - per["raw [SEP]"]
    p = uncertainty.normal_p(np.array([d.mean()]), np.array([d.std(ddof=1) / np.sqrt(len(d))]))[0]
    out = ch11.effective_mass(stats, brunner=published.BRUNNER_SEP_MASS)
    if p < 0.05:  # significant alone ...
        assert p > 0.05 / 18  # ... but not among 18 tests
    assert out["ch11_sep_up"] == "no layer"


def test_mass_differences_table_reads_each_cell_with_its_interval_and_verdict():
    stats = _stats({0: {"[SEP]": (0.05, 0.10)}, 1: {}})
    table = ch11.mass_differences(stats)
    assert list(table.index) == [1, 2] and list(table.columns) == ["[CLS]", "[SEP]", "punctuation"]
    assert table.loc[1, "[SEP]"].startswith("+0.0") and table.loc[1, "[SEP]"].endswith(", higher")
    assert table.loc[2, "[SEP]"].endswith(", within noise")
    assert "[" in table.loc[1, "[SEP]"] and "]" in table.loc[1, "[SEP]"]


def test_effective_mass_refuses_a_missing_column():
    with pytest.raises(ValueError, match="raw punctuation"):
        ch11.effective_mass(_stats({0: {}}).drop(columns="raw punctuation"), brunner=published.BRUNNER_SEP_MASS)


COLUMNS = ["naive/cosine", "naive/l2", "linear/cosine", "linear/l2", "mlp/cosine", "mlp/l2"]


def _table(last_row, naive_l2=(1.0, 0.4, 0.5)):
    rows = {
        0: [1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
        1: [0.9, naive_l2[1], 0.95, 0.9, 0.95, 0.9],
        2: list(last_row),
    }
    table = pd.DataFrame.from_dict(rows, orient="index", columns=COLUMNS)
    table["naive/l2"] = list(naive_l2)
    table.index.name = "layer"
    return table


IDENTITY = types.SimpleNamespace(n_train_tokens=10_000, chance=0.041)


def test_token_identity_values():
    table = _table([0.8, 0.5, 0.93, 0.85, 0.96, 0.8])
    out = ch11.token_identity(table, IDENTITY, probe_tokens=40, brunner=published.BRUNNER_TOKEN_IDENTITY)
    assert out["ch11_probe_tokens"] == 40 and out["ch11_n_train_tokens"] == 10_000
    assert out["ch11_tid_last"] == 2 and out["ch11_tid_chance"] == 0.041
    assert out["ch11_tid_linear_cosine_last"] == 0.93 and out["ch11_tid_naive_l2_last"] == 0.5
    assert out["ch11_tid_naive_min"] == 0.4 and out["ch11_tid_naive_min_layer"] == 1
    assert out["ch11_tid_best"] == "mlp/cosine" and out["ch11_tid_best_value"] == 0.96
    assert out["ch11_brunner_naive_cos"] == 0.21
    assert out["ch11_tid_vs_brunner"] == "far more"  # 0.8 > 0.21 + 0.2
    assert out["ch11_tid_cos"] == "identify more tokens than"


@pytest.mark.parametrize("naive_cos, words", [
    (0.42, "far more"), (0.40, "about as many"), (0.21, "about as many"), (0.02, "about as many"),
    (0.0, "far fewer"),
])
def test_token_identity_against_brunner(naive_cos, words):
    table = _table([naive_cos, 0.5, 0.93, 0.85, 0.96, 0.8])
    out = ch11.token_identity(table, IDENTITY, probe_tokens=40, brunner=published.BRUNNER_TOKEN_IDENTITY)
    assert out["ch11_tid_vs_brunner"] == words


@pytest.mark.parametrize("last_row, words", [
    ([0.8, 0.5, 0.9, 0.9, 0.9, 0.9], "identify more tokens than"),  # ties count as beating
    ([0.8, 0.5, 0.9, 0.95, 0.96, 0.8], "do not always beat"),
    ([0.8, 0.5, 0.96, 0.8, 0.7, 0.75], "do not always beat"),
])
def test_cosine_against_l2(last_row, words):
    out = ch11.token_identity(_table(last_row), IDENTITY, probe_tokens=40, brunner=published.BRUNNER_TOKEN_IDENTITY)
    assert out["ch11_tid_cos"] == words


def test_token_identity_refuses_a_table_without_every_probe():
    table = _table([0.8, 0.5, 0.93, 0.85, 0.96, 0.8]).drop(columns="mlp/l2")
    with pytest.raises(ValueError, match="mlp/l2"):
        ch11.token_identity(table, IDENTITY, probe_tokens=40, brunner=published.BRUNNER_TOKEN_IDENTITY)


def test_token_identity_beside_brunner_gives_ours_their_intervals():
    from attnlib.experiments.token_identity import TokenIdentity

    rows = [{"layer": layer, "probe": c.split("/")[0], "distance": c.split("/")[1], "accuracy": a,
             "low": a - 0.01, "high": min(1.0, a + 0.01), "n_tokens": 500}
            for layer, values in ((0, [1.0] * 6), (1, [0.99] * 6), (6, [0.95, 0.44, 0.9, 0.7, 0.93, 0.65]))
            for c, a in zip(COLUMNS, values)]
    identity = TokenIdentity(pd.DataFrame(rows), n_train_tokens=100, n_test_tokens=500, chance=0.05)
    t = ch11.token_identity_beside_brunner(identity, brunner=published.BRUNNER_TOKEN_IDENTITY)
    assert list(t.index) == COLUMNS
    assert list(t.columns)[:2] == ["ours, layer 1 [95% interval]", "ours, layer 6 (last) [95% interval]"]
    assert t.loc["naive/l2", "ours, layer 6 (last) [95% interval]"] == "0.440 [0.430, 0.450]"
    assert t.loc["naive/cosine", "ours, layer 1 [95% interval]"] == "0.990 [0.980, 1.000]"
    theirs = published.BRUNNER_TOKEN_IDENTITY
    assert t.loc["mlp/l2", "Brunner, last layers"] == f"{theirs['mlp/l2'].value:.2f}"
    assert set(t["Brunner, layers 1-2"]) == {f"{theirs['first layers (1-2)'].value:.2f}"}
    no_first = TokenIdentity(pd.DataFrame([r for r in rows if r["layer"] != 1]), 100, 500, 0.05)
    with pytest.raises(ValueError, match="layer 1"):
        ch11.token_identity_beside_brunner(no_first, brunner=theirs)


# ----------------------------------------------------------------------------- moved from the chapter
def test_on_the_line_reads_the_first_model_and_the_extremes():
    line = pd.DataFrame({"dim = d_s - d_v where d_s > d_v": [1.0, 0.98], "dim = 0 where d_s <= d_v": [0.9997, 1.0],
                         "d_s > d_v": [0.43, 0.99], "max dim": [96, 40]}, index=["MiniLM", "small"])
    out = ch11.on_the_line(line)
    assert out == {"ch11_on_line_minilm": 1.0, "ch11_zero_minilm": 0.9997, "ch11_long_minilm": 0.43,
                   "ch11_on_line_min": 0.98, "ch11_max_dim": 96}
    with pytest.raises(ValueError, match="max dim"):
        ch11.on_the_line(line.drop(columns="max dim"))


def _panel(rows):
    return pd.DataFrame(rows, columns=["length", "correlation"])


def test_correlation_wording_reads_the_bands_from_the_head_dimension():
    panel = _panel([(10, 1.0), (32, 0.99), (32, 1.0), (40, 0.8), (64, 0.6), (65, 0.5), (100, 0.3), (120, 0.1)])
    out = ch11.correlation_wording(panel, head_dim=32)
    assert out["ch11_corr_exact"] == pytest.approx(2 / 3)
    assert out["ch11_corr_exceptions"].startswith("The 1 exception is all at 32 tokens, the head dimension")
    assert out["ch11_corr_mid"] == pytest.approx(0.7) and out["ch11_corr_mid_range"] == "33–64"
    assert out["ch11_corr_long"] == pytest.approx(0.2) and out["ch11_corr_long_from"] == 96
    assert out["ch11_corr_long_n"] == 2
    # the bands follow d_v: at 16, 17-32 and beyond 48
    out16 = ch11.correlation_wording(panel, head_dim=16)
    assert out16["ch11_corr_mid_range"] == "17–32" and out16["ch11_corr_long_from"] == 48
    assert out16["ch11_corr_exceptions"] == "There is no exception."  # 32 tokens is past d_v = 16
    odd = pd.concat([panel, _panel([(20, 0.9)])])  # an exception short of d_v
    assert "rank-deficient" in ch11.correlation_wording(odd, head_dim=32)["ch11_corr_exceptions"]
    clean = _panel([(10, 1.0), (40, 0.8), (100, 0.3)])
    assert ch11.correlation_wording(clean, head_dim=32)["ch11_corr_exceptions"] == "There is no exception."
    with pytest.raises(ValueError, match="needs pairs"):
        ch11.correlation_wording(_panel([(10, 1.0), (40, 0.8)]), head_dim=32)
    with pytest.raises(ValueError, match="head_dim"):
        ch11.correlation_wording(panel, head_dim=0)


def _noisy(labels, accuracy, rng):
    return np.where(rng.random(len(labels)) < accuracy, labels, 1 - labels)


def test_f1_beside_bilstm_says_within_noise_unless_the_interval_over_seeds_excludes_zero():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 500)
    lstm = np.stack([_noisy(labels, 0.76, rng) for _ in range(3)])
    noisy = {"t32": np.stack([_noisy(labels, 0.76, rng) for _ in range(3)]),
             "t8": np.where(np.arange(500) < 10, 1 - lstm[0], lstm[0])[None],  # one model, a little worse
             "lstm": lstm}
    out = ch11.f1_beside_bilstm(labels, noisy, small="t32", small8="t8", lstm="lstm")
    assert out["ch11_small_vs_lstm"].startswith("within noise of the BiLSTM's ")
    assert "95% interval over seeds and sentences" in out["ch11_small_vs_lstm"]
    assert "at $d_v$ = 8, from one model of each" in out["ch11_small_vs_lstm"]
    assert out["ch11_no_advantage"].startswith("a transformer has no advantage")
    assert out["ch11_f1_seeds"] == 3
    better = dict(noisy, t32=np.stack([labels, labels, labels]))  # a perfect transformer in every seed
    out = ch11.f1_beside_bilstm(labels, better, small="t32", small8="t8", lstm="lstm")
    assert out["ch11_small_vs_lstm"].startswith("above the BiLSTM's") and "holds in 3 of 3 seeds" in out[
        "ch11_small_vs_lstm"]
    assert out["ch11_no_advantage"].startswith("even") and out["ch11_f1_small"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="no model 'lstm'"):
        ch11.f1_beside_bilstm(labels, {"t32": labels, "t8": labels}, small="t32", small8="t8", lstm="lstm")


def test_f1_beside_bilstm_one_seed_of_three_better_is_no_verdict():
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 2, 400)
    lstm = np.stack([_noisy(labels, 0.75, rng) for _ in range(3)])
    one_better = np.stack([labels, lstm[1], lstm[2]])  # seed 0 perfect, the others the BiLSTM's own
    out = ch11.f1_beside_bilstm(labels, {"t32": one_better, "t8": lstm[:1], "lstm": lstm},
                                small="t32", small8="t8", lstm="lstm")
    assert not out["ch11_small_vs_lstm"].startswith("above")
    assert "1 of 3" in out["ch11_small_vs_lstm"]
    assert out["ch11_no_advantage"].startswith("a transformer has no advantage")


def test_f1_beside_bilstm_identical_predictions_are_a_tie_without_a_signed_zero():
    rng = np.random.default_rng(2)
    labels = rng.integers(0, 2, 300)
    same = np.stack([_noisy(labels, 0.7, rng) for _ in range(3)])
    out = ch11.f1_beside_bilstm(labels, {"t32": same, "t8": same[:1], "lstm": same},
                                small="t32", small8="t8", lstm="lstm")
    assert out["ch11_small_vs_lstm"].startswith("within noise of")
    assert "(a difference under 0.001, 95% interval " in out["ch11_small_vs_lstm"]
    assert "beyond noise in none of the 3 seeds alone" in out["ch11_small_vs_lstm"]


def test_scores_over_seeds_and_one_model_scores():
    from attnlib.seeds import SeedSet

    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, 200)
    trained = tuple(types.SimpleNamespace(test={"accuracy": a, "roc_auc": r}) for a, r in ((0.7, 0.8), (0.8, 0.9)))
    sets = {"m": SeedSet((0, 1), trained, {})}
    predicted = {"m": np.stack([_noisy(labels, 0.7, rng), _noisy(labels, 0.8, rng)])}
    table = ch11.scores_over_seeds(sets, labels, predicted)
    assert table.loc["m", "seeds"] == "2" and table.loc["m", "accuracy"] == pytest.approx(0.75)
    assert table.loc["m", "ROC-AUC"] == pytest.approx(0.85) and table.loc["m", "test sentences"] == 200
    assert table.loc["m", "F1 [95% interval]"].count("[") == 1
    probs = np.stack([1 - labels, labels], axis=1).astype(float) * 0.8 + 0.1
    row = ch11.one_model_scores(labels, probs)
    assert row["seeds"] == "1 (pretrained)" and row["accuracy"] == pytest.approx(1.0)
    assert row["F1 [95% interval]"].startswith("1.000")
    table.loc["one"] = row  # the chapter's MiniLM row fits the table
    with pytest.raises(ValueError, match="no model 'm'"):
        ch11.scores_over_seeds(sets, labels, {})


def _reach(rows):
    return pd.DataFrame(rows, columns=["sentence", "layer", "head", "length", "d_v", "null_dim", "mean_jsd",
                                       "max_jsd"])


def test_alternative_reach_reads_the_spread_and_the_yardstick():
    reach = _reach([(0, 0, 0, 40, 32, 7, 0.001, 0.01), (0, 0, 1, 40, 32, 7, 0.003, 0.02),
                    (1, 0, 0, 60, 32, 27, 0.010, 0.10), (1, 0, 1, 60, 32, 27, 0.002, 0.05)])
    out = ch11.alternative_reach(reach, very_different=0.49)
    assert out["ch11_reach_sentences"] == 2 and out["ch11_reach_pairs"] == 4
    assert out["ch11_reach_median"] == pytest.approx(0.0025) and out["ch11_reach_max"] == pytest.approx(0.01)
    assert out["ch11_reach_row_max"] == pytest.approx(0.10)
    assert out["ch11_reach_vs_very"].startswith("no row reaches it: the farthest moves 0.100, 20% of the way")
    far = reach.assign(max_jsd=[0.01, 0.02, 0.6, 0.05])
    assert "25.0% of the (sentence, head) pairs" in ch11.alternative_reach(far, very_different=0.49)[
        "ch11_reach_vs_very"]
    with pytest.raises(ValueError, match="no \\(sentence, head\\) pair"):
        ch11.alternative_reach(reach.iloc[:0], very_different=0.49)


def test_reach_by_length_bins_the_pairs():
    reach = _reach([(0, 0, 0, 40, 32, 7, 0.001, 0.01), (0, 0, 1, 40, 32, 7, 0.003, 0.02),
                    (1, 0, 0, 60, 32, 27, 0.010, 0.10)])
    table = ch11.reach_by_length(reach, [33, 41, 49, 65])
    assert list(table.index) == ["33–40", "49–64"]
    assert table.loc["33–40", "(sentence, head) pairs"] == 2 and table.loc["49–64", "largest row"] == 0.10
    with pytest.raises(ValueError, match="bins"):
        ch11.reach_by_length(reach, [40])
