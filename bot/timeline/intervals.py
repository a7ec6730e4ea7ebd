"""Interval maths on epoch-millisecond [start, end) pairs: units from crons, expand, merge, subtract, missing."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from enum import Enum
from functools import lru_cache
from typing import Iterable, Sequence

from croniter import croniter

from bot.timeline.times import add_months, from_datetime, to_datetime

Interval = tuple[int, int]  # [start, end) in epoch milliseconds, UTC

_MINUTE = 60_000
_HOUR = 60 * _MINUTE
_DAY = 24 * _HOUR


class IntervalUnit(str, Enum):
    """The granularity of a model's intervals, derived from its cron as SQLMesh does.

    A weekly cron has daily intervals (SQLMesh has no week unit): the model runs weekly and
    processes the days since its last run.
    """

    YEAR = "year"
    MONTH = "month"
    DAY = "day"
    HOUR = "hour"
    HALF_HOUR = "half_hour"
    QUARTER_HOUR = "quarter_hour"
    FIVE_MINUTE = "five_minute"
    MINUTE = "minute"

    @property
    def millis(self) -> int:
        """Nominal length (months and years vary; used only to pick the unit)."""
        return _UNIT_MILLIS[self]

    @property
    def is_date_unit(self) -> bool:
        return self in (IntervalUnit.YEAR, IntervalUnit.MONTH, IntervalUnit.DAY)


_UNIT_MILLIS = {
    IntervalUnit.YEAR: 365 * _DAY,
    IntervalUnit.MONTH: 28 * _DAY,
    IntervalUnit.DAY: _DAY,
    IntervalUnit.HOUR: _HOUR,
    IntervalUnit.HALF_HOUR: 30 * _MINUTE,
    IntervalUnit.QUARTER_HOUR: 15 * _MINUTE,
    IntervalUnit.FIVE_MINUTE: 5 * _MINUTE,
    IntervalUnit.MINUTE: _MINUTE,
}


@lru_cache(maxsize=256)
def interval_unit(cron: str) -> IntervalUnit:
    """The largest unit no longer than the shortest gap between consecutive cron times.

    >>> interval_unit("@daily").value, interval_unit("0 * * * *").value, interval_unit("@weekly").value
    ('day', 'hour', 'day')
    >>> interval_unit("@monthly").value, interval_unit("*/5 * * * *").value
    ('month', 'five_minute')
    """
    it = croniter(cron, datetime(2024, 1, 1, tzinfo=timezone.utc))
    ticks = [from_datetime(it.get_next(datetime)) for _ in range(6)]
    gap = min(b - a for a, b in zip(ticks, ticks[1:]))
    for unit in IntervalUnit:
        if unit.millis <= gap:
            return unit
    return IntervalUnit.MINUTE


def floor_to_unit(ms: int, unit: IntervalUnit) -> int:
    """The start of the unit containing `ms`.

    >>> to_datetime(floor_to_unit(1706789045000, IntervalUnit.MONTH)).isoformat()
    '2024-02-01T00:00:00+00:00'
    """
    if unit is IntervalUnit.YEAR:
        return from_datetime(to_datetime(ms).replace(month=1, day=1, hour=0, minute=0, second=0, microsecond=0))
    if unit is IntervalUnit.MONTH:
        return from_datetime(to_datetime(ms).replace(day=1, hour=0, minute=0, second=0, microsecond=0))
    return ms - ms % unit.millis


def add_units(ms: int, unit: IntervalUnit, count: int = 1) -> int:
    """`ms` moved by `count` units (calendar-aware for months and years); `ms` must be unit-aligned."""
    if unit in (IntervalUnit.YEAR, IntervalUnit.MONTH):
        return add_months(ms, count * (12 if unit is IntervalUnit.YEAR else 1))
    return ms + count * unit.millis


def ceil_to_unit(ms: int, unit: IntervalUnit) -> int:
    floor = floor_to_unit(ms, unit)
    return floor if floor == ms else add_units(floor, unit)


@lru_cache(maxsize=1024)
def cron_floor(cron: str, ms: int) -> int:
    """The latest cron time at or before `ms`.

    >>> to_datetime(cron_floor("@daily", 1704112496000)).isoformat()
    '2024-01-01T00:00:00+00:00'
    >>> cron_floor("@daily", 1704067200000) == 1704067200000
    True
    """
    candidate = from_datetime(croniter(cron, to_datetime(ms) - timedelta(seconds=1)).get_next(datetime))
    if candidate <= ms:
        return candidate
    return from_datetime(croniter(cron, to_datetime(ms)).get_prev(datetime))


def cron_prev(cron: str, ms: int) -> int:
    """The last cron time strictly before `ms`.

    >>> to_datetime(cron_prev("@daily", 1704067200000)).isoformat()
    '2023-12-31T00:00:00+00:00'
    """
    return from_datetime(croniter(cron, to_datetime(ms)).get_prev(datetime))


def cron_next(cron: str, ms: int) -> int:
    """The first cron time strictly after `ms`.

    >>> to_datetime(cron_next("@hourly", 1704067200000)).isoformat()
    '2024-01-01T01:00:00+00:00'
    """
    return from_datetime(croniter(cron, to_datetime(ms)).get_next(datetime))


def expand(start: int, end: int, unit: IntervalUnit) -> list[Interval]:
    """Whole units covering [start, end): start is floored, end ceiled.

    >>> expand(0, 2 * 86_400_000, IntervalUnit.DAY)
    [(0, 86400000), (86400000, 172800000)]
    >>> expand(5, 5, IntervalUnit.DAY)
    []
    """
    result: list[Interval] = []
    current = floor_to_unit(start, unit)
    stop = ceil_to_unit(end, unit) if end > start else current
    while current < stop:
        following = add_units(current, unit)
        result.append((current, following))
        current = following
    return result


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, with overlapping or touching intervals joined.

    >>> merge([(5, 8), (0, 2), (2, 4), (7, 9)])
    [(0, 4), (5, 9)]
    """
    result: list[Interval] = []
    for low, high in sorted(intervals):
        if high <= low:
            continue
        if result and low <= result[-1][1]:
            result[-1] = (result[-1][0], max(result[-1][1], high))
        else:
            result.append((low, high))
    return result


def subtract(intervals: Iterable[Interval], removed: Iterable[Interval]) -> list[Interval]:
    """The parts of `intervals` not covered by `removed` (both merged first).

    >>> subtract([(0, 10)], [(2, 4), (6, 7)])
    [(0, 2), (4, 6), (7, 10)]
    >>> subtract([(0, 10)], [(0, 10)])
    []
    """
    cuts = merge(removed)
    result: list[Interval] = []
    for low, high in merge(intervals):
        cursor = low
        for cut_low, cut_high in cuts:
            if cut_high <= cursor or cut_low >= high:
                continue
            if cut_low > cursor:
                result.append((cursor, cut_low))
            cursor = max(cursor, cut_high)
            if cursor >= high:
                break
        if cursor < high:
            result.append((cursor, high))
    return result


def missing_intervals(
    *,
    start: int,
    end: int | None,
    cron: str,
    recorded: Iterable[Interval],
    lookback: int = 0,
    execution_time: int,
) -> list[Interval]:
    """Unit intervals from `start` to the last complete cron interval before `execution_time`,
    capped at `end` (exclusive), that `recorded` does not fully cover.

    A missing interval also makes the `lookback` intervals before it missing (SQLMesh: the latest
    L intervals are recomputed together with the new one).

    >>> day = 86_400_000
    >>> missing_intervals(start=0, end=None, cron="@daily", recorded=[(0, day)], execution_time=3 * day + 5)
    [(86400000, 172800000), (172800000, 259200000)]
    >>> missing_intervals(start=0, end=None, cron="@daily", recorded=[(0, 2 * day)], lookback=1,
    ...                   execution_time=3 * day)
    [(86400000, 172800000), (172800000, 259200000)]
    """
    unit = interval_unit(cron)
    first = floor_to_unit(start, unit)
    upper = floor_to_unit(cron_floor(cron, execution_time), unit)
    if end is not None:
        upper = min(upper, floor_to_unit(end, unit))
    if upper <= first:
        return []
    gaps = subtract([(first, upper)], recorded)
    runs = merge((floor_to_unit(low, unit), ceil_to_unit(high, unit)) for low, high in gaps)
    if lookback:
        runs = merge((max(first, add_units(low, unit, -lookback)), high) for low, high in runs)
    return [interval for low, high in runs for interval in expand(low, min(high, upper), unit)]


def batches(intervals: Sequence[Interval], batch_size: int | None) -> list[Interval]:
    """Group contiguous unit intervals into batches of at most `batch_size` (None: no limit).

    >>> batches([(0, 1), (1, 2), (2, 3), (5, 6)], None)
    [(0, 3), (5, 6)]
    >>> batches([(0, 1), (1, 2), (2, 3), (5, 6)], 2)
    [(0, 2), (2, 3), (5, 6)]
    """
    result: list[Interval] = []
    count = 0
    for low, high in sorted(intervals):
        contiguous = bool(result) and result[-1][1] == low
        if contiguous and (batch_size is None or count < batch_size):
            result[-1] = (result[-1][0], high)
            count += 1
        else:
            result.append((low, high))
            count = 1
    return result


def format_interval(interval: Interval, unit: IntervalUnit) -> str:
    """Human form with an inclusive end: dates for daily and coarser units, timestamps otherwise.

    >>> format_interval((1704067200000, 1706745600000), IntervalUnit.DAY)
    '2024-01-01 - 2024-01-31'
    >>> format_interval((1704067200000, 1704088800000), IntervalUnit.HOUR)
    '2024-01-01 00:00:00 - 2024-01-01 05:59:59'
    """
    low, high = interval
    last = to_datetime(high - 1)
    if unit.is_date_unit:
        return f"{to_datetime(low):%Y-%m-%d} - {last:%Y-%m-%d}"
    return f"{to_datetime(low):%Y-%m-%d %H:%M:%S} - {last:%Y-%m-%d %H:%M:%S}"


def inclusive_end_date(interval: Interval) -> tuple[str, str]:
    """(`YYYY-MM-DD` of the start, `YYYY-MM-DD` of the last millisecond), as plan JSON lists them."""
    return f"{to_datetime(interval[0]):%Y-%m-%d}", f"{to_datetime(interval[1] - 1):%Y-%m-%d}"


def replay(records: Iterable[tuple[int, int, bool]]) -> list[Interval]:
    """Fold append-only (start, end, is_removed) records, oldest first, into merged intervals (state's rows).

    >>> replay([(0, 10, False), (0, 5, True), (0, 3, False)])
    [(0, 3), (5, 10)]
    """
    current: list[Interval] = []
    for start, end, is_removed in records:
        current = subtract(current, [(start, end)]) if is_removed else merge([*current, (start, end)])
    return current
