"""A project copied with its .meshbot/ must never write into the original's warehouse (real Spark, subprocesses)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bot.project.example import write_example

pytestmark = pytest.mark.spark   # each meshbot call starts Spark in its own process

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
    refused = _meshbot(copy, "fetchdf", "--allow-writes", "CREATE TABLE shop_copy_check.t AS SELECT 1 AS x")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    err = refused.stderr.strip()
    assert err.startswith("Error: the catalog in ") and "belongs to another copy of this project" in err
    assert str(warehouse) in err and str(copy / ".meshbot") in err and "Nothing was written" in err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert sorted(p.relative_to(warehouse) for p in warehouse.rglob("*")) == before   # original untouched
