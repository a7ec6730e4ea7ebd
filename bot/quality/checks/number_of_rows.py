"""number_of_rows(threshold): one violating row when the table has `threshold` rows or fewer."""

from __future__ import annotations

from sqlglot import exp

from bot.quality.results import BuiltInAudit


def number_of_rows(relation: exp.Expression, *, threshold: exp.Expression) -> exp.Select:
    """Reads at most threshold + 1 rows, so a big table is not counted in full."""
    limit = int(threshold.name)
    inner = exp.select(exp.Literal.number(1)).from_(relation.copy()).limit(limit + 1)
    count = exp.Count(this=exp.Star())
    return (exp.select(exp.alias_(count, "row_count", quoted=True))
            .from_(inner.subquery("__limited"))
            .having(exp.LTE(this=count.copy(), expression=exp.Literal.number(limit))))


AUDIT = BuiltInAudit("number_of_rows", number_of_rows, required=("threshold",))
