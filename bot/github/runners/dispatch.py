"""Every bot command: classify the event, authorize it, and only then open the project and run its step."""

from __future__ import annotations

from bot.github.authorize import (authorize_command, authorize_dispatch, authorize_rollback, checkout_refusal,
                                  release_refusal)
from bot.github.classify import Decision, Step, classify
from bot.github.outcomes import JobNote, NoteKind, Refusal, RefusalKind
from bot.github.runners.base import BotRun, reply
from bot.github.runners.cleanup import cleanup_pr_environment
from bot.github.runners.deploy import deploy_production
from bot.github.runners.queue import check_merge_group
from bot.github.runners.rollback import rollback_environment
from bot.github.runners.run import run_environments
from bot.github.runners.pr import (check_required_approvers, gen_prod_plan, run_tests, sync_pull_request,
                                   update_pr_environment)

AUTHORIZE_DEPLOY = "authorize-deploy"

# The steps each command serves; `run-all` serves every step. A command asked of an event whose step it
# does not serve does nothing (and reads nothing).
COMMAND_STEPS: dict[str, frozenset[Step]] = {
    "run-all": frozenset(Step),
    "run-tests": frozenset({Step.SYNC}),
    "update-pr-environment": frozenset({Step.SYNC}),
    "gen-prod-plan": frozenset({Step.SYNC}),
    "check-required-approvers": frozenset({Step.SYNC, Step.APPROVAL}),
    "deploy-production": frozenset({Step.DEPLOY, Step.ROLLBACK}),
    "cleanup-pr-environment": frozenset({Step.CLEANUP}),
    "run": frozenset({Step.RUN}),
    AUTHORIZE_DEPLOY: frozenset({Step.DEPLOY, Step.ROLLBACK, Step.REPLY}),
}
COMMANDS = tuple(COMMAND_STEPS)

_SYNC_RUNNERS = {"run-all": sync_pull_request, "run-tests": run_tests,
                 "update-pr-environment": update_pr_environment, "gen-prod-plan": gen_prod_plan,
                 "check-required-approvers": check_required_approvers}


def dispatch(run: BotRun, command: str) -> int:
    """Run `command` for the event of `run`; the project is opened only for an authorized step."""
    decision = classify(run.event, run.settings)
    if command == AUTHORIZE_DEPLOY:
        return authorize_deploy(run, decision)
    if decision.step not in COMMAND_STEPS[command]:
        run.outputs.summary(JobNote(NoteKind.NOT_SERVED, text=decision.text, command=command, event=run.event.name,
                                    step=decision.step.value).line)
        return 0
    if decision.step is Step.NOTHING:
        run.outputs.summary(JobNote(NoteKind.SAYS, text=decision.text).line)
        return 0
    if decision.step is Step.REPLY:
        comment = run.event.comment
        reply(run, comment.issue_number, comment.user, decision.text)
        return 0
    if decision.step is Step.APPROVAL:
        return check_required_approvers(run)
    if decision.step is Step.DEPLOY:
        return _deploy(run, decision)
    if decision.step is Step.RUN:
        return _run(run)
    if decision.step is Step.ROLLBACK:
        return _rollback(run, decision)
    if decision.step is Step.QUEUE:
        return check_merge_group(run, decision)   # authorizes the entry, then opens the project
    if decision.step is Step.CLEANUP:
        run.open_project()
        return cleanup_pr_environment(run)
    return _SYNC_RUNNERS[command](run)   # a sync opens the project once it knows the PR's files


def _deploy(run: BotRun, decision: Decision) -> int:
    comment = run.event.comment
    refusal = _untrusted_refusal(run)
    pull_request = None
    if refusal is None and decision.command:
        verdict = authorize_command(run.event, run.settings, run.github, checkout_head=run.checkout_head,
                                    check_head=True, commits_behind=run.commits_behind,
                                    options=decision.deploy)
        refusal, pull_request = verdict.refusal, verdict.pull_request
    elif refusal is None and run.event.name == "workflow_dispatch":
        # the deploy workflow dispatched with allow_drift: the default branch's head, by a required approver
        refusal = (authorize_dispatch(run.event, run.settings, run.github, action="deploy")
                   or _dispatched_refusal(run))
    elif refusal is None:
        sha = run.event.sha or run.sha
        if sha:   # without one, deploy_production says that it cannot tell which commit to deploy
            what = "the tagged commit" if run.event.tag is not None else "the pushed commit"
            refusal = checkout_refusal(sha, run.checkout_head, f"{what} (GITHUB_SHA)")
            if refusal is None and run.event.tag is not None:
                refusal = release_refusal(sha, run.event.repo.default_branch, run.on_default_branch)
    if refusal is not None:
        if decision.command:
            reply(run, comment.issue_number, comment.user, refusal)
        else:
            run.outputs.summary(JobNote(NoteKind.SAYS, text=refusal).line)
        return 1
    if decision.command:
        run.github.add_reaction(comment.id, "rocket")
    run.open_project(read_cache=False)
    return deploy_production(run, environment=decision.environment, pull_request=pull_request,
                             allow_large_backfill=decision.deploy.allow_large_backfill,
                             allow_drift=decision.deploy.allow_drift,
                             allow_destructive=decision.deploy.allow_destructive)


def _run(run: BotRun) -> int:
    """A scheduled or dispatched run works on prod with prod's credentials: only on a prod branch's
    commit, exactly the one the event names, and never from a cache on disk."""
    refusal = _dispatched_refusal(run)
    if refusal is not None:
        run.outputs.summary(JobNote(NoteKind.SAYS, text=refusal).line)
        return 1
    run.open_project(read_cache=False)
    return run_environments(run)


def _rollback(run: BotRun, decision: Decision) -> int:
    """`/rollback`, or the deploy workflow dispatched with `rollback: true`: the same gates as `/deploy` that
    apply (trusted settings, write permission, a required approver; for a comment, this repository's PR),
    checked with the API alone; the checkout whose config.yaml names the state must be a commit of the
    default branch (for a dispatch, exactly the event's commit), never a PR's head."""
    comment = run.event.comment
    refusal = _untrusted_refusal(run)
    if refusal is None:
        refusal = (authorize_rollback(run.event, run.settings, run.github).refusal if decision.command
                   else authorize_dispatch(run.event, run.settings, run.github, action="rollback"))
    if refusal is None and not decision.command:
        refusal = _dispatched_refusal(run)
    if refusal is None:
        head = run.checkout_head
        refusal = (release_refusal(head, run.event.repo.default_branch, run.on_default_branch,
                                   action="rollback", what="the checked-out commit") if head else
                   Refusal(RefusalKind.NO_CHECKOUT_HEAD).text)
    if refusal is not None:
        if decision.command:
            reply(run, comment.issue_number, comment.user, refusal)
        else:
            run.outputs.summary(JobNote(NoteKind.SAYS, text=refusal).line)
        return 1
    if decision.command:
        run.github.add_reaction(comment.id, "rocket")
    run.open_project(read_cache=False)
    return rollback_environment(run, environment=decision.environment, to_plan_id=decision.rollback_to)


def _dispatched_refusal(run: BotRun) -> str | None:
    """A scheduled or dispatched job runs with prod's credentials the code of the ref it was started on,
    which a writer picks for a dispatch: only a prod branch, exactly the commit the event names."""
    event = run.event
    if not run.settings.is_prod_branch(event.branch, event.repo.default_branch):
        return Refusal(RefusalKind.NOT_PROD_BRANCH, event.ref or "", event.repo.default_branch).text
    if run.sha:
        return checkout_refusal(run.sha, run.checkout_head, "the commit of the event (GITHUB_SHA)")
    return None


def _untrusted_refusal(run: BotRun) -> str | None:
    if run.trusted.trusted:
        return None
    return Refusal(RefusalKind.UNTRUSTED, run.trusted.missing).text


def authorize_deploy(run: BotRun, decision: Decision) -> int:
    """The first job of a `/deploy` or `/rollback`: verify the command with the API alone and output the
    commit the second job checks out (the PR head to deploy; the default branch's head for a rollback).

    Step outputs: `authorized` (true/false), `sha` and `pr_number`."""
    run.outputs.set("authorized", "false")
    comment = run.event.comment
    if decision.step is Step.REPLY:
        reply(run, comment.issue_number, comment.user, decision.text)
        return 0
    if decision.step not in (Step.DEPLOY, Step.ROLLBACK) or not decision.command:
        run.outputs.summary(JobNote(NoteKind.NOTHING_TO_AUTHORIZE, text=decision.text or decision.step.value).line)
        return 0
    refusal = _untrusted_refusal(run)
    verdict, sha = None, None
    if refusal is None and decision.step is Step.ROLLBACK:
        verdict = authorize_rollback(run.event, run.settings, run.github)
        sha = run.default_branch_head()
        refusal = verdict.refusal or (None if sha else Refusal(RefusalKind.NO_DEFAULT_HEAD).text)
    elif refusal is None:
        verdict = authorize_command(run.event, run.settings, run.github, checkout_head=None, check_head=False,
                                    commits_behind=run.commits_behind, options=decision.deploy)
        refusal, sha = verdict.refusal, verdict.pull_request.head_sha if verdict.pull_request else None
    if refusal is not None:
        reply(run, comment.issue_number, comment.user, refusal)
        return 1
    pr = verdict.pull_request
    run.outputs.set("authorized", "true")
    run.outputs.set("sha", sha)
    run.outputs.set("pr_number", str(pr.number))
    run.outputs.summary(JobNote(NoteKind.AUTHORIZED, command=decision.step.value, number=pr.number, user=comment.user,
                                sha=sha).line)
    return 0
