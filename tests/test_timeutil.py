"""Tests for bot.project.timeutil: parsing dates and relative phrases to epoch ms, formatting."""

from __future__ import annotations

import doctest
from datetime import date, datetime, timezone

import pytest

from bot.errors import ConfigError
from bot.project import timeutil
from bot.project.timeutil import now_ms, to_datetime, to_ds, to_ms, to_ts

JAN1 = 1_704_067_200_000  # 2024-01-01 00:00:00 UTC
DAY = 86_400_000


def test_doctests() -> None:
    assert doctest.testmod(timeutil, optionflags=doctest.ELLIPSIS).failed == 0


@pytest.mark.parametrize("value", [
    JAN1, "2024-01-01", "2024-01-01 00:00:00", "2024-01-01T00:00:00", "2024-01-01T00:00:00Z",
    "2024-01-01T01:00:00+01:00", date(2024, 1, 1), datetime(2024, 1, 1),
    datetime(2024, 1, 1, tzinfo=timezone.utc), str(JAN1),
])
def test_absolute_values_are_utc(value) -> None:
    assert to_ms(value) == JAN1


@pytest.mark.parametrize(("phrase", "expected"), [
    ("now", JAN1 + 12 * 3_600_000),
    ("today", JAN1),
    ("yesterday", JAN1 - DAY),
    ("tomorrow", JAN1 + DAY),
    ("2 days ago", JAN1 + 12 * 3_600_000 - 2 * DAY),
    ("1 week ago", JAN1 + 12 * 3_600_000 - 7 * DAY),
    ("in 1 week", JAN1 + 12 * 3_600_000 + 7 * DAY),
    ("In 3 Hours", JAN1 + 15 * 3_600_000),
    ("1 year ago", to_ms("2023-01-01 12:00:00")),
    ("1 month ago", to_ms("2023-12-01 12:00:00")),
])
def test_relative_phrases(phrase: str, expected: int) -> None:
    assert to_ms(phrase, relative_base=JAN1 + 12 * 3_600_000) == expected


def test_month_arithmetic_clamps_to_month_end() -> None:
    assert to_ds(to_ms("1 month ago", relative_base=to_ms("2024-03-31"))) == "2024-02-29"


def test_ttl_relative_to_zero_is_a_duration() -> None:
    assert to_ms("in 1 week", relative_base=0) == 7 * DAY


def test_relative_defaults_to_now() -> None:
    before = now_ms()
    assert before - DAY - 5_000 <= to_ms("1 day ago") <= now_ms() - DAY


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
