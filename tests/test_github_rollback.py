"""Rollback runner (bot.github.runners.rollback): `/rollback` and the deploy workflow dispatched with `rollback`
roll the merge environment back for required approvers only, replying with what was repointed. No Spark
(the rollback on Spark itself: test_rollback.py)."""

from __future__ import annotations

import copy

import pytest
from rendered import shown

from github_support import (dispatch_payload, no_waiting, payload, pr_comment_event, pull_payload,  # noqa: F401
                            scenario)

pytestmark = pytest.mark.usefixtures("no_waiting")


def test_rollback_is_for_required_approvers_and_replies_with_what_it_repointed(scenario):
    """`/rollback [PLAN_ID]` rolls the merge environment back: a writer who is not a required approver, a
    reader, a fork's PR are refused before the project is opened; an approver's rollback replies with the plans
    and the views it repointed."""
    bot = scenario({"required_approvers": ["ann-gh"]})
    bot.repo.permissions.update({"ann-gh": "write", "reader": "read"})
    bot.repo.set_pull(pull_payload(bot.head), merged=True)
    assert bot(pr_comment_event("/rollback")) == 1
    assert "`/rollback` can be given by a required approver only" in bot.replies[-1]
    assert bot(pr_comment_event("/rollback", login="reader")) == 1
    assert "needs write permission on this repository (yours is `read`)" in bot.replies[-1]
    assert bot(pr_comment_event("/rollback to yesterday", login="ann-gh")) == 0
    assert "takes at most one plan id" in bot.replies[-1]
    assert bot.engine.rolled_back == [] and bot.engine.plans == []
    bot.repo.set_pull(pull_payload(bot.head, head_repo="someone/Hello-World"))
    assert bot(pr_comment_event("/rollback", login="ann-gh")) == 1
    assert "comes from the fork `someone/Hello-World`" in bot.replies[-1] and bot.engine.rolled_back == []

    bot.repo.set_pull(pull_payload(bot.head), merged=True)    # the job checked out the PR's head, not the default branch
    assert bot(pr_comment_event("/rollback", login="ann-gh")) == 1
    assert "rollback refused: the checked-out commit" in bot.replies[-1] and bot.engine.rolled_back == []
    bot.repo.set_pull(pull_payload("f" * 40), merged=True)     # the checkout is a default-branch commit
    assert bot(pr_comment_event("/rollback", login="ann-gh")) == 0
    assert bot.engine.rolled_back == [("prod", None)]
    assert ("rolled `prod` back from plan bbbbbbbb to plan aaaaaaaa's snapshots (new plan cccccccc)"
            in bot.replies[-1]) and "views repointed: `shop.orders`" in bot.replies[-1]
    assert bot(pr_comment_event("/rollback 1A2B3C", login="ann-gh")) == 0
    assert bot.engine.rolled_back[-1] == ("prod", "1a2b3c") and bot.engine.applied == []


def test_the_deploy_workflow_dispatched_with_rollback_rolls_back_for_required_approvers_only(scenario):
    """meshbot-deploy.yml's `workflow_dispatch` with `rollback: true` (and an optional `rollback_to`) rolls the
    merge environment back, with /rollback's gates: write permission and a required approver, a checkout of the
    default branch that is exactly the event's commit; the job summary says what was repointed. Unticked, the
    dispatch is a scheduled-style run."""
    bot = scenario({"required_approvers": ["ann-gh"]})
    bot.repo.permissions.update({"ann-gh": "write", "reader": "read"})
    assert bot(dispatch_payload("writer", rollback="true"), "workflow_dispatch", GITHUB_SHA=bot.head) == 1
    assert "a rollback can be started by a required approver only" in bot.summary.read_text()
    assert bot(dispatch_payload("reader", rollback="true"), "workflow_dispatch", GITHUB_SHA=bot.head) == 1
    assert "needs write permission on this repository (yours is `read`)" in bot.summary.read_text()
    assert bot(dispatch_payload("ann-gh", rollback="true", rollback_to="last week"), "workflow_dispatch",
               GITHUB_SHA=bot.head) == 0
    assert "`rollback_to` must be a plan id" in bot.summary.read_text()
    assert bot(dispatch_payload("ann-gh", rollback="true"), "workflow_dispatch", GITHUB_SHA="9" * 40) == 1
    assert "the commit of the event (GITHUB_SHA) is 9999999" in shown(bot.summary.read_text())
    feature = dispatch_payload("ann-gh", rollback="true")
    feature["ref"] = "refs/heads/feature"    # a writer may dispatch the workflow on any branch
    assert bot(feature, "workflow_dispatch", GITHUB_SHA=bot.head) == 1
    assert "`refs/heads/feature` is not a prod branch" in bot.summary.read_text()
    bot.repo.released_on_default_branch = False
    assert bot(dispatch_payload("ann-gh", rollback="true"), "workflow_dispatch", GITHUB_SHA=bot.head) == 1
    assert "rollback refused: the checked-out commit" in bot.summary.read_text()
    assert bot.engine.rolled_back == [] and bot.engine.plans == []

    bot.repo.released_on_default_branch = True
    assert bot(dispatch_payload("ann-gh", rollback="true", rollback_to="1A2B3C"), "workflow_dispatch",
               GITHUB_SHA=bot.head) == 0
    assert bot.engine.rolled_back == [("prod", "1a2b3c")] and bot.engine.applied == []
    assert "rolled `prod` back from plan bbbbbbbb to plan 1a2b3c's snapshots" in bot.summary.read_text()
    assert bot(dispatch_payload("ann-gh", rollback="false"), "workflow_dispatch", GITHUB_SHA=bot.head) == 0
    assert "### meshbot run" in bot.summary.read_text().rpartition("rolled `prod` back")[2]
    assert len(bot.engine.rolled_back) == 1
    assert bot.repo.comments == []
