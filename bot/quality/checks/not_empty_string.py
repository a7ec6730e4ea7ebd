"""not_empty_string(column): rows whose column is the empty string."""

from __future__ import annotations

from sqlglot import exp

from bot.quality.results import BuiltInAudit
from bot.quality.checks._args import column as column_arg, select_where


def not_empty_string(relation: exp.Expression, *, column: exp.Expression) -> exp.Select:
    return select_where(relation, exp.EQ(this=column_arg(column), expression=exp.Literal.string("")))


AUDIT = BuiltInAudit("not_empty_string", not_empty_string, required=("column",))
