"""Schema version 10: environment_history records where each plan came from (`source`), for drift detection."""

from __future__ import annotations

import sqlalchemy as sa

VERSION = 10


def upgrade(conn: sa.Connection, *, schema: str | None) -> None:
    """Add `source`; plans promoted before it have none (NULL: unknown, never taken for a deploy)."""
    history = sa.Table("environment_history", sa.MetaData(schema=schema))
    preparer = conn.dialect.identifier_preparer
    conn.execute(sa.text(f"ALTER TABLE {preparer.format_table(history)} "
                         f"ADD COLUMN {preparer.quote('source')} VARCHAR(512)"))
