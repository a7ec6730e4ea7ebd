"""Schema version 3: an environment row keeps the snapshots its previous finalized row served."""

from __future__ import annotations

import sqlalchemy as sa

VERSION = 3


def upgrade(conn: sa.Connection, *, schema: str | None) -> None:
    environments = sa.Table("environments", sa.MetaData(schema=schema))
    preparer = conn.dialect.identifier_preparer
    json_type = sa.JSON().compile(dialect=conn.dialect)
    conn.execute(sa.text(
        f"ALTER TABLE {preparer.format_table(environments)} "
        f"ADD COLUMN {preparer.quote('previous_snapshots')} {json_type}"))
