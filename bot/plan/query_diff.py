"""The diffs a plan shows for a directly modified model: of its rendered query, and of its query as written."""

from __future__ import annotations

import difflib

import sqlglot

from bot.plan.snapshot_models import model_definition
from bot.project.model import Model
from bot.project.sqltext import as_written_macros, parse_sql, to_sql
from bot.snapshot import Snapshot


def unified_diff(old_sql: str, new_sql: str, name: str) -> str:
    """Unified diff of two queries, pretty-printed so each clause sits on its own line."""
    old_lines, new_lines = _pretty(old_sql).splitlines(), _pretty(new_sql).splitlines()
    lines = difflib.unified_diff(old_lines, new_lines, fromfile=f"{name} (old)",
                                 tofile=f"{name} (new)", lineterm="")
    return "\n".join(lines)


def source_diff(prev: Snapshot, model: Model, name: str) -> str:
    """Unified diff of the queries as written (macros kept), which is what a reviewer recognises."""
    old_text, new_text = prev.definition.get("query"), model_definition(model).get("query")
    if not old_text or not new_text:
        return ""
    dialect = model.dialect
    try:
        old = to_sql(parse_sql(old_text, prev.definition.get("dialect") or dialect)[0], dialect, pretty=True)
        new = to_sql(parse_sql(new_text, dialect)[0], dialect, pretty=True)
    except (sqlglot.errors.SqlglotError, IndexError):
        return ""
    lines = difflib.unified_diff(as_written_macros(old).splitlines(), as_written_macros(new).splitlines(),
                                 fromfile=f"{name} (old)", tofile=f"{name} (new)", lineterm="")
    return "\n".join(lines)


def _pretty(sql: str) -> str:
    if not sql:
        return ""
    try:
        return sqlglot.parse_one(sql, read="spark").sql(dialect="spark", pretty=True)
    except sqlglot.errors.SqlglotError:
        return sql
