"""The engine's public API: one Context per project, with plan, apply, run, test, audit and table_diff."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from bot.errors import PlanError
from bot.plan.definition import Plan, PlanOptions, ProgressCallback
from bot.project.config import Gateway, ProjectConfig
from bot.project.model import Model
from bot.snapshot import normalize_environment
from bot.state.api import Environment, HistoryEntry

if TYPE_CHECKING:
    from bot.diff.review import ReviewOptions, ReviewResult
    from bot.diff.table_diff import TableDiffResult
    from bot.quality.api import AuditReport, AuditResult, TestSuiteResult
    from bot.plan.claims import Claims
    from bot.plan.env_statements import EnvironmentStatements
    from bot.plan.janitor import JanitorResult
    from bot.plan.estimate import BackfillEstimate
    from bot.plan.lint import LintResult
    from bot.plan.rollback import RollbackResult
    from bot.plan.cron_run import RunResult
    from bot.plan.batch_runner import SparkRunner
    from bot.project.loader import Project
    from bot.spark.engine import SparkEngine
    from bot.state.store import SqlStateSync


Row = dict[str, object]   # one result row: column name → the Python value Spark returned


@dataclass(frozen=True)
class ApplyResult:
    plan_id: str
    environment: str
    evaluated: tuple[tuple[str, int, int], ...]   # (model, start ms, end ms) batches computed
    views_created: int
    skipped_backfill: bool = False
    audit_warnings: tuple["AuditResult", ...] = ()
    reused: tuple[tuple[str, int, int], ...] = ()   # batches another process recorded meanwhile


def _import_plan_modules() -> None:
    """Import what a plan needs after the load (state and its SQLAlchemy, the plan builder), while
    worker processes parse a cold project and this process would only wait."""
    import importlib

    for module in ("bot.plan.builder", "bot.state.connect"):
        importlib.import_module(module)


class Context:
    """Composition root: loads the project lazily; state and Spark start only when first needed.

    Planning (`plan`) reads project files and state only; Spark starts on `apply`, `run`, `test`,
    `audit`, `table_diff`, `review`, `fetchdf` and `evaluate`. Heavy layers are imported inside
    the methods that need them, so that `plan --explain` never imports PySpark or SQLAlchemy's dialects.
    """

    def __init__(self, path: str | Path = ".", *, gateway: str | None = None, read_cache: bool = True) -> None:
        self.path = Path(path).resolve()
        self.gateway_name = gateway
        self.read_cache = read_cache   # False: parse and render everything, only write .meshbot/cache

    # -- lazily built parts -------------------------------------------------------------
    @cached_property
    def config(self) -> ProjectConfig:
        from bot.project.config import load_config

        return load_config(self.path)

    @cached_property
    def gateway(self) -> Gateway:
        return self.config.gateway(self.gateway_name)

    @cached_property
    def project(self) -> "Project":
        from bot.project.loader import load_project

        return load_project(self.path, config=self.config, read_cache=self.read_cache,
                            while_parsing=_import_plan_modules)

    def load(self) -> None:
        """Parse the project now rather than on the first call that needs it."""
        self.project  # noqa: B018 - builds the cached project

    def start_engine(self) -> None:
        """Start the Spark session now rather than on the first call that needs it."""
        self.engine  # noqa: B018 - builds the cached session

    @property
    def models(self) -> dict[str, Model]:
        return self.project.models

    @cached_property
    def state(self) -> "SqlStateSync":
        from bot.state.connect import connect_state

        return connect_state(self.gateway.state_connection, project_root=self.path)

    @cached_property
    def claims(self) -> "Claims":
        """This context's leases in the state (one applier per environment, one writer per batch)."""
        from bot.plan.claims import Claims

        return Claims(self.state)

    @cached_property
    def engine(self) -> "SparkEngine":
        return self._new_engine()

    def _new_engine(self, *, catalog_only: bool = False) -> "SparkEngine":
        from bot.spark.engine import SparkEngine
        from bot.spark.session import get_session

        return SparkEngine(get_session(self.gateway.connection, state_dir=self.path / ".meshbot",
                                       catalog_only=catalog_only))

    def _start_engine_for_catalog(self) -> None:
        """Start Spark for catalog statements only (see get_session), unless this context has it already."""
        if "engine" not in self.__dict__:
            self.__dict__["engine"] = self._new_engine(catalog_only=True)

    # -- plans --------------------------------------------------------------------------
    def plan(self, environment: str = "prod", *, options: PlanOptions = PlanOptions()) -> Plan:
        """Compute (never apply) the plan that brings `environment` to the project's state."""
        from bot.plan.builder import build_plan
        from bot.project.timeutil import now_ms

        env = normalize_environment(environment)
        if not env:
            raise PlanError("environment name is empty")
        lint_warnings = self.lint().check_before_plan(self.path) if self.config.linter.enabled else ()
        # the wall clock: the plan reads a relative --execution-time ('yesterday') against it, once
        plan = build_plan(project_models=self.models, dag=self.project.dag,
                          rendered=self.rendered_queries(), state=self.state, environment=env,
                          options=options, config=self.config, now_ms=now_ms())
        return replace(plan, warnings=lint_warnings + plan.warnings) if lint_warnings else plan

    def model_versions(self) -> dict[str, str]:
        """Each model's version identifier as the project's files define it (what a plan would name its
        snapshot); reads no state and starts no engine."""
        from bot.fingerprint import fingerprint_models

        fingerprints = fingerprint_models(self.models, self.project.dag.order, self.rendered_queries())
        return {name: fingerprint.identifier for name, fingerprint in fingerprints.items()}

    def backfill_estimates(self, plan: Plan) -> tuple["BackfillEstimate", ...]:
        """Each backfill of `plan` with its batches and, from earlier batches' recorded wall times, its duration."""
        from bot.plan.estimate import estimate_backfills

        names = {b.snapshot_id.name for b in plan.backfills}
        return estimate_backfills(plan, self.state.get_batch_times(names) if names else {})

    def rendered_queries(self) -> dict[str, str]:
        """Every SQL model rendered at the reference interval, for fingerprints and diffs (cached on disk)."""
        from bot.project.render_cache import reference_queries

        project = self.project
        return reference_queries(root=self.path, models=project.models, sources=project.source_digests,
                                 variables=self.config.variables, gateway=self.gateway.name,
                                 macro_files=project.macro_files, read_cache=self.read_cache)

    def apply(self, plan: Plan, *, progress: ProgressCallback | None = None) -> ApplyResult:
        """Apply a plan: its stages (bot.plan.stages) in order: tables, backfill (unless skipped), promotion, views."""
        from bot.plan.evaluator import PlanEvaluator

        before_all, after_all = self._environment_statements()   # before Spark: a bad one changes nothing
        if self._catalog_only(plan):
            self._start_engine_for_catalog()
        runner = self._spark_runner()
        evaluator = PlanEvaluator(state=self.state, runner=runner, models_for=runner.model_for,
                                  environment_ttl=self.config.environment_ttl, progress=progress,
                                  default_start=self.config.model_defaults.start,
                                  concurrent_tasks=self.gateway.connection.concurrent_tasks,
                                  claims=self.claims,
                                  before_all=lambda env: runner.environment_statements(before_all, env),
                                  after_all=lambda env: runner.environment_statements(after_all, env))
        log = evaluator.apply(plan)
        if not plan.options.skip_backfill:
            log.audit_warnings.extend(self._standalone_audits(evaluator.table_mapping(plan), plan))
        return ApplyResult(plan_id=plan.plan_id, environment=plan.environment,
                           evaluated=tuple(log.evaluated), views_created=log.views_created,
                           skipped_backfill=plan.options.skip_backfill,
                           audit_warnings=tuple(log.audit_warnings), reused=tuple(log.reused))

    def _catalog_only(self, plan: Plan) -> bool:
        """True when applying `plan` runs no batch and no audit: only tables, views and state.
        (The config's before_all/after_all statements still run; they are taken to be small.)"""
        standalone = (not plan.options.skip_backfill
                      and any(audit.standalone for audit in self.project.audits.values()))
        return not plan.backfills and not plan.audit_only and not standalone

    def _standalone_audits(self, mapping: dict[str, str], plan: Plan | None = None) -> list["AuditResult"]:
        """Run the `standalone true` audits on the environment's tables; a blocking failure raises,
        non-blocking ones come back as warnings."""
        from bot.project.timeutil import to_ms
        from bot.quality.api import raise_for_audits
        from bot.quality.audits import run_standalone_audits

        execution = plan.options.execution_time if plan is not None else None
        results = run_standalone_audits(self.engine, audit_defs=self.project.audits, table_mapping=mapping,
                                        variables=self.config.variables,
                                        execution_time=to_ms(execution) if execution else None)
        raise_for_audits(results)
        return [r for r in results if not r.passed]

    def machine_local_storage(self) -> tuple[str, ...]:
        """What the gateway keeps only on this machine (state file, embedded catalog, local warehouse)."""
        return self.gateway.machine_local_storage()

    # -- environments -------------------------------------------------------------------
    def environments(self) -> list[Environment]:
        return self.state.get_environments()

    def environment_history(self, environment: str) -> list[HistoryEntry]:
        """The plans `environment` served (applies and rollbacks), newest first."""
        env = normalize_environment(environment)
        if self.state.get_environment(env) is None:
            raise PlanError(f"environment `{env}` does not exist")
        return self.state.get_environment_history(env)

    def rollback(self, environment: str, *, to_plan_id: str | None = None) -> "RollbackResult":
        """Serve an earlier plan's snapshots again (default: the previous plan): views repointed to
        tables that still exist, nothing computed; the project's files are not read."""
        from bot.plan.evaluator import PlanEvaluator
        from bot.plan.rollback import rollback
        from bot.plan.batch_runner import SparkRunner

        self._start_engine_for_catalog()
        concurrent = self.gateway.connection.concurrent_tasks
        runner = SparkRunner(engine=self.engine, context_models={}, config=self.config,
                             gateway=self.gateway.name, audits={}, concurrent_tasks=concurrent)
        evaluator = PlanEvaluator(state=self.state, runner=runner, models_for=runner.model_for,
                                  concurrent_tasks=concurrent, claims=self.claims)
        return rollback(evaluator, normalize_environment(environment), to_plan_id=to_plan_id)

    def invalidate(self, environment: str, *, sync: bool = False) -> "JanitorResult | None":
        """Mark a dev environment expired; `sync` drops its views and schemas right away."""
        env = normalize_environment(environment)
        if env == "prod":
            raise PlanError("`prod` cannot be invalidated")
        if self.state.get_environment(env) is None:
            raise PlanError(f"environment `{env}` does not exist")
        self.state.invalidate_environment(env)
        if not sync:
            return None
        from bot.plan.janitor import clean_environment

        self._start_engine_for_catalog()
        return clean_environment(state=self.state, engine=self.engine, name=env, claims=self.claims)

    def janitor(self, *, ignore_ttl: bool = False,
                notice: Callable[[str], None] | None = None) -> "JanitorResult":
        """Remove expired environments and snapshots, once no plan or run is in flight."""
        from bot.plan.janitor import run_janitor

        self._start_engine_for_catalog()
        return run_janitor(state=self.state, engine=self.engine, ignore_ttl=ignore_ttl, claims=self.claims,
                           notice=notice)

    # -- operations ---------------------------------------------------------------------
    def run(self, environment: str = "prod", *, execution_time: str | None = None,
            progress: ProgressCallback | None = None) -> "RunResult":
        """Evaluate the intervals each model's cron has made due in `environment` (views untouched)."""
        from bot.plan.cron_run import require_environment, run_environment
        from bot.project.timeutil import now_ms, to_ms

        env = require_environment(self.state, normalize_environment(environment))
        before_all, after_all = self._environment_statements()
        runner = self._spark_runner()   # Spark starts only once the environment and statements are known
        runner.environment_statements(before_all, env.name)
        result = run_environment(state=self.state, runner=runner, models_for=runner.model_for,
                                 environment=env.name,
                                 execution_time=to_ms(execution_time) if execution_time else now_ms(),
                                 default_start=self.config.model_defaults.start, progress=progress,
                                 concurrent_tasks=self.gateway.connection.concurrent_tasks,
                                 claims=self.claims)
        runner.environment_statements(after_all, env.name)
        return result

    def evaluate(self, model_name: str, *, start: str, end: str, limit: int | None = None,
                 execution_time: str | None = None) -> list[Row]:
        """MODEL's rows for [start, end] (end date inclusive), read from prod's tables; writes nothing."""
        from bot.plan.cron_run import evaluate_rows
        from bot.project.timeutil import exclusive_end_ms, now_ms, to_ms
        from bot.snapshot import view_name

        model = self.model(model_name)
        now = to_ms(execution_time) if execution_time else now_ms()
        prod = self.state.get_environment("prod")
        tables = prod.tables() if prod else {}
        mapping = {name: tables.get(name, view_name(name, "prod")) for name in self.models}
        return evaluate_rows(engine=self.engine, model=model, context_models=self.models,
                             table_mapping=mapping,
                             interval=(to_ms(start, relative_base=now), exclusive_end_ms(end, relative_base=now)),
                             execution_time=now, variables=self.config.variables,
                             gateway=self.gateway.name, limit=limit)

    def migrate(self) -> tuple[int, int]:
        """Upgrade the state schema; returns (version before, version after)."""
        before = self.state.schema_version()
        return before, self.state.migrate()

    def destroy(self, *, notice: Callable[[str], None] | None = None) -> "JanitorResult":
        """Drop every meshbot view, table and schema, and the state tables, once no plan or run is in
        flight (holding the janitor's lease, so none starts meanwhile). Irreversible."""
        from bot.plan.claims import JANITOR_KEY
        from bot.plan.janitor import destroy_all

        self._start_engine_for_catalog()
        with self.claims.hold_janitor(notice=notice):
            result = destroy_all(state=self.state, engine=self.engine)
            self.claims.abandon(JANITOR_KEY)   # its lease went with the state
        self.close()
        self.__dict__.pop("state", None)
        self.__dict__.pop("claims", None)
        return result

    def dag(self) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """The project's DAG: nodes as (model, kind), edges as (parent, child)."""
        nodes = [(name, model.kind.name.value) for name, model in sorted(self.models.items())]
        edges = [(parent, child) for child, parents in sorted(self.project.dag.parents.items())
                 for parent in parents]
        return nodes, edges

    def _environment_statements(self) -> tuple["EnvironmentStatements", "EnvironmentStatements"]:
        """The config's before_all and after_all, parsed."""
        from bot.plan.env_statements import parse_environment_statements

        return (parse_environment_statements(self.config, "before_all", self.path),
                parse_environment_statements(self.config, "after_all", self.path))

    def _spark_runner(self) -> "SparkRunner":
        from bot.plan.batch_runner import SparkRunner

        return SparkRunner(engine=self.engine, context_models=self.models, config=self.config,
                           gateway=self.gateway.name, audits=self.project.audits,
                           concurrent_tasks=self.gateway.connection.concurrent_tasks)

    # -- quality ------------------------------------------------------------------------
    def format(self, *, check: bool = False, paths: Sequence[str] = ()) -> list[Path]:
        """Rewrite the project's SQL model and audit files as `sqlmesh format` does; the changed files
        (with `check`, those that would change; nothing is written)."""
        from bot.project.format import format_files

        project = self.project
        files = {m.path: ("MODEL", m.dialect) for m in project.models.values()
                 if m.path.suffix == ".sql" and m.kind.name != "EXTERNAL"}
        files.update({a.path: ("AUDIT", a.dialect) for a in project.audits.values()
                      if a.path.suffix == ".sql" and a.path not in files})
        if paths:
            wanted = {Path(p).resolve() for p in paths}
            files = {path: spec for path, spec in files.items() if path.resolve() in wanted}
        return format_files(files, options=self.config.format, check=check)

    def lint(self) -> "LintResult":
        """Run the linter rules of the project's `linter:` config over every model (no Spark)."""
        from bot.plan.lint import lint_project

        return lint_project(self.project, rendered=self.rendered_queries())

    def test(self, *, patterns: Sequence[str] = (), files: Sequence[str] = ()) -> "TestSuiteResult":
        """Run the project's YAML unit tests on Spark (one session for all of them)."""
        from bot.quality.unit_tests import run_tests

        return run_tests(project=self.project, engine=self.engine,
                         patterns=patterns, files=files)

    def audit(self, *, models: Sequence[str] = (), environment: str = "prod",
              start: str | None = None, end: str | None = None) -> "AuditReport":
        """Run the audits of `models` (default: all with audits) on the environment's tables."""
        from bot.project.timeutil import exclusive_end_ms, to_ms
        from bot.quality.api import AuditReport
        from bot.quality.audits import run_audits

        names = [self.model(m).name for m in models] or [n for n, m in self.models.items() if m.audits]
        start_ms = to_ms(start) if start else None
        end_ms = exclusive_end_ms(end) if end else None
        results = []
        env = self.state.get_environment(normalize_environment(environment))
        mapping = env.tables() if env else {}
        for name in names:
            results += run_audits(engine=self.engine, model=self.models[name],
                                  audit_defs=self.project.audits,
                                  table=self.table_in(environment, name), start=start_ms,
                                  end=end_ms, variables=self.config.variables, table_mapping=mapping)
        if not models:
            from bot.quality.audits import run_standalone_audits
            results += run_standalone_audits(self.engine, audit_defs=self.project.audits, table_mapping=mapping,
                                             variables=self.config.variables)
        return AuditReport(results=tuple(results))

    def table_diff(self, source: str, target: str, model: str | None = None, *,
                   on: Sequence[str] = (), skip: Sequence[str] = (), where: str | None = None,
                   decimals: int = 3, show_sample: bool = False, limit: int = 20,
                   source_table: str | None = None, target_table: str | None = None) -> "TableDiffResult":
        """Compare a model between two environments (or two tables) on Spark, as SQLMesh's table_diff."""
        from bot.diff.table_diff import resolve_keys, table_diff

        grains: tuple[str, ...] = ()
        name = None
        if model is not None:
            found = self.model(model)
            name, grains = found.name, found.grains
            source_table = source_table or self.table_in(source, name)
            target_table = target_table or self.table_in(target, name)
        elif "." in source and "." in target:   # `db.a:db.b` names two tables, not environments
            source_table, target_table = source_table or source, target_table or target
        if not source_table or not target_table:
            raise PlanError("table_diff needs a MODEL, or both --source-table and --target-table")
        keys = resolve_keys(model=name or f"{source_table}:{target_table}", on=on, grains=grains)
        return table_diff(engine=self.engine, source_table=source_table,
                          target_table=target_table, keys=keys, skip_columns=skip, where=where,
                          decimals=decimals, show_sample=show_sample, limit=limit,
                          source_label=source, target_label=target, model=name)

    def view_name(self, model_name: str, environment: str) -> str:
        """The view that serves `model_name` in `environment` (`shop.orders` in `dev` → `shop__dev.orders`)."""
        from bot.snapshot import view_name

        return view_name(self.model(model_name).name, normalize_environment(environment))

    def review(self, plan: Plan, options: "ReviewOptions | None" = None) -> "ReviewResult":
        """A PR's review against prod, in one preview pass: each directly modified model of `plan` (a plan
        against prod) and each breaking child compared with prod, prod as the base and the PR as the change;
        and (`options.plan_queries`) each directly modified SQL model's Spark plan (EXPLAIN: analyzed and
        planned, nothing read) against its prod version's, over the same window and tables: lost partition
        pruning or filter pushdown on a scanned table, a new nested loop join, more shuffles.

        Without `options.environment`, the PR's rows are computed, not read: each new version's query over
        the last `window_days` days of intervals (INCREMENTAL_BY_TIME_RANGE) or whole (other kinds; `skip`
        compares none of them), reading prod's tables for unchanged parents and the previews of changed
        ones (temporary views dropped afterwards): nothing is written to the warehouse or to state.
        With an `environment` (a backfilled PR environment), its tables are compared over the same windows.
        Rows join on the model's grain, else its unique_key; without either only counts and schema.
        """
        from bot.diff.review import ReviewOptions, review
        from bot.plan.preview import PreviewScope, preview_relations

        options = options or ReviewOptions()
        env_tables = self._tables_of(options.environment) if options.environment is not None else None
        runner = self._spark_runner()
        with preview_relations(engine=self.engine, state=self.state, plan=plan, models_for=runner.model_for,
                               context_models=self.models, variables=self.config.variables,
                               gateway=self.gateway.name, default_start=self.config.model_defaults.start,
                               scope=PreviewScope(window_days=options.window_days, full_scope=options.full_scope),
                               environment_tables=env_tables, plan_queries=options.plan_queries) as targets:
            return review(self.engine, targets, options)

    def _tables_of(self, environment: str) -> dict[str, str]:
        """What queries in `environment` read per model; an unknown environment is a PlanError."""
        env = self.state.get_environment(normalize_environment(environment))
        if env is None:
            raise PlanError(f"environment `{environment}` does not exist")
        return env.tables()

    def table_in(self, environment: str, model_name: str) -> str:
        """The physical table holding `model_name` in `environment`."""
        env_name = normalize_environment(environment)
        env = self.state.get_environment(env_name)
        if env is None:
            raise PlanError(f"environment `{env_name}` does not exist")
        entry = env.by_name().get(model_name)
        if entry is None:
            raise PlanError(f"model `{model_name}` is not in environment `{env_name}`")
        return entry.table_name

    # -- data ---------------------------------------------------------------------------
    def fetchdf(self, sql: str, *, limit: int | None = None,
                allow_writes: bool = False) -> list[Row]:
        """Rows of one query; anything else (DDL, DML, SET...) is refused unless `allow_writes`."""
        if not allow_writes:
            from bot.spark.readonly import check_read_only

            check_read_only(sql)   # before Spark starts
        return self.engine.fetch(sql, limit=limit)

    def render(self, model_name: str, *, start: str | None = None, end: str | None = None,
               environment: str = "prod") -> str:
        """The model's query as Spark SQL for [start, end], reading the environment's views."""
        from bot.project.render import render_sql
        from bot.project.timeutil import exclusive_end_ms, to_ms
        from bot.snapshot import view_name

        model = self.model(model_name)
        env = normalize_environment(environment)
        start_ms = to_ms(start) if start else None
        end_ms = exclusive_end_ms(end) if end else None
        mapping = {name: view_name(name, env) for name in self.models}
        return render_sql(model, start=start_ms, end=end_ms, variables=self.config.variables,
                          table_mapping=mapping, models=self.models, gateway=self.gateway.name)

    def model(self, name: str) -> Model:
        from bot.project.sqltext import normalize_name

        key = normalize_name(name)
        if key not in self.models:
            raise PlanError(f"unknown model `{name}`; known models: "
                            + ", ".join(sorted(self.models)[:20]))
        return self.models[key]

    def close(self) -> None:
        if "state" in self.__dict__:
            self.state.close()

