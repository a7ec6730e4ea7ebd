"""Turn one models/*.sql file into a Model: header properties, statements, dependencies, macro references."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from croniter import croniter
from sqlglot import exp

from bot.errors import ConfigError
from bot.project.audit_parser import audits_from_blocks
from bot.project.blueprints import (Blueprint, as_sql_pairs, blueprint_tables, interpolate_bare, interpolate_braced,
                                   read_blueprints, scalar_variables)
from bot.project.config import ModelDefaults
from bot.project.header import (Block, Prop, Statement, column_types, parse_body, parse_value,
                                split_blocks, value_bool, value_items, value_names, value_pairs,
                                value_text)
from bot.project.jinja import (JINJA_STATEMENT, JinjaBlock, JinjaSettings, JinjaValues, block_index,
                                cut_blocks, parse_rendered, quoted_table, render_jinja, statement_expression)
from bot.project.kinds import KIND_LEVEL_KEYS, ignored_kind_properties, parse_kind
from bot.project.limits import SEED
from bot.project.model import AuditRef, KindName, Model
from bot.project.render import REFERENCE_END, REFERENCE_START
from bot.project.sqltext import (line_at, macro_call_name, normalize_name, table_references, to_sql)
from bot.timeline.times import TimeParseError, to_ms

BUILTIN_MACRO_VARIABLES = frozenset(
    f"{prefix}_{suffix}"
    for prefix in ("start", "end", "execution")
    for suffix in ("ds", "ts", "date", "dt", "epoch", "millis", "tstz", "hour")
) | frozenset({"this_model", "this_env", "gateway", "runtime_stage", "model_kind_name", "latest_ds"})
BUILTIN_MACRO_FUNCTIONS = frozenset({
    "def", "if", "each", "var", "blueprint_var", "sql", "star", "reduce", "filter", "with", "join",
    "where", "group_by", "having", "order_by", "limit", "generate_surrogate_key", "safe_add",
    "safe_sub", "safe_div", "union", "haversine_distance", "pivot", "deduplicate", "date_spine",
    "resolve_template", "and", "or", "eval", "map", "resolve_table", "this_model"})
_IGNORED_KEYS = frozenset({
    "stamp", "interval_unit", "allow_partials", "storage_format", "table_format", "clustered_by",
    "virtual_properties", "gateway", "signals", "references",
    "optimize_query", "validate_query", "project", "cron_tz",
    "audits_properties", "kind_properties", "virtual_environment_mode", "mview", "column_types"})
_TOOLING_KEYS = frozenset({"ignored_rules", "formatting"})   # read by `meshbot lint` and `meshbot format`
_KNOWN_KEYS = frozenset({
    "name", "kind", "dialect", "cron", "start", "end", "grain", "grains", "audits", "owner", "tags",
    "description", "column_descriptions", "columns", "partitioned_by", "physical_properties",
    "session_properties",
    "depends_on", "enabled", *KIND_LEVEL_KEYS})


@dataclass(frozen=True)
class MacroRef:
    """A macro used by a model: `call` (`@name(...)`) or `var` (`@name`), with the file line."""

    name: str
    kind: str
    line: int


@dataclass(frozen=True)
class ParsedModel:
    """What the loader keeps (and caches) per model file."""

    model: Model
    macro_refs: tuple[MacroRef, ...] = ()
    audits: tuple[Any, ...] = ()    # AuditDefinitions written inline (`AUDIT (...)` after the query)
    warnings: tuple[tuple[str, int], ...] = ()   # (message, line): properties meshbot does not use
    cacheable: bool = True          # False when a macro generated the file's blueprints (macros may change)


def parse_model_file(path: Path, text: str, *, defaults: ModelDefaults,
                     variables: Mapping[str, Any] | None = None,
                     jinja: JinjaSettings | None = None, root: Path | None = None) -> tuple[ParsedModel, ...]:
    """Parse one SQL model file into its model, or one model per blueprint; problems name `path` and the line.

    `@{name}` takes the blueprint's value, else the config variable's (`variables`). Jinja blocks are
    rendered at the reference interval with `jinja`'s variables and macros: the rendered query gives the
    parents and columns; rendering again per interval happens in bot.project.render. A seed path
    `$root/seeds/x.csv` starts at the project `root` (as in SQLMesh), another one at the model's folder.
    """
    source = text
    text, jinja_blocks = cut_blocks(text, path=path)
    parse = functools.partial(_parse_model, path, defaults=defaults, source=source, jinja_blocks=jinja_blocks,
                              jinja=jinja or JinjaSettings(), root=root or path.parent)
    config_values = scalar_variables(variables or {}) if "@{" in text else {}
    blocks = _model_blocks(text, path)
    prop = next((p for p in blocks[0].props if p.key == "blueprints"), None)
    if prop is None:
        if config_values:
            text = interpolate_braced(text, config_values, dialect=defaults.dialect)
            blocks = _model_blocks(text, path)
        return (parse(text, blocks, blueprint={}),)
    dialect_prop = next((p for p in blocks[0].props if p.key == "dialect"), None)
    dialect = value_text(parse_value(dialect_prop, dialect="", path=path), "").lower() \
        if dialect_prop else defaults.dialect
    models = []
    for blueprint in read_blueprints(prop, dialect=dialect, path=path):
        own_text = interpolate_braced(text, {**config_values, **blueprint}, dialect=dialect)
        models.append(parse(own_text, _model_blocks(own_text, path), blueprint=blueprint))
    if prop.text.lstrip().startswith("@"):
        models = [dataclasses.replace(item, cacheable=False) for item in models]
    return tuple(models)


def _model_blocks(text: str, path: Path) -> list[Block]:
    """The MODEL block first, then the file's inline AUDIT blocks."""
    all_blocks = split_blocks(text, keyword="MODEL", path=path, also="AUDIT")
    blocks = [b for b in all_blocks if b.keyword == "MODEL"]
    if len(blocks) > 1:
        raise ConfigError("a model file holds exactly one MODEL (...) block", path=path, line=blocks[1].line)
    return blocks + [b for b in all_blocks if b.keyword == "AUDIT"]


def _parse_model(path: Path, text: str, blocks: list[Block], *, defaults: ModelDefaults, blueprint: Blueprint,
                 source: str, jinja_blocks: tuple[JinjaBlock, ...], jinja: JinjaSettings, root: Path) -> ParsedModel:
    block, audit_blocks = blocks[0], blocks[1:]
    notes: list[tuple[str, int]] = []
    props = _props_by_key(block, path, notes)
    dialect = value_text(parse_value(props["dialect"], dialect="", path=path), "").lower() \
        if "dialect" in props else defaults.dialect
    if blueprint:
        props = {key: Prop(p.key, interpolate_bare(p.text, blueprint, dialect=dialect), p.line)
                 for key, p in props.items()}
    statements = parse_body(block, text=text, dialect=dialect, path=path)
    fields = _header_fields(props, dialect=dialect, defaults=defaults, path=path, line=block.line)
    statements, jinja_fields = _resolve_jinja(statements, jinja_blocks, name=fields["name"], dialect=dialect,
                                              path=path, settings=jinja or JinjaSettings())
    defaults.catalogs.strip([s.expression for s in statements], path=path, owner=f"model `{fields['name']}`",
                            text=text)
    query_index = next((i for i, s in enumerate(statements) if isinstance(s.expression, exp.Query)), None)
    kind = fields["kind"]
    if kind.name is KindName.INCREMENTAL_BY_PARTITION and not fields["partitioned_by"]:
        raise ConfigError(f"model {fields['name']}: kind INCREMENTAL_BY_PARTITION requires `partitioned_by`",
                          path=path, line=props["kind"].line)
    if query_index is None and kind.name is not KindName.SEED:
        raise ConfigError(f"model `{fields['name']}` has no query (a SELECT after the MODEL header)",
                          path=path, line=block.line)
    pre, query_stmt, post = _around_query(statements, query_index)
    if kind.name is KindName.SEED:
        fields.update(_seed_fields(kind.seed_path, path=path, line=props["kind"].line, root=root))
    everything = [s.expression for s in statements]
    depends = (table_references(everything) | blueprint_tables(everything, blueprint, dialect)
               | set(fields["depends_on_explicit"])) - {fields["name"]}
    model = Model(
        **fields, dialect=dialect, path=path, line=block.line,
        query=query_stmt.expression if query_stmt else None,
        query_text=query_stmt.text if query_stmt else "",
        pre_statements=pre, post_statements=post, depends_on=frozenset(depends), **jinja_fields,
        blueprint_variables=as_sql_pairs(blueprint, dialect),
    )
    inline = tuple(audits_from_blocks(audit_blocks, text=text, path=path, default_dialect=dialect,
                                      catalogs=defaults.catalogs)) if audit_blocks else ()
    notes += [(f"model {model.name}: kind property `{key}` is not supported by meshbot and is ignored", line)
              for key, line in ignored_kind_properties(props.get("kind"), path)]
    refs = tuple(r for r in macro_references(everything, text=source if jinja_blocks else text, start=0)
                 if not (r.kind == "var" and r.name in blueprint))
    return ParsedModel(model, refs, inline, tuple(notes))


def _around_query(statements: list[Statement], query_index: int | None) -> tuple[
        tuple[exp.Expression, ...], Statement | None, tuple[exp.Expression, ...]]:
    """(pre-statements, the query, post-statements); without a query every statement is a pre-statement."""
    if query_index is None:
        return tuple(s.expression for s in statements), None, ()
    return (tuple(s.expression for s in statements[:query_index]), statements[query_index],
            tuple(s.expression for s in statements[query_index + 1:]))




def _resolve_jinja(statements: list[Statement], blocks: tuple[JinjaBlock, ...], *, name: str, dialect: str,
                   path: Path, settings: JinjaSettings) -> tuple[list[Statement], dict[str, Any]]:
    """Jinja placeholders → what the model keeps: a JINJA_QUERY's reference render (it gives the parents
    and columns), a JINJA_STATEMENT as written. Every block is rendered once here, so a syntax error or
    an undefined name is reported while loading, with its file line."""
    if not blocks:
        return statements, {}
    macros = settings.macros.used_by(*(b.text for b in blocks))
    values = JinjaValues(start=REFERENCE_START, end=REFERENCE_END, execution_time=REFERENCE_END,
                         variables=settings.variables, gateway=settings.gateway,
                         this_model=quoted_table(name, dialect),
                         resolve_table=lambda table: quoted_table(normalize_name(table, dialect), dialect))
    result: list[Statement] = []
    fields: dict[str, Any] = {"jinja_macros": macros}
    for statement in statements:
        index = block_index(statement.expression)
        if index is None:
            result.append(statement)
            continue
        block = blocks[index]
        sql = render_jinja(block, values=values, macros=macros, path=path, model_name=name)
        if block.kind == JINJA_STATEMENT:
            result.append(Statement(statement_expression(block.text), block.text.strip(), block.line))
            continue
        parsed = parse_rendered(sql, dialect=dialect, block=block, path=path, model_name=name)
        if "jinja_query" in fields or len(parsed) != 1 or not isinstance(parsed[0], exp.Query):
            raise ConfigError(f"model {name}: a model has one JINJA_QUERY block, rendering to one query",
                              path=path, line=block.line)
        result.append(Statement(parsed[0], block.text.strip(), block.line))
        fields.update(jinja_query=block.text, jinja_line=block.line)
    return result, fields


def _props_by_key(block: Block, path: Path, notes: list[tuple[str, int]]) -> dict[str, Prop]:
    props: dict[str, Prop] = {}
    for prop in block.props:
        if prop.key in props:
            raise ConfigError(f"`{prop.key}` is set twice in the MODEL header", path=path, line=prop.line)
        if prop.key == "blueprints" or prop.key in _TOOLING_KEYS:
            continue
        if prop.key not in _KNOWN_KEYS:
            what = "is not supported by meshbot" if prop.key in _IGNORED_KEYS else "is not a MODEL property"
            notes.append((f"MODEL property `{prop.key}` {what} and is ignored", prop.line))
            continue
        props[prop.key] = prop
    if "name" not in props:
        raise ConfigError("the MODEL header needs a `name`", path=path, line=block.line)
    if "grain" in props and "grains" in props:
        raise ConfigError("set either `grain` or `grains`, not both", path=path, line=props["grains"].line)
    return props


def _header_fields(props: dict[str, Prop], *, dialect: str, defaults: ModelDefaults, path: Path,
                   line: int) -> dict[str, Any]:
    values = {k: parse_value(p, dialect=dialect, path=path) for k, p in props.items()
              if k not in _IGNORED_KEYS and k not in ("kind", "columns")}

    def text(key: str, default: str | None = None) -> str | None:
        return value_text(values[key], dialect) if key in values else default

    name = defaults.catalogs.model_name(normalize_name(text("name"), dialect), path=path, line=props["name"].line)
    cron = text("cron", defaults.cron)
    if not _valid_cron(cron):
        raise ConfigError(f"invalid cron `{cron}`", path=path, line=props.get("cron", Prop("", "", line)).line)
    for key in ("start", "end"):
        if key in values:
            try:
                to_ms(text(key) or "", relative_base=0)
            except TimeParseError as error:
                raise ConfigError(f"`{key}`: {error.detail}", path=path, line=props[key].line) from None
    grain_key = "grains" if "grains" in values else "grain"
    return dict(
        name=name,
        kind=parse_kind(props.get("kind"), default=defaults.kind, dialect=dialect, path=path,
                        extra={k: props[k] for k in KIND_LEVEL_KEYS if k in props},
                        on_destructive_change=defaults.on_destructive_change, model_name=name),
        cron=cron,
        start=text("start", defaults.start),
        end=text("end"),
        grains=tuple(n.lower() for n in value_names(values[grain_key], dialect)) if grain_key in values else (),
        audits=tuple(audit_refs(props["audits"], values["audits"], dialect=dialect, path=path))
        if "audits" in values else (),
        owner=text("owner", defaults.owner),
        tags=value_names(values["tags"], dialect) if "tags" in values else (),
        description=text("description"),
        column_descriptions=tuple((k.lower(), v) for k, v in value_pairs(
            props["column_descriptions"], values["column_descriptions"], dialect, path))
        if "column_descriptions" in values else (),
        columns=column_types(props["columns"], dialect=dialect, path=path) if "columns" in props else (),
        partitioned_by=tuple(_partition_text(v, dialect) for v in value_items(values["partitioned_by"]))
        if "partitioned_by" in values else (),
        physical_properties=value_pairs(props["physical_properties"], values["physical_properties"],
                                        dialect, path) if "physical_properties" in values else (),
        session_properties=value_pairs(props["session_properties"], values["session_properties"],
                                       dialect, path) if "session_properties" in values else (),
        depends_on_explicit=tuple(defaults.catalogs.reference(normalize_name(n, dialect), path=path,
                                                              owner=f"`depends_on` of model `{name}`",
                                                              line=props["depends_on"].line)
                                  for n in value_names(values["depends_on"], dialect))
        if "depends_on" in values else (),
        enabled=value_bool(props["enabled"], values["enabled"], dialect, path) if "enabled" in values else True,
    )


@functools.lru_cache(maxsize=256)
def _valid_cron(cron: str) -> bool:
    """croniter's check, once per distinct expression (it expands every field: slow per model)."""
    return croniter.is_valid(cron)


def _partition_text(value: exp.Expression, dialect: str) -> str:
    if isinstance(value, exp.Column) and not value.table:
        return value.name.lower()
    return to_sql(value, "spark")


def audit_refs(prop: Prop, value: exp.Expression, *, dialect: str, path: Path) -> list[AuditRef]:
    """`audits (not_null(columns := (id)), my_audit)` → AuditRefs; `_non_blocking`/`blocking := false` honoured."""
    refs = []
    for item in value_items(value):
        if isinstance(item, exp.Anonymous):
            name, args = str(item.this), item.expressions
        elif isinstance(item, (exp.Column, exp.Identifier, exp.Var)):
            name, args = item.name, []
        else:
            raise ConfigError(f"`audits` expects `name(arg := value, ...)`, got `{item.sql()}`",
                              path=path, line=prop.line)
        refs.append(_audit_ref(name.lower(), args, dialect=dialect, path=path, line=prop.line))
    return refs


def _audit_ref(name: str, args: list, *, dialect: str, path: Path, line: int) -> AuditRef:
    blocking = True
    if name.endswith("_non_blocking"):
        name, blocking = name[: -len("_non_blocking")], False
    pairs = []
    for arg in args:
        if not isinstance(arg, (exp.PropertyEQ, exp.EQ)):
            raise ConfigError(f"audit `{name}` arguments must be `name := value`", path=path, line=line)
        key = value_text(arg.this, dialect).lower()
        if key == "blocking":
            blocking = value_text(arg.expression, dialect).lower() != "false"
        else:
            pairs.append((key, to_sql(arg.expression, "spark")))
    return AuditRef(name=name, args=tuple(pairs), blocking=blocking)


def _seed_fields(seed_path: str | None, *, path: Path, line: int, root: Path) -> dict[str, Any]:
    marker, *rest = Path(seed_path or "").parts or ("",)
    target = (root.joinpath(*rest) if marker.lower() == "$root" else path.parent / (seed_path or "")).resolve()
    if not target.is_file():
        raise ConfigError(f"seed file `{seed_path}` not found (looked for {target})", path=path, line=line)
    return {"seed_abs_path": target, "seed_content_hash": seed_hash(target)}


def seed_hash(path: Path) -> str:
    """The SHA-256 of a seed file, read in chunks; a ConfigError, before it is read, when it is over
    the size limit for seeds (bot.project.limits)."""
    with open(path, "rb") as handle:
        SEED.check(path, os.fstat(handle.fileno()).st_size)
        return hashlib.file_digest(handle, "sha256").hexdigest()


def macro_references(expressions: list[exp.Expression], *, text: str, start: int) -> tuple[MacroRef, ...]:
    """Macros used by the statements that are not built-in variables, @DEF'd names or lambda arguments."""
    defined: set[str] = set()
    candidates: dict[tuple[str, str], None] = {}   # in order of first use; one walk of each statement
    for expression in expressions:
        for node in expression.walk():
            if isinstance(node, exp.Parameter):
                if node.name:
                    candidates[(node.name.lower(), "var")] = None
            elif isinstance(node, exp.Lambda):
                defined.update(e.name.lower() for e in node.expressions)
            elif (name := macro_call_name(node)) is not None:
                candidates[(name, "call")] = None
                if name == "def" and node.expressions:
                    defined.add(node.expressions[0].name.lower())
    return tuple(MacroRef(name, kind, _macro_line(text, name, start)) for name, kind in candidates
                 if not (name in BUILTIN_MACRO_FUNCTIONS if kind == "call"
                         else name in BUILTIN_MACRO_VARIABLES or name in defined))


def _macro_line(text: str, name: str, start: int) -> int:
    match = re.compile(rf"@{re.escape(name)}\b", re.I).search(text, start)
    return line_at(text, match.start()) if match else 1
