"""Unit tests on Spark: passing and failing tests, CTE and ordered outputs, frozen time, malformed files."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest

from bot.errors import ConfigError
from bot.spark.engine import SparkEngine
from bot.project.loader import load_project
from bot.quality.unit_test_files import load_test_file
from bot.quality.unit_tests import run_tests

CONFIG = "model_defaults:\n  dialect: spark\n"
ORDERS = """
MODEL (name shop.orders, kind FULL, columns (id INT, customer_id INT, amount DOUBLE, ds DATE));
SELECT id, customer_id, amount, ds FROM raw.orders
"""
TOTALS = """
MODEL (name shop.totals, kind INCREMENTAL_BY_TIME_RANGE (time_column ds), grain customer_id);
WITH recent AS (
  SELECT * FROM shop.orders WHERE ds BETWEEN @start_ds AND @end_ds
)
SELECT customer_id, SUM(amount) AS total, COUNT(*) AS n, MAX(ds) AS ds, CURRENT_DATE AS run_date
FROM recent GROUP BY customer_id
"""
TOP = """
MODEL (name shop.top, kind FULL);
SELECT customer_id, total FROM shop.totals ORDER BY total DESC
"""
PY_MODEL = """
from sqlmesh import model


@model("shop.py_totals", columns={"customer_id": "int", "total": "double"})
def execute(context, start, end, execution_time, **kwargs):
    orders = context.table("shop.orders")
    return context.spark.sql(
        f"SELECT customer_id, SUM(amount) AS total FROM {orders} GROUP BY customer_id")
"""
TESTS = """
test_python_model:
  model: shop.py_totals
  inputs:
    shop.orders: [{id: 1, customer_id: 4, amount: 2.5, ds: 2024-01-01}, {id: 2, customer_id: 4, amount: 1}]
  outputs:
    query: [{customer_id: 4, total: 3.5}]
test_totals:
  model: shop.totals
  inputs:
    shop.orders:
      rows:
        - {id: 1, customer_id: 1, amount: 10.5, ds: 2024-01-01}
        - {id: 2, customer_id: 1, amount: 0.1, ds: '2024-01-02'}
        - {id: 3, customer_id: 2, amount: 5, ds: 2024-01-02}
        - {id: 4, customer_id: 2, amount: 7, ds: 2024-01-05}
  outputs:
    query:
      rows:
        - {customer_id: 2, total: 5.0, n: 1, ds: '2024-01-02', run_date: 2024-02-01}
        - {customer_id: 1, total: 10.6, n: 2, ds: 2024-01-02, run_date: '2024-02-01'}
    ctes:
      recent:
        partial: true
        rows: [{id: 1}, {id: 3}, {id: 2}]
  vars: {start: 2024-01-01, end: 2024-01-02, execution_time: 2024-02-01}
test_totals_wrong:
  model: shop.totals
  inputs:
    shop.orders:
      format: csv
      csv: |
        id,customer_id,amount,ds
        1,1,10.5,2024-01-01
        3,2,5,2024-01-01
  outputs:
    query:
      partial: true
      rows:
        - {customer_id: 1, total: 10.5}
        - {customer_id: 2, total: 6.0}
  vars: {start: 2024-01-01, end: 2024-01-01}
test_top_order:
  model: shop.top
  inputs:
    shop.totals: [{customer_id: 1, total: 3.0}, {customer_id: 2, total: 9.0}]
  outputs:
    query: [{customer_id: 1, total: 3.0}, {customer_id: 2, total: 9.0}]
test_top_query_input:
  model: shop.top
  inputs:
    shop.totals:
      query: SELECT 7 AS customer_id, 1.5D AS total
  outputs:
    query:
      rows: [{customer_id: 7, total: 1.5}]
test_missing_input:
  model: shop.top
  outputs:
    query: []
test_orders_columns:
  model: shop.orders
  inputs:
    raw.orders: [{id: 1, customer_id: 1, amount: 1.0, ds: 2024-01-01}]
  outputs:
    query: [{id: 1, amount: 1.0, ds: 2024-01-01}]
"""


def _project(root: Path, tests: str = TESTS) -> Path:
    (root / "models").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "config.yaml").write_text(CONFIG)
    for name, text in (("orders", ORDERS), ("totals", TOTALS), ("top", TOP)):
        (root / "models" / f"{name}.sql").write_text(text)
    (root / "models" / "py_totals.py").write_text(PY_MODEL)
    (root / "tests" / "test_shop.yaml").write_text(tests)
    return root


@pytest.fixture(scope="module")
def suite(spark, tmp_path_factory):
    project = load_project(_project(tmp_path_factory.mktemp("unit")), use_cache=False)
    result = run_tests(project=project, engine=SparkEngine(spark))
    return {r.name: r for r in result.results}, result


def test_passing_test_with_ctes_interval_and_frozen_time(suite):
    results, _ = suite
    ok = results["test_totals"]
    assert ok.passed, ok.message
    assert ok.model == "shop.totals" and ok.file.name == "test_shop.yaml"
    assert {r["customer_id"]: r["total"] for r in ok.actual_rows} == pytest.approx({1: 10.6, 2: 5.0})
    assert results["test_top_query_input"].passed, results["test_top_query_input"].message
    assert results["test_python_model"].passed, results["test_python_model"].message


def test_failing_test_shows_missing_and_unexpected_rows(suite):
    results, whole = suite
    bad = results["test_totals_wrong"]
    assert not bad.passed
    assert bad.message.startswith("test_totals_wrong (")
    assert "test_shop.yaml:" in bad.message and "on model shop.totals" in bad.message
    assert "1 expected row(s) missing, 1 unexpected row(s)" in bad.message
    missing = bad.message.split("Missing rows")[1].split("Unexpected rows")[0]
    unexpected = bad.message.split("Unexpected rows")[1]
    assert "6.0" in missing and "5.0" in unexpected and "10.5" not in bad.message
    assert not whole.passed and whole.counts == (3, 4)
    error = whole.error()
    assert "4 of 7 unit test(s) failed" in str(error) and len(error.failures) == 4


def test_order_by_and_unexpected_columns_fail(suite):
    results, _ = suite
    order = results["test_top_order"]
    assert not order.passed and "different order (the query has ORDER BY)" in order.message
    columns = results["test_orders_columns"]
    assert not columns.passed
    assert "columns differ (not in the expected rows: customer_id)" in columns.message
    missing = results["test_missing_input"]
    assert not missing.passed and "error: running query of model shop.top" in missing.message
    assert "shop" in missing.message and "totals" in missing.message


def test_pattern_and_file_selection(spark, tmp_path):
    project = load_project(_project(tmp_path), use_cache=False)
    only = run_tests(project=project, engine=SparkEngine(spark), patterns=["*query_input"],
                     files=["tests/test_shop.yaml"])
    assert [r.name for r in only.results] == ["test_top_query_input"] and only.passed
    assert run_tests(project=project, engine=SparkEngine(spark), patterns=["nothing"]).results == ()


@pytest.mark.parametrize("body, message", [
    ("t1:\n  inputs: {}\n  outputs: {query: []}\n", "test `t1`: `model` is required"),
    ("t2:\n  model: shop.top\n  outputs: {}\n", "test `t2`: `outputs` must give `query` and/or `ctes`"),
    ("ok: {model: shop.top, outputs: {query: []}}\nt3:\n  model: shop.top\n  outputs:\n"
     "    query: {rows: [1, 2]}\n", "tests/bad.yaml:2: test `t3`: `outputs.query` rows must be"),
    ("t4:\n  model: shop.top\n  outputs: {query: []}\n  expect: 1\n", "test `t4`: unknown key(s) expect"),
    ("t5: [\n", "malformed YAML"),
])
def test_malformed_test_file_names_file_and_test(tmp_path, body, message):
    path = tmp_path / "tests" / "bad.yaml"
    path.parent.mkdir()
    path.write_text(body)
    with pytest.raises(ConfigError) as info:
        load_test_file(path)
    assert message in str(info.value) and "bad.yaml" in str(info.value)


def test_unknown_model_is_a_config_error(spark, tmp_path):
    project = load_project(_project(tmp_path, dedent("""
        t_unknown:
          model: shop.nope
          outputs: {query: []}
    """)), use_cache=False)
    with pytest.raises(ConfigError, match=r"test_shop.yaml:2: test `t_unknown`: unknown model `shop.nope`"):
        run_tests(project=project, engine=SparkEngine(spark))


def _duckdb_pair(root: Path, columns: str, query: str, tests: str) -> Path:
    """A DuckDB-dialect project: `s.a` declaring `columns`, `s.b` reading it, and one test file."""
    (root / "models").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "config.yaml").write_text("model_defaults:\n  dialect: duckdb\n")
    (root / "models" / "a.sql").write_text(f"MODEL (name s.a, kind FULL, columns ({columns}));\n{query}")
    (root / "models" / "b.sql").write_text("MODEL (name s.b, kind FULL);\nSELECT x, y FROM s.a")
    (root / "tests" / "test_b.yaml").write_text(tests)
    return root


def test_example_project_tests_pass(spark):
    example = Path(__file__).resolve().parent.parent / "bot" / "project" / "example"
    result = run_tests(project=load_project(example, use_cache=False), engine=SparkEngine(spark))
    assert result.results and result.passed, [r.message for r in result.failures]


def test_an_input_row_naming_a_column_its_model_does_not_declare_fails_the_test(spark, tmp_path):
    # SQLMesh 0.236.4 (the same files on DuckDB): "Detected unknown column(s) ... Expected column(s): x, y
    # Unknown column(s): not_a_column", the test fails (meshbot passed it)
    root = _duckdb_pair(tmp_path / "p", "x INT, y INT", "SELECT 1 AS x, 2 AS y", dedent("""
        test_b:
          model: s.b
          inputs:
            s.a: [{x: 1, y: 2, not_a_column: 3}]
          outputs:
            query: [{x: 1, y: 2}]
    """))
    (result,) = run_tests(project=load_project(root, use_cache=False), engine=SparkEngine(spark)).results
    assert not result.passed
    assert result.message.endswith("error: input `s.a`: detected unknown column(s) not_a_column "
                                   "(expected column(s): x, y)"), result.message


def test_an_input_value_that_does_not_fit_its_declared_column_fails_the_test(spark, tmp_path):
    # SQLMesh 0.236.4 on DuckDB fails both tests ("Could not convert string 'twelve' to DOUBLE", "value
    # 99999999999 ... out of range for the destination type INT32"); a NULL would let them pass
    root = _duckdb_pair(tmp_path / "p", "x DOUBLE, y INT", "SELECT 1.0 AS x, 2 AS y", dedent("""
        test_text:
          model: s.b
          inputs:
            s.a: [{x: twelve, y: 2}]
          outputs:
            query: [{x: null, y: 2}]
        test_range:
          model: s.b
          inputs:
            s.a: [{x: 1.5, y: 99999999999}]
          outputs:
            query: [{x: 1.5, y: null}]
        test_fits:
          model: s.b
          inputs:
            s.a: [{x: '2.5', y: 3}]
          outputs:
            query: [{x: 2.5, y: 3}]
    """))
    results = {r.name: r for r in run_tests(project=load_project(root, use_cache=False), engine=SparkEngine(spark)).results}
    assert results["test_fits"].passed, results["test_fits"].message
    assert not results["test_text"].passed and not results["test_range"].passed
    assert "column `x` is DOUBLE, and the value 'twelve' does not fit it" in results["test_text"].message
    assert "column `y` is INT, and the value '99999999999' does not fit it" in results["test_range"].message
