"""Run one task over many items in forked worker processes (a cold load: parsing and rendering models)."""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
from typing import Any, Callable

MIN_ITEMS = 64     # fewer items than this are done serially: a fork and a transfer cost more than they save
MAX_WORKERS = 8
WORKERS_VARIABLE = "MESHBOT_WORKERS"   # a number of workers instead of the idle-CPU estimate (0: none)
# A worker started with the collector paused frees no garbage (an AST's nodes form cycles; 40-400 KB
# per model parsed and rendered), which is quicker than freeing it (-15% on a cold load), until the
# workers have grown by GARBAGE_BUDGET together (each by its share); from then on a worker frees
# the garbage of every COLLECT_EVERY items.
GARBAGE_BUDGET = 1 << 30
COLLECT_EVERY = 256


def _cpus() -> int:
    """CPUs this process may run on that other processes are not keeping busy right now.

    On a machine already busy (a shared CI runner, a Spark job), workers only compete for the same
    CPUs, and their transfers and duplicated set-up make the load slower than a serial one.
    """
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:   # not Linux
        cpus = os.cpu_count() or 1
    busy = _runnable_elsewhere()
    if busy is None:
        try:
            busy = os.getloadavg()[0] - 1   # the 1-minute average, this process included
        except OSError:   # no load average here
            return cpus
    return max(0, min(cpus, round(cpus - busy)))


def _runnable_elsewhere(readings: int = 3) -> int | None:
    """Threads of other processes runnable at this moment: the median of a few readings of Linux's
    count in /proc/loadavg (`running/total`), less this process. None where there is no such file.

    The 1-minute load average would still count the work of the minute before (a `pip install`,
    the previous command), which has ended by now.
    """
    counts = []
    for reading in range(readings):
        try:
            with open("/proc/loadavg", encoding="ascii") as handle:
                counts.append(int(handle.read().split()[3].split("/")[0]) - 1)
        except (OSError, ValueError, IndexError):
            return None
        if reading < readings - 1:
            time.sleep(0.002)
    return sorted(counts)[len(counts) // 2]


def _single_threaded() -> bool:
    return threading.active_count() == 1


def worker_count(items: int) -> int:
    """How many worker processes to fork for `items` tasks; 0 means doing them here, serially.

    Only with the fork start method (workers inherit the loaded modules, the settings and the models,
    and cost ~10 ms each), with at least two CPUs idle at that moment, and when this process runs a
    single thread: a lock another thread holds at the fork (Spark's py4j, a scheduler) would stay
    held forever in the child. MESHBOT_WORKERS=N sets the number of idle CPUs instead (0 or 1: serial).
    """
    if items < MIN_ITEMS or not hasattr(os, "fork") or not _single_threaded():
        return 0
    chosen = os.environ.get(WORKERS_VARIABLE, "").strip()
    workers = min(int(chosen) if chosen.isdigit() else _cpus(), MAX_WORKERS, items)
    return workers if workers > 1 else 0


def fork_map(task: Callable[[int], Any], count: int, workers: int, *,
             meanwhile: Callable[[], None] | None = None) -> list[Any]:
    """[task(0), ..., task(count - 1)], computed by `workers` forked processes.

    Each takes the next item from a shared counter, so a process the machine slows down takes fewer.
    This process does none of the items: what its share would leave in memory (parse garbage,
    parsed ASTs) would stay for the rest of the command. It runs `meanwhile` (work the command
    needs next, e.g. imports; it must start no thread) once the workers are started, then waits.

    A result is None where the task returned None, raised, or its process died: the caller does
    those items again itself, so errors are raised (and results built) exactly as by a serial loop.
    Results of the forked processes travel pickled: `task` should return bytes or plain values.
    """
    import multiprocessing   # here: every meshbot command imports the loader, few fork

    context = multiprocessing.get_context("fork")
    counter = context.Value("q", 0)
    started = []
    try:
        for _ in range(workers):
            receiver, sender = context.Pipe(duplex=False)
            process = context.Process(target=_child, args=(task, count, counter, sender, GARBAGE_BUDGET // workers),
                                      daemon=True)
            process.start()
            sender.close()
            started.append((receiver, process))
        if meanwhile is not None:
            meanwhile()
        done: list[tuple[int, Any]] = []
        for receiver, _ in started:
            try:
                done += receiver.recv()
            except (EOFError, OSError):   # the process died (killed, out of memory): its items stay None
                pass
    except BaseException:   # interrupted here: the workers' results are not wanted any more
        for _, process in started:
            process.terminate()
        raise
    finally:
        for receiver, process in started:
            receiver.close()
            process.join()
    results: list[Any] = [None] * count
    for index, result in done:
        results[index] = result
    return results


def _work(task: Callable[[int], Any], count: int, counter: Any, budget: int) -> list[tuple[int, Any]]:
    """The items this process takes, done; with the collector paused, garbage is freed only once
    this process has grown by `budget` bytes."""
    done = []
    paused = not gc.isenabled()
    start = _peak_memory() if paused else 0
    while True:
        if paused and done and len(done) % COLLECT_EVERY == 0 and _peak_memory() - start > budget:
            gc.collect(0)   # only what was made since the last one
        with counter.get_lock():
            index = counter.value
            counter.value = index + 1
        if index >= count:
            return done
        try:
            done.append((index, task(index)))
        except Exception:   # the caller does this item again and raises the error itself
            done.append((index, None))


def _peak_memory() -> int:
    """Bytes: the most this process has held in memory so far (a forked one: from its parent's size at the fork)."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024   # Linux counts kilobytes


def _child(task: Callable[[int], Any], count: int, counter: Any, sender: Any, budget: int) -> None:
    gc.freeze()   # the inherited objects are never collected here: no need to scan (and copy) them
    sender.send(_work(task, count, counter, budget))
    sender.close()
