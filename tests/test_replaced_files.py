"""A reader whose session listed a table's files before another process replaced them (a run and a deploy,
two environments sharing a parent) refreshes the table and runs its statement once more, instead of failing
with FAILED_READ_FILE.FILE_NOT_EXIST."""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import urlparse


def _replace_files_behind_the_session(engine, table: str) -> None:
    """What another process's overwrite does to the table's directory: new data files, the old ones gone."""
    location = next(r["data_type"] for r in engine.fetch(f"DESCRIBE TABLE EXTENDED {table}")
                    if r["col_name"] == "Location")
    directory = Path(urlparse(location).path)
    for part in directory.glob("part-*"):
        shutil.copy(part, part.with_name(part.name.replace("part-", "part-replaced-", 1)))
        part.unlink()


def test_a_statement_reading_replaced_files_is_run_again_after_a_refresh(engine_schema):
    engine, schema = engine_schema
    source, target = f"{schema}.source", f"{schema}.target"
    engine.sql(f"CREATE TABLE {source} (id INT) USING PARQUET")
    engine.sql(f"INSERT INTO {source} VALUES (1), (2), (3)")
    engine.sql(f"CREATE TABLE {target} (id INT) USING PARQUET")
    assert len(engine.fetch(f"SELECT * FROM {source}")) == 3        # the session now holds the file listing
    _replace_files_behind_the_session(engine, source)
    engine.sql(f"INSERT INTO {target} SELECT id FROM {source}")     # a batch reading a parent
    assert sorted(r["id"] for r in engine.fetch(f"SELECT id FROM {target}")) == [1, 2, 3]
    _replace_files_behind_the_session(engine, source)
    assert sorted(r["id"] for r in engine.fetch(f"SELECT id FROM {source}")) == [1, 2, 3]
