"""The `meshbot` click group: global options, the Context, and the commands of each module."""

from __future__ import annotations

import atexit
import os
import sys
import threading

import click

from bot import __version__
from bot.cli import engine, ops, plans, quality, tooling
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
@click.option("-p", "--path", "paths", multiple=True, type=click.Path(file_okay=False),
              help="Project directory (default: current directory); give it once per repository of a multi-repo "
                   "project (the first one's config.yaml sets the gateways and the state).")
@click.option("--gateway", default=None, help="Gateway from config.yaml (default: default_gateway).")
@click.option("-v", "--verbose", is_flag=True,
              help="Show Spark's own output (JVM and log4j warnings); by default it goes to .meshbot/spark.log.")
@click.version_option(__version__, prog_name="meshbot")   # the package's one version source
@click.pass_context
def cli(ctx: click.Context, paths: tuple[str, ...], gateway: str | None, verbose: bool) -> None:
    """meshbot: SQLMesh-compatible transformations on Spark with virtual data environments."""
    # several: a multi-repo project (SQLMesh's `-p repo_1 -p repo_2`), one DAG and one state; the first
    # folder's config gives the gateways and the state
    path = list(paths) if len(paths) > 1 else (paths[0] if paths else ".")
    # Under GitHub Actions each secret read from now on (env_var values, passwords, tokens) is also
    # masked by the runner in the job log, whatever prints it.
    on_register(add_github_mask if os.environ.get("GITHUB_ACTIONS") == "true" else None)
    set_verbose(verbose)
    context = NotifyingContext(path, gateway=gateway)
    ctx.obj = context
    ctx.call_on_close(context.close)


for _command in (*plans.COMMANDS, *quality.COMMANDS, *ops.COMMANDS, *tooling.COMMANDS, *engine.COMMANDS):
    cli.add_command(_command)


def _attach_github() -> None:
    if "github" in cli.commands:
        return
    from bot.github.cli import github_group

    cli.add_command(github_group)


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, prog_name="meshbot")
    except SystemExit as done:
        _exit(done)
    except Exception:  # noqa: BLE001 - outside a command's own handling: a traceback without secrets
        print_redacted_traceback()
        sys.exit(1)


def _exit(done: SystemExit) -> None:
    """Ends the process without freeing the loaded project object by object, when that is all that is left.

    Tearing down a 10,000-model plan's objects one by one costs ~0.15 s of a ~1.5 s command. Exit handlers
    still run (logging's flush, finalizers of temporary files, process pools) and the standard streams are
    flushed; output that cannot be written (a full disk, a reader gone) fails a successful command with
    120, as the interpreter's own exit would. Only with a JVM (PySpark keeps its own exit hooks) or another
    thread still alive does the interpreter end as usual.
    """
    if "py4j" in sys.modules or "pyspark" in sys.modules or threading.active_count() > 1:
        raise done
    code = done.code
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    atexit._run_exitfuncs()
    lost = _flush(sys.stdout)
    if lost is not None:
        print(f"meshbot: could not write the output: {lost}", file=sys.stderr)
        code = code or 120
    _flush(sys.stderr)
    os._exit(code or 0)


def _flush(stream: object) -> Exception | None:
    """Flush a standard stream (None when closed at start); the error if the output could not be written."""
    if stream is None:
        return None
    try:
        stream.flush()   # type: ignore[attr-defined]
    except Exception as error:  # noqa: BLE001 - whatever stops the output, the exit code must say so
        return error
    return None


if __name__ == "__main__":
    main()
