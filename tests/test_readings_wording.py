"""attnlib.presentation.readings.wording: what the chapters' readings share."""
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnlib.presentation.readings import wording
from attnlib.presentation.readings.wording import ENCODER_NAMES, listed, require_columns


def test_listed():
    assert listed(["a"]) == "a"
    assert listed(["a", "b"]) == "a and b"
    assert listed(iter([1, 2, 3])) == "1, 2 and 3"
    with pytest.raises(ValueError, match="at least one"):
        listed([])


@given(st.lists(st.text(alphabet="xyz", min_size=1), min_size=1, max_size=6))
def test_listed_keeps_every_item_in_order(items):
    text = listed(items)
    assert text.count(" and ") == (len(items) > 1) + sum(" and " in i for i in items)
    position = 0
    for item in items:
        position = text.index(item, position) + len(item)


def test_require_columns():
    frame = pd.DataFrame({"a": [1], "b": [2]})
    require_columns(frame, ["a", "b"], "the table")
    with pytest.raises(ValueError, match="the table has no column 'c'"):
        require_columns(frame, ["a", "c"], "the table")
    with pytest.raises(ValueError, match="must be a DataFrame"):
        require_columns([1, 2], ["a"], "the table")


def test_encoder_names_cover_jw_encoders():
    assert set(ENCODER_NAMES) == {"lstm", "cnn", "average"}


@pytest.mark.parametrize("k, n, words", [
    (0, 16, "none of the 16 heads"), (3, 16, "3 of the 16 heads"), (16, 16, "all 16 heads"),
    (2, 2, "both heads"), (1, 2, "1 of the 2 heads"),
])
def test_some_of_reads_counts_as_a_sentence_does(k, n, words):
    assert wording.some_of(k, n, "heads") == words


def test_some_of_rejects_impossible_counts():
    with pytest.raises(ValueError, match="0 <= k <= n"):
        wording.some_of(5, 4, "heads")
    with pytest.raises(ValueError, match="0 <= k <= n"):
        wording.some_of(-1, 4, "heads")
