"""`run`: evaluate the intervals each model's own cron has made due, in DAG order, never touching views."""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from bot.errors import PlanError
from bot.timeline.intervals import Interval, format_interval, interval_unit, missing_intervals
from bot.plan.backfill import due_batches_of
from bot.plan.batch import BatchRunner, BatchWriter
from bot.plan.claims import Claims, LeaseBusy, environment_key
from bot.plan.definition import ProgressCallback
from bot.plan.execution import finish_promotion, order_snapshots, raise_failures, task_scope_for
from bot.plan.parents import ParentCheck, model_end, model_start, require_parents
from bot.plan.schedule import run_tasks
from bot.plan.snapshot_models import SnapshotModels
from bot.project.dag import upstream_of
from bot.project.model import KindName, Model
from bot.project.render import render_sql
from bot.timeline.times import execution_ms
from bot.quality.results import AuditResult
from bot.snapshot import Snapshot, view_name
from bot.spark.engine import SparkEngine
from bot.spark.errors import spark_errors
from bot.spark.python_context import python_model_frame
from bot.state import protocol as state_protocol
from bot.state.protocol import Environment, StateSync

if TYPE_CHECKING:
    from bot.plan.batch_runner import SparkWork
    from bot.plan.env_statements import EnvironmentStatements

_NEVER_RUN = (KindName.EXTERNAL, KindName.EMBEDDED)


@dataclass(frozen=True)
class RunResult:
    """What a run evaluated: (model, start ms, end ms) per finished batch; reused ones another
    process recorded meanwhile."""

    environment: str
    execution_time: int
    evaluated: tuple[tuple[str, int, int], ...] = ()
    audit_warnings: tuple[AuditResult, ...] = ()
    reused: tuple[tuple[str, int, int], ...] = ()
    busy: str = ""      # skipped: who held the environment (a run asked not to wait for it)

    @property
    def nothing_due(self) -> bool:
        return not self.evaluated


@dataclass(frozen=True)
class RunWork:
    """The due batches of one snapshot, with the table they write to."""

    snapshot: Snapshot
    model: Model
    table: str
    is_dev: bool
    batches: tuple[Interval, ...]


def due_batches(model: Model, *, recorded: Sequence[Interval], execution_time: int,
                default_start: str | None = None) -> list[Interval]:
    """Batches of `model` its cron has made due by `execution_time` and that are not recorded.

    Incremental kinds get their missing intervals grouped by `batch_size`; full-refresh kinds
    (FULL, materialized VIEW) one batch spanning everything due; a non-materialized VIEW never runs;
    a SEED runs only until it has been loaded once.
    """
    kind = model.kind
    if kind.name in _NEVER_RUN or (kind.name is KindName.VIEW and not kind.materialized):
        return []
    if kind.name is KindName.SEED and recorded:
        return []
    start = model_start(model, default_start=default_start, execution_time=execution_time)
    end = model_end(model)
    missing = missing_intervals(start=start, end=end, cron=model.cron, recorded=recorded,
                                lookback=kind.lookback if kind.name.is_incremental else 0,
                                execution_time=execution_time)
    return due_batches_of(model, missing) if missing else []


def plan_run(*, state: StateSync, environment: Environment, models_for: Callable[[Snapshot], Model],
             execution_time: int, default_start: str | None = None) -> list[RunWork]:
    """The due work of every snapshot of `environment`, parents first (reads state only).

    Raises PlanError, before anything runs, when a due batch's parents lack that interval.
    """
    stored = state.get_snapshots([s.snapshot_id for s in environment.snapshots])
    missing = [s.name for s in environment.snapshots if s.snapshot_id not in stored]
    if missing:
        raise PlanError(f"environment `{environment.name}` references snapshots missing from state: "
                        + ", ".join(sorted(missing)[:10]))
    tables = environment.tables()
    recorded = state.get_intervals({(s.name, s.version) for s in stored.values()})
    work: list[RunWork] = []
    for snapshot in order_snapshots(stored.values()):
        model = models_for(snapshot)
        table = tables[snapshot.name]
        is_dev = table == snapshot.dev_table_name
        found = recorded.get((snapshot.name, snapshot.version))
        done = (found.dev_intervals if is_dev else found.intervals) if found else []
        due = due_batches(model, recorded=done, execution_time=execution_time,
                          default_start=default_start)
        if due:
            work.append(RunWork(snapshot=snapshot, model=model, table=table, is_dev=is_dev,
                                batches=tuple(due)))
    check = ParentCheck.from_state(snapshots={s.name: s for s in stored.values()}, tables=tables,
                                   recorded=recorded, models_for=models_for,
                                   execution_time=execution_time, default_start=default_start)
    require_parents(check, [(item.snapshot, item.batches, item.batches) for item in work])
    return work


def nothing_due(state: StateSync, environment: Environment, models: Mapping[str, Model], *,
                execution_time: int, default_start: str | None) -> bool:
    """Whether a run of `environment` would find nothing to do, decided from state and files before Spark
    starts (as SQLMesh's scheduler answers NOTHING_TO_DO before its environment statements): its promotion
    finished and no batch due. A due batch whose parents lack its interval is refused here already."""
    return environment.finalized_ts is not None and not plan_run(
        state=state, environment=environment, models_for=SnapshotModels(models),
        execution_time=execution_time, default_start=default_start)


def require_environment(state: StateSync, name: str) -> Environment:
    return state_protocol.require_environment(state, name, hint=f"run `meshbot plan {name}` first")


def run_environment(*, state: StateSync, runner: BatchRunner, models_for: Callable[[Snapshot], Model],
                    environment: str, execution_time: int, default_start: str | None = None,
                    progress: ProgressCallback | None = None, concurrent_tasks: int = 1,
                    claims: Claims | None = None, skip_when_busy: bool = False) -> RunResult:
    """Evaluate every due batch of `environment`, recording each one as soon as it finishes.

    Models run as plan apply backfills them: each model's batches in order, independent models up
    to `concurrent_tasks` at once, a model after everything upstream of it; a failure stops its
    downstream only, and the run then fails naming it. With `claims` the environment's lease is
    held throughout (a plan or run of it waits), so what is due is read only once it is this run's turn;
    with `skip_when_busy` a run that finds it held evaluates nothing and says who held it (`busy`).
    """
    if claims is None:
        return _run(state=state, runner=runner, models_for=models_for, environment=environment,
                    execution_time=execution_time, default_start=default_start, progress=progress,
                    concurrent_tasks=concurrent_tasks, claims=None)

    def notice(line: str) -> None:
        if progress:
            progress(line, 0, 0)

    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(claims.hold(environment_key(environment), f"run of `{environment}`",
                                            notice=notice, wait_s=0 if skip_when_busy else None))
        except LeaseBusy as busy:
            if not skip_when_busy:
                raise
            return RunResult(environment=environment, execution_time=execution_time, busy=busy.holder)
        return _run(state=state, runner=runner, models_for=models_for, environment=environment,
                    execution_time=execution_time, default_start=default_start, progress=progress,
                    concurrent_tasks=concurrent_tasks, claims=claims)


def run_on_spark(work: SparkWork, environment: str, *,
                 statements: tuple[EnvironmentStatements, EnvironmentStatements],
                 execution_time: str | None = None, progress: ProgressCallback | None = None,
                 skip_when_busy: bool = False) -> RunResult:
    """`run` of `environment`: the config's before_all `statements`, every due batch as of
    `execution_time` (default: now), then its after_all."""
    before_all, after_all = statements
    runner = work.runner
    runner.environment_statements(before_all, environment)
    result = run_environment(state=work.state, runner=runner, models_for=runner.model_for, environment=environment,
                             execution_time=execution_ms(execution_time),
                             default_start=runner.config.model_defaults.start, progress=progress,
                             concurrent_tasks=runner.concurrent_tasks, claims=work.claims,
                             skip_when_busy=skip_when_busy)
    runner.environment_statements(after_all, environment)
    return result


def _run(*, state: StateSync, runner: BatchRunner, models_for: Callable[[Snapshot], Model],
         environment: str, execution_time: int, default_start: str | None,
         progress: ProgressCallback | None, concurrent_tasks: int, claims: Claims | None) -> RunResult:
    finish_promotion(state, runner, environment)   # a killed plan's views come before anything else
    env = require_environment(state, environment)
    work = plan_run(state=state, environment=env, models_for=models_for,
                    execution_time=execution_time, default_start=default_start)
    mapping: Mapping[str, str] = env.tables()
    parents = {s.name: [p.name for p in s.parents]
               for s in state.get_snapshots([s.snapshot_id for s in env.snapshots]).values()}
    items = {item.snapshot.name: item for item in work}
    names = list(items)
    total = sum(len(item.batches) for item in work)
    evaluated: list[tuple[str, int, int]] = []
    reused: list[tuple[str, int, int]] = []
    warnings: list[Any] = []
    lock = threading.Lock()
    stop = threading.Event()
    scope = task_scope_for(runner, concurrent_tasks)

    def notice(line: str) -> None:
        if progress:
            progress(line, len(evaluated) + len(reused), total)

    writer = BatchWriter(state=state, runner=runner, claims=claims, purpose=f"run of `{environment}`",
                         notice=notice, lock=lock)

    def run_model(name: str, slot: int) -> None:
        item = items[name]
        unit = interval_unit(item.model.cron)
        with scope(slot):
            for batch in item.batches:
                if stop.is_set():
                    return
                done = writer.run(snapshot=item.snapshot, model=item.model, table=item.table, batch=batch,
                                  mapping=mapping, execution_time=execution_time, is_dev=item.is_dev)
                with lock:
                    warnings.extend(done.warnings)
                    (reused if done.reused else evaluated).append((name, batch[0], batch[1]))
                    if progress:
                        note = " (reused: written meanwhile by another process)" if done.reused else ""
                        progress(f"{name} [{format_interval(batch, unit)}]{note}",
                                 len(evaluated) + len(reused), total)

    order = {name: i for i, name in enumerate(names)}
    outcome = run_tasks(names, upstream_of(names, lambda n: parents.get(n, [])), run_model,
                        threads=concurrent_tasks, stop=stop)
    if outcome.failed:
        raise_failures(outcome.failed, outcome.skipped)
    evaluated.sort(key=lambda item: (order[item[0]], item[1]))
    reused.sort(key=lambda item: (order[item[0]], item[1]))
    return RunResult(environment=environment, execution_time=execution_time,
                     evaluated=tuple(evaluated), audit_warnings=tuple(warnings), reused=tuple(reused))


def prod_tables(state: StateSync, names: Iterable[str]) -> dict[str, str]:
    """What `evaluate` reads per model: its table in prod, else (not in prod yet) its prod view's name."""
    prod = state.get_environment("prod")
    tables = prod.tables() if prod else {}
    return {name: tables.get(name, view_name(name, "prod")) for name in names}


def evaluate_rows(*, engine: SparkEngine, model: Model, context_models: Mapping[str, Model],
                  table_mapping: Mapping[str, str], interval: Interval, execution_time: int,
                  variables: Mapping[str, Any], gateway: str, limit: int | None = None
                  ) -> list[dict[str, Any]]:
    """Rows of `model` for `interval`, read from the mapped tables; writes nothing, runs no statements."""
    if model.is_python:
        start, end = interval
        with spark_errors(f"evaluating {model.name}"):
            frame = python_model_frame(engine, model, mapping=table_mapping, start=start, end=end,
                                       execution_time=execution_time, variables=variables, gateway=gateway)
        return engine.collect(frame, limit=limit, subject=f"evaluating {model.name}")
    sql = query_sql(model=model, context_models=context_models, table_mapping=table_mapping,
                    interval=interval, execution_time=execution_time, variables=variables, gateway=gateway)
    return engine.fetch(sql, limit=limit, subject=f"evaluating {model.name}")


def query_sql(*, model: Model, context_models: Mapping[str, Model], table_mapping: Mapping[str, str],
              interval: Interval, execution_time: int, variables: Mapping[str, Any], gateway: str) -> str:
    """A SQL model's query for `interval` as Spark SQL, reading the mapped tables."""
    if model.query is None:
        raise PlanError(f"`{model.name}` ({model.kind.name.value}) has no query to evaluate; "
                        "evaluate works on SQL and Python models")
    start, end = interval
    return render_sql(model, start=start, end=end, execution_time=execution_time,
                      variables=variables, table_mapping=table_mapping, models=context_models,
                      gateway=gateway, this_model=table_mapping.get(model.name), runtime_stage="evaluating")
