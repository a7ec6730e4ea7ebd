"""A query whose tables of known columns read empty stand-ins, so analyzing it needs no metastore call."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlglot import exp, parse_one
from sqlglot.errors import SqlglotError

from bot.spark.sql import spark_sql
from bot.spark.types import data_type

Columns = Sequence[tuple[str, str]]

# Table arguments that make a reference more than a plain read of the table's columns
# (time travel, sampling, hints, a partition spec, PIVOT/UNPIVOT, lateral views): such a query is
# analyzed against the real table.
_TABLE_EXTRAS = ("joins", "laterals", "pivots", "sample", "version", "system_time", "when", "hints",
                 "partition", "changes", "only", "format", "pattern", "ordinality", "rows_from", "indexed")


def table_key(parts: Sequence[str]) -> str:
    """The lookup key of a table name's parts: lowercased, dot-joined (Spark's catalog ignores case).

    >>> table_key(["Sqlmesh__db", "db__Orders__1"])
    'sqlmesh__db.db__orders__1'
    """
    return ".".join(part.lower() for part in parts)


def with_stand_ins(query_sql: str, known: Mapping[str, Columns], *, every_table: bool = False) -> str | None:
    """`query_sql` with each table in `known` (by `table_key`) read from an empty relation of its
    columns and types, under the reference's alias (or the table's own name); None when there is
    nothing to replace or the replacement could change what the query means.

    Spark then resolves those relations without a metastore call, and the query's output columns
    and types are the same as over the real tables: resolution sees the same names and types. The
    result is the query's own text but for the replaced references (sqlglot must reproduce the
    text exactly, else None). A column written with its table's schema (`db.t.col`; an alias's
    struct field `a.col.field` is fine), a table reference with extras (time travel, TABLESAMPLE,
    hints) or CHAR/VARCHAR columns keep the real analysis. With `every_table`, None also when some
    table other than a CTE's name would still be read (and a query reading no table comes back as is).

    >>> known = {"s.t__1": [("id", "INT"), ("amount", "DECIMAL(10,2)")]}
    >>> with_stand_ins("SELECT `a`.`id` FROM `s`.`t__1` AS `a`", known)
    'SELECT `a`.`id` FROM (SELECT CAST(NULL AS INT) AS `id`, CAST(NULL AS DECIMAL(10, 2)) AS `amount` WHERE FALSE) AS `a`'
    >>> with_stand_ins("SELECT `t__1`.`id` FROM `s`.`t__1`", known)
    'SELECT `t__1`.`id` FROM (SELECT CAST(NULL AS INT) AS `id`, CAST(NULL AS DECIMAL(10, 2)) AS `amount` WHERE FALSE) AS `t__1`'
    >>> with_stand_ins("SELECT `s`.`t__1`.`id` FROM `s`.`t__1`", known) is None
    True
    >>> with_stand_ins("SELECT `a`.`id`.`field` FROM `s`.`t__1` AS `a`", known) is not None   # a struct's field
    True
    >>> with_stand_ins("SELECT `id` FROM `s`.`other`", known) is None
    True
    >>> query = "WITH `c` AS (SELECT `id` FROM `s`.`t__1`) SELECT `c`.`id` FROM `c` JOIN `s`.`other` AS `o` ON TRUE"
    >>> with_stand_ins(query, known, every_table=True) is None, with_stand_ins(query, known) is None
    (True, False)
    >>> with_stand_ins("SELECT 1 AS `x`", known, every_table=True), with_stand_ins("SELECT 1 AS `x`", known)
    ('SELECT 1 AS `x`', None)
    """
    try:
        tree = parse_one(query_sql, dialect="spark")
    except SqlglotError:
        return None
    if not isinstance(tree, exp.Query) or spark_sql(tree) != query_sql:
        return None
    tables = list(tree.find_all(exp.Table))
    references = [table for table in tables if table_key([part.name for part in table.parts]) in known]
    if every_table:
        ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
        replaced = {id(table) for table in references}
        if any(id(table) not in replaced and (table.db or table.name.lower() not in ctes) for table in tables):
            return None
        if not references:
            return query_sql   # reads no table at all (VALUES, CTEs): its analysis needs no metastore either
    elif not references:
        return None
    qualified = {(table.db.lower(), table.name.lower()) for table in references}
    if any((column.text("db").lower(), column.table.lower()) in qualified for column in tree.find_all(exp.Column)):
        return None   # `db.t.col` would not resolve against the stand-in's alias; the real analysis keeps it
    for table in references:
        if any(table.args.get(extra) for extra in _TABLE_EXTRAS):
            return None
        columns = known[table_key([part.name for part in table.parts])]
        if not columns or any("char" in kind.lower() for _, kind in columns):
            return None   # CHAR/VARCHAR read as strings with metadata a cast does not carry
        alias = table.args.get("alias") or exp.TableAlias(this=exp.to_identifier(table.name, quoted=True))
        table.replace(exp.Subquery(this=_empty_relation(columns), alias=alias.copy()))
    return spark_sql(tree)


def _empty_relation(columns: Columns) -> exp.Select:
    return (exp.select(*[exp.alias_(exp.cast(exp.null(), data_type(kind)), name, quoted=True)
                         for name, kind in columns])
            .where(exp.false()))
