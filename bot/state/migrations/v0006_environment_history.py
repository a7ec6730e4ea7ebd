"""Schema version 6: environment_history, the plans each environment served (for rollback and --history)."""

from __future__ import annotations

import sqlalchemy as sa

VERSION = 6


def upgrade(conn: sa.Connection, *, schema: str | None) -> None:
    """Create the table and record each environment's current plan, so a migrated state has a history."""
    metadata = sa.MetaData(schema=schema)
    history = sa.Table(
        "environment_history", metadata,
        sa.Column("name", sa.String(512), primary_key=True),
        sa.Column("plan_id", sa.String(128), primary_key=True),
        sa.Column("snapshots", sa.JSON, nullable=False),
        sa.Column("promoted_ts", sa.BigInteger, nullable=False),
        sa.Column("finalized_ts", sa.BigInteger),
    )
    history.create(conn)
    environments = sa.Table("environments", metadata, autoload_with=conn)
    rows = conn.execute(sa.select(environments.c.name, environments.c.plan_id, environments.c.snapshots,
                                  environments.c.finalized_ts)).mappings().all()
    if rows:
        conn.execute(sa.insert(history), [
            dict(name=r["name"], plan_id=r["plan_id"], snapshots=r["snapshots"],
                 promoted_ts=r["finalized_ts"] or 0, finalized_ts=r["finalized_ts"]) for r in rows])
