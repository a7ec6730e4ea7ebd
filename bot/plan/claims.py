"""This process's leases: who it is, waiting for a key another process holds, renewing what it holds."""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Callable, Iterator

from bot.errors import PlanError
from bot.state.protocol import Lease, LeaseHolder, StateSync

DEFAULT_TTL_S = 120.0      # a killed holder blocks others at most this long
DEFAULT_WAIT_S = 1800.0    # how long to wait for another holder before giving up
TTL_ENV = "MESHBOT_LEASE_TTL"
WAIT_ENV = "MESHBOT_LEASE_WAIT"

Notice = Callable[[str], None]


class LeaseBusy(PlanError):
    """Another live process held the key for longer than this process would wait."""

    def __init__(self, message: str, holder: str) -> None:
        super().__init__(message)
        self.holder = holder      # describe(key, holder): who, what and since when


JANITOR_KEY = "janitor"
_ENVIRONMENT = "environment:"


def environment_key(name: str) -> str:
    return f"{_ENVIRONMENT}{name}"


def version_key(name: str, version: str) -> str:
    return f"version:{name}:{version}"


def new_owner() -> str:
    """host:pid:token; the token tells apart two holders in one process and a reused pid."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def _seconds(variable: str, default: float) -> float:
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise PlanError(f"{variable}={text!r} is not a number of seconds") from None
    if value < 0:
        raise PlanError(f"{variable}={text!r} must not be negative")
    return value


@dataclass(frozen=True)
class _Deadline:
    at: float         # time.monotonic() at which waiting stops
    wait_s: float

    @classmethod
    def after(cls, wait_s: float) -> "_Deadline":
        return cls(time.monotonic() + wait_s, wait_s)


@dataclass
class Claims:
    """Leases held by one owner; a heartbeat thread renews them every ttl/3 while any is held."""

    state: StateSync
    ttl_s: float = field(default_factory=lambda: _seconds(TTL_ENV, DEFAULT_TTL_S))
    wait_s: float = field(default_factory=lambda: _seconds(WAIT_ENV, DEFAULT_WAIT_S))
    owner: str = field(default_factory=new_owner)
    _held: set[str] = field(default_factory=set)
    _lost: set[str] = field(default_factory=set)
    _told: dict[str, str] = field(default_factory=dict)   # key -> the holder a waiting line named
    _abandoned: set[str] = field(default_factory=set)     # held in a state that no longer exists
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _heartbeat: threading.Thread | None = None

    @contextmanager
    def hold(self, key: str, purpose: str, *, notice: Notice | None = None,
             wait_s: float | None = None) -> Iterator[Lease]:
        """Hold `key` for the block, waiting (with one line through `notice`) while another owner has it,
        at most `wait_s` (default: this process's wait) before raising LeaseBusy."""
        lease = self.acquire(key, purpose, notice=notice, wait_s=wait_s)
        try:
            yield lease
        finally:
            self.release(key)

    def acquire(self, key: str, purpose: str, *, notice: Notice | None = None,
                wait_s: float | None = None) -> Lease:
        """Take `key`, waiting while another owner holds it. An environment's lease is not kept while
        the janitor holds its own: it is given back, and taken again once the janitor is done."""
        deadline = _Deadline.after(self.wait_s if wait_s is None else wait_s)
        first: Lease | None = None
        while True:
            lease = self._take(key, purpose, notice, deadline)
            first = first or lease
            if not key.startswith(_ENVIRONMENT):
                return lease
            # Taken first, then checked: the janitor takes its lease before it checks ours, so one of
            # the two always sees the other (each lease write is a committed transaction).
            if self._janitor() is None:
                return replace(lease, previous=first.previous)   # who held it before this process did
            self.release(key)
            self._wait_while(self._janitor, JANITOR_KEY, notice, deadline)

    @contextmanager
    def hold_janitor(self, *, notice: Notice | None = None) -> Iterator[Lease]:
        """The janitor's turn: hold its lease, then wait until no plan or run holds an environment's
        lease (one in flight may be about to reuse any table), for the block."""
        deadline = _Deadline.after(self.wait_s)
        with self.hold(JANITOR_KEY, "janitor", notice=notice) as lease:
            self._wait_while(self._writer, None, notice, deadline)
            yield lease

    def _take(self, key: str, purpose: str, notice: Notice | None, deadline: _Deadline) -> Lease:
        ttl_ms = int(self.ttl_s * 1000)
        while True:
            lease = self.state.acquire_lease(key, owner=self.owner, purpose=purpose, ttl_ms=ttl_ms)
            if lease.granted:
                self._track(key)
                return lease
            if _dead_here(lease.holder.owner):   # killed on this machine: no need to wait out its ttl
                lease = self.state.acquire_lease(key, owner=self.owner, purpose=purpose, ttl_ms=ttl_ms,
                                                 replacing=lease.holder.owner)
                if lease.granted:
                    self._track(key)
                    return lease
            self._waiting(key, lease.holder, notice, deadline)

    def _janitor(self) -> tuple[str, LeaseHolder] | None:
        holder = self.state.live_leases().get(JANITOR_KEY)
        return (JANITOR_KEY, holder) if self._other(holder) else None

    def _writer(self) -> tuple[str, LeaseHolder] | None:
        """A live environment lease of another process (the first by key), if any."""
        for key, holder in self.state.live_leases().items():
            if key.startswith(_ENVIRONMENT) and self._other(holder):
                return key, holder
        return None

    def _other(self, holder: LeaseHolder | None) -> bool:
        return holder is not None and holder.owner != self.owner and not _dead_here(holder.owner)

    def _wait_while(self, blocker: Callable[[], tuple[str, LeaseHolder] | None], told_key: str | None,
                    notice: Notice | None, deadline: _Deadline) -> None:
        while (found := blocker()) is not None:
            self._waiting(found[0], found[1], notice, deadline, told_key=told_key)

    def _waiting(self, key: str, holder: LeaseHolder, notice: Notice | None, deadline: _Deadline,
                 told_key: str | None = None) -> None:
        """One waiting line per holder (not per batch it writes), giving up at `deadline`, else a pause."""
        told = told_key or key
        if time.monotonic() >= deadline.at:   # before the waiting line: a caller that does not wait never waits
            raise LeaseBusy(f"gave up after {deadline.wait_s:g}s ({WAIT_ENV}) waiting for "
                            f"{describe(key, holder)}; re-run later", describe(key, holder))
        if notice is not None and self._told.get(told) != holder.owner:
            self._told[told] = holder.owner
            notice("waiting for " + describe(key, holder))
        time.sleep(min(0.5, self.ttl_s / 10))

    def release(self, key: str) -> None:
        with self._lock:
            self._held.discard(key)
            self._lost.discard(key)
            if key in self._abandoned:
                self._abandoned.discard(key)
                return
        self.state.release_lease(key, owner=self.owner)

    def abandon(self, key: str) -> None:
        """Stop renewing `key` and never release it: the state that held it was dropped (`destroy`)."""
        with self._lock:
            self._held.discard(key)
            self._abandoned.add(key)

    def lost(self, key: str) -> bool:
        """True when a renewal found `key` taken over (this process stalled longer than the ttl)."""
        with self._lock:
            return key in self._lost

    def _track(self, key: str) -> None:
        with self._lock:
            self._held.add(key)
            self._lost.discard(key)
            if self._heartbeat is None:
                self._heartbeat = threading.Thread(target=self._renew_loop, name="meshbot-leases",
                                                   daemon=True)
                self._heartbeat.start()

    def _renew_loop(self) -> None:
        while True:
            time.sleep(self.ttl_s / 3)
            with self._lock:
                keys = set(self._held)
                if not keys:
                    self._heartbeat = None
                    return
            try:
                kept = self.state.renew_leases(keys, owner=self.owner, ttl_ms=int(self.ttl_s * 1000))
            except Exception:  # noqa: BLE001 - state unreachable for a moment: the next beat retries
                continue
            with self._lock:
                self._lost |= (keys - kept) & self._held


def _dead_here(owner: str) -> bool:
    """True when `owner` ran on this host and its process is gone (a reused pid reads as alive)."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:   # alive, owned by another user
        return False
    return False


def describe(key: str, holder: LeaseHolder) -> str:
    """The holder, what it holds and since when, for a waiting line or an error.

    >>> describe("version:db.a:1a2b3c4d5e", LeaseHolder("ci-7:4242:ab12", "plan of `prod` (plan 9f8e7d6c)",
    ...                                           acquired_ts=1_700_000_000_000, expires_ts=0))
    'the plan of `prod` (plan 9f8e7d6c) on ci-7:4242, holding version 1a2b3c4d of `db.a` since 22:13:20 UTC'
    """
    since = time.strftime("%H:%M:%S", time.gmtime(holder.acquired_ts / 1000))
    return f"{describe_holder(holder)}, holding {_what(key)} since {since} UTC"


def describe_holder(holder: LeaseHolder) -> str:
    """'the plan of `prod` (plan 9f8e7d6c) on host:pid' (the owner's token left out)."""
    return f"the {holder.purpose or 'process'} on {holder.owner.rsplit(':', 1)[0]}"


def _what(key: str) -> str:
    kind, _, rest = key.partition(":")
    if kind == "version":
        name, _, version = rest.rpartition(":")
        return f"version {version[:8]} of `{name}`"
    if kind == "environment":
        return f"environment `{rest}`"
    if key == JANITOR_KEY:
        return "the janitor's lease (no plan or run writes meanwhile)"
    return f"`{key}`"
