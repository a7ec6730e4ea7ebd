"""Model blueprints: read `blueprints (...)` into variable sets and interpolate `@{name}` into model text."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Mapping

import sqlglot
from sqlglot import exp

from bot.errors import ConfigError
from bot.project.header import Prop, parse_value, value_text
from bot.project.macros import EMPTY_REGISTRY, MacroEvaluator, load_macros
from bot.project.sqlmesh_shim import project_root
from bot.project.sqltext import macro_call_name, normalize_name, to_sql

Blueprint = dict[str, exp.Expression]

# Quoted strings, quoted identifiers and comments are never interpolated into.
_SKIP = r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|`[^`]*`|--[^\n]*|/\*.*?(?:\*/|\Z)"""
_BRACED = re.compile(rf"(?P<skip>{_SKIP})|@\{{\s*(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*\}}", re.S)
_ONE_BRACED = r"@\{\s*[A-Za-z_][A-Za-z0-9_]*\s*\}"
# An identifier written with `@{name}`s in it (`@{c}`, `stg_@{c}_orders`): SQLMesh fills it in as one identifier.
_BRACED_WORD = re.compile(rf"(?P<skip>{_SKIP})|(?P<word>(?:\w|{_ONE_BRACED})*{_ONE_BRACED}(?:\w|{_ONE_BRACED})*)", re.S)
_NEEDS_NO_QUOTES = re.compile(r"[\w.]*")   # a plain name, or dotted names (`db.orders`): written as they are
_BARE = re.compile(rf"(?P<skip>{_SKIP})|@(?P<name>[A-Za-z_][A-Za-z0-9_]*)\b(?!\s*\()", re.S)


def read_blueprints(prop: Prop, *, dialect: str, path: Path) -> list[Blueprint]:
    """`blueprints ((a := x, b := 1), (a := y))` → one {name: value} mapping per blueprint.

    Names are lower-cased; values stay sqlglot expressions, as written. `blueprints @gen()` calls the
    project's macro while loading; it returns that text (or expressions) instead.
    """
    value: Any = parse_value(prop, dialect=dialect, path=path)
    if macro_call_name(value) is not None:
        value = _generated(value, prop=prop, dialect=dialect, path=path)
    if isinstance(value, list):
        items = value
    elif isinstance(value, exp.Paren):    # one blueprint: `((a := x, b := 1))` or `((a := x))`
        items = [value.unnest()]
    elif isinstance(value, (exp.Tuple, exp.Array)):
        items = list(value.expressions)
    else:
        items = [value]
    blueprints = [_one_blueprint(item, prop=prop, path=path) for item in items]
    if not blueprints:
        raise ConfigError("`blueprints` needs at least one `(name := value, ...)` entry", path=path, line=prop.line)
    return blueprints


def _generated(call: exp.Expression, *, prop: Prop, dialect: str, path: Path) -> Any:
    root = project_root(path)
    evaluator = MacroEvaluator(dialect=dialect, variables={"runtime_stage": "loading"}, config_variables={},
                               registry=load_macros(root) if root else EMPTY_REGISTRY, path=path)
    result = evaluator.transform(call)
    if result is None or result == []:
        raise ConfigError(f"`blueprints {prop.text}` produced no blueprints", path=path, line=prop.line)
    return result


def _one_blueprint(item: exp.Expression, *, prop: Prop, path: Path) -> Blueprint:
    item = item.unnest()
    pairs = item.expressions if isinstance(item, (exp.Tuple, exp.Array)) else [item]
    variables: Blueprint = {}
    for pair in pairs:
        if not isinstance(pair, (exp.PropertyEQ, exp.EQ)) or not pair.this.name:
            raise ConfigError(f"each blueprint is `(name := value, ...)`, got `{item.sql()}`",
                              path=path, line=prop.line)
        variables[pair.this.name.lower()] = pair.expression
    return variables


def blueprint_from_python(raw: Any, *, path: Path, line: int | None = None) -> Blueprint:
    """A Python model's blueprint (a dict) as expressions; `@{name}` puts a string in unquoted."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"each blueprint of @model(blueprints=...) must be a dict, got {raw!r}",
                          path=path, line=line)
    return {str(key).lower(): _python_value(value) for key, value in raw.items()}


def _python_value(value: Any) -> exp.Expression:
    return exp.convert(value)


def python_values(pairs: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """A model's stored blueprint variables as Python values (what a Python model's context returns).

    >>> python_values((("n", "2"), ("who", "'acme'"), ("on", "TRUE"), ("x", "a + 1")))
    {'n': 2, 'who': 'acme', 'on': True, 'x': 'a + 1'}
    """
    values: dict[str, Any] = {}
    for name, sql in pairs:
        node = sqlglot.parse_one(sql)
        if isinstance(node, exp.Literal):
            values[name] = node.name if node.is_string else (int(node.this) if node.is_int else float(node.this))
        elif isinstance(node, exp.Boolean):
            values[name] = bool(node.this)
        elif isinstance(node, exp.Null):
            values[name] = None
        else:
            values[name] = sql
    return values


def scalar_variables(variables: Mapping[str, Any]) -> Blueprint:
    """Config variables that can go into an identifier (`@{name}`): strings, numbers and booleans.

    >>> {k: v.sql() for k, v in scalar_variables({"Schema": "s1", "n": 2, "xs": [1]}).items()}
    {'schema': "'s1'", 'n': '2'}
    """
    return {str(k).lower(): exp.convert(v) for k, v in variables.items() if isinstance(v, (str, int, float, bool))}


def identifier_text(value: exp.Expression, dialect: str) -> str:
    """What `@{name}` puts into an identifier: a name or string unquoted, anything else as SQL.

    >>> identifier_text(exp.Literal.string("acme"), "duckdb"), identifier_text(exp.column("globex"), "duckdb")
    ('acme', 'globex')
    """
    return value_text(value, dialect)


def interpolate_braced(text: str, blueprint: Blueprint, *, dialect: str) -> str:
    """Replace every `@{name}` of a blueprint variable (outside strings and comments) by its identifier text.

    An identifier that the values make other than a plain name (`@{f}` with f := "pay to see") is
    quoted, as SQLMesh's identifier would be.

    >>> interpolate_braced("name @{c}.orders -- @{c}", {"c": exp.column("acme")}, dialect="duckdb")
    'name acme.orders -- @{c}'
    >>> interpolate_braced("SELECT x_@{f} AS a", {"f": exp.column("pay to see", quoted=True)}, dialect="duckdb")
    'SELECT "x_pay to see" AS a'
    """
    def fill(match: re.Match[str]) -> str:
        word = match.group("word")
        if word is None:
            return match.group(0)
        filled = _interpolate(_BRACED, word, blueprint, lambda value: identifier_text(value, dialect))
        if "@{" in filled or _NEEDS_NO_QUOTES.fullmatch(filled):   # another variable fills it in later
            return filled
        return exp.to_identifier(filled, quoted=True).sql(dialect)

    return _BRACED_WORD.sub(fill, text)


def interpolate_bare(text: str, blueprint: Blueprint, *, dialect: str) -> str:
    """Replace `@name` of a blueprint variable (not a macro call) by the value's SQL; for header values.

    >>> interpolate_bare("@n + 1", {"n": exp.Literal.number(2)}, dialect="duckdb")
    '2 + 1'
    """
    return _interpolate(_BARE, text, blueprint, lambda value: to_sql(value, dialect))


def _interpolate(pattern: re.Pattern[str], text: str, blueprint: Blueprint,
                 render: Callable[[exp.Expression], str]) -> str:
    """Each `name` match of a blueprint variable replaced by `render(value)`; other matches kept."""
    def replace(match: re.Match[str]) -> str:
        name = match.group("name")
        if name is None or name.lower() not in blueprint:
            return match.group(0)
        return render(blueprint[name.lower()])

    return pattern.sub(replace, text)


def blueprint_tables(expressions: list[exp.Expression], blueprint: Blueprint, dialect: str) -> set[str]:
    """Tables read as `FROM @name` where the blueprint's `name` is a table name: parents of the model.

    >>> blueprint_tables([exp.select("*").from_("t")], {}, "duckdb")
    set()
    """
    found = set()
    for expression in expressions:
        for table in expression.find_all(exp.Table):
            if isinstance(table.this, exp.Parameter) and table.this.name.lower() in blueprint:
                value = blueprint[table.this.name.lower()]
                found.add(normalize_name(identifier_text(value, dialect) if isinstance(value, exp.Literal)
                                         else value.sql(dialect), dialect))
    return found


def as_sql_pairs(blueprint: Blueprint, dialect: str) -> tuple[tuple[str, str], ...]:
    """The variables as sorted (name, SQL text) pairs: what a Model keeps and fingerprints."""
    return tuple(sorted((name, to_sql(value, dialect)) for name, value in blueprint.items()))
