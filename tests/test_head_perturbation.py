"""Chapter 12's counterfactuals inside a transformer: per-query permutation and the adversary at a head,
every head / layer / the whole model permuted, the last layer's [CLS]-only shortcut, and key edits."""
import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib import counterfactual as cf
from attnlib import data, metrics, viz, widgets
from attnlib import head_perturbation as hp
from attnlib.models import AttentionClassifier, Site, TransformerClassifier, TransformerConfig, interventions

CONFIG = TransformerConfig(layers=2, heads=2, head_dim=4, embed_dim=6, max_positions=40, dropout=0.0)
LN2 = float(np.log(2))


def _model(seed=0, scale=3.0):
    torch.manual_seed(seed)
    model = TransformerClassifier(30, CONFIG).eval()
    with torch.no_grad():  # larger weights: heads that matter
        for p in model.parameters():
            p.mul_(scale)
    return model


def _batch(lengths=(7, 4, 9, 6, 8, 5), seed=0):
    rng = np.random.default_rng(seed)
    ids = [np.concatenate([[data.SOS], rng.integers(4, 30, n - 2), [data.EOS]]) for n in lengths]
    return data.collate(ids, np.arange(len(lengths)) % 2)


# ----------------------------------------------------------------------------- the model
def test_cls_only_last_layer_gives_the_full_computation():
    """The last layer computes only the [CLS] row; forcing all rows (an identity edit there) gives the same output."""
    model, batch = _model(), _batch()
    fast = model(batch)
    full = model(batch, edits={Site(1, 0): lambda a, m: a})
    torch.testing.assert_close(fast.probs, full.probs, atol=1e-6, rtol=0)
    tr = model.trace(batch)
    torch.testing.assert_close(fast.attention, tr.attentions[:, -1, :, 0].mean(1), atol=1e-6, rtol=0)
    torch.testing.assert_close(fast.attention.sum(-1), torch.ones(len(batch)))


def test_decode_at_last_layer_matches_forward():
    model, batch = _model(), _batch()
    state = model.site_state(batch, Site(1, 1))
    torch.testing.assert_close(model.decode_at(state, state.attention), model(batch).probs, atol=1e-6, rtol=0)


def test_key_edits_identity_and_errors():
    model, batch = _model(), _batch()
    same = model(batch, key_edits={0: lambda k: k}).probs
    torch.testing.assert_close(same, model(batch).probs, atol=1e-6, rtol=0)
    moved = model(batch, key_edits={0: lambda k: -k}).probs
    assert not torch.allclose(moved, same)
    with pytest.raises(ValueError, match="outside"):
        model(batch, key_edits={2: lambda k: k})
    with pytest.raises(ValueError, match="shape"):
        model(batch, key_edits={0: lambda k: k[..., :3]})
    with pytest.raises(ValueError, match="function"):
        model(batch, key_edits={0: 3})


# ----------------------------------------------------------------------------- permutation at a head
@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(2, 12), min_size=1, max_size=5), st.integers(1, 6), st.integers(0, 2**31))
def test_query_row_sources_permute_each_row_among_the_real_keys(lengths, P, seed):
    T = max(lengths) + 1
    mask = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]
    src = cf.query_row_sources(mask, T, P, np.random.default_rng(seed))
    assert src.shape == (len(lengths), P, T, T)
    for b, n in enumerate(lengths):
        rows = src[b].reshape(-1, T)
        assert torch.equal(rows[:, n:], torch.arange(n, T).expand(len(rows), T - n))  # padding fixed
        assert torch.equal(rows[:, :n].sort(-1).values, torch.arange(n).expand(len(rows), n))  # a permutation


def test_query_rows_are_permuted_independently():
    mask = torch.ones(1, 12, dtype=torch.bool)
    src = cf.query_row_sources(mask, 12, 1, np.random.default_rng(0))[0, 0]
    assert len({tuple(r.tolist()) for r in src}) == 12


def test_permute_attention_at_a_head_matches_a_loop_over_permutations():
    """Oracle: each permutation decoded alone, through the model's forward with an edit, gives the same TVD."""
    model = _model()
    batch = _batch(lengths=(6, 6, 6, 6))  # one length: the run keeps the batch order
    site, P = Site(0, 1), 5
    r = cf.permute_attention(model, batch, site=site, n_permutations=P, seed=3, chunk_size=4)
    src = cf.query_row_sources(batch.tokens != data.PAD, 6, P, np.random.default_rng(3))
    with torch.no_grad():
        base = model(batch).probs
    for p in range(P):
        edit = lambda a, m, s=src[:, p]: interventions.permute_rows(a, s.unsqueeze(1)).squeeze(1)  # noqa: E731
        with torch.no_grad():
            probs = model(batch, edits={site: edit}).probs
        np.testing.assert_allclose(r.all_tvd[:, p], metrics.tvd(probs, base).numpy(), atol=1e-5)
        np.testing.assert_array_equal(r.all_predicted[:, p], probs.argmax(-1).numpy())
    assert r.permuted_accuracy == pytest.approx(float((r.all_predicted == r.labels[:, None]).mean()))


def test_permutation_groups_do_not_change_the_result():
    """A tiny budget splits the candidates into many groups; the TVDs stay the same."""
    model, batch = _model(), _batch()
    state = model.site_state(batch, Site(0, 0))
    big = cf._permutation_changes(model, state, 7, np.random.default_rng(1))
    small = cf._permutation_changes(model, state, 7, np.random.default_rng(1), budget=1)
    torch.testing.assert_close(big[0], small[0], atol=2e-5, rtol=0)
    assert torch.equal(big[2], small[2])


def test_keep_permutations_refuses_a_head():
    with pytest.raises(ValueError, match="per query"):
        cf.permute_attention(_model(), _batch(), site=Site(0, 0), n_permutations=2, keep_permutations=True)


def test_single_row_experiments_still_refuse_a_head():
    from attnlib import erasure

    with pytest.raises(ValueError, match="a row per query"):
        erasure.single_weight(_model(), _batch(), site=Site(0, 0))


# ----------------------------------------------------------------------------- adversary at a head
def test_adversary_at_a_head_gives_row_distributions_and_a_row_mean_jsd():
    model, batch = _model(), _batch()
    r = cf.adversarial_attention(model, batch, site=Site(0, 1), k=3, steps=15, lr=0.05, eps=0.05)
    N, T = batch.tokens.shape
    assert r.candidates.shape == (N, 3, T, T) and r.alpha.shape == (N, T, T)
    mask = (batch.tokens != data.PAD).numpy()  # the keys: [CLS] and [SEP] included
    for i in range(N):
        n = mask[i].sum()
        rows = r.candidates[i][:, :n]  # real query rows
        np.testing.assert_allclose(rows.sum(-1), 1.0, atol=1e-5)
        assert np.all(rows[..., n:] == 0)
        rows_t = torch.tensor(rows).double()
        expected = metrics.jsd(rows_t, torch.tensor(r.alpha[i, :n]).double()[None].expand_as(rows_t)).mean(-1)
        np.testing.assert_allclose(r.jsd[i], expected.numpy(), atol=1e-5)
    assert np.all((r.eps_max_jsd >= 0) & (r.eps_max_jsd <= LN2 + 1e-6))
    assert np.all(r.tvd[r.kept] <= 0.05)
    again = cf.adversarial_attention(model, batch, site=Site(0, 1), k=3, steps=15, lr=0.05, eps=0.05)
    np.testing.assert_allclose(again.eps_max_jsd, r.eps_max_jsd, atol=1e-6)


def test_adversarial_heads_frame():
    model, batch = _model(), _batch()
    frame = hp.adversarial_heads(model, batch, [Site(0, 0), Site(1, 1)], k=2, steps=5, eps=0.05)
    assert len(frame) == 2 * len(batch)
    assert set(frame.columns) >= {"layer", "head", "instance", "eps_max_jsd", "cls_jsd", "kept"}
    assert frame["cls_jsd"].between(0, LN2 + 1e-6).all()
    with pytest.raises(ValueError, match="outside the model"):
        hp.adversarial_heads(model, batch, [Site(2, 0)])
    with pytest.raises(ValueError, match="at least one"):
        hp.adversarial_heads(model, batch, [])


def test_adversarial_heads_are_searched_at_once_with_the_bits_of_one_thread(monkeypatch):
    """Two sites at once, each on one thread: the rows of each site's search alone on one thread,
    bit for bit, whatever the cores; the model's mode comes back."""
    import attnlib.train

    model, batch = _model(), _batch()
    sites = [Site(0, 0), Site(1, 1), Site(0, 1)]
    monkeypatch.setattr(attnlib.train, "training_slots", lambda: 2)
    model.train()
    frame = hp.adversarial_heads(model, batch, sites, k=2, steps=5, eps=0.05)
    assert model.training
    model.eval()
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for site in sites:
            alone = cf.adversarial_attention(model, batch, site=site, k=2, steps=5, eps=0.05)
            rows = frame[(frame["layer"] == site.layer) & (frame["head"] == site.head)]
            assert np.array_equal(rows.eps_max_jsd.to_numpy(), alone.eps_max_jsd)
            assert np.array_equal(rows.kept.to_numpy(), alone.kept.sum(1))
    finally:
        torch.set_num_threads(before)


# ----------------------------------------------------------------------------- every head, layer, model
def test_permute_heads_table_grid_and_a_silent_layer():
    """Oracle: with layer 0's output projection zeroed, permuting layer 0 (any head, or all) changes nothing."""
    model = _model()
    with torch.no_grad():
        model.layers[0].out.weight.zero_()
    batch = _batch()
    r = hp.permute_heads(model, batch, n_permutations=6, seed=1)
    t = r.table
    assert len(t) == 4 + 2 + 1
    silent = t[(t.layer == 0)]
    assert (silent.median_tvd == 0).all() and (silent.flipped == 0).all()
    assert (silent.accuracy == r.base_accuracy).all()
    assert t[t.scope == "all"].median_tvd.iloc[0] > 0
    grid = r.grid("median_tvd")
    assert list(grid.columns) == ["head 0", "head 1", "all heads"]
    assert list(grid.index) == ["layer 0", "layer 1", "all layers"]
    assert np.isnan(grid.loc["all layers", "head 0"])
    fig = viz.plot_head_grid({"accuracy": r.grid("accuracy"), "median TVD": grid})
    assert len(fig.axes) == 4


def test_permute_heads_keeps_each_scopes_per_sentence_changes_for_the_seeds_axis():
    model, batch = _model(), _batch()
    r = hp.permute_heads(model, batch, n_permutations=4, seed=2)
    assert len(r) == r.n_instances and np.array_equal(r.indices, np.arange(len(batch.labels)))
    for row in r.table.itertuples():
        d = r.change(row.scope, row.layer, row.head)
        assert d.shape == (r.n_instances,)
        assert d.mean() == pytest.approx(row.accuracy_change)
        assert d.std(ddof=1) / np.sqrt(len(d)) == pytest.approx(row.change_se)
    with pytest.raises(ValueError, match="no scope"):
        r.change("layer", 9)
    from attnlib import seeds as seeds_mod

    runs = seeds_mod.SeedResults((0, 1), (r, r))
    assert runs.stack(lambda x: x.change("all")).shape == (2, r.n_instances)


def test_permute_heads_is_seeded_and_checks_its_inputs():
    model, batch = _model(), _batch()
    a = hp.permute_heads(model, batch, n_permutations=4, seed=2, scopes=("head", "all"))
    b = hp.permute_heads(model, batch, n_permutations=4, seed=2, scopes=("head", "all"))
    pd.testing.assert_frame_equal(a.table, b.table)
    assert set(a.table.scope) == {"head", "all"}
    with pytest.raises(ValueError, match="scopes"):
        hp.permute_heads(model, batch, scopes=("neuron",))
    with pytest.raises(ValueError, match="transformer"):
        hp.permute_heads(AttentionClassifier(30), batch)
    with pytest.raises(ValueError, match="n_permutations"):
        hp.permute_heads(model, batch, n_permutations=0)


# ----------------------------------------------------------------------------- figures and the widget
def test_head_figure_and_explorer():
    model = _model()
    rng = np.random.default_rng(0)
    tokens = [[f"w{j}" for j in rng.integers(0, 20, n)] for n in (5, 7)]
    ids = [np.concatenate([[data.SOS], rng.integers(4, 30, len(t)), [data.EOS]]) for t in tokens]
    split = data.Split(name="test", texts=[" ".join(t) for t in tokens], tokens=tokens, ids=ids, labels=np.array([0, 1]))
    for edit in ("permute", "ablate"):
        fig = widgets.head_figure(model, split, 1, 1, 0, edit)
        assert len(fig.axes) == 4
    with pytest.raises(ValueError, match="edit"):
        widgets.head_figure(model, split, 0, 0, 0, "shuffle")
    with pytest.raises(ValueError, match="outside"):
        widgets.head_figure(model, split, 0, 2, 0)
    assert widgets.head_explorer(model, split, [0, 1]) is not None


def test_pruning_and_keys_figures():
    curve = pd.DataFrame({"fraction": [0, 0.5, 1.0], "accuracy": [0.8, 0.7, 0.5]})
    fig = viz.plot_pruning_curve({"small": curve}, reference={"Michel: BERT": 0.4})
    assert fig.axes
    band = curve.assign(min=curve.accuracy - 0.02, max=curve.accuracy + 0.01)
    with_ci = curve.assign(low=curve.accuracy - 0.03, high=curve.accuracy + 0.03)
    fig = viz.plot_pruning_curve({"importance": with_ci, "random orders": band})
    ax = fig.axes[0]
    assert len(ax.collections) >= 2  # the random orders' band and the interval's error bars
    styles = {line.get_label(): line.get_linestyle() for line in ax.lines}
    assert styles["importance"] != styles["random orders"]  # told apart by style as well as colour
    sweep = pd.DataFrame({"layer": [0, 0, 1, 1], "alpha": [0.1, 0.9, 0.1, 0.9], "jsd": [0.3, 0.01, 0.2, 0.02],
                          "accuracy": [0.6, 0.75, 0.7, 0.76]})
    assert viz.plot_adversarial_keys(sweep, reference={"poster": 0.835}).axes
