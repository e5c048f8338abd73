"""attnlib.seeds: K seeds of a recipe in one call, an experiment over them, results stacked seeds x instances."""
import numpy as np
import pytest
import torch

from attnlib import erasure, seeds, train, uncertainty


@pytest.fixture(scope="module")
def sets(tiny_dataset):
    specs = {"average": dict(dataset=tiny_dataset, encoder="average", epochs=1, progress=False),
             "cnn": dict(dataset=tiny_dataset, encoder="cnn", epochs=1, progress=False)}
    return seeds.train_seed_sets(specs, (0, 1, 2), progress=False)


def test_each_model_of_a_set_is_the_model_train_model_gives(sets, tiny_dataset):
    assert list(sets) == ["average", "cnn"]
    s = sets["average"]
    assert s.seeds == (0, 1, 2) and len(s) == 3 and [t.seed for t in s] == [0, 1, 2]
    alone = train.train_model(tiny_dataset, encoder="average", epochs=1, seed=1, progress=False)
    assert alone.key == s[1].key
    for name, value in alone.model.state_dict().items():
        assert torch.equal(value, s[1].model.state_dict()[name]), name
    # different seeds, different models
    a, b = (m.state_dict() for m in s.models[:2])
    assert any(not torch.equal(a[k], b[k]) for k in a)
    assert s.first is s[0]


def test_scores_and_predictions_have_the_seed_axis(sets, tiny_dataset):
    s = sets["cnn"]
    assert s.scores("test", "f1").shape == (3,)
    assert s.scores("dev", "accuracy").tolist() == [t.dev["accuracy"] for t in s]
    pred = s.predicted(tiny_dataset.test)
    assert pred.shape == (3, len(tiny_dataset.test))
    # the stored test F1 is the F1 of these predictions
    f1 = uncertainty.f1_over_seeds(tiny_dataset.test.labels, pred)
    assert f1.estimate == pytest.approx(s.scores("test", "f1").mean(), abs=1e-12)
    with pytest.raises(ValueError, match="not among the stored scores"):
        s.scores("test", "bleu")


def test_an_experiment_over_seeds_stacks_seeds_by_instances(sets, tiny_dataset):
    runs = seeds.run_over_seeds(erasure.single_weight, sets["average"], tiny_dataset.test, max_instances=40, seed=3)
    assert len(runs) == 3 and runs.seeds == (0, 1, 2)
    stacked = runs.stack("jsd_top")
    assert stacked.shape == (3, len(runs.indices))
    for k, model in enumerate(sets["average"].models):  # row k is seed k's own run, same instances
        alone = erasure.single_weight(model, tiny_dataset.test, max_instances=40, seed=3)
        np.testing.assert_array_equal(alone.indices, runs.indices)
        np.testing.assert_array_equal(stacked[k], alone.jsd_top)
    flips = runs.stack(lambda r: r.flip_top.astype(float))
    assert set(np.unique(flips)) <= {0.0, 1.0}


def test_stack_aligns_by_instance_and_marks_the_missing(sets, tiny_dataset):
    runs = seeds.run_over_seeds(erasure.single_weight, sets["average"], tiny_dataset.test, max_instances=30)
    first = runs[0]
    keep = np.arange(len(first.indices)) % 2 == 0  # seed 0's result leaves every other instance out

    class Partial:
        indices = first.indices[keep]
        jsd_top = first.jsd_top[keep]

    partial = seeds.SeedResults((0, 1), (Partial(), runs[1]))
    stacked = partial.stack("jsd_top")
    assert np.isnan(stacked[0, ~keep]).all() and np.isfinite(stacked[1]).all()
    np.testing.assert_array_equal(stacked[0, keep], first.jsd_top[keep])


def test_bad_input_is_named(tiny_dataset):
    with pytest.raises(ValueError, match="names a seed"):
        seeds.train_seed_sets({"a": dict(dataset=tiny_dataset, seed=1)}, (0, 1))
    with pytest.raises(ValueError, match="distinct"):
        seeds.train_seeds(dict(dataset=tiny_dataset), (0, 0))
    with pytest.raises(ValueError, match="non-empty sequence"):
        seeds.train_seeds(dict(dataset=tiny_dataset), 3)
    with pytest.raises(ValueError, match="SeedSet"):
        seeds.run_over_seeds(erasure.single_weight, [1, 2], tiny_dataset.test)
    assert seeds.seeds_after(1, 3) == (1, 2, 3)
    with pytest.raises(ValueError, match="positive int"):
        seeds.seeds_after(0, 0)
