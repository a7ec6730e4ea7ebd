"""Terminal output: plan summaries, tables and a rich progress bar (plain lines when not a terminal)."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, Mapping, Sequence, TextIO

from bot.plan.definition import ProgressCallback


@dataclass
class TerminalReporter:
    """Writes human output to stdout and errors to stderr; `json_mode` prints machine JSON only."""

    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)
    json_mode: bool = False

    @property
    def interactive(self) -> bool:
        return self.out.isatty()

    def text(self, message: str) -> None:
        print(message, file=self.out)

    def json(self, payload: object) -> None:
        print(json.dumps(payload, indent=2, default=str, sort_keys=False), file=self.out)

    def error(self, message: str) -> None:
        print(f"Error: {message}", file=self.err)

    def warning(self, message: str) -> None:
        print(f"Warning: {message}", file=self.err)

    def table(self, rows: Sequence[Mapping[str, object]], *, title: str | None = None) -> None:
        if not rows:
            self.text("(no rows)")
            return
        columns = list(rows[0])
        widths = {c: max(len(str(c)), *(len(_cell(r.get(c))) for r in rows)) for c in columns}
        if title:
            self.text(title)
        self.text("  ".join(str(c).ljust(widths[c]) for c in columns))
        self.text("  ".join("-" * widths[c] for c in columns))
        for row in rows:
            self.text("  ".join(_cell(row.get(c)).ljust(widths[c]) for c in columns))

    @contextmanager
    def progress(self, description: str) -> Iterator[ProgressCallback]:
        """Yields a callback(message, done, total): a rich bar in a terminal, one line per batch otherwise."""
        if self.json_mode:
            yield lambda message, done, total: None
            return
        if not self.interactive:
            def line(message: str, done: int, total: int) -> None:
                print(f"[{done}/{total}] {message}", file=self.out, flush=True)

            yield line
            return
        from rich.console import Console   # only for interactive applies: keeps `plan --explain` start-up short
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        console = Console(file=self.out)
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=console, transient=False) as bar:
            task = bar.add_task(description, total=None)

            def update(message: str, done: int, total: int) -> None:
                bar.update(task, completed=done, total=total, description=f"{description}: {message}")

            yield update


def _cell(value: object) -> str:
    return "NULL" if value is None else str(value)
