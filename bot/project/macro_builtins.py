"""Built-in macro functions: @DEF, @IF, @EACH, @VAR, @SQL, @STAR and a few SQLMesh helpers."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Callable, MutableMapping, Protocol

from sqlglot import exp
from sqlglot.optimizer.simplify import simplify

from bot.project.sqltext import braced_text, fill_braced, has_braced


class MacroScope(Protocol):
    """What a built-in asks of the evaluator calling it (bot.project.macros.MacroEvaluator is one)."""

    dialect: str
    locals: MutableMapping[str, Any]
    columns_of: Callable[[str], Any]

    def var(self, name: str, default: Any = None) -> Any: ...
    def blueprint_var(self, name: str, default: Any = None) -> Any: ...
    def parse_one(self, text: str) -> exp.Expression: ...
    def error(self, message: str) -> Exception: ...
    def transform(self, expression: exp.Expression) -> Any: ...


def to_expression(value: Any) -> exp.Expression:
    """A Python value as a SQL expression: strings become string literals, dates casts."""
    if isinstance(value, exp.Expression):
        return value
    if isinstance(value, datetime):
        text = value.replace(tzinfo=None).isoformat(sep=" ")
        return exp.cast(exp.Literal.string(text), exp.DataType.build("TIMESTAMP"))
    if isinstance(value, date):
        return exp.cast(exp.Literal.string(value.isoformat()), exp.DataType.build("DATE"))
    if isinstance(value, (list, tuple)):
        return exp.Tuple(expressions=[to_expression(item) for item in value])
    return exp.convert(value)


def _name_of(ev: MacroScope, node: exp.Expression, macro: str) -> str:
    if isinstance(node, (exp.Column, exp.Identifier, exp.Literal, exp.Var)) or (
            isinstance(node, exp.Parameter) and node.this is not None):
        return node.name
    raise ev.error(f"@{macro} expects a name as first argument, got {node.sql(ev.dialect)!r}")


def def_(ev: MacroScope, name: exp.Expression, value: exp.Expression) -> None:
    """@DEF(name, value): define @name for the rest of the model; the statement disappears."""
    ev.locals[_name_of(ev, name, "DEF").lower()] = value
    return None


def _truthy(ev: MacroScope, cond: exp.Expression) -> bool:
    value = simplify(cond.copy())
    if isinstance(value, exp.Boolean):
        return bool(value.this)
    if isinstance(value, exp.Null):
        return False
    if isinstance(value, exp.Literal):
        return bool(value.this) if value.is_string else float(value.this) != 0
    if isinstance(value, exp.In) and all(isinstance(v, exp.Literal) for v in [value.this, *value.expressions]):
        return value.this.this in {v.this for v in value.expressions}
    if isinstance(value, exp.Not) and isinstance(value.this, exp.In):
        return not _truthy(ev, value.this)
    raise ev.error(f"@IF condition {cond.sql(ev.dialect)!r} does not evaluate to true or false")


def if_(ev: MacroScope, cond: exp.Expression, true: Any, false: Any = None) -> Any:
    """@IF(cond, a[, b]): a when cond is true, else b (or nothing)."""
    return true if _truthy(ev, cond) else false


def _items(node: exp.Expression) -> list[exp.Expression]:
    if isinstance(node, (exp.Array, exp.Tuple)):
        return list(node.expressions)
    if isinstance(node, exp.Paren):
        return [node.this]
    return [node]


def _substitute(body: exp.Expression, names: dict[str, exp.Expression], dialect: str) -> exp.Expression:
    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not node.table and node.name.lower() in names:
            return names[node.name.lower()].copy()
        if isinstance(node, exp.Parameter) and node.this is not None and node.name.lower() in names:
            return names[node.name.lower()].copy()
        if isinstance(node, exp.Identifier) and isinstance(node.this, str) and has_braced(node.this):
            return exp.to_identifier(fill_braced(node.this, lambda name: braced_text(names[name.lower()], dialect)
                                                 if name.lower() in names else None), quoted=node.quoted)
        if isinstance(node, exp.Identifier) and node.name.lower() in names:
            value = names[node.name.lower()]
            if isinstance(node.parent, (exp.Column, exp.Table, exp.TableAlias)) or node.arg_key == "alias":
                return exp.to_identifier(value.name)
            return value.copy()
        return node

    return body.transform(swap, copy=True)


def each(ev: MacroScope, items: exp.Expression, func: exp.Expression) -> list[exp.Expression]:
    """@EACH([a, b], x -> f(x)): f applied to each item; returns several expressions."""
    if not isinstance(func, exp.Lambda):
        raise ev.error("@EACH expects a lambda like `x -> x + 1` as second argument, "
                       f"got {func.sql(ev.dialect)!r}")
    params = [p.name.lower() for p in func.expressions]
    out = []
    for item in _items(items):
        body = _substitute(func.this, {params[0]: item}, ev.dialect)
        result = ev.transform(body)
        out.extend(result if isinstance(result, list) else [result] if result is not None else [])
    return out


def var(ev: MacroScope, name: exp.Expression, default: exp.Expression | None = None) -> Any:
    """@VAR('name'[, default]): a project variable; its default when unset (NULL without one)."""
    key = _name_of(ev, name, "VAR")
    value = ev.var(key)
    if value is None:
        return default if default is not None else exp.null()
    return to_expression(value)


def blueprint_var(ev: MacroScope, name: exp.Expression, default: exp.Expression | None = None) -> Any:
    """@BLUEPRINT_VAR('name'[, default]): a variable of the model's blueprint; its default (or NULL) when unset."""
    value = ev.blueprint_var(_name_of(ev, name, "BLUEPRINT_VAR"))
    if value is None:
        return default if default is not None else exp.null()
    return to_expression(value).copy()


def sql(ev: MacroScope, text: exp.Expression, *_: Any) -> exp.Expression:
    """@SQL('text'): the text parsed as SQL of the model's dialect."""
    if not (isinstance(text, exp.Literal) and text.is_string):
        raise ev.error(f"@SQL expects a string, got {text.sql(ev.dialect)!r}")
    return ev.parse_one(text.name)


def _list_names(node: exp.Expression | None) -> list[str]:
    return [item.name.lower() for item in _items(node)] if node is not None else []


def star(ev: MacroScope, relation: exp.Expression, alias: exp.Expression | None = None,
         exclude: exp.Expression | None = None, prefix: exp.Expression | None = None,
         suffix: exp.Expression | None = None, **_: Any) -> list[exp.Expression]:
    """@STAR(relation, exclude := [..], prefix := 'p_'): the relation's declared columns, cast to their types."""
    name = relation.sql(ev.dialect).replace('"', "").replace("`", "").lower()
    columns = ev.columns_of(name)
    if not columns:
        raise ev.error(f"@STAR({name}): the columns of {name} are unknown; declare them with `columns (...)`")
    table = alias.name if alias is not None else name.split(".")[-1]
    skip = set(_list_names(exclude))
    before, after = (prefix.name if prefix is not None else ""), (suffix.name if suffix is not None else "")
    return [
        exp.alias_(exp.cast(exp.column(column, table=table), exp.DataType.build(type_, dialect="spark")),
                   f"{before}{column}{after}")
        for column, type_ in columns if column.lower() not in skip
    ]


def generate_surrogate_key(ev: MacroScope, *columns: exp.Expression) -> exp.Expression:
    """@GENERATE_SURROGATE_KEY(a, b): MD5 of the columns' text, NULL-safe, `|`-separated."""
    parts: list[exp.Expression] = []
    for index, column in enumerate(columns):
        if index:
            parts.append(exp.Literal.string("|"))
        parts.append(exp.func("COALESCE", exp.cast(column, exp.DataType.build("TEXT")),
                              exp.Literal.string("_sqlmesh_surrogate_key_null_")))
    return exp.func("MD5", exp.Concat(expressions=parts))


def safe_div(ev: MacroScope, numerator: exp.Expression, denominator: exp.Expression) -> exp.Expression:
    """@SAFE_DIV(a, b): a / NULLIF(b, 0)."""
    return exp.Div(this=numerator, expression=exp.Nullif(this=denominator, expression=exp.Literal.number(0)))


BUILTINS: dict[str, Callable[..., Any]] = {
    "def": def_,
    "if": if_,
    "each": each,
    "var": var,
    "blueprint_var": blueprint_var,
    "sql": sql,
    "star": star,
    "generate_surrogate_key": generate_surrogate_key,
    "safe_div": safe_div,
}
