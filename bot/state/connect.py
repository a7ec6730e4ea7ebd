"""Open the state database (SQLite file or PostgreSQL), create it on first use, check its version."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from bot.errors import StateError
from bot.project.config import StateConnection
from bot.state import versions
from bot.state.store import SqlStateSync
from bot.state.tables import build_tables

DEFAULT_SQLITE_PATH = Path(".meshbot") / "state.db"
SQLITE_BUSY_TIMEOUT_MS = 30_000
POSTGRES_CONNECT_TIMEOUT_S = 10


def connect_state(connection: StateConnection, *, project_root: Path,
                  create: bool = True) -> SqlStateSync:
    """A StateSync on the configured database; raises StateError if it is unreachable or too new.

    A new database gets its tables when `create` is true. An older schema is opened, but only
    `migrate()` (and `schema_version()`) work on it until it is migrated.
    """
    if connection.type == "sqlite":
        engine, location = _sqlite_engine(connection, project_root=project_root, create=create)
    elif connection.type in ("postgres", "postgresql"):
        engine, location = _postgres_engine(connection)
    else:
        raise StateError(f"unknown state_connection type `{connection.type}`; use sqlite or postgres")
    tables = build_tables(connection.schema if engine.dialect.name == "postgresql" else None)
    stage = "reach"
    try:
        with engine.connect():
            stage = "prepare"
            stored = _prepare(engine, tables, create=create, location=location)
    except sa.exc.DBAPIError as error:
        engine.dispose()
        raise StateError(f"cannot {stage} the state database {location}: "
                         f"{_reason(error, connection.password)}") from None
    except BaseException:
        engine.dispose()
        raise
    return SqlStateSync(engine, tables, stored_version=stored, location=location)


def _prepare(engine: sa.Engine, tables, *, create: bool, location: str) -> int:
    schema = tables.metadata.schema
    with engine.begin() as conn:
        if schema and create:
            conn.execute(sa.text(f"CREATE SCHEMA IF NOT EXISTS "
                                 f"{conn.dialect.identifier_preparer.quote_schema(schema)}"))
        stored = versions.read_schema_version(conn, tables)
    versions.check_not_newer(stored, location)
    if stored == 0:
        if not create:
            raise StateError(f"no meshbot state found in {location}")
        stored = versions.migrate(engine, tables, location=location)
    return stored


def _sqlite_engine(connection: StateConnection, *, project_root: Path,
                   create: bool) -> tuple[sa.Engine, str]:
    path = Path(connection.database) if connection.database else DEFAULT_SQLITE_PATH
    if not path.is_absolute():
        path = project_root / path
    if not path.exists():
        if not create:
            raise StateError(f"no meshbot state found at {path}")
        path.parent.mkdir(parents=True, exist_ok=True)
    engine = sa.create_engine(sa.engine.URL.create("sqlite", database=str(path)))
    sa.event.listen(engine, "connect", _sqlite_on_connect)
    sa.event.listen(engine, "begin", _sqlite_on_begin)
    return engine, f"sqlite:///{path}"


def _sqlite_on_connect(dbapi_connection, _record) -> None:
    # Let SQLAlchemy emit BEGIN itself (pysqlite's implicit BEGIN cannot be IMMEDIATE).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.close()


def _sqlite_on_begin(conn: sa.Connection) -> None:
    mode = conn.get_execution_options().get("sqlite_begin", "")
    conn.exec_driver_sql(f"BEGIN {mode}".strip())


def _postgres_engine(connection: StateConnection) -> tuple[sa.Engine, str]:
    database = connection.database or "postgres"
    url = sa.engine.URL.create("postgresql+psycopg2", username=connection.user,
                               password=connection.password, host=connection.host,
                               port=connection.port, database=database)
    engine = sa.create_engine(url, pool_pre_ping=True,
                              connect_args={"connect_timeout": POSTGRES_CONNECT_TIMEOUT_S,
                                            "application_name": "meshbot"})
    user = f"{connection.user}@" if connection.user else ""
    return engine, f"postgresql://{user}{connection.host}:{connection.port}/{database}"


def _reason(error: sa.exc.DBAPIError, password: str | None) -> str:
    text = " ".join(str(error.orig).split())
    return text.replace(password, "***") if password else text
