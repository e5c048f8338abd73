"""What several chapters' readings share: pieces of English, the models' names, an input check."""
from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["ENCODER_NAMES", "listed", "require_columns"]

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
