"""Model fingerprints: data and metadata hashes plus a Merkle tree of parents' hashes over the DAG."""

from __future__ import annotations

import functools
import hashlib
import json
import zlib
from pathlib import Path
from typing import Any, Mapping, Sequence

from bot.project.cache import KeyedEntries, cache_context
from bot.project.model import Model
from bot.snapshot import Fingerprint, hash_parts

HASH_CACHE_FILE = Path(".meshbot") / "cache" / "hashes.json"

# How this meshbot computes fingerprints. A release that changes what data_hash, metadata_hash or
# combine compute for the same files bumps it (tests/test_golden_fingerprints.py fails until then):
# `meshbot migrate` then re-keys every stored snapshot to the new fingerprints, keeping its version, its
# table and its intervals (bot.state.rekey), so the upgrade backfills nothing.
FINGERPRINT_SCHEME = 2


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _statements_sql(model: Model) -> list[list[str]]:
    return [[s.sql(dialect="spark", comments=False) for s in model.pre_statements],
            [s.sql(dialect="spark", comments=False) for s in model.post_statements]]


def data_hash(model: Model, rendered_sql: str) -> str:
    """Hash of everything that decides the model's data.

    `rendered_sql` must be the canonical rendered query (no comments, normalized whitespace), so
    comment and whitespace edits leave the hash unchanged.
    """
    parts = {
        "query": rendered_sql,
        "kind": model.kind.data_properties(),
        "partitioned_by": list(model.partitioned_by),
        "columns": [list(c) for c in model.columns],
        "statements": _statements_sql(model),
        "seed": model.seed_content_hash,
        "python": [model.python_source, model.python_entrypoint],
    }
    if model.blueprint_variables:   # absent otherwise, so models without blueprints keep their hashes
        parts["blueprint"] = [list(pair) for pair in model.blueprint_variables]
    return hash_parts(_canonical(parts))


def metadata_hash(model: Model) -> str:
    """Hash of what changes how or when the model runs, or how it is described, not its data."""
    parts = {
        "owner": model.owner,
        "description": model.description,
        "column_descriptions": [list(c) for c in model.column_descriptions],
        "cron": model.cron,
        "start": model.start,
        "end": model.end,
        "tags": list(model.tags),
        "grains": list(model.grains),
        "audits": [[a.name, [list(arg) for arg in a.args], a.blocking] for a in model.audits],
        "kind": model.kind.metadata_properties(),
        "physical_properties": [list(p) for p in model.physical_properties],
        "enabled": model.enabled,
    }
    if model.session_properties:
        parts["session_properties"] = [list(p) for p in model.session_properties]
    if model.jinja_query is not None or model.jinja_macros:
        # As in SQLMesh, an edit of the Jinja text or of a macro it calls is a change even when the
        # rendered query stays the same (a comment): then only a metadata change.
        parts["jinja"] = [model.jinja_query, [list(m) for m in model.jinja_macros]]
    return hash_parts(_canonical(parts))


class HashCache:
    """Each SQL model's data and metadata hashes (.meshbot/cache/hashes.json), keyed by its file's
    content key (`Project.source_digests`: the file and every setting its parse reads), its seed's
    content hash and its rendered query: what the two hashes are computed from. Plain JSON, checked
    for shape when read (see bot.project.cache); written at `save` when an entry changed."""

    def __init__(self, root: Path, sources: Mapping[str, str], *, read: bool = True) -> None:
        """With `read` False the file is not read, only written anew."""
        self.root, self.sources = root, sources
        self._store = KeyedEntries(root, HASH_CACHE_FILE, what="hash cache", header=("stamp", _hash_stamp()),
                                   entry=_entry_fits, read=read)
        self._old: dict[str, list[str]] = self._store.entries
        self._new: dict[str, list[str]] = {}

    def hashes(self, name: str, model: Model, rendered_sql: str) -> tuple[str, str]:
        """(data_hash, metadata_hash) of the model, from the cache when its key matches."""
        source = self.sources.get(name)
        if source is None:
            return data_hash(model, rendered_sql), metadata_hash(model)
        key = hashlib.sha256(f"{source}\0{model.seed_content_hash}\0{rendered_sql}".encode()).hexdigest()
        entry = self._old.get(name)
        if entry is None or entry[0] != key:
            entry = [key, data_hash(model, rendered_sql), metadata_hash(model)]
        self._new[name] = entry
        return entry[1], entry[2]

    def save(self) -> None:
        self._store.save(self._new)
        self._old = self._new


def _entry_fits(entry: Any) -> bool:
    """[key, data hash, metadata hash]"""
    return type(entry) is list and len(entry) == 3 and all(type(part) is str for part in entry)


@functools.lru_cache(maxsize=1)
def _hash_stamp() -> str:
    """The parse code's stamp and versions (cache_context) and this module's and bot.snapshot's
    sizes and mtimes: a change to how hashes are computed invalidates every entry."""
    modules = [Path(__file__), Path(__file__).with_name("snapshot.py")]
    stats = [(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in modules]
    return hashlib.sha256(repr((cache_context("hashes"), stats, FINGERPRINT_SCHEME)).encode()).hexdigest()


def fingerprint_models(
    models: Mapping[str, Model],
    dag_order: Sequence[str],
    rendered: Mapping[str, str],
    *,
    cache: HashCache | None = None,
    parents: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Fingerprint]:
    """Fingerprints of every model in `dag_order` (parents first), in one linear pass.

    Parents outside `models` (plain source tables) do not enter the hashes. A parent's
    contribution is its own hash and its parent hash, so any ancestor change reaches the
    descendants (Merkle tree). With a `cache`, a model's own hashes come from it when its key
    matches (the caller saves it). `parents` may give each model's parents among `models`, sorted
    (`DAG.parents` of these models), so they are not computed again.
    """
    result: dict[str, Fingerprint] = {}
    for name in dag_order:
        model = models[name]
        ups = parents[name] if parents is not None else sorted(p for p in model.depends_on if p in models)
        try:
            parent_fps = [result[p] for p in ups]
        except KeyError:
            unordered = [p for p in ups if p not in result]
            raise ValueError(f"dag_order lists {name} before its parents {', '.join(unordered)}") from None
        sql = rendered.get(name, "")
        own_data, own_metadata = cache.hashes(name, model, sql) if cache is not None else \
            (data_hash(model, sql), metadata_hash(model))
        result[name] = combine(own_data, own_metadata, parent_fps)
    missing = set(models) - set(result)
    if missing:
        raise ValueError(f"dag_order misses models: {', '.join(sorted(missing))}")
    return result


def combine(own_data: str, own_metadata: str, parents: Sequence[Fingerprint]) -> Fingerprint:
    """A model's fingerprint from its own two hashes and its parents' fingerprints, sorted by name."""
    if not parents:
        return Fingerprint(data_hash=own_data, metadata_hash=own_metadata)
    parent_data = _crc(";".join([h for fp in parents for h in (fp.data_hash, fp.parent_data_hash)]))
    parent_metadata = _crc(";".join([h for fp in parents for h in (fp.metadata_hash, fp.parent_metadata_hash)]))
    return Fingerprint(data_hash=own_data, metadata_hash=own_metadata,
                       parent_data_hash=parent_data, parent_metadata_hash=parent_metadata)


def _crc(text: str) -> str:
    """hash_parts of the parts `text` joins with ';' (the parent hashes)."""
    return str(zlib.crc32(text.encode("utf-8")))
