"""Which SQL `fetchdf` runs without `--allow-writes`: one query (or SHOW / DESCRIBE / EXPLAIN), nothing else."""

from __future__ import annotations

import logging

from bot.errors import PlanError

# sqlglot names a statement it cannot parse a Command; these ones only read the catalog.
_READ_COMMANDS = frozenset({"SHOW", "EXPLAIN"})


def check_read_only(sql: str) -> None:
    """Refuse anything but one read-only statement; DDL, DML, SET, CACHE, scripts are PlanErrors.

    >>> check_read_only("WITH a AS (SELECT 1 AS x) SELECT * FROM a")
    >>> check_read_only("SHOW TABLES IN shop")
    >>> check_read_only("DROP TABLE shop.orders")
    Traceback (most recent call last):
    ...
    bot.errors.PlanError: fetchdf runs queries only, and this is a DROP statement; pass --allow-writes to run it anyway
    >>> check_read_only("SELECT 1; DELETE FROM shop.orders")
    Traceback (most recent call last):
    ...
    bot.errors.PlanError: fetchdf runs one query, and this SQL holds 2 statements; pass --allow-writes to run it anyway
    """
    import sqlglot
    from sqlglot import exp

    sqlglot_logger = logging.getLogger("sqlglot")
    level = sqlglot_logger.level
    sqlglot_logger.setLevel(logging.ERROR)   # no "falling back to parsing as a Command" warning
    try:
        statements = [s for s in sqlglot.parse(sql, read="spark") if s is not None]
    except sqlglot.errors.SqlglotError as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise PlanError(f"fetchdf could not read the SQL as a query ({first}); "
                        "pass --allow-writes to hand it to Spark as is") from None
    finally:
        sqlglot_logger.setLevel(level)
    if not statements:
        raise PlanError("fetchdf needs a query, and the SQL is empty")
    if len(statements) > 1:
        raise PlanError(f"fetchdf runs one query, and this SQL holds {len(statements)} statements; "
                        "pass --allow-writes to run it anyway")
    statement = statements[0]
    if isinstance(statement, exp.Command):
        allowed = str(statement.this).upper() in _READ_COMMANDS
        kind = str(statement.this).upper()
    else:
        allowed = isinstance(statement, (exp.Query, exp.Values, exp.Describe))
        kind = {"truncatetable": "TRUNCATE"}.get(statement.key, statement.key.upper())
    if allowed and isinstance(statement, exp.Expression) and statement.find(exp.QueryTransform):
        allowed, kind = False, "TRANSFORM ... USING (runs a script)"
    if not allowed:
        raise PlanError(f"fetchdf runs queries only, and this is a {kind} statement; "
                        "pass --allow-writes to run it anyway")
