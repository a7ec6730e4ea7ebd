"""The stages of applying a plan, as typed values carrying this plan's tables, batches and views."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar, Iterable

from bot.plan.definition import Plan
from bot.timeline.times import to_ts
from bot.snapshot import NO_PHYSICAL_TABLE, view_name
from bot.state.protocol import Environment, EnvironmentSnapshot, Interval

ENVIRONMENT_LEASE = "`environment:<name>`, held from the first stage to the last"
_SHOWN = 3   # names a line of `--explain` shows before "and N more"


@dataclass(frozen=True)
class ModelBatches:
    """One model's batches, in the order they run."""

    model: str
    batches: tuple[Interval, ...]


@dataclass(frozen=True)
class ModelInterval:
    """One model's interval (a restatement removes it)."""

    model: str
    interval: Interval


@dataclass(frozen=True)
class Stage:
    """One step of an apply. `checkpoint` is the fault point at its end (bot.faults); `holds` the leases
    it takes beyond the environment lease held for the whole apply."""

    name: ClassVar[str]
    does: ClassVar[str]
    checkpoint: ClassVar[str | None] = None
    holds: ClassVar[str] = ""

    def detail(self) -> str:
        """What of this plan the stage works on, in a few words (`--explain`, progress lines)."""
        return ""

    def to_json(self) -> dict[str, Any]:
        """The stage for `plan --json`: its name and its own tables, batches or views."""
        return {"stage": self.name, **{f.name: _json(getattr(self, f.name)) for f in fields(self)}}


@dataclass(frozen=True)
class FinishPromotion(Stage):
    name = "finish_promotion"
    does = "finish a promotion a killed plan left unfinished (its views, then finalize)"
    environment: str


@dataclass(frozen=True)
class BeforeAll(Stage):
    name = "before_all"
    does = "run the config's before_all statements"
    statements: tuple[str, ...]

    def detail(self) -> str:
        return _count(self.statements, "statement")


@dataclass(frozen=True)
class CheckNames(Stage):
    name = "check_names"
    does = "check that Spark accepts every view name"
    views: tuple[str, ...]

    def detail(self) -> str:
        return _names(self.views, "view")


@dataclass(frozen=True)
class CheckParents(Stage):
    name = "check_parents"
    does = "check that every batch's parents hold its interval"
    batches: tuple[ModelBatches, ...]

    def detail(self) -> str:
        return _batches(self.batches)


@dataclass(frozen=True)
class ClaimSchemas(Stage):
    name = "claim_schemas"
    does = "check that this state owns the physical schemas, or claim them"
    schemas: tuple[str, ...]

    def detail(self) -> str:
        return _names(self.schemas, "schema")


@dataclass(frozen=True)
class PushSnapshots(Stage):
    name = "push_snapshots"
    does = "store the new snapshots in the state"
    snapshots: tuple[str, ...]   # their models

    def detail(self) -> str:
        return _names(self.snapshots, "snapshot")


@dataclass(frozen=True)
class CreateTables(Stage):
    name = "create_tables"
    does = "create the missing physical tables (a table whose intervals are recorded must exist)"
    tables: tuple[str, ...]      # every physical table the plan uses; those the catalog lacks are created

    def detail(self) -> str:
        return _names(self.tables, "table")


@dataclass(frozen=True)
class Restate(Stage):
    name = "restate"
    does = "remove the restated intervals"
    intervals: tuple[ModelInterval, ...]

    def detail(self) -> str:
        return _names([f"{i.model} {_span(i.interval)}" for i in self.intervals], "interval")


@dataclass(frozen=True)
class Backfill(Stage):
    name = "backfill"
    does = "compute the missing intervals, batch by batch, recording each at once"
    checkpoint = "after-last-batch"
    holds = "`version:<model>:<version>` around each batch"
    batches: tuple[ModelBatches, ...]

    def detail(self) -> str:
        return _batches(self.batches)


@dataclass(frozen=True)
class StopIfFailed(Stage):
    name = "stop_if_failed"
    does = ("stop before promotion if a model failed (its table or a batch), naming each with its error and "
            "the models it kept from being built")


@dataclass(frozen=True)
class AuditExisting(Stage):
    name = "audit_existing"
    does = "audit the data of models whose audits changed"
    models: tuple[str, ...]

    def detail(self) -> str:
        return _names(self.models, "model")


@dataclass(frozen=True)
class Promote(Stage):
    name = "promote"
    does = "replace the environment's row (one transaction)"
    checkpoint = "after-state-write"
    environment: str
    views: tuple[str, ...]       # the views the environment serves afterwards

    def detail(self) -> str:
        return f"`{self.environment}`: {_count(self.views, 'view')}"


@dataclass(frozen=True)
class SwapViews(Stage):
    name = "swap_views"
    does = "write the environment's views, drop those it no longer serves"
    write: tuple[str, ...]       # views whose table or columns changed (or all, after an unfinished promotion)
    keep: tuple[str, ...]        # views served as before: written only when the catalog lacks them
    drop: tuple[str, ...]        # views the environment no longer serves

    def detail(self) -> str:
        return (f"write {_names(self.write, 'view')}; keep {_count(self.keep, 'view')} if present; "
                f"drop {_names(self.drop, 'view')}")


@dataclass(frozen=True)
class Finalize(Stage):
    name = "finalize"
    does = "mark the environment finalized"
    checkpoint = "after-finalize"
    environment: str


@dataclass(frozen=True)
class AfterAll(Stage):
    name = "after_all"
    does = "run the config's after_all statements"
    statements: tuple[str, ...]

    def detail(self) -> str:
        return _count(self.statements, "statement")


def plan_stages(plan: Plan) -> tuple[Stage, ...]:
    """The stages applying `plan` runs, in order; a stage with nothing to do is left out.

    >>> from bot.plan.definition import PlanOptions
    >>> plan = Plan("p", "dev", True, None, None, {}, (), (), (), options=PlanOptions(skip_backfill=True))
    >>> [s.name for s in plan_stages(plan)]
    ['finish_promotion', 'promote', 'swap_views', 'finalize']
    """
    mapping = plan.tables()
    backfills = () if plan.options.skip_backfill else _model_batches(plan)
    physical = [s for s in plan.snapshots.values() if s.is_physical]
    views = tuple(view_name(s.name, plan.environment) for s in physical if plan.is_promoted(s.name))
    by_id = {s.snapshot_id: s.name for s in plan.snapshots.values()}
    restated = () if plan.options.skip_backfill else tuple(   # a restatement names its model's snapshot
        ModelInterval(i.name, interval) for i, interval in plan.restatements.items() if i.name in plan.snapshots)
    tables = tuple(mapping[s.name] for s in physical)
    stages: list[Stage | None] = [
        FinishPromotion(plan.environment),
        BeforeAll(plan.before_all) if plan.before_all else None,
        CheckNames(views) if views else None,
        CheckParents(backfills) if backfills else None,
        ClaimSchemas(tuple(sorted({t.rsplit(".", 1)[0] for t in tables}))) if tables else None,
        PushSnapshots(tuple(s.name for s in plan.new_snapshots)) if plan.new_snapshots else None,
        CreateTables(tables) if tables else None,
        Restate(restated) if restated else None,
        Backfill(backfills) if backfills else None,
        StopIfFailed() if tables or backfills else None,
        AuditExisting(tuple(by_id[i] for i in plan.audit_only if i in by_id)) if plan.audit_only else None,
        *promotion_stages(draft_environment(plan), plan.previous_environment),
        AfterAll(plan.after_all) if plan.after_all else None,
    ]
    return tuple(stage for stage in stages if stage is not None)


def promotion_stages(environment: Environment, previous: Environment | None) -> tuple[Stage, ...]:
    """Promote, swap views, finalize: serving `environment` in place of `previous` (the row as it was
    read, finalized or not). A rollback runs these alone: its tables hold their data already."""
    views = environment.views()
    write, keep = tuple(views), ()
    if previous is not None and previous.finalized_ts is not None:
        # A view stores its columns when created, so a changed identifier (e.g. a forward-only schema
        # change on the same table) rewrites it; an unfinalized previous row rewrites everything.
        before = {s.name: (s.identifier, s.table_name) for s in previous.snapshots if s.promoted}
        same = {view_name(s.name, environment.name) for s in environment.snapshots
                if before.get(s.name) == (s.identifier, s.table_name)}
        write, keep = tuple(v for v in views if v not in same), tuple(v for v in views if v in same)
    return (Promote(environment.name, tuple(views)),
            SwapViews(write=write, keep=keep, drop=tuple(environment.stale_views())),
            Finalize(environment.name))


def environment_snapshots(plan: Plan) -> tuple[EnvironmentSnapshot, ...]:
    """What the environment's row lists after `plan`: every snapshot but EMBEDDED ones, by name."""
    mapping = plan.tables()
    return tuple(EnvironmentSnapshot(name=s.name, identifier=s.identifier, version=s.version, kind=s.kind,
                                     table_name=mapping[s.name], promoted=plan.is_promoted(s.name))
                 for s in sorted(plan.snapshots.values(), key=lambda s: s.name) if s.kind != "EMBEDDED")


def draft_environment(plan: Plan) -> Environment:
    """The row `plan` promotes, without its expiry (which is set when it is written)."""
    previous = plan.previous_environment
    return Environment(name=plan.environment, snapshots=environment_snapshots(plan), plan_id=plan.plan_id,
                       previous_plan_id=previous.plan_id if previous else None,
                       previous_snapshots=previous.snapshots if previous else ())


def stage_lines(stages: Iterable[Stage]) -> list[str]:
    """`plan --explain`'s description of what applying the plan does: each stage with its own objects."""
    lines = [f"Apply stages (holding {ENVIRONMENT_LEASE}):"]
    for index, stage in enumerate(stages, start=1):
        holds = f"; holds {stage.holds}" if stage.holds else ""
        lines.append(f"  {index:>2}. {stage.name}: {stage.does}{holds}")
        if stage.detail():
            lines.append(f"      {stage.detail()}")
    return lines


def _model_batches(plan: Plan) -> tuple[ModelBatches, ...]:
    by_id = {s.snapshot_id: s.name for s in plan.snapshots.values()}
    return tuple(ModelBatches(by_id[b.snapshot_id], tuple(b.batches))
                 for b in plan.backfills if b.snapshot_id in by_id)


def _count(items: tuple[Any, ...] | list[Any], noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


def _names(items: tuple[str, ...] | list[str], noun: str) -> str:
    """`3 tables: a, b, c` or `5 tables: a, b, c and 2 more`; `0 views` when there are none.

    >>> _names(("a", "b", "c", "d"), "view")
    '4 views: a, b, c and 1 more'
    """
    if not items:
        return _count(items, noun)
    more = f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else ""
    return f"{_count(items, noun)}: {', '.join(items[:_SHOWN])}{more}"


def _batches(models: tuple[ModelBatches, ...]) -> str:
    total = sum(len(m.batches) for m in models)
    shown = [f"{m.model} ({len(m.batches)})" for m in models]
    return f"{total} {'batch' if total == 1 else 'batches'} of {_names(shown, 'model')}"


def _span(interval: Interval) -> str:
    return f"[{to_ts(interval[0])}, {to_ts(interval[1])})"


def _json(value: Any) -> Any:
    if isinstance(value, ModelBatches):
        return {"model": value.model, "batches": [[to_ts(s), to_ts(e)] for s, e in value.batches]}
    if isinstance(value, ModelInterval):
        return {"model": value.model, "interval": [to_ts(value.interval[0]), to_ts(value.interval[1])]}
    if isinstance(value, tuple):
        return [_json(item) for item in value]
    return value
