"""SqlStateSync: the StateSync facade over the snapshot, environment, interval and version repositories."""

from __future__ import annotations

from typing import Iterable

import sqlalchemy as sa

from bot.errors import StateError
from bot.fingerprint import FINGERPRINT_SCHEME
from bot.timeline import times
from bot.snapshot import Snapshot, SnapshotId
from bot.state import versions
from bot.state._util import write_transaction
from bot.state.protocol import (BatchTimes, Environment, EnvironmentSnapshot, HistoryEntry, Interval, Lease, LeaseHolder,
                           PendingDrop, SnapshotIntervals)
from bot.state.environments import EnvironmentState
from bot.state.intervals import IntervalState
from bot.state.leases import LeaseState
from bot.state.migrations import latest_version
from bot.state.pending_drops import PendingDropState
from bot.state.rekey import CurrentRenders
from bot.state.snapshots import SnapshotState
from bot.state.tables import Tables


class SqlStateSync:
    """State in SQLite or PostgreSQL through SQLAlchemy Core; thread-safe (one connection per call)."""

    def __init__(self, engine: sa.Engine, tables: Tables, *, stored_version: int, location: str,
                 stored_scheme: int = FINGERPRINT_SCHEME) -> None:
        self.engine = engine
        self.tables = tables
        self.location = location
        self._stored_version = stored_version
        self._stored_scheme = stored_scheme
        self._snapshots = SnapshotState(engine, tables)
        self._environments = EnvironmentState(engine, tables)
        self._intervals = IntervalState(engine, tables)
        self._leases = LeaseState(engine, tables)
        self._pending = PendingDropState(engine, tables, self._snapshots, self._intervals)
        self._state_id: str | None = None

    # versions

    def schema_version(self) -> int:
        return self._stored_version

    def migrate(self, current: CurrentRenders | None = None) -> versions.Migrated:
        """Upgrade an older state to this meshbot's schema version and fingerprints; says what it did."""
        migrated = versions.migrate(self.engine, self.tables, location=self.location, current=current)
        self._stored_version, self._stored_scheme = migrated.schema_version, migrated.fingerprint_scheme
        return migrated

    @property
    def state_id(self) -> str:
        """This state's random id, set once when it was created (or migrated); read once."""
        if self._state_id is None:
            self._current()
            with self.engine.connect() as conn:
                self._state_id = versions.read_state_id(conn, self.tables)
        return self._state_id

    def _current(self) -> None:
        if self._stored_version < latest_version():
            raise StateError(f"state schema version {self._stored_version} is older than this meshbot "
                             f"({latest_version()}); run `meshbot migrate` (state: {self.location})")
        if self._stored_scheme < FINGERPRINT_SCHEME:
            raise StateError(f"the state's snapshots are keyed with fingerprint scheme {self._stored_scheme}, "
                             f"older than this meshbot's ({FINGERPRINT_SCHEME}): every model would plan as changed; "
                             f"run `meshbot migrate` to re-key them, which keeps every table and interval "
                             f"(state: {self.location})")

    # snapshots

    def push_snapshots(self, snapshots: Iterable[Snapshot]) -> None:
        self._current()
        self._snapshots.push(snapshots)

    def get_snapshots(self, ids: Iterable[SnapshotId]) -> dict[SnapshotId, Snapshot]:
        self._current()
        return self._snapshots.get(ids)

    def stored_snapshot_ids(self, ids: Iterable[SnapshotId]) -> set[SnapshotId]:
        self._current()
        return self._snapshots.stored_ids(ids)

    def listed_snapshots(self, listed: Iterable[EnvironmentSnapshot]) -> dict[SnapshotId, Snapshot]:
        """The snapshots an environment lists, built from the list: each is read from state only when a
        field the environment does not record (all but name, identifier, version and kind) is first used."""
        self._current()
        return self._snapshots.listed(listed)

    def get_snapshots_by_version(self, name_versions: Iterable[tuple[str, str]]) -> list[Snapshot]:
        self._current()
        return self._snapshots.by_version(name_versions)

    def expired_snapshots(self, now_ms: int, *, ignore_ttl: bool = False) -> list[Snapshot]:
        """Snapshots past their TTL (any age with `ignore_ttl`) that no live environment references.

        Without `ignore_ttl` a live environment's previous plan (the default rollback target) is kept
        as a reference too, however old its snapshots; older plans expire by their TTL.
        """
        self._current()
        envs = [env for env in self._environments.all()
                if env.expiration_ts is None or env.expiration_ts > now_ms]
        live = {s.snapshot_id for env in envs for s in env.snapshots}
        if not ignore_ttl:
            live |= {s.snapshot_id for env in envs for s in self._rollback_target(env)}
        ids = self._snapshots.expired_ids(now_ms, ignore_ttl=ignore_ttl, keep=live)
        found = self._snapshots.get(ids)
        return [found[i] for i in ids if i in found]

    def _rollback_target(self, env: Environment) -> tuple:
        """The snapshots of the plan `env` served before its current one (from its history, else its row)."""
        entry = next((e for e in self._environments.history(env.name) if e.plan_id == env.previous_plan_id), None)
        return entry.snapshots if entry is not None else env.previous_snapshots

    def versions_in_use(self, exclude_ids: Iterable[SnapshotId] = ()) -> set[tuple[str, str]]:
        """(name, version) of every stored snapshot except `exclude_ids`: their tables must stay."""
        self._current()
        excluded = set(exclude_ids)
        return {(i.name, version) for i, version in self._snapshots.refs() if i not in excluded}

    def delete_snapshots(self, ids: Iterable[SnapshotId]) -> None:
        """Delete snapshots, and the intervals of versions no remaining snapshot shares."""
        self._current()
        doomed = set(ids)
        refs = self._snapshots.refs()
        doomed_versions = {(i.name, v) for i, v in refs if i in doomed}
        kept_versions = {(i.name, v) for i, v in refs if i not in doomed}
        with write_transaction(self.engine) as conn:
            self._snapshots.delete(conn, doomed)
            self._intervals.delete_versions(conn, doomed_versions - kept_versions)

    def expire_snapshots(self, ids: Iterable[SnapshotId], drops: Iterable[PendingDrop]) -> list[PendingDrop]:
        """One transaction: delete snapshots and the intervals of versions no remaining snapshot
        shares, and record as pending the `drops` of those versions (returned): rows first, so a
        janitor killed before its drops leaves them to the next one, never intervals without a table."""
        self._current()
        return self._pending.expire(ids, drops)

    def pending_drops(self) -> list[PendingDrop]:
        """Tables and views a janitor recorded and has not dropped yet (it was killed), oldest first."""
        self._current()
        return self._pending.all()

    def delete_pending_drops(self, objects: Iterable[str]) -> None:
        self._current()
        self._pending.delete(objects)

    # intervals

    def add_interval(self, name: str, version: str, interval: Interval, *, is_dev: bool = False,
                     elapsed_ms: int | None = None, executor_ms: int | None = None,
                     bytes_read: int | None = None) -> None:
        self._current()
        self._intervals.record(name, version, interval, is_dev=is_dev, is_removed=False, elapsed_ms=elapsed_ms,
                               executor_ms=executor_ms, bytes_read=bytes_read)

    def remove_intervals(self, name: str, version: str, interval: Interval, *,
                         is_dev: bool = False) -> None:
        self._current()
        self._intervals.record(name, version, interval, is_dev=is_dev, is_removed=True)

    def get_intervals(self, name_versions: Iterable[tuple[str, str]]
                      ) -> dict[tuple[str, str], SnapshotIntervals]:
        self._current()
        return self._intervals.get(name_versions)

    def latest_interval_end(self, name_versions: Iterable[tuple[str, str]]) -> int | None:
        self._current()
        return self._intervals.latest_end(name_versions)

    def get_batch_times(self, names: Iterable[str]) -> dict[tuple[str, str], BatchTimes]:
        self._current()
        return self._intervals.batch_times(names)

    # leases

    def acquire_lease(self, key: str, *, owner: str, purpose: str, ttl_ms: int,
                      replacing: str | None = None) -> Lease:
        self._current()
        return self._leases.acquire(key, owner=owner, purpose=purpose, ttl_ms=ttl_ms, replacing=replacing)

    def renew_leases(self, keys: Iterable[str], *, owner: str, ttl_ms: int) -> set[str]:
        self._current()
        return self._leases.renew(keys, owner=owner, ttl_ms=ttl_ms)

    def release_lease(self, key: str, *, owner: str) -> bool:
        self._current()
        return self._leases.release(key, owner=owner)

    def live_leases(self) -> dict[str, LeaseHolder]:
        """Every lease someone holds now, by key (for the janitor: what not to touch)."""
        self._current()
        return self._leases.live()

    # environments

    def get_environment(self, name: str) -> Environment | None:
        self._current()
        return self._environments.get(name)

    def get_environments(self) -> list[Environment]:
        self._current()
        return self._environments.all()

    def get_environment_names(self) -> list[str]:
        self._current()
        return self._environments.names()

    def get_environment_history(self, name: str) -> list[HistoryEntry]:
        """The plans `name` served (applies and rollbacks), newest first."""
        self._current()
        return self._environments.history(name)

    def promote(self, environment: Environment, *, expected_plan_id: str | None, source: str = "") -> None:
        self._current()
        self._environments.promote(environment, expected_plan_id=expected_plan_id, now_ms=times.now_ms(),
                                   source=source)

    def restore_environment(self, name: str, previous: Environment | None, *,
                            expected_plan_id: str) -> None:
        self._current()
        self._environments.restore(name, previous, expected_plan_id=expected_plan_id)

    def finalize(self, environment_name: str, plan_id: str) -> None:
        self._current()
        self._environments.finalize(environment_name, plan_id, now_ms=times.now_ms())

    def invalidate_environment(self, name: str) -> None:
        self._current()
        self._environments.invalidate(name, now_ms=times.now_ms())

    def expired_environments(self, now_ms: int) -> list[Environment]:
        self._current()
        return self._environments.expired(now_ms)

    def delete_environment(self, name: str) -> None:
        self._current()
        self._environments.delete(name)

    def destroy(self) -> None:
        """Drop every state table (`meshbot destroy`); this object is unusable afterwards."""
        self.tables.metadata.drop_all(self.engine)
        self._stored_version = 0

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> "SqlStateSync":
        return self

    def __exit__(self, *_exc) -> None:
        self.close()
