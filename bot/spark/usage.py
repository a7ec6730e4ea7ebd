"""What the Spark jobs of one block of code cost: executor run time and bytes read, from Spark's status store."""

from __future__ import annotations

import contextlib
import functools
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from bot.spark.connect import is_connect

log = logging.getLogger(__name__)

_SETTLE_MS = 2000   # at most this long for the listener bus to record the jobs' last task ends


@dataclass
class JobUsage:
    """Summed over the stages of the measured jobs; None where Spark does not report them."""

    executor_ms: int | None = None   # task run time, summed over all tasks (executor-milliseconds)
    bytes_read: int | None = None    # bytes the tasks read from tables and files


@contextlib.contextmanager
def measured(session: Any) -> Iterator[JobUsage]:
    """Tag the Spark jobs this thread runs inside the block and, when it finishes without an error,
    fill the yielded JobUsage from the SparkContext's live status store (kept with the UI disabled too).

    A job tag is a local property of this thread (PySpark's pinned threads keep them per Python
    thread; SQL broadcasts and subqueries carry them over), so batches on other threads are not
    counted. Spark Connect has no SparkContext in this process and its client reports neither
    figure reliably (only periodic progress): the usage stays None there.
    """
    usage = JobUsage()
    tag = f"meshbot-{uuid.uuid4().hex}"
    context = _tagged(session, tag)
    if context is None:
        yield usage
        return
    try:
        yield usage
    finally:
        with contextlib.suppress(Exception):
            context.removeJobTag(tag)
    try:
        usage.executor_ms, usage.bytes_read = _read(context, tag)
    except Exception as exc:  # noqa: BLE001 - the status store is Spark's internal API: no figures then
        log.debug("no Spark job metrics for %s: %s", tag, exc)


def _tagged(session: Any, tag: str) -> Any:
    """The session's SparkContext once `tag` is added to this thread's jobs; None on Spark Connect."""
    if is_connect(session):
        return None
    try:
        context = session.sparkContext
        context.addJobTag(tag)
    except Exception as exc:  # noqa: BLE001 - measuring must never fail the batch it measures
        log.debug("cannot tag Spark jobs: %s", exc)
        return None
    return context


def _read(context: Any, tag: str) -> tuple[int, int]:
    """(executor ms, bytes read) of the jobs tagged `tag`, each stage counted once (a job may list a
    stage an earlier job ran: it shows as skipped there)."""
    store = _store(context)
    with contextlib.suppress(Exception):   # a timeout: figures from what the store holds so far
        store.bus.waitUntilEmpty(_SETTLE_MS)
    stages: set[int] = set()
    for job in store.jobs_tracker.getJobIdsForTag(tag):
        info = store.tracker.getJobInfo(job)
        if info is not None:
            stages.update(info.stageIds())
    executor_ms = bytes_read = 0
    for stage in stages:
        data = store.stages.lastStageAttempt(stage)
        executor_ms += data.executorRunTime()
        bytes_read += data.inputBytes()
    return executor_ms, bytes_read


@dataclass(frozen=True)
class _Store:
    """The JVM objects `_read` asks, fetched once per SparkContext (each fetch is a JVM round trip)."""

    bus: Any            # LiveListenerBus
    jobs_tracker: Any   # SparkStatusTracker (Scala): job ids per tag
    tracker: Any        # JavaSparkStatusTracker: a job's stages, or null
    stages: Any         # AppStatusStore: a stage's metrics


@functools.lru_cache(maxsize=2)
def _store(context: Any) -> _Store:
    scala = context._jsc.sc()
    return _Store(scala.listenerBus(), scala.statusTracker(), context._jsc.statusTracker(), scala.statusStore())
