"""FULL and VIEW materialization: empty tables created without a Spark job, overwrite, self-reads, views."""

from __future__ import annotations

import uuid

import pytest

from bot.errors import EngineError
from bot.project.model import Kind, KindName
from bot.spark.engine import SparkEngine
from bot.spark.materialize import create_physical, evaluate

DAY = 86_400_000


def _jobs_run_by(spark, action) -> list[int]:
    group = f"probe_{uuid.uuid4().hex[:6]}"
    spark.sparkContext.setJobGroup(group, "probe")
    try:
        action()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    return list(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


def _rows(engine: SparkEngine, table: str) -> list[tuple]:
    return sorted(tuple(row.values()) for row in engine.fetch(f"SELECT * FROM {table}"))


def test_full_creates_without_a_job_then_overwrites_even_when_reading_itself(engine_schema):
    engine, db = engine_schema
    table = f"{db}.orders__1"
    kind = Kind(name=KindName.FULL)
    query = "SELECT CAST(id AS INT) AS id, CAST(id * 1.5 AS DECIMAL(10, 2)) AS amount FROM range(3)"

    jobs = _jobs_run_by(engine.session, lambda: create_physical(
        engine, kind=kind, table=table, query_sql=query, columns=None))
    assert jobs == []
    assert engine.columns(table) == [("id", "INT"), ("amount", "DECIMAL(10,2)")]
    assert engine.fetch(f"SELECT * FROM {table}") == []

    evaluate(engine, kind=kind, table=table, query=query, start=0, end=DAY, execution_time=DAY, first_run=True)
    assert _rows(engine, table) == [(0, 0), (1, 1.5), (2, 3)]
    evaluate(engine, kind=kind, table=table, query=f"SELECT id + 10 AS id, amount FROM {table} WHERE id > 0",
             start=0, end=DAY, execution_time=DAY, first_run=False)
    assert [row[0] for row in _rows(engine, table)] == [11, 12]
    assert not engine.table_exists(table + "__meshbot_stage")


def test_full_with_declared_columns_casts_query_output(engine_schema):
    engine, db = engine_schema
    table = f"{db}.typed"
    kind = Kind(name=KindName.FULL)
    create_physical(engine, kind=kind, table=table, query_sql=None,
                    columns=[("id", "BIGINT"), ("name", "TEXT"), ("d", "DATE")])
    assert engine.columns(table) == [("id", "BIGINT"), ("name", "STRING"), ("d", "DATE")]
    evaluate(engine, kind=kind, table=table, query="SELECT 1 AS ID, 'x' AS name, '2024-01-05' AS d",
             start=0, end=DAY, execution_time=DAY, first_run=True)
    row = engine.fetch(f"SELECT * FROM {table}")[0]
    assert row["id"] == 1 and row["name"] == "x" and str(row["d"]) == "2024-01-05"


def test_view_and_materialized_view(engine_schema):
    engine, db = engine_schema
    view, table = f"{db}.v__1", f"{db}.mv__1"
    create_physical(engine, kind=Kind(name=KindName.VIEW), table=view, query_sql="SELECT 1 AS a", columns=None)
    assert engine.existing_objects(db) == {"v__1"}
    evaluate(engine, kind=Kind(name=KindName.VIEW), table=view, query="SELECT 2 AS a",
             start=0, end=DAY, execution_time=DAY, first_run=False)
    assert engine.fetch(f"SELECT * FROM {view}") == [{"a": 2}]

    materialized = Kind(name=KindName.VIEW, materialized=True)
    create_physical(engine, kind=materialized, table=table, query_sql="SELECT 1 AS a", columns=None)
    evaluate(engine, kind=materialized, table=table, query="SELECT 3 AS a",
             start=0, end=DAY, execution_time=DAY, first_run=True)
    assert engine.fetch(f"SELECT * FROM {table}") == [{"a": 3}]
    assert "Parquet" in str(engine.fetch(f"DESCRIBE TABLE EXTENDED {table}"))


def test_partitioned_full_overwrite_replaces_every_partition_and_self_reads_need_columns(engine_schema):
    engine, db = engine_schema
    table = f"{db}.parts__1"
    kind = Kind(name=KindName.FULL)
    create_physical(engine, kind=kind, table=table, query_sql=None, columns=[("v", "INT"), ("p", "STRING")],
                    partitioned_by=("p",))
    for query in ("SELECT 1 AS v, 'a' AS p", "SELECT 2 AS v, 'b' AS p"):
        evaluate(engine, kind=kind, table=table, query=query, start=0, end=DAY, execution_time=DAY,
                 first_run=False)
    assert engine.fetch(f"SELECT * FROM {table}") == [{"v": 2, "p": "b"}]
    with pytest.raises(EngineError, match="must declare its columns"):
        create_physical(engine, kind=kind, table=f"{db}.loop", query_sql=f"SELECT * FROM {db}.loop",
                        columns=None)


@pytest.mark.parametrize("as_frame", [False, True], ids=["sql", "python"])
def test_a_full_refresh_that_fails_keeps_the_rows_it_served_and_one_that_succeeds_keeps_the_table(
        engine_schema, as_frame):
    """INSERT OVERWRITE in place deletes the table's files before its job runs: a refresh failing on
    its data (or killed) would leave the version's recorded intervals over an empty table."""
    engine, db = engine_schema
    table = f"{db}.daily__1"
    kind = Kind(name=KindName.FULL)
    create_physical(engine, kind=kind, table=table, query_sql=None, columns=[("n", "INT"), ("ds", "STRING")],
                    partitioned_by=["ds"])
    engine.set_table_properties(table, [("team", "data")])

    def query(sql: str):
        return engine.session.sql(sql) if as_frame else sql

    def refresh(sql: str, first_run: bool = False) -> None:
        evaluate(engine, kind=kind, table=table, query=query(sql), start=0, end=DAY, execution_time=DAY,
                 first_run=first_run)

    refresh("SELECT CAST(id AS INT) AS n, CAST(id AS STRING) AS ds FROM range(3)", first_run=True)
    with pytest.raises(EngineError, match="bad row"):
        refresh("SELECT CAST(IF(id = 4, raise_error('bad row'), id) AS INT) AS n, CAST(id AS STRING) AS ds "
                "FROM range(5)")
    assert _rows(engine, table) == [(0, "0"), (1, "1"), (2, "2")]

    refresh(f"SELECT n * 10 AS n, ds FROM {table} UNION ALL SELECT 7, '7'")   # reads itself
    assert _rows(engine, table) == [(0, "0"), (7, "7"), (10, "1"), (20, "2")]
    assert engine.partition_columns(table) == ["ds"]
    properties = {row["key"]: row["value"] for row in engine.fetch(f"SHOW TBLPROPERTIES {table}")}
    assert properties.get("team") == "data"
    assert not engine.table_exists(table + "__meshbot_swap")
