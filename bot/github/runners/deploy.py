"""Deploy runner: find the PR of the commit, refuse without approval, apply the prod plan, report."""

from __future__ import annotations

from bot.errors import BotError
from bot.github.event import PullRequest
from bot.github.runners.base import (BotRun, ephemeral_storage_refusal, error_text, finish_check, plan_digest,
                                     post_comment, start_check)
from bot.github.runners.pr import approval_status
from bot.github.sections import plan_digest as recorded_digest
from bot.github.settings import CheckName
from bot.github.views import CheckSummaryView, CommentView, plan_view
from bot.plan.definition import PlanOptions


def deploy_production(run: BotRun, *, environment: str | None = None) -> int:
    """Apply the plan to `environment` (default: the merge environment) for the PR of this commit."""
    env = environment or run.settings.merge_environment
    pr = _find_pr(run)
    sha = pr.head_sha if pr else (run.event.sha or run.sha or "")
    check = start_check(run, CheckName.PROD_DEPLOY, sha) if sha else None

    def finish(conclusion: str, summary: str, details: tuple[str, ...] = ()) -> int:
        if check is not None:
            finish_check(run, check, name=CheckName.PROD_DEPLOY, sha=sha, conclusion=conclusion,
                         view=CheckSummaryView(summary=summary, details=details))
        if pr is not None:
            post_comment(run, pr.number, CommentView(marker=run.marker, status="", gateway=run.settings.gateway,
                                                     deploy="\n\n".join((summary,) + details)))
        else:
            run.outputs.summary("\n\n".join((summary,) + details))
        return 0 if conclusion in ("success", "skipped") else 1

    refusal = ephemeral_storage_refusal(run)
    if refusal:
        return finish("failure", f":x: Deploy to `{env}` refused.", (refusal,))
    if run.settings.has_required_approvers:
        if pr is None:
            return finish("failure", f":x: Deploy to `{env}` refused: no pull request found for commit "
                                     f"{sha[:7]}, so its required approval cannot be checked.")
        status = approval_status(run, pr)
        if not status.approved:
            return finish("failure", f":x: Deploy to `{env}` refused: required approval is missing.",
                          (status.summary,))
    try:
        plan = run.context.plan(env, options=PlanOptions(skip_tests=True))
    except BotError as error:
        return finish("failure", f":x: The plan for `{env}` could not be built.", (error_text(error),))
    digest, models = plan_digest(plan)
    drift = _drift(run, pr, digest, models)
    if drift and run.settings.require_approved_plan:
        return finish("failure", f":x: Deploy to `{env}` refused: the plan differs from the approved "
                                 f"prod plan preview (require_approved_plan).", drift)
    run.outputs.set("plan_id", plan.plan_id)
    try:
        result = run.context.apply(plan)
    except BotError as error:
        return finish("failure", f":x: Deploy to `{env}` failed.", (error_text(error),) + drift)
    view = plan_view(plan)
    done = (f":rocket: Deployed to `{env}` (plan `{plan.plan_id}`): {len(view.changes)} change(s), "
            f"{len(getattr(result, 'evaluated', ()) or ())} batch(es) computed.")
    return finish("success", done, drift)


def _find_pr(run: BotRun) -> PullRequest | None:
    event = run.event
    if event.pull_request is not None:
        return event.pull_request
    if event.comment is not None and event.comment.on_pull_request:
        return run.github.pull_request(event.comment.issue_number)
    sha = event.sha or run.sha
    if not sha:
        return None
    pulls = run.github.pulls_for_commit(sha)
    merged = [p for p in pulls if p.merged]
    return (merged or pulls or [None])[0]


def _drift(run: BotRun, pr: PullRequest | None, digest: str, models: str) -> tuple[str, ...]:
    """What changed between the approved prod plan preview and what is about to deploy."""
    if pr is None:
        return ()
    found = run.github.find_comment(pr.number, marker=run.marker)
    recorded = recorded_digest(found[1] if found else None)
    if recorded is None or recorded[0] == digest:
        return ()
    before = recorded[1]
    now = dict(item.rsplit("@", 1) for item in models.split(",") if "@" in item)
    changed = sorted(n for n in set(before) | set(now) if before.get(n) != now.get(n))
    listed = ", ".join(f"`{n}`" for n in changed) or "intervals only"
    return (f"Changed since the approved prod plan preview (digest {recorded[0]} → {digest}): {listed}.",)
