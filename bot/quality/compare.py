"""Compare expected and actual unit test rows: by column name, float tolerance, dates as ISO text."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Mapping, Sequence

from bot.quality.results import format_rows, indent

REL_TOL = 1e-6
ABS_TOL = 1e-9
_TEMPORAL = re.compile(r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?$")


@dataclass(frozen=True)
class Comparison:
    """What differs between expected and actual rows (empty tuples and no note when equal)."""

    missing: tuple[dict[str, Any], ...] = ()
    unexpected: tuple[dict[str, Any], ...] = ()
    column_note: str = ""
    order_note: str = ""

    @property
    def equal(self) -> bool:
        return not (self.missing or self.unexpected or self.column_note or self.order_note)


def values_equal(expected: Any, actual: Any) -> bool:
    """Equality of one cell: NULLs, numbers within tolerance, dates and timestamps as ISO text.

    >>> values_equal(0.1 + 0.2, 0.3), values_equal("2024-01-01", date(2024, 1, 1))
    (True, True)
    >>> values_equal("2024-01-01T10:00:00", datetime(2024, 1, 1, 10)), values_equal(1, "1")
    (True, False)
    """
    if expected is None or actual is None:
        return expected is None and actual is None
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected == actual
    if _is_number(expected) and _is_number(actual):
        if isinstance(expected, int) and isinstance(actual, int):
            return expected == actual
        return math.isclose(float(expected), float(actual), rel_tol=REL_TOL, abs_tol=ABS_TOL)
    left, right = _temporal(expected), _temporal(actual)
    if left is not None and right is not None:
        return left == right
    if isinstance(expected, (list, tuple)) and isinstance(actual, (list, tuple)):
        return len(expected) == len(actual) and all(values_equal(e, a) for e, a in zip(expected, actual))
    if isinstance(expected, Mapping) and isinstance(actual, Mapping):
        return set(map(str, expected)) == set(map(str, actual)) and all(
            values_equal(expected[k], _get(actual, k)) for k in expected)
    return expected == actual


def _get(mapping: Mapping[Any, Any], key: Any) -> Any:
    return mapping[key] if key in mapping else mapping.get(str(key))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, Decimal)) and not isinstance(value, bool)


def _temporal(value: Any) -> datetime | None:
    """Dates, datetimes and ISO strings as naive datetimes (a date is its midnight)."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=None)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day)
    if isinstance(value, str) and _TEMPORAL.match(value.strip()):
        try:
            return datetime.fromisoformat(value.strip())
        except ValueError:
            return None
    return None


def rows_equal(expected: Mapping[str, Any], actual: Mapping[str, Any], columns: Sequence[str]) -> bool:
    return all(values_equal(expected.get(c), actual.get(c)) for c in columns)


def compare_rows(*, expected: Sequence[Mapping[str, Any]], actual: Sequence[Mapping[str, Any]],
                 expected_columns: Sequence[str], actual_columns: Sequence[str], partial: bool,
                 ordered: bool) -> Comparison:
    """Match rows by the expected columns (all actual columns must be expected unless `partial`)."""
    if not expected:
        return Comparison(unexpected=tuple(dict(row) for row in actual))
    lower_actual = {c.lower(): c for c in actual_columns}
    missing_cols = [c for c in expected_columns if c.lower() not in lower_actual]
    extra_cols = [] if partial else [c for c in actual_columns
                                     if c.lower() not in {e.lower() for e in expected_columns}]
    if missing_cols or extra_cols:
        parts = [f"not in the output: {', '.join(missing_cols)}"] if missing_cols else []
        parts += [f"not in the expected rows: {', '.join(extra_cols)}"] if extra_cols else []
        return Comparison(column_note="columns differ (" + "; ".join(parts) + ")")
    columns = list(expected_columns)
    projected = [{c: row.get(lower_actual[c.lower()]) for c in columns} for row in actual]
    unmatched = list(range(len(projected)))
    missing = []
    for row in expected:
        hit = next((i for i in unmatched if rows_equal(row, projected[i], columns)), None)
        if hit is None:
            missing.append({c: row.get(c) for c in columns})
        else:
            unmatched.remove(hit)
    unexpected = tuple(projected[i] for i in unmatched)
    note = ""
    if ordered and not missing and not unexpected and not all(
            rows_equal(e, a, columns) for e, a in zip(expected, projected)):
        note = "the same rows, in a different order (the query has ORDER BY)"
    return Comparison(missing=tuple(missing), unexpected=unexpected, order_note=note)


def describe(comparison: Comparison, *, expected: Sequence[Mapping[str, Any]],
             actual: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """A readable explanation: missing and unexpected rows as small tables."""
    if comparison.column_note:
        return (f"{comparison.column_note}\n  Expected rows:\n"
                f"{indent(format_rows(expected) if expected else '(none)', '    ')}\n"
                f"  Actual rows:\n{indent(format_rows(actual) if actual else '(none)', '    ')}")
    lines = [f"{len(comparison.missing)} expected row(s) missing, "
             f"{len(comparison.unexpected)} unexpected row(s)"]
    if comparison.missing:
        lines += ["  Missing rows (expected, not in actual):",
                  indent(format_rows(comparison.missing, columns), "    ")]
    if comparison.unexpected:
        lines += ["  Unexpected rows (actual, not expected):",
                  indent(format_rows(comparison.unexpected, columns), "    ")]
    if comparison.order_note:
        lines = [comparison.order_note, "  Expected order:", indent(format_rows(expected, columns), "    "),
                 "  Actual order:", indent(format_rows(actual, columns), "    ")]
    return "\n".join(lines)
