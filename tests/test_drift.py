"""bot.plan.drift: what changed prod since the default branch's last deploy, from the state's history alone."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.plan.drift import deploy_source, find_drift, is_default_branch_deploy
from bot.report.markdown import render
from bot.state.protocol import Environment, EnvironmentSnapshot, HistoryEntry


def _snaps(**identifiers: str) -> tuple[EnvironmentSnapshot, ...]:
    return tuple(EnvironmentSnapshot(name, ident, ident, "FULL", f"t_{ident}") for name, ident in identifiers.items())


@dataclass
class FakeState:
    history: list[HistoryEntry] = field(default_factory=list)

    def promote(self, plan_id: str, ts: int, source: str, **identifiers: str) -> None:
        self.history.append(HistoryEntry("prod", plan_id, _snaps(**identifiers), ts, ts, source))

    def get_environment(self, name: str) -> Environment | None:
        if not self.history:
            return None
        last = max(self.history, key=lambda e: e.promoted_ts)
        return Environment(name=name, snapshots=last.snapshots, plan_id=last.plan_id)

    def get_environment_history(self, name: str) -> list[HistoryEntry]:
        return sorted(self.history, key=lambda e: -e.promoted_ts)


DEPLOY = deploy_source("main", "a" * 40, "https://github.com/o/r/actions/runs/1")


def test_a_local_plan_after_the_last_deploy_is_drift_naming_model_plan_time_and_source():
    state = FakeState()
    state.promote("p1", 1_000, DEPLOY, **{"db.a": "1", "db.b": "1"})
    assert not find_drift(state).drifted
    state.promote("p2", 86_400_000, "plan by ann@laptop", **{"db.a": "2", "db.b": "1"})
    drift = find_drift(state)
    assert drift.baseline.plan_id == "p1" and is_default_branch_deploy(drift.baseline.source)
    assert [(m.name, m.deployed, m.now, m.plan_id) for m in drift.models] == [("db.a", "1", "2", "p2")]
    assert drift.plan("p2").source == "plan by ann@laptop" and drift.plan("p2").when == "1970-01-02 00:00 UTC"
    text = render("drift.txt.j2", drift)
    assert "db.a: 1 -> 2 by plan p2 at 1970-01-02 00:00 UTC from plan by ann@laptop" in text

    # the default branch's head holds the same change: the next deploy keeps it, nothing to report
    assert not find_drift(state, head_versions={"db.a": "2", "db.b": "1"}).drifted
    # the next deploy of the default branch is the new baseline
    state.promote("p3", 90_000_000, DEPLOY, **{"db.a": "3", "db.b": "1"})
    assert not find_drift(state).drifted


def test_a_rollback_back_to_what_was_deployed_is_no_drift_and_no_deploy_recorded_tells_nothing():
    state = FakeState()
    state.promote("p0", 10, "", **{"db.a": "0"})              # before state schema 10: unknown source
    assert find_drift(state).baseline is None
    state.promote("p1", 20, DEPLOY, **{"db.a": "1"})
    state.promote("p2", 30, "/deploy of #4 at 0123 by bob", **{"db.a": "4", "db.c": "1"})
    drift = find_drift(state)
    assert {(m.name, m.deployed, m.now) for m in drift.models} == {("db.a", "1", "4"), ("db.c", "-", "1")}
    state.promote("p3", 40, "rollback to p1 by ann@ci", **{"db.a": "1"})
    assert not find_drift(state).drifted
