"""SEED: load the model's CSV (through pandas) with its declared column types, replacing the table."""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from pathlib import Path
from typing import Any

from bot.errors import EngineError
from bot.project.model import Kind
from bot.project.seed_csv import pandas_options, record_lines
from bot.spark.engine import SparkEngine
from bot.spark.errors import spark_errors
from bot.spark.materialize import common
from bot.spark.casts import conform, fitting_cast_sql, is_checked, source_columns
from bot.spark.python_eval import to_spark_df
from bot.spark.types import quote_identifier, schema_columns, to_spark_type

def create(engine: SparkEngine, *, kind: Kind, table: str, query_sql: str | None,
           columns: Sequence[tuple[str, str]] | None, partitioned_by: Sequence[str] = ()) -> None:
    if columns:
        common.create_table(engine, table=table, columns=columns, partitioned_by=partitioned_by)
        return
    frame = read_seed(engine, kind=kind, table=table, columns=None)
    with spark_errors(f"creating table {table}"):
        inferred = schema_columns(frame.schema)
    common.create_table(engine, table=table, columns=inferred, partitioned_by=partitioned_by,
                        normalize_types=False)


def evaluate(engine: SparkEngine, *, kind: Kind, table: str, query: Any, start: int, end: int,
             execution_time: int, first_run: bool, columns: Sequence[tuple[str, str]] | None = None) -> None:
    frame = read_seed(engine, kind=kind, table=table, columns=columns or _table_columns(engine, table))
    common.ensure_table(engine, table=table, frame=frame)
    common.overwrite(engine, table=table, frame=common.conformed(engine, frame, table=table))


def _table_columns(engine: SparkEngine, table: str) -> list[tuple[str, str]] | None:
    return engine.columns(table) if engine.table_exists(table) else None


def read_seed(engine: SparkEngine, *, kind: Kind, table: str,
              columns: Sequence[tuple[str, str]] | None) -> Any:
    """The seed CSV as a Spark DataFrame; with `columns`, values are read as text and cast by Spark, and a
    value that does not fit its column stops the load naming the file's line, the column and the value."""
    import pandas as pd

    if not kind.seed_path:
        raise EngineError(f"{table}: SEED model has no path")
    path = Path(kind.seed_path)
    options = pandas_options(kind.csv_settings, path=path)
    if columns:
        options.update(dtype=str)
    try:
        data = pd.read_csv(path, **options)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise EngineError(f"{path}: cannot read seed of {table}: {str(exc).splitlines()[0]}") from exc
    if not columns:
        with spark_errors(f"loading seed {path} into {table}"):
            return to_spark_df(engine.session, data)
    if options.get("header", 0) is None:
        data.columns = [name for name, _ in columns][:len(data.columns)]
    typed = [(name, to_spark_type(kind_)) for name, kind_ in columns]
    with spark_errors(f"loading seed {path} into {table}"):
        text = _text_frame(engine.session, data)
        _refuse_what_does_not_fit(text, typed, path=path, options=options)
        return conform(text.drop(_RECORD), typed)


_RECORD = "__meshbot_seed_record"


def _text_frame(session: Any, data: Any) -> Any:
    """Every field as text (an empty field as NULL), with the record's position in the file."""
    frame = data.astype(object).where(data.notna(), None)
    frame.columns = [str(name) for name in data.columns]
    frame[_RECORD] = range(len(frame))
    schema = ", ".join([*(f"{quote_identifier(name)} STRING" for name in frame.columns[:-1]), f"{_RECORD} BIGINT"])
    return session.createDataFrame(frame, schema)


def _refuse_what_does_not_fit(text: Any, typed: Sequence[tuple[str, str]], *, path: Path,
                              options: dict[str, Any]) -> None:
    from pyspark.sql import functions as F

    sources = source_columns([c for c in text.columns if c != _RECORD], typed)
    checked = [(source, name, kind) for source, (name, kind) in zip(sources, typed) if is_checked(kind)]
    if not checked:
        return
    flags = [F.expr(f"{quote_identifier(source)} IS NOT NULL AND "
                    f"({fitting_cast_sql(quote_identifier(source), 'string', kind)}) IS NULL")
             for source, _, kind in checked]
    first = (text.select(F.col(_RECORD), *(flag.alias(f"bad{i}") for i, flag in enumerate(flags)),
                         *(F.col(quote_identifier(source)).alias(f"value{i}") for i, (source, _, _) in enumerate(checked)))
             .where(reduce(lambda a, b: a | b, [F.col(f"bad{i}") for i in range(len(flags))]))
             .orderBy(_RECORD).limit(1).collect())
    if not first:
        return
    row = first[0]
    index = next(i for i in range(len(flags)) if row[f"bad{i}"])
    _, name, kind = checked[index]
    lines = record_lines(path, options)
    where = f"{path}:{lines[row[_RECORD]]}" if lines and row[_RECORD] < len(lines) else \
        f"{path} (record {row[_RECORD] + 1})"
    raise EngineError(f"{where}: column `{name}` is {kind.upper()}, and the value {row[f'value{index}']!r} "
                      "does not fit it; nothing was loaded (fix the value, or change the column's type in "
                      "the model's `columns`)")
