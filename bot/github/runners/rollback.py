"""Rollback through the bot: serve an environment's previous plan again and say what was repointed."""

from __future__ import annotations

from bot.errors import BotError
from bot.github.outcomes import JobNote, NoteKind, RollbackOutcome
from bot.github.runners.base import BotRun, error_text, reply


def rollback_environment(run: BotRun, *, environment: str, to_plan_id: str | None) -> int:
    """Roll `environment` back through the engine (under its lease); the reply to `/rollback` (or the job
    summary of a dispatched rollback) names the plans and views."""
    comment = run.event.comment

    def say(text: str) -> None:
        if comment is not None:
            reply(run, comment.issue_number, comment.user, text)
        else:
            run.outputs.summary(JobNote(NoteKind.SAYS, text=text).line)

    try:
        result = run.context.rollback(environment, to_plan_id=to_plan_id)
    except BotError as error:
        say(RollbackOutcome(environment, error=error_text(error)).text)
        return 1
    say(RollbackOutcome(environment, from_plan_id=result.from_plan_id, to_plan_id=result.to_plan_id,
                        plan_id=result.plan_id, seconds=result.seconds, repointed=tuple(result.repointed)).text)
    return 0
