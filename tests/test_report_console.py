"""Terminal tables: rich tables rendered as plain text for `environments`, `fetchdf`, `evaluate` and table_diff."""

from __future__ import annotations

import io

from bot.diff.table_diff import TableDiffResult
from bot.diff.rows import DiffSamples, RowDiff
from bot.diff.schema import SchemaDiff
from bot.report.console import TerminalReporter
from bot.report.diff_text import table_diff_text


def _printed(rows, **kwargs) -> str:
    out = io.StringIO()
    TerminalReporter(out=out).table(rows, **kwargs)
    return out.getvalue()


def test_rows_print_as_an_aligned_table_with_nulls_and_markup_shown_as_is():
    text = _printed([{"name": "prod", "snapshot_count": 3, "expires_at": None},
                     {"name": "dev [bold]x[/bold]", "snapshot_count": 12, "expires_at": "2024-01-01"}],
                    title="Environments")
    assert text.splitlines() == [
        "Environments",
        "name                 snapshot_count   expires_at",
        "─" * 48,
        "prod                 3                NULL",
        "dev [bold]x[/bold]   12               2024-01-01",
    ]


def test_piped_rows_never_wrap_however_wide():
    wide = {f"column_{i}": "v" * 30 for i in range(12)}
    lines = _printed([wide, wide]).splitlines()
    assert len(lines) == 4 and all(line.count("v" * 30) == 12 for line in lines[2:])


def test_no_rows():
    assert _printed([]) == "(no rows)\n"


def test_table_diff_text_draws_column_matches_and_samples_as_tables():
    schema = SchemaDiff(source=(("id", "int"), ("amount", "double")), target=(("id", "int"), ("amount", "double")),
                        added=(), removed=(), modified=())
    rows = RowDiff(source_count=3, target_count=3, joined_count=3, full_match_count=2, partial_match_count=1,
                   source_only_count=0, target_only_count=0, column_match_pct={"id": 100.0, "amount": 66.6667},
                   samples=DiffSamples(changed=({"id": 2, "s__amount": 1.5, "t__amount": None},)))
    result = TableDiffResult(source_table="db.orders", target_table="db__dev.orders", source_label="PROD",
                             target_label="DEV", keys=("id",), schema=schema, rows=rows, model="db.orders")
    text = table_diff_text(result)
    assert text.startswith("Table diff PROD vs DEV of `db.orders`\nKeys: id\n\nSchema Diff:\n  Schemas match\n")
    assert "  full match: 2 (66.67%)\n" in text
    assert text.endswith("\n".join([
        "Column match (% of joined rows):",
        "  column   match",
        "  " + "─" * 16,
        "  id       100.00%",
        "  amount   66.67%",
        "",
        "Sample rows changed:",
        "  id   s__amount   t__amount",
        "  " + "─" * 26,
        "  2    1.5         NULL",
    ]))
