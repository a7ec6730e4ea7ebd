"""Schema version 7: each recorded batch keeps its wall time (`elapsed_ms`), for backfill estimates."""

from __future__ import annotations

import sqlalchemy as sa

VERSION = 7


def upgrade(conn: sa.Connection, *, schema: str | None) -> None:
    """Add the nullable column: batches recorded before it have no time and are left out of estimates."""
    intervals = sa.Table("intervals", sa.MetaData(schema=schema))
    preparer = conn.dialect.identifier_preparer
    conn.execute(sa.text(f"ALTER TABLE {preparer.format_table(intervals)} "
                         f"ADD COLUMN {preparer.quote('elapsed_ms')} {sa.BigInteger().compile(dialect=conn.dialect)}"))
