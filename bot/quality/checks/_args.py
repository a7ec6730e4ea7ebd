"""Helpers shared by built-in audits: read audit arguments and build the common query shapes."""

from __future__ import annotations

from sqlglot import exp


def items(arg: exp.Expression) -> list[exp.Expression]:
    """`(a, b)`, `[a, b]`, `ARRAY(a, b)` or a single `a` as a list of expressions."""
    if isinstance(arg, (exp.Tuple, exp.Array)):
        return list(arg.expressions)
    if isinstance(arg, exp.Paren):
        return [arg.this]
    return [arg]


def columns(arg: exp.Expression) -> list[exp.Column]:
    """Column arguments as quoted column references."""
    return [column(item) for item in items(arg)]


def column(arg: exp.Expression) -> exp.Column:
    if isinstance(arg, exp.Paren):
        arg = arg.this
    if isinstance(arg, exp.Column):
        return exp.column(arg.name, quoted=True)
    if isinstance(arg, (exp.Literal, exp.Identifier, exp.Var)):
        return exp.column(arg.name, quoted=True)
    raise ValueError(f"expected a column name, got `{arg.sql('spark')}`")


def select_where(relation: exp.Expression, condition: exp.Expression) -> exp.Select:
    """SELECT * FROM relation WHERE condition."""
    return exp.select(exp.Star()).from_(relation.copy()).where(condition)


def is_true(arg: exp.Expression | None, default: bool) -> bool:
    if arg is None:
        return default
    if isinstance(arg, exp.Boolean):
        return bool(arg.this)
    return arg.name.lower() not in ("false", "0")
