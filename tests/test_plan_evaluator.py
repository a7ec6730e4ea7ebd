"""PlanEvaluator's view swap: which views a promotion rewrites (no Spark: a recording runner)."""

from __future__ import annotations

from bot.plan.evaluator import PlanEvaluator
from bot.plan.execution import order_snapshots
from bot.plan.stages import promotion_stages
from bot.snapshot import Fingerprint, Snapshot, SnapshotId
from bot.state.protocol import Environment, EnvironmentSnapshot


class RecordingRunner:
    """Records the views it is asked to write; `present` are the views that exist."""

    def __init__(self, present: set[str]):
        self.present = present
        self.written: dict[str, str] = {}

    def existing_views(self, views):
        return {view for view in views if view in self.present}

    def replace_views(self, views):
        self.written.update(views)

    def drop_views(self, views):
        pass


def _env(tables: dict[str, tuple[str, str]], *, finalized: bool = True) -> Environment:
    snapshots = tuple(EnvironmentSnapshot(name=name, identifier=ident, version=ident, kind="FULL",
                                          table_name=table)
                      for name, (ident, table) in sorted(tables.items()))
    return Environment(name="prod", snapshots=snapshots, plan_id="p",
                       finalized_ts=1 if finalized else None)


def _swap(previous: Environment | None, current: Environment, present: set[str]) -> dict[str, str]:
    runner = RecordingRunner(present)
    evaluator = PlanEvaluator(state=None, runner=runner, models_for=None)  # type: ignore[arg-type]
    swap = promotion_stages(current, previous)[1]
    assert evaluator._swap_views(swap, current) == len(current.snapshots)  # type: ignore[arg-type]
    return runner.written


BEFORE = {"db.a": ("1", "p.db__a__1"), "db.b": ("2", "p.db__b__2"), "db.c": ("3", "p.db__c__3")}


def test_promotion_rewrites_only_changed_or_missing_views():
    # b changed table; c kept its table but has a new identifier (forward-only); a is unchanged
    after = {**BEFORE, "db.b": ("9", "p.db__b__9"), "db.c": ("8", "p.db__c__3"),
             "db.d": ("4", "p.db__d__4")}
    assert _swap(_env(BEFORE), _env(after), {"db.a", "db.b", "db.c"}) == {
        "db.b": "p.db__b__9", "db.c": "p.db__c__3", "db.d": "p.db__d__4"}
    # an unchanged snapshot whose view is gone gets it back
    assert _swap(_env(BEFORE), _env(BEFORE), {"db.b", "db.c"}) == {"db.a": "p.db__a__1"}


def test_unfinalized_or_new_environment_rewrites_every_view():
    everything = {name: table for name, (_, table) in BEFORE.items()}
    present = set(BEFORE)
    assert _swap(_env(BEFORE, finalized=False), _env(BEFORE), present) == everything
    assert _swap(None, _env(BEFORE), present) == everything


def _snapshot(name: str, *parents: str) -> Snapshot:
    return Snapshot(name=name, fingerprint=Fingerprint(data_hash=name, metadata_hash="m"), version=name,
                    kind="FULL", definition={},
                    parents=tuple(SnapshotId(p, p) for p in parents))


def test_snapshots_run_in_the_plan_order_parents_first_then_by_name():
    """`run` and previews walk snapshots in the order plans list models (bot.project.dag)."""
    snapshots = [_snapshot("db.gamma", "db.alpha", "db.beta"), _snapshot("db.beta", "db.zeta"),
                 _snapshot("db.zeta", "raw.outside"), _snapshot("db.alpha"), _snapshot("db.delta")]
    expected = ["db.alpha", "db.delta", "db.zeta", "db.beta", "db.gamma"]
    assert [s.name for s in order_snapshots(snapshots)] == expected
    assert [s.name for s in order_snapshots(reversed(snapshots))] == expected
