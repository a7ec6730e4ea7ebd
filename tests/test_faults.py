"""Faults: a failing model, concurrent plans on PostgreSQL, view failures (SIGKILL at each step of a plan:
test_fault_matrix)."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest
import yaml

from bot.context import Context
from bot.errors import ConflictError, EngineError
from bot.plan.definition import PlanOptions

SRC = """\
MODEL (name {schema}.src, kind FULL);
SELECT CAST(d AS STRING) AS ds, CAST(day(d) AS INT) AS amount, k
FROM (SELECT explode(sequence(DATE'2024-01-01', DATE'2024-01-20', INTERVAL 1 DAY)) AS d)
LATERAL VIEW explode(array(1, 2, 3)) t AS k
"""
EVENTS = """\
MODEL (name {schema}.events, kind INCREMENTAL_BY_TIME_RANGE (time_column ds, batch_size 1),
       start '2024-01-01', end '2024-01-20');
SELECT ds, {amount} AS amount, k FROM {schema}.src WHERE ds BETWEEN @start_ds AND @end_ds
"""
DAILY = """\
MODEL (name {schema}.daily, kind FULL);
SELECT ds, SUM(amount) AS total FROM {schema}.events GROUP BY ds
"""
OTHER = """\
MODEL (name {schema}.other, kind FULL);
SELECT 42 AS answer
"""


def write_project(root: Path, schema: str, *, amount: str = "amount", state: dict | None = None) -> Path:
    (root / "models").mkdir(parents=True, exist_ok=True)
    connection = {"type": "spark", "master": "local[1]",
                  "config": {"spark.sql.shuffle.partitions": "1"}}
    config = {"gateways": {"local": {
        "connection": connection,
        "state_connection": state or {"type": "sqlite", "database": ".meshbot/state.db"}}},
        "default_gateway": "local",
        "model_defaults": {"dialect": "spark", "start": "2024-01-01", "cron": "@daily"}}
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    for name, text in (("src", SRC), ("events", EVENTS), ("daily", DAILY), ("other", OTHER)):
        (root / "models" / f"{name}.sql").write_text(text.format(schema=schema, amount=amount))
    return root


def test_failing_model_stops_its_downstream_and_leaves_other_environments(tmp_path, clean_catalog):
    root = write_project(tmp_path, "fb")
    context = Context(root)
    context.apply(context.plan("prod", options=PlanOptions(execution_time="2024-01-04")))
    prod_view = context.fetchdf("SELECT ds, total FROM fb.daily ORDER BY ds")

    write_project(root, "fb", amount="IF(amount > 1, raise_error('amount too large'), amount)")
    (root / "models" / "other.sql").write_text(OTHER.format(schema="fb").replace("42", "43"))
    dev = Context(root)
    plan = dev.plan("dev", options=PlanOptions(execution_time="2024-01-04"))
    with pytest.raises(EngineError) as info:
        dev.apply(plan)
    message = str(info.value)
    assert "`fb.events`" in message and "amount too large" in message
    assert "not evaluated because an upstream model failed: `fb.daily`" in message
    versions = {name: s.version for name, s in plan.snapshots.items()}
    recorded = dev.state.get_intervals([("fb.daily", versions["fb.daily"]),
                                        ("fb.other", versions["fb.other"])])
    assert "fb.daily" not in {key[0] for key, v in recorded.items() if v.intervals}
    assert recorded[("fb.other", versions["fb.other"])].intervals   # independent model went on
    assert dev.state.get_environment("dev") is None
    assert dev.fetchdf("SELECT ds, total FROM fb.daily ORDER BY ds") == prod_view
    assert dev.state.get_environment("prod").plan_id == context.state.get_environment("prod").plan_id


def test_concurrent_plans_on_postgres_exactly_one_wins(tmp_path, clean_catalog, postgres_schema):
    state = dict(postgres_schema)
    base = write_project(tmp_path / "base", "fc", state=state)
    context = Context(base)
    context.apply(context.plan("prod", options=PlanOptions(execution_time="2024-01-03")))
    contexts, plans = {}, {}
    for factor in (2, 3):
        root = write_project(tmp_path / f"p{factor}", "fc", amount=f"amount * {factor}", state=state)
        contexts[factor] = Context(root)
        plans[factor] = contexts[factor].plan("prod", options=PlanOptions(execution_time="2024-01-03"))
    outcomes: dict[int, object] = {}
    barrier = threading.Barrier(2)

    def apply(factor: int) -> None:
        barrier.wait()
        try:
            outcomes[factor] = contexts[factor].apply(plans[factor])
        except Exception as exc:  # noqa: BLE001 - recorded for the assertions below
            outcomes[factor] = exc

    threads = [threading.Thread(target=apply, args=(f,)) for f in (2, 3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    errors = {f: o for f, o in outcomes.items() if isinstance(o, Exception)}
    assert len(errors) == 1, outcomes
    loser, error = next(iter(errors.items()))
    winner = 5 - loser
    assert isinstance(error, ConflictError)
    # the loser waited for the winner's lease on `prod`, then saw the row had changed: nothing was written
    winner_id = plans[5 - loser].plan_id[:8]
    assert re.fullmatch(rf"environment `prod` was changed by the plan of `prod` \(plan {winner_id}\) on "
                        rf"\S+:\d+ \(it now serves plan {winner_id}\) while this plan waited; plan again",
                        str(error)), str(error)
    env = context.state.get_environment("prod")
    assert env.plan_id == plans[winner].plan_id and env.finalized_ts is not None
    assert env.by_name()["fc.events"].table_name == plans[winner].snapshots["fc.events"].table_name
    totals = context.fetchdf("SELECT ds, total FROM fc.daily ORDER BY ds")
    assert totals == [{"ds": "2024-01-01", "total": 3 * winner}, {"ds": "2024-01-02", "total": 6 * winner}]


def test_view_failure_after_promotion_restores_previous_views_and_rerun_converges(
        tmp_path, clean_catalog, monkeypatch):
    from bot.spark.engine import SparkEngine

    root = write_project(tmp_path, "fd")
    context = Context(root)
    first = context.apply(context.plan("prod", options=PlanOptions(execution_time="2024-01-03")))
    before = context.state.get_environment("prod")
    old_plan_id = before.plan_id
    assert old_plan_id == first.plan_id

    write_project(root, "fd", amount="amount * 10")
    changed = Context(root)
    plan = changed.plan("prod", options=PlanOptions(execution_time="2024-01-03"))
    new_table = plan.snapshots["fd.events"].table_name
    real = SparkEngine.create_view

    def failing(self, view, select_sql, *, replace=True):
        if view == "fd.events" and new_table.split(".")[1] in select_sql:
            raise RuntimeError("metastore unavailable")
        return real(self, view, select_sql, replace=replace)

    monkeypatch.setattr(SparkEngine, "create_view", failing)
    with pytest.raises(EngineError, match="creating the views of `prod` failed: metastore unavailable; "
                                          "the environment and its views were left as before"):
        changed.apply(plan)
    assert changed.state.get_environment("prod") == before   # the exact row: plan ids, finalized time
    assert changed.fetchdf("SELECT ds, total FROM fd.daily ORDER BY ds") == [
        {"ds": "2024-01-01", "total": 3}, {"ds": "2024-01-02", "total": 6}]
    assert changed.fetchdf("SELECT SUM(amount) AS s FROM fd.events") == [{"s": 9}]

    monkeypatch.setattr(SparkEngine, "create_view", real)
    rerun = Context(root)
    again = rerun.plan("prod", options=PlanOptions(execution_time="2024-01-03"))
    assert again.backfills == ()          # tables and intervals from the failed apply are reused
    rerun.apply(again)
    assert rerun.fetchdf("SELECT SUM(amount) AS s FROM fd.events") == [{"s": 90}]
    assert rerun.state.get_environment("prod").plan_id == again.plan_id


def test_rows_of_a_version_with_no_recorded_interval_are_replaced_not_added_to(tmp_path, clean_catalog):
    """A killed janitor (state rows deleted, table not dropped yet) or a killed writer leaves rows the
    state does not know: the next plan's first batch replaces them."""
    root = write_project(tmp_path, "fr")
    context = Context(root)
    context.apply(context.plan("prod", options=PlanOptions(execution_time="2024-01-05")))
    assert context.fetchdf("SELECT COUNT(*) AS n FROM fr.events") == [{"n": 12}]   # 4 days, 3 keys
    version = context.state.get_environment("prod").by_name()["fr.events"].version
    context.state.remove_intervals("fr.events", version, (0, 2**62))

    again = Context(root)
    again.apply(again.plan("prod", options=PlanOptions(execution_time="2024-01-03")))
    assert again.fetchdf("SELECT ds, COUNT(*) AS n FROM fr.events GROUP BY ds ORDER BY ds") == [
        {"ds": "2024-01-01", "n": 3}, {"ds": "2024-01-02", "n": 3}]
