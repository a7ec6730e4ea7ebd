"""Interval maths: units from crons, missing intervals with lookback/end caps/gaps, batching, formatting."""

from __future__ import annotations

import doctest

import pytest

import bot.timeline.intervals as intervals
from bot.timeline.intervals import (IntervalUnit, batches, cron_floor, expand, format_interval,
                           interval_unit, merge, missing_intervals, subtract)
from bot.timeline.times import to_ms

DAY = 86_400_000
HOUR = 3_600_000
JAN1 = to_ms("2024-01-01")


def test_doctests():
    assert doctest.testmod(intervals).failed == 0


@pytest.mark.parametrize("cron, unit", [
    ("@daily", IntervalUnit.DAY), ("0 6 * * *", IntervalUnit.DAY), ("@hourly", IntervalUnit.HOUR),
    ("15 * * * *", IntervalUnit.HOUR), ("*/30 * * * *", IntervalUnit.HALF_HOUR),
    ("*/15 * * * *", IntervalUnit.QUARTER_HOUR), ("@monthly", IntervalUnit.MONTH),
    ("@yearly", IntervalUnit.YEAR), ("@weekly", IntervalUnit.DAY), ("* * * * *", IntervalUnit.MINUTE),
])
def test_interval_unit_from_cron(cron, unit):
    assert interval_unit(cron) is unit


def test_daily_missing_stops_at_last_complete_day_and_subtracts_recorded():
    recorded = [(JAN1, JAN1 + 2 * DAY), (JAN1 + 4 * DAY, JAN1 + 5 * DAY)]
    missing = missing_intervals(start=JAN1, end=None, cron="@daily", recorded=recorded,
                                execution_time=JAN1 + 6 * DAY + 5 * HOUR)
    assert missing == [(JAN1 + 2 * DAY, JAN1 + 3 * DAY), (JAN1 + 3 * DAY, JAN1 + 4 * DAY),
                       (JAN1 + 5 * DAY, JAN1 + 6 * DAY)]


def test_daily_cron_at_6am_waits_for_its_run_time():
    early = missing_intervals(start=JAN1, end=None, cron="0 6 * * *", recorded=[],
                              execution_time=JAN1 + DAY + 5 * HOUR)
    late = missing_intervals(start=JAN1, end=None, cron="0 6 * * *", recorded=[],
                             execution_time=JAN1 + DAY + 7 * HOUR)
    assert early == [] and late == [(JAN1, JAN1 + DAY)]


def test_hourly_cron_gives_hour_intervals():
    missing = missing_intervals(start=JAN1, end=None, cron="@hourly", recorded=[(JAN1, JAN1 + HOUR)],
                                execution_time=JAN1 + 3 * HOUR + 59_000)
    assert missing == [(JAN1 + HOUR, JAN1 + 2 * HOUR), (JAN1 + 2 * HOUR, JAN1 + 3 * HOUR)]


def test_end_caps_the_range_and_start_is_floored():
    missing = missing_intervals(start=JAN1 + 5 * HOUR, end=JAN1 + 2 * DAY, cron="@daily", recorded=[],
                                execution_time=JAN1 + 30 * DAY)
    assert missing == [(JAN1, JAN1 + DAY), (JAN1 + DAY, JAN1 + 2 * DAY)]


def test_partially_recorded_day_counts_as_missing():
    missing = missing_intervals(start=JAN1, end=None, cron="@daily", recorded=[(JAN1, JAN1 + HOUR)],
                                execution_time=JAN1 + DAY)
    assert missing == [(JAN1, JAN1 + DAY)]


def test_lookback_recomputes_previous_intervals_but_not_before_start():
    recorded = [(JAN1, JAN1 + 5 * DAY)]
    missing = missing_intervals(start=JAN1, end=None, cron="@daily", recorded=recorded, lookback=2,
                                execution_time=JAN1 + 6 * DAY)
    assert missing == [(JAN1 + 3 * DAY, JAN1 + 4 * DAY), (JAN1 + 4 * DAY, JAN1 + 5 * DAY),
                       (JAN1 + 5 * DAY, JAN1 + 6 * DAY)]
    assert missing_intervals(start=JAN1, end=None, cron="@daily", recorded=[(JAN1, JAN1 + 6 * DAY)],
                             lookback=2, execution_time=JAN1 + 6 * DAY) == []
    first = missing_intervals(start=JAN1, end=None, cron="@daily", recorded=[], lookback=3,
                              execution_time=JAN1 + DAY)
    assert first == [(JAN1, JAN1 + DAY)]


def test_monthly_intervals_follow_the_calendar():
    feb1, mar1 = to_ms("2024-02-01"), to_ms("2024-03-01")
    assert expand(JAN1, mar1, IntervalUnit.MONTH) == [(JAN1, feb1), (feb1, mar1)]
    missing = missing_intervals(start=JAN1, end=None, cron="@monthly", recorded=[],
                                execution_time=mar1 + DAY)
    assert missing == [(JAN1, feb1), (feb1, mar1)]
    assert format_interval((feb1, mar1), IntervalUnit.MONTH) == "2024-02-01 - 2024-02-29"


def test_batches_respect_size_and_gaps():
    days = [(JAN1 + i * DAY, JAN1 + (i + 1) * DAY) for i in (0, 1, 2, 3, 4, 7, 8)]
    assert batches(days, None) == [(JAN1, JAN1 + 5 * DAY), (JAN1 + 7 * DAY, JAN1 + 9 * DAY)]
    assert batches(days, 2) == [(JAN1, JAN1 + 2 * DAY), (JAN1 + 2 * DAY, JAN1 + 4 * DAY),
                                (JAN1 + 4 * DAY, JAN1 + 5 * DAY), (JAN1 + 7 * DAY, JAN1 + 9 * DAY)]
    assert batches([], 3) == []


def test_merge_and_subtract_edge_cases():
    assert merge([(3, 3), (1, 2)]) == [(1, 2)]
    assert subtract([(0, 10), (20, 30)], [(5, 25)]) == [(0, 5), (25, 30)]
    assert subtract([(0, 10)], []) == [(0, 10)]


def test_cron_floor_on_and_between_ticks():
    assert cron_floor("@daily", JAN1) == JAN1
    assert cron_floor("@daily", JAN1 - 1) == JAN1 - DAY
    assert cron_floor("0 6 * * *", JAN1 + 5 * HOUR) == JAN1 - DAY + 6 * HOUR


def test_format_interval_inclusive_end():
    assert format_interval((JAN1, JAN1 + 31 * DAY), IntervalUnit.DAY) == "2024-01-01 - 2024-01-31"
    assert format_interval((JAN1, JAN1 + DAY), IntervalUnit.DAY) == "2024-01-01 - 2024-01-01"
    assert format_interval((JAN1, JAN1 + HOUR), IntervalUnit.HOUR) == "2024-01-01 00:00:00 - 2024-01-01 00:59:59"
