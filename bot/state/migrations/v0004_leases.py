"""Schema version 4: a leases table (one writer per key at a time) and the state's own random id."""

from __future__ import annotations

import uuid

import sqlalchemy as sa

VERSION = 4


def upgrade(conn: sa.Connection, *, schema: str | None) -> None:
    metadata = sa.MetaData(schema=schema)
    sa.Table(
        "leases", metadata,
        sa.Column("key", sa.String(640), primary_key=True),
        sa.Column("owner", sa.String(256)),
        sa.Column("purpose", sa.String(512)),
        sa.Column("acquired_ts", sa.BigInteger, nullable=False),
        sa.Column("expires_ts", sa.BigInteger, nullable=False),
        sa.Column("last_owner", sa.String(256)),
    ).create(conn)
    versions = sa.Table("versions", metadata)
    preparer = conn.dialect.identifier_preparer
    conn.execute(sa.text(f"ALTER TABLE {preparer.format_table(versions)} "
                         f"ADD COLUMN {preparer.quote('state_id')} VARCHAR(32)"))
    # an older state gets its id here; a new one (no versions row yet) when its version is written
    conn.execute(sa.update(sa.Table("versions", sa.MetaData(schema=schema),
                                    sa.Column("state_id", sa.String(32))))
                 .values(state_id=uuid.uuid4().hex))
