"""End to end on local Spark: the example project planned and applied to prod and dev, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from bot.cli import cli
from bot.context import Context
from bot.errors import ConflictError
from bot.plan.definition import PlanOptions
from bot.project.example import write_example

EXECUTION = PlanOptions(execution_time="2024-01-10")


def _project(tmp_path: Path, state: dict | None = None) -> Path:
    root = tmp_path / "shop"
    write_example(root)
    if state is not None:
        config = yaml.safe_load((root / "config.yaml").read_text())
        config["gateways"] = {"local": {**config["gateways"]["local"], "state_connection": state}}
        (root / "config.yaml").write_text(yaml.safe_dump(config))
    return root


def _add_column_to_orders(root: Path) -> None:
    path = root / "models" / "orders.sql"
    path.write_text(path.read_text().replace("  ds\nFROM", "  ds,\n  amount * 2 AS amount_doubled\nFROM"))


@pytest.fixture(params=["sqlite", "postgres"])
def state_config(request):
    if request.param == "sqlite":
        return None
    return {k: v for k, v in request.getfixturevalue("postgres_schema").items()}


def test_prod_then_dev_then_virtual_promotion(tmp_path, clean_catalog, state_config):
    spark = clean_catalog
    root = _project(tmp_path, state_config)
    context = Context(root)

    prod_plan = context.plan("prod", options=EXECUTION)
    assert {c.name for c in prod_plan.changes} == {
        "shop.raw_orders", "shop.raw_customers", "shop.orders", "shop.customers",
        "shop.customer_revenue", "shop.top_customers"}
    context.apply(prod_plan)

    revenue = {r["customer_id"]: (r["order_count"], r["revenue"]) for r in
               context.fetchdf("SELECT * FROM shop.customer_revenue")}
    raw = spark.sql("SELECT customer_id, COUNT(*) AS n, SUM(amount) AS total "
                    "FROM shop.raw_orders GROUP BY customer_id").collect()
    assert revenue == {r["customer_id"]: (r["n"], r["total"]) for r in raw}
    assert spark.sql("SELECT COUNT(*) FROM shop.orders").collect()[0][0] == 37
    assert {r["customer_id"] for r in context.fetchdf("SELECT * FROM shop.top_customers")} == \
        {cid for cid, (_, total) in revenue.items() if total >= 100}

    # A non-breaking change in dev backfills only the changed model.
    _add_column_to_orders(root)
    dev_context = Context(root)
    dev_plan = dev_context.plan("dev", options=EXECUTION)
    changes = {c.name: (c.change.value, c.category.value if c.category else None)
               for c in dev_plan.changes}
    assert changes["shop.orders"] == ("directly_modified", "non_breaking")
    assert changes["shop.customer_revenue"] == ("indirectly_modified", "indirect_non_breaking")
    result = dev_context.apply(dev_plan)
    assert {name for name, _, _ in result.evaluated} == {"shop.orders"}

    prod_env = dev_context.state.get_environment("prod").by_name()
    dev_env = dev_context.state.get_environment("dev").by_name()
    assert dev_env["shop.customer_revenue"].table_name == prod_env["shop.customer_revenue"].table_name
    assert dev_env["shop.orders"].table_name != prod_env["shop.orders"].table_name
    doubled = spark.sql("SELECT SUM(amount_doubled) = 2 * SUM(amount) FROM shop__dev.orders").collect()
    assert doubled[0][0] is True
    assert "amount_doubled" not in spark.table("shop.orders").columns

    # table_diff between the environments, and between two tables named directly, as JSON.
    runner = CliRunner()
    by_env = runner.invoke(cli, ["-p", str(root), "table_diff", "prod:dev", "shop.orders", "--json"])
    assert by_env.exit_code == 0, by_env.output
    report = json.loads(by_env.output)
    assert report["schema"]["added"] == [["amount_doubled", "double"]]
    assert report["rows"]["full_match_count"] == report["rows"]["source_count"] == 37
    assert report["keys"] == ["order_id"]
    by_table = runner.invoke(cli, ["-p", str(root), "table_diff", "shop.orders:shop__dev.orders",
                                   "-o", "order_id", "--json"])
    assert by_table.exit_code == 0, by_table.output
    assert json.loads(by_table.output)["rows"] == report["rows"]

    # Promoting the same change to prod reuses dev's tables: views only, nothing evaluated.
    promote = Context(root).plan("prod", options=EXECUTION)
    promoted = Context(root).apply(promote)
    assert promoted.evaluated == ()
    assert "amount_doubled" in spark.table("shop.orders").columns
    prod_after = Context(root).state.get_environment("prod").by_name()
    assert prod_after["shop.orders"].table_name == dev_env["shop.orders"].table_name


def test_reverted_change_reuses_the_old_table(tmp_path, clean_catalog):
    root = _project(tmp_path)
    Context(root).apply(Context(root).plan("prod", options=EXECUTION))
    original = (root / "models" / "orders.sql").read_text()
    first = Context(root).state.get_environment("prod").by_name()["shop.orders"]

    _add_column_to_orders(root)
    Context(root).apply(Context(root).plan("prod", options=EXECUTION))
    (root / "models" / "orders.sql").write_text(original)
    reverted_plan = Context(root).plan("prod", options=EXECUTION)
    result = Context(root).apply(reverted_plan)

    assert result.evaluated == ()
    assert Context(root).state.get_environment("prod").by_name()["shop.orders"].table_name == first.table_name


def test_second_of_two_concurrent_plans_fails_cleanly_on_postgres(tmp_path, clean_catalog, postgres_schema):
    root = _project(tmp_path, postgres_schema)
    Context(root).apply(Context(root).plan("prod", options=EXECUTION))
    _add_column_to_orders(root)
    first, second = Context(root), Context(root)
    plan_a = first.plan("dev", options=EXECUTION)
    plan_b = second.plan("dev", options=EXECUTION)
    first.apply(plan_a)

    with pytest.raises(ConflictError, match="another plan was applied to `dev` while yours was in progress; re-plan"):
        second.apply(plan_b)
    env = Context(root).state.get_environment("dev")
    assert env.plan_id == plan_a.plan_id
    assert env.finalized_ts is not None


def test_cli_plan_json_and_explain_change_nothing(tmp_path):
    root = _project(tmp_path)
    runner = CliRunner()
    result = runner.invoke(cli, ["-p", str(root), "plan", "--json", "--execution-time", "2024-01-10"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["environment"] == "prod" and payload["new_environment"] is True
    orders = next(m for m in payload["models"] if m["name"] == "shop.orders")
    assert orders["backfill"] == [["2024-01-01", "2024-01-07"]]
    assert orders["physical_table"].startswith("sqlmesh__shop.shop__orders__")
    assert next(m for m in payload["models"] if m["name"] == "shop.top_customers")["backfill"] == "recreate_view"

    explain = runner.invoke(cli, ["-p", str(root), "plan", "--explain"])
    assert explain.exit_code == 0 and "Models needing backfill:" in explain.output
    envs = runner.invoke(cli, ["-p", str(root), "environments", "--json"])
    assert json.loads(envs.output) == []


def test_cli_bad_model_is_one_clear_error_and_state_untouched(tmp_path):
    root = _project(tmp_path)
    (root / "models" / "broken.sql").write_text(
        "MODEL (name shop.broken, kind FULL);\n\nSELECT (1 + FROM shop.orders\n")
    result = CliRunner().invoke(cli, ["-p", str(root), "plan", "--auto-apply"])
    assert result.exit_code == 1
    assert "models/broken.sql:3" in result.output
    assert "Traceback" not in result.output
    assert not (root / ".meshbot" / "state.db").exists() or \
        CliRunner().invoke(cli, ["-p", str(root), "environments", "--json"]).output.strip() == "[]"
