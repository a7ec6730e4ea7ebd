"""A new table's directory is made before CREATE TABLE on a local warehouse: the table is an ordinary
managed table there, and a CREATE TABLE that fails leaves no directory behind."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

import bot.spark.engine as engine_module
from bot.errors import EngineError
from bot.spark.engine import SparkEngine
from bot.spark.table_dirs import made_beforehand


@pytest.fixture
def schema(engine_schema):
    engine, name = engine_schema
    location = engine.fetch(f"DESCRIBE SCHEMA `{name}`")
    path = Path(unquote(urlparse(next(row["info_value"] for row in location if row["info_name"] == "Location")).path))
    return engine, name, path


def _location(engine: SparkEngine, table: str) -> Path:
    rows = engine.fetch(f"DESCRIBE FORMATTED {table}")
    return Path(unquote(urlparse(next(row["data_type"] for row in rows if row["col_name"] == "Location")).path))


def test_a_table_made_in_its_directory_is_an_ordinary_managed_table(schema, monkeypatch):
    engine, db, schema_dir = schema
    table = f"{db}.Orders__1"
    made: list[Path | None] = []

    def recording(directory):
        made.append(directory)
        return made_beforehand(directory)

    monkeypatch.setattr(engine_module, "made_beforehand", recording)
    engine.create_table(table, columns=[("id", "INT"), ("ds", "STRING")], partitioned_by=["ds"])
    # the directory made beforehand is the one Spark's catalog gives the table
    assert made == [schema_dir / "orders__1"] and _location(engine, table) == schema_dir / "orders__1"
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


def test_a_directory_made_beforehand_goes_again_only_if_the_statement_fails_and_it_is_empty(tmp_path):
    with made_beforehand(tmp_path / "t"):
        assert (tmp_path / "t").is_dir()
    assert (tmp_path / "t").is_dir()
    with pytest.raises(RuntimeError), made_beforehand(tmp_path / "u"):
        raise RuntimeError("CREATE TABLE failed")
    assert not (tmp_path / "u").exists()
    (tmp_path / "v").mkdir()
    with pytest.raises(RuntimeError), made_beforehand(tmp_path / "v"):
        raise RuntimeError("CREATE TABLE failed")
    assert (tmp_path / "v").is_dir()   # it was there before: not ours to remove
    with made_beforehand(tmp_path / "no" / "schema"):
        pass
    assert not (tmp_path / "no").exists()   # never a schema's directory


def test_in_a_physical_schema_files_without_a_catalog_entry_are_removed_and_the_table_made(schema):
    """A drop or write killed halfway left the files of a table the catalog no longer has."""
    engine, db, schema_dir = schema
    engine.physical_schemas.add(db.lower())
    (schema_dir / "left__4").mkdir()
    (schema_dir / "left__4" / "part-0.parquet").write_bytes(b"a killed writer's")
    engine.create_table(f"{db}.left__4", columns=[("id", "INT")])
    assert engine.fetch(f"SELECT COUNT(*) AS n FROM {db}.left__4") == [{"n": 0}]
    assert _location(engine, f"{db}.left__4") == schema_dir / "left__4"
