"""Scale out: the example project runs unchanged through a Spark Connect server and on a standalone master URL."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from bot.errors import EngineError
from bot.project.example import EXAMPLE_DIR, write_example
from bot.spark.connect import parse_remote
from spark_servers import JVM_LINES, PYTHON, QUICK_JVM, ROOT, free_port

# A Python model that works on Spark DataFrames, then hands back pandas: both directions of
# client-side conversion go through the session (Arrow batches over gRPC on Spark Connect).
COUNTRY_MODEL = '''
from pyspark.sql import functions as F

from bot import model


@model("shop.country_revenue", kind="FULL", start="2024-01-01", end="2024-01-07", grain=["country"],
       columns={"country": "string", "revenue": "double", "orders": "bigint"},
       depends_on=["shop.customers", "shop.orders"])
def execute(context, start, end, execution_time, **kwargs):
    customers = context.spark.table(context.table("shop.customers"))
    orders = context.spark.table(context.table("shop.orders"))
    joined = orders.join(customers, "customer_id").groupBy("country")
    return joined.agg(F.sum("amount").alias("revenue"), F.count("*").alias("orders")).toPandas()
'''


# --------------------------------------------------------------------------------------------
# The project and the meshbot CLI in a subprocess
# --------------------------------------------------------------------------------------------

def _project(directory: Path, connection: str) -> Path:
    """The bundled example plus a Python model, with the gateway's connection replaced."""
    write_example(directory)
    (directory / "models" / "country_revenue.py").write_text(COUNTRY_MODEL)
    config = directory / "config.yaml"
    text = config.read_text()
    assert "      master: local[*]\n" in text
    config.write_text(text.replace("      master: local[*]\n", connection))
    return directory


def _meshbot(project: Path, *args: str) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("SPARK_", "PYSPARK_"))}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"   # the standalone worker reaches the driver on loopback
    result = subprocess.run([str(PYTHON), "-m", "bot", "-p", str(project), *args], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=400)
    assert result.returncode == 0, f"meshbot {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    return result


def _fetch(project: Path, sql: str) -> list[dict]:
    return json.loads(_meshbot(project, "fetchdf", "--json", sql).stdout)


def _seed(name: str) -> list[dict[str, str]]:
    return list(csv.DictReader((EXAMPLE_DIR / "seeds" / name).read_text().splitlines()))


def _expected_revenue() -> dict[str, tuple[int, float]]:
    """(orders, revenue) per customer name, computed from the seed files."""
    names = {row["customer_id"]: row["name"] for row in _seed("raw_customers.csv")}
    totals: dict[str, list] = defaultdict(lambda: [0, 0.0])
    for row in _seed("raw_orders.csv"):
        if "2024-01-01" <= row["ds"] <= "2024-01-07" and row["customer_id"] in names:
            totals[names[row["customer_id"]]][0] += 1
            totals[names[row["customer_id"]]][1] += float(row["amount"])
    return {name: (count, round(revenue, 2)) for name, (count, revenue) in totals.items()}


REVENUE_SQL = ("SELECT name, order_count, ROUND(revenue, 2) AS revenue FROM {customer} UNION ALL "
               "SELECT CONCAT('country ', country), orders, ROUND(revenue, 2) FROM {country}")


def _plan(project: Path) -> None:
    """Plan prod (unit tests, audits, backfill of every kind); only meshbot's own lines are printed."""
    result = _meshbot(project, "plan", "--auto-apply", "--execution-time", "2024-01-10")
    assert "Environment `prod` updated: 7 batch(es) evaluated" in result.stdout
    assert not JVM_LINES.search(result.stdout + result.stderr), result.stdout + result.stderr


def _check_revenue(rows: list[dict]) -> None:
    """Rows of REVENUE_SQL hold each customer's and each country's orders and revenue from the seeds."""
    got = {row["name"]: (row["order_count"], row["revenue"]) for row in rows}
    expected = _expected_revenue()
    assert {name: value for name, value in got.items() if not name.startswith("country ")} == expected
    by_country: dict[str, list] = defaultdict(lambda: [0, 0.0])
    countries = {row["name"]: row["country"] for row in _seed("raw_customers.csv")}
    for name, (count, revenue) in expected.items():
        by_country[countries[name]][0] += count
        by_country[countries[name]][1] += revenue
    assert {name[8:]: value for name, value in got.items() if name.startswith("country ")} == {
        country: (count, round(revenue, 2)) for country, (count, revenue) in by_country.items()}


def _recorded_usage(project: Path) -> list[tuple[str, int | None, int | None]]:
    """(model, executor_ms, bytes_read) of every batch recorded in the project's SQLite state."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(project / ".meshbot" / "state.db")) as db:
        return db.execute("SELECT name, executor_ms, bytes_read FROM intervals WHERE NOT is_removed").fetchall()


def _physical_table(warehouse: Path, model: str) -> str:
    """The Parquet directory of the one physical table of `shop.<model>` in an embedded warehouse."""
    (table,) = (warehouse / "sqlmesh__shop.db").glob(f"shop__{model}__*")
    return f"parquet.`{table}`"


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------

@pytest.mark.spark   # Spark servers and meshbot subprocesses
def test_plan_runs_through_spark_connect_on_the_servers_catalog(connect_server, tmp_path):
    project = _project(tmp_path / "shop", f"      remote: {connect_server.url}\n")
    _plan(project)
    _check_revenue(_fetch(project, REVENUE_SQL.format(customer="shop.customer_revenue",
                                                      country="shop.country_revenue")))
    # The server owns catalog and warehouse: the project holds only meshbot's state.
    assert (connect_server.directory / "warehouse" / "sqlmesh__shop.db").is_dir()
    assert not (project / ".meshbot" / "metastore_db").exists()
    assert not (project / ".meshbot" / "warehouse").exists()
    # The Connect client reports no task time: batches keep their wall time only (estimates say so).
    usage = _recorded_usage(project)
    assert usage and all(executor is None and read is None for _, executor, read in usage), usage
    # A static setting cannot change on a running server: the command names it instead of ignoring it.
    config = project / "config.yaml"
    config.write_text(config.read_text().replace(
        f"      remote: {connect_server.url}\n",
        f"      remote: {connect_server.url}\n      config:\n        spark.executor.memory: 4g\n"))
    result = subprocess.run([str(PYTHON), "-m", "bot", "-p", str(project), "fetchdf", "SELECT 1"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert (f"Spark Connect at {connect_server.url} rejected `spark.executor.memory` (connection.config)"
            in result.stderr), result.stderr


@pytest.mark.spark   # Spark servers and meshbot subprocesses
def test_plan_runs_on_a_standalone_master_with_executors_on_the_worker(standalone_master, spark, tmp_path):
    connection = (f"      master: {standalone_master.url}\n"
                  "      config:\n        spark.executor.memory: 512m\n        spark.cores.max: 1\n"
                  f"        spark.driver.extraJavaOptions: {QUICK_JVM}\n"
                  f"        spark.executor.extraJavaOptions: {QUICK_JVM}\n")
    project = _project(tmp_path / "shop", connection)
    _plan(project)
    # Tasks ran in an executor the worker launched for meshbot's application, not in the driver.
    executor_logs = list((standalone_master.directory / "work").glob("app-*/*/stderr"))
    assert executor_logs, standalone_master.log()
    assert any("Finished task" in path.read_text(errors="replace") for path in executor_logs)
    # The driver's status store has the task time the executors report, for every batch (a view's runs no job)
    usage = _recorded_usage(project)
    assert usage and all(executor is not None and read is not None for _, executor, read in usage), usage
    assert all(executor > 0 and read > 0 for name, executor, read in usage if name == "shop.orders"), usage
    # The executors wrote the tables' files into the project's warehouse (the catalog stays the driver's,
    # in .meshbot/metastore_db): this run's own session reads them, sparing a third JVM start.
    assert (project / ".meshbot" / "metastore_db").is_dir()
    warehouse = project / ".meshbot" / "warehouse"
    sql = REVENUE_SQL.format(customer=_physical_table(warehouse, "customer_revenue"),
                             country=_physical_table(warehouse, "country_revenue"))
    _check_revenue([row.asDict() for row in spark.sql(sql).collect()])


def test_unreachable_connect_server_fails_at_once_naming_the_url(tmp_path):
    url = f"sc://127.0.0.1:{free_port()}"
    project = _project(tmp_path / "shop", f"      remote: {url}\n")
    result = subprocess.run([str(PYTHON), "-m", "bot", "-p", str(project), "fetchdf", "SELECT 1"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert f"could not reach Spark Connect at {url} (connection.remote): Connection refused" in result.stderr


def test_connect_helpers():
    assert parse_remote("sc://spark.example.com:443/;use_ssl=true;token=x").port == 443
    assert parse_remote("sc://h").port == 15002
    with pytest.raises(EngineError, match=r"invalid Spark Connect URL `http://h:1` \(connection.remote\)"):
        parse_remote("http://h:1")
