"""Spark plan regressions (issue 28): EXPLAIN FORMATTED of a directly modified model's new query against its
prod version's, over the preview's window and tables. On local Spark: each finding kind read from a real
plan (lost partition pruning, a new CartesianProduct / BroadcastNestedLoopJoin, more shuffles), then
Context.plan_regressions on the example shop with a partitioned orders table."""

from __future__ import annotations

import doctest

import pytest

import bot.diff.plan_regressions as plan_regressions
import bot.spark.physical_plan as spark_explain
from bot.context import Context
from bot.diff.plan_regressions import (NESTED_LOOP, PRUNING, PUSHDOWN, SHUFFLES, PlanComparison, parse_level,
                                       regressions)
from bot.diff.review import ReviewOptions
from bot.errors import ConfigError, EngineError
from bot.github.settings import load_settings
from bot.plan.definition import PlanOptions
from bot.project.example import write_example
from bot.spark.physical_plan import NESTED_LOOP_JOINS, PlanSummary, ScanSummary, explain
from github_support import FakeEngine
from test_data_diff_gates import CHECK, _diff, _run_bot


def test_doctests():
    for module in (spark_explain, plan_regressions):
        assert doctest.testmod(module).failed == 0


def test_pairs_scans_by_table_and_count():
    """A table prod reads twice, once pruned, is no regression when the PR does the same."""
    pruned = ScanSummary("t", partition_filters=("ds",))
    whole = ScanSummary("t")
    assert regressions(PlanSummary(scans=(pruned, whole)), PlanSummary(scans=(whole, pruned))) == ()
    (lost,) = regressions(PlanSummary(scans=(pruned, whole)), PlanSummary(scans=(whole, whole)))
    assert lost.kind == PRUNING
    pushed = ScanSummary("t", pushed_filters=("ds", "id"))
    assert regressions(PlanSummary(scans=(pushed,)), PlanSummary(scans=(whole,))) == ()   # not a time column
    (lost,) = regressions(PlanSummary(scans=(pushed,)), PlanSummary(scans=(whole,)), time_columns=("DS",))
    assert lost.kind == PUSHDOWN and "`ds`" in lost.message
    assert regressions(PlanSummary(joins=("CartesianProduct",), exchanges=2),
                       PlanSummary(joins=("CartesianProduct",), exchanges=1)) == ()
    assert regressions(PlanSummary(joins=("BroadcastNestedLoopJoin",)), PlanSummary(joins=("CartesianProduct",))) == ()
    (more,) = regressions(PlanSummary(joins=("BroadcastNestedLoopJoin",)),
                          PlanSummary(joins=("CartesianProduct", "CartesianProduct", "SortMergeJoin")))
    assert more.message.startswith("a new CartesianProduct (every row")
    (more,) = regressions(PlanSummary(), PlanSummary(joins=("CartesianProduct", "BroadcastNestedLoopJoin")))
    assert more.message.startswith("2 more nested loop joins (BroadcastNestedLoopJoin, CartesianProduct)")


def test_the_setting():
    assert load_settings({}).plan_regressions == "warn"
    assert load_settings({"plan_regressions": "fail"}).plan_regressions == "fail"
    with pytest.raises(ConfigError, match="cicd_bot.plan_regressions must be one of off, warn, fail"):
        load_settings({"plan_regressions": "always"})
    assert parse_level(None, where="c") == "warn"
    assert parse_level("FAIL", where="c") == "fail" and parse_level(False, where="c") == "off"
    with pytest.raises(ConfigError, match="plan_regressions must be one of off, warn, fail"):
        parse_level("loud", where="c")


def _compared() -> tuple[PlanComparison, ...]:
    prod = PlanSummary(scans=(ScanSummary("spark_catalog.shop__orders.v_1", "parquet", partition_filters=("ds",)),),
                       exchanges=1)
    pr = PlanSummary(scans=(ScanSummary("spark_catalog.shop__orders.v_1", "parquet"),), exchanges=2)
    return (PlanComparison("shop.daily_orders", window="2024-01-05 – 2024-01-07 (3 days)", prod=prod, pr=pr,
                           regressions=regressions(prod, pr)),
            PlanComparison("shop.customer_revenue", window="whole query", prod=prod, pr=prod),
            PlanComparison("shop.order_days",
                           note="not compared: its changed parent `shop.orders` could not be previewed"))


def test_the_comment_and_the_data_diff_check(tmp_path):
    """warn (the default): the check passes with warnings and the comment folds the plans; fail fails it."""
    engine = FakeEngine({}, changed=("shop.customer_revenue",))
    engine.diffs = (_diff(),)
    engine.plans_compared = _compared()
    code, repo = _run_bot(tmp_path, engine, {})
    check_run = repo.check(CHECK)
    assert check_run["conclusion"] == "success" and code == 0
    assert check_run["output"]["title"] == "Data diff of 1 model: no gate failed (2 warnings)"
    assert [o.plan_queries for o in engine.review_options] == [True]   # one preview pass: rows and plans
    assert ":warning: `shop.daily_orders` (Spark plan): `spark_catalog.shop__orders.v_1` is read without partition " \
           "pruning on `ds`" in check_run["output"]["summary"]
    comment = next(c["body"] for c in repo.comments if "<!-- meshbot:pr-comment" in c["body"])
    assert "#### Spark plans against prod" in comment
    assert "<summary>:warning: shop.daily_orders: lost partition pruning, more shuffles</summary>" in comment
    assert "planned by Spark over 2024-01-05 – 2024-01-07 (3 days) on the same tables" in comment
    assert "| shuffles (Exchange) | 1 | 2 |" in comment
    assert "| scans | spark\\_catalog.shop\\_\\_orders.v\\_1 (pruned on ds) | spark\\_catalog" in comment
    assert "No plan regression in `shop.customer_revenue`." in comment
    assert "- `shop.order_days`: not compared: its changed parent `shop.orders` could not be previewed" in comment

    code, repo = _run_bot(tmp_path, engine, {"plan_regressions": "fail"})
    check_run = repo.check(CHECK)
    assert check_run["conclusion"] == "failure" and check_run["output"]["title"] == "Spark plan check failed on 1 model"
    comment = next(c["body"] for c in repo.comments if "<!-- meshbot:pr-comment" in c["body"])
    assert "<summary>:x: shop.daily_orders: lost partition pruning, more shuffles</summary>" in comment

    code, repo = _run_bot(tmp_path, engine, {"plan_regressions": "off"})
    assert [o.plan_queries for o in engine.review_options] == [True, True, False]   # off: no query planned
    assert repo.check(CHECK)["output"]["title"] == "Data diff of 1 model: no gate failed"
    comment = next(c["body"] for c in repo.comments if "<!-- meshbot:pr-comment" in c["body"])
    assert "Spark plans" not in comment


@pytest.fixture
def tables(engine_schema):
    engine, schema = engine_schema
    engine.execute(f"CREATE TABLE {schema}.events (id INT, amount DOUBLE, ds STRING) USING parquet "
                   f"PARTITIONED BY (ds)")
    engine.execute(f"INSERT INTO {schema}.events SELECT CAST(id AS INT), id * 1.5, "
                   f"CONCAT('2024-01-0', CAST(id % 5 + 1 AS STRING)) FROM range(50)")
    engine.execute(f"CREATE TABLE {schema}.customers (id INT, name STRING) USING parquet")
    engine.execute(f"INSERT INTO {schema}.customers SELECT CAST(id AS INT), 'c' FROM range(10)")
    return engine, schema


@pytest.mark.spark
def test_each_finding_read_from_a_real_plan(tables):
    engine, schema = tables
    window = "WHERE ds >= '2024-01-02' AND ds <= '2024-01-03'"
    prod = explain(engine, f"SELECT * FROM (SELECT id, amount, ds FROM {schema}.events) AS q {window}")
    (scan,) = prod.scans
    assert scan.table.endswith(f"{schema}.events") and scan.format == "parquet"
    assert scan.partition_filters == ("ds",)
    # Spark prunes through a function of the partition column alone (CAST, TO_DATE, COALESCE with a
    # literal...); it cannot once the time column also depends on a data column.
    kept = explain(engine, f"SELECT * FROM (SELECT id, amount, CAST(TO_DATE(ds) AS STRING) AS ds "
                           f"FROM {schema}.events) AS q {window}")
    assert kept.scans[0].partition_filters == ("ds",) and regressions(prod, kept) == ()
    lost = explain(engine, f"SELECT * FROM (SELECT id, amount, COALESCE(ds, CAST(id AS STRING)) AS ds "
                           f"FROM {schema}.events) AS q {window}")
    assert lost.scans[0].partition_filters == ()
    (finding,) = regressions(prod, lost, time_columns=("ds",))
    assert finding.kind == PRUNING and f"{schema}.events` is read without partition pruning on `ds`" in finding.message

    equi = explain(engine, f"SELECT e.id, c.name FROM {schema}.events AS e JOIN {schema}.customers AS c ON e.id = c.id")
    assert equi.joins == ("BroadcastHashJoin",) and equi.broadcasts == 1
    nested = explain(engine, f"SELECT e.id, c.name FROM {schema}.events AS e JOIN {schema}.customers AS c "
                             f"ON e.id = c.id OR c.id IS NULL")
    assert nested.joins == ("BroadcastNestedLoopJoin",)
    (finding,) = regressions(equi, nested)
    assert finding.kind == NESTED_LOOP and "a new BroadcastNestedLoopJoin" in finding.message
    engine.execute("SET spark.sql.autoBroadcastJoinThreshold=-1")
    try:
        cartesian = explain(engine, f"SELECT e.id, c.name FROM {schema}.events AS e JOIN {schema}.customers AS c "
                                    f"ON e.id < c.id")
    finally:
        engine.execute("RESET spark.sql.autoBroadcastJoinThreshold")
    assert cartesian.joins == ("CartesianProduct",)
    assert [r.kind for r in regressions(equi, cartesian)] == [NESTED_LOOP]

    grouped = explain(engine, f"SELECT ds, SUM(amount) AS amount FROM {schema}.events GROUP BY ds")
    ranked = explain(engine, f"SELECT ds, SUM(amount) AS amount FROM (SELECT ds, amount, ROW_NUMBER() OVER "
                             f"(PARTITION BY id ORDER BY amount) AS n FROM {schema}.events) AS q "
                             f"WHERE n = 1 GROUP BY ds")
    assert ranked.exchanges > grouped.exchanges >= 1
    (finding,) = regressions(grouped, ranked)
    assert finding.kind == SHUFFLES and finding.message.endswith(f"against {grouped.exchanges} in prod's plan")


@pytest.mark.spark
def test_a_query_spark_cannot_analyze_is_an_error(tables):
    engine, schema = tables
    with pytest.raises(EngineError, match="no_such_column|cannot be resolved|UNRESOLVED_COLUMN"):
        explain(engine, f"SELECT no_such_column FROM {schema}.events")


ORDERS_PARTITIONED = ("  time_column (ds, '%Y-%m-%d')\n  ),\n  partitioned_by ds,")
DAILY = """MODEL (
  name shop.daily_orders,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column (ds, '%Y-%m-%d')
  ),
  start '2024-01-01',
  end '2024-01-07',
  grain (ds, customer_id)
);

SELECT
  customer_id,
  SUM(amount) AS amount,
  ds
FROM shop.orders
WHERE ds BETWEEN @start_ds AND @end_ds
GROUP BY customer_id, ds
"""


@pytest.mark.spark
def test_plan_regressions_of_the_example_shop(spark, tmp_path):
    """orders partitioned by ds; daily_orders reads it by day. The PR derives daily_orders' ds from a data
    column too (partition pruning lost) and makes customer_revenue's join non-equi (a nested loop join)."""
    before = {row[0] for row in spark.sql("SHOW DATABASES").collect()}
    root = tmp_path / "shop"
    write_example(root)
    orders = root / "models" / "orders.sql"
    orders.write_text(orders.read_text().replace("  time_column (ds, '%Y-%m-%d')\n  ),", ORDERS_PARTITIONED))
    (root / "models" / "daily_orders.sql").write_text(DAILY)
    try:
        context = Context(root)
        context.apply(context.plan("prod", options=PlanOptions(skip_tests=True)))
        daily = root / "models" / "daily_orders.sql"
        day = "COALESCE(ds, CAST(customer_id AS STRING))"   # ds, or (never) a data column: no pruning
        daily.write_text(DAILY.replace("  ds\nFROM", f"  {day} AS ds\nFROM").replace("WHERE ds", f"WHERE {day}")
                         .replace("GROUP BY customer_id, ds", f"GROUP BY customer_id, {day}"))
        revenue = root / "models" / "customer_revenue.sql"
        revenue.write_text(revenue.read_text().replace("ON c.customer_id = o.customer_id",
                                                       "ON c.customer_id = o.customer_id OR o.customer_id IS NULL")
                           .replace("SUM(o.amount) AS revenue",
                                    "SUM(o.amount) AS revenue,\n  MAX(o.amount) AS max_amount"))
        top = root / "models" / "top_customers.sql"   # reads the new column; the same plan: no finding
        top.write_text(top.read_text().replace("revenue >= 100", "revenue >= 50")
                       .replace("  revenue\n", "  revenue,\n  max_amount\n"))
        changed = Context(root)
        plan = changed.plan("prod", options=PlanOptions(skip_tests=True))
        review = changed.review(plan, ReviewOptions(window_days=3))   # one preview: rows and plans
        found = {c.model: c for c in review.plan_comparisons}
        # the gateway's 4 concurrent tasks compare and EXPLAIN at once: the serial review's results, in order
        serial = changed.review(plan, ReviewOptions(window_days=3, concurrent_tasks=1))
        assert serial.diffs == review.diffs and len(review.diffs) >= 3
        assert [(c.model, c.regressions) for c in serial.plan_comparisons] == \
            [(c.model, c.regressions) for c in review.plan_comparisons]
        assert {"shop.daily_orders", "shop.customer_revenue"} <= {d.model for d in review.diffs if d.compared}
        assert set(found) == {"shop.daily_orders", "shop.customer_revenue", "shop.top_customers"}
        daily_found = found["shop.daily_orders"]
        assert daily_found.window == "2024-01-05 – 2024-01-07 (3 days)"
        assert [r.kind for r in daily_found.regressions] == [PRUNING], daily_found
        assert "without partition pruning on `ds`" in daily_found.regressions[0].message
        assert [r.kind for r in found["shop.customer_revenue"].regressions] == [NESTED_LOOP]
        assert found["shop.top_customers"].compared and found["shop.top_customers"].regressions == ()
        # a backfilled PR environment: its tables stand for the changed parents (top_customers reads max_amount)
        changed.apply(changed.plan("pr_1", options=PlanOptions(skip_tests=True, start="2024-01-01")))
        found = {c.model: c for c in changed.review(plan, ReviewOptions(environment="pr_1", window_days=3)).plan_comparisons}
        assert {m: [r.kind for r in c.regressions] for m, c in found.items()} == {
            "shop.daily_orders": [PRUNING], "shop.customer_revenue": [NESTED_LOOP], "shop.top_customers": []}
        assert all(c.compared for c in found.values())
        context.close()
        changed.close()
    finally:
        for name in sorted({row[0] for row in spark.sql("SHOW DATABASES").collect()} - before):
            spark.sql(f"DROP DATABASE IF EXISTS `{name}` CASCADE")


CONNECT_SCRIPT = """
import json, sys, uuid
from pathlib import Path
from bot.project.config import SparkConnection
from bot.spark.engine import SparkEngine
from bot.spark.physical_plan import explain
from bot.spark.session import get_session

engine = SparkEngine(get_session(SparkConnection(remote=sys.argv[1]), state_dir=Path(sys.argv[2])))
schema = f"t_{uuid.uuid4().hex[:10]}"
engine.create_schemas([schema])
engine.execute(f"CREATE TABLE {schema}.events (id INT, ds STRING) USING parquet PARTITIONED BY (ds)")
engine.execute(f"INSERT INTO {schema}.events VALUES (1, '2024-01-01'), (2, '2024-01-02')")
pruned = explain(engine, f"SELECT * FROM {schema}.events WHERE ds = '2024-01-02'")
nested = explain(engine, f"SELECT a.id FROM {schema}.events AS a JOIN {schema}.events AS b ON a.id < b.id")
engine.execute(f"DROP SCHEMA {schema} CASCADE")
print(json.dumps({"partition_filters": pruned.scans[0].partition_filters, "joins": nested.joins}))
"""


def test_explain_reads_the_same_text_through_spark_connect(connect_server, tmp_path):
    """EXPLAIN FORMATTED is a SQL statement: a Spark Connect server answers it with the same plan text."""
    import json
    import os
    import subprocess

    from spark_servers import PYTHON, ROOT

    env = {key: value for key, value in os.environ.items() if not key.startswith(("SPARK_", "PYSPARK_"))}
    result = subprocess.run([str(PYTHON), "-c", CONNECT_SCRIPT, connect_server.url, str(tmp_path)], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["partition_filters"] == ["ds"]
    assert len(found["joins"]) == 1 and found["joins"][0] in NESTED_LOOP_JOINS   # per the server's table sizes
