"""A writer replacing an interval's rows swaps a rewritten copy in (drop the table, rename the copy):
for that moment the table's name is absent. Another plan looking at the catalog then must neither
create an empty table in its place (the writer's rename would fail and the version's recorded
intervals would be served from an empty table) nor forget the intervals as if the table were gone.
Both cases were seen in the chaos test with a SIGKILL every round."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from bot.context import Context
from bot.plan.claims import Claims, version_key
from bot.plan.definition import PlanOptions
from bot.spark.engine import SWAP_SUFFIX

from test_faults import write_project

SWAP = SWAP_SUFFIX


def _dead_owner() -> str:
    """A lease owner on this host whose process has ended (as a SIGKILLed writer's)."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                           text=True, check=True)
    return f"{socket.gethostname()}:{child.stdout.strip()}:0123456789ab"


def _events_days(context: Context, view: str) -> list[dict]:
    return context.fetchdf(f"SELECT ds, COUNT(*) AS n, SUM(amount) AS total FROM {view} GROUP BY ds ORDER BY ds")


def test_a_plan_finishes_the_swap_of_a_writer_killed_between_drop_and_rename(tmp_path, clean_catalog):
    root = write_project(tmp_path / "p", "swk")
    context = Context(root)
    context.apply(context.plan("prod", options=PlanOptions(execution_time="2024-01-04")))
    snapshot = context.state.get_environment("prod").by_name()["swk.events"]
    table = snapshot.table_name
    before = _events_days(context, "swk.events")
    assert [row["n"] for row in before] == [3, 3, 3]

    # the writer swapped a rewritten copy in: dropped the table, then was killed before renaming the copy
    clean_catalog.sql(f"ALTER TABLE {table} RENAME TO {table}{SWAP}")
    lease = context.state.acquire_lease(version_key(snapshot.name, snapshot.version), owner=_dead_owner(),
                                        purpose="plan of `prod`", ttl_ms=600_000)
    assert lease.granted

    again = Context(root)
    again.apply(again.plan("dev", options=PlanOptions(execution_time="2024-01-04", include_unmodified=True)))
    assert _events_days(again, "swk__dev.events") == before
    ran = again.run("prod", execution_time="2024-01-05")
    # only 2024-01-04 of events: its three recorded days were kept
    assert [start for name, start, _ in ran.evaluated if name == "swk.events"] == [1704326400000]
    assert _events_days(again, "swk.events") == before + [{"ds": "2024-01-04", "n": 3, "total": 12}]
    tables = {row["tableName"] for row in clean_catalog.sql("SHOW TABLES IN sqlmesh__swk").collect()}
    assert table.split(".")[1] in tables and not any(name.endswith(SWAP) for name in tables)


def test_a_plan_waits_for_a_swap_in_flight_instead_of_creating_an_empty_table(tmp_path, clean_catalog):
    shared = {"type": "sqlite", "database": str(tmp_path / "state.db")}   # two checkouts, one state
    first, second = (write_project(tmp_path / name, "swl", state=shared) for name in ("a", "b"))
    base = Context(first)
    base.apply(base.plan("prod", options=PlanOptions(execution_time="2024-01-04")))
    for root in (first, second):
        write_project(root, "swl", amount="amount * 2", state=shared)
    pra, prb = Context(first), Context(second)
    when = PlanOptions(execution_time="2024-01-04")
    plan_a, plan_b = pra.plan("pra", options=when), prb.plan("prb", options=when)
    snapshot = plan_b.snapshots["swl.events"]
    assert snapshot.snapshot_id in {s.snapshot_id for s in plan_b.new_snapshots}   # new when prb planned
    pra.apply(plan_a)                       # ... and then created and filled by pra
    table = snapshot.table_name

    # a third writer of the same version is swapping rows in: it holds the version's lease, the table's
    # name is absent, its rewritten copy is written
    writer = Claims(pra.state)
    with writer.hold(version_key(snapshot.name, snapshot.version), "run of `pra`"):
        clean_catalog.sql(f"ALTER TABLE {table} RENAME TO {table}{SWAP}")
        applied: dict = {}
        waiting = threading.Event()

        def progress(line: str, *_: object) -> None:
            if line.startswith("waiting for") and "run of `pra`" in line:
                waiting.set()

        thread = threading.Thread(target=lambda: applied.update(result=prb.apply(plan_b, progress=progress)))
        thread.start()
        assert waiting.wait(timeout=300), "prb never waited for the writer's lease"
        clean_catalog.sql(f"ALTER TABLE {table}{SWAP} RENAME TO {table}")   # the writer's rename
    thread.join(timeout=300)

    assert not thread.is_alive() and "result" in applied
    assert applied["result"].evaluated == ()      # every batch was pra's, and its rows are there
    assert {name for name, _, _ in applied["result"].reused} == {"swl.events", "swl.daily"}
    expected = [{"ds": f"2024-01-0{day}", "n": 3, "total": 2 * 3 * day} for day in (1, 2, 3)]
    assert _events_days(prb, "swl__prb.events") == expected
    assert _events_days(pra, "swl__pra.events") == expected


def test_a_statement_reading_a_table_while_its_copy_is_swapped_in_waits_for_the_rename(engine_schema,
                                                                                         monkeypatch):
    """Between the writer's drop and rename the name is absent: a reader (a child's batch) waits for the
    rename instead of failing; a table that is simply missing still fails at once."""
    from bot.errors import EngineError
    from bot.spark.errors import spark_errors

    engine, db = engine_schema
    engine.sql(f"CREATE TABLE {db}.src USING parquet AS SELECT id FROM range(3)")
    engine.sql(f"CREATE TABLE {db}.copy (id BIGINT) USING parquet")
    engine.sql(f"ALTER TABLE {db}.src RENAME TO {db}.src{SWAP}")          # the writer dropped src
    looks = []
    look = engine.tables_exist_now

    def look_then_rename(tables):   # the writer renames its copy right after the reader's first look
        found = look(tables)
        looks.append(found)
        if len(looks) == 1:
            engine.session.sql(f"ALTER TABLE {db}.src{SWAP} RENAME TO {db}.src")
        return found

    monkeypatch.setattr(engine, "tables_exist_now", look_then_rename)
    engine.sql(f"INSERT INTO {db}.copy SELECT id FROM {db}.src")
    assert looks[0] == {f"{db}.src": False, f"{db}.src{SWAP}": True} and looks[-1][f"{db}.src"]
    assert sorted(row["id"] for row in engine.fetch(f"SELECT id FROM {db}.copy")) == [0, 1, 2]

    with pytest.raises(EngineError, match="TABLE_OR_VIEW_NOT_FOUND"), spark_errors("reading"):
        engine.sql(f"INSERT INTO {db}.copy SELECT id FROM {db}.nowhere")


def test_a_swap_whose_drop_was_killed_after_its_catalog_change_is_finished_over_the_leftover_directory(
        engine_schema):
    """A writer killed inside DROP TABLE (catalog entry gone, directory not yet deleted, on a local
    warehouse) leaves a directory the rename of the copy would refuse: it is removed, the copy renamed."""
    from bot.spark.materialize.common import settle_table

    engine, db = engine_schema
    engine.physical_schemas.add(db)
    engine.sql(f"CREATE TABLE {db}.t{SWAP} USING parquet AS SELECT id FROM range(2)")   # the written copy
    location = engine.fetch(f"DESCRIBE TABLE EXTENDED {db}.t{SWAP}")
    directory = Path(next(row["data_type"] for row in location if row["col_name"] == "Location")
                     .removeprefix("file:")).with_name("t")
    directory.mkdir()
    (directory / "part-00000-old.parquet").write_bytes(b"old rows")
    assert settle_table(engine, f"{db}.t")
    assert sorted(row["id"] for row in engine.fetch(f"SELECT id FROM {db}.t")) == [0, 1]
