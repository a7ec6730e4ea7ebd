"""What a plan's backfill will cost, from the wall and Spark task times recorded with earlier batches of its models."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Collection, Mapping

from bot.plan.definition import Backfill, BackfillKind, Plan
from bot.snapshot import Snapshot
from bot.state.protocol import BatchTimes


@dataclass(frozen=True)
class BackfillEstimate:
    """One model's backfill in a plan: its size and, when batches of the model (or, for a model never
    timed, of its parents) were timed before, its expected wall time (serial; parallel tasks finish
    sooner) and executor time (Spark task time summed over all tasks: what a cluster bills)."""

    model: str
    intervals: int
    batches: int
    seconds: float | None = None
    basis: str = ""          # which recorded batches the estimate comes from; "" without history
    executor_seconds: float | None = None   # None when those batches have no Spark task time recorded


def history_names(plan: Plan, *, timed: Collection[str] | None = None) -> set[str]:
    """The models whose recorded batch times `estimate_backfills` may use: each backfilled model and the
    parents of those not in `timed` (all of them when `timed` is None): only a model never timed is
    estimated from its parents."""
    by_id = {s.snapshot_id: s for s in plan.snapshots.values()}
    names = set()
    for backfill in plan.backfills:
        name = backfill.snapshot_id.name
        names.add(name)
        if timed is not None and name in timed:
            continue
        snapshot = by_id.get(backfill.snapshot_id)
        names.update(parent.name for parent in (snapshot.parents if snapshot is not None else ()))
    return names


def recorded_times(plan: Plan, batch_times: Callable[[set[str]], Mapping[tuple[str, str], BatchTimes]]
                   ) -> dict[tuple[str, str], BatchTimes]:
    """The recorded batch times `estimate_backfills` needs, from `batch_times` (the state's): the backfilled
    models' first, then the parents of those never timed. A parent is read (its snapshot's row, for an
    unchanged model) only for such a model: a prod preview listing thousands of due models reads none."""
    own = {b.snapshot_id.name for b in plan.backfills}
    times = dict(batch_times(own)) if own else {}
    more = history_names(plan, timed={name for name, _ in times}) - own
    if more:
        times.update(batch_times(more))
    return times


def estimate_backfills(plan: Plan, times: Mapping[tuple[str, str], BatchTimes]) -> tuple[BackfillEstimate, ...]:
    """One estimate per backfill of `plan`, in its order (`times` should cover `history_names(plan)`).

    A model's cost comes from its previous version in the target environment when that one was timed,
    else from its most recently timed version; a model never timed costs what its timed parents' batches
    cost for the same window (the plan's versions of them first). Costs scale per covered millisecond for
    time-partitioned kinds (a bigger window costs more), per batch otherwise.
    """
    by_id = {s.snapshot_id: s for s in plan.snapshots.values()}
    previous = {s.name: s.version for s in (plan.previous_environment.snapshots
                                            if plan.previous_environment else ())}
    estimates = []
    for backfill in plan.backfills:
        snapshot = by_id.get(backfill.snapshot_id)
        name = backfill.snapshot_id.name
        batches = len(backfill.batches) if backfill.kind is BackfillKind.INTERVALS else 1
        unknown = BackfillEstimate(name, len(backfill.intervals), batches)
        if snapshot is None or backfill.kind is BackfillKind.RECREATE_VIEW:
            estimates.append(unknown)
            continue
        sample = _sample(name, (previous.get(name),), times)
        if sample is not None:
            which = "the previous version" if sample.version == previous.get(name) else "an earlier version"
            seconds, executor = _scaled(sample, snapshot, backfill, batches)
            estimates.append(BackfillEstimate(name, len(backfill.intervals), batches, seconds,
                                              f"{sample.batches} timed batch(es) of {which}", executor))
            continue
        parents = {p.name: _sample(p.name, (plan.snapshots[p.name].version if p.name in plan.snapshots else None,
                                            previous.get(p.name)), times) for p in snapshot.parents}
        timed = {parent: s for parent, s in sorted(parents.items()) if s is not None}
        if not timed:
            estimates.append(unknown)
            continue
        costs = [_scaled(s, snapshot, backfill, batches) for s in timed.values()]
        metered = [executor for _, executor in costs if executor is not None]
        estimates.append(BackfillEstimate(name, len(backfill.intervals), batches, sum(s for s, _ in costs),
                                          f"timed batches of its parents {', '.join(timed)} (a new model)",
                                          sum(metered) if metered else None))
    return tuple(estimates)


def _sample(name: str, preferred: tuple[str | None, ...],
            times: Mapping[tuple[str, str], BatchTimes]) -> BatchTimes | None:
    for version in preferred:
        if version is not None and (name, version) in times:
            return times[(name, version)]
    mine = [t for (n, _), t in times.items() if n == name and t.batches]
    return max(mine, key=lambda t: t.last_ts) if mine else None


def _scaled(sample: BatchTimes, snapshot: Snapshot, backfill: Backfill, batches: int) -> tuple[float, float | None]:
    """(wall seconds, executor seconds or None) of `backfill` at `sample`'s recorded cost."""
    by_time = snapshot.kind.startswith("INCREMENTAL_BY_TIME") and backfill.kind is BackfillKind.INTERVALS
    span = sum(end - start for start, end in backfill.intervals)

    def cost(total_ms: int, count: int, covered_ms: int) -> float:
        return total_ms / covered_ms * span / 1000 if by_time and covered_ms > 0 else total_ms / count * batches / 1000

    executor = (cost(sample.executor_ms, sample.metered_batches, sample.metered_span_ms)
                if sample.metered_batches else None)
    return cost(sample.elapsed_ms, sample.batches, sample.span_ms), executor


def total_seconds(estimates: tuple[BackfillEstimate, ...], *, executor: bool = False) -> float | None:
    """The serial sum (of executor time with `executor`) over the models that have one; None when none has."""
    known = [e.executor_seconds if executor else e.seconds for e in estimates]
    known = [s for s in known if s is not None]
    return sum(known) if known else None


def format_seconds(seconds: float) -> str:
    """A duration for people: '45 s', '12 min', '3.5 h'.

    >>> format_seconds(44.6), format_seconds(720), format_seconds(12600)
    ('45 s', '12 min', '3.5 h')
    """
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
