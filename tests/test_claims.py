"""bot.plan.claims and the batch writer on real state: waiting lines, giving up, the heartbeat, a
SIGKILLed holder blocking only until its lease expires, batches another writer recorded."""

from __future__ import annotations

import doctest
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

import pytest
import sqlalchemy as sa

from bot.errors import PlanError
from bot.plan import claims as claims_module
from bot.plan.batch import BatchWriter
from bot.plan.claims import Claims, environment_key, version_key
from bot.project.model import Kind, KindName, Model
from bot.snapshot import Fingerprint, Snapshot
from bot.state.connect import connect_state

ROOT = Path(__file__).resolve().parent.parent
DAY = 86_400_000


@pytest.fixture
def state(sqlite_state):
    return sqlite_state


def test_doctests():
    assert doctest.testmod(claims_module).failed == 0


def test_a_waiter_prints_one_line_and_gets_the_lease_once_it_is_released(state):
    holder, waiter = Claims(state, ttl_s=5), Claims(state, ttl_s=5)
    holder.acquire(environment_key("prod"), "plan of `prod` (plan 1a2b3c4d)")
    lines: list[str] = []
    got: list[object] = []
    thread = threading.Thread(target=lambda: got.append(
        waiter.acquire(environment_key("prod"), "run of `prod`", notice=lines.append)))
    thread.start()
    time.sleep(1.2)
    assert not got and len(lines) == 1
    host_pid = holder.owner.rsplit(":", 1)[0]
    assert lines[0].startswith(f"waiting for the plan of `prod` (plan 1a2b3c4d) on {host_pid}, "
                               "holding environment `prod` since ")
    assert lines[0].endswith(" UTC")
    holder.release(environment_key("prod"))
    thread.join(5)
    assert got and got[0].granted and got[0].previous.owner == holder.owner
    assert len(lines) == 1


def test_a_waiter_gives_up_after_MESHBOT_LEASE_WAIT_naming_the_holder(state, monkeypatch):
    Claims(state).acquire(version_key("db.a", "1a2b3c4d5e6f"), "plan of `dev` (plan 9f8e7d6c)")
    monkeypatch.setenv("MESHBOT_LEASE_WAIT", "0.3")
    started = time.monotonic()
    with pytest.raises(PlanError) as error:
        Claims(state).acquire(version_key("db.a", "1a2b3c4d5e6f"), "run of `prod`")
    assert time.monotonic() - started < 3
    text = str(error.value)
    assert text.startswith("gave up after 0.3s (MESHBOT_LEASE_WAIT) waiting for the plan of `dev` "
                           "(plan 9f8e7d6c) on ")
    assert "holding version 1a2b3c4d of `db.a` since" in text and text.endswith("; re-run later")


def test_bad_MESHBOT_LEASE_WAIT_is_refused(state, monkeypatch):
    monkeypatch.setenv("MESHBOT_LEASE_WAIT", "soon")
    with pytest.raises(PlanError, match="MESHBOT_LEASE_WAIT='soon' is not a number of seconds"):
        Claims(state)


def test_the_heartbeat_keeps_a_lease_past_its_ttl_and_notices_a_takeover(state):
    mine = Claims(state, ttl_s=0.6)
    with mine.hold("k", "plan of `prod`"):
        time.sleep(1.5)   # more than twice the ttl: only renewals keep it
        assert not Claims(state).state.acquire_lease("k", owner="other", purpose="p", ttl_ms=60_000).granted
        assert not mine.lost("k")
        with state.engine.begin() as conn:   # as if this process had stalled past its expiry
            conn.execute(sa.update(state.tables.leases).values(expires_ts=0))
        assert state.acquire_lease("k", owner="other", purpose="p", ttl_ms=60_000).granted
        time.sleep(0.6)
        assert mine.lost("k")
    assert state.live_leases()["k"].owner == "other"   # releasing a lost lease leaves the new owner's


_HOLDER = """
import json, sys, time
from bot.plan.claims import Claims
from bot.project.config import StateConnection
from bot.state.connect import connect_state
from pathlib import Path
state = connect_state(StateConnection(**json.loads(sys.argv[1])), project_root=Path(sys.argv[2]))
claims = Claims(state, ttl_s=1.0)
claims.acquire("version:db.a:v1", "plan of `dev` (plan deadbeef)")
print(claims.owner, flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("same_host", [False, True])
def test_a_sigkilled_holder_blocks_others_only_until_its_lease_expires(connection, tmp_path, monkeypatch,
                                                                       same_host):
    """On another machine a dead holder is known only by its expiry; on this one by its pid."""
    if not same_host:
        monkeypatch.setattr(claims_module, "_dead_here", lambda owner: False)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", _HOLDER, json.dumps(asdict(connection)), str(tmp_path)],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        owner = child.stdout.readline().strip()
        assert owner, child.stderr.read()
        with connect_state(connection, project_root=tmp_path) as state:
            time.sleep(1.5)   # longer than the ttl: the child's heartbeat keeps the lease
            other = Claims(state, ttl_s=1.0, wait_s=0.0)
            with pytest.raises(PlanError, match="waiting for the plan of `dev` \\(plan deadbeef\\)"):
                other.acquire("version:db.a:v1", "plan of `prod`")
            child.send_signal(signal.SIGKILL)
            child.wait(10)
            killed = time.monotonic()
            lease = Claims(state, ttl_s=1.0, wait_s=10).acquire("version:db.a:v1", "plan of `prod`")
            waited = time.monotonic() - killed
            assert lease.granted and lease.previous.owner == owner
            assert waited < (0.3 if same_host else 1.0 + 0.5), waited   # at most the ttl, plus a poll
    finally:
        if child.poll() is None:
            child.kill()


class _Runner:
    """Records what the writer asks of the Spark side."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[int, int] | str]] = []

    def evaluate(self, snapshot, model, *, table, interval, table_mapping, execution_time) -> None:
        self.calls.append(("evaluate", interval))

    def audit(self, snapshot, model, *, table, interval, execution_time, table_mapping=None):
        return ()

    def forget_table(self, table: str) -> None:
        self.calls.append(("forget", table))


def _snapshot() -> Snapshot:
    return Snapshot(name="db.events", fingerprint=Fingerprint("d", "m"), version="v1",
                    kind="INCREMENTAL_BY_TIME_RANGE", definition={}, rendered_query="")


def _model(lookback: int = 0, kind: KindName = KindName.INCREMENTAL_BY_TIME_RANGE) -> Model:
    return Model(name="db.events", kind=Kind(name=kind, time_column="ds", lookback=lookback), dialect="spark",
                 path=Path("events.sql"))


def test_a_batch_another_writer_recorded_is_reused_and_its_table_forgotten_before_writing(state):
    snapshot = _snapshot()
    first, second = _Runner(), _Runner()
    args = dict(snapshot=snapshot, model=_model(), table="t", mapping={}, execution_time=0)
    writer_a = BatchWriter(state=state, runner=first, claims=Claims(state), purpose="plan of `a`")
    writer_b = BatchWriter(state=state, runner=second, claims=Claims(state), purpose="plan of `b`")
    assert not writer_a.run(batch=(0, DAY), **args).reused
    assert not writer_a.run(batch=(DAY, 2 * DAY), **args).reused
    assert first.calls == [("evaluate", (0, DAY)), ("evaluate", (DAY, 2 * DAY))]   # nobody else wrote

    assert writer_b.run(batch=(0, DAY), **args).reused
    assert writer_b.run(batch=(DAY, 2 * DAY), **args).reused
    assert not writer_b.run(batch=(2 * DAY, 3 * DAY), **args).reused
    # a held it last: b forgets the table before reusing, then holds it itself and forgets no more
    assert second.calls == [("forget", "t"), ("evaluate", (2 * DAY, 3 * DAY))]

    assert not writer_a.run(batch=(3 * DAY, 4 * DAY), **args).reused
    assert first.calls[2:] == [("forget", "t"), ("evaluate", (3 * DAY, 4 * DAY))]
    recorded = state.get_intervals([("db.events", "v1")])[("db.events", "v1")].intervals
    assert recorded == [(0, 4 * DAY)]
    assert state.live_leases() == {}
    # a model with a lookback recomputes recorded intervals on purpose (SQLMesh: late rows of the last N)
    looking_back = {**args, "model": _model(lookback=2)}
    assert not writer_b.run(batch=(DAY, 2 * DAY), **looking_back).reused
    assert second.calls[-1] == ("evaluate", (DAY, 2 * DAY))
    # ... but never on a kind that appends: its rows would be there twice
    appending = {**args, "model": _model(lookback=2, kind=KindName.INCREMENTAL_UNMANAGED)}
    assert writer_b.run(batch=(DAY, 2 * DAY), **appending).reused


class _Table(_Runner):
    """SparkRunner's first-run flag: set by creating the table, cleared by forget_table or a write;
    a write with the flag replaces the table's rows, otherwise it adds to them."""

    def __init__(self, rows: dict[str, list[tuple[int, int]]]) -> None:
        super().__init__()
        self.rows, self.first = rows, False

    def create_physical(self) -> None:
        self.first = True

    def forget_table(self, table: str) -> None:
        self.first = False

    def evaluate(self, snapshot, model, *, table, interval, table_mapping, execution_time) -> None:
        self.rows[table] = ([] if self.first else self.rows.get(table, [])) + [interval]
        self.first = False


def test_a_writer_that_created_the_table_and_reused_every_batch_adds_its_own_batch(state):
    """Issue 24 (tests/test_chaos.py, seed 22): a deploy created the shared table, waited while a PR
    plan wrote and recorded days 1-6, reused them, then wrote day 7 as the table's first batch:
    INSERT OVERWRITE of the whole table, so days 1-6 stayed recorded without their rows."""
    rows: dict[str, list[tuple[int, int]]] = {}
    args = dict(snapshot=_snapshot(), model=_model(), table="t", mapping={}, execution_time=0)
    deploy, pr = _Table(rows), _Table(rows)
    deploy.create_physical()                          # the deploy's create_tables stage made the table
    pr_writer = BatchWriter(state=state, runner=pr, claims=Claims(state), purpose="plan of `pr`")
    for day in range(2):
        pr_writer.run(batch=(day * DAY, (day + 1) * DAY), **args)
    writer = BatchWriter(state=state, runner=deploy, claims=Claims(state), purpose="plan of `prod`")
    assert [writer.run(batch=(day * DAY, (day + 1) * DAY), **args).reused for day in range(3)] == [
        True, True, False]
    assert rows["t"] == [(0, DAY), (DAY, 2 * DAY), (2 * DAY, 3 * DAY)]


class _FirstRuns(_Runner):
    def first_run(self, table: str) -> None:
        self.calls.append(("first_run", table))


class _CountingState:
    """The state, counting interval reads."""

    def __init__(self, state) -> None:
        self.state, self.reads = state, 0

    def get_intervals(self, pairs):
        self.reads += 1
        return self.state.get_intervals(pairs)

    def __getattr__(self, name):
        return getattr(self.state, name)


@pytest.mark.parametrize("leased", [True, False])
def test_a_version_without_recorded_intervals_is_a_first_run_once_per_serial_backfill(state, leased):
    """Whatever rows its table holds (a killed writer's or janitor's), the first batch of a version
    with nothing recorded replaces them; later batches of the same writer add to it, with one
    interval read per version, not per batch."""
    counting, runner = _CountingState(state), _FirstRuns()
    writer = BatchWriter(state=counting, runner=runner, claims=Claims(state) if leased else None,
                         purpose="plan of `a`")
    args = dict(snapshot=_snapshot(), model=_model(), table="t", mapping={}, execution_time=0)
    for day in range(3):
        writer.run(batch=(day * DAY, (day + 1) * DAY), **args)
    assert runner.calls == [("first_run", "t"), ("evaluate", (0, DAY)), ("evaluate", (DAY, 2 * DAY)),
                            ("evaluate", (2 * DAY, 3 * DAY))]
    assert counting.reads == 1

    # a killed janitor (or a restatement of everything) left the version with nothing recorded
    state.remove_intervals("db.events", "v1", (0, 3 * DAY))
    again = _FirstRuns()
    BatchWriter(state=state, runner=again, claims=Claims(state) if leased else None).run(
        batch=(0, DAY), **args)
    assert ("first_run", "t") in again.calls

    # intervals recorded before leases existed (nobody ever held the version's lease): not a first run
    state.add_interval("db.events", "v2", (0, DAY))
    old = _FirstRuns()
    BatchWriter(state=state, runner=old, claims=Claims(state) if leased else None).run(
        batch=(DAY, 2 * DAY), **{**args, "snapshot": Snapshot(
            name="db.events", fingerprint=Fingerprint("d", "m"), version="v2",
            kind="INCREMENTAL_BY_TIME_RANGE", definition={}, rendered_query="")})
    assert old.calls == [("evaluate", (DAY, 2 * DAY))]


def test_the_janitor_waits_for_a_plan_in_flight_and_a_plan_for_the_janitor(state, monkeypatch):
    plan, janitor = Claims(state, ttl_s=5), Claims(state, ttl_s=5)
    plan.acquire(environment_key("dev2"), "plan of `dev2` (plan 1a2b3c4d)")
    lines: list[str] = []
    entered = threading.Event()

    def clean() -> None:
        with janitor.hold_janitor(notice=lines.append):
            entered.set()
            time.sleep(1.0)

    thread = threading.Thread(target=clean)
    thread.start()
    time.sleep(1.0)
    assert not entered.is_set()   # the plan holds `dev2`: any table may be about to be reused
    assert len(lines) == 1 and lines[0].startswith("waiting for the plan of `dev2` (plan 1a2b3c4d) on ")
    plan.release(environment_key("dev2"))
    assert entered.wait(5)
    # now the janitor holds its lease: a plan or run taking an environment's lease gives it back and waits
    waiting: list[str] = []
    started = time.monotonic()
    lease = Claims(state, ttl_s=5).acquire(environment_key("prod"), "run of `prod`", notice=waiting.append)
    assert lease.granted and time.monotonic() - started > 0.3
    assert len(waiting) == 1 and waiting[0].startswith("waiting for the janitor on ")
    assert "holding the janitor's lease" in waiting[0]
    thread.join(5)

    # giving up names the janitor
    monkeypatch.setenv("MESHBOT_LEASE_WAIT", "0.3")
    janitor.acquire("janitor", "janitor")
    with pytest.raises(PlanError, match="gave up after 0.3s .* waiting for the janitor on "):
        Claims(state).acquire(environment_key("dev"), "plan of `dev`")
    assert "environment:dev" not in state.live_leases()   # given back while it waited
