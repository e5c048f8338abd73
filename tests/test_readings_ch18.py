"""Chapter 18's readings: the cascade's verdicts, the two measures, the disagreement matrix, in words that
follow the numbers (small hand-made results)."""
import numpy as np
import pytest

from attnlib.experiments import disagreement, randomisation
from attnlib.experiments.explanations import ExplanationResult
from attnlib.presentation.readings import ch18

STAGES = ("trained", "output", "layer 2", "layer 1", "embeddings")


def _result(last: dict, top_last: dict, n=40, seed=0, k=5):
    """A RandomisationResult whose rank correlation falls linearly from 1 to ``last[m]`` (plus noise) and
    whose top-k agreement ends at ``top_last[m]``."""
    rng = np.random.default_rng(seed)
    values = {"rank correlation": {}, "top-k agreement": {}}
    for m, end in last.items():
        path = np.linspace(1, end, len(STAGES))[:, None] + rng.normal(0, 0.05, (len(STAGES), n))
        path[0] = 1
        values["rank correlation"][m] = np.clip(path, -1, 1)
        top = np.linspace(1, top_last[m], len(STAGES))[:, None] + rng.normal(0, 0.05, (len(STAGES), n))
        top[0] = 1
        values["top-k agreement"][m] = np.clip(top, 0, 1)
    return randomisation.RandomisationResult(stages=STAGES, methods=tuple(last), values=values,
                                             changed={s: () for s in STAGES}, indices=np.arange(n), k=k)


LAST = {"attention": 0.1, "rollout": 0.9, "flow": 0.5, "random": 1.0}
TOP = {"attention": 0.8, "rollout": 0.9, "flow": 0.2, "random": 1.0}


@pytest.fixture(scope="module")
def results():
    return [_result(LAST, TOP, seed=s) for s in range(3)]


def test_verdicts_name_the_methods_that_pass_fail_or_cannot_be_told(results):
    verdict = randomisation.verdicts(results)
    at_output = randomisation.verdicts(results, stage="output")
    got = ch18.verdicts(at_output, verdict, line=0.5)
    assert got["ch18_full"] == ("1 of the 4 methods (attention) passes (in 3 of 3 seeds); 2 of the 4 methods "
                                "(rollout and random) fail (in 3 of 3 seeds each); 1 of the 4 methods (flow) is "
                                "within noise of the line")
    assert got["ch18_n_pass"] == 1 and got["ch18_pass"] == "1 of the 4 methods"
    # noise moves every method a little at the output stage: none is exactly as trained, none below the line
    assert got["ch18_unchanged"] == "no method's explanation stays exactly as trained"
    assert got["ch18_moved"] == "Attention, rollout and flow change less than the line asks"
    table = ch18.cascade_table(randomisation.curves(results), verdict)
    assert list(table.columns) == ["ρ, output", "ρ, + layer 2", "ρ, all", "below the line from"]
    assert table.loc["attention", "below the line from"] == "layer 1"
    assert table.loc["random", "below the line from"] == "never"
    assert table.loc["random", "ρ, all"].startswith("0.9")  # noise clipped at 1


def test_an_exactly_unchanged_method_is_named(results):
    still = [_result(LAST, TOP, seed=s) for s in range(3)]
    for r in still:
        r.values["rank correlation"]["attention"][1] = 1.0  # the output stage changes nothing
    got = ch18.verdicts(randomisation.verdicts(still, stage="output"), randomisation.verdicts(still), line=0.5)
    assert got["ch18_unchanged"] == "attention is exactly as trained"
    assert got["ch18_n_unchanged"] == 1


def test_first_below_says_where_each_method_drops_under_the_line(results):
    said = ch18.first_below(randomisation.verdicts(results))["ch18_first_below"]
    assert said == "attention once layer 1 is random"
    never = ch18.first_below(randomisation.verdicts(results, line=-0.5))["ch18_first_below"]
    assert never == "no method's interval goes below it at any stage"


def test_two_measures_find_a_method_that_passes_by_rho_while_its_top_words_survive(results):
    got = ch18.two_measures(results, line=0.5, chance=0.3)
    assert got["ch18_n_hidden"] == 1 and got["ch18_hidden"].startswith("attention (top-k 0.80) passes")
    assert got["ch18_other"] == "none"  # flow's rho sits on the line, not above it
    flipped = [_result({"rollout": 0.9}, {"rollout": 0.1}, seed=s) for s in range(3)]
    assert ch18.two_measures(flipped, line=0.5, chance=0.3)["ch18_other"] == "rollout"


def test_chance_agreement_is_k_over_n_capped():
    assert ch18.chance_agreement([10, 5, 2], 5) == pytest.approx((0.5 + 1 + 1) / 3)
    with pytest.raises(ValueError, match="lengths"):
        ch18.chance_agreement([], 5)


def _explained(seed, n=30, T=8):
    rng = np.random.default_rng(seed)
    lengths = np.full(n, T)
    base = rng.random((n, T))
    scores = {"attention": base, "rollout": base + rng.normal(0, 0.01, (n, T)),
              "leave-one-out": -base, "random": rng.random((n, T))}
    return ExplanationResult(probs=np.full((n, 2), 0.5), predicted=np.zeros(n, int), labels=np.zeros(n, int),
                             indices=np.arange(n), lengths=lengths, excluded=np.array([], int),
                             methods=tuple(scores), scores={m: list(v) for m, v in scores.items()},
                             ig_delta=np.full(n, np.nan))


def test_the_disagreement_readings():
    explained = [_explained(s) for s in range(3)]
    agree = {metric: disagreement.disagreement_matrix(explained, k=3, metric=metric)
             for metric in ("feature agreement", "rank agreement", "sign agreement")}
    got = ch18.disagreement(agree["feature agreement"], chance=3 / 8)
    assert got["ch18_n_pairs"] == 3  # the random ranking left out
    assert got["ch18_agree_most"].startswith("attention and ")  # the same scores up to sign or noise
    assert got["ch18_above_chance"] == "all 3 pairs"
    table = ch18.agreement_table(agree)
    assert list(table.index.get_level_values(0).unique()) == ["feature agreement", "rank agreement", "sign agreement"]
    assert list(table.columns) == ["pair", "mean [95% interval]"] and len(table) == 9
    assert table.loc[("feature agreement", "most alike"), "pair"].startswith("attention – ")
    assert all(len(cell) < 50 for cell in table.to_numpy().ravel())  # pandas cuts longer cells in HTML
    signs = ch18.signs(agree["feature agreement"], agree["sign agreement"])
    # leave-one-out is the negative of attention: the same top words, opposite signs
    assert signs["ch18_n_sign_differs"] == 2
    assert signs["ch18_sign_differs"] == "the 2 pairs with leave-one-out and no other"
    medians = ch18.medians(agree)
    assert set(medians) == {"ch18_median_feature", "ch18_median_rank", "ch18_median_sign"}
    assert medians["ch18_median_rank"] <= medians["ch18_median_feature"]


def test_setup_counts_the_stages_after_the_trained_model():
    got = ch18.setup(n_seeds=3, n_train=2000, n_sentences=30, epochs=3, k=5, stages=STAGES,
                     methods=["attention", "random"], ig_steps=8)
    assert got["ch18_n_stages"] == 4 and got["ch18_stages"] == "output, layer 2, layer 1 and embeddings"
    assert got["ch18_n_explanations"] == 15 and got["ch18_n_train"] == "2,000"
    assert got["ch18_ig_steps"] == 8 and got["ch18_ig_steps_book"] == 16
    acc = ch18.accuracy(np.ones((3, 10), bool))
    assert acc["ch18_acc"] == 1.0


def test_seeds_that_disagree_at_the_output_stage_are_counted():
    split = []
    for s in range(3):
        r = _result(LAST, TOP, seed=s)
        r.values["rank correlation"]["attention"][1] = 1.0 if s == 0 else 0.0  # one seed unmoved, two moved
        split.append(r)
    got = ch18.verdicts(randomisation.verdicts(split, stage="output"), randomisation.verdicts(split), line=0.5)
    assert got["ch18_moved"].startswith("Attention changes, but within noise of the line, the seeds disagreeing "
                                        "(seeds below it: attention 2 of 3)")
