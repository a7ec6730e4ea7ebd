"""Turn what a Python model returns (Spark DataFrame, pandas DataFrame, or an iterable of them) into a Spark DataFrame."""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from typing import TYPE_CHECKING, Any

from bot.errors import EngineError
from bot.spark.casts import conform
from bot.spark.types import columns_ddl, quote_identifier

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def is_spark_df(obj: Any) -> bool:
    """True for classic and Spark Connect DataFrames."""
    return any(cls.__name__ == "DataFrame" and cls.__module__.startswith("pyspark.sql")
               for cls in type(obj).__mro__)


def is_pandas_df(obj: Any) -> bool:
    return any(cls.__name__ == "DataFrame" and cls.__module__.startswith("pandas")
               for cls in type(obj).__mro__)


def to_spark_df(session: "SparkSession", obj: Any,
                columns: Sequence[tuple[str, str]] | None = None) -> "DataFrame":
    """Return `obj` as a Spark DataFrame, cast to the declared `columns` (name, Spark type) when given.

    pandas frames are converted through Arrow; NaN/None become NULL. An iterable (e.g. a
    generator a model yields from) is concatenated by column name.
    """
    if is_spark_df(obj):
        return conform(obj, columns) if columns else obj
    if is_pandas_df(obj):
        return _from_pandas(session, obj, columns)
    if isinstance(obj, (list, tuple)) or hasattr(obj, "__next__"):
        frames = [to_spark_df(session, item, columns) for item in obj]
        if not frames:
            if not columns:
                raise EngineError("a Python model returned no DataFrame and declares no columns")
            return session.createDataFrame([], columns_ddl(columns))
        return reduce(lambda left, right: left.unionByName(right, allowMissingColumns=True), frames)
    raise EngineError(f"a Python model must return a Spark or pandas DataFrame, not {type(obj).__name__}")


def _from_pandas(session: "SparkSession", frame: Any, columns: Sequence[tuple[str, str]] | None) -> "DataFrame":
    if not columns:
        if not len(frame):
            raise EngineError("an empty pandas DataFrame needs declared columns to give it a schema")
        return session.createDataFrame(frame)
    missing = [name for name, _ in columns if name not in frame.columns]
    if missing:
        raise EngineError(f"the returned pandas DataFrame lacks declared columns: {', '.join(missing)}")
    frame = frame[[name for name, _ in columns]]
    if not len(frame):
        return session.createDataFrame([], columns_ddl(columns))
    try:
        raw = session.createDataFrame(frame)
    except Exception:  # noqa: BLE001 - e.g. an all-None column: go through strings and let Spark cast
        strings = ", ".join(f"{quote_identifier(name)} STRING" for name, _ in columns)
        raw = session.createDataFrame(frame.astype(str).where(frame.notna(), None), strings)
    return conform(raw, columns)
