"""Write a test project's files (relative path -> text) under a root folder."""

from __future__ import annotations

from pathlib import Path

# A project on local Spark (two threads) with its state in SQLite under .meshbot/, daily models from 2024-01-01.
LOCAL_SPARK_SQLITE_CONFIG = """\
gateways:
  local:
    connection: {type: spark, master: 'local[2]'}
    state_connection: {type: sqlite, database: .meshbot/state.db}
default_gateway: local
model_defaults: {dialect: spark, start: '2024-01-01', cron: '@daily'}
"""

# The same on the default local master, for models written in DuckDB's dialect (as SQLMesh's DuckDB projects are).
DUCKDB_DIALECT_CONFIG = """
gateways:
  local:
    connection:
      type: spark
    state_connection: {type: sqlite, database: .meshbot/state.db}
default_gateway: local
model_defaults:
  dialect: duckdb
  start: '2024-01-01'
"""


def write_files(root: Path, files: dict[str, str]) -> Path:
    """Write each file, creating its folders; returns `root`."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root
