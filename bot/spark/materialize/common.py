"""Write helpers shared by the strategies: source frames, table creation, overwrite, staging and table swaps."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from bot.errors import EngineError
from bot.spark.engine import SWAP_SUFFIX, SparkEngine
from bot.spark.errors import error_class, spark_errors
from bot.spark.sql import parse_query, quote_table, spark_sql, split_table, table_expression
from bot.spark.casts import conform
from bot.spark.casts import source_columns as conform_sources
from bot.spark.python_eval import to_spark_df
from bot.spark.stand_ins import with_stand_ins
from bot.spark.types import data_type, quote_identifier, schema_columns, to_spark_type

__all__ = ["conform"]

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# string literals and free-standing numbers: what differs between the batches of one model version
_LITERALS = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|(?<![\w`])\d+(?:\.\d+)?(?![\w`])")
STAGE_SUFFIX = "__meshbot_stage"
Columns = Sequence[tuple[str, str]]


def source_frame(engine: SparkEngine, query: Any, *, table: str) -> "DataFrame":
    """The query (SQL text, Spark or pandas DataFrame) as a lazy Spark DataFrame; nothing runs yet."""
    if isinstance(query, str):
        return engine.dataframe(query, subject=f"evaluating {table}")
    if query is None:
        raise EngineError(f"evaluating {table}: no query given")
    with spark_errors(f"evaluating {table}"):
        return to_spark_df(engine.session, query)


def query_columns(engine: SparkEngine, query_sql: str, *, table: str) -> list[tuple[str, str]]:
    """(name, Spark type) of a query's output, from analysis only (no Spark job).

    Tables this engine created are read from stand-ins of their columns (`stand_ins`), so a
    first deploy analyzes each model without reading its parents from the metastore; if that
    analysis fails, the real one runs and its error is the one reported.
    """
    subject = f"analyzing the query of {table}"
    columns = _stand_in_analysis(engine, query_sql, subject=subject)
    if columns is None:
        columns = schema_columns(engine.schema_of(query_sql, subject=subject))
    _remember(engine, table, query_sql, [name for name, _ in columns])
    return columns


def stand_in_columns(engine: SparkEngine, query_sql: str, *, table: str) -> list[tuple[str, str]] | None:
    """A query's output columns when every table it reads has stand-ins (an analysis without any
    metastore call), else None."""
    return _stand_in_analysis(engine, query_sql, subject=f"analyzing the query of {table}", every_table=True)


def _stand_in_analysis(engine: SparkEngine, query_sql: str, *, subject: str,
                       every_table: bool = False) -> list[tuple[str, str]] | None:
    # a copy: another task's statement may clear the engine's record meanwhile (any DDL does)
    probe = with_stand_ins(query_sql, dict(engine.created_columns), every_table=every_table)
    if probe is None:
        return None
    with contextlib.suppress(EngineError), spark_errors(subject):
        return schema_columns(engine.dataframe(probe, subject=subject).schema)
    return None


def query_shape(query_sql: str) -> str:
    """The query with its literals masked: equal for every batch of one query, different once it changes.

    >>> query_shape("SELECT a, 1 AS b FROM `db`.`t__12` WHERE ds BETWEEN '2024-01-01' AND '2024-01-02'")
    'SELECT a, ? AS b FROM `db`.`t__12` WHERE ds BETWEEN ? AND ?'
    """
    return _LITERALS.sub("?", query_sql)


def _remember(engine: SparkEngine, table: str, query_sql: str, outputs: list[str]) -> None:
    engine.query_outputs[table.lower()] = outputs
    engine.query_shapes[table.lower()] = query_shape(query_sql)


def _remembered(engine: SparkEngine, table: str, query_sql: str) -> list[str] | None:
    """The remembered output names for `table`, unless they came from a differently shaped query."""
    key = table.lower()
    outputs = engine.query_outputs.get(key)     # .get: another thread's DDL may clear the caches
    if outputs is not None and engine.query_shapes.get(key) == query_shape(query_sql):
        return outputs
    return None


def added_names(outputs: Sequence[str], columns: Columns) -> list[str]:
    """Query outputs the table lacks, when the query has every table column (a purely additive change).

    >>> added_names(["id", "new", "X"], [("id", "INT"), ("x", "INT")])
    ['new']
    >>> added_names(["id", "y"], [("id", "INT"), ("x", "INT")])
    []
    """
    have = {name.lower() for name, _ in columns}
    if not have <= {name.lower() for name in outputs}:
        return []
    return [name for name in outputs if name.lower() not in have]


def add_new_columns(engine: SparkEngine, query: Any, *, table: str, columns: Columns) -> list[tuple[str, str]]:
    """Add the query's output columns the table lacks (ALTER TABLE ADD COLUMNS); the table's columns after.

    This is how an additive forward-only change reaches the kept physical table: old rows read
    NULL in the new columns, new batches write them. Remembered outputs of the same query shape
    spare the analysis on every batch but the first.
    """
    if isinstance(query, str):
        remembered = _remembered(engine, table, query)
        if remembered is not None and not added_names(remembered, columns):
            return list(columns)
        typed = query_columns(engine, query, table=table)
    else:
        frame = source_frame(engine, query, table=table)
        with spark_errors(f"evaluating {table}"):
            typed = schema_columns(frame.schema)
    added = {name.lower() for name in added_names([name for name, _ in typed], columns)}
    if not added:
        return list(columns)
    new = [(name, kind) for name, kind in typed if name.lower() in added]
    engine.add_columns(table, columns=new)
    return engine.columns(table)


def declared_or_query_columns(engine: SparkEngine, *, table: str, query_sql: str | None,
                              columns: Columns | None) -> list[tuple[str, str]]:
    if columns:
        return list(columns)
    if not query_sql:
        raise EngineError(f"creating {table}: neither declared columns nor a query to take them from")
    try:
        return query_columns(engine, query_sql, table=table)
    except EngineError as exc:
        if split_table(table)[-1].lower() in query_sql.lower() and "NOT_FOUND" in str(exc):
            raise EngineError(f"{exc}\n(a model that reads its own table must declare its columns)") from None
        raise


def create_table(engine: SparkEngine, *, table: str, columns: Columns, partitioned_by: Sequence[str] = (),
                 normalize_types: bool = True) -> None:
    """Create an empty Parquet table if absent; declared types go through sqlglot, schema types do not."""
    if engine.table_exists(table):
        return
    typed = [(name, to_spark_type(kind)) for name, kind in columns] if normalize_types else list(columns)
    engine.create_table(table, columns=typed, partitioned_by=partitioned_by)


def ensure_table(engine: SparkEngine, *, table: str, frame: "DataFrame") -> None:
    """Create `table` from `frame`'s schema when the caller skipped create_physical."""
    if not engine.table_exists(table):
        with spark_errors(f"creating table {table}"):
            columns = schema_columns(frame.schema)
        create_table(engine, table=table, columns=columns, normalize_types=False)


def conformed(engine: SparkEngine, frame: "DataFrame", *, table: str) -> "DataFrame":
    """`frame` with the target table's columns, names and types."""
    with spark_errors(f"evaluating {table}"):
        return conform(frame, engine.columns(table))


def prepare_table(engine: SparkEngine, query: Any, *, table: str) -> list[tuple[str, str]]:
    """The target's columns; creates it from the query's schema first when create_physical was skipped."""
    if not engine.table_exists(table):
        ensure_table(engine, table=table, frame=source_frame(engine, query, table=table))
    return engine.columns(table)


def batch_sql(engine: SparkEngine, query_sql: str, *, table: str, columns: Columns,
              condition: exp.Expression | None = None, fresh: bool = False) -> exp.Select:
    """One SELECT of the query's rows conformed to `columns` (renamed, cast), filtered by `condition`.

    The query's output names come from the last analysis of a query of the same shape for this
    table (the same model version writes it batch after batch) unless `fresh`; so a batch's write is a single
    statement analyzed once, like a hand-written INSERT ... SELECT.
    """
    outputs = None if fresh else _remembered(engine, table, query_sql)
    if outputs is None:
        outputs = list(engine.schema_of(query_sql, subject=f"evaluating {table}").names)
        _remember(engine, table, query_sql, outputs)
    sources = conform_sources(outputs, columns)
    query = parse_query(query_sql, f"evaluating {table}")
    casts = [exp.alias_(exp.cast(exp.column(src, quoted=True), data_type(kind)), name, quoted=True)
             for src, (name, kind) in zip(sources, columns)]
    rows = exp.select(*casts).from_(query.subquery("__meshbot_query"))
    if condition is None:
        return rows
    return exp.select(exp.Star()).from_(rows.subquery("__meshbot_rows")).where(condition.copy())


def write_query(engine: SparkEngine, *, table: str, query_sql: str, columns: Columns,
                condition: exp.Expression | None = None, replace: bool, into: str | None = None) -> None:
    """INSERT (OVERWRITE when `replace`) the conformed query into `table` (or `into`, a table of the
    same columns) as one SQL statement.

    A stale remembered output (the statement fails analysis) is retried once with a fresh one;
    an overwrite of a table the query reads itself goes through a staging table.
    """
    remembered = _remembered(engine, table, query_sql) is not None
    target = into or table
    for fresh in ((False, True) if remembered else (True,)):
        rows = batch_sql(engine, query_sql, table=table, columns=columns, condition=condition, fresh=fresh)
        try:
            with spark_errors(f"writing {table}"), static_overwrite(engine, target, active=replace):
                engine.sql(spark_sql(exp.insert(rows, table_expression(target), overwrite=replace)))
            return
        except EngineError as exc:
            cause = exc.__context__
            if replace and (error_class(cause) or "").startswith("UNSUPPORTED_OVERWRITE"):
                frame = engine.dataframe(spark_sql(rows), subject=f"evaluating {table}")
                overwrite(engine, table=table, frame=frame)
                return
            if fresh or not _is_analysis_error(cause):
                raise


def _is_analysis_error(exc: BaseException | None) -> bool:
    return exc is not None and any(cls.__name__ == "AnalysisException" for cls in type(exc).__mro__)


@contextlib.contextmanager
def static_overwrite(engine: SparkEngine, table: str, *, active: bool = True) -> Iterator[None]:
    """Make INSERT OVERWRITE replace the whole table even when it is partitioned (session default: dynamic)."""
    if not active or not engine.partition_columns(table):
        yield
        return
    key = "spark.sql.sources.partitionOverwriteMode"
    previous = engine.session.conf.get(key, "static")
    engine.session.conf.set(key, "static")
    try:
        yield
    finally:
        engine.session.conf.set(key, previous)


def overwrite(engine: SparkEngine, *, table: str, frame: "DataFrame") -> None:
    """Replace all rows of `table` with `frame`; stages first when `frame` reads `table` itself."""
    with spark_errors(f"writing {table}"), static_overwrite(engine, table):
        try:
            frame.write.insertInto(quote_table(table), overwrite=True)
            return
        except Exception as exc:  # noqa: BLE001 - only the self-read case is handled here
            if not (error_class(exc) or "").startswith("UNSUPPORTED_OVERWRITE"):
                raise
        staged = stage(engine, table=table, frame=frame)
        try:
            engine.session.table(quote_table(staged)).write.insertInto(quote_table(table), overwrite=True)
        finally:
            engine.drop_table(staged)


def append(engine: SparkEngine, *, table: str, frame: "DataFrame") -> None:
    with spark_errors(f"writing {table}"):
        frame.write.insertInto(quote_table(table), overwrite=False)


def stage(engine: SparkEngine, *, table: str, frame: "DataFrame") -> str:
    """Compute `frame` once into the staging table of `table` and return the staging table's name."""
    staged = table + STAGE_SUFFIX
    engine.drop_table(staged)
    with spark_errors(f"staging rows for {table}"):
        frame.write.format("parquet").mode("overwrite").saveAsTable(quote_table(staged))
    engine.note_created(staged)
    return staged


def swap_in(engine: SparkEngine, *, table: str, frame: "DataFrame") -> None:
    """Replace `table` by `frame`, whose columns are the table's by name (in any order), even when
    `frame` reads `table`: `rebuild`'s written copy, swapped in."""
    with spark_errors(f"writing {table}"):
        ordered = frame.select(*(quote_identifier(name) for name, _ in engine.columns(table)))
    rebuild(engine, table=table, frame=ordered)


def rebuild(engine: SparkEngine, *, table: str, query_sql: str | None = None, columns: Columns = (),
            frame: "DataFrame | None" = None) -> None:
    """Replace every row of `table` (a refresh of rows it holds and keeps serving): the new rows are
    written into a copy with the table's columns, partitioning and properties, which is then swapped
    in. A query that fails, or a writer killed, while writing leaves the table as it was; INSERT
    OVERWRITE in place would have deleted its files first. The copy may read `table` itself; a
    `frame` is written by position (the table's column order). A crash between drop and rename is
    repaired by `recover_swap` (or `settle_table`)."""
    swap = table + SWAP_SUFFIX
    if engine.table_exists(swap):   # a killed refresh's; the listing is fresh under the version's lease
        engine.drop_table(swap)
    engine.create_table_like(swap, table)
    try:
        if query_sql is not None:
            write_query(engine, table=table, query_sql=query_sql, columns=columns, replace=False, into=swap)
        else:
            append(engine, table=swap, frame=frame)
    except BaseException:
        with contextlib.suppress(Exception):
            engine.drop_table(swap)
        raise
    engine.drop_table(table)
    engine.rename_table(swap, table)


def settle_table(engine: SparkEngine, table: str) -> bool:
    """Whether `table` exists, read from the catalog now, after finishing a swap its killed writer
    left between drop and rename. Call it holding the table's version lease: its writers swap
    under that lease, and while one does, the table's name is briefly absent."""
    swap = table + SWAP_SUFFIX
    found = engine.tables_exist_now([table, swap])
    if not found[table] and found[swap]:
        engine.rename_table(swap, table)
        return True
    return found[table]


def recover_swap(engine: SparkEngine, table: str) -> None:
    """Finish a swap interrupted after the old table was dropped."""
    swap = table + SWAP_SUFFIX
    if not engine.table_exists(table) and engine.table_exists(swap):
        engine.rename_table(swap, table)


def null_safe_join(keys: Sequence[str], left: str, right: str) -> exp.Expression:
    """A NULL-safe equality predicate over key columns.

    >>> spark_sql(null_safe_join(["id", "ds"], "t", "s"))
    '`t`.`id` IS NOT DISTINCT FROM `s`.`id` AND `t`.`ds` IS NOT DISTINCT FROM `s`.`ds`'
    """
    return exp.and_(*(exp.NullSafeEQ(this=exp.column(key, table=left, quoted=True),
                                     expression=exp.column(key, table=right, quoted=True)) for key in keys))


def resolve_keys(keys: Sequence[str], columns: Columns, *, table: str, what: str = "unique_key") -> list[str]:
    """Map key names to the table's column spelling (case-insensitive); unknown keys are an error."""
    by_lower = {name.lower(): name for name, _ in columns}
    if not keys:
        raise EngineError(f"{table}: {what} is empty")
    missing = [key for key in keys if key.strip("`").lower() not in by_lower]
    if missing:
        raise EngineError(f"{table}: {what} column(s) {', '.join(missing)} not in the table's columns "
                          f"({', '.join(by_lower.values())})")
    return [by_lower[key.strip("`").lower()] for key in keys]


def dedup(frame: "DataFrame", *, keys: Sequence[str], first_order: Sequence[str] = ()) -> "DataFrame":
    """Keep one row per key: the last by (`first_order` columns, then every column in order), NULLs first.

    Ordering by all columns makes the winner deterministic whatever order the rows arrive in.
    Map-typed columns cannot be ordered and are left out of the tie-break.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.types import MapType

    orderable = [f.name for f in frame.schema.fields if not isinstance(f.dataType, MapType)]
    order = [*first_order, *[name for name in orderable if name not in first_order]]
    window = Window.partitionBy(*[F.col(quote_identifier(k)) for k in keys]).orderBy(
        *[F.col(quote_identifier(name)).desc_nulls_last() for name in order])
    marker = "__meshbot_row_number"
    return frame.withColumn(marker, F.row_number().over(window)).where(F.col(marker) == 1).drop(marker)
