"""Load a project directory: config, SQL/Python/external models, audits, tests and macros into a Project."""

from __future__ import annotations

import errno
import fnmatch
import glob
import json
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterable, Iterator, Mapping

from bot.errors import ConfigError, PlanError
from bot.project.audit_parser import AuditDefinition, audits_from_blocks, scoped_audit_key
from bot.project.cache import (ModelCache, cache_context, content_key, dumps, entries_from_data,
                               entries_to_data, paused_gc, with_fields)
from bot.project.config import ProjectConfig, load_config
from bot.project.files import decode_text, read_text, read_yaml
from bot.project.dag import DAG
from bot.project.header import spark_type, split_blocks
from bot.project.jinja import JinjaSettings, load_jinja_macros
from bot.project.limits import SOURCE
from bot.project.macros import known_macro_names, macro_files
from bot.project.model import AuditRef, Kind, KindName, Model
from bot.project.model_parser import (BUILTIN_MACRO_FUNCTIONS, BUILTIN_MACRO_VARIABLES, ParsedModel,
                                      parse_model_file, seed_hash)
from bot.project.parallel import fork_map, worker_count
from bot.project.python_model import load_python_models
from bot.project.render_cache import EarlyRender, EarlyRenders, render_early
from bot.project.sqltext import normalize_name, parse_sql, preprocess_macros, to_sql
from bot.project.warn import project_warning

__all__ = ["AuditDefinition", "Project", "Repository", "load_project", "parse_sql", "preprocess_macros", "to_sql"]

EXTERNAL_MODELS_FILES = ("external_models.yaml", "external_models.yml")
_JINJA_MARKER = b"jinja_"   # in a file's lowercased bytes: its parse depends on variables and macros/*.sql


@dataclass(frozen=True)
class Repository:
    """One repository of a project: its folder, its own config and the names of the models it defines."""

    root: Path
    config: ProjectConfig
    models: tuple[str, ...]

    @property
    def name(self) -> str:
        """Its `project` key, else its folder's name."""
        return self.config.project or self.root.name


@dataclass(frozen=True)
class Project:
    """A loaded project; `models` iterate in topological order. `root` and `config` are its first
    repository's (a multi-repo project, bot.project.repositories, lists them all in `repositories`)."""

    root: Path
    config: ProjectConfig
    models: dict[str, Model]
    audits: dict[str, AuditDefinition]
    test_files: tuple[Path, ...]
    macro_files: tuple[Path, ...]
    dag: DAG
    # model name -> content key of its SQL file (file bytes + parse settings), for render caching
    source_digests: Mapping[str, str] = field(default_factory=dict)
    early_renders: EarlyRenders | None = None   # reference renders the parse workers did
    parts: tuple[Repository, ...] = ()   # a multi-repo project's repositories, in the order given
    # models of repositories not loaded, from prod's state (bot.plan.unloaded_repositories): name -> the
    # reference render stored with their snapshot, used instead of rendering them here
    held_renders: Mapping[str, str] = field(default_factory=dict)

    @property
    def repositories(self) -> tuple[Repository, ...]:
        return self.parts or (Repository(self.root, self.config, tuple(self.models)),)

    def model(self, name: str) -> Model:
        """The model a user named (any quoting or case); an unknown name is a PlanError listing some known ones."""
        key = normalize_name(name)
        if key not in self.models:
            raise PlanError(f"unknown model `{name}`; known models: " + ", ".join(sorted(self.models)[:20]))
        return self.models[key]


def load_project(root: Path, *, config: ProjectConfig | None = None, use_cache: bool = True,
                 read_cache: bool = True, fresh_files: frozenset[str] | None = None,
                 while_parsing: Callable[[], None] | None = None,
                 render_gateway: str | None = None) -> Project:
    """Read every project file under `root`; any invalid file is a ConfigError naming it (and the line).

    With `read_cache` False the parse cache on disk is not read, only written anew (a prod deploy
    parses what it deploys itself and leaves a fresh cache for pull requests).

    `fresh_files` (a pull request's changed files, relative to `root`, `/`-separated) are parsed anew
    whatever the cache holds, and their models, seed models and every model downstream of them get no
    source digest, so their renders and hashes are computed anew too: an entry anyone could have written under the key
    of the PR's files proves nothing about them. When one of them is not under models/ or tests/ (config,
    macros, seeds: inputs of every entry), or the project holds a symlink (a file it reaches through one
    may be any file the PR changed), nothing is taken from the cache.

    `while_parsing` runs while worker processes parse the model files (a cold load of a large
    project), when this process would only wait; it must start no thread. Otherwise it is not called.
    With `render_gateway`, those workers also render each model's reference query for that gateway
    while its AST is at hand (`Project.early_renders`, for bot.project.render_cache.reference_queries).
    """
    with paused_gc():   # 10,000 models: collections would scan every loaded model again and again
        return _load_project(Path(root).resolve(), config=config, use_cache=use_cache, read_cache=read_cache,
                             fresh_files=fresh_files, while_parsing=while_parsing, render_gateway=render_gateway)


def _load_project(root: Path, *, config: ProjectConfig | None, use_cache: bool, read_cache: bool,
                  fresh_files: frozenset[str] | None, while_parsing: Callable[[], None] | None,
                  render_gateway: str | None) -> Project:
    config = config or load_config(root)
    fresh = frozenset(name.replace("/", os.sep) for name in fresh_files or ())
    trust_none = fresh_files is not None and (not all(_feeds_its_models_only(name) for name in fresh_files)
                                              or _holds_a_symlink(root))
    model_files = _file_paths(root / "models", "*.sql", "*.py", config=config)   # one walk for both
    parsed, digests, early, own = _load_sql_models(
        root, config, [path for path in model_files if path.endswith(".sql")], use_cache=use_cache,
        read_cache=read_cache and not trust_none, fresh=fresh, while_parsing=while_parsing,
        render_gateway=render_gateway)
    _check_macros(root, config, parsed)
    for item in parsed:
        for message, line in getattr(item, "warnings", ()):
            project_warning(message, path=item.model.path, line=line)
    models = [p.model for p in parsed]
    python_models = _load_python_models([Path(path) for path in model_files if path.endswith(".py")], config)
    own |= {m.name for m in python_models if os.path.relpath(m.path, root) in fresh}
    models += python_models
    models += load_external_models(root, config)
    if config.project:   # recorded with each snapshot, as SQLMesh records a node's project
        models = [with_fields(m, project=config.project) for m in models]
    by_name = _index_models(m for m in models if m.enabled)
    dag = DAG.build(by_name)
    sources = {p.model.name: digest for p, digest in zip(parsed, digests)}
    if fresh_files is not None:
        # a seed's CSV may sit anywhere (`path '../x.csv'`): its model's hashes are computed anew too
        own |= {name for name, model in by_name.items() if model.kind.name is KindName.SEED}
        untrusted = by_name.keys() if trust_none else own | dag.downstream(own)
        sources = {name: digest for name, digest in sources.items() if name not in untrusted}
    return Project(
        root=root, config=config, models={name: by_name[name] for name in dag.order},
        audits=_with_inline_audits(load_audits(root, config), parsed), test_files=_test_files(root, config),
        macro_files=tuple(sorted(_files(root / "macros", "*.py", "*.sql", config=config))),
        dag=dag, source_digests=sources,
        early_renders=EarlyRenders(render_gateway, config.variables, early) if render_gateway is not None else None,
    )


def _feeds_its_models_only(name: str) -> bool:
    """Whether a changed project file shapes only the models it defines (models/) or no cache entry (tests/).

    >>> [_feeds_its_models_only(n) for n in ("models/a.sql", "tests/test_a.yaml", "macros/m.py", "config.yaml")]
    [True, True, False, False]
    """
    return PurePosixPath(name).parts[0] in ("models", "tests")


def _holds_a_symlink(root: Path) -> bool:
    """Whether any file or folder the loader could read under `root` is a symlink."""
    return any(entry.is_symlink() for entry in _walk(str(root)))


def _files(folder: Path, *patterns: str, config: ProjectConfig | None = None) -> list[Path]:
    """Files under `folder` whose name matches a pattern, hidden ones and those `config.ignore_patterns`
    names left out, sorted.

    Symlinked folders are not descended into; a symlink loop under `folder` is a ConfigError.
    (What `folder.rglob("*")` gives, walked with os.scandir: a 10,000-file folder in a few
    milliseconds instead of a second of pathlib.)
    """
    return [Path(path) for path in _file_paths(folder, *patterns, config=config)]


def _file_paths(folder: Path, *patterns: str, config: ProjectConfig | None = None) -> list[str]:
    """_files as path strings (no Path object per file until one is needed)."""
    if not folder.is_dir():
        return []
    ignored = _ignored(config) if config is not None else lambda path: False
    found = []
    for entry in _walk(str(folder)):
        if entry.is_symlink():
            _check_symlink(Path(entry.path), folder)
        if any(fnmatch.fnmatchcase(entry.name, pattern) for pattern in patterns) and entry.is_file():
            if not ignored(entry.path):
                found.append(entry.path)
    found.sort(key=lambda path: path.split(os.sep))   # the order of sorted(paths): by parts
    return found


def _walk(top: str) -> Iterator[os.DirEntry]:
    """Every entry under `top` except hidden ones and what is under them, not descending into
    symlinked folders (rglob's walk); an unreadable folder is skipped."""
    stack = [top]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                yield entry
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                except OSError:
                    pass


def _ignored(config: ProjectConfig) -> Callable[[str], bool]:
    """SQLMesh's rule for `ignore_patterns`: a file is skipped when it matches a pattern from the right
    (`Path.match`: `models/legacy/*`, `*_old.sql`) or is one of the files the pattern globs from the
    project root (`**` recursive). Takes the file's path as the walk gives it (absolute, normalized)."""
    patterns = config.ignore_patterns
    globbed = {str(Path(p)) for pattern in patterns for p in glob.glob(str(config.root / pattern), recursive=True)}
    matchers = [_matches_from_right(pattern) for pattern in patterns]
    return lambda path: path in globbed or any(match(path) for match in matchers)


def _matches_from_right(pattern: str) -> Callable[[str], bool]:
    """`Path(path).match(pattern)` with the pattern's parts read once (10,000 files: ~20 ms less)."""
    parts = PurePosixPath(pattern).parts
    if os.sep != "/" or not parts or parts[0].startswith("//"):
        return lambda path: Path(path).match(pattern)   # other flavours, and the empty pattern's error
    anchored = parts[0] == "/"
    tail = parts[1:] if anchored else parts
    # (index from the right, part): literal parts first (a plain comparison), `*` left out (matches all)
    checks = sorted(((-1 - index, part) for index, part in enumerate(reversed(tail)) if part != "*"),
                    key=lambda check: _has_magic(check[1]))
    literal = {index: part for index, part in checks if not _has_magic(part)}

    def match(path: str) -> bool:
        path_parts = path.split("/")
        if len(parts) != len(path_parts) if anchored else len(parts) > len(path_parts):
            return False
        path_parts[0] = "/"   # an absolute path's first part, as in Path.parts
        for index, part in checks:
            if index in literal:
                if path_parts[index] != part:
                    return False
            elif not fnmatch.fnmatchcase(path_parts[index], part):
                return False
        return True
    return match


def _has_magic(part: str) -> bool:
    return any(char in part for char in "*?[")


def _check_symlink(path: Path, folder: Path) -> None:
    """Refuse a symlink that never reaches a file (a -> b -> a) or a folder containing it."""
    where = path.relative_to(folder.parent)
    try:
        target = os.readlink(path)
        path.stat()
    except OSError as error:
        if error.errno != errno.ELOOP:
            return   # a dangling link is left out, like any name that is not a file
        raise ConfigError(f"symlink loop: {where} -> {target} never reaches a file; "
                          "remove or fix the link", path=path) from None
    if path.is_dir() and path.parent.resolve().is_relative_to(path.resolve()):
        raise ConfigError(f"symlink loop: {where} -> {target} points to a folder containing it; "
                          "remove the link (meshbot does not follow symlinked folders)", path=path)


def _load_sql_models(root: Path, config: ProjectConfig, paths: list[str], *, use_cache: bool,
                     read_cache: bool = True, fresh: frozenset[str] = frozenset(),
                     while_parsing: Callable[[], None] | None = None, render_gateway: str | None = None
                     ) -> tuple[list[ParsedModel], list[str], dict[str, EarlyRender], set[str]]:
    """The parsed entries, each one's file digest, the parse workers' early renders, and the names of
    the models of the `fresh` files (keys as the cache's: relative to root), parsed whatever the cache holds."""
    cache = (ModelCache.open(root) if read_cache else ModelCache.empty(root)) if use_cache else None
    context = cache_context(root, config.model_defaults, sorted((str(k), repr(v)) for k, v in config.variables.items()))
    jinja = JinjaSettings(variables=config.variables, gateway=config.default_gateway,
                          macros=load_jinja_macros(_files(root / "macros", "*.sql", config=config)))
    jinja_context = f"{context}|{jinja.digest()}"
    parsed, digests, own = [], [], set()
    with paused_gc():
        files, unreadable = [], None
        prefix = len(os.path.join(str(root), ""))
        limit = SOURCE.bytes()
        for path in paths:
            try:
                data = _read_bytes(path, limit)
            except OSError as error:   # raised after the files before it are parsed, as a serial loop would
                unreadable = error
                break
            key = path[prefix:]   # str(path.relative_to(root)): each path starts with root
            digest = content_key(data, jinja_context if _JINJA_MARKER in data.lower() else context)
            entries = cache.get(key, digest) if cache and key not in fresh else None
            if entries is not None and not _seeds_unchanged(entries):
                entries = None
            files.append(_SqlFile(path, key, digest, data, entries))

        def parse(file: _SqlFile) -> tuple[ParsedModel, ...]:
            path = Path(file.path)
            return parse_model_file(path, decode_text(file.data, path), defaults=config.model_defaults,
                                    variables=config.variables, jinja=jinja, root=root)

        def parse_in_worker(file: _SqlFile) -> tuple[str, list[tuple[Any, ...]]] | None:
            entries = parse(file)
            blob = dumps(entries)
            if blob is None:
                return None
            renders = []   # (model name, sql, tables, columns): EarlyRender's fields, pickled as a tuple
            for entry in entries if render_gateway is not None else ():
                if not entry.model.enabled:   # left out of the project; another model may have its name
                    continue
                early = render_early(entry.model, variables=config.variables, gateway=render_gateway)
                if early is not None:
                    renders.append((entry.model.name, early.sql, early.tables, early.columns))
            return blob, renders

        encoded = _parse_in_workers([f for f in files if f.entries is None], parse_in_worker, while_parsing)
        early = {name: EarlyRender(sql, tables, columns, file.digest)
                 for file in files if file.key in encoded for name, sql, tables, columns in encoded[file.key][1]}
        for file in files:
            entries = file.entries
            if entries is None:
                data = json.loads(encoded[file.key][0]) if file.key in encoded else None
                entries = entries_from_data(data)   # the lazy models a warm load would give
                if entries is None:
                    entries, data = parse(file), None
                if cache and all(entry.cacheable for entry in entries):
                    cache.put(file.key, file.digest, data if data is not None else entries_to_data(entries))
            parsed.extend(entries)
            digests += [file.digest] * len(entries)
            if file.key in fresh:
                own.update(entry.model.name for entry in entries)
        if unreadable is not None:
            raise unreadable
    if cache:
        cache.save()
    return parsed, digests, early, own


def _read_bytes(path: str, limit: int) -> bytes:
    """The file's bytes, read with os.read: no file object (10,000 files: ~40% faster than open().read());
    a ConfigError before reading when it has more than `limit` (bot.project.limits)."""
    handle = os.open(path, os.O_RDONLY)
    try:
        SOURCE.check(path, os.fstat(handle).st_size, limit)
        chunks, size = [], 0
        while size <= limit and (chunk := os.read(handle, 1 << 16)):   # a file growing as it is read stops
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(handle)
    SOURCE.check(path, size, limit)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


@dataclass(slots=True)   # not frozen: 10,000 of them are made ~3x faster
class _SqlFile:
    """A models/*.sql file being loaded: its cache key and content digest, and its cached entries if any."""

    path: str
    key: str
    digest: str
    data: bytes
    entries: tuple[ParsedModel, ...] | None


def _parse_in_workers(misses: list[_SqlFile], parse: Callable[[_SqlFile], Any],
                      meanwhile: Callable[[], None] | None = None) -> dict[str, Any]:
    """Cache key -> parse(file), done by worker processes (its result must pickle: plain values).

    Empty when there are too few files to pay for the workers. A file missing from the result (an
    error, an entry that cannot be cached: `parse` gave None) is parsed again by the caller, raising
    the same error.
    """
    workers = worker_count(len(misses))
    if not workers:
        return {}
    results = fork_map(lambda index: parse(misses[index]), len(misses), workers, meanwhile=meanwhile)
    return {file.key: result for file, result in zip(misses, results) if result is not None}


def _seeds_unchanged(entries: tuple[ParsedModel, ...]) -> bool:
    for entry in entries:
        if not _seed_unchanged(entry.model):
            return False
    return True


def _seed_unchanged(model: Model) -> bool:
    if model.kind.name is not KindName.SEED:
        return True
    path = model.seed_abs_path
    return path is not None and path.is_file() and seed_hash(path) == model.seed_content_hash


def _load_python_models(files: list[Path], config: ProjectConfig) -> list[Model]:
    if not files:
        return []
    return [model for path in files
            for model in load_python_models(path, defaults=config.model_defaults, variables=config.variables)]


def _check_macros(root: Path, config: ProjectConfig, parsed: list[ParsedModel]) -> None:
    if not any(p.macro_refs for p in parsed):
        return
    user = {n.lower() for n in known_macro_names(root)}
    variables = {str(k).lower() for k in config.variables}
    for item in parsed:
        for ref in item.macro_refs:
            if ref.name in user or ref.name in BUILTIN_MACRO_FUNCTIONS:
                continue
            if ref.kind == "var" and (ref.name in variables or ref.name in BUILTIN_MACRO_VARIABLES):
                continue
            what = "macro" if ref.kind == "call" else "macro variable"
            raise ConfigError(f"unknown {what} `@{ref.name}` in model `{item.model.name}` (not a built-in, "
                              f"a config variable or a @macro() function in {_macro_places(root)})",
                              path=item.model.path, line=ref.line)


def _macro_places(root: Path) -> str:
    """Where user macros were looked for, for an error: the files read, or the folder that has none."""
    files = [path.relative_to(root).as_posix() for path in macro_files(root)]
    if not files:
        return "macros/ (no Python file there)"
    shown = ", ".join(files[:8]) + (f" and {len(files) - 8} more" if len(files) > 8 else "")
    return f"macros/**/*.py, which has {shown}"


def _index_models(models: Iterable[Model]) -> dict[str, Model]:
    by_name: dict[str, Model] = {}
    for model in models:
        if model.name in by_name:
            other = by_name[model.name]
            raise ConfigError(f"duplicate model name `{model.name}`: also defined in {other.path}"
                              f":{other.line}", path=model.path, line=model.line)
        by_name[model.name] = model
    return by_name


def load_external_models(root: Path, config: ProjectConfig) -> list[Model]:
    """external_models.yaml: a list of `{name, columns: {col: type}, audits?}` → EXTERNAL models."""
    paths = [root / n for n in EXTERNAL_MODELS_FILES if (root / n).is_file()]
    paths += _files(root / "external_models", "*.yaml", "*.yml", config=config)
    return [model for path in paths for model in _external_models_file(path, config)]


def _external_models_file(path: Path, config: ProjectConfig) -> list[Model]:
    raw = read_yaml(path) or []
    if not isinstance(raw, list):
        raise ConfigError("expected a list of external models", path=path)
    dialect = config.model_defaults.dialect
    models = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict) or not item.get("name"):
            raise ConfigError(f"external model #{index + 1} needs a `name`", path=path)
        item_dialect = str(item.get("dialect") or dialect)
        columns = item.get("columns") or {}
        if not isinstance(columns, dict):
            raise ConfigError(f"`columns` of external model `{item['name']}` must be a mapping", path=path)
        models.append(Model(
            name=config.model_defaults.catalogs.reference(normalize_name(str(item["name"]), item_dialect),
                                                          path=path, owner=f"external model #{index + 1}"),
            kind=Kind(name=KindName.EXTERNAL),
            dialect=item_dialect, path=path, line=1,
            columns=tuple((str(col).lower(), spark_type(str(typ), dialect=item_dialect, path=path))
                          for col, typ in columns.items()),
            audits=tuple(_external_audit(a, path) for a in item.get("audits") or ()),
            description=item.get("description"),
        ))
    return models


def _external_audit(raw: Any, path: Path) -> AuditRef:
    if isinstance(raw, str):
        raw = {"name": raw}
    if not isinstance(raw, dict) or not raw.get("name"):
        raise ConfigError("each external model audit needs a `name`", path=path)
    args = []
    blocking = True
    for key, value in raw.items():
        if key == "name":
            continue
        if key == "blocking":
            blocking = bool(value)
            continue
        args.append((str(key).lower(), _yaml_value_sql(value)))
    name = str(raw["name"]).lower()
    if name.endswith("_non_blocking"):
        name, blocking = name[: -len("_non_blocking")], False
    return AuditRef(name=name, args=tuple(args), blocking=blocking)


def _yaml_value_sql(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(_yaml_value_sql(v) for v in value) + ")"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return str(value)
    return str(value)   # SQL text (`id`, `amount > 0`, `'text'`) as written


def load_audits(root: Path, config: ProjectConfig) -> dict[str, AuditDefinition]:
    """Every AUDIT block in audits/*.sql; duplicate audit names are an error."""
    audits: dict[str, AuditDefinition] = {}
    for path in _files(root / "audits", "*.sql", config=config):
        text = read_text(path)
        blocks = split_blocks(text, keyword="AUDIT", path=path)
        for audit in audits_from_blocks(blocks, text=text, path=path, default_dialect=config.model_defaults.dialect,
                                        catalogs=config.model_defaults.catalogs):
            if audit.name in audits:
                raise ConfigError(f"duplicate audit `{audit.name}`: also defined in {audits[audit.name].path}",
                                  path=path, line=audit.line)
            audits[audit.name] = audit
    return audits


def _with_inline_audits(audits: dict[str, AuditDefinition],
                        parsed: list[ParsedModel]) -> dict[str, AuditDefinition]:
    """audits/*.sql plus the `AUDIT (...)` blocks written in model files.

    An inline audit serves its own file's models first (scoped_audit_key), so two model files may
    each define `unique_id`; under its bare name it also serves other files when no audits/*.sql
    audit or earlier file has that name. A file defines a name once.
    """
    merged = dict(audits)
    for item in parsed:
        for audit in getattr(item, "audits", ()):
            scoped = scoped_audit_key(audit.name, audit.path)
            if audit.standalone and audit.name in merged:   # run once under its name: it needs one
                other = merged[audit.name]
                raise ConfigError(f"duplicate audit `{audit.name}`: also defined in {other.path}:{other.line}"
                                  " (a standalone audit's name is the project's)", path=audit.path, line=audit.line)
            if scoped in merged:
                raise ConfigError(f"duplicate audit `{audit.name}`: also defined in {merged[scoped].path}"
                                  f":{merged[scoped].line}", path=audit.path, line=audit.line)
            merged[scoped] = audit
            merged.setdefault(audit.name, audit)
    return merged


def _test_files(root: Path, config: ProjectConfig) -> tuple[Path, ...]:
    """tests/**/test*.yaml (SQLMesh's files); each must at least be valid YAML (malformed files are
    reported here, with the line). Other YAML files there are not tests: each is named in a warning."""
    tests = []
    for path in _files(root / "tests", "*.yaml", "*.yml", config=config):
        if not path.name.startswith("test"):
            project_warning("not a unit test file: SQLMesh runs tests/**/test*.yaml only (rename it to run it)",
                            path=path)
            continue
        read_yaml(path)
        tests.append(path)
    return tuple(tests)
