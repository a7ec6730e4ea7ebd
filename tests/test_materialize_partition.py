"""INCREMENTAL_BY_PARTITION: later batches replace only the partitions they return; a version's first
batch replaces the whole table, so rows a killed writer left in other partitions do not survive it."""

from __future__ import annotations

from bot.project.model import Kind, KindName
from bot.spark.materialize import create_physical, evaluate

DAY = 86_400_000
KIND = Kind(name=KindName.INCREMENTAL_BY_PARTITION)


def _rows(engine, table: str) -> list[tuple]:
    return sorted(tuple(row.values()) for row in engine.fetch(f"SELECT * FROM {table}"))


def test_partitions_are_replaced_one_by_one_and_the_first_run_replaces_the_table(engine_schema):
    engine, db = engine_schema
    table = f"{db}.by_region__1"
    create_physical(engine, kind=KIND, table=table, query_sql="SELECT 1 AS n, 'eu' AS region", columns=None,
                    partitioned_by=("region",))
    # a killed writer's leftovers: partition `us`, which the version's query never returns
    engine.sql(f"INSERT INTO {table} VALUES (99, 'us'), (98, 'eu')")
    evaluate(engine, kind=KIND, table=table, query="SELECT 1 AS n, 'eu' AS region UNION ALL SELECT 2, 'asia'",
             start=0, end=DAY, execution_time=DAY, first_run=True)
    assert _rows(engine, table) == [(1, "eu"), (2, "asia")]

    evaluate(engine, kind=KIND, table=table, query="SELECT 3 AS n, 'eu' AS region",
             start=DAY, end=2 * DAY, execution_time=2 * DAY, first_run=False)
    assert _rows(engine, table) == [(2, "asia"), (3, "eu")]
