"""Terminal output: plan summaries, tables and a rich progress bar (plain lines when not a terminal)."""

from __future__ import annotations

import io
import json
import shutil
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator, Mapping, Sequence, TextIO

from bot.plan.definition import BatchStarted, ProgressCallback, StillRunning
from bot.report.media import plain_text

if TYPE_CHECKING:
    from rich.table import Table

_UNBOUNDED_WIDTH = 100_000   # piped output: a table as wide as its widest row


@dataclass
class TerminalReporter:
    """Writes human output to stdout and errors to stderr; `json_mode` prints machine JSON only. Text is
    printed as plain text (bot.report.media.plain_text): a value from the warehouse or a project moves no
    cursor, sets no colour and forges no GitHub Actions workflow command."""

    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)
    json_mode: bool = False

    @property
    def interactive(self) -> bool:
        return self.out is not None and self.out.isatty()   # None: the process started with stdout closed

    def text(self, message: str) -> None:
        print(plain_text(message), file=self.out)

    def json(self, payload: object) -> None:
        print(json.dumps(payload, indent=2, default=str, sort_keys=False), file=self.out)

    def error(self, message: str) -> None:
        print(plain_text(f"Error: {message}"), file=self.err)

    def warning(self, message: str) -> None:
        print(plain_text(f"Warning: {message}"), file=self.err)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Outside a terminal (a CI log), a line on stderr when the phase starts and one when it ends, with
        its elapsed time; nothing in a terminal or with `json_mode`."""
        if self.json_mode or self.interactive or self.err is None:
            yield
            return
        print(plain_text(f"{name} ..."), file=self.err, flush=True)
        began = time.monotonic()
        try:
            yield
        except BaseException:
            print(plain_text(f"{name}: stopped after {time.monotonic() - began:.1f} s"), file=self.err, flush=True)
            raise
        print(plain_text(f"{name}: done in {time.monotonic() - began:.1f} s"), file=self.err, flush=True)

    def table(self, rows: Sequence[Mapping[str, object]], *, title: str | None = None) -> None:
        """Rows as a rich table: the terminal's width in a terminal, each row on one line otherwise."""
        if not rows:
            self.text("(no rows)")
            return
        width = shutil.get_terminal_size().columns if self.interactive else None
        self.text(table_text(rows_table(rows, title=title), width=width))

    @contextmanager
    def progress(self, description: str) -> Iterator[ProgressCallback]:
        """Yields a callback(message, done, total): a rich bar in a terminal, one line per batch otherwise.

        A finished batch's line ends with its duration (timed from its BatchStarted message); a
        StillRunning heartbeat is a line of its own when not in a terminal, the bar's text in one.
        """
        if self.json_mode:
            yield lambda message, done, total: None
            return
        if not self.interactive:
            yield progress_lines(lambda line: print(plain_text(line), file=self.out, flush=True))
            return
        clock = BatchClock()
        from rich.console import Console   # only for interactive applies: keeps `plan --explain` start-up short
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        console = Console(file=self.out, markup=False, highlight=False, emoji=False)
        with Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=console, transient=False) as bar:
            task = bar.add_task(description, total=None)

            def update(message: str, done: int, total: int) -> None:
                shown = clock.finished(message)
                if shown is not None and clock.timed:   # a finished batch: its line above the bar, as SQLMesh's
                    bar.console.print(plain_text(f"[{done}/{total}] {shown}"))
                bar.update(task, completed=done, total=total, description=plain_text(f"{description}: {message}"))

            yield update


def progress_lines(write: Callable[[str], None]) -> ProgressCallback:
    """A progress callback for a log: `[done/total] message` per finished batch (with its duration) and per
    heartbeat or notice; `write` gets each line (and escapes it)."""
    clock = BatchClock()

    def line(message: str, done: int, total: int) -> None:
        shown = clock.finished(message)
        if shown is not None:
            write(f"[{done}/{total}] {shown}")

    return line


@dataclass
class BatchClock:
    """Times each batch from its BatchStarted message to its finished line, by thread (a batch starts and
    ends on one thread; several run at once)."""

    started: dict[int, float] = field(default_factory=dict)
    timed: bool = False   # whether the last finished line carried a duration

    def finished(self, message: str) -> str | None:
        """The line to show for `message`: None for a BatchStarted, the message with the batch's
        duration for the line that ends it, else the message as it is."""
        thread = threading.get_ident()
        if isinstance(message, BatchStarted):
            self.started[thread] = time.monotonic()
            return None
        began = None if isinstance(message, StillRunning) else self.started.pop(thread, None)
        self.timed = began is not None
        return message if began is None else f"{message}  {time.monotonic() - began:.2f}s"


def rows_table(rows: Sequence[Mapping[str, object]], *, title: str | None = None) -> "Table":
    """A rich Table with the first row's keys as columns; None shows as NULL."""
    from rich import box
    from rich.table import Table

    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    columns = list(rows[0])
    for column in columns:
        table.add_column(str(column), overflow="fold")
    for row in rows:
        table.add_row(*(_cell(row.get(c)) for c in columns))
    return table


def table_text(table: "Table", *, width: int | None = None) -> str:
    """A rich Table as plain text (no colour, no markup: cell text is shown as is), trailing blanks cut.

    Without `width` the table keeps its natural width, so piped output never wraps a row.
    """
    from rich.console import Console

    console = Console(width=width or _UNBOUNDED_WIDTH, file=io.StringIO(), color_system=None,
                      markup=False, emoji=False, highlight=False)
    with console.capture() as captured:
        console.print(table)
    return "\n".join(line.rstrip() for line in captured.get().rstrip("\n").splitlines())


def _cell(value: object) -> str:
    return "NULL" if value is None else str(value)
