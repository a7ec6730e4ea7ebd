"""Pure interval arithmetic on half-open [start, end) millisecond ranges (private to state)."""

from __future__ import annotations

from typing import Iterable

Interval = tuple[int, int]


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """Sort and merge overlapping or touching intervals; drops empty ones.

    >>> merge([(5, 10), (0, 5), (20, 30), (25, 26)])
    [(0, 10), (20, 30)]
    """
    result: list[Interval] = []
    for start, end in sorted(i for i in intervals if i[0] < i[1]):
        if result and start <= result[-1][1]:
            result[-1] = (result[-1][0], max(result[-1][1], end))
        else:
            result.append((start, end))
    return result


def subtract(intervals: Iterable[Interval], removed: Interval) -> list[Interval]:
    """Remove one interval from a set of intervals.

    >>> subtract([(0, 10), (20, 30)], (5, 25))
    [(0, 5), (25, 30)]
    """
    cut_start, cut_end = removed
    result: list[Interval] = []
    for start, end in intervals:
        if end <= cut_start or start >= cut_end:
            result.append((start, end))
            continue
        if start < cut_start:
            result.append((start, cut_start))
        if end > cut_end:
            result.append((cut_end, end))
    return merge(result)


def replay(records: Iterable[tuple[int, int, bool]]) -> list[Interval]:
    """Fold append-only (start, end, is_removed) records, oldest first, into merged intervals.

    >>> replay([(0, 10, False), (0, 5, True), (0, 3, False)])
    [(0, 3), (5, 10)]
    """
    current: list[Interval] = []
    for start, end, is_removed in records:
        current = subtract(current, (start, end)) if is_removed else merge(current + [(start, end)])
    return current
