"""Command line: argument parsing and wiring to the Context; every BotError exits 1 without a traceback."""

from __future__ import annotations

import sys
from functools import wraps
from pathlib import Path
from typing import Any, Callable

import click

from bot.context import Context
from bot.errors import BotError
from bot.plan.definition import PlanOptions
from bot.report.console import TerminalReporter


def _handle_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except BotError as exc:
            TerminalReporter().error(str(exc))
            sys.exit(1)
        except KeyboardInterrupt:
            TerminalReporter().error("interrupted; rerun the same command to resume")
            sys.exit(130)
    return wrapper


def _context(ctx: click.Context) -> Context:
    return ctx.find_object(Context)  # type: ignore[return-value]


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
@click.version_option(package_name="meshbot")
@click.pass_context
def cli(ctx: click.Context, path: str, gateway: str | None) -> None:
    """meshbot: SQLMesh-compatible transformations on Spark with virtual data environments."""
    context = Context(path, gateway=gateway)
    ctx.obj = context
    ctx.call_on_close(context.close)


@cli.command()
@click.argument("directory", type=click.Path(file_okay=False))
@_handle_errors
def init(directory: str) -> None:
    """Write the example project into DIRECTORY."""
    from bot.project.example import write_example

    write_example(Path(directory))
    click.echo(f"Example project written to {directory}")


@cli.command()
@click.pass_context
@_handle_errors
def info(ctx: click.Context) -> None:
    """Models, gateway and state of the project."""
    context = _context(ctx)
    reporter = TerminalReporter()
    reporter.text(f"Project: {context.path}")
    reporter.text(f"Gateway: {context.gateway.name}")
    reporter.text(f"Models: {len(context.models)}")
    reporter.text(f"State: {context.gateway.state_connection.type} (schema version "
                  f"{context.state.schema_version()})")
    reporter.text(f"Environments: {', '.join(e.name for e in context.environments()) or 'none'}")


@cli.command()
@click.argument("model")
@click.option("--start", default=None)
@click.option("--end", default=None)
@click.option("--environment", default="prod", show_default=True)
@click.pass_context
@_handle_errors
def render(ctx: click.Context, model: str, start: str | None, end: str | None, environment: str) -> None:
    """Print MODEL's query rendered as Spark SQL."""
    click.echo(_context(ctx).render(model, start=start, end=end, environment=environment))


@cli.command()
@click.argument("environment", required=False, default="prod")
@click.option("--explain", is_flag=True, help="Show the plan; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON; change nothing.")
@click.option("--auto-apply", is_flag=True, help="Apply without asking.")
@click.option("--no-prompts", is_flag=True, help="Never ask; with --auto-apply applies, else only shows.")
@click.option("--skip-backfill", is_flag=True)
@click.option("--skip-tests", is_flag=True)
@click.option("--forward-only", is_flag=True)
@click.option("--allow-destructive-model", multiple=True)
@click.option("--effective-from", default=None)
@click.option("--restate-model", "-r", multiple=True)
@click.option("--include-unmodified", is_flag=True)
@click.option("--no-gaps", is_flag=True)
@click.option("--start", "-s", default=None)
@click.option("--end", "-e", default=None)
@click.option("--execution-time", default=None)
@click.pass_context
@_handle_errors
def plan(ctx: click.Context, environment: str, explain: bool, as_json: bool, auto_apply: bool,
         no_prompts: bool, **flags: Any) -> None:
    """Plan ENVIRONMENT (default prod) against the project, and apply it."""
    from bot.plan.explain import plan_summary_text, plan_to_json

    context = _context(ctx)
    options = PlanOptions(
        skip_backfill=flags["skip_backfill"], forward_only=flags["forward_only"],
        include_unmodified=flags["include_unmodified"], no_gaps=flags["no_gaps"],
        start=flags["start"], end=flags["end"], execution_time=flags["execution_time"],
        effective_from=flags["effective_from"], restate_models=tuple(flags["restate_model"]),
        allow_destructive_models=tuple(flags["allow_destructive_model"]),
        skip_tests=flags["skip_tests"])
    _load_project(context)
    the_plan = context.plan(environment, options=options)
    reporter = TerminalReporter(json_mode=as_json)
    if as_json:
        reporter.json(plan_to_json(the_plan))
        return
    reporter.text(plan_summary_text(the_plan))
    for warning in the_plan.warnings:
        reporter.warning(warning)
    if explain or not the_plan.has_changes and not the_plan.requires_backfill and \
            the_plan.previous_environment is not None:
        return
    if not flags["skip_tests"] and context.project.test_files:
        tests = context.test()
        if not tests.passed:
            _report_tests(tests, reporter)
            raise tests.error()
    if not auto_apply:
        if no_prompts or not reporter.interactive:
            reporter.text("Run with --auto-apply to apply this plan.")
            return
        if not click.confirm("Apply - Backfill Tables?", default=False):
            return
    _apply(context, the_plan, reporter)


def _load_project(context: Context) -> None:
    """Load the project without GC passes, then exempt the loaded models from later scans.

    A CLI process keeps its project to the end; scanning its ~100k AST nodes on every full
    collection would cost more than planning itself.
    """
    import gc

    gc.disable()
    try:
        context.project   # noqa: B018 - loads (or raises the project's ConfigError)
    finally:
        gc.freeze()
        gc.enable()


def _apply(context: Context, the_plan: Any, reporter: TerminalReporter) -> None:
    with reporter.progress("Backfilling") as progress:
        result = context.apply(the_plan, progress=progress)
    for warning in result.audit_warnings:
        reporter.warning(warning.describe())
    reporter.text(f"Environment `{result.environment}` updated: {len(result.evaluated)} batch(es) "
                  f"evaluated, {result.views_created} view(s) in place.")


@cli.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@_handle_errors
def environments(ctx: click.Context, as_json: bool) -> None:
    """List environments."""
    envs = _context(ctx).environments()
    rows = [{"name": e.name, "snapshot_count": len(e.snapshots), "expires_at": _iso(e.expiration_ts),
             "finalized_at": _iso(e.finalized_ts)} for e in envs]
    reporter = TerminalReporter(json_mode=as_json)
    reporter.json(rows) if as_json else reporter.table(rows)


@cli.command()
@click.argument("sql")
@click.option("--json", "as_json", is_flag=True)
@click.option("--limit", type=int, default=None)
@click.pass_context
@_handle_errors
def fetchdf(ctx: click.Context, sql: str, as_json: bool, limit: int | None) -> None:
    """Run SQL on the gateway's Spark and print the rows."""
    rows = _context(ctx).fetchdf(sql, limit=limit)
    reporter = TerminalReporter(json_mode=as_json)
    reporter.json(rows) if as_json else reporter.table(rows)


@cli.command()
@click.argument("environment")
@click.option("--sync", is_flag=True, help="Drop the environment's views now.")
@click.pass_context
@_handle_errors
def invalidate(ctx: click.Context, environment: str, sync: bool) -> None:
    """Mark ENVIRONMENT expired (the janitor removes it)."""
    result = _context(ctx).invalidate(environment, sync=sync)
    click.echo(f"Environment `{environment}` invalidated.")
    if result is not None:
        for line in result.lines():
            click.echo(line)


@cli.command()
@click.argument("environment", required=False, default="prod")
@click.option("--execution-time", default=None, help="Run as of this time (default: now).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@_handle_errors
def run(ctx: click.Context, environment: str, execution_time: str | None, as_json: bool) -> None:
    """Evaluate the intervals due by each model's cron in ENVIRONMENT (default prod)."""
    reporter = TerminalReporter(json_mode=as_json)
    with reporter.progress("Running") as progress:
        result = _context(ctx).run(environment, execution_time=execution_time, progress=progress)
    if as_json:
        reporter.json({"environment": result.environment,
                       "execution_time": _iso(result.execution_time),
                       "evaluated": [{"model": m, "start": _iso(a), "end": _iso(b)}
                                     for m, a, b in result.evaluated]})
        return
    for warning in result.audit_warnings:
        reporter.warning(warning.describe())
    if result.nothing_due:
        reporter.text(f"Nothing due in `{result.environment}` at {_iso(result.execution_time)}.")
    else:
        models = len({m for m, _, _ in result.evaluated})
        reporter.text(f"Run of `{result.environment}` finished: {len(result.evaluated)} batch(es) "
                      f"of {models} model(s) evaluated.")


@cli.command()
@click.option("--ignore-ttl", is_flag=True, help="Expire unreferenced snapshots whatever their age.")
@click.pass_context
@_handle_errors
def janitor(ctx: click.Context, ignore_ttl: bool) -> None:
    """Drop expired environments' views and schemas, and expired snapshots' unshared tables."""
    result = _context(ctx).janitor(ignore_ttl=ignore_ttl)
    for line in result.lines():
        click.echo(line)
    click.echo("Janitor: nothing to clean." if result.is_empty else
               f"Janitor: {len(result.environments)} environment(s), {len(result.views)} view(s), "
               f"{len(result.snapshots)} snapshot(s) and {len(result.tables)} table(s) removed.")


@cli.command()
@click.pass_context
@_handle_errors
def migrate(ctx: click.Context) -> None:
    """Upgrade the state database to this meshbot's schema version."""
    before, after = _context(ctx).migrate()
    click.echo(f"State already at schema version {after}." if before == after else
               f"State migrated from schema version {before} to {after}.")


@cli.command()
@click.argument("model")
@click.option("--start", "-s", required=True, help="First day (or time) of the interval.")
@click.option("--end", "-e", required=True, help="Last day of the interval (inclusive), or a time.")
@click.option("--execution-time", default=None)
@click.option("--limit", type=int, default=None, help="At most N rows.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@_handle_errors
def evaluate(ctx: click.Context, model: str, start: str, end: str, execution_time: str | None,
             limit: int | None, as_json: bool) -> None:
    """Compute MODEL for [START, END] against prod's tables and print rows; writes nothing."""
    rows = _context(ctx).evaluate(model, start=start, end=end, limit=limit,
                                  execution_time=execution_time)
    reporter = TerminalReporter(json_mode=as_json)
    reporter.json(rows) if as_json else reporter.table(rows)


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.pass_context
@_handle_errors
def dag(ctx: click.Context, file: str) -> None:
    """Write a picture of the DAG to FILE: HTML, or SVG when FILE ends in .svg."""
    from bot.report.dag_html import DagNode, write_dag

    context = _context(ctx)
    nodes, edges = context.dag()
    path = write_dag(Path(file), [DagNode(name, kind) for name, kind in nodes], edges,
                     title=f"meshbot DAG: {context.path.name}")
    click.echo(f"DAG of {len(nodes)} model(s) written to {path}")


@cli.command()
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation (for scripts).")
@click.pass_context
@_handle_errors
def destroy(ctx: click.Context, yes: bool) -> None:
    """Drop every meshbot schema, table and view, and the state. Irreversible."""
    context = _context(ctx)
    if not yes:
        if not sys.stdin.isatty():
            raise click.UsageError("destroy needs confirmation: run it in a terminal, or pass --yes")
        if not click.confirm(f"Drop every meshbot table, view and schema of {context.path} and its "
                             "state? This cannot be undone", default=False):
            click.echo("Nothing destroyed.")
            return
    result = context.destroy()
    for line in result.lines():
        click.echo(line)
    click.echo(f"Destroyed: {len(result.tables)} table(s), {len(result.views)} view(s), "
               f"{len(result.schemas)} schema(s) and the state.")


@cli.command("test")
@click.argument("files", nargs=-1)
@click.option("-k", "patterns", multiple=True, help="Only tests whose name matches (substring or glob).")
@click.pass_context
@_handle_errors
def test_command(ctx: click.Context, files: tuple[str, ...], patterns: tuple[str, ...]) -> None:
    """Run the project's unit tests (tests/*.yaml) on local Spark."""
    result = _context(ctx).test(patterns=patterns, files=files)
    _report_tests(result, TerminalReporter())
    if not result.passed:
        sys.exit(1)


def _report_tests(result: Any, reporter: TerminalReporter) -> None:
    for test in result.results:
        reporter.text(f"{'PASS' if test.passed else 'FAIL'} {test.name} ({test.model})")
        if not test.passed:
            reporter.text(test.message)
    passed, failed = result.counts
    reporter.text(f"{passed} passed, {failed} failed in {result.seconds:.1f}s")


@cli.command()
@click.option("--model", "models", multiple=True, help="Model to audit (default: every audited model).")
@click.option("--environment", default="prod", show_default=True)
@click.option("--start", default=None)
@click.option("--end", default=None)
@click.pass_context
@_handle_errors
def audit(ctx: click.Context, models: tuple[str, ...], environment: str, start: str | None,
          end: str | None) -> None:
    """Run model audits on an environment's data."""
    report = _context(ctx).audit(models=models, environment=environment, start=start, end=end)
    reporter = TerminalReporter()
    for result in report.results:
        reporter.text(f"PASS audit `{result.audit}` on model `{result.model}`" if result.passed
                      else result.describe())
    reporter.text(f"{len(report.results) - len(report.blocking_failures) - len(report.warnings)} passed, "
                  f"{len(report.blocking_failures)} failed, {len(report.warnings)} warning(s)")
    if not report.passed:
        sys.exit(1)


@cli.command("table_diff")
@click.argument("environments", metavar="SOURCE:TARGET")
@click.argument("model", required=False)
@click.option("-o", "--on", multiple=True, help="Key column (default: the model's grain).")
@click.option("-s", "--skip-columns", multiple=True, help="Column to leave out.")
@click.option("--where", default=None, help="Spark SQL filter applied to both sides.")
@click.option("--decimals", type=int, default=3, show_default=True)
@click.option("--show-sample", is_flag=True)
@click.option("--limit", type=int, default=20, show_default=True)
@click.option("--source-table", default=None)
@click.option("--target-table", default=None)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@_handle_errors
def table_diff(ctx: click.Context, environments: str, model: str | None, on: tuple[str, ...],
               skip_columns: tuple[str, ...], where: str | None, decimals: int, show_sample: bool,
               limit: int, source_table: str | None, target_table: str | None, as_json: bool) -> None:
    """Compare MODEL between SOURCE and TARGET environments (or two tables) on Spark."""
    from bot.diff.api import to_json
    from bot.report.diff_text import table_diff_text

    if ":" not in environments:
        raise click.BadParameter("expected SOURCE:TARGET, e.g. prod:dev", param_hint="SOURCE:TARGET")
    source, target = environments.split(":", 1)
    result = _context(ctx).table_diff(source, target, model, on=on, skip=skip_columns, where=where,
                                      decimals=decimals, show_sample=show_sample, limit=limit,
                                      source_table=source_table, target_table=target_table)
    reporter = TerminalReporter(json_mode=as_json)
    reporter.json(to_json(result)) if as_json else reporter.text(table_diff_text(result))


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    import datetime as dt

    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).isoformat(timespec="seconds")


def _attach_github() -> None:
    if "github" in cli.commands:
        return
    from bot.github.cli import github_group

    cli.add_command(github_group)


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv, prog_name="meshbot")


if __name__ == "__main__":
    main()
