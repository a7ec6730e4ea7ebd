"""DuckDB's float32 arithmetic kept on Spark: a REAL/FLOAT operand with a DECIMAL stays REAL, and so does a quotient.

DuckDB types `CAST(x AS REAL) * 1.1` and `CAST(x AS REAL) / 3` as FLOAT (32-bit: the DECIMAL or integer
operand is cast to FLOAT); Spark types both as DOUBLE (a FLOAT with a DECIMAL widens to DOUBLE, and `/`
divides in DOUBLE), so the same query gives other digits (1.2100000381469727 on DuckDB, 1.2100000262260437
on Spark). In a DuckDB-dialect query, such an operation gets its other operand cast to FLOAT, and a quotient
is cast back to FLOAT: Spark then computes in float32 (a float32 quotient computed in double and rounded
once to float32 is the float32 quotient). Both engines agree on FLOAT with integers (+, -, *, %), FLOAT
with DOUBLE (DOUBLE) and SUM/AVG of FLOAT (DOUBLE), which are left alone.
"""

from __future__ import annotations

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
        elif is_float32(left) and (_is_decimal(right) or division and _is_integer(right)):
            node.set("expression", _as_float(right))
        elif is_float32(right) and (_is_decimal(left) or division and _is_integer(left)):
            node.set("this", _as_float(left))
        else:
            continue
        if division:
            node.replace(exp.Cast(this=node.copy(), to=exp.DataType.build("FLOAT")))
