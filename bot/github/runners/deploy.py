"""Deploy runner: find the PR of the commit, refuse without approval, apply the prod plan, report."""

from __future__ import annotations

from bot.errors import BotError, GithubError
from bot.github.event import PullRequest
from bot.github.gate import approval_status
from bot.github.runners.pr import prod_options
from bot.github.runners.base import (BotRun, ephemeral_storage_refusal, error_text, finish_check, plan_digest,
                                     post_comment, start_check)
from bot.github.runners.notify import notifier_for
from bot.github.sections import recorded_plan_digest
from bot.github.settings import BotSettings, CheckName
from bot.github.views import CheckSummaryView, CommentView, plan_view
from bot.plan.definition import Plan
from bot.plan.estimate import BackfillEstimate
from bot.report.notify import Notifier, evaluated_models, plan_models


def deploy_production(run: BotRun, *, environment: str | None = None,
                      pull_request: PullRequest | None = None, allow_large_backfill: bool = False,
                      allow_destructive: tuple[str, ...] = ()) -> int:
    """Apply the plan to `environment` (default: the merge environment) for the PR of this commit.

    `pull_request` is the PR of an authorized `/deploy` (bot.github.gate checked it before the project
    was opened); other deploys find the PR of the pushed or tagged commit."""
    env = environment or run.settings.merge_environment
    if run.event.name == "release" and not (run.event.sha or run.sha):
        raise GithubError("a release event does not name its commit and GITHUB_SHA is not set, so meshbot "
                          "cannot tell which commit to deploy; run it inside GitHub Actions (which sets "
                          "GITHUB_SHA to the tagged commit) or set GITHUB_SHA")
    command = pull_request is not None
    pr = pull_request or _find_pr(run)
    sha = pr.head_sha if pr else (run.event.sha or run.sha or "")
    deployed_sha = pr.head_sha if command and pr else (run.event.sha or run.sha or sha)
    check = start_check(run, CheckName.PROD_DEPLOY, sha) if sha else None

    def finish(conclusion: str, summary: str, details: tuple[str, ...] = (), status: str = "", *,
               comment: bool = True) -> int:
        if check is not None:
            finish_check(run, check, name=CheckName.PROD_DEPLOY, sha=sha, conclusion=conclusion,
                         view=CheckSummaryView(summary=summary, details=details))
        if pr is not None and comment:
            post_comment(run, pr.number, CommentView(
                marker=run.marker, status=status, gateway=run.settings.gateway, head_sha=pr.head_sha,
                deploy="\n\n".join((summary,) + details), drop=("hint",) if conclusion == "success" else ()))
        else:
            run.outputs.summary("\n\n".join((summary,) + details))
        return 0 if conclusion in ("success", "skipped") else 1

    storage_refusal = ephemeral_storage_refusal(run)
    if storage_refusal:
        return finish("failure", f":x: Deploy to `{env}` refused.", (storage_refusal,))
    if run.settings.has_required_approvers:
        if pr is None:
            return finish("failure", f":x: Deploy to `{env}` refused: no pull request found for commit "
                                     f"{sha[:7]}, so its required approval cannot be checked.")
        status = approval_status(run.github, run.settings, run.event.repo.owner, pr)
        if not status.approved:
            return finish("failure", f":x: Deploy to `{env}` refused: required approval is missing.",
                          (status.summary,))
    notifier = notifier_for(run, pull_request=pr, sha=deployed_sha)
    try:
        plan = run.context.plan(env, options=prod_options(run, pr, allow_destructive=allow_destructive))
    except BotError as error:
        notifier.failed("apply", env, error)
        return finish("failure", f":x: The plan for `{env}` could not be built.", (error_text(error),))
    if plan.is_up_to_date and not command:
        # e.g. the push of a PR that `/deploy` already deployed and merged: keep its deploy report
        return finish("success", f":white_check_mark: `{env}` already serves this commit's models: "
                                 "nothing to deploy.", comment=False)
    large = large_backfill(run.settings, plan, run.context.backfill_estimates(plan)
                           if run.settings.max_backfill_executor_hours is not None and plan.backfills else ())
    if large and not allow_large_backfill:
        return finish("failure", f":x: Deploy to `{env}` refused: {large[0]}", large[1:] + (
            "A required approver can comment `/deploy --allow-large-backfill` to deploy it anyway, or raise "
            "the limit in `cicd_bot`.",))
    digest, models = plan_digest(plan)
    drift = _drift(run, pr, digest, models)
    if drift and run.settings.require_approved_plan:
        return finish("failure", f":x: Deploy to `{env}` refused: the plan differs from the approved "
                                 f"prod plan preview (require_approved_plan).", drift)
    run.outputs.set("plan_id", plan.plan_id)
    changed = plan_models(plan)
    notifier.send("apply_start", env, models=changed)
    try:
        result = run.context.apply(plan)
    except BotError as error:
        notifier.failed("apply", env, error, models=changed)
        return finish("failure", f":x: Deploy to `{env}` failed.", (error_text(error),) + drift)
    notifier.send("apply_end", env, models=changed)
    run.outputs.set("deployed_sha", deployed_sha)
    view = plan_view(plan)
    done = (f":rocket: Deployed to `{env}` (plan `{plan.plan_id}`): {len(view.changes)} change(s), "
            f"{len(result.evaluated)} batch(es) computed.")
    status = (f":rocket: Deployed to `{env}` from {deployed_sha[:7] or 'this commit'}: plan `{plan.plan_id}`, "
              f"digest `{digest}`.")
    if allow_destructive:
        drift += (f"Destructive changes allowed for {', '.join(f'`{m}`' for m in allow_destructive)} by "
                  f"@{run.event.comment.user if run.event.comment else 'a required approver'}.",)
    merged, ran, ok = (), _run_after_deploy(run, env, notifier), True
    if command and pr is not None and run.settings.merge_method:
        merged, ok = _merge(run, pr)
        status += " " + merged[0]
    code = finish("success", done, drift + ran[0] + merged, status=status)
    return 1 if not (ok and ran[1]) else code


def large_backfill(settings: BotSettings, plan: Plan,
                   estimates: tuple[BackfillEstimate, ...] = ()) -> tuple[str, ...]:
    """(why, one line per model) when `plan` computes more batches than cicd_bot.max_backfill_batches,
    more intervals than cicd_bot.max_backfill_intervals or, by `estimates`, more executor time than
    cicd_bot.max_backfill_executor_hours (models without recorded task time count as none); () otherwise."""
    names = {s.snapshot_id: s.name for s in plan.snapshots.values()}
    batches: dict[str, int] = {}
    intervals: dict[str, int] = {}
    for backfill in plan.backfills:
        name = names.get(backfill.snapshot_id, backfill.snapshot_id.name)
        batches[name] = batches.get(name, 0) + len(backfill.batches)
        intervals[name] = intervals.get(name, 0) + len(backfill.intervals)
    over = [f"{sum(counts.values())} {what}, more than cicd_bot.max_backfill_{what} ({limit})"
            for what, counts, limit in (("batches", batches, settings.max_backfill_batches),
                                        ("intervals", intervals, settings.max_backfill_intervals))
            if limit is not None and sum(counts.values()) > limit]
    hours: dict[str, float] = {}
    for estimate in estimates:
        if estimate.executor_seconds is not None:
            hours[estimate.model] = hours.get(estimate.model, 0.0) + estimate.executor_seconds / 3600
    limit_hours = settings.max_backfill_executor_hours
    if limit_hours is not None and sum(hours.values()) > limit_hours:
        over.append(f"an estimated {sum(hours.values()):.2f} executor-hours, more than "
                    f"cicd_bot.max_backfill_executor_hours ({limit_hours:g})")
    if not over:
        return ()
    executor = {e.model: e for e in estimates}
    lines = tuple(f"`{name}`: {intervals[name]} interval(s) in {count} batch(es)"
                  + (f", ~{hours[name]:.2f} executor-hours (from {executor[name].basis})" if name in hours
                     else ", no executor time recorded" if limit_hours is not None else "")
                  for name, count in sorted(batches.items(), key=lambda i: (-intervals[i[0]], -i[1], i[0])))
    return (f"the plan computes {' and '.join(over)}.",) + lines


def _run_after_deploy(run: BotRun, env: str, notifier: Notifier) -> tuple[tuple[str, ...], bool]:
    """cicd_bot.run_on_deploy: right after a prod deploy, process what each model's cron made due (as
    SQLMesh's run_on_deploy_to_prod). (report lines, ok)."""
    if not run.settings.run_on_deploy or env != "prod":
        return (), True
    notifier.send("run_start", "prod")
    try:
        result = run.context.run("prod")
    except BotError as error:
        notifier.failed("run", "prod", error)
        return (f":x: The run after the deploy failed: {error_text(error)}",), False
    notifier.send("run_end", "prod", models=evaluated_models(result.evaluated))
    if result.nothing_due:
        return ("Run after the deploy: nothing was due.",), True
    return (f"Run after the deploy: {len(result.evaluated)} batch(es) computed"
            + (f", {len(result.reused)} reused." if result.reused else "."),), True


def _merge(run: BotRun, pr: PullRequest) -> tuple[tuple[str, ...], bool]:
    """Merge the PR after a /deploy (cicd_bot.merge_method), only if its head is still the deployed sha."""
    method = run.settings.merge_method or "merge"
    try:
        merge_sha = run.github.merge_pull(pr.number, method=method, sha=pr.head_sha)
    except BotError as error:
        return (f":x: The PR could not be merged ({method}): {error_text(error)}",), False
    run.outputs.set("merge_sha", merge_sha)
    return (f"The PR was merged ({method}){f' as {merge_sha[:7]}' if merge_sha else ''}.",), True


def _comment_body(run: BotRun, pr: PullRequest) -> str | None:
    found = run.github.find_comment(pr.number, marker=run.marker)
    return found[1] if found else None


def _find_pr(run: BotRun) -> PullRequest | None:
    event = run.event
    if event.pull_request is not None:
        return event.pull_request
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
    recorded = recorded_plan_digest(_comment_body(run, pr))
    if recorded is None or recorded[0] == digest:
        return ()
    before = recorded[1]
    now = dict(item.rsplit("@", 1) for item in models.split(",") if "@" in item)
    changed = sorted(n for n in set(before) | set(now) if before.get(n) != now.get(n))
    listed = ", ".join(f"`{n}`" for n in changed) or "intervals only"
    return (f"Changed since the approved prod plan preview (digest {recorded[0]} → {digest}): {listed}.",)
