"""Build the one SparkSession a process uses: local with a persistent catalog, a cluster, or Spark Connect."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from bot.errors import EngineError
from bot.project.config import SparkConnection

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")
_LOCK = threading.Lock()
_SESSION: "SparkSession | None" = None

# Settings that keep a local session quick to start and quiet; users override any of them in `config`.
LOCAL_DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "2g",
    "spark.sql.legacy.createHiveTableByDefault": "false",
    "spark.sql.sources.default": "parquet",
    "spark.sql.ansi.enabled": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}


def get_session(connection: SparkConnection, *, state_dir: Path) -> "SparkSession":
    """Return the process's SparkSession, creating it on first use.

    Local sessions keep an embedded Derby metastore and the warehouse under `state_dir`
    (the project's `.meshbot/`), so tables survive between runs.
    """
    global _SESSION
    with _LOCK:
        if _SESSION is not None and not _is_stopped(_SESSION):
            return _SESSION
        _SESSION = _build(connection, state_dir)
        return _SESSION


def active_session() -> "SparkSession | None":
    return _SESSION


def stop_session() -> None:
    global _SESSION
    with _LOCK:
        if _SESSION is not None:
            _SESSION.stop()
            _SESSION = None


def _is_stopped(session: "SparkSession") -> bool:
    try:
        context = getattr(session, "_sc", None)
        return context is not None and context._jsc is None
    except Exception:  # noqa: BLE001 - a broken session is as good as stopped
        return True


def _build(connection: SparkConnection, state_dir: Path) -> "SparkSession":
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", _python())
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    logging.getLogger("py4j").setLevel(logging.ERROR)
    builder = SparkSession.builder.appName("meshbot")
    if connection.remote:
        builder = builder.remote(connection.remote)
        for key, value in connection.config:
            builder = builder.config(key, value)
        return _create(builder, connection.remote)

    state_dir = state_dir.resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    master = connection.master or "local[*]"
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


def _create(builder, target: str) -> "SparkSession":
    try:
        return builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - surface Spark start failures as one clear error
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise EngineError(f"could not start Spark ({target}): {first_line}") from exc


def _python() -> str:
    import sys

    return sys.executable
