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
    replace = first_run or kind.insert_overwrite
    columns = common.prepare_table(engine, query, table=table)
    if isinstance(query, str):
        common.write_query(engine, table=table, query_sql=query, columns=columns, replace=replace)
        return
    frame = common.conformed(engine, common.source_frame(engine, query, table=table), table=table)
    (common.overwrite if replace else common.append)(engine, table=table, frame=frame)
