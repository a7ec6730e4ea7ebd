"""Janitor on local Spark: expired environments lose their views and schemas; expired snapshots
lose their table only when no live snapshot shares its version; prod is never touched."""

from __future__ import annotations

import re

import pytest

from bot.context import Context
from bot.errors import ConflictError, PlanError
from bot.plan.definition import PlanOptions
from bot.plan.janitor import JanitorResult
from bot.snapshot import SnapshotId
from ops_project import edit, write_ops_project

# No --execution-time: snapshot ages and environment expiry are measured from the plan's time.
OPTIONS = PlanOptions()


def _exists(spark, name: str) -> bool:
    return spark.catalog.tableExists(name)


def _schemas(spark) -> set[str]:
    return {row[0] for row in spark.sql("SHOW DATABASES").collect()}


@pytest.fixture
def with_dev(tmp_path, clean_catalog):
    """prod applied; dev with a metadata-only change to ops.hourly and a breaking change to ops.daily."""
    root = write_ops_project(tmp_path / "ops")
    context = Context(root)
    context.apply(context.plan("prod", options=OPTIONS))
    edit(root / "models" / "hourly.sql", "one row per hour", "one row per clock hour")
    edit(root / "models" / "daily.sql", "FROM ops.hourly", "FROM ops.hourly WHERE h >= 0")
    context = Context(root)
    context.apply(context.plan("dev", options=OPTIONS))
    yield context
    context.close()


def test_janitor_after_invalidate_drops_views_then_unshared_tables(with_dev, spark):
    context = with_dev
    prod = context.state.get_environment("prod").by_name()
    dev = context.state.get_environment("dev").by_name()
    assert dev["ops.hourly"].identifier != prod["ops.hourly"].identifier
    assert dev["ops.hourly"].version == prod["ops.hourly"].version        # metadata-only: shared table
    assert dev["ops.daily"].version != prod["ops.daily"].version          # breaking: its own table
    assert _exists(spark, "ops__dev.daily")

    with pytest.raises(PlanError, match="`prod` cannot be invalidated"):
        context.invalidate("prod")
    assert context.invalidate("dev") is None
    assert _exists(spark, "ops__dev.daily")                               # not synced: still there

    first = context.janitor()
    assert first.environments == ("dev",)
    assert first.views == ("ops__dev.daily", "ops__dev.hourly")
    assert first.schemas == ("ops__dev",)
    assert first.snapshots == () and first.tables == ()                   # snapshot TTL not reached
    assert "ops__dev" not in _schemas(spark)
    assert context.state.get_environment("dev") is None
    assert _exists(spark, dev["ops.daily"].table_name)

    second = context.janitor(ignore_ttl=True)
    assert set(second.snapshots) == {SnapshotId("ops.hourly", dev["ops.hourly"].identifier),
                                     SnapshotId("ops.daily", dev["ops.daily"].identifier)}
    assert second.tables == (dev["ops.daily"].table_name,)
    assert not _exists(spark, dev["ops.daily"].table_name)
    assert _exists(spark, prod["ops.hourly"].table_name)
    assert _exists(spark, prod["ops.daily"].table_name)
    hours = context.fetchdf("SELECT COUNT(*) AS n FROM ops.hourly")[0]["n"]
    assert hours > 24 and context.fetchdf("SELECT hours FROM ops.daily") == [{"hours": hours}]

    assert context.janitor(ignore_ttl=True).is_empty


def test_invalidate_sync_drops_the_environment_at_once(with_dev, spark):
    result = with_dev.invalidate("dev", sync=True)
    assert result.environments == ("dev",) and result.schemas == ("ops__dev",)
    assert result.snapshots == ()                                         # sync cleans the environment only
    assert "ops__dev" not in _schemas(spark)
    assert with_dev.fetchdf("SELECT COUNT(*) AS n FROM ops.hourly")[0]["n"] > 24


def test_janitor_result_lines_name_every_dropped_object():
    result = JanitorResult(environments=("dev",), views=("a__dev.t",), schemas=("a__dev",),
                           snapshots=(SnapshotId("a.t", "123"),), tables=("sqlmesh__a.a__t__9",))
    assert result.lines() == ["Deleted environment `dev`", "Dropped view a__dev.t",
                              "Dropped schema a__dev", "Expired snapshot a.t (123)",
                              "Dropped table sqlmesh__a.a__t__9"]
    assert JanitorResult().is_empty and not result.is_empty


class _Killed(BaseException):
    """Stands for SIGKILL inside this process: nothing after it runs, no handler sees it."""


def _dev_daily_rows(context: Context, env: str) -> list:
    return context.fetchdf(f"SELECT hours FROM ops__{env}.daily")


@pytest.mark.parametrize("killed", ["after its state write", "between a drop and its record"])
def test_a_killed_janitor_is_finished_by_the_next_and_a_plan_of_the_same_change_serves_its_rows(
        with_dev, spark, monkeypatch, killed):
    import bot.plan.janitor as janitor_module
    from bot.spark.engine import SparkEngine

    root = with_dev.path
    table = with_dev.state.get_environment("dev").by_name()["ops.daily"].table_name
    hours = with_dev.fetchdf("SELECT COUNT(*) AS n FROM ops.hourly")[0]["n"]
    with_dev.invalidate("dev")
    if killed == "after its state write":
        def checkpoint(point: str) -> None:
            if point == "janitor-after-state":
                raise _Killed()
        monkeypatch.setattr(janitor_module, "checkpoint", checkpoint)
    else:
        real = SparkEngine.drop_table

        def drop_then_die(self, name: str) -> None:
            real(self, name)
            raise _Killed()
        monkeypatch.setattr(SparkEngine, "drop_table", drop_then_die)
    with pytest.raises(_Killed):
        Context(root).janitor(ignore_ttl=True)
    monkeypatch.undo()
    assert _exists(spark, table) == (killed == "after its state write")

    # the same change planned again before any janitor ran: its table is filled again, not served empty
    dev2 = Context(root)
    dev2.apply(dev2.plan("dev2", options=OPTIONS))
    assert dev2.state.get_environment("dev2").by_name()["ops.daily"].table_name == table
    assert _dev_daily_rows(dev2, "dev2") == [{"hours": hours}]

    # the next janitor finishes the killed one's drops, but not of a version pushed again meanwhile
    after = Context(root).janitor(ignore_ttl=True)
    assert table not in after.tables and _exists(spark, table)
    assert Context(root).state.pending_drops() == []
    assert _dev_daily_rows(dev2, "dev2") == [{"hours": hours}]


def test_janitor_ignoring_ttl_waits_for_a_plan_in_flight_instead_of_deleting_its_snapshots(
        with_dev, monkeypatch):
    from bot.plan.claims import Claims, environment_key

    root = with_dev.path
    edit(root / "models" / "daily.sql", "WHERE h >= 0", "WHERE h >= 1")
    planning = Context(root)
    plan = planning.plan("dev2", options=OPTIONS)
    holder = Claims(planning.state)
    holder.acquire(environment_key("dev2"), planning_purpose := "plan of `dev2` (plan 1a2b3c4d)")
    planning.state.push_snapshots(plan.new_snapshots)   # the plan is applying: its snapshots are stored
    monkeypatch.setenv("MESHBOT_LEASE_WAIT", "1")
    with pytest.raises(PlanError, match=r"gave up after 1s \(MESHBOT_LEASE_WAIT\) waiting for the "
                                        rf"{re.escape(planning_purpose)} on \S+:\d+, holding environment `dev2`"):
        Context(root).janitor(ignore_ttl=True)
    ids = [s.snapshot_id for s in plan.new_snapshots]
    assert set(planning.state.get_snapshots(ids)) == set(ids)   # nothing of the plan was touched
    holder.release(environment_key("dev2"))
    assert Context(root).janitor(ignore_ttl=True).snapshots   # its turn now


def test_a_plan_made_before_the_janitor_removed_what_it_reuses_stops_before_writing(with_dev, spark):
    """The janitor may run between a plan and its apply without the apply ever waiting for it: the plan
    must not promote a version whose table and intervals are gone (its backfills were computed
    before), nor create that table again, empty."""
    root = with_dev.path
    dev = with_dev.state.get_environment("dev").by_name()
    planning = Context(root)
    plan = planning.plan("pr", options=PlanOptions(include_unmodified=True))   # reuses dev's versions
    assert plan.snapshots["ops.daily"].version == dev["ops.daily"].version and not plan.backfills

    with_dev.invalidate("dev", sync=True)
    assert with_dev.janitor(ignore_ttl=True).tables == (dev["ops.daily"].table_name,)
    with pytest.raises(ConflictError, match=r"since this plan was made, the janitor removed what it reuses "
                                            r"\(`ops.daily`.*\); plan again"):
        planning.apply(plan)
    assert planning.state.get_environment("pr") is None
    assert not _exists(spark, dev["ops.daily"].table_name) and "ops__pr" not in _schemas(spark)

    again = Context(root)
    again.apply(again.plan("pr", options=PlanOptions(include_unmodified=True)))
    hours = again.fetchdf("SELECT COUNT(*) AS n FROM ops__pr.hourly")[0]["n"]
    assert hours > 24 and again.fetchdf("SELECT hours FROM ops__pr.daily") == [{"hours": hours}]


def test_a_plan_started_while_the_janitor_holds_its_lease_waits_for_it(with_dev):
    import threading
    import time

    from bot.plan.claims import Claims

    root = with_dev.path
    edit(root / "models" / "daily.sql", "WHERE h >= 0", "WHERE h >= 1")
    context = Context(root)
    plan = context.plan("dev2", options=OPTIONS)
    janitor = Claims(context.state)
    janitor.acquire("janitor", "janitor")
    threading.Timer(1.5, janitor.release, args=("janitor",)).start()
    lines: list[str] = []
    started = time.monotonic()
    context.apply(plan, progress=lambda line, *_: lines.append(line))
    assert time.monotonic() - started >= 1.4
    assert [line for line in lines if line.startswith("waiting for the janitor on ")]
    assert context.state.get_environment("dev2").plan_id == plan.plan_id


def test_a_table_directory_without_its_catalog_entry_does_not_fail_the_next_plan(with_dev, spark):
    import shutil
    from pathlib import Path
    from urllib.parse import unquote, urlparse

    root = with_dev.path
    table = with_dev.state.get_environment("dev").by_name()["ops.daily"].table_name
    hours = with_dev.fetchdf("SELECT COUNT(*) AS n FROM ops.hourly")[0]["n"]
    location = next(row["data_type"] for row in with_dev.fetchdf(f"DESCRIBE FORMATTED {table}")
                    if row["col_name"] == "Location")
    directory = Path(unquote(urlparse(location).path))
    kept = directory.parent / "kept-copy"
    shutil.copytree(directory, kept)
    with_dev.invalidate("dev")
    assert table in Context(root).janitor(ignore_ttl=True).tables
    kept.rename(directory)   # a drop racing a write: files left, catalog entry gone
    assert not _exists(spark, table) and any(directory.iterdir())

    again = Context(root)
    again.apply(again.plan("dev2", options=OPTIONS))
    assert _dev_daily_rows(again, "dev2") == [{"hours": hours}]
