"""Schema version 5: tables and views the janitor is about to drop, so a killed janitor is finished by the next."""

from __future__ import annotations

import sqlalchemy as sa

VERSION = 5


def upgrade(conn: sa.Connection, *, schema: str | None) -> None:
    sa.Table(
        "pending_drops", sa.MetaData(schema=schema),
        sa.Column("object", sa.String(512), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("model", sa.String(512), nullable=False),
        sa.Column("version", sa.String(64), nullable=False),
        sa.Column("created_ts", sa.BigInteger, nullable=False),
    ).create(conn)
