"""`meshbot github ...`: the click group the main CLI attaches (argument parsing and wiring only)."""

from __future__ import annotations

import click

from bot.github.action import Invocation, main
from bot.github.runners import COMMANDS


@click.group("github")
@click.option("--token", envvar="GITHUB_TOKEN", default=None, show_envvar=True,
              help="GitHub token (default: $GITHUB_TOKEN). Never printed.")
@click.option("--event-path", type=click.Path(dir_okay=False), default=None,
              help="Webhook payload JSON (default: $GITHUB_EVENT_PATH).")
@click.option("--event-name", default=None, help="Event name, e.g. pull_request (default: $GITHUB_EVENT_NAME).")
@click.option("--output-dir", type=click.Path(file_okay=False), default=None,
              help="Write comment.md, replies.md, check_runs.json, summary.md, outputs.env here; no network calls.")
@click.option("--answers", type=click.Path(dir_okay=False), default=None,
              help="Local mode: JSON of what GitHub would answer (pulls, reviews, permissions, teams, files), "
                   "to rehearse approvals, /deploy, merges and releases offline.")
@click.option("--notify", is_flag=True, default=False,
              help="Local mode: post to the config's Slack and webhook notification targets too (by default "
                   "local mode makes no network call; console targets always print).")
@click.option("--project-path", "-p", "project_paths", multiple=True,
              help="The meshbot project folder (default: meshbot's own -p, else the current directory); once per "
                   "repository of a multi-repo project, the first one's config.yaml holding the bot settings.")
@click.option("--gateway", default=None, help="Gateway to use; also suffixes check names (default: meshbot's "
                                             "own --gateway).")
@click.option("--config", "config", envvar="MESHBOT_CICD_BOT", default=None, show_envvar=True,
              help="Trusted bot settings: a YAML mapping of cicd_bot keys (and `users`), merged over the default "
                   "branch's config.yaml (the action's `config` input). Never read from the checkout.")
@click.pass_context
def github_group(ctx: click.Context, token: str | None, event_path: str | None, event_name: str | None,
                 output_dir: str | None, answers: str | None, notify: bool, project_paths: tuple[str, ...],
                 gateway: str | None, config: str | None) -> None:
    """Run the CI/CD bot for a GitHub event (inside GitHub Actions, or locally with --output-dir)."""
    outer = ctx.parent.params if ctx.parent is not None else {}   # `meshbot -p DIR --gateway G github ...`
    paths = project_paths or tuple(outer.get("paths") or ()) or (".",)
    gateway = gateway or outer.get("gateway")
    ctx.obj = Invocation(event_name=event_name, event_path=event_path, output_dir=output_dir,
                         project_path=paths[0], other_paths=tuple(paths[1:]), gateway=gateway, token=token, answers=answers, config=config,
                         notify=notify)


def _make(name: str) -> click.Command:
    @click.pass_obj
    def command(invocation: Invocation) -> None:
        from dataclasses import replace

        raise SystemExit(main(replace(invocation, command=name), out=click.echo))

    return click.Command(name, callback=command, help=COMMAND_HELP[name])


# What each bot command does for the event it is given (an event it does not serve: nothing).
COMMAND_HELP = {
    "run-all": "Whatever the event asks for: sync a PR, check approvals, deploy, clean up, run or reply.",
    "run-tests": "On a PR sync: run the project's unit tests (the Unit Tests check).",
    "update-pr-environment": "On a PR sync: plan and apply the PR's environment (the PR Environment Synced check).",
    "gen-prod-plan": "On a PR sync: preview the prod plan and the data diff (the Prod Plan Preview check).",
    "check-required-approvers": "On a PR sync or review: check the required approvals (the Required Approval check).",
    "deploy-production": "On a merge, release or authorized /deploy: apply the deploy environment; also /rollback.",
    "cleanup-pr-environment": "On a closed PR: invalidate the PR's environment and drop its views.",
    "run": "On a schedule or dispatch: `meshbot run` on prod and on the merge environment.",
    "authorize-deploy": "The first job of /deploy and /rollback: check the gates; output authorized, sha, pr_number.",
}


for _name in COMMANDS:
    github_group.add_command(_make(_name))
