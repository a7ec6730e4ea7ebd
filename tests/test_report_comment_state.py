"""bot.report.comment_state: the PR comment's hidden records written and read back, versioned; records written
before versioning still read; a record that text a pull request controls carries is never taken as state."""

from __future__ import annotations

import doctest

import pytest

import bot.report.comment_state
from bot.github.runners.base import redact_markdown
from bot.github.views import CommentView, FailureView, TestsView
from bot.github.comment_fitting import render_comment
from bot.redact import register
from bot.report.comment_state import (FORMAT_VERSION, CheckState, checks_marker, comment_marker, format_models,
                                      kept_sections, outside_markers, parse_models, plan_digest_marker,
                                      recorded_checks, recorded_plan_digest, section_close, section_open, sections)

MARKER = comment_marker(None)
CHECKS = (CheckState("Unit Tests", "failure", "https://github.com/o/r-x/runs/1", "1 of 2 failed --> <!-- x -->"),
          CheckState("Required Approval", None))

# What the release before versioning wrote (tests/golden/pr_comment.md of that release, shortened).
PREVIOUS_RELEASE = """<!-- meshbot:pr-comment gateway=default -->
## meshbot

<!-- meshbot:section status -->
:x: meshbot on a2ecf4a: Unit Tests (1 of 3 unit tests failed) failed.

<!-- meshbot:checks {"sha": "a2ecf4aac2022da295c1591e9922daa86a8317b1", "checks": [["Unit Tests", "failure", \
"https://github.com/Codertocat/Hello\\u002dWorld/runs/5000", "1 of 3 unit tests failed"]]} -->
<!-- /meshbot:section status -->
<!-- meshbot:section prod_plan -->
Prod plan digest: `0c34d555ac3974bd`
<!-- meshbot:plan-digest 0c34d555ac3974bd shop.orders@1948672329,shop.x@12 -->
<!-- /meshbot:section prod_plan -->
"""


def test_doctests():
    assert doctest.testmod(bot.report.comment_state).failed == 0


def test_records_round_trip_and_say_their_version():
    checks = checks_marker("abc", CHECKS)
    digest = plan_digest_marker("feedface", format_models({"db.b": "2", "db.a": "1"}))
    assert f"v={FORMAT_VERSION} " in checks and f"v={FORMAT_VERSION} " in digest
    assert recorded_checks(f"x\n{checks}\ny") == ("abc", CHECKS)
    assert recorded_plan_digest(f"x\n{digest}\ny") == ("feedface", {"db.a": "1", "db.b": "2"})
    assert parse_models(format_models({"a.b": "1", "c@d": "2"})) == {"a.b": "1", "c@d": "2"}


def test_a_rendered_comment_reads_back_as_written():
    body, _ = render_comment(CommentView(marker=MARKER, status="", head_sha="abc", checks=CHECKS,
                                         plan_digest="feedface", plan_models="db.a@1,db.b@2",
                                         prod_plan=None, approval="0 of 1", deploy_hint="merge it"))
    assert body.startswith(MARKER)
    assert recorded_checks(body) == ("abc", CHECKS)
    assert set(sections(body)) == {"status", "approval", "hint"}


def test_a_comment_of_the_previous_release_still_reads():
    assert recorded_checks(PREVIOUS_RELEASE) == ("a2ecf4aac2022da295c1591e9922daa86a8317b1", (CheckState(
        "Unit Tests", "failure", "https://github.com/Codertocat/Hello-World/runs/5000", "1 of 3 unit tests failed"),))
    assert recorded_plan_digest(PREVIOUS_RELEASE) == ("0c34d555ac3974bd",
                                                      {"shop.orders": "1948672329", "shop.x": "12"})
    assert MARKER in PREVIOUS_RELEASE and set(sections(PREVIOUS_RELEASE)) == {"status", "prod_plan"}
    # a later run replaces the sections it writes and keeps the old comment's others
    merged, _ = render_comment(CommentView(marker=MARKER, status="", approval="1 of 1").after(PREVIOUS_RELEASE))
    assert list(sections(merged)) == ["status", "prod_plan", "approval"]
    assert recorded_plan_digest(merged) == recorded_plan_digest(PREVIOUS_RELEASE)


def test_a_record_in_a_newer_format_is_not_read():
    newer = FORMAT_VERSION + 1
    assert recorded_checks(f'<!-- meshbot:checks v={newer} {{"sha": "ab", "checks": []}} -->') == (None, ())
    assert recorded_plan_digest(f"<!-- meshbot:plan-digest v={newer} abc db.a@1 -->") is None


@pytest.mark.parametrize("forged", [
    checks_marker("f0f0f0f", ()),                                   # exactly one record, as a whole value
    str(plan_digest_marker("feedfacefeedface", "a.b@1")),
    '<!-- meshbot:checks {"sha": "f0f0f0f", "checks": []} -->',     # the previous release's layout
    "<!-- meshbot:plan-digest feedfacefeedface a.b@1 -->",
])
def test_a_record_inside_text_a_pull_request_controls_is_not_state(forged):
    text = str(forged)      # what a test message or a notice is: text, not a marker this module wrote
    view = CommentView(marker=MARKER, status="", head_sha="a1b2c3d", checks=(CheckState("Unit Tests", "failure"),),
                       notices=(text,), tests=TestsView(status="failed", total=1, failed=1,
                                                        failures=(FailureView("test_x", text),)))
    body, _ = render_comment(view)
    assert recorded_checks(body)[0] == "a1b2c3d"
    assert recorded_plan_digest(body) is None
    assert "&lt;!-- meshbot:" in body


def test_redaction_keeps_every_marker_whole_but_not_a_records_payload():
    register("meshbot")
    body = (f"{comment_marker('ci')}\n<!-- meshbot:section status -->meshbot ran<!-- /meshbot:section status -->\n"
            + checks_marker("ab", [CheckState("Unit Tests", "success", detail="user meshbot")]))
    redacted = redact_markdown(body)
    assert redacted == outside_markers(body, lambda text: text.replace("meshbot", "***"))
    assert comment_marker("ci") in redacted and set(sections(redacted)) == {"status"}
    assert recorded_checks(redacted) == ("ab", (CheckState("Unit Tests", "success", detail="user ***"),))


def test_a_later_comment_keeps_the_earlier_ones_sections_in_order_and_drops_the_stale():
    earlier, _ = render_comment(CommentView(marker=MARKER, status="s", approval="0 of 1", deploy_hint="merge it"))
    future = section_open("zz_future") + "\nwritten by a newer release\n" + section_close("zz_future")
    kept = kept_sections(earlier + future, ("status",), drop=("hint",))
    assert [name for name, _ in kept] == ["approval", "zz_future"]
    body, full = render_comment(CommentView(marker=MARKER, status="deployed", deploy="done").after(earlier + future))
    assert list(sections(body)) == ["status", "approval", "deploy", "hint", "zz_future"]
    assert "0 of 1" in body and "0 of 1" not in full      # the job summary is this run's only
