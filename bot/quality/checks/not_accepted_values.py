"""not_accepted_values(column, is_in): rows whose column holds one of the forbidden values."""

from __future__ import annotations

from sqlglot import exp

from bot.quality.results import BuiltInAudit
from bot.quality.checks._args import column as column_arg, items, select_where


def not_accepted_values(relation: exp.Expression, *, column: exp.Expression,
                        is_in: exp.Expression) -> exp.Select:
    values = [v.copy() for v in items(is_in)]
    return select_where(relation, column_arg(column).isin(*values))


AUDIT = BuiltInAudit("not_accepted_values", not_accepted_values, required=("column", "is_in"))
