"""Column-level impact of a plan: columns added, removed, renamed, re-typed or computed differently and the downstream columns, owners and exposures reading them (sqlglot only, never Spark)."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping, Sequence

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, build_scope

from bot.plan.definition import ChangeType, Plan
from bot.plan.value_lineage import QuerySignature, signature
from bot.snapshot import Snapshot

ADDED, REMOVED, RENAMED, RETYPED = "added", "removed", "renamed", "retyped"
EXPRESSION, ROWS, OPAQUE = "expression", "rows", "opaque"     # why a column's values may change
GONE, TYPE, VALUES = "gone", "type", "values"                  # what a change does to its readers
ROWS_READ = "*"        # ColumnImpact.reads (model, "*"): the column may change because the model's rows may
DIALECT = "spark"
Source = tuple[str, str]       # (model, column); model "" when the column could not be resolved


@dataclass(frozen=True)
class Exposure:
    """A declared consumer outside the project (cicd_bot.exposures): a dashboard, a report, an export."""

    name: str
    owner: str | None = None
    url: str | None = None
    depends_on: tuple[str, ...] = ()      # model names


@dataclass(frozen=True)
class ColumnChange:
    model: str
    column: str
    change: str                            # added | removed | renamed | retyped
    new_name: str | None = None            # renamed: the column's new name
    old_type: str | None = None            # retyped: the types before and after
    new_type: str | None = None

    @property
    def gone(self) -> bool:
        """The column's old name no longer exists: readers of it break."""
        return self.change in (REMOVED, RENAMED)


@dataclass(frozen=True)
class ValueChange:
    """A column on both sides, same name and type, whose values may change: its expression changed
    (`expression`), a clause deciding the model's rows changed (`rows`: every column, `clauses` say which),
    or the model is no query meshbot can compare (`opaque`: a Python model, a seed's new content)."""

    model: str
    column: str
    why: str                               # expression | rows | opaque
    clauses: tuple[str, ...] = ()          # rows: WHERE, JOIN, GROUP BY... (value_lineage.CLAUSES)


@dataclass(frozen=True)
class ColumnImpact:
    model: str                             # the downstream model
    column: str                            # its output column; "" when read outside the outputs (WHERE, JOIN...)
    reads: Source                          # the changed (or impacted) upstream column it reads
    breaks: bool = False                   # it reads a column that no longer exists
    effect: str = field(default=VALUES, compare=False)             # gone | type (both break) | values
    types: tuple[str, str] = field(default=(), compare=False)      # type: the read column's types, old → new


@dataclass(frozen=True)
class ModelImpact:
    """One directly modified model: its column changes and what they reach downstream."""

    model: str
    owner: str | None = None
    changes: tuple[ColumnChange, ...] = ()
    values: tuple[ValueChange, ...] = ()          # its columns whose values may change (not in `changes`)
    propagated: tuple[ColumnChange, ...] = ()     # downstream models' own columns changing with it (`SELECT *`)
    impacts: tuple[ColumnImpact, ...] = ()
    owners: tuple[str, ...] = ()                  # owners of the downstream models reached
    exposures: tuple[Exposure, ...] = ()          # exposures on the model or a downstream model reached
    untraced: tuple[str, ...] = ()                # downstream models whose columns could not be traced
    traced: bool = True                           # False: this model's own columns are unknown

    @property
    def breaks(self) -> tuple[ColumnImpact, ...]:
        return tuple(i for i in self.impacts if i.breaks)

    @property
    def reached(self) -> tuple[str, ...]:
        """Downstream models reached, in DAG order."""
        names = [i.model for i in self.impacts] + [c.model for c in self.propagated]
        return tuple(dict.fromkeys(names))


def column_impact(plan: Plan, *, exposures: Sequence[Exposure] = ()) -> tuple[ModelImpact, ...]:
    """Column changes of each directly modified model of `plan` and their downstream reach, by model name.

    Inputs are the plan alone: each model's new version is `plan.snapshots[name]`, its previous version
    `ModelChange.previous` (the same snapshot when the model did not change); both carry `rendered_query`,
    declared `columns` (name, type) and the model's `definition` (owner, depends_on, small seeds' CSV).

    A model's output columns are its declared `columns`, a seed's CSV header, or its rendered query's outer
    projections, with `*` expanded from its parents' output columns of the same version (old or new).
    Each query is qualified by sqlglot and walked scope by scope (CTEs, derived tables and nested subqueries,
    UNION branches by position) down to the parent model columns every output column reads.

    Rules, kept simple:
    - added/removed: output names present on one side only.
    - renamed: a removed and an added column whose expressions are the same once their aliases are dropped
      (`amount` → `amount AS total`), or a passthrough of an upstream column that was itself renamed.
    - retyped: a column on both sides whose type is known on both and differs; a type is known from declared
      `columns` or from a top-level CAST of the projection (no Spark, so nothing is inferred).
    - values may change: a column on both sides, neither retyped nor renamed, whose canonical expression
      differs (bot.plan.value_lineage: every CTE, subquery and UNION branch inlined down to parent model
      columns, aliases and layout ignored); when a clause deciding the rows differs (FROM, JOIN, WHERE,
      GROUP BY, HAVING, QUALIFY, DISTINCT, LIMIT, UNION) every column's values may change. A Python model or
      a seed (no query to compare) may change every column.
    - a downstream model BREAKS on a removed (or renamed-away) column its new query still reads anywhere:
      projection, WHERE, JOIN, GROUP BY...; a column computed from a retyped one is reported with both
      types (its values may change: a widening breaks nothing, and Spark refuses what cannot cast). A column that
      disappears from a downstream model because it selects `*` is reported as that model's own
      (propagated) removal, which breaks its readers in turn.
    - a column reached transitively (a downstream output computed from a changed column) is impacted: its
      values may change, its readers are listed too, but do not break. A downstream model reading a changed
      column outside its outputs (WHERE, JOIN...) may change the values of all its columns.
    A model directly modified only through a `*` over a changed parent is reported under that parent.
    When a downstream query cannot be traced (unparseable, a Python model, a `*` over unknown columns) it is
    listed as not traced: no false alarm, and no silence either.
    """
    graph = _Graph(plan)
    result = [graph.impact(c.name, exposures) for c in sorted(plan.changes, key=lambda c: c.name)
              if c.change is ChangeType.DIRECTLY_MODIFIED and c.name in plan.snapshots]
    # a model the builder calls directly modified only because its `*` follows a parent's columns is
    # reported under that parent (its changes are the parent's `propagated`), not twice
    followed = {change for impact in result for change in impact.propagated}
    return tuple(i for i in result if not i.changes or not set(i.changes) <= followed)


# -- one query's column lineage ------------------------------------------------------------------

@dataclass(frozen=True)
class _Output:
    name: str
    type: str | None               # known type (declared, or a top-level CAST)
    signature: str | None          # the projection's expression without alias; None when not from a query
    sources: frozenset[Source]     # the parent model columns it reads


@dataclass(frozen=True)
class _Analysis:
    outputs: tuple[_Output, ...]
    refs: frozenset[Source]        # every parent model column the query reads, anywhere
    signature: QuerySignature | None = None    # what decides each column's values, and the rows
    row_refs: frozenset[Source] = frozenset()  # parent model columns deciding its rows: WHERE, JOIN, GROUP BY...


def analyze(sql: str, columns: Mapping[str, Sequence[str]],
            gone: Mapping[str, Sequence[str]] | None = None) -> _Analysis | None:
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
    outputs = tuple(_Output(name=name, type=_cast_type(node), signature=_signature(node), sources=sources)
                    for name, node, sources in walker.outputs(scope))
    refs = frozenset(src for sub in scope.traverse() for column in sub.columns
                     for src in walker.column(sub, column, direct=True))
    try:
        signed = signature(scope, _table_name)
    except (SqlglotError, ValueError, KeyError, RecursionError):
        signed = None
    return _Analysis(outputs=outputs, refs=refs, signature=signed, row_refs=_row_refs(scope, walker))


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


def _type(text: str | None) -> str | None:
    if not text:
        return None
    try:
        return exp.DataType.build(text, dialect=DIALECT).sql(dialect=DIALECT).upper()
    except (SqlglotError, ValueError):
        return text.upper()


# -- the plan's models, old and new --------------------------------------------------------------

class _Graph:
    def __init__(self, plan: Plan) -> None:
        self.new: dict[str, Snapshot] = dict(plan.snapshots)
        self.old: dict[str, Snapshot] = {}
        changes = {c.name: c for c in plan.changes}
        for name, snap in plan.snapshots.items():
            change = changes.get(name)
            if change is None:
                self.old[name] = snap
            elif change.change is not ChangeType.ADDED:
                self.old[name] = change.previous or snap
        for change in plan.changes:
            if change.change is ChangeType.REMOVED and change.previous is not None:
                self.old[change.name] = change.previous
        self.parents = {name: _parents(snap) for name, snap in self.new.items()}
        self.children: dict[str, set[str]] = {}
        for name in self.new:
            for parent in self.parents[name]:
                self.children.setdefault(parent, set()).add(name)
        self.order = _topological(self.parents, self.children)
        self.analyses: dict[tuple[str, bool], _Analysis | None] = {}
        self.outputs_memo: dict[tuple[str, bool], tuple[_Output, ...] | None] = {}
        self.changes_memo: dict[str, tuple[ColumnChange, ...] | None] = {}

    # outputs of one version -------------------------------------------------------------------

    def snapshot(self, name: str, new: bool) -> Snapshot | None:
        return (self.new if new else self.old).get(name)

    def outputs(self, name: str, new: bool) -> tuple[_Output, ...] | None:
        key = (name, new)
        if key not in self.outputs_memo:
            # ancestors first, in DAG order, so a long chain never recurses deeper than one level
            pending = any((p, new) not in self.outputs_memo for p in self.parents.get(name, ()) if p in self.new)
            ancestors = self._ancestors(name) if pending else set()
            for ancestor in (n for n in self.order if n in ancestors and (n, new) not in self.outputs_memo):
                self.outputs_memo[(ancestor, new)] = None
                self.outputs_memo[(ancestor, new)] = self._outputs(ancestor, new)
            self.outputs_memo[key] = None          # a cycle is unknown
            self.outputs_memo[key] = self._outputs(name, new)
        return self.outputs_memo[key]

    def _outputs(self, name: str, new: bool) -> tuple[_Output, ...] | None:
        snap = self.snapshot(name, new)
        if snap is None:
            return None
        analysis = self.analysis(name, new)
        by_name = {o.name: o for o in analysis.outputs} if analysis is not None else {}
        declared = [(c.lower(), t) for c, t in snap.columns]
        if declared:
            outputs = [_Output(c, _type(t), by_name[c].signature if c in by_name else None,
                               by_name[c].sources if c in by_name else frozenset()) for c, t in declared]
        elif analysis is not None:
            outputs = list(analysis.outputs)
        else:
            header = _seed_header(snap)
            if header is None:
                return None
            outputs = [_Output(c, None, None, frozenset()) for c in header]
        kind = snap.definition.get("kind") if isinstance(snap.definition.get("kind"), dict) else {}
        if snap.kind.startswith("SCD_TYPE_2"):
            for key, default in (("valid_from_name", "valid_from"), ("valid_to_name", "valid_to")):
                column = str(kind.get(key) or default).lower()
                if column not in {o.name for o in outputs}:
                    outputs.append(_Output(column, None, None, frozenset()))
        return tuple(outputs)

    def names(self, name: str, new: bool) -> list[str] | None:
        outputs = self.outputs(name, new)
        return [o.name for o in outputs] if outputs is not None else None

    def analysis(self, name: str, new: bool) -> _Analysis | None:
        key = (name, new)
        if key not in self.analyses:
            self.analyses[key] = None
            self.analyses[key] = self._analysis(name, new)
        return self.analyses[key]

    def _analysis(self, name: str, new: bool) -> _Analysis | None:
        snap = self.snapshot(name, new)
        if snap is None or not snap.rendered_query.strip() or snap.kind in ("SEED", "EXTERNAL"):
            return None
        columns: dict[str, list[str]] = {}
        gone: dict[str, list[str]] = {}
        for parent in _parents(snap):
            if parent not in self.new and parent not in self.old:
                continue                     # a warehouse table: its columns are unknown
            cols = self.names(parent, new)
            if cols is not None:
                columns[parent] = cols
            if new:
                old = self.names(parent, False) or []
                removed = [c for c in old if c not in (cols or ())]
                if removed:
                    gone[parent] = removed
        return analyze(snap.rendered_query, columns, gone)

    # column changes of one model, old → new --------------------------------------------------

    def column_changes(self, name: str) -> tuple[ColumnChange, ...] | None:
        if name not in self.changes_memo:
            self.changes_memo[name] = self._column_changes(name)
        return self.changes_memo[name]

    def _column_changes(self, name: str) -> tuple[ColumnChange, ...] | None:
        old, new = self.outputs(name, False), self.outputs(name, True)
        if old is None or new is None:
            return None
        old_by, new_by = {o.name: o for o in old}, {o.name: o for o in new}
        removed = [o for o in old if o.name not in new_by]
        added = [o for o in new if o.name not in old_by]
        renamed: dict[str, str] = {}
        for gone in removed:
            match = next((a for a in added if a.name not in renamed.values()
                          and self._same_column(name, gone, a)), None)
            if match is not None:
                renamed[gone.name] = match.name
        changes = [ColumnChange(name, o.name, RENAMED, new_name=renamed[o.name]) if o.name in renamed
                   else ColumnChange(name, o.name, REMOVED) for o in removed]
        changes += [ColumnChange(name, o.name, ADDED) for o in added if o.name not in renamed.values()]
        for o in new:
            before = old_by.get(o.name)
            if before is not None and before.type and o.type and before.type != o.type:
                changes.append(ColumnChange(name, o.name, RETYPED, old_type=before.type, new_type=o.type))
        return tuple(changes)

    def value_changes(self, name: str) -> tuple[ValueChange, ...]:
        """Columns of `name` on both sides and not otherwise changed whose values may change, old → new."""
        old, new = self.outputs(name, False), self.outputs(name, True)
        before_snap, after_snap = self.snapshot(name, False), self.snapshot(name, True)
        if old is None or new is None or before_snap is None or after_snap is None \
                or before_snap.fingerprint.data_hash == after_snap.fingerprint.data_hash:
            return ()
        changed = {c.column for c in self.column_changes(name) or ()}
        names = {o.name for o in old}
        common = [o.name for o in new if o.name in names and o.name not in changed]
        before, after = self.analysis(name, False), self.analysis(name, True)
        if before is None or after is None or before.signature is None or after.signature is None:
            return tuple(ValueChange(name, column, OPAQUE) for column in common)
        clauses = before.signature.changed_clauses(after.signature)
        if clauses:
            return tuple(ValueChange(name, column, ROWS, clauses=clauses) for column in common)
        return tuple(ValueChange(name, column, EXPRESSION) for column in common
                     if (old_text := before.signature.column(column)) is not None
                     and (new_text := after.signature.column(column)) is not None and old_text != new_text)

    def _same_column(self, name: str, old: _Output, new: _Output) -> bool:
        if old.signature is not None and old.signature == new.signature:
            return True
        if len(old.sources) != 1 or len(new.sources) != 1:
            return False
        (parent, before), = old.sources
        (parent_new, after), = new.sources
        if parent != parent_new or not parent or parent == name:
            return False
        renames = {c.column: c.new_name for c in self.column_changes(parent) or () if c.change == RENAMED}
        return renames.get(before) == after and _is_passthrough(old.signature) and _is_passthrough(new.signature)

    # the downstream walk ---------------------------------------------------------------------

    def impact(self, name: str, exposures: Sequence[Exposure]) -> ModelImpact:
        snap = self.new[name]
        owner = _owner(snap)
        own = self.column_changes(name)
        if own is None:
            return ModelImpact(model=name, owner=owner, traced=False,
                               exposures=_exposures(exposures, {name}))
        values = self.value_changes(name)
        # model → column → what its change does to its readers: GONE (they break), TYPE or VALUES (may change)
        state: dict[str, dict[str, str]] = {}
        types: dict[Source, tuple[str, str]] = {}      # retyped columns, and passthroughs of them

        def mark(change: ColumnChange) -> None:
            effect = GONE if change.gone else TYPE if change.change == RETYPED else VALUES
            state.setdefault(change.model, {})[change.column] = effect
            if effect == TYPE:
                types[(change.model, change.column)] = (change.old_type or "", change.new_type or "")
            if change.new_name:
                state[change.model][change.new_name] = VALUES

        def effect(source: Source) -> str | None:
            """None: not a changed (or impacted) column."""
            return state.get(source[0], {}).get(source[1])

        for change in own:
            mark(change)
        for value in values:
            state.setdefault(name, {}).setdefault(value.column, VALUES)
        # models whose rows may change (a changed WHERE, JOIN...; no SQL to compare): every output of a
        # child reading them may change, COUNT(*) too
        rows_changed = {name} if any(v.why != EXPRESSION for v in values) else set()
        propagated: list[ColumnChange] = []
        impacts: list[ColumnImpact] = []
        untraced: list[str] = []
        downstream = self._descendants(name)
        for child in (n for n in self.order if n in downstream):
            parents = self.parents[child] & state.keys()
            if not parents:
                continue
            gone_names = {col for p in parents for col, what in state[p].items() if what == GONE}
            for change in self.column_changes(child) or ():
                before = self._sources(child, False, change.column)
                after = self._sources(child, True, change.new_name or change.column)
                if any(effect(source) is not None for source in before | after):
                    propagated.append(change)
                    mark(change)
            analysis = self.analysis(child, True)
            if analysis is None:
                untraced.append(child)
                continue
            read_in_outputs: set[Source] = set()
            own_changes = {c.new_name or c.column for c in propagated if c.model == child}
            for output in analysis.outputs:
                if output.name in own_changes:    # listed as the child's own (propagated) change
                    read_in_outputs |= output.sources
                    continue
                for source in sorted(output.sources):
                    source = self._resolve(child, source, gone_names)
                    what = effect(source)
                    if what is None:
                        continue
                    read_in_outputs.add(source)
                    if what == TYPE and analysis.signature is not None \
                            and analysis.signature.column(output.name) == f"{source[0]}.{source[1]}":
                        # the column carries the new type on: its readers computing with it break
                        types[(child, output.name)] = types[source]
                        impacts.append(ColumnImpact(child, output.name, source, effect=TYPE, types=types[source]))
                        state.setdefault(child, {}).setdefault(output.name, TYPE)
                        continue
                    impacts.append(ColumnImpact(child, output.name, source, breaks=what == GONE, effect=what,
                                                types=types.get(source, ()) if what == TYPE else ()))
                    state.setdefault(child, {}).setdefault(output.name, VALUES)
            rows_change = False
            for source in sorted(analysis.refs | analysis.row_refs):
                source = self._resolve(child, source, gone_names)
                what = effect(source)
                if what == GONE and source not in read_in_outputs:
                    impacts.append(ColumnImpact(child, "", source, breaks=True))
                elif what is not None and source in analysis.row_refs:
                    rows_change = True
                    if source not in read_in_outputs:
                        impacts.append(ColumnImpact(child, "", source))
            for parent in sorted(self.parents[child] & rows_changed):
                listed = {i.column for i in impacts if i.model == child}
                impacts += [ColumnImpact(child, o.name, (parent, ROWS_READ)) for o in analysis.outputs
                            if o.name not in listed and o.name not in own_changes]
                rows_change = True
            if rows_change:       # read in its WHERE, JOIN...: its rows, so every column, may change
                rows_changed.add(child)
                for output in analysis.outputs:
                    state.setdefault(child, {}).setdefault(output.name, VALUES)
        impact = ModelImpact(model=name, owner=owner, changes=own, values=values, propagated=tuple(propagated),
                             impacts=tuple(dict.fromkeys(impacts)), untraced=tuple(untraced))
        reached = set(impact.reached) | {name}
        owners = tuple(dict.fromkeys(o for m in impact.reached if (o := _owner(self.new[m])) and o != owner))
        return replace(impact, owners=owners, exposures=_exposures(exposures, reached))

    def _resolve(self, child: str, source: Source, gone_names: set[str]) -> Source:
        """An unresolved column named like a parent's removed column is that parent's."""
        model, column = source
        if model or column not in gone_names:
            return source
        for parent in sorted(self.parents[child]):
            if column not in (self.names(parent, True) or []) and column in (self.names(parent, False) or []):
                return (parent, column)
        return source

    def _sources(self, name: str, new: bool, column: str) -> frozenset[Source]:
        for output in self.outputs(name, new) or ():
            if output.name == column:
                return output.sources
        return frozenset()

    def _ancestors(self, name: str) -> set[str]:
        seen: set[str] = set()
        todo = [name]
        while todo:
            for parent in self.parents.get(todo.pop(), ()):
                if parent not in seen and parent in self.new:
                    seen.add(parent)
                    todo.append(parent)
        return seen

    def _descendants(self, name: str) -> set[str]:
        seen: set[str] = set()
        todo = [name]
        while todo:
            for child in self.children.get(todo.pop(), ()):
                if child not in seen:
                    seen.add(child)
                    todo.append(child)
        return seen


def _is_passthrough(signature: str | None) -> bool:
    if signature is None:
        return True
    try:
        return isinstance(sqlglot.parse_one(signature, read=DIALECT), exp.Column)
    except SqlglotError:
        return False


def _parents(snap: Snapshot) -> set[str]:
    names = {p.name for p in snap.parents}
    depends = snap.definition.get("depends_on")
    if isinstance(depends, (list, tuple)):
        names |= {str(d).lower() for d in depends}
    return names - {snap.name}


def _owner(snap: Snapshot) -> str | None:
    owner = snap.definition.get("owner")
    return str(owner) if owner else None


def _seed_header(snap: Snapshot) -> list[str] | None:
    content = snap.definition.get("seed_content")
    if snap.kind != "SEED" or not isinstance(content, str):
        return None
    kind = snap.definition.get("kind") if isinstance(snap.definition.get("kind"), dict) else {}
    settings = dict(kind.get("csv_settings") or ())
    delimiter = str(settings.get("delimiter", ","))
    if len(delimiter) != 1:
        return None
    try:
        header = next(csv.reader(io.StringIO(content), delimiter=delimiter), None)
    except csv.Error:
        return None
    return [h.strip().lower() for h in header] if header else None


def _exposures(exposures: Iterable[Exposure], models: set[str]) -> tuple[Exposure, ...]:
    return tuple(e for e in exposures if any(d.lower() in models for d in e.depends_on))


def _topological(parents: Mapping[str, set[str]], children: Mapping[str, set[str]]) -> list[str]:
    """Parents before children (ties by name); models on a cycle come last."""
    nodes = parents
    indegree = {n: len(p & nodes.keys()) for n, p in parents.items()}
    ready = sorted(n for n, d in indegree.items() if d == 0)
    order: list[str] = []
    while ready:
        node = ready.pop(0)
        order.append(node)
        for child in sorted(children.get(node, ())):
            if child in indegree:
                indegree[child] -= 1
                if indegree[child] == 0:
                    ready.append(child)
        ready.sort()
    return order + sorted(set(nodes) - set(order))
