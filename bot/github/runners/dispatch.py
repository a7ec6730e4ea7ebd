"""run-all: pick what to do from the event (PR push, review, comment command, close, push, release)."""

from __future__ import annotations

from bot.github.api import WRITE_PERMISSIONS
from bot.github.commands import Command, Reply, command_prefix, parse_comment
from bot.github.runners.base import BotRun, reply
from bot.github.runners.cleanup import cleanup_pr_environment
from bot.github.runners.deploy import deploy_production
from bot.github.runners.pr import check_required_approvers, sync_pull_request

def run_all(run: BotRun) -> int:
    event, s = run.event, run.settings
    pr = event.pull_request
    if event.is_pr_closed:      # whatever its origin: an environment that exists is cleaned up
        return cleanup_pr_environment(run)
    if pr is not None and pr.is_from_fork(event.repo) and event.name == "pull_request":
        run.outputs.summary(f"meshbot: pull request #{pr.number} comes from {pr.head_origin()}. "
                            "Workflows on fork PRs get no secrets and a read-only token, so meshbot "
                            "does not build an environment for it; a maintainer can push the branch "
                            "to this repository to run it.")
        return 0
    if event.is_pr_sync:
        return sync_pull_request(run)
    if event.name == "pull_request_review":
        return check_required_approvers(run)
    if event.name == "issue_comment" and event.action == "created" and event.comment:
        return _comment_command(run)
    if event.name == "push" and event.deleted:
        run.outputs.summary(f"meshbot: `{event.ref}` was deleted; nothing to deploy.")
        return 0
    if event.name == "push" and event.tag is None and s.deploys_on("merge"):
        if s.is_prod_branch(event.branch, event.repo.default_branch):
            return deploy_production(run, environment=s.merge_environment)
    if (event.name == "push" and event.tag) or (event.name == "release" and event.action == "published"):
        if s.deploys_on("tag"):
            return deploy_production(run, environment=s.tag_environment)
    run.outputs.summary(f"meshbot: nothing to do for `{event.name}` ({event.action or 'no action'}).")
    return 0


def _comment_command(run: BotRun) -> int:
    comment = run.event.comment
    if not comment.on_pull_request or comment.user == run.settings.bot_login:
        return 0
    parsed = parse_comment(comment.body, namespace=run.settings.command_namespace,
                           enabled=run.settings.enable_deploy_command)
    if isinstance(parsed, Reply):
        reply(run, comment.issue_number, comment.user, parsed.text)
        return 0
    if not isinstance(parsed, Command):
        return 0
    permission = run.github.permission(comment.user)
    if permission not in WRITE_PERMISSIONS:
        reply(run, comment.issue_number, comment.user,
              f"ignored `{command_prefix(run.settings.command_namespace)}{parsed.name}`: it needs write "
              f"permission on this repository (yours is `{permission}`).")
        return 0
    run.github.add_reaction(comment.id, "rocket")
    return deploy_production(run, environment=run.settings.merge_environment)
