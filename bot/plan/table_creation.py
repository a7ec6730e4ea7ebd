"""Create a plan's missing physical tables, parents first and a few at once; a table Spark rejects fails its model alone."""

from __future__ import annotations

import contextlib
from typing import Callable, Mapping

from bot.errors import EngineError
from bot.plan.batch import BatchRunner, model_failed
from bot.plan.definition import Plan
from bot.plan.execution import order_snapshots, parents_in
from bot.plan.ownership import forget_missing_tables
from bot.plan.schedule import Outcome, run_tasks
from bot.project.dag import upstream_of
from bot.project.model import KindName, Model
from bot.snapshot import Snapshot
from bot.state.protocol import StateSync


def create_tables(plan: Plan, mapping: Mapping[str, str], *, runner: BatchRunner, state: StateSync,
                  models_for: Callable[[Snapshot], Model],
                  lease: Callable[[Snapshot], contextlib.AbstractContextManager], threads: int) -> Outcome:
    """Create the physical tables, up to `concurrent_tasks` at once; a table is created after its
    parents' (its columns may come from analyzing a query that reads them). A model whose table
    cannot be created (Spark rejects its query) fails alone, as in SQLMesh: its descendants get no
    table and no batch, independent models go on, and the plan stops before promotion."""
    physical = [s for s in plan.snapshots.values() if s.is_physical]
    runner.ensure_schemas({mapping[s.name].rsplit(".", 1)[0] for s in physical})
    exists = getattr(runner, "table_exists", None)
    settle = getattr(runner, "settle_table", None)

    def there_now(snapshot: Snapshot, table: str) -> bool:
        with lease(snapshot):
            return settle(table)

    if exists is not None:
        forget_missing_tables(plan, mapping, state=state, exists=exists,
                              settle=there_now if settle is not None else None)
        # a table the listing has needs nothing more, and its snapshot's row no read: a PR plan of
        # 10,000 models creates a handful of tables
        present = {s.name for s in physical if exists(mapping[s.name])}
        physical = [s for s in physical if s.name not in present]
    else:
        present = set()
    targets = {s.name: (s, mapping[s.name]) for s in order_snapshots(physical)}
    recorded_parents = parents_in(plan)
    new = {s.snapshot_id for s in plan.new_snapshots}
    # A table to create of a version already recorded: its table went missing. A VIEW model's physical
    # view that is still listed may read it, and what reads that view must wait for it.
    through_views = any(s.snapshot_id not in new for s, _ in targets.values())

    def parents(name: str) -> list[str]:
        # The walk for the nearest tables to create first stops at a table already there (and reads no
        # row beyond it): nothing of this apply changes what it reads. It goes on through EMBEDDED
        # models, and through listed VIEW models' views when a recorded version's table is rebuilt.
        if name in present and not (through_views and plan.snapshots[name].kind == KindName.VIEW.value):
            return []
        return recorded_parents(name)

    def create(name: str, _slot: int) -> None:
        snapshot, table = targets[name]
        model = models_for(snapshot)
        try:
            if exists is None or settle is None or exists(table):
                runner.create_physical(snapshot, model, table=table, table_mapping=mapping)
                return
            # Absent from this process's listing. Another process may be swapping the table's rows
            # in: between its drop and rename the name is absent, and a table created then would
            # take the swap's place, empty, with the version's intervals still recorded. Writers
            # swap under the version's lease, so the table is looked at again and created under it.
            with lease(snapshot):
                if not settle(table):
                    runner.create_physical(snapshot, model, table=table, table_mapping=mapping)
        except EngineError as error:
            raise model_failed(model, "could not have its table created", error) from error

    names = list(targets)
    return run_tasks(names, upstream_of(names, parents), create, threads=threads)
