"""Published numbers the chapters compare against, with where each comes from.

Keeping them here (not typed into chapters) means every chapter cites the same figure,
and a correction happens in one place. ``verify=True`` marks figures recalled from the
papers rather than read from the authors' committed outputs: chapters say so beside them.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Published", "MODEL_F1", "UNIFORM_F1", "JSD_VERY_DIFFERENT", "lookup"]


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
