"""Janitor (SPEC §6) on local Spark: expired environments lose their views and schemas; expired snapshots
lose their table only when no live snapshot shares its version; prod is never touched."""

from __future__ import annotations

import pytest

from bot.context import Context
from bot.errors import PlanError
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
