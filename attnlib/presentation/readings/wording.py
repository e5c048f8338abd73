"""What several chapters' readings share: pieces of English, the models' names, an input check."""
from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["ENCODER_NAMES", "listed", "require_columns", "some_of", "tally"]

#: J&W's encoders as the prose names them.
ENCODER_NAMES = {"lstm": "BiLSTM", "cnn": "CNN", "average": "Average model"}


def listed(items: Iterable[str]) -> str:
    """``["a", "b", "c"]`` as ``"a, b and c"``; one item as itself. Raises ValueError when empty."""
    items = [str(i) for i in items]
    if not items:
        raise ValueError("listed() needs at least one item")
    return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else items[0]


def require_columns(frame, columns: Sequence[str], what: str) -> None:
    """Raise ValueError naming ``what`` when ``frame`` (a DataFrame) lacks any of ``columns``."""
    have = getattr(frame, "columns", None)
    if have is None:
        raise ValueError(f"{what} must be a DataFrame, got {type(frame).__name__}")
    missing = [c for c in columns if c not in have]
    if missing:
        raise ValueError(f"{what} has no column {', '.join(map(repr, missing))}")


def tally(words: Sequence[str], noun: str = "comparisons") -> str:
    """How a set of verdicts came out, in words, the most frequent first: ``["below"] * 4`` ->
    "below in all 4 comparisons"; two alike -> "below in both comparisons"; mixed -> "below in
    3 of the 4 comparisons and within noise in 1", "within noise in 2 of the 4 comparisons,
    below in 1 and above in 1" (ties keep the order of first appearance). Raises ValueError
    when ``words`` is empty."""
    words = [str(w) for w in words]
    if not words:
        raise ValueError("tally() needs at least one verdict")
    counts: dict[str, int] = {}
    for w in words:
        counts[w] = counts.get(w, 0) + 1
    parts = sorted(counts.items(), key=lambda kv: -kv[1])
    if len(parts) == 1:
        return f"{words[0]} in " + (f"both {noun}" if len(words) == 2 else f"all {len(words)} {noun}")
    (w0, n0), *rest = parts
    return f"{w0} in {n0} of the {len(words)} {noun}" + (", " if len(rest) > 1 else " and ") + listed(
        f"{w} in {n}" for w, n in rest)


def some_of(k: int, n: int, noun: str) -> str:
    """How many of ``n`` things, as a sentence says it: 0 -> "none of the 16 heads", ``n`` ->
    "all 16 heads" ("both heads" for 2), else "3 of the 16 heads". ``noun`` is the plural.
    Raises ValueError unless 0 <= k <= n."""
    k, n = int(k), int(n)
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if k == 0:
        return f"none of the {n} {noun}"
    if k == n:
        return f"both {noun}" if n == 2 else f"all {n} {noun}"
    return f"{k} of the {n} {noun}"
