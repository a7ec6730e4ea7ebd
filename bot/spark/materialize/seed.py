"""SEED: load the model's CSV (through pandas) with its declared column types, replacing the table."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bot.errors import EngineError
from bot.project.model import Kind
from bot.spark.engine import SparkEngine
from bot.spark.errors import spark_errors
from bot.spark.materialize import common
from bot.spark.python_eval import to_spark_df
from bot.spark.types import schema_columns, to_spark_type

# csv_settings keys SQLMesh accepts, passed to pandas.read_csv under these names.
_PANDAS_SETTINGS = {"delimiter": "sep", "quotechar": "quotechar", "doublequote": "doublequote",
                    "escapechar": "escapechar", "skipinitialspace": "skipinitialspace",
                    "lineterminator": "lineterminator", "encoding": "encoding",
                    "na_values": "na_values", "keep_default_na": "keep_default_na", "header": "header"}


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
    """The seed CSV as a Spark DataFrame; with `columns`, values are read as text and cast by Spark."""
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
    if columns and options.get("header", 0) is None:
        data.columns = [name for name, _ in columns][:len(data.columns)]
    typed = [(name, to_spark_type(kind_)) for name, kind_ in columns] if columns else None
    with spark_errors(f"loading seed {path} into {table}"):
        return to_spark_df(engine.session, data, typed)


def pandas_options(settings: Sequence[tuple[str, Any]], *, path: Path) -> dict[str, Any]:
    """pandas.read_csv keyword arguments from a model's csv_settings.

    >>> pandas_options((("delimiter", "|"), ("header", False)), path=Path("s.csv"))
    {'sep': '|', 'header': None}
    """
    options: dict[str, Any] = {}
    for key, value in settings:
        name = _PANDAS_SETTINGS.get(key.lower())
        if name is None:
            raise EngineError(f"{path}: unknown csv_settings key `{key}` "
                              f"(known: {', '.join(sorted(_PANDAS_SETTINGS))})")
        if name == "header":
            value = 0 if value in (True, "true", "TRUE", 1, "1") else None
        options[name] = value
    return options
