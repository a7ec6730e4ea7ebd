"""The frozen Plan: what changes between the project and an environment, and what to backfill."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Callable, Iterable

from bot.snapshot import ChangeCategory, Snapshot, SnapshotId
from bot.state.protocol import Environment, Interval


# (message, done, total): what apply and run report while they compute batches
ProgressCallback = Callable[[str, int, int], None]
# one line when an apply stage starts and one when it ends, with its elapsed time (for logs: no terminal)
StageCallback = Callable[[str], None]


class BatchStarted(str):
    """A progress message saying a batch began (`model [interval]`): reporters time the batch from it and
    show its duration when it ends (the next plain message from the same thread); no line of its own."""


class StillRunning(str):
    """A progress message saying a batch is still running (model, interval, elapsed): CI's heartbeat."""


class ChangeType(str, Enum):
    ADDED = "added"
    REMOVED = "removed"
    DIRECTLY_MODIFIED = "directly_modified"
    INDIRECTLY_MODIFIED = "indirectly_modified"
    METADATA_UPDATED = "metadata_updated"


class BackfillKind(str, Enum):
    INTERVALS = "intervals"
    FULL_REFRESH = "full_refresh"
    RECREATE_VIEW = "recreate_view"


@dataclass(frozen=True)
class ModelChange:
    """One changed model of the plan, as listed in summaries."""

    name: str
    change: ChangeType
    category: ChangeCategory | None
    kind: str
    snapshot: Snapshot | None          # None only for removed models
    previous: Snapshot | None = None   # what the environment had before
    diff: str = ""                     # unified diff of rendered queries (directly modified only)
    indirect_children: tuple[str, ...] = ()


@dataclass(frozen=True)
class Backfill:
    """Intervals one snapshot must compute; batches already grouped by batch_size."""

    snapshot_id: SnapshotId
    kind: BackfillKind
    intervals: tuple[Interval, ...] = ()
    batches: tuple[Interval, ...] = ()
    is_dev: bool = False               # forward-only preview writing to the `__dev` table
    # the model's cron, for showing the intervals without reading the snapshot's definition (None: read it)
    cron: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class PlanOptions:
    skip_backfill: bool = False
    forward_only: bool = False
    include_unmodified: bool = False
    no_gaps: bool = False
    start: str | None = None
    end: str | None = None
    execution_time: str | None = None
    effective_from: str | None = None
    restate_models: tuple[str, ...] = ()
    allow_destructive_models: tuple[str, ...] = ()
    skip_tests: bool = False
    source: str = ""           # where the plan comes from, recorded with its promotion (bot.plan.drift)


@dataclass(frozen=True)
class Plan:
    """Everything apply needs, computed without Spark.

    `snapshots` are all snapshots of the target environment after the plan (changed or not), keyed
    by model name; `new_snapshots` those state does not hold yet. `expected_plan_id` is the target
    environment's plan_id when the plan was computed (an optimistic lock: promotion checks it).
    """

    plan_id: str
    environment: str
    new_environment: bool
    expected_plan_id: str | None
    previous_environment: Environment | None
    snapshots: dict[str, Snapshot]
    new_snapshots: tuple[Snapshot, ...]
    changes: tuple[ModelChange, ...]
    backfills: tuple[Backfill, ...]
    restatements: dict[SnapshotId, Interval] = field(default_factory=dict)
    options: PlanOptions = PlanOptions()
    start: int = 0                     # epoch ms
    end: int = 0                       # epoch ms, exclusive
    execution_time: int = 0            # epoch ms
    warnings: tuple[str, ...] = ()     # e.g. destructive forward-only changes under `warn`
    # snapshots whose audits changed but that this plan does not backfill: their audits run
    # against the data they already have, before promotion (SQLMesh's "Auditing models" stage)
    audit_only: tuple[SnapshotId, ...] = ()
    # the models the environment holds views for (its promoted models); None: all (prod, include_unmodified)
    promoted: frozenset[str] | None = None
    # the config's before_all and after_all statements, run around the apply (bot.plan.env_statements)
    before_all: tuple[str, ...] = ()
    after_all: tuple[str, ...] = ()

    @property
    def has_changes(self) -> bool:
        return bool(self.changes) or bool(self.restatements)

    @property
    def requires_backfill(self) -> bool:
        return any(b.intervals or b.kind is not BackfillKind.INTERVALS for b in self.backfills)

    @property
    def is_up_to_date(self) -> bool:
        """Nothing to apply: no change, nothing to backfill, and the environment's views are in place."""
        previous = self.previous_environment
        return (not self.has_changes and not self.requires_backfill and previous is not None
                and previous.finalized_ts is not None
                and (self.promoted is not None or all(s.promoted for s in previous.snapshots)))

    def is_promoted(self, name: str) -> bool:
        """Whether the environment holds a view for model `name` after this plan."""
        return self.promoted is None or name in self.promoted

    def change_for(self, name: str) -> ModelChange | None:
        return next((c for c in self.changes if c.name == name), None)

    def tables(self, names: Iterable[str] | None = None) -> dict[str, str]:
        """Model name → the physical table its readers use under this plan: a forward-only preview's
        `__dev` table, else the snapshot's table (an EXTERNAL model: its own name). Every model's, or
        those of `names` that the plan has."""
        dev = {b.snapshot_id for b in self.backfills if b.is_dev}
        snapshots = self.snapshots if names is None else \
            {name: self.snapshots[name] for name in names if name in self.snapshots}
        return {name: (s.dev_table_name if s.snapshot_id in dev else s.table_name)
                for name, s in snapshots.items()}
