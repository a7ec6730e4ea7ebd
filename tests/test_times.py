"""Tests for bot.timeline.times: parsing dates and relative phrases to epoch ms, formatting."""

from __future__ import annotations

import doctest
from datetime import date, datetime, timezone

import pytest

from bot.errors import ConfigError
from bot.timeline import times
from bot.timeline.times import (check_ttl, exclusive_end_ms, expires_ms, inclusive_end, now_ms, to_datetime,
                                  to_ds, to_ms, to_ts)

JAN1 = 1_704_067_200_000  # 2024-01-01 00:00:00 UTC
DAY = 86_400_000


def test_doctests() -> None:
    assert doctest.testmod(times, optionflags=doctest.ELLIPSIS).failed == 0


@pytest.mark.parametrize("value", [
    JAN1, "2024-01-01", "2024-01-01 00:00:00", "2024-01-01T00:00:00", "2024-01-01T00:00:00Z",
    "2024-01-01T01:00:00+01:00", date(2024, 1, 1), datetime(2024, 1, 1),
    datetime(2024, 1, 1, tzinfo=timezone.utc), str(JAN1),
])
def test_absolute_values_are_utc(value) -> None:
    assert to_ms(value) == JAN1


# Expected values are what SQLMesh 0.236.4's `sqlmesh.utils.date.to_timestamp(phrase, relative_base=BASE)`
# returned (DuckDB project, run by hand): whole-day phrases with a numeric count count from BASE's midnight,
# clock phrases and 'a/an/one ...' from BASE itself; a bare span ('3 days') lies in the past.
BASE = 1_711_895_415_000   # 2024-03-31 14:30:15 UTC, the last day of a 31-day month


@pytest.mark.parametrize(("phrase", "expected"), [
    ("now", 1_711_895_415_000),                  # 2024-03-31 14:30:15
    ("today", 1_711_843_200_000),                # 2024-03-31
    ("yesterday", 1_711_756_800_000),            # 2024-03-30
    ("tomorrow", 1_711_929_600_000),             # 2024-04-01
    ("1 day ago", 1_711_756_800_000),            # 2024-03-30
    ("2 days ago", 1_711_670_400_000),           # 2024-03-29
    ("1 week ago", 1_711_238_400_000),           # 2024-03-24
    ("2 weeks ago", 1_710_633_600_000),          # 2024-03-17
    ("1 month ago", 1_709_164_800_000),          # 2024-02-29: calendar month, clamped
    ("1 months ago", 1_709_164_800_000),
    ("2 months ago", 1_706_659_200_000),         # 2024-01-31
    ("1 year ago", 1_680_220_800_000),           # 2023-03-31
    ("in 1 day", 1_711_929_600_000),             # 2024-04-01
    ("in 7 days", 1_712_448_000_000),            # 2024-04-07
    ("in 1 week", 1_712_448_000_000),            # 2024-04-07
    ("in 1 month", 1_714_435_200_000),           # 2024-04-30
    ("in 1 year", 1_743_379_200_000),            # 2025-03-31
    ("in 0 days", 1_711_843_200_000),            # today's midnight: in the past
    ("3 days", 1_711_584_000_000),               # 2024-03-28: a bare span is a past one
    ("1 week", 1_711_238_400_000),
    ("2 weeks", 1_710_633_600_000),
    ("1 hour ago", 1_711_891_815_000),           # 13:30:15
    ("3 hours ago", 1_711_884_615_000),          # 11:30:15
    ("90 minutes ago", 1_711_890_015_000),       # 13:00:15
    ("5 minutes ago", 1_711_895_115_000),
    ("30 seconds ago", 1_711_895_385_000),
    ("in 2 hours", 1_711_902_615_000),           # 16:30:15
    ("a week ago", 1_711_290_615_000),           # 2024-03-24 14:30:15: not counted from midnight
    ("an hour ago", 1_711_891_815_000),
    ("one day ago", 1_711_809_015_000),          # 2024-03-30 14:30:15
    ("In 3 Hours", 1_711_906_215_000),
    ("2024-01-07", 1_704_585_600_000),
    ("2024-1-7", 1_704_585_600_000),
    ("20240107", 1_704_585_600_000),             # digits read as YYYYMMDD first
    ("2024-02-29", 1_709_164_800_000),
    ("2024-01-07 12:30:00", 1_704_630_600_000),
    ("2024-01-07T12:30:00", 1_704_630_600_000),
    ("2024-01-07T12:30:00Z", 1_704_630_600_000),
    ("2024-01-07T12:30:00+01:00", 1_704_627_000_000),
    ("Jan 7 2024", 1_704_585_600_000),
    ("2024/01/07", 1_704_585_600_000),
    ("1704067200000", 1_704_067_200_000),        # otherwise digits are epoch ms
    ("0", 0),
])
def test_parses_like_sqlmesh(phrase: str, expected: int) -> None:
    assert to_ms(phrase, relative_base=BASE) == expected


@pytest.mark.parametrize(("phrase", "expected"), [
    ("in 1 week", 1_712_500_215_000),            # 2024-04-07 14:30:15
    ("in 1 month", 1_714_487_415_000),           # 2024-04-30 14:30:15
    ("1 month ago", 1_709_217_015_000),          # 2024-02-29 14:30:15
    ("in 2 hours", 1_711_902_615_000),
])
def test_exact_base_for_expiry(phrase: str, expected: int) -> None:
    """SQLMesh's snapshot expiry counts the TTL from `updated_ts` itself (check_categorical... False)."""
    assert to_ms(phrase, relative_base=BASE, floor_days=False) == expected
    assert expires_ms(phrase, since=BASE) == expected


@pytest.mark.parametrize(("base", "phrase", "expected"), [
    ("2024-01-31", "1 month ago", "2023-12-31"),
    ("2024-01-31", "in 1 month", "2024-02-29"),
    ("2024-02-29", "1 month ago", "2024-01-29"),
    ("2024-02-29", "in 1 month", "2024-03-29"),
    ("2024-02-29", "1 year ago", "2023-02-28"),
])
def test_month_and_year_arithmetic(base: str, phrase: str, expected: str) -> None:
    assert to_ds(to_ms(phrase, relative_base=to_ms(base))) == expected


# SQLMesh's make_inclusive_end: a day (date, 'YYYY-MM-DD', 'YYYYMMDD', 'YYYY-M-D') covers the whole day;
# a datetime, an epoch or a relative phrase is an exclusive moment.
@pytest.mark.parametrize(("end", "last"), [
    ("2024-01-07", "2024-01-07 23:59:59.999999"),
    ("20240107", "2024-01-07 23:59:59.999999"),
    ("2024-1-7", "2024-01-07 23:59:59.999999"),
    (date(2024, 1, 7), "2024-01-07 23:59:59.999999"),
    ("2024-01-07 00:00:00", "2024-01-06 23:59:59.999999"),
    ("2024-01-07 12:00:00", "2024-01-07 11:59:59.999999"),
    (datetime(2024, 1, 7), "2024-01-06 23:59:59.999999"),
    (1_704_585_600_000, "2024-01-06 23:59:59.999999"),
    ("1704585600000", "2024-01-06 23:59:59.999999"),
    ("yesterday", "2024-03-29 23:59:59.999999"),
])
def test_inclusive_end_rule(end, last: str) -> None:
    assert inclusive_end(end, relative_base=BASE).replace(tzinfo=None).isoformat(sep=" ") == last
    assert to_ts(exclusive_end_ms(end, relative_base=BASE) - 1, micros=999) == last


def test_every_end_reader_uses_the_one_rule(tmp_path) -> None:
    """The shim's make_inclusive, `render`/`audit`/`evaluate` and plans all read `end` through exclusive_end_ms."""
    from bot.context import Context
    from bot.project.example import write_example
    from bot.project.sqlmesh_date import make_inclusive

    root = tmp_path / "shop"
    write_example(root)
    (root / "models" / "ends.sql").write_text("MODEL (name shop.ends, kind FULL);\nSELECT @end_ts AS last_moment\n")
    context = Context(root)
    assert "2024-01-07 23:59:59.999999" in context.render("shop.ends", start="2024-01-01", end="2024-01-07")
    assert "2024-01-07 11:59:59.999999" in context.render("shop.ends", start="2024-01-01",
                                                          end="2024-01-07 12:00:00")

    start, last = make_inclusive("2024-01-01", "2024-01-07")
    assert (start.isoformat(), last.isoformat()) == ("2024-01-01T00:00:00+00:00", "2024-01-07T23:59:59.999999+00:00")
    assert make_inclusive("2024-01-01", "2024-01-07 12:00:00")[1].isoformat() == "2024-01-07T11:59:59.999999+00:00"


def test_month_arithmetic_clamps_to_month_end() -> None:
    assert to_ds(to_ms("1 month ago", relative_base=to_ms("2024-03-31"))) == "2024-02-29"


def test_ttl_relative_to_zero_is_a_duration() -> None:
    assert to_ms("in 1 week", relative_base=0) == 7 * DAY


def test_relative_defaults_to_now() -> None:
    """As in SQLMesh, the default base is now, floored to the minute."""
    before = now_ms()
    assert before - 3 * 3_600_000 - 60_000 <= to_ms("3 hours ago") <= now_ms() - 3 * 3_600_000
    assert to_ms("3 hours ago") % 60_000 == 0


@pytest.mark.parametrize("bad", ["soon", "2024-13-01", "3 fortnights ago", "in 2 days ago", True, 1.5])
def test_bad_values_name_the_value(bad) -> None:
    with pytest.raises(ConfigError) as info:
        to_ms(bad)
    assert repr(bad) in str(info.value)
    assert isinstance(info.value, ValueError)


def test_formatting() -> None:
    assert to_datetime(JAN1) == datetime(2024, 1, 1, tzinfo=timezone.utc)
    assert to_ds(JAN1 + DAY - 1) == "2024-01-01"
    assert to_ts(JAN1 + DAY - 1, micros=999) == "2024-01-01 23:59:59.999999"
    assert to_ts(JAN1 + 1_500) == "2024-01-01 00:00:01.500000"


@pytest.mark.parametrize("ttl", ["in 1 week", "in 2 hours", "in 1 month", "in 1 day"])
def test_future_ttls_are_accepted(ttl: str) -> None:
    check_ttl(ttl)


@pytest.mark.parametrize(("ttl", "reason"), [
    ("1 week", "is in the past"), ("2 days ago", "is in the past"), ("in 0 seconds ago", "cannot understand"),
    ("soon", "cannot understand"),
])
def test_bad_ttls_are_refused(ttl: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason):
        check_ttl(ttl)
