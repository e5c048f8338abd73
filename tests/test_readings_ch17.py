"""Chapter 17's readings: the Part V methods against raw attention, over seeds, in words that follow the verdicts."""
import numpy as np
import pytest

from attnlib.presentation.readings import ch17


def _columns(shift_relevance=0.2, seeds=3, n=60, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.random((seeds, n))
    values = {m: base + rng.normal(0, 0.01, (seeds, n)) for m in ch17.METHODS}
    values["attention relevance"] = base + shift_relevance
    values["random"] = base - 0.5
    return {"AP, synthetic": values, "comprehensiveness AOPC, synthetic": dict(values)}


def test_a_method_clearly_above_attention_is_better_and_the_others_within_noise():
    columns = _columns()
    higher = {"AP, synthetic": True, "comprehensiveness AOPC, synthetic": True}
    got = ch17.beside_attention(columns, higher, model="transformer", key="tf")
    assert got["ch17_tf_ap"].startswith("average precision against the rationale (synthetic): attention relevance")
    assert "is better than raw attention" in got["ch17_tf_ap"] and "holds in 3 of 3 seeds" in got["ch17_tf_ap"]
    assert "norm-based, norm + residual + LN, GlobEnc and value zeroing are within noise of it" in got["ch17_tf_ap"]
    assert got["ch17_tf_better"] == 2 and got["ch17_tf_compared"] == 2 * len(ch17.NEW)
    # where lower is better, the same values read the other way
    lower = ch17.beside_attention(columns, {k: False for k in higher}, model="transformer", key="tf")
    assert "attention relevance (holds in 3 of 3 seeds) is worse than raw attention" in lower["ch17_tf_ap"]
    assert lower["ch17_tf_better"] == 0


def test_one_model_says_so_and_the_random_floor_is_read():
    columns = {c: {m: v[:1] for m, v in values.items()} for c, values in _columns(seeds=1).items()}
    higher = {c: True for c in columns}
    got = ch17.beside_attention(columns, higher, model="MiniLM", key="minilm")
    assert "from one model" in got["ch17_minilm_ap"]
    assert ch17.at_random(columns, higher, key="minilm") == {"ch17_minilm_floor": "every method beats it in every column"}
    stuck = {c: {**values, "flow": values["random"]} for c, values in columns.items()}
    said = ch17.at_random(stuck, higher, key="minilm")["ch17_minilm_floor"]
    assert said == "flow on average precision against the rationale and flow on comprehensiveness do not beat it"


def test_setup_accuracy_and_the_heads_numbers():
    assert ch17.setup(n_seeds=3, n_train=2000, n_sentences=50, epochs=3, minilm_train=1000) == {
        "ch17_n_seeds": 3, "ch17_n_train": "2,000", "ch17_n": 50, "ch17_epochs": 3, "ch17_minilm_train": "1,000"}
    correct = np.array([[True, False, True, True]] * 3)
    acc = ch17.accuracy(correct, key="tf")
    assert acc["ch17_tf_acc"] == pytest.approx(0.75) and " to " in acc["ch17_tf_acc_ci"]
    head = ch17.minilm_head({"train_accuracy": 0.84}, np.array([True, True, False, True]))
    assert head["ch17_minilm_train_acc"] == 0.84 and head["ch17_minilm_acc"] == pytest.approx(0.75)
    with pytest.raises(ValueError, match="raw attention"):
        ch17.beside_attention({"AP, synthetic": {"rollout": np.ones((1, 3))}}, {"AP, synthetic": True},
                              model="m", key="k")


def test_one_table_per_model_has_its_own_columns_and_no_na():
    from attnlib.experiments.explanations import rank_columns_over_seeds

    columns = _columns()
    higher = {c: True for c in columns}
    ranked = {"transformer": rank_columns_over_seeds(columns, higher),
              "MiniLM (frozen)": rank_columns_over_seeds({"comprehensiveness AOPC, synthetic":
                                                          columns["comprehensiveness AOPC, synthetic"]}, higher)}
    both = ch17.table(ranked, higher)
    assert (both == "n/a").any().any()  # the models share no column of AP
    alone = ch17.table(ranked, higher, model="MiniLM (frozen)")
    assert list(alone.index) == list(ch17.METHODS) and alone.shape[1] == 1
    assert not (alone == "n/a").any().any()
    with pytest.raises(ValueError, match="no model"):
        ch17.table(ranked, higher, model="BiLSTM")
