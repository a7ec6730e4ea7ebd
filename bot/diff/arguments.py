"""table_diff's arguments: its options, their checks before anything reaches Spark, the tables and keys they name."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

from bot.errors import PlanError
from bot.project.model import Model

_NAME_PART = r"(?:\w+|`[^`]+`)"
_TABLE = re.compile(rf"{_NAME_PART}(?:\.{_NAME_PART}){{0,2}}")
_COLUMN = re.compile(r"\w+")
# Spark functions that call Java methods by name: a filter has no business running them.
_UNSAFE_FUNCTIONS = frozenset({"reflect", "java_method", "try_reflect"})


@dataclass(frozen=True)
class TableDiffOptions:
    """How table_diff compares, beyond its two sides and model (the CLI's flags)."""

    on: tuple[str, ...] = ()             # key columns (default: the model's grain)
    skip: tuple[str, ...] = ()           # columns left out
    where: str | None = None             # Spark SQL filter on both sides
    decimals: int = 3
    show_sample: bool = False
    limit: int = 20                      # sample rows of each difference kind
    source_table: str | None = None      # compared instead of the model's table in SOURCE
    target_table: str | None = None

    def check(self, source: str, target: str, model: str | None) -> None:
        """Every flag, and SOURCE:TARGET when they name two tables, before anything reaches Spark; the
        CLI's stricter check (the API checks only tables and filter: see check_arguments)."""
        if model is None and "." in source and "." in target:
            check_table_name(source, "SOURCE")
            check_table_name(target, "TARGET")
        for name, flag in ((self.source_table, "--source-table"), (self.target_table, "--target-table")):
            if name is not None:
                check_table_name(name, flag)
        check_columns(self.on, "-o/--on")
        check_columns(self.skip, "-s/--skip-columns")
        check_where(self.where)
        if self.limit < 0:
            raise PlanError(f"table_diff: --limit must be 0 or more, not {self.limit}")


@dataclass(frozen=True)
class DiffTables:
    """What one table_diff compares: two tables joined on `keys`, labelled by the sides the user named."""

    source_table: str
    target_table: str
    keys: tuple[str, ...]
    source_label: str
    target_label: str
    model: str | None = None


def resolve_tables(source: str, target: str, model: Model | None, options: TableDiffOptions, *,
                   table_in: Callable[[str, str], str]) -> DiffTables:
    """The tables of `model` in the environments `source` and `target` (`table_in(environment, model)`),
    or the two tables `source` and `target` name (`db.a:db.b`), unless the options give them; the
    keys are the options' `on`, else the model's grain."""
    source_table, target_table = options.source_table, options.target_table
    grains: tuple[str, ...] = ()
    name = None
    if model is not None:
        name, grains = model.name, model.grains
        source_table = source_table or table_in(source, name)
        target_table = target_table or table_in(target, name)
    elif "." in source and "." in target:   # `db.a:db.b` names two tables, not environments
        source_table, target_table = source_table or source, target_table or target
    if not source_table or not target_table:
        raise PlanError("table_diff needs a MODEL, or both --source-table and --target-table")
    keys = resolve_keys(model=name or f"{source_table}:{target_table}", on=options.on, grains=grains)
    return DiffTables(source_table=source_table, target_table=target_table, keys=keys,
                      source_label=source, target_label=target, model=name)


def resolve_keys(*, model: str, on: Sequence[str] = (), grains: Sequence[str] = ()) -> tuple[str, ...]:
    """Keys to join on: `-o` columns if given, else the model's grain; neither is a PlanError.

    >>> resolve_keys(model="db.orders", grains=("id",))
    ('id',)
    """
    keys = tuple(on) or tuple(grains)
    if not keys:
        raise PlanError(f"table_diff of model `{model}` needs key columns: the model has no grain; "
                        f"pass one or more with `-o COLUMN`")
    return keys


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
