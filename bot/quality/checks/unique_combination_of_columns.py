"""unique_combination_of_columns(columns): one row per combination of values that repeats."""

from __future__ import annotations

from sqlglot import exp

from bot.quality.results import BuiltInAudit
from bot.quality.checks._args import columns as column_args


def unique_combination_of_columns(relation: exp.Expression, *, columns: exp.Expression) -> exp.Select:
    cols = column_args(columns)
    return (exp.select(*cols, exp.alias_(exp.Count(this=exp.Star()), "row_count", quoted=True))
            .from_(relation.copy()).group_by(*(c.copy() for c in cols))
            .having(exp.GT(this=exp.Count(this=exp.Star()), expression=exp.Literal.number(1))))


AUDIT = BuiltInAudit("unique_combination_of_columns", unique_combination_of_columns,
                     required=("columns",))
