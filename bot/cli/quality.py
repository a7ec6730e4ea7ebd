"""Quality commands: unit tests, audits and table_diff."""

from __future__ import annotations

import sys

import click

from bot.cli.common import check_range, context_of, handle_errors, report_tests
from bot.report.console import TerminalReporter


@click.command("test")
@click.argument("files", nargs=-1)
@click.option("-k", "patterns", multiple=True, help="Only tests whose name matches (substring or glob).")
@click.pass_context
@handle_errors
def test_command(ctx: click.Context, files: tuple[str, ...], patterns: tuple[str, ...]) -> None:
    """Run the project's unit tests (tests/**/test*.yaml) on local Spark."""
    reporter = TerminalReporter()
    with reporter.phase("Running the unit tests"):
        result = context_of(ctx).test(patterns=patterns, files=files)
    report_tests(result, reporter)
    if not result.passed:
        sys.exit(1)




@click.command()
@click.option("--model", "models", multiple=True, help="Model to audit (default: every audited model).")
@click.option("--environment", default=None,
              help="Audit this environment's tables (default: the tables of the model versions the project's "
                   "files define, built by any plan, applied or not, as `sqlmesh audit` does).")
@click.option("--start", default=None, help="Audit the rows of this interval only (default: all).")
@click.option("--end", default=None, help="End of the interval, inclusive (default: all).")
@click.pass_context
@handle_errors
def audit(ctx: click.Context, models: tuple[str, ...], environment: str | None, start: str | None,
          end: str | None) -> None:
    """Run model audits; exit 1 when any audit fails, blocking or not (as `sqlmesh audit`)."""
    check_range(start, end)
    report = context_of(ctx).audit(models=models, environment=environment, start=start, end=end)
    reporter = TerminalReporter()
    for result in report.results:
        reporter.text(f"PASS audit `{result.audit}` on model `{result.model}`" if result.passed
                      else result.describe())
    for name in report.skipped:
        reporter.text(f"SKIPPED model `{name}`: no plan has built its current version yet")
    reporter.text(f"{len(report.results) - len(report.failures)} passed, {len(report.blocking_failures)} failed, "
                  f"{len(report.warnings)} non-blocking failed, {len(report.skipped)} model(s) skipped")
    if report.failures:
        sys.exit(1)


@click.command("table_diff")
@click.argument("environments", metavar="SOURCE:TARGET")
@click.argument("model", required=False)
@click.option("-o", "--on", multiple=True, help="Key column (default: the model's grain).")
@click.option("-s", "--skip-columns", multiple=True, help="Column to leave out.")
@click.option("--where", default=None, help="Spark SQL filter applied to both sides.")
@click.option("--decimals", type=int, default=3, show_default=True,
              help="Compare floating-point values rounded to this many decimals.")
@click.option("--show-sample", is_flag=True, help="Print sample rows that differ or exist on one side only.")
@click.option("--limit", type=int, default=20, show_default=True, help="At most N sample rows.")
@click.option("--source-table", default=None, help="Compare this table instead of the source environment's view.")
@click.option("--target-table", default=None, help="Compare this table instead of the target environment's view.")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.pass_context
@handle_errors
def table_diff(ctx: click.Context, environments: str, model: str | None, on: tuple[str, ...],
               skip_columns: tuple[str, ...], where: str | None, decimals: int, show_sample: bool,
               limit: int, source_table: str | None, target_table: str | None, as_json: bool) -> None:
    """Compare MODEL between SOURCE and TARGET environments (or two tables) on Spark."""
    from bot.diff.arguments import TableDiffOptions
    from bot.diff.table_diff import to_json
    from bot.errors import PlanError
    from bot.report.diff_text import table_diff_text

    if ":" not in environments:
        raise click.BadParameter("expected SOURCE:TARGET, e.g. prod:dev", param_hint="SOURCE:TARGET")
    source, target = environments.split(":", 1)
    if not source.strip() or not target.strip():
        raise PlanError(f"table_diff: `{environments}` needs both sides, e.g. prod:dev or db.a:db.b")
    options = TableDiffOptions(on=on, skip=skip_columns, where=where, decimals=decimals, show_sample=show_sample,
                               limit=limit, source_table=source_table, target_table=target_table)
    options.check(source, target, model)
    reporter = TerminalReporter(json_mode=as_json)
    with reporter.phase(f"Diffing {source}:{target}"):
        result = context_of(ctx).table_diff(source, target, model, options=options)
    reporter.json(to_json(result)) if as_json else reporter.text(table_diff_text(result))


COMMANDS = (test_command, audit, table_diff,)
