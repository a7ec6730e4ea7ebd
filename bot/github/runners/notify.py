"""The bot's Notifier: the project's notification targets, with the commit, PR and workflow run of this BotRun."""

from __future__ import annotations

from bot.errors import BotError
from bot.github.event import PullRequest
from bot.github.outcomes import JobNote, NoteKind
from bot.github.runners.base import BotRun
from bot.report.media import workflow_command
from bot.report.notify import Notifier, Origin


def notifier_for(run: BotRun, *, pull_request: PullRequest | None = None, sha: str | None = None) -> Notifier:
    """A Notifier for a deploy or a run; one with no targets when the config cannot be read (the
    plan or run reports that error itself). In local mode without --notify it keeps only console
    targets and says (job summary and stdout) which others it leaves untold."""
    try:
        targets = run.context.config.notification_targets
    except BotError:
        return Notifier(())
    posting = tuple(t for t in targets if t.type != "console")
    if not run.notify and posting:
        note = JobNote(NoteKind.NOTIFICATIONS_SKIPPED, number=len(posting),
                       text=", ".join(f"{t.config_key}: {t.type}" for t in posting)).line
        run.outputs.summary(note)
        print(note, flush=True)
        targets = tuple(t for t in targets if t.type == "console")
    origin = Origin(commit=sha or run.event.sha or run.sha or None,
                    pull_request=pull_request.number if pull_request else None,
                    run_url=run.run_url, repository=run.event.repo.full_name)
    if not run.on_actions_runner:
        return Notifier(targets, origin=origin)
    return Notifier(targets, origin=origin,
                    warn=lambda text: print(workflow_command("warning", text, title="meshbot"), flush=True))
