"""Run a DAG of named tasks on up to N threads: a task starts only after every task it depends on
finished; a failed task stops its downstream only.

Used for backfill and `run` (a task is one model's batches, run in order) and for creating
physical tables (a task is one table; a child's table is analyzed from its parents'). With one
thread everything runs in the calling thread, in the given order, exactly as a plain loop would.
"""

from __future__ import annotations

import heapq
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from bot.errors import BotError
from bot.project.dag import reachable


@dataclass
class Outcome:
    """What a schedule did: failed tasks with their error (in task order) and the tasks they stopped."""

    failed: list[tuple[str, BotError]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def run_tasks(names: Sequence[str], upstream: Mapping[str, set[str]], work: Callable[[str, int], None],
              *, threads: int, keep_going: bool = True, stop: threading.Event | None = None) -> Outcome:
    """Run `work(name, slot)` for every name once its `upstream` tasks (direct dependencies among
    `names`) succeeded; `slot` is the worker's number (0..threads-1), e.g. for a Spark scheduler pool.

    A BotError fails its task: with `keep_going` its downstream is skipped and independent tasks
    go on, otherwise nothing new starts. Any other exception (including BaseException: a simulated
    kill, KeyboardInterrupt) sets `stop`, lets running tasks end and is re-raised. Ready tasks start
    in `names` order whenever a worker is free, so `names` should list parents first.
    """
    stop = stop or threading.Event()
    order = {name: i for i, name in enumerate(names)}
    children: dict[str, list[str]] = {name: [] for name in names}
    waiting: dict[str, int] = {}
    for name in names:
        deps = {d for d in upstream.get(name, ()) if d in order and d != name}
        waiting[name] = len(deps)
        for dep in deps:
            children[dep].append(name)
    ready = [(order[name], name) for name in names if waiting[name] == 0]   # sorted: a heap
    outcome = Outcome()
    gone: set[str] = set()       # failed or skipped
    fatal: list[BaseException] = []

    def settle(name: str, error: BaseException | None) -> None:
        if error is None:
            for child in children[name]:
                waiting[child] -= 1
                if waiting[child] == 0 and child not in gone:
                    heapq.heappush(ready, (order[child], child))
            return
        if not isinstance(error, BotError):
            fatal.append(error)
            stop.set()
            return
        outcome.failed.append((name, error))
        if not keep_going:
            stop.set()
        stopped = reachable(children, children[name]) - gone
        gone.update(stopped)
        outcome.skipped.extend(stopped)

    def next_ready() -> str | None:
        while ready:
            _, name = heapq.heappop(ready)
            if name not in gone:
                return name
        return None

    if threads <= 1:
        while not stop.is_set() and (name := next_ready()) is not None:
            try:
                work(name, 0)
            except BaseException as exc:  # noqa: BLE001 - sorted out by settle
                settle(name, exc)
                if fatal:
                    raise
                continue
            settle(name, None)
    else:
        free_slots = list(range(threads))[::-1]
        running: dict[Future, tuple[str, int]] = {}
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="meshbot-task") as pool:
            while True:
                while free_slots and not stop.is_set() and (name := next_ready()) is not None:
                    slot = free_slots.pop()
                    running[pool.submit(work, name, slot)] = (name, slot)
                if not running:
                    break
                finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for future in sorted(finished, key=lambda f: order[running[f][0]]):
                    name, slot = running.pop(future)
                    free_slots.append(slot)
                    settle(name, future.exception())
        if fatal:
            raise fatal[0]
    outcome.failed.sort(key=lambda item: order[item[0]])
    outcome.skipped.sort(key=order.__getitem__)
    return outcome
