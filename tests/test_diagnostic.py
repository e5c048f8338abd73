"""attnlib.diagnostic (W&P 2019 Sec. 5, Table 3) and the given-attention plumbing under it.

The plumbing: `Split.with_attention` / `Dataset.with_attention` validate and attach a given
attention per instance, `Batch.attention` carries it at the real-token positions, a model
built with ``attention="given"`` decodes with exactly that, and the cache fingerprint
tells two guides apart.
"""
import dataclasses
import math

import numpy as np
import pytest
import torch

from attnlib import cache, data, train
from attnlib import diagnostic as dg
from attnlib.data import collate
from attnlib.models import AttentionClassifier, ModelConfig

GIVEN = ModelConfig(encoder="average", attention="given")


@pytest.fixture(scope="module")
def tiny():
    return data.load_dataset("synthetic", n=200, seed=0)  # train 160, dev 20, test 20


@pytest.fixture(scope="module")
def guide(tiny):
    # use_cache=False: a module fixture runs outside conftest's per-test private cache.
    return train.train_model(tiny, encoder="average", attention="tanh", epochs=1, use_cache=False, progress=False)


def random_attention(split, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.dirichlet(np.ones(n)).astype(np.float32) for n in split.lengths()]


def rationale_attention(dataset):
    """alpha_t = r_t / sum_t r_t: all the weight on the synthetic task's marker tokens."""
    return {name: [r / r.sum() for r in (x.astype(np.float32) for x in split.rationales)]
            for name, split in dataset.splits.items()}


# ----------------------------------------------------------------------------- plumbing
def _bad_attention(split, what):
    att = random_attention(split)
    if what == "count":
        return att[:-1]
    if what == "length":
        att[3] = np.append(att[3], 0.0)
    elif what == "negative":
        att[2] = np.zeros_like(att[2])
        att[2][:2] = [1.5, -0.5]
    elif what == "nan":
        att[4] = att[4].copy()
        att[4][0] = np.nan
    elif what == "sum":
        att[5] = att[5] * 0.9
    return att


@pytest.mark.parametrize(
    "what, message",
    [
        ("count", "has 20 instances but 19 attention arrays"),
        ("length", "instance 3 .* the given attention must be aligned to this data set's tokens"),
        ("negative", "finite and non-negative"),
        ("nan", "finite and non-negative"),
        ("sum", "instance 5 sums to 0.9"),
    ],
)
def test_with_attention_rejects_bad_attention(tiny, what, message):
    with pytest.raises(ValueError, match=message):
        tiny.test.with_attention(_bad_attention(tiny.test, what))
    assert tiny.test.attention is None  # the original split is never touched


def test_split_rejects_an_attention_list_of_the_wrong_size(tiny):
    s = tiny.test
    with pytest.raises(ValueError, match="19 attention arrays but 20 labels"):
        data.Split(s.name, s.texts, s.tokens, s.ids, s.labels, s.rationales, random_attention(s)[:-1])


def test_dataset_with_attention_attaches_to_every_split_and_copies(tiny):
    att = {name: random_attention(split, seed=i) for i, (name, split) in enumerate(tiny.splits.items())}
    given = tiny.with_attention(**att, name="synthetic+random")
    assert given.name == "synthetic+random" and tiny.name == "synthetic"
    assert tiny.with_attention(**att).name == "synthetic"
    assert all(split.attention is None for split in tiny.splits.values())
    assert given.vocab is tiny.vocab and given.classes == tiny.classes
    for name, split in given.splits.items():
        assert "with given attention" in repr(split)
        assert all(a.dtype == np.float32 for a in split.attention)
        np.testing.assert_array_equal(np.concatenate(split.attention), np.concatenate(att[name]))
    with pytest.raises(ValueError, match="aligned"):  # each split is checked against its own tokens
        tiny.with_attention(train=att["train"], dev=att["test"], test=att["dev"])


def test_batch_carries_attention_at_the_real_token_positions(tiny):
    split = tiny.test.with_attention(random_attention(tiny.test))
    rows = [5, 0, 3, 17]
    batch = split.batch(rows)
    assert batch.attention.shape == batch.tokens.shape and batch.attention.dtype == torch.float32
    assert "attention" in repr(batch)
    assert torch.all(batch.attention[~batch.mask] == 0)  # 0 at SOS, EOS and padding
    assert torch.all(batch.attention[:, 0] == 0)
    for r, i in enumerate(rows):
        n = len(split.tokens[i])
        assert torch.equal(batch.mask[r].nonzero().squeeze(1), torch.arange(1, n + 1))  # after SOS, before EOS
        np.testing.assert_array_equal(batch.attention[r, 1 : n + 1].numpy(), split.attention[i])
    torch.testing.assert_close(batch.attention.sum(1), torch.ones(len(rows)))
    assert torch.equal(batch.to("cpu").attention, batch.attention)

    # subset keeps each instance's attention with its tokens, whatever the selector
    selectors = [
        ([5, 0, 3, 17], [5, 0, 3, 17]),
        (np.isin(np.arange(len(split)), rows), [0, 3, 5, 17]),
        (slice(2, 9), list(range(2, 9))),
    ]
    for selector, expected in selectors:
        sub = split.subset(selector)
        assert len(sub) == len(expected)
        for j, i in enumerate(expected):
            assert sub.tokens[j] is split.tokens[i] and sub.attention[j] is split.attention[i]
        assert torch.equal(sub.batch(np.arange(len(sub))).attention, split.batch(expected).attention)

    # length-bucketed, shuffled batches: every row's weights follow its index
    for b in split.batches(6, shuffle=True, seed=3):
        for r, i in enumerate(b.index.tolist()):
            np.testing.assert_array_equal(b.attention[r][b.mask[r]].numpy(), split.attention[i])

    assert tiny.test.batch(rows).attention is None


def test_collate_checks_attention_lengths(tiny):
    s = tiny.test
    att = random_attention(s)
    with pytest.raises(ValueError, match="one weight per token"):
        collate(s.ids[:2], s.labels[:2], attention=[att[0], att[1][:-1]])
    with pytest.raises(ValueError, match="got 2 instances but 1 attention arrays"):
        collate(s.ids[:2], s.labels[:2], attention=att[:1])


def test_given_model_decodes_with_exactly_the_batch_attention(tiny):
    torch.manual_seed(0)
    model = AttentionClassifier(len(tiny.vocab), GIVEN).eval()
    assert model.attention is None and model.attention_parameters() == []
    split = tiny.test.with_attention(random_attention(tiny.test))
    batch = split.batch(np.arange(len(split)))
    out = model(batch)
    probs, logits = model.decode(model.encode(batch).hidden, batch.attention)
    assert torch.equal(out.probs, probs) and torch.equal(out.logits, logits)
    assert torch.equal(out.attention, batch.attention)
    # the attention really matters: other weights over the same tokens give other outputs
    other = split.with_attention(random_attention(split, seed=1)).batch(np.arange(len(split)))
    assert not torch.allclose(model(other).probs, out.probs)
    # an explicit attention= takes precedence over the batch's
    assert torch.equal(model(batch, attention=other.attention).probs, model(other).probs)

    plain = tiny.test.batch(np.arange(len(split)))
    with pytest.raises(ValueError, match="given attention"):
        model(plain)
    with pytest.raises(ValueError, match="given attention"):
        model(plain.tokens)
    with pytest.raises(ValueError, match="no attention of its own"):
        model.attend(model.encode(batch))


def test_fingerprint_tells_given_attentions_apart(tiny):
    fp = train.dataset_fingerprint
    a = {name: random_attention(split, 0) for name, split in tiny.splits.items()}
    b = {**a, "test": random_attention(tiny.test, 1)}  # differs in the test split only
    fps = {fp(tiny), fp(tiny.with_attention(**a)), fp(tiny.with_attention(**b)), fp(dg.guided_dataset(tiny, "uniform"))}
    assert len(fps) == 4
    assert fp(tiny.with_attention(**a)) == fp(tiny.with_attention(**{k: [x.copy() for x in v] for k, v in a.items()}))


# ----------------------------------------------------------------------------- guides
def test_uniform_guide_is_one_over_t(tiny):
    att = dg.guide_attention("uniform", tiny)
    assert list(att) == ["train", "dev", "test"]
    for name, split in tiny.splits.items():
        assert len(att[name]) == len(split)
        for a, n in zip(att[name], split.lengths()):
            assert a.shape == (n,) and a.dtype == np.float32
            np.testing.assert_allclose(a, 1.0 / n, rtol=1e-6)


def test_uniform_guide_equals_a_uniform_attention_model_with_the_same_weights(tiny):
    torch.manual_seed(1)
    uniform = AttentionClassifier(len(tiny.vocab), ModelConfig(encoder="average", attention="uniform"))
    given = AttentionClassifier(len(tiny.vocab), GIVEN)
    given.load_state_dict(uniform.state_dict())  # strict: the two have the same parameters
    guided = dg.guided_dataset(tiny, "uniform")
    for name in ("train", "dev", "test"):
        expected = train.predict(uniform, tiny[name])
        got = train.predict(given, guided[name])
        np.testing.assert_allclose(got.probs, expected.probs, rtol=0, atol=1e-6)
        for x, y in zip(got.attention, expected.attention):
            np.testing.assert_allclose(x, y, rtol=1e-6)


def test_training_with_the_uniform_guide_is_training_the_uniform_model(tiny):
    # Same seed, same initialisation (neither has attention parameters), same batches:
    # W&P's "uniform" diagnostic row is their Table 2 uniform model with the Average encoder.
    diag = dg.train_diagnostic(tiny, "uniform", epochs=2, progress=False)
    plain = train.train_model(tiny, encoder="average", attention="uniform", epochs=2, progress=False)
    assert diag.config == dataclasses.replace(GIVEN, n_classes=2) and diag.key != plain.key
    assert diag.best_epoch == plain.best_epoch
    for k, v in plain.model.state_dict().items():
        torch.testing.assert_close(diag.model.state_dict()[k], v, rtol=1e-4, atol=1e-5)
    for m in ("accuracy", "f1", "roc_auc"):
        assert diag.test[m] == pytest.approx(plain.test[m], abs=1e-6)


def test_guide_attention_from_a_model_is_its_predicted_attention(tiny, guide):
    att = dg.guide_attention(guide, tiny, batch_size=7)  # batching must not matter
    same = dg.guide_attention(guide.model, tiny)  # a bare AttentionClassifier works too
    for name, split in tiny.splits.items():
        expected = train.predict(guide.model, split).attention
        assert len(att[name]) == len(split)
        for a, b, c, n in zip(att[name], same[name], expected, split.lengths()):
            assert a.shape == (n,)
            np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-7)
            np.testing.assert_array_equal(b, c)
            assert a.min() >= 0 and abs(float(a.sum()) - 1) < 1e-5
    spread = np.concatenate([a - 1.0 / len(a) for a in att["test"]])
    assert np.abs(spread).max() > 1e-3  # a learned attention, not a uniform one


def test_train_diagnostic_with_a_model_guide(tiny, guide):
    result = dg.train_diagnostic(tiny, guide, epochs=1, progress=False)
    assert result.config.attention == "given" and result.config.encoder == "average"
    guided = dg.guided_dataset(tiny, guide)
    assert train.evaluate(result.model, guided.test) == result.test  # evaluated with the guide's attention
    again = dg.train_diagnostic(tiny, guide, epochs=1, progress=False)
    assert again.from_cache and again.key == result.key
    other = dg.train_diagnostic(tiny, "uniform", epochs=1, progress=False)
    assert not other.from_cache and other.key != result.key  # the cache never confuses two guides


def test_trained_guide_is_the_average_model_with_its_own_attention(tiny):
    result = dg.train_diagnostic(tiny, "trained", epochs=1, progress=False)
    assert result.config == ModelConfig(encoder="average", attention="tanh")
    assert train.train_model(tiny, encoder="average", attention="tanh", epochs=1, progress=False).key == result.key


def test_attention_on_the_rationale_guides_better_than_uniform():
    # An oracle guide: all the weight on the marker words that decide the label. The
    # diagnostic model then only has to read the markers' polarity; under uniform weights
    # it must find them among 10-40 distractors. Measured over 6 data seeds x 3 training
    # seeds (n = 400, 2 epochs): rationale accuracy >= 0.95 and ROC-AUC >= 0.99 vs uniform
    # <= 0.74 and <= 0.83, so the margins asserted here are far from the noise.
    ds = data.load_dataset("synthetic", n=400, seed=0)
    table = dg.diagnostic_table(
        ds, {"uniform": "uniform", "rationale": rationale_attention(ds)}, seeds=(0, 1), epochs=2, progress=False
    )
    uniform, rationale = table.loc["uniform"], table.loc["rationale"]
    assert rationale["test accuracy"] >= 0.9 and rationale["test roc_auc"] >= 0.97, table
    assert rationale["test accuracy"] >= uniform["test accuracy"] + 0.1, table
    assert rationale["test roc_auc"] >= uniform["test roc_auc"] + 0.1, table
    assert rationale["test f1"] >= uniform["test f1"], table


# ----------------------------------------------------------------------------- Table 3
def test_diagnostic_table_rows_columns_and_seeds(tiny, guide):
    guides = {"base LSTM": guide, "uniform": "uniform", "trained MLP": "trained"}
    table = dg.diagnostic_table(tiny, guides, seeds=(0, 1), epochs=1, progress=False)
    assert list(table.index) == ["base LSTM", "uniform", "trained MLP"] and table.index.name == "guide"
    assert list(table.columns) == [
        "test f1", "test f1 sd", "test accuracy", "test accuracy sd", "test roc_auc", "test roc_auc sd",
    ]  # no published column: the synthetic task is not in the paper
    assert table.notna().all().all() and (table >= 0).all().all() and (table.filter(like="test").max() <= 1).all()
    # each cell is the mean (sd) over seeds of train_diagnostic's scores (cache hits here)
    runs = [dg.train_diagnostic(tiny, guide, seed=s, epochs=1, progress=False) for s in (0, 1)]
    assert all(r.from_cache for r in runs)
    for m in ("f1", "accuracy", "roc_auc"):
        scores = [r.test[m] for r in runs]
        assert table.loc["base LSTM", f"test {m}"] == pytest.approx(np.mean(scores))
        assert table.loc["base LSTM", f"test {m} sd"] == pytest.approx(np.std(scores, ddof=1))
    assert runs[0].test["roc_auc"] != runs[1].test["roc_auc"]  # so the sd check above has teeth

    single = dg.diagnostic_table(tiny, {"uniform": "uniform"}, seeds=0, epochs=1, progress=False)
    assert list(single.columns) == ["test f1", "test accuracy", "test roc_auc"]
    assert single.loc["uniform", "test f1"] == pytest.approx(
        dg.train_diagnostic(tiny, "uniform", seed=0, epochs=1, progress=False).test["f1"]
    )


def test_diagnostic_table_trains_each_guide_and_seed_once(tiny, guide, monkeypatch):
    trained, predicted = [], []
    real_train, real_predict = dg.train_models, dg.predict
    monkeypatch.setattr(dg, "train_models", lambda specs, **k: trained.extend(s["seed"] for s in specs) or real_train(specs, **k))
    monkeypatch.setattr(dg, "predict", lambda m, split, **k: predicted.append(split.name) or real_predict(m, split, **k))
    guides = {"uniform": "uniform", "base LSTM": guide}
    dg.diagnostic_table(tiny, guides, seeds=(0, 1), epochs=1, use_cache=False, progress=False)
    assert trained == [0, 1, 0, 1]
    assert predicted == ["train", "dev", "test"]  # the guide's attention is computed once, not per seed


def test_published_column_for_a_paper_dataset(tiny):
    # Our synthetic data under the name of the SST stand-in: the table looks up W&P's Table 3.
    as_sst = dataclasses.replace(tiny, name="rt-polarity")
    guides = {"trained MLP": "trained", "uniform": "uniform", "oracle": rationale_attention(tiny)}
    table = dg.diagnostic_table(as_sst, guides, epochs=1, progress=False)
    assert list(table.columns) == ["test f1", "test accuracy", "test roc_auc", "published f1"]
    assert table.loc["trained MLP", "published f1"] == 0.817
    assert table.loc["uniform", "published f1"] == 0.812
    assert math.isnan(table.loc["oracle", "published f1"])  # not a row of the paper
    assert "Wiegreffe & Pinter 2019, Table 3" in table.attrs["published f1"]


def test_published_table3():
    sst, imdb = dg.published_table3("rt-polarity"), dg.published_table3("imdb")
    assert sst is dg.published_table3("sst2") is dg.PUBLISHED_TABLE3["sst"]
    order = ["uniform", "trained MLP", "base LSTM", "adversary"]
    assert list(sst) == order and list(imdb) == order
    assert [sst[g].value for g in order] == [0.812, 0.817, 0.824, 0.592]
    assert [imdb[g].value for g in order] == [0.863, 0.888, 0.905, 0.700]
    for row in (sst, imdb):
        for p in row.values():
            assert p.source == "Wiegreffe & Pinter 2019, Table 3" and not p.verify
    # W&P's story: the base model's attention is the best guide; the adversary's is far worse
    # than uniform (it carries nothing another model can use)
    for row in (sst, imdb):
        assert row["base LSTM"].value == max(p.value for p in row.values())
        assert row["adversary"].value < row["uniform"].value - 0.1
    assert dg.published_table3("synthetic") is None and dg.published_table3("agnews") is None


# ----------------------------------------------------------------------------- validation
def test_bad_guides_are_rejected_with_a_clear_message(tiny, guide):
    with pytest.raises(ValueError, match=r"unknown guide 'base'.*'uniform', 'trained'"):
        dg.guide_attention("base", tiny)
    with pytest.raises(ValueError, match="unknown guide"):
        dg.train_diagnostic(tiny, "Uniform", epochs=1, progress=False)
    with pytest.raises(ValueError, match="learns its attention jointly.*train_diagnostic"):
        dg.guide_attention("trained", tiny)
    with pytest.raises(ValueError, match="a guide must be .* got int"):
        dg.guide_attention(42, tiny)
    with pytest.raises(ValueError, match="must be an attnlib.data.Dataset"):
        dg.guide_attention("uniform", tiny.test)

    other_vocab = AttentionClassifier(len(tiny.vocab) + 3, ModelConfig(encoder="average", attention="tanh"))
    with pytest.raises(ValueError, match=r"vocabulary has \d+ entries but 'synthetic' has \d+.*aligned"):
        dg.guide_attention(other_vocab, tiny)
    with pytest.raises(ValueError, match="vocabulary"):
        dg.train_diagnostic(tiny, dataclasses.replace(guide, model=other_vocab), epochs=1, progress=False)
    with pytest.raises(ValueError, match="attention='given'"):
        dg.guide_attention(AttentionClassifier(len(tiny.vocab), GIVEN), tiny)

    att = rationale_attention(tiny)
    with pytest.raises(ValueError, match="exactly 'train', 'dev' and 'test'"):
        dg.guide_attention({"train": att["train"], "test": att["test"]}, tiny)
    with pytest.raises(ValueError, match="19 arrays for split 'test'"):
        dg.guide_attention({**att, "test": att["test"][:-1]}, tiny)
    with pytest.raises(ValueError, match="sums to"):  # the weights themselves are checked when attached
        dg.train_diagnostic(tiny, {**att, "dev": [2 * a for a in att["dev"]]}, epochs=1, progress=False)


def test_diagnostic_table_validates_everything_before_training(tiny):
    kwargs = dict(epochs=1, progress=False)
    with pytest.raises(ValueError, match="non-empty dict"):
        dg.diagnostic_table(tiny, {}, **kwargs)
    with pytest.raises(ValueError, match="non-empty dict"):
        dg.diagnostic_table(tiny, ["uniform"], **kwargs)
    with pytest.raises(ValueError, match="non-empty strings"):
        dg.diagnostic_table(tiny, {1: "uniform"}, **kwargs)
    for seeds in ((), (0, 0), (-1,), (0.5,), "0"):
        with pytest.raises(ValueError, match="seeds"):
            dg.diagnostic_table(tiny, {"uniform": "uniform"}, seeds=seeds, **kwargs)
    with pytest.raises(ValueError, match="unknown guide 'nope'"):
        dg.diagnostic_table(tiny, {"uniform": "uniform", "typo": "nope"}, **kwargs)
    models = cache.cache_dir() / "models"
    assert not models.exists() or not any(models.iterdir())  # nothing was trained before the error


# ----------------------------------------------------------------------------- W&P's Table 4 rule
def test_table4_pick_is_the_smallest_tvd_above_jsd_04():
    import pandas as pd

    from attnlib import diagnostic

    frame = pd.DataFrame({"lambda": [0.001, 0.01, 0.1, 1.0], "mean_jsd": [0.33, 0.69, 0.69, 0.69],
                          "mean_tvd": [0.15, 0.14, 0.11, 0.13]})
    assert diagnostic.table4_pick(frame) == 0.1
    assert diagnostic.table4_pick(frame.set_index("lambda")) == 0.1
    assert diagnostic.table4_pick(frame.assign(mean_jsd=0.3)) is None
    assert diagnostic.table4_pick(frame.assign(mean_tvd=0.1)) == 0.01  # a tie goes to the smaller lambda
    assert diagnostic.table4_pick(frame, threshold=0.2) == 0.1
    with pytest.raises(ValueError, match="mean_jsd"):
        diagnostic.table4_pick(frame.drop(columns="mean_jsd"))


def test_guide_adversary_falls_back_with_a_warning():
    import pandas as pd

    from attnlib import diagnostic

    class Sweep:
        def __init__(self, frame):
            self.frame = frame

        def __getitem__(self, lam):
            return f"adversary {lam:g}"

    frame = pd.DataFrame({"lambda": [0.001, 0.01], "mean_jsd": [0.5, 0.45], "mean_tvd": [0.2, 0.1]})
    assert diagnostic.guide_adversary(Sweep(frame), within=(0, 1)) == (0.01, "adversary 0.01")
    low = frame.assign(mean_jsd=[0.3, 0.35])
    with pytest.warns(UserWarning, match="largest"):
        assert diagnostic.guide_adversary(Sweep(low), within=(0, 1)) == (0.01, "adversary 0.01")


def test_guide_adversary_picks_within_wp_range():
    import pandas as pd

    from attnlib import diagnostic

    class Sweep:
        def __init__(self, frame):
            self.frame = frame

        def __getitem__(self, lam):
            return f"adversary {lam:g}"

    # W&P's own adversaries sit at 4e-4 ... 2e-3 in our scale: 1.0 has the smallest TVD but lies outside
    frame = pd.DataFrame({"lambda": [4e-4, 2e-3, 1.0], "mean_jsd": [0.3, 0.6, 0.69], "mean_tvd": [0.05, 0.12, 0.1]})
    assert diagnostic.guide_adversary(Sweep(frame)) == (0.002, "adversary 0.002")
    assert diagnostic.guide_lambdas([1e-4, 4e-4, 1e-3, 2e-3, 1e-2, 1.0]) == (4e-4, 1e-3, 2e-3)
    assert diagnostic.guide_lambdas([1e-2, 1.0]) == (1e-2, 1.0)  # none in the range: the whole grid
    outside = pd.DataFrame({"lambda": [0.01, 1.0], "mean_jsd": [0.5, 0.6], "mean_tvd": [0.2, 0.1]})
    with pytest.warns(UserWarning, match="whole sweep"):
        assert diagnostic.guide_adversary(Sweep(outside)) == (1.0, "adversary 1")
    with pytest.raises(ValueError, match="mean_jsd"):
        diagnostic.guide_adversary(Sweep(outside.drop(columns="mean_jsd")))


def test_a_models_guide_attention_does_not_depend_on_the_thread_count(tiny_dataset):
    """The guide's weights are training data for the diagnostic model: computed on the training
    thread, they are the same bits on a 1-core and a 16-core machine (a near-chance diagnostic
    model's F1 moved from 0.510 to 0.355 when they were not)."""
    import torch

    from attnlib import diagnostic
    from attnlib.models import ModelConfig

    torch.manual_seed(0)
    model = ModelConfig(encoder="lstm", attention="tanh").build(len(tiny_dataset.vocab)).eval()
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = diagnostic.guide_attention(model, tiny_dataset)
        torch.set_num_threads(2)
        two = diagnostic.guide_attention(model, tiny_dataset)
    finally:
        torch.set_num_threads(before)
    assert torch.get_num_threads() == before
    for split in one:
        assert all(np.array_equal(a, b) for a, b in zip(one[split], two[split]))


# ----------------------------------------------------------------------------- over training seeds
def test_diagnostic_over_seeds_keeps_each_seeds_decisions_and_weights(tiny, guide):
    guide_b = train.train_model(tiny, encoder="average", attention="tanh", epochs=1, seed=1, use_cache=False,
                                progress=False)
    guides = {"uniform": "uniform", "trained MLP": "trained", "model": [guide, guide_b],
              "first token only": dg.position_guide(tiny, "first")}
    runs = dg.diagnostic_over_seeds(tiny, guides, seeds=(0, 1), epochs=1, progress=False)
    n = len(tiny.test)
    assert runs.seeds == (0, 1) and runs.guides == list(guides)
    assert all(runs.predicted[g].shape == (2, n) for g in guides)
    assert np.array_equal(runs.labels, tiny.test.labels)
    for g in guides:  # the stored test scores are those of the kept decisions
        assert runs.scores(g, "accuracy") == pytest.approx(runs.correct(g).mean(1))
    # row k is the diagnostic model trained with seed k, guided by guide k
    assert [t.seed for t in runs.trained["model"]] == [0, 1]
    alone = dg.train_diagnostic(tiny, guide_b, seed=1, epochs=1, progress=False)
    assert runs.trained["model"][1].key == alone.key
    assert np.allclose(np.concatenate(runs.attention["model"][1]),
                       np.concatenate(dg.guide_attention(guide_b, tiny)["test"]))
    assert runs.peaks("first token only", "first").all() and not runs.peaks("uniform", "last").any()
    assert runs.peaks("first token only", ("first", "last")).mean(1).tolist() == [1.0, 0.0]
    frame = runs.positions()
    assert frame.loc["first token only", "mean weight on first token"] == 1.0
    assert frame.loc["uniform", "peak on last token"] == 0.0
    # the specs are what diagnostic_over_seeds trains: handed to another pool, they are its cache entries
    specs = dg.diagnostic_specs(tiny, guides, seeds=(0, 1), epochs=1)
    assert len(specs) == 8 and [s["seed"] for s in specs[:2]] == [0, 1]
    with pytest.raises(ValueError, match="one per seed"):
        dg.diagnostic_over_seeds(tiny, {"model": [guide]}, seeds=(0, 1), epochs=1, progress=False)
    with pytest.raises(ValueError, match="peaks|edge"):
        runs.peaks("uniform", ("first",))


def test_peak_on_edge_position_guide_and_edge_tokens(tiny):
    attention = [np.array([0.1, 0.9]), np.array([0.5, 0.5]), np.array([0.7, 0.2, 0.1]), np.array([1.0])]
    assert dg.peak_on_edge(attention, "last").tolist() == [1.0, 0.0, 0.0, 1.0]  # a tie counts for neither
    assert dg.peak_on_edge(attention, "first").tolist() == [0.0, 0.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="edge"):
        dg.peak_on_edge(attention, "middle")
    last = dg.position_guide(tiny, "last")
    for name, split in tiny.splits.items():
        assert [len(a) for a in last[name]] == list(split.lengths())
        assert all(a[-1] == 1.0 and a.sum() == 1.0 for a in last[name])
    shares = dg.edge_tokens(tiny.test, "first")
    assert shares.sum() == pytest.approx(1.0) and shares.is_monotonic_decreasing
    assert shares.index[0] == __import__("pandas").Series([t[0] for t in tiny.test.tokens]).value_counts().index[0]


def test_peak_edges_and_adversaries_over_seeds(tiny, monkeypatch):
    base = train.train_model(tiny, encoder="lstm", attention="tanh", epochs=1, use_cache=False, progress=False)
    edges = dg.peak_edges([base], tiny.test)
    alpha = train.predict(base.model, tiny.test).attention
    first, last = dg.peak_on_edge(alpha, "first").sum(), dg.peak_on_edge(alpha, "last").sum()
    assert edges == ("first" if first > last else "last",)
    calls = []
    from attnlib.experiments import adversarial_training

    monkeypatch.setattr(adversarial_training, "train_adversary",
                        lambda ds, b, lam, **kw: calls.append((b.seed, lam, kw["seed"])) or f"adv {kw['seed']}")
    assert dg.adversaries_over_seeds(tiny, [base], 0.002, epochs=1, progress=False) == ("adv 0",)
    assert calls == [(0, 0.002, 0)]  # each adversary with its base's seed
    with pytest.raises(ValueError, match="bases"):
        dg.adversaries_over_seeds(tiny, ["not a model"], 0.002)


def test_the_rationale_guide_spreads_each_sentence_evenly_over_its_markers():
    ds = data.load_dataset("synthetic", n=120, seed=0)
    guide = dg.rationale_guide(ds)
    for split in ("train", "dev", "test"):
        assert len(guide[split]) == len(ds[split])
        for marks, weights in zip(ds[split].rationales, guide[split]):  # an explicit loop, the oracle
            marks = np.asarray(marks, dtype=float)
            assert weights.sum() == pytest.approx(1.0)
            assert np.array_equal(weights > 0, marks > 0)
            assert np.allclose(weights[marks > 0], 1.0 / marks.sum())
    with pytest.raises(ValueError, match="no rationales"):
        dg.rationale_guide(data.load_dataset("rt-polarity", seed=0))
