"""Re-key stored snapshots to this meshbot's fingerprints: same versions, tables and intervals, new ids."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping

import sqlalchemy as sa

from bot.fingerprint import combine, data_hash, metadata_hash
from bot.project.serialize import model_from_dict
from bot.snapshot import Fingerprint, SnapshotId
from bot.state._util import chunks
from bot.state.tables import Tables

# name -> (stored definition, rendered query) of each model of the project being migrated, called once if needed
CurrentRenders = Callable[[], Mapping[str, tuple[dict[str, Any], str]]]


@dataclass(frozen=True)
class Rekeyed:
    """What a re-key did: old id -> new id of each snapshot whose fingerprint moved, how many kept theirs,
    and the snapshots left as they were, each with why (their definition no longer loads, a parent is gone)."""

    moved: Mapping[SnapshotId, SnapshotId]
    unchanged: int
    left: Mapping[SnapshotId, str]


def rekey_snapshots(conn: sa.Connection, tables: Tables, current: CurrentRenders | None = None) -> Rekeyed:
    """Recompute every stored snapshot's fingerprint from its stored definition and rendered query with this
    meshbot's hashing, parents first (the same Merkle tree a plan builds), and re-key the moved ones.

    As SQLMesh's migrations do: a snapshot keeps its version, so its physical table and its intervals (keyed
    by version) stay its own, and every environment, previous list and history entry that listed the old id
    lists the new one, so the next plan finds each unchanged model unchanged and backfills nothing. A snapshot
    whose stored definition is that of a model of the project being migrated (`current`: name -> (definition,
    rendered query) as a plan of its files stores them) takes that model's rendered query, so a renderer that
    prints the same query differently (a new sqlglot) is carried over too. Runs inside the caller's migration
    transaction: all or nothing."""
    rows = {SnapshotId(row["name"], row["identifier"]): dict(row)
            for row in conn.execute(sa.select(tables.snapshots)).mappings()}
    renders = current() if current is not None else {}
    for row in rows.values():
        local = renders.get(row["name"])
        if local is not None and local[0] == row["definition"]:
            row["rendered_query"] = local[1]
    fingerprints, left = _refingerprint(rows)
    moved = {old: SnapshotId(old.name, fp.identifier) for old, fp in fingerprints.items()
             if fp.identifier != old.identifier}
    if moved:
        _replace_rows(conn, tables, rows, fingerprints, moved)
        _relist_environments(conn, tables, moved)
    return Rekeyed(moved=moved, unchanged=len(fingerprints) - len(moved), left=left)


def _refingerprint(rows: Mapping[SnapshotId, dict[str, Any]]
                   ) -> tuple[dict[SnapshotId, Fingerprint], dict[SnapshotId, str]]:
    """New fingerprints of the snapshots that can be recomputed, and why each other one cannot."""
    done: dict[SnapshotId, Fingerprint] = {}
    left: dict[SnapshotId, str] = {}
    for root in sorted(rows):
        stack = [root]
        while stack:   # depth-first, parents before children, without recursion (deep DAGs)
            current = stack[-1]
            if current in done or current in left:
                stack.pop()
                continue
            parents = [SnapshotId(name, identifier) for name, identifier in rows[current]["parents"]]
            pending = [p for p in parents if p in rows and p not in done and p not in left]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            missing = [p for p in parents if p not in done]
            if missing:
                first = missing[0]
                left[current] = (f"its parent {first.name} ({first.identifier}) is not in the state" if first not in rows
                                 else f"its parent {first.name} ({first.identifier}) could not be re-keyed")
                continue
            try:
                model = model_from_dict(rows[current]["definition"])
                own_data = data_hash(model, rows[current]["rendered_query"])
                own_metadata = metadata_hash(model)
            except Exception as error:   # any definition this meshbot cannot read is left, as SQLMesh does
                left[current] = f"its stored definition does not load: {error}"
                continue
            done[current] = combine(own_data, own_metadata, [done[p] for p in parents])
    return done, left


def _replace_rows(conn: sa.Connection, tables: Tables, rows: Mapping[SnapshotId, dict[str, Any]],
                  fingerprints: Mapping[SnapshotId, Fingerprint], moved: Mapping[SnapshotId, SnapshotId]) -> None:
    """Each moved snapshot's row under its new id (the newest when two old ones meet on one new id; an id
    already stored and staying is kept); the old rows go."""
    staying = set(rows) - set(moved)
    new_rows: dict[SnapshotId, dict[str, Any]] = {}
    for old, new in sorted(moved.items()):
        row = rows[old]
        if new in staying or (new in new_rows and new_rows[new]["updated_ts"] >= row["updated_ts"]):
            continue
        new_rows[new] = {**row, "identifier": new.identifier, "fingerprint": asdict(fingerprints[old]),
                         "parents": [[p.name, p.identifier] for p in
                                     (moved.get(SnapshotId(n, i), SnapshotId(n, i)) for n, i in row["parents"])]}
    key = sa.tuple_(tables.snapshots.c.name, tables.snapshots.c.identifier)
    for part in chunks(sorted(moved)):
        conn.execute(sa.delete(tables.snapshots).where(key.in_([(i.name, i.identifier) for i in part])))
    if new_rows:
        conn.execute(sa.insert(tables.snapshots), list(new_rows.values()))


def _relist_environments(conn: sa.Connection, tables: Tables, moved: Mapping[SnapshotId, SnapshotId]) -> None:
    """Every list of snapshots an environment or its history keeps names the new ids."""
    def relisted(listed: Any) -> Any:
        if not listed:
            return listed
        return [{**entry, "identifier": moved[key].identifier} if (key := SnapshotId(entry["name"], entry["identifier"]))
                in moved else entry for entry in listed]

    environments, history = tables.environments, tables.environment_history
    for name, snapshots, previous in conn.execute(sa.select(environments.c.name, environments.c.snapshots,
                                                            environments.c.previous_snapshots)).all():
        if (relisted(snapshots), relisted(previous)) != (snapshots, previous):
            conn.execute(sa.update(environments).where(environments.c.name == name)
                         .values(snapshots=relisted(snapshots), previous_snapshots=relisted(previous)))
    for name, plan_id, snapshots in conn.execute(sa.select(history.c.name, history.c.plan_id,
                                                           history.c.snapshots)).all():
        if relisted(snapshots) != snapshots:
            conn.execute(sa.update(history).where(history.c.name == name, history.c.plan_id == plan_id)
                         .values(snapshots=relisted(snapshots)))
