"""Canonical text of what decides each output column's values (through CTEs, subqueries, UNION and `*`) and of a query's row-deciding clauses, so two versions of a model compare column by column."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.optimizer.scope import Scope

DIALECT = "spark"
# the clauses that decide which rows a query returns, in the order the comment names them
CLAUSES = ("FROM", "JOIN", "WHERE", "GROUP BY", "HAVING", "QUALIFY", "DISTINCT", "LIMIT", "UNION")


@dataclass(frozen=True)
class QuerySignature:
    """`columns`: output column → the canonical text of its expression, every reference to a CTE's or
    subquery's column replaced by that column's own text down to parent model columns (`db.model.col`),
    so aliases, table aliases, layout and CTE names do not count. `rows`: clause → the canonical text of
    that clause in every scope the outer query reads rows from (its FROM and JOIN sources, recursively)."""

    columns: tuple[tuple[str, str], ...]
    rows: tuple[tuple[str, str], ...]

    def column(self, name: str) -> str | None:
        return dict(self.columns).get(name)

    def changed_clauses(self, other: "QuerySignature") -> tuple[str, ...]:
        """The row-deciding clauses that differ between `self` and `other`, in CLAUSES order."""
        mine, theirs = dict(self.rows), dict(other.rows)
        return tuple(c for c in CLAUSES if mine.get(c, "") != theirs.get(c, ""))


def signature(scope: Scope, table_name) -> QuerySignature:
    """The signature of the qualified query whose root scope is `scope`; `table_name(exp.Table)` names a
    parent model the same way on both versions.

    >>> import sqlglot
    >>> from sqlglot.optimizer.qualify import qualify
    >>> from sqlglot.optimizer.scope import build_scope
    >>> def sig(sql):
    ...     q = qualify(sqlglot.parse_one(sql, read="spark"), schema={"db": {"t": {"a": "INT", "b": "INT"}}})
    ...     return signature(build_scope(q), lambda t: f"{t.db}.{t.name}")
    >>> sig("WITH x AS (SELECT a * 2 AS y FROM db.t) SELECT y AS a FROM x").columns
    (('a', '(db.t.a * 2)'),)
    >>> sig("SELECT t2.a * 2 AS a FROM db.t AS t2").columns == sig("SELECT a*2 a FROM db.t").columns
    True
    """
    signer = _Signer(table_name)
    names = [p.alias_or_name.lower() for p in _branches(scope)[0].expression.selects]
    return QuerySignature(columns=tuple((name, signer.column(scope, name)) for name in dict.fromkeys(names)),
                          rows=tuple(sorted(signer.rows(scope).items())))


class _Signer:
    def __init__(self, table_name) -> None:
        self.table_name = table_name
        self.memo: dict[tuple[int, str], str] = {}

    def column(self, scope: Scope, name: str) -> str:
        """The text of output `name` of `scope`; a set operation's is its branches' by position."""
        key = (id(scope), name)
        if key not in self.memo:
            self.memo[key] = name          # a cycle stops here
            branches = _branches(scope)
            names = [p.alias_or_name.lower() for p in branches[0].expression.selects]
            if name not in names:
                text = name
            else:
                position = names.index(name)
                parts = [self.expression(b, _unaliased(b.expression.selects[position]))
                         for b in branches if position < len(b.expression.selects)]
                text = parts[0] if len(parts) == 1 else " | ".join(parts)
            self.memo[key] = text
        return self.memo[key]

    def expression(self, scope: Scope, node: exp.Expression) -> str:
        """`node` (in `scope`) as text, its columns and subqueries replaced by their own texts."""
        nested = {id(s.expression): s for s in scope.subquery_scopes}
        copy = node.copy()
        originals = {id(d): o for d, o in zip(copy.walk(), node.walk())}

        def replace(dup: exp.Expression) -> exp.Expression:
            original = originals.get(id(dup))
            if original is None:
                return dup
            if id(original) in nested:
                return exp.Var(this=f"({self.whole(nested[id(original)])})")
            if isinstance(original, exp.Column) and not original.is_star:
                return exp.Var(this=self.reference(scope, original))
            return dup

        if id(node) in nested:
            return f"({self.whole(nested[id(node)])})"
        if isinstance(node, exp.Column) and not node.is_star:
            return self.reference(scope, node)
        if isinstance(copy, exp.Subquery):
            copy.set("alias", None)              # qualify names an unaliased scalar subquery `_col_N`
        return copy.transform(replace, copy=False).sql(dialect=DIALECT)

    def reference(self, scope: Scope, column: exp.Column) -> str:
        name, table = column.name.lower(), column.table
        source = scope.sources.get(table) if table else None
        if source is None and table and scope.parent is not None:
            source = scope.parent.sources.get(table)        # a correlated reference
        if not table and len(scope.selected_sources) == 1 and not _is_alias(scope, name):
            (_, source), = scope.selected_sources.values()  # unqualified over one source of unknown columns
            source = source if isinstance(source, (exp.Table, Scope)) else None
        if isinstance(source, exp.Table):
            return f"{self.table_name(source)}.{name}"
        if isinstance(source, Scope):
            return _grouped(self.column(source, name))
        return f"{table}.{name}" if table else name        # a lateral view's column, a SELECT alias

    def whole(self, scope: Scope) -> str:
        """A nested subquery as text: its columns and its rows."""
        names = [p.alias_or_name.lower() for p in _branches(scope)[0].expression.selects]
        rows = self.rows(scope)
        return "SELECT " + ", ".join(self.column(scope, n) for n in dict.fromkeys(names)) + "".join(
            f" {clause} {rows[clause]}" for clause in CLAUSES if clause in rows)

    def rows(self, scope: Scope) -> dict[str, str]:
        """Clause → text for the rows of `scope` and of the scopes it reads rows from."""
        found: dict[str, list[str]] = {}

        def add(clause: str, text: str) -> None:
            if text:
                found.setdefault(clause, []).append(text)

        if isinstance(scope.expression, exp.SetOperation):
            add("UNION", _set_kinds(scope.expression))
            for branch in _branches(scope):
                for clause, text in self.rows(branch).items():
                    add(clause, text)
            return {clause: "; ".join(texts) for clause, texts in found.items()}
        select = scope.expression
        from_ = select.args.get("from_") or select.args.get("from")
        sources = [from_.this] if from_ is not None else []
        for join in select.args.get("joins") or ():
            sources.append(join.this)
            on = join.args.get("on")
            using = [u.sql(dialect=DIALECT) for u in join.args.get("using") or ()]
            add("JOIN", " ".join(filter(None, (join.args.get("method") and str(join.args["method"]),
                                               join.side, join.kind, "JOIN", self._source(scope, join.this),
                                               "ON " + self.expression(scope, on) if on is not None else "",
                                               "USING " + ", ".join(using) if using else ""))))
        add("FROM", ", ".join(self._source(scope, s) for s in sources[:1]))
        for source in sources:
            inner = self._derived(scope, source)
            if inner is not None:
                for clause, text in self.rows(inner).items():
                    add(clause, text)
        for clause, arg in (("WHERE", "where"), ("HAVING", "having"), ("QUALIFY", "qualify")):
            node = select.args.get(arg)
            if node is not None:
                add(clause, self.expression(scope, node.this))
        group = select.args.get("group")
        if group is not None:
            add("GROUP BY", ", ".join(self.expression(scope, g) for g in group.expressions))
        if select.args.get("distinct") is not None:
            add("DISTINCT", select.args["distinct"].sql(dialect=DIALECT))
        limit = select.args.get("limit")
        if limit is not None:
            order = select.args.get("order")
            add("LIMIT", limit.sql(dialect=DIALECT) + (" " + ", ".join(
                self.expression(scope, o) for o in order.expressions) if order is not None else ""))
        return {clause: "; ".join(texts) for clause, texts in found.items()}

    def _derived(self, scope: Scope, source: exp.Expression) -> Scope | None:
        inner = scope.sources.get(source.alias_or_name)
        return inner if isinstance(inner, Scope) else None

    def _source(self, scope: Scope, source: exp.Expression) -> str:
        inner = scope.sources.get(source.alias_or_name)
        if isinstance(inner, exp.Table):
            return self.table_name(inner)
        if isinstance(inner, Scope):
            return ""                              # its own clauses are merged in; its columns are inlined
        return source.sql(dialect=DIALECT)         # a table-valued function, a VALUES list


def _is_alias(scope: Scope, name: str) -> bool:
    return isinstance(scope.expression, exp.Select) and any(
        isinstance(s, exp.Alias) and s.alias.lower() == name
        and not (isinstance(s.this, exp.Column) and s.this.name.lower() == name) for s in scope.expression.selects)


def _grouped(text: str) -> str:
    """`text` inlined into another expression: parenthesized unless it is one column."""
    return text if re.fullmatch(r"[\w.`]+", text) else f"({text})"


def _unaliased(node: exp.Expression) -> exp.Expression:
    return node.this if isinstance(node, exp.Alias) else node


def _branches(scope: Scope) -> list[Scope]:
    if isinstance(scope.expression, exp.SetOperation):
        return [b for s in scope.set_operation_scopes for b in _branches(s)]
    return [scope]


def _set_kinds(node: exp.Expression) -> str:
    if not isinstance(node, exp.SetOperation):
        return ""
    word = f"{type(node).__name__.upper()}{'' if node.args.get('distinct') else ' ALL'}"
    return " ".join(filter(None, (_set_kinds(node.left), word, _set_kinds(node.right))))
