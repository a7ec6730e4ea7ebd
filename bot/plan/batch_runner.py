"""Run a plan's work on Spark: a model batch (render, materialize by kind, audit), views, before_all/after_all."""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Callable, Iterable, Mapping, Sequence

from bot.faults import checkpoint
from bot.plan.claims import Claims
from bot.plan.definition import ProgressCallback
from bot.plan.env_statements import EnvironmentStatements
from bot.plan.evaluator import PlanEvaluator
from bot.project.config import ProjectConfig
from bot.project.loader import AuditDefinition
from bot.project.model import KindName, Model
from bot.project.render import render_expression, render_sql, render_statements
from bot.plan.snapshot_models import SnapshotModels
from bot.quality.results import AuditResult
from bot.quality.audits import run_audits
from bot.snapshot import Snapshot
from bot.spark import materialize
from bot.spark.engine import SparkEngine
from bot.spark.python_context import python_model_frame, session_properties
from bot.spark.schema_owner import claim_schema, schema_owner
from bot.spark.sql import quote_table
from bot.spark.usage import JobUsage, measured
from bot.state.protocol import Interval, StateSync

VIEW_THREADS = 4      # the default of connection.concurrent_tasks


@dataclass
class SparkRunner:
    """Implements bot.plan.evaluator.BatchRunner on a SparkEngine."""

    engine: SparkEngine
    context_models: Mapping[str, Model]
    config: ProjectConfig
    gateway: str
    audits: Mapping[str, AuditDefinition]
    concurrent_tasks: int = VIEW_THREADS     # views created / dropped at once
    _first_runs: set[str] = field(default_factory=set)   # the next batch replaces the table's rows
    _created: set[str] = field(default_factory=set)      # made by this process: its first batch is `creating`

    def __post_init__(self) -> None:
        self.model_for = SnapshotModels(self.context_models)   # snapshot -> the model it was built from

    def ensure_schemas(self, schemas: Iterable[str]) -> None:
        """Create missing physical schemas and list each one once, so tables created afterwards (from several
        threads) are checked against one listing per schema, not a catalog call per table."""
        names = sorted(set(schemas))
        self.engine.create_schemas(names)
        self.engine.physical_schemas.update(name.lower() for name in names)
        for schema in names:
            self.engine.existing_objects(schema)

    def schema_owner(self, schema: str) -> str | None:
        """The id of the meshbot state that owns physical schema `schema` (None: unclaimed)."""
        return schema_owner(self.engine, schema)

    def claim_schema(self, schema: str, state_id: str) -> None:
        claim_schema(self.engine, schema, state_id)

    def table_exists(self, table: str) -> bool:
        return self.engine.table_exists(table)

    def schema_objects(self, schema: str) -> set[str]:
        """Lower-case names of the tables and views in `schema` (from the engine's cached listing)."""
        return set(self.engine.existing_objects(schema))

    def task_scope(self) -> Callable[[int], contextlib.AbstractContextManager]:
        """Called on the applying thread: slot -> a context giving the task its own FAIR scheduler
        pool (`meshbot_<slot>`) and this thread's job group (no pools on Spark Connect)."""
        inherited = self.engine.job_properties()
        return lambda slot: self.engine.scheduler_pool(f"meshbot_{slot}", inherited)

    def metered(self) -> contextlib.AbstractContextManager[JobUsage]:
        """Around one batch: what its Spark jobs cost (task time, bytes read; None on Spark Connect)."""
        return measured(self.engine.session)

    def forget_table(self, table: str) -> None:
        """Another process wrote `table` since this one last did: drop the first-run flag (its rows
        may be there now), the watermark, cached listings and Spark's file index of the table."""
        self._first_runs.discard(table)
        self._created.discard(table)
        self.engine.invalidate(table)
        if self.engine.table_exists(table):
            self.engine.sql(f"REFRESH TABLE {quote_table(table)}")

    def first_run(self, table: str) -> None:
        """Its version has no recorded interval: the next batch replaces the table's rows (a killed
        writer's, or a killed janitor's table pushed again) rather than adding to them."""
        self._first_runs.add(table)

    def settle_table(self, table: str) -> bool:
        """Under the table's version lease: whether it exists now (a catalog call, not the cached
        listing), a swap its killed writer left half done finished first."""
        return materialize.settle_table(self.engine, table)

    def create_physical(self, snapshot: Snapshot, model: Model, *, table: str,
                        table_mapping: Mapping[str, str]) -> None:
        self.engine.physical_schemas.add(table.rsplit(".", 1)[0].lower())
        if self.engine.table_exists(table):
            return
        query_sql = None
        if model.query is not None and not model.columns and not _self_referencing(model):
            query_sql = self._render(model, table=table, mapping=table_mapping, interval=None,
                                     execution_time=None)
        try:
            materialize.create_physical(self.engine, kind=self._kind(model), table=table,
                                        query_sql=query_sql, columns=model.columns or None,
                                        partitioned_by=model.partitioned_by, model=model)
        except Exception:
            # another process sharing the catalog may have created it at the same moment
            self.engine.invalidate(table)
            if not self.engine.table_exists(table):
                raise
            return
        self._first_runs.add(table)
        self._created.add(table)
        if model.physical_properties and model.kind.name is not KindName.VIEW:
            self.engine.set_table_properties(table, model.physical_properties)

    def evaluate(self, snapshot: Snapshot, model: Model, *, table: str, interval: Interval,
                 table_mapping: Mapping[str, str], execution_time: int) -> None:
        with session_properties(self.engine, model.session_properties):
            self._evaluate(model, table=table, interval=interval, table_mapping=table_mapping,
                           execution_time=execution_time)

    def _evaluate(self, model: Model, *, table: str, interval: Interval, table_mapping: Mapping[str, str],
                  execution_time: int) -> None:
        start, end = interval
        kwargs = self._render_kwargs(model, table=table, mapping=table_mapping,
                                     interval=interval, execution_time=execution_time)
        # SQLMesh renders a table's first evaluation (its table did not exist before) as `creating`,
        # except for INCREMENTAL_BY_TIME_RANGE, whose every batch is `evaluating` (checked on 0.236.4)
        # (a batch that only replaces rows a crash left, in a table that existed, is `evaluating`)
        first = table in self._created and model.kind.name is not KindName.INCREMENTAL_BY_TIME_RANGE
        kwargs["runtime_stage"] = "creating" if first else "evaluating"
        for statement in render_statements(model, model.pre_statements, **kwargs):
            self.engine.execute(statement)
        if model.kind.name is KindName.SEED:
            query: Any = None
        elif model.is_python:
            query = python_model_frame(self.engine, model, mapping=table_mapping, start=start, end=end,
                                       execution_time=execution_time, variables=self.config.variables,
                                       gateway=self.gateway)
        else:
            query = render_sql(model, **kwargs)
        materialize.evaluate(self.engine, kind=self._kind(model), table=table, query=query,
                             start=start, end=end, execution_time=execution_time,
                             first_run=table in self._first_runs, model=model)
        self._first_runs.discard(table)
        self._created.discard(table)
        for statement in render_statements(model, model.post_statements, **kwargs):
            self.engine.execute(statement)

    def audit(self, snapshot: Snapshot, model: Model, *, table: str, interval: Interval,
              execution_time: int, table_mapping: Mapping[str, str] | None = None) -> Sequence[AuditResult]:
        if not model.audits:
            return ()
        return run_audits(engine=self.engine, model=model, audit_defs=self.audits,
                          table=table, start=interval[0], end=interval[1],
                          execution_time=execution_time, variables=self.config.variables,
                          table_mapping=table_mapping)

    def environment_statements(self, statements: EnvironmentStatements, environment: str) -> None:
        """The config's `before_all` or `after_all`, parsed beforehand: macros (`@this_env`, `@gateway`,
        variables) rendered, each statement run on Spark."""
        for expression in statements.expressions:
            for item in render_expression(expression, model=statements.owner, dialect=statements.owner.dialect,
                                          variables={**self.config.variables, "this_env": environment},
                                          gateway=self.gateway, runtime_stage=statements.key):
                self.engine.execute(item.sql(dialect="spark"), subject=f"running `{statements.key}` of the config")

    def replace_views(self, views: Mapping[str, str]) -> None:
        """CREATE OR REPLACE each view over its table, a few at a time (the metastore accepts
        concurrent DDL; each statement is mostly analysis and metastore round trips)."""
        if not views:
            return
        self.engine.create_schemas(sorted({name.rsplit(".", 1)[0] for name in views}))
        _concurrently([(self._create_view, (view, table)) for view, table in views.items()],
                      threads=self.concurrent_tasks)

    def _create_view(self, view: str, table: str) -> None:
        self.engine.create_star_view(view, table)
        checkpoint("between-views")

    def drop_views(self, views: Iterable[str]) -> None:
        _concurrently([(self.engine.drop_view, (view,)) for view in views], threads=self.concurrent_tasks)

    def existing_views(self, views: Iterable[str]) -> set[str]:
        """Those of `views` that exist, from one fresh listing per schema."""
        wanted = list(views)
        schemas = {view.rsplit(".", 1)[0] for view in wanted}
        listed = {schema: self.engine.existing_objects(schema, fresh=True) for schema in schemas}
        return {view for view in wanted
                if view.rsplit(".", 1)[1].lower() in listed[view.rsplit(".", 1)[0]]}

    def _kind(self, model: Model):
        if model.kind.name is KindName.SEED and model.seed_abs_path is not None:
            return replace(model.kind, seed_path=str(model.seed_abs_path))
        return model.kind

    def _render_kwargs(self, model: Model, *, table: str, mapping: Mapping[str, str],
                       interval: Interval | None, execution_time: int | None) -> dict[str, Any]:
        start, end = interval if interval else (None, None)
        return dict(start=start, end=end, execution_time=execution_time,
                    variables=self.config.variables, table_mapping={**mapping, model.name: table},
                    models=self.context_models, gateway=self.gateway, this_model=table,
                    runtime_stage="evaluating")

    def _render(self, model: Model, *, table: str, mapping: Mapping[str, str],
                interval: Interval | None, execution_time: int | None) -> str:
        kwargs = self._render_kwargs(model, table=table, mapping=mapping, interval=interval,
                                     execution_time=execution_time)
        return render_sql(model, **{**kwargs, "runtime_stage": "creating"})


@dataclass(frozen=True)
class SparkWork:
    """What an apply, a run or a rollback works with: the state, a runner on Spark (with the project's
    config) and the leases."""

    state: StateSync
    runner: SparkRunner
    claims: Claims | None = None

    def evaluator(self, *, statements: tuple[EnvironmentStatements, EnvironmentStatements] | None = None,
                  progress: ProgressCallback | None = None) -> PlanEvaluator:
        """A PlanEvaluator with the project's settings; `statements`, the config's before_all and
        after_all, run around each apply."""
        runner, config = self.runner, self.runner.config
        before_all = after_all = None
        if statements is not None:
            before_all, after_all = (partial(runner.environment_statements, parsed) for parsed in statements)
        return PlanEvaluator(state=self.state, runner=runner, models_for=runner.model_for,
                             environment_ttl=config.environment_ttl, progress=progress,
                             default_start=config.model_defaults.start, concurrent_tasks=runner.concurrent_tasks,
                             claims=self.claims, before_all=before_all, after_all=after_all)


def _concurrently(calls: Sequence[tuple[Callable[..., Any], tuple[Any, ...]]], *,
                  threads: int = VIEW_THREADS) -> None:
    """Run the calls on up to `threads` threads; the first failure (in call order) is raised after all end."""
    if len(calls) <= 1 or threads <= 1:
        for function, args in calls:
            function(*args)
        return
    with ThreadPoolExecutor(max_workers=min(threads, len(calls))) as pool:
        futures = [pool.submit(function, *args) for function, args in calls]
    for future in futures:
        future.result()


def _self_referencing(model: Model) -> bool:
    return model.name in model.depends_on
