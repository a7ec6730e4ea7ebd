"""Audits on a real backfill: a blocking failure stops the plan before promotion, a non-blocking one warns."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.context import Context
from bot.errors import QualityError
from bot.plan.definition import PlanOptions
from bot.plan.summary import plan_summary_text

OPTIONS = PlanOptions(execution_time="2024-01-03")


def _project(root: Path, audit: str) -> Path:
    (root / "models").mkdir(parents=True)
    (root / "config.yaml").write_text(
        "model_defaults:\n  dialect: spark\n  start: '2024-01-01'\n")
    (root / "models" / "events.sql").write_text(f"""
MODEL (
  name aud.events,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ds),
  audits ({audit})
);
SELECT * FROM VALUES
  (1, 'a', '2024-01-01'), (2, 'b', '2024-01-01'), (3, NULL, '2024-01-02')
  AS t(id, label, ds)
WHERE ds BETWEEN @start_ds AND @end_ds
""")
    return root


def test_blocking_audit_stops_the_plan_before_promotion(tmp_path, clean_catalog):
    root = _project(tmp_path / "p", "not_null(columns := (label))")
    context = Context(root)
    plan = context.plan("prod", options=OPTIONS)

    with pytest.raises(QualityError) as failure:
        context.apply(plan)

    message = str(failure.value)
    assert "not_null" in message and "aud.events" in message and "1 violating row" in message
    assert context.state.get_environment("prod") is None
    snapshot = plan.snapshots["aud.events"]
    recorded = context.state.get_intervals([(snapshot.name, snapshot.version)])
    intervals = recorded[(snapshot.name, snapshot.version)].intervals
    assert all(start != 1704153600000 for start, _ in intervals), "the failing day must stay unrecorded"
    assert "aud" not in {row[0] for row in clean_catalog.sql("SHOW DATABASES").collect()}


def test_non_blocking_audit_warns_and_promotes(tmp_path, clean_catalog):
    root = _project(tmp_path / "p", "not_null_non_blocking(columns := (label))")
    context = Context(root)
    result = context.apply(context.plan("prod", options=OPTIONS))

    assert [(w.audit, w.blocking, w.violation_count) for w in result.audit_warnings] == \
        [("not_null", False, 1)]
    assert context.state.get_environment("prod") is not None
    assert clean_catalog.sql("SELECT COUNT(*) FROM aud.events").collect()[0][0] == 3


def test_an_added_audit_runs_on_existing_data_before_promotion(tmp_path, clean_catalog):
    """SQLMesh 0.236.4 on the same change: "Metadata Updated", no backfill, then "Auditing models …
    'not_null' audit error: 1 row failed … Plan application failed"."""
    root = _project(tmp_path / "p", "")
    context = Context(root)
    context.apply(context.plan("prod", options=OPTIONS))
    before = context.state.get_environment("prod")

    _project_audits(root, "not_null(columns := (label))")
    context = Context(root)
    plan = context.plan("prod", options=OPTIONS)
    assert [(c.name, c.change.value, c.category.value) for c in plan.changes] == \
        [("aud.events", "metadata_updated", "metadata")]
    assert not plan.backfills
    assert [s.name for s in plan.audit_only] == ["aud.events"]
    assert "Models to audit on their existing data:\n└── aud.events" in plan_summary_text(plan)
    with pytest.raises(QualityError) as failure:
        context.apply(plan)
    assert "not_null" in str(failure.value) and "1 violating row" in str(failure.value)
    assert context.state.get_environment("prod").plan_id == before.plan_id

    _project_audits(root, "not_null_non_blocking(columns := (label))")
    context = Context(root)
    result = context.apply(context.plan("prod", options=OPTIONS))
    assert [(w.audit, w.violation_count) for w in result.audit_warnings] == [("not_null", 1)]
    assert context.state.get_environment("prod").plan_id != before.plan_id


def _project_audits(root: Path, audit: str) -> None:
    path = root / "models" / "events.sql"
    text = path.read_text()
    start = text.index("audits (") + len("audits (")
    path.write_text(text[:start] + audit + text[text.index(")\n);", start):])
