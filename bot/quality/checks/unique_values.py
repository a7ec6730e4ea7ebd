"""unique_values(columns): rows whose value in any of the columns repeats an earlier row's value."""

from __future__ import annotations

from sqlglot import exp

from bot.quality.results import BuiltInAudit
from bot.quality.checks._args import columns as column_args


def unique_values(relation: exp.Expression, *, columns: exp.Expression) -> exp.Select:
    cols = column_args(columns)
    ranks = [exp.alias_(exp.Window(this=exp.RowNumber(), partition_by=[c.copy()],
                                   order=exp.Order(expressions=[exp.Ordered(this=c.copy())])),
                        f"__rank_{i}", quoted=True)
             for i, c in enumerate(cols)]
    inner = exp.select(exp.Star(), *ranks).from_(relation.copy()).subquery("__ranked")
    condition = exp.or_(*(exp.column(f"__rank_{i}", quoted=True) > 1 for i in range(len(cols))))
    return exp.select(exp.Star()).from_(inner).where(condition)


AUDIT = BuiltInAudit("unique_values", unique_values, required=("columns",))
