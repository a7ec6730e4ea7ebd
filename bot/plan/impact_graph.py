"""A plan's models in both versions, for column impact: each one's output columns, the parent columns each reads, and its own column and value changes (sqlglot only, never Spark)."""

from __future__ import annotations

import csv
import io
from typing import Mapping

from bot.plan.column_lineage import Analysis, Output, analyze, is_passthrough, known_type
from bot.plan.definition import ChangeType, Plan
from bot.plan.impact_values import (ADDED, EXPRESSION, OPAQUE, REMOVED, RENAMED, RETYPED, ROWS, ColumnChange,
                                    Source, ValueChange)
from bot.snapshot import Snapshot


class ImpactGraph:
    """Each model's two versions in a plan (new, old): their output columns, what reads what, and what changed."""

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
        self.analyses: dict[tuple[str, bool], Analysis | None] = {}
        self.outputs_memo: dict[tuple[str, bool], tuple[Output, ...] | None] = {}
        self.changes_memo: dict[str, tuple[ColumnChange, ...] | None] = {}

    # outputs of one version -------------------------------------------------------------------

    def snapshot(self, name: str, new: bool) -> Snapshot | None:
        return (self.new if new else self.old).get(name)

    def outputs(self, name: str, new: bool) -> tuple[Output, ...] | None:
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

    def _outputs(self, name: str, new: bool) -> tuple[Output, ...] | None:
        snap = self.snapshot(name, new)
        if snap is None:
            return None
        analysis = self.analysis(name, new)
        by_name = {o.name: o for o in analysis.outputs} if analysis is not None else {}
        declared = [(c.lower(), t) for c, t in snap.columns]
        if declared:
            outputs = [Output(c, known_type(t), by_name[c].signature if c in by_name else None,
                               by_name[c].sources if c in by_name else frozenset()) for c, t in declared]
        elif analysis is not None:
            outputs = list(analysis.outputs)
        else:
            header = _seed_header(snap)
            if header is None:
                return None
            outputs = [Output(c, None, None, frozenset()) for c in header]
        kind = snap.definition.get("kind") if isinstance(snap.definition.get("kind"), dict) else {}
        if snap.kind.startswith("SCD_TYPE_2"):
            for key, default in (("valid_from_name", "valid_from"), ("valid_to_name", "valid_to")):
                column = str(kind.get(key) or default).lower()
                if column not in {o.name for o in outputs}:
                    outputs.append(Output(column, None, None, frozenset()))
        return tuple(outputs)

    def names(self, name: str, new: bool) -> list[str] | None:
        outputs = self.outputs(name, new)
        return [o.name for o in outputs] if outputs is not None else None

    def analysis(self, name: str, new: bool) -> Analysis | None:
        key = (name, new)
        if key not in self.analyses:
            self.analyses[key] = None
            self.analyses[key] = self._analysis(name, new)
        return self.analyses[key]

    def _analysis(self, name: str, new: bool) -> Analysis | None:
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

    def _same_column(self, name: str, old: Output, new: Output) -> bool:
        if old.signature is not None and old.signature == new.signature:
            return True
        if len(old.sources) != 1 or len(new.sources) != 1:
            return False
        (parent, before), = old.sources
        (parent_new, after), = new.sources
        if parent != parent_new or not parent or parent == name:
            return False
        renames = {c.column: c.new_name for c in self.column_changes(parent) or () if c.change == RENAMED}
        return renames.get(before) == after and is_passthrough(old.signature) and is_passthrough(new.signature)

    # the downstream walk ---------------------------------------------------------------------

    def resolve(self, child: str, source: Source, gone_names: set[str]) -> Source:
        """An unresolved column named like a parent's removed column is that parent's."""
        model, column = source
        if model or column not in gone_names:
            return source
        for parent in sorted(self.parents[child]):
            if column not in (self.names(parent, True) or []) and column in (self.names(parent, False) or []):
                return (parent, column)
        return source

    def sources(self, name: str, new: bool, column: str) -> frozenset[Source]:
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

    def descendants(self, name: str) -> set[str]:
        seen: set[str] = set()
        todo = [name]
        while todo:
            for child in self.children.get(todo.pop(), ()):
                if child not in seen:
                    seen.add(child)
                    todo.append(child)
        return seen


def _parents(snap: Snapshot) -> set[str]:
    names = {p.name for p in snap.parents}
    depends = snap.definition.get("depends_on")
    if isinstance(depends, (list, tuple)):
        names |= {str(d).lower() for d in depends}
    return names - {snap.name}


def owner(snap: Snapshot) -> str | None:
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
