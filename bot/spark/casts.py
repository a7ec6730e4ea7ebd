"""Rows cast into a table's column types with no silent NULL: a value that does not fit its column is an error."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bot.errors import EngineError
from bot.spark.types import quote_identifier

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

_INTEGRAL = {"tinyint", "byte", "smallint", "short", "int", "integer", "bigint", "long"}
_FRACTIONAL = {"float", "real", "double"}
_CHECKED = _INTEGRAL | _FRACTIONAL | {"date", "timestamp", "timestamp_ntz", "timestamp_ltz", "boolean"}
_SHOWN_CHARS = 80      # of a value that does not fit, in the error


_ALIASES = {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint", "real": "float",
            "numeric": "decimal", "dec": "decimal", "timestamp_ltz": "timestamp"}


def _normal(type_text: str) -> str:
    """'DECIMAL(5, 2)' -> 'decimal(5,2)', 'INTEGER' -> 'int': equal for types Spark treats as one."""
    text = re.sub(r"\s+", "", type_text.lower())
    base, paren, rest = text.partition("(")
    return _ALIASES.get(base, base) + paren + rest


def _base(type_text: str) -> str:
    return _normal(type_text).split("(")[0]


def is_checked(type_text: str) -> bool:
    """Whether a cast into `type_text` can turn a value into NULL (numbers, dates, times, booleans).

    >>> is_checked("DECIMAL(10, 2)"), is_checked("INT"), is_checked("STRING"), is_checked("ARRAY<INT>")
    (True, True, False, False)
    """
    base = _base(type_text)
    return base in _CHECKED or base == "decimal"


def fitting_cast_sql(source: str, source_type: str, target: str) -> str:
    """SQL for `source` (of Spark type `source_type`) as `target`: NULL exactly when the value does not fit,
    never a wrapped or saturated number. Text in exponent notation ('1e3') is a number; text with a
    fraction does not fit an integer column, a number with one is rounded into it.

    >>> print(fitting_cast_sql("`x`", "string", "INT"))
    coalesce(try_cast(`x` AS INT), CASE WHEN try_cast(`x` AS DOUBLE) = floor(try_cast(`x` AS DOUBLE)) THEN try_cast(try_cast(`x` AS DOUBLE) AS INT) END)
    >>> fitting_cast_sql("`x`", "double", "BIGINT")
    'try_cast(bround(`x`) AS BIGINT)'
    """
    direct = f"try_cast({source} AS {target})"
    source_base, target_base = _base(source_type), _base(target)
    if source_base == "string" and (target_base in _INTEGRAL or target_base == "decimal"):
        number = f"try_cast({source} AS DOUBLE)"
        if target_base in _INTEGRAL:
            return (f"coalesce({direct}, CASE WHEN {number} = floor({number}) "
                    f"THEN try_cast({number} AS {target}) END)")
        return f"coalesce({direct}, try_cast({number} AS {target}))"
    if target_base in _INTEGRAL and (source_base in _FRACTIONAL or source_base == "decimal"):
        # a number into an integer column is rounded as DuckDB casts it under SQLMesh (Spark would truncate):
        # a float half to even (-2.5 -> -2), a decimal half away from zero (2.5 -> 3); only a value beyond
        # the column's range does not fit
        rounded = "round" if source_base == "decimal" else "bround"
        return f"try_cast({rounded}({source}) AS {target})"
    return direct


def _sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fitting_sql(source: str, source_type: str, name: str, target: str) -> str:
    """SQL for `source` (an expression of Spark type `source_type`) as column `name` of `target`; a value
    that does not fit fails the Spark job naming the column, its type and the value."""
    return guarded_sql(fitting_cast_sql(source, source_type, target), source, name, target)


def guarded_sql(cast: str, raw: str, name: str, target: str) -> str:
    """`cast` (NULL where `raw` does not fit, from fitting_cast_sql), failing the job when it is NULL and
    `raw` is not."""
    message = _sql_string(f"column `{name}` is {target.upper()}, and the value ")
    shown = f"substring(CAST({raw} AS STRING), 1, {_SHOWN_CHARS})"
    return (f"CASE WHEN {raw} IS NOT NULL AND ({cast}) IS NULL THEN raise_error(concat({message}, "
            f"{_sql_string(chr(39))}, {shown}, {_sql_string(chr(39) + ' does not fit it')})) ELSE ({cast}) END")


def needs_check(source_type: str, target: str) -> bool:
    """Whether a value of `source_type` may not fit `target` (the types differ and a cast can fail)."""
    return _normal(source_type) != _normal(target) and is_checked(target)


def fitting_cast(source: str, source_type: str, name: str, target: str) -> "Column":
    """Column `source` as column `name` of `target`, failing on a value that does not fit (fitting_sql)."""
    from pyspark.sql import functions as F

    column = quote_identifier(source)
    if not needs_check(source_type, target):
        return F.col(column).cast(target).alias(name)
    return F.expr(fitting_sql(column, source_type, name, target)).cast(target).alias(name)


def source_columns(available: Sequence[str], columns: Sequence[tuple[str, str]]) -> list[str]:
    """The column of `available` each of `columns` is read from: by name (case-insensitive) or, failing
    that, by position.

    >>> source_columns(["ID", "x"], [("x", "INT"), ("id", "INT")]), source_columns(["a", "b"], [("x", "INT"), ("y", "INT")])
    (['x', 'ID'], ['a', 'b'])
    """
    by_name = {name.lower(): name for name in available}
    if all(name.lower() in by_name for name, _ in columns):
        return [by_name[name.lower()] for name, _ in columns]
    if len(available) == len(columns):
        return list(available)
    raise EngineError(f"query returns columns ({', '.join(available)}) but the table has "
                      f"({', '.join(name for name, _ in columns)})")


def conform(frame: "DataFrame", columns: Sequence[tuple[str, str]]) -> "DataFrame":
    """Select `columns` from `frame` by name (case-insensitive) or, failing that, by position, cast to their
    types; a value that does not fit its column fails the query that reads the result."""
    sources = source_columns(frame.columns, columns)
    types = {field.name: field.dataType.simpleString() for field in frame.schema.fields}
    return frame.select([fitting_cast(src, types[src], name, kind) for src, (name, kind) in zip(sources, columns)])
