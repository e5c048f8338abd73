"""Code moved out of chapters 10 and 11: the single-weight figure, corpus statistics, the hidden-state store,
and the null-space and correlation tables."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from attnlib import data, token_identity, viz  # noqa: E402
from attnlib import identifiability as idf  # noqa: E402
from attnlib.erasure import SingleWeightResult  # noqa: E402


# ----------------------------------------------------------------------------- viz.plot_single_weight
def _single(n, seed):
    rng = np.random.default_rng(seed)
    z = np.zeros(n)
    return SingleWeightResult(
        probs=np.full((n, 2), 0.5), predicted=z.astype(int), labels=z.astype(int), indices=np.arange(n),
        lengths=np.full(n, 5), jsd_top=rng.random(n), jsd_random=rng.random(n), flip_top=z.astype(bool),
        flip_random=z.astype(bool), top_weight=0.5 + 0.5 * rng.random(n), random_weight=0.5 * rng.random(n),
        top_token=z.astype(int), random_token=z.astype(int), probs_top=np.full((n, 2), 0.5),
        probs_random=np.full((n, 2), 0.5),
    )


def test_plot_single_weight_draws_a_panel_per_model():
    results = {"lstm + tanh": _single(20, 0), "average + tanh": _single(30, 1)}
    fig = viz.plot_single_weight(results)
    try:
        assert [ax.get_title() for ax in fig.axes] == list(results)
        for ax, r in zip(fig.axes, results.values()):
            offsets = ax.collections[0].get_offsets()
            np.testing.assert_allclose(offsets[:, 0], r.top_weight - r.random_weight)
            np.testing.assert_allclose(offsets[:, 1], r.jsd_difference)
            assert ax.get_legend().get_texts()[0].get_text() == "no difference"
            np.testing.assert_array_equal(ax.lines[0].get_ydata(), 0.0)
        assert fig.axes[0].get_shared_y_axes().joined(fig.axes[0], fig.axes[1])
        assert viz.unreadable(fig) == []
    finally:
        plt.close(fig)


def test_plot_single_weight_with_one_model_and_none():
    fig = viz.plot_single_weight({"only": _single(5, 2)})
    assert len(fig.axes) == 1
    plt.close(fig)
    with pytest.raises(ValueError, match="at least one"):
        viz.plot_single_weight({})


# ----------------------------------------------------------------------------- punctuation_mask
@given(st.lists(st.text(alphabet=".,;:!?-()\"'", min_size=1, max_size=4), max_size=6))
def test_punctuation_only_tokens_are_punctuation(words):
    assert idf.punctuation_mask(words).tolist() == [True] * len(words)


@given(st.text(alphabet=".,!?", max_size=3), st.text(alphabet="abcXYZ019 ", min_size=1, max_size=3))
def test_a_token_with_anything_else_is_not(punct, other):
    mask = idf.punctuation_mask([punct + other, other + punct, ""])
    assert mask.dtype == torch.bool and mask.tolist() == [False, False, False]


def test_punctuation_mask_examples_and_bad_input():
    words = ["[CLS]", "...", "«", "'s", "##.", "—", "##s"]  # "#" is punctuation too (Unicode Po)
    assert idf.punctuation_mask(words).tolist() == [False, True, True, False, True, True, False]
    with pytest.raises(ValueError, match="sequence of token strings"):
        idf.punctuation_mask("abc")
    with pytest.raises(ValueError, match="strings"):
        idf.punctuation_mask(["a", 3])


# ----------------------------------------------------------------------------- corpus_statistics
V = 30
PUNCT = torch.zeros(V, dtype=torch.bool)
PUNCT[[5, 6]] = True


def _model():
    from attnlib.models import TransformerClassifier, TransformerConfig

    torch.manual_seed(0)
    return TransformerClassifier(V, TransformerConfig(layers=2, heads=2, head_dim=4, embed_dim=6, dropout=0.0)).eval()


def _batches():
    rng = np.random.default_rng(1)
    out = []
    for lengths, index in (((3, 9, 6), (4, 0, 2)), ((7, 5), (1, 3))):
        ids = [np.concatenate([[data.SOS], rng.integers(4, V, n - 2), [data.EOS]]) for n in lengths]
        out.append(data.collate(ids, np.zeros(len(lengths)), index=np.array(index)))
    return out


def test_corpus_statistics_is_trace_statistics_batch_by_batch():
    model, batches = _model(), _batches()
    frame, pooled = idf.corpus_statistics(model, batches, PUNCT, progress=False)
    assert pooled == {}
    expected = []
    with torch.no_grad():
        for b in batches:
            tr = model.trace(b)
            groups = idf.default_groups(tr.lengths.numpy(), tr.attentions.shape[-1])
            groups["punctuation"] = (PUNCT[b.tokens] & tr.key_mask).numpy()
            f = idf.trace_statistics(tr, groups)
            f["sentence"] = b.index.numpy()[f["sentence"]]
            expected.append(f)
    pd.testing.assert_frame_equal(frame, pd.concat(expected, ignore_index=True))
    assert sorted(frame["sentence"].unique()) == [0, 1, 2, 3, 4]
    # without punctuation: [CLS] and [SEP] only, the same numbers
    plain, _ = idf.corpus_statistics(model, _batches(), progress=False)
    assert "raw punctuation" not in plain
    pd.testing.assert_frame_equal(plain, frame.drop(columns=["raw punctuation", "effective punctuation"]))


def test_corpus_statistics_keeps_pooled_and_short_hidden_states():
    model, batches = _model(), _batches()
    store = token_identity.HiddenStateStore(8, 3, 8, max_tokens=7)
    frame, pooled = idf.corpus_statistics(model, batches, PUNCT, keep="test", store=store, progress=False)
    assert frame is not None and sorted(pooled) == [0, 1, 2, 3, 4]
    _, train_pooled = idf.corpus_statistics(model, batches[:1], keep="train", store=store, progress=False)
    assert _ is None and sorted(train_pooled) == [0, 2, 4]
    # kept: the sentences of at most 7 tokens, in batch order: (3, 6), (7, 5), then (3, 6) as training sentences
    assert store.count == 6
    assert store.lengths[:6].tolist() == [3, 6, 7, 5, 3, 6]
    assert store.is_train[:6].tolist() == [False] * 4 + [True] * 2
    with torch.no_grad():
        tr = model.trace(batches[0])
        np.testing.assert_allclose(pooled[2], tr.pooled()[2])
        expected = tr.hidden_states[2, :, :7].half()
    torch.testing.assert_close(store.states[1], expected)
    assert (store.states[0, :, 3:] == 0).all()  # nothing past a sentence's length


@pytest.mark.parametrize("kwargs, match", [
    (dict(keep="all"), "keep must be"),
    (dict(keep="test"), "HiddenStateStore"),
    (dict(punctuation=torch.zeros(V)), "bool tensor"),
    (dict(progress=1), "progress"),
])
def test_corpus_statistics_refuses_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        idf.corpus_statistics(_model(), _batches(), **kwargs)


def test_hidden_state_store_refuses_what_does_not_fit():
    model, batch = _model(), _batches()[0]
    with torch.no_grad():
        tr = model.trace(batch)
    store = token_identity.HiddenStateStore(1, 3, 8, max_tokens=9)
    with pytest.raises(ValueError, match="do not fit"):
        store.add(tr, [0, 1], train=False)
    with pytest.raises(ValueError, match="max_tokens"):
        token_identity.HiddenStateStore(2, 3, 8, max_tokens=4).add(tr, [1], train=False)
    with pytest.raises(ValueError, match=r"\(B, 4, T, 8\)"):
        token_identity.HiddenStateStore(2, 4, 8, max_tokens=9).add(tr, [0], train=False)
    with pytest.raises(ValueError, match="max_tokens"):
        token_identity.HiddenStateStore(2, 3, 8, max_tokens=0)
    store.add(tr, [], train=True)
    assert store.count == 0 and "0 of 1" in repr(store)


# ----------------------------------------------------------------------------- tables
def _frame(lengths, d_v, dims):
    return pd.DataFrame({"length": lengths, "d_v": d_v, "null_dim": dims})


def test_null_space_table():
    panels = {
        "on the line": _frame([10, 40, 50, 20], 32, [0, 8, 18, 0]),
        "off it": _frame([40, 40, 10], 32, [8, 7, 1]),
        "all short": _frame([3, 4], 8, [0, 0]),
    }
    table = idf.null_space_table(panels)
    assert list(table.index) == list(panels)
    assert table.loc["on the line"].tolist() == [4.0, 0.5, 1.0, 1.0, 18.0]
    assert table.loc["off it", "dim = d_s - d_v where d_s > d_v"] == 0.5
    assert table.loc["off it", "dim = 0 where d_s <= d_v"] == 0.0
    assert np.isnan(table.loc["all short", "dim = d_s - d_v where d_s > d_v"])
    with pytest.raises(ValueError, match="null_dim"):
        idf.null_space_table({"x": _frame([1], 2, [0]).drop(columns="null_dim")})


def test_correlation_by_length():
    a = pd.DataFrame({"length": [3, 5, 9, 10, 40], "correlation": [1.0, 0.8, 0.6, 0.4, 0.1]})
    b = pd.DataFrame({"length": [4, 12], "correlation": [1.0, 0.5]})
    table = idf.correlation_by_length({"a": a, "b": b}, [2, 9, 17])
    assert list(table.columns) == [(k, s) for k in "ab" for s in ("mean", "std", "size")]
    assert table[("a", "mean")].tolist() == pytest.approx([0.9, 0.5])  # 40 is past the last edge
    assert table[("a", "size")].tolist() == [2, 2] and table[("b", "size")].tolist() == [1, 1]
    assert str(table.index[0]) == "[2, 9)"
    with pytest.raises(ValueError, match="increasing"):
        idf.correlation_by_length({"a": a}, [9, 2])
