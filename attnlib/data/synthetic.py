"""A synthetic sentiment task whose rationale is known exactly.

Each instance is a "sentence" of neutral distractor words (common English nouns
and verbs) with a few *marker* words hidden at random positions:

* positive markers: excellent, wonderful, superb, brilliant, delightful,
  fantastic, marvelous, outstanding;
* negative markers: awful, terrible, dreadful, horrible, atrocious, abysmal,
  dismal, lousy.

The label is the polarity of the *majority* of the markers (1 = positive). An
instance has ``a`` majority markers, ``1 <= a <= max_majority``, and ``b``
minority markers, ``0 <= b < a`` (so never a tie): about 40 % of instances (with
the default ``max_majority=3``) contain markers of both polarities, so a model
must weigh the evidence rather than spot a single word.

Design choices that make it a clean benchmark for explanations:

* the label is a function of the markers alone; distractors, positions and
  length (uniform in ``[min_len, max_len]``) are drawn independently of it;
* every word is lower-case letters only, so `tokenize` leaves each sentence
  exactly as generated (``tokenize(text) == tokens``) and the digit rule never
  fires; every word is in GloVe;
* labels are exactly balanced; everything is drawn from a NumPy generator
  seeded with ``seed``, so the same arguments give the same data.

``rationale[i]`` marks *every* marker token, of both polarities: the label is
a function of all of them (a minority marker is evidence against the label that
happens to be outvoted; adding one more would flip it). Use `MARKER_POLARITY`
(word -> +1/-1) to tell supporting from opposing evidence. Distractors are
irrelevant by construction, so an explanation can be scored against the truth,
e.g. by the attention mass on marked tokens or by precision/recall of its top-k
tokens against ``rationale``.

**The negation variant** (``negation=p > 0``, Chapter 15): each marker is, with
probability p, *negated*: preceded by a negator (`NEGATORS`: "not", "never"), which flips
its polarity ("not excellent" counts as negative). The label is the majority of the
*effective* polarities (`effective_polarity`), and ``rationale`` marks every marker and its
negator. A negator carries no polarity of its own, so a model or an explanation that looks
at one word at a time cannot get a negated marker right (the Average encoder, for one,
cannot represent it). Negators occur nowhere else. ``negation=0`` (the default) gives
exactly the data of the plain task.

``load_dataset("synthetic", n=..., min_len=..., max_len=..., max_majority=..., negation=..., seed=...)``
splits it 80/10/10 (stratified) like the other offline data sets; batches carry
the masks as ``Batch.rationale``, aligned to ``Batch.tokens``.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._checks import check_positive_int


__all__ = [
    "POSITIVE_MARKERS",
    "NEGATIVE_MARKERS",
    "MARKER_POLARITY",
    "NEGATORS",
    "effective_polarity",
    "DISTRACTORS",
    "SyntheticData",
    "make_synthetic",
    "needle_sentence",
]

POSITIVE_MARKERS: tuple[str, ...] = (
    "excellent", "wonderful", "superb", "brilliant", "delightful", "fantastic", "marvelous", "outstanding",
)
NEGATIVE_MARKERS: tuple[str, ...] = (
    "awful", "terrible", "dreadful", "horrible", "atrocious", "abysmal", "dismal", "lousy",
)
MARKER_POLARITY: dict[str, int] = {**{w: 1 for w in POSITIVE_MARKERS}, **{w: -1 for w in NEGATIVE_MARKERS}}
#: The negation variant's negators: each flips the polarity of the marker right after it.
NEGATORS: tuple[str, ...] = ("not", "never")

# 100 neutral, concrete, letters-only words (nouns and verbs).
DISTRACTORS: tuple[str, ...] = (
    # nouns
    "table", "window", "river", "garden", "kitchen", "pencil", "bottle", "chair", "street", "train",
    "bridge", "cloud", "paper", "letter", "mountain", "village", "basket", "bicycle", "doctor", "teacher",
    "market", "island", "forest", "button", "candle", "carpet", "ladder", "pocket", "ticket", "wall",
    "door", "road", "stone", "field", "engine", "shadow", "corner", "morning", "evening", "summer",
    "winter", "circle", "square", "minute", "coffee", "water", "bread", "apple", "lemon", "pepper",
    "metal", "glass", "wood", "cotton", "wire", "tower", "harbor", "station", "office", "library",
    "museum", "airport", "hotel", "farmer", "sailor", "driver", "student", "neighbor", "horse", "rabbit",
    # verbs
    "walk", "carry", "open", "close", "build", "paint", "count", "fold", "lift", "push",
    "pull", "read", "write", "drive", "cook", "wash", "plant", "climb", "listen", "travel",
    "measure", "arrive", "borrow", "deliver", "gather", "follow", "visit", "repair", "collect", "describe",
)
assert len(DISTRACTORS) == len(set(DISTRACTORS)) == 100
assert not set(DISTRACTORS) & set(MARKER_POLARITY)
assert not set(NEGATORS) & (set(DISTRACTORS) | set(MARKER_POLARITY))
assert all(w.isalpha() and w.islower() for w in DISTRACTORS + POSITIVE_MARKERS + NEGATIVE_MARKERS)


class SyntheticData(NamedTuple):
    texts: list[str]
    tokens: list[list[str]]
    labels: np.ndarray  # int64, 1 = positive majority
    rationales: list[np.ndarray]  # bool, True exactly on marker tokens


def make_synthetic(
    n: int = 4000,
    *,
    min_len: int = 10,
    max_len: int = 40,
    max_majority: int = 3,
    negation: float = 0.0,
    seed: int = 0,
) -> SyntheticData:
    """Generate ``n`` instances of the marker task (see the module docstring).

    ``min_len``/``max_len``: inclusive range of sentence lengths in tokens;
    ``max_majority``: the most majority-polarity markers in a sentence (the
    minority has fewer), so ``min_len`` must be at least ``2 * max_majority - 1``;
    ``negation``: the probability that a marker is negated (see the module docstring); with
    ``negation > 0`` a negator takes a slot too, so ``min_len`` must be at least
    ``2 * (2 * max_majority - 1)``.
    """
    check_positive_int(n, "n", minimum=2)
    check_positive_int(min_len, "min_len", minimum=1)
    check_positive_int(max_len, "max_len", minimum=1)
    check_positive_int(max_majority, "max_majority", minimum=1)
    check_positive_int(seed, "seed", minimum=0)
    if isinstance(negation, bool) or not isinstance(negation, (int, float, np.integer, np.floating)) \
            or not 0.0 <= float(negation) <= 1.0:
        raise ValueError(f"negation must be a probability in [0, 1], got {negation!r}")
    negation = float(negation)
    if negation > 0 and min_len < 2 * (2 * max_majority - 1):
        raise ValueError(
            f"with negation, min_len ({min_len}) must be >= 2 * (2 * max_majority - 1) = {2 * (2 * max_majority - 1)} "
            f"so the markers and their negators fit"
        )
    if max_len < min_len:
        raise ValueError(f"max_len ({max_len}) must be >= min_len ({min_len})")
    if min_len < 2 * max_majority - 1:
        raise ValueError(
            f"min_len ({min_len}) must be >= 2 * max_majority - 1 = {2 * max_majority - 1} so the markers fit"
        )
    rng = np.random.default_rng([seed, 7919])
    distractors = np.asarray(DISTRACTORS, dtype=object)
    pos_words = np.asarray(POSITIVE_MARKERS, dtype=object)
    neg_words = np.asarray(NEGATIVE_MARKERS, dtype=object)

    labels = rng.permutation(np.arange(n, dtype=np.int64) % 2)
    lengths = rng.integers(min_len, max_len + 1, size=n)
    majority = rng.integers(1, max_majority + 1, size=n)
    minority = np.floor(rng.random(n) * majority).astype(np.int64)  # uniform on 0..majority-1

    if negation > 0:
        return _negated(rng, labels, lengths, majority, minority, negation)
    texts, tokens, rationales = [], [], []
    for y, length, a, b in zip(labels.tolist(), lengths.tolist(), majority.tolist(), minority.tolist()):
        words = distractors[rng.integers(0, len(distractors), size=length)]
        where = rng.choice(length, size=a + b, replace=False)
        maj, mino = (pos_words, neg_words) if y == 1 else (neg_words, pos_words)
        words[where[:a]] = maj[rng.integers(0, len(maj), size=a)]
        words[where[a:]] = mino[rng.integers(0, len(mino), size=b)]
        rationale = np.zeros(length, dtype=bool)
        rationale[where] = True
        toks = words.tolist()
        texts.append(" ".join(toks))
        tokens.append(toks)
        rationales.append(rationale)
    return SyntheticData(texts, tokens, labels, rationales)


def _negated(rng, labels, lengths, majority, minority, negation: float) -> SyntheticData:
    """The negation variant of `make_synthetic`: markers by effective polarity, some behind a negator."""
    texts, tokens, rationales = [], [], []
    for y, length, a, b in zip(labels.tolist(), lengths.tolist(), majority.tolist(), minority.tolist()):
        sign = 1 if y == 1 else -1
        effective = np.array([sign] * a + [-sign] * b)  # +1 positive, -1 negative, after negation
        negated = rng.random(a + b) < negation
        surface = np.where(negated, -effective, effective)
        units = []
        for pol, neg in zip(surface.tolist(), negated.tolist()):
            words = POSITIVE_MARKERS if pol > 0 else NEGATIVE_MARKERS
            marker = words[int(rng.integers(len(words)))]
            units.append([NEGATORS[int(rng.integers(len(NEGATORS)))], marker] if neg else [marker])
        n_distractors = length - sum(map(len, units))
        units += [[DISTRACTORS[i]] for i in rng.integers(0, len(DISTRACTORS), size=n_distractors).tolist()]
        order = rng.permutation(len(units))
        toks = [w for i in order.tolist() for w in units[i]]
        rationale = np.array([w not in _DISTRACTOR_SET for w in toks], dtype=bool)
        texts.append(" ".join(toks))
        tokens.append(toks)
        rationales.append(rationale)
    return SyntheticData(texts, tokens, labels, rationales)


_DISTRACTOR_SET = frozenset(DISTRACTORS)


def effective_polarity(tokens) -> np.ndarray:
    """Each token's polarity in its sentence: +1/-1 for a marker (flipped by a negator right before it), else 0.

    The label of a synthetic sentence is the sign of the sum (never 0). Negators and
    distractors get 0.
    """
    if isinstance(tokens, str):
        raise ValueError("tokens must be a list of words, not a string")
    toks = list(tokens)
    out = np.zeros(len(toks), dtype=np.int8)
    for t, w in enumerate(toks):
        if w in MARKER_POLARITY:
            flip = t > 0 and toks[t - 1] in NEGATORS
            out[t] = -MARKER_POLARITY[w] if flip else MARKER_POLARITY[w]
    return out


def needle_sentence(marker: str, length: int, *, seed: int = 0) -> list[str]:
    """``length`` tokens: seeded random distractors with ``marker`` at a random position.

    The probe of Chapter 6: how does a model's output change as one piece of evidence
    is diluted among more and more irrelevant words?
    """
    check_positive_int(length, "length", minimum=1)
    check_positive_int(seed, "seed", minimum=0)
    if marker not in MARKER_POLARITY:
        raise ValueError(f"marker must be one of the marker words {sorted(MARKER_POLARITY)}, got {marker!r}")
    rng = np.random.default_rng(seed)
    words = [DISTRACTORS[i] for i in rng.integers(len(DISTRACTORS), size=length)]
    words[int(rng.integers(length))] = marker
    return words
