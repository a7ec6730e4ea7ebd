"""Plain-text rendering of a table_diff result for the terminal (tables drawn by rich)."""

from __future__ import annotations

from rich.table import Table

from bot.diff.table_diff import TableDiffResult
from bot.report.console import rows_table, table_text


def table_diff_text(result: TableDiffResult) -> str:
    """Schema diff, row counts, per-column match % and (when fetched) samples, as text."""
    src, tgt = result.source_label, result.target_label
    title = f"Table diff {src} vs {tgt}" + (f" of `{result.model}`" if result.model else "")
    lines = [title, f"Keys: {', '.join(result.keys)}", "", "Schema Diff:"]
    schema = result.schema
    if not (schema.added or schema.removed or schema.modified):
        lines.append("  Schemas match")
    lines += [f"  + {name} ({kind})   only in {tgt}" for name, kind in schema.added]
    lines += [f"  - {name} ({kind})   only in {src}" for name, kind in schema.removed]
    lines += [f"  ~ {name}: {old} -> {new}" for name, old, new in schema.modified]
    rows = result.rows
    lines += ["", "Row Counts:",
              f"  {src} rows: {rows.source_count}",
              f"  {tgt} rows: {rows.target_count}",
              f"  joined: {rows.joined_count}",
              f"  full match: {rows.full_match_count}{_pct(rows.full_match_count, rows.joined_count)}",
              f"  partial match: {rows.partial_match_count}"
              f"{_pct(rows.partial_match_count, rows.joined_count)}",
              f"  {src} only: {rows.source_only_count}",
              f"  {tgt} only: {rows.target_only_count}"]
    for side, nulls, dups in ((src, rows.null_key_source_count, rows.duplicate_key_source_count),
                              (tgt, rows.null_key_target_count, rows.duplicate_key_target_count)):
        if nulls:
            lines.append(f"  Warning: {nulls} row(s) of {side} have a NULL key")
        if dups:
            lines.append(f"  Warning: {dups} row(s) of {side} share a duplicate key")
    if rows.column_match_pct:
        lines += ["", "Column match (% of joined rows):"]
        matches = [{"column": col, "match": f"{pct:.2f}%"} for col, pct in rows.column_match_pct.items()]
        lines += _indented(rows_table(matches))
    if rows.samples is not None:
        for label, sample in ((f"{src} only", rows.samples.source_only),
                              (f"{tgt} only", rows.samples.target_only),
                              ("changed", rows.samples.changed)):
            if sample:
                lines += ["", f"Sample rows {label}:", *_indented(rows_table(sample))]
    return "\n".join(lines)


def _pct(part: int, whole: int) -> str:
    return f" ({100.0 * part / whole:.2f}%)" if whole else ""


def _indented(table: Table) -> list[str]:
    return ["  " + line if line else line for line in table_text(table).splitlines()]
