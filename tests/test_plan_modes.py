"""Plan modes end to end: forward-only (prod and dev preview), destructive changes, effective-from,
restatement selectors, --no-gaps and --include-unmodified, on real SQLite state and local Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.context import Context
from bot.errors import PlanError
from bot.plan.definition import BackfillKind, PlanOptions
from bot.timeline.times import to_ms
from bot.snapshot import ChangeCategory
from project_files import LOCAL_SPARK_SQLITE_CONFIG

DAY = 86_400_000
SRC = """\
MODEL (name pm.src, kind FULL, tags (raw));
SELECT CAST(d AS STRING) AS ds, CAST(day(d) AS INT) AS amount
FROM (SELECT explode(sequence(DATE'2024-01-01', DATE'2024-01-10', INTERVAL 1 DAY)) AS d)
"""
EVENTS = """\
MODEL (name pm.events, kind INCREMENTAL_BY_TIME_RANGE (time_column ds{extra}), tags (facts));
SELECT ds, {amount} AS amount FROM pm.src WHERE ds BETWEEN @start_ds AND @end_ds
"""
TOTAL = """\
MODEL (name pm.total, kind FULL);
SELECT SUM(amount) AS total FROM pm.events
"""


def write_project(root: Path, *, amount: str = "amount", extra: str = "", src: str = SRC,
                  total: str | None = TOTAL) -> Path:
    (root / "models").mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(LOCAL_SPARK_SQLITE_CONFIG)
    (root / "models" / "src.sql").write_text(src)
    (root / "models" / "events.sql").write_text(EVENTS.format(amount=amount, extra=extra))
    if total is None:
        (root / "models" / "total.sql").unlink(missing_ok=True)
    else:
        (root / "models" / "total.sql").write_text(total)
    return root


def fresh(root: Path) -> Context:
    """A new Context (re-reads the files), as a new CLI invocation would."""
    return Context(root)


def per_day(context: Context, table: str) -> dict[str, int]:
    rows = context.fetchdf(f"SELECT ds, amount FROM {table}")
    return {row["ds"][-2:]: row["amount"] for row in rows}


def plan_and_apply(root: Path, env: str = "prod", **options):
    context = fresh(root)
    plan = context.plan(env, options=PlanOptions(**options))
    context.apply(plan)
    return context, plan


def test_forward_only_prod_keeps_history_and_dev_previews_in_dev_table(tmp_path, clean_catalog):
    root = write_project(tmp_path)
    context, first = plan_and_apply(root, execution_time="2024-01-04")
    version = first.snapshots["pm.events"].version
    assert per_day(context, "pm.events") == {"01": 1, "02": 2, "03": 3}

    write_project(root, amount="amount * 10")
    dev = fresh(root)
    preview = dev.plan("dev", options=PlanOptions(forward_only=True, execution_time="2024-01-04"))
    change = preview.change_for("pm.events")
    assert change.category is ChangeCategory.FORWARD_ONLY
    assert preview.snapshots["pm.events"].version == version
    from bot.plan.summary import plan_summary_text
    assert "pm__dev.events (preview): [2024-01-01 - 2024-01-03]" in plan_summary_text(preview)
    dev.apply(preview)
    assert dev.table_in("dev", "pm.events").endswith(f"__{version}__dev")
    assert per_day(dev, "pm__dev.events") == {"01": 10, "02": 20, "03": 30}
    assert per_day(dev, "pm.events") == {"01": 1, "02": 2, "03": 3}   # prod untouched

    context, second = plan_and_apply(root, forward_only=True, execution_time="2024-01-06")
    events = next(b for b in second.backfills if b.snapshot_id.name == "pm.events")
    assert events.intervals == ((to_ms("2024-01-04"), to_ms("2024-01-05")),
                                (to_ms("2024-01-05"), to_ms("2024-01-06")))
    assert not events.is_dev and second.snapshots["pm.events"].version == version
    assert per_day(context, "pm.events") == {"01": 1, "02": 2, "03": 3, "04": 40, "05": 50}

    # --effective-from: a further forward-only change applies from 2024-01-02 on (restated)
    write_project(root, amount="amount * 100")
    context, third = plan_and_apply(root, forward_only=True, effective_from="2024-01-02",
                                    execution_time="2024-01-06")
    restated = third.restatements[third.snapshots["pm.events"].snapshot_id]
    assert restated == (to_ms("2024-01-02"), to_ms("2024-01-06"))
    assert per_day(context, "pm.events") == {"01": 1, "02": 200, "03": 300, "04": 400, "05": 500}
    assert context.fetchdf("SELECT total FROM pm.total") == [{"total": 1 + 1400}]


def test_forward_only_added_column_is_added_to_the_kept_table(tmp_path, clean_catalog):
    root = write_project(tmp_path)
    context, first = plan_and_apply(root, execution_time="2024-01-04")
    table = context.table_in("prod", "pm.events")

    write_project(root, amount="amount * 2 AS doubled, amount")
    context, second = plan_and_apply(root, forward_only=True, execution_time="2024-01-06")
    assert second.snapshots["pm.events"].version == first.snapshots["pm.events"].version
    assert context.table_in("prod", "pm.events") == table
    rows = context.fetchdf(f"SELECT ds, amount, doubled FROM {table} ORDER BY ds")
    assert [(r["ds"][-2:], r["amount"], r["doubled"]) for r in rows] == [
        ("01", 1, None), ("02", 2, None), ("03", 3, None), ("04", 4, 8), ("05", 5, 10)]
    assert [r["doubled"] for r in context.fetchdf("SELECT doubled FROM pm.events ORDER BY ds")][-1] == 10


def _promote_without_spark(context: Context, plan) -> None:
    """Record a plan in state as apply would (tests of plan-time checks need no tables)."""
    from bot.plan.evaluator import PlanEvaluator

    context.state.push_snapshots(plan.new_snapshots)
    for backfill in plan.backfills:
        for batch in backfill.batches:
            context.state.add_interval(backfill.snapshot_id.name,
                                       plan.snapshots[backfill.snapshot_id.name].version, batch)
    evaluator = PlanEvaluator(state=context.state, runner=None, models_for=None)  # type: ignore[arg-type]
    context.state.promote(evaluator.environment_for(plan), expected_plan_id=plan.expected_plan_id)


@pytest.mark.parametrize("policy", ["error", "warn", "allow"])
def test_destructive_forward_only_changes_follow_on_destructive_change(tmp_path, policy):
    extra = f", on_destructive_change {policy}, forward_only true"
    root = write_project(tmp_path, amount="CAST(amount AS INT)", extra=extra, total=None)
    context = fresh(root)
    _promote_without_spark(context, context.plan("prod", options=PlanOptions(
        execution_time="2024-01-04")))
    # drop `amount`'s type and add nothing: `amount` becomes a STRING, and `ds` stays
    write_project(root, amount="CAST(amount AS STRING)", extra=extra, total=None)
    changed = fresh(root)
    if policy == "error":
        with pytest.raises(PlanError) as info:
            changed.plan("prod", options=PlanOptions(execution_time="2024-01-04"))
        message = str(info.value)
        assert "`pm.events` changes the type of `amount` (INT -> STRING)" in message
        assert "--allow-destructive-model pm.events" in message
        allowed = changed.plan("prod", options=PlanOptions(
            execution_time="2024-01-04", allow_destructive_models=("pm.events",)))
        assert allowed.warnings == ()
    else:
        plan = changed.plan("prod", options=PlanOptions(execution_time="2024-01-04"))
        assert plan.change_for("pm.events").category is ChangeCategory.FORWARD_ONLY
        expected = (("forward-only change to `pm.events` changes the type of `amount` "
                     "(INT -> STRING); its existing rows keep the old schema",)
                    if policy == "warn" else ())
        assert plan.warnings == expected


def test_dropped_column_under_forward_only_flag_is_blocked(tmp_path):
    root = write_project(tmp_path, total=None)
    context = fresh(root)
    _promote_without_spark(context, context.plan("prod", options=PlanOptions(
        execution_time="2024-01-04")))
    (root / "models" / "events.sql").write_text(
        EVENTS.format(amount="amount", extra="").replace(", {amount} AS amount", "")
        .replace(", amount AS amount", ""))
    with pytest.raises(PlanError, match=r"`pm.events` drops column\(s\) `amount`"):
        fresh(root).plan("prod", options=PlanOptions(forward_only=True, execution_time="2024-01-04"))
    # not forward-only: a breaking change gets a new table, nothing is destroyed
    plan = fresh(root).plan("prod", options=PlanOptions(execution_time="2024-01-04"))
    assert plan.change_for("pm.events").category is ChangeCategory.BREAKING


def test_restate_selectors_cascade_and_honour_disable_restatement(tmp_path):
    root = write_project(tmp_path)
    context = fresh(root)
    _promote_without_spark(context, context.plan("prod", options=PlanOptions(
        execution_time="2024-01-06")))
    full_span = (to_ms("2024-01-01"), to_ms("2024-01-06"))
    for selector in ("pm.events", "pm.ev*", "tag:facts"):
        plan = fresh(root).plan("prod", options=PlanOptions(
            restate_models=(selector,), start="2024-01-02", end="2024-01-03",
            execution_time="2024-01-06"))
        restated = {sid.name: span for sid, span in plan.restatements.items()}
        # events restates the window; its child pm.total (FULL) restates fully
        assert set(restated) == {"pm.events", "pm.total"}, selector
        assert restated["pm.events"] == (to_ms("2024-01-02"), to_ms("2024-01-04"))
        kinds = {b.snapshot_id.name: b.kind for b in plan.backfills}
        assert kinds == {"pm.events": BackfillKind.INTERVALS, "pm.total": BackfillKind.FULL_REFRESH}
        events = next(b for b in plan.backfills if b.snapshot_id.name == "pm.events")
        assert events.intervals == ((to_ms("2024-01-02"), to_ms("2024-01-03")),
                                    (to_ms("2024-01-03"), to_ms("2024-01-04")))
    plan = fresh(root).plan("prod", options=PlanOptions(restate_models=("tag:raw",),
                                                         execution_time="2024-01-06"))
    assert {sid.name for sid in plan.restatements} == {"pm.src", "pm.events", "pm.total"}
    assert plan.restatements[plan.snapshots["pm.events"].snapshot_id] == full_span

    write_project(root, extra=", disable_restatement true")
    context = fresh(root)
    _promote_without_spark(context, context.plan("prod", options=PlanOptions(
        execution_time="2024-01-06")))
    plan = fresh(root).plan("prod", options=PlanOptions(restate_models=("pm.src",),
                                                         execution_time="2024-01-06"))
    assert {sid.name for sid in plan.restatements} == {"pm.src", "pm.total"}
    with pytest.raises(PlanError, match="selector `nope.\\*` matches no model"):
        fresh(root).plan("prod", options=PlanOptions(restate_models=("nope.*",)))


def test_restatement_recomputes_only_the_window_with_new_source_rows(tmp_path, clean_catalog):
    raw = tmp_path / "raw"
    clean_catalog.sql("CREATE SCHEMA IF NOT EXISTS pm_raw")
    clean_catalog.sql("CREATE TABLE pm_raw.days (ds STRING, amount INT) USING parquet "
                      f"LOCATION '{raw}'")
    clean_catalog.sql("INSERT INTO pm_raw.days VALUES ('2024-01-01', 1), ('2024-01-02', 2), "
                      "('2024-01-03', 3)")
    src = "MODEL (name pm.src, kind VIEW);\nSELECT ds, amount FROM pm_raw.days\n"
    root = write_project(tmp_path / "p", src=src, total=None)
    context, _ = plan_and_apply(root, execution_time="2024-01-04")
    clean_catalog.sql("INSERT OVERWRITE pm_raw.days VALUES ('2024-01-01', 7), ('2024-01-02', 8), "
                      "('2024-01-03', 9)")
    context, plan = plan_and_apply(root, restate_models=("pm.events",), start="2024-01-02",
                                   end="2024-01-02", execution_time="2024-01-04")
    assert per_day(context, "pm.events") == {"01": 1, "02": 8, "03": 3}


def test_no_gaps_and_include_unmodified(tmp_path):
    root = write_project(tmp_path, total=None)
    context = fresh(root)
    _promote_without_spark(context, context.plan("prod", options=PlanOptions(
        execution_time="2024-01-06")))
    with pytest.raises(PlanError, match="project files match `prod`"):
        fresh(root).plan("dev", options=PlanOptions(execution_time="2024-01-06"))
    plan = fresh(root).plan("dev", options=PlanOptions(include_unmodified=True,
                                                        execution_time="2024-01-06"))
    assert plan.new_environment and plan.changes == () and plan.backfills == ()
    assert set(plan.snapshots) == {"pm.src", "pm.events"}

    write_project(root, amount="amount + 1", total=None)   # breaking: a new table
    with pytest.raises(PlanError, match=r"--no-gaps: `pm.events` would have a gap at "
                                        r"\[2024-01-01 - 2024-01-02\]"):
        fresh(root).plan("prod", options=PlanOptions(no_gaps=True, start="2024-01-03",
                                                     execution_time="2024-01-06"))
    plan = fresh(root).plan("prod", options=PlanOptions(no_gaps=True, execution_time="2024-01-06"))
    events = next(b for b in plan.backfills if b.snapshot_id.name == "pm.events")
    assert events.intervals[0] == (to_ms("2024-01-01"), to_ms("2024-01-02"))
    assert len(events.intervals) == 5
