"""Describe a Plan without running it: the text summary `plan` prints and the `--json` dict."""

from __future__ import annotations

from typing import Any, Sequence

from bot.timeline.intervals import IntervalUnit, format_interval, inclusive_end_date, interval_unit, merge
from bot.plan.definition import Backfill, BackfillKind, ChangeType, ModelChange, Plan
from bot.plan.stages import plan_stages
from bot.snapshot import view_name

_SECTIONS = (
    (ChangeType.ADDED, "Added"),
    (ChangeType.REMOVED, "Removed"),
    (ChangeType.DIRECTLY_MODIFIED, "Directly Modified"),
    (ChangeType.INDIRECTLY_MODIFIED, "Indirectly Modified"),
    (ChangeType.METADATA_UPDATED, "Metadata Updated"),
)


def tree(items: Sequence[str], prefix: str = "") -> list[str]:
    """Lines of a one-level tree with box-drawing branches.

    >>> tree(["a", "b"])
    ['├── a', '└── b']
    """
    return [f"{prefix}{'└── ' if i == len(items) - 1 else '├── '}{item}" for i, item in enumerate(items)]


def _display(plan: Plan, name: str) -> str:
    return view_name(name, plan.environment)


def _header(plan: Plan) -> list[str]:
    base = plan.environment if not plan.new_environment else "prod"
    if plan.new_environment and plan.environment == "prod":
        return ["New environment `prod` will be created"]
    lines = [f"New environment `{plan.environment}` will be created from `prod`"] if plan.new_environment else []
    if not plan.changes:
        return lines + [f"No changes to plan: project files match the `{base}` environment"]
    return lines + [f"Differences from the `{base}` environment:"]


def _models_tree(plan: Plan) -> list[str]:
    sections = [(label, sorted(c.name for c in plan.changes if c.change is kind))
                for kind, label in _SECTIONS]
    sections = [(label, names) for label, names in sections if names]
    lines = ["Models:"]
    for index, (label, names) in enumerate(sections):
        last = index == len(sections) - 1
        lines.append(f"{'└── ' if last else '├── '}{label}:")
        lines.extend(tree([_display(plan, n) for n in names], prefix="    " if last else "│   "))
    return lines


def _change_details(plan: Plan, change: ModelChange) -> list[str]:
    lines = [change.diff] if change.diff else []
    label = change.category.label if change.category else "Unknown"
    lines.append(f"Directly Modified: {_display(plan, change.name)} ({label})")
    children = [plan.change_for(c) for c in change.indirect_children]
    entries = [f"{_display(plan, c.name)} ({c.category.label if c.category else 'Unknown'})"
               for c in children if c is not None]
    if entries:
        lines.append("└── Indirectly Modified Children:")
        lines.extend(tree(entries, prefix="    "))
    return lines


def _backfill_text(backfill: Backfill, unit: IntervalUnit) -> str:
    if backfill.kind is BackfillKind.FULL_REFRESH:
        return "[full refresh]"
    if backfill.kind is BackfillKind.RECREATE_VIEW:
        return "[recreate view]"
    return "[" + ", ".join(format_interval(i, unit) for i in merge(backfill.intervals)) + "]"


def _backfill_lines(plan: Plan) -> list[str]:
    entries = []
    for backfill in plan.backfills:
        name = backfill.snapshot_id.name
        snapshot = plan.snapshots.get(name)
        if backfill.kind is not BackfillKind.INTERVALS:
            unit = IntervalUnit.DAY   # not shown
        elif backfill.cron is not None:
            unit = interval_unit(backfill.cron)
        else:
            unit = interval_unit(str(snapshot.definition.get("cron", "@daily"))) if snapshot else IntervalUnit.DAY
        preview = " (preview)" if backfill.is_dev else ""
        entries.append(f"{_display(plan, name)}{preview}: {_backfill_text(backfill, unit)}")
    return ["Models needing backfill:", *tree(entries)] if entries else []


def plan_summary_text(plan: Plan) -> str:
    """The plan as the terminal and the PR comment show it."""
    lines = _header(plan)
    if plan.changes:
        lines += _models_tree(plan)
        for change in sorted(plan.changes, key=lambda c: c.name):
            if change.change is ChangeType.DIRECTLY_MODIFIED:
                lines += _change_details(plan, change)
    if plan.restatements:
        lines += ["Models to restate:",
                  *tree(sorted(_display(plan, sid.name) for sid in plan.restatements))]
    if not plan.options.skip_backfill:
        lines += _backfill_lines(plan)
    if plan.audit_only:
        lines += ["Models to audit on their existing data:",
                  *tree(sorted(_display(plan, sid.name) for sid in plan.audit_only))]
    return "\n".join(lines)


def _json_backfill(backfill: Backfill | None) -> Any:
    if backfill is None:
        return None
    if backfill.kind is BackfillKind.FULL_REFRESH:
        return "full_refresh"
    if backfill.kind is BackfillKind.RECREATE_VIEW:
        return "recreate_view"
    return [list(inclusive_end_date(i)) for i in merge(backfill.intervals)]


def plan_to_json(plan: Plan) -> dict[str, Any]:
    """The plan for machines (`--json`): only changed models, interval ends inclusive."""
    by_name = {b.snapshot_id.name: b for b in plan.backfills}
    tables = plan.tables(c.name for c in plan.changes if c.snapshot is not None)
    models = []
    for change in sorted(plan.changes, key=lambda c: c.name):
        snapshot = change.snapshot or change.previous
        backfill = by_name.get(change.name) if change.snapshot is not None else None
        table = ""
        if change.snapshot is not None:
            table = tables[change.name]
        elif change.previous is not None:   # removed: the table it had
            table = change.previous.table_name
        models.append({
            "name": change.name,
            "change": change.change.value,
            "category": change.category.value if change.category else None,
            "kind": change.kind,
            "version": snapshot.version if snapshot else "",
            "physical_table": table,
            "backfill": _json_backfill(backfill),
        })
    return {"environment": plan.environment, "new_environment": plan.new_environment,
            "plan_id": plan.plan_id, "models": models,
            "stages": [stage.to_json() for stage in plan_stages(plan)]}
