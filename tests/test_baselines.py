"""attnlib.baselines: uniform-attention comparison and random-seed variance (W&P 2019)."""
import numpy as np
import pytest
import torch

from attnlib import baselines, data, metrics, train
from attnlib.models import ModelConfig


@pytest.fixture(scope="module")
def tiny():
    return data.load_dataset("synthetic", n=200, seed=0)


def test_uniform_comparison_rows_and_scores(tiny):
    res = baselines.uniform_comparison(tiny, ("average",), epochs=1, progress=False)
    f = res.frame
    assert list(f["attention"]) == ["trained", "uniform"]
    assert list(f["encoder"]) == ["average", "average"]
    for (enc, which), trained in res.models.items():
        expected = "tanh" if which == "trained" else "uniform"
        assert trained.config.attention == expected
        row = f[(f.encoder == enc) & (f.attention == which)].iloc[0]
        assert row["F1"] == pytest.approx(train.evaluate(trained.model, tiny.test)["f1"])
    # No published figure for the synthetic task.
    assert f["F1 (W&P)"].isna().all()
    gap = res.gap()
    assert gap.loc["average", "F1 gap (ours)"] == pytest.approx(f["F1"].iloc[0] - f["F1"].iloc[1])
    # ours carries its paired interval, whose estimate is the table's gap
    comparison = res.f1_gap("average")
    assert comparison.a.estimate == pytest.approx(f["F1"].iloc[0]) and comparison.b.estimate == pytest.approx(f["F1"].iloc[1])
    assert gap.loc["average", "low"] <= gap.loc["average", "F1 gap (ours)"] <= gap.loc["average", "high"]
    assert gap.loc["average", "low"] == comparison.difference.low
    with pytest.raises(ValueError, match="no 'lstm' models"):
        res.f1_gap("lstm")
    change = res.accuracy_change("average")  # uniform minus trained, paired
    assert change.a.estimate == pytest.approx(f["accuracy"].iloc[1]) and change.b.estimate == pytest.approx(
        f["accuracy"].iloc[0])
    with pytest.raises(ValueError, match="no 'cnn' models"):
        res.accuracy_change("cnn")


def test_uniform_model_attention_is_uniform(tiny):
    res = baselines.uniform_comparison(tiny, ("average",), epochs=1, progress=False)
    model = res.models[("average", "uniform")].model
    batch = tiny.test.batch(range(8))
    alpha = model(batch).attention
    expected = batch.mask.float() / batch.mask.sum(-1, keepdim=True)
    torch.testing.assert_close(alpha.cpu(), expected.cpu())


def test_uniform_comparison_publishes_wp_numbers_for_the_sst_standin(monkeypatch, tiny):
    # The published column depends only on the dataset name and the (lstm, tanh) model.
    assert baselines._published_f1("rt-polarity", "trained") == pytest.approx(0.831)
    assert baselines._published_f1("rt-polarity", "uniform") == pytest.approx(0.822)
    assert baselines._published_f1("imdb", "uniform") == pytest.approx(0.879)
    assert np.isnan(baselines._published_f1("synthetic", "uniform"))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(encoders=()), "at least one encoder"),
        (dict(attention="uniform"), "'tanh' or 'dot'"),
        (dict(seed=-1), "non-negative"),
        (dict(encoders=("gru",)), "unknown encoder"),
    ],
)
def test_uniform_comparison_rejects_bad_input(tiny, kwargs, match):
    with pytest.raises(ValueError, match=match):
        baselines.uniform_comparison(tiny, **{"encoders": ("average",), "epochs": 1, "progress": False, **kwargs})


def test_uniform_comparison_rejects_non_dataset():
    with pytest.raises(ValueError, match="attnlib.data.Dataset"):
        baselines.uniform_comparison("rt-polarity")


def test_seed_variance_matches_direct_comparison(tiny):
    sv = baselines.seed_variance(tiny, encoder="average", seeds=(1, 2), epochs=1, progress=False)
    assert len(sv) == len(tiny.test)
    assert set(sv.per_seed["seed"]) == {1, 2}
    # Recompute seed 1's JSD and TVD by hand from the two models' outputs.
    batch = tiny.test.batch(range(len(tiny.test)))
    with torch.no_grad():
        a, b = sv.models[1].model(batch), sv.base.model(batch)
    jsd = metrics.jsd(a.attention.double(), b.attention.double(), mask=batch.mask).cpu().numpy()
    tvd = metrics.tvd(a.probs.double(), b.probs.double()).cpu().numpy()
    s1 = sv.per_seed[sv.per_seed.seed == 1].sort_values("instance")
    np.testing.assert_allclose(s1["jsd"], jsd, atol=1e-6)
    np.testing.assert_allclose(s1["tvd"], tvd, atol=1e-6)
    # Per instance: the median over the seeds.
    med = sv.per_seed.groupby("instance")["jsd"].median().to_numpy()
    np.testing.assert_allclose(sv.per_instance["jsd"], med)
    np.testing.assert_allclose(sv.per_instance["max_attention"], b.attention.max(-1).values.cpu().numpy(), atol=1e-6)
    assert (sv.per_instance["jsd"] > 0).all()  # different seeds really give different attention
    summary = sv.summary()
    assert summary["n"].sum() == len(tiny.test)
    assert list(sv.test_scores().index) == [0, 1, 2]


def test_seed_variance_is_zero_against_an_identical_model(tiny):
    base = train.train_model(tiny, encoder="average", epochs=1, progress=False)
    c = train.compare_models(base.model, base.model, tiny.test)
    assert np.abs(c.attention_jsd).max() == 0 and c.output_tvd.max() == 0 and c.same_decision.all()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(seeds=()), "at least one seed"),
        (dict(seeds=(1, 1)), "distinct"),
        (dict(seeds=(0, 1)), "base seed"),
        (dict(seeds=3), "sequence"),
        (dict(split="valid"), "split must be"),
        (dict(attention="uniform"), "not learned"),
        (dict(config=ModelConfig(encoder="average", attention="given")), "not learned"),
    ],
)
def test_seed_variance_rejects_bad_input(tiny, kwargs, match):
    with pytest.raises(ValueError, match=match):
        baselines.seed_variance(tiny, **{"encoder": "average", "epochs": 1, "progress": False, **kwargs})


def test_compare_models_rejects_other_vocabularies(tiny):
    from attnlib.models import AttentionClassifier

    a = AttentionClassifier(len(tiny.vocab), ModelConfig(encoder="average"))
    b = AttentionClassifier(len(tiny.vocab) + 5, ModelConfig(encoder="average"))
    with pytest.raises(ValueError, match="vocabularies"):
        train.compare_models(a, b, tiny.test)
    with pytest.raises(ValueError, match="AttentionClassifier"):
        train.compare_models("model", b, tiny.test)


def test_load_wp_dataset_keeps_the_first_training_sentences_and_the_rest_as_it_was():
    from attnlib.experiments import baselines

    full = baselines.load_wp_dataset("synthetic-long", seed=0, profile="book")
    cut = baselines.load_wp_dataset("synthetic-long", seed=0, profile="book", max_train=50)
    assert len(cut.train) == 50 and cut.train.tokens == full.train.tokens[:50]
    assert list(cut.train.labels) == list(full.train.labels[:50])
    assert all(np.array_equal(a, b) for a, b in zip(cut.train.rationales, full.train.rationales[:50], strict=True))
    assert cut.test.tokens == full.test.tokens and cut.dev.tokens == full.dev.tokens
    assert cut.vocab == full.vocab and cut.name == "synthetic-long"
    assert baselines.load_wp_dataset("synthetic-long", max_train=10**6).train.tokens == full.train.tokens
    for bad in (0, 1, 2.5, True, "10"):
        with pytest.raises(ValueError, match="max_train"):
            baselines.load_wp_dataset("synthetic-long", max_train=bad)
