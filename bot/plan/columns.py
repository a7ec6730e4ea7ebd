"""Plan-time column checks: `grain`, `unique_key`, `time_column`, `partitioned_by` and built-in audit
column arguments must name columns the model produces (sqlglot only, never Spark).

When a model's output columns cannot be known (see bot.project.output_columns), nothing is checked:
no false errors.
"""

from __future__ import annotations

import functools
import re
from typing import Iterable, Mapping

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from bot.errors import ConfigError
from bot.project.model import KindName, Model
from bot.project.output_columns import OutputColumns
from bot.project.warn import project_warning

# built-in audit arguments that hold column names or expressions over columns
_COLUMN_ARGS = ("column", "columns", "criteria")
_BUILT_IN_AUDITS = frozenset({
    "not_null", "unique_values", "accepted_values", "not_accepted_values", "number_of_rows", "forall",
    "accepted_range", "at_least_one", "not_constant", "unique_combination_of_columns",
    "not_empty_string"})


def check_columns(models: Mapping[str, Model], rendered: Mapping[str, str], *, strict: bool = False) -> None:
    """Raise a ConfigError (file and line) for the first property naming a column the model lacks.

    A `grain` is only a warning (file and line) unless `strict` (config.yaml's `strict: true`): SQLMesh
    accepts any grain, and only table diffs read it."""
    known = OutputColumns(models, rendered)
    for name in sorted(models):
        model = models[name]
        references = list(_references(model))
        if not references:
            continue
        columns = known.of(name)
        if columns is None:
            continue
        have = set(columns)
        for key, column, needle in references:
            if column.lower() not in have:
                message = (f"`{key}` of model `{name}` names column `{column}`, which the model does not "
                           f"produce (its columns: {', '.join(columns)})")
                line = property_line(model, needle, column)
                if key == "grain" and not strict:
                    project_warning(f"{message}; `strict: true` in config.yaml makes this an error",
                                    path=model.path, line=line)
                    continue
                raise ConfigError(message, path=model.path, line=line)


def _references(model: Model) -> Iterable[tuple[str, str, str]]:
    """(what is checked, column name, header keyword to find the line) for every column reference."""
    for column in model.grains:
        for name in _column_names(column):
            yield "grain", name, "grain"
    for column in model.kind.unique_key:
        for name in _column_names(column):
            yield "unique_key", name, "unique_key"
    if model.kind.name is KindName.INCREMENTAL_BY_TIME_RANGE and model.kind.time_column:
        yield "time_column", model.kind.time_column, "time_column"
    for text in model.partitioned_by:
        for name in _column_names(text):
            yield "partitioned_by", name, "partitioned_by"
    for ref in model.audits:
        if ref.name not in _BUILT_IN_AUDITS:
            continue   # a custom audit's arguments may be anything
        for key, text in ref.args:
            if key in _COLUMN_ARGS:
                for name in _column_names(text):
                    yield f"audit {ref.name}({key} := ...)", name, "audits"


@functools.lru_cache(maxsize=4096)
def _column_names(text: str) -> tuple[str, ...]:
    """Column names in a property's text (the same few texts recur in every model: parsed once)."""
    return tuple(_parse_column_names(text))


def _parse_column_names(text: str) -> list[str]:
    try:
        node = sqlglot.parse_one(text, read="spark")
    except SqlglotError:
        return []
    if isinstance(node, exp.Column) and not node.table:
        return [node.name]
    return [c.name for c in node.find_all(exp.Column) if not c.table and c.name]


def property_line(model: Model, keyword: str, column: str) -> int:
    """The line of `column` after `keyword` in the model's MODEL header; the header's line otherwise."""
    try:
        lines = model.path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return model.line
    text = "\n".join(lines[model.line - 1:])
    key = re.search(rf"\b{re.escape(keyword)}s?\b", text, re.I)   # `grain` or `grains`
    if key is None:
        return model.line
    found = re.search(rf"\b{re.escape(column)}\b", text[key.end():], re.I)
    offset = key.end() + found.start() if found else key.start()
    return model.line + text.count("\n", 0, offset)
