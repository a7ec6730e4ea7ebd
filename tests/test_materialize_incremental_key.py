"""INCREMENTAL_BY_UNIQUE_KEY: deterministic dedup, composite NULL-safe keys, update plus insert."""

from __future__ import annotations

import uuid

import pytest

from bot.errors import EngineError
from bot.project.model import Kind, KindName
from bot.spark.engine import SparkEngine
from bot.spark.materialize import create_physical, evaluate

DAY = 86_400_000


@pytest.fixture
def engine(clean_catalog):
    engine = SparkEngine(clean_catalog)
    engine.db = f"key_{uuid.uuid4().hex[:8]}"
    engine.create_schemas([engine.db])
    return engine


def _values(rows) -> str:
    def lit(v):
        return "NULL" if v is None else repr(v)
    body = ", ".join("(" + ", ".join(lit(v) for v in row) + ")" for row in rows)
    return f"SELECT * FROM VALUES {body} AS t(k1, k2, v)"


def _run(engine, table, kind, rows, *, first=False):
    evaluate(engine, kind=kind, table=table, query=_values(rows), start=0, end=DAY,
             execution_time=DAY, first_run=first)


def _rows(engine, table):
    return sorted((tuple(row.values()) for row in engine.fetch(f"SELECT * FROM {table}")), key=str)


def test_duplicates_in_a_batch_have_a_deterministic_winner(engine):
    kind = Kind(name=KindName.INCREMENTAL_BY_UNIQUE_KEY, unique_key=("k1",))
    columns = [("k1", "INT"), ("k2", "STRING"), ("v", "INT")]
    for name, rows in (("a", [(1, "x", 5), (1, "y", 2), (2, "z", 1)]),
                       ("b", [(2, "z", 1), (1, "y", 2), (1, "x", 5)])):
        table = f"{engine.db}.{name}"
        create_physical(engine, kind=kind, table=table, query_sql=None, columns=columns)
        _run(engine, table, kind, rows, first=True)
        # the winner sorts last by all columns: (1, 'y', 2) beats (1, 'x', 5)
        assert _rows(engine, table) == [(1, "y", 2), (2, "z", 1)]


def test_composite_null_safe_keys_update_and_insert(engine):
    kind = Kind(name=KindName.INCREMENTAL_BY_UNIQUE_KEY, unique_key=("k1", "K2"))
    table = f"{engine.db}.t__1"
    create_physical(engine, kind=kind, table=table, query_sql=None,
                    columns=[("k1", "INT"), ("k2", "STRING"), ("v", "INT")])
    _run(engine, table, kind, [(1, "a", 1), (1, "b", 2), (2, None, 3)], first=True)
    _run(engine, table, kind, [(1, "b", 20), (2, None, 30), (3, "c", 4), (3, "c", 5)])
    assert _rows(engine, table) == [(1, "a", 1), (1, "b", 20), (2, None, 30), (3, "c", 5)]
    assert engine.existing_objects(engine.db) == {"t__1"}


def test_unknown_key_is_a_clear_error(engine):
    kind = Kind(name=KindName.INCREMENTAL_BY_UNIQUE_KEY, unique_key=("id",))
    table = f"{engine.db}.bad"
    create_physical(engine, kind=kind, table=table, query_sql=None, columns=[("k1", "INT"), ("v", "INT")])
    with pytest.raises(EngineError, match=r"bad: unique_key column\(s\) id not in the table's columns \(k1, v\)"):
        evaluate(engine, kind=kind, table=table, query="SELECT 1 AS k1, 2 AS v", start=0, end=DAY,
                 execution_time=DAY, first_run=False)
