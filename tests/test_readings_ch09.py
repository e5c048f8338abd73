"""attnlib.presentation.readings.ch09: Chapter 9's readings on small hand-made runs over seeds."""
import numpy as np
import pandas as pd
import pytest

from attnlib.experiments.diagnostic import DiagnosticRuns
from attnlib.presentation.readings import ch09

PAPER = {"uniform": 0.812, "trained MLP": 0.817, "base LSTM": 0.824, "adversary": 0.592}
N = 400
LABELS = np.tile([0, 1], N // 2)


def wrong(share, start=0):
    """Predictions that are wrong on ``share`` of the sentences, a block starting at ``start``."""
    p = LABELS.copy()
    k = int(round(share * N))
    idx = (start + np.arange(k)) % N
    p[idx] = 1 - p[idx]
    return p


def seeds(*rows):
    return np.stack(rows)


def flat(n=N, length=5):
    return [np.full(length, 1 / length) for _ in range(n)]


def peaked(where, n=N, length=5, weight=0.9):
    out = []
    for _ in range(n):
        a = np.full(length, (1 - weight) / (length - 1))
        a[where] = weight
        out.append(a)
    return out


def make_runs(predicted, attention=None):
    S = next(iter(predicted.values())).shape[0]
    attention = attention or {}
    attention = {g: attention.get(g, tuple(flat() for _ in range(S))) for g in predicted}
    return DiagnosticRuns(tuple(range(S)), LABELS, predicted, attention, {})


def clear_order():
    """trained MLP > uniform > base LSTM > adversary, far apart and alike in every seed."""
    return {
        "uniform": seeds(wrong(0.20, 0), wrong(0.20, 7), wrong(0.20, 13)),
        "trained MLP": seeds(wrong(0.05, 0), wrong(0.05, 7), wrong(0.05, 13)),
        "base LSTM": seeds(wrong(0.35, 0), wrong(0.35, 7), wrong(0.35, 13)),
        "adversary": seeds(wrong(0.50, 0), wrong(0.50, 7), wrong(0.50, 13)),
    }


def test_clear_order_ranks_every_guide_and_holds_in_every_seed():
    runs = make_runs(clear_order())
    out = ch09.ranking(runs, paper=PAPER)
    assert out["ch09_n_seeds"] == 3 and out["ch09_seeds_words"] == "3 seeds"
    assert out["ch09_order"] == ("trained MLP (rank 1), then uniform (rank 2), then base LSTM (rank 3), then adversary (rank 4)")
    assert out["ch09_best"] == ("By F1 and by accuracy alike the first rank goes to the trained-MLP guide. "
                                "The BiLSTM's guide, first in the paper, ranks 3 by both.")
    assert out["ch09_trained_vs_uni"].startswith("15.")
    assert ", beyond noise (difference +0.1" in out["ch09_trained_vs_uni"]
    assert out["ch09_trained_vs_uni"].endswith("; holds in 3 of 3 seeds)")
    assert out["ch09_base_vs_uni_short"].endswith("points below uniform's, beyond noise")
    assert out["ch09_f1_ci_uniform"].count(" to ") == 1
    assert out["ch09_level"].startswith("Our absolute level differs")


def test_identical_guides_tie_for_the_first_rank():
    same = seeds(wrong(0.2, 0), wrong(0.2, 9), wrong(0.2, 21))
    runs = make_runs({"uniform": same, "trained MLP": same, "base LSTM": same,
                      "adversary": seeds(wrong(0.5, 0), wrong(0.5, 9), wrong(0.5, 21))})
    out = ch09.ranking(runs, paper=PAPER)
    assert out["ch09_order"].startswith("uniform, trained MLP and base LSTM (rank 1, within noise of each other)")
    assert out["ch09_best"] == ("By F1 and by accuracy alike the first rank is shared by the uniform, "
                                "trained-MLP and BiLSTM guides. The BiLSTM's guide, first alone in the paper, "
                                "shares the first rank here.")
    assert out["ch09_base_vs_uni"].startswith("0.0 points")
    assert out["ch09_base_vs_uni"].endswith("within noise (difference 0.000, 95% interval 0.000 to 0.000; "
                                            "in none of 3 seeds alone)")
    table = ch09.guide_table(runs, paper=PAPER)
    assert list(table["f1 rank"]) == [1.0, 1.0, 1.0, 4.0]
    assert list(table["accuracy rank"]) == [1.0, 1.0, 1.0, 4.0]
    cells = ch09.guide_cells(table)
    assert list(cells["rank by F1"]) == ["1=", "1=", "1=", "4"]
    assert cells.loc["uniform", "W&P F1"] == "0.812"


def test_a_gap_in_one_seed_of_three_is_not_a_verdict():
    uni = seeds(wrong(0.2, 0), wrong(0.2, 9), wrong(0.2, 21))
    base = seeds(wrong(0.4, 0), wrong(0.2, 9), wrong(0.2, 21))  # worse in seed 0 only
    runs = make_runs({"uniform": uni, "trained MLP": uni, "base LSTM": base,
                      "adversary": seeds(wrong(0.5, 0), wrong(0.5, 9), wrong(0.5, 21))})
    out = ch09.ranking(runs, paper=PAPER)
    assert "beyond noise in 1 of 3 seeds alone" in out["ch09_base_vs_uni"]
    assert out["ch09_base_vs_uni_short"].endswith("within noise")
    assert out["ch09_best"].endswith("The BiLSTM's guide, first alone in the paper, shares the first rank here.")
    pos = ch09.positions(positions_frame(), runs)
    assert pos["ch09_base_reading"].startswith("Here the BiLSTM's guide is within noise of uniform")


def test_a_small_gap_within_sentence_noise_is_within_noise():
    uni = seeds(wrong(0.20, 0), wrong(0.20, 9), wrong(0.20, 21))
    base = seeds(wrong(0.21, 200), wrong(0.21, 209), wrong(0.21, 221))  # other sentences wrong, one in 100 more
    runs = make_runs({"uniform": uni, "trained MLP": uni, "base LSTM": base, "adversary": base})
    out = ch09.ranking(runs, paper=PAPER)
    assert out["ch09_base_vs_uni_short"].endswith("points below uniform's, within noise")


def test_the_level_against_the_paper():
    high = {g: seeds(wrong(0.02, 0), wrong(0.02, 9), wrong(0.02, 21)) for g in ch09.GUIDES}
    out = ch09.ranking(make_runs(high), paper=PAPER)
    assert out["ch09_level"].startswith("Our absolute level differs")
    low = {g: seeds(wrong(0.4, 0), wrong(0.4, 9), wrong(0.4, 21)) for g in ch09.GUIDES}
    out = ch09.ranking(make_runs(low), paper=PAPER)
    assert out["ch09_level"].startswith("Our uniform and trained-MLP scores lie below the paper's")
    with pytest.raises(ValueError, match="adversary"):
        ch09.ranking(make_runs(high), paper={g: v for g, v in PAPER.items() if g != "adversary"})
    with pytest.raises(ValueError, match="base LSTM"):
        ch09.ranking(make_runs({g: v for g, v in high.items() if g != "base LSTM"}), paper=PAPER)


def test_the_base_ranks_first_alone():
    order = clear_order()
    order["base LSTM"], order["trained MLP"] = order["trained MLP"], order["base LSTM"]
    out = ch09.ranking(make_runs(order), paper=PAPER)
    assert out["ch09_best"].endswith("The BiLSTM's guide ranks first, as in the paper.")


def test_adversary_far_below_uniform_and_the_paper_gap():
    out = ch09.adversary(make_runs(clear_order()), paper=PAPER)
    assert out["ch09_adv_clause"].startswith("Ours, too, falls below uniform, beyond noise (holds in 3 of 3 seeds)")
    assert "the paper's gap, -22.0 points," in out["ch09_adv_clause"]
    assert out["ch09_adv_base_order"] == "the same order as the paper's"
    assert out["ch09_adv_vs_base"].endswith("; holds in 3 of 3 seeds)")
    assert out["ch09_adv_acc_short"] == "below uniform's beyond noise (holds in 3 of 3 seeds)"


def test_adversary_near_chance_reads_the_accuracy():
    order = clear_order()
    guess = np.ones(N, dtype=int)  # one class for every sentence: F1 0.67 or 0, accuracy 0.5
    order["adversary"] = seeds(guess, 1 - guess, guess)
    out = ch09.adversary(make_runs(order), paper=PAPER)
    assert out["ch09_adv_clause"].startswith("Its F1 gap is within noise")
    assert "is lower beyond noise (holds in 3 of 3 seeds)" in out["ch09_adv_clause"]
    assert out["ch09_acc_adv"] == pytest.approx(0.5)
    assert out["ch09_adv_base_order"].startswith("so by F1 noise does not order the two; by accuracy ours is below")
    assert out["ch09_adv_base_order"].endswith("the same order as the paper's")


def test_adversary_within_noise_above_and_disagreeing():
    order = clear_order()
    order["adversary"] = order["uniform"]
    out = ch09.adversary(make_runs(order), paper=PAPER)
    assert out["ch09_adv_clause"].startswith("Ours stays within noise of uniform in F1")
    assert out["ch09_adv_base_order"] == "the reverse of the paper's order"
    order["adversary"] = order["trained MLP"]
    assert ch09.adversary(make_runs(order), paper=PAPER)["ch09_adv_clause"].startswith("Ours is above uniform")
    order["adversary"] = seeds(wrong(0.05, 0), wrong(0.45, 7), wrong(0.05, 13))  # up, down, up
    out = ch09.adversary(make_runs(order), paper=PAPER)
    assert out["ch09_adv_clause"].startswith("Whether ours falls below uniform depends on the seed")
    order["adversary"] = order["base LSTM"]
    out = ch09.adversary(make_runs(order), paper=PAPER)
    assert out["ch09_adv_base_order"] == "so by F1 noise does not order the two"


def degenerate_runs(where, adv_predicted):
    """The adversary peaks on token ``where`` of every 5-token sentence; the position guide is wrong half the time."""
    order = clear_order()
    order["adversary"] = adv_predicted
    order["edge token only"] = seeds(wrong(0.5, 0), wrong(0.5, 7), wrong(0.5, 13))
    attention = {"adversary": tuple(peaked(w) for w in where), "base LSTM": tuple(peaked(2) for _ in range(3))}
    return make_runs(order, attention)


TOKENS = {"first": pd.Series({"the": 0.14, "a": 0.12}), "last": pd.Series({".": 0.94, "!": 0.06})}
DEGENERATE = dict(position="edge token only", edge_tokens=TOKENS, adversary_jsd=[0.69, 0.686, 0.683], paper_jsd=0.514)
CHANCE = seeds(wrong(0.5, 0), wrong(0.5, 7), wrong(0.5, 13))


def test_an_adversary_on_one_position_in_every_seed_is_degenerate():
    runs = degenerate_runs((-1, 0, -1), CHANCE)
    out = ch09.degenerate(runs, edges=("last", "first", "last"), **DEGENERATE)
    assert out["ch09_degenerate_seeds"] == 3
    text = out["ch09_degenerate"]
    assert text.startswith("Our adversary is degenerate in all 3 seeds: its attention peaks on one position in "
                           "most sentences, whatever they say. Seed by seed, its largest weight is on the last, "
                           "first and last token in 100%, 100% and 100% of the test sentences")
    assert "‘the’ is the first token of 14% of them; ‘.’ is the last token of 94% of them" in text
    assert "(above it beyond noise in 0 of 3 seeds): so it tells the diagnostic model no more than that" in text
    assert "0.686 (0.683 to 0.690 over the seeds)" in text
    assert text.endswith("not one that differs from the base's on the words.")
    assert out["ch09_degenerate_summary"].startswith("Our adversary is degenerate in all 3 seeds")
    assert out["ch09_adv_peak_share"] == 1.0


def test_an_adversary_degenerate_in_one_seed_of_three_says_so():
    runs = degenerate_runs((-1, 2, 2), seeds(wrong(0.1, 0), wrong(0.1, 7), wrong(0.1, 13)))
    out = ch09.degenerate(runs, edges=("last", "first", "first"), **DEGENERATE)
    assert out["ch09_degenerate_seeds"] == 1
    assert out["ch09_degenerate"].startswith("Our adversary is degenerate in 1 of 3 seeds (seed 0): there its")
    assert "so the weight it leaves off that token still tells the diagnostic model something" in out[
        "ch09_degenerate"]
    assert out["ch09_degenerate_summary"].startswith("Our adversary is degenerate in 1 of 3 seeds")


def test_an_adversary_off_the_edges_is_not_degenerate():
    runs = degenerate_runs((2, 2, 2), CHANCE)
    out = ch09.degenerate(runs, edges=("last", "last", "last"), **DEGENERATE)
    assert out["ch09_degenerate_seeds"] == 0
    assert out["ch09_degenerate"].startswith("Our adversary is not degenerate in any seed")
    assert "W&P do not report" not in out["ch09_degenerate"]
    assert out["ch09_degenerate_summary"] == "Our adversary is not degenerate in any seed."
    with pytest.raises(ValueError, match="edges"):
        ch09.degenerate(runs, edges=("middle", "last", "last"), **DEGENERATE)
    with pytest.raises(ValueError, match="edges"):
        ch09.degenerate(runs, edges=("last",), **DEGENERATE)
    with pytest.raises(ValueError, match="adversary_jsd"):
        ch09.degenerate(runs, edges=("last",) * 3, **{**DEGENERATE, "adversary_jsd": [0.6]})
    with pytest.raises(ValueError, match="edge token only"):
        ch09.degenerate(make_runs(clear_order()), edges=("last",) * 3, **DEGENERATE)


def positions_frame(base_first=0.40):
    def row(first, last, peak, peak_first=0.0):
        return {"mean weight on first token": first, "mean weight on last token": last,
                "peak on first token": peak_first, "peak on last token": 0.0, "mean peak weight": peak}

    return pd.DataFrame({"uniform": row(0.2, 0.2, 0.2), "trained MLP": row(0.1, 0.1, 0.3),
                         "base LSTM": row(base_first, 0.05, 0.45, 0.6), "adversary": row(0.04, 0.9, 0.9)}).T


def test_positions_read_each_guide_over_seeds():
    attention = {"base LSTM": tuple(peaked(0) for _ in range(3)), "adversary": tuple(peaked(-1) for _ in range(3)),
                 "trained MLP": tuple(peaked(2, weight=0.5) for _ in range(3))}
    runs = make_runs(clear_order(), attention)
    out = ch09.positions(positions_frame(), runs)
    assert (out["ch09_first_base"], out["ch09_last_adv"], out["ch09_peak_trained"]) == (0.40, 0.9, 0.3)
    assert out["ch09_base_peak_first"] == 0.6
    assert out["ch09_base_reading"].startswith("Here the BiLSTM's guide is below uniform beyond noise (holds in 3 "
                                               "of 3 seeds), and it favours the first position")
    assert out["ch09_trained_first_dir"] == "less than uniform's, beyond noise (holds in 3 of 3 seeds)"
    assert out["ch09_adv_first_dir"] == "less than the base's 0.400, beyond noise (holds in 3 of 3 seeds)"
    assert out["ch09_adv_peak_dir"] == "within noise of the base's 0.450 (in none of 3 seeds alone)"
    mixed = {**attention, "adversary": (peaked(0, weight=0.95), peaked(-1), peaked(0, weight=0.95))}
    assert ch09.positions(positions_frame(), make_runs(clear_order(), mixed))["ch09_adv_first_dir"] == (
        "more than the base's 0.400 in some seeds and less in others (2 of 3 seeds higher, 1 lower, each beyond "
        "noise)")
    flat_base = make_runs(clear_order(), {**attention, "base LSTM": tuple(flat() for _ in range(3))})
    assert "although it does not favour the first position" in ch09.positions(positions_frame(), flat_base)[
        "ch09_base_reading"]
    up = clear_order()
    up["base LSTM"] = up["trained MLP"]
    assert ch09.positions(positions_frame(), make_runs(up, attention))["ch09_base_reading"].startswith(
        "Here the BiLSTM's guide is above uniform beyond noise")
    with pytest.raises(ValueError, match="adversary"):
        ch09.positions(positions_frame().drop(index="adversary"), runs)


def test_oracle_and_span():
    long_runs = make_runs({"uniform": seeds(np.ones(N, int), np.zeros(N, int), np.ones(N, int)),
                           "trained MLP": seeds(LABELS, LABELS, LABELS),
                           "oracle (rationale)": seeds(LABELS, LABELS, LABELS)})
    out = ch09.oracle(long_runs)
    assert (out["ch09_long_oracle"], out["ch09_long_trained"]) == (1.0, 1.0)
    assert out["ch09_long_uniform_f1_range"] == "0.000 to 0.667"
    assert out["ch09_long_uniform_acc"] == pytest.approx(0.5)
    assert out["ch09_long_gap"] == pytest.approx(50.0)
    assert out["ch09_long_verdict"] == "beyond noise, holds in 3 of 3 seeds"
    with pytest.raises(ValueError, match="oracle"):
        ch09.oracle(make_runs({"uniform": seeds(LABELS), "trained MLP": seeds(LABELS)}))
    s = ch09.span(make_runs(clear_order()))
    f1 = ch09.guide_table(make_runs(clear_order()))["test f1"]
    assert s["ch09_span"] == pytest.approx(100 * (f1["trained MLP"] - f1["adversary"]))
    assert (s["ch09_worst"], s["ch09_best_name"]) == ("adversary", "trained MLP")


def test_one_model_says_so():
    one = {g: v[:1] for g, v in clear_order().items()}
    out = ch09.ranking(make_runs(one), paper=PAPER)
    assert out["ch09_seeds_words"] == "one model"
    assert "from one model" in out["ch09_trained_vs_uni"]


def test_guide_table_and_cells():
    runs = make_runs({**clear_order(), "last token only": seeds(wrong(0.5, 0), wrong(0.5, 7), wrong(0.5, 13))})
    table = ch09.guide_table(runs, paper=PAPER)
    assert list(table.index) == ["uniform", "trained MLP", "base LSTM", "adversary", "last token only"]
    assert list(table["f1 rank"][:4]) == [2.0, 1.0, 3.0, 4.0] and np.isnan(table.loc["last token only", "f1 rank"])
    assert (table["test f1 low"] <= table["test f1"]).all() and (table["test f1"] <= table["test f1 high"]).all()
    assert table.loc["uniform", "test accuracy"] == pytest.approx(0.8)
    cells = ch09.guide_cells(table)
    assert cells.loc["last token only", "rank by F1"] == "n/a" and cells.loc["last token only", "W&P F1"] == "n/a"
    assert cells.loc["uniform", "test accuracy [95% interval]"].startswith("0.800 [")
    with pytest.raises(ValueError, match="rank"):
        ch09.guide_cells(table.drop(columns="f1 rank"))
    plain = ch09.guide_cells(ch09.guide_table(runs, ranked=False))  # no ranks, no paper: those columns go
    assert list(plain.columns) == ["test F1 [95% interval]", "test accuracy [95% interval]"]
