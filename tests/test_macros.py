"""Tests for bot.project.macros: interval variables, built-in macros, user macros from macros/*.py."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

from bot.errors import ConfigError
from bot.project import macros as macros_module
from bot.project.macros import (MacroEvaluator, interval_variables, known_macro_names, load_macros,
                                macro)
from bot.project.sqltext import parse_sql

JAN1, JAN2 = 1_704_067_200_000, 1_704_153_600_000


def expand(sql: str, *, dialect: str = "spark", config_variables: dict | None = None,
           registry=None, columns: dict | None = None, pre: str = "") -> str:
    """Expand macros of `sql` for the SPEC interval [2024-01-01, 2024-01-02) and print it as Spark SQL."""
    variables = interval_variables(start=JAN1, end=JAN2, execution_time=JAN2 + 3_600_000)
    variables["gateway"] = "local"
    kwargs = {"registry": registry} if registry is not None else {}
    evaluator = MacroEvaluator(dialect=dialect, variables=variables, config_variables=config_variables or {},
                               path=Path("models/m.sql"), model_name="db.m",
                               columns_of=(columns or {}).get, **kwargs)
    for statement in parse_sql(pre, dialect) if pre else []:
        evaluator.transform(statement)
    result = evaluator.transform(parse_sql(sql, dialect)[0])
    return result.sql("spark") if result is not None else ""


def test_doctests() -> None:
    assert doctest.testmod(macros_module).failed == 0


@pytest.mark.parametrize(("variable", "expected"), [
    ("@start_ds", "'2024-01-01'"),
    ("@end_ds", "'2024-01-01'"),
    ("@start_ts", "'2024-01-01 00:00:00'"),
    ("@end_ts", "'2024-01-01 23:59:59.999999'"),
    ("@start_date", "CAST('2024-01-01' AS DATE)"),
    ("@end_date", "CAST('2024-01-01' AS DATE)"),
    ("@start_dt", "CAST('2024-01-01 00:00:00' AS TIMESTAMP)"),
    ("@end_dt", "CAST('2024-01-01 23:59:59.999999' AS TIMESTAMP)"),
    ("@start_epoch", "1704067200.0"),
    ("@end_epoch", "1704153599.999999"),
    ("@start_millis", "1704067200000"),
    ("@end_millis", "1704153599999"),
    ("@execution_ds", "'2024-01-02'"),
    ("@execution_ts", "'2024-01-02 01:00:00'"),
    ("@execution_date", "CAST('2024-01-02' AS DATE)"),
    ("@execution_dt", "CAST('2024-01-02 01:00:00' AS TIMESTAMP)"),
    ("@execution_epoch", "1704157200.0"),
    ("@execution_millis", "1704157200000"),
    ("@gateway", "'local'"),
])
def test_interval_variables_for_the_spec_interval(variable: str, expected: str) -> None:
    assert expand(f"SELECT {variable}") == f"SELECT {expected}"


def test_variables_work_in_duckdb_and_postgres_syntax() -> None:
    sql = "SELECT ds FROM t WHERE ds BETWEEN @start_ds AND @end_ds"
    expected = "SELECT ds FROM t WHERE ds BETWEEN '2024-01-01' AND '2024-01-01'"
    assert expand(sql, dialect="duckdb") == expected
    assert expand(sql, dialect="postgres") == expected


def test_undefined_variable_names_model_and_variable() -> None:
    with pytest.raises(ConfigError, match=r"models/m.sql: macro variable @nope is undefined in model db.m"):
        expand("SELECT @nope")


def test_def_defines_locals_and_disappears() -> None:
    assert expand("@DEF(size, 10)") == ""
    assert expand("SELECT @size * 2, @cols", pre="@DEF(size, 10); @DEF(cols, (a, b))") == "SELECT 10 * 2, (a, b)"


def test_plain_name_reads_config_variables_and_var_has_defaults() -> None:
    config = {"Region": "eu", "limit": 5}
    assert expand("SELECT @region, @VAR('limit'), @VAR('missing', 7), @VAR('missing')",
                  config_variables=config) == "SELECT 'eu', 5, 7, NULL"


def test_if_picks_a_branch_or_removes_the_node() -> None:
    assert expand("SELECT @IF(@gateway = 'local', 1, 2)") == "SELECT 1"
    assert expand("SELECT @IF(1 > 2, 1, 2)") == "SELECT 2"
    assert expand("SELECT a, @IF(@VAR('debug', FALSE), b) FROM t") == "SELECT a FROM t"
    assert expand("SELECT a FROM t WHERE @IF(@VAR('x', 'p') IN ('p', 'q'), a > 1)") == "SELECT a FROM t WHERE a > 1"


def test_if_as_a_whole_statement() -> None:
    assert expand("@IF(@gateway = 'prod', 1 = 1)") == ""
    assert expand("@IF(@gateway = 'local', @SQL('DELETE FROM t WHERE ds = @start_ds'))") == \
        "DELETE FROM t WHERE ds = '2024-01-01'"


def test_if_with_undecidable_condition_is_an_error() -> None:
    with pytest.raises(ConfigError, match="@IF condition 'a > 1' does not evaluate to true or false"):
        expand("SELECT @IF(a > 1, 1)")


def test_each_returns_several_expressions() -> None:
    assert expand("SELECT @EACH([a, b], x -> x + 1) FROM t") == "SELECT a + 1, b + 1 FROM t"
    assert expand("SELECT @EACH(@cols, c -> SUM(c)) FROM t", pre="@DEF(cols, (p, q))") == \
        "SELECT SUM(p), SUM(q) FROM t"
    assert expand("SELECT * FROM t WHERE x IN (@EACH(['a', 'b'], v -> UPPER(v)))") == \
        "SELECT * FROM t WHERE x IN (UPPER('a'), UPPER('b'))"
    assert expand("SELECT @EACH([1, 2], n -> n * @start_millis) FROM t") == \
        "SELECT 1 * 1704067200000, 2 * 1704067200000 FROM t"


def test_sql_parses_text() -> None:
    assert expand("SELECT * FROM t WHERE @SQL('a > 1 AND b = @start_ds')") == \
        "SELECT * FROM t WHERE a > 1 AND b = '2024-01-01'"


def test_star_uses_declared_columns() -> None:
    columns = {"db.orders": (("id", "INT"), ("amount", "DECIMAL(10,2)"), ("secret", "STRING"))}
    assert expand("SELECT @STAR(db.orders, exclude := [secret], prefix := 'o_') FROM db.orders",
                  columns=columns) == \
        "SELECT CAST(orders.id AS INT) AS o_id, CAST(orders.amount AS DECIMAL(10, 2)) AS o_amount FROM db.orders"
    with pytest.raises(ConfigError, match=r"@STAR\(db.x\): the columns of db.x are unknown"):
        expand("SELECT @STAR(db.x) FROM db.x")


def test_surrogate_key_and_safe_div() -> None:
    assert expand("SELECT @SAFE_DIV(a, b)") == "SELECT a / NULLIF(b, 0)"
    assert "MD5(CONCAT(COALESCE(CAST(a AS STRING)" in expand("SELECT @GENERATE_SURROGATE_KEY(a, b)")


def test_unknown_macro_names_model_file_and_macro() -> None:
    with pytest.raises(ConfigError, match=r"models/m.sql: unknown macro @NOPE in model db.m"):
        expand("SELECT @nope(1)")


def _write_macros(root: Path, body: str, name: str = "util.py") -> Path:
    (root / "macros").mkdir(parents=True, exist_ok=True)
    (root / "macros" / name).write_text(body)
    return root


USER_MACROS = '''
from sqlglot import exp
from bot import macro


@macro()
def add_one(evaluator, column):
    return exp.Add(this=column, expression=exp.Literal.number(1))


@macro()
def cents(evaluator, column, factor: int = 100):
    return f"{column.sql(evaluator.dialect)} * {factor}"


@macro("region_filter")
def anything(evaluator):
    return f"region = '{evaluator.var('region', 'us')}'"


@macro()
def pair(evaluator):
    return [1, "a"]


@macro()
def twice(evaluator, value: int):
    return value * 2


def not_a_macro():
    return 1
'''


def test_user_macros_from_project(tmp_path: Path) -> None:
    registry = load_macros(_write_macros(tmp_path, USER_MACROS))
    assert registry.names == {"add_one", "cents", "region_filter", "pair", "twice"}
    assert expand("SELECT @add_one(x), @CENTS(y, 10), @pair(), @twice(21) FROM t WHERE @region_filter()",
                  registry=registry, config_variables={"region": "eu"}) == \
        "SELECT x + 1, y * 10, 1, a, 42 FROM t WHERE region = 'eu'"


def test_known_macro_names(tmp_path: Path) -> None:
    names = known_macro_names(_write_macros(tmp_path, USER_MACROS))
    assert {"def", "if", "each", "var", "sql", "star", "add_one", "region_filter"} <= names
    assert "not_a_macro" not in names
    assert known_macro_names(tmp_path / "empty") >= {"each"}


def test_registries_do_not_leak_between_projects(tmp_path: Path) -> None:
    first = load_macros(_write_macros(tmp_path / "a", "from bot import macro\n@macro()\ndef only_a(ev):\n    return 1\n"))
    second = load_macros(_write_macros(tmp_path / "b", "from bot import macro\n@macro()\ndef only_b(ev):\n    return 2\n"))
    assert first.names == {"only_a"} and second.names == {"only_b"}
    with pytest.raises(ConfigError, match="unknown macro @ONLY_A"):
        expand("SELECT @only_a()", registry=second)


def test_registry_reloads_when_a_file_changes(tmp_path: Path) -> None:
    root = _write_macros(tmp_path, "from bot import macro\n@macro()\ndef v(ev):\n    return 1\n")
    assert expand("SELECT @v()", registry=load_macros(root)) == "SELECT 1"
    assert load_macros(root) is load_macros(root)
    _write_macros(root, "from bot import macro\n@macro()\ndef v(ev):\n    return 22\n")
    assert expand("SELECT @v()", registry=load_macros(root)) == "SELECT 22"


def test_broken_macro_file_names_file_and_line(tmp_path: Path) -> None:
    root = _write_macros(tmp_path, "x = 1\nraise RuntimeError('boom')\n", name="bad.py")
    with pytest.raises(ConfigError, match=r"bad.py:2: cannot import: RuntimeError: boom"):
        load_macros(root)


def test_failing_user_macro_names_the_macro(tmp_path: Path) -> None:
    registry = load_macros(_write_macros(tmp_path, "from bot import macro\n@macro()\ndef oops(ev):\n    return 1 / 0\n"))
    with pytest.raises(ConfigError, match="macro @OOPS failed: ZeroDivisionError"):
        expand("SELECT @oops()", registry=registry)


def test_macro_decorator_works_bare_and_named() -> None:
    @macro
    def bare(evaluator):
        return 1

    assert getattr(bare, "__meshbot_macro__") == "bare"


def test_sqlmesh_style_macro_files_import(tmp_path: Path) -> None:
    body = ("from sqlglot import exp\nfrom sqlmesh import macro\nfrom sqlmesh.core.macros import MacroEvaluator\n\n"
            "@macro()\ndef double(evaluator: MacroEvaluator, value):\n    return exp.Mul(this=value, expression=exp.Literal.number(2))\n")
    registry = load_macros(_write_macros(tmp_path, body))
    assert expand("SELECT @double(x)", registry=registry) == "SELECT x * 2"
    import sys
    assert "sqlmesh" not in sys.modules  # the shim is removed after import


PAYMENT_METHODS = "@DEF(payment_methods, ['credit_card', 'coupon', 'bank_transfer'])"


def test_each_lambda_with_an_alias_and_braced_variables_render_as_sqlmesh() -> None:
    # `sqlmesh render` (0.236.4, DuckDB) of the same models gives these projections
    summed = expand("SELECT order_id, @EACH(@payment_methods, x -> SUM(CASE WHEN payment_method = x THEN amount "
                    "ELSE 0 END) AS @{x}_amount) FROM db.order_payments GROUP BY order_id",
                    dialect="duckdb", pre=PAYMENT_METHODS)
    assert summed == ("SELECT order_id, "
                      "SUM(CASE WHEN payment_method = 'credit_card' THEN amount ELSE 0 END) AS credit_card_amount, "
                      "SUM(CASE WHEN payment_method = 'coupon' THEN amount ELSE 0 END) AS coupon_amount, "
                      "SUM(CASE WHEN payment_method = 'bank_transfer' THEN amount ELSE 0 END) AS bank_transfer_amount "
                      "FROM db.order_payments GROUP BY order_id")
    qualified = expand("SELECT order_payments.order_id, @EACH(@payment_methods, x -> order_payments.@{x}_amount) "
                       "FROM order_payments", dialect="duckdb", pre=PAYMENT_METHODS)
    assert qualified == ("SELECT order_payments.order_id, order_payments.credit_card_amount, "
                         "order_payments.coupon_amount, order_payments.bank_transfer_amount FROM order_payments")
    assert expand("SELECT t.@{m}_total AS @{m}_x FROM t", pre="@DEF(m, 'coupon')") == \
        "SELECT t.coupon_total AS coupon_x FROM t"


def test_braced_variables_print_back_as_written() -> None:
    from bot.project.sqltext import to_sql

    text = "SELECT t.@{x}_amount AS @{x}_total FROM t"
    assert to_sql(parse_sql(text, "duckdb")[0], "duckdb") == text
    with pytest.raises(ConfigError, match=r"macro variable @nope is undefined in model db.m"):
        expand("SELECT @{nope}_x FROM t")


def test_each_with_braced_aliases_loads_and_renders_a_project(tmp_path: Path) -> None:
    from bot.project.loader import load_project
    from bot.project.render import render_sql

    (tmp_path / "models").mkdir()
    (tmp_path / "config.yaml").write_text("model_defaults:\n  dialect: duckdb\n  start: '2024-01-01'\n")
    (tmp_path / "models" / "n.sql").write_text(
        f"MODEL (name db.n, kind FULL);\n{PAYMENT_METHODS};\nWITH order_payments AS (SELECT * FROM db.m)\n"
        "SELECT order_payments.order_id, @EACH(@payment_methods, x -> order_payments.@{x}_amount)\n"
        "FROM order_payments\n")
    project = load_project(tmp_path, use_cache=False)
    assert render_sql(project.models["db.n"], models=project.models) == (
        "WITH `order_payments` AS (SELECT * FROM `db`.`m`) SELECT `order_payments`.`order_id`, "
        "`order_payments`.`credit_card_amount`, `order_payments`.`coupon_amount`, "
        "`order_payments`.`bank_transfer_amount` FROM `order_payments`")
    assert project.models["db.n"].depends_on == {"db.m"}
