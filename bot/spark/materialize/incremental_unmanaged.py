"""INCREMENTAL_UNMANAGED: each run appends the query's rows (`insert_overwrite true`: replaces the table)."""

from __future__ import annotations

from typing import Any

from bot.project.model import Kind
from bot.spark.engine import SparkEngine
from bot.spark.materialize import common
from bot.spark.materialize.full import create

__all__ = ["create", "evaluate"]


def evaluate(engine: SparkEngine, *, kind: Kind, table: str, query: Any, start: int, end: int,
             execution_time: int, first_run: bool) -> None:
    common.recover_swap(engine, table)
    columns = common.prepare_table(engine, query, table=table)
    replace = first_run or kind.insert_overwrite   # rows a table may serve: replaced once the new ones are written
    if isinstance(query, str):
        if replace:
            common.rebuild(engine, table=table, query_sql=query, columns=columns)
        else:
            common.write_query(engine, table=table, query_sql=query, columns=columns, replace=False)
        return
    frame = common.conformed(engine, common.source_frame(engine, query, table=table), table=table)
    (common.rebuild if replace else common.append)(engine, table=table, frame=frame)
