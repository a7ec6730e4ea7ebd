"""Error hierarchy: every failure a user can cause is a BotError with a readable message."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from bot.redact import redact


class BotError(Exception):
    """Root of every error meshbot reports to a user (exit code 1, no traceback).

    Its text never shows a registered secret (bot.redact), wherever it is printed.
    """

    def __str__(self) -> str:
        return redact(super().__str__())


@dataclass(frozen=True)
class SourceLocation:
    """Where in a project file a problem was found."""

    path: Path | str
    line: int | None = None
    col: int | None = None

    def __str__(self) -> str:
        text = str(self.path)
        if self.line is not None:
            text += f":{self.line}"
            if self.col is not None:
                text += f":{self.col}"
        return text


class ConfigError(BotError):
    """A project file (config, model, seed, test, YAML) is invalid.

    The message always starts with the file (and line when known) so users can jump to it.
    """

    def __init__(self, message: str, *, path: Path | str | None = None,
                 line: int | None = None, col: int | None = None, snippet: str | None = None):
        self.location = SourceLocation(path, line, col) if path is not None else None
        self.snippet = snippet
        self.detail = message
        text = f"{self.location}: {message}" if self.location else message
        if snippet:
            text += "\n" + snippet
        super().__init__(text)


class PlanError(BotError):
    """A plan cannot be built or applied as asked (bad flags, removed-but-referenced models...)."""


class CycleError(PlanError):
    """Models that depend on each other in a loop; `cycle` lists them parent -> child."""

    def __init__(self, cycle: Sequence[str]):
        self.cycle = tuple(cycle)
        super().__init__("models depend on each other in a cycle: " + " -> ".join([*self.cycle, self.cycle[0]]))


class StateError(BotError):
    """The state database is unreachable, too new, or inconsistent."""


class ConflictError(StateError):
    """Another plan was promoted to the same environment after this plan was computed."""


class EngineError(BotError):
    """Spark failed to create or evaluate something; names the model and Spark's message."""


class QualityError(BotError):
    """Unit tests or blocking audits failed; carries every failure, not just the first."""

    def __init__(self, message: str, failures: tuple = ()):
        self.failures = failures
        super().__init__(message)


class GithubError(BotError):
    """The GitHub API refused a request after retries, or the event cannot be handled."""
