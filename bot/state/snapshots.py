"""Snapshot repository: batch insert, batch reads by id or version, TTL expiry, deletion."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any, Iterable

import sqlalchemy as sa

from bot.errors import StateError
from bot.project.timeutil import TimeParseError, expires_ms
from bot.snapshot import Snapshot, SnapshotId
from bot.state._util import chunks, write_transaction
from bot.state.serialize import row_to_snapshot, snapshot_to_row
from bot.state.tables import Tables


class SnapshotState:
    def __init__(self, engine: sa.Engine, tables: Tables) -> None:
        self.engine = engine
        self.table = tables.snapshots

    def push(self, snapshots: Iterable[Snapshot]) -> None:
        """Insert snapshots; a (name, identifier) already stored is left as it is."""
        rows = list({(r["name"], r["identifier"]): r for r in map(snapshot_to_row, snapshots)}.values())
        if not rows:
            return
        # The dialect's module only: importing PostgreSQL's costs a SQLite user's every command ~40 ms.
        if self.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        statement = insert(self.table).on_conflict_do_nothing(index_elements=["name", "identifier"])
        with write_transaction(self.engine) as conn:
            conn.execute(statement, rows)

    def get(self, ids: Iterable[SnapshotId]) -> dict[SnapshotId, Snapshot]:
        """Snapshots by id, read in IN-list chunks; unknown ids are absent from the result.

        Each `definition` (the largest column, the whole model as JSON) is decoded when first read
        (_StoredSnapshot): a plan reads every snapshot of its environment but the definitions of
        only the changed ones. Rows are read as tuples, not mappings. At 10,000 models this took
        the read from ~1.4 s to ~0.6 s of CPU.
        """
        wanted = sorted(set(ids))
        t = self.table
        key = sa.tuple_(t.c.name, t.c.identifier)
        columns = [sa.type_coerce(t.c.definition, sa.Text).label("definition") if c.name == "definition" else c
                   for c in t.c]
        names = [c.name for c in t.c]
        result: dict[SnapshotId, Snapshot] = {}
        with self.engine.connect() as conn:
            for part in chunks(wanted):
                query = sa.select(*columns).where(key.in_([(i.name, i.identifier) for i in part]))
                for values in conn.execute(query):
                    snapshot = _stored_snapshot(dict(zip(names, values)))
                    result[SnapshotId(snapshot.name, snapshot.identifier)] = snapshot
        return result

    def stored_ids(self, ids: Iterable[SnapshotId]) -> set[SnapshotId]:
        """Which of `ids` are stored: their keys only, no definition read."""
        t = self.table
        key = sa.tuple_(t.c.name, t.c.identifier)
        found: set[SnapshotId] = set()
        with self.engine.connect() as conn:
            for part in chunks(sorted(set(ids))):
                query = sa.select(t.c.name, t.c.identifier).where(key.in_([(i.name, i.identifier) for i in part]))
                found.update(SnapshotId(name, identifier) for name, identifier in conn.execute(query))
        return found

    def by_version(self, name_versions: Iterable[tuple[str, str]]) -> list[Snapshot]:
        """Every snapshot sharing one of the (name, version) pairs, sorted by name and identifier."""
        wanted = sorted(set(name_versions))
        key = sa.tuple_(self.table.c.name, self.table.c.version)
        found: list[Snapshot] = []
        with self.engine.connect() as conn:
            for part in chunks(wanted):
                query = sa.select(self.table).where(key.in_(list(part)))
                found.extend(row_to_snapshot(row) for row in conn.execute(query).mappings())
        return sorted(found, key=lambda s: (s.name, s.identifier))

    def refs(self) -> list[tuple[SnapshotId, str]]:
        """(id, version) of every stored snapshot, without loading definitions."""
        t = self.table
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(t.c.name, t.c.identifier, t.c.version)).all()
        return [(SnapshotId(name, identifier), version) for name, identifier, version in rows]

    def expired_ids(self, now_ms: int, *, ignore_ttl: bool,
                    keep: set[SnapshotId]) -> list[SnapshotId]:
        """Ids older than their TTL (or all with `ignore_ttl`) that are not in `keep`."""
        t = self.table
        query = sa.select(t.c.name, t.c.identifier, t.c.ttl, t.c.created_ts, t.c.updated_ts)
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        expired = []
        for name, identifier, ttl, created_ts, updated_ts in rows:
            snapshot_id = SnapshotId(name, identifier)
            if snapshot_id in keep:
                continue
            if ignore_ttl or _expiry(ttl, since=max(created_ts, updated_ts)) <= now_ms:
                expired.append(snapshot_id)
        return sorted(expired)

    def delete(self, conn: sa.Connection, ids: Iterable[SnapshotId]) -> None:
        key = sa.tuple_(self.table.c.name, self.table.c.identifier)
        for part in chunks(sorted(set(ids))):
            conn.execute(sa.delete(self.table).where(key.in_([(i.name, i.identifier) for i in part])))


def _expiry(ttl: str, *, since: int) -> int:
    """When a snapshot last touched at `since` expires; a bare span stored before TTLs were checked
    ('1 week', which reads as a week ago) keeps the length it was meant to have."""
    try:
        moment = expires_ms(ttl, since=since)
    except TimeParseError:
        raise StateError(f"cannot read the snapshot TTL {ttl!r}; expected something like 'in 1 week'") from None
    return since + abs(moment - since)


class _LazyDefinition:
    """Non-data descriptor: decodes a stored snapshot's definition on first access and keeps it."""

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        raw = obj.__dict__.pop("_definition_raw")
        value = json.loads(raw) if isinstance(raw, (str, bytes)) else raw   # a driver may decode JSON itself
        obj.__dict__["definition"] = value   # later reads find it in __dict__, without this descriptor
        return value


class _StoredSnapshot(Snapshot):
    """A Snapshot read from state, its definition decoded when first read; equal to the Snapshot of
    the same fields (row_to_snapshot's), whichever side of `==` it is on."""

    definition = _LazyDefinition()   # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Snapshot):
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name) for f in _FIELDS)

    __hash__ = Snapshot.__hash__


_FIELDS = fields(Snapshot)


def _stored_snapshot(row: dict[str, Any]) -> Snapshot:
    """row_to_snapshot of a row whose definition is still JSON text, decoded when first read."""
    plain = row_to_snapshot({**row, "definition": None})
    snapshot = object.__new__(_StoredSnapshot)
    snapshot.__dict__.update(plain.__dict__)
    del snapshot.__dict__["definition"]
    snapshot.__dict__["_definition_raw"] = row["definition"]
    return snapshot
