"""Snapshot repository: batch insert, batch reads by id or version, TTL expiry, deletion."""

from __future__ import annotations

from typing import Iterable

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
        """Snapshots by id, read in IN-list chunks; unknown ids are absent from the result."""
        wanted = sorted(set(ids))
        key = sa.tuple_(self.table.c.name, self.table.c.identifier)
        result: dict[SnapshotId, Snapshot] = {}
        with self.engine.connect() as conn:
            for part in chunks(wanted):
                query = sa.select(self.table).where(key.in_([(i.name, i.identifier) for i in part]))
                for row in conn.execute(query).mappings():
                    result[SnapshotId(row["name"], row["identifier"])] = row_to_snapshot(row)
        return result

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
