"""Rollback on Spark: prod serves an earlier plan's rows again in seconds, nothing computed; refused once its tables are gone."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from bot.cli.app import cli
from bot.context import Context
from bot.plan.definition import PlanOptions
from tests.test_faults import OTHER, write_project

pytestmark = pytest.mark.spark


def _invoke(root, *args: str):
    return CliRunner().invoke(cli, ["-p", str(root), *args], catch_exceptions=False)


def test_rollback_repoints_prod_to_the_previous_plan_without_computing(tmp_path, clean_catalog):
    root = write_project(tmp_path, "rb")
    v1 = Context(root)
    v1.apply(v1.plan("prod", options=PlanOptions(execution_time="2024-01-04")))
    rows_v1 = v1.fetchdf("SELECT ds, total FROM rb.daily ORDER BY ds")
    first = v1.state.get_environment("prod")

    write_project(root, "rb", amount="amount * 10")
    (root / "models" / "other.sql").write_text(OTHER.format(schema="rb").replace("42", "43"))
    v2 = Context(root)
    started = time.monotonic()
    applied = v2.apply(v2.plan("prod", options=PlanOptions(execution_time="2024-01-04")))
    apply_s = time.monotonic() - started
    assert applied.evaluated and v2.fetchdf("SELECT ds, total FROM rb.daily ORDER BY ds") != rows_v1
    second = v2.state.get_environment("prod")
    intervals_before = v2.state.get_intervals([(s.name, s.version) for s in first.snapshots])

    started = time.monotonic()
    result = v2.rollback("prod")
    rollback_s = time.monotonic() - started
    print(f"\napply v2: {apply_s:.2f} s, rollback to v1: {rollback_s:.2f} s")
    assert (result.to_plan_id, result.from_plan_id) == (first.plan_id, second.plan_id)
    assert set(result.repointed) == {"rb.events", "rb.daily", "rb.other"}
    assert v2.fetchdf("SELECT ds, total FROM rb.daily ORDER BY ds") == rows_v1
    assert v2.fetchdf("SELECT answer FROM rb.other") == [{"answer": 42}]
    assert rollback_s < apply_s
    now = v2.state.get_environment("prod")
    assert (now.plan_id, now.previous_plan_id) == (result.plan_id, second.plan_id)
    assert now.finalized_ts is not None and now.snapshots == first.snapshots
    assert v2.state.get_intervals([(s.name, s.version) for s in first.snapshots]) == intervals_before

    listed = _invoke(root, "environments", "prod", "--history", "--json")
    assert listed.exit_code == 0, listed.output
    history = json.loads(listed.output)
    assert [h["plan_id"] for h in history] == [result.plan_id, second.plan_id, first.plan_id]
    assert [h["current"] for h in history] == [True, False, False]
    assert {h["snapshot_count"] for h in history} == {4}
    table = _invoke(root, "environments", "prod", "--history")
    assert result.plan_id[:12] in table.output and first.plan_id[:12] in table.output

    # v2's tables dropped behind meshbot's back: rolling back to v2 is refused, nothing changes
    dropped = next(s.table_name for s in second.snapshots if s.name == "rb.other")
    v2.engine.drop_table(dropped)
    refused = _invoke(root, "rollback", "prod")
    assert refused.exit_code == 1
    assert f"cannot roll back `prod` to plan {second.plan_id[:8]}" in refused.output
    assert f"`{dropped}`" in refused.output and "missing from the catalog" in refused.output
    assert v2.state.get_environment("prod") == now
    assert len(v2.state.get_environment_history("prod")) == 3
    assert v2.fetchdf("SELECT answer FROM rb.other") == [{"answer": 42}]

    # `--to` takes a prefix of any plan in the history: the first plan's snapshots are served already
    again = _invoke(root, "rollback", "prod", "--to", first.plan_id[:10])
    assert again.exit_code == 0, again.output
    assert "0 view(s) repointed" in again.output
