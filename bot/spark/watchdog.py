"""The warm engine's watchdog process (`python -m bot.spark.watchdog ENGINE_DIR IDLE_SECONDS MASTER PORT`): runs
the Spark Connect server JVM as its child, serves the query socket, and stops the JVM once no command has used
it for IDLE_SECONDS (bot.spark.local_server starts it and keeps its record)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from bot.spark import query_service
from bot.spark.local_server import (CLIENTS_LOCK, LAST_USED, PROPERTIES, SERVER_CLASS, START_LOCK, STOP_TIMEOUT_S,
                                    _answers, _locked, _remove_record, spark_home)


def serve(engine_dir: Path, idle_s: float, master: str, port: int) -> int:
    """Run the Spark Connect server JVM as a child; stop it after `idle_s` without clients (counted once
    it answers on `port`), or on SIGTERM."""
    submit = spark_home() / "bin" / "spark-submit"
    try:
        child = subprocess.Popen([str(submit), "--master", master, "--properties-file",
                                  str(engine_dir / PROPERTIES), "--class", SERVER_CLASS], stdin=subprocess.DEVNULL)
    except OSError as exc:   # one line in server.log, which the starting command shows
        print(f"cannot run {submit}: {exc.strerror or exc}", file=sys.stderr, flush=True)
        return 1
    stopping = []

    def on_signal(signum, frame):  # noqa: ARG001
        stopping.append(signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, on_signal)
    last_busy = time.time()
    ready = False
    poll_s = min(15.0, max(0.5, idle_s / 10))
    while not stopping:
        try:
            child.wait(timeout=poll_s if ready else 0.5)   # ready: serve the query socket soon after
            break   # the JVM ended by itself
        except subprocess.TimeoutExpired:
            pass
        if not ready:
            ready = _answers(port)
            last_busy = time.time()
            if ready:
                query_service.start(engine_dir, port, touch=(engine_dir / LAST_USED).touch)
            continue
        with _locked(engine_dir / CLIENTS_LOCK, wait=False) as idle:
            if not idle:
                last_busy = time.time()
                continue
        with contextlib.suppress(OSError):
            last_busy = max(last_busy, (engine_dir / LAST_USED).stat().st_mtime)
        if time.time() - last_busy >= idle_s and _stop_idle(engine_dir, child):
            query_service.remove(engine_dir)
            return 0
    _stop_child(child)
    query_service.remove(engine_dir)
    with _locked(engine_dir / START_LOCK, wait=False) as free:
        if free:   # else a command holds it and is stopping or replacing this server: it edits the record
            _remove_record(engine_dir, os.getpid())
    return 0


def _stop_idle(engine_dir: Path, child: subprocess.Popen) -> bool:
    """Stop the JVM and remove the record, unless a command is attaching or attached meanwhile."""
    with _locked(engine_dir / START_LOCK, wait=False) as free_to_start:
        if not free_to_start:
            return False
        with _locked(engine_dir / CLIENTS_LOCK, wait=False) as no_clients:
            if not no_clients:
                return False
            _stop_child(child)
            _remove_record(engine_dir, os.getpid())
            return True


def _stop_child(child: subprocess.Popen) -> None:
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


if __name__ == "__main__":
    code = serve(Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
    sys.stdout.flush(), sys.stderr.flush()
    os._exit(code)   # not sys.exit: it would wait for the threads the query socket's Connect client leaves
