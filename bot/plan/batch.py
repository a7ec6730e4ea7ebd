"""One batch of one model: evaluate, audit and record it, under its version's lease when leases are on."""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping, Protocol, Sequence

from bot.errors import BotError, EngineError
from bot.faults import checkpoint
from bot.timeline.intervals import subtract
from bot.plan.claims import Claims, Notice, version_key
from bot.plan.definition import BatchStarted, StillRunning
from bot.project.model import KindName, Model
from bot.quality.results import AuditResult, audit_error
from bot.snapshot import Snapshot
from bot.state.protocol import Interval, StateSync

HEARTBEAT_S = 30.0   # a running batch says so this often (a CI log never goes quiet longer)


class BatchRunner(Protocol):
    """What the evaluator needs from the Spark side; implemented by bot.context's SparkRunner."""

    def ensure_schemas(self, schemas: Iterable[str]) -> None: ...

    def create_physical(self, snapshot: Snapshot, model: Model, *, table: str,
                        table_mapping: Mapping[str, str]) -> None: ...

    def evaluate(self, snapshot: Snapshot, model: Model, *, table: str, interval: Interval,
                 table_mapping: Mapping[str, str], execution_time: int) -> None: ...

    def audit(self, snapshot: Snapshot, model: Model, *, table: str, interval: Interval,
              execution_time: int, table_mapping: Mapping[str, str] | None = None) -> Sequence[AuditResult]: ...

    def replace_views(self, views: Mapping[str, str]) -> None: ...

    def drop_views(self, views: Iterable[str]) -> None: ...

    # Optional: `forget_table(table)` drops what the runner remembers of a table another process
    # wrote since (SparkRunner: first-run flags, watermarks, cached listings and file indexes).
    # Optional: `first_run(table)`: the table's version has no recorded interval, so its next batch
    # replaces whatever rows it holds (a killed writer's or janitor's) instead of adding to them.
    # Optional: `table_exists(table)` answers from a cached listing; `settle_table(table)`, called
    # under the table's version lease, answers from the catalog now and finishes a swap a killed
    # writer left half done (SparkRunner).
    # Optional: `task_scope()`, called on the applying thread, returns slot -> context manager that
    # each concurrent task runs in (SparkRunner: a FAIR scheduler pool per slot).
    # Optional: `metered()` returns a context manager around a batch's evaluate and audit that yields
    # a BatchUsage, filled when the block ends (SparkRunner: from Spark's status store).


class BatchUsage(Protocol):
    """What a batch's Spark jobs cost; None where the engine does not report it (Spark Connect)."""

    executor_ms: int | None     # task run time summed over its tasks
    bytes_read: int | None


@dataclass(frozen=True)
class BatchDone:
    """One batch's outcome: audit warnings, or `reused` when another process had recorded it meanwhile."""

    warnings: tuple[object, ...] = ()
    reused: bool = False


@dataclass(frozen=True)
class BatchWriter:
    """Runs batches for apply (backfills) and `run` (cron-due intervals), so both behave the same.

    With `claims`, each batch is written under its version's lease (one writer per model version
    at a time, across processes); batches running on several threads pass one `lock`, so state
    is written by one thread at a time.
    """

    state: StateSync
    runner: BatchRunner
    claims: Claims | None = None
    purpose: str = ""
    notice: Notice | None = None
    lock: threading.Lock | None = None
    heartbeat_s: float = HEARTBEAT_S   # how often `notice` hears that a batch is still running
    # key -> the version's recorded intervals as last read under its lease, plus what this writer
    # recorded since; valid while nobody else holds it in between
    _recorded: dict[str, list[Interval]] = field(default_factory=dict)

    def run(self, *, snapshot: Snapshot, model: Model, table: str, batch: Interval,
            mapping: Mapping[str, str], execution_time: int, is_dev: bool = False,
            record: bool = True) -> BatchDone:
        """Evaluate one batch, audit it and record its interval at once.

        Under the lease the version's recorded intervals are read again (unless nobody else held it
        since this writer last did): a batch another process recorded meanwhile is not written
        again (`reused`), except for an INCREMENTAL_BY_TIME_RANGE model with a lookback, whose plans
        and runs recompute recorded intervals on purpose (SQLMesh's lookback: late rows of the last
        N intervals; each batch replaces its interval). When someone else held the lease last, the
        runner forgets what it knew of the table first, so a batch that process appended without
        recording it (killed) is replaced, never appended twice.
        """
        key = version_key(snapshot.name, snapshot.version)
        if not record:   # a view recreated: nothing to record, but a materialized one swaps its table in
            with self.claims.hold(key, self.purpose, notice=self.notice) if self.claims is not None \
                    else contextlib.nullcontext():
                return BatchDone(tuple(self._write(snapshot, model, table, batch, mapping, execution_time,
                                                   is_dev, record)))
        if self.claims is None:
            self._first_run_unless(self._recorded_for(key, _UNLEASED, snapshot, is_dev), table)
            return BatchDone(tuple(self._write(snapshot, model, table, batch, mapping, execution_time,
                                               is_dev, record, key=key)))
        with self.claims.hold(key, self.purpose, notice=self.notice) as lease:
            previous = lease.previous.owner if lease.previous is not None else None
            recorded = self._recorded_for(key, previous, snapshot, is_dev)
            if previous is not None and previous != self.claims.owner:
                # before a reuse too: this process may have created the table (first-run flag) and then
                # reuse every batch another writer recorded; its next own batch must add, not replace
                forget = getattr(self.runner, "forget_table", None)
                if forget is not None:
                    forget(table)
            if _covered(recorded, batch) and not _looks_back(model):
                return BatchDone(reused=True)
            self._first_run_unless(recorded, table)
            warnings = self._write(snapshot, model, table, batch, mapping, execution_time, is_dev, record,
                                   key=key)
        return BatchDone(tuple(warnings))

    def _first_run_unless(self, recorded: list[Interval], table: str) -> None:
        """Nothing recorded for the version: this batch replaces the table's rows, whatever a killed
        writer or janitor left there (a table the state does not know is never appended to)."""
        first_run = getattr(self.runner, "first_run", None)
        if not recorded and first_run is not None:
            first_run(table)

    def _recorded_for(self, key: str, previous: str | None, snapshot: Snapshot,
                      is_dev: bool) -> list[Interval]:
        """What was recorded when this lease was taken: the last read plus this writer's own batches
        when only this writer held it since, else read from state now (so once per version in a
        serial backfill; a key nobody held yet may have intervals recorded before leases existed)."""
        mine = self.claims.owner if self.claims is not None else _UNLEASED
        if previous != mine or key not in self._recorded:
            found = self.state.get_intervals([(snapshot.name, snapshot.version)]).get(
                (snapshot.name, snapshot.version))
            self._recorded[key] = list((found.dev_intervals if is_dev else found.intervals) if found else [])
        return self._recorded[key]

    def _write(self, snapshot: Snapshot, model: Model, table: str, batch: Interval,
               mapping: Mapping[str, str], execution_time: int, is_dev: bool, record: bool,
               key: str | None = None) -> list[object]:
        started = time.monotonic()
        metered = getattr(self.runner, "metered", None) if record else None   # unrecorded: nowhere to keep it
        label = f"{snapshot.name} {fmt_interval(batch)}"
        if self.notice is not None:
            self.notice(BatchStarted(label))
        with heartbeat(self.notice, label, self.heartbeat_s), \
                metered() if metered is not None else contextlib.nullcontext() as usage:
            try:
                self.runner.evaluate(snapshot, model, table=table, interval=batch, table_mapping=mapping,
                                     execution_time=execution_time)
            except EngineError as exc:
                raise model_failed(model, f"failed for {fmt_interval(batch)}", exc) from exc
            except BotError:
                raise
            except Exception as exc:  # noqa: BLE001 - Spark errors arrive as many Java/Python types
                raise model_failed(model, f"failed for {fmt_interval(batch)}", exc) from exc
            results = self.runner.audit(snapshot, model, table=table, interval=batch,
                                        execution_time=execution_time, table_mapping=mapping)
        error = audit_error(results)
        if error is not None:
            raise error
        if record:
            if key is not None and self.claims is not None and self.claims.lost(key):
                raise EngineError(f"model `{snapshot.name}` {fmt_interval(batch)}: this process lost its lease "
                                  "on the table (it stalled longer than the lease lasts) and another "
                                  "process may have written it; re-run")
            with self.lock or contextlib.nullcontext():
                self.state.add_interval(snapshot.name, snapshot.version, batch, is_dev=is_dev,
                                        elapsed_ms=round((time.monotonic() - started) * 1000),
                                        executor_ms=getattr(usage, "executor_ms", None),
                                        bytes_read=getattr(usage, "bytes_read", None))
            if key is not None:
                self._recorded.setdefault(key, []).append(batch)
            checkpoint("mid-backfill")
        return [r for r in results if not r.passed]


@contextlib.contextmanager
def heartbeat(notice: Notice | None, label: str, every_s: float) -> Iterator[None]:
    """While the block runs, `notice` hears `label still running (N s)` every `every_s` seconds (from a
    daemon thread; nothing when `notice` is None)."""
    if notice is None:
        yield
        return
    done = threading.Event()
    started = time.monotonic()

    def beat() -> None:
        while not done.wait(every_s):
            notice(StillRunning(f"{label} still running ({time.monotonic() - started:.0f} s)"))

    thread = threading.Thread(target=beat, name="meshbot-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


_UNLEASED = "\0"   # this writer as the previous holder of a version it writes without leases


def _looks_back(model: Model) -> bool:
    """Its plans and runs recompute recorded intervals on purpose: a lookback on a kind whose batch
    replaces its interval (an append-only kind would add the rows again)."""
    return bool(model.kind.lookback) and model.kind.name is KindName.INCREMENTAL_BY_TIME_RANGE


def model_failed(model: Model, what: str, error: BaseException) -> EngineError:
    """Spark's error about a model's physical table, naming the model and its file instead.

    An error that already names the model (a custom materialization's) keeps its own text after it.
    """
    text = str(error) if isinstance(error, EngineError) else first_line(error)
    where = f"{model.path}:{model.line}" if model.line else str(model.path)
    return EngineError(f"model `{model.name}` ({where}) {what}: {text}")


def _covered(spans: list[Interval], batch: Interval) -> bool:
    return bool(spans) and not subtract([batch], spans)


def run_batch(*, state: StateSync, runner: BatchRunner, snapshot: Snapshot, model: Model,
              table: str, batch: Interval, mapping: Mapping[str, str], execution_time: int,
              is_dev: bool = False, record: bool = True,
              lock: threading.Lock | None = None) -> list[object]:
    """One batch without leases (a single writer); returns non-blocking audit warnings."""
    done = BatchWriter(state=state, runner=runner, lock=lock).run(
        snapshot=snapshot, model=model, table=table, batch=batch, mapping=mapping,
        execution_time=execution_time, is_dev=is_dev, record=record)
    return list(done.warnings)


def fmt_interval(interval: Interval) -> str:
    start, end = (time.strftime("%Y-%m-%d %H:%M", time.gmtime(v / 1000)) for v in interval)
    return f"[{start}, {end})"


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("at ", "JVM stacktrace")):
            return line[:500]
    return type(exc).__name__
