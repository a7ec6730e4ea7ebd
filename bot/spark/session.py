"""Build the one SparkSession a process uses: local with a persistent catalog, a cluster, or Spark Connect."""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bot.errors import EngineError
from bot.project.config import SparkConnection
from bot.redact import mask_url
from bot.spark.connect import check_reachable, is_connect
from bot.spark.errors import spark_message
from bot.spark.catalog_lock import hold_catalog, release_catalog
from bot.spark.local_server import ENGINE_DIR, LOG as ENGINE_LOG, WARM_VARIABLE, attach, warm_wanted
from bot.spark.local_server import status as server_status, stop as stop_server
from bot.spark.start_line import StartLine
from bot.spark.verbosity import is_verbose

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")
# Where the JVM's stdout and stderr go for a session this process starts (quiet mode), under state_dir.
JVM_LOG = "spark.log"
# Under state_dir: the absolute warehouse path the embedded catalog was made for, so a copied project
# is refused before a JVM starts (the catalog's own check below needs a running session).
CATALOG_OWNER = "catalog_owner"
_LOCK = threading.Lock()
_SESSION: "SparkSession | None" = None

# SQL semantics meshbot relies on (INSERT OVERWRITE replaces only the written partitions, UTC, Parquet, ANSI SQL:
# a value that does not fit is an error, never a silent NULL; bot/project/arithmetic.py keeps a dialect's own
# values). Runtime settings, so they apply to Spark Connect sessions too; users override any of them in `config`.
SESSION_DEFAULTS: dict[str, str] = {
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.legacy.createHiveTableByDefault": "false",
    "spark.sql.sources.default": "parquet",
    "spark.sql.ansi.enabled": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}

# Settings that keep a session this process starts (local or on a master URL) quick to start and quiet.
LOCAL_DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.driver.memory": "2g",
    # Concurrent backfill tasks each submit their jobs to their own pool (connection.concurrent_tasks);
    # FAIR shares the executors between pools instead of queueing one task's jobs behind another's.
    "spark.scheduler.mode": "FAIR",
    **SESSION_DEFAULTS,
}

# Without Hadoop's native library (pyspark ships none) every chmod and permission read on the local
# file system starts a process (`chmod`, `ls -ld`) from the JVM. Hive's permission inheritance costs
# four of them per CREATE TABLE and the committer's `_SUCCESS` marker two per write; neither means
# anything in meshbot's own warehouse under `.meshbot/`, so they are off there (benchmarks/README.md).
EMBEDDED_WAREHOUSE_DEFAULTS: dict[str, str] = {
    "spark.hadoop.hive.warehouse.subdir.inherit.perms": "false",
    "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
}


def get_session(connection: SparkConnection, *, state_dir: Path, catalog_only: bool = False) -> "SparkSession":
    """Return the process's SparkSession, creating it on first use.

    Sessions this process starts (`master`: local or a cluster URL) keep an embedded Derby
    metastore and, unless `config` sets `spark.sql.warehouse.dir`, the warehouse under `state_dir`
    (the project's `.meshbot/`), so tables survive between runs. With `remote` (Spark Connect)
    the server owns the catalog and warehouse; only SESSION_DEFAULTS and `config` are sent.

    `catalog_only` says the process will run only catalog statements (tables, views, drops: a
    deploy without backfill, a janitor): a driver JVM started for it compiles with C1 alone (see
    `java_options`). A session already running is returned as it is.
    """
    global _SESSION
    with _LOCK:
        if _SESSION is not None and not _is_stopped(_SESSION):
            return _SESSION
        _SESSION = _build(connection, state_dir, catalog_only=catalog_only)
        return _SESSION


def stop_session() -> None:
    global _SESSION
    with _LOCK:
        if _SESSION is not None:
            _SESSION.stop()
            _SESSION = None
        release_catalog()


def _is_stopped(session: "SparkSession") -> bool:
    try:
        if is_connect(session):
            return bool(session.is_stopped)
        context = getattr(session, "_sc", None)
        return context is not None and context._jsc is None
    except Exception:  # noqa: BLE001 - a broken session is as good as stopped
        return True


# pip extras (pyproject.toml): `connect` installs the Spark Connect client alone (pyspark-client: PySpark's
# Python code without its jars, py4j or RDD core, ~1.5 MB), `spark` the full PySpark (~400 MB of jars) with
# the Connect client's dependencies, for local and cluster masters and Spark Connect alike.
CONNECT_EXTRA = "meshbot[connect]"
SPARK_EXTRA = "meshbot[spark]"
# What a Spark Connect session imports beyond PySpark's own Python code (pyspark-client's dependencies).
_CONNECT_MODULES = ("grpc", "grpc_status", "pandas", "pyarrow")


@dataclass(frozen=True)
class PySparkInstall:
    """What the installed PySpark can run, read from its files without importing it.

    `classic`: a session in this process (local or a cluster master URL): PySpark's RDD core, py4j and
    Spark's jars (in the package, as the `pyspark` wheel has them, or under SPARK_HOME). `connect`: a
    Spark Connect session: PySpark's `sql.connect` client and the gRPC, pandas and Arrow modules it uses.
    `pyspark-client` has `connect` without `classic`; `pyspark` without its `[connect]` extra the reverse.
    """

    location: Path | None
    classic: bool
    connect: bool
    missing_connect_modules: tuple[str, ...] = ()


def pyspark_install() -> PySparkInstall:
    spec = importlib.util.find_spec("pyspark")
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    if not locations:
        return PySparkInstall(location=None, classic=False, connect=False)
    package = Path(locations[0])
    jars = (package / "jars").is_dir() or bool(os.environ.get("SPARK_HOME"))
    classic = (package / "core").is_dir() and jars and importlib.util.find_spec("py4j") is not None
    missing = tuple(name for name in _CONNECT_MODULES if importlib.util.find_spec(name) is None)
    connect = (package / "sql" / "connect").is_dir() and not missing
    return PySparkInstall(location=package, classic=classic, connect=connect, missing_connect_modules=missing)


def require_pyspark(connection: SparkConnection, install: PySparkInstall | None = None) -> None:
    """Raise EngineError naming the pip extra to install when the installed PySpark cannot run `connection`.

    >>> client = PySparkInstall(location=Path("/venv/pyspark"), classic=False, connect=True)
    >>> require_pyspark(SparkConnection(remote="sc://spark:15002"), client)
    >>> require_pyspark(SparkConnection(master="local[*]"), client)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    bot.errors.EngineError: the gateway runs Spark in this process (master `local[*]`), which needs the full PySpark with Spark's jars, but only the Spark Connect client (pyspark-client) is installed...; install the full one with: pip install 'meshbot[spark]'
    """
    install = install if install is not None else pyspark_install()
    if connection.remote:
        if install.connect:
            return
        if install.location is None:
            found = "PySpark is not installed"
        else:
            found = (f"the installed PySpark ({install.location}) lacks "
                     + ", ".join(install.missing_connect_modules or ("pyspark.sql.connect",)))
        raise EngineError(f"the gateway connects to Spark Connect at {mask_url(connection.remote)} "
                          f"(connection.remote), which needs the Spark Connect client, but {found}; install it "
                          f"with: pip install '{CONNECT_EXTRA}' (or '{SPARK_EXTRA}', which also runs Spark locally)")
    if install.classic:
        return
    where = f"master `{mask_url(connection.master or 'local[*]')}`"
    if install.location is None:
        found = "PySpark is not installed"
    elif install.connect:
        found = f"only the Spark Connect client (pyspark-client) is installed ({install.location})"
    else:
        found = f"the PySpark at {install.location} has no Spark jars, RDD core or py4j"
    raise EngineError(f"the gateway runs Spark in this process ({where}), which needs the full PySpark with "
                      f"Spark's jars, but {found}; install the full one with: pip install '{SPARK_EXTRA}'")


def _build(connection: SparkConnection, state_dir: Path, *, catalog_only: bool = False) -> "SparkSession":
    require_pyspark(connection)
    from pyspark.sql import SparkSession

    verbose = is_verbose()
    builder = SparkSession.builder.appName("meshbot")
    if not verbose:
        _quiet_python_loggers()
    if connection.remote:
        return _build_remote(builder, connection)

    master = connection.master or "local[*]"
    state_dir = state_dir.resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    if warm_wanted(master, connection.remote, connection.warm) and pyspark_install().connect:
        return _build_warm(builder, connection, master, state_dir)
    os.environ.setdefault("PYSPARK_PYTHON", _python())
    if master.startswith("local"):
        # On a cluster the workers must reach the driver, so it cannot bind to loopback there.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    settings, embedded = _local_settings(connection, state_dir, verbose=verbose, catalog_only=catalog_only)
    running = server_status(state_dir) if embedded else None
    if running is not None:   # the embedded Derby catalog admits one JVM at a time
        raise EngineError(f"the project's warm local Spark engine (pid {running.pid}, {running.url}) holds its "
                          "catalog; stop it with `meshbot engine stop` to run Spark inside this command, or let "
                          f"the command attach to it (no `warm: false`, no {WARM_VARIABLE}=0)")
    if embedded:
        hold_catalog(state_dir)
    builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    where = "local, in this process" if master.startswith("local") else f"master {mask_url(master)}, driver here"
    with StartLine(f"Starting Spark ({where})", begun=True):
        if verbose:
            session = _create(builder.enableHiveSupport(), master)
        else:
            log_path = state_dir / JVM_LOG
            _launch_quiet_gateway(master, settings, log_path)
            session = _create(builder.enableHiveSupport(), master, log_path)
            session.sparkContext.setLogLevel("ERROR")
        if embedded:
            _refuse_foreign_catalog(session, state_dir)
    return session


def _build_warm(builder, connection: SparkConnection, master: str, state_dir: Path) -> "SparkSession":
    """A Spark Connect session on the project's warm local engine (bot.spark.local_server), started
    first when none runs with these settings. The server has the local session's settings, warehouse
    and catalog; a server this call started is checked, as a local session is, to own its catalog."""
    settings, embedded = _local_settings(connection, state_dir, verbose=False, catalog_only=False)
    log = state_dir / ENGINE_DIR / ENGINE_LOG
    with StartLine(f"Starting Spark (local, warm engine, kept for later commands; log: {log})") as line:
        record, started = attach(state_dir, master=master, settings=settings,
                                 idle_s=connection.warm_idle_minutes * 60, notice=lambda _: line.begin())
        session = _create(builder.remote(record.url), f"the local Spark engine at {record.url}", log)
        if embedded and started:
            try:
                _refuse_foreign_catalog(session, state_dir)
            except EngineError:
                stop_server(state_dir)
                raise
    return session


def _local_settings(connection: SparkConnection, state_dir: Path, *, verbose: bool,
                    catalog_only: bool) -> tuple[dict[str, str], bool]:
    """The settings of a session this machine runs (in this process or as the warm engine), and whether
    its catalog and warehouse are meshbot's own under `state_dir` (refused first when copied)."""
    settings = dict(LOCAL_DEFAULTS)
    settings.update({
        "spark.sql.warehouse.dir": str(state_dir / "warehouse"),
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.javax.jdo.option.ConnectionURL":
            f"jdbc:derby:;databaseName={state_dir / 'metastore_db'};create=true",
        "spark.hadoop.datanucleus.schema.autoCreateAll": "true",
        "spark.hadoop.hive.metastore.schema.verification": "false",
    })
    embedded = _embedded_catalog(settings, dict(connection.config))
    if embedded:
        _refuse_copied_catalog(state_dir)
        settings.update(EMBEDDED_WAREHOUSE_DEFAULTS)
    settings.update(dict(connection.config))
    settings["spark.driver.extraJavaOptions"] = java_options(
        state_dir, settings.get("spark.driver.extraJavaOptions", ""), verbose=verbose, catalog_only=catalog_only)
    return settings, embedded


def _embedded_catalog(defaults: dict[str, str], user: dict[str, str]) -> bool:
    """True when the catalog and the warehouse are meshbot's own under `.meshbot/` (no user override).

    >>> _embedded_catalog({}, {"spark.sql.warehouse.dir": "s3a://lake/wh"})
    False
    >>> _embedded_catalog({}, {"spark.sql.shuffle.partitions": "8"})
    True
    """
    overrides = ("spark.sql.warehouse.dir", "spark.sql.catalogImplementation",
                 "spark.hadoop.javax.jdo.option.ConnectionURL", "spark.hadoop.hive.metastore.uris")
    return not any(key in user and user[key] != defaults.get(key) for key in overrides)


def _refuse_copied_catalog(state_dir: Path) -> None:
    """Refuse at once when `catalog_owner` says the catalog under `state_dir` was made for another warehouse."""
    warehouse = (state_dir / "warehouse").resolve()
    try:
        recorded = (state_dir / CATALOG_OWNER).read_text().strip()
    except OSError:
        return   # no record (a catalog from before it was kept): the running session's check decides
    if recorded and (state_dir / "metastore_db").is_dir() and Path(recorded) != warehouse:
        raise EngineError(_foreign_catalog_message(state_dir, f"it was made for the warehouse {recorded}"))


def _refuse_foreign_catalog(session: "SparkSession", state_dir: Path) -> None:
    """Stop before any write when the embedded catalog places databases in another project's warehouse.

    The Derby metastore stores absolute locations: a project copied (or moved) with its `.meshbot/`
    still has `default` and every meshbot database in the original's warehouse, so its tables
    would be written, overwritten and dropped there. Once checked, the warehouse is recorded in
    `catalog_owner` so that the next copy is refused before its JVM starts.
    """
    warehouse = (state_dir / "warehouse").resolve()
    foreign = foreign_databases(session.catalog.listDatabases(), warehouse)
    if not foreign:
        owner = state_dir / CATALOG_OWNER
        if not owner.is_file() or owner.read_text().strip() != str(warehouse):
            owner.write_text(f"{warehouse}\n")
        return
    session.stop()
    name, location = foreign[0]
    others = f" (and {len(foreign) - 1} more database(s))" if len(foreign) > 1 else ""
    raise EngineError(_foreign_catalog_message(
        state_dir, f"database `{name}` lives in {location}{others}, outside this project's warehouse {warehouse}"))


def foreign_databases(databases, warehouse: Path) -> list[tuple[str, Path]]:
    """(name, location) of the catalog's databases that live in another project's meshbot warehouse.

    `databases` are Spark's `catalog.listDatabases()` entries; `default` counts wherever it lives
    outside `warehouse`, other databases only when they sit in some `.meshbot/warehouse`.
    """
    from urllib.parse import unquote, urlparse

    foreign = []
    for database in databases:
        uri = urlparse(database.locationUri or "")
        if uri.scheme not in ("", "file"):
            continue
        location = Path(unquote(uri.path)).resolve()
        if location.is_relative_to(warehouse):
            continue
        if database.name == "default" or "/.meshbot/warehouse" in location.as_posix():
            foreign.append((database.name, location))
    return foreign


def _foreign_catalog_message(state_dir: Path, evidence: str) -> str:
    return (f"the catalog in {state_dir / 'metastore_db'} belongs to another copy of this project: "
            f"{evidence}, so meshbot would write into that project's tables. Nothing was written. Copy a "
            f"project without its .meshbot/ directory, or remove {state_dir} here (catalog, warehouse and "
            "SQLite state of this copy) and plan again")


# A JVM that only runs catalog statements never runs long enough for HotSpot's C2 compiler to pay:
# every statement walks a large body of Spark, Hive, DataNucleus and Derby code, which C2 keeps
# recompiling on a core of its own (as much CPU as the statements themselves). C1 alone made a
# 300-model first deploy 1.5x faster on 2 cores (benchmarks/README.md); data work keeps C2.
# DataNucleus throws and catches an exception inside most metastore reads, and each one records
# the whole Java stack, which through the analysis of a view over views runs to hundreds of frames:
# keeping the top 64 frames made analyzing a view 12 views deep ~18% faster.
CATALOG_ONLY_JVM = ("-XX:TieredStopAtLevel=1", "-XX:MaxJavaStackTraceDepth=64")


def java_options(state_dir: Path, user_options: str = "", *, verbose: bool = False,
                 catalog_only: bool = False) -> str:
    """The driver JVM's options: Derby's home, (unless verbose) meshbot's log4j profile and (for a
    catalog-only session) the C1-only compiler and shorter stack traces, then the user's, which win
    over meshbot's.

    >>> java_options(Path("/p/.meshbot"), "-Xss4m")  # doctest: +ELLIPSIS
    '-Dderby.system.home=/p/.meshbot -Dlog4j2.configurationFile=file:...log4j2.properties -Xss4m'
    >>> java_options(Path("/p/.meshbot"), verbose=True)
    '-Dderby.system.home=/p/.meshbot'
    >>> java_options(Path("/p/.meshbot"), "-XX:TieredStopAtLevel=4", verbose=True, catalog_only=True)
    '-Dderby.system.home=/p/.meshbot -XX:TieredStopAtLevel=1 -XX:MaxJavaStackTraceDepth=64 -XX:TieredStopAtLevel=4'
    """
    options = [f"-Dderby.system.home={state_dir}"]
    if not verbose:
        options.append(f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG}")
    if catalog_only:
        options.extend(CATALOG_ONLY_JVM)
    if user_options.strip():
        options.append(user_options.strip())
    return " ".join(options)


def _launch_quiet_gateway(master: str, settings: dict[str, str], log_path: Path) -> None:
    """Start the driver JVM with its stdout and stderr in `log_path`, unless this process has one already.

    The JVM writes to its stderr before log4j is configured (`WARNING: Using incubator modules`,
    `Picked up JAVA_TOOL_OPTIONS`, ...) and the Python workers it starts inherit its streams, so
    the only way to keep the terminal clean is to give the process its own streams. pyspark's
    `launch_gateway(popen_kwargs=...)` exists for this; the SparkContext built on that gateway is
    the one `getOrCreate()` then returns.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if getattr(SparkContext, "_gateway", None) is not None:
        return   # a JVM is running already (a stopped session being rebuilt): pyspark reuses it
    conf = SparkConf(loadDefaults=False).setAppName("meshbot").setMaster(master).setAll(list(settings.items()))
    with open(log_path, "wb") as log:   # the child keeps its own copy of the descriptor
        try:
            gateway = launch_gateway(conf, popen_kwargs={"stdout": log, "stderr": log})
        except Exception as exc:  # noqa: BLE001 - the JVM did not start: say why, from its own output
            raise EngineError(_start_failure(master, exc, log_path)) from exc
    try:
        SparkContext(conf=conf, gateway=gateway)
    except Exception as exc:  # noqa: BLE001
        raise EngineError(_start_failure(master, exc, log_path)) from exc


def _quiet_python_loggers() -> None:
    """Silence PySpark's own Python loggers that write to stderr.

    Every analysis error is also logged as a JSON line by PySpark (through a handler of its own)
    before it is raised; meshbot reports the raised error itself, so the log line only repeats it.
    """
    logging.getLogger("py4j").setLevel(logging.ERROR)
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:  # pragma: no cover - older PySpark without structured logging
        return
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL + 1)


def _build_remote(builder, connection: SparkConnection) -> "SparkSession":
    """A Spark Connect session; the server owns the catalog and warehouse, so no Hive/Derby settings."""
    check_reachable(connection.remote)
    for key, value in SESSION_DEFAULTS.items():
        builder = builder.config(key, value)
    session = _create(builder.remote(connection.remote), connection.remote)
    for key, value in connection.config:
        # Set one by one: the builder drops settings the server rejects (static ones) without a word.
        try:
            session.conf.set(key, value)
        except Exception as exc:  # noqa: BLE001 - name the setting the server refused
            raise EngineError(f"Spark Connect at {mask_url(connection.remote)} rejected `{key}` "
                              "(connection.config): "
                              f"{spark_message(exc)}; set it when starting the server instead") from None
    return session


def _create(builder, target: str, log_path: Path | None = None) -> "SparkSession":
    try:
        return builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - surface Spark start failures as one clear error
        raise EngineError(_start_failure(target, exc, log_path)) from exc


def _start_failure(target: str, exc: BaseException, log_path: Path | None) -> str:
    """One paragraph: the exception's first line, then the end of the JVM's own output when it went to a file."""
    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    message = f"could not start Spark ({mask_url(target)}): {first_line}"
    tail = jvm_output_tail(log_path) if log_path is not None else ""
    if tail:
        message += f"\nJVM output ({log_path}):\n{tail}"
    return message


def jvm_output_tail(log_path: Path, lines: int = 15) -> str:
    """The last `lines` lines of the JVM log that say something (launcher notices left out).

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "spark.log"
    >>> _ = path.write_text("WARNING: Using incubator modules: jdk.incubator.vector\\nJAVA_HOME is not set\\n")
    >>> jvm_output_tail(path)
    'JAVA_HOME is not set'
    >>> jvm_output_tail(path.with_name("missing.log"))
    ''
    """
    try:
        text = log_path.read_text(errors="replace")
    except OSError:
        return ""
    kept = [line for line in text.splitlines() if line.strip() and not line.startswith(_LAUNCHER_NOTICES)]
    return "\n".join(kept[-lines:])


# Lines the JVM launcher and Spark print on every start; never the reason a start failed.
_LAUNCHER_NOTICES = ("WARNING: Using incubator modules", "Picked up JAVA_TOOL_OPTIONS", "Picked up _JAVA_OPTIONS",
                     "NOTE: Picked up JDK_JAVA_OPTIONS",
                     "Setting default log level", "To adjust logging level", "Using Spark's default log4j profile")


def _python() -> str:
    import sys

    return sys.executable
