"""The one home for time: the clock, epoch ms <-> UTC datetimes, SQLMesh's time parsing and its inclusive-end rule."""

from __future__ import annotations

import re
import time
from datetime import date, datetime, timedelta, timezone

from dateutil import parser as date_parser
from dateutil.relativedelta import relativedelta

from bot.errors import ConfigError

# Fixed dates used to render queries for fingerprints and plan diffs, so that a query's hash does
# not depend on when the plan runs.
REFERENCE_START = 0                 # 1970-01-01 epoch ms
REFERENCE_END = 86_400_000          # 1970-01-02 epoch ms (exclusive)

MS_PER_DAY = 86_400_000
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

_RELATIVE = re.compile(
    r"^(?:(?P<in>in)\s+)?(?P<n>\d+|an?|one)\s+(?P<unit>second|minute|hour|day|week|month|year)s?"
    r"(?:\s+(?P<ago>ago))?$"
)
_STEPS = {unit: relativedelta(**{f"{unit}s": 1})   # calendar-aware: a month from Jan 31 is Feb 29
          for unit in ("second", "minute", "hour", "day", "week", "month", "year")}
_CLOCK_UNITS = frozenset({"second", "minute", "hour"})
_DAY_WORDS = {"yesterday": -1, "today": 0, "tomorrow": 1}
_LOOSE_DATE = re.compile(r"^\d{4}-\d{1,2}-\d{1,2}$")
_NUMBER = re.compile(r"^-?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?$")

TimeLike = int | float | str | date | datetime


class TimeParseError(ConfigError, ValueError):
    """A date, timestamp or relative phrase could not be understood."""


def now_ms() -> int:
    """The current time in epoch milliseconds."""
    return time.time_ns() // 1_000_000


def to_datetime(ms: int) -> datetime:
    """Epoch ms to an aware UTC datetime (exact, whatever the platform's float precision).

    >>> to_datetime(86_400_000)
    datetime.datetime(1970, 1, 2, 0, 0, tzinfo=datetime.timezone.utc)
    """
    return EPOCH + timedelta(milliseconds=ms)


def from_datetime(value: datetime) -> int:
    """An aware or naive (taken as UTC) datetime to epoch ms, truncating below the millisecond.

    >>> from_datetime(datetime(2024, 1, 1, 0, 0, 0, 999))
    1704067200000
    """
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    delta = value - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000 + delta.microseconds // 1_000


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


def add_months(ms: int, months: int) -> int:
    """Calendar months later (or earlier), the day clamped to the month's length.

    >>> to_ds(add_months(1706659200000, 1))   # 2024-01-31
    '2024-02-29'
    """
    return from_datetime(to_datetime(ms) + relativedelta(months=months))


def midnight(ms: int) -> int:
    """The start of the UTC day holding `ms`."""
    return ms - ms % MS_PER_DAY


def is_date(value: TimeLike) -> bool:
    """Whether a value names a whole day (SQLMesh's rule): a `date`, or text that reads as YYYYMMDD once
    dashes are dropped. Epoch numbers and datetimes are moments, not days.

    >>> [is_date(v) for v in ("2024-01-07", "20240107", "2024-1-7", "2024-01-07 00:00:00", date(2024, 1, 7))]
    [True, True, True, False, True]
    """
    if isinstance(value, datetime):
        return False
    if isinstance(value, date):
        return True
    if not isinstance(value, str):
        return False
    try:
        time.strptime(value.strip().replace("-", ""), "%Y%m%d")
    except ValueError:
        return False
    return True


def exclusive_end_ms(value: TimeLike, *, relative_base: int | None = None) -> int:
    """The exclusive end of a user's `end`: a day means the whole day, any other time is exact.

    >>> exclusive_end_ms("2024-01-07") - to_ms("2024-01-07") == MS_PER_DAY
    True
    >>> exclusive_end_ms("2024-01-07 12:00:00") == to_ms("2024-01-07 12:00:00")
    True
    """
    moment = to_ms(value, relative_base=relative_base)
    return moment + MS_PER_DAY if is_date(value) else moment


def inclusive_end(value: TimeLike, *, relative_base: int | None = None) -> datetime:
    """The last microsecond a user's `end` covers (SQLMesh's `make_inclusive_end`).

    >>> inclusive_end("2024-01-07").isoformat()
    '2024-01-07T23:59:59.999999+00:00'
    >>> inclusive_end("2024-01-07 12:00:00").isoformat()
    '2024-01-07T11:59:59.999999+00:00'
    """
    return to_datetime(exclusive_end_ms(value, relative_base=relative_base)) - timedelta(microseconds=1)


def _relative(text: str, base: int, *, floor_days: bool) -> int | None:
    """A relative phrase against `base`; whole-day phrases count from the base's midnight when `floor_days`."""
    if text == "now":
        return base
    if text in _DAY_WORDS:
        return midnight(base) + _DAY_WORDS[text] * MS_PER_DAY
    match = _RELATIVE.match(text)
    if not match or (match["in"] and match["ago"]):
        return None
    numeric = match["n"].isdigit()
    count = int(match["n"]) if numeric else 1
    sign = 1 if match["in"] else -1   # a bare '3 days' is in the past, as in SQLMesh
    unit = match["unit"]
    # SQLMesh counts '2 days ago' from midnight, but not 'a day ago' or '2 hours ago'
    start = midnight(base) if floor_days and numeric and unit not in _CLOCK_UNITS else base
    return from_datetime(to_datetime(start) + _STEPS[unit] * (sign * count))


def relative_ms(text: str, base: int) -> int | None:
    """`text` as a relative phrase ('2 weeks ago', 'yesterday') against epoch ms `base`; None when it is not one."""
    return _relative(text.strip().lower(), base, floor_days=True)


def _absolute(raw: str, base: int) -> int | None:
    text = raw.strip()
    if _LOOSE_DATE.match(text):
        year, month, day = (int(part) for part in text.split("-"))
        try:
            return from_datetime(datetime(year, month, day))
        except ValueError:
            return None
    try:
        return from_datetime(datetime.fromisoformat(text))
    except ValueError:
        pass
    try:   # other spellings SQLMesh's parser reads too: 'Jan 7 2024', '2024/01/07'
        return from_datetime(date_parser.parse(text, default=to_datetime(midnight(base)).replace(tzinfo=None)))
    except (ValueError, OverflowError):
        return None


def _parse_text(text: str, relative_base: int | None, *, floor_days: bool) -> int:
    cleaned = " ".join(text.strip().lower().split())
    if _NUMBER.match(cleaned):
        if cleaned.isdigit():
            try:   # SQLMesh reads digits as YYYYMMDD before it tries epoch ms
                return from_datetime(datetime.strptime(cleaned, "%Y%m%d"))
            except ValueError:
                pass
        return int(float(cleaned)) if not cleaned.lstrip("-").isdigit() else int(cleaned)
    base = relative_base if relative_base is not None else now_ms() // 60_000 * 60_000
    moment = _relative(cleaned, base, floor_days=floor_days)
    if moment is None and cleaned:
        moment = _absolute(text, base)
    if moment is None:
        raise TimeParseError(
            f"cannot understand the time {text!r}: use epoch ms, 'YYYY-MM-DD', 'YYYY-MM-DD HH:MM:SS', "
            "an ISO datetime, or a phrase like '2 days ago', 'yesterday', 'now', 'in 1 week'"
        )
    return moment


def to_ms(value: TimeLike, *, relative_base: int | None = None, floor_days: bool = True) -> int:
    """Any supported time value to epoch milliseconds (UTC), read the way SQLMesh reads it.

    Relative phrases are resolved against `relative_base` (epoch ms; default now, to the minute).
    Whole-day phrases ('2 days ago', 'in 1 month', 'yesterday') count from that base's midnight
    unless `floor_days` is False; clock phrases ('3 hours ago') count from the base itself.
    Integers are epoch ms; digit strings are YYYYMMDD when they read as one, else epoch ms.

    >>> to_ms('2024-01-01')
    1704067200000
    >>> to_ms('2024-01-01T00:00:00+01:00')
    1704063600000
    >>> to_ms('1 month ago', relative_base=1711895415000)   # 2024-03-31 14:30:15 -> 2024-02-29
    1709164800000
    >>> to_ms('soon')  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ...
    bot.timeline.times.TimeParseError: cannot understand the time 'soon'
    """
    if isinstance(value, bool):
        raise TimeParseError(f"cannot understand the time {value!r}: expected a date, not a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, datetime):
        return from_datetime(value)
    if isinstance(value, date):
        return from_datetime(datetime(value.year, value.month, value.day))
    if isinstance(value, str):
        return _parse_text(value, relative_base, floor_days=floor_days)
    raise TimeParseError(f"cannot understand the time {value!r} of type {type(value).__name__}")


def execution_ms(execution_time: TimeLike | None) -> int:
    """A user's `--execution-time` as epoch ms; none given means now."""
    return to_ms(execution_time) if execution_time else now_ms()


def user_range(start: TimeLike | None, end: TimeLike | None) -> tuple[int | None, int | None]:
    """A user's optional `--start` and `--end` as epoch ms [start, exclusive end).

    >>> user_range("2024-01-01", "2024-01-01"), user_range(None, None)
    ((1704067200000, 1704153600000), (None, None))
    """
    return (to_ms(start) if start else None), (exclusive_end_ms(end) if end else None)


def expires_ms(ttl: str, *, since: int) -> int:
    """When something last touched at `since` expires under `ttl` ('in 1 week'), counted from `since`
    exactly, calendar-aware for months and years (SQLMesh's snapshot expiry).

    >>> expires_ms("in 1 month", since=1706700000000) - 1706700000000 == 29 * MS_PER_DAY   # from Jan 31
    True
    """
    return to_ms(ttl, relative_base=since, floor_days=False)


def check_ttl(ttl: str) -> None:
    """Refuse a TTL that cannot be read or does not lie in the future ('1 week' instead of 'in 1 week').

    >>> check_ttl("in 2 weeks")
    >>> check_ttl("1 week")
    Traceback (most recent call last):
    ...
    bot.timeline.times.TimeParseError: the TTL '1 week' is in the past; write a future span such as 'in 1 week'
    """
    now = now_ms() // 60_000 * 60_000
    if to_ms(ttl, relative_base=now) < now:
        raise TimeParseError(f"the TTL {ttl!r} is in the past; write a future span such as 'in 1 week'")
