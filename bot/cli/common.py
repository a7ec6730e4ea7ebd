"""Helpers shared by the command modules: error handling, the Context of a click invocation, dates."""

from __future__ import annotations

import os
import select
import sys
import traceback
from functools import wraps
from typing import Any, Callable

import click

from bot.context import Context
from bot.errors import BotError, PlanError, QualityError
from bot.redact import MIN_LENGTH, redact
from bot.report.console import TerminalReporter
from bot.report.media import plain_text, workflow_command


def handle_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """A BotError is one `Error:` line (exit 1); any other exception its traceback, secrets redacted (exit 1).

    A closed output pipe ends the command quietly with exit 1.
    """
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
        except BrokenPipeError:
            if not _reader_left():
                print_redacted_traceback()
                sys.exit(1)
            # the reader of our output left (`meshbot plan --json | head`): no traceback, and nothing more to write
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(1)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception:  # noqa: BLE001 - a bug: show it as Python would, but without secrets
            print_redacted_traceback()
            sys.exit(1)
    return wrapper


def _reader_left() -> bool:
    """Whether standard output is a pipe whose reading end is closed (poll reports an error on it)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), 0)   # errors and hang-ups are always reported
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return False


def print_redacted_traceback() -> None:
    """The exception being handled, as Python prints it (chained causes too), each secret as `***`."""
    sys.stderr.write(plain_text(redact("".join(traceback.format_exc()))))
    sys.stderr.flush()


def add_github_mask(value: str) -> None:
    """Tell the GitHub Actions runner to mask `value` in the job log (on stderr: stdout may be JSON)."""
    for line in github_mask_lines(value):
        print(line, file=sys.stderr, flush=True)


def github_mask_lines(value: str) -> list[str]:
    """The `::add-mask::` commands for `value`: each line, and its lower and upper case.

    The runner matches exactly, so a value a message echoes lowercased needs a mask of its own.
    `%` is escaped as workflow commands require.

    >>> github_mask_lines("Ab%cd\\nxy")
    ['::add-mask::Ab%25cd', '::add-mask::ab%25cd', '::add-mask::AB%25CD']
    """
    forms = (form for line in value.splitlines() for form in (line.strip(), line.strip().lower(),
                                                              line.strip().upper()))
    return [workflow_command("add-mask", form) for form in dict.fromkeys(forms) if len(form) >= MIN_LENGTH]


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
    from bot.timeline.times import now_ms, to_ms

    now = now_ms()   # one base for relative phrases such as `2 days ago`
    if to_ms(start, relative_base=now) > to_ms(end, relative_base=now):
        raise PlanError(f"`--start {start}` is after `--end {end}`; give a start on or before the end")


def context_of(ctx: click.Context) -> Context:
    return ctx.find_object(Context)  # type: ignore[return-value]


def iso(ms: int | None) -> str | None:
    """Epoch milliseconds as an ISO-8601 UTC timestamp (None stays None)."""
    if ms is None:
        return None
    from bot.timeline.times import to_datetime

    return to_datetime(ms).isoformat(timespec="seconds")


def report_tests(result: Any, reporter: TerminalReporter) -> None:
    """One PASS line per passed unit test, one FAIL block per failed one (its message names the test, its
    file and model once), and a closing count."""
    for test in result.results:
        if test.passed or not test.message:
            reporter.text(f"{'PASS' if test.passed else 'FAIL'} {test.name} ({test.model})")
        else:
            reporter.text(f"FAIL {test.message}")
    passed, failed = result.counts
    reporter.text(f"{passed} passed, {failed} failed in {result.seconds:.1f}s")


def tests_failed(result: Any) -> QualityError:
    """The error a plan stops with once `report_tests` printed the failures: their count, not their text again."""
    passed, failed = result.counts
    return QualityError(f"{failed} of {passed + failed} unit test(s) failed (shown above); fix them, or plan "
                        "with --skip-tests", failures=result.failures)
