"""Floating types kept to their dialect's width on Spark, and DuckDB's float32 arithmetic (a REAL with a DECIMAL stays REAL).

Each dialect gives FLOAT, REAL, FLOAT4 and FLOAT(p) its own width (DuckDB FLOAT and REAL are 32-bit;
PostgreSQL FLOAT is 64-bit, REAL 32-bit; Snowflake's and BigQuery's every float is 64-bit); sqlglot reads some
of them as another width, so a model's casts and declared columns are given the dialect's (dialect_float_width).

DuckDB types `CAST(x AS REAL) * 1.1` and `CAST(x AS REAL) / 3` as FLOAT (32-bit: the DECIMAL or integer
operand is cast to FLOAT); Spark types both as DOUBLE (a FLOAT with a DECIMAL widens to DOUBLE, and `/`
divides in DOUBLE), so the same query gives other digits (1.2100000381469727 on DuckDB, 1.2100000262260437
on Spark). In a DuckDB-dialect query, such an operation gets its other operand cast to FLOAT, and a quotient
is cast back to FLOAT: Spark then computes in float32 (a float32 quotient computed in double and rounded
once to float32 is the float32 quotient). ANSI Spark also widens a FLOAT with an integer (+, -, *, %) to
DOUBLE, where DuckDB keeps FLOAT, so an integer operand is cast to FLOAT as well. Both engines agree on
FLOAT with DOUBLE (DOUBLE) and SUM/AVG of FLOAT (DOUBLE), which are left alone. Only operands whose type
the query itself says (a cast, a literal) are seen: a REAL column of a parent is not.
"""

from __future__ import annotations

import re

from sqlglot import exp

_FLOAT = exp.DataType.Type.FLOAT
_INTEGERS = {exp.DataType.Type.TINYINT, exp.DataType.Type.SMALLINT, exp.DataType.Type.INT,
             exp.DataType.Type.BIGINT, exp.DataType.Type.INT128}
_DECIMALS = {exp.DataType.Type.DECIMAL}
_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)


def _cast_type(node: exp.Expression) -> exp.DataType.Type | None:
    if isinstance(node, (exp.Cast, exp.TryCast)) and isinstance(node.to, exp.DataType):
        return node.to.this
    return None


def is_float32(node: exp.Expression) -> bool:
    while isinstance(node, (exp.Paren, exp.Neg)):
        node = node.this
    return _cast_type(node) == _FLOAT or (
        isinstance(node, _ARITHMETIC) and is_float32(node.left) and is_float32(node.right))


def _is_decimal(node: exp.Expression) -> bool:
    """A DECIMAL in DuckDB: a number literal with a point and no exponent (`1.1`), or a cast to DECIMAL."""
    while isinstance(node, (exp.Paren, exp.Neg)):
        node = node.this
    if isinstance(node, exp.Literal) and not node.is_string:
        return "." in node.this and "e" not in node.this.lower()
    return _cast_type(node) in _DECIMALS


def _is_integer(node: exp.Expression) -> bool:
    while isinstance(node, (exp.Paren, exp.Neg)):
        node = node.this
    if isinstance(node, exp.Literal) and not node.is_string:
        return node.this.isdigit()
    return _cast_type(node) in _INTEGERS


def _as_float(node: exp.Expression) -> exp.Expression:
    return exp.Cast(this=node.copy(), to=exp.DataType.build("FLOAT"))


def keep_float32_arithmetic(tree: exp.Expression) -> None:
    """Rewrite, children before parents, each operation DuckDB computes in FLOAT and Spark would not."""
    for node in reversed(list(tree.walk(bfs=False))):
        if not isinstance(node, _ARITHMETIC):
            continue
        left, right = node.left, node.right
        division = isinstance(node, exp.Div)
        if is_float32(left) and is_float32(right):
            pass
        elif is_float32(left) and (_is_decimal(right) or _is_integer(right)):
            node.set("expression", _as_float(right))
        elif is_float32(right) and (_is_decimal(left) or _is_integer(left)):
            node.set("this", _as_float(left))
        else:
            continue
        if division:
            node.replace(exp.Cast(this=node.copy(), to=exp.DataType.build("FLOAT")))


# Dialects whose every floating type is 64-bit: Snowflake's FLOAT, FLOAT4, REAL; BigQuery's FLOAT (FLOAT64);
# SQLite's REAL. sqlglot reads their FLOAT/REAL/FLOAT4 as Spark's 32-bit FLOAT.
_DOUBLE_ONLY = frozenset({"snowflake", "bigquery", "sqlite"})
_FLOAT_TYPES = (exp.DataType.Type.FLOAT, exp.DataType.Type.DOUBLE)
# Declared type names that sqlglot reads as another width than the dialect gives them (it reads both as
# FLOAT): MySQL's REAL is DOUBLE, T-SQL's FLOAT without a precision is FLOAT(53). Only a declaration's text
# tells them apart from the dialect's FLOAT (MySQL) or REAL (T-SQL).
_DOUBLE_NAMES = {"mysql": re.compile(r"^\s*real\s*$", re.I), "tsql": re.compile(r"^\s*float\s*$", re.I)}


def dialect_float_width(data_type: exp.DataType, dialect: str | None) -> exp.DataType:
    """`data_type` with the width `dialect` gives a floating type, as Spark's FLOAT (32-bit) or DOUBLE.

    A precision counts in binary digits, as in the SQL standard (PostgreSQL, DuckDB, T-SQL, MySQL): up to
    24 is FLOAT, more is DOUBLE; Spark takes neither with a precision.

    >>> [dialect_float_width(exp.DataType.build(t, dialect=d), d).sql("spark") for d, t in
    ...  [("snowflake", "FLOAT"), ("snowflake", "REAL"), ("bigquery", "FLOAT64"), ("postgres", "FLOAT"),
    ...   ("postgres", "REAL"), ("postgres", "FLOAT(24)"), ("duckdb", "FLOAT"), ("duckdb", "FLOAT(53)")]]
    ['DOUBLE', 'DOUBLE', 'DOUBLE', 'DOUBLE', 'FLOAT', 'FLOAT', 'FLOAT', 'DOUBLE']
    """
    if data_type.this not in _FLOAT_TYPES:
        return data_type
    wide = data_type.this is exp.DataType.Type.DOUBLE
    params = data_type.expressions
    precision = params[0].this if len(params) == 1 and isinstance(params[0], exp.DataTypeParam) else None
    if isinstance(precision, exp.Literal) and precision.is_int:
        wide = int(precision.name) > 24
    if (dialect or "").lower() in _DOUBLE_ONLY:
        wide = True
    target = exp.DataType.Type.DOUBLE if wide else exp.DataType.Type.FLOAT
    if target is data_type.this and not params:
        return data_type
    return exp.DataType(this=target, nested=False)


def keep_dialect_float_widths(tree: exp.Expression, dialect: str | None) -> None:
    """Give every floating type in `tree` (casts, declarations) the width the model's dialect gives it."""
    for node in list(tree.find_all(exp.DataType)):
        if node.this in _FLOAT_TYPES and node.parent is not None:
            wanted = dialect_float_width(node, dialect)
            if wanted is not node:
                node.replace(wanted)


def declared_type(text: str, dialect: str | None) -> exp.DataType:
    """A declared column type (`REAL`, `ARRAY<FLOAT>`, ...) read with its dialect's float widths.

    >>> [declared_type(t, d).sql("spark") for d, t in [("mysql", "REAL"), ("tsql", "FLOAT"), ("tsql", "REAL"),
    ...                                               ("snowflake", "ARRAY<FLOAT>"), ("duckdb", "FLOAT4")]]
    ['DOUBLE', 'DOUBLE', 'FLOAT', 'ARRAY<DOUBLE>', 'FLOAT']
    """
    pattern = _DOUBLE_NAMES.get((dialect or "").lower())
    if pattern is not None and pattern.match(text):
        return exp.DataType.build("DOUBLE")
    declared = exp.DataType.build(text.strip(), dialect=dialect or None)
    keep_dialect_float_widths(declared, dialect)
    return dialect_float_width(declared, dialect)
