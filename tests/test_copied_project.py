"""A project copied with its .meshbot/ must never write into the original's warehouse (real Spark, subprocesses)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bot.project.example import write_example
from bot.spark.session import foreign_databases

pytestmark = pytest.mark.spark   # meshbot calls start Spark in their own process; the run's session

ROOT = Path(__file__).resolve().parent.parent


def _meshbot(project: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "SPARK_"))}
    return subprocess.run([sys.executable, "-m", "bot", "-p", str(project), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def test_copy_with_its_catalog_is_refused_before_writing(tmp_path):
    original = tmp_path / "original"
    write_example(original)
    made = _meshbot(original, "fetchdf", "--allow-writes", "CREATE DATABASE shop_copy_check")
    assert made.returncode == 0, made.stderr
    warehouse = original / ".meshbot" / "warehouse"
    before = sorted(p.relative_to(warehouse) for p in warehouse.rglob("*"))
    assert Path("shop_copy_check.db") in before

    copy = tmp_path / "copy"
    shutil.copytree(original, copy, symlinks=True)
    jvm_log = (copy / ".meshbot" / "spark.log").read_bytes()
    refused = _meshbot(copy, "fetchdf", "--allow-writes", "CREATE TABLE shop_copy_check.t AS SELECT 1 AS x")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    err = refused.stderr.strip()
    assert err.startswith("Error: the catalog in ") and "belongs to another copy of this project" in err
    assert str(warehouse) in err and str(copy / ".meshbot") in err and "Nothing was written" in err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert sorted(p.relative_to(warehouse) for p in warehouse.rglob("*")) == before   # original untouched
    # The original recorded its warehouse, so the copy was refused before its JVM started.
    assert (copy / ".meshbot" / "spark.log").read_bytes() == jvm_log


def test_catalog_check_finds_databases_of_another_warehouse(spark, spark_state_dir, tmp_path):
    """A catalog without that record (made before it was kept) is checked in the running session: the
    run's own catalog is foreign to any other project's warehouse, and its own warehouse's to nobody."""
    databases = spark.catalog.listDatabases()
    assert foreign_databases(databases, (spark_state_dir / "warehouse").resolve()) == []
    foreign = foreign_databases(databases, (tmp_path / ".meshbot" / "warehouse").resolve())
    assert ("default", (spark_state_dir / "warehouse").resolve()) in foreign
