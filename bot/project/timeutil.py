"""Epoch-millisecond time helpers, all UTC: parse dates and relative phrases, format ds/ts strings."""

from __future__ import annotations

import re
import time
from datetime import date, datetime, timedelta, timezone

from bot.errors import ConfigError

MS_PER_DAY = 86_400_000

_RELATIVE = re.compile(
    r"^(?:(?P<in>in)\s+)?(?P<n>\d+|an?|one)\s+(?P<unit>second|minute|hour|day|week|month|year)s?"
    r"(?:\s+(?P<ago>ago))?$"
)
_UNIT_MS = {"second": 1_000, "minute": 60_000, "hour": 3_600_000, "day": MS_PER_DAY, "week": 7 * MS_PER_DAY}


class TimeParseError(ConfigError, ValueError):
    """A date, timestamp or relative phrase could not be understood."""


def now_ms() -> int:
    """The current time in epoch milliseconds."""
    return time.time_ns() // 1_000_000


def to_datetime(ms: int) -> datetime:
    """Epoch ms to an aware UTC datetime.

    >>> to_datetime(86_400_000)
    datetime.datetime(1970, 1, 2, 0, 0, tzinfo=datetime.timezone.utc)
    """
    return datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(milliseconds=ms)


def to_ds(ms: int) -> str:
    """Epoch ms to a `YYYY-MM-DD` date string.

    >>> to_ds(1704067200000)
    '2024-01-01'
    """
    return to_datetime(ms).strftime("%Y-%m-%d")


def to_ts(ms: int, *, micros: int = 0) -> str:
    """Epoch ms (plus extra microseconds) to `YYYY-MM-DD HH:MM:SS[.ffffff]`.

    >>> to_ts(1704067200000)
    '2024-01-01 00:00:00'
    >>> to_ts(1704153599999, micros=999)
    '2024-01-01 23:59:59.999999'
    """
    moment = to_datetime(ms) + timedelta(microseconds=micros)
    return moment.replace(tzinfo=None).isoformat(sep=" ")


def _from_datetime(value: datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    delta = value - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000 + delta.microseconds // 1_000


def _add_months(ms: int, months: int) -> int:
    moment = to_datetime(ms)
    total = moment.year * 12 + (moment.month - 1) + months
    year, month = divmod(total, 12)
    month += 1
    day = moment.day
    while True:
        try:
            return _from_datetime(moment.replace(year=year, month=month, day=day))
        except ValueError:
            day -= 1


def _midnight(ms: int) -> int:
    return ms - ms % MS_PER_DAY


def _relative(text: str, base: int) -> int | None:
    named = {"now": base, "today": _midnight(base), "yesterday": _midnight(base) - MS_PER_DAY,
             "tomorrow": _midnight(base) + MS_PER_DAY}
    if text in named:
        return named[text]
    match = _RELATIVE.match(text)
    if not match or bool(match["in"]) == bool(match["ago"]):
        return None
    count = 1 if match["n"] in ("a", "an", "one") else int(match["n"])
    sign = 1 if match["in"] else -1
    unit = match["unit"]
    if unit in ("month", "year"):
        return _add_months(base, sign * count * (12 if unit == "year" else 1))
    return base + sign * count * _UNIT_MS[unit]


def _parse_text(text: str, relative_base: int | None) -> int:
    cleaned = " ".join(text.strip().lower().split())
    if re.fullmatch(r"-?\d+", cleaned):
        return int(cleaned)
    relative = _relative(cleaned, now_ms() if relative_base is None else relative_base)
    if relative is not None:
        return relative
    iso = text.strip().replace("Z", "+00:00").replace("z", "+00:00")
    try:
        return _from_datetime(datetime.fromisoformat(iso))
    except ValueError:
        pass
    raise TimeParseError(
        f"cannot understand the time {text!r}: use epoch ms, 'YYYY-MM-DD', 'YYYY-MM-DD HH:MM:SS', "
        "an ISO datetime, or a phrase like '2 days ago', 'yesterday', 'now', 'in 1 week'"
    )


def to_ms(value: int | str | date | datetime, *, relative_base: int | None = None) -> int:
    """Any supported time value to epoch milliseconds (UTC).

    Relative phrases are resolved against `relative_base` (epoch ms; default now).

    >>> to_ms('2024-01-01')
    1704067200000
    >>> to_ms('2024-01-01 12:00:00')
    1704110400000
    >>> to_ms('2024-01-01T00:00:00+01:00')
    1704063600000
    >>> to_ms(date(2024, 1, 2))
    1704153600000
    >>> to_ms('1 day ago', relative_base=1704153600000)
    1704067200000
    >>> to_ms('in 1 week', relative_base=0)
    604800000
    >>> to_ms('1 year ago', relative_base=1709251200000)  # 2024-03-01
    1677628800000
    >>> to_ms('yesterday', relative_base=1704110400000)
    1703980800000
    >>> to_ms('soon')  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ...
    bot.project.timeutil.TimeParseError: cannot understand the time 'soon'
    """
    if isinstance(value, bool):
        raise TimeParseError(f"cannot understand the time {value!r}: expected a date, not a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, datetime):
        return _from_datetime(value)
    if isinstance(value, date):
        return _from_datetime(datetime(value.year, value.month, value.day))
    if isinstance(value, str):
        return _parse_text(value, relative_base)
    raise TimeParseError(f"cannot understand the time {value!r} of type {type(value).__name__}")
