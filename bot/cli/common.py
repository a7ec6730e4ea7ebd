"""Helpers shared by the command modules: error handling, the Context of a click invocation, dates."""

from __future__ import annotations

import sys
from functools import wraps
from typing import Any, Callable

import click

from bot.context import Context
from bot.errors import BotError, PlanError
from bot.report.console import TerminalReporter


def handle_errors(func: Callable[..., Any]) -> Callable[..., Any]:
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


def check_range(start: str | None, end: str | None) -> None:
    """Refuse `--start` after `--end` (any command, any environment) before anything is read or run.

    >>> check_range("2024-01-05", "2024-01-01")
    Traceback (most recent call last):
    ...
    bot.errors.PlanError: `--start 2024-01-05` is after `--end 2024-01-01`; give a start on or before the end
    >>> check_range("2024-01-01", "2024-01-01")
    """
    if not start or not end:
        return
    from bot.project.timeutil import now_ms, to_ms

    now = now_ms()   # one base for relative phrases such as `2 days ago`
    if to_ms(start, relative_base=now) > to_ms(end, relative_base=now):
        raise PlanError(f"`--start {start}` is after `--end {end}`; give a start on or before the end")


def context_of(ctx: click.Context) -> Context:
    return ctx.find_object(Context)  # type: ignore[return-value]


def iso(ms: int | None) -> str | None:
    """Epoch milliseconds as an ISO-8601 UTC timestamp (None stays None)."""
    if ms is None:
        return None
    from bot.project.timeutil import to_datetime

    return to_datetime(ms).isoformat(timespec="seconds")


def report_tests(result: Any, reporter: TerminalReporter) -> None:
    """One PASS/FAIL line per unit test, failure details, and a closing count."""
    for test in result.results:
        reporter.text(f"{'PASS' if test.passed else 'FAIL'} {test.name} ({test.model})")
        if not test.passed:
            reporter.text(test.message)
    passed, failed = result.counts
    reporter.text(f"{passed} passed, {failed} failed in {result.seconds:.1f}s")
