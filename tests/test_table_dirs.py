"""A new table's directory is made before CREATE TABLE on a local warehouse: the table is an ordinary
managed table there, and a CREATE TABLE that fails leaves no directory behind."""

from __future__ import annotations

import uuid
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from bot.errors import EngineError
from bot.spark.engine import SparkEngine
from bot.spark.table_dirs import local_table_directory


@pytest.fixture
def schema(clean_catalog):
    engine = SparkEngine(clean_catalog)
    name = f"dirs_{uuid.uuid4().hex[:8]}"
    engine.create_schemas([name])
    location = engine.fetch(f"DESCRIBE SCHEMA `{name}`")
    path = Path(unquote(urlparse(next(row["info_value"] for row in location if row["info_name"] == "Location")).path))
    return engine, name, path


def _location(engine: SparkEngine, table: str) -> Path:
    rows = engine.fetch(f"DESCRIBE FORMATTED {table}")
    return Path(unquote(urlparse(next(row["data_type"] for row in rows if row["col_name"] == "Location")).path))


def test_a_table_made_in_its_directory_is_an_ordinary_managed_table(schema):
    engine, db, schema_dir = schema
    table = f"{db}.Orders__1"
    # the directory made beforehand is the one Spark's catalog gives the table
    assert local_table_directory(schema_dir.as_uri(), "Orders__1") == schema_dir / "orders__1"
    engine.create_table(table, columns=[("id", "INT"), ("ds", "STRING")], partitioned_by=["ds"])
    assert _location(engine, table) == schema_dir / "orders__1"
    engine.execute(f"INSERT INTO {table} VALUES (1, '2024-01-01'), (2, '2024-01-02')")
    assert sorted(row["id"] for row in engine.fetch(f"SELECT id FROM {table}")) == [1, 2]
    engine.drop_table(table)
    assert not (schema_dir / "orders__1").exists()   # managed: dropping it removes its files


def test_a_failed_create_table_leaves_no_directory(schema):
    engine, db, schema_dir = schema
    with pytest.raises(EngineError, match="creating table"):
        engine.create_table(f"{db}.broken__2", columns=[("id", "INT")], partitioned_by=["missing"])
    assert not (schema_dir / "broken__2").exists()


def test_a_directory_with_files_is_refused_and_kept(schema):
    engine, db, schema_dir = schema
    (schema_dir / "taken__3").mkdir()
    (schema_dir / "taken__3" / "part-0.parquet").write_bytes(b"not ours")
    with pytest.raises(EngineError, match="creating table"):
        engine.create_table(f"{db}.taken__3", columns=[("id", "INT")])
    assert (schema_dir / "taken__3" / "part-0.parquet").read_bytes() == b"not ours"
