"""Chapter 11's readings (attnlib.presentation.readings.ch11) on small hand-made tables."""
from __future__ import annotations

import types

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


def _mass(**columns):
    base = {
        "raw [CLS]": [0.5, 0.4, 0.3], "effective [CLS]": [0.4, 0.4, 0.35],
        "raw [SEP]": [0.1, 0.2, 0.05], "effective [SEP]": [0.15, 0.1, 0.05],
        "raw punctuation": [0.1, 0.1, 0.1], "effective punctuation": [0.05, 0.2, 0.08],
    }
    base.update(columns)
    return pd.DataFrame(base, index=pd.Index([1, 2, 3], name="layer"))


def test_effective_mass_values_and_lists():
    out = ch11.effective_mass(_mass(), brunner=published.BRUNNER_SEP_MASS)
    assert out["ch11_sep_up"] == "layer 1"
    assert out["ch11_sep_down"] == "layer 2"  # layer 3: equal, neither
    assert out["ch11_cls_down"] == "layer 1"
    assert out["ch11_punct_down"] == "layers 1 and 3"
    assert out["ch11_raw_sep_max"] == 0.2 and out["ch11_raw_sep_max_layer"] == 2
    assert out["ch11_eff_sep_max"] == 0.15 and out["ch11_raw_cls_max"] == 0.5
    assert out["ch11_parks"] == "[CLS]"
    assert out["ch11_brunner_sep_raw"] == "0.50–0.57" and out["ch11_brunner_sep_eff"] == "0.1"


def test_effective_mass_where_sep_takes_more_and_nothing_drops():
    mass = _mass(**{"raw [SEP]": [0.6, 0.6, 0.6], "effective [SEP]": [0.7, 0.7, 0.7],
                    "effective [CLS]": [0.5, 0.4, 0.3], "effective punctuation": [0.1, 0.1, 0.1]})
    out = ch11.effective_mass(mass, brunner=published.BRUNNER_SEP_MASS)
    assert out["ch11_parks"] == "[SEP]"
    assert out["ch11_sep_up"] == "every layer" and out["ch11_sep_down"] == "no layer"
    assert out["ch11_cls_down"] == "no layer" and out["ch11_punct_down"] == "no layer"


def test_effective_mass_refuses_a_missing_column():
    with pytest.raises(ValueError, match="raw punctuation"):
        ch11.effective_mass(_mass().drop(columns="raw punctuation"), brunner=published.BRUNNER_SEP_MASS)


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


def test_f1_beside_bilstm_says_within_noise_unless_the_paired_interval_excludes_zero():
    import numpy as np

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 500)
    noisy = {name: np.where(rng.random(500) < acc, labels, 1 - labels)
             for name, acc in (("t32", 0.76), ("t8", 0.75), ("lstm", 0.76))}
    out = ch11.f1_beside_bilstm(labels, noisy, small="t32", small8="t8", lstm="lstm")
    assert out["ch11_small_vs_lstm"].startswith("within noise of the BiLSTM's ")
    assert out["ch11_no_advantage"].startswith("a transformer has no advantage")
    same = dict(noisy, t32=noisy["lstm"])  # the same predictions: no signed zero in the words
    assert "(a difference under 0.001, 95% interval " in ch11.f1_beside_bilstm(
        labels, same, small="t32", small8="t8", lstm="lstm")["ch11_small_vs_lstm"]
    better = dict(noisy, t32=labels.copy())  # a perfect transformer
    out = ch11.f1_beside_bilstm(labels, better, small="t32", small8="t8", lstm="lstm")
    assert out["ch11_small_vs_lstm"].startswith("above the BiLSTM's") and out["ch11_no_advantage"].startswith("even")
    with pytest.raises(ValueError, match="no model 'lstm'"):
        ch11.f1_beside_bilstm(labels, {"t32": labels, "t8": labels}, small="t32", small8="t8", lstm="lstm")
