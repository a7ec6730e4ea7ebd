"""The engine's public API: one Context per project, with plan, apply, run, test, audit and table_diff."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from bot.diff.arguments import TableDiffOptions, resolve_tables
from bot.diff.table_diff import diff_tables
from bot.errors import PlanError
from bot.plan.apply import ApplyResult, apply_plan, catalog_only
from bot.plan.definition import Plan, PlanOptions, ProgressCallback, StageCallback
from bot.plan.drift import Drift, find_drift
from bot.plan.estimate import BackfillEstimate, estimate_backfills, recorded_times
from bot.plan.janitor import JanitorResult, clean_environment, destroy_all, expire_environment, run_janitor
from bot.plan.workspace import Workspace
from bot.project.cache import paused_gc
from bot.project.model import Model
from bot.timeline.times import exclusive_end_ms, execution_ms, now_ms, to_ms, user_range
from bot.snapshot import normalize_environment, view_name, view_names
from bot.state.protocol import Environment, HistoryEntry, require_environment

if TYPE_CHECKING:
    from bot.fingerprint import HashCache
    from bot.diff.review import ReviewOptions, ReviewResult
    from bot.diff.table_diff import TableDiffResult
    from bot.quality.results import AuditReport, TestSuiteResult
    from bot.quality.lint.runner import LintResult
    from bot.plan.rollback import RollbackResult
    from bot.plan.cron_run import RunResult
    from bot.state.versions import Migrated


Row = dict[str, object]   # one result row: column name → the Python value Spark returned


class Context(Workspace):
    """The engine's API over one project: each operation hands its parts (bot.plan.workspace) to the
    room that does the work.
    Planning (`plan`) reads project files and state only; Spark starts on `apply`, `run`, `test`,
    `audit`, `table_diff`, `review`, `fetchdf` and `evaluate`. Rooms with heavy imports are
    imported inside the methods that use them.
    """

    stage_log: StageCallback | None = None   # a line as each apply stage starts and ends (logs: no terminal)
    # -- plans --------------------------------------------------------------------------
    def plan(self, environment: str = "prod", *, options: PlanOptions = PlanOptions()) -> Plan:
        """Compute (never apply) the plan that brings `environment` to the project's state."""
        from bot.plan.builder import build_plan

        env = normalize_environment(environment)
        if not env:
            raise PlanError("environment name is empty")
        lint_warnings = self.lint().check_before_plan(self.path) if self._linted() else ()
        rendered = self.rendered_queries()   # with GC passes: a cold render makes much cyclic garbage
        with paused_gc():   # 10,000 models: the hash entries and state rows, scanned again and again otherwise
            hashes = self._hash_cache()
            plan = build_plan(project_models=self.models, dag=self.project.dag,
                              rendered=rendered, state=self.state, environment=env,
                              options=options, config=self.config, now_ms=now_ms(), hash_cache=hashes)   # relative times read it once
            hashes.save()
        from bot.quality.lint.preflight import check_columns_before_spark
        check_columns_before_spark(self.project, rendered=rendered, names=[s.name for s in plan.new_snapshots],
                                   read_cache=self.read_cache)
        return replace(plan, warnings=lint_warnings + plan.warnings) if lint_warnings else plan

    def model_versions(self) -> dict[str, str]:
        """Each model's version identifier as the project's files define it (what a plan would name its
        snapshot); reads no state and starts no engine."""
        from bot.fingerprint import fingerprint_models

        hashes = self._hash_cache()
        fingerprints = fingerprint_models(self.models, self.project.dag.order, self.rendered_queries(),
                                          cache=hashes, parents=self.project.dag.parents)   # as a plan hashes
        hashes.save()
        return {name: fingerprint.identifier for name, fingerprint in fingerprints.items()}

    def _hash_cache(self) -> "HashCache":
        """The models' own hashes kept from earlier plans (.meshbot/cache/hashes.json)."""
        from bot.fingerprint import HashCache

        return HashCache(self.path, self.project.source_digests, read=self.read_cache)

    def backfill_estimates(self, plan: Plan) -> tuple[BackfillEstimate, ...]:
        """Each backfill of `plan` with its batches and, from earlier batches' recorded wall times, its duration."""
        return estimate_backfills(plan, recorded_times(plan, self.state.get_batch_times))

    def rendered_queries(self) -> dict[str, str]:
        """Every SQL model rendered at the reference interval, for fingerprints and diffs (cached on disk)."""
        from bot.project.render_cache import reference_queries

        project = self.project
        return reference_queries(root=self.path, models=project.models, sources=project.source_digests,
                                 variables=self.config.variables, gateway=self.gateway.name,
                                 macro_files=project.macro_files, read_cache=self.read_cache,
                                 early=project.early_renders, held=project.held_renders)

    def apply(self, plan: Plan, *, progress: ProgressCallback | None = None) -> ApplyResult:
        """Apply a plan: its stages (bot.plan.stages) in order; `stage_log` gets a line as each starts and ends."""
        from bot.plan.env_statements import parse_before_and_after
        statements = parse_before_and_after(self.config, self.path)   # before Spark: a bad one changes nothing
        if catalog_only(plan, self.project.audits):
            self._start_engine_for_catalog()
        return apply_plan(plan, self._work(), statements=statements, progress=progress, stage_log=self.stage_log)

    def machine_local_storage(self) -> tuple[str, ...]:
        """What the gateway keeps only on this machine (state file, embedded catalog, local warehouse)."""
        return self.gateway.machine_local_storage()

    # -- environments -------------------------------------------------------------------
    def environment_names(self) -> list[str]:   # sorted; reads no environment's snapshot list
        return self.state.get_environment_names()

    def environment_history(self, environment: str) -> list[HistoryEntry]:
        """The plans `environment` served (applies and rollbacks), newest first."""
        return self.state.get_environment_history(self._existing(environment).name)

    def drift(self, environment: str = "prod", *, head_versions: dict[str, str] | None = None) -> Drift:
        """What changed `environment` since the default branch's last deploy, besides such deploys (bot.plan.drift)."""
        return find_drift(self.state, normalize_environment(environment), head_versions=head_versions)

    def rollback(self, environment: str, *, to_plan_id: str | None = None) -> "RollbackResult":
        """Serve an earlier plan's snapshots again (default: the previous plan): views repointed to
        tables that still exist, nothing computed; the project's files are not read."""
        from bot.plan.rollback import check_reachable, rollback

        check_reachable(self.state, normalize_environment(environment), to_plan_id)
        self._start_engine_for_catalog()
        evaluator = self._work(project=False).evaluator()
        return rollback(evaluator, normalize_environment(environment), to_plan_id=to_plan_id)

    def invalidate(self, environment: str, *, sync: bool = False) -> JanitorResult | None:
        """Mark a dev environment expired; `sync` drops its views and schemas right away."""
        env = normalize_environment(environment)
        expire_environment(self.state, env)
        if not sync:
            return None
        self._start_engine_for_catalog()
        return clean_environment(state=self.state, engine=self.engine, name=env, claims=self.claims)

    def janitor(self, *, ignore_ttl: bool = False,
                notice: Callable[[str], None] | None = None) -> JanitorResult:
        """Remove expired environments and snapshots, once no plan or run is in flight."""
        self._start_engine_for_catalog()
        return run_janitor(state=self.state, engine=self.engine, ignore_ttl=ignore_ttl, claims=self.claims,
                           notice=notice)

    # -- operations ---------------------------------------------------------------------
    def run(self, environment: str = "prod", *, execution_time: str | None = None,
            progress: ProgressCallback | None = None, skip_when_busy: bool = False) -> "RunResult":
        """Evaluate the intervals each model's cron has made due in `environment` (views untouched); with
        `skip_when_busy`, nothing while a plan or run of it is in flight (`RunResult.busy`)."""
        from bot.plan.cron_run import RunResult, nothing_due, require_environment, run_on_spark
        from bot.plan.env_statements import parse_before_and_after

        env, now = require_environment(self.state, normalize_environment(environment)), execution_ms(execution_time)
        statements = parse_before_and_after(self.config, self.path)
        if nothing_due(self.state, env, self.models, execution_time=now, default_start=self.config.model_defaults.start):
            return RunResult(environment=env.name, execution_time=now)   # Spark never started
        return run_on_spark(self._work(), env.name, statements=statements, execution_time=execution_time,
                            progress=progress, skip_when_busy=skip_when_busy)

    def evaluate(self, model_name: str, *, start: str, end: str, limit: int | None = None,
                 execution_time: str | None = None) -> list[Row]:
        """MODEL's rows for [start, end] (end date inclusive), read from prod's tables; writes nothing."""
        from bot.plan.cron_run import evaluate_rows, prod_tables

        model, now, tables = self.model(model_name), execution_ms(execution_time), prod_tables(self.state, self.models)
        interval = (to_ms(start, relative_base=now), exclusive_end_ms(end, relative_base=now))
        return evaluate_rows(engine=self.engine, model=model, context_models=self.models, table_mapping=tables,
                             interval=interval, execution_time=now, variables=self.config.variables,
                             gateway=self.gateway.name, limit=limit)

    def migrate(self) -> Migrated:
        """Upgrade the state schema, and re-key its snapshots if this meshbot fingerprints differently."""
        from bot.plan.snapshot_models import stored_forms
        return self.state.migrate(lambda: stored_forms(self.models, self.rendered_queries()))

    def destroy(self, *, notice: Callable[[str], None] | None = None) -> JanitorResult:
        """Drop every meshbot view, table and schema, and the state tables, once no plan or run is in
        flight (holding the janitor's lease, so none starts meanwhile). Irreversible."""
        self._start_engine_for_catalog()
        result = destroy_all(state=self.state, engine=self.engine, claims=self.claims, notice=notice)
        self._forget_state()
        return result

    def dag(self) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """The project's DAG: nodes as (model, kind), edges as (parent, child)."""
        return [(name, model.kind.name.value) for name, model in sorted(self.models.items())], self.project.dag.edges()

    # -- quality ------------------------------------------------------------------------
    def format(self, *, check: bool = False, paths: Sequence[str] = ()) -> list[Path]:
        """Rewrite the project's SQL model and audit files as `sqlmesh format` does; the changed files
        (with `check`, those that would change; nothing is written)."""
        from bot.project.format import format_files, project_files

        files = project_files(self.project.models, self.project.audits, paths)
        return format_files(files, options=self.config.format, check=check)

    def lint(self) -> "LintResult":
        """Run the linter rules of the project's `linter:` config over every model (no Spark)."""
        from bot.quality.lint.runner import lint_project

        return lint_project(self.project, rendered=self.rendered_queries())

    def test(self, *, patterns: Sequence[str] = (), files: Sequence[str] = ()) -> "TestSuiteResult":
        """Run the project's YAML unit tests on Spark (one session for all of them)."""
        from bot.quality.unit_tests import run_tests

        return run_tests(project=self.project, engine=self.engine, patterns=patterns, files=files)

    def audit(self, *, models: Sequence[str] = (), environment: str | None = None,
              start: str | None = None, end: str | None = None) -> "AuditReport":
        """Run the audits of `models` (default: all with audits, then the standalone ones) on `environment`'s
        tables or, as `sqlmesh audit`, those of the files' versions any plan built (unbuilt: skipped)."""
        from bot.quality.audit_report import audit_environment, built_tables

        names = [self.model(m).name for m in models] or [n for n, m in self.models.items() if m.audits]
        start_ms, end_ms = user_range(start, end)
        mapping = (built_tables(self.state, self.engine, self.model_versions()) if environment is None
                   else self._existing(environment).tables())   # an unknown environment: "does not exist"
        table_of = mapping.__getitem__ if environment is None else lambda name: self.table_in(environment, name)
        return audit_environment(self.engine, models=self.models, names=names, table_of=table_of,
                                 table_mapping=mapping, audit_defs=self.project.audits, variables=self.config.variables,
                                 start=start_ms, end=end_ms, standalone=not models, skip_unbuilt=environment is None)

    def table_diff(self, source: str, target: str, model: str | None = None, *,
                   options: TableDiffOptions = TableDiffOptions()) -> "TableDiffResult":
        """Compare a model between two environments (or two tables) on Spark, as SQLMesh's table_diff."""
        found = self.model(model) if model is not None else None
        tables = resolve_tables(source, target, found, options, table_in=self.table_in)   # before Spark starts
        return diff_tables(self.engine, tables, options)

    def view_name(self, model_name: str, environment: str) -> str:
        """The view that serves `model_name` in `environment` (`shop.orders` in `dev` → `shop__dev.orders`)."""
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
        from bot.plan.preview_queries import PreviewScope, preview_relations

        options = options or ReviewOptions()
        if options.concurrent_tasks is None:
            options = replace(options, concurrent_tasks=self.gateway.connection.concurrent_tasks)
        env_tables = self._existing(options.environment).tables() if options.environment is not None else None
        runner = self._spark_runner()
        with preview_relations(engine=self.engine, state=self.state, plan=plan, models_for=runner.model_for,
                               context_models=self.models, variables=self.config.variables,
                               gateway=self.gateway.name, default_start=self.config.model_defaults.start,
                               scope=PreviewScope(window_days=options.window_days, full_scope=options.full_scope),
                               environment_tables=env_tables, plan_queries=options.plan_queries) as targets:
            return review(self.engine, targets, options)

    def table_in(self, environment: str, model_name: str) -> str:
        """The physical table holding `model_name` in `environment`."""
        return self._existing(environment).table_of(model_name)

    def _existing(self, environment: str) -> Environment:
        return require_environment(self.state, normalize_environment(environment))

    # -- data ---------------------------------------------------------------------------
    def fetchdf(self, sql: str, *, limit: int | None = None, allow_writes: bool = False) -> list[Row]:
        """Rows of one query; anything else (DDL, DML, SET...) is refused unless `allow_writes`."""
        if not allow_writes:
            from bot.spark.readonly import check_read_only

            check_read_only(sql)   # before Spark starts
        return self.fetch_rows(sql, limit=limit)

    def render(self, model_name: str, *, start: str | None = None, end: str | None = None,
               environment: str = "prod") -> str:
        """The model's query as Spark SQL for [start, end], reading the environment's views (the tables
        of models a dev environment holds no view for)."""
        from bot.project.render import render_sql

        model, env = self.model(model_name), normalize_environment(environment)
        start_ms, end_ms = user_range(start, end)
        mapping = view_names(self.models, env)
        if env != "prod" and (stored := self.state.get_environment(env)) is not None:
            mapping.update(stored.query_names())   # a model without a view in `env` is read from its table
        return render_sql(model, start=start_ms, end=end_ms, variables=self.config.variables,
                          table_mapping=mapping, models=self.models, gateway=self.gateway.name)

    def model(self, name: str) -> Model:
        return self.project.model(name)
