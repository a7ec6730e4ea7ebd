"""`meshbot engine status|stop`: the project's warm local Spark engine (bot.spark.local_server)."""

from __future__ import annotations

import time

import click

from bot.cli.common import context_of, handle_errors
from bot.project.meshbot_dir import checked


@click.group()
def engine() -> None:
    """The project's warm local Spark engine: a Spark Connect server the local gateway's commands attach to."""


@engine.command()
@click.pass_context
@handle_errors
def status(ctx: click.Context) -> None:
    """Print the running engine's pid, address and uptime, or that none runs."""
    from bot.spark.local_server import LOG, ENGINE_DIR, status as engine_status

    state_dir = checked(context_of(ctx).path)
    record = engine_status(state_dir)
    if record is None:
        click.echo("No local Spark engine is running for this project.")
        return
    click.echo(f"Local Spark engine running: pid {record.pid}, {record.url}, up {_duration(time.time() - record.started)} "
               f"(log: {state_dir / ENGINE_DIR / LOG})")


@engine.command()
@click.pass_context
@handle_errors
def stop(ctx: click.Context) -> None:
    """Stop the engine (a command after this starts a new one); commands attached to it fail."""
    from bot.spark.local_server import stop as stop_engine

    record = stop_engine(checked(context_of(ctx).path))
    if record is None:
        click.echo("No local Spark engine was running for this project.")
        return
    click.echo(f"Stopped the local Spark engine (pid {record.pid}, {record.url}).")


def _duration(seconds: float) -> str:
    """
    >>> _duration(59.4), _duration(3725), _duration(90061)
    ('59s', '1h 2m 5s', '1d 1h 1m 1s')
    """
    seconds = int(max(0, seconds))
    parts = [(seconds // 86400, "d"), (seconds % 86400 // 3600, "h"), (seconds % 3600 // 60, "m"), (seconds % 60, "s")]
    while len(parts) > 1 and parts[0][0] == 0:
        parts.pop(0)
    return " ".join(f"{value}{unit}" for value, unit in parts)


COMMANDS = (engine,)
