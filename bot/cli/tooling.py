"""Commands that check and tidy project files without Spark: lint and format."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from bot.cli.common import context_of, handle_errors
from bot.quality.lint.runner import LintResult
from bot.report.console import TerminalReporter


def report_lint(result: LintResult, reporter: TerminalReporter, *, root: Path) -> None:
    """One line per violation (`file:line: level [rule] model name: message`), then a count."""
    for violation in result.violations:
        reporter.text(violation.describe(root))
    if result.violations:
        reporter.text(f"{len(result.errors)} error(s), {len(result.warnings)} warning(s)")


def _relative(path: Path, root: Path) -> str:
    try:
        return os.path.relpath(path, root)
    except ValueError:
        return str(path)


@click.command()
@click.pass_context
@handle_errors
def lint(ctx: click.Context) -> None:
    """Check every model with the linter rules of the project's `linter:` config; exit 1 on errors."""
    context = context_of(ctx)
    reporter = TerminalReporter()
    result = context.lint()
    report_lint(result, reporter, root=context.path)
    if not context.config.linter.enabled:
        reporter.text("The linter is off (`linter.enabled` is not true in config.yaml): nothing was checked.")
    elif not result.violations:
        reporter.text("No linter violations.")
    if result.errors:
        sys.exit(1)


@click.command(name="format")
@click.argument("paths", nargs=-1, type=click.Path(exists=True, dir_okay=False))
@click.option("--check", is_flag=True, help="Change nothing; exit 1 listing the files that would change.")
@click.pass_context
@handle_errors
def format_command(ctx: click.Context, paths: tuple[str, ...], check: bool) -> None:
    """Rewrite model and audit files (or only PATHS) the way `sqlmesh format` does."""
    context = context_of(ctx)
    reporter = TerminalReporter()
    changed = context.format(check=check, paths=paths)
    for path in changed:
        reporter.text(f"{_relative(path, context.path)} {'needs reformatting' if check else 'reformatted'}")
    if check and changed:
        reporter.text(f"{len(changed)} file(s) need reformatting.")
        sys.exit(1)
    if not changed:
        reporter.text("All files are formatted.")


COMMANDS = (lint, format_command)
