"""Janitor and destroy: remove expired environments and snapshots, or everything meshbot made."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Iterable, Protocol

from bot.errors import PlanError
from bot.faults import checkpoint
from bot.plan.claims import JANITOR_KEY, Claims, Notice, environment_key
from bot.project.model import KindName
from bot.timeline.times import now_ms as _now_ms
from bot.snapshot import Snapshot, SnapshotId
from bot.spark.engine import SWAP_SUFFIX
from bot.state.protocol import Environment, PendingDrop, require_environment

if TYPE_CHECKING:
    from bot.spark.engine import SparkEngine


class JanitorState(Protocol):
    """The part of SqlStateSync the janitor uses."""

    def expired_environments(self, now_ms: int) -> list[Environment]: ...

    def get_environment(self, name: str) -> Environment | None: ...

    def delete_environment(self, name: str) -> None: ...

    def expired_snapshots(self, now_ms: int, *, ignore_ttl: bool = False) -> list[Snapshot]: ...

    def versions_in_use(self, exclude_ids: Iterable[SnapshotId] = ()) -> set[tuple[str, str]]: ...

    def expire_snapshots(self, ids: Iterable[SnapshotId], drops: Iterable[PendingDrop]) -> list[PendingDrop]: ...

    def pending_drops(self) -> list[PendingDrop]: ...

    def delete_pending_drops(self, objects: Iterable[str]) -> None: ...


class InvalidatableState(Protocol):
    def get_environment(self, name: str) -> Environment | None: ...

    def get_environment_names(self) -> list[str]: ...

    def invalidate_environment(self, name: str) -> None: ...


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
                now_ms: int | None = None, snapshots: bool = True, claims: Claims | None = None,
                notice: Notice | None = None) -> JanitorResult:
    """Clean expired environments, then (with `snapshots`) expired snapshots and their unshared tables.

    With `claims` this runs holding the janitor's lease, once no plan or run holds an environment's
    lease (a plan or run waits for it in turn). Tables a killed janitor recorded and did not drop
    are dropped first. `ignore_ttl` expires every snapshot no live environment references, whatever
    its age.
    """
    if claims is None:
        return _janitor(state, engine, ignore_ttl=ignore_ttl, now_ms=now_ms, snapshots=snapshots)
    with claims.hold_janitor(notice=notice):
        return _janitor(state, engine, ignore_ttl=ignore_ttl, now_ms=now_ms, snapshots=snapshots,
                        lost=lambda: claims.lost(JANITOR_KEY))


def _janitor(state: JanitorState, engine: "SparkEngine", *, ignore_ttl: bool, now_ms: int | None,
             snapshots: bool, lost: Callable[[], bool] = lambda: False) -> JanitorResult:
    now = _now_ms() if now_ms is None else now_ms
    engine.invalidate()   # listings may be stale: other processes change the catalog too
    finished = finish_pending_drops(state, engine) if snapshots else []
    envs = state.expired_environments(now)
    views: list[str] = []
    schemas: list[str] = []
    for env in envs:
        dropped_views, dropped_schemas = drop_environment_objects(engine, env)
        views += dropped_views
        schemas += dropped_schemas
        state.delete_environment(env.name)
    result = JanitorResult(environments=tuple(e.name for e in envs), views=tuple(views),
                           schemas=tuple(schemas), tables=tuple(finished))
    if not snapshots:
        return result
    expired = state.expired_snapshots(now, ignore_ttl=ignore_ttl)
    if not expired:
        return result
    if lost():
        raise PlanError("the janitor lost its lease (it stalled longer than the lease lasts) and a plan "
                        "or run may be writing meanwhile; nothing was expired; run the janitor again")
    in_use = state.versions_in_use(exclude_ids=[s.snapshot_id for s in expired])
    drops = [drop for snapshot in expired if (snapshot.name, snapshot.version) not in in_use
             for drop in physical_objects(snapshot)]
    # rows first: a janitor killed after this transaction leaves its drops to the next one, never
    # intervals without their table (a plan would serve them as if filled)
    pending = state.expire_snapshots([s.snapshot_id for s in expired], drops)
    checkpoint("janitor-after-state")
    tables = drop_pending(state, engine, pending)
    return replace(result, snapshots=tuple(s.snapshot_id for s in expired),
                   tables=result.tables + tuple(tables))


def finish_pending_drops(state: JanitorState, engine: "SparkEngine") -> list[str]:
    """Drop what a killed janitor recorded and left; a version some snapshot references again (a
    plan pushed it since) keeps its table, only the record goes. Returns the dropped names."""
    pending = state.pending_drops()
    if not pending:
        return []
    in_use = state.versions_in_use()
    state.delete_pending_drops([d.object for d in pending if (d.model, d.version) in in_use])
    return drop_pending(state, engine, [d for d in pending if (d.model, d.version) not in in_use])


def drop_pending(state: JanitorState, engine: "SparkEngine", pending: Iterable[PendingDrop]) -> list[str]:
    """Drop each object that exists, then delete its record; returns the names dropped."""
    pending = list(pending)
    absent = [d.object for d in pending if not engine.table_exists(d.object)]
    if absent:
        state.delete_pending_drops(absent)
    dropped = []
    for drop in pending:
        if drop.kind == "table" and engine.table_exists(drop.object + SWAP_SUFFIX):
            engine.drop_table(drop.object + SWAP_SUFFIX)   # a killed refresh's copy: the table's rows too
        if drop.object in absent:
            continue
        (engine.drop_view if drop.kind == "view" else engine.drop_table)(drop.object)
        dropped.append(drop.object)
        checkpoint("janitor-between-drops")
        state.delete_pending_drops([drop.object])
    return dropped


def expire_environment(state: InvalidatableState, name: str) -> None:
    """`invalidate`: mark the dev environment `name` expired, for the janitor (or `--sync`) to drop."""
    if name == "prod":
        raise PlanError("`prod` cannot be invalidated")
    require_environment(state, name)
    state.invalidate_environment(name)


def clean_environment(*, state: JanitorState, engine: "SparkEngine", name: str,
                      claims: Claims | None = None, notice: Notice | None = None) -> JanitorResult:
    """`invalidate --sync`: drop one expired environment's views and schemas and delete its row,
    holding its lease (a plan of it waits, and one in flight is waited for); snapshots stay."""
    if claims is None:
        return _clean_environment(state, engine, name)
    with claims.hold(environment_key(name), f"invalidate of `{name}`", notice=notice):
        return _clean_environment(state, engine, name)


def _clean_environment(state: JanitorState, engine: "SparkEngine", name: str) -> JanitorResult:
    env = state.get_environment(name)
    if env is None or env.expiration_ts is None or env.expiration_ts > _now_ms():
        return JanitorResult()   # planned again meanwhile: no longer expired
    engine.invalidate()
    views, schemas = drop_environment_objects(engine, env)
    state.delete_environment(name)
    return JanitorResult(environments=(name,), views=tuple(views), schemas=tuple(schemas))


def drop_environment_objects(engine: "SparkEngine", env: Environment, *,
                             prod_schemas: bool = False) -> tuple[list[str], list[str]]:
    """Drop the environment's views, then its own schemas (`schema__env`) once they are empty.

    Prod's views live in the models' schemas, which may hold other things: those schemas stay
    unless `prod_schemas` (destroy) and they are empty.
    """
    views = sorted(env.views())
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


def physical_objects(snapshot: Snapshot) -> list[PendingDrop]:
    """A snapshot's physical table and its `__dev` preview (views for a non-materialized VIEW model)."""
    if not snapshot.is_physical:
        return []
    kind = snapshot.definition.get("kind") or {}
    is_view = snapshot.kind == KindName.VIEW.value and not kind.get("materialized", False)
    return [PendingDrop(object=name, kind="view" if is_view else "table", model=snapshot.name,
                        version=snapshot.version)
            for name in (snapshot.table_name, snapshot.dev_table_name)]


def drop_physical(engine: "SparkEngine", snapshot: Snapshot) -> list[str]:
    """Drop a snapshot's physical table and its `__dev` preview; returns the names that existed."""
    dropped = []
    for drop in physical_objects(snapshot):
        if engine.table_exists(drop.object):
            (engine.drop_view if drop.kind == "view" else engine.drop_table)(drop.object)
            dropped.append(drop.object)
    return dropped


def destroy_all(*, state: DestroyableState, engine: "SparkEngine", claims: Claims | None = None,
                notice: Notice | None = None) -> JanitorResult:
    """Drop every view, table and schema meshbot created for this state, then the state itself; with
    `claims`, once no plan or run is in flight (holding the janitor's lease, so none starts meanwhile)."""
    if claims is None:
        return _destroy_all(state, engine)
    with claims.hold_janitor(notice=notice):
        result = _destroy_all(state, engine)
        claims.abandon(JANITOR_KEY)   # its lease went with the state
    return result


def _destroy_all(state: DestroyableState, engine: "SparkEngine") -> JanitorResult:
    engine.invalidate()
    pending = state.pending_drops()   # a killed janitor's: their snapshots are gone from state
    tables: list[str] = drop_pending(state, engine, pending)
    envs = state.get_environments()
    views: list[str] = []
    schemas: list[str] = []
    for env in envs:
        dropped_views, dropped_schemas = drop_environment_objects(engine, env, prod_schemas=True)
        views += dropped_views
        schemas += dropped_schemas
        state.delete_environment(env.name)
    everything = state.expired_snapshots(_now_ms(), ignore_ttl=True)
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
