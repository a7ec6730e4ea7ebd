"""INCREMENTAL_UNMANAGED: each run appends the query's rows (`insert_overwrite true`: replaces the table)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.project.model import Kind
from bot.spark.engine import SparkEngine
from bot.spark.materialize import common


def create(engine: SparkEngine, *, kind: Kind, table: str, query_sql: str | None,
           columns: Sequence[tuple[str, str]] | None, partitioned_by: Sequence[str] = ()) -> None:
    cols = common.declared_or_query_columns(engine, table=table, query_sql=query_sql, columns=columns)
    common.create_table(engine, table=table, columns=cols, partitioned_by=partitioned_by,
                        normalize_types=bool(columns))


def evaluate(engine: SparkEngine, *, kind: Kind, table: str, query: Any, start: int, end: int,
             execution_time: int, first_run: bool) -> None:
    common.recover_swap(engine, table)
    replace = first_run or kind.insert_overwrite
    columns = common.prepare_table(engine, query, table=table)
    if isinstance(query, str):
        common.write_query(engine, table=table, query_sql=query, columns=columns, replace=replace)
        return
    frame = common.conformed(engine, common.source_frame(engine, query, table=table), table=table)
    (common.overwrite if replace else common.append)(engine, table=table, frame=frame)
