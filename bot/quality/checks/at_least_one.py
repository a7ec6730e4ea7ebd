"""at_least_one(column): one violating row when the column holds no non-NULL value."""

from __future__ import annotations

from sqlglot import exp

from bot.quality.results import BuiltInAudit
from bot.quality.checks._args import column as column_arg


def at_least_one(relation: exp.Expression, *, column: exp.Expression) -> exp.Select:
    count = exp.Count(this=column_arg(column))
    return (exp.select(exp.alias_(count, "non_null_count", quoted=True)).from_(relation.copy())
            .having(exp.EQ(this=count.copy(), expression=exp.Literal.number(0))))


AUDIT = BuiltInAudit("at_least_one", at_least_one, required=("column",))
