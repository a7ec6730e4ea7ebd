"""Division, remainder and element access kept to the model dialect's semantics on ANSI Spark (no error, no silent NULL).

meshbot runs Spark with `spark.sql.ansi.enabled=true` (Spark 4's default), so a value that does not fit is an
error: a malformed cast, an integer overflow, a division by zero. Where the model's own dialect gives a value
instead of an error, its query is rewritten to give that value (each checked on DuckDB 1.5, SQLMesh 0.236.4's):

- DuckDB's `/` divides as IEEE floats: `1 / 0` is `inf`, `-1 / 0` `-inf`, `0 / 0` `NaN`, and the quotient
  of DECIMALs or integers is a DOUBLE (Spark's of DECIMALs a DECIMAL). `a / b` becomes
  `CASE WHEN b = 0 THEN CAST(a AS DOUBLE) * inf ELSE CAST(a AS DOUBLE) / b END`.
- DuckDB's, MySQL's and SQLite's `//`, `DIV` and `%` give NULL for a zero divisor; `a / b` of a dialect sqlglot
  marks safe (MySQL, SQLite, Hive) too: the divisor becomes `NULLIF(b, 0)`.
- DuckDB's and PostgreSQL's `x[i]` count from 1 and give NULL out of range (DuckDB: negative from the end):
  `try_element_at(x, i)`, which does the same on arrays and reads a map's key as written (an index 0
  that is not a literal fails, where DuckDB gives NULL). sqlglot shifts a
  literal index to Spark's 0-based `[]` and leaves any other index as written, off by one; the index given to
  `try_element_at` is always the one the model wrote.

A Spark- or Databricks-dialect model keeps Spark's own semantics, as do Snowflake, BigQuery and PostgreSQL
divisions (they fail on a zero divisor, as ANSI Spark does).
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.simplify import simplify

from bot.project.floats import is_float32

_IEEE_DIVISION = frozenset({"duckdb"})
_NULL_ON_ZERO = frozenset({"duckdb", "mysql", "sqlite"})     # `//`/DIV and `%` by zero give NULL
_ONE_BASED = frozenset({"duckdb", "postgres"})
_SPARK = frozenset({"spark", "spark2", "databricks", "hive"})


def _nonzero_number(divisor: exp.Expression) -> bool:
    """A number written in the query that is not 0 (`3`, `-2.5`, `CAST(3 AS FLOAT)`): no guard needed."""
    while isinstance(divisor, (exp.Cast, exp.Paren)):
        divisor = divisor.this
    return divisor.is_number and divisor.to_py() != 0


def _zero_test(divisor: exp.Expression) -> exp.Expression:
    return exp.EQ(this=divisor.copy(), expression=exp.Literal.number(0))


def _double(node: exp.Expression) -> exp.Expression:
    return exp.Cast(this=node.copy(), to=exp.DataType.build("DOUBLE"))


def _duckdb_quotient(node: exp.Div) -> exp.Expression:
    """DuckDB's `/`: a DOUBLE (FLOAT when both operands are FLOAT: bot.project.floats kept those), and for a
    zero divisor ±inf, or NaN for 0 / 0 (a zero times inf), NULL for a NULL dividend."""
    float32 = (is_float32(node.this) and is_float32(node.expression)) or (
        isinstance(node.parent, exp.Cast) and node.parent.to.this is exp.DataType.Type.FLOAT)
    quotient = node.copy() if float32 else exp.Div(this=_double(node.this), expression=node.expression.copy())
    if _nonzero_number(node.expression):
        return quotient
    infinity = exp.Cast(this=exp.Literal.string("Infinity"), to=exp.DataType.build("DOUBLE"))
    return exp.Case(ifs=[exp.If(this=_zero_test(node.expression),
                                true=exp.Mul(this=_double(node.this), expression=infinity))],
                    default=quotient)


def _null_on_zero(node: exp.Expression) -> exp.Expression:
    return exp.Case(ifs=[exp.If(this=_zero_test(node.expression), true=exp.Null())], default=node.copy())


def _written_index(target: exp.Expression, index: exp.Expression) -> exp.Expression | None:
    """The index as the model wrote it (1-based), or None when the access is not to an array or a map by a
    number or expression (a string key, a struct field, a slice)."""
    if isinstance(index, exp.Slice) or (isinstance(index, exp.Literal) and index.is_string):
        return None
    kind = annotate_types(target.copy()).type
    if kind is not None and kind.this not in (exp.DataType.Type.UNKNOWN, exp.DataType.Type.ARRAY):
        return None
    shifted = annotate_types(index.copy()).type
    # sqlglot's parser shifted an integer-typed index by -1 (apply_index_offset); undo exactly that.
    if shifted is not None and shifted.this in exp.DataType.INTEGER_TYPES:
        return simplify(exp.Add(this=index.copy(), expression=exp.Literal.number(1)))
    return index.copy()


def _element_at(node: exp.Bracket) -> exp.Expression | None:
    if len(node.expressions) != 1 or node.args.get("offset") is not None:
        return None
    index = _written_index(node.this, node.expressions[0])
    if index is None:
        return None
    if index.is_number and index.to_py() == 0:
        return exp.Null()
    # Spark refuses index 0 (INVALID_INDEX_OF_ZERO), where DuckDB gives NULL; an index that is not a
    # literal is left to that error: a guard would compare a map's key with 0, which fails for text keys.
    return exp.Anonymous(this="try_element_at", expressions=[node.this.copy(), index])


def keep_dialect_arithmetic(tree: exp.Expression, dialect: str | None) -> None:
    """Rewrite, children before parents, each division, remainder and element access that ANSI Spark would
    fail (or read at another position) where the model's dialect gives a value."""
    dialect = (dialect or "").lower()
    if dialect in _SPARK:
        return
    for node in reversed(list(tree.walk(bfs=False))):
        replacement: exp.Expression | None = None
        if isinstance(node, exp.Div) and dialect in _IEEE_DIVISION:
            replacement = _duckdb_quotient(node)
        elif isinstance(node, (exp.Div, exp.IntDiv, exp.Mod)) and _nonzero_number(node.expression):
            continue
        elif isinstance(node, exp.Div):
            if node.args.get("safe"):
                node.set("expression", exp.Nullif(this=node.expression.copy(), expression=exp.Literal.number(0)))
                node.set("safe", False)
        elif isinstance(node, (exp.IntDiv, exp.Mod)) and dialect in _NULL_ON_ZERO:
            replacement = _null_on_zero(node)
        elif isinstance(node, exp.Bracket) and dialect in _ONE_BASED:
            replacement = _element_at(node)
        if replacement is not None:
            node.replace(replacement)
