"""Deploy runner: find the PR of the commit, refuse without approval, apply the prod plan, report."""

from __future__ import annotations

import time
from dataclasses import replace

from bot.errors import BotError, GithubError
from bot.github.event import PullRequest
from bot.github.authorize import approval_status
from bot.github.runners.pr import prod_options
from bot.github.runners.base import (BotRun, ephemeral_storage_refusal, error_text, find_drift, finish_check,
                                     plan_digest, planned_identifiers, post_comment, start_check)
from bot.github.runners.notify import notifier_for
from bot.github.check_names import CheckName
from bot.github.settings import BotSettings
from bot.github.outcomes import (BackfillLimit, DeployKind, DeployOutcome, LargeBackfill, MergeResult, ModelBackfill,
                                 PlanDrift, RunAfterDeploy)
from bot.github.views import (CheckSummaryView, CommentView, DeployedView, ImpactView, deployed_plan_view,
                              impact_view)
from bot.plan.definition import Plan
from bot.plan.drift import deploy_source
from bot.plan.estimate import BackfillEstimate, format_seconds
from bot.report.comment_state import recorded_plan_record, recorded_queue
from bot.report.notify import Notifier, evaluated_models, plan_models


def deploy_production(run: BotRun, *, environment: str | None = None,
                      pull_request: PullRequest | None = None, allow_large_backfill: bool = False,
                      allow_destructive: tuple[str, ...] = (), allow_drift: bool = False) -> int:
    """Apply the plan to `environment` (default: the merge environment) for the PR of this commit.

    `pull_request` is the PR of an authorized `/deploy` (bot.github.authorize checked it before the project
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
    deployed: CommentView | None = None     # the comment after a deploy, set once it is done

    def finish(outcome: DeployOutcome) -> int:
        if check is not None:
            finish_check(run, check, name=CheckName.PROD_DEPLOY, sha=sha, conclusion=outcome.conclusion,
                         view=CheckSummaryView(summary=outcome.summary, details=outcome.details))
        # an up-to-date push (of a PR that `/deploy` already deployed and merged) keeps the deploy report
        if pr is not None and outcome.kind is DeployKind.DEPLOYED and deployed is not None:
            # the prod plan section becomes what was deployed and computed; a refused attempt's report goes
            post_comment(run, pr.number, replace(deployed, status=outcome.status, drop=("hint", "deploy")))
        elif pr is not None and outcome.kind is not DeployKind.UP_TO_DATE:
            post_comment(run, pr.number, CommentView(
                marker=run.marker, status=outcome.status, gateway=run.settings.gateway, head_sha=pr.head_sha,
                deploy=outcome.report, drop=("hint",) if outcome.conclusion == "success" else ()))
        else:
            run.outputs.summary(outcome.report)
        return 0 if outcome.ok else 1

    refused = _refusal_before_plan(run, env, pr, sha)
    if refused is not None:
        return finish(refused)
    notifier = notifier_for(run, pull_request=pr, sha=deployed_sha)
    try:
        plan = run.context.plan(env, options=replace(prod_options(run, pr, allow_destructive=allow_destructive),
                                                     source=plan_source(run, command, pr, deployed_sha)))
    except BotError as error:
        notifier.failed("apply", env, error)
        return finish(DeployOutcome(DeployKind.PLAN_FAILED, env, reason=error_text(error)))
    if plan.is_up_to_date and not command:
        return finish(DeployOutcome(DeployKind.UP_TO_DATE, env))
    refused = _refusal_of_plan(run, env, plan, notifier, allow_large_backfill=allow_large_backfill,
                               allow_drift=allow_drift)
    if refused is not None:
        return finish(refused)
    digest, _ = plan_digest(plan)
    drift = _drift(run, pr, digest, plan, deployed_sha)
    if drift is not None and run.settings.require_approved_plan:
        return finish(DeployOutcome(DeployKind.REFUSED_PLAN_CHANGED, env, drift=drift))
    run.outputs.set("plan_id", plan.plan_id)
    changed = plan_models(plan)
    notifier.send("apply_start", env, models=changed)
    began = time.perf_counter()
    try:
        result = run.context.apply(plan)
    except BotError as error:
        notifier.failed("apply", env, error, models=changed)
        return finish(DeployOutcome(DeployKind.APPLY_FAILED, env, reason=error_text(error), drift=drift))
    notifier.send("apply_end", env, models=changed)
    run.outputs.set("deployed_sha", deployed_sha)
    allowed_by = run.event.comment.user if run.event.comment else "a required approver"
    ran = _run_after_deploy(run, env, notifier)
    merge = _merge(run, pr) if command and pr is not None and run.settings.merge_method else None
    outcome = DeployOutcome(
        DeployKind.DEPLOYED, env, drift=drift, plan_id=plan.plan_id, changes=len(plan.changes),
        batches=len(result.evaluated), models=len({model for model, _, _ in result.evaluated}), took=_took(began),
        deployed_sha=deployed_sha, digest=digest, destructive=allow_destructive,
        allowed_by=allowed_by if allow_destructive else "", ran=ran, merge=merge)
    if pr is not None:
        deployed = _deployed_comment(run, pr, plan, result.evaluated, outcome)
    return finish(outcome)


def _took(began: float) -> str:
    seconds = time.perf_counter() - began
    return format_seconds(seconds) if seconds >= 0.5 else "under a second"


def _refusal_before_plan(run: BotRun, env: str, pr: PullRequest | None, sha: str) -> DeployOutcome | None:
    """A deploy refused before planning: state or catalog that vanish with the runner, approvals missing."""
    storage_refusal = ephemeral_storage_refusal(run)
    if storage_refusal:
        return DeployOutcome(DeployKind.REFUSED_STORAGE, env, reason=storage_refusal)
    if run.settings.has_required_approvers:
        if pr is None:
            return DeployOutcome(DeployKind.REFUSED_NO_PULL_REQUEST, env, sha=sha)
        status = approval_status(run.github, run.settings, run.event.repo.owner, pr)
        if not status.approved:
            return DeployOutcome(DeployKind.REFUSED_NO_APPROVAL, env, reason=status.summary)
    return None


def _refusal_of_plan(run: BotRun, env: str, plan: Plan, notifier, *, allow_large_backfill: bool,
                     allow_drift: bool) -> DeployOutcome | None:
    """A plan refused for what it would do: a backfill above the guards, undoing prod's drift."""
    large = large_backfill(run.settings, plan, run.context.backfill_estimates(plan)
                           if run.settings.max_backfill_executor_hours is not None and plan.backfills else ())
    if large is not None and not allow_large_backfill:
        return DeployOutcome(DeployKind.REFUSED_LARGE_BACKFILL, env, large=large)
    undone = undone_drift(run, env, plan)
    if undone and not allow_drift:
        notifier.send("drift_detected", env, models=undone)
        return DeployOutcome(DeployKind.REFUSED_DRIFT, env, undone=undone)
    return None


def _as_deployed(impact: ImpactView | None) -> ImpactView | None:
    return replace(impact, deployed=True) if impact is not None else None


def _deployed_comment(run: BotRun, pr: PullRequest, plan: Plan, evaluated: tuple[tuple[str, int, int], ...],
                      outcome: DeployOutcome) -> CommentView:
    """The PR comment after `plan` was deployed: its prod plan section in the past tense (the changes, the
    batches computed and how long the apply took, the column impact), one id (the plan's), and the digest
    only in the hidden record later deploys compare with."""
    digest, models = plan_digest(plan)
    return CommentView(
        marker=run.marker, status=outcome.status, gateway=run.settings.gateway, head_sha=pr.head_sha,
        prod_plan=deployed_plan_view(plan, evaluated), impact=_as_deployed(impact_view(plan, run.settings.exposures)),
        deployed=DeployedView(environment=outcome.environment, plan_id=outcome.plan_id, sha=outcome.deployed_sha,
                              changes=outcome.changes, batches=outcome.batches, models=outcome.models,
                              took=outcome.took, report=outcome.more),
        plan_digest=digest, plan_models=models)


def undone_drift(run: BotRun, environment: str, plan: Plan) -> tuple[str, ...]:
    """The models drifted in `environment` (changed by anything but the default branch's deploy) that `plan`
    would serve otherwise than they are served now: the deploy would undo them."""
    drift = find_drift(run, environment, None)
    if drift is None:
        return ()
    served = planned_identifiers(plan)
    return tuple(m.name for m in drift.models if served.get(m.name, "-") != m.now)


def plan_source(run: BotRun, command: bool, pr: PullRequest | None, sha: str) -> str:
    """Where this deploy's plan comes from, as the state records it (bot.plan.drift): a deploy of the default
    branch (a push of it, or a release of one of its commits) or, for `/deploy`, the pull request's head."""
    where = run.run_url or ""
    if command and pr is not None:
        user = run.event.comment.user if run.event.comment else "?"
        return f"/deploy of #{pr.number} at {sha[:12]} by {user}" + (f" {where}" if where else "")
    return deploy_source(run.event.branch or run.event.repo.default_branch, sha, where, tag=run.event.tag or "")


def large_backfill(settings: BotSettings, plan: Plan,
                   estimates: tuple[BackfillEstimate, ...] = ()) -> LargeBackfill | None:
    """What `plan` computes when that is more batches than cicd_bot.max_backfill_batches, more intervals
    than cicd_bot.max_backfill_intervals or, by `estimates`, more executor time than
    cicd_bot.max_backfill_executor_hours (models without recorded task time count as none); None otherwise."""
    names = {s.snapshot_id: s.name for s in plan.snapshots.values()}
    batches: dict[str, int] = {}
    intervals: dict[str, int] = {}
    for backfill in plan.backfills:
        name = names.get(backfill.snapshot_id, backfill.snapshot_id.name)
        batches[name] = batches.get(name, 0) + len(backfill.batches)
        intervals[name] = intervals.get(name, 0) + len(backfill.intervals)
    over = [BackfillLimit(what, sum(counts.values()), limit)
            for what, counts, limit in (("batches", batches, settings.max_backfill_batches),
                                        ("intervals", intervals, settings.max_backfill_intervals))
            if limit is not None and sum(counts.values()) > limit]
    hours: dict[str, float] = {}
    for estimate in estimates:
        if estimate.executor_seconds is not None:
            hours[estimate.model] = hours.get(estimate.model, 0.0) + estimate.executor_seconds / 3600
    limit_hours = settings.max_backfill_executor_hours
    if limit_hours is not None and sum(hours.values()) > limit_hours:
        over.append(BackfillLimit("executor_hours", sum(hours.values()), limit_hours))
    if not over:
        return None
    basis = {e.model: e.basis for e in estimates}
    return LargeBackfill(over=tuple(over), models=tuple(
        ModelBackfill(name, intervals[name], count, executor_hours=hours.get(name), basis=basis.get(name, ""),
                      executor_limited=limit_hours is not None)
        for name, count in sorted(batches.items(), key=lambda i: (-intervals[i[0]], -i[1], i[0]))))


def _run_after_deploy(run: BotRun, env: str, notifier: Notifier) -> RunAfterDeploy | None:
    """cicd_bot.run_on_deploy: right after a prod deploy, process what each model's cron made due (as
    SQLMesh's run_on_deploy_to_prod)."""
    if not run.settings.run_on_deploy or env != "prod":
        return None
    notifier.send("run_start", "prod")
    try:
        result = run.context.run("prod")
    except BotError as error:
        notifier.failed("run", "prod", error)
        return RunAfterDeploy(error=error_text(error))
    notifier.send("run_end", "prod", models=evaluated_models(result.evaluated))
    return RunAfterDeploy(nothing_due=result.nothing_due, batches=len(result.evaluated), reused=len(result.reused))


def _merge(run: BotRun, pr: PullRequest) -> MergeResult:
    """Merge the PR after a /deploy (cicd_bot.merge_method), only if its head is still the deployed sha."""
    method = run.settings.merge_method or "merge"
    try:
        merge_sha = run.github.merge_pull(pr.number, method=method, sha=pr.head_sha)
    except BotError as error:
        return MergeResult(method, error=error_text(error))
    run.outputs.set("merge_sha", merge_sha)
    return MergeResult(method, sha=merge_sha or "")


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


def _drift(run: BotRun, pr: PullRequest | None, digest: str, plan: Plan, sha: str) -> PlanDrift | None:
    """What changed between the approved prod plan preview and what is about to deploy. A commit the merge
    queue checked (the queue's merge commit, pushed as it was tested) is compared with the plan the queue
    checked on it instead: the PR's own preview did not hold the entries ahead of it."""
    if pr is None:
        return None
    comment = _comment_body(run, pr)
    queued = recorded_queue(comment)
    if queued is not None and sha and queued[0] == sha:
        return None if queued[1] == digest else PlanDrift(approved=queued[1], digest=digest, queue_sha=sha)
    return plan_drift(comment, digest, plan)


def plan_drift(comment: str | None, digest: str, plan: Plan) -> PlanDrift | None:
    """The drift of `plan` (of digest `digest`) from the prod plan preview recorded in `comment`, if any.

    The preview's record names the models it changed (older releases: every model of the plan); each is
    compared with what this plan deploys, and this plan's own changes that the record lacks are added
    (unless the record left some out, when they may be among those)."""
    recorded = recorded_plan_record(comment)
    if recorded is None or recorded[0] == digest:
        return None
    _, approved, left_out = recorded
    now = planned_identifiers(plan)
    moved = {name for name, identifier in approved.items() if now.get(name, "-") != identifier}
    if not left_out:
        moved |= set(planned_identifiers(plan, changed_only=True)) - set(approved)
    return PlanDrift(approved=recorded[0], digest=digest, models=tuple(sorted(moved)), unrecorded=left_out)


