"""State database failures after connecting come out as one StateError with a retry hint (real PostgreSQL)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psycopg2
import pytest
from click.testing import CliRunner

from bot.cli import cli
from bot.errors import StateError
from bot.project.config import StateConnection
from bot.state.protocol import Environment
from bot.state.connect import connect_state
from conftest import POSTGRES

PASSWORD_FREE = StateConnection(type="postgres", host=POSTGRES["host"], port=POSTGRES["port"],
                                user=POSTGRES["user"], database=POSTGRES["database"])


def _state(schema: str):
    return connect_state(StateConnection(**{**PASSWORD_FREE.__dict__, "schema": schema}),
                         project_root=Path("."))


def _admin():
    conn = psycopg2.connect(host=POSTGRES["host"], port=POSTGRES["port"], user=POSTGRES["user"],
                            dbname=POSTGRES["database"], application_name="meshbot-test-admin")
    conn.autocommit = True
    return conn


def _lock_environments(schema: str):
    """A second session holding an exclusive lock on the state's environments table until closed."""
    holder = _admin()
    holder.autocommit = False
    with holder.cursor() as cursor:
        cursor.execute(f'LOCK TABLE "{schema}"."environments" IN ACCESS EXCLUSIVE MODE')
    return holder


def _write_project(root: Path, schema: str) -> Path:
    root.mkdir(parents=True)
    (root / "config.yaml").write_text(f"""
gateways:
  pg:
    state_connection:
      type: postgres
      host: {POSTGRES['host']}
      port: {POSTGRES['port']}
      user: {POSTGRES['user']}
      database: {POSTGRES['database']}
      schema: {schema}
model_defaults:
  dialect: spark
""")
    return root


def test_lock_held_too_long_is_a_state_error_with_a_hint(tmp_path, postgres_schema, monkeypatch):
    """`meshbot environments` waits for a lock another session holds; past lock_timeout: one paragraph."""
    schema = postgres_schema["schema"]
    _state(schema).close()   # creates the state tables
    root = _write_project(tmp_path / "p", schema)
    monkeypatch.setenv("PGOPTIONS", "-c lock_timeout=200")   # as a DBA or role setting would
    holder = _lock_environments(schema)
    try:
        result = CliRunner().invoke(cli, ["-p", str(root), "environments"], catch_exceptions=False)
    finally:
        holder.rollback()
        holder.close()
    assert result.exit_code == 1, result.output
    out = result.output.strip()
    assert out.startswith("Error: state database `gateways.pg.state_connection` failed: "
                          "canceling statement due to lock timeout"), out
    assert "retry" in out and "lock" in out
    assert "Traceback" not in out and "sqlalchemy" not in out.lower() and "[SQL:" not in out
    assert len(out.splitlines()) == 1, out


def test_default_lock_timeout_applies_only_when_none_is_set(postgres_schema, monkeypatch):
    with _state(postgres_schema["schema"]) as state, state.engine.connect() as conn:
        assert conn.exec_driver_sql("SHOW lock_timeout").scalar() == "30s"
    monkeypatch.setenv("PGOPTIONS", "-c lock_timeout=1500")
    with _state(postgres_schema["schema"]) as state, state.engine.connect() as conn:
        assert conn.exec_driver_sql("SHOW lock_timeout").scalar() == "1500ms"


def test_connection_dropped_mid_statement_is_a_state_error(postgres_schema):
    """The backend serving meshbot is terminated while it waits; the caller gets a StateError, state intact."""
    schema = postgres_schema["schema"]
    state = _state(schema)
    state.promote(Environment(name="dev", snapshots=(), plan_id="p1"), expected_plan_id=None)
    holder = _lock_environments(schema)
    outcome: dict[str, BaseException] = {}

    def invalidate() -> None:
        try:
            state.invalidate_environment("dev")
        except BaseException as error:  # noqa: BLE001 - handed to the test thread
            outcome["error"] = error

    worker = threading.Thread(target=invalidate)
    worker.start()
    admin = _admin()
    try:
        pid = None
        for _ in range(600):   # until meshbot's statement waits on the lock (not a timing assertion)
            with admin.cursor() as cursor:
                cursor.execute("SELECT pid FROM pg_stat_activity WHERE application_name = 'meshbot' "
                               "AND wait_event_type = 'Lock' AND datname = current_database() "
                               "AND query LIKE %s", (f"%{schema}%",))
                row = cursor.fetchone()
            if row:
                pid = row[0]
                break
            time.sleep(0.05)
        assert pid is not None, "meshbot never waited for the lock"
        with admin.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", (pid,))
        worker.join(60)
    finally:
        holder.rollback()
        holder.close()
        admin.close()
    error = outcome.get("error")
    assert isinstance(error, StateError), repr(error)
    text = str(error)
    assert "server closed the connection" in text and "retry the command" in text
    assert "connection to the state database was lost" in text
    assert "sqlalchemy" not in text.lower() and "[SQL:" not in text and "\n" not in text
    # The failed write changed nothing, and the same object works again (the pool reconnects).
    env = state.get_environment("dev")
    assert env is not None and env.expiration_ts is None
    state.close()


def test_integrity_errors_still_mean_a_concurrent_promotion(postgres_schema):
    """The translation leaves IntegrityError alone: two first promotions still end in a ConflictError."""
    from bot.errors import ConflictError

    with _state(postgres_schema["schema"]) as one, _state(postgres_schema["schema"]) as two:
        one.promote(Environment(name="dev", snapshots=(), plan_id="a"), expected_plan_id=None)
        with pytest.raises(ConflictError):
            two.promote(Environment(name="dev", snapshots=(), plan_id="b"), expected_plan_id=None)


def test_sqlite_lock_held_too_long_is_a_state_error(tmp_path, monkeypatch):
    """Another process holds SQLite's write lock past the busy timeout: StateError naming the lock."""
    import sqlite3

    from bot.state import connect as state_connect

    monkeypatch.setattr(state_connect, "SQLITE_BUSY_TIMEOUT_MS", 100)
    database = tmp_path / "state.db"
    state = connect_state(StateConnection(type="sqlite", database=str(database)), project_root=tmp_path)
    holder = sqlite3.connect(database, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StateError) as info:
            state.promote(Environment(name="dev", snapshots=(), plan_id="p1"), expected_plan_id=None)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    text = str(info.value)
    assert text.startswith(f"state database sqlite:///{database} failed: database is locked; ")
    assert "held a lock" in text and "retry" in text
    state.promote(Environment(name="dev", snapshots=(), plan_id="p1"), expected_plan_id=None)
    assert state.get_environment("dev").plan_id == "p1"
    state.close()
