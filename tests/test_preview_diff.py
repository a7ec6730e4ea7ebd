"""Context.review's data diffs on local Spark: a PR's changed models compared with prod without writing anything.

The example shop is applied to prod, then changed: `shop.orders` (incremental by time) doubles `amount`,
drops orders of 20 or less and adds `channel`; `shop.customer_revenue` (FULL) adds 1 to `revenue`, adds
`max_amount` and reads the orders preview; `shop.top_customers` (VIEW, no grain) is a breaking child. Every expected figure is
computed here from the seed CSVs.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from bot.context import Context
from bot.diff.review import ReviewOptions
from bot.errors import ConfigError
from bot.report.comment_state import comment_marker
from bot.github.settings import load_settings
from bot.github.views import CommentView, diff_view
from bot.github.comment_fitting import render_comment
from bot.plan.definition import PlanOptions
from bot.project.example import write_example

WINDOW = ("2024-01-05", "2024-01-06", "2024-01-07")   # the last 3 days of prod's intervals (end 2024-01-07)


@pytest.fixture(scope="module")
def shop(spark, tmp_path_factory):
    before = {row[0] for row in spark.sql("SHOW DATABASES").collect()}
    root = tmp_path_factory.mktemp("preview") / "shop"
    write_example(root)
    context = Context(root)
    context.apply(context.plan("prod", options=PlanOptions(skip_tests=True)))
    orders = root / "models" / "orders.sql"
    orders.write_text(orders.read_text().replace("  amount,", "  amount * 2 AS amount,\n  'web' AS channel,")
                      .replace("@end_ds", "@end_ds AND amount > 20"))
    revenue = root / "models" / "customer_revenue.sql"
    revenue.write_text(revenue.read_text().replace("SUM(o.amount) AS revenue",
                                                   "SUM(o.amount) + 1 AS revenue,\n  MAX(o.amount) AS max_amount"))
    yield root
    for name in sorted({row[0] for row in spark.sql("SHOW DATABASES").collect()} - before):
        spark.sql(f"DROP DATABASE IF EXISTS `{name}` CASCADE")


def _seed(root: Path, name: str) -> list[dict[str, str]]:
    with (root / "seeds" / f"{name}.csv").open() as handle:
        return list(csv.DictReader(handle))


def _revenue(root: Path, *, pr: bool) -> dict[int, tuple[str, int, float]]:
    """customer_id → (name, order_count, revenue) as prod (pr=False) or the PR computes it."""
    names = {int(r["customer_id"]): r["name"] for r in _seed(root, "raw_customers")}
    out: dict[int, tuple[str, int, float]] = {}
    for row in _seed(root, "raw_orders"):
        customer, amount = int(row["customer_id"]), float(row["amount"])
        if customer not in names or (pr and amount <= 20):
            continue
        amount = amount * 2 if pr else amount
        _, count, total = out.get(customer, (names[customer], 0, 1.0 if pr else 0.0))
        out[customer] = (names[customer], count + 1, total + amount)
    return out


def _plan(root: Path):
    context = Context(root)
    return context, context.plan("prod", options=PlanOptions(skip_tests=True))


def _catalog(spark) -> set[tuple[str, str]]:
    out = set()
    for (database,) in spark.sql("SHOW DATABASES").collect():
        for row in spark.sql(f"SHOW TABLES IN `{database}`").collect():
            if not row["isTemporary"]:
                out.add((database, row["tableName"]))
    return out


def test_preview_diff_counts_match_the_seeds_and_nothing_is_written(spark, shop):
    context, plan = _plan(shop)
    before = _catalog(spark)
    environments = {e.name: e.plan_id for e in context.state.get_environments()}
    results = {d.model: d for d in context.review(plan, ReviewOptions(window_days=3, show_sample=True)).diffs}
    assert set(results) == {"shop.orders", "shop.customer_revenue", "shop.top_customers"}

    # nothing reached the warehouse or state; the temporary views are gone
    assert _catalog(spark) == before
    for name in results:
        assert not spark.catalog.tableExists(plan.snapshots[name].table_name)
    assert not context.state.get_snapshots([s.snapshot_id for s in plan.new_snapshots])
    assert {e.name: e.plan_id for e in context.state.get_environments()} == environments
    assert not [t.name for t in spark.catalog.listTables() if t.name.startswith("__meshbot_preview")]

    # orders: the last 3 days only, prod as the base, `channel` added by the PR
    orders = results["shop.orders"]
    window = [r for r in _seed(shop, "raw_orders") if r["ds"] in WINDOW]
    kept = [r for r in window if float(r["amount"]) > 20]
    assert orders.reason == "directly modified" and orders.previewed
    assert orders.window == "2024-01-05 – 2024-01-07 (3 days)" and orders.keys == ("order_id",)
    assert orders.schema.added == (("channel", "string"),) and not orders.schema.removed
    assert (orders.source_count, orders.target_count) == (len(window), len(kept))
    rows = orders.rows
    assert (rows.source_only_count, rows.target_only_count) == (len(window) - len(kept), 0)
    assert (rows.full_match_count, rows.partial_match_count) == (0, len(kept))
    assert rows.column_match_pct["amount"] == 0.0 and rows.column_match_pct["customer_id"] == 100.0

    # customer_revenue (directly modified too) reads the orders preview over its whole range
    prod, pr = _revenue(shop, pr=False), _revenue(shop, pr=True)
    both = set(prod) & set(pr)
    same = {c for c in both if prod[c][1] == pr[c][1] and round(prod[c][2], 3) == round(pr[c][2], 3)}
    revenue = results["shop.customer_revenue"]
    assert revenue.window == "whole query" and revenue.schema.added == (("max_amount", "double"),)
    assert (revenue.source_count, revenue.target_count) == (len(prod), len(pr))
    assert revenue.rows.source_only_count == len(set(prod) - set(pr))
    assert revenue.rows.target_only_count == 0
    assert (revenue.rows.full_match_count, revenue.rows.partial_match_count) == (len(same), len(both - same))
    assert revenue.rows.column_match_pct["name"] == 100.0

    # top_customers has no grain nor unique_key: counts and schema only, said plainly
    top = results["shop.top_customers"]
    assert top.reason == "breaking change upstream" and top.rows is None and not top.schema.has_changes
    assert top.source_count == sum(1 for _, _, r in prod.values() if r >= 100)
    assert top.target_count == sum(1 for _, _, r in pr.values() if r >= 100)
    assert "neither a grain nor a unique_key" in top.note

    # the comment: no raw value unless samples are on
    names = [r["name"] for r in _seed(shop, "raw_customers")]
    hidden, _ = render_comment(CommentView(marker=comment_marker(None), status="", diffs=tuple(
        diff_view(d) for d in results.values())))
    shown, _ = render_comment(CommentView(marker=comment_marker(None), status="", diffs=tuple(
        diff_view(d, samples=True) for d in results.values())))
    assert "added channel (string)" in hidden and "| only in prod | " in hidden
    assert "Sample" not in hidden and not [n for n in names if n in hidden]
    assert "Sample, changed:" in shown and [n for n in names if n in shown]


def test_full_scope_skip_and_settings(spark, shop):
    context, plan = _plan(shop)
    results = {d.model: d for d in context.review(plan, ReviewOptions(window_days=1, full_scope="skip")).diffs}
    assert results["shop.orders"].window == "2024-01-07 – 2024-01-07 (1 day)"
    assert results["shop.orders"].source_count == sum(1 for r in _seed(shop, "raw_orders")
                                                      if r["ds"] == "2024-01-07")
    assert results["shop.customer_revenue"].schema is None
    assert "table_diff_full_scope" in results["shop.customer_revenue"].note


def test_settings_for_the_pr_data_diff():
    defaults = load_settings({})
    assert (defaults.table_diff_window_days, defaults.table_diff_full_scope) == (7, "whole")
    assert not defaults.table_diff_samples
    custom = load_settings({"table_diff_window_days": 3, "table_diff_full_scope": "skip"})
    assert (custom.table_diff_window_days, custom.table_diff_full_scope) == (3, "skip")
    for bad in (0, -1, "a week", 2.5, True):
        with pytest.raises(ConfigError, match="cicd_bot.table_diff_window_days"):
            load_settings({"table_diff_window_days": bad})
    with pytest.raises(ConfigError, match="cicd_bot.table_diff_full_scope must be one of whole, skip"):
        load_settings({"table_diff_full_scope": "sample"})


def test_previews_are_cast_to_declared_columns_and_reach_past_a_non_breaking_change(spark, tmp_path):
    """Two rules of the PR data diff, on one applied shop:

    - a model declaring `columns` has those types in prod; its preview is cast the same way, so an
      unchanged column is neither a schema change nor a value change (DECIMAL(12,2) vs the query's DOUBLE);
    - orders (breaking) → customer_revenue (non-breaking: adds a column) → top_customers: SQLMesh 0.236.4
      calls top_customers Indirect Non-breaking (checked on DuckDB with the same shape), but its rows
      change with the orders it reads, so it is compared too.
    """
    before = {row[0] for row in spark.sql("SHOW DATABASES").collect()}
    root = tmp_path / "shop"
    write_example(root)
    # a second project with a state of its own, next to the module's `shop`: one state per physical schema
    with (root / "config.yaml").open("a") as handle:
        handle.write("physical_schema_mapping:\n  shop: sqlmesh__shop_cast\n")
    amounts = root / "models" / "order_amounts.sql"
    query = ("MODEL (name shop.order_amounts, kind FULL, grain order_id,\n"
             "  columns (order_id INT, amount DECIMAL(12, 2), ds STRING));\n"
             "SELECT order_id, CAST(amount AS DOUBLE) * 1.0 AS amount, ds FROM shop.raw_orders")
    amounts.write_text(query)
    try:
        context = Context(root)
        context.apply(context.plan("prod", options=PlanOptions(skip_tests=True)))
        prod_types = dict(spark.table(context.table_in("prod", "shop.order_amounts")).dtypes)
        assert prod_types["amount"] == "decimal(12,2)"
        amounts.write_text(query + " WHERE order_id > 1")
        orders = root / "models" / "orders.sql"
        orders.write_text(orders.read_text().replace("@end_ds", "@end_ds AND amount > 20"))
        revenue = root / "models" / "customer_revenue.sql"
        revenue.write_text(revenue.read_text().replace("SUM(o.amount) AS revenue",
                                                       "SUM(o.amount) AS revenue,\n  MAX(o.amount) AS max_amount"))
        context, plan = _plan(root)
        categories = {c.name: (c.change.value, c.category.value) for c in plan.changes}
        assert categories["shop.orders"] == ("directly_modified", "breaking")
        assert categories["shop.customer_revenue"] == ("directly_modified", "non_breaking")
        assert categories["shop.top_customers"] == ("indirectly_modified", "indirect_non_breaking")
        results = {d.model: d for d in context.review(plan).diffs}

        cast = results["shop.order_amounts"]
        raw = _seed(root, "raw_orders")
        assert not cast.schema.added and not cast.schema.removed and not cast.schema.modified
        assert cast.rows.source_only_count == sum(1 for r in raw if int(r["order_id"]) <= 1)
        assert cast.rows.joined_count == cast.rows.full_match_count == len(raw) - 1
        assert cast.rows.column_match_pct == {"amount": 100.0, "ds": 100.0}

        top = results["shop.top_customers"]
        assert top.reason == "breaking change upstream" and top.compared
        expected = sum(1 for _, _, total in _revenue_without_small_orders(root).values() if total >= 100)
        assert top.target_count == expected and top.source_count >= expected
    finally:
        for name in sorted({row[0] for row in spark.sql("SHOW DATABASES").collect()} - before):
            spark.sql(f"DROP DATABASE IF EXISTS `{name}` CASCADE")


def _revenue_without_small_orders(root: Path) -> dict[int, tuple[str, int, float]]:
    """customer_id → (name, order_count, revenue) over orders above 20 (amounts unchanged)."""
    names = {int(r["customer_id"]): r["name"] for r in _seed(root, "raw_customers")}
    out: dict[int, tuple[str, int, float]] = {}
    for row in _seed(root, "raw_orders"):
        customer, amount = int(row["customer_id"]), float(row["amount"])
        if customer in names and amount > 20:
            _, count, total = out.get(customer, (names[customer], 0, 0.0))
            out[customer] = (names[customer], count + 1, total + amount)
    return out
