"""One query's column lineage: its output columns and the parent model columns each reads, and those deciding its rows (sqlglot scopes, never Spark)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, build_scope

from bot.plan.impact_values import Source
from bot.plan.value_lineage import QuerySignature, signature

DIALECT = "spark"


@dataclass(frozen=True)
class Output:
    name: str
    type: str | None               # known type (declared, or a top-level CAST)
    signature: str | None          # the projection's expression without alias; None when not from a query
    sources: frozenset[Source]     # the parent model columns it reads


@dataclass(frozen=True)
class Analysis:
    outputs: tuple[Output, ...]
    refs: frozenset[Source]        # every parent model column the query reads, anywhere
    signature: QuerySignature | None = None    # what decides each column's values, and the rows
    row_refs: frozenset[Source] = frozenset()  # parent model columns deciding its rows: WHERE, JOIN, GROUP BY...


def analyze(sql: str, columns: Mapping[str, Sequence[str]],
            gone: Mapping[str, Sequence[str]] | None = None) -> Analysis | None:
    """Column lineage of `sql` given its parents' output `columns` (a `*` expands to them).

    `gone` are parent columns that no longer exist: never expanded from a `*`, but a reference to one
    still resolves to its parent (it is what breaks). None when the query cannot be traced.

    >>> a = analyze("SELECT id, amount * 2 AS double FROM shop.orders", {"shop.orders": ["id", "amount"]})
    >>> [(o.name, sorted(o.sources)) for o in a.outputs]
    [('id', [('shop.orders', 'id')]), ('double', [('shop.orders', 'amount')])]
    """
    try:
        query = sqlglot.parse_one(sql, read=DIALECT)
        if not isinstance(query, exp.Query):
            return None
        query = _qualify(query, columns)
        if gone:
            merged = {name: list(columns.get(name, ())) + [c for c in gone.get(name, ())
                                                           if c not in columns.get(name, ())]
                      for name in {**columns, **gone}}
            query = _qualify(query, merged)
        scope = build_scope(query)
    except (SqlglotError, ValueError, KeyError, RecursionError):
        return None
    if scope is None or any(isinstance(s, exp.Star) or (isinstance(s, exp.Column) and s.is_star)
                            for s in query.selects):
        return None
    walker = _Walker()
    outputs = tuple(Output(name=name, type=_cast_type(node), signature=_signature(node), sources=sources)
                    for name, node, sources in walker.outputs(scope))
    refs = frozenset(src for sub in scope.traverse() for column in sub.columns
                     for src in walker.column(sub, column, direct=True))
    try:
        signed = signature(scope, _table_name)
    except (SqlglotError, ValueError, KeyError, RecursionError):
        signed = None
    return Analysis(outputs=outputs, refs=refs, signature=signed, row_refs=_row_refs(scope, walker))


def _row_refs(scope: Scope, walker: "_Walker") -> frozenset[Source]:
    """The parent model columns read by a clause deciding rows (JOIN, WHERE, GROUP BY, HAVING, QUALIFY) of
    any scope, through CTEs and derived tables."""
    found: set[Source] = set()
    for sub in scope.traverse():
        select = sub.expression
        if not isinstance(select, exp.Select):
            continue
        clauses = [select.args.get(arg) for arg in ("where", "group", "having", "qualify")]
        clauses += [join.args.get("on") for join in select.args.get("joins") or ()]
        for clause in filter(None, clauses):
            found |= walker.expression(sub, clause)
    return frozenset(found)


def _qualify(query: exp.Expression, columns: Mapping[str, Sequence[str]]) -> exp.Expression:
    return qualify(query, schema=_schema(columns), dialect=DIALECT, validate_qualify_columns=False,
                   allow_partial_qualification=True)


def _schema(columns: Mapping[str, Sequence[str]]) -> dict:
    """sqlglot's nested schema; all names at the depth of the deepest (2-part names under no catalog)."""
    depth = max((len(n.split(".")) for n in columns), default=2)
    schema: dict = {}
    for name, cols in columns.items():
        parts = name.split(".")
        if len(parts) < 2 or len(parts) != depth or not cols:
            continue
        node = schema
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = {c: "STRING" for c in cols}
    return schema


def _table_name(table: exp.Table) -> str:
    return ".".join(p for p in (table.catalog, table.db, table.name) if p).lower()


class _Walker:
    """Resolves columns through scopes (CTEs, derived tables, set operations) to parent model columns."""

    def __init__(self) -> None:
        self.memo: dict[tuple[int, str], frozenset[Source]] = {}

    def outputs(self, scope: Scope) -> list[tuple[str, exp.Expression, frozenset[Source]]]:
        branches = _branches(scope)
        first = branches[0].expression.selects
        result = []
        for position, projection in enumerate(first):
            sources: set[Source] = set()
            for branch in branches:
                selects = branch.expression.selects
                if position < len(selects):
                    sources |= self.expression(branch, selects[position])
            result.append((projection.alias_or_name.lower(), projection, frozenset(sources)))
        return result

    def output(self, scope: Scope, name: str) -> frozenset[Source]:
        key = (id(scope), name)
        if key not in self.memo:
            self.memo[key] = frozenset()       # a cycle resolves to nothing
            found: set[Source] = set()
            for out, _, sources in self.outputs(scope):
                if out == name:
                    found |= sources
                    break
            self.memo[key] = frozenset(found)
        return self.memo[key]

    def expression(self, scope: Scope, node: exp.Expression) -> frozenset[Source]:
        found: set[Source] = set()
        nested = {id(s.expression): s for s in scope.subquery_scopes}
        for sub in node.walk(bfs=False, prune=lambda n: id(n) in nested):
            if id(sub) in nested:
                inner = nested[id(sub)]
                found |= {src for s in inner.traverse() for c in s.columns for src in self.column(s, c)}
            elif isinstance(sub, exp.Column):
                found |= self.column(scope, sub)
        return frozenset(found)

    def column(self, scope: Scope, column: exp.Column, *, direct: bool = False) -> frozenset[Source]:
        """The parent model columns `column` reads; with `direct`, only when it names a table (not a CTE)."""
        if column.is_star:
            return frozenset()
        name, table = column.name.lower(), column.table
        source = scope.sources.get(table) if table else None
        if source is None and table and scope.parent is not None:
            source = scope.parent.sources.get(table)        # a correlated reference
        if isinstance(source, exp.Table):
            return frozenset({(_table_name(source), name)})
        if isinstance(source, Scope):
            return frozenset() if direct else self.output(source, name)
        if table:
            return frozenset()    # a lateral view, an UDTF: not a model column
        return frozenset({("", name)}) if not _is_alias_ref(scope, name) else frozenset()


def _is_alias_ref(scope: Scope, name: str) -> bool:
    return isinstance(scope.expression, exp.Select) and name in {s.alias_or_name.lower() for s in scope.expression.selects}


def _branches(scope: Scope) -> list[Scope]:
    """The SELECT scopes of a set operation, left to right (the scope itself for a SELECT)."""
    if isinstance(scope.expression, exp.SetOperation):
        return [b for s in scope.set_operation_scopes for b in _branches(s)]
    return [scope]


def _signature(node: exp.Expression) -> str:
    inner = node.this if isinstance(node, exp.Alias) else node
    return inner.sql(dialect=DIALECT)


def _cast_type(node: exp.Expression) -> str | None:
    inner = node.this if isinstance(node, exp.Alias) else node
    if isinstance(inner, (exp.Cast, exp.TryCast)) and inner.to is not None:
        return inner.to.sql(dialect=DIALECT).upper()
    return None


def known_type(text: str | None) -> str | None:
    if not text:
        return None
    try:
        return exp.DataType.build(text, dialect=DIALECT).sql(dialect=DIALECT).upper()
    except (SqlglotError, ValueError):
        return text.upper()


# -- the plan's models, old and new --------------------------------------------------------------


def is_passthrough(signature: str | None) -> bool:
    if signature is None:
        return True
    try:
        return isinstance(sqlglot.parse_one(signature, read=DIALECT), exp.Column)
    except SqlglotError:
        return False
