"""SqlStateSync on real SQLite and PostgreSQL: snapshots, intervals, promotion locking, janitor queries."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest
import sqlalchemy as sa

from bot.errors import ConflictError, StateError
from bot.snapshot import ChangeCategory, Fingerprint, Snapshot, SnapshotId
from bot.state._util import CHUNK
from bot.state.protocol import Environment, EnvironmentSnapshot
from bot.state.connect import connect_state

DAY = 86_400_000
CONFLICT = "another plan was applied to `{}` while yours was in progress; re-plan"


@pytest.fixture
def state(connection, tmp_path):
    store = connect_state(connection, project_root=tmp_path)
    yield store
    store.close()


def make_snapshot(name: str = "db.orders", n: int = 0, **changes) -> Snapshot:
    snapshot = Snapshot(
        name=name,
        fingerprint=Fingerprint(data_hash=f"d{n}", metadata_hash=f"m{n}", parent_data_hash="pd",
                                parent_metadata_hash="pm"),
        version=f"v{n}",
        kind="FULL",
        definition={"name": name, "kind": {"name": "FULL"}, "query": "SELECT 1 AS x",
                    "grain": ["x"], "nested": {"a": [1, 2.5, None, True], "é": "ünïcode"}},
        rendered_query='SELECT 1 AS `x`',
        change_category=ChangeCategory.NON_BREAKING,
        parents=(SnapshotId("db.raw", "123"), SnapshotId("db.other", "456")),
        forward_only=True,
        physical_schema="sqlmesh__db",
        created_ts=1_700_000_000_000,
        updated_ts=1_700_000_000_500,
        ttl="in 2 days",
        columns=(("x", "INT"), ("y", "STRING")),
    )
    return replace(snapshot, **changes)


def env_of(name: str, plan_id: str, *snapshots: Snapshot, **changes) -> Environment:
    return Environment(
        name=name,
        snapshots=tuple(EnvironmentSnapshot(s.name, s.identifier, s.version, s.kind, s.table_name)
                        for s in snapshots),
        plan_id=plan_id, **changes)


def test_snapshot_roundtrip_is_exact_and_push_ignores_existing_ids(state):
    snapshot = make_snapshot()
    bare = make_snapshot("db.bare", 1, change_category=None, parents=(), columns=(), definition={})
    state.push_snapshots([snapshot, bare])
    state.push_snapshots([replace(snapshot, rendered_query="changed")])   # same id: ignored
    stored = state.get_snapshots([snapshot.snapshot_id, bare.snapshot_id, SnapshotId("db.x", "1")])
    assert stored == {snapshot.snapshot_id: snapshot, bare.snapshot_id: bare}
    assert state.get_snapshots_by_version([("db.orders", "v0"), ("db.orders", "nope")]) == [snapshot]


def test_thousands_of_snapshots_push_and_read_back_by_id(state, connection):
    snapshots = [make_snapshot(f"db.model_{i}", i) for i in range(4 * CHUNK + 7)]   # 2007: five IN lists
    state.push_snapshots(snapshots)
    found = state.get_snapshots(s.snapshot_id for s in snapshots)
    assert len(found) == len(snapshots) and found[snapshots[1234].snapshot_id] == snapshots[1234]
    assert found == {s.snapshot_id: s for s in snapshots}


def test_intervals_are_added_removed_and_merged_per_version(state):
    state.add_interval("db.a", "v1", (0, DAY))
    state.add_interval("db.a", "v1", (2 * DAY, 3 * DAY))
    state.add_interval("db.a", "v1", (DAY, 2 * DAY))            # fills the gap
    state.add_interval("db.a", "v1", (5 * DAY, 6 * DAY), is_dev=True)
    state.add_interval("db.a", "v2", (0, 10 * DAY))
    state.remove_intervals("db.a", "v2", (3 * DAY, 4 * DAY))
    state.add_interval("db.b", "v1", (0, DAY))
    state.remove_intervals("db.b", "v1", (0, DAY))
    result = state.get_intervals([("db.a", "v1"), ("db.a", "v2"), ("db.b", "v1"), ("db.none", "v")])
    assert result[("db.a", "v1")].intervals == [(0, 3 * DAY)]
    assert result[("db.a", "v1")].dev_intervals == [(5 * DAY, 6 * DAY)]
    assert result[("db.a", "v2")].intervals == [(0, 3 * DAY), (4 * DAY, 10 * DAY)]
    assert result[("db.b", "v1")].intervals == []
    assert result[("db.none", "v")].intervals == [] and len(result) == 4


def test_latest_interval_end_is_the_largest_end_of_the_merged_intervals(state):
    """What a dev plan ends at: prod's latest data. A removal that cut a tail counts, dev intervals do not."""
    state.add_interval("db.a", "v1", (0, 3 * DAY))
    state.add_interval("db.a", "v1", (5 * DAY, 9 * DAY))
    state.remove_intervals("db.a", "v1", (7 * DAY, 9 * DAY))     # the tail: db.a's data ends at day 7
    state.add_interval("db.b", "v1", (0, 6 * DAY))
    state.add_interval("db.b", "v1", (0, 20 * DAY), is_dev=True)  # a preview's: not prod's data
    state.add_interval("db.b", "v2", (0, 30 * DAY))               # another version: not asked for
    assert state.latest_interval_end([("db.a", "v1"), ("db.b", "v1")]) == 7 * DAY
    assert state.latest_interval_end([("db.b", "v1")]) == 6 * DAY
    state.remove_intervals("db.b", "v1", (0, 6 * DAY))
    assert state.latest_interval_end([("db.b", "v1"), ("db.none", "v")]) is None
    expected = max(i[1] for found in state.get_intervals([("db.a", "v1"), ("db.b", "v2")]).values()
                   for i in found.intervals)
    assert state.latest_interval_end([("db.a", "v1"), ("db.b", "v2")]) == expected == 30 * DAY


def test_intervals_of_thousands_of_pairs_keep_each_pairs_own_rows_across_slices(state):
    """Reads span several IN slices in which names and versions recur: each pair gets its own rows, in
    the order written (a removal after an add), never a neighbour's and never twice."""
    pairs = [(f"db.m{i // 3:04d}", f"v{i % 4}") for i in range(3 * CHUNK + 10)]   # 3 versions of each name
    rows = []
    for index, (name, version) in enumerate(pairs):
        start = index * DAY
        rows += [dict(name=name, version=version, start_ts=start, end_ts=start + 3 * DAY, is_dev=False,
                      is_removed=False, created_ts=1),
                 dict(name=name, version=version, start_ts=start + DAY, end_ts=start + 2 * DAY, is_dev=False,
                      is_removed=True, created_ts=2)]
    with state.engine.begin() as conn:   # one insert: thousands of add_interval commits would take minutes
        conn.execute(sa.insert(state.tables.intervals), rows)
    unrecorded = [("db.m0000", "v3"), ("db.m9999", "v0")]   # a recorded name with another version; none
    result = state.get_intervals(reversed(pairs + unrecorded))
    assert len(result) == len(pairs) + 2
    for index, pair in enumerate(pairs):
        start = index * DAY
        assert result[pair].intervals == [(start, start + DAY), (start + 2 * DAY, start + 3 * DAY)], pair
        assert result[pair].dev_intervals == []
    assert all(result[pair].intervals == [] for pair in unrecorded)


def test_an_environment_entry_of_unknown_fields_is_named_not_a_crash(state):
    a = make_snapshot("db.a", 1)
    state.promote(env_of("dev", "plan1", a), expected_plan_id=None)
    listed = state.get_environment("dev").snapshots
    assert listed == (EnvironmentSnapshot("db.a", a.identifier, "v1", "FULL", a.table_name),)
    assert listed[0].promoted is True and listed[0].snapshot_id == a.snapshot_id
    table = state.tables.environments
    with state.engine.begin() as conn:   # as a newer meshbot with one more field per entry would write it
        [entry] = conn.execute(sa.select(table.c.snapshots).where(table.c.name == "dev")).scalar_one()
        conn.execute(sa.update(table).where(table.c.name == "dev").values(snapshots=[{**entry, "ttl_ms": 5}]))
    with pytest.raises(StateError, match=r"environment `dev` lists a snapshot with fields .*'ttl_ms'.*newer meshbot"):
        state.get_environment("dev")


def test_promote_new_environment_then_replace_it_and_finalize(state):
    a, b = make_snapshot("db.a", 1), make_snapshot("db.b", 2)
    state.promote(env_of("dev", "plan1", a, start="2024-01-01", expiration_ts=5),
                  expected_plan_id=None)
    first = state.get_environment("dev")
    assert first == env_of("dev", "plan1", a, start="2024-01-01", expiration_ts=5)
    state.finalize("dev", "plan1")
    assert state.get_environment("dev").finalized_ts is not None
    state.promote(env_of("dev", "plan2", a, b, previous_plan_id="ignored"), expected_plan_id="plan1")
    second = state.get_environment("dev")
    assert (second.plan_id, second.previous_plan_id, second.finalized_ts) == ("plan2", "plan1", None)
    assert [s.name for s in second.snapshots] == ["db.a", "db.b"]
    assert second.by_name()["db.b"].table_name == b.table_name
    with pytest.raises(ConflictError, match="re-plan"):
        state.finalize("dev", "plan1")
    assert [e.name for e in state.get_environments()] == ["dev"]


def test_promote_with_stale_plan_id_conflicts_and_changes_nothing(state):
    state.promote(env_of("prod", "plan1", make_snapshot()), expected_plan_id=None)
    before = state.get_environment("prod")
    for expected in ("plan0", None):
        with pytest.raises(ConflictError) as error:
            state.promote(env_of("prod", "plan9"), expected_plan_id=expected)
        assert str(error.value) == CONFLICT.format("prod")
    assert state.get_environment("prod") == before


def test_promote_waits_for_the_row_lock_and_sees_the_other_plan(state):
    state.promote(env_of("dev", "plan1"), expected_plan_id=None)
    table = state.tables.environments
    outcome: list[BaseException | None] = []

    def promote() -> None:
        try:
            state.promote(env_of("dev", "mine"), expected_plan_id="plan1")
            outcome.append(None)
        except ConflictError as error:
            outcome.append(error)

    with state.engine.connect().execution_options(sqlite_begin="IMMEDIATE") as conn, conn.begin():
        conn.execute(sa.select(table.c.plan_id).where(table.c.name == "dev").with_for_update())
        worker = threading.Thread(target=promote)
        worker.start()
        time.sleep(0.5)
        assert worker.is_alive(), "promote must wait for the lock held by the other plan"
        conn.execute(sa.update(table).where(table.c.name == "dev").values(plan_id="theirs"))
    worker.join(20)
    assert isinstance(outcome[0], ConflictError)
    assert state.get_environment("dev").plan_id == "theirs"


@pytest.mark.parametrize("existing", [False, True])
def test_two_concurrent_promoters_exactly_one_wins(connection, tmp_path, existing):
    stores = [connect_state(connection, project_root=tmp_path) for _ in range(2)]
    if existing:
        stores[0].promote(env_of("dev", "plan0"), expected_plan_id=None)
    expected = "plan0" if existing else None
    barrier = threading.Barrier(2)
    results: dict[str, str] = {}

    def promote(index: int) -> None:
        barrier.wait()
        try:
            stores[index].promote(env_of("dev", f"plan{index + 1}"), expected_plan_id=expected)
            results[f"plan{index + 1}"] = "ok"
        except ConflictError as error:
            results[f"plan{index + 1}"] = str(error)

    for _ in range(3 if existing else 1):
        threads = [threading.Thread(target=promote, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert sorted(results.values()) == sorted(["ok", CONFLICT.format("dev")])
        winner = next(plan for plan, result in results.items() if result == "ok")
        stored = stores[0].get_environment("dev")
        assert (stored.plan_id, stored.previous_plan_id) == (winner, expected)
        if existing:   # reset for the next round
            with stores[0].engine.begin() as conn:
                table = stores[0].tables.environments
                conn.execute(sa.update(table).values(plan_id="plan0", previous_plan_id=None))
        results.clear()
    for store in stores:
        store.close()


def test_invalidate_marks_expired_and_refuses_prod_or_unknown(state):
    state.promote(env_of("prod", "p"), expected_plan_id=None)
    state.promote(env_of("dev", "d", expiration_ts=10**15), expected_plan_id=None)
    state.promote(env_of("old", "o", expiration_ts=1000), expected_plan_id=None)
    now = int(time.time() * 1000)
    assert [e.name for e in state.expired_environments(now)] == ["old"]
    state.invalidate_environment("dev")
    assert state.get_environment("dev").expiration_ts <= int(time.time() * 1000)
    assert [e.name for e in state.expired_environments(int(time.time() * 1000))] == ["dev", "old"]
    with pytest.raises(StateError, match="cannot invalidate `prod`"):
        state.invalidate_environment("prod")
    with pytest.raises(StateError, match="environment `nope` does not exist"):
        state.invalidate_environment("nope")
    state.delete_environment("old")
    assert state.get_environment("old") is None and state.get_environment("prod") is not None


JAN31 = 1_706_659_200_000   # 2024-01-31 00:00 UTC


@pytest.mark.parametrize(("ttl", "lasts"), [
    ("in 1 month", 29 * DAY),   # a calendar month from Jan 31 ends on Feb 29, as in SQLMesh (not 30 days)
    ("in 1 week", 7 * DAY),
    ("in 12 hours", DAY // 2),
    ("1 week", 7 * DAY),        # a bare span stored before TTLs were checked keeps its length
])
def test_snapshot_ttl_counts_from_last_update(state, ttl, lasts):
    snapshot = make_snapshot("db.t", 1, created_ts=JAN31 - DAY, updated_ts=JAN31, ttl=ttl)
    state.push_snapshots([snapshot])
    assert state.expired_snapshots(JAN31 + lasts - 1) == []
    assert state.expired_snapshots(JAN31 + lasts) == [snapshot]


def test_unreadable_stored_ttl_is_a_state_error(state):
    state.push_snapshots([make_snapshot("db.t", 1, ttl="soon")])
    with pytest.raises(StateError, match="cannot read the snapshot TTL 'soon'"):
        state.expired_snapshots(JAN31)


def test_expired_snapshots_versions_in_use_and_delete(state):
    now = 1_700_000_000_000 + 10 * DAY
    in_prod = make_snapshot("db.a", 1)                       # old, but referenced by prod
    in_dead_env = make_snapshot("db.b", 2)                    # old, only in an expired env
    young = make_snapshot("db.c", 3, created_ts=now - DAY, updated_ts=now - DAY)   # ttl 2 days
    orphan = make_snapshot("db.d", 4)                         # old and unreferenced
    sibling = make_snapshot("db.d", 5, version=orphan.version, ttl="in 1 year")    # shares the version
    state.push_snapshots([in_prod, in_dead_env, young, orphan, sibling])
    state.promote(env_of("prod", "p", in_prod), expected_plan_id=None)
    state.promote(env_of("dev", "d", in_dead_env, expiration_ts=now - 1), expected_plan_id=None)
    expired = state.expired_snapshots(now, ignore_ttl=False)
    assert expired == [in_dead_env, orphan]
    ignoring = {s.name for s in state.expired_snapshots(now, ignore_ttl=True)}
    assert ignoring == {"db.b", "db.c", "db.d"}
    ids = [s.snapshot_id for s in expired]
    assert state.versions_in_use(ids) == {("db.a", "v1"), ("db.c", "v3"), ("db.d", "v4")}

    state.add_interval("db.b", "v2", (0, DAY))
    state.add_interval("db.d", "v4", (0, DAY))
    state.delete_snapshots(ids)
    assert state.get_snapshots(ids) == {}
    intervals = state.get_intervals([("db.b", "v2"), ("db.d", "v4")])
    assert intervals[("db.b", "v2")].intervals == []        # no snapshot left on v2
    assert intervals[("db.d", "v4")].intervals == [(0, DAY)]  # the sibling still uses v4


def test_expiring_snapshots_records_the_drops_of_unshared_versions_in_the_same_transaction(state):
    from bot.state.protocol import PendingDrop

    gone = make_snapshot("db.b", 2)
    orphan = make_snapshot("db.d", 4)
    sibling = make_snapshot("db.d", 5, version=orphan.version)   # keeps v4 and its table
    state.push_snapshots([gone, orphan, sibling])
    state.add_interval("db.b", "v2", (0, DAY))
    state.add_interval("db.d", "v4", (0, DAY))
    drops = [PendingDrop("sqlmesh__db.db__b__v2", "table", "db.b", "v2"),
             PendingDrop("sqlmesh__db.db__b__v2__dev", "table", "db.b", "v2"),
             PendingDrop("sqlmesh__db.db__d__v4", "view", "db.d", "v4")]
    pending = state.expire_snapshots([gone.snapshot_id, orphan.snapshot_id], drops)
    assert pending == drops[:2] and state.pending_drops() == drops[:2]
    assert state.get_snapshots([gone.snapshot_id, orphan.snapshot_id]) == {}
    intervals = state.get_intervals([("db.b", "v2"), ("db.d", "v4")])
    assert intervals[("db.b", "v2")].intervals == [] and intervals[("db.d", "v4")].intervals == [(0, DAY)]
    state.delete_pending_drops([drops[0].object])
    assert state.pending_drops() == [drops[1]]
    state.expire_snapshots([], [drops[1]])   # recorded again (a janitor finishing another's): once
    assert state.pending_drops() == [drops[1]]


def test_every_promotion_is_recorded_in_the_history_in_its_transaction(state):
    a1, a2 = make_snapshot("db.a", 1), make_snapshot("db.a", 2)
    state.promote(env_of("prod", "plan1", a1), expected_plan_id=None)
    state.finalize("prod", "plan1")
    state.promote(env_of("prod", "plan2", a2), expected_plan_id="plan1")
    history = state.get_environment_history("prod")
    assert [(e.plan_id, e.finalized_ts is not None) for e in history] == [("plan2", False), ("plan1", True)]
    assert history[1].snapshots == env_of("prod", "x", a1).snapshots
    assert history[0].promoted_ts >= history[1].promoted_ts
    with pytest.raises(ConflictError):                       # a refused promotion writes no history
        state.promote(env_of("prod", "plan3", a1), expected_plan_id="plan1")
    state.restore_environment("prod", state.get_environment("prod") and
                              env_of("prod", "plan1", a1, finalized_ts=1), expected_plan_id="plan2")
    assert [e.plan_id for e in state.get_environment_history("prod")] == ["plan1"]   # an undone one is gone
    state.promote(env_of("dev", "d1", a2, expiration_ts=5), expected_plan_id=None)
    state.delete_environment("dev")
    assert state.get_environment_history("dev") == []


def test_the_previous_plan_of_a_live_environment_is_kept_by_the_janitor_unless_ignore_ttl(state):
    now = 1_700_000_000_000 + 10 * DAY
    old, current, older = make_snapshot("db.a", 1), make_snapshot("db.a", 2), make_snapshot("db.a", 0)
    state.push_snapshots([older, old, current])
    state.promote(env_of("prod", "p0", older), expected_plan_id=None)
    state.promote(env_of("prod", "p1", old), expected_plan_id="p0")
    state.promote(env_of("prod", "p2", current), expected_plan_id="p1")
    assert state.expired_snapshots(now) == [older]           # p1's snapshot: the rollback target
    assert {s.identifier for s in state.expired_snapshots(now, ignore_ttl=True)} == {older.identifier,
                                                                                     old.identifier}


def test_a_read_snapshot_decodes_its_definition_only_when_read_and_behaves_as_a_snapshot(state):
    """get_snapshots leaves each definition as JSON text until it is read (a plan of 10,000 unchanged
    models reads none); the snapshot still equals, replaces, copies and serializes as a Snapshot."""
    import copy
    import pickle
    from dataclasses import asdict

    snapshot = make_snapshot()
    state.push_snapshots([snapshot])
    stored = state.get_snapshots([snapshot.snapshot_id])[snapshot.snapshot_id]
    assert "definition" not in stored.__dict__   # not decoded yet
    assert stored.name == snapshot.name and stored.table_name == snapshot.table_name
    assert "definition" not in stored.__dict__
    assert stored == snapshot and snapshot == stored and not (stored != snapshot)
    assert stored.definition == snapshot.definition and "definition" in stored.__dict__
    again = state.get_snapshots([snapshot.snapshot_id])[snapshot.snapshot_id]
    assert asdict(again) == asdict(snapshot)
    assert replace(again, version="v9") == replace(snapshot, version="v9")
    assert stored != replace(snapshot, rendered_query="other") and replace(snapshot, rendered_query="other") != stored
    fresh = state.get_snapshots([snapshot.snapshot_id])[snapshot.snapshot_id]
    assert pickle.loads(pickle.dumps(fresh)) == snapshot and copy.deepcopy(fresh) == snapshot
    assert repr(fresh) == repr(snapshot).replace("Snapshot(", "_StoredSnapshot(", 1)


def test_listed_snapshots_read_their_rows_only_when_used_and_behave_as_snapshots(state):
    """A plan keeps the snapshots its environment lists for unchanged models without reading their
    rows: each is read when a field the list lacks is first used (the first few alone, then all the
    rest at once); it equals, replaces, copies and serializes as the Snapshot it stands for."""
    import copy
    import pickle
    from dataclasses import asdict

    snapshots = [make_snapshot(f"db.m{i}", i) for i in range(40)]
    state.push_snapshots(snapshots)
    env = env_of("prod", "p1", *snapshots)
    listed = state.listed_snapshots(env.snapshots)
    assert list(listed) == [s.snapshot_id for s in snapshots]
    first = listed[snapshots[0].snapshot_id]
    assert (first.name, first.identifier, first.version, first.kind, first.snapshot_id) == \
        (snapshots[0].name, snapshots[0].identifier, "v0", "FULL", snapshots[0].snapshot_id)
    assert all("_pending" in s.__dict__ for s in listed.values())   # no row read yet
    assert [s.table_name for s in listed.values()] == [s.table_name for s in snapshots]
    assert [s.dev_table_name for s in listed.values()] == [s.dev_table_name for s in snapshots]
    assert all("_pending" in s.__dict__ for s in listed.values())   # the list holds each table: still no row read
    # a dev environment that served a forward-only preview lists the `__dev` table; the snapshot's is the same
    served = state.listed_snapshots([replace(env.snapshots[5], table_name=snapshots[5].dev_table_name)])
    assert served[snapshots[5].snapshot_id].table_name == snapshots[5].table_name
    assert first.definition == snapshots[0].definition and first.table_name == snapshots[0].table_name
    assert "_pending" not in first.__dict__ and "_pending" in listed[snapshots[1].snapshot_id].__dict__
    for snapshot in snapshots[1:17]:
        assert listed[snapshot.snapshot_id].rendered_query == snapshot.rendered_query
    assert all("_pending" not in s.__dict__ for s in listed.values())   # the 17th read took the rest
    assert list(listed.values()) == snapshots and snapshots == list(listed.values())
    assert [asdict(s) for s in listed.values()] == [asdict(s) for s in snapshots]
    fresh = state.listed_snapshots(env.snapshots)[snapshots[3].snapshot_id]
    assert replace(fresh, version="v9") == replace(snapshots[3], version="v9")
    assert replace(fresh, version="v9").identifier == snapshots[3].identifier
    fresh = state.listed_snapshots(env.snapshots)[snapshots[3].snapshot_id]
    assert pickle.loads(pickle.dumps(fresh)) == snapshots[3] and copy.deepcopy(fresh) == snapshots[3]
    fresh = state.listed_snapshots(env.snapshots)[snapshots[3].snapshot_id]
    assert fresh != replace(snapshots[3], ttl="in 9 days")

    gone = state.listed_snapshots(env_of("prod", "p1", make_snapshot("db.gone", 99)).snapshots)
    (missing,) = gone.values()
    assert missing.version == "v99"
    with pytest.raises(StateError, match="no longer in the state"):
        missing.definition   # noqa: B018


def test_environment_names_are_listed_without_their_snapshot_lists(state):
    a = make_snapshot("db.a", 1)
    state.promote(env_of("prod", "p1", a), expected_plan_id=None)
    state.promote(env_of("dev", "p2", a, expiration_ts=5), expected_plan_id=None)
    assert state.get_environment_names() == ["dev", "prod"] == [e.name for e in state.get_environments()]
