"""Convert Snapshot and Environment values to state rows and back, exactly."""

from __future__ import annotations

from dataclasses import MISSING, asdict, fields
from typing import Any, Iterable, Mapping

from bot.errors import StateError
from bot.snapshot import ChangeCategory, Fingerprint, Snapshot, SnapshotId
from bot.state.protocol import Environment, EnvironmentSnapshot, HistoryEntry


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
    a view (prod's) stay as before and older rows read as promoted. (Not `asdict`, which copies each value
    deeply: ~10x slower on prod's 10,000 entries.)"""
    rows = []
    for snapshot in listed:
        row = {name: getattr(snapshot, name) for name in _LISTED_ORDER}
        if row["promoted"]:
            del row["promoted"]
        rows.append(row)
    return rows


_LISTED_ORDER = tuple(f.name for f in fields(EnvironmentSnapshot))
_LISTED_FIELDS = frozenset(_LISTED_ORDER)
_LISTED_REQUIRED = frozenset(f.name for f in fields(EnvironmentSnapshot) if f.default is MISSING)


def _listed_from_row(rows: Iterable[Mapping[str, Any]], environment: str) -> tuple[EnvironmentSnapshot, ...]:
    """An environment's snapshot list read back. Each entry's fields are checked and set directly: a frozen
    dataclass's __init__ would be ~3x slower on prod's 10,000 entries, read by every plan."""
    listed = []
    new = object.__new__
    for row in rows:
        if not _LISTED_REQUIRED <= row.keys() <= _LISTED_FIELDS:
            raise StateError(f"environment `{environment}` lists a snapshot with fields {sorted(row)}, not those "
                             f"of this meshbot ({sorted(_LISTED_FIELDS)}); was it written by a newer meshbot?")
        snapshot = new(EnvironmentSnapshot)
        snapshot.__dict__.update(row)
        listed.append(snapshot)
    return tuple(listed)


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
        snapshots=_listed_from_row(row["snapshots"], row["name"]),
        plan_id=row["plan_id"],
        previous_plan_id=row["previous_plan_id"],
        start=row["start"],
        end=row["end"],
        expiration_ts=row["expiration_ts"],
        finalized_ts=row["finalized_ts"],
        suffix_target=row["suffix_target"],
        previous_snapshots=_listed_from_row(row.get("previous_snapshots") or (), row["name"]),
    )


def history_to_row(environment: Environment, *, promoted_ts: int, source: str = "") -> dict[str, Any]:
    """The environment_history row of a promotion of `environment` (`source`: where its plan came from)."""
    return {"name": environment.name, "plan_id": environment.plan_id,
            "snapshots": _listed_to_row(environment.snapshots),
            "promoted_ts": promoted_ts, "finalized_ts": None, "source": source[:512] or None}


def row_to_history(row: Mapping[str, Any]) -> HistoryEntry:
    return HistoryEntry(environment=row["name"], plan_id=row["plan_id"],
                        snapshots=_listed_from_row(row["snapshots"], row["name"]),
                        promoted_ts=int(row["promoted_ts"]), finalized_ts=row["finalized_ts"],
                        source=str(row.get("source") or ""))
