"""A test-only fault hook, inert unless MESHBOT_KILL_AT is set.

`MESHBOT_KILL_AT=<point>` (or `<point>:<n>`) makes the process SIGKILL itself the first (n-th) time
it reaches `checkpoint(<point>)`, so tests can stop a plan at an exact step as a crash would.
Points: mid-backfill (after a batch is recorded), after-last-batch, after-state-write,
between-views (after a view is written), after-finalize (bot/plan/stages.py names the stage each
ends), janitor-after-state (its state transaction), janitor-between-drops.
"""

from __future__ import annotations

import os
import signal
import threading

_lock = threading.Lock()
_reached: dict[str, int] = {}


def checkpoint(point: str) -> None:
    spec = os.environ.get("MESHBOT_KILL_AT")
    if not spec:
        return
    name, _, nth = spec.partition(":")
    if name != point:
        return
    with _lock:
        _reached[point] = _reached.get(point, 0) + 1
        if _reached[point] >= int(nth or 1):
            os.kill(os.getpid(), signal.SIGKILL)
