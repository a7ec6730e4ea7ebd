"""SEED: CSV loaded with declared types and csv_settings, or inferred types; reloads replace the table."""

from __future__ import annotations

import uuid
from datetime import date
from decimal import Decimal

import pytest

from bot.errors import EngineError
from bot.project.model import Kind, KindName
from bot.spark.engine import SparkEngine
from bot.spark.materialize import create_physical, evaluate


@pytest.fixture
def engine(clean_catalog):
    engine = SparkEngine(clean_catalog)
    engine.db = f"seed_{uuid.uuid4().hex[:8]}"
    engine.create_schemas([engine.db])
    return engine


def _load(engine, kind, table, columns=None):
    create_physical(engine, kind=kind, table=table, query_sql=None, columns=columns)
    evaluate(engine, kind=kind, table=table, query=None, start=0, end=1, execution_time=1, first_run=True)


def test_seed_with_declared_types_and_csv_settings(engine, tmp_path):
    path = tmp_path / "items.csv"
    path.write_text("id|name|price|day|active\n1|'a|b'|1.50|2024-01-02|true\n2||3|2024-01-03|false\n")
    kind = Kind(name=KindName.SEED, seed_path=str(path), csv_settings=(("delimiter", "|"), ("quotechar", "'")))
    table = f"{engine.db}.items__1"
    columns = [("id", "INT"), ("name", "TEXT"), ("price", "DECIMAL(10,2)"), ("day", "DATE"), ("active", "BOOLEAN")]
    _load(engine, kind, table, columns)
    _load(engine, kind, table, columns)  # a reload replaces, never appends
    assert engine.columns(table) == [("id", "INT"), ("name", "STRING"), ("price", "DECIMAL(10,2)"),
                                     ("day", "DATE"), ("active", "BOOLEAN")]
    assert engine.fetch(f"SELECT * FROM {table} ORDER BY id") == [
        {"id": 1, "name": "a|b", "price": Decimal("1.50"), "day": date(2024, 1, 2), "active": True},
        {"id": 2, "name": None, "price": Decimal("3.00"), "day": date(2024, 1, 3), "active": False},
    ]


def test_seed_with_inferred_types_and_bad_settings(engine, tmp_path):
    path = tmp_path / "plain.csv"
    path.write_text("id,score,label\n1,0.5,x\n2,,y\n")
    table = f"{engine.db}.plain__1"
    _load(engine, Kind(name=KindName.SEED, seed_path=str(path)), table)
    assert engine.columns(table) == [("id", "BIGINT"), ("score", "DOUBLE"), ("label", "STRING")]
    assert engine.fetch(f"SELECT * FROM {table} ORDER BY id") == [{"id": 1, "score": 0.5, "label": "x"},
                                                                   {"id": 2, "score": None, "label": "y"}]
    with pytest.raises(EngineError, match="unknown csv_settings key `sepp`"):
        _load(engine, Kind(name=KindName.SEED, seed_path=str(path), csv_settings=(("sepp", ";"),)),
              f"{engine.db}.other")
