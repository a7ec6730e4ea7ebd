"""Schema version 9: the versions row records which fingerprint scheme the stored snapshots were keyed with."""

from __future__ import annotations

import sqlalchemy as sa

VERSION = 9


def upgrade(conn: sa.Connection, *, schema: str | None) -> None:
    """Add `fingerprint_scheme`; states made before it hold scheme-1 fingerprints (NULL reads as 1)."""
    versions = sa.Table("versions", sa.MetaData(schema=schema))
    preparer = conn.dialect.identifier_preparer
    conn.execute(sa.text(f"ALTER TABLE {preparer.format_table(versions)} "
                         f"ADD COLUMN {preparer.quote('fingerprint_scheme')} INTEGER"))
