"""The `meshbot` click group: global options, the Context, and the commands of each module."""

from __future__ import annotations

import os
import sys

import click

from bot.cli import ops, plans, quality, tooling
from bot.cli.common import add_github_mask, print_redacted_traceback
from bot.cli.notifying import NotifyingContext
from bot.redact import on_register
from bot.spark.verbosity import set_verbose


class _Commands(click.Group):
    """Attaches the `github` group on first use, so other commands never import the GitHub bot."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        _attach_github()
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name == "github":
            _attach_github()
        return super().get_command(ctx, cmd_name)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-p", "--path", "path", default=".", type=click.Path(file_okay=False),
              help="Project directory (default: current directory).")
@click.option("--gateway", default=None, help="Gateway from config.yaml (default: default_gateway).")
@click.option("-v", "--verbose", is_flag=True,
              help="Show Spark's own output (JVM and log4j warnings); by default it goes to .meshbot/spark.log.")
@click.version_option(package_name="meshbot")
@click.pass_context
def cli(ctx: click.Context, path: str, gateway: str | None, verbose: bool) -> None:
    """meshbot: SQLMesh-compatible transformations on Spark with virtual data environments."""
    # Under GitHub Actions each secret read from now on (env_var values, passwords, tokens) is also
    # masked by the runner in the job log, whatever prints it.
    on_register(add_github_mask if os.environ.get("GITHUB_ACTIONS") == "true" else None)
    set_verbose(verbose)
    context = NotifyingContext(path, gateway=gateway)
    ctx.obj = context
    ctx.call_on_close(context.close)


for _command in (*plans.COMMANDS, *quality.COMMANDS, *ops.COMMANDS, *tooling.COMMANDS):
    cli.add_command(_command)


def _attach_github() -> None:
    if "github" in cli.commands:
        return
    from bot.github.cli import github_group

    cli.add_command(github_group)


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="meshbot")
    except Exception:  # noqa: BLE001 - outside a command's own handling: a traceback without secrets
        print_redacted_traceback()
        sys.exit(1)


if __name__ == "__main__":
    main()
