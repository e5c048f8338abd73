"""attnlib.experiments.randomisation: Adebayo et al.'s cascade changes the stages it names and nothing
else, and the sanity check's measures against explicit loops."""
import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import spearmanr

from attnlib.experiments import randomisation as rz
from attnlib.models import TransformerClassifier, TransformerConfig


@pytest.fixture(scope="module")
def shifted(tiny_dataset):
    """A tiny transformer whose every parameter is moved away from any initialisation (as training
    would), so that a re-initialised parameter is told apart from a kept one."""
    torch.manual_seed(0)
    config = TransformerConfig(layers=2, heads=2, head_dim=4, embed_dim=8, dropout=0.0)
    model = TransformerClassifier(len(tiny_dataset.vocab), config).eval()
    generator = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.5 * torch.randn(p.shape, generator=generator))
    return model


def test_the_stages_go_top_down_and_cover_every_parameter_once(shifted):
    stages = shifted.randomisation_stages()
    assert [name for name, _ in stages] == ["output", "layer 2", "layer 1", "embeddings"]
    listed = [n for _, names in stages for n in names]
    assert sorted(listed) == sorted(n for n, _ in shifted.named_parameters()) and len(set(listed)) == len(listed)
    assert all(n.startswith("layers.1.") for n in dict(stages)["layer 2"])
    assert "decoder.weight" in dict(stages)["output"] and "positions.weight" in dict(stages)["embeddings"]


def test_initialised_parameters_are_the_constructors_and_leave_the_host_generator_alone(shifted):
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    fresh = shifted.initialised_parameters(7)
    assert torch.equal(torch.random.get_rng_state(), before)
    torch.manual_seed(7)
    built = TransformerClassifier(shifted.vocab_size, shifted.config)
    for name, p in built.named_parameters():
        assert torch.equal(fresh[name], p.detach()), name


def test_the_randomised_stages_changed_and_the_others_did_not(shifted):
    """After each stage, every parameter of it and of the stages above is the fresh initialisation's
    (and differs from the trained one), every other parameter is the trained model's bit for bit, and
    the trained model itself is untouched."""
    trained = {n: p.detach().clone() for n, p in shifted.named_parameters()}
    fresh = shifted.initialised_parameters(3)
    stages = shifted.randomisation_stages()
    seen = []
    for (stage, model), (expected, names) in zip(rz.cascade(shifted, seed=3), stages, strict=True):
        assert stage == expected
        seen.extend(names)
        assert not model.training
        for n, p in model.named_parameters():
            if n in seen:
                assert torch.equal(p, fresh[n]), (stage, n)
                assert not torch.equal(p, trained[n]), (stage, n)
            else:
                assert torch.equal(p, trained[n]), (stage, n)
    for n, p in shifted.named_parameters():
        assert torch.equal(p, trained[n])


def test_the_cascade_needs_the_capability(tiny_model):
    lstm = tiny_model("lstm", "tanh", 2)
    with pytest.raises(ValueError, match="randomisation"):
        next(rz.cascade(lstm))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(1, 9), st.integers(1, 7), st.integers(0, 10_000))
def test_top_k_agreement_against_a_loop(n_rows, width, k, seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, width + 1, n_rows)
    a = rng.integers(0, 4, (n_rows, width)).astype(float)  # ties
    b = rng.normal(size=(n_rows, width))
    got = rz.top_k_agreement(a, b, lengths, k)
    for i, n in enumerate(lengths):
        kk = min(k, n)
        top_a = sorted(range(n), key=lambda j: (-a[i, j], j))[:kk]
        top_b = sorted(range(n), key=lambda j: (-b[i, j], j))[:kk]
        assert got[i] == pytest.approx(len(set(top_a) & set(top_b)) / kk)


def test_top_k_agreement_errors():
    with pytest.raises(ValueError, match="lengths"):
        rz.top_k_agreement(np.zeros((2, 3)), np.zeros((2, 4)), np.array([3, 3]))
    with pytest.raises(ValueError, match="k"):
        rz.top_k_agreement(np.zeros((2, 3)), np.zeros((2, 3)), np.array([3, 3]), k=0)


@pytest.fixture(scope="module")
def tested(shifted, tiny_dataset):
    split = tiny_dataset.test.subset(np.arange(12))
    methods = ["attention", "rollout", "gradient × input", "random"]
    return split, [rz.randomisation_test(shifted, split, methods=methods, seed=s, init_seed=s + 1) for s in (0, 1)]


def test_the_randomisation_test_scores_every_stage_against_the_trained_explanation(shifted, tested):
    from attnlib.explanations import explain

    split, results = tested
    result = results[0]
    assert result.stages == ("trained", "output", "layer 2", "layer 1", "embeddings")
    trained = explain(shifted, split, methods=["rollout"], seed=0)
    last = list(rz.cascade(shifted, seed=1))[-1][1]
    randomised = explain(last, split, methods=["rollout"], seed=0)
    for i, (x, y) in enumerate(zip(trained.scores["rollout"], randomised.scores["rollout"])):
        expected = spearmanr(x, y).statistic if len(x) > 1 and np.ptp(x) > 0 and np.ptp(y) > 0 else np.nan
        np.testing.assert_allclose(result.values["rank correlation"]["rollout"][-1, i], expected, atol=1e-12)
    for measure in rz.MEASURES:
        for m in result.methods:
            assert result.values[measure][m].shape == (5, len(split))
            assert np.all(result.values[measure][m][0] == 1)
    # the random ranking does not read the model: randomising it changes nothing
    assert np.all(result.values["top-k agreement"]["random"] == 1)
    assert np.nanmin(result.values["rank correlation"]["random"]) == pytest.approx(1.0)
    # the output stage leaves the attention below it alone; the layers do not
    np.testing.assert_allclose(result.values["rank correlation"]["attention"][1], 1.0)
    assert np.nanmean(result.values["rank correlation"]["attention"][-1]) < 0.9


def test_curves_and_verdicts_pool_the_seeds(tested):
    _, results = tested
    table = rz.curves(results)
    assert set(table.measure) == set(rz.MEASURES) and table.attrs["seeds"] == 2
    assert len(table) == 2 * 4 * 5
    row = table[(table.method == "rollout") & (table.stage == "embeddings") & (table.measure == "rank correlation")]
    per_seed = [np.nanmean(r.values["rank correlation"]["rollout"][-1]) for r in results]
    assert row["mean"].item() == pytest.approx(np.mean(per_seed))
    assert row.low.item() <= row["mean"].item() <= row.high.item()
    verdict = rz.verdicts(results)
    assert verdict.loc["random", "verdict"] == "fails"
    assert set(verdict.verdict) <= {"passes", "fails", "within noise"}
    assert isinstance(verdict, pd.DataFrame) and verdict.loc["random", "seeds"] == 2


def test_curves_refuse_results_that_do_not_line_up(tested):
    _, results = tested
    other = rz.RandomisationResult(stages=results[0].stages, methods=("attention",), values=results[0].values,
                                   changed=results[0].changed, indices=results[0].indices, k=5)
    with pytest.raises(ValueError, match="same stages"):
        rz.curves([results[0], other])
    with pytest.raises(ValueError, match="RandomisationResult"):
        rz.curves([])


def test_over_seeds_in_one_pool_gives_each_models_own_result(shifted, tested, tiny_dataset):
    """Every (model, stage) explanation as one job of one pool: the same numbers as one model at a time."""
    split, results = tested
    pooled = rz.randomisation_over_seeds([shifted, shifted], split, methods=results[0].methods, seed=0,
                                         init_seeds=[1, 1], progress=False, workers=2)
    for got, expected in zip(pooled, [results[0], results[0]]):
        assert got.stages == expected.stages
        for measure in rz.MEASURES:
            for m in got.methods:
                np.testing.assert_array_equal(got.values[measure][m], expected.values[measure][m])
    with pytest.raises(ValueError, match="one seed per model"):
        rz.randomisation_over_seeds([shifted], split, methods=["attention"], init_seeds=[1, 2])


def test_verdicts_at_the_output_stage_find_the_methods_that_never_read_it(tested):
    _, results = tested
    at_output = rz.verdicts(results, stage="output")
    assert at_output.attrs["stage"] == "output"
    # attention and rollout are computed below the decoder: randomising it leaves them exactly as trained
    assert at_output.loc["attention", "unchanged"] and at_output.loc["rollout", "unchanged"]
    assert at_output.loc["random", "unchanged"] and pd.isna(at_output.loc["random", "below_from"])
    assert not rz.verdicts(results).loc["attention", "unchanged"]
    table = rz.curves(results)
    assert (table.low >= -1).all() and (table.high <= 1).all()
    with pytest.raises(ValueError, match="stage must be one of"):
        rz.verdicts(results, stage="trained")
