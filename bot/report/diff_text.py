"""Plain-text rendering of a table_diff result for the terminal."""

from __future__ import annotations

from typing import Mapping, Sequence

from bot.diff.api import TableDiffResult


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
        width = max(len(c) for c in rows.column_match_pct)
        lines += [f"  {col.ljust(width)}  {pct:6.2f}%" for col, pct in rows.column_match_pct.items()]
    if rows.samples is not None:
        for label, sample in ((f"{src} only", rows.samples.source_only),
                              (f"{tgt} only", rows.samples.target_only),
                              ("changed", rows.samples.changed)):
            if sample:
                lines += ["", f"Sample rows {label}:", *_rows_text(sample)]
    return "\n".join(lines)


def _pct(part: int, whole: int) -> str:
    return f" ({100.0 * part / whole:.2f}%)" if whole else ""


def _rows_text(rows: Sequence[Mapping[str, object]]) -> list[str]:
    columns = list(rows[0])
    widths = {c: max(len(c), *(len(str(r.get(c))) for r in rows)) for c in columns}
    out = ["  " + "  ".join(c.ljust(widths[c]) for c in columns)]
    out += ["  " + "  ".join(str(r.get(c)).ljust(widths[c]) for c in columns) for r in rows]
    return out
