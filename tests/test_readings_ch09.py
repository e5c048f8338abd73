"""attnlib.presentation.readings.ch09: Chapter 9's readings on small hand-made tables."""
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attnlib.presentation.readings import ch09

PAPER = {"uniform": 0.812, "trained MLP": 0.817, "base LSTM": 0.824, "adversary": 0.592}
GUIDES = ["uniform", "trained MLP", "base LSTM", "adversary"]


def make_table(f1, sd=(0.004, 0.003, 0.005, 0.002)):
    """f1: one mean F1 per guide (GUIDES' order), on rt-polarity."""
    t = pd.DataFrame({"test f1": f1, "test f1 sd": sd}, index=GUIDES)
    return pd.concat({"rt-polarity": t}, names=["dataset"])


def test_ranking_reads_order_best_and_gaps():
    out = ch09.ranking(make_table([0.75, 0.77, 0.74, 0.73]), n_seeds=3, paper=PAPER)
    assert (out["ch09_f1_uniform"], out["ch09_f1_trained"], out["ch09_f1_base"], out["ch09_f1_adv"]) \
        == (0.75, 0.77, 0.74, 0.73)
    assert (out["ch09_sd_min"], out["ch09_sd_max"], out["ch09_n_seeds"]) == (0.002, 0.005, 3)
    assert out["ch09_order"] == "trained MLP > uniform > base LSTM > adversary"
    assert out["ch09_best"] == "trained MLP's, not the base LSTM's as in the paper"
    assert out["ch09_trained_vs_uni"] == "2.0 points above uniform's"
    assert out["ch09_base_vs_uni"] == "1.0 points below uniform's"
    assert out["ch09_level"].startswith("Our uniform and trained-MLP scores are below")


def test_ranking_other_branches_and_published_values():
    class Published:
        def __init__(self, value):
            self.value = value

    out = ch09.ranking(make_table([0.83, 0.80, 0.85, 0.60]), n_seeds=2,
                       paper={g: Published(v) for g, v in PAPER.items()})
    assert out["ch09_best"] == "base LSTM's, as in the paper"
    assert out["ch09_level"].startswith("Our absolute level differs")


def test_ranking_rejects_missing_guides():
    with pytest.raises(ValueError, match="adversary"):
        ch09.ranking(make_table([0.75, 0.77, 0.74, 0.73]), n_seeds=3,
                     paper={g: v for g, v in PAPER.items() if g != "adversary"})
    t = make_table([0.75, 0.77, 0.74, 0.73]).drop(index="base LSTM", level=1)
    with pytest.raises(ValueError, match="base LSTM"):
        ch09.ranking(t, n_seeds=3, paper=PAPER)


@pytest.mark.parametrize(
    "adv, clause",
    [
        (0.60, "Ours, too, falls far below uniform"),
        (0.70, "Ours falls below uniform too, beyond the seed spread"),
        (0.745, "Ours stays within the seed spread of uniform"),
        (0.80, "Ours is above uniform, beyond the seed spread"),
    ],
)
def test_adversary_clause(adv, clause):
    out = ch09.adversary(make_table([0.75, 0.77, 0.74, adv]), paper=PAPER, n_seeds=4)
    assert out["ch09_adv_clause"].startswith(clause)


def test_adversary_order_against_the_paper():
    below = ch09.adversary(make_table([0.75, 0.77, 0.74, 0.73]), paper=PAPER, n_seeds=4)
    assert below["ch09_adv_vs_uni"] == "2.0 points below uniform's"
    assert below["ch09_adv_vs_base"] == "1.0 points below the BiLSTM's"
    assert below["ch09_adv_base_order"] == "the same order as the paper's"
    above = ch09.adversary(make_table([0.75, 0.77, 0.74, 0.76]), paper=PAPER, n_seeds=4)
    assert above["ch09_adv_base_order"] == "the reverse of the paper's order"


def pos_of(first, last, peak, peak_first=0.0):
    return {"mean weight on first token": first, "mean weight on last token": last,
            "peak on first token": peak_first, "peak on last token": 0.0, "mean peak weight": peak}


def positions(adv_first=0.04, adv_last=0.30, adv_peak=0.12):
    return {"uniform": pos_of(0.05, 0.05, 0.05), "trained MLP": pos_of(0.03, 0.04, 0.3),
            "base LSTM": pos_of(0.40, 0.05, 0.45, 0.6), "adversary": pos_of(adv_first, adv_last, adv_peak)}


@pytest.mark.parametrize(
    "f1, base_pos, start",
    [
        ([0.75, 0.77, 0.70, 0.73], positions(), "Here the BiLSTM's guide is below uniform beyond "
         "the seed spread, and it favours"),
        ([0.75, 0.77, 0.70, 0.73], {**positions(), "base LSTM": pos_of(0.06, 0.05, 0.4)},
         "Here the BiLSTM's guide is below uniform beyond the seed spread, although"),
        ([0.75, 0.77, 0.745, 0.73], positions(), "Here the BiLSTM's guide is within the seed spread"),
        ([0.75, 0.77, 0.80, 0.73], positions(), "Here the BiLSTM's guide is above uniform"),
    ],
)
def test_positions_base_reading(f1, base_pos, start):
    assert ch09.positions(base_pos, make_table(f1), n_seeds=4)["ch09_base_reading"].startswith(start)


def test_positions_reads_each_guide():
    out = ch09.positions(positions(), make_table([0.75, 0.77, 0.74, 0.73]), n_seeds=4)
    assert (out["ch09_first_base"], out["ch09_last_adv"], out["ch09_peak_trained"]) == (0.40, 0.30, 0.3)
    assert out["ch09_base_peak_first"] == 0.6
    assert out["ch09_trained_first_dir"] == "less"
    assert out["ch09_adv_first_dir"] == "less"
    assert out["ch09_adv_peak_dir"] == "below"
    assert out["ch09_adv_peak_closer"] == "closer to uniform's (0.050) than to the base's"
    assert out["ch09_adv_edge"] == ("Our adversary's weight favours a position: on average "
                                    "0.300 of it sits on the last token (uniform: 0.050).")


def test_positions_other_branches():
    pos = positions(adv_first=0.5, adv_last=0.1, adv_peak=0.5)
    pos["trained MLP"] = pos_of(0.08, 0.04, 0.3)
    out = ch09.positions(pos, make_table([0.75, 0.77, 0.74, 0.73]), n_seeds=4)
    assert (out["ch09_trained_first_dir"], out["ch09_adv_first_dir"]) == ("more", "more")
    assert out["ch09_adv_peak_dir"] == "above"
    assert out["ch09_adv_peak_closer"] == "closer to the base's than to uniform's (0.050)"
    flat = ch09.positions(positions(adv_first=0.06, adv_last=0.07), make_table([0.75, 0.77, 0.74, 0.73]), n_seeds=4)
    assert flat["ch09_adv_edge"] == "Our adversary does not favour the first or the last position much."


def test_oracle_and_span():
    long_table = pd.DataFrame({"test f1": [0.6, 0.9, 0.99], "test f1 sd": [0.1, 0.01, 0.0],
                               "test accuracy": [0.55, 0.9, 0.99]},
                              index=["uniform", "trained MLP", "oracle (rationale)"])
    out = ch09.oracle(long_table)
    assert (out["ch09_long_oracle"], out["ch09_long_trained"], out["ch09_long_uniform"]) == (0.99, 0.9, 0.6)
    assert (out["ch09_long_uniform_sd"], out["ch09_long_uniform_acc"]) == (0.1, 0.55)
    assert out["ch09_long_gap"] == pytest.approx(39.0)
    with pytest.raises(ValueError, match="oracle"):
        ch09.oracle(long_table.drop(index="oracle (rationale)"))
    s = ch09.span(make_table([0.75, 0.77, 0.74, 0.73]))
    assert s["ch09_span"] == pytest.approx(4.0)
    assert (s["ch09_worst"], s["ch09_best_name"]) == ("adversary", "trained MLP")


@given(st.lists(st.floats(0, 1), min_size=4, max_size=4))
def test_span_is_max_minus_min(f1):
    s = ch09.span(make_table(f1))
    assert s["ch09_span"] == float(max(f1) - min(f1)) * 100
    assert s["ch09_span"] >= 0


def test_gaps_are_read_with_welch_intervals_not_a_fixed_band():
    # a 4-point gap is within noise when the seeds scatter widely, and beyond it when they do not
    wide = ch09.adversary(make_table([0.75, 0.77, 0.74, 0.71], sd=(0.04, 0.03, 0.05, 0.04)), paper=PAPER, n_seeds=3)
    assert wide["ch09_adv_clause"].startswith("Ours stays within the seed spread")
    tight = ch09.adversary(make_table([0.75, 0.77, 0.74, 0.71]), paper=PAPER, n_seeds=3)
    assert tight["ch09_adv_clause"].startswith("Ours falls below uniform too, beyond the seed spread")
    # far below but within noise is not "far below"
    noisy = ch09.adversary(make_table([0.75, 0.77, 0.74, 0.60], sd=(0.2, 0.03, 0.05, 0.2)), paper=PAPER, n_seeds=2)
    assert noisy["ch09_adv_clause"].startswith("Ours stays within the seed spread")


def test_adversary_at_chance_is_read_off_the_accuracy_when_f1_swings():
    t = make_table([0.778, 0.787, 0.757, 0.51], sd=(0.008, 0.005, 0.009, 0.316))
    t["test accuracy"] = [0.776, 0.779, 0.754, 0.508]
    t["test accuracy sd"] = [0.007, 0.005, 0.008, 0.004]
    out = ch09.adversary(t, paper=PAPER, n_seeds=4)
    assert out["ch09_adv_clause"].startswith("Ours, too, falls far below uniform: its accuracy, 0.508")
    assert "sd 0.316" in out["ch09_adv_clause"]
    # without an accuracy sd the F1 reading stands: within the seed spread
    out = ch09.adversary(t.drop(columns="test accuracy sd"), paper=PAPER, n_seeds=4)
    assert out["ch09_adv_clause"].startswith("Ours stays within the seed spread")
