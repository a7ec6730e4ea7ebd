"""Schema version 8: each recorded batch keeps what Spark reports of its cost (`executor_ms`, `bytes_read`)."""

from __future__ import annotations

import sqlalchemy as sa

VERSION = 8


def upgrade(conn: sa.Connection, *, schema: str | None) -> None:
    """Add the nullable columns: batches recorded before them, or on Spark Connect, have neither."""
    intervals = sa.Table("intervals", sa.MetaData(schema=schema))
    preparer = conn.dialect.identifier_preparer
    for column in ("executor_ms", "bytes_read"):
        conn.execute(sa.text(f"ALTER TABLE {preparer.format_table(intervals)} ADD COLUMN "
                             f"{preparer.quote(column)} {sa.BigInteger().compile(dialect=conn.dialect)}"))
