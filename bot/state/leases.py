"""Lease repository: one owner per key at a time, with an expiry, taken over only when free or expired.

Times come from the database's clock on PostgreSQL (one clock for every machine sharing the state, so a
machine whose clock runs ahead cannot take a live lease for expired); SQLite state is one machine's."""

from __future__ import annotations

from typing import Iterable

import sqlalchemy as sa

from bot.timeline.times import now_ms
from bot.state._util import chunks, write_transaction
from bot.state.protocol import Lease, LeaseHolder
from bot.state.tables import Tables

PURPOSE_LENGTH = 500


class LeaseState:
    def __init__(self, engine: sa.Engine, tables: Tables) -> None:
        self.engine = engine
        self.table = tables.leases

    def acquire(self, key: str, *, owner: str, purpose: str, ttl_ms: int,
                replacing: str | None = None) -> Lease:
        """One transaction: make sure the row exists, lock it, take it when free, expired, ours, or
        still held by `replacing` (a holder the caller knows is dead).

        SQLite serializes write transactions (BEGIN IMMEDIATE); on PostgreSQL a concurrent insert
        of the same key waits for the first and does nothing, and SELECT ... FOR UPDATE makes the
        second acquirer read the row only after the first one's decision is committed.
        """
        t = self.table
        purpose = purpose[:PURPOSE_LENGTH]
        with write_transaction(self.engine) as conn:
            now = _now(conn)
            insert = _insert(conn.dialect.name)
            conn.execute(insert(t).values(key=key, owner=None, purpose=None, acquired_ts=now,
                                          expires_ts=now, last_owner=None).on_conflict_do_nothing())
            row = conn.execute(sa.select(t).where(t.c.key == key).with_for_update()).mappings().one()
            held = row["owner"] is not None and row["expires_ts"] > now
            if held and row["owner"] not in (owner, replacing):
                return Lease(key, granted=False, holder=_holder(row, row["owner"]))
            last = row["owner"] or row["last_owner"]
            previous = _holder(row, last) if last else None
            values = dict(owner=owner, purpose=purpose, acquired_ts=now, expires_ts=now + ttl_ms,
                          last_owner=owner)
            conn.execute(sa.update(t).where(t.c.key == key).values(**values))
        return Lease(key, granted=True, holder=LeaseHolder(owner, purpose, now, now + ttl_ms),
                     previous=previous)

    def renew(self, keys: Iterable[str], *, owner: str, ttl_ms: int) -> set[str]:
        t = self.table
        wanted = sorted(set(keys))
        kept: set[str] = set()
        with write_transaction(self.engine) as conn:
            now = _now(conn)
            for part in chunks(wanted):
                mine = (t.c.key.in_(list(part)), t.c.owner == owner)
                conn.execute(sa.update(t).where(*mine).values(expires_ts=now + ttl_ms))
                kept.update(conn.execute(sa.select(t.c.key).where(*mine)).scalars())
        return kept

    def release(self, key: str, *, owner: str) -> bool:
        t = self.table
        with write_transaction(self.engine) as conn:
            result = conn.execute(sa.update(t).where(t.c.key == key, t.c.owner == owner)
                                  .values(owner=None, expires_ts=_now(conn)))
        return result.rowcount == 1

    def live(self) -> dict[str, LeaseHolder]:
        """Every lease held now by someone (expired ones are free to take)."""
        t = self.table
        with self.engine.connect() as conn:
            query = sa.select(t).where(t.c.owner.is_not(None), t.c.expires_ts > _now(conn)).order_by(t.c.key)
            return {row["key"]: _holder(row, row["owner"]) for row in conn.execute(query).mappings()}


def _now(conn: sa.Connection) -> int:
    """Epoch milliseconds by the database's clock (PostgreSQL), else this machine's."""
    if conn.dialect.name == "postgresql":
        return int(conn.execute(sa.text("SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint")).scalar_one())
    return now_ms()


def _holder(row, owner: str) -> LeaseHolder:
    return LeaseHolder(owner=owner, purpose=row["purpose"] or "", acquired_ts=row["acquired_ts"],
                       expires_ts=row["expires_ts"])


def _insert(dialect: str):  # noqa: ANN202 - the dialect's insert construct
    """The dialect's INSERT (ON CONFLICT DO NOTHING); only that dialect's module is imported: PostgreSQL's
    costs a SQLite user's every command ~40 ms."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert
