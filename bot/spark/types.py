"""Map SQL type strings of any sqlglot dialect, and Spark DataTypes, to Spark SQL DDL type strings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sqlglot import exp
from sqlglot.errors import ParseError

from bot.errors import EngineError

if TYPE_CHECKING:
    from pyspark.sql.types import DataType

# Types Spark cannot store in Parquet; stored as the closest type that can.
_STORABLE = {"VOID": "STRING", "NULL": "STRING"}


def quote_identifier(name: str) -> str:
    """Quote one identifier for Spark SQL.

    >>> quote_identifier("order id")
    '`order id`'
    >>> quote_identifier("a`b")
    '`a``b`'
    """
    if not name:
        raise EngineError("empty identifier in generated SQL")
    return "`" + name.replace("`", "``") + "`"


def to_spark_type(type_text: str, *, dialect: str = "spark") -> str:
    """Return the Spark SQL spelling of `type_text` written in `dialect`.

    >>> to_spark_type("TEXT")
    'STRING'
    >>> to_spark_type("DECIMAL(10,2)")
    'DECIMAL(10, 2)'
    >>> to_spark_type("int64", dialect="bigquery")
    'BIGINT'
    >>> to_spark_type("timestamp")
    'TIMESTAMP'
    """
    try:
        data_type = exp.DataType.build(type_text, dialect=dialect or None)
    except (ParseError, ValueError) as exc:
        raise EngineError(f"unknown column type `{type_text}` ({dialect or 'default'} dialect)") from exc
    text = data_type.sql("spark")
    return _STORABLE.get(text.upper(), text)


def data_type(type_text: str) -> exp.DataType:
    """A Spark type string (`DECIMAL(10,2)`, `TIMESTAMP_NTZ`, a struct) as a sqlglot DataType, kept as
    written when sqlglot does not know it, for casts in generated SQL.

    >>> data_type("decimal(10,2)").sql("spark"), data_type("INTERVAL DAY TO SECOND").sql("spark")
    ('DECIMAL(10, 2)', 'INTERVAL DAY TO SECOND')
    """
    return exp.DataType.build(type_text, dialect="spark", udt=True)


def columns_ddl(columns: Sequence[tuple[str, str]], *, dialect: str | None = "spark") -> str:
    """Return a `name TYPE, ...` column list for CREATE TABLE, every name quoted.

    Types are normalized through sqlglot from `dialect`; `dialect=None` keeps them as given
    (for types that already come from a Spark schema).

    >>> columns_ddl([("id", "int"), ("name", "text")])
    '`id` INT, `name` STRING'
    """
    if not columns:
        raise EngineError("a table needs at least one column")
    return ", ".join(
        f"{quote_identifier(name)} {kind if dialect is None else to_spark_type(kind, dialect=dialect)}"
        for name, kind in columns)


def data_type_sql(data_type: "DataType") -> str:
    """Return the DDL spelling of a Spark DataType; nested field names are quoted, NULL becomes STRING."""
    from pyspark.sql import types as T

    if isinstance(data_type, T.StructType):
        fields = ", ".join(f"{quote_identifier(f.name)}: {data_type_sql(f.dataType)}" for f in data_type.fields)
        return f"STRUCT<{fields}>"
    if isinstance(data_type, T.ArrayType):
        return f"ARRAY<{data_type_sql(data_type.elementType)}>"
    if isinstance(data_type, T.MapType):
        return f"MAP<{data_type_sql(data_type.keyType)}, {data_type_sql(data_type.valueType)}>"
    if isinstance(data_type, T.NullType):
        return "STRING"
    return data_type.simpleString().upper()


def schema_columns(schema) -> list[tuple[str, str]]:
    """Return [(name, Spark DDL type)] of a Spark StructType, in order."""
    return [(field.name, data_type_sql(field.dataType)) for field in schema.fields]
