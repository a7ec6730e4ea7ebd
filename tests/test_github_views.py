"""Comment rendering: hidden marker, sections merged across commands, and the 65,536-character limit."""

from __future__ import annotations

import re

import pytest

from bot.github.api import comment_marker
from bot.github.sections import merge_comment, plan_digest, sections
from bot.github.views import (COMMENT_LIMIT, BackfillView, ChangeView, CommentView, DiffView, FailureView,
                              PlanView, TestsView, render_comment, truncate_markdown)
from bot.report.markdown import TemplateError, render

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
    backfills = tuple(BackfillView(f"db.model_{i}", "intervals", 30, "2024-01-01 00:00", "2024-01-31 00:00")
                      for i in range(300))
    plan = PlanView("shop_7", changes=changes, backfills=backfills)
    diffs = tuple(DiffView(f"db.model_{i}", prod_count=10, pr_count=10, matched=9, changed=1, prod_only=0, pr_only=0,
                           columns=tuple((f"c{j}", 90.0) for j in range(50)))
                  for i in range(60))
    failures = tuple(FailureView(f"test_{i}", "expected\n" * 50) for i in range(100))
    return CommentView(marker=MARKER, status="status", environment="shop_7",
                       tests=TestsView("failed", total=100, failed=100, failures=failures),
                       pr_plan=plan, prod_plan=plan, diffs=diffs, approval="approved", deploy_hint="merge")


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
    second, _ = render_comment(CommentView(marker=MARKER, status="", approval="1 of 1 required approval(s)"))
    merged = merge_comment(first, second)
    assert merged.count(MARKER) == 1
    assert "tests ok" in merged and "3 tests passed" in merged
    assert "1 of 1 required" in merged and "0 of 1" not in merged


def test_plan_digest_is_recorded_and_read_back():
    body, _ = render_comment(CommentView(marker=MARKER, status="s", prod_plan=PlanView("prod"),
                                         plan_digest="abc123", plan_models="db.a@1,db.b@2"))
    assert plan_digest(body) == ("abc123", {"db.a": "1", "db.b": "2"})


def test_names_cannot_inject_markdown_and_missing_marker_is_an_error():
    view = CommentView(marker=MARKER, status="s", pr_plan=PlanView(
        "e", changes=(ChangeView("db.a|b<script>", "added", "", "FULL"),)))
    body, _ = render_comment(view)
    assert "<script>" not in body and r"a\|b" in body
    with pytest.raises(TemplateError, match="marker"):
        render("comment.md.j2", CommentView(marker="", status="s"))
