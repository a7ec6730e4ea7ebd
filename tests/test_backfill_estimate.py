"""Backfill estimates: every batch the writer records keeps its wall time in the state (schema 7), and a
plan's backfill is estimated from the timed batches of the model's previous (or latest) version, per
covered day for time-partitioned kinds, per batch otherwise; the prod preview shows intervals, batches and
the estimate per model. Real SQLite state; no Spark."""

from __future__ import annotations

import doctest
import time

import pytest

from bot.plan import estimate as estimate_module
from bot.plan.batch import BatchWriter
from bot.plan.definition import Backfill, BackfillKind, Plan
from bot.plan.estimate import estimate_backfills, total_seconds
from bot.snapshot import Fingerprint, Snapshot
from bot.state.api import Environment, EnvironmentSnapshot

DAY = 86_400_000


@pytest.fixture
def state(sqlite_state):
    return sqlite_state


class _SlowRunner:
    """Takes `seconds` per batch, as a Spark job would."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def evaluate(self, snapshot, model, *, table, interval, table_mapping, execution_time) -> None:
        time.sleep(self.seconds)

    def audit(self, snapshot, model, *, table, interval, execution_time, table_mapping=None):
        return ()

    def forget_table(self, table: str) -> None:
        pass


def _snapshot(name: str, version: str, kind: str = "INCREMENTAL_BY_TIME_RANGE") -> Snapshot:
    return Snapshot(name=name, fingerprint=Fingerprint(version, "m"), version=version, kind=kind,
                    definition={}, rendered_query="")


def _plan(backfills: tuple[Backfill, ...], snapshots: dict[str, Snapshot],
          previous: tuple[Snapshot, ...] = ()) -> Plan:
    env = Environment(name="prod", plan_id="p0", snapshots=tuple(
        EnvironmentSnapshot(s.name, s.identifier, s.version, s.kind, s.table_name) for s in previous))
    return Plan(plan_id="p1", environment="prod", new_environment=False, expected_plan_id="p0",
                previous_environment=env, snapshots=snapshots, new_snapshots=tuple(snapshots.values()),
                changes=(), backfills=backfills)


def _daily(snapshot: Snapshot, days: int, per_batch: int = 1) -> Backfill:
    intervals = tuple((d * DAY, (d + 1) * DAY) for d in range(days))
    batches = tuple((d * DAY, min(d + per_batch, days) * DAY) for d in range(0, days, per_batch))
    return Backfill(snapshot.snapshot_id, BackfillKind.INTERVALS, intervals=intervals, batches=batches)


def test_doctests():
    assert doctest.testmod(estimate_module).failed == 0


def test_each_recorded_batch_keeps_its_wall_time(state):
    old = _snapshot("db.events", "v1")
    writer = BatchWriter(state=state, runner=_SlowRunner(0.2), claims=None, purpose="plan of `prod`")
    for day in range(2):
        writer.run(snapshot=old, model=None, table="t", batch=(day * DAY, (day + 1) * DAY), mapping={},
                   execution_time=0)
    times = state.get_batch_times(["db.events"])[("db.events", "v1")]
    assert times.batches == 2 and times.span_ms == 2 * DAY
    assert 400 <= times.elapsed_ms < 2000


def test_a_new_version_is_estimated_from_the_previous_one_per_covered_day(state):
    """v1 took 2 s per day in the state; v2's plan covers 30 days in 3 batches: about 60 s. A FULL model
    is estimated per batch; a model with no timed batch has no estimate, and the total sums the known."""
    for day in range(3):
        state.add_interval("db.events", "v1", (day * DAY, (day + 1) * DAY), elapsed_ms=2000)
    state.add_interval("db.events", "v0", (0, 90 * DAY), elapsed_ms=1)           # an older version: ignored
    state.add_interval("db.totals", "t1", (0, 10 * DAY), elapsed_ms=5000)
    state.add_interval("db.totals", "t1", (0, 11 * DAY), elapsed_ms=7000)
    state.add_interval("db.untimed", "u1", (0, DAY))                              # recorded before schema 7
    events, totals = _snapshot("db.events", "v2"), _snapshot("db.totals", "t2", "FULL")
    untimed = _snapshot("db.untimed", "u2")
    plan = _plan((_daily(events, 30, per_batch=10),
                  Backfill(totals.snapshot_id, BackfillKind.FULL_REFRESH, intervals=((0, 12 * DAY),)),
                  _daily(untimed, 5)),
                 {"db.events": events, "db.totals": totals, "db.untimed": untimed},
                 previous=(_snapshot("db.events", "v1"), _snapshot("db.totals", "t1", "FULL")))
    estimates = estimate_backfills(plan, state.get_batch_times(["db.events", "db.totals", "db.untimed"]))
    by_model = {e.model: e for e in estimates}
    assert by_model["db.events"].batches == 3 and by_model["db.events"].intervals == 30
    assert by_model["db.events"].seconds == pytest.approx(60.0)
    assert by_model["db.events"].basis == "3 timed batch(es) of the previous version"
    assert by_model["db.totals"].seconds == pytest.approx(6.0) and by_model["db.totals"].batches == 1
    assert by_model["db.untimed"].seconds is None and by_model["db.untimed"].basis == ""
    assert total_seconds(estimates) == pytest.approx(66.0)


def test_a_model_without_a_timed_previous_version_uses_its_newest_timed_version(state):
    state.add_interval("db.events", "a", (0, DAY), elapsed_ms=1000)
    time.sleep(0.01)
    state.add_interval("db.events", "b", (0, DAY), elapsed_ms=4000)
    events = _snapshot("db.events", "c")
    plan = _plan((_daily(events, 2),), {"db.events": events})
    (estimate,) = estimate_backfills(plan, state.get_batch_times(["db.events"]))
    assert estimate.seconds == pytest.approx(8.0) and estimate.basis == "1 timed batch(es) of an earlier version"
