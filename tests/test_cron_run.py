"""`run`: intervals due by each model's own cron, evaluated in DAG order on local Spark and recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.context import Context
from bot.errors import PlanError
from bot.timeline.intervals import Interval
from bot.plan.claims import Claims, environment_key
from bot.plan.definition import PlanOptions
from bot.plan.cron_run import due_batches
from bot.project.model import Kind, KindName, Model
from bot.timeline.times import to_ms
from ops_project import write_ops_project

HOUR = 3_600_000
DAY = 24 * HOUR


def _model(kind: Kind, *, cron: str = "@daily", start: str = "2024-01-01", end: str | None = None) -> Model:
    return Model(name="s.m", kind=kind, dialect="spark", path=Path("m.sql"), cron=cron, start=start,
                 end=end)


def _ms(text: str) -> int:
    return to_ms(text)


def test_hourly_and_daily_models_are_due_by_their_own_cron():
    now = _ms("2024-01-02 06:10:00")
    hourly = _model(Kind(KindName.INCREMENTAL_BY_TIME_RANGE, time_column="ts"), cron="@hourly")
    daily = _model(Kind(KindName.INCREMENTAL_BY_TIME_RANGE, time_column="ds"))
    done: list[Interval] = [(_ms("2024-01-01"), _ms("2024-01-02 03:00:00"))]

    assert due_batches(hourly, recorded=done, execution_time=now) == [
        (_ms("2024-01-02 03:00:00"), _ms("2024-01-02 06:00:00"))]
    assert due_batches(daily, recorded=[(_ms("2024-01-01"), _ms("2024-01-02"))], execution_time=now) == []
    assert due_batches(daily, recorded=[], execution_time=now) == [(_ms("2024-01-01"), _ms("2024-01-02"))]


def test_batch_size_splits_and_full_kinds_run_once_for_everything_due():
    now = _ms("2024-01-05 01:00:00")
    incremental = _model(Kind(KindName.INCREMENTAL_BY_TIME_RANGE, time_column="ds", batch_size=2))
    assert due_batches(incremental, recorded=[], execution_time=now) == [
        (_ms("2024-01-01"), _ms("2024-01-03")), (_ms("2024-01-03"), _ms("2024-01-05"))]
    full = _model(Kind(KindName.FULL))
    assert due_batches(full, recorded=[(_ms("2024-01-01"), _ms("2024-01-02"))], execution_time=now) == [
        (_ms("2024-01-02"), _ms("2024-01-05"))]
    assert due_batches(full, recorded=[(_ms("2024-01-01"), _ms("2024-01-05"))], execution_time=now) == []


def test_views_never_run_seeds_load_once_and_end_caps_the_work():
    now = _ms("2024-01-05")
    assert due_batches(_model(Kind(KindName.VIEW)), recorded=[], execution_time=now) == []
    assert due_batches(_model(Kind(KindName.VIEW, materialized=True)), recorded=[],
                       execution_time=now) == [(_ms("2024-01-01"), _ms("2024-01-05"))]
    seed = _model(Kind(KindName.SEED))
    assert due_batches(seed, recorded=[(_ms("2024-01-01"), _ms("2024-01-02"))], execution_time=now) == []
    capped = _model(Kind(KindName.INCREMENTAL_BY_TIME_RANGE, time_column="ds"), end="2024-01-02")
    assert due_batches(capped, recorded=[(_ms("2024-01-01"), _ms("2024-01-03"))], execution_time=now) == []


@pytest.fixture
def applied(tmp_path, clean_catalog) -> Context:
    root = write_ops_project(tmp_path / "ops")
    context = Context(root)
    context.apply(context.plan("prod", options=PlanOptions(execution_time="2024-01-02 03:30:00")))
    yield context
    context.close()


def test_run_fills_exactly_the_due_intervals_in_dag_order(applied):
    context = applied
    assert context.fetchdf("SELECT hours FROM ops.daily") == [{"hours": 27}]
    seen: list[tuple[str, int, int]] = []

    result = context.run(execution_time="2024-01-02 06:10:00",
                         progress=lambda message, done, total: seen.append((message, done, total)))
    assert result.evaluated == (("ops.hourly", _ms("2024-01-02 03:00:00"), _ms("2024-01-02 06:00:00")),)
    # the batch is announced when it starts (done 0 of 1, the log's start line) and reported when it is recorded
    assert seen == [("ops.hourly [2024-01-02 03:00, 2024-01-02 06:00)", 0, 1),
                    ("ops.hourly [2024-01-02 03:00:00 - 2024-01-02 05:59:59]", 1, 1)]
    rows = context.fetchdf("SELECT COUNT(*) AS n, COUNT(DISTINCT ts) AS d, MAX(ts) AS last FROM ops.hourly")
    assert rows[0]["n"] == rows[0]["d"] == 30
    assert str(rows[0]["last"]) == "2024-01-02 05:00:00"
    assert context.fetchdf("SELECT hours FROM ops.daily") == [{"hours": 27}]   # daily cron not due yet

    again = context.run(execution_time="2024-01-02 06:10:00")
    assert again.nothing_due and again.evaluated == ()

    next_day = context.run(execution_time="2024-01-03 00:30:00")
    assert [name for name, _, _ in next_day.evaluated] == ["ops.hourly", "ops.daily"]
    assert next_day.evaluated[1][1:] == (_ms("2024-01-02"), _ms("2024-01-03"))
    assert context.fetchdf("SELECT hours FROM ops.daily") == [{"hours": 48}]
    env = context.state.get_environment("prod")
    versions = {(s.name, s.version) for s in env.snapshots}
    recorded = context.state.get_intervals(versions)
    hourly = next(v for k, v in recorded.items() if k[0] == "ops.hourly")
    assert hourly.intervals == [(_ms("2024-01-01"), _ms("2024-01-03"))]


def test_a_run_asked_not_to_wait_skips_a_busy_environment_and_the_next_one_catches_up(applied):
    """A scheduled run that finds a deploy of prod in flight evaluates and records nothing and says who
    held prod; the next run processes everything due meanwhile."""
    context = applied
    deploy = Claims(context.state, ttl_s=30)
    deploy.acquire(environment_key("prod"), "plan of `prod` (plan 1a2b3c4d)")
    try:
        skipped = context.run(execution_time="2024-01-02 06:10:00", skip_when_busy=True)
    finally:
        deploy.release(environment_key("prod"))
    assert skipped.evaluated == () and skipped.busy.startswith("the plan of `prod` (plan 1a2b3c4d) on ")
    assert context.fetchdf("SELECT COUNT(*) AS n FROM ops.hourly") == [{"n": 27}]
    caught_up = context.run(execution_time="2024-01-02 06:10:00", skip_when_busy=True)
    assert caught_up.busy == ""
    assert caught_up.evaluated == (("ops.hourly", _ms("2024-01-02 03:00:00"), _ms("2024-01-02 06:00:00")),)


def test_run_of_an_unknown_environment_is_an_error(tmp_path):
    context = Context(write_ops_project(tmp_path / "ops"))
    with pytest.raises(PlanError, match="environment `nope` does not exist"):
        context.run("nope")
    context.close()


def test_a_relative_model_end_counts_from_the_wall_clock_not_the_run_s_execution_time():
    """As SQLMesh reads `end '3 days ago'` (no relative base): a run as of 2024-01-04 on a later wall clock is
    not held back to 2024-01-01; an absolute end still is."""
    incremental = Kind(KindName.INCREMENTAL_BY_TIME_RANGE, time_column="ds")
    relative = _model(incremental, end="3 days ago")
    assert due_batches(relative, recorded=[], execution_time=_ms("2024-01-04")) == [(_ms("2024-01-01"), _ms("2024-01-04"))]
    absolute = _model(incremental, end="2024-01-01")
    assert due_batches(absolute, recorded=[], execution_time=_ms("2024-01-04")) == [(_ms("2024-01-01"), _ms("2024-01-02"))]
