"""Environment repository: optimistic-locked promotion (with its history row), finalize, invalidate, expiry, deletion."""

from __future__ import annotations

import sqlalchemy as sa

from bot.errors import ConflictError, StateError
from bot.state._util import write_transaction
from bot.state.protocol import Environment, HistoryEntry
from bot.state.serialize import environment_to_row, history_to_row, row_to_environment, row_to_history
from bot.state.tables import Tables


def conflict(name: str) -> ConflictError:
    return ConflictError(f"another plan was applied to `{name}` while yours was in progress; re-plan")


class EnvironmentState:
    def __init__(self, engine: sa.Engine, tables: Tables) -> None:
        self.engine = engine
        self.table = tables.environments
        self.history_table = tables.environment_history

    def get(self, name: str) -> Environment | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(self.table).where(self.table.c.name == name)).mappings().first()
        return row_to_environment(row) if row else None

    def all(self) -> list[Environment]:
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(self.table).order_by(self.table.c.name)).mappings().all()
        return [row_to_environment(row) for row in rows]

    def names(self) -> list[str]:
        """Every environment's name, sorted: no snapshot list is read (each of 10,000 entries on a large project)."""
        with self.engine.connect() as conn:
            return list(conn.execute(sa.select(self.table.c.name).order_by(self.table.c.name)).scalars())

    def history(self, name: str) -> list[HistoryEntry]:
        h = self.history_table
        query = sa.select(h).where(h.c.name == name).order_by(h.c.promoted_ts.desc(), h.c.plan_id)
        with self.engine.connect() as conn:
            return [row_to_history(row) for row in conn.execute(query).mappings()]

    def promote(self, environment: Environment, *, expected_plan_id: str | None, now_ms: int,
                source: str = "") -> None:
        """Replace the row in one transaction, refusing when its plan_id is not the expected one; the
        same transaction records the plan in environment_history.

        SQLite takes the database write lock first (BEGIN IMMEDIATE); PostgreSQL locks the row
        (SELECT ... FOR UPDATE), and two inserts of a new environment collide on the primary key.
        """
        t = self.table
        row = environment_to_row(environment)
        try:
            with write_transaction(self.engine) as conn:
                current = conn.execute(
                    sa.select(t.c.plan_id).where(t.c.name == environment.name).with_for_update()
                ).first()
                stored = current.plan_id if current else None
                if stored != expected_plan_id:
                    raise conflict(environment.name)
                row.update(previous_plan_id=stored, finalized_ts=None)
                if current is None:
                    conn.execute(sa.insert(t), [row])
                else:
                    conn.execute(sa.update(t).where(t.c.name == environment.name).values(**row))
                h = self.history_table
                conn.execute(sa.delete(h).where(h.c.name == environment.name, h.c.plan_id == environment.plan_id))
                conn.execute(sa.insert(h), [history_to_row(environment, promoted_ts=now_ms, source=source)])
        except sa.exc.IntegrityError as error:
            raise conflict(environment.name) from error

    def restore(self, name: str, previous: Environment | None, *, expected_plan_id: str) -> None:
        """Undo a promotion in one transaction: put `previous` back exactly as it was read (plan ids,
        finalized time, expiry), or delete the row when there was none; refused (ConflictError) when
        the stored plan_id is no longer `expected_plan_id`."""
        t = self.table
        with write_transaction(self.engine) as conn:
            current = conn.execute(sa.select(t.c.plan_id).where(t.c.name == name).with_for_update()).first()
            if current is None or current.plan_id != expected_plan_id:
                raise conflict(name)
            h = self.history_table
            conn.execute(sa.delete(h).where(h.c.name == name, h.c.plan_id == expected_plan_id))
            if previous is None:
                conn.execute(sa.delete(t).where(t.c.name == name))
            else:
                conn.execute(sa.update(t).where(t.c.name == name).values(**environment_to_row(previous)))

    def finalize(self, name: str, plan_id: str, *, now_ms: int) -> None:
        t = self.table
        with write_transaction(self.engine) as conn:
            result = conn.execute(sa.update(t).where(t.c.name == name, t.c.plan_id == plan_id)
                                  .values(finalized_ts=now_ms))
            if result.rowcount != 1:
                raise conflict(name)
            h = self.history_table
            conn.execute(sa.update(h).where(h.c.name == name, h.c.plan_id == plan_id)
                         .values(finalized_ts=now_ms))

    def invalidate(self, name: str, *, now_ms: int) -> None:
        if name == "prod":
            raise StateError("cannot invalidate `prod`: the production environment never expires")
        t = self.table
        with write_transaction(self.engine) as conn:
            result = conn.execute(sa.update(t).where(t.c.name == name).values(expiration_ts=now_ms))
            if result.rowcount != 1:
                raise StateError(f"environment `{name}` does not exist")

    def expired(self, now_ms: int) -> list[Environment]:
        t = self.table
        query = (sa.select(t).where(t.c.expiration_ts.is_not(None), t.c.expiration_ts <= now_ms,
                                    t.c.name != "prod").order_by(t.c.name))
        with self.engine.connect() as conn:
            return [row_to_environment(row) for row in conn.execute(query).mappings()]

    def delete(self, name: str) -> None:
        with write_transaction(self.engine) as conn:
            conn.execute(sa.delete(self.table).where(self.table.c.name == name))
            conn.execute(sa.delete(self.history_table).where(self.history_table.c.name == name))
