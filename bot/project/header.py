"""Split a `MODEL (...)`/`AUDIT (...)` file into header properties and statements, and read header values."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from sqlglot import exp
from sqlglot.errors import ParseError

from bot.errors import ConfigError
from bot.project.floats import declared_type
from bot.project.sqltext import (is_blank, line_at, matching_paren, parse_sql, skip_blank,
                                 split_top_level, statement_end, strip_comments, to_sql)

_KEY = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*", re.S)


@dataclass(frozen=True)
class Prop:
    """One `key value` pair of a header; `text` is the raw value text (may be empty)."""

    key: str
    text: str
    line: int


@dataclass(frozen=True)
class Statement:
    """One parsed statement of a file body with its source text and first line."""

    expression: exp.Expression
    text: str
    line: int


@dataclass(frozen=True)
class Block:
    """A header block (`MODEL (...)`) with the statements following it up to the next block."""

    keyword: str
    props: tuple[Prop, ...]
    line: int
    body: tuple[tuple[int, str], ...]   # (offset in the file, statement text)
    offset: int = 0                     # where the header starts in the file


def split_blocks(text: str, *, keyword: str, path: Path, also: str | None = None) -> list[Block]:
    """Find every `KEYWORD (...)` block; statements after a block belong to it. The file must start with one.

    `also` names a second keyword whose blocks may follow (a model file's inline `AUDIT (...)`).
    """
    first = re.compile(rf"{keyword}\s*\(", re.I)
    pattern = re.compile(rf"({keyword}|{also})\s*\(", re.I) if also else first
    pos = skip_blank(text)
    if not first.match(text, pos):
        raise ConfigError(f"expected the file to start with a `{keyword} (...)` header",
                          path=path, line=line_at(text, pos))
    blocks: list[Block] = []
    while pos < len(text):
        match = pattern.match(text, pos)
        if match:
            header_line = line_at(text, pos)
            word = match.group(0).split("(")[0].strip().upper()
            close = matching_paren(text, match.end() - 1)
            if close < 0:
                raise ConfigError(f"`{word} (` is never closed", path=path, line=header_line)
            props = parse_props(text[match.end():close], base=match.end(), text=text, path=path)
            blocks.append(Block(word, props, header_line, (), pos))
            pos = close + 1
        end = statement_end(text, pos)
        start = skip_blank(text, pos)
        if start < end:
            last = blocks[-1]
            blocks[-1] = Block(last.keyword, last.props, last.line, last.body + ((start, text[start:end]),),
                               last.offset)
        pos = skip_blank(text, end + 1)
    return blocks


def parse_props(inner: str, *, base: int, text: str, path: Path) -> tuple[Prop, ...]:
    """`name x, kind FULL,` → Prop pairs; `base` is the offset of `inner` in `text` (for lines)."""
    props: list[Prop] = []
    for offset, piece in split_top_level(inner, ",", base=base):
        if is_blank(piece):
            continue
        start = skip_blank(piece)
        match = _KEY.match(piece, start)
        line = line_at(text, offset + start)
        if not match:
            raise ConfigError(f"expected `key value`, got `{piece.strip()[:40]}`", path=path, line=line)
        props.append(Prop(match.group(1).lower(), piece[match.end():].strip(), line))
    return tuple(props)


def parse_body(block: Block, *, text: str, dialect: str, path: Path) -> list[Statement]:
    """Parse each statement after a header; syntax errors name the file line (not the statement's)."""
    statements = []
    for offset, piece in block.body:
        line = line_at(text, offset)
        try:
            parsed = parse_sql(piece, dialect)
        except ParseError as error:
            raise _syntax_error(error, path=path, line=line) from None
        strip_comments(parsed)
        statements.extend(Statement(e, piece.strip(), line) for e in parsed)
    return statements


def _syntax_error(error: ParseError, *, path: Path, line: int) -> ConfigError:
    record = error.errors[0] if error.errors else {}
    description = record.get("description") or str(error).splitlines()[0]
    err_line = record.get("line")
    highlight = record.get("highlight")
    message = f"SQL syntax error: {description}" + (f" near `{highlight}`" if highlight else "")
    return ConfigError(message, path=path, line=line + err_line - 1 if err_line else line,
                       col=record.get("col"))


def parse_value(prop: Prop, *, dialect: str, path: Path) -> exp.Expression:
    """A header value as a sqlglot expression."""
    if not prop.text:
        raise ConfigError(f"`{prop.key}` needs a value", path=path, line=prop.line)
    try:
        parsed = parse_sql(prop.text, dialect)
    except ParseError as error:
        raise ConfigError(f"invalid value for `{prop.key}`: {prop.text[:80]}", path=path,
                          line=prop.line) from error
    if len(parsed) != 1:
        raise ConfigError(f"invalid value for `{prop.key}`: {prop.text[:80]}", path=path, line=prop.line)
    strip_comments(parsed)
    return parsed[0]


def value_items(value: exp.Expression) -> list[exp.Expression]:
    """Items of `(a, b)`, `[a, b]`, `ARRAY(a, b)`, or a single value as a one-item list."""
    if isinstance(value, (exp.Tuple, exp.Array)):
        return list(value.expressions)
    if isinstance(value, exp.Paren):
        return value_items(value.this) if isinstance(value.this, exp.Tuple) else [value.this]
    return [value]


def value_text(value: exp.Expression, dialect: str) -> str:
    """A scalar header value as text: strings unquoted, identifiers and dotted names as written."""
    if isinstance(value, exp.Literal):
        return str(value.this)
    if isinstance(value, (exp.Column, exp.Dot)) and all(isinstance(p, exp.Identifier) for p in value.parts):
        return ".".join(p.name for p in value.parts)
    if isinstance(value, (exp.Identifier, exp.Var)):
        return value.name
    if isinstance(value, exp.Boolean):
        return "true" if value.this else "false"
    if isinstance(value, exp.Neg) and isinstance(value.this, exp.Literal):
        return "-" + str(value.this.this)
    return to_sql(value, dialect)


def value_names(value: exp.Expression, dialect: str) -> tuple[str, ...]:
    """A name or list of names (`id`, `(a, b)`, `[a, 'b']`) as strings."""
    return tuple(value_text(item, dialect) for item in value_items(value))


def value_bool(prop: Prop, value: exp.Expression, dialect: str, path: Path) -> bool:
    text = value_text(value, dialect).lower()
    if text not in ("true", "false"):
        raise ConfigError(f"`{prop.key}` must be true or false, got `{text}`", path=path, line=prop.line)
    return text == "true"


def value_int(prop: Prop, value: exp.Expression, dialect: str, path: Path) -> int:
    text = value_text(value, dialect)
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"`{prop.key}` must be an integer, got `{text}`", path=path,
                          line=prop.line) from None


def value_pairs(prop: Prop, value: exp.Expression, dialect: str, path: Path) -> tuple[tuple[str, str], ...]:
    """`(a = 'x', b = 1)` → (("a", "x"), ("b", "1")); values that are not literals stay SQL text."""
    pairs = []
    for item in value_items(value):
        if not isinstance(item, (exp.EQ, exp.PropertyEQ)):
            raise ConfigError(f"`{prop.key}` expects `(name = value, ...)`", path=path, line=prop.line)
        pairs.append((value_text(item.this, dialect), value_text(item.expression, dialect)))
    return tuple(pairs)


def column_types(prop: Prop, *, dialect: str, path: Path) -> tuple[tuple[str, str], ...]:
    """`(id INT, name STRING)` → (("id", "INT"), ("name", "STRING")) with Spark type names."""
    inner = prop.text.strip()
    if inner.startswith("(") and inner.endswith(")"):
        inner = inner[1:-1]
    columns = []
    for _, piece in split_top_level(inner, ","):
        if is_blank(piece):
            continue
        parts = piece.strip().split(None, 1)
        if len(parts) != 2:
            raise ConfigError(f"`{prop.key}` expects `(name TYPE, ...)`, got `{piece.strip()}`",
                              path=path, line=prop.line)
        columns.append((parts[0].strip('`"').lower(), spark_type(parts[1], dialect=dialect, path=path,
                                                                 line=prop.line)))
    return tuple(columns)


def spark_type(text: str, *, dialect: str, path: Path, line: int | None = None) -> str:
    """A column type in any dialect as a Spark type name (`VARCHAR` → `STRING`)."""
    try:
        return declared_type(text, dialect or None).sql("spark")
    except (ParseError, ValueError):
        raise ConfigError(f"unknown column type `{text.strip()}`", path=path, line=line) from None
