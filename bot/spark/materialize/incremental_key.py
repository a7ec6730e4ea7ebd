"""INCREMENTAL_BY_UNIQUE_KEY: upsert by key with a staged rewrite (Parquet tables have no MERGE).

The batch is deduplicated by key (the winner is the row that sorts last by all columns in
table order, NULLs first, so the result never depends on row arrival order) into a staging
table; the target is then rewritten as (old rows whose key is not staged) UNION ALL (staged
rows), keys compared NULL-safely, and swapped in. The first run simply overwrites.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlglot import exp

from bot.project.model import Kind
from bot.spark.engine import SparkEngine
from bot.spark.errors import spark_errors
from bot.spark.sql import spark_sql, table_expression
from bot.spark.materialize import common, full


def create(engine: SparkEngine, *, kind: Kind, table: str, query_sql: str | None,
           columns: Sequence[tuple[str, str]] | None, partitioned_by: Sequence[str] = ()) -> None:
    full.create(engine, kind=kind, table=table, query_sql=query_sql, columns=columns,
                partitioned_by=partitioned_by)


def evaluate(engine: SparkEngine, *, kind: Kind, table: str, query: Any, start: int, end: int,
             execution_time: int, first_run: bool) -> None:
    common.recover_swap(engine, table)
    frame = common.source_frame(engine, query, table=table)
    common.ensure_table(engine, table=table, frame=frame)
    columns = common.add_new_columns(engine, frame, table=table, columns=engine.columns(table))
    keys = common.resolve_keys(kind.unique_key, columns, table=table)
    with spark_errors(f"evaluating {table}"):
        new_rows = common.dedup(common.conform(frame, columns), keys=keys)
    if first_run:
        common.overwrite(engine, table=table, frame=new_rows)
        return
    staged = common.stage(engine, table=table, frame=new_rows)
    try:
        sql = merge_sql(table=table, staged=staged, keys=keys)
        common.swap_in(engine, table=table, frame=engine.dataframe(sql, subject=f"evaluating {table}"))
    finally:
        engine.drop_table(staged)


def merge_sql(*, table: str, staged: str, keys: Sequence[str]) -> str:
    """Old rows whose key is not staged, then every staged row.

    >>> kept, staged = merge_sql(table="db.t", staged="db.s", keys=["id"]).split(" UNION ALL ")
    >>> print(kept)
    SELECT `t`.* FROM `db`.`t` AS `t` LEFT ANTI JOIN `db`.`s` AS `s` ON `t`.`id` IS NOT DISTINCT FROM `s`.`id`
    >>> print(staged)
    SELECT * FROM `db`.`s`
    """
    kept = (exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier("t", quoted=True)))
            .from_(exp.alias_(table_expression(table), "t", table=True, quoted=True))
            .join(exp.alias_(table_expression(staged), "s", table=True, quoted=True),
                  on=common.null_safe_join(keys, "t", "s"), join_type="LEFT ANTI"))
    return spark_sql(exp.union(kept, exp.select(exp.Star()).from_(table_expression(staged)), distinct=False))
