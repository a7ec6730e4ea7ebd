"""One state per warehouse: the physical schemas a plan writes belong to its state, and a table whose
intervals the state records exists."""

from __future__ import annotations

from typing import Callable, Mapping, Protocol

from bot.errors import PlanError
from bot.plan.definition import Plan
from bot.project.model import KindName
from bot.snapshot import Snapshot
from bot.state.protocol import StateSync



class CatalogOwner(Protocol):
    """The catalog calls ownership needs (bot.plan.batch_runner.SparkRunner has them)."""

    def ensure_schemas(self, schemas: list[str]) -> None: ...
    def schema_owner(self, schema: str) -> str | None: ...
    def claim_schema(self, schema: str, state_id: str) -> None: ...
    def schema_objects(self, schema: str) -> set[str]: ...


def claim_schemas(plan: Plan, mapping: Mapping[str, str], *, state: StateSync, runner: object) -> None:
    """Every physical schema `plan` writes must belong to `state`; called before anything is written.

    A schema another state claimed (a recreated state, a second team on the same catalog) is refused:
    its tables hold that state's rows, and this plan would append to them. An unclaimed schema is
    claimed when it is empty or already holds tables this state uses (written before schemas carried
    their owner); one holding tables of unknown origin is refused too.
    """
    state_id = getattr(state, "state_id", None)
    if not state_id or not hasattr(runner, "schema_owner"):
        return
    catalog: CatalogOwner = runner   # type: ignore[assignment]
    new = {s.snapshot_id for s in plan.new_snapshots}
    physical = {s.name: mapping[s.name].rsplit(".", 1)[0] for s in plan.snapshots.values()
                if s.is_physical}
    used = {physical[s.name] for s in plan.snapshots.values() if s.name in physical and s.snapshot_id not in new}
    schemas = sorted(set(physical.values()))
    catalog.ensure_schemas(schemas)
    for schema in schemas:
        owner = catalog.schema_owner(schema)
        if owner == state_id:
            continue
        if owner is not None:
            raise PlanError(f"physical schema `{schema}` belongs to another meshbot state (state id {owner[:12]}, "
                            f"this state is {state_id[:12]}): its tables hold that state's rows, and this plan "
                            "would write into them. Use that state (the gateway's state_connection), move this "
                            "project's tables elsewhere with physical_schema_mapping, or drop the schema if that "
                            "state is gone")
        if schema not in used and catalog.schema_objects(schema):
            raise PlanError(f"physical schema `{schema}` holds tables no meshbot state has claimed, and this "
                            "state has never written there: a plan would append to rows it knows nothing of. "
                            "Move this project's tables with physical_schema_mapping, or drop the schema's "
                            "tables if they are leftovers, then plan again")
        catalog.claim_schema(schema, state_id)


def _forget_downstream(plan: Plan, parents: set[str], spans: list[tuple[int, int]], *, state: StateSync) -> None:
    """What was computed from the lost rows is recomputed with them: every version downstream of `parents`
    in the plan loses its recorded intervals over the lost span (a FULL model's whole record)."""
    children: dict[str, set[str]] = {}
    for snapshot in plan.snapshots.values():
        for parent in snapshot.parents:
            children.setdefault(parent.name, set()).add(snapshot.name)
    downstream, todo = set(), list(parents)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in downstream:
                downstream.add(child)
                todo.append(child)
    span = (min(s for s, _ in spans), max(e for _, e in spans))
    for name in sorted(downstream - parents):
        snapshot = plan.snapshots[name]
        if not snapshot.is_physical:
            continue
        full = snapshot.kind in (KindName.FULL.value, KindName.VIEW.value, KindName.SEED.value)
        recorded = state.get_intervals([(snapshot.name, snapshot.version)]).get((snapshot.name, snapshot.version))
        for interval in (recorded.intervals if recorded else ()):
            start, end = interval if full else (max(interval[0], span[0]), min(interval[1], span[1]))
            if start < end:
                state.remove_intervals(snapshot.name, snapshot.version, (start, end))


def forget_missing_tables(plan: Plan, mapping: Mapping[str, str], *, state: StateSync,
                          exists: Callable[[str], bool],
                          settle: Callable[[Snapshot, str], bool] | None = None) -> None:
    """A reused version whose table is gone (dropped outside meshbot) must not be served as filled:
    its recorded intervals are removed, and those of everything downstream computed from it over the same
    span, and the plan stops, so the next plan computes them again.

    `exists` may answer from a listing taken earlier; `settle(snapshot, table)` (the catalog now, a
    killed writer's swap finished) confirms a table is really gone: a writer swapping rows in leaves
    its name absent for a moment, and its rows are not lost."""
    new = {s.snapshot_id for s in plan.new_snapshots}
    reused = [s for s in plan.snapshots.values()
              if s.is_physical and s.snapshot_id not in new and mapping[s.name] == s.table_name
              and not exists(s.table_name) and (settle is None or not settle(s, s.table_name))]
    if not reused:
        return
    recorded = state.get_intervals([(s.name, s.version) for s in reused])
    lost, spans_lost = [], []
    for snapshot in reused:
        spans = recorded.get((snapshot.name, snapshot.version))
        for interval in (spans.intervals if spans else ()):
            state.remove_intervals(snapshot.name, snapshot.version, interval)
            spans_lost.append(interval)
        if spans and spans.intervals:
            lost.append(f"`{snapshot.table_name}` (model `{snapshot.name}`)")
    if lost:
        _forget_downstream(plan, {s.name for s in reused}, spans_lost, state=state)
        raise PlanError(f"physical table(s) {', '.join(lost)} are missing although the state recorded intervals of "
                        "them (dropped outside meshbot, or by a janitor killed mid-way); those intervals were "
                        "cleared and nothing was promoted: run the plan again to compute them")
