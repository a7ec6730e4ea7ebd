"""Janitor and destroy: remove expired environments and snapshots (SPEC §6), or everything meshbot made."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Protocol

from bot.project.model import KindName
from bot.project.timeutil import now_ms as _now_ms
from bot.snapshot import Snapshot, SnapshotId, view_name
from bot.state.api import Environment

if TYPE_CHECKING:
    from bot.spark.engine import SparkEngine


class JanitorState(Protocol):
    """The part of SqlStateSync the janitor uses."""

    def expired_environments(self, now_ms: int) -> list[Environment]: ...

    def delete_environment(self, name: str) -> None: ...

    def expired_snapshots(self, now_ms: int, *, ignore_ttl: bool = False) -> list[Snapshot]: ...

    def versions_in_use(self, exclude_ids: Iterable[SnapshotId] = ()) -> set[tuple[str, str]]: ...

    def delete_snapshots(self, ids: Iterable[SnapshotId]) -> None: ...


class DestroyableState(JanitorState, Protocol):
    def get_environments(self) -> list[Environment]: ...

    def destroy(self) -> None: ...


@dataclass(frozen=True)
class JanitorResult:
    """What the janitor removed; tables are physical tables (or physical views of VIEW models)."""

    environments: tuple[str, ...] = ()
    views: tuple[str, ...] = ()
    schemas: tuple[str, ...] = ()
    snapshots: tuple[SnapshotId, ...] = ()
    tables: tuple[str, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not (self.environments or self.views or self.schemas or self.snapshots or self.tables)

    def lines(self) -> list[str]:
        """One human line per dropped object, environments first."""
        return ([f"Deleted environment `{name}`" for name in self.environments]
                + [f"Dropped view {name}" for name in self.views]
                + [f"Dropped schema {name}" for name in self.schemas]
                + [f"Expired snapshot {i.name} ({i.identifier})" for i in self.snapshots]
                + [f"Dropped table {name}" for name in self.tables])


def run_janitor(*, state: JanitorState, engine: "SparkEngine", ignore_ttl: bool = False,
                now_ms: int | None = None, snapshots: bool = True) -> JanitorResult:
    """Clean expired environments, then (with `snapshots`) expired snapshots and their unshared tables.

    `ignore_ttl` expires every snapshot no live environment references, whatever its age.
    """
    now = _now_ms() if now_ms is None else now_ms
    engine.invalidate()   # listings may be stale: other processes change the catalog too
    envs = state.expired_environments(now)
    views: list[str] = []
    schemas: list[str] = []
    for env in envs:
        dropped_views, dropped_schemas = drop_environment_objects(engine, env)
        views += dropped_views
        schemas += dropped_schemas
        state.delete_environment(env.name)
    result = JanitorResult(environments=tuple(e.name for e in envs), views=tuple(views),
                           schemas=tuple(schemas))
    if not snapshots:
        return result
    expired = state.expired_snapshots(now, ignore_ttl=ignore_ttl)
    if not expired:
        return result
    in_use = state.versions_in_use(exclude_ids=[s.snapshot_id for s in expired])
    tables: list[str] = []
    for snapshot in expired:
        if (snapshot.name, snapshot.version) not in in_use:
            tables += drop_physical(engine, snapshot)
            in_use.add((snapshot.name, snapshot.version))   # siblings of one version drop once
    state.delete_snapshots([s.snapshot_id for s in expired])
    return JanitorResult(environments=result.environments, views=result.views, schemas=result.schemas,
                         snapshots=tuple(s.snapshot_id for s in expired), tables=tuple(tables))


def drop_environment_objects(engine: "SparkEngine", env: Environment, *,
                             prod_schemas: bool = False) -> tuple[list[str], list[str]]:
    """Drop the environment's views, then its own schemas (`schema__env`) once they are empty.

    Prod's views live in the models' schemas, which may hold other things: those schemas stay
    unless `prod_schemas` (destroy) and they are empty.
    """
    views = sorted({view_name(s.name, env.name) for s in env.snapshots
                    if s.kind != KindName.EXTERNAL.value})
    dropped = []
    for view in views:
        if engine.table_exists(view):
            engine.drop_view(view)
            dropped.append(view)
    if env.is_prod and not prod_schemas:
        return dropped, []
    had_views = {view.rsplit(".", 1)[0] for view in dropped}
    schemas = []
    for schema in sorted({view.rsplit(".", 1)[0] for view in views}):
        if not engine.existing_objects(schema):
            engine.drop_schema(schema, cascade=False)   # IF EXISTS: harmless when already gone
            if schema in had_views:
                schemas.append(schema)
    return dropped, schemas


def drop_physical(engine: "SparkEngine", snapshot: Snapshot) -> list[str]:
    """Drop a snapshot's physical table and its `__dev` preview; returns the names that existed."""
    if snapshot.kind in (KindName.EXTERNAL.value, KindName.EMBEDDED.value):
        return []
    kind = snapshot.definition.get("kind") or {}
    is_view = snapshot.kind == KindName.VIEW.value and not kind.get("materialized", False)
    dropped = []
    for table in (snapshot.table_name, snapshot.dev_table_name):
        if engine.table_exists(table):
            (engine.drop_view if is_view else engine.drop_table)(table)
            dropped.append(table)
    return dropped


def destroy_all(*, state: DestroyableState, engine: "SparkEngine") -> JanitorResult:
    """Drop every view, table and schema meshbot created for this state, then the state itself."""
    engine.invalidate()
    envs = state.get_environments()
    views: list[str] = []
    schemas: list[str] = []
    for env in envs:
        dropped_views, dropped_schemas = drop_environment_objects(engine, env, prod_schemas=True)
        views += dropped_views
        schemas += dropped_schemas
        state.delete_environment(env.name)
    everything = state.expired_snapshots(_now_ms(), ignore_ttl=True)
    tables: list[str] = []
    seen: set[tuple[str, str]] = set()
    for snapshot in everything:
        if (snapshot.name, snapshot.version) not in seen:
            seen.add((snapshot.name, snapshot.version))
            tables += drop_physical(engine, snapshot)
    for schema in sorted({table.rsplit(".", 1)[0] for table in tables}):
        if schema not in schemas and not engine.existing_objects(schema):
            engine.drop_schema(schema, cascade=False)
            schemas.append(schema)
    state.destroy()
    return JanitorResult(environments=tuple(e.name for e in envs), views=tuple(views),
                         schemas=tuple(schemas), snapshots=tuple(s.snapshot_id for s in everything),
                         tables=tuple(tables))
