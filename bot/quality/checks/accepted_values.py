"""accepted_values(column, is_in): rows whose column holds a value outside `is_in` (NULL passes)."""

from __future__ import annotations

from sqlglot import exp

from bot.quality.results import BuiltInAudit
from bot.quality.checks._args import column as column_arg, items, select_where


def accepted_values(relation: exp.Expression, *, column: exp.Expression,
                    is_in: exp.Expression) -> exp.Select:
    """
    >>> from sqlglot import parse_one
    >>> accepted_values(exp.to_table("t"), column=parse_one("s"), is_in=parse_one("('a', 'b')")).sql("spark")
    "SELECT * FROM t WHERE NOT `s` IN ('a', 'b')"
    """
    values = [v.copy() for v in items(is_in)]
    return select_where(relation, exp.Not(this=column_arg(column).isin(*values)))


AUDIT = BuiltInAudit("accepted_values", accepted_values, required=("column", "is_in"))
