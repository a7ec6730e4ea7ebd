"""Commands that plan and inspect: init, info, render, plan, environments, fetchdf."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

from bot.cli.common import check_range, context_of, handle_errors, iso, report_tests, tests_failed
from bot.context import Context
from bot.plan.definition import PlanOptions
from bot.timeline.times import to_datetime
from bot.report.console import TerminalReporter
from bot.cli.environment_list import applied_by, history_changes, relative


@click.command()
@click.argument("directory", type=click.Path(file_okay=False))
@handle_errors
def init(directory: str) -> None:
    """Write the example project into DIRECTORY."""
    from bot.project.example import write_example

    write_example(Path(directory))
    click.echo(f"Example project written to {directory}")


@click.command()
@click.pass_context
@handle_errors
def info(ctx: click.Context) -> None:
    """Models, gateway and state of the project."""
    context = context_of(ctx)
    reporter = TerminalReporter()
    reporter.text(f"Project: {', '.join(str(path) for path in context.paths)}")
    reporter.text(f"Gateway: {context.gateway.name}")
    reporter.text(f"Models: {len(context.models)}")
    reporter.text(f"State: {context.gateway.state_connection.type} (schema version "
                  f"{context.state.schema_version()})")
    reporter.text(f"Environments: {', '.join(context.environment_names()) or 'none'}")


@click.command()
@click.argument("model")
@click.option("--start", default=None, help="Render for the interval starting here (default: a reference day).")
@click.option("--end", default=None, help="End of that interval, inclusive.")
@click.option("--environment", default="prod", show_default=True,
              help="Name other models' tables as this environment's views.")
@click.pass_context
@handle_errors
def render(ctx: click.Context, model: str, start: str | None, end: str | None, environment: str) -> None:
    """Print MODEL's query rendered as Spark SQL."""
    check_range(start, end)
    click.echo(context_of(ctx).render(model, start=start, end=end, environment=environment))


@click.command()
@click.argument("environment", required=False, default="prod")
@click.option("--explain", is_flag=True, help="Show the plan; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON; change nothing.")
@click.option("--auto-apply", is_flag=True, help="Apply without asking.")
@click.option("--no-prompts", is_flag=True, help="Never ask; with --auto-apply applies, else only shows.")
@click.option("--skip-backfill", is_flag=True,
              help="Create tables and views but compute no interval (a later plan or run fills them).")
@click.option("--skip-tests", is_flag=True, help="Do not run the unit tests before planning.")
@click.option("--forward-only", is_flag=True,
              help="Change the existing tables in place (no new versions, no backfill of history).")
@click.option("--allow-destructive-model", multiple=True, metavar="MODEL",
              help="A forward-only model that may drop or retype columns (repeat for several).")
@click.option("--effective-from", default=None,
              help="Forward-only changes apply to intervals from this date on.")
@click.option("--restate-model", "-r", multiple=True, metavar="MODEL",
              help="Recompute this model's intervals in the plan's range (repeat for several).")
@click.option("--include-unmodified", is_flag=True,
              help="Give the environment a view for every model, not only the changed ones.")
@click.option("--no-gaps", is_flag=True,
              help="Refuse a plan that would leave a missing interval in a changed model's table.")
@click.option("--start", "-s", default=None, help="First day (or time) to backfill (default: each model's start).")
@click.option("--end", "-e", default=None, help="Last day to backfill, inclusive (default: the execution time).")
@click.option("--execution-time", default=None,
              help="Plan as of this time instead of now (what is due, relative dates).")
@click.pass_context
@handle_errors
def plan(ctx: click.Context, environment: str, explain: bool, as_json: bool, auto_apply: bool,
         no_prompts: bool, **flags: Any) -> None:
    """Plan ENVIRONMENT (default prod) against the project, and apply it."""
    from bot.plan.summary import plan_summary_text, plan_to_json

    check_range(flags["start"], flags["end"])
    context = context_of(ctx)
    options = PlanOptions(
        skip_backfill=flags["skip_backfill"], forward_only=flags["forward_only"],
        include_unmodified=flags["include_unmodified"], no_gaps=flags["no_gaps"],
        start=flags["start"], end=flags["end"], execution_time=flags["execution_time"],
        effective_from=flags["effective_from"], restate_models=tuple(flags["restate_model"]),
        allow_destructive_models=tuple(flags["allow_destructive_model"]),
        skip_tests=flags["skip_tests"])
    reporter = TerminalReporter(json_mode=as_json)
    with reporter.phase("Loading the project"):
        _load_project(context)
    if auto_apply and not (explain or as_json):
        # the Connect client's imports and session overlap planning; not loading, whose imports of the
        # project's Python files read sys.modules, which an import on another thread changes
        context.attach_early()
    with reporter.phase(f"Planning `{environment}`"):
        the_plan = context.plan(environment, options=options)
    if as_json:
        reporter.json(plan_to_json(the_plan))
        return
    reporter.text(plan_summary_text(the_plan))
    for warning in the_plan.warnings:
        reporter.warning(warning)
    previous = the_plan.previous_environment
    if explain and not the_plan.is_up_to_date:
        from bot.plan.stages import plan_stages, stage_lines

        reporter.text("\n".join(stage_lines(plan_stages(the_plan))))
    if explain or the_plan.is_up_to_date:
        return
    if previous is not None and previous.finalized_ts is None:
        reporter.text(f"Environment `{previous.name}` was not finalized (an earlier plan stopped "
                      "before its views were in place); applying finishes it first.")
    if not flags["skip_tests"] and context.project.test_files:
        with reporter.phase("Running the unit tests"):
            tests = context.test()
        if not tests.passed:
            report_tests(tests, reporter)
            raise tests_failed(tests)
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
    context.stage_log = None if reporter.interactive else reporter.text   # logs: a line per stage, with its time
    with reporter.progress("Backfilling") as progress:
        result = context.apply(the_plan, progress=progress)
    for warning in result.audit_warnings:
        reporter.warning(warning.describe())
    reporter.text(f"Environment `{result.environment}` updated: {len(result.evaluated)} batch(es) "
                  f"evaluated, {result.views_created} view(s) in place.")


@click.command()
@click.argument("environment", required=False)
@click.option("--history", is_flag=True, help="List the plans ENVIRONMENT served, newest first: what each changed "
              "and who or what applied it.")
@click.option("--json", "as_json", is_flag=True, help="Print the environments as JSON.")
@click.pass_context
@handle_errors
def environments(ctx: click.Context, environment: str | None, history: bool, as_json: bool) -> None:
    """List environments, or with ENVIRONMENT --history the plans it served (newest first)."""
    reporter = TerminalReporter(json_mode=as_json)
    now = int(time.time() * 1000)
    if history or environment:
        if not (history and environment):
            raise click.UsageError("give an environment and --history: `meshbot environments prod --history`")
        plans = history_changes(context_of(ctx).environment_history(environment))
        if as_json:
            reporter.json([{"plan_id": p.entry.plan_id, "promoted_at": iso(p.entry.promoted_ts) if p.entry.promoted_ts else None,
                            "finalized_at": iso(p.entry.finalized_ts), "snapshot_count": len(p.entry.snapshots),
                            "current": i == 0, "changed": list(p.changed), "added": list(p.added),
                            "removed": list(p.removed), "source": p.entry.source or None,
                            "applied_by": applied_by(p.entry.source)} for i, p in enumerate(plans)])
        else:
            reporter.table([{"Plan": p.entry.plan_id[:12] + (" (current)" if i == 0 else ""),
                             "Promoted": f"{_when(p.entry.promoted_ts)} ({relative(p.entry.promoted_ts, now)})",
                             "Changes": p.summary, "Applied by": applied_by(p.entry.source)}
                            for i, p in enumerate(plans)])
        return
    envs = context_of(ctx).state.get_environments()
    if as_json:
        reporter.json([{"name": e.name, "snapshot_count": len(e.snapshots), "expires_at": iso(e.expiration_ts),
                        "finalized_at": iso(e.finalized_ts)} for e in envs])
        return
    reporter.table([{"Environment": e.name, "Models": len(e.snapshots), "Plan": e.plan_id[:12],
                     "Finalized": relative(e.finalized_ts, now, none="not yet (its plan is applying, or failed)"),
                     "Expires": _expires(e.expiration_ts, now)} for e in envs])


def _when(ms: int) -> str:
    return to_datetime(ms).strftime("%Y-%m-%d %H:%M UTC")


def _expires(ms: int | None, now: int) -> str:
    """'in 6 days', 'never', or 'expired 2 days ago' (the janitor removes it on its next run)."""
    if ms is None:
        return "never"
    return relative(ms, now) if ms > now else f"expired {relative(ms, now)}"


@click.command()
@click.argument("environment", default="prod")
@click.option("--with-project", is_flag=True,
              help="Leave out changes the project's files (a checkout of the default branch) would deploy too.")
@click.option("--json", "as_json", is_flag=True, help="Print the drift as JSON.")
@click.pass_context
@handle_errors
def drift(ctx: click.Context, environment: str, with_project: bool, as_json: bool) -> None:
    """What changed ENVIRONMENT (default prod) since the default branch's last deploy, by any other plan:
    which models, by which plan, when and from where (the state's history; Spark never starts)."""
    from dataclasses import asdict

    from bot.report.markdown import render

    context = context_of(ctx)
    found = context.drift(environment, head_versions=context.model_versions() if with_project else None)
    reporter = TerminalReporter(json_mode=as_json)
    if as_json:
        reporter.json({**asdict(found), "drifted": found.drifted})
    else:
        reporter.text(render("drift.txt.j2", found))


@click.command()
@click.argument("sql")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
@click.option("--limit", type=int, default=None, help="At most N rows.")
@click.option("--allow-writes", is_flag=True,
              help="Also run statements that are not queries (DDL, DML, SET...); off by default.")
@click.pass_context
@handle_errors
def fetchdf(ctx: click.Context, sql: str, as_json: bool, limit: int | None, allow_writes: bool) -> None:
    """Run one query (SELECT, WITH, VALUES, SHOW, DESCRIBE, EXPLAIN) on the gateway's Spark; print the rows."""
    rows = context_of(ctx).fetchdf(sql, limit=limit, allow_writes=allow_writes)
    reporter = TerminalReporter(json_mode=as_json)
    reporter.json(rows) if as_json else reporter.table(rows)


COMMANDS = (init, info, render, plan, environments, drift, fetchdf,)
