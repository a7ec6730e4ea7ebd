"""`sqlmesh.utils.date` for project files that import it: SQLMesh 0.236.4's public date helpers, in UTC."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from typing import Any

from sqlglot import exp

from bot.timeline import times
from bot.timeline.times import TimeLike

UTC = timezone.utc
DATE_INT_FMT = "%Y%m%d"
DatetimeRange = tuple[datetime, datetime]
DatetimeRanges = list[DatetimeRange]
_DAY_WORDS = {"today", "yesterday", "tomorrow"}
_CLOCK_UNITS = ("hour", "minute", "second")

__all__ = [
    "UTC", "TimeLike", "DatetimeRange", "DatetimeRanges", "DATE_INT_FMT", "now", "now_timestamp", "now_ds",
    "yesterday", "yesterday_ds", "yesterday_timestamp", "to_timestamp", "to_datetime", "to_date", "date_dict",
    "to_ds", "to_ts", "to_tstz", "is_date", "make_inclusive", "make_inclusive_end", "make_exclusive",
    "make_ts_exclusive", "to_utc_timestamp", "validate_date_range", "time_like_to_str",
    "is_categorical_relative_expression", "is_relative", "to_time_column", "pandas_timestamp_to_pydatetime",
    "format_tz_datetime",
]


def _base_ms(relative_base: datetime | None) -> int | None:
    return times.from_datetime(relative_base) if relative_base is not None else None


def to_datetime(value: TimeLike, relative_base: datetime | None = None) -> datetime:
    """`value` (a date, datetime, epoch ms, 'YYYY-MM-DD[ HH:MM:SS]' or '1 week ago') as a UTC datetime.

    >>> to_datetime("2024-01-02 03:04:05")
    datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
    """
    return times.to_datetime(times.to_ms(value, relative_base=_base_ms(relative_base)))


def to_timestamp(value: TimeLike, relative_base: datetime | None = None) -> int:
    """Epoch milliseconds."""
    return times.from_datetime(to_datetime(value, relative_base))


def to_date(value: TimeLike, relative_base: datetime | None = None) -> date:
    return to_datetime(value, relative_base).date()


def to_ts(value: TimeLike, relative_base: datetime | None = None) -> str:
    """'YYYY-MM-DD HH:MM:SS' (with microseconds when there are any), no zone.

    >>> to_ts("2024-01-02"), to_ds(1704153600000)
    ('2024-01-02 00:00:00', '2024-01-02')
    """
    return to_datetime(value, relative_base).replace(tzinfo=None).isoformat(sep=" ")


def to_ds(value: TimeLike, relative_base: datetime | None = None) -> str:
    return to_ts(value, relative_base)[:10]


def to_tstz(value: TimeLike, relative_base: datetime | None = None) -> str:
    """'YYYY-MM-DD HH:MM:SS+00:00'."""
    return to_datetime(value, relative_base).isoformat(sep=" ")


def now(minute_floor: bool = True) -> datetime:
    """The current UTC time, to the minute unless `minute_floor` is False."""
    current = datetime.now(tz=UTC)
    return current.replace(second=0, microsecond=0) if minute_floor else current


def now_timestamp(minute_floor: bool = False) -> int:
    return to_timestamp(now(minute_floor))


def now_ds() -> str:
    return to_ds(now())


def yesterday(relative_base: datetime | None = None) -> datetime:
    return to_datetime("yesterday", relative_base)


def yesterday_ds(relative_base: datetime | None = None) -> str:
    return to_ds("yesterday", relative_base)


def yesterday_timestamp(relative_base: datetime | None = None) -> int:
    return to_timestamp(yesterday(relative_base))


def is_date(value: TimeLike) -> bool:
    """Whether `value` names a whole day (a date, or text such as '2024-01-02' or '20240102').

    >>> is_date("2024-01-02"), is_date("2024-01-02 10:00:00"), is_date(date(2024, 1, 2))
    (True, False, True)
    """
    if isinstance(value, date) and not isinstance(value, datetime):
        return True
    try:
        datetime.strptime(str(value).replace("-", ""), DATE_INT_FMT)
    except ValueError:
        return False
    return True


def make_exclusive(value: TimeLike) -> datetime:
    """The end of `value` as an exclusive bound: a whole day ends at the next midnight."""
    moment = to_datetime(value)
    return moment + timedelta(days=1) if is_date(value) else moment


def make_inclusive_end(end: TimeLike, dialect: str | None = "") -> datetime:
    if dialect == "tsql":
        return to_utc_timestamp(make_exclusive(end)) - _one_nanosecond()
    return make_exclusive(end) - timedelta(microseconds=1)


def make_inclusive(start: TimeLike, end: TimeLike, dialect: str | None = "") -> DatetimeRange:
    """(start, the last instant of end): a whole-day `end` covers its whole day.

    >>> make_inclusive("2020-01-01", "2020-01-01")[1]
    datetime.datetime(2020, 1, 1, 23, 59, 59, 999999, tzinfo=datetime.timezone.utc)
    """
    return to_datetime(start), make_inclusive_end(end, dialect=dialect)


def make_ts_exclusive(value: TimeLike, dialect: str | None) -> datetime:
    if dialect == "tsql":
        return to_utc_timestamp(to_datetime(value)) - _one_nanosecond()
    return to_datetime(value) + timedelta(microseconds=1)


def _one_nanosecond() -> Any:
    import pandas as pd

    return pd.Timedelta(1, unit="ns")


def to_utc_timestamp(moment: datetime) -> Any:
    """A pandas Timestamp in UTC (a naive `moment` is taken as UTC)."""
    import pandas as pd

    return pd.Timestamp(moment).tz_convert("utc") if moment.tzinfo is not None else pd.Timestamp(moment, tz="utc")


def validate_date_range(start: TimeLike | None, end: TimeLike | None) -> None:
    if start and end and to_datetime(start) > to_datetime(end):
        raise ValueError(f"Start date / time ({start}) can't be greater than end date / time ({end})")


def time_like_to_str(value: TimeLike) -> str:
    if isinstance(value, str):
        return value
    return to_ds(value) if is_date(value) else to_ts(value)


def is_categorical_relative_expression(expression: str) -> bool:
    """Whether a relative time names whole days ('yesterday', '2 weeks ago'), not clock time ('3 hours ago').

    >>> is_categorical_relative_expression("2 weeks ago"), is_categorical_relative_expression("3 hours ago")
    (True, False)
    """
    text = expression.strip().lower()
    if text in _DAY_WORDS:
        return True
    if times.relative_ms(text, 0) is None:
        return False
    return not any(unit in text for unit in _CLOCK_UNITS)


def is_relative(value: TimeLike) -> bool:
    return isinstance(value, str) and is_categorical_relative_expression(value)


def date_dict(execution_time: TimeLike, start: TimeLike | None, end: TimeLike | None) -> dict[str, Any]:
    """`{prefix}_dt`, `_dtntz`, `_date`, `_ds`, `_ts`, `_tstz`, `_epoch`, `_millis` and `_hour` for the
    execution time (`execution_` and `latest_`), start and end."""
    moments = [("latest", execution_time), ("execution", execution_time)]
    moments += [(prefix, value) for prefix, value in (("start", start), ("end", end)) if value is not None]
    values: dict[str, Any] = {}
    for prefix, value in moments:
        moment = to_datetime(value)
        millis = to_timestamp(value)
        values.update({f"{prefix}_dt": moment, f"{prefix}_dtntz": moment.replace(tzinfo=None),
                       f"{prefix}_date": moment.date(), f"{prefix}_ds": to_ds(value), f"{prefix}_ts": to_ts(moment),
                       f"{prefix}_tstz": to_tstz(moment), f"{prefix}_epoch": millis / 1000,
                       f"{prefix}_millis": millis, f"{prefix}_hour": moment.hour})
    return values


def to_time_column(time_column: Any, time_column_type: exp.DataType, dialect: str,
                   time_column_format: str | None = None, nullable: bool = False) -> exp.Expression:
    """A time as a literal of the model's time column type (and format, for a text or number column)."""
    if isinstance(time_column, exp.Null):
        return exp.cast(time_column, to=time_column_type)
    if time_column_type.is_type(exp.DataType.Type.DATE, exp.DataType.Type.DATE32):
        return exp.cast(exp.Literal.string(to_ds(time_column)), to="date")
    zoned = (exp.DataType.Type.TIMETZ, exp.DataType.Type.TIMESTAMPTZ, exp.DataType.Type.TIMESTAMPLTZ)
    if time_column_type.is_type(*zoned):
        return exp.cast(exp.Literal.string(to_tstz(time_column)), to=time_column_type)
    if time_column_type.is_type(*exp.DataType.TEMPORAL_TYPES):
        return exp.cast(exp.Literal.string(to_ts(time_column)), to=time_column_type)
    if time_column_format:
        time_column = to_datetime(time_column).strftime(time_column_format)
    if time_column_type.is_type(*exp.DataType.TEXT_TYPES):
        return exp.Literal.string(time_column)
    if time_column_type.is_type(*exp.DataType.NUMERIC_TYPES):
        return exp.Literal.number(time_column)
    return exp.convert(time_column)


def pandas_timestamp_to_pydatetime(frame: Any, columns_to_types: dict[str, exp.DataType] | None = None) -> Any:
    """`frame` with its datetime64 columns as Python datetimes (dates for DATE columns)."""
    import pandas as pd
    from pandas.api.types import is_datetime64_any_dtype

    for column in frame.columns:
        if not is_datetime64_any_dtype(frame.dtypes[column]):
            continue
        frame[column] = pd.Series(frame[column].dt.to_pydatetime(), dtype="object")
        kind = (columns_to_types or {}).get(column)
        if kind is not None and kind.this in (exp.DataType.Type.DATE, exp.DataType.Type.DATE32):
            frame[column] = frame[column].map(lambda v: v.date() if type(v) is datetime else v)
    return frame


def format_tz_datetime(value: TimeLike, format_string: str | None = "%Y-%m-%d %I:%M%p %Z",
                       use_local_timezone: bool = False) -> str:
    moment = to_datetime(value)
    if use_local_timezone:
        moment = moment.astimezone(datetime.now().astimezone().tzinfo)
    return moment.strftime(format_string) if format_string else moment.isoformat(sep=" ")
