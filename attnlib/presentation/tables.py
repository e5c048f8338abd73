"""Tables a student can read: columns named in words, values rounded for reading, "n/a" for NaN.

The experiments return frames with the names code needs (``tau_g_vs_loo mean``,
``mean_fraction_removed``, ``p_value``) and full float precision; a chapter computes with those
and shows ``readable(table)``::

    readable(table)                 # 3 decimals, names from READER_NAMES, NaN as "n/a"
    readable(table, digits={"p_value": 4}, names={"n": "sentences"})

The result is a new frame of display strings (the input is not changed), so the same text
reaches the book's HTML, Colab's and JupyterLab's table, and nbval's ``text/plain``. A frame
to compute with stays the numeric one.
"""
from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping

import numpy as np
import pandas as pd

__all__ = ["NOT_AVAILABLE", "READER_NAMES", "reader_name", "readable"]

#: What a missing value (NaN, None, NaT) reads as.
NOT_AVAILABLE = "n/a"

#: Code names of the experiments' columns and index levels, as a reader reads them. A name is
#: looked up whole first; a code name not listed (one identifier) has its underscores read as
#: spaces; in a label with spaces only the listed words are replaced (``tau_g mean`` ->
#: ``τ_g mean``), so a reader's label such as ``transformer, d_v = 32`` stays as written.
READER_NAMES: dict[str, str] = {
    # J&W's Kendall τ between attention and gradients (τ_g) or leave-one-out (τ_loo), as the
    # chapters' prose writes them, and between the two importance measures themselves
    "tau_g_vs_loo": "τ(gradient, loo)",
    "tau_g": "τ_g",
    "tau_loo": "τ_loo",
    "sig. frac.": "Sig. Frac.",  # J&W's name, as the prose uses it: the share with p < 0.05
    "frac_positive": "share positive",
    "mean_len": "mean length",
    "max_len": "max length",
    "n": "n",
    "n_very_different": "n very different",
    "max_attention": "max attention",
    "median_tvd": "median TVD",
    "median_jsd": "median JSD",
    "mean_jsd": "mean JSD",
    "mean_tvd": "mean TVD",
    "jsd": "JSD",
    "tvd": "TVD",
    "f1": "F1",
    "roc_auc": "ROC-AUC",
    "p_value": "p-value",
    "n_flipped": "decisions flipped",
    "never_flipped": "never flipped",
    "mean_fraction_removed": "mean share erased",
    "median_fraction_removed": "median share erased",
    "flip_top": "top item flips",
    "flip_random": "random item flips",
    "only_top_flips": "only the top item flips",
    "only_random_flips": "only a random item flips",
    "top_changes_more": "top item changes more",
    "median_jsd_difference": "median JSD difference",
    "attention_x_gradient": "attention × gradient",
    "std": "sd",
    "n_pruned": "heads pruned",
    # the book's symbols, kept as the prose writes them
    "d_s": "d_s",
    "d_v": "d_v",
}

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def reader_name(name, names: Mapping[str, str] | None = None):
    """``name`` (a column or index label) as a reader reads it; non-strings are returned as is.

    ``names`` overrides and extends :data:`READER_NAMES`.
    """
    if not isinstance(name, str):
        return name
    table = {**READER_NAMES, **(names or {})}
    if name in table:
        return table[name]

    if _WORD.fullmatch(name):  # a code name such as mean_fraction_removed: its words
        return name.replace("_", " ")

    def word(m: re.Match) -> str:  # a label with spaces: known code words only ("tau_g mean");
        return table.get(m.group(0), m.group(0))  # "transformer, d_v = 32" stays as written

    for phrase in sorted((k for k in table if not _WORD.fullmatch(k)), key=len, reverse=True):
        name = name.replace(phrase, table[phrase])  # multi-word entries such as "sig. frac."
    return _WORD.sub(word, name)


def _cell(value, digits: int) -> str:
    if value is None or value is pd.NaT:
        return NOT_AVAILABLE
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        value = float(value)
        if math.isnan(value):
            return NOT_AVAILABLE
        if math.isinf(value):
            return "∞" if value > 0 else "−∞"
        text = f"{value:.{digits}f}"
        return "0" + text[2:] if text.startswith("-0") and float(text) == 0 else text  # no "-0.000"
    try:
        if pd.isna(value):
            return NOT_AVAILABLE
    except (TypeError, ValueError):  # a list or array in a cell
        pass
    return str(value)


def _labels(index: pd.Index, names: Mapping[str, str] | None) -> pd.Index:
    if isinstance(index, pd.MultiIndex):
        return index.set_levels(
            [level.map(lambda v: reader_name(v, names)) for level in index.levels]
        ).set_names([reader_name(n, names) for n in index.names])
    return index.map(lambda v: reader_name(v, names)).set_names(
        [reader_name(n, names) for n in index.names]
    )


def readable(table, digits: int | Mapping[str, int] = 3,
             names: Mapping[str, str] | None = None) -> pd.DataFrame:
    """A copy of ``table`` to show: names in words, numbers rounded, missing values "n/a",
    truth values "yes" / "no".

    Args:
        table: a DataFrame or Series (a Series is shown as a one-column frame).
        digits: decimals for every float column (int >= 0), or a mapping of column (its code
            name) to decimals, the others getting 3. Integers, and float columns whose every
            value is whole (counts that a NaN turned into floats), are shown whole.
        names: reader names for this table, over :data:`READER_NAMES`.

    Returns a DataFrame of strings with the same shape. Raises TypeError for anything but a
    DataFrame or Series, ValueError for negative or non-integer digits.
    """
    if isinstance(table, pd.Series):
        table = table.to_frame()
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"readable() shows a pandas DataFrame or Series, got {type(table).__name__}")
    per_column = dict(digits) if isinstance(digits, Mapping) else {}
    default = 3 if isinstance(digits, Mapping) else digits
    for d in [default, *per_column.values()]:
        if isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 0:
            raise ValueError(f"digits must be a whole number >= 0 (or a mapping to them), got {d!r}")
    unknown = set(per_column) - set(table.columns)
    if unknown:
        raise ValueError(f"digits names columns the table does not have: {sorted(map(str, unknown))}")
    columns = {}
    for i, column in enumerate(table.columns):
        values = table.iloc[:, i]
        places = int(per_column.get(column, default))
        if pd.api.types.is_float_dtype(values) and column not in per_column:
            finite = values[values.notna()]
            if len(finite) and bool((finite == finite.round()).all()) and bool((finite.abs() < 2**53).all()):
                places = 0  # counts that a NaN made float: 286, not 286.000
        columns[i] = [_cell(v, places) for v in values]
    shown = pd.DataFrame(columns, index=table.index)
    shown.columns = _labels(table.columns, names)
    shown.index = _labels(table.index, names)
    return shown
