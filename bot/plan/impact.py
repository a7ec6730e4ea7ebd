"""Column-level impact of a plan: each directly modified model's column changes (added, removed, renamed, re-typed or computed differently), followed down the DAG to the columns, owners and exposures they reach (sqlglot only, never Spark)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Sequence

from bot.plan.column_lineage import Analysis
from bot.plan.definition import ChangeType, Plan
from bot.plan.impact_graph import ImpactGraph, owner
from bot.plan.impact_values import (EXPRESSION, GONE, RETYPED, ROWS_READ, TYPE, VALUES, ColumnChange, ColumnImpact,
                                    Exposure, ModelImpact, Source, ValueChange)

__all__ = ["ColumnChange", "ColumnImpact", "Exposure", "ModelImpact", "ValueChange", "column_impact"]   # the values too


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
    graph = ImpactGraph(plan)
    result = [_impact(graph, c.name, exposures) for c in sorted(plan.changes, key=lambda c: c.name)
              if c.change is ChangeType.DIRECTLY_MODIFIED and c.name in plan.snapshots]
    # a model the builder calls directly modified only because its `*` follows a parent's columns is
    # reported under that parent (its changes are the parent's `propagated`), not twice
    followed = {change for impact in result for change in impact.propagated}
    return tuple(i for i in result if not i.changes or not set(i.changes) <= followed)


@dataclass
class _Reach:
    """What one model's changes reach so far: per model, per column, what the change does to its readers
    (GONE: they break; TYPE or VALUES: they may change)."""

    state: dict[str, dict[str, str]] = field(default_factory=dict)
    types: dict[Source, tuple[str, str]] = field(default_factory=dict)     # retyped columns, and passthroughs of them
    rows_changed: set[str] = field(default_factory=set)    # models whose rows (so every column) may change
    propagated: list[ColumnChange] = field(default_factory=list)
    impacts: list[ColumnImpact] = field(default_factory=list)
    untraced: list[str] = field(default_factory=list)

    def mark(self, change: ColumnChange) -> None:
        effect = GONE if change.gone else TYPE if change.change == RETYPED else VALUES
        self.state.setdefault(change.model, {})[change.column] = effect
        if effect == TYPE:
            self.types[(change.model, change.column)] = (change.old_type or "", change.new_type or "")
        if change.new_name:
            self.state[change.model][change.new_name] = VALUES

    def effect(self, source: Source) -> str | None:
        """None: not a changed (or impacted) column."""
        return self.state.get(source[0], {}).get(source[1])

    def changes(self, model: str, column: str, effect: str) -> None:
        self.state.setdefault(model, {}).setdefault(column, effect)


def _impact(graph: ImpactGraph, name: str, exposures: Sequence[Exposure]) -> ModelImpact:
    model_owner = owner(graph.new[name])
    own = graph.column_changes(name)
    if own is None:
        return ModelImpact(model=name, owner=model_owner, traced=False, exposures=_exposures_reading(exposures, {name}))
    values = graph.value_changes(name)
    reach = _Reach()
    for change in own:
        reach.mark(change)
    for value in values:
        reach.changes(name, value.column, VALUES)
    # models whose rows may change (a changed WHERE, JOIN...; no SQL to compare): every output of a
    # child reading them may change, COUNT(*) too
    if any(v.why != EXPRESSION for v in values):
        reach.rows_changed.add(name)
    downstream = graph.descendants(name)
    for child in (n for n in graph.order if n in downstream):
        if graph.parents[child] & reach.state.keys():
            _reach_child(graph, child, reach)
    impact = ModelImpact(model=name, owner=model_owner, changes=own, values=values, propagated=tuple(reach.propagated),
                         impacts=tuple(dict.fromkeys(reach.impacts)), untraced=tuple(reach.untraced))
    reached = set(impact.reached) | {name}
    owners = tuple(dict.fromkeys(o for m in impact.reached if (o := owner(graph.new[m])) and o != model_owner))
    return replace(impact, owners=owners, exposures=_exposures_reading(exposures, reached))


def _reach_child(graph: ImpactGraph, child: str, reach: _Reach) -> None:
    """Follow what reaches `child` from its changed parents: its own changes that follow theirs, the outputs
    computed from changed columns, and the changed columns deciding its rows."""
    gone_names = {col for p in graph.parents[child] & reach.state.keys()
                  for col, what in reach.state[p].items() if what == GONE}
    for change in graph.column_changes(child) or ():
        before = graph.sources(child, False, change.column)
        after = graph.sources(child, True, change.new_name or change.column)
        if any(reach.effect(source) is not None for source in before | after):
            reach.propagated.append(change)
            reach.mark(change)
    analysis = graph.analysis(child, True)
    if analysis is None:
        reach.untraced.append(child)
        return
    own_changes = {c.new_name or c.column for c in reach.propagated if c.model == child}
    read_in_outputs = _reach_outputs(graph, child, analysis, own_changes, gone_names, reach)
    rows_change = _reach_rows(graph, child, analysis, read_in_outputs, gone_names, reach)
    for parent in sorted(graph.parents[child] & reach.rows_changed):
        listed = {i.column for i in reach.impacts if i.model == child}
        reach.impacts += [ColumnImpact(child, o.name, (parent, ROWS_READ)) for o in analysis.outputs
                          if o.name not in listed and o.name not in own_changes]
        rows_change = True
    if rows_change:       # read in its WHERE, JOIN...: its rows, so every column, may change
        reach.rows_changed.add(child)
        for output in analysis.outputs:
            reach.changes(child, output.name, VALUES)


def _reach_outputs(graph: ImpactGraph, child: str, analysis: Analysis, own_changes: set[str], gone_names: set[str],
                   reach: _Reach) -> set[Source]:
    """The outputs of `child` computed from changed columns; returns the changed columns they read."""
    read_in_outputs: set[Source] = set()
    for output in analysis.outputs:
        if output.name in own_changes:    # listed as the child's own (propagated) change
            read_in_outputs |= output.sources
            continue
        for source in sorted(output.sources):
            source = graph.resolve(child, source, gone_names)
            what = reach.effect(source)
            if what is None:
                continue
            read_in_outputs.add(source)
            if what == TYPE and analysis.signature is not None \
                    and analysis.signature.column(output.name) == f"{source[0]}.{source[1]}":
                # the column carries the new type on: its readers computing with it break
                reach.types[(child, output.name)] = reach.types[source]
                reach.impacts.append(ColumnImpact(child, output.name, source, effect=TYPE, types=reach.types[source]))
                reach.changes(child, output.name, TYPE)
                continue
            reach.impacts.append(ColumnImpact(child, output.name, source, breaks=what == GONE, effect=what,
                                              types=reach.types.get(source, ()) if what == TYPE else ()))
            reach.changes(child, output.name, VALUES)
    return read_in_outputs


def _reach_rows(graph: ImpactGraph, child: str, analysis: Analysis, read_in_outputs: set[Source],
                gone_names: set[str], reach: _Reach) -> bool:
    """Changed columns `child` reads outside its outputs: a gone one breaks it; one deciding its rows may change them."""
    rows_change = False
    for source in sorted(analysis.refs | analysis.row_refs):
        source = graph.resolve(child, source, gone_names)
        what = reach.effect(source)
        if what == GONE and source not in read_in_outputs:
            reach.impacts.append(ColumnImpact(child, "", source, breaks=True))
        elif what is not None and source in analysis.row_refs:
            rows_change = True
            if source not in read_in_outputs:
                reach.impacts.append(ColumnImpact(child, "", source))
    return rows_change


def _exposures_reading(exposures: Iterable[Exposure], models: set[str]) -> tuple[Exposure, ...]:
    return tuple(e for e in exposures if any(d.lower() in models for d in e.depends_on))
