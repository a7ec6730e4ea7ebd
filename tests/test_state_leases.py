"""Leases on real SQLite and PostgreSQL: acquire, renew, release, expiry, takeover, many acquirers at once."""

from __future__ import annotations

import threading
import time

import pytest

from bot.project.config import StateConnection
from bot.state.connect import connect_state

TTL = 60_000


@pytest.fixture
def state(connection, tmp_path):
    store = connect_state(connection, project_root=tmp_path)
    yield store
    store.close()


def test_acquire_is_refused_while_held_and_granted_after_release(state):
    first = state.acquire_lease("environment:prod", owner="a", purpose="plan of `prod`", ttl_ms=TTL)
    assert first.granted and first.previous is None
    assert (first.holder.owner, first.holder.purpose) == ("a", "plan of `prod`")
    other = state.acquire_lease("environment:prod", owner="b", purpose="run of `prod`", ttl_ms=TTL)
    assert not other.granted
    assert (other.holder.owner, other.holder.purpose) == ("a", "plan of `prod`")
    assert other.holder.expires_ts == first.holder.expires_ts
    assert state.live_leases() == {"environment:prod": first.holder}

    assert state.release_lease("environment:prod", owner="b") is False   # not b's to release
    assert state.release_lease("environment:prod", owner="a") is True
    assert state.live_leases() == {}
    taken = state.acquire_lease("environment:prod", owner="b", purpose="run of `prod`", ttl_ms=TTL)
    assert taken.granted
    assert (taken.previous.owner, taken.previous.purpose) == ("a", "plan of `prod`")


def test_own_lease_is_taken_again_and_other_keys_are_independent(state):
    assert state.acquire_lease("k1", owner="a", purpose="p", ttl_ms=TTL).granted
    again = state.acquire_lease("k1", owner="a", purpose="p2", ttl_ms=TTL)
    assert again.granted and again.previous.owner == "a"
    assert state.acquire_lease("k2", owner="b", purpose="p", ttl_ms=TTL).granted
    assert set(state.live_leases()) == {"k1", "k2"}


def test_expired_lease_is_taken_over_and_the_old_owner_cannot_renew_or_release(state):
    assert state.acquire_lease("version:db.a:v1", owner="a", purpose="plan", ttl_ms=200).granted
    assert not state.acquire_lease("version:db.a:v1", owner="b", purpose="plan", ttl_ms=TTL).granted
    time.sleep(0.3)
    assert state.live_leases() == {}
    taken = state.acquire_lease("version:db.a:v1", owner="b", purpose="plan b", ttl_ms=TTL)
    assert taken.granted and taken.previous.owner == "a"
    assert state.renew_leases(["version:db.a:v1"], owner="a", ttl_ms=TTL) == set()
    assert state.release_lease("version:db.a:v1", owner="a") is False
    assert state.live_leases()["version:db.a:v1"].owner == "b"


def test_renew_extends_only_the_owners_leases(state):
    state.acquire_lease("k1", owner="a", purpose="p", ttl_ms=300)
    state.acquire_lease("k2", owner="b", purpose="p", ttl_ms=300)
    for _ in range(3):
        time.sleep(0.15)
        assert state.renew_leases(["k1", "k2", "k3"], owner="a", ttl_ms=300) == {"k1"}
    assert set(state.live_leases()) == {"k1"}   # k2 was not renewed and expired
    assert not state.acquire_lease("k1", owner="b", purpose="p", ttl_ms=TTL).granted


@pytest.mark.parametrize("key_exists", [False, True])
def test_many_concurrent_acquirers_exactly_one_wins(connection, tmp_path, key_exists):
    stores = [connect_state(connection, project_root=tmp_path) for _ in range(8)]
    if key_exists:   # a released row: every acquirer races for the same UPDATE
        stores[0].acquire_lease("version:db.a:v1", owner="old", purpose="p", ttl_ms=TTL)
        stores[0].release_lease("version:db.a:v1", owner="old")
    barrier = threading.Barrier(len(stores))
    granted: list[str] = []
    errors: list[BaseException] = []

    def acquire(index: int) -> None:
        barrier.wait()
        try:
            lease = stores[index].acquire_lease("version:db.a:v1", owner=f"o{index}", purpose="p", ttl_ms=TTL)
            if lease.granted:
                granted.append(f"o{index}")
        except BaseException as error:  # noqa: BLE001 - reported by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=acquire, args=(i,)) for i in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert len(granted) == 1
    assert stores[0].live_leases()["version:db.a:v1"].owner == granted[0]
    for store in stores:
        store.close()


def test_state_id_is_set_once_and_differs_between_states(tmp_path):
    first = connect_state(StateConnection(type="sqlite", database=str(tmp_path / "a.db")), project_root=tmp_path)
    second = connect_state(StateConnection(type="sqlite", database=str(tmp_path / "b.db")), project_root=tmp_path)
    assert first.state_id != second.state_id
    again = connect_state(StateConnection(type="sqlite", database=str(tmp_path / "a.db")), project_root=tmp_path)
    assert again.state_id == first.state_id
    for store in (first, second, again):
        store.close()


@pytest.mark.postgres
def test_a_machine_whose_clock_runs_ahead_cannot_take_a_live_lease_on_postgresql(postgres_schema, tmp_path,
                                                                                 monkeypatch):
    """Leases are timed by the database's clock: a teammate's machine ten minutes ahead sees a lease
    with a minute to live as live, not as expired."""
    from bot.timeline import times
    from bot.state import leases

    state = connect_state(StateConnection(**postgres_schema), project_root=tmp_path)
    try:
        held = state.acquire_lease("environment:prod", owner="a", purpose="plan of `prod`", ttl_ms=TTL)
        assert held.granted
        ahead = times.now_ms() + 600_000
        monkeypatch.setattr(leases, "now_ms", lambda: ahead)
        assert not state.acquire_lease("environment:prod", owner="b", purpose="run of `prod`", ttl_ms=TTL).granted
        assert set(state.live_leases()) == {"environment:prod"}
    finally:
        state.close()
