"""INCREMENTAL_BY_PARTITION: the partitions the query returns replace those partitions of the table
(dynamic partition overwrite); partitions the query does not return are kept, except on a version's
first batch, which replaces the whole table (rows a killed writer left behind are not the version's)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlglot import exp

from bot.errors import EngineError
from bot.project.model import Kind
from bot.spark.engine import SparkEngine
from bot.spark.errors import spark_errors
from bot.spark.sql import quote_table, spark_sql, table_expression
from bot.spark.materialize import common, full


def create(engine: SparkEngine, *, kind: Kind, table: str, query_sql: str | None,
           columns: Sequence[tuple[str, str]] | None, partitioned_by: Sequence[str] = ()) -> None:
    if not partitioned_by:
        raise EngineError(f"{table}: kind INCREMENTAL_BY_PARTITION needs `partitioned_by`")
    full.create(engine, kind=kind, table=table, query_sql=query_sql, columns=columns,
                partitioned_by=partitioned_by)


def evaluate(engine: SparkEngine, *, kind: Kind, table: str, query: Any, start: int, end: int,
             execution_time: int, first_run: bool) -> None:
    common.recover_swap(engine, table)
    columns = common.prepare_table(engine, query, table=table)
    key = "spark.sql.sources.partitionOverwriteMode"
    previous = engine.session.conf.get(key, "static")
    engine.session.conf.set(key, "static" if first_run else "dynamic")
    try:
        if isinstance(query, str):
            rows = common.batch_sql(engine, query, table=table, columns=columns, fresh=True)
            with spark_errors(f"writing {table}"):
                engine.sql(spark_sql(exp.insert(rows, table_expression(table), overwrite=True)))
            return
        frame = common.conformed(engine, common.source_frame(engine, query, table=table), table=table)
        with spark_errors(f"writing {table}"):
            frame.write.insertInto(quote_table(table), overwrite=True)
    finally:
        engine.session.conf.set(key, previous)
