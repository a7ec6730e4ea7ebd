"""Bind a user macro's arguments and coerce them to its parameter annotations, as SQLMesh's evaluator does."""

from __future__ import annotations

import inspect
import types
import typing
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Callable, Mapping

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect

from bot.project.sqlmesh_date import to_datetime
from bot.project.sqlmesh_shim import SQL, ExecutionContext

_UNIONS = (typing.Union, types.UnionType)


class CoercionError(ValueError):
    """An argument does not fit its parameter's annotation."""


@dataclass(frozen=True)
class BadArgument:
    """Which parameter of a macro could not take its argument, and why."""

    parameter: str
    reason: str


def annotation_names(evaluator_type: type) -> dict[str, Any]:
    """Names a macro file may use in annotations without importing them (as SQLMesh resolves them)."""
    return {"t": typing, "typing": typing, "List": typing.List, "Tuple": typing.Tuple, "Union": typing.Union,
            "exp": exp, "SQL": SQL, "MacroEvaluator": evaluator_type, "ExecutionContext": ExecutionContext}


def bind_arguments(func: Callable[..., Any], evaluator: Any, args: list[exp.Expression],
                   kwargs: Mapping[str, exp.Expression], *,
                   not_coerced: Callable[[str, str], None] | None = None,
                   ) -> tuple[tuple[Any, ...], dict[str, Any]] | BadArgument:
    """The call's positional and keyword arguments, each coerced to its parameter's annotation. An argument
    that does not fit is passed on as written and told to `not_coerced(parameter, reason)`, as SQLMesh logs
    it and goes on; without `not_coerced` it is a BadArgument."""
    signature = inspect.signature(func)
    try:
        bound = signature.bind(evaluator, *args, **kwargs)
    except TypeError as error:
        return BadArgument("", str(error))
    try:
        hints = typing.get_type_hints(func, localns=annotation_names(type(evaluator)))
    except (NameError, TypeError):   # an annotation that cannot be resolved: pass arguments as they are
        hints = {}
    first = next(iter(signature.parameters), None)
    for name, value in bound.arguments.items():
        hint = hints.get(name)
        if hint is None or name == first:
            continue
        kind = signature.parameters[name].kind
        try:
            if kind is inspect.Parameter.VAR_POSITIONAL:
                bound.arguments[name] = tuple(coerce(v, hint, evaluator.dialect) for v in value)
            elif kind is inspect.Parameter.VAR_KEYWORD:
                bound.arguments[name] = {k: coerce(v, hint, evaluator.dialect) for k, v in value.items()}
            else:
                bound.arguments[name] = coerce(value, hint, evaluator.dialect)
        except CoercionError as error:
            if not_coerced is None:
                return BadArgument(name, str(error))
            not_coerced(name, str(error))
    return bound.args, bound.kwargs


def coerce(value: Any, hint: Any, dialect: str) -> Any:
    """`value` (an expression) as the type `hint` names; CoercionError when it does not fit.

    >>> coerce(exp.Literal.number(3), int, "duckdb"), coerce(exp.column("a"), str, "duckdb")
    (3, 'a')
    >>> coerce(exp.Array(expressions=[exp.Literal.number(1)]), list[int], "duckdb")
    [1]
    >>> coerce(exp.column("x").eq(1), SQL, "duckdb")
    'x = 1'
    """
    if hint is None or hint is Any or not isinstance(value, exp.Expression):
        return value
    base = typing.get_origin(hint) or hint
    if base in _UNIONS:
        for branch in typing.get_args(hint):
            try:
                return coerce(value, branch, dialect)
            except CoercionError:
                continue
        raise _failed(value, hint, dialect)
    if base is SQL:
        return SQL(value.sql(dialect))
    if base is typing.Literal:
        return _literal(value, hint, dialect)
    if isinstance(base, type) and isinstance(value, base):
        return value
    if isinstance(base, type) and issubclass(base, exp.Expression):
        return _expression(value, base, hint, dialect)
    converted = _scalar(value, base)
    if converted is not None:
        return converted
    if base in (list, tuple) and isinstance(value, (exp.Array, exp.Tuple)):
        return _sequence(value.expressions, base, hint, dialect)
    raise _failed(value, hint, dialect)


def _scalar(value: exp.Expression, base: Any) -> Any:
    if base in (int, float, str) and isinstance(value, exp.Literal):
        try:
            return base(value.this)
        except ValueError:
            return None
    if base is str and isinstance(value, exp.Column) and not value.table:
        return value.name
    if base is bool and isinstance(value, exp.Boolean):
        return bool(value.this)
    if base is datetime and isinstance(value, exp.Literal):
        return to_datetime(value.this)
    if base is date and isinstance(value, exp.Literal):
        return to_datetime(value.this).date()
    return None


def _sequence(items: list[exp.Expression], base: type, hint: Any, dialect: str) -> Any:
    generic = typing.get_args(hint)
    if base is list:
        return list(items) if not generic else [coerce(item, generic[0], dialect) for item in items]
    if not generic:
        return tuple(items)
    if generic[-1] is ...:
        return tuple(coerce(item, generic[0], dialect) for item in items)
    if len(generic) != len(items):
        raise CoercionError(f"expected {len(generic)} items, got {len(items)}")
    return tuple(coerce(item, kind, dialect) for item, kind in zip(items, generic))


def _expression(value: exp.Expression, base: type, hint: Any, dialect: str) -> exp.Expression:
    """Parse the argument again as the wanted node type (a string literal's text, else its SQL)."""
    parsers = Dialect.get_or_raise(dialect or None).parser_class.EXPRESSION_PARSERS
    text = value.this if isinstance(value, exp.Literal) else value.sql()
    if base not in parsers and not isinstance(value, exp.Literal):
        raise CoercionError(f"cannot coerce `{value.sql(dialect)}` to {_hint_name(hint)}: "
                            "only a string literal can be parsed into it")
    try:
        parsed = sqlglot.parse_one(text, into=base) if base in parsers else sqlglot.parse_one(text)
    except sqlglot.errors.ParseError:
        raise _failed(value, hint, dialect) from None
    if not isinstance(parsed, base):
        raise _failed(value, hint, dialect)
    return parsed


def _literal(value: exp.Expression, hint: Any, dialect: str) -> Any:
    if isinstance(value, (exp.Literal, exp.Boolean)):
        for option in typing.get_args(hint):
            if isinstance(option, bool) and isinstance(value.this, bool) and option == value.this:
                return option
            if not isinstance(option, bool) and not isinstance(value.this, bool) and str(option) == str(value.this):
                return type(option)(value.this)
    raise _failed(value, hint, dialect)


def _hint_name(hint: Any) -> str:
    if isinstance(hint, type) and not typing.get_args(hint):
        return f"exp.{hint.__name__}" if issubclass(hint, exp.Expression) else hint.__name__
    return repr(hint).replace("typing.", "").replace("sqlglot.expressions.", "exp.")


def _failed(value: exp.Expression, hint: Any, dialect: str) -> CoercionError:
    return CoercionError(f"cannot coerce `{value.sql(dialect)}` to {_hint_name(hint)}")
