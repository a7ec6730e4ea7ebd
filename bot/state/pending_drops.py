"""Pending drops: what the janitor will drop, recorded with the expired rows; each record goes once dropped."""

from __future__ import annotations

from typing import Iterable

import sqlalchemy as sa

from bot.timeline.times import now_ms
from bot.snapshot import SnapshotId
from bot.state._util import chunks, write_transaction
from bot.state.protocol import PendingDrop
from bot.state.intervals import IntervalState
from bot.state.snapshots import SnapshotState
from bot.state.tables import Tables


class PendingDropState:
    def __init__(self, engine: sa.Engine, tables: Tables, snapshots: SnapshotState,
                 intervals: IntervalState) -> None:
        self.engine = engine
        self.table = tables.pending_drops
        self.snapshots_table = tables.snapshots
        self._snapshots = snapshots
        self._intervals = intervals

    def expire(self, ids: Iterable[SnapshotId], drops: Iterable[PendingDrop]) -> list[PendingDrop]:
        """One transaction: delete the snapshots, the intervals of versions no remaining snapshot
        shares, and record those of `drops` whose version no remaining snapshot shares; returns them."""
        doomed = set(ids)
        s = self.snapshots_table
        with write_transaction(self.engine) as conn:
            refs = conn.execute(sa.select(s.c.name, s.c.identifier, s.c.version)).all()
            gone = {(name, version) for name, identifier, version in refs
                    if SnapshotId(name, identifier) in doomed}
            kept = {(name, version) for name, identifier, version in refs
                    if SnapshotId(name, identifier) not in doomed}
            self._snapshots.delete(conn, doomed)
            self._intervals.delete_versions(conn, gone - kept)
            pending = list({d.object: d for d in drops if (d.model, d.version) not in kept}.values())
            existing = set(conn.execute(sa.select(self.table.c.object)).scalars())
            rows = [dict(object=d.object, kind=d.kind, model=d.model, version=d.version, created_ts=now_ms())
                    for d in pending if d.object not in existing]
            if rows:
                conn.execute(sa.insert(self.table), rows)
        return pending

    def all(self) -> list[PendingDrop]:
        t = self.table
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(t.c.object, t.c.kind, t.c.model, t.c.version)
                                .order_by(t.c.created_ts, t.c.object)).all()
        return [PendingDrop(object=o, kind=k, model=m, version=v) for o, k, m, v in rows]

    def delete(self, objects: Iterable[str]) -> None:
        t = self.table
        with write_transaction(self.engine) as conn:
            for part in chunks(sorted(set(objects))):
                conn.execute(sa.delete(t).where(t.c.object.in_(list(part))))
