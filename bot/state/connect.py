"""Open the state database (SQLite file or PostgreSQL), create it on first use, check its version."""

from __future__ import annotations

import re
from pathlib import Path

import sqlalchemy as sa

from bot.errors import StateError
from bot.project.config import StateConnection
from bot.redact import register
from bot.state import versions
from bot.state.store import SqlStateSync
from bot.state.tables import build_tables

DEFAULT_SQLITE_PATH = Path(".meshbot") / "state.db"
SQLITE_BUSY_TIMEOUT_MS = 30_000
POSTGRES_CONNECT_TIMEOUT_S = 10
# How long a PostgreSQL statement waits for a lock, as SQLite waits SQLITE_BUSY_TIMEOUT_MS; applied
# only where the server, role or PGOPTIONS set none (lock_timeout 0 means wait forever).
POSTGRES_LOCK_TIMEOUT = "30s"


def connect_state(connection: StateConnection, *, project_root: Path,
                  create: bool = True) -> SqlStateSync:
    """A StateSync on the configured database; raises StateError if it is unreachable or too new.

    A new database gets its tables when `create` is true. An older schema, or snapshots keyed with an
    older fingerprint scheme, are opened, but only `migrate()` (and `schema_version()`) work on them
    until migrated. A PostgreSQL error names
    the connection's config key, never its host, user, database or password.
    """
    register(connection.password)
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
            stored, scheme = _prepare(engine, tables, create=create, location=location)
    except sa.exc.DBAPIError as error:
        engine.dispose()
        reason = _reason(error, connection)
        if stage == "reach" and engine.dialect.name == "postgresql":
            reason = _connect_reason(reason)
        raise StateError(f"cannot {stage} the state database {location}: {reason}") from None
    except BaseException:
        engine.dispose()
        raise
    translate_errors(engine, location=location, connection=connection)
    return SqlStateSync(engine, tables, stored_version=stored, stored_scheme=scheme, location=location)


# SQLSTATEs (PostgreSQL) and SQLite messages of a lock that was not granted in time.
_LOCK_STATES = frozenset({"55P03", "40P01"})       # lock_not_available, deadlock_detected
_LOCK_TEXT = ("lock timeout", "database is locked", "database table is locked")


def translate_errors(engine: sa.Engine, *, location: str, connection: StateConnection) -> None:
    """Every database error after connecting comes out as one StateError with a retry hint.

    The one boundary for the whole store: SQLAlchemy calls this for any error of the engine's
    connections (a dropped connection, a lock held too long, a reconnect refused). IntegrityError
    stays as it is: the environment repository reads a duplicate key as a concurrent promotion.
    The failed transaction is rolled back as usual, so nothing is half-written.
    """
    def handle_error(context: sa.engine.ExceptionContext) -> BaseException | None:
        error = context.sqlalchemy_exception
        if not isinstance(error, sa.exc.DBAPIError) or isinstance(error, sa.exc.IntegrityError):
            return None
        return StateError(state_error_text(error, location=location, connection=connection,
                                           disconnect=context.is_disconnect))

    sa.event.listen(engine, "handle_error", handle_error)


def state_error_text(error: sa.exc.DBAPIError, *, location: str, connection: StateConnection,
                     disconnect: bool) -> str:
    """One paragraph: what failed, the database's own first line (connection details masked), what to do."""
    reason = _reason(error, connection, first_line=True)
    code = getattr(error.orig, "pgcode", None)
    if code in _LOCK_STATES or any(text in reason.lower() for text in _LOCK_TEXT):
        hint = ("another process held a lock on the state too long; retry when it has finished "
                "(nothing of this step was written)")
    elif disconnect or (code or "").startswith(("08", "57P")):
        hint = ("the connection to the state database was lost; check that it is up, then retry "
                "the command (finished steps are recorded and are not redone)")
    else:
        hint = "retry the command; if it fails again, check the state database"
    return f"state database {location} failed: {reason}; {hint}"


def _prepare(engine: sa.Engine, tables, *, create: bool, location: str) -> tuple[int, int]:
    schema = tables.metadata.schema
    with engine.begin() as conn:
        if schema and create:
            conn.execute(sa.text(f"CREATE SCHEMA IF NOT EXISTS "
                                 f"{conn.dialect.identifier_preparer.quote_schema(schema)}"))
        stored = versions.read_schema_version(conn, tables)
        scheme = versions.read_fingerprint_scheme(conn, tables, stored)
    versions.check_not_newer(stored, location, scheme=scheme)
    if stored == 0:
        if not create:
            raise StateError(f"no meshbot state found in {location}")
        migrated = versions.migrate(engine, tables, location=location)
        return migrated.schema_version, migrated.fingerprint_scheme
    return stored, scheme


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
    sa.event.listen(engine, "connect", _postgres_on_connect)
    return engine, f"`{connection.config_key}`"


def _postgres_on_connect(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("SELECT set_config('lock_timeout', %s, false) WHERE current_setting('lock_timeout') = '0'",
                   (POSTGRES_LOCK_TIMEOUT,))
    cursor.close()
    dbapi_connection.commit()   # the SELECT opened a transaction (psycopg2 is not in autocommit)


def _reason(error: sa.exc.DBAPIError, connection: StateConnection, *, first_line: bool = False) -> str:
    """The driver's message on one line, without the connection's host, user, database or password."""
    text = str(error.orig).strip()
    text = " ".join((text.splitlines()[0] if first_line and text else text).split()) or type(error.orig).__name__
    if connection.password:
        text = re.sub(re.escape(connection.password), "***", text, flags=re.IGNORECASE)
    if connection.type == "sqlite":
        return text
    text = _SERVER_PREFIX.sub("", text)
    # libpq quotes the names it reports (`role "x" does not exist`); a host can also stand alone.
    for key in ("host", "user", "database"):
        value = getattr(connection, key) or (key == "database" and "postgres")
        if value:
            text = text.replace(f'"{value}"', f'"<{key}>"')
    if connection.host:
        text = re.sub(rf"(?<![\w.-]){re.escape(connection.host)}(?![\w-])", "<host>", text)
    return text


# libpq starts a connection failure with the server it tried: `connection to server at "h" (ip), port 1 failed: `
_SERVER_PREFIX = re.compile(r'^connection to server (at|on socket) "[^"]*"( \([^)]*\))?(, port \d+)? failed: '
                            r'(FATAL: +)?')
# What a failed PostgreSQL connection means, told by the state_connection key to check.
_CONNECT_REASONS = (
    ("password authentication failed", "password authentication failed (check `user` and `password`)"),
    ("no password supplied", "the server asks for a password and none is set (check `password`)"),
    (re.compile(r"^database .* does not exist"), "the database does not exist (check `database`)"),
    (re.compile(r"^role .* does not exist"), "the role does not exist (check `user`)"),
    ("could not translate host name", "the host name does not resolve (check `host`)"),
    ("connection refused", "connection refused (check `host` and `port`, and that the server is running)"),
    ("timeout expired", "timed out (check `host` and `port`, and that the server is reachable)"),
    ("no pg_hba.conf entry", "the server's pg_hba.conf refuses this host, user or database "
                             "(check `user` and `database`)"),
)


def _connect_reason(reason: str) -> str:
    """A connection failure as what went wrong and which key to check, or the scrubbed text itself.

    >>> _connect_reason('database "<database>" does not exist')
    'the database does not exist (check `database`)'
    >>> _connect_reason("Connection refused Is the server running on that host and accepting TCP/IP connections?")
    'connection refused (check `host` and `port`, and that the server is running)'
    """
    lowered = reason.lower()
    for needle, meaning in _CONNECT_REASONS:
        if needle.search(lowered) if isinstance(needle, re.Pattern) else needle in lowered:
            return meaning
    return reason
