"""attnlib.explanations: every explanation of Chapter 15 on the same instances, checked against oracles."""
import numpy as np
import pandas as pd
import pytest
import torch
from captum.attr import LayerIntegratedGradients
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib import data
from attnlib.explanations import (
    IG_STEPS,
    METHODS,
    ExplanationResult,
    applies,
    explain,
    integrated_gradients,
    methods_for,
    plausibility,
    plausibility_by_instance,
)
from attnlib.faithfulness import faithfulness, rationale_recovery
from attnlib.flow import relevance_by_layer
from attnlib.identifiability import effective_attention
from attnlib.importance import importance
from attnlib.models import TransformerClassifier, TransformerConfig, device_of, real_token_mask


@pytest.fixture(scope="module")
def split(tiny_dataset):
    return tiny_dataset.test.subset(np.arange(16))


@pytest.fixture(scope="module")
def average(tiny_model):
    return tiny_model("average", "tanh", 2)


def test_methods_that_apply(lstm, average, transformer):
    assert methods_for(transformer) == METHODS
    jw = ("attention", "gradient × input", "integrated gradients", "leave-one-out", "random")
    assert methods_for(lstm) == methods_for(average) == jw
    assert not applies(lstm, "flow") and applies(transformer, "flow")


@pytest.mark.parametrize("family", ["lstm", "transformer"])
def test_every_method_scores_every_real_token(family, split, lstm, transformer):
    model = {"lstm": lstm, "transformer": transformer}[family]
    result = explain(model, split, ig_steps=8)
    assert isinstance(result, ExplanationResult) and result.methods == methods_for(model)
    imp = importance(model, split)
    np.testing.assert_array_equal(result.indices, imp.indices)
    for m in result.methods:
        assert [len(s) for s in result.scores[m]] == result.lengths.tolist()
        flat = np.concatenate(result.scores[m])
        assert np.isfinite(flat).all()
        if m != "effective attention":
            assert (flat >= 0).all()
        if m not in ("effective attention", "random", "leave-one-out"):  # LOO: a TVD per token
            np.testing.assert_allclose([s.sum() for s in result.scores[m]], 1.0, atol=1e-6)
    for m, name in (("attention", "attention"), ("gradient × input", "gradient"), ("leave-one-out", "loo")):
        for a, b in zip(result.scores[m], getattr(imp, name)):
            np.testing.assert_array_equal(a, b)
    assert result.padded("random").shape == (len(result), result.lengths.max())


def test_rollout_and_flow_are_chapter_14s_last_layer(split, transformer):
    result = explain(transformer, split, methods=("rollout", "flow"))
    relevance = relevance_by_layer(transformer, split)
    np.testing.assert_array_equal(result.indices, relevance.indices)
    for m in ("rollout", "flow"):
        for a, b in zip(result.scores[m], relevance.scores[m]):
            np.testing.assert_allclose(a, b[-1], atol=1e-12)


def test_effective_attention_is_the_last_layers_cls_row(split, transformer):
    result = explain(transformer, split, methods=("effective attention",))
    batch = split.batch(result.indices)
    with torch.no_grad():
        trace = transformer.trace(batch)
    words = real_token_mask(trace.tokens).numpy()
    for i in range(len(result)):  # one sentence at a time: the oracle runs per instance
        n = int(trace.lengths[i])
        eff = effective_attention(trace.attentions[i : i + 1, -1, :, :n, :n].numpy(),
                                  trace.value_output(trace.n_layers - 1)[i : i + 1, :, :n].numpy())
        np.testing.assert_allclose(result.scores["effective attention"][i], eff[0, :, 0].mean(0)[words[i, :n]],
                                   atol=1e-9)
    # A sentence no longer than the head's rank leaves no null space: there effective = raw attention.
    torch.manual_seed(1)
    wide = TransformerClassifier(transformer.vocab_size, TransformerConfig(layers=1, heads=2, head_dim=24,
                                                                           embed_dim=8, dropout=0.0)).eval()
    result = explain(wide, split, methods=("effective attention",))
    with torch.no_grad():
        trace = wide.trace(split.batch(result.indices))
    raw = trace.attentions[:, -1, :, 0, :].mean(1).double().numpy()
    short = (trace.lengths <= 24).numpy()
    assert short.any() and not short.all()
    for i in range(len(result)):
        same = np.allclose(result.scores["effective attention"][i], raw[i][words[i]], atol=1e-6)
        assert same == short[i]


def test_integrated_gradients_is_complete_and_matches_captums_layer_ig(split, lstm, transformer):
    batch = split.batch(np.arange(6))
    for model in (lstm, transformer):
        tokens = batch.tokens.to(device_of(model))  # the oracle's own calls run beside a GPU model too
        attr, delta = integrated_gradients(model, batch.tokens, steps=64)
        with torch.no_grad():
            probs = model(tokens).probs
            target = probs.argmax(-1)
            words = real_token_mask(tokens)
            zero = model.embedding(tokens).masked_fill(words.unsqueeze(-1), 0.0)
            handle = model.embedding.register_forward_hook(lambda *_: zero)
            try:
                base = model(tokens).probs
            finally:
                handle.remove()
        gap = probs.gather(1, target[:, None])[:, 0] - base.gather(1, target[:, None])[:, 0]
        np.testing.assert_allclose(attr.sum(-1).cpu().numpy(), gap.cpu().numpy(), atol=1e-4)  # completeness
        assert float(delta.max()) < 1e-4
        assert (attr[~words] == 0).all()
    # The quadrature written out, from the same zero baseline, agrees with our batched captum call ...
    tokens = batch.tokens.to(device_of(lstm))
    words = real_token_mask(tokens)
    target = lstm(tokens).probs.argmax(-1)
    embedded = lstm.embedding(tokens).detach()
    ours, _ = integrated_gradients(lstm, tokens, steps=32)
    np.testing.assert_allclose(ours.cpu().numpy(), _ig_from(lstm, tokens, embedded.masked_fill(words.unsqueeze(-1), 0.0),
                                                            target).masked_fill(~words, 0.0).cpu().numpy(), atol=1e-6)
    # ... and, from a <UNK>-word baseline (one captum's LayerIntegratedGradients can express as an input
    # sentence), with captum's LayerIntegratedGradients on the embedding layer.
    unk = tokens.masked_fill(words, data.UNK)
    lig = LayerIntegratedGradients(lambda x: lstm(x).probs, lstm.embedding)
    theirs = lig.attribute(tokens, baselines=unk, target=target, n_steps=32).sum(-1).detach()
    with torch.no_grad():
        unk_baseline = lstm.embedding(unk)
    np.testing.assert_allclose(_ig_from(lstm, tokens, unk_baseline, target).cpu().numpy(), theirs.cpu().numpy(), atol=1e-6)


def _ig_from(model, tokens, baseline, target, steps=32):
    """Integrated gradients from an arbitrary embedding baseline, by Gauss-Legendre quadrature written out."""
    nodes, weights = np.polynomial.legendre.leggauss(steps)
    alphas, weights = (nodes + 1) / 2, weights / 2
    embedded = model.embedding(tokens).detach()
    total = torch.zeros(tokens.shape, dtype=embedded.dtype, device=tokens.device)
    for a, w in zip(alphas, weights):
        e = (baseline + float(a) * (embedded - baseline)).requires_grad_(True)
        handle = model.embedding.register_forward_hook(lambda *_: e)
        try:
            with torch.enable_grad():
                p = model(tokens).probs.gather(1, target[:, None]).sum()
                (g,) = torch.autograd.grad(p, e)
        finally:
            handle.remove()
        total += float(w) * (g * (embedded - baseline)).sum(-1)
    return total


def test_scores_do_not_depend_on_chunk_size(split, transformer):
    a = explain(transformer, split, ig_steps=8, seed=3)
    b = explain(transformer, split, ig_steps=8, seed=3, chunk_size=5)
    for m in a.methods:
        for x, y in zip(a.scores[m], b.scores[m]):
            np.testing.assert_allclose(x, y, atol=1e-6)
    c = explain(transformer, split, methods="random", seed=4)
    assert not np.allclose(np.concatenate(a.scores["random"]), np.concatenate(c.scores["random"]))


def test_feeds_faithfulness(split, lstm):
    result = explain(lstm, split, methods=("attention", "random"), max_instances=10, seed=1)
    faith = faithfulness(lstm, split, result.by_position(), max_instances=10, seed=1)
    assert faith.measures == ("attention", "random")
    np.testing.assert_array_equal(faith.indices, result.indices)


def test_plausibility_against_rationale_recovery(tiny_dataset, lstm):
    split = tiny_dataset.test
    result = explain(lstm, split, methods=("attention", "gradient × input", "leave-one-out"), max_instances=40)
    ours = plausibility(result, split)
    theirs = rationale_recovery(importance(lstm, split, max_instances=40), split)
    for m, name in (("attention", "attention"), ("gradient × input", "gradient"), ("leave-one-out", "loo")):
        for c in ("precision@k", "average precision", "AUC"):
            assert ours.loc[m, c] == pytest.approx(theirs.loc[name, c], abs=1e-12)
    for c in ("precision@k", "average precision", "AUC"):
        assert ours.loc["random (expected)", c] == pytest.approx(theirs.loc["random", c], abs=1e-12)
    assert (ours["n"] == theirs.loc["attention", "n"]).all()
    for metric in ("precision@k", "average precision", "AUC"):  # per instance, the same means
        per = plausibility_by_instance(result, split, metric=metric)
        assert len(per) == ours["n"].iloc[0] and list(per.columns) == list(result.methods)
        assert per.mean().to_numpy() == pytest.approx(ours.loc[list(result.methods), metric].to_numpy(), abs=1e-12)
    with pytest.raises(ValueError, match="metric"):
        plausibility_by_instance(result, split, metric="F1")


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 1000))
def test_the_truth_is_perfectly_plausible(tiny_dataset, seed):
    split = tiny_dataset.test
    truth = [r.astype(float) for r in split.rationales]
    n = len(split)
    fake = ExplanationResult(
        probs=np.full((n, 2), 0.5), predicted=np.zeros(n, int), labels=np.asarray(split.labels),
        indices=np.arange(n), lengths=np.array([len(t) for t in truth]), methods=("truth",),
        scores={"truth": [t + 1e-3 * np.random.default_rng(seed).random(len(t)) * t for t in truth]},
        ig_delta=np.full(n, np.nan))
    table = plausibility(fake, split)
    assert table.loc["truth", "average precision"] == pytest.approx(1.0)
    assert table.loc["truth", "AUC"] == pytest.approx(1.0)
    assert table.loc["truth", "precision@k"] == pytest.approx(1.0)
    assert isinstance(table, pd.DataFrame) and table.index[-1] == "random (expected)"


def test_validation(split, lstm, transformer):
    with pytest.raises(ValueError, match="does not apply"):
        explain(lstm, split, methods=("flow",))
    with pytest.raises(ValueError, match="unknown method"):
        explain(transformer, split, methods=("saliency",))
    with pytest.raises(ValueError, match="repeat"):
        explain(transformer, split, methods=("random", "random"))
    with pytest.raises(ValueError, match="at least one"):
        explain(transformer, split, methods=())
    with pytest.raises(ValueError):
        explain(lstm, split, ig_steps=1)
    with pytest.raises(ValueError, match="AttentionClassifier"):
        explain(object(), split)
    with pytest.raises(ValueError, match="LongTensor"):
        integrated_gradients(lstm, torch.zeros(2, 3))
    result = explain(lstm, split, methods=("random",))
    with pytest.raises(ValueError, match="not in this result"):
        result.padded("attention")
    with pytest.raises(ValueError, match="ExplanationResult"):
        plausibility(object(), split)
    assert IG_STEPS >= 8


# --- The registry (issue 28 item 2): a new method is one entry ---------------------------------
from attnlib.explanations import REGISTRY, ChunkInputs, ExplanationMethod, register  # noqa: E402


def test_a_registered_method_runs_through_explain_and_counts_only_words(split, lstm, transformer):
    seen = []

    def position(inputs: ChunkInputs):
        seen.append(inputs.tokens.shape)
        return torch.arange(inputs.tokens.shape[1], dtype=torch.float64).expand_as(inputs.tokens) + 1.0

    layered = ExplanationMethod("test: position", score=position, normalise=False, needs_layers=True)
    try:
        register(ExplanationMethod("test: position", score=position, normalise=False))
        with pytest.raises(ValueError, match="registered already"):
            register(layered)
        register(layered, replace=True)
        assert methods_for(transformer)[-1] == "test: position" and "test: position" not in methods_for(lstm)
        with pytest.raises(ValueError, match="does not apply"):
            explain(lstm, split, methods=["test: position"])
        result = explain(transformer, split, methods=["attention", "test: position"], max_instances=6)
        assert seen
        for scores, n in zip(result.scores["test: position"], result.lengths):
            np.testing.assert_array_equal(scores, np.arange(2, n + 2))  # <SOS> is position 1: words from 2
        assert np.isnan(result.ig_delta).all()  # only integrated gradients records a delta
    finally:
        REGISTRY.pop("test: position", None)
    assert tuple(n for n, m in REGISTRY.items() if m.by_default) == METHODS


def test_the_registry_rejects_malformed_methods():
    with pytest.raises(ValueError, match="exactly one"):
        ExplanationMethod("x")
    with pytest.raises(ValueError, match="exactly one"):
        ExplanationMethod("x", score=lambda i: i, from_importance="loo")
    with pytest.raises(ValueError, match="callable"):
        ExplanationMethod("x", score=3)
    with pytest.raises(ValueError, match="name"):
        ExplanationMethod("", from_importance="loo")
    with pytest.raises(ValueError, match="ExplanationMethod"):
        register("attention")
    with pytest.raises(ValueError, match="registered already"):
        register(REGISTRY["attention"])


def test_the_trace_is_computed_once_per_chunk(split, transformer, monkeypatch):
    calls = []
    original = type(transformer).trace

    def counting(self, batch):
        calls.append(len(batch.tokens))
        return original(self, batch)

    monkeypatch.setattr(type(transformer), "trace", counting)
    explain(transformer, split, methods=["effective attention", "rollout", "flow"], max_instances=8, chunk_size=4)
    assert calls == [4, 4]


def test_rank_over_seeds_beats_only_what_the_seeds_bear_out():
    from attnlib.explanations import rank_columns_over_seeds, rank_over_seeds

    rng = np.random.default_rng(0)
    base = 0.5 + rng.normal(0, 0.1, (3, 80))
    scores = {"a": base + 0.3, "b": base.copy(), "c": base + 0.0005 * rng.normal(size=(3, 80))}
    ranked = rank_over_seeds(scores)
    assert ranked.loc["a", "rank"] == 1 and not ranked.loc["a", "tied"]
    assert ranked.loc["b", "rank"] == ranked.loc["c", "rank"] == 2 and ranked.loc["b", "tied"]  # within noise
    assert list(ranked.index)[0] == "a"
    # a above b in one seed of three, however far: no verdict, a tie
    one = base.copy()
    one[0] += 0.5
    assert rank_over_seeds({"a": one, "b": base})["rank"].tolist() == [1, 1]
    # a above b in one seed, below in another, each beyond noise: the seeds disagree, a tie
    split = base.copy()
    split[0] += 0.3
    split[1] -= 0.3
    disagree = rank_over_seeds({"a": split, "b": base})
    assert disagree["rank"].tolist() == [1, 1] and disagree["disagree"].all()
    # lower is better
    assert rank_over_seeds(scores, higher_is_better=False).index[-1] == "a"
    # one model: a 1-D array is one row
    assert rank_over_seeds({"a": base[0] + 0.3, "b": base[0]})["rank"].tolist() == [1, 2]
    with pytest.raises(ValueError, match="same seeds and instances"):
        rank_over_seeds({"a": base, "b": base[:2]})
    table = rank_columns_over_seeds({"x": scores, "y": {"a": base, "b": base + 0.3}}, {"x": True, "y": False})
    assert table.ranks.loc["a", "x"] == 1 and table.ranks.loc["b", "y"] == 2
    assert np.isnan(table.ranks.loc["c", "y"]) and table.cells().loc["c", "y"] == "n/a"
    assert table.means.loc["a", "x"] == pytest.approx((base + 0.3).mean())
    with pytest.raises(ValueError, match="direction"):
        rank_columns_over_seeds({"x": scores}, {})


def test_part_v_methods_are_registered_asked_for_by_name_and_transformer_only(split, lstm, transformer):
    from attnlib.explanations import PART_V_METHODS

    assert PART_V_METHODS == ("norm-based", "value zeroing", "attention relevance", "norm + residual + LN", "GlobEnc")
    assert not set(PART_V_METHODS) & set(methods_for(transformer))  # not in the default battery
    assert methods_for(transformer, every=True)[-len(PART_V_METHODS):] == PART_V_METHODS
    assert not set(PART_V_METHODS) & set(methods_for(lstm, every=True))  # no layers to zero, sum or roll out
    result = explain(transformer, split, methods="all", max_instances=6)
    assert result.methods == methods_for(transformer, every=True)
    for m in PART_V_METHODS:
        for scores, n in zip(result.scores[m], result.lengths):
            assert len(scores) == n and np.isfinite(scores).all() and (scores >= 0).all()
            assert scores.sum() == pytest.approx(1.0)  # shares of the words
    with pytest.raises(ValueError, match="every must be True or False"):
        methods_for(transformer, every="yes")
