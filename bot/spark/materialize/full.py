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
    """The table's first fill overwrites it in place; a refresh of rows it serves is rebuilt in a copy
    swapped in afterwards, so a refresh that fails leaves the previous rows."""
    common.recover_swap(engine, table)
    if isinstance(query, str):
        columns = common.prepare_table(engine, query, table=table)
        if first_run:
            common.write_query(engine, table=table, query_sql=query, columns=columns, replace=True)
        else:
            common.rebuild(engine, table=table, query_sql=query, columns=columns)
        return
    frame = common.source_frame(engine, query, table=table)
    common.ensure_table(engine, table=table, frame=frame)
    rows = common.conformed(engine, frame, table=table)
    if first_run:
        common.overwrite(engine, table=table, frame=rows)
    else:
        common.rebuild(engine, table=table, frame=rows)
