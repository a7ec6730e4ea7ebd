"""Build the one SparkSession a process uses: local with a persistent catalog, a cluster, or Spark Connect."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from bot.errors import EngineError
from bot.project.config import SparkConnection
from bot.spark.connect import check_reachable, is_connect
from bot.spark.engine import spark_message

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")
_LOCK = threading.Lock()
_SESSION: "SparkSession | None" = None

# SQL semantics meshbot relies on (INSERT OVERWRITE replaces only the written partitions, UTC,
# non-ANSI casts, Parquet tables). Runtime settings, so they apply to Spark Connect sessions too;
# users override any of them in `config`.
SESSION_DEFAULTS: dict[str, str] = {
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.legacy.createHiveTableByDefault": "false",
    "spark.sql.sources.default": "parquet",
    "spark.sql.ansi.enabled": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}

# Settings that keep a session this process starts (local or on a master URL) quick to start and quiet.
LOCAL_DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.driver.memory": "2g",
    **SESSION_DEFAULTS,
}


def get_session(connection: SparkConnection, *, state_dir: Path) -> "SparkSession":
    """Return the process's SparkSession, creating it on first use.

    Sessions this process starts (`master`: local or a cluster URL) keep an embedded Derby
    metastore and, unless `config` sets `spark.sql.warehouse.dir`, the warehouse under `state_dir`
    (the project's `.meshbot/`), so tables survive between runs. With `remote` (Spark Connect)
    the server owns the catalog and warehouse; only SESSION_DEFAULTS and `config` are sent.
    """
    global _SESSION
    with _LOCK:
        if _SESSION is not None and not _is_stopped(_SESSION):
            return _SESSION
        _SESSION = _build(connection, state_dir)
        return _SESSION


def stop_session() -> None:
    global _SESSION
    with _LOCK:
        if _SESSION is not None:
            _SESSION.stop()
            _SESSION = None


def _is_stopped(session: "SparkSession") -> bool:
    try:
        if is_connect(session):
            return bool(session.is_stopped)
        context = getattr(session, "_sc", None)
        return context is not None and context._jsc is None
    except Exception:  # noqa: BLE001 - a broken session is as good as stopped
        return True


def _build(connection: SparkConnection, state_dir: Path) -> "SparkSession":
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("meshbot")
    if connection.remote:
        return _build_remote(builder, connection)

    master = connection.master or "local[*]"
    os.environ.setdefault("PYSPARK_PYTHON", _python())
    if master.startswith("local"):
        # On a cluster the workers must reach the driver, so it cannot bind to loopback there.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    logging.getLogger("py4j").setLevel(logging.ERROR)
    state_dir = state_dir.resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    settings = dict(LOCAL_DEFAULTS)
    settings.update({
        "spark.sql.warehouse.dir": str(state_dir / "warehouse"),
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.javax.jdo.option.ConnectionURL":
            f"jdbc:derby:;databaseName={state_dir / 'metastore_db'};create=true",
        "spark.hadoop.datanucleus.schema.autoCreateAll": "true",
        "spark.hadoop.hive.metastore.schema.verification": "false",
        "spark.driver.extraJavaOptions": (f"-Dderby.system.home={state_dir} "
                                          f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG}"),
    })
    settings.update(dict(connection.config))
    builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = _create(builder.enableHiveSupport(), master)
    session.sparkContext.setLogLevel("ERROR")
    return session


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
            raise EngineError(f"Spark Connect at {connection.remote} rejected `{key}` (connection.config): "
                              f"{spark_message(exc)}; set it when starting the server instead") from None
    return session


def _create(builder, target: str) -> "SparkSession":
    try:
        return builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - surface Spark start failures as one clear error
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise EngineError(f"could not start Spark ({target}): {first_line}") from exc


def _python() -> str:
    import sys

    return sys.executable
