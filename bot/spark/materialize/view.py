"""VIEW: a view over the query in the physical schema; `materialized` views are tables rebuilt like FULL."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.errors import EngineError
from bot.project.model import Kind
from bot.spark.engine import SparkEngine
from bot.spark.materialize import common, full


def create(engine: SparkEngine, *, kind: Kind, table: str, query_sql: str | None,
           columns: Sequence[tuple[str, str]] | None, partitioned_by: Sequence[str] = ()) -> None:
    if kind.materialized:
        full.create(engine, kind=kind, table=table, query_sql=query_sql, columns=columns,
                    partitioned_by=partitioned_by)
        return
    if not query_sql:
        raise EngineError(f"creating view {table}: the model has no SQL query")
    # Known columns let the children's analyses read a stand-in instead of this view (whose own
    # analysis would otherwise repeat, down through every view it reads).
    engine.create_view(table, query_sql, columns=common.stand_in_columns(engine, query_sql, table=table))


def evaluate(engine: SparkEngine, *, kind: Kind, table: str, query: Any, start: int, end: int,
             execution_time: int, first_run: bool) -> None:
    if kind.materialized:
        full.evaluate(engine, kind=kind, table=table, query=query, start=start, end=end,
                      execution_time=execution_time, first_run=first_run)
        return
    if not isinstance(query, str):
        raise EngineError(f"{table}: a VIEW model needs a SQL query, not a {type(query).__name__}")
    engine.create_view(table, query)
