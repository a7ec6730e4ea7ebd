"""Breaking vs non-breaking: whether a query changed only by projections added to its SELECTs, as SQLMesh 0.236.4 decides."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from bot.snapshot import ChangeCategory


def categorize(old_sql: str, new_sql: str, *, dialect: str = "spark") -> ChangeCategory | None:
    """Category of a direct change from `old_sql` to `new_sql`; None when nothing changed.

    Non-breaking only when the two queries are the same tree but for projections added to a SELECT,
    at any depth (a CTE, a subquery), each old projection kept as it was and in its order, an added
    one producing no extra rows (no UDTF such as EXPLODE outside a scalar subquery) and, when the
    SELECT (or the set operation it is a branch of) orders or groups by position, none added before
    an old one. Everything else is breaking: SQLMesh's categorizer, which also takes a column added
    under DISTINCT or an added aggregate as non-breaking.

    >>> categorize("SELECT a FROM t", "SELECT a, b FROM t").value
    'non_breaking'
    >>> categorize("SELECT a, b FROM t", "SELECT a FROM t").value
    'breaking'
    >>> categorize("SELECT a FROM t -- note", "SELECT a  FROM t") is None
    True
    >>> categorize("SELECT a, b FROM t ORDER BY 1", "SELECT 0 AS z, a, b FROM t ORDER BY 1").value
    'breaking'
    >>> categorize("WITH x AS (SELECT a FROM t) SELECT a FROM x", "WITH x AS (SELECT a, b FROM t) SELECT a FROM x").value
    'non_breaking'
    """
    try:
        old, new = sqlglot.parse_one(old_sql, read=dialect), sqlglot.parse_one(new_sql, read=dialect)
    except SqlglotError:
        return ChangeCategory.BREAKING
    if old == new:
        return None
    return ChangeCategory.NON_BREAKING if _only_added_projections(old, new) else ChangeCategory.BREAKING


def _only_added_projections(old: exp.Expression, new: exp.Expression) -> bool:
    """The trees, walked side by side, differ only in projections added to SELECT lists."""
    pairs = [(old, new)]
    while pairs:
        before, after = pairs.pop()
        if type(before) is not type(after):
            return False
        for key in before.args.keys() | after.args.keys():
            was, now = before.args.get(key), after.args.get(key)
            if isinstance(was, exp.Expression):
                if not isinstance(now, exp.Expression):
                    return False
                pairs.append((was, now))
            elif isinstance(was, list):
                if not isinstance(now, list):
                    return False
                if key == "expressions" and isinstance(before, exp.Select):
                    if not _projections_added(before, after):
                        return False
                elif len(was) != len(now) or not _same_items(was, now, pairs):
                    return False
            elif was != now:
                return False
    return True


def _same_items(was: list[Any], now: list[Any], pairs: list[tuple[exp.Expression, exp.Expression]]) -> bool:
    for before, after in zip(was, now):
        if isinstance(before, exp.Expression):
            if not isinstance(after, exp.Expression):
                return False
            pairs.append((before, after))
        elif before != after:
            return False
    return True


def _projections_added(before: exp.Select, after: exp.Select) -> bool:
    """`after`'s projections are `before`'s, unchanged and in order, with safe ones added among them."""
    new = after.expressions
    index, inserted_before_old = 0, False
    for projection in before.expressions:
        while index < len(new) and new[index] != projection:
            if not _keeps_row_count(new[index]):
                return False
            inserted_before_old, index = True, index + 1
        if index == len(new):
            return False   # an old projection is gone or changed
        index += 1
    if not all(_keeps_row_count(projection) for projection in new[index:]):
        return False
    return not (inserted_before_old and _positional_references(after))


def _keeps_row_count(projection: exp.Expression) -> bool:
    """No table-generating function, unless inside a scalar subquery of the projection itself."""
    inside = {id(node) for node in projection.walk()}
    return all((subquery := udtf.find_ancestor(exp.Subquery)) is not None and id(subquery) in inside
               for udtf in projection.find_all(exp.UDTF))


def _positional_references(select: exp.Select) -> bool:
    """ORDER BY 1 / GROUP BY 1 on the SELECT or on a set operation it is a branch of."""
    scope: exp.Expression | None = select
    while scope is not None and (scope is select or isinstance(scope, exp.SetOperation)):
        order, group = scope.args.get("order"), scope.args.get("group")
        keys = [o.this for o in order.expressions] if order else []
        keys += list(group.expressions) if group else []
        if any(isinstance(key, exp.Literal) and key.is_number for key in keys):
            return True
        scope = scope.parent
    return False


def categorize_seed(
    old_columns: Sequence[str],
    new_columns: Sequence[str],
    *,
    old_rows: Sequence[Sequence[str]] | None = None,
    new_rows: Sequence[Sequence[str]] | None = None,
) -> ChangeCategory:
    """A changed seed is non-breaking only when it appends columns and keeps the old ones intact.

    Rows (when given) must keep the old columns' values, in order.

    >>> categorize_seed(["id", "name"], ["id", "name", "email"]).value
    'non_breaking'
    >>> categorize_seed(["id", "name"], ["id", "email"]).value
    'breaking'
    """
    width = len(old_columns)
    if len(new_columns) <= width or list(new_columns[:width]) != list(old_columns):
        return ChangeCategory.BREAKING
    if old_rows is not None and new_rows is not None:
        if [list(r[:width]) for r in new_rows] != [list(r) for r in old_rows]:
            return ChangeCategory.BREAKING
    return ChangeCategory.NON_BREAKING


def indirect_category(upstream: Iterable[ChangeCategory]) -> ChangeCategory:
    """The most conservative category among changed parents, seen from a child.

    >>> indirect_category([ChangeCategory.NON_BREAKING, ChangeCategory.BREAKING]).value
    'indirect_breaking'
    >>> indirect_category([ChangeCategory.METADATA]).value
    'metadata'
    """
    seen = set(upstream)
    if seen & {ChangeCategory.BREAKING, ChangeCategory.INDIRECT_BREAKING}:
        return ChangeCategory.INDIRECT_BREAKING
    if ChangeCategory.FORWARD_ONLY in seen:
        return ChangeCategory.FORWARD_ONLY
    if seen & {ChangeCategory.NON_BREAKING, ChangeCategory.INDIRECT_NON_BREAKING}:
        return ChangeCategory.INDIRECT_NON_BREAKING
    return ChangeCategory.METADATA
