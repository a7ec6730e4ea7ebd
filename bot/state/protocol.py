"""What the rest of meshbot may ask of state: Environment values and the StateSync protocol."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Protocol

from bot.errors import PlanError
from bot.snapshot import NO_PHYSICAL_TABLE, Snapshot, SnapshotId, view_name

if TYPE_CHECKING:
    from bot.state.rekey import CurrentRenders
    from bot.state.versions import Migrated

Interval = tuple[int, int]  # [start, end) in epoch milliseconds, UTC


@dataclass(frozen=True)
class EnvironmentSnapshot:
    """What an environment needs to know of each snapshot to build its views."""

    name: str
    identifier: str
    version: str
    kind: str
    table_name: str            # the physical table the environment's view selects from
    # whether the environment has a view for it: a dev environment holds views only for the models it
    # promoted (changed against it or prod), as SQLMesh without include_unmodified; rows written before
    # this field read as promoted
    promoted: bool = True

    @property
    def snapshot_id(self) -> SnapshotId:
        return SnapshotId(self.name, self.identifier)

    @property
    def has_view(self) -> bool:
        """An EXTERNAL model is read where it lives and an EMBEDDED one is inlined: neither has a view."""
        return self.kind not in NO_PHYSICAL_TABLE

    @property
    def read_name(self) -> str:
        """What a query reads for this model: its physical table, or an EXTERNAL model's own name."""
        return self.name if self.kind == "EXTERNAL" else self.table_name


@dataclass(frozen=True)
class Environment:
    name: str
    snapshots: tuple[EnvironmentSnapshot, ...]
    plan_id: str
    previous_plan_id: str | None = None
    start: str | None = None
    end: str | None = None
    expiration_ts: int | None = None   # epoch ms; None for prod
    finalized_ts: int | None = None
    suffix_target: str = "schema"
    # what the row this one replaced served: a promotion killed before its stale views were dropped
    # is finished from here (the replaced row itself is gone by then)
    previous_snapshots: tuple[EnvironmentSnapshot, ...] = ()

    @property
    def is_prod(self) -> bool:
        return self.name == "prod"

    def by_name(self) -> dict[str, EnvironmentSnapshot]:
        return {s.name: s for s in self.snapshots}

    def table_of(self, model_name: str) -> str:
        """The physical table holding `model_name` here; a model not in this environment is a PlanError."""
        entry = self.by_name().get(model_name)
        if entry is None:
            raise PlanError(f"model `{model_name}` is not in environment `{self.name}`")
        return entry.table_name

    def tables(self) -> dict[str, str]:
        """Model name → what a query in this environment reads for it (an EXTERNAL model: its own name)."""
        return {s.name: s.read_name for s in self.snapshots}

    def views(self) -> dict[str, str]:
        """View name → the physical table it selects from, for every promoted model of the environment
        that has one (a dev environment's unchanged models are read from their tables, not through a view)."""
        return {view_name(s.name, self.name): s.table_name for s in self.snapshots if s.has_view and s.promoted}

    def query_names(self) -> dict[str, str]:
        """Model name → what a query written against this environment reads: the view of a promoted
        model, else what its view would select from (its table; an EXTERNAL model's own name)."""
        return {s.name: view_name(s.name, self.name) if s.has_view and s.promoted else s.read_name
                for s in self.snapshots}

    def stale_views(self) -> list[str]:
        """Views the environment's previous row served and this one no longer does."""
        current = self.views()
        return [view for s in self.previous_snapshots if s.has_view and s.promoted
                and (view := view_name(s.name, self.name)) not in current]


@dataclass(frozen=True)
class HistoryEntry:
    """One plan an environment served: written with its promotion, finalized with it."""

    environment: str
    plan_id: str
    snapshots: tuple[EnvironmentSnapshot, ...]
    promoted_ts: int                   # epoch ms
    finalized_ts: int | None = None
    source: str = ""                   # where the plan came from (bot.plan.drift); "" before state schema 10


@dataclass
class SnapshotIntervals:
    """Intervals recorded for one (name, version); dev intervals belong to `__dev` preview tables."""

    name: str
    version: str
    intervals: list[Interval] = field(default_factory=list)
    dev_intervals: list[Interval] = field(default_factory=list)


@dataclass(frozen=True)
class PendingDrop:
    """A physical table or view (`kind`) of model version (`model`, `version`) the janitor is about to drop."""

    object: str
    kind: str           # "table" or "view"
    model: str
    version: str


@dataclass(frozen=True)
class LeaseHolder:
    """Who holds (or last held) a lease, doing what, since when and until when (epoch ms)."""

    owner: str          # host:pid:token
    purpose: str        # e.g. "plan of `prod` (plan 1a2b3c4d)"
    acquired_ts: int
    expires_ts: int


@dataclass(frozen=True)
class Lease:
    """The outcome of one acquire: `granted` to the caller, or held by `holder` (live, someone else).

    `previous` is whoever held the key before this acquire (None when nobody ever did): a holder
    other than the caller may have changed what the key guards.
    """

    key: str
    granted: bool
    holder: LeaseHolder
    previous: LeaseHolder | None = None


@dataclass(frozen=True)
class BatchTimes:
    """The recorded batches of one model version that kept their wall time, summed; the `metered_*`
    sums are over those of them that also kept Spark's task time (not on Spark Connect, not before v8)."""

    name: str
    version: str
    batches: int
    span_ms: int          # the time the batches covered
    elapsed_ms: int       # the wall time they took
    last_ts: int          # when the newest was recorded (epoch ms)
    metered_batches: int = 0
    metered_span_ms: int = 0
    executor_ms: int = 0  # the task run time of the metered batches, summed over their tasks
    bytes_read: int = 0   # what the metered batches read


def require_environment(state: "StateReader", name: str, *, hint: str = "") -> Environment:
    """`name`'s environment; else a PlanError that says which environments exist (and `hint`, what to do)."""
    env = state.get_environment(name)
    if env is None:
        names = state.get_environment_names()
        known = f"environments: {', '.join(names)}" if names else "no environment exists yet"
        raise PlanError(f"environment `{name}` does not exist ({known}){'; ' + hint if hint else ''}")
    return env


class StateReader(Protocol):
    def get_environment(self, name: str) -> Environment | None: ...

    def get_environments(self) -> list[Environment]: ...

    def get_environment_names(self) -> list[str]:
        """Every environment's name, sorted (reads no environment's snapshot list)."""
        ...

    def get_environment_history(self, name: str) -> list[HistoryEntry]:
        """The plans `name` served, newest first (its current plan first)."""
        ...

    def get_snapshots(self, ids: Iterable[SnapshotId]) -> dict[SnapshotId, Snapshot]: ...

    def stored_snapshot_ids(self, ids: Iterable[SnapshotId]) -> set[SnapshotId]:
        """Which of `ids` are stored (keys only: no definition is read)."""
        ...

    def listed_snapshots(self, listed: Iterable[EnvironmentSnapshot]) -> dict[SnapshotId, Snapshot]:
        """The snapshots of an environment's list, each read when a field the list lacks is first used."""
        ...

    def get_snapshots_by_version(self, name_versions: Iterable[tuple[str, str]]) -> list[Snapshot]: ...

    def get_intervals(self, name_versions: Iterable[tuple[str, str]]) -> dict[tuple[str, str], SnapshotIntervals]: ...

    def latest_interval_end(self, name_versions: Iterable[tuple[str, str]]) -> int | None:
        """The largest end of the pairs' recorded (not dev) intervals; None when none is recorded."""
        ...

    def get_batch_times(self, names: Iterable[str]) -> dict[tuple[str, str], BatchTimes]:
        """What the recorded batches of every version of `names` took (timed batches only)."""
        ...

    def schema_version(self) -> int: ...


class StateSync(StateReader, Protocol):
    def push_snapshots(self, snapshots: Iterable[Snapshot]) -> None: ...

    def add_interval(self, name: str, version: str, interval: Interval, *, is_dev: bool = False,
                     elapsed_ms: int | None = None, executor_ms: int | None = None,
                     bytes_read: int | None = None) -> None: ...

    def remove_intervals(self, name: str, version: str, interval: Interval, *, is_dev: bool = False) -> None: ...

    def promote(self, environment: Environment, *, expected_plan_id: str | None, source: str = "") -> None:
        """Replace the environment row in one transaction.

        Locks the row (SELECT ... FOR UPDATE on PostgreSQL); raises ConflictError when the stored
        plan_id is not `expected_plan_id` (None means: the environment must not exist yet).
        """
        ...

    def restore_environment(self, name: str, previous: Environment | None, *,
                            expected_plan_id: str) -> None:
        """Undo the promotion of `expected_plan_id`: write `previous` back exactly (None: delete)."""
        ...

    def finalize(self, environment_name: str, plan_id: str) -> None: ...

    def invalidate_environment(self, name: str) -> None: ...

    def delete_environment(self, name: str) -> None: ...

    def delete_snapshots(self, ids: Iterable[SnapshotId]) -> None: ...

    def acquire_lease(self, key: str, *, owner: str, purpose: str, ttl_ms: int,
                      replacing: str | None = None) -> Lease:
        """Take `key` for `ttl_ms` when it is free, expired, already `owner`'s or still held by
        `replacing` (a holder known to be dead); never waits."""
        ...

    def renew_leases(self, keys: Iterable[str], *, owner: str, ttl_ms: int) -> set[str]:
        """Extend `owner`'s leases on `keys`; returns those still held (the others were taken over)."""
        ...

    def release_lease(self, key: str, *, owner: str) -> bool:
        """Free `key` if `owner` holds it (its last owner and purpose stay); False when it did not."""
        ...

    def live_leases(self) -> dict[str, LeaseHolder]: ...

    def migrate(self, current: CurrentRenders | None = None) -> Migrated: ...

    def close(self) -> None: ...
