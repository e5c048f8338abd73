"""Code moved out of Chapters 7 and 8 that runs models: the peak table of Chapter 8
(readings.ch08.attention_peaks) and the readings that take real predictions."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from attnlib.presentation.readings import ch07, ch08


def test_attention_peaks_are_attention_positions_of_each_model(tiny_dataset, tiny_model):
    from attnlib import train
    from attnlib.metrics import attention_positions

    models = {"tanh": tiny_model("lstm", "tanh"), "uniform": tiny_model("lstm", "uniform")}
    table = ch08.attention_peaks(models, tiny_dataset.test)
    assert list(table.index) == ["tanh", "uniform"]
    first = ["peak on first token", "peak on last token", "mean peak weight"]
    assert list(table.columns) == [*first, "most common peak", "share peaking there", "95% interval",
                                   "degenerate"]
    for label, model in models.items():
        attention = train.predict(model, tiny_dataset.test).attention
        where = attention_positions(attention)
        assert table.loc[label, first].tolist() == [where[c] for c in first]
        name, hits = ch08.one_position(attention)
        assert table.loc[label, "most common peak"] == name
        assert table.loc[label, "share peaking there"] == pytest.approx(float(np.mean(hits)))
        low, high = (float(x) for x in table.loc[label, "95% interval"].strip("[]").split(", "))
        assert low <= table.loc[label, "share peaking there"] <= high
        word = table.loc[label, "degenerate"]
        assert word == ("yes" if low > 0.5 else "no" if high < 0.5 else "about half, within noise")
    # uniform attention has no single largest weight (a tie counts for neither end)
    assert table.loc["uniform", "peak on first token"] == 0.0
    assert table.loc["uniform", "peak on last token"] == 0.0
    numbers = table[[*first, "share peaking there"]].astype(float)
    assert ((numbers >= 0) & (numbers <= 1)).all().all()


def test_attention_peaks_need_a_model():
    with pytest.raises(ValueError, match="at least one"):
        ch08.attention_peaks({}, None)


def test_readings_take_real_predictions(tiny_dataset, tiny_model):
    from attnlib import train

    split = tiny_dataset.test.subset([0, 1, 2])
    p_base = train.predict(tiny_model("lstm", "tanh"), split)
    p_other = train.predict(tiny_model("lstm", "uniform"), split)
    table = ch08.attention_peaks({"base": tiny_model("lstm", "tanh"),
                                  "adversary, λ = 1": tiny_model("lstm", "uniform")}, split)
    frame = pd.DataFrame({"lambda": [1.0], "mean_jsd": [0.3], "mean_tvd": [0.1],
                          "same_decision": [0.9], "f1": [0.7]})
    tokens = [tiny_dataset.test.tokens[i] for i in range(3)]
    r = ch08.heatmaps(p_base, p_other, tokens=tokens, peak_table=table, frame=frame)
    assert r["ch08_heatmaps"].count("In the ") == 3
    # the same model twice: JSD 0 and the same decision, sentence by sentence
    same = ch08.heatmaps(p_base, p_base, tokens=tokens, peak_table=table, frame=frame)["ch08_heatmaps"]
    assert same.count("(JSD 0.00)") == 3 and same.count("the same decision.") == 3

    predictions = {0: p_base, 1: p_other, 2: p_other}
    stacked = pd.DataFrame({"base": 0, "instance": np.arange(3), "jsd": 0.1, "tvd": 0.0, "adversary_jsd": 0.5,
                            "max_attention": 0.6,
                            "predicted": p_base.predicted})
    peaks = ch07.seed_peaks(predictions, stacked, shown=0)
    assert peaks["ch07_other_seeds"] == "1 and 2"
    assert peaks["ch07_among_mean"] == 0.0  # two copies of the same model agree exactly
