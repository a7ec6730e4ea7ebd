"""INCREMENTAL_BY_TIME_RANGE: replace exactly the rows whose time column falls in [start, end).

Strategy (chosen by measurement): the query's rows are always filtered to the interval, so the
table only ever holds rows of intervals written. On the first run the table is overwritten.
The engine remembers per table (in memory, per process) a watermark: the first instant after
every row's time, set by a first run or by one MAX(time column) query, then raised by each
write. An interval starting at or after it is empty in the table, so the usual in-order
backfill appends in one job with no extra work. Otherwise (restatement, lookback, out-of-order
batches) the table is rewritten as (rows outside the interval) UNION ALL (new rows) into a
second table that is swapped in. Time values a format cannot parse fall back to a `LIMIT 1`
probe of the interval. An interval with no new rows therefore leaves no stale rows behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from sqlglot import exp

from bot.errors import EngineError
from bot.project.model import Kind
from bot.timeline.times import from_datetime, to_datetime
from bot.spark.engine import SparkEngine
from bot.spark.errors import spark_errors
from bot.spark.sql import spark_sql, table_expression
from bot.spark.materialize import common

_EMPTY = -(2**62)  # watermark of an empty table: every interval is new
_INTEGER_TYPES = ("TINYINT", "SMALLINT", "INT", "BIGINT", "BYTE", "SHORT", "LONG", "INTEGER")


def create(engine: SparkEngine, *, kind: Kind, table: str, query_sql: str | None,
           columns: Sequence[tuple[str, str]] | None, partitioned_by: Sequence[str] = ()) -> None:
    cols = common.declared_or_query_columns(engine, table=table, query_sql=query_sql, columns=columns)
    time_column(kind, cols, table=table)
    common.create_table(engine, table=table, columns=cols, partitioned_by=partitioned_by,
                        normalize_types=bool(columns))


def evaluate(engine: SparkEngine, *, kind: Kind, table: str, query: Any, start: int, end: int,
             execution_time: int, first_run: bool) -> None:
    common.recover_swap(engine, table)
    columns = common.add_new_columns(engine, query, table=table,
                                     columns=common.prepare_table(engine, query, table=table))
    column, data_type = time_column(kind, columns, table=table)
    condition = interval_condition(column, data_type, fmt=kind.time_column_format, start=start, end=end)
    if first_run:
        _write(engine, table=table, query=query, columns=columns, condition=condition, replace=True)
        engine.watermarks[table.lower()] = end
        return
    watermark = _watermark(engine, table, column=column, data_type=data_type, fmt=kind.time_column_format)
    if (watermark is not None and start >= watermark) or (
            watermark is None and not _has_rows(engine, table, condition)):
        _write(engine, table=table, query=query, columns=columns, condition=condition, replace=False)
    else:
        _replace_interval(engine, table=table, new_rows=_rows(engine, table=table, query=query,
                                                              columns=columns, condition=condition),
                          condition=condition)
    if watermark is not None:
        engine.watermarks[table.lower()] = max(end, watermark)


def _write(engine: SparkEngine, *, table: str, query: Any, columns, condition: exp.Expression,
           replace: bool) -> None:
    """Write the interval's rows: one INSERT statement for SQL, the DataFrame writer otherwise."""
    if isinstance(query, str):
        common.write_query(engine, table=table, query_sql=query, columns=columns,
                           condition=condition, replace=replace)
        return
    frame = _rows(engine, table=table, query=query, columns=columns, condition=condition)
    if replace:
        common.overwrite(engine, table=table, frame=frame)
    else:
        common.append(engine, table=table, frame=frame)


def _rows(engine: SparkEngine, *, table: str, query: Any, columns, condition: exp.Expression):
    """The interval's conformed rows as a lazy DataFrame."""
    if isinstance(query, str):
        rows = common.batch_sql(engine, query, table=table, columns=columns, condition=condition,
                                fresh=True)
        return engine.dataframe(spark_sql(rows), subject=f"evaluating {table}")
    frame = common.source_frame(engine, query, table=table)
    with spark_errors(f"evaluating {table}"):
        return common.conform(frame, columns).where(spark_sql(condition))


def _watermark(engine: SparkEngine, table: str, *, column: str, data_type: str, fmt: str) -> int | None:
    """First epoch ms after every row's time (from memory, else one MAX query); None if unknown."""
    key = table.lower()
    known = engine.watermarks.get(key)     # .get: another thread's DDL may clear the caches
    if known is not None:
        return known
    latest_time, upper = exp.Max(this=exp.column(column, quoted=True)), data_type.upper()
    if upper == "DATE":   # UNIX_DATE is an INT: as BIGINT first, or the product wraps around (ANSI mode off)
        expression = exp.Mul(this=exp.cast(exp.Anonymous(this="UNIX_DATE", expressions=[latest_time]), "BIGINT"),
                             expression=exp.Literal.number(86_400_000))
    elif upper.startswith("TIMESTAMP"):
        expression = exp.func("unix_millis", exp.cast(latest_time, "TIMESTAMP"))
    else:
        expression = exp.cast(latest_time, "STRING")
    query = exp.select(exp.alias_(expression, "latest", quoted=True)).from_(table_expression(table))
    latest = engine.fetch_one(spark_sql(query), subject=f"reading {table}")["latest"]
    if latest is None:
        watermark = _EMPTY
    elif isinstance(latest, str):
        try:
            moment = datetime.strptime(latest, fmt).replace(tzinfo=timezone.utc)
        except ValueError:
            return None
        watermark = from_datetime(moment) + 1
    else:
        watermark = int(latest) + 1
    engine.watermarks[key] = watermark
    return watermark


def _has_rows(engine: SparkEngine, table: str, condition: exp.Expression) -> bool:
    query = exp.select(exp.Star()).from_(table_expression(table)).where(condition)
    return bool(engine.fetch(spark_sql(query), limit=1, subject=f"reading {table}"))


def _replace_interval(engine: SparkEngine, *, table: str, new_rows, condition: exp.Expression) -> None:
    """Rewrite the table as (rows outside the interval) UNION ALL (new rows) into a swapped-in copy.

    The query appears once and the target is only replaced after the copy is written, so a query
    that reads the table itself needs no staging.
    """
    outside = exp.not_(exp.func("COALESCE", exp.paren(condition.copy()), exp.false()))
    kept = engine.dataframe(spark_sql(exp.select(exp.Star()).from_(table_expression(table)).where(outside)),
                            subject=f"writing {table}")
    with spark_errors(f"writing {table}"):
        combined = kept.unionByName(new_rows)
    common.swap_in(engine, table=table, frame=combined)


def time_column(kind: Kind, columns: Sequence[tuple[str, str]], *, table: str) -> tuple[str, str]:
    """The table's (name, type) of the kind's time column; a missing column is an error."""
    if not kind.time_column:
        raise EngineError(f"{table}: INCREMENTAL_BY_TIME_RANGE needs a time_column")
    wanted = kind.time_column.strip("`\"").lower()
    for name, data_type in columns:
        if name.lower() == wanted:
            return name, data_type
    raise EngineError(f"{table}: time_column `{kind.time_column}` is not among the columns "
                      f"({', '.join(name for name, _ in columns)})")


def interval_condition(column: str, data_type: str, *, fmt: str, start: int, end: int) -> exp.Expression:
    """Which rows of a time column fall in [start, end) (epoch ms): a predicate on the column's own type.

    Dates and formatted values (`time_column_format`, as strings or integers) compare inclusively with
    the first and last unit of the interval; timestamps compare with its start and exclusive end.

    >>> def sql(*args, **kwargs): return interval_condition(*args, **kwargs).sql(dialect="spark")
    >>> sql("ds", "STRING", fmt="%Y-%m-%d", start=1704067200000, end=1704240000000)
    "`ds` BETWEEN '2024-01-01' AND '2024-01-02'"
    >>> sql("d", "DATE", fmt="%Y-%m-%d", start=1704067200000, end=1704153600000)
    "`d` BETWEEN CAST('2024-01-01' AS DATE) AND CAST('2024-01-01' AS DATE)"
    >>> sql("t", "TIMESTAMP", fmt="%Y-%m-%d", start=1704067200000, end=1704153600000)
    "`t` >= CAST('2024-01-01 00:00:00' AS TIMESTAMP) AND `t` < CAST('2024-01-02 00:00:00' AS TIMESTAMP)"
    >>> sql("k", "INT", fmt="%Y%m%d", start=1704067200000, end=1704153600000)
    '`k` BETWEEN 20240101 AND 20240101'
    """
    if end <= start:
        raise EngineError(f"empty interval [{start}, {end}) for time column `{column}`")
    col = exp.column(column, quoted=True)
    first, last = to_datetime(start), to_datetime(end - 1)
    upper = data_type.upper()
    if upper == "DATE":
        return exp.Between(this=col, low=_typed(f"{first:%Y-%m-%d}", "DATE"),
                           high=_typed(f"{last:%Y-%m-%d}", "DATE"))
    if upper.startswith("TIMESTAMP"):
        literal = "TIMESTAMP_NTZ" if upper == "TIMESTAMP_NTZ" else "TIMESTAMP"
        return exp.and_(exp.GTE(this=col, expression=_typed(_timestamp(first), literal)),
                        exp.LT(this=col.copy(), expression=_typed(_timestamp(to_datetime(end)), literal)))
    low, high = first.strftime(fmt), last.strftime(fmt)
    if upper in _INTEGER_TYPES:
        return exp.Between(this=col, low=exp.Literal.number(int(low)), high=exp.Literal.number(int(high)))
    return exp.Between(this=col, low=exp.Literal.string(low), high=exp.Literal.string(high))


def _typed(text: str, data_type: str) -> exp.Expression:
    return exp.cast(exp.Literal.string(text), exp.DataType.build(data_type, dialect="spark"))


def _timestamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S" + (".%f" if moment.microsecond else ""))

