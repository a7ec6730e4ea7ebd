"""On-disk cache of parsed model files (.meshbot/cache/models.pickle), keyed by file content and settings."""

from __future__ import annotations

import contextlib
import copyreg
import functools
import gc
import hashlib
import io
import os
import pickle
from pathlib import Path
from typing import Any, Iterator

import sqlglot
from sqlglot import exp

import bot
from bot.project.model import Model
from bot.project.sqltext import selects_star, to_sql, written_output_names

CACHE_FORMAT = 3
CACHE_FILE = Path(".meshbot") / "cache" / "models.pickle"


_SLOTS = ("args", "parent", "arg_key", "index", "comments", "_type", "_meta")
# With `sqlglotc` installed, sqlglot's node classes are compiled (mypyc): they have no __slots__ and
# take their state as one dict through __setstate__. The two pickled forms are not interchangeable,
# so the flag is part of every cache key (cache_context).
COMPILED_SQLGLOT = hasattr(exp.Expression, "__mypyc_attrs__")
_AST_FIELDS = ("query", "pre_statements", "post_statements")
_LAZY = "_meshbot_lazy_asts"
_SQL = "_meshbot_ast_sql"   # to_sql of query/pre/post, so storing a snapshot needs no AST
_FACTS = "_meshbot_query_facts"   # (written output names, selects a star), so column checks need no AST


class _LazyAst:
    """Non-data descriptor: unpickles one AST field on first access and stores it on the instance."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return Model.__dataclass_fields__[self.name].default
        blobs = obj.__dict__.get(_LAZY, {})
        value = _loads_ast(blobs[self.name]) if self.name in blobs else \
            Model.__dataclass_fields__[self.name].default
        obj.__dict__[self.name] = value   # later reads find it in __dict__, without this descriptor
        return value


class LazyModel(Model):
    """A Model read from the cache: its ASTs are unpickled when first read, so a plan that only
    compares fingerprints (cached renders) never builds them. Behaves exactly like Model."""

    query = _LazyAst("query")
    pre_statements = _LazyAst("pre_statements")
    post_statements = _LazyAst("post_statements")


def _loads_ast(blob: bytes) -> Any:
    with paused_gc():
        return pickle.loads(blob)


def _lazy_model(state: dict[str, Any], blobs: dict[str, bytes]) -> LazyModel:
    model = object.__new__(LazyModel)
    model.__dict__.update(state)
    model.__dict__[_LAZY] = blobs
    return model


def has_query(model: Model) -> bool:
    """`model.query is not None`, without unpickling a cached model's query."""
    blobs = model.__dict__.get(_LAZY)
    if blobs is not None and "query" not in model.__dict__:
        return "query" in blobs
    return model.query is not None


def cached_sql(model: Model) -> tuple[str | None, list[str], list[str]] | None:
    """(query, pre_statements, post_statements) as to_sql text for a cached model; None otherwise."""
    return model.__dict__.get(_SQL)


def query_facts(model: Model) -> tuple[list[str] | None, bool]:
    """(the outer SELECT's names as written or None, whether some SELECT projects a star) of a model
    with a query; read from the parse cache without unpickling the query when the model came from it."""
    facts = model.__dict__.get(_FACTS)
    if facts is None:
        facts = (written_output_names(model.query), selects_star(model.query))
    return (list(facts[0]) if facts[0] is not None else None), facts[1]


def _model_reduction(model: Model) -> tuple[Any, ...]:
    state = {k: v for k, v in model.__dict__.items() if k != _LAZY}
    if model.query is not None:
        state[_FACTS] = query_facts(model)
    state[_SQL] = (to_sql(model.query, model.dialect) if model.query is not None else None,
                   [to_sql(s, model.dialect) for s in model.pre_statements],
                   [to_sql(s, model.dialect) for s in model.post_statements])
    blobs: dict[str, bytes] = {}
    for name in _AST_FIELDS:
        value = getattr(model, name)
        state.pop(name, None)
        if value is not None and value != ():   # None and () stay eager
            blob = dumps(value)
            if blob is None:
                raise pickle.PicklingError(f"cannot cache the {name} of {model.name}")
            blobs[name] = blob
    return _lazy_model, (state, blobs)


class _Pickler(pickle.Pickler):
    """Pickles sqlglot nodes as plain slot state (rebuilt in C), not through sqlglot's slower serde."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, Model):
            return _model_reduction(obj)
        if isinstance(obj, exp.Expression):
            if COMPILED_SQLGLOT:   # the compiled class's own state dict (built in C), same bytes
                state = obj.__getstate__()
                state["_hash"] = None
                return copyreg.__newobj__, (type(obj),), state
            state = {slot: getattr(obj, slot) for slot in _SLOTS}
            state["_hash"] = None
            return copyreg.__newobj__, (type(obj),), (None, state)
        return NotImplemented


def dumps(value: Any) -> bytes | None:
    """Pickle one cache entry; None when it cannot be cached (e.g. an extremely deep AST)."""
    buffer = io.BytesIO()
    try:
        _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    except (RecursionError, pickle.PicklingError, TypeError, AttributeError):
        return None
    return buffer.getvalue()


def content_key(data: bytes, context: str) -> str:
    """The cache key of a file: sha256 of its bytes plus everything else that shapes the parse."""
    digest = hashlib.sha256(data)
    digest.update(b"\0" + context.encode())
    return digest.hexdigest()


@functools.lru_cache(maxsize=1)
def _code_stamp() -> str:
    """Sizes and mtimes of the modules that parse and render models: editing one invalidates the caches."""
    stats = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in Path(__file__).parent.glob("*.py"))
    return hashlib.sha256(repr(stats).encode()).hexdigest()[:16]


def cache_context(*parts: object) -> str:
    """Versions, code and settings that invalidate every entry when they change."""
    return "|".join(map(str, (CACHE_FORMAT, bot.__version__, sqlglot.__version__,
                              "compiled" if COMPILED_SQLGLOT else "interpreted", _code_stamp(), *parts)))


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Unpickling or parsing many small linked objects is several times faster without GC passes."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextlib.contextmanager
def frozen_gc() -> Iterator[None]:
    """Collections during the block scan only the objects made in it.

    For work that makes much garbage next to a large heap that stays alive (rendering every model
    of a loaded project): each full collection traversed all the loaded ASTs again. Objects frozen
    by someone else before are left frozen.
    """
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


class ModelCache:
    """Loaded once per project load, written once at the end if anything changed.

    Entries not looked up during the load (deleted files) are dropped on save.
    """

    def __init__(self, path: Path, entries: dict[str, tuple[str, Any]]) -> None:
        self.path = path
        self._old = entries
        self._new: dict[str, tuple[str, Any]] = {}
        self._dirty = False

    @classmethod
    def open(cls, root: Path) -> "ModelCache":
        path = root / CACHE_FILE
        try:
            entries = pickle.loads(path.read_bytes())
            if not isinstance(entries, dict):
                entries = {}
        except Exception:   # absent, truncated or from an incompatible version: rebuild
            entries = {}
        return cls(path, entries)

    def get(self, key: str, digest: str) -> Any | None:
        entry = self._old.get(key)
        if entry is None or entry[0] != digest:
            return None
        try:
            value = pickle.loads(entry[1])
        except Exception:
            return None
        self._new[key] = entry
        return value

    def put(self, key: str, digest: str, value: Any, *, pickled: bytes | None = None) -> None:
        """Store `value`; `pickled` is dumps(value) when the caller already has it."""
        data = pickled if pickled is not None else dumps(value)
        if data is not None:
            self._new[key] = (digest, data)
        self._dirty = True

    def save(self) -> None:
        if not self._dirty and self._new.keys() == self._old.keys():
            return
        data = pickle.dumps(self._new, protocol=pickle.HIGHEST_PROTOCOL)
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(data)
            os.replace(tmp, self.path)
        except OSError:   # a read-only checkout still loads, just without a cache
            return
        self._old, self._dirty = dict(self._new), False
