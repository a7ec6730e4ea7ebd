"""Project files read as text: size and UTF-8 checked, YAML parsed with `{{ env_var(...) }}` values kept out of its text."""

from __future__ import annotations

import re
import secrets
from pathlib import Path
from typing import Any, Mapping

import yaml

from bot.errors import ConfigError
from bot.project.limits import read_bounded
from bot.project.yaml_parse import YamlDocument, YamlProblem, parse_yaml
from bot.redact import register_env_value

_MISSING = object()


def read_yaml(path: Path, text: str | None = None, *, values: Mapping[str, str] | None = None) -> Any:
    """Parse a YAML file (bot.project.yaml_parse: bounded aliases); malformed YAML becomes a ConfigError
    with the file and line (no snippet).

    `values` maps placeholder tokens of `render_env_vars` to their values, put into the parsed
    scalars (never into the text).
    """
    return read_yaml_document(path, text, values=values).data


def read_yaml_document(path: Path, text: str | None = None, *,
                       values: Mapping[str, str] | None = None) -> YamlDocument:
    """read_yaml with the composed nodes too (their lines)."""
    if text is None:
        text = read_text(path)
    pattern = re.compile("|".join(re.escape(token) for token in values or ()))

    def substitute(node: yaml.Node, loader: yaml.SafeLoader) -> None:
        _substitute(node, values or {}, pattern, loader, set())

    try:
        return parse_yaml(text, edit=substitute if values else None)
    except YamlProblem as problem:
        raise ConfigError(problem.detail, path=path, line=problem.line, col=problem.col) from None


def read_text(path: Path) -> str:
    """A project file's text; a file over its size limit (bot.project.limits, checked before it is read)
    or that is not UTF-8 is a ConfigError naming it (and the line).

    >>> import tempfile
    >>> bad = Path(tempfile.mkdtemp()) / "m.sql"
    >>> _ = bad.write_bytes(b"SELECT 1\\n-- caf\\xe9\\n")
    >>> try:
    ...     read_text(bad)
    ... except ConfigError as error:
    ...     print(error.location.line, error.detail)
    2 not UTF-8 text (byte 0xe9 at column 7); save the file as UTF-8
    """
    return decode_text(read_bounded(path), path)


def decode_text(data: bytes, path: Path) -> str:
    """`data` (the bytes of `path`) as UTF-8 text, or a ConfigError naming the file, line and byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        before = data[:error.start]
        line = before.count(b"\n") + 1
        col = error.start - (before.rfind(b"\n") + 1) + 1
        raise ConfigError(f"not UTF-8 text (byte 0x{data[error.start]:02x} at column {col}); "
                          "save the file as UTF-8", path=path, line=line) from None


def render_env_vars(text: str, *, path: Path, environ: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """Render config text with Jinja, every `{{ ... }}` output kept out of the YAML text.

    `{{ env_var('NAME') }}` / `{{ env_var('NAME', 'default') }}` read `environ`; each value read
    from `environ` is registered as a secret (bot.redact; a plain number or flag aside), a default
    written in the file is not.
    Each `{{ ... }}` prints a placeholder token (letters, digits and underscores: a plain scalar
    anywhere in YAML) and its value is returned aside, for `read_yaml` to put into the parsed
    scalar. A value holding a quote, a colon or a newline therefore stays one value: it cannot add
    a key or break the file.

    >>> text, values = render_env_vars("a: {{ env_var('X') }}", path=Path("c.yaml"), environ={"X": "1\\nb: 2"})
    >>> read_yaml(Path("c.yaml"), text, values=values)
    {'a': '1\\nb: 2'}
    """
    if "{{" not in text and "{%" not in text:
        return text, {}

    def env_var(name: str, default: Any = _MISSING) -> Any:
        if name in environ:
            register_env_value(environ[name])
            return environ[name]
        if default is _MISSING:
            raise ConfigError(f"environment variable `{name}` is not set and has no default", path=path)
        return default

    import jinja2   # only configs with templates pay for importing jinja2
    import jinja2.sandbox

    nonce = secrets.token_hex(6)
    values: dict[str, str] = {}

    def placeholder(value: Any) -> str:
        token = f"meshbotvalue{nonce}n{len(values)}z"
        values[token] = str(value)
        return token

    env = jinja2.sandbox.SandboxedEnvironment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                                              finalize=placeholder)
    try:
        return env.from_string(text).render(env_var=env_var), values
    except jinja2.TemplateSyntaxError as error:
        raise ConfigError(f"invalid template: {error.message}", path=path, line=error.lineno) from None
    except jinja2.UndefinedError as error:
        raise ConfigError(f"invalid template: {error.message}", path=path) from None


_STR_TAG = "tag:yaml.org,2002:str"


def _substitute(node: yaml.Node, values: Mapping[str, str], pattern: "re.Pattern[str]",
                resolver: yaml.resolver.Resolver, seen: set[int]) -> None:
    """Put the rendered values into the scalars holding their placeholders (in place).

    A quoted scalar stays a string; a plain one is typed as YAML types plain scalars (`5432` is
    an int, `true` a bool), but it stays a scalar whatever the value holds.
    """
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.ScalarNode):
        if pattern.search(node.value):
            node.value = pattern.sub(lambda m: values[m.group(0)], node.value)
            node.tag = (resolver.resolve(yaml.ScalarNode, node.value, (True, False))
                        if node.style is None else _STR_TAG)
        return
    if isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _substitute(item, values, pattern, resolver, seen)
    elif isinstance(node, yaml.MappingNode):
        for key, item in node.value:
            _substitute(key, values, pattern, resolver, seen)
            _substitute(item, values, pattern, resolver, seen)
