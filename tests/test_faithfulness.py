"""attnlib.faithfulness: ERASER's comprehensiveness and sufficiency against a per-instance loop, and rationale metrics."""
import math

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import attnlib
from attnlib import data
from attnlib.faithfulness import (
    FRACTIONS,
    METRICS,
    FaithfulnessResult,
    aopc,
    erasure_metrics,
    faithfulness,
    faithfulness_summary,
    probability_drop,
    rationale_mask,
    rationale_ranking,
    rationale_recovery,
    top_k_count,
)
from attnlib.importance import ImportanceResult, importance
from attnlib.models import TransformerClassifier, TransformerConfig, device_of


@pytest.fixture(scope="module")
def split(tiny_dataset):
    return tiny_dataset.test.subset(np.arange(12))


def random_scores(split, seed):
    rng = np.random.default_rng(seed)
    return [np.round(rng.random(len(ids) - 2), 1) for ids in split.ids]  # rounding makes ties


def oracle(model, split, scores, fractions):
    """Straightforward per-instance loop: one forward per instance, fraction and kept part.

    Returns (comprehensiveness, sufficiency), each (N, F), and k (N, F).
    """
    comp, suff, ks = [], [], []
    with torch.no_grad():
        for ids, s in zip(split.ids, scores):
            ids = np.asarray(ids)
            words = ids[1:-1]
            n = len(words)
            p = model(torch.as_tensor(ids, device=device_of(model))[None]).probs[0].double().cpu().numpy()
            j = int(p.argmax())
            row_c, row_s, row_k = [], [], []
            for f in fractions:
                k = min(n, max(1, math.ceil(round(f * n, 9))))
                top = set(sorted(range(n), key=lambda t: (-s[t], t))[:k])
                rest = [w for t, w in enumerate(words) if t not in top] or [data.UNK]
                only = [w for t, w in enumerate(words) if t in top]
                for kept, out in ((rest, row_c), (only, row_s)):
                    x = torch.as_tensor([data.SOS, *kept, data.EOS], device=device_of(model))[None]
                    out.append(p[j] - model(x).probs[0, j].item())
                row_k.append(k)
            comp.append(row_c)
            suff.append(row_s)
            ks.append(row_k)
    return np.array(comp), np.array(suff), np.array(ks)


# ----------------------------------------------------------------------------- against the loop


@pytest.mark.parametrize("family", ["lstm", "transformer"])
def test_faithfulness_matches_the_per_instance_loop(family, split, lstm, transformer):
    model = lstm if family == "lstm" else transformer
    scores = {"a": random_scores(split, 0), "b": random_scores(split, 1)}
    res = faithfulness(model, split, scores)
    assert isinstance(res, FaithfulnessResult) and res.measures == ("a", "b") and res.fractions == FRACTIONS
    assert res.comprehensiveness.shape == (12, 2, 5) and res.probs_without.shape == (12, 2, 5, 2)
    for m, name in enumerate(res.measures):
        comp, suff, k = oracle(model, split, scores[name], FRACTIONS)
        np.testing.assert_allclose(res.comprehensiveness[:, m], comp, atol=1e-5)
        np.testing.assert_allclose(res.sufficiency[:, m], suff, atol=1e-5)
        np.testing.assert_array_equal(res.k, k)
    np.testing.assert_allclose(res.aopc("sufficiency"), res.sufficiency.mean(-1))
    frame = res.to_frame()
    assert list(frame.columns[:4]) == ["instance", "label", "predicted", "length"] and len(frame) == 12 * 2 * 5
    np.testing.assert_allclose(frame["comprehensiveness"].to_numpy(), res.comprehensiveness.reshape(-1))


def test_a_transformers_passes_fit_the_element_budget(split, transformer, monkeypatch):
    """Each pass over the reduced inputs holds at most runs.PASS_ELEMENTS elements by the model's
    token_cost (a transformer's token costs far more than a BiLSTM's); the scores stay the same."""
    from attnlib import runs

    scores = {"a": random_scores(split, 2)}
    base = faithfulness(transformer, split, scores)
    budget = 4 * transformer.token_cost(12)
    monkeypatch.setattr(runs, "PASS_ELEMENTS", budget)
    passes, real = [], runs.rows_per_pass
    monkeypatch.setattr(runs, "rows_per_pass", lambda m, w, t: passes.append((real(m, w, t), w)) or passes[-1][0])
    small = faithfulness(transformer, split, scores)
    assert len(passes) > 2 * 5  # many passes, each within the budget (or one row)
    assert all(rows == 1 or rows * transformer.token_cost(width) <= budget for rows, width in passes)
    np.testing.assert_allclose(small.comprehensiveness, base.comprehensiveness, atol=1e-6)
    np.testing.assert_allclose(small.sufficiency, base.sufficiency, atol=1e-6)


def test_results_do_not_depend_on_chunk_size_or_max_tokens(split, lstm, chunk_atol):
    scores = {"a": random_scores(split, 2)}
    base = faithfulness(lstm, split, scores)
    for kwargs in ({"chunk_size": 1}, {"chunk_size": 5}, {"max_tokens": 7}):
        other = faithfulness(lstm, split, scores, **kwargs)
        np.testing.assert_allclose(other.comprehensiveness, base.comprehensiveness, atol=chunk_atol(1e-6))
        np.testing.assert_allclose(other.sufficiency, base.sufficiency, atol=chunk_atol(1e-6))
        np.testing.assert_array_equal(other.indices, base.indices)


def test_an_importance_result_gives_its_measures_and_instances(tiny_dataset, lstm):
    res = importance(lstm, tiny_dataset.test, max_instances=6)
    out = faithfulness(lstm, tiny_dataset.test, res, fractions=(0.1, 0.5))
    assert out.measures == ("attention", "gradient", "loo")
    np.testing.assert_array_equal(out.indices, res.indices)
    sub = tiny_dataset.test.subset(res.indices)
    comp, suff, _ = oracle(lstm, sub, res.gradient, (0.1, 0.5))
    np.testing.assert_allclose(out.comprehensiveness[:, 1], comp, atol=1e-5)
    np.testing.assert_allclose(out.sufficiency[:, 1], suff, atol=1e-5)
    table = faithfulness_summary(out)
    assert list(table.columns) == ["comprehensiveness (higher is better)", "sufficiency (lower is better)", "n"]
    np.testing.assert_allclose(table.iloc[:, 0].to_numpy(), out.aopc("comprehensiveness").mean(0))
    by_fraction = faithfulness_summary(out, by_fraction=True)
    assert by_fraction.index.names == ["measure", "fraction"] and len(by_fraction) == 6


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**16), fractions=st.lists(st.sampled_from([0.01, 0.1, 0.3, 0.5, 0.75]),
                                                      min_size=1, max_size=3, unique=True))
def test_properties(split, transformer, seed, fractions):
    """At 100 %, comprehensiveness is p(x)_j - p(empty)_j and sufficiency 0; AOPC is the plain mean."""
    scores = {"s": random_scores(split, seed)}
    res = faithfulness(transformer, split, scores, fractions=[*fractions, 1.0])
    j = res.probs.argmax(-1)
    with torch.no_grad():
        empty = transformer(torch.tensor([[data.SOS, data.UNK, data.EOS]])).probs[0].double().cpu().numpy()
    np.testing.assert_allclose(res.comprehensiveness[:, 0, -1], res.probs[np.arange(12), j] - empty[j], atol=1e-5)
    np.testing.assert_allclose(res.sufficiency[:, 0, -1], 0, atol=1e-5)
    np.testing.assert_array_equal(res.k[:, -1], res.lengths)
    assert (res.k >= 1).all() and (res.k <= res.lengths[:, None]).all()
    np.testing.assert_allclose(res.aopc("comprehensiveness"), res.comprehensiveness.mean(-1))
    # the per-instance plain form gives the same numbers from the result's probabilities
    one = erasure_metrics(res.probs[0], res.probs_without[0, 0], res.probs_rationale[0, 0])
    np.testing.assert_allclose(one["comprehensiveness"], res.comprehensiveness[0, 0], atol=1e-12)
    assert one["sufficiency AOPC"] == pytest.approx(res.sufficiency[0, 0].mean())


# ----------------------------------------------------------------------------- plain forms


def test_plain_functions():
    assert top_k_count(20, 0.05) == 1 and top_k_count(20, 0.1) == 2 and top_k_count(3, 0.01) == 1
    assert top_k_count(3, 0.5) == 2 and top_k_count(1, 1.0) == 1
    np.testing.assert_array_equal(top_k_count(np.array([1, 10, 101]), 0.2), [1, 2, 21])
    np.testing.assert_array_equal(rationale_mask([0.1, 0.5, 0.5, 0.2], 0.5), [False, True, True, False])
    np.testing.assert_array_equal(rationale_mask([0.5, 0.1, 0.5, 0.5], 0.5), [True, False, True, False])  # ties: earlier
    p = np.array([0.2, 0.7, 0.1])
    reduced = np.array([[0.5, 0.4, 0.1], [0.2, 0.7, 0.1]])
    np.testing.assert_allclose(probability_drop(p, reduced), [0.3, 0.0])
    np.testing.assert_allclose(probability_drop(p, reduced, target=0), [-0.3, 0.0])
    batch = probability_drop(np.stack([p, [0.6, 0.3, 0.1]]), np.stack([reduced, reduced]))  # j = 1, then j = 0
    np.testing.assert_allclose(batch, [[0.3, 0.0], [0.1, 0.4]])
    assert aopc([0.1, 0.2, 0.3, 0.4, 0.5]) == pytest.approx(0.3)
    out = erasure_metrics(p, reduced, reduced[::-1])
    np.testing.assert_allclose(out["sufficiency"], [0.0, 0.3])
    assert METRICS["comprehensiveness"].higher_is_better and not METRICS["sufficiency"].higher_is_better
    assert METRICS["sufficiency"].label == "sufficiency (lower is better)"
    assert {m.kind for m in METRICS.values()} == {"faithfulness", "plausibility"}
    assert attnlib.faithfulness.faithfulness is faithfulness  # the short name


def test_rationale_ranking_matches_sklearn():
    from sklearn.metrics import average_precision_score, roc_auc_score

    rng = np.random.default_rng(3)
    lengths = rng.integers(3, 10, size=30)
    truth = [rng.random(n) < 0.4 for n in lengths]
    for t in truth:
        t[0] = True
    scores = [np.round(rng.random(n), 1) for n in lengths]
    per = rationale_ranking(scores, truth)
    assert len(per) == 30 and list(per.columns) == ["n_tokens", "n_rationale", "precision@k", "average precision",
                                                     "AUC"]
    np.testing.assert_allclose(per["average precision"], [average_precision_score(t, s) for t, s in zip(truth, scores)])
    auc = [roc_auc_score(t, s) if not t.all() else np.nan for t, s in zip(truth, scores)]
    np.testing.assert_allclose(per["AUC"], auc)
    perfect = rationale_ranking([t.astype(float) for t in truth], truth)
    assert (perfect["precision@k"] == 1).all()
    at1 = rationale_ranking(scores, truth, k=1)
    assert ((at1["precision@k"] >= 0) & (at1["precision@k"] <= 1)).all()


def test_rationale_recovery_lives_in_faithfulness_only():
    from attnlib.experiments import importance as imp

    assert not hasattr(imp, "rationale_recovery")  # no re-export: importance and faithfulness import one way
    rng = np.random.default_rng(0)
    lengths = np.array([4, 6, 5])
    truth = [rng.random(n) < 0.5 for n in lengths]
    for t in truth:
        t[1] = True
    scores = [rng.random(n) for n in lengths]
    res = ImportanceResult(attention=scores, gradient=scores, loo=[t.astype(float) for t in truth],
                           probs=np.full((3, 2), 0.5), predicted=np.zeros(3, int), labels=np.zeros(3, int),
                           indices=np.arange(3), lengths=lengths)
    table = rationale_recovery(res, truth)
    per = rationale_ranking(scores, truth)
    assert table.loc["attention", "average precision"] == pytest.approx(per["average precision"].mean())
    assert table.loc["loo", "AUC"] == 1.0


# ----------------------------------------------------------------------------- validation


def test_validation_errors(split, lstm):
    scores = {"a": random_scores(split, 0)}
    with pytest.raises(ValueError, match="token-level access.*str lacks pad_id"):
        faithfulness("model", split, scores)
    for bad in ((), (0.0,), (1.5,), (0.1, 0.1), ("0.1",), (float("nan"),), "0.1", True):
        with pytest.raises(ValueError, match="fraction"):
            faithfulness(lstm, split, scores, fractions=bad)
    with pytest.raises(ValueError, match="mapping"):
        faithfulness(lstm, split, {})
    with pytest.raises(ValueError, match="mapping"):
        faithfulness(lstm, split, random_scores(split, 0))
    with pytest.raises(ValueError, match="real tokens"):
        faithfulness(lstm, split, {"a": [s[:-1] for s in scores["a"]]})
    with pytest.raises(ValueError, match="split position"):
        faithfulness(lstm, split, {"a": scores["a"][:3]})
    with pytest.raises(ValueError, match="NaN"):
        faithfulness(lstm, split, {"a": [s * np.nan for s in scores["a"]]})
    with pytest.raises(ValueError, match="empty"):
        faithfulness(lstm, split.subset([]), scores)
    with pytest.raises(ValueError, match="max_tokens"):
        faithfulness(lstm, split, scores, max_tokens=0)
    with pytest.raises(ValueError, match="chunk_size"):
        faithfulness(lstm, split, scores, chunk_size=0)
    with pytest.raises(ValueError, match="Split it was computed on"):
        faithfulness(lstm, split.batch([0, 1]), ImportanceResult(
            attention=[], gradient=[], loo=[], probs=np.zeros((0, 2)), predicted=np.zeros(0, int),
            labels=np.zeros(0, int), indices=np.zeros(0, int), lengths=np.zeros(0, int)))
    with pytest.raises(ValueError, match="FaithfulnessResult"):
        faithfulness_summary(pd.DataFrame())
    with pytest.raises(ValueError, match="class axis"):
        probability_drop([0.5, 0.5], [[0.2, 0.3, 0.5]])
    with pytest.raises(ValueError, match="sum to 1"):
        probability_drop([0.5, 0.6], [0.5, 0.5])
    with pytest.raises(ValueError, match="target"):
        probability_drop([0.5, 0.5], [0.5, 0.5], target=2)
    with pytest.raises(ValueError, match="n must be"):
        top_k_count(0, 0.1)
    with pytest.raises(ValueError, match="non-empty 1-D"):
        rationale_mask([], 0.1)
    with pytest.raises(ValueError, match="one entry per token"):
        rationale_ranking([np.ones(3)], [np.ones(2, bool)])
    with pytest.raises(ValueError, match="empty"):
        rationale_ranking([], [])
    with pytest.raises(ValueError, match="3 score arrays but 2"):
        rationale_ranking([np.ones(1)] * 3, [np.ones(1, bool)] * 2)


def test_rationale_ties_breaks_ties_at_random_exactly_and_for_the_rationale():
    from attnlib.faithfulness import rationale_ties

    rng = np.random.default_rng(0)
    cases = []
    for _ in range(6):
        n = int(rng.integers(3, 12))
        x = rng.integers(0, 3, n).astype(float)  # many ties
        y = rng.random(n) < 0.4
        y[0] = True
        cases.append((x, y))
    cases.append((np.array([0.5, 0.5]), np.array([False, False])))  # no rationale token: NaN row
    ties = rationale_ties([c[0] for c in cases], [c[1] for c in cases])
    assert list(ties.columns) == ["n_tokens", "n_rationale", "average precision", "AP, ties at random",
                                  "AP, ties to the rationale", "top tied", "share tied at the top",
                                  "rationale at the top"]
    assert ties.iloc[-1][["AP, ties at random", "top tied"]].isna().all()
    for (x, y), (_, row) in zip(cases[:-1], ties.iloc[:-1].iterrows()):
        draws = [rationale_ranking([x + 1e-3 * rng.random(len(x))], [y])["average precision"][0]
                 for _ in range(4000)]  # the ties broken at random
        assert row["AP, ties at random"] == pytest.approx(np.mean(draws), abs=0.01)
        order = np.lexsort((~y, -x))
        hits = np.cumsum(y[order])
        assert row["AP, ties to the rationale"] == pytest.approx(np.mean(hits[y[order]] / (np.flatnonzero(y[order]) + 1)))
        assert row["average precision"] <= row["AP, ties at random"] + 1e-12 <= row["AP, ties to the rationale"] + 2e-12
        top = x == x.max()
        assert row["top tied"] == float(top.sum() > 1) and row["share tied at the top"] == top.mean()
        assert row["rationale at the top"] == y[top].sum() / y.sum()
    # no ties: all three APs agree; a random ranking of n tokens is the whole-sentence tie
    x, y = rng.random(9), np.arange(9) < 3
    row = rationale_ties([x], [y]).iloc[0]
    assert row["average precision"] == pytest.approx(row["AP, ties at random"]) == pytest.approx(
        row["AP, ties to the rationale"])
    flat = rationale_ties([np.zeros(9)], [y]).iloc[0]
    harmonic = np.sum(1 / np.arange(1, 10))
    assert flat["AP, ties at random"] == pytest.approx((harmonic + 2 / 8 * (9 - harmonic)) / 9)  # E[AP], random
    assert flat["AP, ties to the rationale"] == 1.0 and flat["average precision"] == pytest.approx(3 / 9)
