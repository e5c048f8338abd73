"""attnlib.presentation.readings.ch16: Chapter 16's readings of an audit report, on small hand-made reports."""
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from attnlib import uncertainty
from attnlib.models.protocol import Site
from attnlib.presentation.readings import ch16

NULL = "sentences whose head has a null space (share; mean over heads)"
TVD = "output change when a head is permuted (median TVD; mean over heads)"
LAYERS, HEADS = 2, 3


def _summary(acc=(0.625, 0.417, 0.792), null=(0.42, 0.25, 0.63)):
    rows = {"accuracy": dict(zip(("mean", "low", "high"), acc)), NULL: dict(zip(("mean", "low", "high"), null)),
            TVD: {"mean": 0.04, "low": 0.03, "high": 0.05}}
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index.name = "check"
    return frame


def _index():
    return pd.MultiIndex.from_product([range(LAYERS), range(HEADS)], names=["layer", "head"])


def _flips(per_head: dict, n_reviews=12, n_permutations=5):
    """report.permutation: per site, the predictions under each permutation. ``per_head[(layer,
    head)]``: how many reviews flip in every permutation (the rest never flip)."""
    out = {}
    for layer in range(LAYERS):
        for head in range(HEADS):
            k = per_head.get((layer, head), 0)
            predicted = np.zeros(n_reviews, dtype=int)
            permuted = np.zeros((n_reviews, n_permutations), dtype=int)
            permuted[:k] = 1
            out[Site(layer, head)] = SimpleNamespace(predicted=predicted, all_predicted=permuted,
                                                     indices=np.arange(n_reviews))
    return out


def _report(acc=(0.625, 0.417, 0.792), null_share=None, flips=None, faith=None, n=24):
    null_share = np.full(LAYERS * HEADS, 0.42) if null_share is None else np.asarray(null_share)
    ident = pd.DataFrame({"null space (share)": null_share,
                          "raw vs effective r (mean)": np.linspace(0.6, 0.99, LAYERS * HEADS)}, index=_index())
    perm = pd.DataFrame({"median TVD": np.linspace(0.01, 0.12, LAYERS * HEADS), "low": 0.0, "high": 0.2,
                         "flipped (share)": 0.0}, index=_index())
    faith = _faith() if faith is None else faith
    return SimpleNamespace(tables={"summary": _summary(acc), "identifiability": ident, "permutation": perm,
                                   "faithfulness": faith},
                           permutation=_flips(flips or {}), n_instances=n)


def _faith(comp=("3=", "3=", "1", "2"), suff=("1=", "1=", "1=", "2")):
    methods = ["attention", "gradient × input", "leave-one-out", "random"]
    return pd.DataFrame({"comprehensiveness": [0.055, 0.09, 0.21, 0.055], "comprehensiveness rank": list(comp),
                         "sufficiency": [0.09, 0.1, 0.02, 0.19], "sufficiency rank": list(suff)},
                        index=pd.Index(methods, name="method"))


def test_classifier_says_what_an_accuracy_near_chance_means():
    out = ch16.classifier(_report())
    assert (out["ch16_acc"], out["ch16_acc_low"], out["ch16_acc_high"]) == (0.625, 0.417, 0.792)
    assert out["ch16_n"] == 24 and out["ch16_acc_span"] == 38
    assert out["ch16_acc_meaning"].startswith("The interval reaches down to chance (50%): on these reviews the "
                                              "classifier is not shown to beat a coin")
    above = ch16.classifier(_report(acc=(0.8, 0.65, 0.92)))
    assert above["ch16_acc_meaning"].startswith("The interval lies above chance (50%)")
    below = ch16.classifier(_report(acc=(0.3, 0.15, 0.45)))
    assert below["ch16_acc_meaning"].startswith("The interval lies below chance (50%)")


def test_null_space_reads_the_lengths_and_the_interval_over_reviews():
    lengths = np.array([10, 40, 31, 29])  # with [CLS] and [SEP]: 12, 42, 33, 31 against d_v = 32
    out = ch16.null_space(_report(), d_v=32, lengths=lengths)
    assert out["ch16_longer"] == 0.5 and out["ch16_d_v"] == 32
    assert out["ch16_null_heads"] == "the same 42% of the reviews for every head"
    assert out["ch16_null_mean"] == 0.42 and out["ch16_null_ci"] == "25% to 63%"
    assert out["ch16_r_min"] == pytest.approx(0.6) and out["ch16_r_min_head"] == "layer 1, head 1"
    assert out["ch16_r_max"] == pytest.approx(0.99)
    varied = ch16.null_space(_report(null_share=[0.4, 0.4, 0.5, 0.4, 0.4, 0.4]), d_v=32, lengths=lengths)
    assert varied["ch16_null_heads"] == "40% to 50% of the reviews, by head"


def test_flip_shares_are_per_review_and_per_head():
    flips = ch16.flip_shares(_report(flips={(1, 2): 3}))
    assert flips.shape == (12, LAYERS * HEADS)
    assert flips[(1, 2)].tolist() == [1.0] * 3 + [0.0] * 9 and flips[(0, 0)].sum() == 0
    with pytest.raises(ValueError, match="permutation"):
        ch16.flip_shares(SimpleNamespace(tables={}, permutation={}))


def test_no_head_matters_unless_holm_says_so():
    # one head flips 5 of 12 reviews: t = 2.3 on 11 df, p ~ 0.04, but 6 tests at 5% need p < 0.0083
    out = ch16.heads(_report(flips={(1, 2): 5}))
    assert out["ch16_flip_max"] == pytest.approx(5 / 12) and out["ch16_flip_head"] == "layer 2, head 3"
    assert out["ch16_flip_ci"] == "{:.0%} to {:.0%}".format(
        *(lambda iv: (iv.low, iv.high))(uncertainty.bootstrap(np.r_[np.ones(5), np.zeros(7)])))
    assert out["ch16_heads_verdict"].startswith("but once the 6 tests are corrected for (Holm's method at 5%")
    assert out["ch16_heads_verdict"].endswith("the audit cannot say that any single head's attention carries the "
                                              "decision, nor that none does")
    assert out["ch16_tvd_head"] == "layer 2, head 3" and out["ch16_tvd_max"] == pytest.approx(0.12)
    assert (out["ch16_n_heads"], out["ch16_n_permuted"], out["ch16_n_permutations"]) == (6, 12, 5)


def test_heads_that_pass_holm_are_named():
    out = ch16.heads(_report(flips={(0, 1): 10, (1, 0): 12}))
    assert out["ch16_heads_verdict"].startswith("and once the 6 tests are corrected for")
    assert out["ch16_heads_verdict"].endswith("permuting 2 of the 6 heads flips predictions beyond noise (layer 1, "
                                              "head 2 and layer 2, head 1): some heads matter")
    none = ch16.heads(_report())
    assert none["ch16_flip_max"] == 0.0 and none["ch16_heads_verdict"].startswith("but once")


def test_the_t_test_behind_the_heads():
    from scipy import stats

    values = np.r_[np.ones(4), np.zeros(8)]
    assert ch16._t_p(values) == pytest.approx(stats.ttest_1samp(values, 0).pvalue)
    assert ch16._t_p(np.zeros(12)) == 1.0 and ch16._t_p(np.full(12, 0.4)) == 0.0


def test_faithfulness_reads_the_ranks():
    out = ch16.faithfulness(_report())
    assert out["ch16_comp_first"] == "leave-one-out ranks first: deleting its top tokens"
    assert out["ch16_suff_first"] == ("By sufficiency, 3 of the 4 methods tie for first place: on 24 reviews the "
                                      "intervals overlap too much to order them.")
    assert (out["ch16_att_comp_rank"], out["ch16_att_suff_rank"]) == ("3=", "1=")
    assert out["ch16_att_comp"] == 0.055 and out["ch16_random_comp"] == 0.055
    other = ch16.faithfulness(_report(faith=_faith(comp=("1=", "1=", "3", "4"), suff=("2", "3", "1", "4"))))
    assert other["ch16_comp_first"] == "attention and gradient × input rank first: deleting their top tokens"
    assert other["ch16_suff_first"] == "By sufficiency, leave-one-out alone ranks first."
    with pytest.raises(ValueError, match="faithfulness"):
        ch16.faithfulness(SimpleNamespace(tables={}))
