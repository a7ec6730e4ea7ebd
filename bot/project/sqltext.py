"""SQL text helpers for the loader: macro-call rewriting, statement splitting, macro-aware parse and print."""

from __future__ import annotations

import contextlib
import functools
import re
import threading
from typing import Callable, Iterable, Iterator

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.parser import Parser
from sqlglot.tokens import TokenType

MACRO_FUNC_PREFIX = "MESHBOT_MACRO_"

# Quoted strings, quoted identifiers and comments: never looked into by the scanners below.
_SKIP = r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|`[^`]*`|--[^\n]*|/\*.*?(?:\*/|\Z)"""
_MACRO_CALL = re.compile(rf"(?P<skip>{_SKIP})|@(?P<name>[A-Za-z_][A-Za-z0-9_]*)\(", re.S)
_STRUCTURE = re.compile(rf"(?P<skip>{_SKIP})|(?P<ch>[;,()\[\]{{}}])", re.S)
_BLANK = re.compile(rf"(?:\s+|{_SKIP[_SKIP.index('--'):]})*", re.S)
_OPEN, _CLOSE = "([{", ")]}"
# `@{name}` inside an identifier (`@{x}_amount`, `t.@{x}_amount`) is parsed as part of the identifier,
# spelled with this marker; the macro evaluator puts the variable's value in (SQLMesh's `@{}`).
# A variable glued onto the end of a name (`amount_@x`) is one identifier too, as SQLMesh's parser joins
# connected tokens; `@x_amount` stays the variable `x_amount`.
_BRACED_CALL = re.compile(rf"(?P<skip>{_SKIP})|@\{{(?P<name>[A-Za-z_][A-Za-z0-9_]*)\}}"
                          r"|(?<=[A-Za-z0-9_])@(?P<glued>[A-Za-z_][A-Za-z0-9_]*)(?![A-Za-z0-9_(])", re.S)
_BRACED_MARK = re.compile(r"__mb_([A-Za-z_][A-Za-z0-9_]*?)_bm__", re.I)


def preprocess_macros(sql: str) -> str:
    """Rewrite every macro call `@name(` into `MESHBOT_MACRO_NAME(` so sqlglot parses it as a function.

    Strings and comments are left alone; `@var` (no parenthesis) stays and parses as exp.Parameter.

    >>> preprocess_macros("SELECT @each([1], x -> x), @start_ds, '@if(' FROM t -- @def(a)")
    "SELECT MESHBOT_MACRO_EACH([1], x -> x), @start_ds, '@if(' FROM t -- @def(a)"
    """
    if "@" not in sql:
        return sql

    def replace(match: re.Match) -> str:
        if match.group("skip") is not None:
            return match.group(0)
        return f"{MACRO_FUNC_PREFIX}{match.group('name').upper()}("

    def mark(match: re.Match) -> str:
        if match.group("skip") is not None:
            return match.group(0)
        return f"__mb_{match.group('name') or match.group('glued')}_bm__"

    return _BRACED_CALL.sub(mark, _MACRO_CALL.sub(replace, sql))


def has_braced(name: str) -> bool:
    """True when an identifier's name holds a `@{var}` (as parse_sql spells it)."""
    return "_bm__" in name and _BRACED_MARK.search(name) is not None


def fill_braced(name: str, value_of: "Callable[[str], str | None]") -> str:
    """The identifier name with each `@{var}` replaced by `value_of(var)` (left as it is when None).

    >>> fill_braced(parse_sql("SELECT @{x}_amount", "duckdb")[0].selects[0].name, {"x": "coupon"}.get)
    'coupon_amount'
    """
    def put(match: re.Match) -> str:
        value = value_of(match.group(1))
        return match.group(0) if value is None else value

    return _BRACED_MARK.sub(put, name)


def braced_text(value: exp.Expression, dialect: str) -> str:
    """What `@{var}` puts into an identifier: a string or name unquoted, anything else as SQL.

    >>> braced_text(exp.Literal.string("coupon"), "duckdb"), braced_text(exp.column("a"), "duckdb")
    ('coupon', 'a')
    """
    if isinstance(value, exp.Literal):
        return str(value.this)
    if isinstance(value, (exp.Column, exp.Identifier, exp.Var)):
        return value.name
    return value.sql(dialect=dialect)


_REWRITTEN_CALL = re.compile(rf"\b{MACRO_FUNC_PREFIX}([A-Za-z0-9_]+)\(", re.I)


def as_written_macros(sql: str) -> str:
    """Rewritten macro calls turned back into `@name(` for people to read (a plan's diff of a query).

    >>> as_written_macros("SELECT MESHBOT_MACRO_BUMP(1) AS x FROM t")
    'SELECT @bump(1) AS x FROM t'
    """
    return _REWRITTEN_CALL.sub(lambda match: f"@{match.group(1).lower()}(", sql)


def macro_call_name(node: exp.Expression) -> str | None:
    """The lowercase macro name of a rewritten macro call (`MESHBOT_MACRO_DEF(...)` → `def`), else None."""
    if isinstance(node, exp.Anonymous):
        name = str(node.this)
        if name.upper().startswith(MACRO_FUNC_PREFIX):
            return name[len(MACRO_FUNC_PREFIX):].lower()
    return None


def skip_blank(text: str, pos: int = 0) -> int:
    """Index of the first character at or after `pos` that is not whitespace or a comment."""
    return _BLANK.match(text, pos).end()


def line_at(text: str, offset: int) -> int:
    """1-based line number of `offset` in `text`."""
    return text.count("\n", 0, offset) + 1


def matching_paren(text: str, open_index: int) -> int:
    """Index of the bracket closing the one at `open_index`, or -1 when it is never closed."""
    depth = 0
    for match in _STRUCTURE.finditer(text, open_index):
        char = match.group("ch")
        if char is None or char in ",;":
            continue
        depth += 1 if char in _OPEN else -1
        if depth == 0:
            return match.start()
    return -1


def statement_end(text: str, pos: int) -> int:
    """Index of the first top-level `;` at or after `pos`, or len(text)."""
    depth = 0
    for match in _STRUCTURE.finditer(text, pos):
        char = match.group("ch")
        if char is None or char == ",":
            continue
        if char == ";" and depth <= 0:
            return match.start()
        depth += 0 if char == ";" else (1 if char in _OPEN else -1)
    return len(text)


def _split(text: str, separator: str, base: int) -> Iterator[tuple[int, str]]:
    depth, start = 0, 0
    for match in _STRUCTURE.finditer(text):
        char = match.group("ch")
        if char is None:
            continue
        if char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth -= 1
        elif char == separator and depth <= 0:
            yield base + start, text[start:match.start()]
            start = match.end()
    yield base + start, text[start:]


def split_top_level(text: str, separator: str, *, base: int = 0) -> list[tuple[int, str]]:
    """Split on `separator` outside brackets, strings and comments; (offset + base, piece) pairs.

    >>> split_top_level("a 1, b (2, 3), c ','", ",")
    [(0, 'a 1'), (4, ' b (2, 3)'), (14, " c ','")]
    """
    return list(_split(text, separator, base))


def is_blank(text: str) -> bool:
    """True when `text` holds only whitespace and comments."""
    return skip_blank(text) == len(text)


# sqlglot's parser and generator classes may be compiled (the `sqlglotc` package, mypyc): Python
# classes cannot inherit from them. Macro syntax is therefore enabled without subclassing: the parser
# reads its tables live, so the dialect parser's entries are swapped in place for the duration of one
# parse (sqlglot does the same for `PRIOR` in CONNECT BY), under a lock, and restored before the lock
# is released; a generator instance gets its own dispatch table (sqlglot caches one per class).
_TABLES_LOCK = threading.RLock()
_MISSING = object()


def _parse_parameter(self):   # `@x` is a macro variable, also where a dialect reads it otherwise
    return self._parse_parameter()


def _print_parameter(self, expression: exp.Parameter) -> str:
    return "@" + self.sql(expression, "this")


def _print_identifier(default: Callable) -> Callable:
    def print_identifier(self, expression: exp.Identifier) -> str:   # `@{x}_amount` as written
        if isinstance(expression.this, str) and has_braced(expression.this):
            return _BRACED_MARK.sub(lambda m: "@{" + m.group(1) + "}", expression.this)
        return default(self, expression)
    return print_identifier


def _lambda_with_alias(default: Callable) -> Callable:
    """A macro lambda's body may carry an alias (`x -> SUM(x) AS @{x}_total`), as SQLMesh parses it."""
    def parse(self, expressions):
        node = default(self, expressions)
        if isinstance(node, exp.Lambda) and self._match(TokenType.ALIAS):
            node.set("this", exp.Alias(this=node.this, alias=self._parse_id_var(any_token=True)))
        return node
    return parse


_MACRO_DISPATCH: dict[type, dict] = {}   # generator class -> its dispatch table, printing `@x`


@functools.lru_cache(maxsize=None)
def _dialect_tools(dialect: str) -> tuple[Dialect, tuple]:
    """The dialect plus the in-place swaps of its parser's tables that read `@x` as exp.Parameter.

    Each swap is (table, key, value): DuckDB reads `@x` as ABS(x) (a no-paren function) and as a
    Placeholder; SQLMesh projects mean a macro variable.
    """
    base = Dialect.get_or_raise(dialect or None)
    parser_cls = base.parser_class
    parser_swaps = []
    if "@" in parser_cls.NO_PAREN_FUNCTION_PARSERS:
        parser_swaps.append((parser_cls.NO_PAREN_FUNCTION_PARSERS, "@", _MISSING))
    if parser_cls.PLACEHOLDER_PARSERS.get(TokenType.PARAMETER) is not \
            Parser.PLACEHOLDER_PARSERS.get(TokenType.PARAMETER):
        parser_swaps.append((parser_cls.PLACEHOLDER_PARSERS, TokenType.PARAMETER, _parse_parameter))
    if TokenType.ARROW in parser_cls.LAMBDAS:
        arrow = _lambda_with_alias(parser_cls.LAMBDAS[TokenType.ARROW])
        parser_swaps.append((parser_cls.LAMBDAS, TokenType.ARROW, arrow))
    return base, tuple(parser_swaps)


@contextlib.contextmanager
def _swapped(swaps: tuple) -> Iterator[None]:
    if not swaps:
        yield
        return
    with _TABLES_LOCK:
        saved = [(table, key, table.get(key, _MISSING)) for table, key, _ in swaps]
        try:
            for table, key, value in swaps:
                if value is _MISSING:
                    table.pop(key, None)
                else:
                    table[key] = value
            yield
        finally:
            for table, key, value in reversed(saved):
                if value is _MISSING:
                    table.pop(key, None)
                else:
                    table[key] = value


def parse_sql(sql: str, dialect: str) -> list[exp.Expression]:
    """Parse SQL that may contain SQLMesh macros (`@var`, `@MACRO(...)`); empty statements dropped.

    Raises sqlglot.errors.ParseError (line numbers are those of `sql`).

    >>> [e.sql() for e in parse_sql("SELECT @x FROM t", "duckdb")], to_sql(parse_sql("SELECT @x", "spark")[0], "spark")
    (['SELECT @x FROM t'], 'SELECT @x')
    """
    base, parser_swaps = _dialect_tools(dialect)
    tokenizer, parser = _parsing_tools(dialect, base)
    text = preprocess_macros(sql)
    tokens = tokenizer.tokenize(text)
    with _swapped(parser_swaps):
        parsed = parser.parse(tokens, text)
    return [e for e in parsed if e is not None]


_THREAD_TOOLS = threading.local()


def _parsing_tools(dialect: str, base: Dialect) -> tuple:
    """This thread's tokenizer and parser for `dialect`, reused: building them (the tokenizer's core
    tables, the parser's settings) took longer than parsing a short header value. Both reset their
    state at the start of every call."""
    tools = getattr(_THREAD_TOOLS, "by_dialect", None)
    if tools is None:
        tools = _THREAD_TOOLS.by_dialect = {}
    found = tools.get(dialect)
    if found is None:
        found = tools[dialect] = (base.tokenizer_class(dialect=base), base.parser_class(dialect=base))
    return found


def to_sql(expression: exp.Expression, dialect: str, *, printers: dict | None = None, **opts: object) -> str:
    """SQL text of an expression parsed by parse_sql, in `dialect`, with `@var` printed back as `@var`.

    `printers` maps expression types to `(generator, node) -> str` functions used instead of sqlglot's.
    """
    base = _dialect_tools(dialect)[0]
    generator = base.generator_class(dialect=base, **opts)
    dispatch = _MACRO_DISPATCH.get(type(generator))
    if dispatch is None:
        dispatch = _MACRO_DISPATCH[type(generator)] = {
            **generator._dispatch, exp.Parameter: _print_parameter,
            exp.Identifier: _print_identifier(generator._dispatch[exp.Identifier])}
    generator._dispatch = {**dispatch, **printers} if printers else dispatch
    return generator.generate(expression, copy=False)


def selects_star(query: exp.Expression) -> bool:
    """True when some SELECT of `query` (outer, CTE or subquery) projects `*` or `t.*`.

    A star inside a function (`COUNT(*)`) is not a projected star (SQLMesh agrees).

    >>> import sqlglot
    >>> selects_star(sqlglot.parse_one("SELECT ds, COUNT(*) AS n FROM t GROUP BY ds"))
    False
    >>> selects_star(sqlglot.parse_one("WITH c AS (SELECT t.* FROM t) SELECT a FROM c"))
    True
    """
    return any(isinstance(item, (exp.Star, exp.Column)) and item.is_star
               for select in query.find_all(exp.Select) for item in select.expressions)


def written_output_names(query: exp.Expression) -> list[str] | None:
    """The outer SELECT's names read from the query as written (no parse of the rendered SQL), or
    None when a macro, a star or an unnamed expression leaves them to the rendered query.

    >>> written_output_names(parse_sql("SELECT a, b + 1 AS c FROM t", "spark")[0])
    ['a', 'c']
    >>> written_output_names(parse_sql("SELECT a, @x AS c FROM t", "spark")[0]) is None
    True
    >>> written_output_names(parse_sql("SELECT a AS @{x}_c FROM t", "spark")[0]) is None
    True
    """
    if not isinstance(query, exp.Select):
        return None
    names = []
    for projection in query.expressions:
        if projection.is_star or not projection.output_name or projection.find(exp.Parameter) or any(
                macro_call_name(node) is not None for node in projection.find_all(exp.Anonymous)) or any(
                isinstance(node.this, str) and has_braced(node.this) for node in projection.find_all(exp.Identifier)):
            return None
        names.append(projection.output_name)
    return names


_POSITION_KEYS = frozenset({"line", "col", "start", "end"})


def strip_comments(expressions: Iterable[exp.Expression]) -> None:
    """Drop comments in place, so comment-only edits leave the AST (and its SQL) unchanged.

    The token positions sqlglot keeps in identifiers' and literals' meta (for its own error
    highlighting; meshbot reports lines from the file text) are dropped too: sqlglot's copy
    deep-copies each of those dicts, which made copying a parsed query (once per render) cost as
    much as parsing it, and every cached AST carried them.
    """
    for expression in expressions:
        for node in expression.walk():
            if node.comments is not None:
                node.comments = None
            meta = node._meta
            if meta is not None and meta.keys() <= _POSITION_KEYS:
                node._meta = None


def normalize_name(name: str, dialect: str = "spark") -> str:
    """`Shop.Orders` → `shop.orders`; `orders` → `default.orders`; catalogs kept.

    >>> normalize_name('Shop.Orders'), normalize_name('orders'), normalize_name('c.s.t')
    ('shop.orders', 'default.orders', 'c.s.t')
    """
    table = exp.to_table(name, dialect=dialect or None)
    return table_name(table)


def table_name(table: exp.Table) -> str:
    parts = [p.name.lower() for p in (table.args.get("catalog"), table.args.get("db"), table.this) if p]
    if len(parts) == 1:
        parts.insert(0, "default")
    return ".".join(parts)


def table_references(expressions: Iterable[exp.Expression]) -> set[str]:
    """Normalized names of every table read by the statements, CTE names and write targets excluded."""
    names: set[str] = set()
    for expression in expressions:
        ctes = {cte.alias_or_name.lower() for cte in expression.find_all(exp.CTE)}
        targets = _write_targets(expression)
        for table in expression.find_all(exp.Table):
            if not isinstance(table.this, exp.Identifier) or id(table) in targets:
                continue
            if not table.args.get("db") and table.name.lower() in ctes:
                continue
            names.add(table_name(table))
    return names


def _write_targets(expression: exp.Expression) -> set[int]:
    targets: set[int] = set()
    if isinstance(expression, (exp.Create, exp.Insert, exp.Drop, exp.Delete, exp.Update, exp.Merge)):
        target = expression.this
        if isinstance(target, exp.Schema):
            target = target.this
        if isinstance(target, exp.Table):
            targets.add(id(target))
    return targets
