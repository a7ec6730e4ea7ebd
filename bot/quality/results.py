"""Frozen results of unit tests and audits, the built-in audit shape, and a small row-table formatter."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from sqlglot import exp

from bot.errors import QualityError

# A built-in audit maps (relation to audit, **arguments as SQL expressions) to its violating-rows query.
AuditBuilder = Callable[..., exp.Select]


@dataclass(frozen=True)
class BuiltInAudit:
    """One built-in audit: its name, its query builder, and the argument names it requires."""

    name: str
    build: AuditBuilder
    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()


@dataclass(frozen=True)
class TestResult:
    """One unit test's outcome; `message` explains a failure (expected vs actual rows)."""

    __test__ = False  # not a pytest class

    name: str
    file: Path
    model: str
    passed: bool
    message: str = ""
    expected_rows: tuple[dict[str, Any], ...] = ()
    actual_rows: tuple[dict[str, Any], ...] = ()
    seconds: float = 0.0


@dataclass(frozen=True)
class TestSuiteResult:
    """Every selected unit test's result, in file then definition order."""

    __test__ = False

    results: tuple[TestResult, ...]
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def failures(self) -> tuple[TestResult, ...]:
        return tuple(r for r in self.results if not r.passed)

    @property
    def counts(self) -> tuple[int, int]:
        """(passed, failed)."""
        failed = len(self.failures)
        return len(self.results) - failed, failed

    def error(self) -> QualityError | None:
        """A QualityError listing every failed test, or None when all passed."""
        if self.passed:
            return None
        text = "\n\n".join(f.message for f in self.failures)
        return QualityError(f"{len(self.failures)} of {len(self.results)} unit test(s) failed\n{text}",
                            failures=self.failures)


@dataclass(frozen=True)
class AuditResult:
    """One audit of one model: how many rows violate it, and up to 5 of them."""

    audit: str
    model: str
    blocking: bool
    violation_count: int
    sample_rows: tuple[dict[str, Any], ...] = ()
    query: str = ""
    source: str = ""     # file:line of a custom audit; '' for a built-in one

    @property
    def passed(self) -> bool:
        return self.violation_count == 0

    def describe(self) -> str:
        kind = "blocking" if self.blocking else "non-blocking"
        written = f", {self.source}" if self.source else ""
        text = (f"audit `{self.audit}` ({kind}{written}) on model `{self.model}` failed: "
                f"{self.violation_count} violating row(s)")
        if self.sample_rows:
            text += "\n" + indent(format_rows(self.sample_rows), "  ")
        return text


@dataclass(frozen=True)
class AuditReport:
    """Audit results across models; blocking failures are what stops a plan."""

    results: tuple[AuditResult, ...]
    skipped: tuple[str, ...] = ()    # models whose table no plan has built yet

    @property
    def failures(self) -> tuple[AuditResult, ...]:
        """Every audit that failed, blocking or not (`meshbot audit` exits 1 on any, as `sqlmesh audit`)."""
        return tuple(r for r in self.results if not r.passed)

    @property
    def blocking_failures(self) -> tuple[AuditResult, ...]:
        return tuple(r for r in self.results if r.blocking and not r.passed)

    @property
    def warnings(self) -> tuple[AuditResult, ...]:
        return tuple(r for r in self.results if not r.blocking and not r.passed)

    @property
    def passed(self) -> bool:
        return not self.blocking_failures


def audit_error(results: Iterable[AuditResult]) -> QualityError | None:
    """A QualityError naming every failed blocking audit (model, count, sample), or None."""
    failed = tuple(r for r in results if r.blocking and not r.passed)
    if not failed:
        return None
    text = "\n".join(r.describe() for r in failed)
    return QualityError(f"{len(failed)} blocking audit(s) failed\n{text}", failures=failed)


def raise_for_audits(results: Iterable[AuditResult]) -> None:
    """Raise QualityError when any blocking audit failed."""
    error = audit_error(results)
    if error is not None:
        raise error


def indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def format_rows(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None,
                *, max_rows: int = 20) -> str:
    """Rows as a small pipe table.

    >>> print(format_rows([{"id": 1, "name": "a"}, {"id": 22, "name": None}]))
    id | name
    ---+-----
    1  | a
    22 | NULL
    """
    if columns is None:
        columns = list(dict.fromkeys(c for row in rows for c in row))
    shown = [[_cell(row.get(c)) for c in columns] for row in rows[:max_rows]]
    widths = [max([len(c)] + [len(r[i]) for r in shown]) for i, c in enumerate(columns)]
    lines = [" | ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip(),
             "-+-".join("-" * w for w in widths)]
    lines += [" | ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in shown]
    if len(rows) > max_rows:
        lines.append(f"... and {len(rows) - max_rows} more row(s)")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if hasattr(value, "isoformat"):
        return value.isoformat(sep=" ") if hasattr(value, "hour") else value.isoformat()
    return str(value)
