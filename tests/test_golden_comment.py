"""Golden files of what meshbot writes on GitHub for one fixed scenario, driven by real webhook payloads: a PR
changing the values of `shop.orders.amount` (read by its breaking child `shop.customer_revenue`) is opened with
a failing unit test, a data diff whose grain gate fails and backfill estimates; a second commit (synchronize)
fixes the test; a required approver approves (pull_request_review); `/deploy` deploys it; the merged PR is
closed. The PR comment at each of these stages, the check summaries and the job summary are compared with
tests/golden/*.md, which are reviewed like code when they change (regenerate with MESHBOT_UPDATE_GOLDEN=1).
Each file is also rendered with GitHub's Markdown engine (cmarkgfm) and checked for what a reader sees."""

from __future__ import annotations

import difflib
import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import cmarkgfm
import pytest
import responses
from cmarkgfm.cmark import Options

from bot.diff.table_diff import ModelDataDiff
from bot.diff.rows import ColumnProfile, RowDiff
from bot.diff.schema import schema_diff
from bot.github.action import Invocation, main
from bot.state.protocol import BatchTimes
from github_support import (FakeEngine, FakeRepository, default_branch_config, git_checkout, git_commit, install,
                            payload, pr_comment_event)

GOLDEN = Path(__file__).parent / "golden"
ENV = {"GITHUB_ACTIONS": "true", "GITHUB_TOKEN": "ghs_golden_token", "GITHUB_API_URL": "https://api.github.com",
       "GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "Codertocat/Hello-World",
       "GITHUB_RUN_ID": "1234"}
DAY = 86_400_000


def _revenue_diff() -> ModelDataDiff:
    columns = [("customer_id", "int"), ("name", "string"), ("revenue", "double")]
    rows = RowDiff(source_count=4, target_count=14, joined_count=14, full_match_count=0, partial_match_count=14,
                   source_only_count=0, target_only_count=0, column_match_pct={"name": 100.0, "revenue": 21.4},
                   duplicate_key_target_count=14, distinct_key_source_count=4, distinct_key_target_count=4,
                   profiles={"name": (ColumnProfile(0, 4), ColumnProfile(0, 4)),
                             "revenue": (ColumnProfile(0, 4, 54.5, 310.0, 180.25),
                                         ColumnProfile(1, 12, 12.0, 120.5, 51.5))})
    return ModelDataDiff(model="shop.customer_revenue", kind="FULL", reason="breaking change upstream",
                         window="whole query", previewed=True, keys=("customer_id",), key_source="grain",
                         schema=schema_diff(columns, columns + [("ds", "date")]), rows=rows,
                         source_count=4, target_count=14)


def _engine() -> FakeEngine:
    engine = FakeEngine({"enable_deploy_command": True, "required_approvers": ["ann-gh"]},
                        changed=("shop.orders",))
    engine.children = {"shop.orders": ("shop.customer_revenue",)}
    # the PR nulls `amount` for two orders: a changed value, read by customer_revenue.revenue
    engine.queries = {"shop.orders": ("SELECT order_id, customer_id, amount FROM raw.orders",
                                      "SELECT order_id, customer_id, CASE WHEN order_id IN (5, 9) THEN NULL "
                                      "ELSE amount END AS amount FROM raw.orders"),
                      "shop.customer_revenue": ("SELECT o.customer_id, c.name, SUM(o.amount) AS revenue FROM "
                                                "shop.orders AS o JOIN raw.customers AS c ON o.customer_id = c.id "
                                                "GROUP BY o.customer_id, c.name",) * 2}
    engine.parents = {"shop.orders": ("raw.orders",), "shop.customer_revenue": ("shop.orders", "raw.customers")}
    engine.failing_tests = {"test_revenue_per_day": "expected 4 rows, got 14"}
    engine.diffs = (_revenue_diff(),)
    engine.batches, engine.batch_days = 3, 2
    engine.batch_times = {("shop.orders", "1"): BatchTimes("shop.orders", "1", batches=6, span_ms=6 * DAY,
                                                           elapsed_ms=6 * 40_000, last_ts=1, metered_batches=4,
                                                           metered_span_ms=4 * DAY, executor_ms=4 * 900_000,
                                                           bytes_read=4 * 2**30)}
    return engine



def _normalized(text: str) -> str:
    """Timings vary from run to run: their figures become `x.x`."""
    return re.sub(r"\| (\*\*)?\d+\.\d(\*\*)? \|", r"| \1x.x\2 |", text)


class _Scenario:
    def __init__(self, tmp_path: Path, gh) -> None:
        self.tmp_path, self.engine = tmp_path, _engine()
        self.repo = FakeRepository(gh, permissions={"ann-gh": "write"}, default_config=default_branch_config(
            self.engine.config.cicd_bot, self.engine.config.users))
        self.checkout = tmp_path / "checkout"
        fixed = {"GIT_AUTHOR_DATE": "2024-01-02T00:00:00Z", "GIT_COMMITTER_DATE": "2024-01-02T00:00:00Z"}
        saved = {key: os.environ.get(key) for key in fixed}
        os.environ.update(fixed)                   # the same commit SHAs on every run
        try:
            git_checkout(self.checkout)            # the base branch (origin/master) ...
            head = git_commit(self.checkout, {"models/orders.sql": "SELECT 2 AS orders\n"}, "pr")   # ... and the PR's commit
            self.fixed = git_commit(self.checkout, {"tests/test_revenue.yaml": "fixed: true\n"}, "fix the test")
        finally:
            for key, value in saved.items():
                os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)
        self.base = FakeEngine(changed=("shop.orders",))
        self.base.versions = {}                    # at the base commit, shop.orders is prod's version
        self.opened = payload("pull_request/opened.payload.json")
        self.opened["pull_request"]["head"]["sha"] = head
        self.repo.set_pull(self.opened["pull_request"])
        self.synced = payload("pull_request/synchronize.payload.json")
        self.synced["pull_request"]["head"]["sha"] = self.fixed
        self.summary = tmp_path / "summary.md"

    def __call__(self, name: str, raw: dict) -> int:
        path = self.tmp_path / "event.json"
        path.write_text(json.dumps(raw))
        self.summary.write_text("")
        return main(Invocation(event_name=name, event_path=str(path), project_path=str(self.checkout)),
                    env={**ENV, "GITHUB_OUTPUT": str(self.tmp_path / "out.env"),
                         "GITHUB_STEP_SUMMARY": str(self.summary)},
                    context_factory=lambda p, g: self.engine if Path(p) == self.checkout else self.base,
                    out=lambda line: None)

    @property
    def comment(self) -> str:
        return next(c["body"] for c in self.repo.comments if "<!-- meshbot:pr-comment" in c["body"])


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[str, str]:
    """Every text meshbot wrote in the scenario, by golden file name."""
    from bot.github.client import GithubClient

    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps, pytest.MonkeyPatch.context() as patch:
        patch.setitem(GithubClient.__init__.__kwdefaults__, "seconds_between_writes", 0.0)   # as conftest does
        gh = install(rsps)
        bot = _Scenario(tmp_path_factory.mktemp("golden"), gh)
        assert bot("pull_request", bot.opened) == 1     # a unit test fails
        out = {"pr_comment_opened.md": bot.comment, "job_summary_sync.md": bot.summary.read_text()}
        for check in ("Unit Tests", "Prod Plan Preview", "Data Diff", "Required Approval"):
            out[f"check_{check.lower().replace(' ', '_')}.md"] = bot.repo.check(f"meshbot - {check}")["output"]["summary"]
        bot.engine.failing_tests = {}                   # the second commit fixes the test
        bot.repo.set_pull(bot.synced["pull_request"])
        assert bot("pull_request", bot.synced) == 0     # the grain gate still fails its check
        out["pr_comment_synced.md"] = bot.comment
        bot.repo.review("ann-gh", "APPROVED", bot.fixed, "2024-01-02T00:00:00Z")
        reviewed = payload("pull_request_review/submitted.payload.json")
        reviewed["review"].update(state="approved", commit_id=bot.fixed)
        reviewed["review"]["user"]["login"] = "ann-gh"
        assert bot("pull_request_review", reviewed) == 0
        out["pr_comment_approved.md"] = bot.comment
        assert bot("issue_comment", pr_comment_event("/deploy", "ann-gh")) == 0
        out["pr_comment_deployed.md"] = bot.comment
        out["check_prod_environment_synced.md"] = bot.repo.check("meshbot - Prod Environment Synced")["output"]["summary"]
        closed = payload("pull_request/closed.payload.json")
        closed["pull_request"].update(merged=True, merged_at="2024-01-03T00:00:00Z")
        closed["pull_request"]["head"]["sha"] = bot.fixed
        bot.repo.set_pull(closed["pull_request"], merged=True)
        assert bot("pull_request", closed) == 0
        out["pr_comment_closed.md"] = bot.comment
        assert not gh.errors, gh.errors
    return {name: _normalized(text) for name, text in out.items()}


NAMES = ("pr_comment_opened.md", "pr_comment_synced.md", "pr_comment_approved.md", "pr_comment_deployed.md",
         "pr_comment_closed.md", "job_summary_sync.md", "check_unit_tests.md", "check_prod_plan_preview.md",
         "check_data_diff.md", "check_required_approval.md", "check_prod_environment_synced.md")


@pytest.mark.parametrize("name", NAMES)
def test_what_meshbot_writes_matches_its_golden_file(written, name):
    golden = GOLDEN / name
    if os.environ.get("MESHBOT_UPDATE_GOLDEN") == "1":
        golden.write_text(written[name])
    expected = golden.read_text()
    assert written[name] == expected, "".join(difflib.unified_diff(
        expected.splitlines(True), written[name].splitlines(True), f"golden/{name}", "written")) + \
        "\n(if the change is intended: MESHBOT_UPDATE_GOLDEN=1 pytest tests/test_golden_comment.py, and review)"


class _Reader(HTMLParser):
    """What a reader sees of GitHub's HTML: the text of <summary> elements, table count, visible text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.summaries: list[str] = []
        self.tables = 0
        self.text: list[str] = []
        self._in_summary = False

    def handle_starttag(self, tag, attrs) -> None:
        self._in_summary = self._in_summary or tag == "summary"
        if tag == "summary":
            self.summaries.append("")
        self.tables += tag == "table"

    def handle_endtag(self, tag) -> None:
        if tag == "summary":
            self._in_summary = False

    def handle_data(self, data) -> None:
        self.text.append(data)
        if self._in_summary:
            self.summaries[-1] += data


@pytest.mark.parametrize("name", NAMES)
def test_github_renders_each_file_as_a_reader_expects(name):
    """No Markdown escape shows as a backslash, no table is left as pipes, no hidden record is visible."""
    markdown = (GOLDEN / name).read_text()
    html = cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)
    reader = _Reader()
    reader.feed(html)
    visible = "".join(reader.text)
    assert "\\_" not in visible and "\\|" not in visible, name
    assert not any("\\" in summary for summary in reader.summaries), reader.summaries
    assert not re.search(r"^\s*\|.*\|\s*$", visible, re.MULTILINE), f"{name}: a table did not render"
    assert markdown.count("\n| --- ") <= reader.tables
    assert "meshbot:section" not in visible and "meshbot:checks" not in visible


def test_the_scenario_reads_as_intended(written):
    """The reviewer's view of the scenario, in words (the golden files hold the exact text)."""
    comment = written["pr_comment_opened.md"]
    assert "test_revenue_per_day" in comment and "expected 4 rows, got 14" in comment
    assert "shop.customer_revenue" in comment and ":x: shop.customer_revenue: 14 changed" in comment
    assert "`customer_id` is not unique in the PR: 14 rows hold 4 distinct values" in written["check_data_diff.md"]
    assert "| shop.orders | FULL | 6 | 3 |" in comment and "about 2 min of compute" in comment
    assert "**This PR's changes**" not in comment          # nothing of the base branch is pending
    assert "Deployed to `prod`" in written["pr_comment_deployed.md"]


def _visible(markdown: str) -> str:
    reader = _Reader()
    reader.feed(cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE))
    return "".join(reader.text)


def test_each_stage_reads_right(written):
    """What a reviewer reads at each stage, as GitHub renders it."""
    opened, synced, approved = (written[f"pr_comment_{s}.md"] for s in ("opened", "synced", "approved"))
    deployed, closed = written["pr_comment_deployed.md"], written["pr_comment_closed.md"]
    for comment in (opened, synced):          # the approval is pending: waiting, not failed
        assert ":hourglass_flowing_sand: [Required Approval]" in comment and ":x: [Required Approval]" not in comment
        assert "### :hourglass_flowing_sand: Required approval" in comment
        status = comment.split("**Checks")[0]
        assert "Prod Plan Preview" not in status and "PR Environment Synced" not in status   # passes: once, below
    assert "Unit Tests" not in synced.split("**Checks")[0] and ":white_check_mark: Unit tests" in synced
    assert approved.split("\n")[3] == ":x: meshbot on 3ff9e4e: Data Diff (Data diff gate failed on 1 model) failed."
    assert "; schema: added ds</summary>" in opened and "| name | 100.0% | 0.0% | 4 | n/a (string) |" in opened

    seen = _visible(deployed)
    assert "Prod plan preview" not in seen and "Est. time" not in seen and "How to deploy" not in seen
    assert "Deployed to prod from 3ff9e4e as plan plan_5." in seen
    assert "Plan plan_5 deployed 1 change from 3ff9e4e and computed 3 batches of 1 model in " in seen
    assert "| shop.orders | FULL | 6 | 3 | 1970-01-01 00:00 | 1970-01-07 00:00 |" in deployed
    assert "digest" not in seen and "9fd8f1ab5047f3e7" not in seen        # one id: the plan's
    assert "Data differences against prod" in seen and "14 changed" in seen   # the diff that was reviewed
    seen = _visible(closed)
    assert "This PR was merged: environment hello_world_2 was removed" in seen
    assert "Data differences against prod" in seen and "Deployed to prod" in seen
    assert "Query the models this PR changes" not in seen
