"""Schema version 2: environments remember their suffix target; snapshots are indexed by version."""

from __future__ import annotations

import sqlalchemy as sa

VERSION = 2


def upgrade(conn: sa.Connection, *, schema: str | None) -> None:
    metadata = sa.MetaData(schema=schema)
    environments = sa.Table("environments", metadata)
    snapshots = sa.Table("snapshots", metadata,
                         sa.Column("name", sa.String(512)), sa.Column("version", sa.String(64)))
    preparer = conn.dialect.identifier_preparer
    conn.execute(sa.text(
        f"ALTER TABLE {preparer.format_table(environments)} "
        f"ADD COLUMN {preparer.quote('suffix_target')} VARCHAR(16) NOT NULL DEFAULT 'schema'"))
    sa.Index("ix_snapshots_name_version", snapshots.c.name, snapshots.c.version).create(conn)
