"""Column-level impact (bot.plan.impact): hand-worked expectations over small plans, no Spark."""

from __future__ import annotations

from bot.plan.definition import ChangeType, ModelChange, Plan
from bot.plan.column_lineage import analyze
from bot.plan.impact import ColumnChange, ColumnImpact, Exposure, ValueChange, column_impact
from bot.snapshot import ChangeCategory, Fingerprint, Snapshot

ORDERS_OLD = "SELECT id, customer_id, amount FROM raw.orders"


def snap(name: str, sql: str, *parents: str, columns: tuple[tuple[str, str], ...] = (),
         owner: str | None = None, version: str = "1", kind: str = "FULL") -> Snapshot:
    return Snapshot(name=name, fingerprint=Fingerprint(data_hash=f"{name}{version}", metadata_hash="0"),
                    version=version, kind=kind, definition={"owner": owner, "depends_on": list(parents)},
                    rendered_query=sql, columns=columns)


def plan_of(models: list[Snapshot], modified: dict[str, Snapshot]) -> Plan:
    """`models` are the new versions; `modified` maps directly modified names to their previous version."""
    changes = tuple(ModelChange(name=name, change=ChangeType.DIRECTLY_MODIFIED, category=ChangeCategory.BREAKING,
                                kind="FULL", snapshot=next(s for s in models if s.name == name), previous=prev)
                    for name, prev in modified.items())
    return Plan(plan_id="p", environment="prod", new_environment=False, expected_plan_id=None,
                previous_environment=None, snapshots={s.name: s for s in models}, new_snapshots=(),
                changes=changes, backfills=())


def one(plan: Plan, **kwargs):
    impacts = column_impact(plan, **kwargs)
    assert len(impacts) == 1
    return impacts[0]


def test_removed_column_still_selected_downstream_breaks():
    orders = snap("shop.orders", "SELECT id, customer_id FROM raw.orders", owner="sales-eng", version="2")
    revenue = snap("shop.customer_revenue",
                   "SELECT customer_id, SUM(amount) AS revenue, COUNT(id) AS orders FROM shop.orders "
                   "GROUP BY customer_id", "shop.orders", owner="finance")
    untouched = snap("shop.order_ids", "SELECT id FROM shop.orders", "shop.orders")
    impact = one(plan_of([orders, revenue, untouched], {"shop.orders": snap("shop.orders", ORDERS_OLD)}))
    assert impact.model == "shop.orders" and impact.owner == "sales-eng"
    assert impact.changes == (ColumnChange("shop.orders", "amount", "removed"),)
    assert impact.impacts == (ColumnImpact("shop.customer_revenue", "revenue", ("shop.orders", "amount"), breaks=True),)
    assert impact.breaks == impact.impacts
    assert impact.reached == ("shop.customer_revenue",)      # shop.order_ids reads no changed column
    assert impact.owners == ("finance",)


def test_removed_column_read_only_in_where_breaks_outside_the_outputs():
    orders = snap("shop.orders", "SELECT id, customer_id FROM raw.orders", version="2")
    paid = snap("shop.paid", "SELECT id FROM shop.orders WHERE amount > 0", "shop.orders")
    impact = one(plan_of([orders, paid], {"shop.orders": snap("shop.orders", ORDERS_OLD)}))
    assert impact.impacts == (ColumnImpact("shop.paid", "", ("shop.orders", "amount"), breaks=True),)


def test_select_star_propagates_the_removal_and_its_reader_breaks():
    # orders drops `amount` and adds `status`; orders_wide is `SELECT *` (its columns follow orders'),
    # so it loses `amount` and gains `status` without breaking; report reads orders_wide.amount: breaks.
    orders = snap("shop.orders", "SELECT id, customer_id, 'new' AS status FROM raw.orders", version="2")
    wide = snap("shop.orders_wide", "SELECT * FROM shop.orders", "shop.orders")
    report = snap("shop.report", "SELECT w.id, w.amount AS total FROM shop.orders_wide AS w", "shop.orders_wide",
                  owner="bi")
    impact = one(plan_of([orders, wide, report], {"shop.orders": snap("shop.orders", ORDERS_OLD)}))
    assert impact.changes == (ColumnChange("shop.orders", "amount", "removed"),
                              ColumnChange("shop.orders", "status", "added"))
    assert impact.propagated == (ColumnChange("shop.orders_wide", "amount", "removed"),
                                 ColumnChange("shop.orders_wide", "status", "added"))
    assert impact.impacts == (ColumnImpact("shop.report", "total", ("shop.orders_wide", "amount"), breaks=True),)
    assert impact.reached == ("shop.report", "shop.orders_wide")
    assert impact.owners == ("bi",)


def test_star_expansion_over_a_join_and_a_cte():
    # `o.*` expands to orders' new columns only: `amount` is not selected any more, nothing breaks;
    # the CTE's `*` likewise. The join key and customers' columns are untouched.
    orders = snap("shop.orders", "SELECT id, customer_id FROM raw.orders", version="2")
    customers = snap("shop.customers", "SELECT id AS customer_id, name FROM raw.customers")
    joined = snap("shop.joined",
                  "WITH o AS (SELECT * FROM shop.orders) SELECT o.*, c.name FROM o "
                  "JOIN shop.customers AS c ON o.customer_id = c.customer_id", "shop.orders", "shop.customers")
    impact = one(plan_of([orders, customers, joined], {"shop.orders": snap("shop.orders", ORDERS_OLD)}))
    assert impact.propagated == (ColumnChange("shop.joined", "amount", "removed"),)
    assert impact.breaks == ()


def test_cte_chain_carries_a_retyped_column_to_the_output_that_aggregates_it():
    before = snap("shop.orders", ORDERS_OLD,
                  columns=(("id", "INT"), ("customer_id", "INT"), ("amount", "DECIMAL(10,2)")))
    after = snap("shop.orders", ORDERS_OLD, version="2",
                 columns=(("id", "INT"), ("customer_id", "INT"), ("amount", "double")))
    child = snap("shop.totals",
                 "WITH o AS (SELECT customer_id, amount AS amt FROM shop.orders), "
                 "agg AS (SELECT customer_id, SUM(amt) AS total FROM o GROUP BY customer_id) "
                 "SELECT customer_id, total FROM agg", "shop.orders")
    impact = one(plan_of([after, child], {"shop.orders": before}))
    assert impact.changes == (ColumnChange("shop.orders", "amount", "retyped",
                                           old_type="DECIMAL(10, 2)", new_type="DOUBLE"),)
    # totals computes with the retyped column (SUM over a CTE's alias of it): its values may change
    assert impact.impacts == (ColumnImpact("shop.totals", "total", ("shop.orders", "amount"), breaks=False),)
    assert impact.impacts[0].effect == "type" and impact.impacts[0].types == ("DECIMAL(10, 2)", "DOUBLE")


def test_cast_gives_a_type_without_declared_columns():
    before = snap("shop.orders", "SELECT id, CAST(amount AS INT) AS amount FROM raw.orders")
    after = snap("shop.orders", "SELECT id, CAST(amount AS BIGINT) AS amount FROM raw.orders", version="2")
    impact = one(plan_of([after], {"shop.orders": before}))
    assert impact.changes == (ColumnChange("shop.orders", "amount", "retyped", old_type="INT", new_type="BIGINT"),)


def test_union_branches_are_matched_by_position():
    # the output is named by the first branch (`value`); the second branch's `amount` feeds it by position
    orders = snap("shop.orders", "SELECT id, customer_id FROM raw.orders", version="2")
    refunds = snap("shop.refunds", "SELECT id, fee FROM raw.refunds")
    ledger = snap("shop.ledger",
                  "SELECT id, fee AS value FROM shop.refunds UNION ALL SELECT id, amount FROM shop.orders",
                  "shop.orders", "shop.refunds")
    impact = one(plan_of([orders, refunds, ledger], {"shop.orders": snap("shop.orders", ORDERS_OLD)}))
    assert impact.impacts == (ColumnImpact("shop.ledger", "value", ("shop.orders", "amount"), breaks=True),)


def test_rename_by_alias_breaks_readers_of_the_old_name_and_follows_star():
    orders = snap("shop.orders", "SELECT id, customer_id, amount AS amount_usd FROM raw.orders", version="2")
    spend = snap("shop.spend", "SELECT customer_id, amount AS spend FROM shop.orders", "shop.orders")
    wide = snap("shop.orders_wide", "SELECT * FROM shop.orders", "shop.orders")
    fresh = snap("shop.fresh", "SELECT amount_usd * 2 AS doubled FROM shop.orders", "shop.orders")
    impact = one(plan_of([orders, spend, wide, fresh], {"shop.orders": snap("shop.orders", ORDERS_OLD)}))
    assert impact.changes == (ColumnChange("shop.orders", "amount", "renamed", new_name="amount_usd"),)
    # the star passthrough of a renamed column is a rename too
    assert impact.propagated == (ColumnChange("shop.orders_wide", "amount", "renamed", new_name="amount_usd"),)
    assert impact.impacts == (
        ColumnImpact("shop.fresh", "doubled", ("shop.orders", "amount_usd"), breaks=False),
        ColumnImpact("shop.spend", "spend", ("shop.orders", "amount"), breaks=True))


def test_nested_subqueries_and_a_scalar_subquery():
    orders = snap("shop.orders", "SELECT id, customer_id FROM raw.orders", version="2")
    customers = snap("shop.customers", "SELECT id, name FROM raw.customers")
    nested = snap("shop.big_spenders",
                  "SELECT customer_id, big FROM (SELECT customer_id, x AS big FROM "
                  "(SELECT customer_id, amount * 2 AS x FROM shop.orders) AS inner1 WHERE x > 10) AS outer1",
                  "shop.orders")
    scalar = snap("shop.customer_max",
                  "SELECT c.id, c.name, (SELECT MAX(o.amount) FROM shop.orders AS o WHERE o.customer_id = c.id) "
                  "AS max_amount FROM shop.customers AS c", "shop.orders", "shop.customers")
    impact = one(plan_of([orders, customers, nested, scalar], {"shop.orders": snap("shop.orders", ORDERS_OLD)}))
    assert impact.impacts == (
        ColumnImpact("shop.big_spenders", "big", ("shop.orders", "amount"), breaks=True),
        ColumnImpact("shop.customer_max", "max_amount", ("shop.orders", "amount"), breaks=True))


def test_transitive_readers_are_impacted_not_broken_and_exposures_are_named():
    before = snap("shop.orders", "SELECT id, customer_id, CAST(amount AS INT) AS amount FROM raw.orders")
    after = snap("shop.orders", "SELECT id, customer_id, CAST(amount AS DOUBLE) AS amount FROM raw.orders",
                 version="2")
    revenue = snap("shop.customer_revenue", "SELECT customer_id, SUM(amount) AS revenue FROM shop.orders "
                   "GROUP BY customer_id", "shop.orders", owner="finance")
    ranking = snap("shop.ranking", "SELECT customer_id, RANK() OVER (ORDER BY revenue DESC) AS rnk, "
                   "customer_id AS cid FROM shop.customer_revenue", "shop.customer_revenue", owner="growth")
    other = snap("shop.other", "SELECT 1 AS one")
    exposures = (Exposure("Revenue dashboard", owner="cfo", url="https://bi/1", depends_on=("shop.ranking",)),
                 Exposure("Ops board", depends_on=("shop.other",)),
                 Exposure("Orders export", depends_on=("SHOP.ORDERS",)))
    impact = one(plan_of([after, revenue, ranking, other], {"shop.orders": before}), exposures=exposures)
    # revenue computes with the retyped amount, ranking reads revenue, reached transitively: the values of
    # both may change, neither breaks
    assert impact.impacts == (
        ColumnImpact("shop.customer_revenue", "revenue", ("shop.orders", "amount")),
        ColumnImpact("shop.ranking", "rnk", ("shop.customer_revenue", "revenue")))
    assert [i.effect for i in impact.impacts] == ["type", "values"]
    assert impact.breaks == ()
    assert impact.owners == ("finance", "growth")
    assert [e.name for e in impact.exposures] == ["Revenue dashboard", "Orders export"]


def test_a_downstream_model_fixed_in_the_same_plan_does_not_break():
    orders = snap("shop.orders", "SELECT id, customer_id FROM raw.orders", version="2")
    revenue_old = snap("shop.customer_revenue", "SELECT customer_id, SUM(amount) AS revenue FROM shop.orders "
                       "GROUP BY customer_id", "shop.orders")
    revenue = snap("shop.customer_revenue", "SELECT customer_id, COUNT(id) AS revenue FROM shop.orders "
                   "GROUP BY customer_id", "shop.orders", version="2")
    impacts = column_impact(plan_of([orders, revenue], {"shop.orders": snap("shop.orders", ORDERS_OLD),
                                                        "shop.customer_revenue": revenue_old}))
    assert [i.model for i in impacts] == ["shop.customer_revenue", "shop.orders"]
    assert impacts[0].changes == () and impacts[1].breaks == ()


def test_untraced_children_and_models_are_listed():
    orders = snap("shop.orders", "SELECT id, customer_id FROM raw.orders", version="2")
    python_child = snap("shop.scored", "", "shop.orders")
    impact = one(plan_of([orders, python_child], {"shop.orders": snap("shop.orders", ORDERS_OLD)}))
    assert impact.untraced == ("shop.scored",)
    # a model whose own columns are unknown (a `*` over a warehouse table) is not traced at all
    star = snap("shop.orders", "SELECT * FROM raw.orders", version="2")
    impact = one(plan_of([star], {"shop.orders": snap("shop.orders", "SELECT * FROM raw.orders WHERE 1 = 1")}))
    assert not impact.traced and impact.changes == ()


def test_analyze_lineage_through_union_and_cte():
    a = analyze("WITH x AS (SELECT id, a + b AS s FROM db.t) SELECT id, s FROM x UNION SELECT k, c FROM db.u",
                {"db.t": ["id", "a", "b"], "db.u": ["k", "c"]})
    assert [(o.name, sorted(o.sources)) for o in a.outputs] == [
        ("id", [("db.t", "id"), ("db.u", "k")]),
        ("s", [("db.t", "a"), ("db.t", "b"), ("db.u", "c")])]


# -- the PR comment, through main() with GitHub mocked and a FakeEngine ---------------------------

def test_the_pr_comment_shows_the_impact_with_breaks_and_exposures(tmp_path, monkeypatch):
    import json
    import time

    import responses

    from bot.github.action import Invocation, main
    from github_support import FakeEngine, FakeRepository, default_branch_config, install, payload

    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    cicd_bot = {"exposures": [{"name": "Revenue dashboard", "owner": "cfo", "url": "https://bi.example/d/1",
                               "depends_on": ["shop.customer_revenue"]},
                              {"name": "Unrelated", "depends_on": ["shop.other"]}]}
    engine = FakeEngine(cicd_bot, changed=("shop.orders",))
    engine.queries = {
        "shop.orders": (ORDERS_OLD, "SELECT id, customer_id FROM raw.orders"),
        "shop.customer_revenue": ("SELECT customer_id, SUM(amount) AS revenue FROM shop.orders GROUP BY 1",) * 2,
        "shop.other": ("SELECT 1 AS one",) * 2}
    engine.parents = {"shop.orders": ("raw.orders",), "shop.customer_revenue": ("shop.orders",), "shop.other": ()}
    env = {"GITHUB_ACTIONS": "true", "GITHUB_TOKEN": "ghs_impact_token", "GITHUB_API_URL": "https://api.github.com",
           "GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "Codertocat/Hello-World",
           "GITHUB_RUN_ID": "4242", "GITHUB_OUTPUT": str(tmp_path / "out.env"),
           "GITHUB_STEP_SUMMARY": str(tmp_path / "s.md")}
    event = tmp_path / "event.json"
    event.write_text(json.dumps(payload("pull_request/opened.payload.json")))
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gh = install(rsps)
        repo = FakeRepository(gh, permissions={}, default_config=default_branch_config(cicd_bot))
        repo.set_pull(payload("pull_request/opened.payload.json")["pull_request"])
        main(Invocation(event_name="pull_request", event_path=str(event)), env=env,
             context_factory=lambda p, g: engine, out=lambda line: None)
        assert not gh.errors, gh.errors
    body, = [c["body"] for c in repo.comments if "<!-- meshbot:pr-comment" in c["body"]]
    prod = body.split("<!-- meshbot:section prod_plan -->")[1].split("<!-- /meshbot:section prod_plan -->")[0]
    assert "#### Column impact" in prod
    assert ("- `shop.orders`: `amount` removed — **breaks** `shop.customer_revenue.revenue`; reaches 1 downstream "
            "model; exposures: Revenue dashboard") in prod
    # names inside <summary> are not backslash-escaped (GitHub shows the backslash there)
    assert "<summary>Column lineage of <code>shop.orders</code>: 1 breaking read</summary>" in prod
    assert "| `shop.customer_revenue.revenue` | `shop.orders.amount` | :x: breaks: the column is gone |" in prod
    assert "Exposures reached: [Revenue dashboard](https://bi.example/d/1) (owner cfo)." in prod
    assert "Unrelated" not in prod


# -- a real plan: the builder over a SQLite state, as the bot's prod preview makes it ------------

def test_a_plan_built_against_state_carries_what_the_impact_needs(tmp_path):
    from pathlib import Path

    import sqlglot
    from sqlglot import exp

    from bot.plan.builder import build_plan
    from bot.plan.definition import PlanOptions
    from bot.project.config import ModelDefaults, ProjectConfig, StateConnection
    from bot.project.model import Kind, KindName, Model
    from bot.project.render import normalized_query_sql
    from bot.state.protocol import Environment, EnvironmentSnapshot
    from bot.state.connect import connect_state

    def make(name: str, sql: str, **fields) -> Model:
        query = sqlglot.parse_one(sql, read="spark")
        return Model(name=name, kind=Kind(KindName.FULL), dialect="spark", path=Path(f"models/{name}.sql"),
                     query=query, query_text=sql, depends_on=frozenset(f"{t.db}.{t.name}" for t in
                                                                       query.find_all(exp.Table)), **fields)

    def plan_for(models: dict[str, Model]) -> Plan:
        rendered = {n: normalized_query_sql(m) for n, m in models.items()}
        return build_plan(project_models=models, dag=None, rendered=rendered, state=state, environment="prod",
                          options=PlanOptions(), config=config, now_ms=1_706_781_600_000)

    config = ProjectConfig(root=tmp_path, gateways={}, default_gateway="local",
                           model_defaults=ModelDefaults(start="2024-01-01"))
    state = connect_state(StateConnection(type="sqlite", database=str(tmp_path / "state.db")), project_root=tmp_path)
    try:
        models = {"shop.orders": make("shop.orders", ORDERS_OLD, owner="sales-eng"),
                  "shop.wide": make("shop.wide", "SELECT * FROM shop.orders"),
                  "shop.revenue": make("shop.revenue", "SELECT customer_id, SUM(amount) AS revenue "
                                       "FROM shop.wide GROUP BY customer_id", owner="finance")}
        first = plan_for(models)
        state.push_snapshots(first.new_snapshots)
        state.promote(Environment("prod", tuple(EnvironmentSnapshot(s.name, s.identifier, s.version, s.kind,
                                                                    s.table_name)
                                                for s in first.snapshots.values()), first.plan_id),
                      expected_plan_id=None)
        models["shop.orders"] = make("shop.orders", "SELECT id, customer_id, amount AS amount_usd FROM raw.orders",
                                     owner="sales-eng")
        impact = one(plan_for(models), exposures=(Exposure("Board", depends_on=("shop.revenue",)),))
    finally:
        state.close()
    assert impact.owner == "sales-eng"
    assert impact.changes == (ColumnChange("shop.orders", "amount", "renamed", new_name="amount_usd"),)
    assert impact.propagated == (ColumnChange("shop.wide", "amount", "renamed", new_name="amount_usd"),)
    assert impact.breaks == (ColumnImpact("shop.revenue", "revenue", ("shop.wide", "amount"), breaks=True),)
    assert impact.owners == ("finance",) and [e.name for e in impact.exposures] == ["Board"]


def test_an_unqualified_removed_column_in_a_join_is_its_old_table_s():
    orders = snap("shop.orders", "SELECT id, customer_id FROM raw.orders", version="2")
    customers = snap("shop.customers", "SELECT id AS customer_id, name FROM raw.customers")
    joined = snap("shop.joined", "SELECT c.name, Amount FROM shop.orders AS o JOIN shop.customers AS c "
                  "ON o.customer_id = c.customer_id", "shop.orders", "shop.customers")
    impact = one(plan_of([orders, customers, joined], {"shop.orders": snap("shop.orders", ORDERS_OLD)}))
    assert impact.breaks == (ColumnImpact("shop.joined", "amount", ("shop.orders", "amount"), breaks=True),)


def test_a_lateral_view_is_no_model_column():
    orders = snap("shop.orders", "SELECT id, customer_id, items FROM raw.orders", version="2")
    exploded = snap("shop.items", "SELECT id, item FROM shop.orders LATERAL VIEW EXPLODE(items) t AS item "
                    "WHERE amount > 0", "shop.orders")
    impact = one(plan_of([orders, exploded], {"shop.orders": snap("shop.orders", ORDERS_OLD.replace(
        "amount", "amount, items"))}))
    assert impact.changes == (ColumnChange("shop.orders", "amount", "removed"),)
    assert impact.breaks == (ColumnImpact("shop.items", "", ("shop.orders", "amount"), breaks=True),)


def test_declared_columns_of_a_python_model_and_a_seed_s_header():
    # a Python model has no rendered query: its declared columns are its columns (and types)
    scores_old = snap("shop.scores", "", columns=(("id", "INT"), ("score", "INT")), kind="FULL")
    scores = snap("shop.scores", "", columns=(("id", "INT"), ("score", "DOUBLE")), kind="FULL", version="2")
    ranked = snap("shop.ranked", "SELECT id, score / 10 AS decile FROM shop.scores", "shop.scores")
    impact = one(plan_of([scores, ranked], {"shop.scores": scores_old}))
    assert impact.changes == (ColumnChange("shop.scores", "score", "retyped", old_type="INT", new_type="DOUBLE"),)
    # its code changed and meshbot cannot compare Python: `id` may change too
    assert impact.values == (ValueChange("shop.scores", "id", "opaque"),)
    assert impact.impacts == (ColumnImpact("shop.ranked", "id", ("shop.scores", "id")),
                              ColumnImpact("shop.ranked", "decile", ("shop.scores", "score")))
    # a seed's columns are its CSV header, kept with its snapshot
    def seed(header: str, version: str) -> Snapshot:
        s = snap("shop.countries", "", kind="SEED", version=version)
        return Snapshot(**{**s.__dict__, "definition": {"seed_content": f"{header}\nfr,France\n"}})
    named = snap("shop.named", "SELECT code, name AS country FROM shop.countries", "shop.countries")
    impact = one(plan_of([seed("code,label", "2"), named], {"shop.countries": seed("code,name", "1")}))
    assert impact.changes == (ColumnChange("shop.countries", "name", "removed"),
                              ColumnChange("shop.countries", "label", "added"))
    assert impact.breaks == (ColumnImpact("shop.named", "country", ("shop.countries", "name"), breaks=True),)


def test_the_impact_section_words_each_change_and_keeps_its_summary_lines_when_shortened():
    from bot.github.comment_fitting import _cut_impact
    from bot.github.views import CommentView, PlanView, impact_view
    from bot.report.comment_state import comment_marker
    from bot.report.markdown import render

    before = snap("shop.orders", "SELECT id, CAST(total AS INT) AS total, customer_id FROM raw.orders")
    after = snap("shop.orders", "SELECT id, CAST(total AS BIGINT) AS total, customer_id AS client_id "
                 "FROM raw.orders", version="2", owner="sales_eng")
    wide = snap("shop.orders_wide", "SELECT * FROM shop.orders", "shop.orders")
    clients = snap("shop.clients", "SELECT customer_id FROM shop.orders_wide", "shop.orders_wide", owner="crm_team")
    python_model = snap("shop.py_model", "SELECT * FROM raw.events", version="2")
    plan = plan_of([after, wide, clients, python_model],
                   {"shop.orders": before, "shop.py_model": snap("shop.py_model", "SELECT * FROM raw.ev")})
    impact = impact_view(plan, (Exposure("CRM sync", url="javascript:alert(1)", depends_on=("shop.clients",)),))
    view = CommentView(marker=comment_marker(None), status="ok",
                       prod_plan=PlanView(environment="prod"), impact=impact)
    text = render("comment.md.j2", view)
    assert ("- `shop.orders`: `customer_id` renamed to `client_id`, `total` INT → BIGINT — **breaks** "
            "`shop.clients.customer_id`; reaches 2 downstream models; exposures: CRM sync") in text
    assert "- `shop.py_model`: columns not traced" in text
    assert "<summary>Column lineage of <code>shop.orders</code>: 1 breaking read</summary>" in text
    assert "Through `SELECT *`: `shop.orders_wide.customer_id` renamed to `client_id`." in text
    assert "Owners: sales\\_eng (this model); crm\\_team." in text
    assert "Exposures reached: CRM sync." in text and "javascript" not in text   # only http(s) links
    short = render("comment.md.j2", _cut_impact(view))
    assert "<details>" not in short and "- `shop.orders`: `customer_id` renamed" in short
