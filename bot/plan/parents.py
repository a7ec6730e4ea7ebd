"""The parent-interval rule: a child's batch is evaluated only when its parents hold that interval.

Shared by plan apply and `run`, checked before anything is written. A parent "holds" an interval when
state records it or the same plan/run fills it first. Only what the parent could hold by now counts:
its own [start, end) up to its last complete cron interval. Incremental parents must cover the
child's batch; other materialized parents (FULL, SEED) must have been filled once; views and
embedded models pass the question on to their own parents; external parents are not checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

from bot.errors import PlanError
from bot.plan.definition import Plan
from bot.plan.execution import order_snapshots
from bot.timeline.intervals import (Interval, format_interval, interval_unit, merge, missing_intervals,
                           subtract)
from bot.project.model import KindName, Model
from bot.timeline.times import MS_PER_DAY, exclusive_end_ms, midnight, now_ms, to_ms
from bot.snapshot import Snapshot
from bot.state.protocol import SnapshotIntervals, StateReader


def model_start(model: Model, *, default_start: str | None, execution_time: int, now: int | None = None) -> int:
    """The model's `start` (else model_defaults.start, else the day before the execution time), as plans
    compute it. A relative start (`1 week ago`) counts from `now` (the wall clock), not from the execution
    time: SQLMesh reads a model's start with no relative base whatever the plan's execution time."""
    text = model.start or default_start
    if text:
        return to_ms(text, relative_base=wall_clock() if now is None else now)
    return midnight(execution_time) - MS_PER_DAY


def model_end(model: Model, *, now: int | None = None) -> int | None:
    """The model's exclusive `end` (a day covers the whole day), None without one. A relative end (`3 days
    ago`) counts from `now` (the wall clock), not from the execution time, as SQLMesh 0.236.4 reads it: a
    plan as of 2026-11-20 on 2026-12-06 filled a daily model with `end '3 days ago'` up to 2026-11-19."""
    if not model.end:
        return None
    return exclusive_end_ms(model.end, relative_base=wall_clock() if now is None else now)


def wall_clock() -> int:
    """Now, to the minute (epoch ms): the base SQLMesh reads a model's relative start and end against."""
    return now_ms() // 60_000 * 60_000


@dataclass
class ParentCheck:
    """What each snapshot of an environment holds (recorded + filled earlier in this plan or run)."""

    snapshots: Mapping[str, Snapshot]          # model name → snapshot of the environment
    models_for: Callable[[Snapshot], Model]
    execution_time: int
    default_start: str | None
    filled: dict[str, list[Interval]] = field(default_factory=dict)
    _reachable: dict[str, list[Interval]] = field(default_factory=dict)

    @classmethod
    def from_state(cls, *, snapshots: Mapping[str, Snapshot], tables: Mapping[str, str],
                   recorded: Mapping[tuple[str, str], SnapshotIntervals],
                   models_for: Callable[[Snapshot], Model], execution_time: int,
                   default_start: str | None) -> "ParentCheck":
        """`tables` says which table each model is read from: a `__dev` preview uses dev intervals."""
        filled: dict[str, list[Interval]] = {}
        for name, snapshot in snapshots.items():
            found = recorded.get((snapshot.name, snapshot.version))
            dev = tables.get(name) == snapshot.dev_table_name
            filled[name] = list((found.dev_intervals if dev else found.intervals) if found else [])
        return cls(snapshots=snapshots, models_for=models_for, execution_time=execution_time,
                   default_start=default_start, filled=filled)

    def add(self, name: str, intervals: Iterable[Interval]) -> None:
        """`name` will have filled `intervals` before any of its children runs."""
        self.filled[name] = merge([*self.filled.get(name, []), *intervals])

    def missing(self, snapshot: Snapshot, batch: Interval) -> list[str]:
        """Why `snapshot` cannot run `batch` now: one phrase per parent lacking data, else []."""
        reasons: list[str] = []
        for parent in self._materialized_parents(snapshot, set()):
            model = self.models_for(parent)
            if not model.kind.name.is_incremental:
                if not self.filled.get(parent.name):
                    reasons.append(f"parent `{parent.name}` has never been filled")
                continue
            need = subtract([batch], subtract([batch], self._reachable_for(parent, model)))
            gaps = subtract(need, self.filled.get(parent.name, []))
            if gaps:
                unit = interval_unit(model.cron)
                reasons.append(f"parent `{parent.name}` has no data for "
                               + ", ".join(f"[{format_interval(g, unit)}]" for g in gaps[:3]))
        return reasons

    def _materialized_parents(self, snapshot: Snapshot, seen: set[str]) -> list[Snapshot]:
        found: list[Snapshot] = []
        for ref in snapshot.parents:
            parent = self.snapshots.get(ref.name)
            if parent is None or parent.name in seen or parent.name == snapshot.name:
                continue
            seen.add(parent.name)
            kind = self.models_for(parent).kind.name
            if kind is KindName.EXTERNAL:
                continue
            if kind in (KindName.VIEW, KindName.EMBEDDED):
                found += self._materialized_parents(parent, seen)
            else:
                found.append(parent)
        return found

    def _reachable_for(self, parent: Snapshot, model: Model) -> list[Interval]:
        """The intervals `parent` can hold at this execution time (its window, complete units only)."""
        if parent.name not in self._reachable:
            start = model_start(model, default_start=self.default_start,
                                execution_time=self.execution_time)
            end = model_end(model)
            self._reachable[parent.name] = merge(missing_intervals(
                start=start, end=end, cron=model.cron, recorded=[],
                execution_time=self.execution_time))
        return self._reachable[parent.name]


def require_parents(check: ParentCheck, work: Sequence[tuple[Snapshot, Sequence[Interval],
                                                             Sequence[Interval]]]) -> None:
    """Walk `work` (snapshot, batches, intervals it fills) parents first; raise PlanError naming every
    batch whose parents lack data, before anything is evaluated."""
    problems: list[str] = []
    for snapshot, batches, fills in work:
        for batch in batches:
            reasons = check.missing(snapshot, batch)
            if reasons:
                unit = interval_unit(check.models_for(snapshot).cron)
                problems.append(f"`{snapshot.name}` [{format_interval(batch, unit)}]: "
                                + "; ".join(reasons))
        check.add(snapshot.name, fills)
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise PlanError("cannot evaluate a model before its parents hold the same interval: "
                        + "; ".join(problems[:5]) + more
                        + ". Fill the parents first (e.g. `meshbot plan` or `meshbot run` on the "
                        "environment that owns them) or narrow --start/--end")


def check_plan_parents(plan: Plan, mapping: Mapping[str, str], *, state: StateReader,
                       models_for: Callable[[Snapshot], Model], default_start: str | None) -> None:
    """Every backfill batch's parents hold its interval, from state or earlier in this plan."""
    by_id = {s.snapshot_id: s for s in plan.snapshots.values()}
    planned = {by_id[b.snapshot_id].name: b for b in plan.backfills if b.snapshot_id in by_id}
    snapshots = dict(plan.snapshots)
    recorded = state.get_intervals({(s.name, s.version) for s in snapshots.values()})
    for snapshot_id, interval in plan.restatements.items():   # restated spans count as empty
        snapshot = snapshots.get(snapshot_id.name)
        if snapshot is not None and (snapshot.name, snapshot.version) in recorded:
            found = recorded[(snapshot.name, snapshot.version)]
            found.intervals = subtract(found.intervals, [interval])
    check = ParentCheck.from_state(snapshots=snapshots, tables=mapping, recorded=recorded,
                                   models_for=models_for,
                                   execution_time=plan.execution_time,
                                   default_start=default_start)
    work = [(s, planned[s.name].batches, planned[s.name].intervals)
            for s in order_snapshots(snapshots.values()) if s.name in planned]
    require_parents(check, work)
