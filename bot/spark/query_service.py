"""The warm engine's query socket: `fetchdf` rows from the watchdog's own Spark Connect session, so a command
that only reads rows never imports PySpark, pandas or Arrow (about 2 s of a 2-core machine) nor opens a
session of its own.

The watchdog (bot.spark.watchdog) serves `query.sock` in the engine folder (mode 0600, owner only) once
the server answers, and opens its Connect session at once. One request per connection: a JSON line
`{"sql": ..., "limit": ...}`; the reply is a JSON line `{"rows": [...]}` (each value as JSON has it, or as
text: what `fetchdf` prints for it), `{"error": ...}` (meshbot's own error text, as SparkEngine.fetch gives
it) or `{"fallback": true}` (a value only the session itself shows faithfully: a nested value holding one
JSON has no form for, such as a map with integer keys). Any trouble on the way means the caller queries
through its own session, as before.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable

SOCKET = "query.sock"
_MAX_REPLY = 256 * 1024 * 1024   # a reply beyond this is not a small query's: the caller's own session reads it


class _NotFaithful(Exception):
    """A value JSON cannot carry so that the caller prints it as the session would have."""


def wire_value(value: Any) -> Any:
    """`value` as the JSON that prints, in a table and as `fetchdf --json`, exactly as the value would.

    >>> wire_value(None), wire_value(1.5), wire_value(Decimal("1.10")), wire_value(date(2024, 1, 2))
    (None, 1.5, '1.10', '2024-01-02')
    >>> wire_value({"a": [1, "x"]})
    {'a': [1, 'x']}
    >>> wire_value({1: "a"})
    Traceback (most recent call last):
    ...
    bot.spark.query_service._NotFaithful: {1: 'a'}
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (datetime, date, time, timedelta, Decimal, bytes, bytearray)):
        return str(value)   # a table shows str(value), and --json (default=str) the same text
    if isinstance(value, list) and all(_plain(item) for item in value):
        return value
    if isinstance(value, dict) and all(isinstance(key, str) for key in value) and all(map(_plain, value.values())):
        return value
    raise _NotFaithful(repr(value))


def _plain(value: Any) -> bool:
    """JSON-native all the way down (so `str()` of it reads back the same)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, list):
        return all(map(_plain, value))
    if isinstance(value, dict):
        return all(isinstance(key, str) for key in value) and all(map(_plain, value.values()))
    return False


# -------------------------------------------------------------------------------- the caller
def query(engine_dir: Path, sql: str, limit: int | None, *, timeout_s: float = 3600.0) -> list[dict[str, Any]] | None:
    """The rows of `sql` from the warm engine's socket; None when the caller should query itself (no socket,
    nobody listening, a value the socket cannot carry, a broken reply). A query error is an EngineError."""
    from bot.errors import EngineError

    path = engine_dir / SOCKET
    if not path.is_socket():
        return None
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(timeout_s)
            client.connect(str(path))
            client.sendall(json.dumps({"sql": sql, "limit": limit}).encode() + b"\n")
            client.shutdown(socket.SHUT_WR)
            reply = _read_all(client)
        answer = json.loads(reply) if reply else None
    except (OSError, ValueError):
        return None
    if not isinstance(answer, dict):
        return None
    if isinstance(answer.get("error"), str):
        raise EngineError(answer["error"])
    rows = answer.get("rows")
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        return None
    return rows


def _read_all(connection: socket.socket) -> bytes:
    chunks, size = [], 0
    while chunk := connection.recv(1 << 16):
        chunks.append(chunk)
        size += len(chunk)
        if size > _MAX_REPLY:
            raise ValueError("reply too large")
    return b"".join(chunks)


# -------------------------------------------------------------------------------- the watchdog's side
def start(engine_dir: Path, port: int, *, touch: Callable[[], None]) -> None:
    """The watchdog's call once its server answers on `port`; without the socket commands query on their own."""
    try:
        serve(engine_dir, f"sc://127.0.0.1:{port}", touch=touch)
    except Exception as error:  # noqa: BLE001 - the engine serves on without it
        print(f"meshbot: no query socket: {error}", file=sys.stderr, flush=True)


def remove(engine_dir: Path) -> None:
    with contextlib.suppress(OSError):
        (engine_dir / SOCKET).unlink()


def serve(engine_dir: Path, url: str, *, touch: Callable[[], None], session: Any = None) -> threading.Thread:
    """Listen on `query.sock` in a daemon thread, each request answered on a thread of its own through one
    Connect session to `url` (opened now, so the first request finds it ready); `touch` marks the engine
    used. `session`: anything with `fetch(sql, limit) -> reply` instead (tests). Returns the listening thread."""
    path = engine_dir / SOCKET
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    previous = os.umask(0o177)   # the socket is born 0600: only the project's owner may query through it
    try:
        listener.bind(str(path))
    finally:
        os.umask(previous)
    listener.listen(8)
    if session is None:
        session = _Session(url)
        threading.Thread(target=session.warm, name="meshbot-query-session", daemon=True).start()

    def answer(connection: socket.socket) -> None:
        with connection:
            try:
                request = json.loads(_read_all(connection) or b"null")
                touch()
                reply = session.fetch(str(request["sql"]), request.get("limit"))
            except Exception as error:  # noqa: BLE001 - any failure here: the caller queries itself
                reply = _failure(error)
            with contextlib.suppress(OSError):
                connection.sendall(json.dumps(reply).encode() + b"\n")

    def accept() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=answer, args=(connection,), name="meshbot-query", daemon=True).start()

    thread = threading.Thread(target=accept, name="meshbot-query-socket", daemon=True)
    thread.start()
    return thread


def _failure(error: BaseException) -> dict[str, Any]:
    from bot.errors import BotError

    if isinstance(error, BotError):
        return {"error": str(error)}
    return {"fallback": True}


class _Session:
    """One Spark Connect session to the engine, opened once (on first use, or early by `get` on a thread)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._lock = threading.Lock()
        self._session: Any = None

    def get(self) -> Any:
        with self._lock:
            if self._session is None or getattr(self._session, "is_stopped", False):
                from pyspark.sql import SparkSession

                self._session = SparkSession.builder.appName("meshbot-query").remote(self.url).getOrCreate()
            return self._session

    def warm(self) -> None:
        """Open the session ahead of the first request; a failure is met again, and answered, by that request."""
        with contextlib.suppress(Exception):
            self.get()

    def fetch(self, sql: str, limit: Any) -> dict[str, Any]:
        from bot.spark.engine import SparkEngine

        rows = SparkEngine(self.get()).fetch(sql, limit=int(limit) if limit is not None else None)
        try:
            return {"rows": [{str(key): wire_value(value) for key, value in row.items()} for row in rows]}
        except _NotFaithful:
            return {"fallback": True}
