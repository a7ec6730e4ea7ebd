"""Custom materializations: SQLMesh's `CustomMaterialization` and `CustomKind`, found in materializations/*.py and entry points."""

from __future__ import annotations

import functools
import inspect
from importlib import metadata
from pathlib import Path
from typing import Any, Generic, Mapping, TypeVar, get_args

from sqlglot import exp

from bot.errors import ConfigError
from bot.project.model import Kind, KindName, Model
from bot.project.sqlmesh_shim import import_user_file, project_root, sqlmesh_shim, unsupported_import
from bot.project.sqltext import parse_sql

ENTRY_POINT_GROUP = "sqlmesh.materializations"


class CustomKind:
    """SQLMesh's CustomKind as a materialization reads it: `materialization`, `materialization_properties`
    (literals as Python values, anything else as a sqlglot expression), `dialect` and the batch settings.
    Subclass it and declare `CustomMaterialization[YourKind]` to get your kind's properties."""

    def __init__(self, kind: Kind | None = None, dialect: str = "", **properties: Any) -> None:
        self._declared = properties   # `@model(kind=CustomKind(materialization=..., ...))` in a Python model
        kind = kind or Kind(name=KindName.CUSTOM, materialization=str(properties.get("materialization") or ""))
        self.name = KindName.CUSTOM
        self.materialization = kind.materialization or ""
        self.dialect = dialect
        self.forward_only, self.disable_restatement = kind.forward_only, kind.disable_restatement
        self.batch_size, self.lookback, self.batch_concurrency = kind.batch_size, kind.lookback or None, None
        self.materialization_properties_ = (parse_sql(kind.materialization_properties, dialect)[0]
                                            if kind.materialization_properties else None)

    @property
    def materialization_properties(self) -> dict[str, Any]:
        if self.materialization_properties_ is None:
            return {}
        node = self.materialization_properties_
        items = node.expressions if isinstance(node, exp.Tuple) else [node.unnest()]
        return {item.this.name: _python_value(item.expression) for item in items}

    def kind_properties(self) -> dict[str, Any]:
        """What a Python model declared, as `@model(kind={...})` takes it."""
        return {"name": "CUSTOM", **{k: v for k, v in self._declared.items() if k != "dialect"}}

    model_kind_name = property(lambda self: self.name)
    is_custom = property(lambda self: True)
    is_materialized = property(lambda self: True)
    is_full = is_view = is_seed = is_external = is_embedded = is_symbolic = is_scd_type_2 = property(lambda self: False)
    is_incremental = is_incremental_by_time_range = is_incremental_by_unique_key = property(lambda self: False)
    is_incremental_by_partition = is_incremental_unmanaged = is_managed = property(lambda self: False)


def _python_value(value: exp.Expression) -> Any:
    """A literal as Python (as SQLMesh's interpret_key_value_pairs gives it), else the expression itself.

    >>> [_python_value(parse_sql(s, "duckdb")[0]) for s in ("'x'", "2", "1.5", "true")]
    ['x', 2, 1.5, True]
    """
    if isinstance(value, exp.Literal):
        return value.this if value.is_string else (int(value.this) if value.is_int else float(value.this))
    if isinstance(value, exp.Boolean):
        return bool(value.this)
    return value


K = TypeVar("K", bound=CustomKind)


class CustomMaterialization(Generic[K]):
    """Base of a custom materialization: implement `insert`; `self.adapter` is meshbot's Spark adapter.
    `NAME` (else the class name) is what `kind CUSTOM (materialization '...')` refers to."""

    def __init__(self, adapter: Any) -> None:
        self.adapter = adapter

    def insert(self, table_name: str, query_or_df: Any, model: Any, is_first_insert: bool,
               render_kwargs: dict[str, Any], **kwargs: Any) -> None:
        raise NotImplementedError("Custom materialization strategies must implement the 'insert' method.")

    def append(self, table_name: str, query_or_df: Any, model: Any, render_kwargs: dict[str, Any],
               **kwargs: Any) -> None:
        self.adapter.insert_append(table_name, query_or_df, target_columns_to_types=self.adapter.columns(table_name))

    def create(self, table_name: str, model: Any, is_table_deployable: bool, render_kwargs: dict[str, Any],
               **kwargs: Any) -> None:
        """Overridden, this creates the physical table instead of meshbot (which creates it from the
        declared columns or the query's)."""
        raise NotImplementedError

    def delete(self, name: str, **kwargs: Any) -> None:
        self.adapter.drop_table(name)

    def _replace_query_for_model(self, model: Any, name: str, query_or_df: Any,
                                 render_kwargs: dict[str, Any] | None = None, skip_grants: bool = False,
                                 **kwargs: Any) -> None:
        """Replace the table's rows by the query's, keeping the table's columns (the declared ones when
        the model has every column typed)."""
        columns = model.columns_to_types if getattr(model, "annotated", False) else None
        if columns is None and self.adapter.table_exists(name):
            columns = self.adapter.columns(name)
        self.adapter.replace_query(name, query_or_df, target_columns_to_types=columns,
                                   table_description=getattr(model, "description", None),
                                   column_descriptions=getattr(model, "column_descriptions", None))


def kind_type(cls: type) -> type[CustomKind]:
    """The CustomKind subclass a materialization declares (`CustomMaterialization[MyKind]`), else CustomKind."""
    for klass in cls.__mro__:
        for base in getattr(klass, "__orig_bases__", ()):
            if getattr(base, "__origin__", None) is not None and _is_materialization(base.__origin__):
                for arg in get_args(base):
                    if inspect.isclass(arg) and issubclass(arg, CustomKind):
                        return arg
    return CustomKind


class MaterializedModel:
    """A meshbot model under the attribute names SQLMesh's `Model` gives a custom materialization."""

    def __init__(self, model: Model, *, kind: CustomKind, query: exp.Query | None) -> None:
        self._query = query
        self.name, self.dialect, self.kind = model.name, model.dialect, kind
        self.fqn = exp.to_table(model.name).sql(dialect=model.dialect, identify=True)
        self.owner, self.description, self.tags = model.owner, model.description, list(model.tags)
        self.cron, self.start, self.end, self.grains = model.cron, model.start, model.end, list(model.grains)
        self.depends_on = set(model.depends_on)
        self.columns_to_types = ({c: exp.DataType.build(t, dialect="spark") for c, t in model.columns}
                                 if model.columns else None)
        self.annotated = bool(model.columns)
        self.column_descriptions = dict(model.column_descriptions)
        self.partitioned_by = [exp.column(c) for c in model.partitioned_by]
        self.clustered_by: list[exp.Expression] = []
        self.physical_properties = {k: exp.maybe_parse(v, dialect="spark") for k, v in model.physical_properties}
        self.session_properties = {k: exp.maybe_parse(v, dialect="spark") for k, v in model.session_properties}
        self.table_format = self.storage_format = self.partition_interval_unit = None
        self.is_sql, self.is_python, self.is_seed = not model.is_python, model.is_python, False
        self.forward_only = model.kind.forward_only

    @property
    def columns_to_types_or_raise(self) -> dict[str, exp.DataType]:
        if self.columns_to_types is None:
            raise ConfigError(f"model {self.name} declares no `columns`")
        return self.columns_to_types

    def render_query(self, **_: Any) -> exp.Query | None:
        """The query being inserted (rendered for this batch, in Spark SQL)."""
        return self._query.copy() if self._query is not None else None

    render_query_or_raise = render_query

    def ctas_query(self, **_: Any) -> exp.Query | None:
        """The query with no rows (`WHERE FALSE LIMIT 0`), for creating a table of its columns."""
        if self._query is None:
            return None
        return exp.select("*").from_(self._query.subquery("_q")).where(exp.false()).limit(0)


def _is_materialization(cls: Any) -> bool:
    """Ours, or SQLMesh's own when SQLMesh is installed and project files imported it instead."""
    return inspect.isclass(cls) and any(
        c.__name__ == "CustomMaterialization" and c.__module__ in (__name__, "sqlmesh.core.snapshot.evaluator")
        for c in cls.__mro__)


def _entry_points() -> list[type]:
    found = []
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            with sqlmesh_shim():
                value = entry.load()
        except Exception as error:  # an installed package's code
            reason = unsupported_import(error) or f"{type(error).__name__}: {error}"
            raise ConfigError(f"cannot load custom materialization entry point `{entry.name}` "
                              f"({entry.value}): {reason}") from None
        if not _is_materialization(value):
            raise ConfigError(f"custom materialization entry point `{entry.name}` ({entry.value}) must be a "
                              "subclass of CustomMaterialization")
        found.append(value)
    return found


@functools.lru_cache(maxsize=32)
def _load_cached(root: Path | None, stamp: tuple[tuple[str, int, int], ...]) -> Mapping[str, type]:
    classes: list[type] = []
    for file_name, _, _ in stamp:
        assert root is not None
        classes += [v for v in import_user_file(root / "materializations" / file_name, root=root, prefix="meshbot_materialization",
                                     what=" custom materializations").values()
                    if _is_materialization(v) and v.__name__ != "CustomMaterialization"]
    classes += _entry_points()
    return {str(getattr(cls, "NAME", cls.__name__)).lower(): cls for cls in classes}


def load_materializations(root: Path | None) -> Mapping[str, type]:
    """The custom materializations by lower-case name: classes of `<root>/materializations/*.py`, then
    those of the `sqlmesh.materializations` entry point group; cached until a file changes."""
    folder = Path(root) / "materializations" if root is not None else None
    stamp = tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(folder.glob("*.py"))
                  if not p.name.startswith("_")) if folder is not None and folder.is_dir() else ()
    return _load_cached(Path(root).resolve() if root is not None else None, stamp)


def find_materialization(name: str, *, model: str, path: Path, line: int | None = None) -> type:
    """The materialization class `name` for a model in file `path`; a ConfigError naming both when unknown."""
    found = load_materializations(project_root(path)).get(name.lower())
    if found is None:
        raise ConfigError(f"model {model or '?'}: custom materialization `{name}` not found (define a "
                          "CustomMaterialization subclass in materializations/*.py or install a package "
                          f"with a `{ENTRY_POINT_GROUP}` entry point)", path=path, line=line)
    return found
