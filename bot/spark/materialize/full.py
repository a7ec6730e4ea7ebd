"""FULL: the table is rebuilt from the query on every run (written into a copy that is swapped in)."""

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
    """Rebuilt in a copy swapped in afterwards, first fill or not: a table with nothing recorded may
    still serve rows (a restatement removes the intervals first), and a refresh that fails leaves them."""
    common.recover_swap(engine, table)
    if isinstance(query, str):
        columns = common.prepare_table(engine, query, table=table)
        common.rebuild(engine, table=table, query_sql=query, columns=columns)
        return
    frame = common.source_frame(engine, query, table=table)
    common.ensure_table(engine, table=table, frame=frame)
    common.rebuild(engine, table=table, frame=common.conformed(engine, frame, table=table))
