"""Which snapshots of a plan need computing, over which intervals, and which are restated."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

from bot.errors import PlanError
from bot.timeline.intervals import (Interval, batches, cron_floor, cron_prev, format_interval, interval_unit,
                           merge, missing_intervals, subtract)
from bot.plan.definition import Backfill, BackfillKind, ChangeType, ModelChange, PlanOptions
from bot.project.config import ProjectConfig
from bot.project.dag import DAG, select_models, topological_order
from bot.project.model import KindName, Model
from bot.timeline.times import exclusive_end_ms, to_ms
from bot.snapshot import ChangeCategory, Snapshot, SnapshotId
from bot.state.protocol import Environment, SnapshotIntervals, StateReader

@dataclass(frozen=True)
class BackfillInputs:
    models: Mapping[str, Model]
    snapshots: Mapping[str, Snapshot]          # the environment after the plan, parents first
    changes: Sequence[ModelChange]
    previous: Mapping[str, Snapshot]
    prod: Environment | None
    is_dev: bool
    restated: frozenset[str]
    options: PlanOptions
    config: ProjectConfig
    now_ms: int
    state: StateReader
    dag: DAG                                   # the graph of `models`

    @functools.cached_property   # the dataclass stays frozen; read by several steps of a plan
    def prod_keys(self) -> frozenset[tuple[str, str]]:
        """(name, version) of every snapshot prod serves."""
        return frozenset((s.name, s.version) for s in self.prod.snapshots) if self.prod else frozenset()


@dataclass(frozen=True)
class _Window:
    start: int | None
    end: int | None
    execution: int
    model_starts: Mapping[str, int] = field(default_factory=dict)   # each model's effective start


def restated_models(models: Mapping[str, Model], selectors: Sequence[str], *,
                    dag: DAG | None = None) -> frozenset[str]:
    """Models picked by --restate-model selectors (names, `tag:x`, globs) plus all their descendants.

    Models with `disable_restatement` are left out. `dag` is the graph of `models` when the caller has it.
    """
    if not selectors:
        return frozenset()
    graph = dag or DAG.build(models)
    try:
        picked = select_models(selectors, models, dag=graph)
    except PlanError as error:
        raise PlanError(f"--restate-model: {error}") from None
    picked |= graph.downstream(picked)
    return frozenset(n for n in picked if not models[n].kind.disable_restatement)


def plan_backfills(inputs: BackfillInputs) -> tuple[tuple[Backfill, ...], dict[SnapshotId, Interval],
                                                    int, int, int]:
    """(backfills, restatements, plan start, plan end, execution time), all epoch ms."""
    opts = inputs.options
    execution = (to_ms(opts.execution_time, relative_base=inputs.now_ms)
                 if opts.execution_time else inputs.now_ms)
    window = _Window(start=to_ms(opts.start, relative_base=execution) if opts.start else None,
                     end=exclusive_end_ms(opts.end, relative_base=execution) if opts.end else None,
                     execution=execution)
    starts = model_starts(inputs.models, execution=execution, default_start=inputs.config.model_defaults.start,
                          plan_start=window.start, now=inputs.now_ms)
    plan_start = window.start if window.start is not None else min(starts.values(), default=None)
    window = replace(window, model_starts=starts)
    inputs = replace(inputs, restated=_restatable(inputs))
    effective = _effective_names(inputs)
    targets = _targets(inputs)
    if opts.skip_backfill or not targets:
        return (), {}, plan_start or 0, window.end or execution, execution
    keys = {(s.name, s.version) for s in targets}
    if opts.no_gaps:   # a target's previous version: what it had computed
        keys |= {(p.name, p.version) for s in targets if (p := inputs.previous.get(s.name)) is not None}
    recorded = inputs.state.get_intervals(keys)
    if inputs.is_dev and window.end is None:   # a dev plan ends where prod's data does
        window = replace(window, end=inputs.state.latest_interval_end(inputs.prod_keys))
    backfills: list[Backfill] = []
    restatements: dict[SnapshotId, Interval] = {}
    missing = _MissingIntervals()
    for snapshot in targets:
        backfill = _backfill_for(inputs, snapshot, stored=recorded.get((snapshot.name, snapshot.version)),
                                 window=window, restatements=restatements, missing=missing,
                                 effective_from=_effective_ms(inputs, window) if snapshot.name in effective
                                 else None)
        if backfill is not None:
            if opts.no_gaps:
                _check_gaps(inputs, snapshot, backfill=backfill, recorded=recorded)
            backfills.append(backfill)
    spans = [i for b in backfills for i in b.intervals]
    start = min((s for s, _ in spans), default=plan_start or 0)
    end = max((e for _, e in spans), default=window.end or execution)
    return tuple(backfills), restatements, start, end, execution


def _targets(inputs: BackfillInputs) -> list[Snapshot]:
    """Prod: every materialized snapshot; dev: versions prod does not share (new in this plan or
    left unfilled by an earlier `--skip-backfill`), forward-only previews, and restated ones."""
    materialized = [s for name, s in inputs.snapshots.items()
                    if name in inputs.models and inputs.models[name].kind.name.is_materialized]
    if not inputs.is_dev:
        return materialized
    wanted = {c.name for c in inputs.changes if c.snapshot is not None and (
        c.change is ChangeType.ADDED or c.category is None or c.category.needs_new_version
        or c.category is ChangeCategory.FORWARD_ONLY)}
    prod = inputs.prod_keys
    return [s for s in materialized if s.name in wanted or s.name in inputs.restated
            or (s.name, s.version) not in prod]


def _restatable(inputs: BackfillInputs) -> frozenset[str]:
    """In dev, a restatement never touches a table prod shares: only dev's own versions are restated."""
    if not inputs.is_dev or not inputs.restated:
        return inputs.restated
    prod = inputs.prod_keys
    return frozenset(n for n in inputs.restated
                     if n in inputs.snapshots and (n, inputs.snapshots[n].version) not in prod)


def _effective_names(inputs: BackfillInputs) -> frozenset[str]:
    """--effective-from: forward-only changes keeping their table, and everything downstream of them."""
    if not inputs.options.effective_from:
        return frozenset()
    roots = {c.name for c in inputs.changes
             if c.category is ChangeCategory.FORWARD_ONLY and c.previous is not None
             and c.snapshot is not None and c.previous.version == c.snapshot.version}
    if not roots:
        raise PlanError("--effective-from applies only to forward-only changes, and this plan has none "
                        "(use --forward-only or a forward_only model)")
    if inputs.is_dev:
        return frozenset()   # dev previews compute their own `__dev` tables from scratch
    picked = roots | inputs.dag.downstream(roots)
    return frozenset(n for n in picked if not inputs.models[n].kind.disable_restatement)


def _effective_ms(inputs: BackfillInputs, window: "_Window") -> int:
    return to_ms(inputs.options.effective_from or "", relative_base=window.execution)


def model_starts(models: Mapping[str, Model], *, execution: int, default_start: str | None = None,
                 plan_start: int | None = None, now: int | None = None) -> dict[str, int]:
    """Each model's start (epoch ms), as SQLMesh infers it for models without `start`.

    A model's own `start` (else `model_defaults.start`) wins; a start-less model takes the earliest
    start of its parents (models of the project); a start-less model without parents starts at the
    cron tick before the execution time's tick (yesterday for `@daily`) — or at `plan_start`
    (`--start`) when one is given. SQLMesh keeps the previous tick even under an earlier `--start`,
    silently computing less than asked; meshbot honours `--start` (docs/coming-from-sqlmesh.md).
    A relative start (`1 week ago`) counts from `now` (the wall clock; default the execution time), as
    SQLMesh reads a model's start with no relative base whatever the plan's execution time.
    """
    base = execution if now is None else now
    texts = {name: model.start or default_start for name, model in models.items()}
    if all(texts.values()):   # every model has a start: no order needed (10,000 models: no graph sort)
        return {name: _start_ms(text, base) for name, text in texts.items()}
    parents = {name: () if texts[name] else tuple(models[name].depends_on) for name in models}
    starts: dict[str, int] = {}
    for name in topological_order(parents):
        model, text = models[name], texts[name]
        known = [starts[p] for p in parents[name] if p in starts]
        if text:
            starts[name] = _start_ms(text, base)
        elif known:
            starts[name] = min(known)
        elif plan_start is not None:
            starts[name] = plan_start
        else:
            starts[name] = cron_prev(model.cron, cron_floor(model.cron, execution))
    return starts


# A project's models share a few start and end texts; reading one takes ~0.1 ms (strptime), so 10,000
# models read each text once. Both are pure given the base.
@functools.lru_cache(maxsize=256)
def _start_ms(text: str, base: int) -> int:
    return to_ms(text, relative_base=base)


@functools.lru_cache(maxsize=256)
def _end_ms(text: str, base: int) -> int:
    return exclusive_end_ms(text, relative_base=base)


def _model_window(inputs: BackfillInputs, model: Model, window: _Window) -> tuple[int, int | None]:
    base = window.execution
    start = window.model_starts.get(model.name)
    if start is None:
        start = model_starts({model.name: model}, execution=base, plan_start=window.start,
                             default_start=inputs.config.model_defaults.start, now=inputs.now_ms)[model.name]
    if window.start is not None:
        start = max(start, window.start)
    # a relative end counts from the wall clock, as a relative start does (bot.plan.parents.model_end)
    ends = [e for e in (_end_ms(model.end, inputs.now_ms) if model.end else None, window.end)
            if e is not None]
    return start, min(ends) if ends else None


class _MissingIntervals:
    """missing_intervals and their batches, computed once per distinct input within one plan: the
    models of a project share a few starts, crons and recorded histories (10,000 models, a few dozen)."""

    def __init__(self) -> None:
        self._missing: dict[tuple, tuple[Interval, ...]] = {}
        self._batches: dict[tuple, tuple[Interval, ...]] = {}

    def missing(self, *, recorded: Sequence[Interval], start: int, end: int | None, cron: str,
                execution_time: int, lookback: int = 0) -> tuple[Interval, ...]:
        key = (tuple(map(tuple, recorded)), start, end, cron, execution_time, lookback)
        found = self._missing.get(key)
        if found is None:
            found = self._missing[key] = tuple(missing_intervals(
                recorded=recorded, start=start, end=end, cron=cron, execution_time=execution_time,
                lookback=lookback))
        return found

    def batches(self, missing: tuple[Interval, ...], batch_size: int | None) -> tuple[Interval, ...]:
        key = (missing, batch_size)
        found = self._batches.get(key)
        if found is None:
            found = self._batches[key] = tuple(batches(missing, batch_size))
        return found


def _backfill_for(inputs: BackfillInputs, snapshot: Snapshot, *, stored: SnapshotIntervals | None,
                  window: _Window, restatements: dict[SnapshotId, Interval], missing: _MissingIntervals,
                  effective_from: int | None = None) -> Backfill | None:
    model = inputs.models[snapshot.name]
    preview = inputs.is_dev and snapshot.change_category is ChangeCategory.FORWARD_ONLY
    # a preview is recomputed whole: its `__dev` table may hold an earlier preview of the same version
    recorded = [] if preview else list(stored.intervals if stored else [])
    start, end = _model_window(inputs, model, window)
    restated = snapshot.name in inputs.restated or effective_from is not None
    restate_from = start if effective_from is None or snapshot.name in inputs.restated \
        else max(start, effective_from)
    common = dict(start=start, end=end, cron=model.cron, execution_time=window.execution)
    if model.kind.name is KindName.INCREMENTAL_BY_TIME_RANGE:
        if restated:
            span = (restate_from, end if end is not None else window.execution)
            restatements[snapshot.snapshot_id] = span
            recorded = subtract(recorded, [span])
        gaps = missing.missing(recorded=recorded, lookback=model.kind.lookback, **common)
        if not gaps:
            return None
        return Backfill(snapshot_id=snapshot.snapshot_id, kind=BackfillKind.INTERVALS, intervals=gaps,
                        batches=missing.batches(gaps, model.kind.batch_size), is_dev=preview,
                        cron=model.cron)
    is_view = model.kind.name is KindName.VIEW
    prev = inputs.previous.get(snapshot.name)
    if is_view and prev is not None and prev.version == snapshot.version:
        return None   # views record no intervals; a view keeping its version stays as it is
    if recorded and not is_view and not restated:
        return _due_again(snapshot, model, recorded=recorded, common=common, missing=missing)
    full = merge(missing.missing(recorded=(), **common))
    if restated and not is_view and full:
        restatements[snapshot.snapshot_id] = full[0]
    kind = BackfillKind.RECREATE_VIEW if is_view else BackfillKind.FULL_REFRESH
    return Backfill(snapshot_id=snapshot.snapshot_id, kind=kind, intervals=tuple(full[:1]),
                    batches=tuple(full[:1]), is_dev=preview, cron=model.cron)


def _due_again(snapshot: Snapshot, model: Model, *, recorded: list[Interval], common: dict,
               missing: _MissingIntervals) -> Backfill | None:
    """A version computed before whose cron made more intervals due: computed as `run` would (a FULL
    model refreshed once over them, incremental kinds in batches; a loaded seed never again), as
    SQLMesh's plan does for every model of the environment."""
    if model.kind.name is KindName.SEED:
        return None
    gaps = missing.missing(recorded=recorded, lookback=model.kind.lookback if model.kind.name.is_incremental
                           else 0, **common)
    if not gaps:
        return None
    kind = BackfillKind.INTERVALS if model.kind.name.is_incremental else BackfillKind.FULL_REFRESH
    return Backfill(snapshot_id=snapshot.snapshot_id, kind=kind, intervals=gaps,
                    batches=tuple(due_batches_of(model, gaps)), is_dev=False, cron=model.cron)


def due_batches_of(model: Model, missing: Sequence[Interval]) -> list[Interval]:
    """How a model's missing intervals are computed: incremental kinds in `batch_size` batches,
    full-refresh kinds (FULL, materialized VIEW) in one batch spanning them all."""
    if model.kind.name.is_incremental:
        return batches(missing, model.kind.batch_size)
    return [(missing[0][0], missing[-1][1])]


def _check_gaps(inputs: BackfillInputs, snapshot: Snapshot, *, backfill: Backfill,
                recorded: Mapping[tuple[str, str], SnapshotIntervals]) -> None:
    """--no-gaps: a new version must cover everything its predecessor had computed."""
    prev = inputs.previous.get(snapshot.name)
    if prev is None or prev.version == snapshot.version or backfill.kind is not BackfillKind.INTERVALS:
        return
    had = recorded.get((prev.name, prev.version))
    ours = recorded.get((snapshot.name, snapshot.version))
    covered = list(backfill.intervals) + (list(ours.intervals) if ours else [])
    gaps = subtract(had.intervals if had else [], covered)
    if gaps:
        unit = interval_unit(inputs.models[snapshot.name].cron)
        raise PlanError(f"--no-gaps: `{snapshot.name}` would have a gap at "
                        f"[{format_interval(gaps[0], unit)}] that its previous version had computed; "
                        "widen --start/--end or drop --no-gaps")
