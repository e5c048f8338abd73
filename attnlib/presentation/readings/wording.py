"""Small pieces of English that several chapters' readings use."""
from __future__ import annotations

from collections.abc import Iterable

__all__ = ["listed"]


def listed(items: Iterable[str]) -> str:
    """``["a", "b", "c"]`` as ``"a, b and c"``; one item as itself. Raises ValueError when empty."""
    items = [str(i) for i in items]
    if not items:
        raise ValueError("listed() needs at least one item")
    return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else items[0]
