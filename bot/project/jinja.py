"""Jinja in SQL models as SQLMesh runs it: `JINJA_*_BEGIN; ... JINJA_END;` blocks, macros/*.sql, sandboxing."""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from sqlglot import exp
from sqlglot.errors import ParseError

from bot.errors import ConfigError
from bot.project.files import read_text
from bot.project.macros import interval_variables
from bot.project.sqltext import line_at, parse_sql

if TYPE_CHECKING:
    import jinja2

JINJA_QUERY = "JINJA_QUERY"
JINJA_STATEMENT = "JINJA_STATEMENT"
_MARK = "meshbot_jinja_block_"
_BLOCK = re.compile(r"\bJINJA_(QUERY|STATEMENT)_BEGIN\s*;(.*?)\bJINJA_END\s*;?", re.I | re.S)
_BEGIN = re.compile(r"\bJINJA_(?:QUERY|STATEMENT)_BEGIN\b|\bJINJA_END\b", re.I)
_MACRO = re.compile(r"\{%-?\s*macro\s+(\w+)\s*\(.*?\{%-?\s*endmacro\s*-?%\}", re.S)
_TEMPLATE = "<jinja>"


@dataclass(frozen=True)
class JinjaBlock:
    """One `JINJA_QUERY_BEGIN;` or `JINJA_STATEMENT_BEGIN;` block of a model file."""

    kind: str       # JINJA_QUERY or JINJA_STATEMENT
    text: str       # the Jinja source between `..._BEGIN;` and `JINJA_END;`
    line: int       # file line on which `text` starts


def cut_blocks(text: str, *, path: Path) -> tuple[str, tuple[JinjaBlock, ...]]:
    """`text` with each Jinja block replaced by a placeholder statement on the same lines, and the blocks.

    >>> cut, blocks = cut_blocks("MODEL (name a);\\nJINJA_QUERY_BEGIN;\\nSELECT {{ 1 }}\\nJINJA_END;",
    ...                          path=Path("a.sql"))
    >>> cut.splitlines()[1], blocks[0].kind, blocks[0].line
    ("SELECT 'meshbot_jinja_block_0'", 'JINJA_QUERY', 2)
    """
    blocks: list[JinjaBlock] = []

    def placeholder(match: re.Match[str]) -> str:
        blocks.append(JinjaBlock(f"JINJA_{match.group(1).upper()}", match.group(2),
                                 line_at(text, match.start(2))))
        return f"SELECT '{_MARK}{len(blocks) - 1}'" + "\n" * match.group(0).count("\n") + ";"

    cut = _BLOCK.sub(placeholder, text)
    stray = _BEGIN.search(cut)
    if stray:
        raise ConfigError(f"`{stray.group(0)}` has no matching "
                          f"{'JINJA_..._BEGIN;' if stray.group(0).upper() == 'JINJA_END' else 'JINJA_END;'}",
                          path=path, line=line_at(cut, stray.start()))
    return cut, tuple(blocks)


def block_index(expression: exp.Expression) -> int | None:
    """The number of the Jinja block a placeholder statement from cut_blocks stands for, else None."""
    if not isinstance(expression, exp.Select) or len(expression.expressions) != 1:
        return None
    value = expression.expressions[0]
    if isinstance(value, exp.Literal) and value.is_string and value.this.startswith(_MARK):
        return int(value.this[len(_MARK):])
    return None


def statement_expression(text: str) -> exp.Anonymous:
    """A Jinja statement block kept among a model's pre/post statements (`JINJA_STATEMENT('...')`)."""
    return exp.Anonymous(this=JINJA_STATEMENT, expressions=[exp.Literal.string(text)])


def statement_text(expression: exp.Expression) -> str | None:
    """The Jinja source of a statement made by statement_expression, else None."""
    if isinstance(expression, exp.Anonymous) and str(expression.this).upper() == JINJA_STATEMENT \
            and len(expression.expressions) == 1 and isinstance(expression.expressions[0], exp.Literal):
        return expression.expressions[0].this
    return None


@dataclass(frozen=True)
class JinjaMacros:
    """The `{% macro %}` definitions of a project's macros/*.sql files, by name."""

    definitions: Mapping[str, str] = field(default_factory=dict)

    def used_by(self, *sources: str) -> tuple[tuple[str, str], ...]:
        """(name, definition) of every macro the Jinja `sources` call, directly or through other macros.

        >>> macros = JinjaMacros({"a": "{% macro a() %}{{ b() }}{% endmacro %}",
        ...                       "b": "{% macro b() %}1{% endmacro %}", "c": "{% macro c() %}{% endmacro %}"})
        >>> [name for name, _ in macros.used_by("SELECT {{ a() }}")]
        ['a', 'b']
        """
        seen: set[str] = set()
        pending = [name for source in sources for name in _names(source) if name in self.definitions]
        while pending:
            name = pending.pop()
            if name not in seen:
                seen.add(name)
                pending += [n for n in _names(self.definitions[name]) if n in self.definitions]
        return tuple((name, self.definitions[name]) for name in sorted(seen))


def _names(source: str) -> set[str]:
    import jinja2
    from jinja2 import meta, nodes
    from jinja2.sandbox import SandboxedEnvironment

    try:
        tree = SandboxedEnvironment(extensions=_EXTENSIONS).parse(source)
    except jinja2.TemplateSyntaxError:
        return set()   # reported with its line when the source is rendered
    return meta.find_undeclared_variables(tree) | {n.name for n in tree.find_all(nodes.Name)}


def load_jinja_macros(files: Iterable[Path]) -> JinjaMacros:
    """Every `{% macro name(...) %}` of the files (a project's macros/*.sql); a name defined twice is an error."""
    definitions: dict[str, str] = {}
    where: dict[str, Path] = {}
    paths = list(files)
    if not paths:
        return JinjaMacros(definitions)
    import jinja2   # here, as in the other functions: a project without Jinja never imports it
    from jinja2.sandbox import SandboxedEnvironment

    for path in paths:
        text = read_text(path)
        try:
            SandboxedEnvironment(extensions=_EXTENSIONS).parse(text)
        except jinja2.TemplateSyntaxError as error:
            raise ConfigError(f"Jinja syntax error: {error.message}", path=path, line=error.lineno) from None
        for match in _MACRO.finditer(text):
            name = match.group(1)
            if name in definitions:
                raise ConfigError(f"Jinja macro `{name}` is also defined in {where[name]}",
                                  path=path, line=line_at(text, match.start()))
            definitions[name], where[name] = match.group(0), path
    return JinjaMacros(definitions)


_EXTENSIONS = ["jinja2.ext.do", "jinja2.ext.loopcontrols"]


@dataclass(frozen=True)
class JinjaValues:
    """What a Jinja block of a model sees besides its macros (SQLMesh's names)."""

    start: int
    end: int
    execution_time: int
    variables: Mapping[str, Any]
    gateway: str
    this_model: str                            # quoted table name in the model's dialect
    runtime_stage: str = "loading"
    resolve_table: Callable[[str], str] = str

    def as_globals(self) -> dict[str, Any]:
        values = interval_variables(start=self.start, end=self.end, execution_time=self.execution_time)
        for prefix in ("start", "end", "execution"):
            moment: datetime = values[f"{prefix}_dt"]
            values[f"{prefix}_dtntz"] = moment.replace(tzinfo=None)
            values[f"{prefix}_tstz"] = moment.astimezone(timezone.utc).isoformat(sep=" ")
            values[f"{prefix}_hour"] = moment.hour
        values.update({k.replace("execution_", "latest_"): v for k, v in values.items()
                       if k.startswith("execution_")})
        variables = {str(k).lower(): v for k, v in self.variables.items()}
        return {**values, "var": lambda name, default=None: variables.get(str(name).lower(), default),
                "gateway": self.gateway, "this_model": self.this_model, "runtime_stage": self.runtime_stage,
                "resolve_table": self.resolve_table}


def render_jinja(block: JinjaBlock, *, values: JinjaValues, macros: tuple[tuple[str, str], ...],
                 path: Path, model_name: str) -> str:
    """The block rendered in a sandbox; a syntax error or an undefined name is a ConfigError with the file line."""
    import jinja2
    from jinja2.sandbox import SandboxedEnvironment

    env = SandboxedEnvironment(extensions=_EXTENSIONS, undefined=jinja2.StrictUndefined)
    env.globals.update(values.as_globals())
    try:
        if macros:
            library = _template(env, "\n".join(definition for _, definition in macros), name="<macros>")
            module = library.make_module(vars=dict(env.globals))
            env.globals.update({name: getattr(module, name) for name, _ in macros})
        return _template(env, block.text, name=_TEMPLATE).render()
    except jinja2.TemplateSyntaxError as error:
        raise _error(error.message or str(error), error.lineno if error.name == _TEMPLATE else None,
                     block=block, path=path, model_name=model_name) from None
    except (jinja2.TemplateError, TypeError, ValueError, AttributeError, KeyError) as error:
        raise _error(str(error), _failing_line(error), block=block, path=path, model_name=model_name) from None


def _template(env: jinja2.Environment, source: str, *, name: str) -> jinja2.Template:
    code = env.compile(source, name=name, filename=name)
    return env.template_class.from_code(env, code, env.globals)


def _failing_line(error: BaseException) -> int | None:
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == _TEMPLATE]
    return frames[-1].lineno if frames else None


def _error(message: str, lineno: int | None, *, block: JinjaBlock, path: Path, model_name: str) -> ConfigError:
    if message.endswith("is undefined"):
        message = f"undefined Jinja variable or macro: {message}"
    line = block.line + lineno - 1 if lineno else block.line
    return ConfigError(f"model {model_name}: cannot render Jinja: {message}", path=path, line=line)


@dataclass(frozen=True)
class JinjaSettings:
    """What rendering a model's Jinja while loading needs: config variables, the gateway, macros/*.sql."""

    variables: Mapping[str, Any] = field(default_factory=dict)
    gateway: str = "local"
    macros: JinjaMacros = field(default_factory=JinjaMacros)

    def digest(self) -> str:
        """Changes whenever a Jinja model's parse could (part of its parse-cache key)."""
        return repr((sorted((str(k), repr(v)) for k, v in self.variables.items()), self.gateway,
                     sorted(self.macros.definitions.items())))


def quoted_table(name: str, dialect: str) -> str:
    """`db.t` as SQL text in `dialect` with every part quoted, ready to be pasted into rendered Jinja.

    >>> quoted_table("db.t", "duckdb")
    '"db"."t"'
    """
    return exp.to_table(name, dialect="spark").sql(dialect=dialect, identify=True)


def parse_rendered(sql: str, *, dialect: str, block: JinjaBlock, path: Path,
                   model_name: str) -> list[exp.Expression]:
    """The statements of a rendered block; SQL that does not parse is a ConfigError naming the block's line."""
    if not sql.strip():
        return []
    try:
        return [e for e in parse_sql(sql, dialect) if e is not None]
    except ParseError as error:
        first = str(error).splitlines()[0]
        raise ConfigError(f"model {model_name}: the rendered Jinja is not valid SQL: {first}",
                          path=path, line=block.line) from None
