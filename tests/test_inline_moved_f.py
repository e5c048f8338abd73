"""Chapter 15's code moved out of the notebook: explanations.explain_and_score, negators_found,
yardstick_columns, yardstick_directions; faithfulness.fraction_to_flip, erasure_curves;
viz.plot_erasure_curves."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from attnlib import data, viz  # noqa: E402
from attnlib.data import Split  # noqa: E402
from attnlib.erasure import ranked_removal  # noqa: E402
from attnlib.explanations import (  # noqa: E402
    ExplanationResult,
    explain,
    explain_and_score,
    negators_found,
    plausibility_by_instance,
    yardstick_columns,
    yardstick_directions,
)
from attnlib.faithfulness import (  # noqa: E402
    METRICS,
    FaithfulnessResult,
    erasure_curves,
    faithfulness,
    faithfulness_summary,
    fraction_to_flip,
)


@pytest.fixture(scope="module")
def split(tiny_dataset):
    return tiny_dataset.test.subset(np.arange(12))


@pytest.fixture(scope="module")
def scored(lstm, split):
    return explain_and_score(lstm, split, max_instances=10, seed=3, ig_steps=8)


# ----------------------------------------------------------------------------- explain_and_score
def test_explain_and_score_is_explain_then_faithfulness_on_the_same_sentences(scored, lstm, split):
    expl, faith = scored
    assert isinstance(expl, ExplanationResult) and isinstance(faith, FaithfulnessResult)
    ref = explain(lstm, split, max_instances=10, seed=3, ig_steps=8)
    np.testing.assert_array_equal(expl.indices, ref.indices)
    np.testing.assert_array_equal(faith.indices, expl.indices)
    assert faith.measures == expl.methods
    for m in expl.methods:
        for a, b in zip(expl.scores[m], ref.scores[m]):
            np.testing.assert_array_equal(a, b)
    again = faithfulness(lstm, split, ref.by_position(), max_instances=10, seed=3)
    np.testing.assert_array_equal(faith.comprehensiveness, again.comprehensiveness)
    np.testing.assert_array_equal(faith.sufficiency, again.sufficiency)


# ----------------------------------------------------------------------------- negators_found
def _negators_oracle(expl, split):
    """The chapter's original loop, one method at a time."""
    T = int(expl.lengths.max())
    valid = np.arange(T) < expl.lengths[:, None]
    neg = np.zeros(valid.shape, dtype=bool)
    neg[valid] = np.isin(np.concatenate([split.tokens[i] for i in expl.indices]), data.NEGATORS)
    k = np.array([split.rationales[i].sum() for i in expl.indices])
    out = {}
    for m in expl.methods:
        s = np.where(valid, expl.padded(m), -np.inf)
        rank = np.argsort(np.argsort(-s, axis=1, kind="stable"), axis=1)
        out[m] = ((rank < k[:, None]) & neg).sum() / neg.sum()
    out["random (expected)"] = (neg.sum(1) * k / expl.lengths).sum() / neg.sum()
    return pd.Series(out)


def _negated_split(lengths, seed):
    rng = np.random.default_rng(seed)
    tokens, rationales = [], []
    for n in lengths:
        words = list(rng.choice(["good", "bad", "the", "plot", "not", "never"], size=n))
        words[0] = "not"  # every sentence has a negator
        tokens.append(words)
        r = rng.random(n) < 0.3
        r[min(1, n - 1)] = True
        rationales.append(r)
    return Split("test", [" ".join(t) for t in tokens], tokens,
                 [np.zeros(len(t) + 2, np.int64) for t in tokens], np.zeros(len(tokens), np.int64), rationales)


def _result(split, scores: dict):
    n = len(split)
    return ExplanationResult(
        probs=np.full((n, 2), 0.5), predicted=np.zeros(n, int), labels=np.zeros(n, int), indices=np.arange(n),
        lengths=np.array([len(t) for t in split.tokens]), methods=tuple(scores), scores=scores,
        ig_delta=np.full(n, np.nan))


@settings(max_examples=30, deadline=None)
@given(lengths=st.lists(st.integers(1, 9), min_size=1, max_size=6), seed=st.integers(0, 10_000),
       ties=st.booleans())
def test_negators_found_is_the_per_method_loop(lengths, seed, ties):
    split = _negated_split(lengths, seed)
    rng = np.random.default_rng(seed + 1)
    draw = (lambda n: rng.integers(0, 2, n).astype(float)) if ties else (lambda n: rng.random(n))
    scores = {m: [draw(n) for n in lengths] for m in ("attention", "leave-one-out", "random")}
    result = _result(split, scores)
    got, want = negators_found(result, split), _negators_oracle(result, split)
    pd.testing.assert_series_equal(got, want, check_exact=True)
    assert ((got >= 0) & (got <= 1)).all()


def test_negators_found_known_values_and_validation():
    tokens = [["not", "good", "film"], ["the", "never", "bad", "plot"]]
    rationales = [np.array([1, 1, 0], bool), np.array([0, 1, 1, 0], bool)]
    split = Split("test", [" ".join(t) for t in tokens], tokens, [np.zeros(len(t) + 2, np.int64) for t in tokens],
                  np.zeros(2, np.int64), rationales)
    result = _result(split, {
        "attention": [np.array([0.0, 1.0, 0.5]), np.array([0.9, 0.0, 1.0, 0.1])],  # misses both negators
        "leave-one-out": [np.array([1.0, 0.5, 0.0]), np.array([0.0, 1.0, 0.5, 0.1])],  # finds both
        "random": [np.array([0.0, 0.1, 0.9]), np.array([0.0, 1.0, 0.0, 0.0])],  # finds one
    })
    got = negators_found(result, split)
    assert got.to_dict() == {"attention": 0.0, "leave-one-out": 1.0, "random": 0.5,
                             "random (expected)": pytest.approx((2 / 3 + 2 / 4) / 2)}
    film = negators_found(result, split, negators=["film"])
    assert (film["attention"], film["leave-one-out"]) == (1.0, 0.0)
    with pytest.raises(ValueError, match="no sentence of the result has a negator"):
        negators_found(result, split, negators=["xyz"])
    with pytest.raises(ValueError, match="Split"):
        negators_found(result, split.rationales)
    bare = Split("test", split.texts, split.tokens, split.ids, split.labels)
    with pytest.raises(ValueError, match="no rationales"):
        negators_found(result, bare)


# ----------------------------------------------------------------------------- fraction_to_flip
def test_fraction_to_flip_counts_a_sentence_that_never_flips_as_1(lstm, split):
    flips = fraction_to_flip(lstm, split, rankings=("attention", "random"), max_instances=10, seed=3)
    removal = ranked_removal(lstm, split, rankings=("attention", "random"), max_instances=10, seed=3)
    assert list(flips) == ["attention", "random"]
    for r, name in enumerate(removal.rankings):
        values = flips[name]
        assert values.shape == (len(removal),)
        np.testing.assert_array_equal(values[removal.flipped[:, r]], removal.fraction_removed[removal.flipped[:, r], r])
        assert (values[~removal.flipped[:, r]] == 1.0).all()
        assert ((values > 0) & (values <= 1)).all()


# ----------------------------------------------------------------------------- yardsticks
def test_yardstick_columns_in_order_with_their_values(scored, split):
    expl, faith = scored
    flips = {"attention": np.ones(3), "random": np.zeros(3)}
    columns = yardstick_columns(expl, split, {"rt": faith, "synthetic": faith}, flips={"rt": flips})
    assert list(columns) == ["AP, synthetic", "comprehensiveness AOPC, rt", "sufficiency AOPC, rt",
                             "comprehensiveness AOPC, synthetic", "sufficiency AOPC, synthetic",
                             "fraction removed to flip, rt"]
    ap = plausibility_by_instance(expl, split)
    for m in expl.methods:
        pd.testing.assert_series_equal(columns["AP, synthetic"][m], ap[m])
    for j, m in enumerate(faith.measures):
        np.testing.assert_array_equal(columns["sufficiency AOPC, rt"][m], faith.sufficiency[:, j].mean(-1))
        np.testing.assert_array_equal(columns["comprehensiveness AOPC, synthetic"][m],
                                      faith.comprehensiveness[:, j].mean(-1))
    assert columns["fraction removed to flip, rt"] is flips
    empty = yardstick_columns(expl, split, {"rt": faith}, flips={"rt": {}}, task="syn")
    assert list(empty)[0] == "AP, syn" and empty["fraction removed to flip, rt"] == {}
    assert "fraction removed to flip, rt" not in yardstick_columns(expl, split, {"rt": faith})
    with pytest.raises(ValueError, match="FaithfulnessResult"):
        yardstick_columns(expl, split, {"rt": expl})
    with pytest.raises(ValueError, match="erased"):
        yardstick_columns(expl, split, [faith])


def test_yardstick_directions():
    names = ["AP, synthetic", "comprehensiveness AOPC, rt", "sufficiency AOPC, synthetic",
             "fraction removed to flip, rt"]
    assert yardstick_directions(names) == dict(zip(names, [True, True, False, False]))
    assert yardstick_directions(names) == {c: METRICS[m].higher_is_better for c, m in zip(
        names, ["average precision", "comprehensiveness", "sufficiency", "fraction removed"])}
    with pytest.raises(ValueError, match="F1"):
        yardstick_directions(["F1, rt"])


# ----------------------------------------------------------------------------- erasure curves
def test_erasure_curves_and_their_figure(scored):
    _, faith = scored
    curves = erasure_curves({"BiLSTM": faith, "Average": faith})
    assert list(curves) == ["BiLSTM", "Average"]
    pd.testing.assert_frame_equal(curves["BiLSTM"], faithfulness_summary(faith, by_fraction=True))
    with pytest.raises(ValueError, match="non-empty"):
        erasure_curves({})
    fig = viz.plot_erasure_curves(curves, title="rt: ERASER's curves")
    try:
        axes = np.array(fig.axes).reshape(2, 2)
        assert fig._suptitle.get_text() == "rt: ERASER's curves"
        assert [ax.get_title() for ax in axes[:, 0]] == ["BiLSTM: comprehensiveness", "BiLSTM: sufficiency"]
        assert axes[0, 0].get_ylabel() == METRICS["comprehensiveness"].label
        top = axes[0, 1]
        assert [line.get_label() for line in top.get_lines()] == list(faith.measures)
        j = faith.measures.index("attention")
        line = top.get_lines()[j]
        np.testing.assert_allclose(line.get_xdata(), 100 * np.asarray(faith.fractions))
        np.testing.assert_allclose(line.get_ydata(), faith.comprehensiveness[:, j].mean(0))
        assert line.get_color() == viz.method_style("attention")["color"]
        assert not viz.unreadable(fig)
    finally:
        plt.close(fig)
    with pytest.raises(ValueError, match="by_fraction"):
        viz.plot_erasure_curves({"BiLSTM": pd.DataFrame({"n": [1]})})
    plt.close("all")
    with pytest.raises(ValueError, match="at least one"):
        viz.plot_erasure_curves({})


# ----------------------------------------------------------------------------- by length (Chapter 15's figure)
def test_plausibility_by_length_is_the_per_method_groupby(scored, split):
    from attnlib.explanations import plausibility_by_length
    from attnlib.faithfulness import rationale_ranking

    expl = scored[0]
    bins, names = [0, 6, 9, 60], ["short", "middle", "long"]
    frame = plausibility_by_length(expl, split, bins, names)
    truth = [split.rationales[i] for i in expl.indices]
    band = pd.cut(expl.lengths, bins, labels=names)
    for m in expl.methods:
        expected = rationale_ranking(expl.scores[m], truth)["average precision"].groupby(band, observed=True).mean()
        np.testing.assert_allclose(frame[m].to_numpy(), expected.to_numpy())
        assert list(frame.index) == [str(b) for b in expected.index]
    assert frame.index.name == "length (words)"
    with pytest.raises(ValueError, match="metric"):
        plausibility_by_length(expl, split, bins, metric="accuracy")


def test_plot_by_length_draws_a_panel_per_model_and_a_line_per_method(scored, split):
    import matplotlib.pyplot as plt

    from attnlib import viz
    from attnlib.explanations import plausibility_by_length

    frame = plausibility_by_length(scored[0], split, [0, 6, 9, 60], ["a", "b", "c"])
    fig = viz.plot_by_length({"one": frame, "two": frame}, ylabel="AP", title="t")
    try:
        axes = [ax for ax in fig.axes if ax.get_title()]
        assert [ax.get_title() for ax in axes] == ["one", "two"]
        assert len(axes[0].get_lines()) == len(frame.columns)
        assert fig.get_size_inches()[0] <= viz.COLUMN_INCHES + 1e-6
    finally:
        plt.close(fig)
    with pytest.raises(ValueError, match="at least one"):
        viz.plot_by_length({}, ylabel="AP")


def test_yardstick_columns_over_seeds_stack_each_seeds_columns(scored, split):
    from attnlib.explanations import yardstick_columns_over_seeds

    expl, faith = scored
    flips = {"attention": np.ones(len(expl)), "random": np.zeros(len(expl))}
    stacked = yardstick_columns_over_seeds([expl, expl], split, {"rt": [faith, faith]}, flips={"rt": [flips, flips]})
    one = yardstick_columns(expl, split, {"rt": faith}, flips={"rt": flips})
    assert list(stacked) == list(one)
    for column in one:
        for m, values in one[column].items():
            assert stacked[column][m].shape == (2, len(np.asarray(values)))
            np.testing.assert_array_equal(stacked[column][m][1], np.asarray(values, dtype=float))
    none = yardstick_columns_over_seeds([expl], split, {"rt": [faith]}, flips={"rt": []})
    assert none["fraction removed to flip, rt"] == {}
    with pytest.raises(ValueError, match="2 seeds"):
        yardstick_columns_over_seeds([expl, expl], split, {"rt": [faith]})
    with pytest.raises(ValueError, match="one ExplanationResult per seed"):
        yardstick_columns_over_seeds([], split, {"rt": []})


def test_train_seed_sets_each_gives_each_recipe_its_own_seeds(tiny_dataset, monkeypatch):
    from attnlib import seeds, train
    from attnlib.explanations import train_seed_sets_each

    calls = {}

    def fake(jobs, workers=None, progress=True):
        calls.update(jobs)
        return {key: f"model {key}" for key in jobs}

    monkeypatch.setattr(train, "train_models", fake)
    sets = train_seed_sets_each({"a": dict(dataset=tiny_dataset, encoder="lstm"),
                                 "b": dict(dataset=tiny_dataset, encoder="average")},
                                {"a": (0, 1, 2), "b": (0,)}, progress=False)
    assert sorted(calls) == [("a", 0), ("a", 1), ("a", 2), ("b", 0)]  # one pool
    assert calls[("a", 2)]["seed"] == 2 and calls[("b", 0)]["encoder"] == "average"
    assert isinstance(sets["a"], seeds.SeedSet) and sets["a"].seeds == (0, 1, 2) and len(sets["b"]) == 1
    assert sets["a"].trained[1] == "model ('a', 1)"
    with pytest.raises(ValueError, match="no seeds for"):
        train_seed_sets_each({"a": dict(dataset=tiny_dataset)}, {})
    with pytest.raises(ValueError, match="names a seed"):
        train_seed_sets_each({"a": dict(dataset=tiny_dataset, seed=1)}, {"a": (0,)})
