"""SCD_TYPE_2_BY_TIME and SCD_TYPE_2_BY_COLUMN: versions, validity ranges and hard deletes."""

from __future__ import annotations

import uuid
from datetime import datetime

import pytest

from bot.project.model import Kind, KindName
from bot.spark.engine import SparkEngine
from bot.spark.materialize import create_physical, evaluate

EPOCH = datetime(1970, 1, 1)
T1 = 1_704_067_200_000  # 2024-01-01 00:00 UTC, execution time of the first run
T2 = T1 + 86_400_000    # 2024-01-02 00:00 UTC


@pytest.fixture
def engine(clean_catalog):
    engine = SparkEngine(clean_catalog)
    engine.db = f"scd_{uuid.uuid4().hex[:8]}"
    engine.create_schemas([engine.db])
    return engine


def _values(rows) -> str:
    body = ", ".join(f"({k}, '{name}', '{extra}', TIMESTAMP'{ts}')" for k, name, extra, ts in rows)
    return f"SELECT * FROM VALUES {body} AS t(id, name, extra, updated_at)"


def _run(engine, table, kind, rows, *, at, first=False):
    evaluate(engine, kind=kind, table=table, query=_values(rows), start=0, end=at, execution_time=at,
             first_run=first)


def _history(engine, table):
    rows = engine.fetch(f"SELECT id, name, valid_from, valid_to FROM {table} ORDER BY id, valid_from")
    return [(r["id"], r["name"], r["valid_from"], r["valid_to"]) for r in rows]


def test_scd2_by_time_versions_and_hard_deletes(engine):
    kind = Kind(name=KindName.SCD_TYPE_2_BY_TIME, unique_key=("id",), invalidate_hard_deletes=True)
    table = f"{engine.db}.customers__1"
    first = [(1, "ann", "x", "2023-12-01 00:00:00"), (2, "bob", "x", "2023-12-01 00:00:00")]
    create_physical(engine, kind=kind, table=table, query_sql=_values(first), columns=None)
    assert [name for name, _ in engine.columns(table)][-2:] == ["valid_from", "valid_to"]
    _run(engine, table, kind, first, at=T1, first=True)
    _run(engine, table, kind, [(1, "anne", "x", "2023-12-15 00:00:00"), (1, "old", "x", "2023-12-02 00:00:00"),
                               (3, "cy", "x", "2023-12-20 00:00:00")], at=T2)
    assert _history(engine, table) == [
        (1, "ann", EPOCH, datetime(2023, 12, 15)),
        (1, "anne", datetime(2023, 12, 15), None),
        (2, "bob", EPOCH, datetime(2024, 1, 2)),          # hard delete closes at execution time
        (3, "cy", datetime(2023, 12, 20), None),
    ]


def test_scd2_by_column_watches_only_its_columns_and_keeps_deleted_rows_open(engine):
    kind = Kind(name=KindName.SCD_TYPE_2_BY_COLUMN, unique_key=("id",), scd_columns=("name",))
    table = f"{engine.db}.dim__1"
    create_physical(engine, kind=kind, table=table, query_sql=None,
                    columns=[("id", "INT"), ("name", "TEXT"), ("extra", "TEXT"), ("updated_at", "TIMESTAMP")])
    ts = "2023-12-01 00:00:00"
    _run(engine, table, kind, [(1, "ann", "x", ts), (2, "bob", "x", ts)], at=T1, first=True)
    _run(engine, table, kind, [(1, "ann", "CHANGED", ts), (3, "cy", "x", ts)], at=T2)
    assert _history(engine, table) == [(1, "ann", EPOCH, None), (2, "bob", EPOCH, None),
                                       (3, "cy", datetime(2024, 1, 2), None)]
    _run(engine, table, kind, [(1, "anna", "x", ts), (3, "cy", "x", ts)], at=T2 + 86_400_000)
    assert _history(engine, table)[:2] == [(1, "ann", EPOCH, datetime(2024, 1, 3)),
                                           (1, "anna", datetime(2024, 1, 3), None)]
