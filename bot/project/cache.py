"""On-disk cache of parsed model files (.meshbot/cache/models.json), keyed by file content and settings.

The cache is data, never code: JSON read by the plain parser and checked field by field, because
`.meshbot/` may be restored from a CI cache that another job saved. A file or entry of the wrong
shape is a miss. ASTs are kept as their SQL text and parsed again when first read.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import sqlglot
from sqlglot import exp

import bot
from bot.errors import ConfigError
from bot.project.audit_parser import AuditDefinition
from bot.project.meshbot_dir import checked
from bot.project.model import AuditRef, Kind, Model
from bot.project.model_parser import MacroRef, ParsedModel
from bot.project.printed_sql import SQL_ATTRIBUTE
from bot.project.serialize import _kind_from_dict, model_to_dict
from bot.project.sqltext import parse_sql, selects_star, strip_comments, to_sql, written_output_names

CACHE_FORMAT = 5
CACHE_FILE = Path(".meshbot") / "cache" / "models.json"
CHANGES_FILE = CACHE_FILE.with_name("models.changes.json")   # entries that differ from CACHE_FILE's (ModelCache)

# With `sqlglotc` installed, sqlglot's node classes are compiled (mypyc). Parses are the same, but the
# build stays part of every cache key (cache_context) so that a cache never mixes the two.
COMPILED_SQLGLOT = hasattr(exp.Expression, "__mypyc_attrs__")
_AST_FIELDS = ("query", "pre_statements", "post_statements")
_SQL = SQL_ATTRIBUTE   # to_sql of query/pre/post (bot.project.printed_sql)
_FACTS = "_meshbot_query_facts"   # (written output names, selects a star), so column checks need no AST


# Shapes of the JSON read back, as predicates. JSON gives exactly str, int, float, bool, None, list
# and dict, so an exact type test also keeps `true` out of an int field.
Shape = Callable[[Any], bool]


class _Types:
    """The shape `a value of exactly one of these types`; records and lists test it inline, without a call."""

    __slots__ = ("allowed",)

    def __init__(self, allowed: frozenset[type]) -> None:
        self.allowed = allowed

    def __call__(self, value: Any) -> bool:
        return type(value) in self.allowed


def _is(*types: type | None) -> _Types:
    return _Types(frozenset(type(None) if t is None else t for t in types))


def _list_of(item: Shape) -> Shape:
    if isinstance(item, _Types):   # all in C: no call per item
        contains = item.allowed.__contains__
        return lambda value: type(value) is list and all(map(contains, map(type, value)))
    return lambda value: type(value) is list and all(map(item, value))


def _either(*shapes: Shape) -> Shape:
    return lambda value: any(shape(value) for shape in shapes)


def _row(*items: Shape | type) -> Shape:
    """A list of exactly these shapes (or exact types), in order."""
    if all(isinstance(item, type) for item in items):
        types = tuple(items)
        return lambda value: type(value) is list and tuple(map(type, value)) == types
    shapes = tuple(_is(item) if isinstance(item, type) else item for item in items)
    return lambda value: type(value) is list and len(value) == len(shapes) and \
        all(shape(v) for shape, v in zip(shapes, value))


def _record(required: dict[str, Shape], optional: dict[str, Shape] | None = None) -> Shape:
    """A dict with every `required` key, and no key that is neither required nor `optional`.

    The keys and the exact types of the values decide every leaf field (`_is`): a signature seen
    before needs only its other fields checked (10,000 cached models share a few signatures).
    """
    every = {**required, **(optional or {})}
    needed = required.keys()
    leaves = {key: shape.allowed for key, shape in every.items() if isinstance(shape, _Types)}
    others = {key: shape for key, shape in every.items() if not isinstance(shape, _Types)}
    known: dict[tuple[tuple[Any, ...], tuple[type, ...]], tuple[str, ...]] = {}   # signature -> its other keys

    def rest_of(keys: tuple[Any, ...], types: tuple[type, ...]) -> tuple[str, ...] | None:
        if not needed <= set(keys):
            return None
        for key, kind in zip(keys, types):
            allowed = leaves.get(key)
            if allowed is None and key not in others or allowed is not None and kind not in allowed:
                return None
        rest = tuple(key for key in keys if key in others)
        if len(known) < 256:   # bounded: a crafted file cannot grow it without end
            known[keys, types] = rest
        return rest

    def fits(value: Any) -> bool:
        if type(value) is not dict:
            return False
        keys, types = tuple(value), tuple(map(type, value.values()))
        rest = known.get((keys, types))
        if rest is None:
            rest = rest_of(keys, types)
            if rest is None:
                return False
        for key in rest:
            if not others[key](value[key]):
                return False
        return True
    return fits


_STR, _INT, _BOOL, _OPT_STR = _is(str), _is(int), _is(bool), _is(str, None)
_STRS = _list_of(_STR)
_PAIRS = _list_of(_row(str, str))
# An entry leaves out every value equal to the default its reader fills in (`_sparse`): a warm load
# of 10,000 models decodes, checks and builds only the values a model sets.
_KIND = _record({"name": _STR}, {
    "time_column": _OPT_STR, "time_column_format": _STR, "batch_size": _is(int, None),
    "lookback": _INT, "forward_only": _BOOL, "disable_restatement": _BOOL, "on_destructive_change": _STR,
    "unique_key": _STRS, "valid_from_name": _STR, "valid_to_name": _STR, "updated_at_name": _STR,
    "scd_columns": _STRS, "invalidate_hard_deletes": _BOOL, "materialized": _BOOL, "seed_path": _OPT_STR,
    "csv_settings": _list_of(_row(str, _is(str, int, float, bool))),
    "insert_overwrite": _BOOL, "materialization": _STR, "materialization_properties": _STR})
_MODEL = _record({"name": _STR, "kind": _KIND, "dialect": _STR, "path": _STR}, {   # serialize.model_to_dict's
    "format": _INT, "query": _OPT_STR,
    "query_text": _STR, "pre_statements": _STRS, "post_statements": _STRS, "cron": _STR,
    "start": _OPT_STR, "end": _OPT_STR, "grains": _STRS,
    "audits": _list_of(_record({"name": _STR, "args": _PAIRS, "blocking": _BOOL})),
    "owner": _OPT_STR, "tags": _STRS, "description": _OPT_STR, "column_descriptions": _PAIRS,
    "columns": _PAIRS, "partitioned_by": _STRS, "physical_properties": _PAIRS, "depends_on_explicit": _STRS,
    "depends_on": _STRS, "enabled": _BOOL, "python_source": _OPT_STR, "python_entrypoint": _OPT_STR,
    "seed_content_hash": _OPT_STR, "seed_abs_path": _OPT_STR, "line": _INT,
    "session_properties": _PAIRS, "jinja_query": _STR, "jinja_line": _INT, "jinja_macros": _PAIRS,
    "blueprint_variables": _PAIRS})
_AUDIT = _record({"name": _STR, "query": _STR, "query_text": _STR, "path": _STR, "dialect": _STR,
                  "blocking": _BOOL, "defaults": _PAIRS, "line": _INT, "standalone": _BOOL})


def _facts(value: Any) -> bool:
    """None, or [the outer SELECT's names (a list of str, or None), whether it selects a star]."""
    return value is None or type(value) is list and len(value) == 2 and type(value[1]) is bool and \
        (value[0] is None or _STRS(value[0]))


_ENTRY = _record({"model": _MODEL}, {"facts": _facts,
                                     "macro_refs": _list_of(_row(str, str, int)), "audits": _list_of(_AUDIT),
                                     "warnings": _list_of(_row(str, int)), "cacheable": _BOOL})
_ENTRIES = _list_of(_ENTRY)
_CACHE = _record({"format": _INT,   # entries: file key -> [content digest, data], checked on a hit
                  "entries": lambda value: type(value) is dict and all(map(_row(str, list), value.values()))})


class _LazyAst:
    """Non-data descriptor: parses one AST field from the cached SQL text on first access and stores it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return Model.__dataclass_fields__[self.name].default
        query, pre, post = obj.__dict__[_SQL]
        if self.name == "query":
            value = _loads_ast(query, obj) if query is not None else None
        else:
            value = tuple(_loads_ast(sql, obj) for sql in (pre if self.name == "pre_statements" else post))
        obj.__dict__[self.name] = value   # later reads find it in __dict__, without this descriptor
        return value


class _LazyPath:
    """Non-data descriptor: a path field kept as its cached text until first read (most are never read)."""

    def __init__(self, name: str) -> None:
        self.name, self.text = name, f"_meshbot_{name}_text"

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return Model.__dataclass_fields__[self.name].default
        text = obj.__dict__.get(self.text)
        value = obj.__dict__[self.name] = Path(text) if text is not None else None
        return value


class LazyModel(Model):
    """A Model read from the cache: its ASTs are parsed from their SQL text when first read, so a plan
    that only compares fingerprints (cached renders) never builds them. Behaves exactly like Model.

    Only the fields an entry sets are in the instance: the others are the class defaults below."""

    query = _LazyAst("query")
    pre_statements = _LazyAst("pre_statements")
    post_statements = _LazyAst("post_statements")
    path = _LazyPath("path")
    seed_abs_path = _LazyPath("seed_abs_path")
    depends_on = frozenset()   # type: ignore[assignment]  # Model's default_factory leaves no class attribute


def _loads_ast(sql: str, model: Model) -> exp.Expression:
    with paused_gc():
        parsed = parse_sql(sql, model.dialect)
    if len(parsed) != 1:   # only an edited cache file gets here: its shape was right, its SQL is not
        raise ConfigError(f"the parse cache {CACHE_FILE} holds SQL of model {model.name} that does not parse"
                          " again; delete .meshbot/cache", path=model.path)
    strip_comments(parsed)   # as the loader does: no comments, no token positions
    return parsed[0]


def with_fields(model: Model, **fields: Any) -> Model:
    """`model` with `fields` set (ones no AST or text depends on, such as `project`), as dataclasses.replace
    gives it but without building a cached model's ASTs, and keeping its printed SQL and query facts."""
    copy = object.__new__(type(model))
    copy.__dict__.update(model.__dict__)
    copy.__dict__.update(fields)
    return copy


def has_query(model: Model) -> bool:
    """`model.query is not None`, without parsing a cached model's query."""
    sql = model.__dict__.get(_SQL)
    if sql is not None and "query" not in model.__dict__:
        return sql[0] is not None
    return model.query is not None


def query_facts(model: Model) -> tuple[list[str] | None, bool]:
    """(the outer SELECT's names as written or None, whether some SELECT projects a star) of a model
    with a query; read from the parse cache without parsing the query when the model came from it."""
    facts = model.__dict__.get(_FACTS)
    if facts is None:
        facts = (written_output_names(model.query), selects_star(model.query))
    return (list(facts[0]) if facts[0] is not None else None), facts[1]


def entries_to_data(entries: tuple[ParsedModel, ...]) -> list[dict[str, Any]] | None:
    """A file's parsed entries as JSON-safe data; None when they cannot be cached (e.g. an extremely deep AST).

    Values equal to the default their reader fills in are left out (`_sparse`)."""
    try:
        data = []
        for entry in entries:
            item: dict[str, Any] = {"model": _sparse(model_to_dict(entry.model))}
            if has_query(entry.model):
                item["facts"] = list(query_facts(entry.model))
            if entry.macro_refs:
                item["macro_refs"] = [[ref.name, ref.kind, ref.line] for ref in entry.macro_refs]
            if entry.audits:
                item["audits"] = [_audit_to_dict(audit) for audit in entry.audits]
            if entry.warnings:
                item["warnings"] = [[message, line] for message, line in entry.warnings]
            if not entry.cacheable:
                item["cacheable"] = False
            data.append(item)
        return data
    except (RecursionError, AttributeError, TypeError, ValueError):
        return None


def _sparse(model: dict[str, Any]) -> dict[str, Any]:
    """model_to_dict's dict without the values _lazy_model leaves to the class defaults."""
    defaults, kind_defaults = _defaults()
    model = {key: value for key, value in model.items()
             if key not in defaults or not _same(value, defaults[key])}
    model["kind"] = {key: value for key, value in model["kind"].items()
                     if key not in kind_defaults or not _same(value, kind_defaults[key])}
    return model


def _same(value: Any, default: Any) -> bool:
    return type(value) is type(default) and value == default   # exact: `True` is not the default `1`


@functools.lru_cache(maxsize=1)
def _defaults() -> tuple[dict[str, Any], dict[str, Any]]:
    """(the model fields, the kind fields) a cache entry may leave out, with the values they then take:
    model_to_dict of a Model (Kind) of default values, without the fields a model always sets."""
    model = model_to_dict(Model(name="", kind=Kind(), dialect="", path=Path("")))
    kind = model.pop("kind")
    for key in ("name", "dialect", "path"):
        del model[key]
    del kind["name"]
    return model, kind


def dumps(entries: tuple[ParsedModel, ...]) -> str | None:
    """entries_to_data as JSON text (what a parse worker sends back); None when they cannot be cached."""
    data = entries_to_data(entries)
    try:
        return to_json(data) if data is not None else None
    except (RecursionError, TypeError, ValueError):
        return None


def entries_from_data(data: Any) -> tuple[ParsedModel, ...] | None:
    """The entries entries_to_data wrote, with lazy models; None when `data` does not have that shape."""
    if not _ENTRIES(data):
        return None
    try:
        return tuple(map(_parsed_model, data))
    except Exception:   # right shape, wrong values (an unknown kind, SQL that does not parse): a miss
        return None


def _parsed_model(item: dict[str, Any]) -> ParsedModel:
    model = _lazy_model(item["model"], item.get("facts"))
    if len(item) == 1 + ("facts" in item):   # nothing else (most models)
        return ParsedModel(model)
    return ParsedModel(model=model, macro_refs=tuple(MacroRef(*ref) for ref in item.get("macro_refs", ())),
                       audits=tuple(_audit_from_dict(audit) for audit in item.get("audits", ())),
                       warnings=tuple((message, line) for message, line in item.get("warnings", ())),
                       cacheable=item.get("cacheable", True))


def _pairs(items: list[list[str]]) -> tuple[tuple[str, str], ...]:
    return tuple((key, value) for key, value in items)


# How _lazy_model builds each field an entry sets, as serialize.model_fields does (values of the shape
# _MODEL checked); fields not listed are kept as read, query and statements go to _SQL.
def _kind(data: dict[str, Any]) -> Kind:
    """_kind_from_dict of a kind dict _KIND checked (each key's values of one type, or None): equal
    items share one Kind, found by the items alone."""
    try:
        items = tuple(data.items())
        kind = _CACHED_KINDS.get(items)
    except TypeError:   # a list value (unique_key, ...)
        return _kind_from_dict(data)
    if kind is None:
        kind = _kind_from_dict(data)
        if len(_CACHED_KINDS) < 256:
            _CACHED_KINDS[items] = kind
    return kind


_FIELD_BUILDERS: dict[str, Callable[[Any], Any]] = {
    "kind": _kind, "grains": tuple, "tags": tuple, "partitioned_by": tuple,
    "depends_on_explicit": tuple, "depends_on": frozenset,
    "audits": lambda audits: tuple(AuditRef(name=a["name"], args=tuple(tuple(p) for p in a.get("args", ())),
                                            blocking=a.get("blocking", True)) for a in audits),
    **dict.fromkeys(("column_descriptions", "columns", "physical_properties", "session_properties",
                     "jinja_macros", "blueprint_variables"), _pairs),
}
_NOT_FIELDS = frozenset({"format", "query", "pre_statements", "post_statements", "path", "seed_abs_path"})


_BUILDS: dict[tuple[str, ...], tuple[tuple[str, Callable[[Any], Any] | None], ...]] = {}   # keys -> their builders
_CACHED_KINDS: dict[tuple[tuple[str, Any], ...], Kind] = {}   # a checked kind dict's items -> its Kind


def _lazy_model(data: dict[str, Any], facts: list[Any] | None) -> LazyModel:
    lazy = object.__new__(LazyModel)
    fields = lazy.__dict__
    keys = tuple(data)
    builds = _BUILDS.get(keys)
    if builds is None:
        builds = tuple((key, _FIELD_BUILDERS.get(key)) for key in keys if key not in _NOT_FIELDS)
        if len(_BUILDS) < 256:   # bounded: a crafted file cannot grow it without end
            _BUILDS[keys] = builds
    for key, build in builds:
        value = data[key]
        fields[key] = build(value) if build is not None else value
    fields["_meshbot_path_text"] = data["path"]
    fields["_meshbot_seed_abs_path_text"] = data.get("seed_abs_path") or None
    fields[_SQL] = (data.get("query") or None, data.get("pre_statements", ()), data.get("post_statements", ()))
    if facts is not None:
        fields[_FACTS] = (facts[0], facts[1])
    return lazy


def _audit_to_dict(audit: AuditDefinition) -> dict[str, Any]:
    return {"name": audit.name, "query": to_sql(audit.query, audit.dialect), "query_text": audit.query_text,
            "path": str(audit.path), "dialect": audit.dialect, "blocking": audit.blocking,
            "defaults": [list(pair) for pair in audit.defaults], "line": audit.line, "standalone": audit.standalone}


def _audit_from_dict(data: dict[str, Any]) -> AuditDefinition:
    (query,) = parse_sql(data["query"], data["dialect"])
    strip_comments([query])
    return AuditDefinition(name=data["name"], query=query, query_text=data["query_text"], path=Path(data["path"]),
                           dialect=data["dialect"], blocking=data["blocking"],
                           defaults=tuple((k, v) for k, v in data["defaults"]), line=data["line"],
                           standalone=data["standalone"])


def read_json(root: Path, relative: Path, *, what: str, shape: Shape) -> Any | None:
    """The JSON document at root/relative if it has `shape`. None when it is absent; when it is not
    valid JSON or of another shape, None after one line on stderr: it is rebuilt, never trusted."""
    path = root / relative
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError:
        reason = "unreadable"
    else:
        try:
            with paused_gc():   # decoding makes many containers and no garbage
                data = json.loads(text)
        except Exception:   # ValueError, or RecursionError for absurd nesting
            reason = "not valid JSON"
        else:
            with paused_gc():
                fits = shape(data)
            if fits:
                return data
            reason = "not in the shape meshbot writes"
    print(f"meshbot: ignoring the {what} {relative} ({reason}); rebuilding it", file=sys.stderr)
    return None


def to_json(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"))


def write_atomically(path: Path, text: str) -> None:
    """Replace `path` with `text`; a read-only checkout is left without a cache (still correct).

    The temporary file gets a fresh random name (O_EXCL): a name known in advance could be a planted
    symlink, and writing through it would overwrite whatever it points to.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, tmp = tempfile.mkstemp(prefix=f"{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError:
        return
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


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
    """Parsing or decoding many small linked objects is several times faster without GC passes."""
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

    Two JSON files of the same shape: `models.json`, every entry, and `models.changes.json`, the
    entries that differ from it. A load that parses a few files (a pull request's sync) writes only
    the small second file; once the differences reach a sixteenth of the project (or files were
    deleted, their entries dropped), `models.json` is written whole and the changes file removed.
    A key's entry in the changes file is tried first, then the one in models.json: each is used only
    when its digest matches the file as it is now.
    """

    def __init__(self, path: Path, entries: dict[str, list[Any]],
                 changes: dict[str, list[Any]] | None = None) -> None:
        self.path = path
        self.changes_path = path.with_name(CHANGES_FILE.name)
        self._old = entries
        self._changes = changes or {}
        self._new: dict[str, list[Any]] = {}

    @classmethod
    def empty(cls, root: Path) -> "ModelCache":
        """A cache that reads nothing from disk and writes what this load parses."""
        checked(root)
        return cls(root / CACHE_FILE, {})

    @classmethod
    def open(cls, root: Path) -> "ModelCache":
        checked(root)
        entries = _read_entries(root, CACHE_FILE)
        return cls(root / CACHE_FILE, entries, _read_entries(root, CHANGES_FILE) if entries else {})

    def get(self, key: str, digest: str) -> tuple[ParsedModel, ...] | None:
        """The file's cached entries if a digest still matches and they read back whole; else None."""
        for entry in (self._changes.get(key), self._old.get(key)):
            if entry is not None and entry[0] == digest:
                entries = entries_from_data(entry[1])
                if entries is not None:
                    self._new[key] = entry
                    return entries
        return None

    def put(self, key: str, digest: str, data: list[dict[str, Any]] | None) -> None:
        """Store a file's entries_to_data (None: not cacheable, the file is parsed again next time)."""
        if data is not None:
            self._new[key] = [digest, data]
        else:
            self._new.pop(key, None)

    def save(self) -> None:
        old = self._old
        changed = {key: entry for key, entry in self._new.items() if old.get(key) is not entry}
        if old.keys() <= self._new.keys() and len(changed) <= len(self._new) // 16:
            self._save_changes(changed)   # no file deleted or uncacheable: models.json stays as it is
            return
        entries = self._new
        try:
            text = to_json({"format": CACHE_FORMAT, "entries": entries})
        except (TypeError, ValueError):   # a value JSON cannot hold: that file is parsed again next time
            entries = {key: entry for key, entry in entries.items() if _encodes(entry)}
            text = to_json({"format": CACHE_FORMAT, "entries": entries})
        write_atomically(self.path, text)
        with contextlib.suppress(OSError):   # even one this load did not read: models.json is the whole truth
            self.changes_path.unlink()
        self._old, self._new, self._changes = dict(entries), entries, {}

    def _save_changes(self, changed: dict[str, list[Any]]) -> None:
        if changed.keys() == self._changes.keys() and all(changed[key] is self._changes[key] for key in changed):
            return   # the same as on disk (nothing parsed, or only what the changes file holds)
        if not changed:
            with contextlib.suppress(OSError):
                self.changes_path.unlink()
        else:
            changed = {key: entry for key, entry in changed.items() if _encodes(entry)}
            write_atomically(self.changes_path, to_json({"format": CACHE_FORMAT, "entries": changed}))
        self._changes = changed


def _read_entries(root: Path, relative: Path) -> dict[str, list[Any]]:
    data = read_json(root, relative, what="parse cache", shape=_CACHE)
    current = data is not None and data["format"] == CACHE_FORMAT   # another format: an older meshbot's
    return data["entries"] if current else {}


def _encodes(data: Any) -> bool:
    try:
        to_json(data)
    except (TypeError, ValueError):
        return False
    return True


class KeyedEntries:
    """A cache file of `{header: value, "entries": {name: [key, ...]}}` whose entries are used only when
    their key matches (rendered.json, hashes.json), and next to it `NAME.changes.json`, the entries
    that differ from it: a plan that changes a few of 10,000 entries writes only those (as ModelCache).

    Entries are read from both (the changes file's first); one file of another header or shape is
    ignored (named on stderr once, see read_json). `save` writes the changes file while it holds up to
    a sixteenth of the entries and none was dropped; otherwise the whole file, removing the changes.
    """

    def __init__(self, root: Path, relative: Path, *, what: str, header: tuple[str, Any],
                 entry: Shape, read: bool = True) -> None:
        checked(root)
        self.path, self.header = root / relative, header
        self.changes_path = self.path.with_name(self.path.stem + ".changes.json")
        name, value = header

        def shape(data: Any) -> bool:
            if type(data) is not dict or data.keys() != {name, "entries"} or type(data[name]) is not type(value):
                return False
            entries = data["entries"]
            return type(entries) is dict and all(map(entry, entries.values()))

        def entries_of(relative: Path) -> dict[str, list[Any]]:
            data = read_json(root, relative, what=what, shape=shape)
            return data["entries"] if data is not None and data[name] == value else {}

        self._whole = entries_of(relative) if read else {}
        self._changes = entries_of(self.changes_path.relative_to(root)) if self._whole else {}
        self.entries: dict[str, list[Any]] = {**self._whole, **self._changes}   # what was read

    def save(self, entries: dict[str, list[Any]]) -> None:
        """Keep `entries` (every entry: one missing is dropped) on disk, writing as little as needed."""
        whole = self._whole
        changed = {name: entry for name, entry in entries.items() if whole.get(name) != entry}
        if whole and whole.keys() <= entries.keys() and len(changed) <= len(entries) // 16:
            if changed != self._changes:
                if changed:
                    write_atomically(self.changes_path, to_json({self.header[0]: self.header[1], "entries": changed}))
                else:
                    with contextlib.suppress(OSError):
                        self.changes_path.unlink()
                self._changes = changed
        elif entries != whole or self._changes:
            write_atomically(self.path, to_json({self.header[0]: self.header[1], "entries": entries}))
            with contextlib.suppress(OSError):
                self.changes_path.unlink()
            self._whole, self._changes = dict(entries), {}
        self.entries = dict(entries)
