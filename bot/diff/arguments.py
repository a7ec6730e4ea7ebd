"""Check table_diff's user-given names and `--where` before any of them reaches Spark."""

from __future__ import annotations

import re
from typing import Sequence

from bot.errors import PlanError

_NAME_PART = r"(?:\w+|`[^`]+`)"
_TABLE = re.compile(rf"{_NAME_PART}(?:\.{_NAME_PART}){{0,2}}")
_COLUMN = re.compile(r"\w+")
# Spark functions that call Java methods by name: a filter has no business running them.
_UNSAFE_FUNCTIONS = frozenset({"reflect", "java_method", "try_reflect"})


def check_table_name(name: str, flag: str) -> str:
    """A table name is 1-3 dot-separated identifiers (`db.t`, `catalog.db.t`, backquoted parts).

    >>> check_table_name("shop.orders", "--source-table")
    'shop.orders'
    >>> check_table_name("shop.orders; DROP TABLE x", "--source-table")
    Traceback (most recent call last):
    ...
    bot.errors.PlanError: table_diff: `shop.orders; DROP TABLE x` (--source-table) is not a table name; use schema.table (letters, digits, _ or `quoted` parts)
    """
    if not _TABLE.fullmatch(name):
        raise PlanError(f"table_diff: `{name}` ({flag}) is not a table name; "
                        "use schema.table (letters, digits, _ or `quoted` parts)")
    return name


def check_columns(names: Sequence[str], flag: str) -> None:
    """Key and skipped columns are plain column names (letters, digits, _)."""
    for name in names:
        if not _COLUMN.fullmatch(name):
            raise PlanError(f"table_diff: `{name}` ({flag}) is not a column name; "
                            "use letters, digits and _ only")


def check_arguments(*, source_table: str | None = None, target_table: str | None = None,
                    where: str | None = None) -> None:
    """The tables and the filter of one comparison (the API's check; the CLI checks every flag earlier).

    Columns are always quoted identifiers in the generated SQL, so a model's grain such as
    `order id` still works here; the CLI refuses such names in `-o`/`-s` as likely typos.
    """
    if source_table is not None:
        check_table_name(source_table, "source table")
    if target_table is not None:
        check_table_name(target_table, "target table")
    check_where(where)


def check_where(where: str | None) -> None:
    """`--where` is one boolean filter on the compared table: no `;`, no subquery, no Java calls.

    >>> check_where("ds >= '2024-01-02' AND amount > 0")
    >>> check_where("1 = 1; DROP TABLE shop.orders")
    Traceback (most recent call last):
    ...
    bot.errors.PlanError: table_diff --where `1 = 1; DROP TABLE shop.orders` is not one filter expression: it holds a `;`; give a condition such as `ds >= '2024-01-01'`
    """
    if where is None:
        return
    import sqlglot
    from sqlglot import exp

    def refuse(why: str) -> PlanError:
        return PlanError(f"table_diff --where `{where}` is not one filter expression: {why}; "
                         "give a condition such as `ds >= '2024-01-01'`")

    if not where.strip():
        raise refuse("it is empty")
    try:
        statements = [s for s in sqlglot.parse(where, read="spark") if s is not None]
    except sqlglot.errors.SqlglotError:
        statements = []
    if len(statements) > 1 or ";" in where and not statements:
        raise refuse("it holds a `;`")
    try:
        condition = sqlglot.condition(where, dialect="spark")
    except sqlglot.errors.SqlglotError as error:
        details = getattr(error, "errors", None) or [{}]
        reason = details[0].get("description") or "invalid syntax"
        raise refuse(f"it does not parse as Spark SQL ({reason})") from None
    if not isinstance(condition, exp.Condition) or isinstance(condition, (exp.Query, exp.DDL, exp.DML)):
        raise refuse("it is a statement, not a condition")
    if condition.find(exp.Query, exp.Subquery):
        raise refuse("it reads another query (subqueries are not allowed)")
    for func in condition.find_all(exp.Anonymous, exp.Func):
        name = (func.name if isinstance(func, exp.Anonymous) else func.sql_name()).lower()
        if name in _UNSAFE_FUNCTIONS:
            raise refuse(f"it calls `{name}`")
