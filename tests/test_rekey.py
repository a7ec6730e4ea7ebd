"""Re-keying snapshots when a meshbot release fingerprints differently (`meshbot migrate`).

A new fingerprint scheme must never backfill: every stored snapshot is fingerprinted again from its stored
definition and rendered query, parents first, and keeps its version (its table) and its intervals, as
SQLMesh's migrations do. These tests need no Spark: the state's rows are what a plan stores."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

import bot.fingerprint
from bot.cli.app import cli
from bot.context import Context
from bot.errors import StateError
from bot.plan.definition import PlanOptions
from bot.project.example import write_example
from bot.snapshot import SnapshotId
from bot.state.protocol import Environment, EnvironmentSnapshot
from bot.state.rekey import rekey_snapshots
from tests.test_golden_fingerprints import PROJECTS

TESTS = Path(__file__).resolve().parent


def _project(name: str, root: Path) -> Path:
    if name == "example":
        write_example(root)
    else:
        shutil.copytree(TESTS / name, root)
    return root


def _store_plan(context: Context, environment: str = "prod") -> tuple:
    """What a plan of `environment` stores before Spark: its new snapshots, and the environment listing them."""
    plan = context.plan(environment, options=PlanOptions(skip_backfill=True))
    context.state.push_snapshots(plan.new_snapshots)
    listed = tuple(EnvironmentSnapshot(name=s.name, identifier=s.identifier, version=s.version, kind=s.kind,
                                       table_name=s.table_name) for s in plan.snapshots.values())
    context.state.promote(Environment(name=environment, snapshots=listed, plan_id=plan.plan_id),
                          expected_plan_id=None)
    return plan, listed


CURRENT = bot.fingerprint.FINGERPRINT_SCHEME
NEXT = CURRENT + 1   # the next release's scheme


def _salted(function):
    """A release whose hashes differ from this one's for the same files."""
    return lambda *args: bot.fingerprint.hash_parts("scheme 2", function(*args))


@pytest.mark.parametrize("project", PROJECTS)
def test_every_stored_snapshot_fingerprints_again_to_its_own_id(project, tmp_path, monkeypatch):
    """The re-key's premise, on every project the golden fingerprints cover: a snapshot's stored definition
    and rendered query give back the fingerprint the plan gave it (seeds, Python models, Jinja, blueprints…)."""
    # fixtures/format holds queries written for `meshbot format` only: columns their parents lack
    monkeypatch.setattr("bot.quality.lint.preflight.check_columns_before_spark", lambda *_, **__: None)
    context = Context(_project(project, tmp_path / "project"), read_cache=False)
    plan, _ = _store_plan(context)
    assert plan.new_snapshots
    state = context.state
    with state.engine.begin() as conn:
        rekeyed = rekey_snapshots(conn, state.tables)
    assert dict(rekeyed.left) == {}
    assert dict(rekeyed.moved) == {}
    assert rekeyed.unchanged == len(plan.new_snapshots)


def test_a_new_fingerprint_scheme_is_refused_until_migrated_then_nothing_is_changed(tmp_path, monkeypatch):
    root = _project("example", tmp_path / "project")
    context = Context(root, read_cache=False)
    plan, listed = _store_plan(context)
    context.state.add_interval(listed[0].name, listed[0].version, (0, 86_400_000))
    before = {s.name: (s.identifier, s.version) for s in listed}
    baseline = _work_of(context.plan("prod"))
    assert baseline[0] == [] and baseline[1]   # unchanged models, missing intervals

    # the next release: other hashes for the same files, and a scheme number one higher
    monkeypatch.setattr(bot.fingerprint, "FINGERPRINT_SCHEME", NEXT)
    monkeypatch.setattr("bot.state.store.FINGERPRINT_SCHEME", NEXT)
    monkeypatch.setattr("bot.state.versions.FINGERPRINT_SCHEME", NEXT)
    monkeypatch.setattr(bot.fingerprint, "data_hash", _salted(bot.fingerprint.data_hash))
    monkeypatch.setattr("bot.state.rekey.data_hash", bot.fingerprint.data_hash)

    upgraded = Context(root, read_cache=False)
    with pytest.raises(StateError, match=rf"keyed with fingerprint scheme {CURRENT}, older than this meshbot's \({NEXT}\).*"
                                         r"run `meshbot migrate`"):
        upgraded.plan("prod")

    result = CliRunner().invoke(cli, ["-p", str(root), "migrate"])
    assert result.exit_code == 0, result.output
    assert f"{len(listed)} moved, 0 unchanged; every version, table and interval kept" in result.output

    migrated = Context(root, read_cache=False)
    prod = migrated.state.get_environment("prod")
    after = {s.name: (s.identifier, s.version) for s in prod.snapshots}
    assert {name: version for name, (_, version) in after.items()} == {n: v for n, (_, v) in before.items()}
    assert all(after[name][0] != before[name][0] for name in before)
    stored = migrated.state.get_snapshots(s.snapshot_id for s in prod.snapshots)
    assert {sid.name for sid in stored} == set(before)
    for snapshot in stored.values():   # parents name the new ids too
        assert all(p in stored for p in snapshot.parents)
    assert migrated.state.get_intervals([(listed[0].name, listed[0].version)])[
        (listed[0].name, listed[0].version)].intervals == [(0, 86_400_000)]
    with migrated.state.engine.connect() as conn:
        old_rows = conn.execute(sa.select(sa.func.count()).select_from(migrated.state.tables.snapshots).where(
            migrated.state.tables.snapshots.c.identifier.in_([i for i, _ in before.values()]))).scalar()
    assert old_rows == 0

    assert _work_of(migrated.plan("prod")) == baseline   # no model changed, the same intervals to fill
    rerun = CliRunner().invoke(cli, ["-p", str(root), "migrate"])
    assert "State already at schema version" in rerun.output and "re-keyed" not in rerun.output


def _work_of(plan) -> tuple[list, list]:
    """A plan's changes and backfills, by model name and version (the ids are what a re-key changes)."""
    versions = {sid.name: s.version for s in plan.snapshots.values() for sid in [s.snapshot_id]}
    changes = [(c.name, c.change) for c in plan.changes] + [("new", s.name) for s in plan.new_snapshots]
    backfills = sorted((b.snapshot_id.name, versions[b.snapshot_id.name], b.kind, b.intervals, b.batches)
                       for b in plan.backfills)
    return changes, backfills


def test_a_state_keyed_by_a_newer_meshbot_is_refused(tmp_path, monkeypatch):
    root = _project("example", tmp_path / "project")
    monkeypatch.setattr("bot.state.versions.FINGERPRINT_SCHEME", NEXT)
    Context(root, read_cache=False).state.get_environment("prod")   # the state is made with the next scheme
    monkeypatch.undo()
    with pytest.raises(StateError, match=rf"fingerprint scheme {NEXT}, newer than this meshbot's \({CURRENT}\); upgrade meshbot"):
        Context(root, read_cache=False).state.get_environment("prod")


def test_snapshots_that_cannot_be_fingerprinted_again_are_left_and_named(tmp_path, monkeypatch):
    root = _project("example", tmp_path / "project")
    context = Context(root, read_cache=False)
    _store_plan(context)
    state = context.state
    raw = state.tables.snapshots
    with state.engine.begin() as conn:
        name = conn.execute(sa.select(raw.c.name).order_by(raw.c.name)).scalars().first()
        conn.execute(sa.update(raw).where(raw.c.name == name).values(definition={"format": 999}))
    monkeypatch.setattr("bot.state.rekey.data_hash", _salted(bot.fingerprint.data_hash))
    with state.engine.begin() as conn:
        rekeyed = rekey_snapshots(conn, state.tables)
    left = {sid.name: why for sid, why in rekeyed.left.items()}
    assert left[name].startswith("its stored definition does not load")
    assert all(why.startswith(f"its parent {name}") or n == name for n, why in left.items())
    assert not any(old.name in left for old in rekeyed.moved)
    assert isinstance(next(iter(rekeyed.left)), SnapshotId)


def test_a_renderer_that_prints_queries_differently_is_carried_over_from_the_projects_files(tmp_path, monkeypatch):
    """A new sqlglot may print the same query differently: every data hash moves. Migrated from the project's
    checkout, a snapshot whose stored definition is the files' takes their new rendering, so prod plans clean."""
    root = _project("example", tmp_path / "project")
    context = Context(root, read_cache=False)
    _, listed = _store_plan(context)
    tables = {s.name: s.table_name for s in listed}
    baseline = _work_of(context.plan("prod"))

    printed = Context.rendered_queries
    monkeypatch.setattr(Context, "rendered_queries", lambda self: {name: f"{sql} " for name, sql in printed(self).items()})
    for module in ("bot.fingerprint", "bot.state.store", "bot.state.versions"):
        monkeypatch.setattr(f"{module}.FINGERPRINT_SCHEME", NEXT)
    result = CliRunner().invoke(cli, ["-p", str(root), "migrate"])
    assert result.exit_code == 0, result.output
    queried = set(printed(context))   # seeds have no query: their hashes stay
    assert f"{len(queried)} moved, {len(listed) - len(queried)} unchanged" in result.output

    migrated = Context(root, read_cache=False)
    assert _work_of(migrated.plan("prod")) == baseline
    assert {s.name: s.table_name for s in migrated.state.get_environment("prod").snapshots} == tables
    stored = migrated.state.get_snapshots(s.snapshot_id for s in migrated.state.get_environment("prod").snapshots)
    assert {s.name for s in stored.values() if s.rendered_query.endswith(" ")} == queried
