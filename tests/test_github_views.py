"""Comment rendering: hidden marker, sections merged across commands, and the 65,536-character limit."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from bot.github import views
from bot.report.comment_state import CheckState, comment_marker, recorded_plan_digest, sections
from bot.github.views import (BackfillView, ChangeView, CommentView, DiffView, FailureView, PlanView, TestsView,
                              plan_view)
from bot.github.comment_fitting import COMMENT_LIMIT, render_comment, truncate_markdown
from bot.plan.definition import Backfill, BackfillKind, ChangeType, ModelChange, Plan, PlanOptions
from bot.quality.results import TestResult, TestSuiteResult
from bot.report.markdown import TemplateError, render
from bot.snapshot import ChangeCategory, Fingerprint, Snapshot

MARKER = comment_marker(None)


def _balanced(text: str) -> bool:
    fence = None
    for line in text.splitlines():
        stripped = line.strip()
        if fence is None:
            match = re.match(r"^(`{3,})", stripped)
            if match:
                fence = match.group(1)
        elif set(stripped) == {"`"} and len(stripped) >= len(fence):
            fence = None
    return fence is None and text.count("<details>") == text.count("</details>")


def _huge_view() -> CommentView:
    diff = "\n".join(f"-select {i} as old_{i}\n+select {i} as new_{i} ``` tricky" for i in range(400))
    changes = tuple(ChangeView(f"db.model_{i}", "directly modified", "Breaking", "FULL", diff=diff) for i in range(30))
    backfills = tuple(BackfillView(f"db.model_{i}", "INCREMENTAL_BY_TIME_RANGE", 30, "2024-01-01 00:00", "2024-01-31 00:00")
                      for i in range(300))
    plan = PlanView("shop_7", changes=changes, backfills=backfills)
    diffs = tuple(DiffView(f"db.model_{i}", prod_count=10, pr_count=10, matched=9, changed=1, prod_only=0, pr_only=0,
                           columns=tuple((f"c{j}", 90.0) for j in range(50)))
                  for i in range(60))
    failures = tuple(FailureView(f"test_{i}", "expected\n" * 50) for i in range(100))
    return CommentView(marker=MARKER, status="status", environment="shop_7",
                       tests=TestsView("failed", total=100, failed=100, failures=failures),
                       prod_plan=plan, diffs=diffs, approval="approved", deploy_hint="merge")


def test_huge_comment_is_shortened_below_the_limit_and_stays_valid_markdown():
    body, full = render_comment(_huge_view())
    assert len(full) > COMMENT_LIMIT
    assert len(body) <= COMMENT_LIMIT
    assert MARKER in body and _balanced(body) and _balanced(full)
    assert "shortened" in body
    # higher-priority sections survive: status, tests, approval
    for section in ("status", "tests", "approval"):
        assert section in sections(body)


def test_hard_truncation_closes_fences_and_details():
    text = "<details>\n<summary>x</summary>\n\n```sql\n" + "select 1\n" * 1000 + "```\n</details>\n"
    cut = truncate_markdown(text, 500)
    assert len(cut) <= 500 and _balanced(cut) and "truncated" in cut


def test_sections_from_a_later_command_merge_into_the_comment():
    first, _ = render_comment(CommentView(marker=MARKER, status="tests ok", environment="shop_7",
                                          tests=TestsView("passed", total=3), approval="0 of 1"))
    merged, _ = render_comment(CommentView(marker=MARKER, status="", approval="1 of 1 required approval(s)"
                                           ).after(first))
    assert merged.count(MARKER) == 1
    assert "tests ok" in merged and "3 tests passed" in merged
    assert "1 of 1 required" in merged and "0 of 1" not in merged


def test_a_run_on_a_new_head_keeps_nothing_an_earlier_run_found_for_the_old_one():
    """A review of head B (or a sync of B whose preview failed) after a sync of A: A's tests, PR environment,
    diffs and prod preview go, so neither a reviewer nor `/deploy` takes A's preview for B's."""
    first, _ = render_comment(CommentView(marker=MARKER, status="s", head_sha="a" * 40, environment="shop_7",
                                          checks=(CheckState("Unit Tests", "success", None, ""),),
                                          tests=TestsView("passed", total=3), prod_plan=PlanView("prod"),
                                          plan_digest="abc123", plan_models="db.a@1"))
    assert recorded_plan_digest(first) is not None
    same, _ = render_comment(CommentView(marker=MARKER, status="", head_sha="a" * 40, approval="1 of 1").after(first))
    assert recorded_plan_digest(same) is not None and "3 tests passed" in same
    moved, _ = render_comment(CommentView(marker=MARKER, status="", head_sha="b" * 40, approval="1 of 1").after(first))
    assert recorded_plan_digest(moved) is None and "3 tests passed" not in moved
    assert set(sections(moved)) & {"tests", "pr_plan", "diffs", "prod_plan"} == set()


def test_plan_digest_is_recorded_and_read_back():
    body, _ = render_comment(CommentView(marker=MARKER, status="s", prod_plan=PlanView("prod"),
                                         plan_digest="abc123", plan_models="db.a@1,db.b@2"))
    assert recorded_plan_digest(body) == ("abc123", {"db.a": "1", "db.b": "2"})


def test_names_cannot_inject_markdown_and_missing_marker_is_an_error():
    view = CommentView(marker=MARKER, status="s", prod_plan=PlanView(
        "e", changes=(ChangeView("db.a|b<script>", "added", "", "FULL"),)))
    body, _ = render_comment(view)
    assert "<script>" not in body and r"a\|b" in body
    with pytest.raises(TemplateError, match="marker"):
        render("comment.md.j2", CommentView(marker="", status="s"))


def _status(body: str) -> str:
    return sections(body)["status"]


def test_status_never_says_passed_while_a_check_failed():
    from bot.github.views import CheckState

    checks = (CheckState("Unit Tests", "success"), CheckState("Required Approval", "failure", detail="0 of 1."))
    body, _ = render_comment(CommentView(marker=MARKER, status="", head_sha="abcdef123", checks=checks))
    assert "passed" not in _status(body).splitlines()[1]
    assert "waiting for Required Approval (0 of 1)" in _status(body)
    failing = checks + (CheckState("Prod Plan Preview", "failure", url="https://github.com/o/r/runs/9",
                                   detail="The prod plan could not be built"),)
    body, _ = render_comment(CommentView(marker=MARKER, status="", head_sha="abcdef123", checks=failing))
    assert ":x: meshbot on abcdef1: Prod Plan Preview (The prod plan could not be built) failed." in body
    assert "[Prod Plan Preview](https://github.com/o/r/runs/9)" in body
    ok, _ = render_comment(CommentView(marker=MARKER, status="", head_sha="abcdef123",
                                       checks=(CheckState("Unit Tests", "success"),)))
    assert ":white_check_mark: meshbot checks passed on abcdef1." in ok


def test_recorded_checks_survive_a_round_trip_whatever_their_text():
    from bot.report.comment_state import recorded_checks
    from bot.github.views import CheckState

    tricky = CheckState("Unit Tests", "failure", None, "1 of 2 failed --> <!-- `x` -->")
    body, _ = render_comment(CommentView(marker=MARKER, status="", head_sha="abc", checks=(tricky,)))
    assert recorded_checks(body) == ("abc", (CheckState("Unit Tests", "failure", None, tricky.detail),))
    assert set(sections(body)) == {"status"} and "--&gt; &lt;!-- `x` --&gt;" in body


def test_stale_sections_are_dropped_when_asked():
    first, _ = render_comment(CommentView(marker=MARKER, status="s", deploy_hint="merge it",
                                          approval="1 of 1"))
    second = CommentView(marker=MARKER, status=":rocket: deployed")
    assert "How to deploy" in render_comment(second.after(first))[0]
    merged, _ = render_comment(replace(second, drop=("hint",)).after(first))
    assert "How to deploy" not in merged and "1 of 1" in merged and ":rocket: deployed" in merged


def _snapshot(name: str) -> Snapshot:
    return Snapshot(name=name, fingerprint=Fingerprint(data_hash="d", metadata_hash="m"), version="v",
                    kind="INCREMENTAL_BY_TIME_RANGE", definition={})


def test_plan_view_lists_each_change_with_its_category_and_each_backfill_with_its_range():
    orders, old = _snapshot("shop.orders"), _snapshot("shop.old")
    plan = Plan(plan_id="p1", environment="prod", new_environment=False, expected_plan_id=None,
                previous_environment=None, snapshots={"shop.orders": orders}, new_snapshots=(orders,),
                changes=(ModelChange(name="shop.orders", change=ChangeType.DIRECTLY_MODIFIED,
                                     category=ChangeCategory.NON_BREAKING, kind="INCREMENTAL_BY_TIME_RANGE",
                                     snapshot=orders, diff="-a\n+b", indirect_children=("shop.daily",)),
                         ModelChange(name="shop.old", change=ChangeType.REMOVED, category=None, kind="FULL",
                                     snapshot=None, previous=old)),
                backfills=(Backfill(snapshot_id=orders.snapshot_id, kind=BackfillKind.INTERVALS,
                                    intervals=((1704067200000, 1704153600000), (1704153600000, 1704240000000))),),
                options=PlanOptions(skip_backfill=True))
    view = plan_view(plan)
    assert view.changes == (
        ChangeView("shop.orders", "directly modified", "Non-breaking", "INCREMENTAL_BY_TIME_RANGE", "-a\n+b",
                   ("shop.daily",)),
        ChangeView("shop.old", "removed", "", "FULL"))
    assert view.backfills == (BackfillView("shop.orders", "INCREMENTAL_BY_TIME_RANGE", 2, "2024-01-01 00:00", "2024-01-03 00:00"),)
    assert view.skipped_backfill and view.environment == "prod"


def test_tests_view_counts_every_test_and_names_each_failure():
    def result(name: str, message: str = "") -> TestResult:
        return TestResult(name=name, file=Path("tests/t.yaml"), model="shop.orders", passed=not message,
                          message=message)

    view = views.tests_view(TestSuiteResult(results=(result("test_a"), result("test_b", "expected 2 rows, got 3"))))
    assert view == TestsView("failed", total=2, failed=1, failures=(FailureView("test_b", "expected 2 rows, got 3"),))
    assert views.tests_view(TestSuiteResult(results=(result("test_a"),))) == TestsView("passed", total=1)


def test_a_plan_of_thousands_of_backfills_fits_the_comment_and_the_job_summary():
    """A prod plan preview backfilling 20,000 models: the comment keeps its status, approval and the plan's
    digest record; the job summary (GitHub refuses more than 1 MiB) is shortened the same way."""
    backfills = tuple(BackfillView(f"db.model_{i:05d}", "FULL", 1, "2024-01-01 00:00", "2024-01-04 00:00")
                      for i in range(20_000))
    plan = PlanView("prod", changes=(ChangeView("db.model_00001", "directly modified", "Breaking", "FULL"),),
                    backfills=backfills)
    view = CommentView(marker=MARKER, status="status", prod_plan=plan, approval="approved", deploy_hint="merge",
                       plan_digest="abc123", plan_models="db.model_00001@7")
    body, full = render_comment(view)
    assert len(body) <= COMMENT_LIMIT and len(full.encode()) <= 1_000_000
    for text in (body, full):
        assert recorded_plan_digest(text) == ("abc123", {"db.model_00001": "7"})
        assert {"status", "approval", "prod_plan"} <= set(sections(text)) and _balanced(text)
        assert "db.model_00001 | directly modified" in text.replace("\\_", "_")
    assert "db.model_00049" in full.replace("\\_", "_") and "more (see the job summary)" in body


def test_a_diff_summary_names_schema_changes_and_profiles_say_why_a_cell_is_empty():
    """A PR that only adds a column matches every row on the columns both sides have: the summary line still
    says what the schema did. Min and max exist for numbers and dates, the mean for numbers only; the others
    read "n/a (type)" rather than an empty cell."""
    from bot.diff.rows import ColumnProfile, RowDiff
    from bot.diff.schema import schema_diff
    from bot.diff.table_diff import ModelDataDiff

    columns = [("id", "int"), ("name", "string"), ("ds", "date"), ("amount", "double")]
    rows = RowDiff(source_count=37, target_count=37, joined_count=37, full_match_count=37, partial_match_count=0,
                   source_only_count=0, target_only_count=0, column_match_pct={"name": 100.0, "ds": 100.0},
                   profiles={"name": (ColumnProfile(0, 30), ColumnProfile(0, 30)),
                             "ds": (ColumnProfile(0, 7, "2024-01-01", "2024-01-07"),
                                    ColumnProfile(0, 7, "2024-01-01", "2024-01-07"))})
    result = ModelDataDiff(model="shop.orders", kind="FULL", reason="directly modified", window="whole query",
                           previewed=True, keys=("id",), schema=schema_diff(columns, columns[:3] + [("amount", "decimal(10,2)"),
                                                                                    ("channel", "string")]),
                           rows=rows, source_count=37, target_count=37)
    text = render("comment.md.j2", CommentView(marker=MARKER, status="x", diffs=(views.diff_view(result),)))
    assert ("<summary>shop.orders: 0 changed, 0 only in prod, 0 only in PR, 37 matched; schema: added channel, "
            "retyped amount (double → decimal(10,2))</summary>") in text
    assert "| name | 100.0% | 0.0% | 30 | n/a (string) | n/a (string) | n/a (string) |" in text
    assert "| ds | 100.0% | 0.0% | 7 | 2024-01-01 | 2024-01-07 | n/a (date) |" in text
    many = replace(views.diff_view(result), schema_changes=tuple(
        views.SchemaChangeView("added", f"c{i}", "int") for i in range(4)) + (views.SchemaChangeView("removed", "x", "int"),))
    assert "; schema: 5 columns (4 added, 1 removed)</summary>" in render(
        "comment.md.j2", CommentView(marker=MARKER, status="x", diffs=(many,)))


def test_the_checks_line_shows_a_missing_required_approval_as_waiting_not_failed():
    from bot.report.comment_state import CheckState

    checks = (CheckState("Unit Tests", "success", "", "2 unit tests passed"),
              CheckState("Required Approval", "failure", "", "0 of 1 required approval(s)."))
    text = render("comment.md.j2", CommentView(marker=MARKER, status="", checks=checks, head_sha="a" * 40,
                                               approval="0 of 1 required approval(s).", approval_status="waiting"))
    assert ":hourglass_flowing_sand: meshbot on aaaaaaa: waiting for Required Approval (0 of 1 required " \
           "approval(s))." in text
    assert "passed" not in text.split("**Checks")[0]        # the checks line lists the passes, once
    assert ":hourglass_flowing_sand: Required Approval" in text and ":x:" not in text
    assert "### :hourglass_flowing_sand: Required approval" in text
