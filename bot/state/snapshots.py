"""Snapshot repository: batch insert, batch reads by id or version, TTL expiry, deletion."""

from __future__ import annotations

import json
import threading
from dataclasses import fields
from typing import TYPE_CHECKING, Any, Iterable

import sqlalchemy as sa

from bot.errors import StateError
from bot.timeline.times import TimeParseError, expires_ms
from bot.snapshot import DEV_TABLE_SUFFIX, Snapshot, SnapshotId
from bot.state._util import chunks, write_transaction
from bot.state.serialize import row_to_snapshot, snapshot_to_row
from bot.state.tables import Tables

if TYPE_CHECKING:
    from bot.state.protocol import EnvironmentSnapshot


class SnapshotState:
    def __init__(self, engine: sa.Engine, tables: Tables) -> None:
        self.engine = engine
        self.table = tables.snapshots

    def push(self, snapshots: Iterable[Snapshot]) -> None:
        """Insert snapshots; a (name, identifier) already stored is left as it is."""
        rows = list({(r["name"], r["identifier"]): r for r in map(snapshot_to_row, snapshots)}.values())
        if not rows:
            return
        # The dialect's module only: importing PostgreSQL's costs a SQLite user's every command ~40 ms.
        if self.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        statement = insert(self.table).on_conflict_do_nothing(index_elements=["name", "identifier"])
        with write_transaction(self.engine) as conn:
            conn.execute(statement, rows)

    def get(self, ids: Iterable[SnapshotId]) -> dict[SnapshotId, Snapshot]:
        """Snapshots by id, read in IN-list chunks; unknown ids are absent from the result.

        Each `definition` (the largest column, the whole model as JSON) is decoded when first read
        (_StoredSnapshot): a plan reads every snapshot of its environment but the definitions of
        only the changed ones. Rows are read as tuples, not mappings. At 10,000 models this took
        the read from ~1.4 s to ~0.6 s of CPU.
        """
        wanted = sorted(set(ids))
        t = self.table
        key = sa.tuple_(t.c.name, t.c.identifier)
        columns = [sa.type_coerce(t.c.definition, sa.Text).label("definition") if c.name == "definition" else c
                   for c in t.c]
        names = [c.name for c in t.c]
        result: dict[SnapshotId, Snapshot] = {}
        with self.engine.connect() as conn:
            for part in chunks(wanted):
                query = sa.select(*columns).where(key.in_([(i.name, i.identifier) for i in part]))
                for values in conn.execute(query):
                    snapshot = _stored_snapshot(dict(zip(names, values)))
                    result[SnapshotId(snapshot.name, snapshot.identifier)] = snapshot
        return result

    def stored_ids(self, ids: Iterable[SnapshotId]) -> set[SnapshotId]:
        """Which of `ids` are stored: their keys only, no definition read."""
        t = self.table
        key = sa.tuple_(t.c.name, t.c.identifier)
        found: set[SnapshotId] = set()
        with self.engine.connect() as conn:
            for part in chunks(sorted(set(ids))):
                query = sa.select(t.c.name, t.c.identifier).where(key.in_([(i.name, i.identifier) for i in part]))
                found.update(SnapshotId(name, identifier) for name, identifier in conn.execute(query))
        return found

    def listed(self, listed: Iterable["EnvironmentSnapshot"]) -> dict[SnapshotId, Snapshot]:
        """The snapshots an environment lists, built from its list without reading them: each reads its
        row when first asked for a field the list does not hold (a changed model's definition, say)."""
        group = _Pending(self)
        result: dict[SnapshotId, Snapshot] = {}
        for item in listed:
            snapshot = object.__new__(_ListedSnapshot)
            snapshot.__dict__.update(name=item.name, version=item.version, kind=item.kind,
                                     _identifier=item.identifier, _listed_table=item.table_name, _pending=group)
            group.members.append(snapshot)
            result[SnapshotId(item.name, item.identifier)] = snapshot
        return result

    def by_version(self, name_versions: Iterable[tuple[str, str]]) -> list[Snapshot]:
        """Every snapshot sharing one of the (name, version) pairs, sorted by name and identifier."""
        wanted = sorted(set(name_versions))
        key = sa.tuple_(self.table.c.name, self.table.c.version)
        found: list[Snapshot] = []
        with self.engine.connect() as conn:
            for part in chunks(wanted):
                query = sa.select(self.table).where(key.in_(list(part)))
                found.extend(row_to_snapshot(row) for row in conn.execute(query).mappings())
        return sorted(found, key=lambda s: (s.name, s.identifier))

    def refs(self) -> list[tuple[SnapshotId, str]]:
        """(id, version) of every stored snapshot, without loading definitions."""
        t = self.table
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(t.c.name, t.c.identifier, t.c.version)).all()
        return [(SnapshotId(name, identifier), version) for name, identifier, version in rows]

    def expired_ids(self, now_ms: int, *, ignore_ttl: bool,
                    keep: set[SnapshotId]) -> list[SnapshotId]:
        """Ids older than their TTL (or all with `ignore_ttl`) that are not in `keep`."""
        t = self.table
        query = sa.select(t.c.name, t.c.identifier, t.c.ttl, t.c.created_ts, t.c.updated_ts)
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        expired = []
        for name, identifier, ttl, created_ts, updated_ts in rows:
            snapshot_id = SnapshotId(name, identifier)
            if snapshot_id in keep:
                continue
            if ignore_ttl or _expiry(ttl, since=max(created_ts, updated_ts)) <= now_ms:
                expired.append(snapshot_id)
        return sorted(expired)

    def delete(self, conn: sa.Connection, ids: Iterable[SnapshotId]) -> None:
        key = sa.tuple_(self.table.c.name, self.table.c.identifier)
        for part in chunks(sorted(set(ids))):
            conn.execute(sa.delete(self.table).where(key.in_([(i.name, i.identifier) for i in part])))


def _expiry(ttl: str, *, since: int) -> int:
    """When a snapshot last touched at `since` expires; a bare span stored before TTLs were checked
    ('1 week', which reads as a week ago) keeps the length it was meant to have."""
    try:
        moment = expires_ms(ttl, since=since)
    except TimeParseError:
        raise StateError(f"cannot read the snapshot TTL {ttl!r}; expected something like 'in 1 week'") from None
    return since + abs(moment - since)


class _LazyDefinition:
    """Non-data descriptor: decodes a stored snapshot's definition on first access and keeps it."""

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        raw = obj.__dict__.pop("_definition_raw")
        value = json.loads(raw) if isinstance(raw, (str, bytes)) else raw   # a driver may decode JSON itself
        obj.__dict__["definition"] = value   # later reads find it in __dict__, without this descriptor
        return value


_DEFINITION = _LazyDefinition()


class _StoredSnapshot(Snapshot):
    """A Snapshot read from state, its definition decoded when first read; equal to the Snapshot of
    the same fields (row_to_snapshot's), whichever side of `==` it is on."""

    definition = _LazyDefinition()   # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Snapshot):
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name) for f in _FIELDS)

    __hash__ = Snapshot.__hash__


_FIELDS = fields(Snapshot)
_LISTED = ("name", "version", "kind")   # what an environment records of each snapshot (and its identifier)


class _Pending:
    """The listed snapshots of one `SnapshotState.listed` call whose rows are not read yet.

    The first few are read one by one when first used; after that, every one still unread at once
    (whoever reads a field of many of them, an apply say, pays one read, as `get` would).
    """

    ONE_BY_ONE = 16

    def __init__(self, state: SnapshotState) -> None:
        self.state = state
        self.members: list[_ListedSnapshot] = []
        self.reads = 0
        self.lock = threading.Lock()

    def fill(self, snapshot: "_ListedSnapshot") -> None:
        with self.lock:
            if "_pending" not in snapshot.__dict__:
                return   # another thread read it meanwhile
            self.reads += 1
            batch = [snapshot] if self.reads <= self.ONE_BY_ONE else \
                [s for s in self.members if "_pending" in s.__dict__]
            stored = self.state.get(SnapshotId(s.name, s.__dict__["_identifier"]) for s in batch)
            for member in batch:
                row = stored.get(SnapshotId(member.name, member.__dict__["_identifier"]))
                if row is None:
                    raise StateError(f"snapshot {member.name} ({member.__dict__['_identifier']}) is no longer in "
                                     "the state (removed while this plan was computed?); plan again")
                fields_ = {k: v for k, v in row.__dict__.items() if k not in _LISTED}
                member.__dict__.update(fields_)
                del member.__dict__["_pending"]


class _FromRow:
    """Non-data descriptor: a listed snapshot's field, read from its row (with its group's) on first use."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return Snapshot.__dataclass_fields__[self.name].default
        pending = obj.__dict__.get("_pending")
        if pending is not None:
            pending.fill(obj)
        if self.name == "definition" and "definition" not in obj.__dict__:
            return _DEFINITION.__get__(obj, owner)   # the row's definition, still JSON text
        return obj.__dict__[self.name]


class _ListedSnapshot(_StoredSnapshot):
    """A snapshot an environment lists: name, identifier, version and kind known, the rest read from
    its row when first used. Equal to the Snapshot of the same fields, as _StoredSnapshot."""

    fingerprint = _FromRow("fingerprint")   # type: ignore[assignment]
    definition = _FromRow("definition")   # type: ignore[assignment]
    rendered_query = _FromRow("rendered_query")   # type: ignore[assignment]
    change_category = _FromRow("change_category")   # type: ignore[assignment]
    parents = _FromRow("parents")   # type: ignore[assignment]
    forward_only = _FromRow("forward_only")   # type: ignore[assignment]
    physical_schema = _FromRow("physical_schema")   # type: ignore[assignment]
    created_ts = _FromRow("created_ts")   # type: ignore[assignment]
    updated_ts = _FromRow("updated_ts")   # type: ignore[assignment]
    ttl = _FromRow("ttl")   # type: ignore[assignment]
    columns = _FromRow("columns")   # type: ignore[assignment]

    @property
    def identifier(self) -> str:
        known = self.__dict__.get("_identifier")   # absent in a copy (dataclasses.replace)
        return known if known is not None else self.fingerprint.identifier

    @property
    def snapshot_id(self) -> SnapshotId:
        return SnapshotId(self.name, self.identifier)

    @property
    def table_name(self) -> str:
        """From the environment's list, without reading the row (an apply maps every model to its table): the
        list holds the snapshot's table, or its `__dev` table where the environment served a preview."""
        listed = self.__dict__.get("_listed_table")   # absent in a copy (dataclasses.replace)
        if listed is None or self.kind == "EXTERNAL":
            return Snapshot.table_name.fget(self)
        return listed.removesuffix(DEV_TABLE_SUFFIX)

    def __getstate__(self) -> dict[str, Any]:
        """What pickle and copy keep: the whole row, read first (its group cannot travel)."""
        pending = self.__dict__.get("_pending")
        if pending is not None:
            pending.fill(self)
        return dict(self.__dict__)


def _stored_snapshot(row: dict[str, Any]) -> Snapshot:
    """row_to_snapshot of a row whose definition is still JSON text, decoded when first read."""
    plain = row_to_snapshot({**row, "definition": None})
    snapshot = object.__new__(_StoredSnapshot)
    snapshot.__dict__.update(plain.__dict__)
    del snapshot.__dict__["definition"]
    snapshot.__dict__["_definition_raw"] = row["definition"]
    return snapshot
