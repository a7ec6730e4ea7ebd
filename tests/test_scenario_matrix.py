"""Scenario matrix: one edit to a small project → directly/indirectly modified models, their categories
and what is backfilled. Every expected row is what SQLMesh 0.236.4 (DuckDB) printed for the same
project and edit (`sqlmesh plan dev --no-prompts`, plan context_diff and missing_intervals)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.context import Context
from bot.plan.definition import BackfillKind, ChangeType, Plan, PlanOptions
from bot.state.protocol import Environment, EnvironmentSnapshot

OPTIONS = PlanOptions(execution_time="2024-01-03")
HEADER = "MODEL (name db.{name}, kind FULL, start '2024-01-01'{extra});\n"
BASE = {
    "src": "SELECT 1 AS id, 10 AS amount, DATE '2024-01-01' AS ds",
    "orders": "SELECT id, amount, ds FROM db.src WHERE amount > 0",
    "counts": "SELECT ds, COUNT(*) AS n FROM db.orders GROUP BY ds",
    "star": "SELECT * FROM db.orders",
    "top": "SELECT ds, n FROM db.counts",
    "qual": "SELECT o.*, 1 AS k FROM db.orders AS o",
}
NB, B = "non_breaking", "breaking"
INB, IB = "indirect_non_breaking", "indirect_breaking"

# (edit, model → (new query, extra header text), directly modified, indirectly modified, backfilled)
MATRIX = [
    ("parent adds a column", {"orders": ("SELECT id, amount, ds, 1 AS one FROM db.src WHERE amount > 0", "")},
     {"orders": NB, "star": NB, "qual": NB}, {"counts": INB, "top": INB}, {"orders", "star", "qual"}),
    ("parent changes WHERE", {"orders": ("SELECT id, amount, ds FROM db.src WHERE amount > 5", "")},
     {"orders": B}, {"counts": IB, "star": IB, "qual": IB, "top": IB},
     {"orders", "counts", "star", "qual", "top"}),
    ("parent removes a column", {"orders": ("SELECT id, ds FROM db.src WHERE amount > 0", "")},
     {"orders": B, "star": B, "qual": B}, {"counts": IB, "top": IB},
     {"orders", "counts", "star", "qual", "top"}),
    ("parent adds an audit", {"orders": (BASE["orders"], ", audits (not_null(columns := (id)))")},
     {}, {}, set()),
    ("parent changes owner", {"orders": (BASE["orders"], ", owner bob")}, {}, {}, set()),
    ("COUNT(*) child adds a column",
     {"counts": ("SELECT ds, COUNT(*) AS n, MAX(amount) AS mx FROM db.orders GROUP BY ds", "")},
     {"counts": NB}, {"top": INB}, {"counts"}),
    ("COUNT(*) child changes aggregate",
     {"counts": ("SELECT ds, COUNT(id) AS n FROM db.orders GROUP BY ds", "")},
     {"counts": B}, {"top": IB}, {"counts", "top"}),
    ("root adds a column", {"src": ("SELECT 1 AS id, 10 AS amount, DATE '2024-01-01' AS ds, 'x' AS tag", "")},
     {"src": NB}, {"orders": INB, "counts": INB, "star": INB, "qual": INB, "top": INB}, {"src"}),
]
METADATA_ONLY = {"parent adds an audit": "orders", "parent changes owner": "orders"}


def _write(root: Path, edits: dict[str, tuple[str, str]]) -> None:
    (root / "models").mkdir(parents=True, exist_ok=True)
    for name, query in BASE.items():
        query, extra = edits.get(name, (query, ""))
        (root / "models" / f"{name}.sql").write_text(HEADER.format(name=name, extra=extra) + query)


def _record(context: Context, plan: Plan) -> None:
    """What applying records in state (snapshots, intervals, environment), without Spark."""
    state = context.state
    state.push_snapshots(plan.new_snapshots)
    for backfill in plan.backfills:
        if backfill.kind is not BackfillKind.RECREATE_VIEW:
            for batch in backfill.batches:
                state.add_interval(backfill.snapshot_id.name,
                                   plan.snapshots[backfill.snapshot_id.name].version, batch)
    entries = tuple(EnvironmentSnapshot(s.name, s.identifier, s.version, s.kind, s.table_name)
                    for s in plan.snapshots.values())
    state.promote(Environment(plan.environment, entries, plan.plan_id), expected_plan_id=None)


@pytest.mark.parametrize("label, edits, direct, indirect, backfilled", MATRIX, ids=[m[0] for m in MATRIX])
def test_edit_matrix_agrees_with_sqlmesh(tmp_path, label, edits, direct, indirect, backfilled):
    root = tmp_path / "p"
    root.mkdir()
    (root / "config.yaml").write_text("model_defaults:\n  dialect: duckdb\n")
    _write(root, {})
    first = Context(root)
    _record(first, first.plan("prod", options=OPTIONS))
    _write(root, edits)
    context = Context(root)
    prod = {s.name: s for s in context.state.get_environment("prod").snapshots}

    plan = context.plan("dev", options=OPTIONS)

    def of(kind: ChangeType) -> dict[str, str]:
        return {c.name.split(".")[1]: c.category.value for c in plan.changes if c.change is kind}
    assert of(ChangeType.DIRECTLY_MODIFIED) == direct
    assert of(ChangeType.INDIRECTLY_MODIFIED) == indirect
    assert of(ChangeType.METADATA_UPDATED) == ({METADATA_ONLY[label]: "metadata"} if label in METADATA_ONLY else {})
    assert {b.snapshot_id.name.split(".")[1] for b in plan.backfills} == backfilled
    for name, category in indirect.items():   # Indirect Non-breaking reuses prod's table
        same_table = plan.snapshots[f"db.{name}"].version == prod[f"db.{name}"].version
        assert same_table is (category == INB)
