"""Merge queue runner: plan and check the queue's merge commit (a PR on top of the entries ahead of it) against prod."""

from __future__ import annotations

from dataclasses import replace

from bot.errors import BotError
from bot.github.approvals import ApprovalStatus
from bot.github.check_names import CheckName
from bot.github.authorize import approval_status, authorize_merge_group
from bot.github.classify import Decision
from bot.github.outcomes import CheckTitle, JobNote, NoteKind, QueueOutcome
from bot.github.runners.base import (BotRun, ephemeral_storage_refusal, error_text, finish_check, plan_digest,
                                     redact_markdown, start_check)
from bot.github.runners.deploy import large_backfill
from bot.github.runners.pr import data_diff_step, prod_options, tests_step
from bot.github.event import PullRequest
from bot.github.views import CheckSummaryView, CommentView, plan_view
from bot.github.comment_fitting import COMMENT_LIMIT, SAFETY, render_comment, truncate_markdown
from bot.plan.definition import Plan

# The checks a repository makes required: the queue's commit gets each of them (the PR's own run posted
# them on the PR's head, which the queue never merges as it is).
QUEUE_CHECKS = (CheckName.UNIT_TESTS, CheckName.PROD_PLAN, CheckName.DATA_DIFF, CheckName.APPROVAL)


def check_merge_group(run: BotRun, decision: Decision) -> int:
    """A `merge_group` `checks_requested`: authorize the entry from the payload and the API, then run the unit
    tests, plan the merge commit against the merge environment (what landing it deploys: a column another
    queued PR removed fails the plan), apply the backfill guard and the Data Diff gates to that plan, and
    post every required check on the merge commit. The PR's comment records the commit and plan checked,
    which the deploy of that commit compares with. Exit 1 (the entry leaves the queue) when any fails."""
    group = run.event.merge_group
    environment = decision.environment or run.settings.merge_environment
    verdict = authorize_merge_group(run.event, run.settings, run.github, checkout_head=run.checkout_head)
    pr = verdict.pull_request
    outcome = QueueOutcome(number=pr.number, sha=group.head_sha, base_branch=group.base_branch,
                           base_sha=group.base_sha, environment=environment)
    if verdict.refusal is not None:
        return _refused(run, outcome, verdict.refusal)
    approval = _approval(run, pr)
    run.open_project(read_cache=False)   # the queue's commit is deployed as it is: parse it, trust no cache
    refusal = ephemeral_storage_refusal(run)
    if refusal is not None:
        return _refused(run, outcome, refusal)
    run.context.start_engine()
    # the PR as the queue merges it: its branch (forward-only suffix) and number, the queue's commit
    queued = replace(pr, head_sha=group.head_sha, base_sha=group.base_sha)
    tests_step(run, queued)
    plan, outcome = _plan_step(run, queued, outcome)
    if plan is not None and run.settings.run_table_diff:
        data_diff_step(run, group.head_sha, plan)
    elif plan is None:
        check = start_check(run, CheckName.DATA_DIFF, group.head_sha)
        finish_check(run, check, name=CheckName.DATA_DIFF, sha=group.head_sha, conclusion="failure",
                     view=CheckSummaryView(summary=CheckTitle(CheckName.DATA_DIFF, failed=True).text,
                                           details=(outcome.error,)))
    check = start_check(run, CheckName.APPROVAL, group.head_sha)
    finish_check(run, check, name=CheckName.APPROVAL, sha=group.head_sha, conclusion=_approval_word(approval),
                 view=CheckSummaryView(summary=outcome.approval_title(approval.summary)))
    failed = tuple(c.name for c in run.checks if c.failed)
    return _report(run, replace(outcome, failed=failed))


def _refused(run: BotRun, outcome: QueueOutcome, refusal: str) -> int:
    """Every required check fails on the queue's commit, saying why meshbot did not check it."""
    for name in QUEUE_CHECKS:
        check = start_check(run, name, outcome.sha)
        finish_check(run, check, name=name, sha=outcome.sha, conclusion="failure",
                     view=CheckSummaryView(summary=outcome.refused_title, details=(refusal,)))
    return _report(run, replace(outcome, refusal=refusal))


def _approval(run: BotRun, pr: PullRequest) -> ApprovalStatus:
    """The PR's own approvals (on its head commit, under the trusted settings): the queue's commit has none."""
    if not run.trusted.trusted:
        return ApprovalStatus(approved=False, required=True, unavailable=run.trusted.missing)
    return approval_status(run.github, run.settings, run.event.repo.owner, pr)


def _approval_word(status: ApprovalStatus) -> str:
    return "skipped" if not status.required else ("success" if status.approved else "failure")


def _plan_step(run: BotRun, queued: PullRequest, outcome: QueueOutcome) -> tuple[Plan | None, QueueOutcome]:
    """The Prod Plan Preview check on the queue's commit: the plan its merge deploys, and the backfill guard."""
    sha = outcome.sha
    check = start_check(run, CheckName.PROD_PLAN, sha)
    try:
        plan = run.context.plan(outcome.environment, options=prod_options(run, queued))
        estimates = (run.context.backfill_estimates(plan)
                     if run.settings.max_backfill_executor_hours is not None and plan.backfills else ())
    except BotError as error:
        outcome = replace(outcome, error=error_text(error))
        finish_check(run, check, name=CheckName.PROD_PLAN, sha=sha, conclusion="failure",
                     view=CheckSummaryView(summary=outcome.plan_title, details=(outcome.error,)))
        return None, outcome
    digest, _ = plan_digest(plan)
    outcome = replace(outcome, digest=digest, plan_id=plan.plan_id, changes=len(plan.changes),
                      large=large_backfill(run.settings, plan, estimates))
    run.outputs.set("plan_id", plan.plan_id)
    finish_check(run, check, name=CheckName.PROD_PLAN, sha=sha, conclusion="failure" if outcome.large else "success",
                 view=CheckSummaryView(summary=outcome.plan_title, plan=plan_view(plan),
                                       plan_title="Merge queue plan",
                                       details=(outcome.text,) if outcome.large else ()))
    return plan, outcome


def _report(run: BotRun, outcome: QueueOutcome) -> int:
    """The PR comment's merge queue section (its other sections and checks stay: they are the PR head's),
    and the job summary."""
    text = outcome.text
    existing = run.github.find_comment(outcome.number, marker=run.marker)
    old = existing[1] if existing else None
    view = CommentView(marker=run.marker, status="", gateway=run.settings.gateway, queue=text).after(old)
    body, _ = render_comment(view)
    body = redact_markdown(body)
    if len(body) > COMMENT_LIMIT:
        body = truncate_markdown(body, COMMENT_LIMIT - SAFETY)
    if existing is None:
        run.github.create_comment(outcome.number, body)
    else:
        run.github.edit_comment(existing[0], body)
    run.outputs.summary(text)
    if not outcome.ok:
        run.outputs.summary(JobNote(NoteKind.SAYS, text=f"the merge queue entry of #{outcome.number} fails.").line)
    return 0 if outcome.ok else 1
