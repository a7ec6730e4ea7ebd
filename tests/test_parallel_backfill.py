"""concurrent_tasks: independent models backfill at once, a child only after its parents, each batch
recorded exactly once, a failure stops its downstream only; the setting is parsed and validated."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
import yaml

from bot.context import Context
from bot.errors import BotError, ConfigError, EngineError
from bot.plan.definition import PlanOptions
from bot.plan.schedule import run_tasks
from bot.project.dag import upstream_of
from bot.project.config import load_config

# a, b independent roots; c reads a and b; v is a VIEW over c; d reads v (so d waits for c through v)
GRAPH = {"a": [], "b": [], "c": ["a", "b"], "v": ["c"], "d": ["v"], "e": ["b"]}


def _recorder():
    events: list[tuple[str, str]] = []
    lock = threading.Lock()

    def note(kind: str, name: str) -> None:
        with lock:
            events.append((kind, name))
    return events, note


def _assert_parents_first(events, upstream):
    position = {event: i for i, event in enumerate(events)}
    for name, deps in upstream.items():
        if ("start", name) in position:
            for dep in deps:
                assert position[("end", dep)] < position[("start", name)], (dep, name, events)


def test_tasks_run_once_each_after_their_upstream_and_independent_ones_overlap():
    names = ["a", "b", "c", "d", "e"]
    upstream = upstream_of(names, GRAPH.__getitem__)
    assert upstream["d"] == {"c"} and upstream["c"] == {"a", "b"}
    events, note = _recorder()
    together = threading.Barrier(2, timeout=60)    # a and b must be running at the same time

    def work(name: str, slot: int) -> None:
        note("start", name)
        assert 0 <= slot < 4
        if name in ("a", "b"):
            together.wait()
        note("end", name)

    outcome = run_tasks(names, upstream, work, threads=4)
    assert not outcome.failed and not outcome.skipped
    assert sorted(name for kind, name in events if kind == "start") == names
    _assert_parents_first(events, upstream)


@pytest.mark.parametrize("threads", [1, 4])
def test_a_failed_task_stops_its_downstream_only(threads):
    names = ["a", "b", "c", "d", "e"]
    upstream = upstream_of(names, GRAPH.__getitem__)
    ran: list[str] = []

    def work(name: str, slot: int) -> None:
        if name == "a":
            raise EngineError("a broke")
        ran.append(name)

    outcome = run_tasks(names, upstream, work, threads=threads)
    assert [name for name, _ in outcome.failed] == ["a"]
    assert outcome.skipped == ["c", "d"]
    assert sorted(ran) == ["b", "e"]


@pytest.mark.parametrize("threads", [1, 4])
def test_an_unexpected_error_stops_everything_and_is_raised(threads):
    names = ["a", "b", "c", "d", "e"]
    started: list[str] = []

    class Killed(BaseException):
        pass

    def work(name: str, slot: int) -> None:
        started.append(name)
        if name == "b":
            raise Killed()

    with pytest.raises(Killed):
        run_tasks(names, upstream_of(names, GRAPH.__getitem__), work, threads=threads)
    assert "c" not in started and "e" not in started


def _config(tmp_path: Path, connection_extra: str) -> Path:
    (tmp_path / "config.yaml").write_text(
        "gateways:\n  local:\n    connection:\n      type: spark\n" + connection_extra
        + "default_gateway: local\nmodel_defaults: {dialect: spark}\n")
    return tmp_path


def test_concurrent_tasks_defaults_to_4_and_must_be_a_whole_number_of_at_least_1(tmp_path):
    assert load_config(_config(tmp_path, "")).gateways["local"].connection.concurrent_tasks == 4
    assert load_config(_config(tmp_path, "      concurrent_tasks: 2\n")
                       ).gateways["local"].connection.concurrent_tasks == 2
    for bad in ("0", "-1", "two", "1.5", "true"):
        with pytest.raises(ConfigError, match=r"`gateways.local.connection.concurrent_tasks` must be "
                                              r"a whole number of at least 1"):
            load_config(_config(tmp_path, f"      concurrent_tasks: {bad}\n")).gateway()   # the gateway in use


SRC = """\
MODEL (name {s}.src{i}, kind FULL);
SELECT CAST(d AS STRING) AS ds, {i} AS k
FROM (SELECT explode(sequence(DATE'2024-01-01', DATE'2024-01-06', INTERVAL 1 DAY)) AS d)
"""
INCR = """\
MODEL (name {s}.{name}, kind INCREMENTAL_BY_TIME_RANGE (time_column ds, batch_size 1));
SELECT ds, k{expr} AS k FROM {s}.{parent} WHERE ds BETWEEN @start_ds AND @end_ds
"""
JOIN = """\
MODEL (name {s}.joined, kind FULL);
SELECT l.ds, l.k + r.k AS k FROM {s}.left0 l JOIN {s}.view1 r ON l.ds = r.ds
"""
VIEW = "MODEL (name {s}.view1, kind VIEW);\nSELECT ds, k FROM {s}.left1\n"


def _project(root: Path, schema: str, *, fail: bool = False) -> Path:
    (root / "models").mkdir(parents=True, exist_ok=True)
    config = {"gateways": {"local": {
        "connection": {"type": "spark", "master": "local[2]", "concurrent_tasks": 4,
                       "config": {"spark.sql.shuffle.partitions": "1"}},
        "state_connection": {"type": "sqlite", "database": ".meshbot/state.db"}}},
        "default_gateway": "local",
        "model_defaults": {"dialect": "spark", "start": "2024-01-01", "cron": "@daily"}}
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    files = {f"src{i}": SRC.format(s=schema, i=i) for i in range(3)}
    for i in range(3):   # three independent chains src_i -> left_i -> deep_i
        broken = " + raise_error('left1 broke')" if fail and i == 1 else ""
        files[f"left{i}"] = INCR.format(s=schema, name=f"left{i}", parent=f"src{i}", expr=broken)
        files[f"deep{i}"] = INCR.format(s=schema, name=f"deep{i}", parent=f"left{i}", expr=" * 10")
    files["view1"] = VIEW.format(s=schema)
    files["joined"] = JOIN.format(s=schema)
    for name, text in files.items():
        (root / "models" / f"{name}.sql").write_text(text)
    return root


def _spy(monkeypatch):
    """Record the start and end of every batch SparkRunner evaluates, from every thread."""
    from bot.plan.batch_runner import SparkRunner

    events, note = _recorder()
    threads: set[str] = set()
    real = SparkRunner.evaluate

    def evaluate(self, snapshot, model, *, table, interval, table_mapping, execution_time):
        note("start", (snapshot.name, interval))
        threads.add(threading.current_thread().name)
        real(self, snapshot, model, table=table, interval=interval, table_mapping=table_mapping,
             execution_time=execution_time)
        note("end", (snapshot.name, interval))

    monkeypatch.setattr(SparkRunner, "evaluate", evaluate)
    return events, threads


def _recorded_rows(root: Path) -> list[tuple[str, int, int]]:
    with sqlite3.connect(root / ".meshbot" / "state.db") as conn:
        return conn.execute("SELECT name, start_ts, end_ts FROM intervals WHERE NOT is_removed").fetchall()


def test_concurrent_backfill_records_every_batch_once_and_children_wait_for_parents(
        tmp_path, clean_catalog, monkeypatch):
    schema = "pb"
    root = _project(tmp_path / "proj", schema)
    events, threads = _spy(monkeypatch)
    context = Context(root)
    plan = context.plan("prod", options=PlanOptions(execution_time="2024-01-06"))
    result = context.apply(plan)

    planned = sorted((b.snapshot_id.name, start, end) for b in plan.backfills for start, end in b.batches)
    rows = _recorded_rows(root)
    assert len(rows) == len(set(rows))                         # no batch recorded twice
    recorded = {(n, s, e) for n, s, e in rows}
    assert recorded == {item for item in planned if not item[0].endswith("view1")}
    assert sorted(result.evaluated) == planned                 # every batch evaluated exactly once
    assert len([e for e in events if e[0] == "start"]) == len(planned)
    assert len(threads) > 1                                    # ran on several worker threads

    position = {event: i for i, event in enumerate(events)}
    parents = {"left": "src", "deep": "left"}
    for kind, (name, interval) in events:
        if kind != "start":
            continue
        table = name.split(".")[1]
        needs = []
        if table[:-1] in parents:
            parent = f"{schema}.{parents[table[:-1]]}{table[-1]}"
            needs = [(n, i) for k, (n, i) in events if k == "end" and n == parent]
        elif table == "joined":
            needs = [(n, i) for k, (n, i) in events if k == "end" and n in (f"{schema}.left0", f"{schema}.left1")]
        if table.startswith(("left", "deep", "joined")):
            assert needs, f"{name} ran before any batch of its parent ended"
        for need in needs:   # every batch of every parent ended before the child's batch started
            assert position[("end", need)] < position[("start", (name, interval))]

    assert context.fetchdf(f"SELECT COUNT(*) AS n, SUM(k) AS s FROM {schema}.deep2") == [{"n": 5, "s": 100}]
    assert context.fetchdf(f"SELECT COUNT(*) AS n, SUM(k) AS s FROM {schema}.joined") == [{"n": 5, "s": 5}]


def test_concurrent_failure_stops_its_downstream_only(tmp_path, clean_catalog):
    schema = "pbf"
    root = _project(tmp_path / "proj", schema, fail=True)
    context = Context(root)
    plan = context.plan("prod", options=PlanOptions(execution_time="2024-01-06"))
    with pytest.raises(BotError) as info:
        context.apply(plan)
    message = str(info.value)
    assert "left1 broke" in message
    assert (f"not evaluated because an upstream model failed: `{schema}.deep1`, "
            f"`{schema}.view1`, `{schema}.joined`"
            in message)
    recorded = {}
    for name, start, end in _recorded_rows(root):
        recorded.setdefault(name, []).append((start, end))
    # independent chains went on to the end; nothing downstream of the failure was evaluated
    for name in ("src0", "src2"):
        assert len(recorded[f"{schema}.{name}"]) == 1
    for name in ("left0", "deep0", "left2", "deep2"):
        assert len(recorded[f"{schema}.{name}"]) == 5
    assert not {f"{schema}.left1", f"{schema}.deep1", f"{schema}.joined"} & set(recorded)
    assert context.state.get_environment("prod") is None
