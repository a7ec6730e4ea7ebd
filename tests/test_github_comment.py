"""The PR comment through main() with GitHub mocked (OpenAPI-validated) and a FakeEngine (no Spark): the status
line names what failed or is pending, links the run and the check runs, says who can approve and how to query
the PR environment; replies to commands are comments; close cleans up whatever the PR's origin.

End to end: event → gate → runners (pr, cleanup, dispatch) → the PR comment and check runs."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from bot.errors import ConfigError
from bot.github.action import Invocation, main
from bot.quality.results import TestResult, TestSuiteResult
from github_support import FakeEngine, bot, no_waiting, payload, pr_comment_event  # noqa: F401 (fixtures)

pytestmark = pytest.mark.usefixtures("no_waiting")
RUN_LINK = "[Workflow run](https://github.com/Codertocat/Hello-World/actions/runs/4242)"
HEAD = payload("pull_request/opened.payload.json")["pull_request"]["head"]["sha"]


def test_status_names_the_missing_approval_and_turns_green_when_it_arrives(bot):
    b = bot({"required_approvers": ["ann-gh"], "required_teams": ["Codertocat/data-eng"]})
    assert b("pull_request", payload("pull_request/opened.payload.json")) == 0
    assert "checks passed" not in b.comment
    assert b.status.strip().startswith(f":hourglass_flowing_sand: meshbot on {HEAD[:7]}: waiting for Required "
                                       "Approval (0 of 1 required approval(s))")
    # each check links its run (html_url from GitHub's answer); the workflow run is linked
    links = re.findall(r"\[([^\]]+)\]\((https://github.com/Codertocat/Hello-World/runs/\d+)\)", b.status)
    assert [name for name, _ in links] == ["Unit Tests", "PR Environment Synced", "Prod Plan Preview", "Data Diff",
                                           "Required Approval"]
    assert RUN_LINK in b.comment
    assert "Who can approve: @ann-gh; any member of `Codertocat/data-eng`." in b.comment
    assert "- `shop__hello_world_2.orders`" in b.comment
    assert b.outputs_dict()["created_pr_environment"] == "true"

    # the approval arrives: only that check re-runs, and the status says everything passed
    b.repo.review("ann-gh", "APPROVED", HEAD, "2024-01-02T00:00:00Z")
    assert b("pull_request_review", payload("pull_request_review/submitted.payload.json")) == 0
    assert b.status.strip().startswith(f":white_check_mark: meshbot checks passed on {HEAD[:7]}.")
    assert "- `shop__hello_world_2.orders`" in b.comment


def test_a_failing_check_is_named_even_when_others_pass(bot):
    b = bot({"required_approvers": ["ann-gh"]})
    b.engine.test = lambda **kw: TestSuiteResult(results=(
        TestResult(name="test_a", file=Path("tests/a.yaml"), model="shop.orders", passed=True),
        TestResult(name="test_b", file=Path("tests/b.yaml"), model="shop.orders", passed=False, message="boom")))
    assert b("pull_request", payload("pull_request/opened.payload.json")) == 1
    assert ":x: meshbot on ec26c3e: Unit Tests (1 of 2 unit tests failed) failed. Also waiting for Required " \
           "Approval" in b.status
    assert "checks passed" not in b.comment


def test_the_changes_are_shown_once_and_a_rerun_says_the_environment_was_up_to_date(bot):
    b = bot()
    assert b("pull_request", payload("pull_request/opened.payload.json")) == 0
    assert b.comment.count("| Model | Change | Category | Kind |") == 1
    assert b.comment.count("SQL diff of shop.orders") == 1
    assert "Created by this run with 1 change against prod." in b.comment and "Backfill skipped" in b.comment
    assert b("pull_request", payload("pull_request/opened.payload.json")) == 0
    assert b.outputs_dict()["created_pr_environment"] == "false"
    assert "Already up to date with this commit" in b.comment and "- `shop__hello_world_2.orders`" in b.comment
    assert b.comment.count("| Model | Change | Category | Kind |") == 1


@pytest.mark.parametrize("cicd_bot, body, answer", [
    ({}, "/help", "@writer meshbot commands: `/deploy` applies the prod plan"),
    ({}, "/deploy", "@writer `/deploy` is disabled (cicd_bot.enable_deploy_command is false)."),
    ({"command_namespace": "meshbot"}, "/meshbot/deplo", "@writer unknown command `/meshbot/deplo`."),
])
def test_replies_to_commands_are_comments_on_the_pr(bot, cicd_bot, body, answer):
    b = bot(cicd_bot)
    assert b("issue_comment", pr_comment_event(body)) == 0
    assert len(b.replies) == 1 and b.replies[0].startswith(answer)
    assert b.engine.plans == [] and b.repo.checks == {}


def test_pr_include_unmodified_gives_the_pr_environment_every_view(bot):
    """SQLMesh's pr_include_unmodified: the PR environment's plan includes the unmodified models."""
    b = bot({"pr_include_unmodified": True})
    assert b("pull_request", payload("pull_request/opened.payload.json")) == 0
    assert [(env, o.include_unmodified) for env, o in zip(b.engine.plans, b.engine.options)] == [
        ("hello_world_2", True), ("prod", False)]


def test_the_comment_links_only_the_views_the_pr_environment_holds(bot):
    """A model that differs from prod but that the PR environment did not promote (prod moved on since)
    has no view there: the comment links none."""
    b = bot(changed=("shop.orders", "shop.items"))
    b.engine.promoted = frozenset({"shop.orders"})
    assert b("pull_request", payload("pull_request/opened.payload.json")) == 0
    assert "- `shop__hello_world_2.orders`" in b.comment
    assert "shop__hello_world_2.items" not in b.comment


def test_sqlmesh_bot_settings_are_read_as_sqlmesh_means_them(bot):
    """A SQLMesh project's cicd_bot block works unchanged: `type: github`, `prod_branch_name`,
    `run_on_deploy_to_prod`, and invalidate_environment_after_deploy: false keeps a merged PR's environment
    (a closed, unmerged one is still removed)."""
    from bot.github.settings import load_settings

    settings = load_settings({"type": "github", "prod_branch_name": "release", "run_on_deploy_to_prod": True,
                              "auto_categorize_changes": {"sql": "full"}, "pr_include_unmodified": True,
                              "enable_deploy_command": True, "merge_method": "squash"})
    assert settings.prod_branch_names == ("release",) and settings.run_on_deploy
    assert settings.pr_include_unmodified
    with pytest.raises(ConfigError, match="cicd_bot.type `gitlab` is not supported"):
        load_settings({"type": "gitlab"})
    with pytest.raises(ConfigError, match="sets both `run_on_deploy_to_prod`"):
        load_settings({"run_on_deploy_to_prod": True, "run_on_deploy": False})

    b = bot({"invalidate_environment_after_deploy": False})
    assert b("pull_request", payload("pull_request/opened.payload.json")) == 0
    merged = copy.deepcopy(payload("pull_request/closed.payload.json"))
    merged["pull_request"]["merged"] = True
    assert b("pull_request", merged) == 0
    assert b.engine.invalidated == [] and "environment `hello_world_2` is kept" in b.status
    assert b("pull_request", payload("pull_request/closed.payload.json")) == 0
    assert b.engine.invalidated == ["hello_world_2"]


def test_closing_a_fork_pr_reads_nothing_of_its_project(tmp_path):
    """A fork's PR never gets an environment, so its close has nothing to clean up, and a fork's code
    never runs: the project is not opened."""
    closed = copy.deepcopy(payload("pull_request/closed.payload.json"))
    closed["pull_request"]["head"]["repo"]["full_name"] = "someone/Hello-World"
    path = tmp_path / "event.json"
    path.write_text(json.dumps(closed))
    out = tmp_path / "out"

    def no_project(p, g):
        raise AssertionError("the fork's project was opened")

    assert main(Invocation(event_name="pull_request", event_path=str(path), output_dir=str(out)), env={},
                context_factory=no_project) == 0
    assert "never builds an environment for a fork" in (out / "summary.md").read_text()


def test_a_deleted_head_repository_is_not_a_fork_named_none(tmp_path):
    raw = copy.deepcopy(payload("pull_request/opened.payload.json"))
    raw["pull_request"]["head"]["repo"] = None
    path = tmp_path / "event.json"
    path.write_text(json.dumps(raw))
    out = tmp_path / "out"
    engine = FakeEngine()
    assert main(Invocation(event_name="pull_request", event_path=str(path), output_dir=str(out)), env={},
                context_factory=lambda p, g: engine) == 0
    summary = (out / "summary.md").read_text()
    assert "a head repository that is no longer available" in summary and "None" not in summary
    assert engine.plans == []


def test_the_prod_preview_shows_intervals_batches_and_an_estimate_from_recorded_batch_times(bot):
    """Each backfilled model's intervals and batches, and how long its backfill should take from the wall time
    recorded with earlier batches of the model, and its executor time from those that kept Spark's task time;
    without any, the comment says there is no estimate (or no executor time) yet."""
    from bot.state.protocol import BatchTimes

    b = bot()
    b.engine.batches, b.engine.batch_days = 3, 2
    assert b("pull_request", payload("pull_request/opened.payload.json")) == 0
    assert "| shop.orders | FULL | 6 | 3 | " in b.comment
    assert "No estimate yet: none of these models has a timed batch recorded in the state." in b.comment

    b.engine.batch_times = {("shop.orders", "1"): BatchTimes("shop.orders", "1", batches=4, span_ms=4 * 86_400_000,
                                                             elapsed_ms=4 * 600_000, last_ts=1)}
    assert b("pull_request", payload("pull_request/opened.payload.json")) == 0
    # a FULL model: 10 min per recorded batch, 3 batches
    assert re.search(r"\| shop\.orders \| FULL \| 6 \| 3 \| [^|]+ \| [^|]+ \| \\~30 min \|", b.comment), b.comment
    assert "about 30 min of compute one after another" in b.comment
    assert "Est. executor time" not in b.comment
    assert "No executor time yet: these batches were recorded without Spark's task time" in b.comment

    # batches that kept Spark's task time: 2 of them, 1 h of executor time each
    b.engine.batch_times = {("shop.orders", "1"): BatchTimes(
        "shop.orders", "1", batches=4, span_ms=4 * 86_400_000, elapsed_ms=4 * 600_000, last_ts=1,
        metered_batches=2, metered_span_ms=2 * 86_400_000, executor_ms=2 * 3_600_000, bytes_read=1)}
    assert b("pull_request", payload("pull_request/opened.payload.json")) == 0
    assert re.search(r"\| \\~30 min \| \\~3\.0 h \|", b.comment), b.comment
    assert "about 30 min of compute one after another and 3.0 h of executor time" in b.comment
    assert "No executor time yet" not in b.comment
