"""Published numbers the chapters compare against, with where each comes from.

Keeping them here (not typed into chapters) means every chapter cites the same figure,
and a correction happens in one place. ``verify=True`` marks figures recalled from the
papers rather than read from the authors' committed outputs: chapters say so beside them.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Published", "MODEL_F1", "UNIFORM_F1", "DIAGNOSTIC_F1", "JSD_VERY_DIFFERENT", "lookup"]


@dataclass(frozen=True)
class Published:
    value: float
    source: str
    verify: bool = False

    def __str__(self) -> str:
        return f"{self.value:g}" + (" (verify)" if self.verify else "")


#: Jain & Wallace 2019: test F1 of the positive class, BiLSTM + tanh attention.
MODEL_F1 = {
    "sst": Published(0.81, "Jain & Wallace 2019, Table 1", verify=True),
    "imdb": Published(0.88, "Jain & Wallace 2019, Table 1", verify=True),
    "agnews": Published(0.96, "Jain & Wallace 2019, Table 1", verify=True),
    "20news": Published(0.94, "Jain & Wallace 2019, Table 1", verify=True),
}

#: Wiegreffe & Pinter 2019, Table 2: F1 with trained attention and with uniform attention.
UNIFORM_F1 = {
    "sst": {"trained": Published(0.831, "Wiegreffe & Pinter 2019, Table 2", True),
            "uniform": Published(0.822, "Wiegreffe & Pinter 2019, Table 2", True)},
    "imdb": {"trained": Published(0.902, "Wiegreffe & Pinter 2019, Table 2", True),
             "uniform": Published(0.879, "Wiegreffe & Pinter 2019, Table 2", True)},
    "agnews": {"trained": Published(0.964, "Wiegreffe & Pinter 2019, Table 2", True),
               "uniform": Published(0.960, "Wiegreffe & Pinter 2019, Table 2", True)},
    "20news": {"trained": Published(0.942, "Wiegreffe & Pinter 2019, Table 2", True),
               "uniform": Published(0.934, "Wiegreffe & Pinter 2019, Table 2", True)},
}

DIAGNOSTIC_SOURCE = "Wiegreffe & Pinter 2019, Table 3"

#: Wiegreffe & Pinter 2019, Table 3: test F1 of the diagnostic MLP (Average encoder, attention
#: given) per guide: uniform, learned jointly ("trained MLP"), from the BiLSTM base model
#: ("base LSTM"), from an adversary with lambda = 0.001 ("adversary"). Recalled, verify.
DIAGNOSTIC_F1 = {
    dataset: {guide: Published(value, DIAGNOSTIC_SOURCE, verify=True) for guide, value in zip(
        ("uniform", "trained MLP", "base LSTM", "adversary"), values)}
    for dataset, values in {"sst": (0.812, 0.817, 0.824, 0.815), "imdb": (0.879, 0.888, 0.905, 0.897)}.items()
}

#: Jain & Wallace's threshold for an adversarial attention that is "very different".
JSD_VERY_DIFFERENT = 0.49

#: Which of the paper's datasets each of ours stands in for.
PAPER_DATASET = {"rt-polarity": "sst", "sst2": "sst", "imdb": "imdb", "agnews": "agnews", "20news": "20news"}


def lookup(table: dict, dataset: str):
    """The entry of ``table`` for one of our dataset names (e.g. rt-polarity -> the paper's SST)."""
    key = PAPER_DATASET.get(dataset)
    if key is None or key not in table:
        raise ValueError(f"no published figure for dataset {dataset!r}; known: {', '.join(sorted(PAPER_DATASET))}")
    return table[key]


#: Jain & Wallace 2019, Table 2 as printed: Kendall tau between attention and gradient (tau_g) /
#: leave-one-out (tau_loo), mean (sd) and the fraction of instances with p <= 0.05, per PREDICTED
#: class (0, 1). BiLSTM + tanh unless the key says "average". Recalled from the paper (verify).
TAU_TABLE2 = {
    ("sst", "lstm", "tau_g"): {0: (0.40, 0.21, 0.59), 1: (0.38, 0.19, 0.58)},
    ("sst", "average", "tau_g"): {0: (0.69, None, 0.93), 1: (0.69, None, 0.94)},
    ("sst", "lstm", "tau_loo"): {0: (0.34, None, 0.47), 1: (0.33, None, 0.47)},
    ("imdb", "lstm", "tau_g"): {0: (0.37, 0.07, 1.0), 1: (0.37, 0.08, 0.99)},
    ("imdb", "average", "tau_g"): {0: (0.65, None, None), 1: (0.66, None, None)},
    ("imdb", "lstm", "tau_loo"): {0: (0.30, None, None), 1: (0.31, None, None)},
}
TAU_TABLE2_SOURCE = Published(float("nan"), "Jain & Wallace 2019, Table 2 (printed)", verify=True)

#: The same statistics from the authors' committed outputs (mean tau per predicted class 0 / 1).
TAU_AUTHORS_OUTPUTS = {
    ("sst", "lstm", "tau_g"): {0: 0.34, 1: 0.36},
    ("sst", "lstm", "tau_loo"): {0: 0.27, 1: 0.32},
    ("sst", "average", "tau_g"): {0: 0.61, 1: 0.60},
    ("sst", "average", "tau_loo"): {0: 0.61, 1: 0.64},
    ("imdb", "lstm", "tau_g"): {0: 0.44, 1: 0.43},
    ("imdb", "lstm", "tau_loo"): {0: 0.34, 1: 0.34},
    ("imdb", "average", "tau_g"): {0: 0.67, 1: 0.68},
    ("imdb", "average", "tau_loo"): {0: 0.54, 1: 0.62},
}
TAU_AUTHORS_OUTPUTS_SOURCE = Published(float("nan"), "Jain & Wallace 2019, the authors' committed outputs")

#: Fraction of instances whose eps-max JSD >= 0.49 (J&W Sec. 4.2.2), BiLSTM + tanh, class 0 / 1.
ADVERSARY_FRACTION = {
    "sst": {0: Published(0.50, "Jain & Wallace 2019, Sec. 4.2.2"), 1: Published(0.54, "Jain & Wallace 2019, Sec. 4.2.2")},
    "imdb": {0: Published(0.97, "Jain & Wallace 2019, Sec. 4.2.2"), 1: Published(0.93, "Jain & Wallace 2019, Sec. 4.2.2")},
    "agnews": {0: Published(0.92, "Jain & Wallace 2019, Sec. 4.2.2"), 1: Published(0.96, "Jain & Wallace 2019, Sec. 4.2.2")},
    "20news": {0: Published(0.88, "Jain & Wallace 2019, Sec. 4.2.2"), 1: Published(0.33, "Jain & Wallace 2019, Sec. 4.2.2")},
}

#: J&W's reading of the permutation experiment on SST (Fig. 6): the median over instances of the
#: per-instance median output change stays small, about 0.03-0.11 across the max-attention bins.
PERMUTATION_SST_RANGE = (0.03, 0.11)


def paper_tau(dataset: str, encoder: str):
    """J&W's tau_g / tau_loo for one of our datasets and an encoder, as a frame by predicted class.

    Columns follow :func:`attnlib.importance.agreement` (``tau_g mean``, ``tau_g sd``,
    ``tau_g sig. frac.``, ``tau_loo mean``, ...) from the printed Table 2, plus
    ``... (authors' outputs)`` columns with the means from the authors' committed outputs.
    Missing figures are NaN. The paper's rows are BiLSTM + tanh or Average + tanh.
    """
    import math

    import pandas as pd

    key = PAPER_DATASET.get(dataset)
    if key is None:
        raise ValueError(f"no published figure for dataset {dataset!r}; known: {', '.join(sorted(PAPER_DATASET))}")
    rows = {}
    for c in (0, 1):
        row = {}
        for measure in ("tau_g", "tau_loo"):
            mean, sd, sig = TAU_TABLE2.get((key, encoder, measure), {}).get(c, (None, None, None))
            row[f"{measure} mean"] = math.nan if mean is None else mean
            row[f"{measure} sd"] = math.nan if sd is None else sd
            row[f"{measure} sig. frac."] = math.nan if sig is None else sig
            authors = TAU_AUTHORS_OUTPUTS.get((key, encoder, measure), {}).get(c)
            row[f"{measure} mean (authors' outputs)"] = math.nan if authors is None else authors
        rows[c] = row
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index.name = "predicted class"
    return frame
