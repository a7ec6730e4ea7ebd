"""Value-level column impact (bot.plan.impact over bot.plan.value_lineage): columns whose expression or rows
changed, followed downstream, joined with the data diff; hand-worked cases, no Spark."""

from __future__ import annotations

from bot.github.views import CommentView, DiffView, PlanView, impact_view, impact_with_diffs
from bot.plan.impact import ColumnImpact, Exposure, ValueChange, column_impact
from bot.report.comment_state import comment_marker
from bot.report.markdown import render
from test_column_impact import one, plan_of, snap

ORDERS = "SELECT order_id, customer_id, ds, amount FROM raw.orders"
NULLED = ("SELECT order_id, customer_id, ds, CASE WHEN order_id IN (5, 9) THEN NULL ELSE amount END AS amount "
          "FROM raw.orders")
DAILY = "SELECT ds, SUM(amount) AS revenue, COUNT(*) AS orders FROM shop.orders GROUP BY ds"
CUSTOMER = ("WITH o AS (SELECT * FROM shop.orders) SELECT customer_id, SUM(amount) AS revenue FROM o "
            "GROUP BY customer_id")


def shop(orders_new: str, *children):
    """shop.orders changed from ORDERS to `orders_new`, with daily_revenue, customer_revenue and `children`."""
    models = [snap("shop.orders", orders_new, version="2"),
              snap("shop.daily_revenue", DAILY, "shop.orders", owner="finance"),
              snap("shop.customer_revenue", CUSTOMER, "shop.orders"), *children]
    return plan_of(models, {"shop.orders": snap("shop.orders", ORDERS)})


def test_a_changed_expression_reaches_the_columns_that_read_it_through_a_cte_star():
    # the PR: amount becomes NULL for two orders. customer_revenue reads it through `WITH o AS
    # (SELECT *)`; order_ids reads only order_id: not reached
    ids = snap("shop.order_ids", "SELECT order_id FROM shop.orders", "shop.orders")
    impact = one(shop(NULLED, ids), exposures=(Exposure("Revenue board", depends_on=("shop.daily_revenue",)),))
    assert impact.changes == ()
    assert impact.values == (ValueChange("shop.orders", "amount", "expression"),)
    assert impact.impacts == (ColumnImpact("shop.customer_revenue", "revenue", ("shop.orders", "amount")),
                              ColumnImpact("shop.daily_revenue", "revenue", ("shop.orders", "amount")))
    assert impact.breaks == () and [i.effect for i in impact.impacts] == ["values", "values"]
    assert impact.reached == ("shop.customer_revenue", "shop.daily_revenue")
    assert impact.owners == ("finance",) and [e.name for e in impact.exposures] == ["Revenue board"]


def test_layout_aliases_and_a_cte_refactor_change_no_value():
    same = ("WITH src AS (SELECT r.order_id, r.customer_id AS customer_id, r.ds, r.amount FROM raw.orders AS r) "
            "select order_id, customer_id, ds, amount from src")
    impacts = column_impact(shop(same))
    assert [(i.values, i.impacts) for i in impacts] == [((), ())]


def test_a_changed_where_may_change_every_column_and_count_star_downstream():
    impact = one(shop(ORDERS + " WHERE amount > 0"))
    assert impact.values == tuple(ValueChange("shop.orders", c, "rows", clauses=("WHERE",))
                                  for c in ("order_id", "customer_id", "ds", "amount"))
    # daily_revenue.orders is COUNT(*): it reads no column, but the rows it counts may change
    assert impact.impacts == (
        ColumnImpact("shop.customer_revenue", "customer_id", ("shop.orders", "customer_id")),
        ColumnImpact("shop.customer_revenue", "revenue", ("shop.orders", "amount")),
        ColumnImpact("shop.daily_revenue", "ds", ("shop.orders", "ds")),
        ColumnImpact("shop.daily_revenue", "revenue", ("shop.orders", "amount")),
        ColumnImpact("shop.daily_revenue", "orders", ("shop.orders", "*")))


def test_a_changed_join_names_the_clause():
    before = snap("shop.enriched", "SELECT o.order_id, c.name FROM raw.orders AS o JOIN raw.customers AS c "
                  "ON o.customer_id = c.id")
    after = snap("shop.enriched", "SELECT o.order_id, c.name FROM raw.orders AS o LEFT JOIN raw.customers AS c "
                 "ON o.customer_id = c.id", version="2")
    impact = one(plan_of([after], {"shop.enriched": before}))
    assert impact.values == (ValueChange("shop.enriched", "order_id", "rows", clauses=("JOIN",)),
                             ValueChange("shop.enriched", "name", "rows", clauses=("JOIN",)))
    assert impact.reached == ()


def test_a_change_no_downstream_column_reads():
    impact = one(shop(ORDERS.replace("customer_id", "UPPER(customer_id) AS customer_id")))
    assert impact.values == (ValueChange("shop.orders", "customer_id", "expression"),)
    # customer_revenue groups by it (its revenue is marked changed for its own readers); daily_revenue not reached
    assert impact.impacts == (ColumnImpact("shop.customer_revenue", "customer_id", ("shop.orders", "customer_id")),)
    lone = one(plan_of([snap("shop.orders", ORDERS.replace(", amount", ", amount * 100 AS amount"), version="2"),
                        snap("shop.ids", "SELECT order_id FROM shop.orders", "shop.orders")],
                       {"shop.orders": snap("shop.orders", ORDERS)}))
    assert lone.values == (ValueChange("shop.orders", "amount", "expression"),)
    assert lone.impacts == () and lone.reached == ()


def test_a_column_read_in_a_downstream_where_may_change_all_its_columns_and_their_readers():
    paid = snap("shop.paid", "SELECT order_id, customer_id FROM shop.orders WHERE amount > 0", "shop.orders")
    report = snap("shop.report", "SELECT customer_id, COUNT(order_id) AS n FROM shop.paid GROUP BY customer_id",
                  "shop.paid")
    impact = one(plan_of([snap("shop.orders", NULLED, version="2"), paid, report],
                         {"shop.orders": snap("shop.orders", ORDERS)}))
    assert impact.impacts == (
        ColumnImpact("shop.paid", "", ("shop.orders", "amount")),
        ColumnImpact("shop.report", "customer_id", ("shop.paid", "customer_id")),
        ColumnImpact("shop.report", "n", ("shop.paid", "order_id")))


def test_union_branches_and_a_scalar_subquery_compare_by_position():
    before = snap("shop.ledger", "SELECT id, fee AS value FROM raw.refunds UNION ALL "
                  "SELECT id, (SELECT MAX(o.amount) FROM raw.orders AS o) FROM raw.payments")
    after = snap("shop.ledger", "SELECT id, fee AS value FROM raw.refunds UNION ALL "
                 "SELECT id, (SELECT MIN(o.amount) FROM raw.orders AS o) FROM raw.payments", version="2")
    impact = one(plan_of([after], {"shop.ledger": before}))
    assert impact.values == (ValueChange("shop.ledger", "value", "expression"),)
    distinct = snap("shop.ledger", before.rendered_query.replace("UNION ALL", "UNION"), version="2")
    assert one(plan_of([distinct], {"shop.ledger": before})).values[0].clauses == ("UNION",)


# -- the comment: wording, and what the data diff found next to the lineage ----------------------

def _section(impact) -> str:
    view = CommentView(marker=comment_marker(None), status="ok", prod_plan=PlanView(environment="prod"),
                       impact=impact)
    return render("comment.md.j2", view).split("#### Column impact")[1]


def test_the_data_diff_confirms_or_refutes_each_column_next_to_the_lineage():
    impact = impact_view(shop(NULLED))
    diffs = (DiffView("shop.daily_revenue", keys=("ds",), matched=3, changed=1, prod_only=0, pr_only=0,
                      columns=(("revenue", 75.0), ("orders", 100.0))),
             DiffView("shop.orders", keys=("order_id",), matched=8, changed=2, prod_only=0, pr_only=0,
                      columns=(("amount", 80.0), ("customer_id", 100.0))),
             DiffView("shop.customer_revenue", note="no key"))      # not compared by key: nothing said
    joined = impact_with_diffs(impact, diffs)
    model, = joined.models
    assert [(v.column, v.diff) for v in model.values] == [("amount", "2 of 10 rows changed")]
    assert [(r.model, r.column, r.diff) for r in model.reads] == [
        ("shop.customer_revenue", "revenue", ""), ("shop.daily_revenue", "revenue", "1 of 4 rows changed")]
    text = _section(joined)
    assert "- `shop.orders`: values of `amount` may change (expression changed) — reaches 2 downstream models" in text
    assert "Data diff of `shop.orders`: `amount` 2 of 10 rows changed." in text
    assert "| Downstream | Reads | Effect | Data diff |" in text
    assert "| `shop.daily_revenue.revenue` | `shop.orders.amount` | values may change | 1 of 4 rows changed |" in text
    assert "| `shop.customer_revenue.revenue` | `shop.orders.amount` | values may change | — |" in text
    # refuted: the diff compared the column and no row changed; a key column counts rows on one side only
    quiet = impact_with_diffs(impact, (DiffView("shop.daily_revenue", keys=("revenue",), matched=4, changed=0,
                                                prod_only=1, pr_only=2, columns=()),
                                       DiffView("shop.orders", keys=("order_id",), matched=1, changed=0,
                                                prod_only=0, pr_only=0, columns=(("amount", 100.0),))))
    assert quiet.models[0].values[0].diff == "0 of 1 row changed"
    assert quiet.models[0].reads[1].diff == "key column: 1 only in prod, 2 only in PR"
    assert impact_with_diffs(None, diffs) is None and impact_with_diffs(impact, ()) is impact


def test_the_comment_words_rows_changes_and_changes_nobody_reads():
    text = _section(impact_view(shop(ORDERS + " WHERE amount > 0")))
    assert "- `shop.orders`: WHERE changed: the values of all 4 columns may change — reaches 2 downstream models" in text
    assert "| `shop.daily_revenue.orders` | the rows of `shop.orders` | values may change |" in text
    lone = plan_of([snap("shop.orders", ORDERS.replace(", amount", ", amount * 100 AS amount"), version="2")],
                   {"shop.orders": snap("shop.orders", ORDERS)})
    assert ("- `shop.orders`: values of `amount` may change (expression changed) — no downstream model reads them"
            in _section(impact_view(lone)))
    weird = plan_of([snap("shop.orders", "SELECT order_id, amount * 2 AS `a|b*` FROM raw.orders", version="2")],
                    {"shop.orders": snap("shop.orders", "SELECT order_id, amount AS `a|b*` FROM raw.orders")})
    assert "values of <code>a\\|b\\*</code> may change" in _section(impact_view(weird))   # escaped by the renderer
