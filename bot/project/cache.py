"""On-disk cache of parsed model files (.meshbot/cache/models.pickle), keyed by file content and settings."""

from __future__ import annotations

import gc
import hashlib
import io
import os
import pickle
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot import exp

import bot

CACHE_FORMAT = 1
CACHE_FILE = Path(".meshbot") / "cache" / "models.pickle"


def _rebuild(cls: type, args: dict[str, Any], comments: list[str] | None,
             meta: dict[str, Any] | None) -> exp.Expression:
    """Recreate a sqlglot node without re-running __init__ (several times faster than sqlglot's serde)."""
    node = cls.__new__(cls)
    node.args, node.parent, node.arg_key, node.index = args, None, None, None
    node.comments, node._type, node._meta, node._hash = comments, None, meta, None
    for key, value in args.items():
        if type(value) is list:
            for index, item in enumerate(value):
                if isinstance(item, exp.Expression):
                    item.parent, item.arg_key, item.index = node, key, index
        elif isinstance(value, exp.Expression):
            value.parent, value.arg_key = node, key
    return node


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, exp.Expression):
            return _rebuild, (type(obj), obj.args, obj.comments, obj._meta)
        return NotImplemented


def content_key(data: bytes, context: str) -> str:
    """The cache key of a file: sha256 of its bytes plus everything else that shapes the parse."""
    digest = hashlib.sha256(data)
    digest.update(b"\0" + context.encode())
    return digest.hexdigest()


def cache_context(*parts: object) -> str:
    """Versions and settings that invalidate every entry when they change."""
    return "|".join(map(str, (CACHE_FORMAT, bot.__version__, sqlglot.__version__, *parts)))


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
            with path.open("rb") as handle:
                data = handle.read()
            gc_was_enabled = gc.isenabled()
            gc.disable()   # unpickling many small objects is ~4x faster without cyclic GC passes
            try:
                entries = pickle.loads(data)
            finally:
                if gc_was_enabled:
                    gc.enable()
            if not isinstance(entries, dict):
                entries = {}
        except Exception:   # absent, truncated or from an incompatible version: rebuild
            entries = {}
        return cls(path, entries)

    def get(self, key: str, digest: str) -> Any | None:
        entry = self._old.get(key)
        if entry is None or entry[0] != digest:
            return None
        self._new[key] = entry
        return entry[1]

    def put(self, key: str, digest: str, value: Any) -> None:
        self._new[key] = (digest, value)
        self._dirty = True

    def save(self) -> None:
        if not self._dirty and self._new.keys() == self._old.keys():
            return
        buffer = io.BytesIO()
        _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(self._new)
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(buffer.getvalue())
            os.replace(tmp, self.path)
        except OSError:   # a read-only checkout still loads, just without a cache
            return
        self._old, self._dirty = dict(self._new), False
