"""Opening the state database: creation, stored versions, migrations, too-new state, unreachable servers."""

from __future__ import annotations

import traceback
from pathlib import Path
from dataclasses import asdict

import pytest
import sqlalchemy as sa

from bot.fingerprint import FINGERPRINT_SCHEME
from bot import __version__
from bot.errors import StateError
from bot.project.config import StateConnection
from bot.snapshot import Fingerprint, SnapshotId
from bot.state.connect import connect_state
from bot.state.migrations import all_migrations, latest_version, v0001_initial
from bot.state.tables import build_tables


@pytest.fixture(params=["sqlite", "postgres"])
def connection(request, tmp_path) -> StateConnection:
    if request.param == "sqlite":
        return StateConnection(type="sqlite", database=str(tmp_path / "state.db"))
    return StateConnection(**request.getfixturevalue("postgres_schema"))


def raw_engine(connection: StateConnection) -> sa.Engine:
    if connection.type == "sqlite":
        return sa.create_engine(sa.engine.URL.create("sqlite", database=connection.database))
    return sa.create_engine(sa.engine.URL.create(
        "postgresql+psycopg2", username=connection.user, host=connection.host,
        port=connection.port, database=connection.database))


def test_default_sqlite_state_is_created_in_project_meshbot_folder(tmp_path):
    with connect_state(StateConnection(), project_root=tmp_path) as state:
        assert state.schema_version() == latest_version() >= 2
        assert state.get_environments() == []
        with state.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
    assert (tmp_path / ".meshbot" / "state.db").is_file()


def test_missing_state_is_not_created_when_create_is_false(tmp_path):
    with pytest.raises(StateError, match="no meshbot state found at .*state.db"):
        connect_state(StateConnection(), project_root=tmp_path, create=False)
    assert not (tmp_path / ".meshbot").exists()


def test_fresh_state_matches_table_definitions_and_records_versions(connection, tmp_path):
    with connect_state(connection, project_root=tmp_path) as state:
        schema = state.tables.metadata.schema
        inspector = sa.inspect(state.engine)
        for table in state.tables.metadata.sorted_tables:
            columns = {c["name"] for c in inspector.get_columns(table.name, schema=schema)}
            assert columns == set(table.columns.keys()), table.name
            indexes = {i["name"] for i in inspector.get_indexes(table.name, schema=schema)}
            assert indexes == {i.name for i in table.indexes}, table.name
        with state.engine.connect() as conn:
            rows = conn.execute(sa.select(state.tables.versions)).all()
        assert rows == [(latest_version(), __version__, state.state_id, FINGERPRINT_SCHEME)]
    if connection.schema:   # nothing leaked into the public schema
        assert not sa.inspect(raw_engine(connection)).has_table("snapshots", schema="public")


def test_version_1_state_is_refused_until_migrated_and_keeps_its_rows(connection, tmp_path):
    fingerprint = Fingerprint("1", "2")
    snapshot_id = SnapshotId("db.a", fingerprint.identifier)
    engine = raw_engine(connection)
    v1 = v0001_initial._metadata(connection.schema)
    with engine.begin() as conn:
        v0001_initial.upgrade(conn, schema=connection.schema)
        conn.execute(sa.insert(v1.tables[_key(connection, "versions")]),
                     [{"schema_version": 1, "meshbot_version": "0.0.1"}])
        conn.execute(sa.insert(v1.tables[_key(connection, "snapshots")]), [dict(
            name="db.a", identifier=snapshot_id.identifier, version="7", kind="FULL",
            fingerprint=asdict(fingerprint),
            change_category="breaking", definition={"name": "db.a"}, rendered_query="SELECT 1",
            parents=[], forward_only=False, physical_schema="sqlmesh__db", columns=[["x", "INT"]],
            ttl="in 1 week", created_ts=1, updated_ts=2)])
        conn.execute(sa.insert(v1.tables[_key(connection, "environments")]), [dict(
            name="dev", snapshots=[], plan_id="p1")])
        conn.execute(sa.insert(v1.tables[_key(connection, "intervals")]), [dict(
            name="db.a", version="7", start_ts=0, end_ts=10, is_dev=False, is_removed=False,
            created_ts=3)])
    engine.dispose()

    state = connect_state(connection, project_root=tmp_path)
    assert state.schema_version() == 1
    with pytest.raises(StateError, match=r"state schema version 1 is older than this meshbot "
                                         r"\(\d+\); run `meshbot migrate`"):
        state.get_environment("dev")
    assert state.migrate().schema_version == latest_version()
    assert state.get_environment("dev").suffix_target == "schema"
    snapshot = state.get_snapshots([snapshot_id])[snapshot_id]
    assert (snapshot.version, snapshot.columns, snapshot.definition) == ("7", (("x", "INT"),),
                                                                         {"name": "db.a"})
    assert state.get_intervals([("db.a", "7")])[("db.a", "7")].intervals == [(0, 10)]
    indexes = sa.inspect(state.engine).get_indexes("snapshots", schema=connection.schema)
    assert "ix_snapshots_name_version" in {i["name"] for i in indexes}
    assert state.pending_drops() == []   # v0005's table is there
    [entry] = state.get_environment_history("dev")   # v0006 records the plan each environment serves
    assert (entry.plan_id, entry.snapshots, entry.finalized_ts) == ("p1", (), None)
    state_id = state.state_id
    assert len(state_id) == 32 and int(state_id, 16) >= 0
    assert state.migrate().schema_version == latest_version()   # idempotent
    state.close()
    with connect_state(connection, project_root=tmp_path) as reopened:
        assert reopened.state_id == state_id


def test_version_7_state_migrates_to_8_and_its_timed_batches_have_no_spark_usage(connection, tmp_path):
    """v0008 adds `executor_ms` and `bytes_read` to intervals: batches recorded before keep their wall time
    and count as not metered; batches recorded after keep both."""
    engine = raw_engine(connection)
    with engine.begin() as conn:
        for migration in all_migrations()[:7]:
            migration.upgrade(conn, schema=connection.schema)
        v1 = v0001_initial._metadata(connection.schema)
        conn.execute(sa.insert(v1.tables[_key(connection, "versions")]),
                     [{"schema_version": 7, "meshbot_version": "0.0.7"}])
        intervals = sa.Table("intervals", sa.MetaData(schema=connection.schema), autoload_with=conn)
        assert "elapsed_ms" in intervals.c and "executor_ms" not in intervals.c
        conn.execute(sa.insert(intervals), [dict(name="db.a", version="7", start_ts=0, end_ts=10, is_dev=False,
                                                 is_removed=False, created_ts=3, elapsed_ms=4000)])
    engine.dispose()

    with connect_state(connection, project_root=tmp_path) as state:
        assert state.schema_version() == 7
        assert state.migrate().schema_version == latest_version()
        times = state.get_batch_times(["db.a"])[("db.a", "7")]
        assert (times.batches, times.elapsed_ms, times.metered_batches, times.executor_ms) == (1, 4000, 0, 0)
        with state.engine.connect() as conn:
            row = conn.execute(sa.select(state.tables.intervals.c.executor_ms,
                                         state.tables.intervals.c.bytes_read)).one()
        assert tuple(row) == (None, None)
        state.add_interval("db.a", "7", (10, 30), elapsed_ms=1000, executor_ms=6000, bytes_read=2048)
        times = state.get_batch_times(["db.a"])[("db.a", "7")]
        assert (times.batches, times.span_ms, times.elapsed_ms) == (2, 30, 5000)
        assert (times.metered_batches, times.metered_span_ms, times.executor_ms, times.bytes_read) == (1, 20, 6000,
                                                                                                       2048)


def _key(connection: StateConnection, table: str) -> str:
    return f"{connection.schema}.{table}" if connection.schema else table


def test_state_newer_than_meshbot_is_refused(connection, tmp_path):
    with connect_state(connection, project_root=tmp_path) as state:
        with state.engine.begin() as conn:
            conn.execute(sa.update(state.tables.versions).values(schema_version=99))
    with pytest.raises(StateError) as error:
        connect_state(connection, project_root=tmp_path)
    assert str(error.value).startswith(
        f"state schema version 99 is newer than this meshbot ({latest_version()}); upgrade meshbot")


def test_unreachable_postgres_is_named_without_the_password():
    secret = "s3cret-Pa55word"
    connection = StateConnection(type="postgres", host="127.0.0.1", port=1, user="meshbot",
                                 password=secret, database="warehouse")
    with pytest.raises(StateError) as error:
        connect_state(connection, project_root=Path("."))
    message = str(error.value)
    assert message.startswith("cannot reach the state database `state_connection`: connection refused "
                              "(check `host` and `port`")
    assert "127.0.0.1" not in message and "meshbot" not in message and "warehouse" not in message
    assert "refused" in message.lower() or "could not connect" in message.lower()
    shown = "".join(traceback.format_exception(error.value))
    assert secret not in message and secret not in shown and secret not in repr(connection)


def test_unknown_state_type_is_refused(tmp_path):
    with pytest.raises(StateError, match="unknown state_connection type `mysql`"):
        connect_state(StateConnection(type="mysql"), project_root=tmp_path)


def test_migrations_are_numbered_without_gaps():
    assert [m.version for m in all_migrations()] == list(range(1, latest_version() + 1))
    assert build_tables().metadata.tables.keys() == {"snapshots", "environments", "intervals",
                                                     "versions", "leases", "pending_drops",
                                                     "environment_history"}


def test_version_9_state_migrates_to_10_and_its_history_has_no_source(connection, tmp_path):
    """v0010 adds `source` to environment_history: plans promoted before have none (never taken for a deploy
    of the default branch by drift detection); promotions after record theirs."""
    from bot.state.protocol import Environment

    engine = raw_engine(connection)
    with engine.begin() as conn:
        for migration in all_migrations()[:9]:
            migration.upgrade(conn, schema=connection.schema)
        v1 = v0001_initial._metadata(connection.schema)
        conn.execute(sa.insert(v1.tables[_key(connection, "versions")]),
                     [{"schema_version": 9, "meshbot_version": "0.0.9"}])
        history = sa.Table("environment_history", sa.MetaData(schema=connection.schema), autoload_with=conn)
        assert "source" not in history.c
        conn.execute(sa.insert(history), [dict(name="prod", plan_id="p1", snapshots=[], promoted_ts=5,
                                               finalized_ts=6)])
    engine.dispose()

    with connect_state(connection, project_root=tmp_path) as state:
        assert state.schema_version() == 9
        assert state.migrate().schema_version == latest_version()
        (old,) = state.get_environment_history("prod")
        assert (old.plan_id, old.source) == ("p1", "")
        state.promote(Environment(name="prod", snapshots=(), plan_id="p2"), expected_plan_id=None,
                      source="deploy main@0123456789ab")
        assert [e.source for e in state.get_environment_history("prod")] == ["deploy main@0123456789ab", ""]
