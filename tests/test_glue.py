"""attnlib.presentation.glue: prose that quotes the run, honestly rounded."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnlib.presentation.glue import glue, glue_all, glued, prose


def test_a_share_that_is_not_one_never_reads_100_percent():
    glue_all({"t_almost": 0.999737, "t_tiny": 0.00004, "t_all": 1.0, "t_none": 0.0, "t_half": 0.5})
    assert prose("{t_almost:.1%}") == ">99.9%"
    assert prose("{t_almost:.0%}") == ">99%"
    assert prose("{t_tiny:.1%}") == "<0.1%"
    assert prose("{t_all:.1%} {t_none:.0%} {t_half:.0%}") == "100.0% 0% 50%"
    assert prose("{t_almost:.3f}") == "1.000"  # only percentages: a fixed-point spec is the writer's choice
    assert prose("{x:.1%}", x=np.float32(0.9999)) == ">99.9%"


@given(st.floats(0, 1), st.integers(0, 3))
def test_percentages_are_exact_where_they_can_be(x, digits):
    text = prose(f"{{x:.{digits}%}}", x=x)
    if 0 < x < 1:
        assert text not in (f"{100:.{digits}f}%", f"{0:.{digits}f}%")
    if x in (0.0, 1.0) or text[0] not in "<>":
        assert text == format(x, f".{digits}%")


def test_glue_all_records_every_value_and_checks_its_input():
    glue_all({"t_a": 1, "t_b": "two"})
    assert glued()["t_a"] == 1 and glued()["t_b"] == "two"
    with pytest.raises(TypeError, match="mapping"):
        glue_all([("t_c", 3)])
    with pytest.raises(ValueError, match="identifier"):
        glue_all({"not a name": 3})


def test_glue_rejects_bad_names_and_prose_unknown_ones():
    with pytest.raises(ValueError, match="identifier"):
        glue("1x", 3)
    with pytest.raises(KeyError, match="run the cells above"):
        prose("{t_never_glued}")
