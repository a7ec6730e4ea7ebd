"""Operations commands: invalidate, rollback, run, janitor, migrate, evaluate, dag, destroy."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from bot.cli.common import check_range, context_of, handle_errors, iso
from bot.errors import BotError
from bot.report.console import TerminalReporter
from bot.report.media import plain_text


@click.command()
@click.argument("environment")
@click.option("--sync", is_flag=True, help="Drop the environment's views now.")
@click.pass_context
@handle_errors
def invalidate(ctx: click.Context, environment: str, sync: bool) -> None:
    """Mark ENVIRONMENT expired (the janitor removes it)."""
    result = context_of(ctx).invalidate(environment, sync=sync)
    click.echo(f"Environment `{environment}` invalidated.")
    if result is not None:
        for line in result.lines():
            click.echo(line)


@click.command()
@click.argument("environment")
@click.option("--to", "to_plan_id", default=None, metavar="PLAN_ID",
              help="The plan to serve again (an id or its prefix; default: the plan before the current one).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
@handle_errors
def rollback(ctx: click.Context, environment: str, to_plan_id: str | None, as_json: bool) -> None:
    """Serve an earlier plan of ENVIRONMENT again: its views repointed to tables that still exist, nothing computed."""
    result = context_of(ctx).rollback(environment, to_plan_id=to_plan_id)
    if as_json:
        TerminalReporter(json_mode=True).json({
            "environment": result.environment, "plan_id": result.plan_id, "from_plan_id": result.from_plan_id,
            "to_plan_id": result.to_plan_id, "repointed": list(result.repointed), "seconds": result.seconds})
        return
    for line in result.lines():
        click.echo(line)


@click.command()
@click.argument("environment", required=False, default="prod")
@click.option("--execution-time", default=None, help="Run as of this time (default: now).")
@click.option("--skip-if-busy", is_flag=True,
              help="When a plan or run of ENVIRONMENT is in flight, evaluate nothing and exit 0 instead of "
                   "waiting its turn (for a cron that fires again soon).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
@handle_errors
def run(ctx: click.Context, environment: str, execution_time: str | None, skip_if_busy: bool,
        as_json: bool) -> None:
    """Evaluate the intervals due by each model's cron in ENVIRONMENT (default prod)."""
    reporter = TerminalReporter(json_mode=as_json)
    with reporter.progress("Running") as progress:
        result = context_of(ctx).run(environment, execution_time=execution_time, progress=progress,
                                     skip_when_busy=skip_if_busy)
    if as_json:
        reporter.json({"environment": result.environment, "skipped_for": result.busy or None,
                       "execution_time": iso(result.execution_time),
                       "evaluated": [{"model": m, "start": iso(a), "end": iso(b)}
                                     for m, a, b in result.evaluated]})
        return
    for warning in result.audit_warnings:
        reporter.warning(warning.describe())
    if result.busy:
        reporter.text(f"Skipped `{result.environment}`: {result.busy} is in flight; the next run "
                      "processes what is due.")
    elif result.nothing_due:
        reporter.text(f"Nothing due in `{result.environment}` at {iso(result.execution_time)}.")
    else:
        models = len({m for m, _, _ in result.evaluated})
        reporter.text(f"Run of `{result.environment}` finished: {len(result.evaluated)} batch(es) "
                      f"of {models} model(s) evaluated.")


@click.command()
@click.option("--ignore-ttl", is_flag=True, help="Expire unreferenced snapshots whatever their age.")
@click.pass_context
@handle_errors
def janitor(ctx: click.Context, ignore_ttl: bool) -> None:
    """Drop expired environments' views and schemas, and expired snapshots' unshared tables."""
    result = context_of(ctx).janitor(ignore_ttl=ignore_ttl, notice=_to_stderr)
    for line in result.lines():
        click.echo(line)
    click.echo("Janitor: nothing to clean." if result.is_empty else
               f"Janitor: {len(result.environments)} environment(s), {len(result.views)} view(s), "
               f"{len(result.snapshots)} snapshot(s) and {len(result.tables)} table(s) removed.")


@click.command()
@click.pass_context
@handle_errors
def migrate(ctx: click.Context) -> None:
    """Upgrade the state database to this meshbot's schema version, and re-key its snapshots when this
    meshbot computes fingerprints differently (tables, intervals and environments kept: nothing to backfill)."""
    migrated = context_of(ctx).migrate()
    before, after = migrated.schema_before, migrated.schema_version
    click.echo(f"State already at schema version {after}." if before == after else
               f"State migrated from schema version {before} to {after}.")
    if migrated.rekeyed is not None:
        rekeyed = migrated.rekeyed
        click.echo(f"Snapshots re-keyed from fingerprint scheme {migrated.scheme_before} to "
                   f"{migrated.fingerprint_scheme}: {len(rekeyed.moved)} moved, {rekeyed.unchanged} unchanged; "
                   "every version, table and interval kept.")
        for snapshot_id, why in sorted(rekeyed.left.items()):
            click.echo(f"  left as it was: {plain_text(snapshot_id.name)} ({snapshot_id.identifier}): "
                       f"{plain_text(why)}")


@click.command()
@click.argument("model")
@click.option("--start", "-s", required=True, help="First day (or time) of the interval.")
@click.option("--end", "-e", required=True, help="Last day of the interval (inclusive), or a time.")
@click.option("--execution-time", default=None, help="Render as of this time (default: the interval's end).")
@click.option("--limit", type=int, default=None, help="At most N rows.")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
@click.pass_context
@handle_errors
def evaluate(ctx: click.Context, model: str, start: str, end: str, execution_time: str | None,
             limit: int | None, as_json: bool) -> None:
    """Compute MODEL for [START, END] against prod's tables and print rows; writes nothing."""
    check_range(start, end)
    rows = context_of(ctx).evaluate(model, start=start, end=end, limit=limit,
                                  execution_time=execution_time)
    reporter = TerminalReporter(json_mode=as_json)
    reporter.json(rows) if as_json else reporter.table(rows)


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.pass_context
@handle_errors
def dag(ctx: click.Context, file: str) -> None:
    """Write a picture of the DAG to FILE: HTML, or SVG when FILE ends in .svg.

    The HTML page fits the window, searches models by name, and on a click lights a model's upstream and
    downstream and shows its kind, owner, cron and last interval in prod (read from the state, if there is
    one; Spark never starts)."""
    from bot.report.dag_html import DagNode, write_dag

    context = context_of(ctx)
    nodes, edges = context.dag()
    try:
        last = context.last_intervals("prod") or {}
    except BotError as error:   # an unreachable state: the picture without the intervals
        click.echo(f"Warning: last intervals not shown: {error}", err=True)
        last = {}
    models = context.models
    path = write_dag(Path(file), [DagNode(name, kind, owner=models[name].owner, cron=models[name].cron,
                                          description=models[name].description, last_interval=last.get(name))
                                  for name, kind in nodes], edges,
                     title=f"meshbot DAG: {context.path.name}")
    click.echo(f"DAG of {len(nodes)} model(s) written to {path}")


@click.command()
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation (for scripts).")
@click.pass_context
@handle_errors
def destroy(ctx: click.Context, yes: bool) -> None:
    """Drop every meshbot schema, table and view, and the state. Irreversible."""
    context = context_of(ctx)
    if not yes:
        if not sys.stdin.isatty():
            raise click.UsageError("destroy needs confirmation: run it in a terminal, or pass --yes")
        if not click.confirm(f"Drop every meshbot table, view and schema of {context.path} and its "
                             "state? This cannot be undone", default=False):
            click.echo("Nothing destroyed.")
            return
    result = context.destroy(notice=_to_stderr)
    for line in result.lines():
        click.echo(line)
    click.echo(f"Destroyed: {len(result.tables)} table(s), {len(result.views)} view(s), "
               f"{len(result.schemas)} schema(s) and the state.")


def _to_stderr(line: str) -> None:
    """A waiting line ('waiting for the plan of `dev` ...'), kept off stdout's result lines."""
    click.echo(line, err=True)


COMMANDS = (invalidate, rollback, run, janitor, migrate, evaluate, dag, destroy,)
