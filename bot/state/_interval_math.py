"""Fold the append-only interval rows of state into merged intervals (private to state)."""

from __future__ import annotations

from typing import Iterable

from bot.intervals import Interval, merge, subtract

__all__ = ["Interval", "merge", "replay", "subtract"]


def replay(records: Iterable[tuple[int, int, bool]]) -> list[Interval]:
    """Fold append-only (start, end, is_removed) records, oldest first, into merged intervals.

    >>> replay([(0, 10, False), (0, 5, True), (0, 3, False)])
    [(0, 3), (5, 10)]
    """
    current: list[Interval] = []
    for start, end, is_removed in records:
        current = subtract(current, [(start, end)]) if is_removed else merge([*current, (start, end)])
    return current
