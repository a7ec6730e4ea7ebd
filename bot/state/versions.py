"""The versions table: stored schema/meshbot versions, and the runner that applies migrations."""

from __future__ import annotations

import uuid
import zlib

import sqlalchemy as sa

from bot import __version__
from bot.errors import StateError
from bot.state._util import write_transaction
from bot.state.migrations import all_migrations, latest_version
from bot.state.tables import Tables

_LOCK_KEY = zlib.crc32(b"meshbot state migration")


def read_schema_version(conn: sa.Connection, tables: Tables) -> int:
    """0 for an empty database, else the stored schema version."""
    if not sa.inspect(conn).has_table("versions", schema=tables.metadata.schema):
        return 0
    value = conn.execute(sa.select(sa.func.max(tables.versions.c.schema_version))).scalar()
    return int(value or 0)


def check_not_newer(stored: int, location: str) -> None:
    code = latest_version()
    if stored > code:
        raise StateError(f"state schema version {stored} is newer than this meshbot ({code}); "
                         f"upgrade meshbot (state: {location})")


def migrate(engine: sa.Engine, tables: Tables, *, location: str) -> int:
    """Apply every pending migration in one locked transaction; returns the resulting version."""
    with write_transaction(engine) as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})
        stored = read_schema_version(conn, tables)
        check_not_newer(stored, location)
        for migration in all_migrations():
            if migration.version > stored:
                migration.upgrade(conn, schema=tables.metadata.schema)
        if stored < latest_version():
            _write_version(conn, tables, latest_version())
        return latest_version()


def _write_version(conn: sa.Connection, tables: Tables, version: int) -> None:
    """Replace the versions row, keeping the state's id (a new state gets one here)."""
    state_id = conn.execute(sa.select(sa.func.max(tables.versions.c.state_id))).scalar()
    conn.execute(sa.delete(tables.versions))
    conn.execute(sa.insert(tables.versions).values(schema_version=version, meshbot_version=__version__,
                                                   state_id=state_id or uuid.uuid4().hex))


def read_state_id(conn: sa.Connection, tables: Tables) -> str:
    """The random id this state was given when created (or migrated to version 4)."""
    value = conn.execute(sa.select(sa.func.max(tables.versions.c.state_id))).scalar()
    if not value:
        raise StateError("the state has no id; run `meshbot migrate`")
    return str(value)

