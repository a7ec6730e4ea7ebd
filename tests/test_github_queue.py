"""bot.github.runners.queue: GitHub's merge queue (`merge_group`), from the documented payload through the gate to
the required checks on the queue's merge commit, and the deploy of that commit once it lands."""

from __future__ import annotations

import copy

import pytest

from bot.diff.table_diff import ModelDataDiff, RowDiff, schema_diff
from bot.errors import EngineError
from bot.github.event import parse_event
from bot.github.classify import Step, classify
from bot.github.settings import BotSettings
from bot.project.config import UserConfig
from github_support import NoEngine, Scenario, payload, pull_payload, scenario  # noqa: F401 - fixture

REQUIRED = ("meshbot - Unit Tests", "meshbot - Prod Plan Preview", "meshbot - Data Diff", "meshbot - Required Approval")
APPROVER = UserConfig(username="ann", github_username="ann-gh", roles=("required_approver",))


def _group(head: str, *, number: int = 2, action: str = "checks_requested") -> dict:
    """GitHub's documented merge_group payload (octokit/webhooks), its entry being PR `number` and its merge
    commit `head` (the commit the job checked out)."""
    raw = copy.deepcopy(payload("merge_group/checks_requested.payload.json"))
    raw["action"] = action
    raw["merge_group"]["head_sha"] = head
    raw["merge_group"]["head_ref"] = f"refs/heads/gh-readonly-queue/main/pr-{number}-{'9' * 40}"
    return raw


def _queued_pull(head: str) -> dict:
    """PR #2 of the queue's repository (octo-org/octo-repo), into `main`, its own head `head`."""
    raw = pull_payload(head, head_repo="octo-org/octo-repo")
    raw["base"] = {**raw["base"], "ref": "main", "repo": {**raw["base"]["repo"], "full_name": "octo-org/octo-repo"}}
    return raw


def test_the_documented_payload_names_the_queue_commit_and_its_pull_request():
    event = parse_event("merge_group", payload("merge_group/checks_requested.payload.json"))
    group = event.merge_group
    assert (group.head_sha, group.base_branch, group.base_sha, group.pr_numbers) == (
        "2ffea6db159f6b6c47a24e778fb9ef40cf6b1c7d", "main", "380387fbc80638b734a49e1be1c4dfec1c01b33c", (104,))
    assert event.sha == group.head_sha and event.pull_request is None
    assert classify(event, BotSettings()).step is Step.QUEUE


def test_only_a_checks_request_of_a_prod_branch_queue_is_checked():
    raw = payload("merge_group/checks_requested.payload.json")
    destroyed = parse_event("merge_group", {**raw, "action": "destroyed"})
    assert classify(destroyed, BotSettings()).step is Step.NOTHING
    other = copy.deepcopy(raw)
    other["merge_group"].update(base_ref="refs/heads/release", head_ref="refs/heads/gh-readonly-queue/release/pr-1-"
                                + "9" * 40)
    decision = classify(parse_event("merge_group", other), BotSettings())
    assert decision.step is Step.NOTHING and "`release`, which meshbot does not deploy" in decision.text
    stray = copy.deepcopy(raw)
    stray["merge_group"]["head_ref"] = "refs/heads/feature"
    assert "not a merge queue branch" in classify(parse_event("merge_group", stray), BotSettings()).text


def _queue(bot: Scenario, **pull) -> int:
    bot.repo.set_pull(_queued_pull(pull.pop("pr_head", "e" * 40)), **pull)
    return bot(_group(bot.head), "merge_group")


def test_the_queue_commit_gets_every_required_check_and_its_record(scenario):
    bot = scenario({"required_approvers": ["ann-gh"]})
    bot.repo.review("ann-gh", "APPROVED", "e" * 40, "2024-01-08T00:00:00Z")   # approved the PR's own head
    assert _queue(bot) == 0
    for name in REQUIRED:
        check = bot.repo.check(name)
        assert (check["head_sha"], check["conclusion"]) == (bot.head, "success"), name
    assert "meshbot - PR Environment Synced" not in {c["name"] for c in bot.repo.checks.values()}
    assert bot.engine.plans == ["prod"] and bot.engine.applied == []      # planned, never applied
    assert bot.engine.review_options[0].environment is None               # previews of the queue's commit
    comment = bot.comment
    assert f"The merge queue's commit {bot.head[:7]} (#2 on top of `main` at 380387f" in comment
    assert f"<!-- meshbot:queue v=1 {bot.head} " in comment and "Every check passed" in comment
    title = bot.repo.check(REQUIRED[3])["output"]["title"]
    assert title.startswith("#2: 1 of 1 required approval(s) from @") and "ann-gh" in title


def test_a_combined_plan_that_breaks_fails_the_entry(scenario):
    """Another queued PR removed a column this one reads: the queue's commit cannot be planned."""
    bot = scenario()

    def broken(environment="prod", **kwargs):
        raise EngineError("models/orders.sql:3:8: column `discount` is not a column of any parent of shop.orders")
    bot.engine.plan = broken
    assert _queue(bot) == 1
    plan = bot.repo.check("meshbot - Prod Plan Preview")
    assert plan["conclusion"] == "failure" and "column `discount`" in plan["output"]["summary"]
    assert bot.repo.check("meshbot - Data Diff")["conclusion"] == "failure"
    assert bot.repo.check("meshbot - Unit Tests")["conclusion"] == "success"
    assert "The combined plan could not be built, so this entry leaves the queue" in bot.comment
    assert "meshbot:queue v=1" not in bot.comment


def test_a_backfill_above_the_guard_fails_the_entry(scenario):
    bot = scenario({"max_backfill_batches": 3})
    bot.engine.batches = 5
    assert _queue(bot) == 1
    plan = bot.repo.check("meshbot - Prod Plan Preview")
    assert plan["conclusion"] == "failure"
    assert "5 batches, more than cicd_bot.max_backfill_batches (3)" in plan["output"]["summary"]
    assert "/deploy --allow-large-backfill" in bot.comment


def test_a_data_diff_gate_fails_the_entry(scenario):
    bot = scenario()
    rows = dict(source_count=4, target_count=14, joined_count=14, full_match_count=0, partial_match_count=14,
                source_only_count=0, target_only_count=0, distinct_key_source_count=4, distinct_key_target_count=4,
                duplicate_key_target_count=14)
    columns = [("customer_id", "int")]
    bot.engine.diffs = (ModelDataDiff(model="shop.orders", kind="FULL", reason="directly modified", window="whole query",
                                      previewed=True, keys=("customer_id",), rows=RowDiff(**rows),
                                      schema=schema_diff(columns, columns), source_count=4, target_count=14),)
    assert _queue(bot) == 1
    assert bot.repo.check("meshbot - Data Diff")["conclusion"] == "failure"
    assert "Failed on that commit: Data Diff." in bot.comment


def test_unapproved_pull_request_fails_its_entry(scenario):
    bot = scenario({"required_approvers": ["ann-gh"]})
    assert _queue(bot) == 1
    assert bot.repo.check("meshbot - Required Approval")["conclusion"] == "failure"


@pytest.mark.parametrize("case", ["fork", "checkout"])
def test_an_entry_meshbot_may_not_check_fails_every_check_before_the_project_is_read(scenario, case):
    bot = scenario()
    bot.engine = NoEngine()
    pull = _queued_pull("e" * 40)
    if case == "fork":
        pull["head"]["repo"] = {**pull["head"]["repo"], "full_name": "mallory/octo-repo"}
    bot.repo.set_pull(pull)
    raw = _group(bot.head if case == "fork" else "f" * 40)
    assert bot(raw, "merge_group") == 1
    for name in REQUIRED:
        assert bot.repo.check(name)["conclusion"] == "failure"
    expected = "never runs a fork's code" if case == "fork" else "exactly that commit"
    assert expected in bot.comment


def test_the_deploy_of_the_queue_commit_compares_with_the_plan_the_queue_checked(scenario):
    """The queue's commit lands on the default branch as it was tested; its push deploys it. With
    require_approved_plan the plan must be the one the queue checked there (not the PR's own preview, which
    lacked the entries ahead of it)."""
    import re

    bot = scenario({"require_approved_plan": True})
    assert _queue(bot) == 0
    comment = next(c for c in bot.repo.comments if "<!-- meshbot:pr-comment" in c["body"])
    checked = comment["body"]
    # the PR's own preview recorded another digest: it does not apply to the queue's commit
    comment["body"] += "\n<!-- meshbot:plan-digest v=1 0123456789abcdef shop.orders@1 -->"
    bot.repo.set_pull(_queued_pull("e" * 40), merged=True, merge_sha=bot.head)
    push = copy.deepcopy(payload("push/payload.json"))
    push.update(ref="refs/heads/master", after=bot.head, deleted=False)

    moved = re.sub(r"(<!-- meshbot:queue v=1 \w+ )\w+", r"\g<1>fedcba9876543210", comment["body"])
    comment["body"] = moved                   # prod moved under the plan the queue checked
    assert bot(push, "push", GITHUB_SHA=bot.head) == 1
    assert bot.engine.applied == []
    assert f"the plan differs from the plan the merge queue checked on {bot.head[:7]}" in bot.comment

    comment["body"] = checked + "\n<!-- meshbot:plan-digest v=1 0123456789abcdef shop.orders@1 -->"
    assert bot(push, "push", GITHUB_SHA=bot.head) == 0, bot.lines
    assert bot.engine.applied == ["prod"] and bot.output("deployed_sha") == bot.head
