"""Shared fixtures: one real local Spark session per test run, real SQLite and PostgreSQL, shared data."""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
POSTGRES = dict(host="127.0.0.1", port=5432, user="postgres", database="test")
PYCACHE_VARIABLE = "MESHBOT_TEST_PYCACHE"
# fixture projects' macros and Python models import `sqlmesh`, which only meshbot's loader provides:
# they are project files, not modules with doctests
collect_ignore_glob = ["fixtures/*"]

# Test lanes. A test that needs one of these fixtures (directly or through other fixtures) gets the
# marker; `spark` implies `slow`, so `pytest -m "not slow"` is the fast lane without any JVM.
# Modules that start Spark some other way (a meshbot subprocess, a Context without the fixture)
# say so with `pytestmark = pytest.mark.spark` or `pytest.mark.slow`.
SPARK_FIXTURES = frozenset({"spark", "spark_state_dir", "clean_catalog", "connect_server", "standalone_master"})
POSTGRES_FIXTURES = frozenset({"postgres_schema", "state_database"})


def _uses_postgres(item) -> bool:
    """Needs a PostgreSQL fixture, or is the `postgres` case of a fixture parametrized over state backends."""
    if set(getattr(item, "fixturenames", ())) & POSTGRES_FIXTURES:
        return True
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return False
    direct = set()   # arguments of @pytest.mark.parametrize, where "postgres" may be just a dialect name
    for mark in item.iter_markers("parametrize"):
        names = mark.args[0]
        direct.update(name.strip() for name in (names.split(",") if isinstance(names, str) else names))
    return any(value == "postgres" for name, value in callspec.params.items() if name not in direct)


def pytest_collection_modifyitems(config, items):
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if _uses_postgres(item) and not item.get_closest_marker("postgres"):
            item.add_marker(pytest.mark.postgres)
        if fixtures & SPARK_FIXTURES and not item.get_closest_marker("spark"):
            item.add_marker(pytest.mark.spark)
        if item.get_closest_marker("spark") and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
    spark_modules = {item.path for item in items if item.get_closest_marker("spark")}
    if not _is_xdist_worker(config):
        # Modules without Spark run first, while the JVMs start (below); each module stays in one piece.
        items.sort(key=lambda item: item.path in spark_modules)
        return
    # On xdist processes (the README's `-n 2`): modules are handed out whole (pytest_xdist_make_scheduler
    # below), in this order. The longest work goes first, so that no process is left alone with a long
    # module at the end: the modules on the Spark Connect server (the longest tests), the other Spark
    # modules, then the rest.
    connect_modules = {item.path for item in items if "connect_server" in getattr(item, "fixturenames", ())}
    items.sort(key=lambda item: (item.path not in connect_modules, item.path not in spark_modules))


def _is_xdist_worker(config) -> bool:
    return hasattr(config, "workerinput")


def _connect_modules() -> frozenset[str]:
    """Test modules (as their test ids begin) that use the Spark Connect server, read from their text:
    the xdist process handing out the tests collects none. A module missed here is only slower: the
    process running it starts a server of its own."""
    tests = Path(__file__).parent
    return frozenset(f"{tests.name}/{path.name}" for path in sorted(tests.glob("test_*.py"))
                     if "connect_server" in path.read_text())


@pytest.hookimpl(optionalhook=True)   # an xdist hook
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` (pyproject.toml) with the modules on the Spark Connect server as one unit: one
    process runs them all, one after another as in one process, and is the only one to start a server
    (a JVM of its own, ~1 GiB, 20 s to start and about a minute of CPU over a run)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    connect = _connect_modules()

    class ConnectModulesTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = super()._split_scope(nodeid)
            return "spark-connect" if module in connect else module

    return ConnectModulesTogether(config, log)


# --------------------------------------------------------------------------------------------
# The run's Spark session, the Spark Connect server and the standalone cluster take 5-20 s each to
# start: when collection ends, the ones the selected tests need start (the session on a thread, the
# servers as processes) while the modules without Spark run, and the fixtures wait for them.
# An xdist process collects every test but runs only those handed to it: it starts its own session
# at once (nearly every process needs one) and a server only when a test of its asks for one.
# --------------------------------------------------------------------------------------------

# Fixture name -> what it returns: a started server, a directory, or (for `spark`) a Future.
_READY: dict[str, Any] = {}
_CLEANUPS: list = []
_STARTER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="conftest-spark")


def _temporary_directory(prefix: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    _CLEANUPS.append(lambda: shutil.rmtree(path, ignore_errors=True))
    return path


_BYTECODE_WHILE_TESTING = pytest.StashKey[tuple[None, bool]]()   # (sys.pycache_prefix, sys.dont_write_bytecode)


def pytest_configure(config):
    # Local gateways run on a warm engine (a Spark Connect server per project, bot.spark.local_server) by
    # default: the tests' projects start Spark in their own process instead (the run's one session, or a
    # meshbot subprocess's), or every temporary project would leave a server. test_warm_engine.py turns it on.
    os.environ["MESHBOT_WARM_ENGINE"] = "0"
    # Every JVM the tests start (the run's session, meshbot processes' local Spark, the servers) compiles
    # with C1 alone, with the code cache C2 would have: on two cores C2's compiler threads take the CPU
    # the other test process needs (an example deploy in a fresh JVM: 15 s of JVM CPU instead of 22 s;
    # five more on the warm session: 19 s instead of 36 s). meshbot keeps the JVM's "Picked up
    # JAVA_TOOL_OPTIONS" notice off the terminal, as it does for a user who sets the variable.
    os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m")
    # Some machines set PYTHONDONTWRITEBYTECODE: then every run compiles meshbot's modules and rewrites
    # the test modules' asserts again (half of collection: 4-5 s of CPU), and each of the ~40 meshbot
    # processes the tests start compiles meshbot again. Those processes, and this one while it collects
    # (and so imports the test modules and meshbot), keep compiled files in one new temporary folder of
    # this run instead (never in the checkout, and never one an earlier run or another user left), as an
    # installed meshbot would have them. While the tests run, this process writes none and reads none from there: a
    # Python file a test edits twice within a second, keeping its size, would look unchanged to Python.
    # (xdist workers inherit the variables: PYCACHE_VARIABLE tells them the setting is the run's.)
    if sys.dont_write_bytecode or "PYTHONDONTWRITEBYTECODE" in os.environ or os.environ.get(PYCACHE_VARIABLE):
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        if not os.environ.get(PYCACHE_VARIABLE):   # the run's controller; xdist workers inherit its folder
            os.environ["PYTHONPYCACHEPREFIX"] = str(_temporary_directory("meshbot-test-pycache-"))
        os.environ[PYCACHE_VARIABLE] = os.environ["PYTHONPYCACHEPREFIX"]
        sys.pycache_prefix, sys.dont_write_bytecode = os.environ[PYCACHE_VARIABLE], False
        config.stash[_BYTECODE_WHILE_TESTING] = (None, True)


def _start_session(state_dir: Path):
    from bot.project.config import SparkConnection
    from bot.spark.session import get_session

    return get_session(SparkConnection(master="local[2]",
                                       config=(("spark.sql.shuffle.partitions", "2"),
                                               ("spark.default.parallelism", "2"))),
                       state_dir=state_dir)


def pytest_collection_finish(session):
    if _BYTECODE_WHILE_TESTING in session.config.stash:
        sys.pycache_prefix, sys.dont_write_bytecode = session.config.stash[_BYTECODE_WHILE_TESTING]
    if session.config.option.collectonly:
        return
    needed = set().union(*(getattr(item, "fixturenames", ()) for item in session.items))
    if needed & {"spark", "spark_state_dir", "clean_catalog"}:
        # Imported here rather than on the thread, so that a test forking meanwhile never copies a
        # half-held import lock into its child.
        importlib.import_module("pyspark.sql")
        from bot.spark.session import stop_session

        state_dir = _temporary_directory("meshbot-test-spark-")
        _CLEANUPS.append(stop_session)   # runs before the directory goes (cleanups run last first)
        _READY["spark_state_dir"] = state_dir
        _READY["spark"] = _STARTER.submit(_start_session, state_dir)
    if not _is_xdist_worker(session.config):
        for name in sorted(needed & _SERVERS.keys()):
            _start_server(name)


def _start_server(name: str):
    """Start the server a session fixture returns ("connect_server", "standalone_master"); stopped at the end."""
    import spark_servers

    start, prefix = _SERVERS[name]
    server = getattr(spark_servers, start)(_temporary_directory(prefix))
    _CLEANUPS.append(lambda: spark_servers.stop(server))
    _READY[name] = server
    return server


_SERVERS = {"connect_server": ("start_connect", "meshbot-test-connect-"),
            "standalone_master": ("start_standalone", "meshbot-test-standalone-")}


def pytest_sessionfinish(session):
    _STARTER.shutdown(wait=True)
    while _CLEANUPS:
        _CLEANUPS.pop()()


@pytest.fixture(scope="session")
def spark_state_dir() -> Path:
    """Where the run's session keeps its Derby catalog and warehouse."""
    return _READY["spark_state_dir"]


@pytest.fixture(scope="session")
def spark(spark_state_dir):
    """The single SparkSession of this test run; every Context in the process reuses it."""
    return _READY["spark"].result()


@pytest.fixture(scope="session")
def connect_server():
    """A Spark Connect server (its own warehouse and Derby metastore), for the modules that need a
    catalog shared by several meshbot processes; models there use their own schema names."""
    from spark_servers import wait_for_connect

    return wait_for_connect(_READY.get("connect_server") or _start_server("connect_server"))


@pytest.fixture(scope="session")
def standalone_master():
    """A standalone Spark master with one worker (1 core, 1 GiB), registered and ready."""
    from spark_servers import wait_until

    cluster = _READY.get("standalone_master") or _start_server("standalone_master")
    wait_until(cluster, lambda: "Successfully registered with master" in cluster.log(),
               "standalone master and worker")
    return cluster


@pytest.fixture
def clean_catalog(spark):
    """Drop every database a test created, so tests sharing the session do not see each other."""
    before = {row[0] for row in spark.sql("SHOW DATABASES").collect()}
    yield spark
    after = {row[0] for row in spark.sql("SHOW DATABASES").collect()}
    for name in sorted(after - before):
        spark.sql(f"DROP DATABASE IF EXISTS `{name}` CASCADE")


@pytest.fixture
def engine_schema(clean_catalog):
    """A SparkEngine on the run's session and a fresh schema of its own: (engine, schema name)."""
    from bot.spark.engine import SparkEngine

    engine = SparkEngine(clean_catalog)
    name = f"t_{uuid.uuid4().hex[:10]}"
    engine.create_schemas([name])
    return engine, name


@pytest.fixture
def postgres_schema():
    """A fresh PostgreSQL schema on the machine's server, dropped after the test.

    Returns a dict usable as a `state_connection` in config.yaml (plus `schema`).
    """
    import sqlalchemy as sa

    schema = f"meshbot_test_{uuid.uuid4().hex[:10]}"
    url = sa.engine.URL.create("postgresql+psycopg2", username=POSTGRES["user"],
                               host=POSTGRES["host"], port=POSTGRES["port"],
                               database=POSTGRES["database"])
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    yield {"type": "postgres", **POSTGRES, "schema": schema}
    with engine.begin() as conn:
        conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    engine.dispose()


@pytest.fixture(autouse=True)
def _no_github_env(monkeypatch):
    """Tests never inherit a real GitHub Actions environment from the machine running them."""
    for key in list(os.environ):
        if key.startswith("GITHUB_"):
            monkeypatch.delenv(key, raising=False)


@pytest.fixture(autouse=True)
def _no_write_throttle(monkeypatch):
    """GitHub is a mock here: no test waits out the second between writes that keeps the real one's
    secondary rate limit happy (a PR sync makes ~20 writes)."""
    from bot.github.client import GithubClient

    monkeypatch.setitem(GithubClient.__init__.__kwdefaults__, "seconds_between_writes", 0.0)


@pytest.fixture(autouse=True)
def _no_secrets_from_other_tests():
    """Each test starts with no registered secret: one test's password must not mask another's text."""
    from bot.redact import forget_all

    forget_all()
    yield
    forget_all()


@pytest.fixture
def sqlite_state(tmp_path):
    """A fresh SQLite state in the test's folder, closed afterwards."""
    from bot.project.config import StateConnection
    from bot.state.connect import connect_state

    store = connect_state(StateConnection(type="sqlite", database=str(tmp_path / "state.db")), project_root=tmp_path)
    yield store
    store.close()


@pytest.fixture(params=["sqlite", "postgres"])
def connection(request, tmp_path):
    """A state connection on each backend: a SQLite file, or a PostgreSQL schema of its own."""
    from bot.project.config import StateConnection

    if request.param == "sqlite":
        return StateConnection(type="sqlite", database=str(tmp_path / "state.db"))
    return StateConnection(**request.getfixturevalue("postgres_schema"))


@pytest.fixture
def state_database():
    """A PostgreSQL database of its own on the machine's server, dropped afterwards (its name)."""
    import sqlalchemy as sa

    name = f"meshbot_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(sa.engine.URL.create(
        "postgresql+psycopg2", username=POSTGRES["user"], host=POSTGRES["host"], port=POSTGRES["port"],
        database=POSTGRES["database"]), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    yield name
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()
