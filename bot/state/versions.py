"""The versions table: stored schema, meshbot and fingerprint versions, and the runner that migrates them."""

from __future__ import annotations

import uuid
import zlib
from dataclasses import dataclass, field

import sqlalchemy as sa

from bot import __version__
from bot.errors import StateError
from bot.fingerprint import FINGERPRINT_SCHEME
from bot.state._util import write_transaction
from bot.state.migrations import all_migrations, latest_version
from bot.state.rekey import CurrentRenders, Rekeyed, rekey_snapshots
from bot.state.tables import Tables

_LOCK_KEY = zlib.crc32(b"meshbot state migration")


def read_schema_version(conn: sa.Connection, tables: Tables) -> int:
    """0 for an empty database, else the stored schema version."""
    if not sa.inspect(conn).has_table("versions", schema=tables.metadata.schema):
        return 0
    value = conn.execute(sa.select(sa.func.max(tables.versions.c.schema_version))).scalar()
    return int(value or 0)


@dataclass(frozen=True)
class Migrated:
    """What `migrate` left: the schema version, the fingerprint scheme, and the re-key it ran (None: none)."""

    schema_version: int
    fingerprint_scheme: int
    schema_before: int = 0
    scheme_before: int = 0
    rekeyed: Rekeyed | None = field(default=None)


def read_fingerprint_scheme(conn: sa.Connection, tables: Tables, schema_version: int) -> int:
    """The fingerprint scheme the stored snapshots are keyed with (1 for states made before v0009)."""
    if schema_version < 9:
        return 1
    value = conn.execute(sa.select(sa.func.max(tables.versions.c.fingerprint_scheme))).scalar()
    return int(value or 1)


def check_not_newer(stored: int, location: str, *, scheme: int = 1) -> None:
    code = latest_version()
    if stored > code:
        raise StateError(f"state schema version {stored} is newer than this meshbot ({code}); "
                         f"upgrade meshbot (state: {location})")
    if scheme > FINGERPRINT_SCHEME:
        raise StateError(f"the state's snapshots are keyed with fingerprint scheme {scheme}, newer than this "
                         f"meshbot's ({FINGERPRINT_SCHEME}); upgrade meshbot (state: {location})")


def migrate(engine: sa.Engine, tables: Tables, *, location: str, current: CurrentRenders | None = None) -> Migrated:
    """Apply every pending schema migration, then re-key the snapshots if this meshbot fingerprints
    differently (bot.state.rekey, with `current`), all in one locked transaction."""
    with write_transaction(engine) as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})
        stored = read_schema_version(conn, tables)
        check_not_newer(stored, location)
        for migration in all_migrations():
            if migration.version > stored:
                migration.upgrade(conn, schema=tables.metadata.schema)
        scheme = read_fingerprint_scheme(conn, tables, latest_version()) if stored else FINGERPRINT_SCHEME
        check_not_newer(stored, location, scheme=scheme)
        rekeyed = rekey_snapshots(conn, tables, current) if scheme < FINGERPRINT_SCHEME else None
        if stored < latest_version() or rekeyed is not None:
            _write_version(conn, tables, latest_version())
        return Migrated(schema_version=latest_version(), fingerprint_scheme=FINGERPRINT_SCHEME,
                        schema_before=stored, scheme_before=scheme, rekeyed=rekeyed)


def _write_version(conn: sa.Connection, tables: Tables, version: int) -> None:
    """Replace the versions row, keeping the state's id (a new state gets one here)."""
    state_id = conn.execute(sa.select(sa.func.max(tables.versions.c.state_id))).scalar()
    conn.execute(sa.delete(tables.versions))
    conn.execute(sa.insert(tables.versions).values(schema_version=version, meshbot_version=__version__,
                                                   state_id=state_id or uuid.uuid4().hex,
                                                   fingerprint_scheme=FINGERPRINT_SCHEME))


def read_state_id(conn: sa.Connection, tables: Tables) -> str:
    """The random id this state was given when created (or migrated to version 4)."""
    value = conn.execute(sa.select(sa.func.max(tables.versions.c.state_id))).scalar()
    if not value:
        raise StateError("the state has no id; run `meshbot migrate`")
    return str(value)

