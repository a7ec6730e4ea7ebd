"""How long a plan's backfill will take, from the wall times recorded with earlier batches of its models."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from bot.plan.definition import BackfillKind, Plan
from bot.snapshot import Snapshot
from bot.state.api import BatchTimes


@dataclass(frozen=True)
class BackfillEstimate:
    """One model's backfill in a plan: its size and, when batches of the model were timed before, its
    expected wall time (serial; parallel tasks finish sooner)."""

    model: str
    intervals: int
    batches: int
    seconds: float | None = None
    basis: str = ""          # which recorded batches the estimate comes from; "" without history


def estimate_backfills(plan: Plan, times: Mapping[tuple[str, str], BatchTimes]) -> tuple[BackfillEstimate, ...]:
    """One estimate per backfill of `plan`, in its order. A model's cost comes from its previous version
    in the target environment when that one was timed, else from its most recently timed version: per
    covered millisecond for time-partitioned kinds (a bigger window costs more), per batch otherwise."""
    by_id = {s.snapshot_id: s for s in plan.snapshots.values()}
    previous = {s.name: s.version for s in (plan.previous_environment.snapshots
                                            if plan.previous_environment else ())}
    estimates = []
    for backfill in plan.backfills:
        snapshot = by_id.get(backfill.snapshot_id)
        name = backfill.snapshot_id.name
        batches = len(backfill.batches) if backfill.kind is BackfillKind.INTERVALS else 1
        sample = _sample(name, previous.get(name), times)
        if snapshot is None or sample is None or backfill.kind is BackfillKind.RECREATE_VIEW:
            estimates.append(BackfillEstimate(name, len(backfill.intervals), batches))
            continue
        if _by_time(snapshot) and backfill.kind is BackfillKind.INTERVALS and sample.span_ms > 0:
            span = sum(end - start for start, end in backfill.intervals)
            seconds = sample.elapsed_ms / sample.span_ms * span / 1000
        else:
            seconds = sample.elapsed_ms / sample.batches * batches / 1000
        which = "the previous version" if sample.version == previous.get(name) else "an earlier version"
        estimates.append(BackfillEstimate(name, len(backfill.intervals), batches, seconds,
                                          f"{sample.batches} timed batch(es) of {which}"))
    return tuple(estimates)


def _sample(name: str, previous: str | None, times: Mapping[tuple[str, str], BatchTimes]) -> BatchTimes | None:
    if previous is not None and (name, previous) in times:
        return times[(name, previous)]
    mine = [t for (n, _), t in times.items() if n == name and t.batches]
    return max(mine, key=lambda t: t.last_ts) if mine else None


def _by_time(snapshot: Snapshot) -> bool:
    return snapshot.kind.startswith("INCREMENTAL_BY_TIME")


def total_seconds(estimates: tuple[BackfillEstimate, ...]) -> float | None:
    """The serial sum over the models that have an estimate; None when none has."""
    known = [e.seconds for e in estimates if e.seconds is not None]
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
