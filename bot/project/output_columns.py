"""A model's output columns, from its declared `columns`, a seed's CSV header or its rendered query.

A `*` in the query is expanded from its parents' known columns (an external model's come from its YAML
`columns`). When they cannot be known (a star over a table without known columns, an unnamed expression,
a Python model without `columns`), they are None.
"""

from __future__ import annotations

import csv
from typing import Mapping, Sequence

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify import qualify

from bot.project.cache import has_query, query_facts
from bot.project.model import KindName, Model
from bot.project.sqltext import selects_star


class OutputColumns:
    """Lower-case output columns per model, computed on demand (parents first), None when unknown."""

    def __init__(self, models: Mapping[str, Model], rendered: Mapping[str, str]) -> None:
        self.models, self.rendered = models, rendered
        self.cache: dict[str, list[str] | None] = {}

    def of(self, name: str, trail: frozenset[str] = frozenset()) -> list[str] | None:
        if name not in self.cache:
            self.cache[name] = None if name in trail else self._compute(name, trail | {name})
        return self.cache[name]

    def _compute(self, name: str, trail: frozenset[str]) -> list[str] | None:
        model = self.models[name]
        columns = [c.lower() for c, _ in model.columns] or self._from_source(model, trail)
        if columns is None:
            return None
        if model.kind.name in (KindName.SCD_TYPE_2_BY_TIME, KindName.SCD_TYPE_2_BY_COLUMN):
            columns = columns + [model.kind.valid_from_name.lower(), model.kind.valid_to_name.lower()]
        return columns

    def _from_source(self, model: Model, trail: frozenset[str]) -> list[str] | None:
        if model.kind.name is KindName.SEED:
            return _seed_header(model)
        sql = self.rendered.get(model.name)
        if not has_query(model) or not sql:
            return None            # Python models without `columns`, external models without columns
        names, star = query_facts(model)   # from the parse cache: no AST is built
        if names is None:
            names = projection_names(sql)    # the outer SELECT's names, whatever its CTEs select
        if names is not None or not star:
            return [n.lower() for n in names] if names is not None else None
        parents: dict[str, Sequence[str]] = {}
        for parent in model.depends_on:
            if parent not in self.models:
                return None        # a plain table of the warehouse: its columns are unknown
            cols = self.of(parent, trail)
            if cols is None:
                return None
            parents[parent] = cols
        expanded = expand_star(sql, parents)
        names = projection_names(expanded) if expanded else None
        return [n.lower() for n in names] if names is not None else None


def _seed_header(model: Model) -> list[str] | None:
    settings = dict(model.kind.csv_settings)
    delimiter = str(settings.get("delimiter", ","))
    if model.seed_abs_path is None or len(delimiter) != 1:
        return None
    try:
        with model.seed_abs_path.open(encoding="utf-8", newline="") as handle:
            header = next(csv.reader(handle, delimiter=delimiter), None)
    except (OSError, UnicodeDecodeError):
        return None
    return [h.strip().lower() for h in header] if header else None



def expand_star(sql: str, columns: Mapping[str, Sequence[str]], *, dialect: str = "spark") -> str | None:
    """`sql` with `*` expanded from the known columns of its sources; None when not possible.

    >>> expand_star("SELECT * FROM db.t", {"db.t": ["a", "b"]})
    'SELECT `t`.`a` AS `a`, `t`.`b` AS `b` FROM `db`.`t` AS `t`'
    """
    schema: dict[str, dict[str, dict[str, str]]] = {}
    for name, cols in columns.items():
        parts = name.split(".")
        if len(parts) != 2 or not cols:
            continue
        schema.setdefault(parts[0], {})[parts[1]] = {c: "STRING" for c in cols}
    try:
        query = qualify(sqlglot.parse_one(sql, read=dialect), schema=schema, dialect=dialect,
                        validate_qualify_columns=False)
    except SqlglotError:
        return None
    if selects_star(query):
        return None
    return query.sql(dialect=dialect, identify=True)


def projection_names(sql: str, *, dialect: str = "spark") -> list[str] | None:
    """Output column names of a query, or None when a `*` or an unnamed column hides them.

    >>> projection_names("SELECT a, b + 1 AS c FROM t")
    ['a', 'c']
    """
    try:
        query = sqlglot.parse_one(sql, read=dialect)
    except SqlglotError:
        return None
    if not isinstance(query, exp.Query):
        return None
    names = query.named_selects
    if len(names) != len(query.selects) or any(s.is_star for s in query.selects):
        return None
    return names
