"""Spark SQL through sqlglot: table names split and quoted, statements generated in the spark dialect."""

from __future__ import annotations

import re

from collections.abc import Sequence

from sqlglot import exp
from sqlglot.errors import SqlglotError

from bot.errors import EngineError
from bot.spark.types import data_type, quote_identifier


def split_table(name: str) -> list[str]:
    """Split a `catalog.schema.table` name into its parts (backtick-quoted parts may contain dots).

    >>> split_table("db.t")
    ['db', 't']
    >>> split_table("`my.db`.t")
    ['my.db', 't']
    """
    text = name.strip()
    if "`" in text:
        try:
            table = exp.to_table(text, dialect="spark")
        except (SqlglotError, ValueError) as exc:
            raise EngineError(f"invalid table name `{name}`") from exc
        parts = [part.name for part in table.parts]
    else:
        parts = text.split(".")
    if not 1 <= len(parts) <= 3 or any(not part or "\n" in part or "\x00" in part for part in parts):
        raise EngineError(f"invalid table name `{name}`: expected [catalog.]schema.table")
    return parts


def quote_table(name: str) -> str:
    """Quote every part of a table name for Spark SQL.

    >>> quote_table("a.b.c")
    '`a`.`b`.`c`'
    >>> quote_table("sqlmesh__db.db__orders__123")
    '`sqlmesh__db`.`db__orders__123`'
    """
    return ".".join(quote_identifier(part) for part in split_table(name))


_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def portable_table(name: str) -> str:
    """A table name that reads the same in every dialect: a part is quoted (for Spark) only when it is not a
    plain name, so a Python model may paste it into SQL it parses in another dialect, as it could on SQLMesh.

    >>> portable_table("sqlmesh__db.db__orders__123"), portable_table("raw.my-events"), portable_table("a.select")
    ('sqlmesh__db.db__orders__123', 'raw.`my-events`', 'a.`select`')
    """
    from sqlglot.tokens import Tokenizer

    return ".".join(part if _PLAIN.fullmatch(part) and part.upper() not in Tokenizer.KEYWORDS
                    else quote_identifier(part) for part in split_table(name))


def table_expression(name: str) -> exp.Table:
    """A `[catalog.]schema.table` name as a sqlglot Table whose parts are quoted when generated.

    >>> spark_sql(table_expression("`my.db`.t"))
    '`my.db`.`t`'
    """
    *qualifiers, table = split_table(name)
    catalog, db = ([None, None] + qualifiers)[-2:]
    return exp.table_(table, db=db, catalog=catalog, quoted=True)


def spark_sql(expression: exp.Expression) -> str:
    """Spark SQL text of a sqlglot expression, every identifier quoted.

    >>> spark_sql(exp.select("a").from_("t"))
    'SELECT `a` FROM `t`'
    """
    return expression.sql(dialect="spark", identify=True)


def column_defs(columns: Sequence[tuple[str, str]]) -> list[exp.ColumnDef]:
    """Column definitions of CREATE TABLE / ADD COLUMNS from (name, Spark type) pairs, names quoted."""
    if not columns:
        raise EngineError("a table needs at least one column")
    return [exp.ColumnDef(this=exp.to_identifier(name, quoted=True), kind=data_type(kind))
            for name, kind in columns]


def parse_query(select_sql: str, subject: str) -> exp.Query:
    """Query text as a sqlglot query; text sqlglot cannot read is an EngineError naming `subject`."""
    try:
        return exp.maybe_parse(select_sql, dialect="spark")
    except SqlglotError as error:
        raise EngineError(f"{subject}: cannot read the query: {error}") from None


def set_properties_sql(table: str, properties: Sequence[tuple[str, str]]) -> str:
    """ALTER TABLE ... SET TBLPROPERTIES of (key, value) pairs, both written as string literals.

    >>> print(set_properties_sql("db.t__1", [("owner_team", "data"), ("note", "it's")]))
    ALTER TABLE `db`.`t__1` SET TBLPROPERTIES ('owner_team'='data', 'note'='it\\'s')
    """
    pairs = [exp.Property(this=exp.Literal.string(str(key)), value=exp.Literal.string(str(value)))
             for key, value in properties]
    return spark_sql(exp.Alter(this=table_expression(table), kind="TABLE",
                               actions=[exp.AlterSet(expressions=[exp.Properties(expressions=pairs)])]))
