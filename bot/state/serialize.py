"""Convert Snapshot and Environment values to state rows and back, exactly."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Mapping

from bot.snapshot import ChangeCategory, Fingerprint, Snapshot, SnapshotId
from bot.state.api import Environment, EnvironmentSnapshot, HistoryEntry


def snapshot_to_row(snapshot: Snapshot) -> dict[str, Any]:
    """The snapshots-table row of a snapshot; JSON columns hold plain lists and dicts."""
    return {
        "name": snapshot.name,
        "identifier": snapshot.identifier,
        "version": snapshot.version,
        "kind": snapshot.kind,
        "fingerprint": asdict(snapshot.fingerprint),
        "change_category": snapshot.change_category.value if snapshot.change_category else None,
        "definition": snapshot.definition,
        "rendered_query": snapshot.rendered_query,
        "parents": [[p.name, p.identifier] for p in snapshot.parents],
        "forward_only": snapshot.forward_only,
        "physical_schema": snapshot.physical_schema,
        "columns": [[name, type_] for name, type_ in snapshot.columns],
        "ttl": snapshot.ttl,
        "created_ts": snapshot.created_ts,
        "updated_ts": snapshot.updated_ts,
    }


def row_to_snapshot(row: Mapping[str, Any]) -> Snapshot:
    category = row["change_category"]
    return Snapshot(
        name=row["name"],
        fingerprint=Fingerprint(**row["fingerprint"]),
        version=row["version"],
        kind=row["kind"],
        definition=row["definition"],
        rendered_query=row["rendered_query"],
        change_category=ChangeCategory(category) if category else None,
        parents=tuple(SnapshotId(name, identifier) for name, identifier in row["parents"]),
        forward_only=bool(row["forward_only"]),
        physical_schema=row["physical_schema"],
        created_ts=int(row["created_ts"]),
        updated_ts=int(row["updated_ts"]),
        ttl=row["ttl"],
        columns=tuple((name, type_) for name, type_ in row["columns"]),
    )


def _listed_to_row(listed: tuple[EnvironmentSnapshot, ...]) -> list[dict[str, Any]]:
    """An environment's snapshot list; `promoted` is written only when False, so rows whose models all have
    a view (prod's) stay as before and older rows read as promoted."""
    rows = [asdict(s) for s in listed]
    for row in rows:
        if row["promoted"]:
            del row["promoted"]
    return rows


def environment_to_row(environment: Environment) -> dict[str, Any]:
    return {
        "name": environment.name,
        "snapshots": _listed_to_row(environment.snapshots),
        "start": environment.start,
        "end": environment.end,
        "plan_id": environment.plan_id,
        "previous_plan_id": environment.previous_plan_id,
        "expiration_ts": environment.expiration_ts,
        "finalized_ts": environment.finalized_ts,
        "suffix_target": environment.suffix_target,
        "previous_snapshots": _listed_to_row(environment.previous_snapshots),
    }


def row_to_environment(row: Mapping[str, Any]) -> Environment:
    return Environment(
        name=row["name"],
        snapshots=tuple(EnvironmentSnapshot(**s) for s in row["snapshots"]),
        plan_id=row["plan_id"],
        previous_plan_id=row["previous_plan_id"],
        start=row["start"],
        end=row["end"],
        expiration_ts=row["expiration_ts"],
        finalized_ts=row["finalized_ts"],
        suffix_target=row["suffix_target"],
        previous_snapshots=tuple(EnvironmentSnapshot(**s) for s in row.get("previous_snapshots") or ()),
    )


def history_to_row(environment: Environment, *, promoted_ts: int) -> dict[str, Any]:
    """The environment_history row of a promotion of `environment`."""
    return {"name": environment.name, "plan_id": environment.plan_id,
            "snapshots": _listed_to_row(environment.snapshots),
            "promoted_ts": promoted_ts, "finalized_ts": None}


def row_to_history(row: Mapping[str, Any]) -> HistoryEntry:
    return HistoryEntry(environment=row["name"], plan_id=row["plan_id"],
                        snapshots=tuple(EnvironmentSnapshot(**s) for s in row["snapshots"]),
                        promoted_ts=int(row["promoted_ts"]), finalized_ts=row["finalized_ts"])
