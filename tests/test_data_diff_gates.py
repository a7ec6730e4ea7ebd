"""The Data Diff check: cicd_bot.table_diff_gates on a PR's data diff. The PR side duplicating grain values
fails by default; changed rows, null share and row count gates fire above their thresholds once configured,
per model too. On local Spark, the example's customer_revenue turned into one row per customer and day
fails the check, and the comment says the grain is no longer unique."""

from __future__ import annotations

import csv
import json

import pytest
import responses

from rendered import shown
from bot.context import Context
from bot.diff.table_diff import ModelDataDiff
from bot.diff.gates import Level, check, parse_gates
from bot.diff.rows import ColumnProfile, RowDiff
from bot.diff.schema import schema_diff
from bot.errors import ConfigError
from bot.github.action import Invocation, main
from bot.plan.definition import PlanOptions
from bot.project.example import write_example
from github_support import FakeEngine, FakeRepository, default_branch_config, install, payload

ENV = {"GITHUB_ACTIONS": "true", "GITHUB_TOKEN": "ghs_gate_token", "GITHUB_API_URL": "https://api.github.com",
       "GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "Codertocat/Hello-World",
       "GITHUB_RUN_ID": "5"}
CHECK = "meshbot - Data Diff"


def _diff(model: str = "shop.customer_revenue", **rows: object) -> ModelDataDiff:
    base = dict(source_count=4, target_count=4, joined_count=4, full_match_count=4, partial_match_count=0,
                source_only_count=0, target_only_count=0, distinct_key_source_count=4, distinct_key_target_count=4)
    columns = (("customer_id", "int"), ("revenue", "double"))
    return ModelDataDiff(model=model, kind="FULL", reason="directly modified", window="whole query",
                         previewed=True, keys=("customer_id",), rows=RowDiff(**{**base, **rows}),
                         schema=schema_diff(list(columns), list(columns)), source_count=4, target_count=4)


def test_duplicated_grain_fails_by_default_and_the_rest_is_off_until_configured():
    duplicated = _diff(target_count=14, joined_count=14, partial_match_count=14, full_match_count=0,
                       duplicate_key_target_count=14, distinct_key_target_count=4,
                       profiles={"revenue": (ColumnProfile(nulls=0, distinct=4), ColumnProfile(nulls=7, distinct=9))})
    (finding,) = check(duplicated, parse_gates(None, where="config.yaml"))
    assert finding.level is Level.FAIL and finding.gate == "duplicate_keys"
    assert finding.message.startswith("`customer_id` is not unique in the PR: 14 rows hold 4 distinct values")

    gates = parse_gates({"changed_rows_pct": 50, "null_share_increase": {"above": 10, "level": "warn"},
                         "row_count_change_pct": 200, "duplicate_keys": "off"}, where="config.yaml")
    found = {f.gate: f for f in check(duplicated, gates)}
    assert set(found) == {"changed_rows_pct", "null_share_increase", "row_count_change_pct"}
    assert found["changed_rows_pct"].message == "100.0% of the rows matched by key changed (gate: above 50%)"
    assert found["null_share_increase"].level is Level.WARN
    assert "`revenue` is NULL in 50.0% of the PR's rows against 0.0% in prod" in found["null_share_increase"].message
    assert found["row_count_change_pct"].message.startswith("4 rows in prod, 14 in the PR: 250.0%")
    assert check(_diff(), gates) == ()                   # nothing changed: nothing fires


def test_per_model_overrides_and_bad_settings_name_the_gate():
    gates = parse_gates({"models": {"shop.events": {"duplicate_keys": "warn"}}}, where="config.yaml")
    events = _diff("shop.events", duplicate_key_target_count=2, target_count=5, distinct_key_target_count=4)
    assert [f.level for f in check(events, gates)] == [Level.WARN]
    assert [f.level for f in check(_diff(duplicate_key_target_count=2), gates)] == [Level.FAIL]
    prod_too = _diff(duplicate_key_source_count=2, duplicate_key_target_count=2)   # as duplicated as prod
    assert check(prod_too, gates) == ()
    with pytest.raises(ConfigError, match="unknown gate.*changed_rows; the gates are"):
        parse_gates({"changed_rows": 5}, where="config.yaml")
    with pytest.raises(ConfigError, match="table_diff_gates.null_share_increase must be off, warn, fail"):
        parse_gates({"null_share_increase": "loud"}, where="config.yaml")


def _run_bot(tmp_path, engine: FakeEngine, cicd_bot: dict) -> tuple[int, FakeRepository]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gh = install(rsps)
        repo = FakeRepository(gh, permissions={}, default_config=default_branch_config(cicd_bot, ()))
        raw = payload("pull_request/opened.payload.json")
        repo.set_pull(raw["pull_request"])
        event = tmp_path / "event.json"
        event.write_text(json.dumps(raw))
        code = main(Invocation(event_name="pull_request", event_path=str(event)),
                    env={**ENV, "GITHUB_OUTPUT": str(tmp_path / "out.env")}, context_factory=lambda p, g: engine,
                    out=lambda line: None)
        assert not gh.errors, gh.errors
    return code, repo


def test_the_data_diff_check_fails_on_a_failing_gate_and_the_comment_marks_the_model(tmp_path):
    engine = FakeEngine({}, changed=("shop.customer_revenue",))
    engine.diffs = (_diff(target_count=14, joined_count=14, partial_match_count=14, full_match_count=0,
                          duplicate_key_target_count=14, distinct_key_target_count=4),)
    code, repo = _run_bot(tmp_path, engine, {})
    check_run = repo.check(CHECK)
    assert check_run["conclusion"] == "failure" and code == 0
    assert check_run["output"]["title"] == "Data diff gate failed on 1 model"
    assert "shop.customer_revenue (duplicate_keys): customer_id is not unique in the PR" in shown(check_run["output"]["summary"])
    comment = next(c["body"] for c in repo.comments if "<!-- meshbot:pr-comment" in c["body"])
    assert "<summary>:x: shop.customer_revenue: 14 changed" in comment     # no backslash inside <summary>
    assert "fails (duplicate_keys): customer_id is not unique in the PR: 14 rows hold 4 distinct" in shown(comment)

    engine.diffs = (_diff(),)
    code, repo = _run_bot(tmp_path, engine, {"table_diff_gates": {"changed_rows_pct": 10}})
    assert repo.check(CHECK)["conclusion"] == "success"
    assert repo.check(CHECK)["output"]["title"] == "Data diff of 1 model: no gate failed"


@pytest.mark.spark
def test_a_grain_turned_per_day_fails_the_gate_on_spark(clean_catalog, tmp_path):
    """The issue's case: customer_revenue (grain customer_id) grouped by customer and day as well."""
    root = tmp_path / "shop"
    write_example(root)
    context = Context(root)
    context.apply(context.plan("prod", options=PlanOptions(skip_tests=True)))
    model = root / "models" / "customer_revenue.sql"
    model.write_text(model.read_text().replace("  c.name,\n  COUNT", "  c.name,\n  o.ds,\n  COUNT")
                     .replace("GROUP BY\n  c.customer_id,\n  c.name", "GROUP BY\n  c.customer_id,\n  c.name,\n  o.ds"))
    changed = Context(root)
    results = {d.model: d for d in changed.review(changed.plan("prod", options=PlanOptions(skip_tests=True))).diffs}
    with (root / "seeds" / "raw_orders.csv").open() as handle:
        orders = list(csv.DictReader(handle))
    with (root / "seeds" / "raw_customers.csv").open() as handle:
        customers = {r["customer_id"] for r in csv.DictReader(handle)}
    per_day = {(r["customer_id"], r["ds"]) for r in orders if r["customer_id"] in customers}
    buyers = {c for c, _ in per_day}
    rows = results["shop.customer_revenue"].rows
    assert (rows.target_count, rows.distinct_key_target_count) == (len(per_day), len(buyers))
    (finding,) = [f for f in check(results["shop.customer_revenue"], parse_gates(None, where="c"))
                  if f.gate == "duplicate_keys"]
    assert finding.level is Level.FAIL
    assert f"{len(per_day)} rows hold {len(buyers)} distinct values" in finding.message
    source, target = rows.profiles["order_count"]
    assert (source.maximum, target.minimum) == (max(sum(1 for r in orders if r["customer_id"] == c) for c in buyers), 1)
    context.close()
    changed.close()
