"""forall(criteria): rows for which any of the boolean criteria is false."""

from __future__ import annotations

from sqlglot import exp

from bot.quality.results import BuiltInAudit
from bot.quality.checks._args import items, select_where


def forall(relation: exp.Expression, *, criteria: exp.Expression) -> exp.Select:
    """
    >>> from sqlglot import parse_one
    >>> forall(exp.to_table("t"), criteria=parse_one("(a > 0, b < 2)")).sql()
    'SELECT * FROM t WHERE NOT (a > 0) OR NOT (b < 2)'
    """
    checks = [exp.Not(this=exp.paren(c.copy())) for c in items(criteria)]
    return select_where(relation, exp.or_(*checks))


AUDIT = BuiltInAudit("forall", forall, required=("criteria",))
