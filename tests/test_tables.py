"""attnlib.presentation.tables.readable: names in words, rounding, "n/a" for NaN."""
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib.presentation.tables import NOT_AVAILABLE, READER_NAMES, readable, reader_name


def test_names_values_and_missing():
    t = pd.DataFrame(
        {"tau_g mean": [0.12345, np.nan], "n": [286, 214], "p_value": [0.00012, 0.5]},
        index=pd.Index(["lstm+tanh", "cnn+tanh"], name="model"),
    )
    shown = readable(t, digits={"p_value": 4})
    assert list(shown.columns) == ["τ_g mean", "n", "p-value"]
    assert shown.index.name == "model"
    assert shown.iloc[:, 0].tolist() == ["0.123", NOT_AVAILABLE]
    assert shown.iloc[:, 1].tolist() == ["286", "214"]
    assert shown.iloc[:, 2].tolist() == ["0.0001", "0.5000"]
    assert "NaN" not in shown.to_html() and "NaN" not in repr(shown)
    assert t.iloc[0, 0] == 0.12345  # the input is not changed


def test_word_by_word_and_overrides():
    assert reader_name("tau_g_vs_loo sig. frac.") == "τ(gradient, loo) Sig. Frac."
    assert reader_name("mean_fraction_removed") == "mean share erased"
    assert reader_name("some_new_column") == "some new column"
    assert reader_name("transformer, d_v = 32") == "transformer, d_v = 32"  # a reader's label
    assert reader_name("n", {"n": "sentences"}) == "sentences"
    assert reader_name(3) == 3


def test_multiindex_series_and_whole_floats():
    cols = pd.MultiIndex.from_product([["tau_g", "tau_loo"], ["mean", "std"]])
    t = pd.DataFrame([[0.5, 0.1, 0.25, 0.05]], columns=cols)
    shown = readable(t)
    assert shown.columns.get_level_values(0)[0] == "τ_g"
    assert shown.columns.get_level_values(1)[1] == "sd"
    counts = pd.Series([3.0, np.nan, 7.0], name="n_flipped")
    assert readable(counts).iloc[:, 0].tolist() == ["3", NOT_AVAILABLE, "7"]
    assert readable(counts).columns[0] == "decisions flipped"


def test_no_negative_zero_and_infinities():
    shown = readable(pd.DataFrame({"x": [-0.0001, math.inf, -math.inf, None]}, dtype=float))
    assert shown.x.tolist() == ["0.000", "∞", "−∞", NOT_AVAILABLE]


@pytest.mark.parametrize("bad", [-1, 1.5, True, {"x": -2}])
def test_bad_digits(bad):
    with pytest.raises(ValueError, match="digits"):
        readable(pd.DataFrame({"x": [1.0]}), digits=bad)


def test_bad_input():
    with pytest.raises(TypeError, match="DataFrame"):
        readable([[1, 2]])
    with pytest.raises(ValueError, match="does not have"):
        readable(pd.DataFrame({"x": [1.0]}), digits={"y": 2})


def test_every_reader_name_is_text():
    assert all(isinstance(v, str) and v for v in READER_NAMES.values())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=False, width=32)),
                min_size=1, max_size=8), st.integers(0, 5))
def test_rounding_matches_python_and_shape_is_kept(values, digits):
    t = pd.DataFrame({"v": pd.Series(values, dtype=float), "w": 0.5})
    shown = readable(t, digits=digits)
    assert shown.shape == t.shape
    for raw, text in zip(t.v, shown.iloc[:, 0]):
        if math.isnan(raw):
            assert text == NOT_AVAILABLE
        elif text.lstrip("-").replace(".", "").isdigit():
            assert abs(float(text) - raw) <= 0.5 * 10 ** -min(digits, 12) + 1e-9 or float(text) == round(raw)


def test_truth_values_read_yes_and_no():
    t = pd.DataFrame({"changed": np.array([True, False]), "agrees": [False, True]})
    shown = readable(t)
    assert shown.changed.tolist() == ["yes", "no"] and shown.agrees.tolist() == ["no", "yes"]
    assert "True" not in shown.to_html() and "False" not in shown.to_html()
