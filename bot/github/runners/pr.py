"""Pull request runners: unit tests, the PR environment, the prod plan preview, required approvals."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bot.diff.gates import Finding, Level, check as check_gates
from bot.diff.review import ReviewOptions
from bot.errors import BotError
from bot.github.approvals import ApprovalStatus
from bot.github.base_changes import change_origins
from bot.github.commands import command_prefix
from bot.github.authorize import approval_status
from bot.github.event import PullRequest
from bot.github.outcomes import CheckTitle, DeployWays, JobNote, NoteKind, gate_finding
from bot.github.runners.base import (BotRun, drift_report, ephemeral_storage_refusal, error_text, find_drift,
                                     finish_check, plan_digest,
                                     post_comment, pull_request_cache, require_lasting_storage, start_check,
                                     touches_project)
from bot.github.check_names import CheckName
from bot.github.views import (CheckSummaryView, CommentView, DiffView, PlanRegressionView, PlanView, PrEnvironmentView,
                              TestsView, diff_view, impact_view, impact_with_diffs, plan_regression_views, plan_view,
                              tests_view)
from bot.plan.definition import ChangeType, Plan, PlanOptions
from bot.plan.estimate import BackfillEstimate


def _pr(run: BotRun) -> PullRequest | None:
    pr = run.pull_request
    if pr is None and run.event.comment is not None and run.event.comment.on_pull_request:
        pr = run.github.pull_request(run.event.comment.issue_number)
    return pr


MAX_VIEWS = 30
PLAN_GATE = "Spark plan"     # the Data Diff check's findings from cicd_bot.plan_regressions


def tests_step(run: BotRun, pr: PullRequest) -> TestsView:
    check = start_check(run, CheckName.UNIT_TESTS, pr.head_sha)
    try:
        view = tests_view(run.context.test())
    except BotError as error:
        view = TestsView(status="error", message=error_text(error))
    conclusion = "success" if view.status == "passed" else "failure"
    summary = CheckTitle(CheckName.UNIT_TESTS, tests=view.status, total=view.total, failures=view.failed).text
    finish_check(run, check, name=CheckName.UNIT_TESTS, sha=pr.head_sha, conclusion=conclusion,
                 view=CheckSummaryView(summary=summary, tests=view))
    return view


def environment_step(run: BotRun, pr: PullRequest) -> tuple[PrEnvironmentView | None, Plan | None, str | None]:
    """Plan and apply the PR environment: (what it did, the applied plan or None, error text or None)."""
    env = run.pr_environment(pr.number)
    run.outputs.set("pr_environment_name", env)
    check = start_check(run, CheckName.PR_ENVIRONMENT, pr.head_sha)
    s = run.settings
    options = PlanOptions(skip_backfill=s.skip_pr_backfill and not s.default_pr_start,
                          start=s.default_pr_start, skip_tests=True, forward_only=s.forward_only(pr.head_ref),
                          include_unmodified=s.pr_include_unmodified,
                          source=f"sync of #{pr.number} at {pr.head_sha[:12]}" + (f" {run.run_url}" if run.run_url else ""))
    try:
        require_lasting_storage(run)
        existed = env in run.context.environment_names()
        plan = run.context.plan(env, options=options)
        run.context.apply(plan)
    except BotError as error:
        finish_check(run, check, name=CheckName.PR_ENVIRONMENT, sha=pr.head_sha, conclusion="failure",
                     view=CheckSummaryView(summary=CheckTitle(CheckName.PR_ENVIRONMENT, failed=True,
                                                              environment=env).text,
                                           details=(error_text(error),)))
        return None, None, error_text(error)
    run.outputs.set("created_pr_environment", "false" if existed else "true")
    view = plan_view(plan)
    title = CheckTitle(CheckName.PR_ENVIRONMENT, environment=env)
    finish_check(run, check, name=CheckName.PR_ENVIRONMENT, sha=pr.head_sha, conclusion="success",
                 view=CheckSummaryView(summary=title.text, plan=view, plan_title=title.changes_title))
    return PrEnvironmentView(name=env, created=not existed, applied=len(view.changes),
                             skipped_backfill=view.skipped_backfill and view.has_changes,
                             backfills=view.backfills), plan, None


def _with_models(run: BotRun, env: PrEnvironmentView, plan: Plan | None, *,
                 applied: Plan | None) -> PrEnvironmentView:
    """The models that differ from prod (per the prod preview when there is one) and those of their views
    the environment holds (per `applied`, the plan that synced it)."""
    names: list[str] = []
    for change in plan.changes if plan is not None else ():
        if change.change is not ChangeType.REMOVED:
            names.append(change.name)
        names.extend(change.indirect_children)
    names = list(dict.fromkeys(names))
    views = []
    for name in names:
        if applied is not None and not applied.is_promoted(name):
            continue      # a dev environment holds views only for the models it promoted
        try:
            views.append(run.context.view_name(name, env.name))
        except BotError:
            continue      # a model the project no longer has
    return replace(env, models=tuple(names), views=tuple(views[:MAX_VIEWS]),
                   omitted_views=max(0, len(views) - MAX_VIEWS))


def diffs_step(run: BotRun, pr: PullRequest, *, pr_plan: Plan | None,
               prod_plan: Plan | None) -> tuple[tuple[DiffView, ...], tuple[PlanRegressionView, ...]]:
    """Data diff against prod of the models the PR directly modifies and of their breaking children, per
    the prod plan (built here when this run made none). When the PR environment skipped backfill (the
    default) the PR's rows are computed from previews over a bounded window, writing nothing; when it was
    backfilled, its tables are read over the same windows. The comment looks the same either way. The
    Data Diff check then applies cicd_bot.table_diff_gates to what was compared, and
    cicd_bot.plan_regressions to the Spark plans of the directly modified models against prod's."""
    if pr_plan is None or not run.settings.run_table_diff:
        return (), ()
    if prod_plan is None:
        try:
            prod_plan = run.context.plan("prod", options=prod_options(run, pr))
        except BotError as error:
            return (DiffView("prod plan", note=JobNote(NoteKind.NOT_COMPARED, text=error_text(error)).line),), ()
    backfilled = not pr_plan.options.skip_backfill
    return data_diff_step(run, pr.head_sha, prod_plan,
                          environment=run.pr_environment(pr.number) if backfilled else None)


def data_diff_step(run: BotRun, sha: str, prod_plan: Plan, *, environment: str | None = None,
                   ) -> tuple[tuple[DiffView, ...], tuple[PlanRegressionView, ...]]:
    """The Data Diff check on commit `sha`: the review of `prod_plan` (the rows of a backfilled
    `environment`, else previews computed from the checkout's queries) under cicd_bot.table_diff_gates and
    cicd_bot.plan_regressions."""
    s = run.settings
    check = start_check(run, CheckName.DATA_DIFF, sha)
    try:
        review = run.context.review(prod_plan, ReviewOptions(
            environment=environment, window_days=s.table_diff_window_days,
            full_scope=s.table_diff_full_scope, show_sample=s.table_diff_samples,
            plan_queries=s.plan_regressions != "off"))
    except BotError as error:
        finish_check(run, check, name=CheckName.DATA_DIFF, sha=sha, conclusion="failure",
                     view=CheckSummaryView(summary=CheckTitle(CheckName.DATA_DIFF, failed=True).text,
                                           details=(error_text(error),)))
        return (DiffView("changed models", note=JobNote(NoteKind.NOT_COMPARED, text=error_text(error)).line),), ()
    results = review.diffs
    plans = plan_regression_views(review.plan_comparisons, level=s.plan_regressions)
    findings = tuple(f for result in results for f in check_gates(result, s.table_diff_gates))
    findings += tuple(Finding(p.model, PLAN_GATE, Level(s.plan_regressions), message)
                      for p in plans for message in p.findings)
    failed = [f for f in findings if f.level is Level.FAIL]
    compared = sum(1 for r in results if r.compared)
    summary = CheckTitle(CheckName.DATA_DIFF, compared=compared, warnings=len(findings),
                         gate_failed=len({f.model for f in failed if f.gate != PLAN_GATE}),
                         plan_failed=len({f.model for f in failed if f.gate == PLAN_GATE})).text
    finish_check(run, check, name=CheckName.DATA_DIFF, sha=sha,
                 conclusion="failure" if failed else "success",
                 view=CheckSummaryView(summary=summary, details=tuple(gate_finding(f) for f in findings)))
    by_model: dict[str, tuple[Finding, ...]] = {}
    for finding in findings:
        if finding.gate != PLAN_GATE:     # shown with the plans
            by_model[finding.model] = by_model.get(finding.model, ()) + (finding,)
    return tuple(diff_view(result, samples=s.table_diff_samples, findings=by_model.get(result.model, ()))
                 for result in results), plans


def prod_plan_step(run: BotRun, pr: PullRequest) -> tuple[PlanView | None, str | None, str, Plan | None]:
    check = start_check(run, CheckName.PROD_PLAN, pr.head_sha)
    try:
        require_lasting_storage(run)
        plan = run.context.plan("prod", options=prod_options(run, pr))
    except BotError as error:
        finish_check(run, check, name=CheckName.PROD_PLAN, sha=pr.head_sha, conclusion="failure",
                     view=CheckSummaryView(summary=CheckTitle(CheckName.PROD_PLAN, failed=True).text,
                                           details=(error_text(error),)))
        return None, None, "", None
    digest, models = plan_digest(plan)
    run.outputs.set("plan_id", plan.plan_id)
    origins = None
    if plan.changes:
        base = run.base_versions(pr)
        origins = change_origins(plan, base) if base is not None else None
    view = plan_view(plan, _estimates(run, plan), origins=origins, base_branch=pr.base_ref)
    summary = CheckTitle(CheckName.PROD_PLAN, has_changes=view.has_changes, changes=len(view.changes),
                         digest=digest).text
    finish_check(run, check, name=CheckName.PROD_PLAN, sha=pr.head_sha, conclusion="success",
                 view=CheckSummaryView(summary=summary, plan=view, plan_title="Prod plan preview"))
    return view, digest, models, plan


def _estimates(run: BotRun, plan: Plan) -> tuple[BackfillEstimate, ...] | None:
    """The preview's backfill estimates; None (no column) when the state cannot give them."""
    try:
        return run.context.backfill_estimates(plan) if plan.backfills else None
    except BotError:
        return None


def approval_fields(run: BotRun, status: ApprovalStatus) -> dict[str, Any]:
    """The comment's approval section: the verdict, its check conclusion ("waiting" while a required approval is
    missing: the check fails so that branch protection holds the merge, but nothing is wrong yet) and who can
    approve."""
    waiting = status.required and not status.approved and not status.unavailable
    return dict(approval=status.summary, approval_status="waiting" if waiting else _approval_word(status),
                approvers=run.settings.required_approvers, approver_teams=run.settings.required_teams)


def approval_step(run: BotRun, pr: PullRequest) -> ApprovalStatus:
    """The Required Approval check: fails (never skips) when the approvers have no trusted source."""
    status = (approval_status(run.github, run.settings, run.event.repo.owner, pr) if run.trusted.trusted
              else ApprovalStatus(approved=False, required=True, unavailable=run.trusted.missing))
    check = start_check(run, CheckName.APPROVAL, pr.head_sha)
    conclusion = _approval_word(status)
    finish_check(run, check, name=CheckName.APPROVAL, sha=pr.head_sha, conclusion=conclusion,
                 view=CheckSummaryView(summary=status.summary))
    return status


def _approval_word(status: ApprovalStatus) -> str:
    return "skipped" if not status.required else ("success" if status.approved else "failure")


def prod_options(run: BotRun, pr: PullRequest | None, *, allow_destructive: tuple[str, ...] = ()) -> PlanOptions:
    """How the bot plans prod for `pr` (its preview and its deploy alike): forward-only for a branch
    ending in cicd_bot.forward_only_branch_suffix; destructive changes only where an approver allowed them."""
    return PlanOptions(skip_tests=True, forward_only=run.settings.forward_only(pr.head_ref if pr else None),
                       allow_destructive_models=allow_destructive)


def deploy_hint(run: BotRun) -> str:
    """The comment's "How to deploy": every way the settings allow."""
    s = run.settings
    return DeployWays(merge_environment=s.merge_environment, merge_deploys=s.deploys_on("merge"),
                      tag_environment=s.tag_environment if s.deploys_on("tag") else "",
                      command=f"{command_prefix(s.command_namespace)}deploy" if s.enable_deploy_command else "",
                      merge_method=s.merge_method or "", gated=s.has_required_approvers).text


def sync_pull_request(run: BotRun, *, tests: bool = True, environment: bool = True,
                      prod_plan: bool = True, approval: bool = True) -> int:
    """The PR push flow (run-all): each selected step, then one comment."""
    pr = _pr(run)
    if pr is None:
        run.outputs.summary(JobNote(NoteKind.NO_PULL_REQUEST).line)
        return 0
    view = CommentView(marker=run.marker, status="", gateway=run.settings.gateway,
                       environment=run.pr_environment(pr.number), head_sha=pr.head_sha,
                       drop=("queue",))   # a new head leaves the merge queue: its entry's report is stale
    if tests or environment or prod_plan:
        files = run.github.changed_files(pr.number)
        if not any(touches_project(files, folder) for folder in (run.project_subdir, *run.other_subdirs)):
            post_comment(run, pr.number, replace(view, status=JobNote(NoteKind.NO_PROJECT_FILE).line))
            return 0
        read_cache, fresh_files = pull_request_cache(files, run.project_subdir, run.other_subdirs)
        run.open_project(read_cache=read_cache, fresh_files=fresh_files)
    ok, error, applied, preview = True, None, None, None
    if tests or (environment and ephemeral_storage_refusal(run) is None):
        # Unit tests and the PR environment need Spark: launch it now, while the project is parsed
        # (not for an environment the runner's storage refuses: that run never reaches Spark).
        run.context.start_engine()
    if tests:
        view = replace(view, tests=tests_step(run, pr))
        ok = ok and view.tests.status == "passed"
    if environment:
        env_view, applied, error = environment_step(run, pr)
        view = replace(view, pr_environment=env_view)
        ok = ok and error is None
    if prod_plan:
        prod, digest, models, preview = prod_plan_step(run, pr)
        view = replace(view, prod_plan=prod, plan_digest=digest, plan_models=models,
                       deploy_hint=deploy_hint(run))
        if preview is not None:
            view = replace(view, impact=impact_view(preview, run.settings.exposures))
        ok = ok and digest is not None
    if view.pr_environment is not None:
        view = replace(view, pr_environment=_with_models(run, view.pr_environment,
                                                         preview if preview is not None else applied,
                                                         applied=applied))
    if prod_plan:
        drift = find_drift(run, "prod", run.base_versions(pr))
        view = replace(view, drift=drift_report(drift) if drift else None,
                       drop=("queue",) + (() if drift else ("drift",)))
    diffs, plans = diffs_step(run, pr, pr_plan=applied, prod_plan=preview)
    view = replace(view, diffs=diffs, plans=plans, impact=impact_with_diffs(view.impact, diffs))
    if approval:
        view = replace(view, **approval_fields(run, approval_step(run, pr)))
    notices = (JobNote(NoteKind.ENVIRONMENT_NOT_SYNCED, text=error).line,) if error else ()
    post_comment(run, pr.number, replace(view, notices=notices))
    return 0 if ok else 1


def run_tests(run: BotRun) -> int:
    return sync_pull_request(run, environment=False, prod_plan=False, approval=False)


def update_pr_environment(run: BotRun) -> int:
    return sync_pull_request(run, tests=False, prod_plan=False, approval=False)


def gen_prod_plan(run: BotRun) -> int:
    return sync_pull_request(run, tests=False, environment=False, approval=False)


def check_required_approvers(run: BotRun) -> int:
    pr = _pr(run)
    if pr is None:
        return 0
    if run.event.name == "pull_request_review" or pr.head_sha == "":
        pr = run.github.pull_request(pr.number)   # the review payload's head may be stale
    status = approval_step(run, pr)
    post_comment(run, pr.number, CommentView(marker=run.marker, status="", gateway=run.settings.gateway,
                                             head_sha=pr.head_sha, **approval_fields(run, status)))
    return 0 if status.approved else 1
