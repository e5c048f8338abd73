"""Head masking, importance and pruning (Michel et al. 2019), checked against independent oracles."""
import copy

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest

from attnlib import data
from attnlib.head_importance import (gate_gradients, head_ablation, head_importance, mask_heads, prunable,
                                     prune_by_importance, prune_randomly)
from attnlib.models import Site, TransformerClassifier, TransformerConfig
from attnlib.models.heads import RowEdit, rowwise

CONFIG = TransformerConfig(layers=2, heads=2, head_dim=4, embed_dim=6, max_positions=40, dropout=0.0)
VOCAB = 30


def _model(seed=0, config=CONFIG):
    torch.manual_seed(seed)
    return TransformerClassifier(VOCAB, config).eval()


def _ids(lengths, seed=0):
    rng = np.random.default_rng(seed)
    return [np.concatenate([[data.SOS], rng.integers(4, VOCAB, n - 2), [data.EOS]]) for n in lengths]


def _batch(lengths=(7, 4, 9, 5, 6, 8), seed=0):
    return data.collate(_ids(lengths, seed), np.arange(len(lengths)) % 2)


def _split(n=12, seed=1):
    rng = np.random.default_rng(seed)
    ids = _ids(rng.integers(3, 10, n), seed)
    tokens = [[f"w{t}" for t in row[1:-1]] for row in ids]
    return data.Split("test", texts=[" ".join(t) for t in tokens], tokens=tokens, ids=ids,
                      labels=rng.integers(0, 2, n))


def _loss(model, batch, edits=None):
    """Summed cross-entropy against the gold labels, from the output probabilities (a second path)."""
    probs = model(batch, edits=edits).probs
    return -torch.log(probs.gather(-1, batch.labels[:, None])).sum()


# ----------------------------------------------------------------------------- masking
@pytest.mark.parametrize("sites", [[Site(0, 1)], [Site(1, 0)], [Site(0, 0), Site(1, 1)]])
def test_masking_equals_zeroing_the_heads_slice_of_the_output_projection(sites):
    model, batch = _model(), _batch()
    oracle = copy.deepcopy(model)
    dv = CONFIG.head_dim
    with torch.no_grad():
        for s in sites:  # W^O's input columns of the head; the bias of `out` is shared and stays
            oracle.layers[s.layer].out.weight[:, s.head * dv:(s.head + 1) * dv] = 0
    masked = model(batch, edits=mask_heads(sites, model=model)).probs
    torch.testing.assert_close(masked, oracle(batch).probs, atol=1e-6, rtol=0)
    assert float((masked - model(batch).probs).detach().abs().max()) > 1e-5  # the mask does something


def test_mask_heads_takes_one_site_and_checks_sites():
    edits = mask_heads(Site(1, 1))
    assert list(edits) == [Site(1, 1)]
    rows = torch.rand(2, 3, 3)
    assert torch.equal(edits[Site(1, 1)](rows, torch.ones(2, 3, dtype=torch.bool)), torch.zeros(2, 3, 3))
    with pytest.raises(ValueError, match=r"2 layers x 2 heads"):
        mask_heads([Site(0, 2)], model=_model())
    with pytest.raises(ValueError, match=r"2 layers x 2 heads"):
        mask_heads([Site(2, 0)], model=_model())
    with pytest.raises(ValueError, match="Site"):
        mask_heads([(0, 1)])
    with pytest.raises(ValueError, match="outside the model"):  # the model itself refuses too
        _model()(_batch(), edits=mask_heads([Site(3, 0)]))


# ----------------------------------------------------------------------------- gate gradients
def test_gate_gradient_equals_finite_differences():
    model, batch = _model().double(), _batch()
    grads = gate_gradients(model, batch)
    assert grads.shape == (len(batch), 2, 2)
    eps = 1e-6
    for layer, head in [(0, 0), (0, 1), (1, 0), (1, 1)]:
        for b in (0, 2):
            def loss_at(value):
                gates = torch.ones(len(batch), dtype=torch.float64)
                gates[b] = value
                edit = {Site(layer, head): lambda a, m: a * gates[:, None, None]}
                with torch.no_grad():
                    return float(_loss(model, batch, edit))
            numeric = (loss_at(1 + eps) - loss_at(1 - eps)) / (2 * eps)
            assert grads[b, layer, head] == pytest.approx(numeric, rel=1e-5, abs=1e-8)


def test_gate_gradient_equals_attention_times_its_gradient():
    """I_h's other form: sum over the head's rows of A * dL/dA, with dL/dA from autograd through given rows."""
    model, batch = _model(), _batch()
    grads = gate_gradients(model, batch)
    for site in model.sites:
        seen = []
        model(batch, edits={site: lambda a, m: seen.append(a.detach()) or a})
        rows = seen[0].clone().requires_grad_()
        (d_rows,) = torch.autograd.grad(_loss(model, batch, {site: lambda a, m: rows}), rows)
        expected = (rows.detach() * d_rows).sum((-1, -2)).numpy()
        np.testing.assert_allclose(grads[:, site.layer, site.head], expected, rtol=1e-4, atol=1e-6)


def test_importance_is_the_mean_absolute_gradient_normalised_per_layer():
    model, split = _model(), _split()
    raw = head_importance(model, split, normalise=False, batch_size=5)
    np.testing.assert_allclose(raw, np.abs(gate_gradients(model, split, batch_size=5)).mean(0), rtol=1e-12)
    scores = head_importance(model, split, batch_size=5)
    assert scores.shape == (2, 2) and scores.dtype == np.float64
    np.testing.assert_allclose(np.linalg.norm(scores, axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(scores, raw / np.linalg.norm(raw, axis=1, keepdims=True), rtol=1e-12)
    # batching does not change the scores (per-instance gates), and a run gives them twice
    np.testing.assert_allclose(head_importance(model, split, batch_size=12), scores, rtol=1e-5)
    assert np.array_equal(head_importance(model, split, batch_size=5), scores)


def test_importance_leaves_the_parameters_and_the_mode_alone():
    config = TransformerConfig(layers=2, heads=2, head_dim=4, embed_dim=6, max_positions=40, dropout=0.5)
    model, batch = _model(config=config), _batch()
    model.train()
    first = head_importance(model, [batch])
    assert model.training  # restored
    assert all(p.grad is None for p in model.parameters())
    assert np.array_equal(head_importance(model, [batch]), first)  # eval mode inside: no dropout
    with torch.no_grad():  # works inside a caller's no_grad block
        assert np.array_equal(head_importance(model, [batch]), first)


# ----------------------------------------------------------------------------- ablation and pruning
def test_head_ablation_matches_direct_masking_and_an_exact_mcnemar_test():
    model, split = _model(), _split()
    table = head_ablation(model, split, batch_size=5)
    assert list(table[["layer", "head"]].itertuples(index=False, name=None)) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    batch = split.batch(np.arange(len(split)))
    labels = batch.labels.numpy()
    with torch.no_grad():
        base = model(batch).probs.argmax(-1).numpy() == labels
        for row in table.itertuples():
            masked = model(batch, edits=mask_heads([row.site])).probs.argmax(-1).numpy() == labels
            assert row.base_accuracy == pytest.approx(base.mean())
            assert row.accuracy == pytest.approx(masked.mean())
            assert row.change == pytest.approx(masked.mean() - base.mean())
            b, c = int((base & ~masked).sum()), int((~base & masked).sum())
            assert (row.lost, row.gained, row.n) == (b, c, len(split))
            p = 1.0 if b + c == 0 else binomtest(c, b + c).pvalue
            assert row.p_value == pytest.approx(p)
            assert row.significant == (p < 0.05)
    everything = head_ablation(model, split, alpha=0.999999)
    assert everything["significant"].tolist() == (everything["p_value"] < 0.999999).tolist()


def test_prune_order_ties_and_accuracy():
    model, split = _model(), _split()
    importance = np.array([[0.5, 0.1], [0.5, 0.9]])  # ties between Site(0, 0) and Site(1, 0): site order
    table = prune_by_importance(model, split, importance, batch_size=5)
    assert table["n_pruned"].tolist() == [0, 1, 2, 3, 4]
    assert table["fraction"].tolist() == [0, 0.25, 0.5, 0.75, 1.0]
    order = [Site(0, 1), Site(0, 0), Site(1, 0), Site(1, 1)]
    assert [list(p) for p in table["pruned"]] == [order[:k] for k in range(5)]
    batch = split.batch(np.arange(len(split)))
    with torch.no_grad():
        for row in table.itertuples():
            edits = mask_heads(row.pruned) if row.pruned else None
            expected = (model(batch, edits=edits).probs.argmax(-1) == batch.labels).double().mean()
            assert row.accuracy == pytest.approx(float(expected))
    assert table["accuracy"].iloc[0] == pytest.approx(head_ablation(model, split)["base_accuracy"].iloc[0])
    part = prune_by_importance(model, split, importance, fractions=[0.0, 0.3, 0.5, 1.0])
    assert part["n_pruned"].tolist() == [0, 1, 2, 4]
    assert part["accuracy"].tolist() == table["accuracy"].iloc[[0, 1, 2, 4]].tolist()
    for row in table.itertuples():  # the per-sentence outcomes behind each accuracy, and its interval
        assert row.correct.mean() == pytest.approx(row.accuracy) and row.low <= row.accuracy <= row.high


def test_random_orders_give_a_band_and_are_seeded():
    model, split = _model(), _split()
    band = prune_randomly(model, split, orders=3, seed=4)
    assert len(band.attrs["orders"]) == 3 and band["n_pruned"].tolist() == [0, 1, 2, 3, 4]
    assert (band["min"] <= band["accuracy"] + 1e-12).all() and (band["accuracy"] <= band["max"] + 1e-12).all()
    assert band["min"].iloc[0] == band["max"].iloc[0]  # nothing pruned: one accuracy
    again = prune_randomly(model, split, orders=3, seed=4)
    assert again["accuracy"].tolist() == band["accuracy"].tolist()
    with pytest.raises(ValueError, match="orders"):
        prune_randomly(model, split, orders=0)


def test_random_orders_share_the_levels_they_have_in_common(monkeypatch):
    """Every order's curve is prune_by_importance in that order, bit for bit; the sets of heads that
    the orders share (none pruned, all pruned) run once, not once per order."""
    from attnlib.experiments import head_importance as module

    model, split = _model(), _split()
    sets = []
    real = module._correct
    monkeypatch.setattr(module, "_correct", lambda m, b, masks, n: sets.extend(masks) or real(m, b, masks, n))
    band = prune_randomly(model, split, orders=3, seed=4)
    distinct = {frozenset(p) for curve in band.attrs["orders"] for p in curve["pruned"]}
    assert len(sets) == len(distinct) <= 3 * 5 - 2 * 2  # 3 orders x 5 levels; levels 0 and 4 once each
    assert set(sets) == distinct
    for r, curve in enumerate(band.attrs["orders"]):
        alone = prune_by_importance(model, split, np.random.default_rng([4, r]).random((2, 2)))
        assert curve["accuracy"].tolist() == alone["accuracy"].tolist()
        assert all((a == b).all() for a, b in zip(curve["correct"], alone["correct"]))


SITES_3x3 = [Site(layer, head) for layer in range(3) for head in range(3)]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sets(st.sampled_from(SITES_3x3)), min_size=1, max_size=6), st.integers(0, 3))
def test_masked_probabilities_equal_forward_with_the_masks_bit_for_bit(masks, seed):
    model = _model(seed, TransformerConfig(layers=3, heads=3, head_dim=4, embed_dim=6, max_positions=40))
    batch = _batch(seed=seed)
    with torch.no_grad():
        shared = model.masked_probabilities(batch, masks)
        assert shared.shape == (len(masks), len(batch), 2)
        for mask, probs in zip(masks, shared):
            assert torch.equal(probs, model(batch, edits=mask_heads(mask) if mask else None).probs)


def test_masked_probabilities_run_each_layer_once_per_distinct_set_masked_up_to_it():
    model, batch = _model(config=TransformerConfig(layers=3, heads=3, head_dim=4, embed_dim=6)), _batch()
    attends, finishes = [0, 0, 0], [0, 0, 0]
    for index, layer in enumerate(model.layers):  # norm1 opens attend, norm2 runs in finish
        layer.norm1.register_forward_hook(lambda *a, index=index: attends.__setitem__(index, attends[index] + 1))
        layer.norm2.register_forward_hook(lambda *a, index=index: finishes.__setitem__(index, finishes[index] + 1))
    masks = [(), [Site(2, 1)], [Site(1, 0)], [Site(1, 0), Site(2, 2)], [Site(0, 1)], [Site(0, 1), Site(2, 1)]]
    with torch.no_grad():
        model.masked_probabilities(batch, masks)
    # the rest of layer l runs per distinct set masked in layers 0..l: layer 0: {} and {(0,1)};
    # layer 1: those and {(1,0)}; layer 2: every mask. Its attention per distinct set below l.
    assert finishes == [2, 3, 6] and attends == [1, 2, 3]
    with torch.no_grad():
        for mask in masks:
            model(batch, edits=mask_heads(mask) if mask else None)
    assert finishes == [2 + 6, 3 + 6, 6 + 6] and attends == [1 + 6, 2 + 6, 3 + 6]  # forward: every layer per mask


def test_masked_probabilities_check_their_input():
    model, batch = _model(), _batch()
    with pytest.raises(ValueError, match="masks is empty"):
        model.masked_probabilities(batch, [])
    with pytest.raises(ValueError, match=r"2 layers x 2 heads"):
        model.masked_probabilities(batch, [[Site(2, 0)]])
    with pytest.raises(ValueError, match="list of sets of Sites"):
        model.masked_probabilities(batch, Site(0, 0))
    with pytest.raises(ValueError, match="Site"):
        model.masked_probabilities(batch, [[(0, 1)]])
    dropping = TransformerClassifier(VOCAB, TransformerConfig(layers=2, heads=2, head_dim=4, embed_dim=6)).train()
    with pytest.raises(ValueError, match="eval mode"):
        dropping.masked_probabilities(batch, [()])


def test_models_without_shared_masking_give_the_same_tables(monkeypatch):
    """A model without masked_probabilities (e.g. the pretrained family) runs each mask as a forward
    pass: the same frames, bit for bit."""
    model, split = _model(), _split()
    importance = np.array([[0.3, 0.1], [0.5, 0.9]])
    shared = [head_ablation(model, split, batch_size=5), prune_by_importance(model, split, importance),
              prune_randomly(model, split, orders=3, seed=2)]
    monkeypatch.delattr(TransformerClassifier, "masked_probabilities")
    assert not hasattr(model, "masked_probabilities")
    alone = [head_ablation(model, split, batch_size=5), prune_by_importance(model, split, importance),
             prune_randomly(model, split, orders=3, seed=2)]
    for a, b in zip(shared, alone):
        columns = [c for c in a.columns if c not in ("correct", "pruned", "site")]
        assert a[columns].equals(b[columns])
    for a, b in zip(shared[1]["correct"], alone[1]["correct"]):
        assert np.array_equal(a, b)
    model.masked_probabilities = None  # the protocol's "None or absent"
    assert head_ablation(model, split, batch_size=5).equals(alone[0])


def test_the_mask_is_a_row_edit_so_the_last_layer_still_computes_only_the_cls_row():
    model, batch = _model(), _batch()
    last = Site(CONFIG.layers - 1, 1)
    rows = []
    model.layers[-1].ffn.register_forward_hook(lambda module, args, out: rows.append(out.shape[1]))
    with torch.no_grad():
        masked = model(batch, edits=mask_heads(last)).probs
        whole = model(batch, edits={last: lambda a, m: a * 0}).probs  # a plain function sees all rows
    assert rows == [1, batch.tokens.shape[1]]
    torch.testing.assert_close(masked, whole, atol=1e-6, rtol=0)  # the same output, up to rounding
    assert isinstance(mask_heads(last)[last], RowEdit) and rowwise(mask_heads(last)) and rowwise(None)
    assert not rowwise({0: lambda a, m: a})
    with pytest.raises(ValueError, match="RowEdit needs a function"):
        RowEdit(3, "three")


def test_prunable_stops_at_a_loss_beyond_noise_not_at_a_dip_of_a_few_sentences():
    import pandas as pd

    rng = np.random.default_rng(0)
    base = rng.random(800) < 0.77
    dip = base.copy()  # pruning moves predictions both ways: 30 lost, 20 gained, net 1.25 points: noise
    dip[np.flatnonzero(base)[:30]] = False
    dip[np.flatnonzero(~base)[:20]] = True
    loss = base.copy()  # 80 lost, 5 gained: a real loss
    loss[np.flatnonzero(base)[:80]] = False
    loss[np.flatnonzero(~base)[:5]] = True
    curve = pd.DataFrame({"fraction": [0.0, 0.25, 0.5, 0.75], "accuracy": [c.mean() for c in (base, dip, base, loss)],
                          "correct": [base, dip, base, loss]})
    assert prunable(curve) == 0.5
    assert prunable(curve.iloc[:3]) == 0.5 and prunable(curve.iloc[:1]) == 0.0
    with pytest.raises(ValueError, match="prune_by_importance"):
        prunable(curve.drop(columns="correct"))


def test_prune_takes_head_importance_scores():
    model, split = _model(), _split()
    scores = head_importance(model, split)
    table = prune_by_importance(model, split, torch.as_tensor(scores), fractions=[0.5])
    flat = [scores[s.layer, s.head] for s in table["pruned"].iloc[0]]
    rest = [scores[s.layer, s.head] for s in model.sites if s not in table["pruned"].iloc[0]]
    assert max(flat) <= min(rest)


# ----------------------------------------------------------------------------- errors
def test_errors():
    model, split = _model(), _split()
    with pytest.raises(ValueError, match=r"shape \(2, 2\)"):
        prune_by_importance(model, split, np.ones((2, 3)))
    with pytest.raises(ValueError, match="finite"):
        prune_by_importance(model, split, np.array([[1.0, np.nan], [1.0, 1.0]]))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        prune_by_importance(model, split, np.ones((2, 2)), fractions=[1.5])
    empty = data.Split("empty", texts=[], tokens=[], ids=[], labels=[])
    for fn in (head_importance, head_ablation, gate_gradients):
        with pytest.raises(ValueError, match="empty"):
            fn(model, empty)
        with pytest.raises(ValueError, match="empty"):
            fn(model, [])
    with pytest.raises(ValueError, match="empty"):
        prune_by_importance(model, [], np.ones((2, 2)))
    with pytest.raises(ValueError, match="split must be"):
        head_importance(model, "not data")
    with pytest.raises(ValueError, match="labels"):
        head_importance(model, [object()])
    with pytest.raises(ValueError, match="edits= support"):
        head_importance(torch.nn.Linear(2, 2), split)
    with pytest.raises(ValueError, match="alpha"):
        head_ablation(model, split, alpha=1.0)
    with pytest.raises(ValueError, match="normalise"):
        head_importance(model, split, normalise="yes")
    with pytest.raises(ValueError, match="batch_size"):
        head_importance(model, split, batch_size=0)
    bad = _batch()
    bad.labels[0] = 5
    with pytest.raises(ValueError, match=r"labels must lie in 0\.\.1"):
        head_ablation(model, [bad])


# ----------------------------------------------------------------------------- the pretrained family
WORDS = ["good", "bad", "movie", "film", "the", "a", "is", "was", "very", "plot", "boring", "fun", "and", "not"]
SENTENCES = ["the movie is good", "a very boring plot", "fun", "the film was not good and the plot was bad",
             "a good film", "not fun"]


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    """A tiny random BERT (2 layers x 2 heads, d_model 16) behind PretrainedClassifier (as in test_pretrained.py)."""
    pytest.importorskip("transformers")
    from transformers import BertConfig, BertModel, BertTokenizer

    from attnlib.models import PretrainedClassifier

    path = tmp_path_factory.mktemp("tiny-bert")
    (path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    BertTokenizer(vocab=str(path / "vocab.txt")).save_pretrained(path)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=5 + len(WORDS), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=24, initializer_range=0.2,
                        attn_implementation="eager")
    BertModel(config).save_pretrained(path)
    model = PretrainedClassifier(path)
    torch.manual_seed(1)
    torch.nn.init.normal_(model.decoder.weight, std=1.0)
    return model.eval()


def test_the_pretrained_family_runs_through_the_same_code(tiny_bert):
    model, labels = tiny_bert, [1, 0, 1, 0, 1, 0]
    scores = head_importance(model, model.batches(SENTENCES, labels, batch_size=4))  # a generator of batches
    assert scores.shape == (2, 2)
    np.testing.assert_allclose(np.linalg.norm(scores, axis=1), 1.0, rtol=1e-12)
    assert all(p.grad is None for p in model.parameters())
    batch = model.encode_texts(SENTENCES, labels)
    grads = gate_gradients(model, batch)
    site, b, eps = Site(1, 0), 0, 1e-3
    gates = torch.ones(len(batch))

    def loss_at(value):
        gates[b] = value
        with torch.no_grad():
            return float(_loss(model, batch, {site: lambda a, m: a * gates[:, None, None].to(a.dtype)}))
    numeric = (loss_at(1 + eps) - loss_at(1 - eps)) / (2 * eps)
    assert grads[b, site.layer, site.head] == pytest.approx(numeric, rel=1e-2, abs=1e-4)
    table = head_ablation(model, list(model.batches(SENTENCES, labels, batch_size=4)))
    assert len(table) == 4 and table["n"].eq(len(SENTENCES)).all()
    pruned = prune_by_importance(model, [batch], scores)
    assert pruned["n_pruned"].tolist() == [0, 1, 2, 3, 4]
    assert pruned["accuracy"].iloc[0] == pytest.approx(table["base_accuracy"].iloc[0])
    with pytest.raises(ValueError, match=r"2 layers x 2 heads"):
        mask_heads([Site(0, 2)], model=model)
