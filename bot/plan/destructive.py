"""Destructive schema changes of forward-only models: dropped or retyped columns, per `on_destructive_change`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types

from bot.errors import PlanError
from bot.project.model import Model, OnDestructiveChange
from bot.snapshot import ChangeCategory, Snapshot


@dataclass(frozen=True)
class DestructiveChange:
    """Columns a forward-only change would drop or retype in a table that keeps its data."""

    model: str
    dropped: tuple[str, ...] = ()
    retyped: tuple[tuple[str, str, str], ...] = ()   # (column, old type, new type)

    @property
    def description(self) -> str:
        parts = []
        if self.dropped:
            parts.append("drops column(s) " + ", ".join(f"`{c}`" for c in self.dropped))
        if self.retyped:
            parts.append("changes the type of " + ", ".join(
                f"`{c}` ({old} -> {new})" for c, old, new in self.retyped))
        return " and ".join(parts)


def column_types(sql: str, declared: Sequence[tuple[str, str]] = ()) -> dict[str, str | None]:
    """Output columns of a query (lowercase name → type, None when unknown without Spark).

    >>> column_types("SELECT a, CAST(b AS INT) AS b, 'x' AS c FROM t")
    {'a': None, 'b': 'INT', 'c': 'STRING'}
    >>> column_types("", [("id", "bigint")])
    {'id': 'BIGINT'}
    """
    if declared:
        return {name.lower(): _type_text(kind) for name, kind in declared}
    if not sql:
        return {}
    try:
        query = annotate_types(sqlglot.parse_one(sql, read="spark"), dialect="spark")
    except (sqlglot.errors.SqlglotError, ValueError, KeyError):
        return {}
    if not isinstance(query, exp.Query):
        return {}
    types: dict[str, str | None] = {}
    for projection in query.selects:
        name = projection.alias_or_name
        if not name or isinstance(projection, exp.Star):
            continue
        kind = projection.type
        unknown = kind is None or kind.this in (exp.DataType.Type.UNKNOWN, exp.DataType.Type.NULL)
        types[name.lower()] = None if unknown else kind.sql("spark").upper()
    return types


def _type_text(kind: str) -> str:
    try:
        return exp.DataType.build(kind, dialect="spark").sql("spark").upper()
    except (sqlglot.errors.SqlglotError, ValueError):
        return kind.upper()


def destructive_change(name: str, *, old: Snapshot, new_sql: str,
                       new_declared: Sequence[tuple[str, str]] = ()) -> DestructiveChange | None:
    """What a forward-only change from `old` to the new query destroys; None when nothing."""
    before = column_types(old.rendered_query, old.columns)
    after = column_types(new_sql, new_declared)
    if not before or not after or "*" in before or "*" in after:
        return None
    dropped = tuple(c for c in before if c not in after)
    retyped = tuple((c, before[c], after[c]) for c in before
                    if c in after and before[c] and after[c] and before[c] != after[c])
    if not dropped and not retyped:
        return None
    return DestructiveChange(model=name, dropped=dropped, retyped=retyped)  # type: ignore[arg-type]


def check_destructive(*, changes: Sequence[tuple[str, Snapshot, Snapshot]], models: Mapping[str, Model],
                      rendered: Mapping[str, str], allowed: Sequence[str]) -> tuple[str, ...]:
    """Apply each model's `on_destructive_change` to its forward-only changes `(name, old, new)`.

    Raises PlanError naming every blocked model and its columns; returns warnings for `warn`.
    `allowed` (from --allow-destructive-model, names or globs) overrides `error` and `warn`.
    """
    import fnmatch

    errors: list[str] = []
    warnings: list[str] = []
    for name, old, new in changes:
        if new.change_category is not ChangeCategory.FORWARD_ONLY or old.version != new.version:
            continue
        model = models[name]
        found = destructive_change(name, old=old, new_sql=rendered.get(name, ""),
                                   new_declared=model.columns)
        if found is None or any(fnmatch.fnmatchcase(name, p.lower()) for p in allowed):
            continue
        policy = model.kind.on_destructive_change
        if policy is OnDestructiveChange.ERROR:
            errors.append(f"`{name}` {found.description}")
        elif policy is OnDestructiveChange.WARN:
            warnings.append(f"forward-only change to `{name}` {found.description}; "
                            "its existing rows keep the old schema")
    if errors:
        raise PlanError("destructive forward-only change(s): " + "; ".join(errors)
                        + ". Set on_destructive_change to warn or allow, or pass "
                        "--allow-destructive-model " + " --allow-destructive-model ".join(
                            e.split("`")[1] for e in errors))
    return tuple(warnings)
