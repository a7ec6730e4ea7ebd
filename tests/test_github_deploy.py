"""`/deploy` gates and merge_method: the PR is fetched from GitHub (OpenAPI-validated mock) and must be open,
from this repository, mergeable and not blocked; refusals are replies on the PR; a successful deploy records
the deployed head and, with cicd_bot.merge_method, merges the PR at exactly that head. No Spark."""

from __future__ import annotations

import copy

import pytest
from rendered import shown

from github_support import (dispatch_payload, no_waiting, opened_payload, payload, pr_comment_event,  # noqa: F401 (fixtures)
                            pull_payload, scenario)

DEPLOY = "meshbot - Prod Environment Synced"
DAY = 86_400_000
pytestmark = pytest.mark.usefixtures("no_waiting")


@pytest.mark.parametrize("pull, fields, reason", [
    (dict(head_repo="someone/Hello-World"), {}, "comes from the fork `someone/Hello-World`. meshbot never runs"),
    ({}, dict(mergeable=None, mergeable_state="unknown"), "GitHub is still computing whether #2 can be merged"),
    ({}, dict(mergeable=False, mergeable_state="dirty"), "#2 has merge conflicts with `master`"),
    ({}, dict(mergeable=True, mergeable_state="dirty"), "#2 has merge conflicts with `master`"),
    ({}, dict(mergeable=True, mergeable_state="blocked"), "branch protection blocks merging #2"),
    ({}, dict(state="closed"), "#2 is closed"),
])
def test_deploy_is_refused_with_a_reply_unless_the_pr_can_be_merged(scenario, pull, fields, reason):
    bot = scenario()
    bot.repo.set_pull(pull_payload(bot.head, **pull), **fields)
    assert bot(pr_comment_event()) == 1
    assert len(bot.replies) == 1 and bot.replies[0].startswith("@writer ") and reason in bot.replies[0]
    assert "None" not in bot.replies[0]
    assert bot.engine.plans == [] and bot.engine.applied == [] and bot.repo.checks == {}
    assert bot.repo.merges == [] and bot.repo.reactions == []


def test_deploy_is_refused_when_the_preview_was_built_for_another_head(scenario, tmp_path):
    bot = scenario()
    bot.repo.set_pull(pull_payload(bot.head))
    assert bot(opened_payload(bot.head), "pull_request") == 0   # preview on the checked-out head
    bot.repo.set_pull(pull_payload("d" * 40))
    assert bot(pr_comment_event()) == 1
    assert f"built for {bot.head[:7]}, but the head of #2 is now ddddddd" in bot.replies[-1]
    assert bot.engine.applied == ["hello_world_2"]


def test_a_comment_of_the_previous_release_still_gates_the_deploy(scenario):
    """The release before the hidden records were versioned wrote them without `v=`: `/deploy` still reads
    from such a comment the head its preview was built for and the approved plan's digest."""
    import re

    bot = scenario({"require_approved_plan": True})
    bot.repo.set_pull(pull_payload(bot.head))
    assert bot(opened_payload(bot.head), "pull_request") == 0
    comment = next(c for c in bot.repo.comments if "<!-- meshbot:pr-comment" in c["body"])
    old = comment["body"].replace("<!-- meshbot:checks v=1 {", "<!-- meshbot:checks {")
    old = re.sub(r"<!-- meshbot:plan-digest v=1 \w+ \S+ -->",
                 "<!-- meshbot:plan-digest 0123456789abcdef shop.orders@1 -->", old)
    assert "v=1" not in old and "meshbot:checks {" in old
    comment["body"] = old
    bot.repo.set_pull(pull_payload("d" * 40))
    assert bot(pr_comment_event()) == 1
    assert f"built for {bot.head[:7]}, but the head of #2 is now ddddddd" in bot.replies[-1]
    bot.repo.set_pull(pull_payload(bot.head))
    assert bot(pr_comment_event()) == 1
    assert "the plan differs from the approved prod plan preview (require_approved_plan)" in bot.comment
    assert "(digest 0123456789abcdef → " in bot.comment and bot.engine.applied == ["hello_world_2"]


def test_deploy_applies_the_pr_head_records_it_and_merges_with_merge_method(scenario):
    bot = scenario({"merge_method": "squash"})
    HEAD = bot.head
    bot.repo.set_pull(pull_payload(HEAD))
    assert bot(opened_payload(HEAD), "pull_request") == 0
    assert "How to deploy" in bot.comment
    assert bot(pr_comment_event()) == 0
    assert bot.engine.applied == ["hello_world_2", "prod"]
    assert bot.repo.merges == [{"merge_method": "squash", "sha": HEAD}]
    assert bot.output("deployed_sha") == HEAD and bot.output("merge_sha") == "c" * 40
    assert bot.repo.check(DEPLOY)["conclusion"] == "success" and bot.repo.check(DEPLOY)["head_sha"] == HEAD
    status = bot.comment.split("<!-- /meshbot:section status -->")[0]
    assert f":rocket: Deployed to `prod` from {HEAD[:7]} as plan `plan_" in status and "digest `" not in status
    assert "The PR was merged (squash) as ccccccc." in status
    assert "How to deploy" not in bot.comment
    assert "[Workflow run](https://github.com/Codertocat/Hello-World/actions/runs/7)" in bot.comment
    assert all("ghs_deploy_token" not in str(call) for call in bot.gh.calls)


def test_the_push_of_a_pr_deployed_and_merged_by_deploy_keeps_its_report(scenario):
    """`/deploy` with merge_method merges the PR; the push of that merge commit finds prod up to date:
    it applies nothing and leaves the PR comment's deploy report as it was."""
    bot = scenario({"merge_method": "squash"})
    bot.repo.set_pull(pull_payload(bot.head))
    bot.repo.previewed(bot.head)   # the PR's sync previewed its head
    assert bot(pr_comment_event()) == 0
    report = bot.comment
    merge = bot.commit("the squashed merge")           # the push job checks out the merge commit
    bot.repo.pull["merge_commit_sha"] = merge
    push = copy.deepcopy(payload("push/with-new-branch.payload.json"))
    push["after"] = push["head_commit"]["id"] = merge
    assert bot(push, "push") == 0
    assert bot.engine.applied == ["prod"] and bot.engine.plans == ["prod", "prod"]
    assert bot.comment == report and ":rocket: Deployed to `prod`" in report
    check = bot.repo.check(DEPLOY)
    assert check["conclusion"] == "success" and "nothing to deploy" in check["output"]["summary"]


def test_a_refused_merge_after_a_deploy_is_reported_and_fails_the_step(scenario):
    bot = scenario({"merge_method": "rebase"})
    bot.repo.set_pull(pull_payload(bot.head))
    bot.repo.previewed(bot.head)   # the PR's sync previewed its head
    bot.repo.refuse_merges(405, "Rebase merges are not allowed on this repository.")
    assert bot(pr_comment_event()) == 1
    assert bot.engine.applied == ["prod"]
    assert "The PR could not be merged (rebase)" in bot.comment and "Rebase merges are not allowed" in bot.comment


def test_without_merge_method_a_deploy_does_not_merge(scenario):
    bot = scenario()
    bot.repo.set_pull(pull_payload(bot.head))
    bot.repo.previewed(bot.head)   # the PR's sync previewed its head
    assert bot(pr_comment_event()) == 0
    assert bot.repo.merges == [] and bot.engine.applied == ["prod"]
    assert not bot.gh.sent("PUT", r"/merge$")


def test_a_large_backfill_needs_a_required_approvers_explicit_yes(scenario):
    """cicd_bot.max_backfill_batches: a deploy computing more batches is refused with the per-model counts,
    unless a required approver comments `/deploy --allow-large-backfill`."""
    bot = scenario({"max_backfill_batches": 2, "required_approvers": ["ann-gh"]})
    bot.engine.batches = 3
    bot.repo.permissions.update({"ann-gh": "write"})
    bot.repo.set_pull(pull_payload(bot.head))
    bot.repo.previewed(bot.head)   # the PR's sync previewed its head
    bot.repo.review("ann-gh", "APPROVED", bot.head, "2024-01-02T00:00:00Z")
    assert bot(pr_comment_event()) == 1 and bot.engine.applied == []
    check = bot.repo.check(DEPLOY)
    assert check["conclusion"] == "failure"
    assert "the plan computes 3 batches, more than cicd_bot.max_backfill_batches (2)" in check["output"]["summary"]
    assert "`shop.orders`: 3 interval(s) in 3 batch(es)" in check["output"]["summary"]
    assert bot(pr_comment_event("/deploy --allow-large-backfill")) == 1 and bot.engine.applied == []
    assert "can be given by a required approver only" in bot.replies[-1]
    assert bot(pr_comment_event("/deploy --allow-large-backfill", login="ann-gh")) == 0
    assert bot.engine.applied == ["prod"]
    assert bot(pr_comment_event("/deploy --force")) == 0
    assert "does not know `--force`" in bot.replies[-1]


def test_max_backfill_intervals_counts_intervals_whatever_the_batch_size(scenario):
    """cicd_bot.max_backfill_intervals: 10 daily intervals in 2 batches of 5 pass a limit of 2 batches
    but not one of 7 intervals."""
    bot = scenario({"max_backfill_batches": 2, "max_backfill_intervals": 7})
    bot.engine.batches, bot.engine.batch_days = 2, 5
    bot.repo.set_pull(pull_payload(bot.head))
    bot.repo.previewed(bot.head)   # the PR's sync previewed its head
    assert bot(pr_comment_event()) == 1 and bot.engine.applied == []
    summary = bot.repo.check(DEPLOY)["output"]["summary"]
    assert "the plan computes 10 intervals, more than cicd_bot.max_backfill_intervals (7)." in summary
    assert "batches, more than" not in summary and "`shop.orders`: 10 interval(s) in 2 batch(es)" in summary


def test_a_backfill_above_the_executor_hours_limit_needs_a_required_approvers_explicit_yes(scenario):
    """cicd_bot.max_backfill_executor_hours: a deploy whose backfill is estimated (from recorded task time) above
    the limit is refused naming each model's estimate and the limit, unless a required approver comments
    `/deploy --allow-large-backfill`; a model without recorded task time counts as none."""
    from bot.state.protocol import BatchTimes

    bot = scenario({"max_backfill_executor_hours": 1, "required_approvers": ["ann-gh"]})
    bot.engine.batches = 3
    bot.repo.permissions.update({"ann-gh": "write"})
    bot.repo.set_pull(pull_payload(bot.head))
    bot.repo.previewed(bot.head)   # the PR's sync previewed its head
    bot.repo.review("ann-gh", "APPROVED", bot.head, "2024-01-02T00:00:00Z")
    # no executor time recorded (batches from before schema 8, or Spark Connect): nothing to hold it back
    bot.engine.batch_times = {("shop.orders", "1"): BatchTimes("shop.orders", "1", batches=4, span_ms=4 * DAY,
                                                               elapsed_ms=4 * 60_000, last_ts=1)}
    assert bot(pr_comment_event("/deploy", login="ann-gh")) == 0 and bot.engine.applied == ["prod"]

    bot.engine.deployed, bot.engine.applied = False, []
    # half an executor-hour per batch (FULL: per batch), 3 batches: 1.5 h
    bot.engine.batch_times = {("shop.orders", "1"): BatchTimes(
        "shop.orders", "1", batches=4, span_ms=4 * DAY, elapsed_ms=4 * 60_000, last_ts=1,
        metered_batches=4, metered_span_ms=4 * DAY, executor_ms=4 * 1_800_000, bytes_read=1)}
    assert bot(pr_comment_event("/deploy", login="ann-gh")) == 1 and bot.engine.applied == []
    summary = bot.repo.check(DEPLOY)["output"]["summary"]
    assert ("the plan computes an estimated 1.50 executor-hours, more than cicd_bot.max_backfill_executor_hours "
            "(1).") in summary
    assert ("`shop.orders`: 3 interval(s) in 3 batch(es), ~1.50 executor-hours (from 4 timed batch(es) of an "
            "earlier version)") in summary
    assert "`/deploy --allow-large-backfill`" in summary
    assert bot(pr_comment_event("/deploy --allow-large-backfill")) == 1 and bot.engine.applied == []
    assert "can be given by a required approver only" in bot.replies[-1]
    assert bot(pr_comment_event("/deploy --allow-large-backfill", login="ann-gh")) == 0
    assert bot.engine.applied == ["prod"]


def test_a_forward_only_branch_plans_forward_only_and_a_destructive_change_needs_an_approver(scenario):
    """SQLMesh's forward_only_branch_suffix: the PR environment, the prod preview and the deploy of a PR from
    `...-forward-only` are forward-only plans; `/deploy --allow-destructive-model M` (required approvers
    only) allows M's destructive change and the deploy report says who allowed it."""
    bot = scenario({"required_approvers": ["ann-gh"]})
    bot.repo.permissions.update({"ann-gh": "write"})
    opened = opened_payload(bot.head)
    opened["pull_request"]["head"]["ref"] = "fix-forward-only"
    pull = pull_payload(bot.head)
    pull["head"]["ref"] = "fix-forward-only"
    bot.repo.set_pull(pull)
    bot.repo.review("ann-gh", "APPROVED", bot.head, "2024-01-02T00:00:00Z")
    assert bot(opened, "pull_request") == 0
    assert bot.engine.plans == ["hello_world_2", "prod"]
    assert all(options.forward_only for options in bot.engine.options)
    assert bot(pr_comment_event("/deploy --allow-destructive-model shop.orders")) == 1     # a writer, no approver
    assert "can be given by a required approver only" in bot.replies[-1]
    assert bot(pr_comment_event("/deploy --allow-destructive-model shop.orders", login="ann-gh")) == 0
    deploy = bot.engine.options[-1]
    assert deploy.forward_only and deploy.allow_destructive_models == ("shop.orders",)
    assert "Destructive changes allowed for `shop.orders` by @ann-gh." in bot.repo.check(DEPLOY)["output"]["summary"]


@pytest.mark.parametrize("check", [True, False])
def test_check_if_blocked_on_deploy_to_prod_false_deploys_a_pr_branch_protection_blocks(scenario, check):
    """SQLMesh's setting: with it off, `mergeable_state: blocked` no longer refuses /deploy (other gates stay)."""
    bot = scenario({"check_if_blocked_on_deploy_to_prod": check})
    bot.repo.set_pull(pull_payload(bot.head), mergeable=True, mergeable_state="blocked")
    bot.repo.previewed(bot.head)   # the PR's sync previewed its head
    if check:
        assert bot(pr_comment_event()) == 1 and bot.engine.applied == []
        assert "check_if_blocked_on_deploy_to_prod: false deploys anyway" in shown(bot.replies[-1])
    else:
        assert bot(pr_comment_event()) == 0 and bot.engine.applied == ["prod"]


def _plan(versions: dict[str, str], changed: dict[str, str | None]):
    """A plan deploying `versions` (name -> identifier) whose changes are `changed` (None: removed)."""
    from types import SimpleNamespace

    def snapshot(identifier):
        return SimpleNamespace(identifier=identifier)

    return SimpleNamespace(snapshots={name: snapshot(ident) for name, ident in versions.items()}, backfills=(),
                           changes=tuple(SimpleNamespace(name=name, snapshot=None if ident is None else snapshot(ident))
                                         for name, ident in changed.items()))


def test_a_10000_model_plans_digest_record_fits_a_comment_and_still_names_the_drift():
    """The record names the plan's changes only (at most a few hundred): with every model of a 10,000-model
    plan it took 270,000 characters, more than a comment holds, and the truncated comment lost it, so
    require_approved_plan let any plan through. The digest still covers every model."""
    from bot.github.runners.base import RECORDED_CHANGES, plan_digest
    from bot.github.runners.deploy import plan_drift
    from bot.report.comment_state import plan_digest_marker

    versions = {f"db.m{i:05d}": str(1000 + i) for i in range(10_000)}
    approved = _plan(versions, {"db.m00007": "1007", "db.gone": None})
    digest, record = plan_digest(approved)
    assert record == "db.gone@-,db.m00007@1007"
    comment = f"report\n{plan_digest_marker(digest, record)}\n"
    assert plan_drift(comment, digest, approved) is None

    # another model's version moved under the preview: the digest sees it, the record cannot name it
    moved_elsewhere = _plan({**versions, "db.m09999": "5"}, {"db.m00007": "1007", "db.gone": None})
    drift = plan_drift(comment, plan_digest(moved_elsewhere)[0], moved_elsewhere)
    assert drift is not None and drift.models == () and drift.unrecorded == 0
    # the approved change moved, and a new change appeared
    edited = _plan({**versions, "db.m00007": "2", "db.m00008": "3"},
                   {"db.m00007": "2", "db.m00008": "3", "db.gone": None})
    drift = plan_drift(comment, plan_digest(edited)[0], edited)
    assert drift.models == ("db.m00007", "db.m00008")

    # a plan changing thousands of models records the first RECORDED_CHANGES and counts the rest
    big = _plan(versions, {name: ident for name, ident in versions.items()})
    digest, record = plan_digest(big)
    assert record.endswith(f",+{10_000 - RECORDED_CHANGES}") and len(record) < 12_000
    comment = str(plan_digest_marker(digest, record))
    later = _plan({**versions, "db.m00001": "9", "db.m09000": "9"}, {**versions, "db.m00001": "9", "db.m09000": "9"})
    drift = plan_drift(comment, plan_digest(later)[0], later)
    assert drift.models == ("db.m00001",) and drift.unrecorded == 10_000 - RECORDED_CHANGES


def test_a_record_of_the_previous_release_naming_every_model_still_names_the_drift():
    from bot.github.runners.deploy import plan_drift

    versions = {"db.a": "1", "db.b": "2", "db.c": "3"}
    comment = "<!-- meshbot:plan-digest v=1 0123456789abcdef db.a@1,db.b@2,db.c@3 -->"
    now = _plan({**versions, "db.b": "7"}, {"db.b": "7"})
    drift = plan_drift(comment, "fedcba9876543210", now)
    assert drift.models == ("db.b",) and drift.unrecorded == 0


def test_a_deploy_that_would_undo_prod_drift_needs_deploy_allow_drift_by_a_required_approver(scenario):
    """prod's `shop.orders` was changed by a local plan after the default branch's last deploy: a deploy
    serving it otherwise is refused, naming it; `/deploy --allow-drift` by a required approver deploys."""
    bot = scenario({"required_approvers": ["writer"]})
    bot.engine.drifted = {"shop.orders": ("1", "local")}
    bot.repo.set_pull(pull_payload(bot.head))
    bot.repo.previewed(bot.head)   # the PR's sync previewed its head
    bot.repo.review("writer", "APPROVED", bot.head, "2024-01-08T00:00:00Z")
    bot.repo.pull["user"]["login"] = "author"
    assert bot(pr_comment_event()) == 1
    assert "it would undo drift (changes not made by a deploy of the default branch) of `shop.orders`" in bot.comment
    assert bot.engine.applied == []
    assert bot(pr_comment_event("/deploy --allow-drift", comment_id=78)) == 0
    assert bot.engine.applied == ["prod"]
    assert bot.engine.options[-1].source.startswith("/deploy of #2 at ")


def test_after_a_merge_a_required_approver_redeploys_over_drift_by_dispatching_the_deploy_workflow(scenario):
    """A push deploy refused for drift has its override too: meshbot-deploy.yml dispatched with `allow_drift`
    (and `rollback` unticked) deploys the default branch's head, for required approvers only."""
    bot = scenario({"required_approvers": ["ann-gh"], "deploy_on": "merge"})
    bot.repo.permissions.update({"ann-gh": "write"})
    bot.engine.drifted = {"shop.orders": ("1", "local")}
    merged = pull_payload(bot.head)
    bot.repo.set_pull(merged, merged=True, merge_sha=bot.head)
    bot.repo.review("ann-gh", "APPROVED", bot.head, "2024-01-08T00:00:00Z")
    push = {**payload("push/payload.json"), "ref": "refs/heads/master", "after": bot.head, "deleted": False,
            "created": False}
    assert bot(push, "push", GITHUB_SHA=bot.head) == 1 and bot.engine.applied == []
    assert "after a merge: run the deploy workflow by hand with `allow_drift`" in bot.comment
    assert bot(dispatch_payload("ann-gh", rollback="true", allow_drift="true"), "workflow_dispatch",
               GITHUB_SHA=bot.head) == 0
    assert "dispatched with both `rollback` and `allow_drift`" in bot.summary.read_text()
    assert bot(dispatch_payload("writer", rollback="false", allow_drift="true"), "workflow_dispatch",
               GITHUB_SHA=bot.head) == 1
    assert "a deploy that undoes prod's drift can be started by a required approver only" in bot.summary.read_text()
    assert bot.engine.applied == []
    assert bot(dispatch_payload("ann-gh", rollback="false", allow_drift="true"), "workflow_dispatch",
               GITHUB_SHA=bot.head) == 0
    assert bot.engine.applied == ["prod"]
