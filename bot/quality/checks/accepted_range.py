"""accepted_range(column, min_v, max_v, inclusive): rows whose column falls outside the range."""

from __future__ import annotations

from sqlglot import exp

from bot.quality.results import BuiltInAudit
from bot.quality.checks._args import column as column_arg, is_true, select_where


def accepted_range(relation: exp.Expression, *, column: exp.Expression,
                   min_v: exp.Expression | None = None, max_v: exp.Expression | None = None,
                   inclusive: exp.Expression | None = None) -> exp.Select:
    """
    >>> from sqlglot import parse_one
    >>> accepted_range(exp.to_table("t"), column=parse_one("x"), min_v=parse_one("0"),
    ...                max_v=parse_one("10"), inclusive=parse_one("false")).sql("spark")
    'SELECT * FROM t WHERE `x` <= 0 OR `x` >= 10'
    """
    col = column_arg(column)
    closed = is_true(inclusive, True)
    checks: list[exp.Expression] = []
    if min_v is not None:
        checks.append(exp.LT(this=col.copy(), expression=min_v.copy()) if closed
                      else exp.LTE(this=col.copy(), expression=min_v.copy()))
    if max_v is not None:
        checks.append(exp.GT(this=col.copy(), expression=max_v.copy()) if closed
                      else exp.GTE(this=col.copy(), expression=max_v.copy()))
    if not checks:
        raise ValueError("accepted_range needs min_v, max_v or both")
    return select_where(relation, exp.or_(*checks))


AUDIT = BuiltInAudit("accepted_range", accepted_range, required=("column",),
                     optional=("min_v", "max_v", "inclusive"))
