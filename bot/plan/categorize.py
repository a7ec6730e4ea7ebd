"""Breaking vs non-breaking: rules over sqlglot.diff edits of two rendered queries, one function each."""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

import sqlglot
from sqlglot import exp
from sqlglot.diff import Insert, Keep, diff
from sqlglot.errors import SqlglotError

from bot.snapshot import ChangeCategory

Edit = object
# A rule looks at one edit and returns False when that edit alone makes the change breaking.
Rule = Callable[[Edit, exp.Select | None, set[int]], bool]


def _is_insert(edit: Edit, outer: exp.Select | None, inserted: set[int]) -> bool:
    """Only inserts can be non-breaking: removals, moves and updates change existing columns."""
    return isinstance(edit, (Insert, Keep))


def _top_projection(node: exp.Expression, outer: exp.Select) -> exp.Expression | None:
    """The outer query's projection containing `node`, or None when `node` is elsewhere."""
    current: exp.Expression | None = node
    while current is not None and current.parent is not outer:
        current = current.parent
    if current is None or current.arg_key != "expressions":
        return None
    return current


def _inside_inserted_projection(edit: Edit, outer: exp.Select | None, inserted: set[int]) -> bool:
    """The insert is a new projection of the outermost SELECT, or a node inside one."""
    if isinstance(edit, Keep):
        return True
    if outer is None:
        return False
    projection = _top_projection(edit.expression, outer)
    return projection is not None and id(projection) in inserted


def _no_distinct(edit: Edit, outer: exp.Select | None, inserted: set[int]) -> bool:
    """Under SELECT DISTINCT a new column can split rows that used to be duplicates."""
    return outer is None or not outer.args.get("distinct")


def _no_row_generator(edit: Edit, outer: exp.Select | None, inserted: set[int]) -> bool:
    """EXPLODE and friends in a new projection multiply the rows."""
    node = getattr(edit, "expression", None)
    return not isinstance(node, (exp.Explode, exp.Posexplode, exp.Inline, exp.UDTF))


def _no_new_aggregation(edit: Edit, outer: exp.Select | None, inserted: set[int]) -> bool:
    """An aggregate (outside a window) added to an ungrouped query collapses it to one row."""
    node = getattr(edit, "expression", None)
    if outer is None or not isinstance(node, exp.AggFunc) or outer.args.get("group"):
        return True
    if node.find_ancestor(exp.Window, exp.Subquery) is not None:
        return True
    return any(isinstance(n, exp.AggFunc) and n.find_ancestor(exp.Window, exp.Subquery) is None
               and id(_top_projection(n, outer)) not in inserted
               for projection in outer.expressions for n in projection.find_all(exp.AggFunc))


RULES: tuple[Rule, ...] = (
    _is_insert,
    _inside_inserted_projection,
    _no_distinct,
    _no_row_generator,
    _no_new_aggregation,
)


def _parse(sql: str, dialect: str) -> exp.Expression:
    return sqlglot.parse_one(sql, read=dialect)


def categorize(old_sql: str, new_sql: str, *, dialect: str = "spark") -> ChangeCategory | None:
    """Category of a direct change from `old_sql` to `new_sql`, as SQLMesh categorizes it; None when nothing changed.

    >>> categorize("SELECT a FROM t", "SELECT a, b FROM t").value
    'non_breaking'
    >>> categorize("SELECT a, b FROM t", "SELECT a FROM t").value
    'breaking'
    >>> categorize("SELECT a FROM t -- note", "SELECT a  FROM t") is None
    True
    """
    try:
        old, new = _parse(old_sql, dialect), _parse(new_sql, dialect)
    except SqlglotError:
        return ChangeCategory.BREAKING
    edits = diff(old, new, matchings=[(old, new)], delta_only=True, dialect=dialect)
    if not edits:
        return None
    outer = new if isinstance(new, exp.Select) else None
    inserted = {id(e.expression) for e in edits if isinstance(e, Insert)
                and outer is not None and e.expression.parent is outer
                and e.expression.arg_key == "expressions"}
    for edit in edits:
        if not all(rule(edit, outer, inserted) for rule in RULES):
            return ChangeCategory.BREAKING
    return ChangeCategory.NON_BREAKING


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
