"""Cleanup runner: when a PR closes, invalidate its environment and drop its views at once (a merged PR's
environment is kept when cicd_bot.invalidate_environment_after_deploy is false, as in SQLMesh)."""

from __future__ import annotations

from bot.errors import BotError
from bot.github.runners.base import BotRun, ephemeral_storage_refusal, error_text, post_comment
from bot.github.views import CommentView

# After a close the environment's section (its views), its data diffs and "How to deploy" are stale.
STALE_AFTER_CLOSE = ("hint", "pr_plan", "diffs")


def cleanup_pr_environment(run: BotRun) -> int:
    pr = run.pull_request
    if pr is None:
        run.outputs.summary("meshbot: cleanup needs a pull_request event; nothing to do.")
        return 0
    env = run.pr_environment(pr.number)
    run.outputs.set("pr_environment_name", env)
    refusal = ephemeral_storage_refusal(run)
    if refusal:
        post_comment(run, pr.number, CommentView(marker=run.marker, status=f":x: {refusal}",
                                                 gateway=run.settings.gateway))
        return 1
    known = {e.name for e in run.context.environments()}
    code, stale = 0, STALE_AFTER_CLOSE
    how = "merged" if pr.merged else "closed"
    if env not in known and pr.is_from_fork(run.event.repo):
        run.outputs.summary(f"meshbot: #{pr.number} from {pr.head_origin()} was {how}; it has no environment.")
        return 0
    if env not in known:
        text = f":broom: This PR was {how}; its environment `{env}` does not exist (already removed)."
    elif pr.merged and not run.settings.invalidate_environment_after_deploy:
        text = (f":package: This PR was merged; its environment `{env}` is kept "
                "(cicd_bot.invalidate_environment_after_deploy: false) until it expires or is invalidated.")
        stale = ("hint",)
    else:
        try:
            run.context.invalidate(env, sync=True)
            text = f":broom: This PR was {how}: environment `{env}` was removed (invalidated, views dropped)."
        except BotError as error:
            text, code, stale = f":x: Environment `{env}` could not be cleaned up: {error_text(error)}", 1, ("hint",)
    post_comment(run, pr.number, CommentView(marker=run.marker, status=text, gateway=run.settings.gateway,
                                             head_sha=pr.head_sha, drop=stale))
    return code
