"""Apply a Plan: create tables, backfill batch by batch, promote the environment, swap its views."""

from __future__ import annotations

import contextlib
import functools
import re
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Iterator, Mapping, Sequence

from bot.errors import BotError, ConflictError, EngineError, PlanError
from bot.faults import checkpoint
from bot.plan.batch import BatchRunner, BatchWriter, fmt_interval as _fmt, first_line as _first_line
from bot.plan.claims import Claims, describe_holder, environment_key, version_key
from bot.quality.results import AuditResult, audit_error
from bot.plan.definition import BackfillKind, Plan, ProgressCallback, StageCallback
from bot.plan.drift import local_source
from bot.plan.ownership import claim_schemas
from bot.plan.parents import check_plan_parents
from bot.plan.stages import (AfterAll, AuditExisting, Backfill, BeforeAll, CheckNames, CheckParents, ClaimSchemas,
                             CreateTables, Finalize, FinishPromotion, Promote, PushSnapshots, Restate, Stage,
                             StopIfFailed, SwapViews, draft_environment, plan_stages)
from bot.plan.schedule import run_tasks
from bot.plan.execution import finish_promotion, order_snapshots, parents_in, raise_failures, task_scope_for
from bot.plan.table_creation import create_tables
from bot.project.dag import reachable, upstream_of
from bot.timeline.times import now_ms, to_ms
from bot.project.model import KindName, Model
from bot.snapshot import Snapshot, view_name
from bot.state.protocol import Environment, Lease, StateSync

_VALID_NAME = re.compile(r"^\w+$", re.ASCII)   # Spark's SessionCatalog.validateName


@dataclass
class ApplyLog:
    """What an apply did, for summaries; evaluated and reused hold (model, start ms, end ms)."""

    evaluated: list[tuple[str, int, int]] = field(default_factory=list)
    reused: list[tuple[str, int, int]] = field(default_factory=list)   # written meanwhile by another process
    views_created: int = 0
    audit_warnings: list[AuditResult] = field(default_factory=list)


@dataclass
class _Apply:
    """What the stages of one apply hand to each other."""

    plan: Plan
    mapping: Mapping[str, str]
    log: ApplyLog = field(default_factory=ApplyLog)
    stored: Environment | None = None        # the environment's row once an unfinished promotion is finished
    environment: Environment | None = None   # the row this plan promotes
    failed: list[tuple[str, BotError]] = field(default_factory=list)   # models whose table or a batch failed
    skipped: set[str] = field(default_factory=set)   # their descendants: no table created, no batch run

    def fail(self, failures: Sequence[tuple[str, BotError]], skipped: Iterable[str] = ()) -> None:
        """Record failed models; every descendant of one (in the plan's DAG) is skipped from then on."""
        self.failed.extend(failures)
        children: dict[str, list[str]] = {name: [] for name in self.plan.snapshots}
        for snapshot in self.plan.snapshots.values():
            for parent in snapshot.parents:
                children.setdefault(parent.name, []).append(snapshot.name)
        failed = {name for name, _ in self.failed}
        self.skipped |= (set(skipped) | reachable(children, failed)) - failed


@dataclass(frozen=True)
class PlanEvaluator:
    """Runs a Plan's stages (bot.plan.stages) in order; every finished batch is recorded at once so reruns resume."""

    state: StateSync
    runner: BatchRunner
    models_for: Callable[[Snapshot], Model]
    environment_ttl: str = "in 1 week"   # dev environments expire this long after their plan's day
    progress: ProgressCallback | None = None
    default_start: str | None = None     # model_defaults.start, for the parent-interval rule
    concurrent_tasks: int = 1            # models backfilled / tables created at once
    claims: Claims | None = None         # leases: one applier per environment, one writer per batch
    before_all: Callable[[str], None] | None = None   # the config's before_all statements, for an environment
    after_all: Callable[[str], None] | None = None
    stage_log: StageCallback | None = None   # a line as each stage starts and ends (logs without a terminal)

    def apply(self, plan: Plan) -> ApplyLog:
        """The stages in order, with every step that can fail on the project's input before the state write.

        With `claims`, the environment's lease is held throughout (another applier or `run` of it
        waits), and a plan whose environment changed while it waited stops before writing anything.
        A promotion an earlier (killed) plan left unfinished is completed first. Then nothing is
        written until the parent-interval rule holds; snapshots, tables and each finished batch go
        to state and Spark; only then is the environment row replaced (one transaction), its views
        written and the row finalized. A failure before the row write leaves every row and view as
        it was; a failure writing views puts the previous views and the exact previous row back.
        """
        if self.claims is None:
            return self._apply(plan)
        waited: list[str] = []

        def notice(line: str) -> None:
            waited.append(line)
            if self.progress:
                self.progress(line, 0, 0)

        with self.claims.hold(environment_key(plan.environment), self.purpose(plan), notice=notice) as lease:
            self._check_unchanged(plan, lease, waited=bool(waited))
            return self._apply(plan)

    @staticmethod
    def purpose(plan: Plan) -> str:
        return f"plan of `{plan.environment}` (plan {plan.plan_id[:8]})"

    def _check_unchanged(self, plan: Plan, lease: Lease, *, waited: bool) -> None:
        """The environment row must still be the one the plan was built on (promotion checks it
        again); a plan that waited for another applier says who changed it."""
        stored = self.state.get_environment(plan.environment)
        stored_id = stored.plan_id if stored is not None else None
        if stored_id == plan.expected_plan_id:
            self._check_reused_still_stored(plan)
            return
        if not waited:
            raise ConflictError(f"another plan was applied to `{plan.environment}` while yours was "
                                "in progress; re-plan")
        by = describe_holder(lease.previous) if lease.previous is not None else "another process"
        raise ConflictError(f"environment `{plan.environment}` was changed by {by} (it now serves "
                            f"plan {(stored_id or 'none')[:8]}) while this plan waited; plan again")

    def _check_reused_still_stored(self, plan: Plan) -> None:
        """The snapshots a plan reuses must still be stored once it holds its environment's lease: a
        janitor may have run between the plan and its apply (while it waited, or before it asked),
        dropping their tables and intervals, and the plan's backfills were computed before. Holding
        the lease, no janitor runs until the plan is done."""
        new = {s.snapshot_id for s in plan.new_snapshots}
        reused = [s.snapshot_id for s in plan.snapshots.values() if s.snapshot_id not in new]
        gone = sorted(i.name for i in set(reused) - self.state.stored_snapshot_ids(reused))
        if gone:
            raise ConflictError(f"since this plan was made, the janitor removed what it reuses "
                                f"({', '.join(f'`{n}`' for n in gone[:5])}{' and more' if len(gone) > 5 else ''}); "
                                "plan again")

    def _apply(self, plan: Plan) -> ApplyLog:
        """Run `plan`'s stages (bot.plan.stages.plan_stages), each stage's fault checkpoint at its end."""
        return self.run(plan_stages(plan), plan)

    def run(self, stages: Sequence[Stage], plan: Plan, *, environment: Environment | None = None,
            stored: Environment | None = None) -> ApplyLog:
        """Run `stages` for `plan` in order. A rollback passes its own promotion stages with the row it
        serves (`environment`) and the row it replaces (`stored`, finalized); the caller holds the lease."""
        work = _Apply(plan=plan, mapping=plan.tables(), stored=stored, environment=environment)
        for index, stage in enumerate(stages, start=1):
            with self._reported(stage, f"{index}/{len(stages)}"):
                self.run_stage(stage, work)
            if stage.checkpoint:
                checkpoint(stage.checkpoint)
        return work.log

    @contextlib.contextmanager
    def _reported(self, stage: Stage, position: str) -> Iterator[None]:
        """A line when the stage starts and one when it ends, with its elapsed time (`stage_log`)."""
        if self.stage_log is None:
            yield
            return
        detail = stage.detail()
        self.stage_log(f"Stage {position} {stage.name}: started{f' ({detail})' if detail else ''}")
        started = time.monotonic()
        try:
            yield
        except BaseException:
            self.stage_log(f"Stage {position} {stage.name}: failed after {time.monotonic() - started:.1f} s")
            raise
        self.stage_log(f"Stage {position} {stage.name}: done in {time.monotonic() - started:.1f} s")

    @functools.singledispatchmethod
    def run_stage(self, stage: Stage, work: _Apply) -> None:
        """Run one stage: each stage type has its own method below."""
        raise TypeError(f"the evaluator has no method for stage `{stage.name}`")

    @run_stage.register
    def _finish_promotion(self, stage: FinishPromotion, work: _Apply) -> None:
        work.stored = finish_promotion(self.state, self.runner, stage.environment)

    @run_stage.register
    def _before_all(self, stage: BeforeAll, work: _Apply) -> None:
        if self.before_all is not None:
            self.before_all(work.plan.environment)

    @run_stage.register
    def _check_names(self, stage: CheckNames, work: _Apply) -> None:
        self._check_view_names(work.plan)

    @run_stage.register
    def _check_parents(self, stage: CheckParents, work: _Apply) -> None:
        check_plan_parents(work.plan, work.mapping, state=self.state, models_for=self.models_for,
                           default_start=self.default_start)

    @run_stage.register
    def _claim_schemas(self, stage: ClaimSchemas, work: _Apply) -> None:
        claim_schemas(work.plan, work.mapping, state=self.state, runner=self.runner)

    @run_stage.register
    def _push_snapshots(self, stage: PushSnapshots, work: _Apply) -> None:
        self.state.push_snapshots(work.plan.new_snapshots)

    @run_stage.register
    def _create_tables(self, stage: CreateTables, work: _Apply) -> None:
        """The missing tables, a few at once (bot.plan.table_creation); a failed model skips its descendants."""
        outcome = create_tables(work.plan, work.mapping, runner=self.runner, state=self.state,
                                models_for=self.models_for, lease=lambda s: self._version_lease(work.plan, s),
                                threads=self.concurrent_tasks)
        if outcome.failed:
            work.fail(outcome.failed, outcome.skipped)

    @run_stage.register
    def _restate(self, stage: Restate, work: _Apply) -> None:
        for restated in stage.intervals:
            snapshot = work.plan.snapshots[restated.model]
            self.state.remove_intervals(snapshot.name, snapshot.version, restated.interval)

    @run_stage.register
    def _stop_if_failed(self, stage: StopIfFailed, work: _Apply) -> None:
        """One error naming every failed model with its error and every model it kept from being
        built; nothing is promoted (SQLMesh 0.236.4: "Plan application failed.", exit 1)."""
        if not work.failed:
            return
        order = {s.name: i for i, s in enumerate(order_snapshots(work.plan.snapshots.values()))}
        failed = sorted(work.failed, key=lambda item: order.get(item[0], len(order)))
        raise_failures(failed, sorted(work.skipped, key=lambda name: order.get(name, len(order))))

    @run_stage.register
    def _audit_existing_stage(self, stage: AuditExisting, work: _Apply) -> None:
        self._audit_existing(work.plan, [work.plan.snapshots[name] for name in stage.models],
                             work.mapping, work.log)

    @run_stage.register
    def _promote(self, stage: Promote, work: _Apply) -> None:
        if work.environment is None:
            work.environment = self.environment_for(work.plan)
        self.state.promote(work.environment, expected_plan_id=work.plan.expected_plan_id,
                           source=work.plan.options.source or local_source())

    @run_stage.register
    def _swap_or_revert(self, stage: SwapViews, work: _Apply) -> None:
        try:
            work.log.views_created = self._swap_views(stage, work.environment)
        except Exception as exc:  # noqa: BLE001 - any failure must put the previous views back
            self._revert_promotion(work.plan, work.environment, work.stored, exc)

    @run_stage.register
    def _finalize(self, stage: Finalize, work: _Apply) -> None:
        self.state.finalize(stage.environment, work.plan.plan_id)

    @run_stage.register
    def _after_all(self, stage: AfterAll, work: _Apply) -> None:
        if self.after_all is not None:
            self.after_all(work.plan.environment)

    def _check_view_names(self, plan: Plan) -> None:
        """Spark's catalog accepts only letters, digits and `_` in schema and table names: a model
        whose view it would reject fails here, before anything is written."""
        for snapshot in plan.snapshots.values():
            if not snapshot.is_physical or not plan.is_promoted(snapshot.name):
                continue
            view = view_name(snapshot.name, plan.environment)
            if not all(_VALID_NAME.match(part) for part in view.split(".")):
                model = self.models_for(snapshot)
                where = f"{model.path}:{model.line}: " if getattr(model, "path", None) else ""
                raise PlanError(f"{where}model `{snapshot.name}`: Spark accepts only letters, digits "
                                f"and _ in schema and table names, so the view `{view}` cannot be "
                                "created; rename the model")

    def _revert_promotion(self, plan: Plan, environment: Environment, previous: Environment | None,
                          exc: Exception) -> None:
        """Views failed after promotion: restore the previous views and the exact previous row, then raise.

        Re-running the same plan then converges (its tables and intervals are already there). If
        the restore fails too, the environment stays promoted but unfinalized (the next plan or run
        finishes it), and the error says so. `previous` is the row as read just before this apply.
        """
        reason = _first_line(exc)
        try:
            before = previous.views() if previous is not None else {}
            if before:
                self.runner.replace_views(before)
            self.runner.drop_views([view for view in environment.views() if view not in before])
            self.state.restore_environment(plan.environment, previous, expected_plan_id=plan.plan_id)
        except Exception as second:  # noqa: BLE001
            raise EngineError(f"creating the views of `{plan.environment}` failed ({reason}) and "
                              f"restoring the previous views failed too ({_first_line(second)}); "
                              "the environment is promoted but not finalized: re-run the plan") from exc
        raise EngineError(f"creating the views of `{plan.environment}` failed: {reason}; the "
                          "environment and its views were left as before this plan; re-run it") from exc

    def environment_for(self, plan: Plan) -> Environment:
        """The row `plan` promotes; a dev environment expires `environment_ttl` from today's midnight, as SQLMesh."""
        expiration = None if plan.environment == "prod" else to_ms(self.environment_ttl, relative_base=now_ms())
        return replace(draft_environment(plan), expiration_ts=expiration)

    def _version_lease(self, plan: Plan, snapshot: Snapshot) -> contextlib.AbstractContextManager:
        if self.claims is None:
            return contextlib.nullcontext()
        return self.claims.hold(version_key(snapshot.name, snapshot.version), self.purpose(plan),
                                notice=self._progress_line)

    def _progress_line(self, line: str) -> None:
        if self.progress:
            self.progress(line, 0, 0)

    @run_stage.register
    def _backfill(self, stage: Backfill, apply: _Apply) -> None:
        """Each model's batches in order; independent models run concurrently (`concurrent_tasks`),
        a model only after every model upstream of it finished all its batches. A failed model stops
        its downstream; independent models go on (so do models independent of one whose table could
        not be created). State writes go through one lock."""
        plan, mapping, log = apply.plan, apply.mapping, apply.log
        by_id = {s.snapshot_id: s for s in plan.snapshots.values()}
        planned = {by_id[b.snapshot_id].name: b for b in plan.backfills if b.snapshot_id in by_id}
        gone = apply.skipped | {name for name, _ in apply.failed}
        work = {m.model: (plan.snapshots[m.model], replace(planned[m.model], batches=m.batches))
                for m in stage.batches if m.model not in gone}
        names = [s.name for s in order_snapshots([s for s, _ in work.values()])]
        total = sum(len(b.batches) for _, b in work.values())
        lock = threading.Lock()
        stop = threading.Event()
        counter = [0]
        scope = task_scope_for(self.runner, self.concurrent_tasks)

        def notice(line: str) -> None:
            if self.progress:
                self.progress(line, counter[0], total)

        writer = BatchWriter(state=self.state, runner=self.runner, claims=self.claims,
                             purpose=self.purpose(plan), notice=notice, lock=lock)

        def backfill(name: str, slot: int) -> None:
            snapshot, backfill = work[name]
            model = self.models_for(snapshot)
            with scope(slot):
                for batch in backfill.batches:
                    if stop.is_set():
                        return
                    done = writer.run(snapshot=snapshot, model=model, table=mapping[name], batch=batch,
                                      mapping=mapping, execution_time=plan.execution_time,
                                      is_dev=backfill.is_dev,
                                      record=backfill.kind is not BackfillKind.RECREATE_VIEW)
                    with lock:
                        log.audit_warnings.extend(done.warnings)
                        (log.reused if done.reused else log.evaluated).append((name, batch[0], batch[1]))
                        counter[0] += 1
                        if self.progress:
                            reused = " (reused: written meanwhile by another process)" if done.reused else ""
                            self.progress(f"{name} {_fmt(batch)}{reused}", counter[0], total)

        order = {name: i for i, name in enumerate(names)}
        try:
            outcome = run_tasks(names, upstream_of(names, parents_in(plan)), backfill,
                                threads=self.concurrent_tasks, stop=stop)
        finally:
            log.evaluated.sort(key=lambda item: (order[item[0]], item[1]))
            log.reused.sort(key=lambda item: (order[item[0]], item[1]))
        if outcome.failed:
            apply.fail(outcome.failed, outcome.skipped)

    def _audit_existing(self, plan: Plan, targets: Sequence[Snapshot], mapping: Mapping[str, str],
                        log: ApplyLog) -> None:
        """Changed audits of snapshots this plan does not backfill run on the data their table already
        holds (all recorded intervals; views as they are); a blocking failure stops the plan here,
        before promotion. Tables with nothing recorded yet have no data to audit."""
        recorded = self.state.get_intervals([(s.name, s.version) for s in targets])
        for snapshot in targets:
            spans = recorded.get((snapshot.name, snapshot.version))
            spans = list(spans.intervals) if spans else []
            if not spans and snapshot.kind != KindName.VIEW.value:
                continue
            interval = (min(s for s, _ in spans), max(e for _, e in spans)) if spans \
                else (plan.start, plan.end)
            results = self.runner.audit(snapshot, self.models_for(snapshot), table=mapping[snapshot.name],
                                        interval=interval, execution_time=plan.execution_time,
                                        table_mapping=mapping)
            error = audit_error(results)
            if error is not None:
                raise error
            log.audit_warnings.extend(r for r in results if not r.passed)

    def _swap_views(self, stage: SwapViews, environment: Environment) -> int:
        """Write the stage's views, and those it keeps that the catalog lacks; drop the stale ones."""
        views = environment.views()
        existing = getattr(self.runner, "existing_views", None)
        present = existing(list(stage.keep)) if stage.keep and existing is not None else set()
        self.runner.replace_views({view: table for view, table in views.items() if view not in present})
        self.runner.drop_views(stage.drop)
        return len(views)
