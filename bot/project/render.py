"""Render a model's SQL: expand macros, inline EMBEDDED parents, map table names, transpile to Spark SQL."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from sqlglot import exp

from bot.errors import ConfigError
from bot.project.jinja import (JINJA_QUERY, JinjaBlock, JinjaValues, parse_rendered, quoted_table, render_jinja,
                               statement_text)
from bot.project.macros import (EMPTY_REGISTRY, MacroEvaluator, MacroRegistry, interval_variables, load_macros,
                                macro_name)
from bot.project.model import KindName, Model
from bot.project.python_model import resolve_sql_function, sql_function_query
from bot.project.sqltext import normalize_name, parse_sql
from bot.project.arithmetic import keep_dialect_arithmetic
from bot.project.floats import keep_dialect_float_widths, keep_float32_arithmetic
from bot.project.windows import order_all_peers
from bot.timeline.times import REFERENCE_END, REFERENCE_START  # noqa: F401 - the reference interval's home for renders


_MAPPED = "meshbot_mapped"          # meta flag: this table is already a physical/virtual name


_FLOAT_NAMES = re.compile(r"\b(?:real|float4?)\b", re.I)   # DuckDB's float32 type names
_FLOAT_WIDTHS = re.compile(r"\b(?:real|float\w*)\b|[@{]", re.I)   # a floating type a dialect sizes its own way
_SPARK_DIALECTS = frozenset({"spark", "spark2", "databricks"})
_ARITHMETIC_SIGNS = re.compile(r"[/%\[@{]|\b(?:div|mod)\b", re.I)   # a division, remainder or element access


@dataclass(frozen=True)
class RenderContext:
    """Everything rendering needs besides the model; shared by a model and its EMBEDDED parents."""

    start: int = REFERENCE_START
    end: int = REFERENCE_END
    execution_time: int = REFERENCE_END
    variables: Mapping[str, Any] = field(default_factory=dict)
    table_mapping: Mapping[str, str] = field(default_factory=dict)
    models: Mapping[str, Model] = field(default_factory=dict)
    gateway: str = "local"
    macros: MacroRegistry | None = None
    this_model: str | None = None
    runtime_stage: str = "loading"    # SQLMesh's RuntimeStage value: loading, creating, evaluating, ...


def _context(*, start: int | None = None, end: int | None = None, execution_time: int | None = None,
             variables: Mapping[str, Any] | None = None, table_mapping: Mapping[str, str] | None = None,
             models: Mapping[str, Model] | None = None, gateway: str = "local",
             macros: MacroRegistry | None = None, this_model: str | None = None,
             runtime_stage: str = "loading") -> RenderContext:
    start = REFERENCE_START if start is None else start
    end = REFERENCE_END if end is None else end
    return RenderContext(start=start, end=end, execution_time=end if execution_time is None else execution_time,
                         variables=variables or {}, table_mapping=table_mapping or {}, models=models or {},
                         gateway=gateway, macros=macros, this_model=this_model, runtime_stage=runtime_stage)


@functools.lru_cache(maxsize=256)
def _folder_registry(folder: str) -> MacroRegistry:
    """User macros of the project containing `folder` (nearest config.yaml), loaded once per process."""
    start = Path(folder).resolve()
    for candidate in (start, *start.parents):
        if any((candidate / name).is_file() for name in ("config.yaml", "config.yml", "config.py")):
            return load_macros(candidate)
    return EMPTY_REGISTRY


def model_variables(model: Model, variables: Mapping[str, Any]) -> Mapping[str, Any]:
    """The `variables` a model renders with: a multi-repo project's model takes its own repository's over
    those of the operation (its first repository's config), as SQLMesh gives each repository its own."""
    return variables if model.variables is None else {**variables, **model.variables}


def _registry(model: Model, ctx: RenderContext) -> MacroRegistry:
    if ctx.macros is not None:
        return ctx.macros
    return _folder_registry(str(Path(model.path).parent))


@functools.lru_cache(maxsize=65536)
def _this_model_table(name: str) -> exp.Table:
    """Shared and never mutated: the evaluator copies variable values before using them."""
    table = exp.to_table(name, dialect="spark")
    table.meta[_MAPPED] = True
    return table


@functools.lru_cache(maxsize=4096)
def _interval_variables(start: int, end: int, execution_time: int) -> Mapping[str, Any]:
    return MappingProxyType(interval_variables(start=start, end=end, execution_time=execution_time))


@functools.lru_cache(maxsize=4096)
def _blueprint_values(pairs: tuple[tuple[str, str], ...], dialect: str) -> Mapping[str, exp.Expression]:
    """A model's blueprint variables parsed back into expressions (shared: lookups copy them)."""
    return MappingProxyType({name: parse_sql(sql, dialect)[0] for name, sql in pairs})


def make_evaluator(model: Model, ctx: RenderContext, *, dialect: str | None = None) -> MacroEvaluator:
    """A macro evaluator for `model` with its interval variables and its pre-statement @DEFs applied."""
    variables = dict(_interval_variables(ctx.start, ctx.end, ctx.execution_time))
    variables["this_model"] = _this_model_table(ctx.this_model or ctx.table_mapping.get(model.name, model.name))
    variables["gateway"] = ctx.gateway
    variables["runtime_stage"] = ctx.runtime_stage
    evaluator = MacroEvaluator(dialect=dialect or model.dialect, variables=variables,
                               config_variables=model_variables(model, ctx.variables), registry=_registry(model, ctx),
                               path=model.path, model_name=model.name, columns_of=_columns_lookup(ctx),
                               parents_of=_parents_lookup(ctx),
                               blueprint_variables=_blueprint_values(model.blueprint_variables, model.dialect),
                               unloaded_from=model.unloaded_from)
    for statement in model.pre_statements:
        if macro_name(statement) == "def":
            evaluator.transform(statement.copy())
    return evaluator


def _parents_lookup(ctx: RenderContext):
    def parents_of(name: str) -> tuple[str, ...] | None:
        model = ctx.models.get(name if "." in name else f"default.{name}")
        return tuple(sorted(model.depends_on)) if model is not None else None

    return parents_of


def _columns_lookup(ctx: RenderContext):
    def columns_of(name: str) -> tuple[tuple[str, str], ...] | None:
        key = name if "." in name else f"default.{name}"
        model = ctx.models.get(key)
        if model is None:
            return None
        return model.columns or cast_columns(model)

    return columns_of


@functools.lru_cache(maxsize=4096)
def cast_columns(model: Model) -> tuple[tuple[str, str], ...] | None:
    """A SQL model's columns and Spark types when every projection of its query is a named CAST
    (`status::TEXT AS status`): the types SQLMesh infers for `columns_to_types` without a schema.

    >>> from bot.project.model import Kind
    >>> q = parse_sql("SELECT a::INT AS a, CAST(b AS TEXT) AS b FROM t", "duckdb")[0]
    >>> cast_columns(Model(name="s.m", kind=Kind(), dialect="duckdb", path=Path("m.sql"), query=q))
    (('a', 'INT'), ('b', 'STRING'))
    """
    if not isinstance(model.query, exp.Select):
        return None
    columns = []
    for projection in model.query.expressions:
        inner = projection.this if isinstance(projection, exp.Alias) else projection
        if not isinstance(inner, exp.Cast) or not projection.alias_or_name:
            return None
        columns.append((projection.alias_or_name.lower(), inner.to.sql(dialect="spark")))
    return tuple(columns)


def _table_keys(table: exp.Table) -> list[str]:
    parts = [p.lower() for p in (table.catalog, table.db, table.name) if p]
    if len(parts) == 1:
        return [f"default.{parts[0]}"]
    keys = [".".join(parts)]
    if len(parts) == 3:
        keys.append(".".join(parts[1:]))
    return keys


def _referenced_model(table: exp.Table, names: Mapping[str, Any], ctes: set[str]) -> str | None:
    if table.meta.get(_MAPPED) or not isinstance(table.this, exp.Identifier):
        return None
    if not table.db and table.name.lower() in ctes:
        return None
    return next((key for key in _table_keys(table) if key in names), None)


def _alias_of(table: exp.Table) -> exp.TableAlias:
    alias = table.args.get("alias")
    return alias.copy() if alias is not None else exp.TableAlias(this=exp.to_identifier(table.name))


def _map_tables(tree: exp.Expression, ctx: RenderContext, stack: tuple[str, ...]) -> exp.Expression:
    if not ctx.table_mapping and not ctx.models:
        return tree
    nodes = list(tree.find_all(exp.CTE, exp.Table, exp.Column))
    ctes = {node.alias_or_name.lower() for node in nodes if isinstance(node, exp.CTE)}
    qualified: set[tuple[str, str]] = set()
    for table in nodes:
        if not isinstance(table, exp.Table):
            continue
        embedded = _referenced_model(table, ctx.models, ctes)
        if embedded is not None and ctx.models[embedded].kind.name is KindName.EMBEDDED:
            if embedded in stack:
                raise ConfigError(f"EMBEDDED models reference each other: {' -> '.join((*stack, embedded))}",
                                  path=ctx.models[embedded].path)
            inner = _render(ctx.models[embedded], ctx, (*stack, embedded))
            table.replace(exp.Subquery(this=inner, alias=_alias_of(table)))
            continue
        key = _referenced_model(table, ctx.table_mapping, ctes)
        if key is None:
            continue
        if table.db:
            qualified.add((table.db.lower(), table.name.lower()))
        target = _parse_table(ctx.table_mapping[key])
        if isinstance(table.parent, (exp.From, exp.Join)):  # a read: keep column references resolving
            table.set("alias", _alias_of(table))
        for part in ("this", "db", "catalog"):
            table.set(part, target.args.get(part))
        table.meta[_MAPPED] = True
    if qualified:
        _strip_column_qualifiers([n for n in nodes if isinstance(n, exp.Column)], qualified)
    return tree


def _strip_column_qualifiers(columns: list[exp.Column], qualified: set[tuple[str, str]]) -> None:
    """`db.orders.id` still resolves after `db.orders` became `physical AS orders`."""
    for column in columns:
        if column.args.get("db") is not None and (column.text("db").lower(), column.table.lower()) in qualified:
            column.set("db", None)
            column.set("catalog", None)


@functools.lru_cache(maxsize=65536)
def _parsed_table(name: str) -> exp.Table:
    return exp.to_table(name, dialect="spark")


def _parse_table(name: str) -> exp.Table:
    return _parsed_table(name).copy()


def _render(model: Model, ctx: RenderContext, stack: tuple[str, ...]) -> exp.Query:
    if model.query is None:
        raise ConfigError(f"model {model.name} has no SQL query to render", path=model.path)
    evaluator = make_evaluator(model, ctx)
    if model.sql_function:   # `@model(is_sql=True)`: its function gives this render's query
        query, _ = sql_function_query(resolve_sql_function(model), evaluator, name=model.name, dialect=model.dialect,
                                      path=model.path, line=model.line)
    else:
        query = _jinja_query(model, ctx) if model.jinja_query is not None else model.query.copy()
    rendered = evaluator.transform(query)
    if not isinstance(rendered, exp.Query):
        raise ConfigError(f"the query of model {model.name} is not a query after expanding macros",
                          path=model.path, line=model.line)
    if not model.query_text or "sha" in model.query_text.lower():   # a walk only where a hash may be
        _spark_hash_functions(rendered)
    if not model.query_text or "over" in model.query_text.lower():   # a walk only where a window may be
        order_all_peers(rendered)
    if model.dialect not in _SPARK_DIALECTS and (not model.query_text or _FLOAT_WIDTHS.search(model.query_text)):
        keep_dialect_float_widths(rendered, model.dialect)
    if model.dialect == "duckdb" and (not model.query_text or _FLOAT_NAMES.search(model.query_text)):
        keep_float32_arithmetic(rendered)
    if not model.query_text or _ARITHMETIC_SIGNS.search(model.query_text):   # a walk only where one may be
        keep_dialect_arithmetic(rendered, model.dialect)
    return _map_tables(rendered, ctx, stack)


def _spark_hash_functions(tree: exp.Expression) -> None:
    """BigQuery's SHA1/SHA256/SHA512 return bytes: Spark's SHA1/SHA2 return hex text (sqlglot 30.30
    writes SHA2 without UNHEX, and SHA1 as a function Spark does not have)."""
    for node in list(tree.find_all(exp.SHA1Digest, exp.SHA2Digest)):
        digest = exp.SHA(this=node.this) if isinstance(node, exp.SHA1Digest) else \
            exp.SHA2(this=node.this, length=node.args.get("length") or exp.Literal.number(256))
        node.replace(exp.Unhex(this=digest))


def _jinja_values(model: Model, ctx: RenderContext) -> JinjaValues:
    def resolve_table(name: str) -> str:
        key = normalize_name(name, model.dialect)
        return quoted_table(ctx.table_mapping.get(key, key), model.dialect)

    this_model = ctx.this_model or ctx.table_mapping.get(model.name, model.name)
    return JinjaValues(start=ctx.start, end=ctx.end, execution_time=ctx.execution_time,
                       variables=model_variables(model, ctx.variables),
                       gateway=ctx.gateway, this_model=quoted_table(this_model, model.dialect),
                       runtime_stage=ctx.runtime_stage, resolve_table=resolve_table)


def _render_jinja(model: Model, ctx: RenderContext, block: JinjaBlock) -> list[exp.Expression]:
    sql = render_jinja(block, values=_jinja_values(model, ctx), macros=model.jinja_macros, path=model.path,
                       model_name=model.name)
    return parse_rendered(sql, dialect=model.dialect, block=block, path=model.path, model_name=model.name)


def _jinja_query(model: Model, ctx: RenderContext) -> exp.Expression:
    """The JINJA_QUERY block rendered for this interval (the load-time render only serves the reference one)."""
    block = JinjaBlock(JINJA_QUERY, model.jinja_query or "", model.jinja_line)
    parsed = _render_jinja(model, ctx, block)
    if len(parsed) != 1:
        raise ConfigError(f"model {model.name}: the JINJA_QUERY block must render to one query",
                          path=model.path, line=model.jinja_line)
    return parsed[0]


def render_query(model: Model, *, start: int | None = None, end: int | None = None,
                 execution_time: int | None = None, variables: Mapping[str, Any] | None = None,
                 table_mapping: Mapping[str, str] | None = None, models: Mapping[str, Model] | None = None,
                 gateway: str = "local", macros: MacroRegistry | None = None,
                 this_model: str | None = None, runtime_stage: str = "loading") -> exp.Query:
    """The model's query as a Spark-dialect AST (a fresh copy; `model.query` is never mutated).

    start/end are epoch ms of the interval [start, end); None means the reference interval, and
    execution_time defaults to end. `table_mapping` maps model names (`db.orders`) to the names to
    read (physical tables or views), keeping the alias (`... AS orders`); `@this_model` resolves to
    `this_model`, else table_mapping[model.name], else the model name. `models` lets EMBEDDED parents
    be inlined as subqueries and gives @STAR its columns. `macros` defaults to the user macros of the
    project containing model.path. `runtime_stage` is what `@runtime_stage` reads (SQLMesh's stages:
    loading, creating, evaluating, auditing, testing, before_all, after_all).
    """
    ctx = _context(start=start, end=end, execution_time=execution_time, variables=variables,
                   table_mapping=table_mapping, models=models, gateway=gateway, macros=macros,
                   this_model=this_model, runtime_stage=runtime_stage)
    return _render(model, ctx, (model.name,))


def render_sql(model: Model, **kwargs: Any) -> str:
    """render_query(...) as Spark SQL text with every identifier quoted."""
    return render_query(model, **kwargs).sql(dialect="spark", identify=True, copy=False)


def normalized_query_sql(model: Model, **kwargs: Any) -> str:
    """The rendered query at the reference interval (unless given), without comments, canonically formatted.

    Comment- and whitespace-only edits give the same text; used for the data hash.
    """
    return render_query(model, **kwargs).sql(dialect="spark", identify=True, comments=False, copy=False)


def render_expression(expression: exp.Expression, *, model: Model, dialect: str | None = None,
                      **kwargs: Any) -> list[exp.Expression]:
    """Render any statement (an audit query, a pre/post statement) in `model`'s macro context.

    Returns zero (a @DEF, a false @IF), one or several Spark-dialect expressions.
    """
    ctx = _context(**kwargs)
    evaluator = make_evaluator(model, ctx, dialect=dialect)
    if macro_name(expression) == "def":
        return []
    jinja = statement_text(expression)
    sources = [expression.copy()] if jinja is None else \
        _render_jinja(model, ctx, JinjaBlock("JINJA_STATEMENT", jinja, model.line))
    items: list[exp.Expression] = []
    for source in sources:
        result = evaluator.transform(source)
        items += result if isinstance(result, list) else [result] if result is not None else []
    for item in items:
        if (dialect or model.dialect) not in _SPARK_DIALECTS:
            keep_dialect_float_widths(item, dialect or model.dialect)
        keep_dialect_arithmetic(item, dialect or model.dialect)
    return [_map_tables(item, ctx, (model.name,)) for item in items]


def render_statements(model: Model, statements: tuple[exp.Expression, ...], **kwargs: Any) -> list[str]:
    """Pre/post statements rendered like the query (macros expanded, tables mapped), as Spark SQL.

    Statements that are only a @DEF, or a false @IF, are dropped.
    """
    return [item.sql(dialect="spark", identify=True, copy=False)
            for statement in statements
            for item in render_expression(statement, model=model, **kwargs)]
