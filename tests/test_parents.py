"""The parent-interval rule on its own (no Spark): what a child may evaluate given its parents' data."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.errors import PlanError
from bot.plan.parents import ParentCheck, require_parents
from bot.project.model import Kind, KindName, Model
from bot.timeline.times import to_ms
from bot.snapshot import Fingerprint, Snapshot, SnapshotId

INCREMENTAL = Kind(KindName.INCREMENTAL_BY_TIME_RANGE, time_column="ds")


def _ms(day: str) -> int:
    return to_ms(day)


def _node(name: str, kind: Kind, parents: tuple[str, ...] = (), **model) -> tuple[Snapshot, Model]:
    snapshot = Snapshot(name=name, fingerprint=Fingerprint(data_hash=name, metadata_hash="m"),
                        version=name, kind=kind.name.value, definition={},
                        parents=tuple(SnapshotId(p, p) for p in parents))
    return snapshot, Model(name=name, kind=kind, dialect="spark", path=Path(f"{name}.sql"), **model)


def _check(*nodes: tuple[Snapshot, Model], filled: dict[str, list], now: str = "2024-01-10") -> ParentCheck:
    models = {s.name: m for s, m in nodes}
    return ParentCheck(snapshots={s.name: s for s, _ in nodes}, models_for=lambda s: models[s.name],
                       execution_time=_ms(now), default_start="2024-01-01",
                       filled={k: list(v) for k, v in filled.items()})


def test_incremental_parent_must_cover_the_batch_within_its_own_window():
    parent = _node("db.p", INCREMENTAL, start="2024-01-03")
    child = _node("db.c", INCREMENTAL, ("db.p",))
    batch = (_ms("2024-01-01"), _ms("2024-01-06"))
    # before the parent's start it can never hold data: only 01-03..01-05 is asked of it
    assert _check(parent, child, filled={"db.p": [(_ms("2024-01-03"), _ms("2024-01-06"))]}
                  ).missing(child[0], batch) == []
    assert _check(parent, child, filled={"db.p": [(_ms("2024-01-03"), _ms("2024-01-04"))]}
                  ).missing(child[0], batch) == ["parent `db.p` has no data for [2024-01-04 - 2024-01-05]"]


def test_an_interval_the_parent_cannot_hold_yet_does_not_block_the_child():
    parent = _node("db.p", INCREMENTAL)                                     # daily
    child = _node("db.c", INCREMENTAL, ("db.p",), cron="@hourly")
    check = _check(parent, child, filled={"db.p": [(_ms("2024-01-01"), _ms("2024-01-10"))]},
                   now="2024-01-10 05:00:00")
    assert check.missing(child[0], (_ms("2024-01-10 03:00:00"), _ms("2024-01-10 04:00:00"))) == []


def test_full_parents_must_be_filled_once_views_pass_through_and_externals_are_not_checked():
    full = _node("db.full", Kind(KindName.FULL))
    view = _node("db.v", Kind(KindName.VIEW), ("db.full",))
    external = _node("db.ext", Kind(KindName.EXTERNAL))
    child = _node("db.c", INCREMENTAL, ("db.v", "db.ext"))
    batch = (_ms("2024-01-01"), _ms("2024-01-02"))
    assert _check(full, view, external, child, filled={}).missing(child[0], batch) == [
        "parent `db.full` has never been filled"]
    assert _check(full, view, external, child, filled={"db.full": [(_ms("2024-01-01"), _ms("2024-01-10"))]}
                  ).missing(child[0], batch) == []


def test_work_parents_fill_earlier_in_the_same_plan_counts_and_errors_name_child_and_parent():
    parent = _node("db.p", INCREMENTAL)
    child = _node("db.c", INCREMENTAL, ("db.p",))
    days = [(_ms("2024-01-01"), _ms("2024-01-03"))]
    require_parents(_check(parent, child, filled={}), [(parent[0], days, days), (child[0], days, days)])
    with pytest.raises(PlanError) as info:
        require_parents(_check(parent, child, filled={}), [(child[0], days, days)])
    assert "`db.c` [2024-01-01 - 2024-01-02]: parent `db.p` has no data for [2024-01-01 - 2024-01-02]" in str(info.value)
