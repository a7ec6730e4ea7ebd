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
    graph = _TaskGraph.of(names, upstream, keep_going=keep_going, stop=stop or threading.Event())
    if threads <= 1:
        _run_in_order(graph, work)
    else:
        _run_on_threads(graph, work, threads)
    graph.outcome.failed.sort(key=lambda item: graph.order[item[0]])
    graph.outcome.skipped.sort(key=graph.order.__getitem__)
    return graph.outcome


@dataclass
class _TaskGraph:
    """The tasks left to run: each one's unfinished dependencies, the ready ones (a heap in task order), and
    what failed, was skipped or must stop everything."""

    order: dict[str, int]
    children: dict[str, list[str]]
    waiting: dict[str, int]
    ready: list[tuple[int, str]]
    keep_going: bool
    stop: threading.Event
    outcome: Outcome = field(default_factory=Outcome)
    gone: set[str] = field(default_factory=set)            # failed or skipped
    fatal: list[BaseException] = field(default_factory=list)

    @classmethod
    def of(cls, names: Sequence[str], upstream: Mapping[str, set[str]], *, keep_going: bool,
           stop: threading.Event) -> _TaskGraph:
        order = {name: i for i, name in enumerate(names)}
        children: dict[str, list[str]] = {name: [] for name in names}
        waiting: dict[str, int] = {}
        for name in names:
            deps = {d for d in upstream.get(name, ()) if d in order and d != name}
            waiting[name] = len(deps)
            for dep in deps:
                children[dep].append(name)
        ready = [(order[name], name) for name in names if waiting[name] == 0]   # sorted: a heap
        return cls(order, children, waiting, ready, keep_going, stop)

    def settle(self, name: str, error: BaseException | None) -> None:
        """A task ended: its children may be ready, or (failed) its downstream is skipped."""
        if error is None:
            for child in self.children[name]:
                self.waiting[child] -= 1
                if self.waiting[child] == 0 and child not in self.gone:
                    heapq.heappush(self.ready, (self.order[child], child))
            return
        if not isinstance(error, BotError):
            self.fatal.append(error)
            self.stop.set()
            return
        self.outcome.failed.append((name, error))
        if not self.keep_going:
            self.stop.set()
        stopped = reachable(self.children, self.children[name]) - self.gone
        self.gone.update(stopped)
        self.outcome.skipped.extend(stopped)

    def next_ready(self) -> str | None:
        while self.ready:
            _, name = heapq.heappop(self.ready)
            if name not in self.gone:
                return name
        return None


def _run_in_order(graph: _TaskGraph, work: Callable[[str, int], None]) -> None:
    """One thread: the calling one, in task order, as a plain loop would."""
    while not graph.stop.is_set() and (name := graph.next_ready()) is not None:
        try:
            work(name, 0)
        except BaseException as exc:  # noqa: BLE001 - sorted out by settle
            graph.settle(name, exc)
            if graph.fatal:
                raise
            continue
        graph.settle(name, None)


def _run_on_threads(graph: _TaskGraph, work: Callable[[str, int], None], threads: int) -> None:
    free_slots = list(range(threads))[::-1]
    running: dict[Future, tuple[str, int]] = {}
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="meshbot-task") as pool:
        while True:
            while free_slots and not graph.stop.is_set() and (name := graph.next_ready()) is not None:
                slot = free_slots.pop()
                running[pool.submit(work, name, slot)] = (name, slot)
            if not running:
                break
            finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for future in sorted(finished, key=lambda f: graph.order[running[f][0]]):
                name, slot = running.pop(future)
                free_slots.append(slot)
                graph.settle(name, future.exception())
    if graph.fatal:
        raise graph.fatal[0]
