"""What a command can do on the project's warm engine without a Spark session of its own: whether one runs with
the gateway's settings, and `fetchdf` rows through its query socket (bot.spark.query_service)."""

from __future__ import annotations

from pathlib import Path

from bot.project.config import SparkConnection
from bot.spark import query_service
from bot.spark.local_server import ENGINE_DIR, hold_client, settings_digest, status, warm_wanted
from bot.spark.session import _local_settings


def warm_rows(connection: SparkConnection, *, state_dir: Path, sql: str, limit: int | None) -> list[dict] | None:
    """`sql`'s rows from the project's warm engine through its query socket, when one runs with this
    gateway's settings; None when this process should query on a session of its own."""
    if not warm_running(connection, state_dir):
        return None
    engine_dir = state_dir.resolve() / ENGINE_DIR
    hold_client(engine_dir)   # a client while it queries: the idle watchdog leaves the engine up
    return query_service.query(engine_dir, sql, limit)


def warm_running(connection: SparkConnection, state_dir: Path) -> bool:
    """Whether the gateway runs on the warm engine and the project's engine is up with its settings now
    (so attaching starts nothing)."""
    master = connection.master or "local[*]"
    if not warm_wanted(master, connection.remote, connection.warm):
        return False
    state_dir = state_dir.resolve()
    settings, _ = _local_settings(connection, state_dir, verbose=False, catalog_only=False)
    record = status(state_dir)
    return record is not None and record.digest == settings_digest(master, settings, connection.warm_idle_minutes * 60)
