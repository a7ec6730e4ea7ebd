"""Rollback through the bot: serve an environment's previous plan again and say what was repointed."""

from __future__ import annotations

from bot.errors import BotError
from bot.github.runners.base import BotRun, error_text, reply


def rollback_environment(run: BotRun, *, environment: str, to_plan_id: str | None) -> int:
    """Roll `environment` back through the engine (under its lease); the reply to `/rollback` (or the job
    summary of a dispatched rollback) names the plans and views."""
    comment = run.event.comment

    def say(text: str) -> None:
        if comment is not None:
            reply(run, comment.issue_number, comment.user, text)
        else:
            run.outputs.summary(f"meshbot: {text}")

    try:
        result = run.context.rollback(environment, to_plan_id=to_plan_id)
    except BotError as error:
        say(f"rollback of `{environment}` failed: {error_text(error)}")
        return 1
    views = ", ".join(f"`{name}`" for name in result.repointed) or "none (it served the same tables)"
    say(f"rolled `{environment}` back from plan {result.from_plan_id[:8]} to plan {result.to_plan_id[:8]}'s "
        f"snapshots (new plan {result.plan_id[:8]}) in {result.seconds:.1f} s, nothing recomputed; "
        f"views repointed: {views}.")
    return 0
