"""Python models: the @model decorator, loading models/*.py into Model values, resolving the function back."""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import sys
import traceback
import types
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Callable, Mapping

from sqlglot import exp

from bot.errors import ConfigError
from bot.project.blueprints import Blueprint, as_sql_pairs, blueprint_from_python, interpolate_braced
from bot.project.config import ModelDefaults
from bot.project.files import read_text
from bot.project.kinds import na_values_setting
from bot.project.model import KIND_ALIASES, AuditRef, Kind, KindName, Model, OnDestructiveChange
from bot.project.sqlmesh_shim import project_imports, project_root, sqlmesh_shim, unsupported_import
from bot.project.sqltext import normalize_name, parse_sql, table_references
from bot.timeline.times import REFERENCE_END, REFERENCE_START
from bot.project.warn import project_warning

_MODEL_ATTR = "__meshbot_model__"
_KIND_FIELDS = {f.name for f in fields(Kind)} - {"name"}
_TUPLE_FIELDS = ("unique_key", "scd_columns")
_KIND_KEY_NAMES = {"columns": "scd_columns", "path": "seed_path"}   # SQLMesh's property -> Kind field
_IGNORED_KIND_KEYS = frozenset({"batch_concurrency", "on_additive_change", "partition_by_time_column",
                                "time_data_type", "min_interval_unit"})


@dataclass(frozen=True)
class PythonModelSpec:
    """What `@model(...)` declared, before validation."""

    name: str
    kind: Any = None
    columns: tuple[tuple[str, str], ...] = ()
    depends_on: tuple[str, ...] = ()
    cron: str | None = None
    start: Any = None
    end: Any = None
    grains: tuple[str, ...] = ()
    owner: str | None = None
    tags: tuple[str, ...] = ()
    audits: tuple[Any, ...] = ()
    description: str | None = None
    partitioned_by: tuple[str, ...] = ()
    enabled: bool = True
    is_sql: bool = False
    physical_properties: tuple[tuple[str, str], ...] = ()
    session_properties: tuple[tuple[str, str], ...] = ()
    depends_on_given: bool = False
    ignored: tuple[str, ...] = ()     # keyword arguments meshbot does not use (warned about)
    blueprints: tuple[Any, ...] = ()  # one model per item: a dict of variables


def _names(value: str | list | tuple | None) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def model(name: str, *, kind: Any = None, columns: Mapping[str, str] | None = None,
          depends_on: list[str] | tuple[str, ...] | None = None, cron: str | None = None, start: Any = None,
          end: Any = None, grain: str | list[str] | None = None, grains: list[str] | None = None,
          owner: str | None = None, tags: list[str] | None = None, audits: list[Any] | None = None,
          description: str | None = None, partitioned_by: str | list[str] | None = None,
          enabled: bool = True, is_sql: bool = False, physical_properties: Mapping[str, Any] | None = None,
          session_properties: Mapping[str, Any] | None = None, blueprints: list[Any] | None = None,
          **ignored: Any) -> Callable[[Callable], Callable]:
    """Declare a Python model; the decorated `execute(context, start, end, execution_time, **kwargs)`
    returns (or yields) pandas or Spark DataFrames. `kind` is 'FULL' or {'name': ..., 'time_column': ...};
    without one the kind is FULL (model_defaults.kind is not used: a VIEW cannot hold a DataFrame).
    With `is_sql=True` the function receives a macro evaluator and returns the model's query.
    `blueprints` (a list of dicts) makes one model per dict: `@{key}` in the name takes its value and
    `context.blueprint_var(key)` returns it."""
    spec = PythonModelSpec(
        name=name, kind=kind, columns=tuple((str(k), str(v)) for k, v in (columns or {}).items()),
        depends_on=_names(depends_on), cron=cron, start=start, end=end,
        grains=_names(grain) + _names(grains), owner=owner, tags=_names(tags), audits=tuple(audits or ()),
        description=description, partitioned_by=_names(partitioned_by), enabled=enabled, is_sql=is_sql,
        depends_on_given=depends_on is not None, ignored=tuple(sorted(ignored)), blueprints=(blueprints,) if isinstance(blueprints, str) else tuple(blueprints or ()),
        physical_properties=tuple((str(k), str(v)) for k, v in (physical_properties or {}).items()),
        session_properties=tuple((str(k), str(v)) for k, v in (session_properties or {}).items()))

    def mark(func: Callable) -> Callable:
        setattr(func, _MODEL_ATTR, spec)
        return func

    return mark


def _exec_source(source: str, path: Path) -> dict[str, Any]:
    digest = hashlib.sha1(f"{path}\0{source}".encode()).hexdigest()[:12]
    module = types.ModuleType(f"meshbot_python_model_{digest}")
    module.__file__ = str(path)
    sys.modules[module.__name__] = module  # dataclasses and pickling look the module up
    try:
        with sqlmesh_shim(), project_imports(project_root(path)):
            exec(compile(source, str(path), "exec"), module.__dict__)
    except Exception as error:  # a user file: report any failure with its line
        frames = traceback.extract_tb(error.__traceback__)
        line = error.lineno if isinstance(error, SyntaxError) else next(
            (f.lineno for f in reversed(frames) if f.filename == str(path)), None)
        reason = unsupported_import(error) or f"{type(error).__name__}: {error}"
        raise ConfigError(f"cannot import Python model file: {reason}", path=path, line=line) from error
    finally:
        sys.modules.pop(module.__name__, None)
    return module.__dict__


def _kind_value(key: str, value: Any, path: Path) -> Any:
    if key in _TUPLE_FIELDS:
        return tuple(v.lower() for v in _names(value))
    if key == "on_destructive_change":
        return OnDestructiveChange(str(value).lower())
    if key == "time_column" and isinstance(value, (list, tuple)):
        return value
    if key == "csv_settings" and isinstance(value, Mapping):
        return tuple((str(k).lower(), na_values_setting(v) if str(k).lower() == "na_values" else v)
                     for k, v in value.items())
    if key == "materialization_properties" and isinstance(value, Mapping):
        return exp.Tuple(expressions=[exp.EQ(this=exp.column(str(k)), expression=v if isinstance(v, exp.Expression)
                                             else exp.convert(v)) for k, v in value.items()]).sql()
    return value


def parse_kind(value: Any, *, default: str | None, path: Path) -> Kind:
    """A kind given as a Kind, a name ('FULL') or a dict {'name': ..., property: value}."""
    if isinstance(value, Kind):
        return value
    if callable(getattr(value, "kind_properties", None)):   # FullKind(), IncrementalByTimeRangeKind(...)
        value = value.kind_properties()
    if isinstance(value, KindName):
        value = value.value
    props: dict[str, Any] = dict(value) if isinstance(value, Mapping) else {"name": value or default or "FULL"}
    raw_name = props.pop("name", None)
    try:
        name = KindName(KIND_ALIASES.get(str(getattr(raw_name, "value", raw_name)).upper(),
                                     str(getattr(raw_name, "value", raw_name)).upper()))
    except ValueError:
        known = ", ".join(k.value for k in KindName)
        raise ConfigError(f"unknown model kind `{raw_name}`; known kinds: {known}", path=path) from None
    kwargs: dict[str, Any] = {}
    for key, item in props.items():
        key = _KIND_KEY_NAMES.get(key.lower(), key.lower())
        if key in _IGNORED_KIND_KEYS:
            project_warning(f"kind property `{key}` is not supported by meshbot and is ignored", path=path)
            continue
        if key not in _KIND_FIELDS:
            raise ConfigError(f"unknown property `{key}` for kind {name.value}", path=path)
        converted = _kind_value(key, item, path)
        if key == "time_column" and isinstance(converted, (list, tuple)):
            kwargs["time_column"], kwargs["time_column_format"] = str(converted[0]).lower(), str(converted[1])
        else:
            kwargs[key] = converted.lower() if key == "time_column" else converted
    if name is KindName.INCREMENTAL_BY_TIME_RANGE and not kwargs.get("time_column"):
        raise ConfigError("kind INCREMENTAL_BY_TIME_RANGE requires `time_column`", path=path)
    if name in (KindName.INCREMENTAL_BY_UNIQUE_KEY, KindName.SCD_TYPE_2_BY_TIME,
                KindName.SCD_TYPE_2_BY_COLUMN) and not kwargs.get("unique_key"):
        raise ConfigError(f"kind {name.value} requires `unique_key`", path=path)
    if name is KindName.CUSTOM:
        from bot.project.materializations import find_materialization
        if not kwargs.get("materialization"):
            raise ConfigError("kind CUSTOM requires `materialization`", path=path)
        find_materialization(str(kwargs["materialization"]), model="", path=path)
    return Kind(name=name, **kwargs)


def _spark_type(text: str, *, column: str, path: Path) -> str:
    try:
        return exp.DataType.build(text, dialect="spark").sql("spark")
    except Exception:  # sqlglot raises several error types for a bad type string
        raise ConfigError(f"column `{column}` has an unknown type `{text}`", path=path) from None


def _audit_ref(item: Any, path: Path) -> AuditRef:
    if isinstance(item, str):
        return AuditRef(name=item.lower())
    if isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[1], Mapping):
        args = dict(item[1])
        blocking = bool(args.pop("blocking", True))
        return AuditRef(name=str(item[0]).lower(), blocking=blocking,
                        args=tuple((str(k).lower(), _arg_sql(v)) for k, v in args.items()))
    raise ConfigError(f"invalid audit {item!r}: use 'name' or ('name', {{'arg': value}})", path=path)


def _arg_sql(value: Any) -> str:
    """An audit argument as SQL: a string is SQL text (`total`, `amount > 0`); the items of a list or
    tuple are values, as SQLMesh converts them (`['a', 'b']` → `('a', 'b')`)."""
    if isinstance(value, str):
        return value
    if isinstance(value, exp.Expression):
        return value.sql("spark")
    if isinstance(value, (list, tuple)):
        return exp.convert(tuple(value)).sql("spark")
    return exp.convert(value).sql("spark")


def inferred_dependencies(source: str) -> tuple[str, ...]:
    """Tables read through `context.resolve_table("x")` / `context.table("x")` with a literal name,
    as SQLMesh infers a Python model's parents when `depends_on` is absent.

    >>> inferred_dependencies("rows = context.fetchdf(context.resolve_table('db.a'))")
    ('db.a',)
    """
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "context"
                and node.func.attr in ("table", "resolve_table")):
            continue
        arg = node.args[0] if node.args else next(
            (k.value for k in node.keywords if k.arg == "model_name"), None)
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value not in found:
            found.append(arg.value)
    return tuple(found)


def _to_model(spec: PythonModelSpec, *, entrypoint: str, source: str, path: Path,
              defaults: ModelDefaults, line: int = 1) -> Model:
    for key in spec.ignored:
        project_warning(f"model {spec.name}: `@model` argument `{key}` is not supported by meshbot "
                        "and is ignored", path=path, line=line)
    names = spec.depends_on if spec.depends_on_given else inferred_dependencies(source)
    owner = f"model `{spec.name}`"
    depends = tuple(defaults.catalogs.reference(normalize_name(n), path=path, owner=owner, line=line) for n in names)
    return Model(
        name=defaults.catalogs.model_name(normalize_name(spec.name), path=path, line=line),
        kind=parse_kind(spec.kind, default="FULL", path=path),
        dialect=defaults.dialect, path=path, cron=spec.cron or defaults.cron,
        start=None if spec.start is None and defaults.start is None else str(spec.start or defaults.start),
        end=None if spec.end is None else str(spec.end), grains=tuple(g.lower() for g in spec.grains),
        audits=tuple(_audit_ref(a, path) for a in spec.audits), owner=spec.owner or defaults.owner,
        tags=spec.tags, description=spec.description,
        columns=tuple((c.lower(), _spark_type(t, column=c, path=path)) for c, t in spec.columns),
        partitioned_by=tuple(p.lower() for p in spec.partitioned_by), depends_on_explicit=depends,
        physical_properties=spec.physical_properties, session_properties=spec.session_properties,
        depends_on=frozenset(depends), enabled=spec.enabled, python_source=source,
        python_entrypoint=entrypoint, line=line)


def _sql_model(spec: PythonModelSpec, func: Callable, *, path: Path, defaults: ModelDefaults,
               line: int, variables: Mapping[str, Any], blueprint: Blueprint) -> Model:
    """`@model(..., is_sql=True)`: the function, given a macro evaluator, returns the query (text or
    sqlglot expression), called here once to know its parents and columns, then at every render (bot.project.render)."""
    from dataclasses import replace

    from bot.project.macros import MacroEvaluator, interval_variables

    base = _to_model(replace(spec, columns=(), depends_on_given=True), entrypoint="", source="",
                     path=path, defaults=defaults, line=line)
    # at load, as SQLMesh loads it: the reference interval's variables, runtime stage `loading`
    evaluator = MacroEvaluator(dialect=defaults.dialect, variables={
        **interval_variables(start=REFERENCE_START, end=REFERENCE_END, execution_time=REFERENCE_END),
        "runtime_stage": "loading"}, config_variables=variables, path=path, model_name=base.name,
        blueprint_variables=blueprint)
    query, text = sql_function_query(func, evaluator, name=base.name, dialect=defaults.dialect, path=path, line=line)
    defaults.catalogs.strip([query], path=path, owner=f"model `{base.name}`", text=text, line=line)
    depends = (table_references([query]) | set(base.depends_on_explicit)) - {base.name}
    kind = base.kind if spec.kind is not None else parse_kind(None, default=defaults.kind or "VIEW", path=path)
    return replace(base, kind=kind, query=query, query_text=text, depends_on=frozenset(depends),
                   python_source=None, python_entrypoint=None)


def _with_blueprint(spec: PythonModelSpec, blueprint: Blueprint, dialect: str) -> PythonModelSpec:
    """The spec with `@{name}` in its model name and dependencies replaced by the blueprint's values."""
    if not blueprint:
        return spec
    return dataclasses.replace(
        spec, blueprints=(), name=interpolate_braced(spec.name, blueprint, dialect=dialect),
        depends_on=tuple(interpolate_braced(n, blueprint, dialect=dialect) for n in spec.depends_on))


def load_python_models(path: Path, *, defaults: ModelDefaults | None = None,
                       variables: Mapping[str, Any] | None = None) -> list[Model]:
    """Every @model-decorated function of the file, as Model values (in definition order).

    `defaults` (config.yaml model_defaults) gives dialect, cron, start and owner when not declared.
    """
    defaults = defaults or ModelDefaults()
    source = read_text(Path(path))
    namespace = _exec_source(source, Path(path))
    found = [(key, value, getattr(value, _MODEL_ATTR)) for key, value in namespace.items()
             if callable(value) and isinstance(getattr(value, _MODEL_ATTR, None), PythonModelSpec)
             and getattr(value, "__module__", None) == namespace.get("__name__")]
    models = []
    for key, func, spec in found:
        line = getattr(getattr(func, "__code__", None), "co_firstlineno", 1)
        for blueprint in [blueprint_from_python(b, path=Path(path), line=line) for b in spec.blueprints] or [{}]:
            own = _with_blueprint(spec, blueprint, defaults.dialect)
            if spec.is_sql:
                item = _sql_model(own, func, path=Path(path), defaults=defaults, line=line,
                                  variables=variables or {}, blueprint=blueprint)
                item = dataclasses.replace(item, sql_function=key, sql_function_source=source)
            else:
                item = _to_model(own, entrypoint=key, source=source, path=Path(path), defaults=defaults, line=line)
            models.append(dataclasses.replace(item, blueprint_variables=as_sql_pairs(blueprint, defaults.dialect)))
    for item in models:
        if item.is_python and not item.columns:
            raise ConfigError(f"Python model {item.name} must declare its `columns`", path=path)
    return models


def sql_function_query(func: Callable, evaluator: Any, *, name: str, dialect: str, path: Path,
                       line: int) -> tuple[exp.Expression, str]:
    """What an is_sql function returns for `evaluator` (text or a sqlglot expression), parsed: (query, text)."""
    try:
        result = func(evaluator)
    except ConfigError:
        raise
    except Exception as error:  # a user function: report it with the model
        raise ConfigError(f"model {name}: the is_sql function failed: {type(error).__name__}: {error}",
                          path=path, line=line) from error
    text = result if isinstance(result, str) else result.sql(dialect=dialect) \
        if isinstance(result, exp.Expression) else None
    if text is None:
        raise ConfigError(f"model {name}: an is_sql function must return a query (text or sqlglot "
                          f"expression), not {type(result).__name__}", path=path, line=line)
    try:
        [query] = parse_sql(text, dialect)
    except Exception as error:  # sqlglot raises several error types
        raise ConfigError(f"model {name}: cannot parse the query its is_sql function returned: {error}",
                          path=path, line=line) from error
    return query, text


def resolve_sql_function(model: Model) -> Callable:
    """The is_sql function of `model` (from the source it was loaded from)."""
    assert model.sql_function and model.sql_function_source is not None
    return _resolve(model.sql_function_source, model.sql_function, str(model.path))


@functools.lru_cache(maxsize=128)
def _resolve(source: str, entrypoint: str, path: str) -> Callable:
    namespace = _exec_source(source, Path(path))
    func = namespace.get(entrypoint)
    if not callable(func):
        raise ConfigError(f"Python model function `{entrypoint}` not found", path=path)
    return func


def resolve_python_model(model: Model) -> Callable:
    """The model's Python function, re-created from its stored source in a fresh module namespace."""
    if model.python_source is None or model.python_entrypoint is None:
        raise ConfigError(f"model {model.name} is not a Python model", path=model.path)
    return _resolve(model.python_source, model.python_entrypoint, str(model.path))
