"""bot.github.outcomes: what a deploy, a cleanup, a rollback or a refusal came to reads as the sentences users know
(templates/outcomes.md.j2 writes them; no runner does)."""

from __future__ import annotations

import pytest

from bot.diff.gates import Finding, Level
from bot.github.check_names import CheckName
from bot.github.outcomes import (BackfillLimit, CheckTitle, CleanupKind, CleanupOutcome, DeployKind, DeployOutcome,
                                 DeployWays, JobNote, LargeBackfill, MergeResult, ModelBackfill, NoteKind, PlanDrift,
                                 Refusal, RefusalKind, RollbackOutcome, RunAfterDeploy, gate_finding)

DRIFT = PlanDrift("aaa", "bbb", ("x.y", "z.w"))


@pytest.mark.parametrize("outcome, report", [
    (DeployOutcome(DeployKind.REFUSED_NO_PULL_REQUEST, "prod", sha="abcdef1234"),
     ":x: Deploy to `prod` refused: no pull request found for commit abcdef1, so its required approval cannot be "
     "checked."),
    (DeployOutcome(DeployKind.REFUSED_NO_APPROVAL, "prod", reason="0 of 1 required approval(s)."),
     ":x: Deploy to `prod` refused: required approval is missing.\n\n0 of 1 required approval(s)."),
    (DeployOutcome(DeployKind.UP_TO_DATE, "prod"),
     ":white_check_mark: `prod` already serves this commit's models: nothing to deploy."),
    (DeployOutcome(DeployKind.REFUSED_LARGE_BACKFILL, "prod", large=LargeBackfill(
        (BackfillLimit("batches", 12, 10), BackfillLimit("intervals", 30, 20)),
        (ModelBackfill("a.b", 20, 8), ModelBackfill("c.d", 10, 4)))),
     ":x: Deploy to `prod` refused: the plan computes 12 batches, more than cicd_bot.max_backfill_batches (10) and "
     "30 intervals, more than cicd_bot.max_backfill_intervals (20).\n\n`a.b`: 20 interval(s) in 8 batch(es)\n\n"
     "`c.d`: 10 interval(s) in 4 batch(es)\n\nA required approver can comment `/deploy --allow-large-backfill` to "
     "deploy it anyway, or raise the limit in `cicd_bot`."),
    (DeployOutcome(DeployKind.REFUSED_PLAN_CHANGED, "prod", drift=PlanDrift("aaa", "bbb")),
     ":x: Deploy to `prod` refused: the plan differs from the approved prod plan preview (require_approved_plan)."
     "\n\nChanged since the approved prod plan preview (digest aaa → bbb): none of the models it changes: "
     "prod's other models or the intervals to compute."),
    (DeployOutcome(DeployKind.REFUSED_PLAN_CHANGED, "prod", drift=PlanDrift("aaa", "bbb", ("x.y",), unrecorded=9)),
     ":x: Deploy to `prod` refused: the plan differs from the approved prod plan preview (require_approved_plan)."
     "\n\nChanged since the approved prod plan preview (digest aaa → bbb): `x.y` (the preview recorded its first "
     "changes only; 9 more changes may differ too)."),
    (DeployOutcome(DeployKind.APPLY_FAILED, "prod", reason="boom <!-- x -->", drift=DRIFT),
     ":x: Deploy to `prod` failed.\n\nboom &lt;!-- x --&gt;\n\nChanged since the approved prod plan preview "
     "(digest aaa → bbb): `x.y`, `z.w`."),
    (DeployOutcome(DeployKind.DEPLOYED, "prod", drift=DRIFT, plan_id="plan_1", changes=2, batches=5,
                   destructive=("m.a", "m.b"), allowed_by="ann", ran=RunAfterDeploy(batches=3, reused=2),
                   merge=MergeResult("squash", sha="c" * 40)),
     ":rocket: Deployed to `prod` as plan `plan_1`: 2 changes; 5 batches computed.\n\nChanged since the "
     "approved prod plan preview (digest aaa → bbb): `x.y`, `z.w`.\n\nDestructive changes allowed for `m.a`, `m.b` "
     "by @ann.\n\nRun after the deploy: 3 batch(es) computed, 2 reused.\n\nThe PR was merged (squash) as ccccccc."),
])
def test_a_deploys_report(outcome, report):
    assert outcome.report == report
    assert outcome.summary == report.split("\n\n")[0] and outcome.details == (("\n\n".join(
        report.split("\n\n")[1:]),) if "\n\n" in report else ())


def test_a_deploys_status_line_and_exit():
    deployed = DeployOutcome(DeployKind.DEPLOYED, "prod", plan_id="plan_1", digest="dig",
                             merge=MergeResult("rebase", error="409 head moved"))
    assert deployed.status == (":rocket: Deployed to `prod` from this commit as plan `plan_1`. "
                               ":x: The PR could not be merged (rebase): 409 head moved")
    assert deployed.conclusion == "success" and not deployed.ok
    assert not DeployOutcome(DeployKind.DEPLOYED, "prod", ran=RunAfterDeploy(error="E")).ok
    assert DeployOutcome(DeployKind.UP_TO_DATE, "prod").ok and DeployOutcome(DeployKind.UP_TO_DATE, "prod").status == ""
    assert DeployOutcome(DeployKind.PLAN_FAILED, "prod").conclusion == "failure"


@pytest.mark.parametrize("kind, merged, status", [
    (CleanupKind.ALREADY_REMOVED, False, ":broom: This PR was closed; its environment `e_1` does not exist "
                                         "(already removed)."),
    (CleanupKind.KEPT, True, ":package: This PR was merged; its environment `e_1` is kept "
                             "(cicd_bot.invalidate_environment_after_deploy: false) until it expires or is invalidated."),
    (CleanupKind.REMOVED, True, ":broom: This PR was merged: environment `e_1` was removed (invalidated, views "
                                "dropped)."),
    (CleanupKind.FAILED, False, ":x: Environment `e_1` could not be cleaned up: why"),
])
def test_a_cleanups_status(kind, merged, status):
    assert CleanupOutcome(kind, "e_1", merged=merged, reason="why").status == status


def test_a_rollbacks_reply():
    assert RollbackOutcome("prod", from_plan_id="abcdefghij", to_plan_id="0123456789", plan_id="zyxwvutsrq",
                           seconds=1.25).text == (
        "rolled `prod` back from plan abcdefgh to plan 01234567's snapshots (new plan zyxwvuts) in 1.2 s, nothing "
        "recomputed; views repointed: none (it served the same tables).")
    assert RollbackOutcome("prod", error="E").text == "rollback of `prod` failed: E"


def test_how_to_deploy_lists_every_way_the_settings_allow():
    assert DeployWays("prod", merge_deploys=True, tag_environment="live", command="/deploy", merge_method="squash",
                      gated=True).text == (
        "Merge this PR: the push to the prod branch deploys to `prod`; or push a release tag or publish a release: "
        "deploys to `live`; or comment `/deploy` (write access needed; deploys this PR's head, which must contain "
        "its base branch, to `prod`, then merges this PR (squash)) once the required approvals are in.")
    assert DeployWays("prod", tag_environment="live").text == ("Push a release tag or publish a release: deploys "
                                                               "to `live`.")


def test_gate_lines_refusals_and_notes():
    assert gate_finding(Finding("a.b", "grain", Level.FAIL, "dup")) == ":x: `a.b` (grain): dup"
    assert gate_finding(Finding("a.b", "grain", Level.WARN, "dup")) == ":warning: `a.b` (grain): dup"
    assert Refusal(RefusalKind.NOT_PROD_BRANCH, "", "main").text == (
        "run refused: `no ref` is not a prod branch; a run processes prod with the code of `main` (or "
        "cicd_bot.prod_branch_names) only.")
    assert JobNote(NoteKind.NOT_SERVED, command="run-tests", event="push", step="deploy").line == (
        "meshbot `run-tests`: nothing to do for this `push` event: the event asks for `deploy`")
    assert JobNote(NoteKind.AUTHORIZED, command="deploy", number=2, user="ann", sha="abc").line == (
        "meshbot: `/deploy` on #2 by @ann is authorized; the second job checks out abc.")


@pytest.mark.parametrize("title, text", [
    (CheckTitle(CheckName.UNIT_TESTS, tests="passed", total=1), "1 unit test passed"),
    (CheckTitle(CheckName.UNIT_TESTS, tests="failed", total=3, failures=1), "1 of 3 unit tests failed"),
    (CheckTitle(CheckName.UNIT_TESTS, tests="error"), "Unit tests could not run"),
    (CheckTitle(CheckName.PR_ENVIRONMENT, environment="hw_2"), "Environment `hw_2` is synced"),
    (CheckTitle(CheckName.PR_ENVIRONMENT, failed=True, environment="hw_2"), "Environment `hw_2` could not be synced"),
    (CheckTitle(CheckName.PROD_PLAN, has_changes=True, changes=1, digest="abc"), "Prod plan: 1 change(s), digest abc"),
    (CheckTitle(CheckName.PROD_PLAN), "No changes to deploy to prod"),
    (CheckTitle(CheckName.DATA_DIFF, compared=2, warnings=1), "Data diff of 2 models: no gate failed (1 warning)"),
    (CheckTitle(CheckName.DATA_DIFF, gate_failed=1, plan_failed=2, warnings=3),
     "Data diff gate failed on 1 model; Spark plan check failed on 2 models"),
    (CheckTitle(CheckName.DATA_DIFF, failed=True), "The data diff could not be computed"),
])
def test_a_checks_title(title, text):
    assert title.text == text
