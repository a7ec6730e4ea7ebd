"""Plan summaries: the text shape `plan` prints (golden) and the --json dict."""

from __future__ import annotations

import doctest

import pytest

import bot.plan.summary as explain
from bot.plan.summary import plan_summary_text, plan_to_json
from bot.timeline.times import to_ms
from test_plan_builder import DAY, INCR, NOW, apply, config, make, plan_for, project, state  # noqa: F401

DEV_GOLDEN = """\
New environment `dev` will be created from `prod`
Differences from the `prod` environment:
Models:
├── Directly Modified:
│   └── db__dev.orders
└── Indirectly Modified:
    ├── db__dev.revenue
    └── db__dev.top
--- db.orders (old)
+++ db.orders (new)
@@ -1,5 +1,6 @@
 SELECT
   id,
   amount,
-  ds
+  ds,
+  1 AS one
 FROM raw.orders
Directly Modified: db__dev.orders (Non-breaking)
└── Indirectly Modified Children:
    ├── db__dev.revenue (Indirect Non-breaking)
    └── db__dev.top (Indirect Non-breaking)
Models needing backfill:
└── db__dev.orders: [2024-01-01 - 2024-01-31]"""

FIRST_PROD_GOLDEN = """\
New environment `prod` will be created
Models:
└── Added:
    ├── db.orders
    ├── db.revenue
    └── db.top
Models needing backfill:
├── db.orders: [2024-01-01 - 2024-01-31]
├── db.revenue: [full refresh]
└── db.top: [recreate view]"""


@pytest.fixture
def dev_plan(state, config):
    apply(state, plan_for(state, config, project()))
    models = project(o=make("db.orders", "SELECT id, amount, ds, 1 AS one FROM raw.orders", kind=INCR))
    return plan_for(state, config, models, env="dev", now=NOW + 3 * DAY)


def test_first_prod_plan_text(state, config):
    assert plan_summary_text(plan_for(state, config, project())) == FIRST_PROD_GOLDEN


def test_dev_plan_text_matches_spec_shape(dev_plan):
    assert plan_summary_text(dev_plan) == DEV_GOLDEN


def test_unchanged_prod_says_no_changes(state, config):
    apply(state, plan_for(state, config, project()))
    text = plan_summary_text(plan_for(state, config, project()))
    assert text == "No changes to plan: project files match the `prod` environment"


def test_breaking_labels_removed_models_and_hourly_intervals(state, config):
    apply(state, plan_for(state, config, project()))
    models = project(o=make("db.orders", "SELECT id, amount, ds FROM raw.orders WHERE id > 0", kind=INCR),
                     h=make("db.hourly", "SELECT id, ds FROM raw.events", kind=INCR, cron="@hourly",
                            start="2024-02-01"))
    del models["db.top"]
    text = plan_summary_text(plan_for(state, config, models, now=NOW))
    assert "├── Added:\n│   └── db.hourly\n├── Removed:\n│   └── db.top\n├── Directly Modified:" in text
    assert "Directly Modified: db.orders (Breaking)\n└── Indirectly Modified Children:\n" \
           "    └── db.revenue (Indirect Breaking)" in text
    assert "Models needing backfill:\n├── db.hourly: [2024-02-01 00:00:00 - 2024-02-01 09:59:59]\n" in text


def test_skip_backfill_hides_the_backfill_section(state, config):
    assert "Models needing backfill" not in plan_summary_text(plan_for(state, config, project(), skip_backfill=True))


def test_json_shape(dev_plan):
    data = plan_to_json(dev_plan)
    assert set(data) == {"environment", "new_environment", "plan_id", "models", "stages"}
    assert (data["environment"], data["new_environment"], data["plan_id"]) == ("dev", True, dev_plan.plan_id)
    orders, revenue, top = data["models"]
    version = dev_plan.snapshots["db.orders"].version
    assert orders == {"name": "db.orders", "change": "directly_modified", "category": "non_breaking",
                      "kind": "INCREMENTAL_BY_TIME_RANGE", "version": version,
                      "physical_table": f"sqlmesh__db.db__orders__{version}",
                      "backfill": [["2024-01-01", "2024-01-31"]]}
    assert (revenue["change"], revenue["category"], revenue["backfill"]) == (
        "indirectly_modified", "indirect_non_breaking", None)
    assert top["kind"] == "VIEW"


def test_the_plan_stages_carry_this_plans_tables_batches_and_views(dev_plan):
    """plan_stages returns typed stages with this plan's own objects, leaving out those with no work (no
    restatement, no audit-only model, no before_all/after_all statements); --json describes the same
    objects, --explain names each stage with them."""
    from bot.plan.stages import Backfill, CreateTables, ModelBatches, Promote, SwapViews, plan_stages, stage_lines

    stages = plan_stages(dev_plan)
    assert [s.name for s in stages] == ["finish_promotion", "check_names", "check_parents", "claim_schemas",
                                        "push_snapshots", "create_tables", "backfill", "stop_if_failed",
                                        "promote", "swap_views", "finalize"]
    by_type = {type(s): s for s in stages}
    tables = dev_plan.tables()
    assert by_type[CreateTables].tables == tuple(tables[n] for n in dev_plan.snapshots)
    [orders] = [b for b in dev_plan.backfills]
    assert by_type[Backfill].batches == (ModelBatches("db.orders", orders.batches),)
    # dev promotes the changed models: views in the `__dev` schema, each over the table this plan uses
    dev_views = ("db__dev.orders", "db__dev.revenue", "db__dev.top")
    assert sorted(by_type[Promote].views) == list(dev_views) and by_type[Promote].environment == "dev"
    assert sorted(by_type[SwapViews].write) == list(dev_views) and by_type[SwapViews].drop == ()

    data = plan_to_json(dev_plan)["stages"]
    assert data == [s.to_json() for s in stages]
    assert data[6] == {"stage": "backfill", "batches": [
        {"model": "db.orders", "batches": [["2024-01-01 00:00:00", "2024-02-01 00:00:00"]]}]}
    text = "\n".join(stage_lines(stages))
    assert text.startswith("Apply stages (holding `environment:<name>`")
    assert "   7. backfill: compute the missing intervals, batch by batch, recording each at once; holds " \
           "`version:<model>:<version>` around each batch\n      1 batch of 1 model: db.orders (1)\n" in text
    assert "      3 views: db__dev.orders, db__dev.revenue, db__dev.top" in text


def test_a_plan_without_backfill_or_statements_leaves_their_stages_out(state, config, dev_plan):
    from dataclasses import replace

    from bot.plan.stages import AfterAll, BeforeAll, plan_stages

    skipped = [s.name for s in plan_stages(plan_for(state, config, project(), skip_backfill=True))]
    assert "backfill" not in skipped and "check_parents" not in skipped and skipped[-1] == "finalize"
    with_statements = plan_stages(replace(dev_plan, before_all=("SET x = 1",), after_all=("SELECT 1", "SELECT 2")))
    assert with_statements[1] == BeforeAll(("SET x = 1",)) and with_statements[-1] == AfterAll(("SELECT 1", "SELECT 2"))
    assert with_statements[-1].detail() == "2 statements"


class _CatalogRunner:
    """Creates tables and views in memory: enough for a plan without batches."""

    def ensure_schemas(self, schemas) -> None: ...
    def create_physical(self, snapshot, model, *, table, table_mapping) -> None: ...
    def replace_views(self, views) -> None: ...
    def drop_views(self, views) -> None: ...


def test_each_apply_stage_logs_a_line_when_it_starts_and_when_it_ends(state, config):
    """Without a terminal, every stage says when it starts (with what it works on) and when it ends."""
    from bot.plan.evaluator import PlanEvaluator

    plan = plan_for(state, config, project(), skip_backfill=True)
    lines: list[str] = []
    PlanEvaluator(state=state, runner=_CatalogRunner(), models_for=lambda s: None,  # type: ignore[arg-type]
                  stage_log=lines.append).apply(plan)
    assert lines[0] == "Stage 1/9 finish_promotion: started"
    assert lines[1].startswith("Stage 1/9 finish_promotion: done in ") and lines[1].endswith(" s")
    assert "Stage 7/9 promote: started (`prod`: 3 views)" in lines
    assert len(lines) == 18 and lines[-1].startswith("Stage 9/9 finalize: done in ")
    assert state.get_environment("prod").finalized_ts is not None


def test_json_full_refresh_view_and_removed(state, config):
    first = plan_for(state, config, project())
    by_name = {m["name"]: m for m in plan_to_json(first)["models"]}
    assert by_name["db.revenue"]["backfill"] == "full_refresh"
    assert by_name["db.top"]["backfill"] == "recreate_view"
    apply(state, first)
    models = project()
    del models["db.top"]
    removed = plan_to_json(plan_for(state, config, models))["models"]
    assert removed == [{"name": "db.top", "change": "removed", "category": None, "kind": "VIEW",
                        "version": first.snapshots["db.top"].version,
                        "physical_table": first.snapshots["db.top"].table_name, "backfill": None}]


def test_json_gaps_become_separate_ranges(state, config):
    plan = plan_for(state, config, project(), start="2024-01-30")
    orders = next(m for m in plan_to_json(plan)["models"] if m["name"] == "db.orders")
    assert orders["backfill"] == [["2024-01-30", "2024-01-31"]]
    assert to_ms("2024-01-30") == plan.start


def test_doctests():
    assert doctest.testmod(explain).failed == 0
