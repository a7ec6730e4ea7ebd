"""Reference-rendered queries of every SQL model, cached on disk as plain JSON (.meshbot/cache/rendered.json).

A model's reference render depends on its file, the project's variables, gateway and user macros,
and on what rendering reads from its parents: their kind and declared columns (@STAR, EMBEDDED
detection) and, for EMBEDDED parents, their own render. The cache key covers exactly that, so a
no-change plan renders nothing and a change re-renders only the changed models (and the children
of changed EMBEDDED models).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from bot.project.cache import KeyedEntries, cache_context, frozen_gc, has_query, paused_gc
from bot.project.limits import read_bounded
from bot.project.model import KindName, Model
from bot.project.parallel import fork_map, worker_count

RENDER_CACHE_FILE = Path(".meshbot") / "cache" / "rendered.json"
RENDER_FORMAT = 1


def _entry_fits(entry: Any) -> bool:
    """[render key, SQL]"""
    return type(entry) is list and len(entry) == 2 and type(entry[0]) is str and type(entry[1]) is str


def _digest(*parts: object) -> str:
    return hashlib.sha256("\0".join(map(str, parts)).encode()).hexdigest()


def _macro_digest(macro_files: tuple[Path, ...]) -> str:
    digest = hashlib.sha256()
    for path in macro_files:
        digest.update(str(path).encode() + b"\0")
        try:
            digest.update(read_bounded(path))
        except OSError:
            digest.update(b"<unreadable>")
    return digest.hexdigest()


class _Keys:
    """Render keys per model, memoized (EMBEDDED parents chain their keys)."""

    def __init__(self, models: Mapping[str, Model], sources: Mapping[str, str], base: str) -> None:
        self.models, self.sources, self.base = models, sources, base
        self._memo: dict[str, str | None] = {}
        self._tokens: dict[str, str] = {}   # parent -> its token, when not EMBEDDED (shared by its children)

    def key(self, name: str, stack: tuple[str, ...] = ()) -> str | None:
        """None when the model's render cannot be keyed (no source digest, or an EMBEDDED cycle)."""
        if name in self._memo:
            return self._memo[name]
        source = self.sources.get(name)
        if source is None or name in stack:
            return None
        parts: list[object] = [self.base, name, source]
        for parent in sorted(self.models[name].depends_on):
            token = self._parent_token(parent, (*stack, name))
            if token is None:
                self._memo[name] = None
                return None
            parts += [parent, token]
        self._memo[name] = result = _digest(*parts)
        return result

    def _parent_token(self, parent: str, stack: tuple[str, ...]) -> str | None:
        token = self._tokens.get(parent)
        if token is not None:
            return token
        model = self.models.get(parent)
        if model is None:
            return "-"
        if model.kind.name is KindName.EMBEDDED:
            return self.key(parent, stack)
        # as text, not digested: the key digests it (no NUL in it, so the key's parts stay apart)
        token = self._tokens[parent] = f"{model.kind.name.value}:{model.columns!r}"
        return token


@dataclass(frozen=True, slots=True)
class EarlyRender:
    """A model's reference render done before the rest of the project was loaded (render_early)."""

    sql: str
    tables: tuple[str, ...]    # table keys the render checked for EMBEDDED models (found none)
    columns: tuple[str, ...]   # names whose declared columns it asked for (got none)
    source: str = ""           # the content key of the file it was parsed from (Project.source_digests)

    def holds(self, models: Mapping[str, Model], source: str | None) -> bool:
        """Whether the render with the whole project is this one: the model is the one rendered (its
        file's `source` key), none of the tables it looked up is an EMBEDDED model, and none of the
        names whose columns it asked for is a model."""
        if source != self.source:   # e.g. a disabled model of the same name, or a Python model instead
            return False
        for key in self.tables:
            model = models.get(key)
            if model is not None and model.kind.name is KindName.EMBEDDED:
                return False
        return not any(key in models for key in self.columns)


@dataclass(frozen=True)
class EarlyRenders:
    """Renders a cold load's parse workers did right after parsing, with the settings they used."""

    gateway: str
    variables: Mapping[str, Any]
    by_model: Mapping[str, EarlyRender]

    def rendered_with(self, gateway: str, variables: Mapping[str, Any]) -> bool:
        """By value and type, as the render cache's key tells settings apart (3 is not 3.0)."""
        return gateway == self.gateway and _settings(variables) == _settings(self.variables)


def _settings(variables: Mapping[str, Any]) -> list[tuple[str, str]]:
    return sorted((str(key), repr(value)) for key, value in variables.items())


class _Lookups(Mapping[str, Model]):
    """The project's models as an early render sees them: none, each lookup recorded.

    Rendering reads other models only by looking names up (EMBEDDED parents to inline, declared
    columns for @STAR); what it looked up tells afterwards whether the project changes the result.
    """

    def __init__(self) -> None:
        self.tables: dict[str, None] = {}
        self.columns: dict[str, None] = {}

    def __contains__(self, key: object) -> bool:
        self.tables[str(key)] = None
        return False

    def get(self, key: str, default: Any = None) -> Any:
        self.columns[key] = None
        return default

    def __getitem__(self, key: str) -> Model:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __bool__(self) -> bool:   # rendering looks tables up only when there are models to find
        return True


def render_early(model: Model, *, variables: Mapping[str, Any], gateway: str) -> EarlyRender | None:
    """The model's reference render without the rest of the project (a parse worker has the file's
    AST at hand: no second parse later); None when it has no query or the render fails (the full
    render then raises the error in its place)."""
    from bot.project.render import normalized_query_sql

    if model.query is None:
        return None
    lookups = _Lookups()
    try:
        sql = normalized_query_sql(model, variables=variables, models=lookups, gateway=gateway)
    except Exception:
        return None
    return EarlyRender(sql, tuple(lookups.tables), tuple(lookups.columns))


def reference_queries(*, root: Path, models: Mapping[str, Model], sources: Mapping[str, str],
                      variables: Mapping[str, Any], gateway: str, macro_files: tuple[Path, ...] = (),
                      use_cache: bool = True, read_cache: bool = True,
                      early: EarlyRenders | None = None, held: Mapping[str, str] | None = None) -> dict[str, str]:
    """normalized_query_sql of every model with a query, from the cache where its key still matches.

    With `read_cache` False nothing is read from the cache file; it is written anew.

    `sources` maps model names to the content digest of their file (from the loader); models
    without one are always rendered. `early` renders are taken where the project does not change
    them and they were rendered with these settings. `held` renders (models whose files are not here)
    are taken as they are.
    """
    from bot.project.render import normalized_query_sql

    base = _digest(cache_context("render", gateway), _settings(variables), _macro_digest(macro_files))
    keys = _Keys(models, sources, base)
    store = KeyedEntries(Path(root), RENDER_CACHE_FILE, what="render cache", header=("format", RENDER_FORMAT),
                         entry=_entry_fits, read=use_cache and read_cache)
    old = store.entries
    with paused_gc():
        held = held or {}
        keyed = {name: keys.key(name) for name, model in models.items() if has_query(model) and name not in held}
        done = {name: old[name][1] for name, key in keyed.items()
                if key is not None and name in old and old[name][0] == key}
        if early is not None and early.rendered_with(gateway, variables):
            for name in keyed.keys() - done.keys():
                found = early.by_model.get(name)
                if found is not None and found.holds(models, sources.get(name)):
                    done[name] = found.sql

    def render(name: str) -> str:
        return normalized_query_sql(models[name], variables=variables, models=models, gateway=gateway)

    new: dict[str, list[str]] = {}
    result: dict[str, str] = {}
    with frozen_gc():
        done.update(_render_in_workers([name for name in keyed if name not in done], render))
        for name, key in keyed.items():   # a render the workers could not do raises its error here, in order
            sql = result[name] = done[name] if name in done else render(name)
            if key is not None:
                new[name] = [key, sql]
    if use_cache:
        store.save(new)
    result.update((name, sql) for name, sql in held.items() if sql)
    return result


def _render_in_workers(names: list[str], render: Callable[[str], str]) -> dict[str, str]:
    """Model name -> render(name), computed in worker processes; empty when too few to pay for them."""
    workers = worker_count(len(names))
    if not workers:
        return {}
    done = {names[0]: render(names[0])}   # here, before the fork: loads the user macros once
    with paused_gc():   # the workers too: each keeps the ASTs it parsed, which every collection would scan
        rendered = fork_map(lambda index: render(names[index + 1]), len(names) - 1, workers)
    done.update((name, sql) for name, sql in zip(names[1:], rendered) if sql is not None)
    return done
