"""The embedded Derby catalog's lock: one process at a time runs Spark on a project's `.meshbot/metastore_db`."""

from __future__ import annotations

import fcntl
import os
import sys
from pathlib import Path

from bot.errors import EngineError

# Under state_dir: held (flock) by the one process whose JVM has the embedded Derby catalog open; it
# holds that process's pid.
CATALOG_LOCK = "catalog.lock"
_HOLDS: list[int] = []   # this process's descriptors of catalog.lock (closed when its session stops)


def hold_catalog(state_dir: Path) -> None:
    """The embedded Derby catalog admits one JVM at a time: this process takes `catalog.lock` under
    `state_dir` for as long as it runs Spark (the lock goes with the process), and while another meshbot
    process holds it, says so in one line naming its pid and waits for it to finish."""
    path = state_dir / CATALOG_LOCK
    if path.is_symlink():
        raise EngineError(f"{path} is a symlink; meshbot keeps its own lock files only as plain files")
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(descriptor, 32, 0).decode(errors="replace").strip() or "unknown"
            print(f"Waiting for meshbot (pid {holder}) to finish: it runs Spark on this project's embedded "
                  f"catalog ({state_dir / 'metastore_db'}), which admits one process at a time",
                  file=sys.stderr, flush=True)
            fcntl.flock(descriptor, fcntl.LOCK_EX)
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
    except BaseException:
        os.close(descriptor)
        raise
    _HOLDS.append(descriptor)


def release_catalog() -> None:
    """Let the next process in (this one's session stopped)."""
    while _HOLDS:
        os.close(_HOLDS.pop())
