"""INCREMENTAL_BY_TIME_RANGE: exact interval replacement, no stale rows, self-referencing models."""

from __future__ import annotations

import uuid
from datetime import date

import pytest

from bot.errors import EngineError
from bot.project.model import Kind, KindName
from bot.spark.engine import SparkEngine
from bot.spark.materialize import create_physical, evaluate

DAY = 86_400_000
JAN1 = 1_704_067_200_000  # 2024-01-01T00:00:00Z


def day(n: int) -> int:
    return JAN1 + (n - 1) * DAY


@pytest.fixture
def engine(clean_catalog):
    engine = SparkEngine(clean_catalog)
    engine.db = f"inc_{uuid.uuid4().hex[:8]}"
    engine.create_schemas([engine.db])
    return engine


def _values(rows: list[tuple[str, int]]) -> str:
    if not rows:
        return "SELECT CAST(NULL AS STRING) AS ds, CAST(NULL AS INT) AS v WHERE FALSE"
    return "SELECT * FROM VALUES " + ", ".join(f"('{ds}', {v})" for ds, v in rows) + " AS t(ds, v)"


def _run(engine, table, kind, query, n, *, first=False, days=1):
    evaluate(engine, kind=kind, table=table, query=query, start=day(n), end=day(n + days),
             execution_time=day(n + days), first_run=first)


def _rows(engine, table):
    return sorted(tuple(str(v) for v in row.values()) for row in engine.fetch(f"SELECT * FROM {table}"))


def test_string_ds_intervals_restatement_and_empty_day(engine):
    table = f"{engine.db}.events__1"
    kind = Kind(name=KindName.INCREMENTAL_BY_TIME_RANGE, time_column="ds")
    create_physical(engine, kind=kind, table=table, query_sql=None, columns=[("ds", "TEXT"), ("v", "INT")])
    # rows outside the interval are never written
    _run(engine, table, kind, _values([("2024-01-01", 1), ("2024-01-02", 99)]), 1, first=True)
    _run(engine, table, kind, _values([("2024-01-02", 2), ("2024-01-02", 3)]), 2)
    _run(engine, table, kind, _values([("2024-01-03", 4)]), 3)
    assert _rows(engine, table) == [("2024-01-01", "1"), ("2024-01-02", "2"), ("2024-01-02", "3"),
                                    ("2024-01-03", "4")]
    _run(engine, table, kind, _values([("2024-01-01", 10), ("2024-01-01", 11)]), 1)
    assert _rows(engine, table) == [("2024-01-01", "10"), ("2024-01-01", "11"), ("2024-01-02", "2"),
                                    ("2024-01-02", "3"), ("2024-01-03", "4")]
    _run(engine, table, kind, _values([]), 1)
    assert _rows(engine, table) == [("2024-01-02", "2"), ("2024-01-02", "3"), ("2024-01-03", "4")]
    assert engine.existing_objects(engine.db) == {"events__1"}
    # a new process knows no watermark: it probes the table, then appends day 4 and restates day 3
    fresh = SparkEngine(engine.session)
    _run(fresh, table, kind, _values([("2024-01-04", 5)]), 4)
    _run(fresh, table, kind, _values([("2024-01-03", 6)]), 3)
    assert _rows(engine, table) == [("2024-01-02", "2"), ("2024-01-02", "3"), ("2024-01-03", "6"),
                                    ("2024-01-04", "5")]


def test_date_column_batch_of_two_days_and_compact_string_format(engine):
    table = f"{engine.db}.daily__1"
    kind = Kind(name=KindName.INCREMENTAL_BY_TIME_RANGE, time_column="d")
    query = "SELECT DATE'2024-01-01' + CAST(id AS INT) AS d, CAST(id AS INT) AS v FROM range(5)"
    create_physical(engine, kind=kind, table=table, query_sql=query, columns=None)
    _run(engine, table, kind, query, 2, first=True, days=2)
    assert [r["d"] for r in engine.fetch(f"SELECT d FROM {table} ORDER BY d")] == [date(2024, 1, 2),
                                                                                   date(2024, 1, 3)]
    compact = Kind(name=KindName.INCREMENTAL_BY_TIME_RANGE, time_column="ds", time_column_format="%Y%m%d")
    other = f"{engine.db}.compact__1"
    create_physical(engine, kind=compact, table=other, query_sql=None, columns=[("ds", "STRING"), ("v", "INT")])
    _run(engine, other, compact, _values([("20240101", 1), ("20240102", 2)]), 2, first=True)
    assert _rows(engine, other) == [("20240102", "2")]


def test_a_new_process_replaces_a_date_interval_the_table_already_holds(engine):
    """A killed writer's unrecorded batch, a lookback or a restatement, in a process that has not
    written the table yet: its watermark comes from MAX(date), and the interval is replaced, not added."""
    table = f"{engine.db}.dated__1"
    kind = Kind(name=KindName.INCREMENTAL_BY_TIME_RANGE, time_column="d")
    query = "SELECT DATE'2024-01-01' + CAST(id AS INT) AS d, CAST(id AS INT) AS v FROM range(5)"
    create_physical(engine, kind=kind, table=table, query_sql=query, columns=None)
    _run(engine, table, kind, query, 1, first=True, days=3)
    fresh = SparkEngine(engine.session)
    _run(fresh, table, kind, query, 3)
    _run(fresh, table, kind, query, 4)
    assert [str(r["d"]) for r in engine.fetch(f"SELECT d FROM {table} ORDER BY d")] == [
        "2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"]


def test_self_referencing_cumulative_sum_reads_previous_rows(engine):
    table = f"{engine.db}.running__1"
    kind = Kind(name=KindName.INCREMENTAL_BY_TIME_RANGE, time_column="d")

    def query(n: int, extra: int = 0) -> str:
        d = date(2024, 1, n).isoformat()
        return (f"SELECT DATE'{d}' AS d, CAST(COALESCE((SELECT MAX(total) FROM {table} "
                f"WHERE d < DATE'{d}'), 0) + {n + extra} AS BIGINT) AS total")

    create_physical(engine, kind=kind, table=table, query_sql=None, columns=[("d", "DATE"), ("total", "BIGINT")])
    for n in (1, 2, 3):
        _run(engine, table, kind, query(n), n, first=n == 1)
    assert [r["total"] for r in engine.fetch(f"SELECT total FROM {table} ORDER BY d")] == [1, 3, 6]
    _run(engine, table, kind, query(2, extra=100), 2)  # restating day 2 reads day 1 of its own table
    assert [r["total"] for r in engine.fetch(f"SELECT total FROM {table} ORDER BY d")] == [1, 103, 6]


def test_missing_time_column_is_a_clear_error(engine):
    kind = Kind(name=KindName.INCREMENTAL_BY_TIME_RANGE, time_column="event_date")
    with pytest.raises(EngineError, match=r"time_column `event_date` is not among the columns \(ds, v\)"):
        create_physical(engine, kind=kind, table=f"{engine.db}.bad", query_sql=None,
                        columns=[("ds", "TEXT"), ("v", "INT")])


def test_an_interval_replaced_out_of_order_keeps_the_tables_properties(engine):
    """The replacement is written into a copy that is swapped in: the copy has the table's
    physical_properties (a model's table properties), not just its columns."""
    table = f"{engine.db}.events__2"
    kind = Kind(name=KindName.INCREMENTAL_BY_TIME_RANGE, time_column="ds")
    create_physical(engine, kind=kind, table=table, query_sql=None, columns=[("ds", "TEXT"), ("v", "INT")])
    engine.set_table_properties(table, [("team", "data")])
    _run(engine, table, kind, _values([("2024-01-01", 1)]), 1, first=True)
    _run(engine, table, kind, _values([("2024-01-02", 2)]), 2)
    _run(engine, table, kind, _values([("2024-01-01", 10)]), 1)          # before the watermark: replaced
    assert _rows(engine, table) == [("2024-01-01", "10"), ("2024-01-02", "2")]
    properties = {row["key"]: row["value"] for row in engine.fetch(f"SHOW TBLPROPERTIES {table}")}
    assert properties.get("team") == "data"
