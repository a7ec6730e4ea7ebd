"""Cleanup runner: when a PR closes, invalidate its environment and drop its views at once (a merged PR's
environment is kept when cicd_bot.invalidate_environment_after_deploy is false, as in SQLMesh)."""

from __future__ import annotations

from bot.errors import BotError
from bot.github.runners.base import BotRun, ephemeral_storage_refusal, error_text, post_comment
from bot.github.outcomes import CleanupKind, CleanupOutcome, JobNote, NoteKind
from bot.github.views import CommentView

# After a close the environment's section (its views), its data diffs and "How to deploy" are stale; while
# the environment stays (kept, or its cleanup failed) only "How to deploy" is. A merged PR keeps its data
# diffs: they are what the reviewers approved, and what was deployed.
STALE_AFTER_CLOSE = ("hint", "pr_plan", "diffs")
_STALE = {CleanupKind.ALREADY_REMOVED: STALE_AFTER_CLOSE, CleanupKind.REMOVED: STALE_AFTER_CLOSE,
          CleanupKind.KEPT: ("hint",), CleanupKind.FAILED: ("hint",)}


def _stale(kind: CleanupKind, merged: bool) -> tuple[str, ...]:
    return tuple(name for name in _STALE[kind] if not (merged and name == "diffs"))


def cleanup_pr_environment(run: BotRun) -> int:
    pr = run.pull_request
    if pr is None:
        run.outputs.summary(JobNote(NoteKind.CLEANUP_WITHOUT_PULL_REQUEST).line)
        return 0
    env = run.pr_environment(pr.number)
    run.outputs.set("pr_environment_name", env)
    refusal = ephemeral_storage_refusal(run)
    if refusal:
        post_comment(run, pr.number, CommentView(
            marker=run.marker, status=CleanupOutcome(CleanupKind.REFUSED_STORAGE, env, reason=refusal).status,
            gateway=run.settings.gateway))
        return 1
    known = set(run.context.environment_names())
    if env not in known and pr.is_from_fork(run.event.repo):
        run.outputs.summary(JobNote(NoteKind.FORK_WITHOUT_ENVIRONMENT, number=pr.number, origin=pr.head_origin(),
                                    merged=pr.merged).line)
        return 0
    outcome = _cleanup(run, env, known, merged=pr.merged)
    post_comment(run, pr.number, CommentView(marker=run.marker, status=outcome.status, gateway=run.settings.gateway,
                                             head_sha=pr.head_sha, drop=_stale(outcome.kind, pr.merged)))
    return 1 if outcome.kind is CleanupKind.FAILED else 0


def _cleanup(run: BotRun, env: str, known: set[str], *, merged: bool) -> CleanupOutcome:
    if env not in known:
        return CleanupOutcome(CleanupKind.ALREADY_REMOVED, env, merged=merged)
    if merged and not run.settings.invalidate_environment_after_deploy:
        return CleanupOutcome(CleanupKind.KEPT, env, merged=merged)
    try:
        run.context.invalidate(env, sync=True)
    except BotError as error:
        return CleanupOutcome(CleanupKind.FAILED, env, merged=merged, reason=error_text(error))
    return CleanupOutcome(CleanupKind.REMOVED, env, merged=merged)
