"""not_constant(column): one violating row when the column has at most one distinct non-NULL value."""

from __future__ import annotations

from sqlglot import exp

from bot.quality.results import BuiltInAudit
from bot.quality.checks._args import column as column_arg


def not_constant(relation: exp.Expression, *, column: exp.Expression) -> exp.Select:
    count = exp.Count(this=exp.Distinct(expressions=[column_arg(column)]))
    return (exp.select(exp.alias_(count, "distinct_count", quoted=True)).from_(relation.copy())
            .having(exp.LTE(this=count.copy(), expression=exp.Literal.number(1))))


AUDIT = BuiltInAudit("not_constant", not_constant, required=("column",))
