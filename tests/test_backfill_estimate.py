"""Backfill estimates: every batch the writer records keeps its wall time (schema 7) and, where the runner
measures it, its Spark task time and bytes read (schema 8) in the state, and a plan's backfill is estimated
in wall time and executor time from the timed batches of the model's previous (or latest) version, or of its
parents' for a model never timed, per covered day for time-partitioned kinds, per batch otherwise. Real
SQLite state; no Spark (tests/test_batch_usage.py measures real Spark batches)."""

from __future__ import annotations

import contextlib
import doctest
import time
from types import SimpleNamespace

import pytest

from bot.plan import estimate as estimate_module
from bot.plan.batch import BatchWriter
from bot.plan.definition import Backfill, BackfillKind, Plan
from bot.plan.estimate import estimate_backfills, history_names, recorded_times, total_seconds
from bot.snapshot import Fingerprint, Snapshot
from bot.state.protocol import Environment, EnvironmentSnapshot

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


class _MeteredRunner(_SlowRunner):
    """Reports what each batch's Spark jobs cost, as SparkRunner.metered does."""

    @contextlib.contextmanager
    def metered(self):
        usage = SimpleNamespace(executor_ms=None, bytes_read=None)
        yield usage
        usage.executor_ms, usage.bytes_read = 3000, 1024


def _snapshot(name: str, version: str, kind: str = "INCREMENTAL_BY_TIME_RANGE",
              parents: tuple[Snapshot, ...] = ()) -> Snapshot:
    return Snapshot(name=name, fingerprint=Fingerprint(version, "m"), version=version, kind=kind,
                    definition={}, rendered_query="", parents=tuple(p.snapshot_id for p in parents))


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


def test_the_writer_records_what_the_runner_metered(state):
    """A runner with `metered()` gives each batch's task time and bytes read; one without leaves them NULL."""
    for runner, version in ((_MeteredRunner(0), "v1"), (_SlowRunner(0), "v2")):
        writer = BatchWriter(state=state, runner=runner, claims=None, purpose="plan of `prod`")
        writer.run(snapshot=_snapshot("db.events", version), model=None, table="t", batch=(0, DAY), mapping={},
                   execution_time=0)
    times = state.get_batch_times(["db.events"])
    assert (times[("db.events", "v1")].metered_batches, times[("db.events", "v1")].executor_ms,
            times[("db.events", "v1")].bytes_read) == (1, 3000, 1024)
    assert (times[("db.events", "v2")].batches, times[("db.events", "v2")].metered_batches) == (1, 0)


def test_executor_time_is_estimated_from_the_batches_that_recorded_it(state):
    """v1 has 2 days timed before schema 8 (wall only) and 2 metered days at 30 executor-s each: a 10-day
    backfill is 10 x 2 s of wall time and 10 x 30 s of executor time; a model whose batches have no task
    time (Spark Connect, or recorded before schema 8) has a wall estimate and no executor estimate."""
    for day in range(2):
        state.add_interval("db.events", "v1", (day * DAY, (day + 1) * DAY), elapsed_ms=2000)
    for day in range(2, 4):
        state.add_interval("db.events", "v1", (day * DAY, (day + 1) * DAY), elapsed_ms=2000,
                           executor_ms=30_000, bytes_read=10_000)
    state.add_interval("db.totals", "t1", (0, DAY), elapsed_ms=5000)
    events, totals = _snapshot("db.events", "v2"), _snapshot("db.totals", "t2", "FULL")
    plan = _plan((_daily(events, 10, per_batch=5), _daily(totals, 1)), {"db.events": events, "db.totals": totals},
                 previous=(_snapshot("db.events", "v1"), _snapshot("db.totals", "t1", "FULL")))
    estimates = estimate_backfills(plan, state.get_batch_times(history_names(plan)))
    by_model = {e.model: e for e in estimates}
    assert by_model["db.events"].seconds == pytest.approx(20.0)
    assert by_model["db.events"].executor_seconds == pytest.approx(300.0)
    assert by_model["db.totals"].seconds == pytest.approx(5.0) and by_model["db.totals"].executor_seconds is None
    assert total_seconds(estimates, executor=True) == pytest.approx(300.0)
    assert total_seconds(estimates) == pytest.approx(25.0)


def test_parents_batch_times_are_read_only_for_models_never_timed(state):
    """A prod preview lists every due model: their parents (an unchanged one's snapshot row) are read only
    for a model no version of which was timed, and the estimates are those of the full history."""
    state.add_interval("db.events", "v1", (0, DAY), elapsed_ms=4000)
    state.add_interval("db.orders", "o1", (0, DAY), elapsed_ms=3000)
    raw, orders = _snapshot("db.raw", "r1"), _snapshot("db.orders", "o1")
    events, fresh = _snapshot("db.events", "v2", parents=(raw,)), _snapshot("db.fresh", "f1", parents=(orders,))
    plan = _plan((_daily(events, 2), _daily(fresh, 2)),
                 {"db.raw": raw, "db.orders": orders, "db.events": events, "db.fresh": fresh})
    asked = []

    def batch_times(names):
        asked.append(set(names))
        return state.get_batch_times(names)

    times = recorded_times(plan, batch_times)
    assert asked == [{"db.events", "db.fresh"}, {"db.orders"}]   # not db.raw: db.events was timed
    assert estimate_backfills(plan, times) == estimate_backfills(plan, state.get_batch_times(history_names(plan)))
    assert [e.seconds for e in estimate_backfills(plan, times)] == [pytest.approx(8.0), pytest.approx(6.0)]


def test_a_new_model_is_estimated_from_its_parents_recorded_batches(state):
    """A model no version of which was ever timed costs what its parents' batches cost for the same window
    (the plan's versions of the parents); an untimed parent adds nothing, and with no timed parent at all
    there is no estimate."""
    state.add_interval("db.orders", "o1", (0, DAY), elapsed_ms=4000, executor_ms=8000, bytes_read=1)
    state.add_interval("db.orders", "o0", (0, DAY), elapsed_ms=99_000)        # not the plan's version
    state.add_interval("db.items", "i1", (0, 2 * DAY), elapsed_ms=2000)
    orders, items, raw = _snapshot("db.orders", "o1"), _snapshot("db.items", "i1"), _snapshot("db.raw", "r1")
    joined = _snapshot("db.joined", "j1", parents=(orders, items, raw))
    lonely = _snapshot("db.lonely", "l1", parents=(raw,))
    plan = _plan((_daily(joined, 3), _daily(lonely, 3)),
                 {"db.orders": orders, "db.items": items, "db.raw": raw, "db.joined": joined, "db.lonely": lonely})
    assert history_names(plan) == {"db.joined", "db.lonely", "db.orders", "db.items", "db.raw"}
    new, alone = estimate_backfills(plan, state.get_batch_times(history_names(plan)))
    assert new.seconds == pytest.approx(3 * 4 + 3 * 1) and new.executor_seconds == pytest.approx(3 * 8)
    assert new.basis == "timed batches of its parents db.items, db.orders (a new model)"
    assert alone.seconds is None and alone.executor_seconds is None and alone.basis == ""
