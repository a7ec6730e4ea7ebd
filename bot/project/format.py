"""Rewrite model and audit files as `sqlmesh format` does: one header property a line, statements pretty-printed."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, SqlglotError

from bot.errors import ConfigError
from bot.project.audit_parser import AuditDefinition
from bot.project.config import FormatConfig
from bot.project.files import read_text
from bot.project.header import Block, split_blocks
from bot.project.model import Model
from bot.project.sqltext import (MACRO_FUNC_PREFIX, is_blank, line_at, matching_paren, parse_sql, split_top_level,
                                 statement_end, to_sql)

# header properties whose values are warehouse SQL, printed in the model's dialect (as SQLMesh 0.236.4
# decides from its field types); every other value is SQLMesh's own and printed dialect-neutral
_MODEL_DIALECT_KEYS = frozenset({
    "audits", "clustered_by", "columns", "defaults", "expression", "grain", "grains", "grants",
    "materialization_properties", "merge_filter", "partitioned_by", "physical_properties", "references",
    "session_properties", "signals", "table_properties", "time_column", "time_data_type", "unique_key",
    "updated_at_name", "valid_from_name", "valid_to_name", "virtual_properties", "when_matched"})
_KIND = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(\()?", re.S)
_KEY_VALUE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(.*)", re.S)
_COMMENT = re.compile(r"--[^\n]*|/\*.*?\*/", re.S)
_MACRO_CALL = re.compile(rf"{MACRO_FUNC_PREFIX}([A-Z0-9_]+)\(")
_INDENT = "  "


def _indent(text: str, prefix: str = _INDENT) -> str:
    return "\n".join(prefix + line if line else line for line in text.split("\n"))


def _comments(text: str) -> list[str]:
    """Comment texts in `text` as SQLMesh prints them: `/* text */`."""
    return [f"/* {c[2:].strip() if c.startswith('--') else c[2:-2].strip()} */" for c in _COMMENT.findall(text)]


def _macros_back(sql: str) -> str:
    """`MESHBOT_MACRO_DEF(` back to the macro call `@DEF(`."""
    return _MACRO_CALL.sub(lambda m: f"@{m.group(1)}(", sql)


_COLON = "meshbot_colon_cast"
_NEWLINE_IN_STRING = "\x00"


def _sqlmesh_style(node: exp.Expression, *, colon_casts: bool, keywords: Mapping[str, Any]) -> exp.Expression:
    """Mark plain casts for `x::t` printing (SQLMesh's rule: a CAST with nothing else set, over no
    operator); print a keyword argument's name bare unless the dialect's tokenizer reads it as a
    keyword: `columns := ...` but `"column" := ...` in DuckDB, as SQLMesh 0.236.4's sqlglot 30.8 does
    (sqlglot 30.30 also quotes `columns`)."""
    if colon_casts and type(node) is exp.Cast and not any(
            v for k, v in node.args.items() if k not in ("this", "to")):
        this = node.this
        if not isinstance(this, (exp.Binary, exp.Unary)) or isinstance(this, exp.Paren):
            node.meta[_COLON] = True
    if isinstance(node, exp.Literal) and node.is_string and "\n" in node.this:
        node.set("this", node.this.replace("\n", _NEWLINE_IN_STRING))   # never indented; restored at the end
    if isinstance(node, exp.PropertyEQ) and isinstance(node.this, exp.Identifier) and \
            not node.this.quoted and node.this.name.upper() not in keywords:
        node.set("this", exp.var(node.this.name))
    return node


def _print_cast(generator: Any, node: exp.Cast) -> str:
    if node.meta.get(_COLON):
        return f"{generator.sql(node, 'this')}::{generator.sql(node, 'to')}"
    return generator.cast_sql(node)


class _Printer:
    """Pretty-prints one file's expressions with the project's `format:` options."""

    def __init__(self, *, dialect: str, options: FormatConfig, path: Path) -> None:
        self.dialect, self.options, self.path = dialect, options, path
        self.generator: dict[str, Any] = {"pretty": True, "normalize_functions": False,
                                          **dict(options.generator_options)}

    def sql(self, expression: exp.Expression, dialect: str | None) -> str:
        colon_casts = not self.options.no_rewrite_casts
        keywords = Dialect.get_or_raise(dialect or None).tokenizer_class.KEYWORDS
        expression = expression.copy().transform(
            lambda n: _sqlmesh_style(n, colon_casts=colon_casts, keywords=keywords), copy=False)
        return _macros_back(to_sql(expression, dialect or "", printers={exp.Cast: _print_cast},
                                   **self.generator))

    def parse(self, text: str, line: int) -> list[exp.Expression]:
        try:
            return parse_sql(text, self.dialect)
        except ParseError as error:
            record = error.errors[0] if error.errors else {}
            raise ConfigError(f"cannot format: SQL syntax error: {record.get('description') or error}",
                              path=self.path, line=line + (record.get("line") or 1) - 1) from None

    def value(self, prop: _Property) -> str:
        if prop.key == "kind":
            return self.kind(prop)
        if prop.key == "columns":
            return self.columns(prop)
        if prop.key == "when_matched":
            return self.when_matched(prop)
        parsed = self.parse(prop.text, prop.line)
        if len(parsed) != 1:
            raise ConfigError(f"cannot format the value of `{prop.key}`", path=self.path, line=prop.line)
        value = parsed[0]
        if prop.key in ("partitioned_by", "clustered_by") and isinstance(value, exp.Paren):
            value = exp.Tuple(expressions=[value.this])   # SQLMesh reads these as a list, printed inline
        if prop.key in _MODEL_DIALECT_KEYS:
            return self.sql(value, self.dialect)
        if isinstance(value, exp.Array) and exp.Array(expressions=[]).sql(dialect=self.dialect).startswith("["):
            return "[" + ", ".join(self.sql(e, None) for e in value.expressions) + "]"
        return self.sql(value.transform(_keep_boolean), None)

    def kind(self, prop: _Property) -> str:
        match = _KIND.match(prop.text)
        if not match:
            raise ConfigError("cannot format `kind`", path=self.path, line=prop.line)
        name = match.group(1).upper()
        if not match.group(2):
            return name
        inner = prop.text[match.end():prop.text.rindex(")")]
        props = _props(inner, prop.line)
        return f"{name} (\n{self.props(props)}\n)" if props else name

    def when_matched(self, prop: _Property) -> str:
        """`(WHEN MATCHED THEN ...)`: MERGE clauses, read inside a MERGE and printed the way SQLMesh does."""
        inner = prop.text.strip()
        inner = inner[1:-1] if inner.startswith("(") and inner.endswith(")") else inner
        merge = self.parse(f"MERGE INTO t USING s ON TRUE {inner}", prop.line)[0]
        whens = merge.args.get("whens")
        if whens is None:
            raise ConfigError("cannot format `when_matched`", path=self.path, line=prop.line)
        return "(\n" + _indent(" ".join(self.sql(w, self.dialect) for w in whens.expressions)) + "\n)"

    def columns(self, prop: _Property) -> str:
        text = prop.text.strip()
        if not (text.startswith("(") and text.endswith(")")):
            raise ConfigError("`columns` must be `(name type, ...)`", path=self.path, line=prop.line)
        lines = []
        for _, piece in split_top_level(text[1:-1], ","):
            name, _, kind = piece.strip().partition(" ")
            try:
                kind = exp.DataType.build(kind.strip(), dialect=self.dialect).sql(dialect=self.dialect)
            except SqlglotError:
                raise ConfigError(f"unknown type `{kind.strip()}` of column `{name}`", path=self.path,
                                  line=prop.line) from None
            lines.append(f"{name} {kind}")
        return "(\n" + ",\n".join(_indent(line) for line in lines) + "\n)"

    def props(self, props: list[_Property]) -> str:
        """One `key value` a line, indented, comma-separated; a comment after a comma stays on its line."""
        lines = []
        for index, prop in enumerate(props):
            text = f"{prop.key} {self.value(prop)}" + ("," if index < len(props) - 1 else "")
            lines.append(_indent(" ".join((text, *prop.trailing))))
        return "\n".join(lines)


@dataclass(frozen=True)
class _Property:
    """One `key value` of a header or kind, with the comments written after it (kept on its line)."""

    key: str
    text: str
    line: int
    trailing: tuple[str, ...] = ()


def _props(inner: str, line: int) -> list[_Property]:
    """`key value` pieces of a header or kind; comments before a key move to the end of the previous one."""
    props: list[_Property] = []
    for _, piece in split_top_level(inner, ","):
        head = piece.lstrip()
        lead: list[str] = []
        while (match := _COMMENT.match(head)) is not None:
            lead += _comments(match.group(0))
            head = head[match.end():].lstrip()
        if props and lead:
            props[-1] = replace(props[-1], trailing=props[-1].trailing + tuple(lead))
        match = _KEY_VALUE.match(head)
        if match:
            props.append(_Property(match.group(1).lower(), match.group(2).strip(), line))
    return props


def _keep_boolean(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.Boolean):
        literal = exp.var("TRUE" if node.this else "FALSE")
        literal.comments = node.comments
        return literal
    return node


def format_model_text(text: str, *, path: Path, dialect: str, options: FormatConfig = FormatConfig(),
                      keyword: str = "MODEL") -> str:
    """The file `text` as `sqlmesh format` writes it (no trailing newline unless `append_newline`).

    `keyword` is the header of the file: MODEL (a model file, inline AUDIT blocks allowed) or AUDIT.

    >>> text = "MODEL (name db.m, kind FULL); select cast(a as int) as a -- note"
    >>> print(format_model_text(text, path=Path("m.sql"), dialect="duckdb"))
    MODEL (
      name db.m,
      kind FULL
    );
    <BLANKLINE>
    SELECT
      a::INT AS a /* note */
    """
    printer = _Printer(dialect=dialect, options=options, path=path)
    blocks = split_blocks(text, keyword=keyword, path=path, also="AUDIT" if keyword == "MODEL" else None)
    parts: list[str] = []
    for index, block in enumerate(blocks):
        end = matching_paren(text, text.index("(", block.offset)) + 1
        between = text[end:statement_end(text, end)]
        trailing = _comments(between) if is_blank(between) else []   # `) /* note */;` stays on the header
        parts.append(" ".join((_header(printer, block, text, first=index == 0), *trailing)))
        end = statement_end(text, end) if trailing else end
        for offset, piece in block.body:
            leading = "".join(c + "\n" for c in _comments(text[end:offset]))
            statements = [printer.sql(e, dialect) for e in printer.parse(piece, line_at(text, offset))]
            parts += [leading + statements[0], *statements[1:]] if statements else []
            end = offset + len(piece)
    formatted = ";\n\n".join(parts).strip().replace(_NEWLINE_IN_STRING, "\n")
    return formatted + "\n" if options.append_newline else formatted


def _header(printer: _Printer, block: Block, text: str, *, first: bool) -> str:
    open_paren = text.index("(", block.offset)
    leading = _comments(text[:block.offset]) if first else []
    lines = {p.key: p.line for p in block.props}
    props = [replace(p, line=lines.get(p.key, block.line))
             for p in _props(text[open_paren + 1:matching_paren(text, open_paren)], block.line)]
    header = f"{block.keyword} (\n{printer.props(props)}\n)"
    if block.keyword == "AUDIT":   # SQLMesh 0.236.4 moves an audit file's leading comment after its header
        return " ".join((header, *leading))
    return "".join(c + "\n" for c in leading) + header


def formatting_disabled(text: str, *, path: Path) -> bool:
    """True when the file's header says `formatting false` (SQLMesh then leaves the file alone)."""
    keyword = "AUDIT" if re.match(r"\s*AUDIT\s*\(", _COMMENT.sub("", text), re.I) else "MODEL"
    block = split_blocks(text, keyword=keyword, path=path)[0]
    return any(p.key == "formatting" and p.text.strip().lower() in ("false", "'false'") for p in block.props)


def format_files(files: Mapping[Path, tuple[str, str]], *, options: FormatConfig, check: bool) -> list[Path]:
    """Format each file (path -> (keyword, dialect)); return those that changed, or would with `check`.

    A file that cannot be read as a model or audit raises ConfigError before any file is written.
    """
    results: list[tuple[Path, str]] = []
    for path, (keyword, dialect) in sorted(files.items()):
        before = read_text(path)
        if formatting_disabled(before, path=path):
            continue
        after = format_model_text(before, path=path, dialect=dialect, options=options, keyword=keyword)
        if after != before:
            results.append((path, after))
    if not check:
        for path, after in results:
            path.write_text(after, encoding="utf-8")
    return [path for path, _ in results]


def project_files(models: Mapping[str, Model], audits: Mapping[str, AuditDefinition],
                  paths: Sequence[str] = ()) -> dict[Path, tuple[str, str]]:
    """What `format` rewrites, for format_files: the SQL model files (not EXTERNAL ones) and the SQL
    audit files; with `paths`, only those of them."""
    files = {m.path: ("MODEL", m.dialect) for m in models.values()
             if m.path.suffix == ".sql" and m.kind.name != "EXTERNAL"}
    files.update({a.path: ("AUDIT", a.dialect) for a in audits.values()
                  if a.path.suffix == ".sql" and a.path not in files})
    if paths:
        wanted = {Path(p).resolve() for p in paths}
        files = {path: spec for path, spec in files.items() if path.resolve() in wanted}
    return files
