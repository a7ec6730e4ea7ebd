"""not_null(columns): rows where any of the columns is NULL."""

from __future__ import annotations

from sqlglot import exp

from bot.quality.results import BuiltInAudit
from bot.quality.checks._args import columns as column_args, select_where


def not_null(relation: exp.Expression, *, columns: exp.Expression) -> exp.Select:
    """
    >>> from sqlglot import parse_one
    >>> not_null(exp.to_table("t"), columns=parse_one("(a, b)")).sql("spark")
    'SELECT * FROM t WHERE `a` IS NULL OR `b` IS NULL'
    """
    return select_where(relation, exp.or_(*(c.is_(exp.null()) for c in column_args(columns))))


AUDIT = BuiltInAudit("not_null", not_null, required=("columns",))
