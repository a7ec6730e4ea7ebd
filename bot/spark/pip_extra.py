"""Which pip extra a gateway's Spark needs, read from config.yaml as data with the standard library alone.

meshbot's PySpark comes in one of two extras (pyproject.toml): `connect`, the Spark Connect client alone
(pyspark-client: PySpark's Python code without its jars), and `spark`, the full PySpark that also runs
Spark in the process (local and cluster masters). The GitHub Action runs this file with `python -I`
before meshbot (or PyYAML) is installed, to pick the extra to install and the installed environment to
restore: `python -I bot/spark/pip_extra.py PROJECT_DIR [GATEWAY]` prints `connect` or `spark`.

It reads a small block-style subset of YAML: `default_gateway` and, under `gateways`, the chosen
gateway's `connection` and `test_connection`. The answer is `connect` only when it is sure that every
Spark connection of the gateway is `remote:`; anything it cannot read for certain (config.py, flow
mappings, anchors, Jinja blocks, a missing file) answers `spark`, which runs every gateway. A wrong
`connect` is never silent: meshbot then stops naming `meshbot[spark]` (bot/spark/session.py).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

CONNECT = "connect"
SPARK = "spark"
CONFIG_NAMES = ("config.yaml", "config.yml")
_UNSURE = re.compile(r"\{%|^\s*---|^\s*\.\.\.\s*$|(^|\s)[&*!][\w-]|<<\s*:", re.MULTILINE)
_KEY = re.compile(r"""^(?P<indent> *)(?P<key>[A-Za-z0-9_.\-]+|"[^"]*"|'[^']*')\s*:(?:\s+(?P<value>.*))?$""")


class Unsure(Exception):
    """The text is outside the subset this reader is sure about."""


def _strip_comment(line: str) -> str:
    """The line without a trailing `# comment` (a `#` inside quotes stays).

    >>> _strip_comment("  remote: 'sc://h:1/;x=#y'  # the server")
    "  remote: 'sc://h:1/;x=#y'"
    """
    quote = ""
    for index, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1] in " \t"):
            return line[:index].rstrip()
    return line.rstrip()


def _scalar(value: str) -> str:
    value = value.strip()
    if value[:1] in ("{", "[", "|", ">"):
        raise Unsure(f"a flow or block value: {value[:20]}")
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def block_mapping(text: str) -> dict:
    """Nested dicts of the block mappings in `text`; a list under a key reads as `[...]` (not looked into).

    >>> block_mapping("a:\\n  b: 1  # one\\n  c:\\n    - x: 2\\n    - y\\nd: 'q'\\n")
    {'a': {'b': '1', 'c': '[...]'}, 'd': 'q'}
    >>> block_mapping("gateways: {ci: {connection: {remote: sc://h}}}")
    Traceback (most recent call last):
    bot.spark.pip_extra.Unsure: a flow or block value: {ci: {connection: {r
    """
    if "\t" in text or _UNSURE.search(text):
        raise Unsure("tabs, documents, anchors, aliases, tags, merge keys or Jinja blocks")
    root: dict = {}
    # (indent of the key, its mapping, the mapping holding the key, the key)
    stack: list[tuple[int, dict, dict | None, str]] = [(-1, root, None, "")]
    list_indent: int | None = None   # lines deeper than this belong to a list being skipped
    for raw in text.splitlines():
        line = _strip_comment(raw)
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        if list_indent is not None:
            if indent > list_indent or (indent == list_indent and line.lstrip().startswith("-")):
                continue
            list_indent = None
        if line.lstrip().startswith("-"):
            # a list: the value of the last key that has no value yet (`key:` above, the item deeper or level)
            while stack[-1][0] > indent:
                stack.pop()
            level, child, owner, key = stack[-1]
            if owner is None or child:
                raise Unsure(f"a list item outside a mapping key: {line.strip()[:20]}")
            owner[key] = "[...]"
            stack.pop()
            list_indent = indent
            continue
        while stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        match = _KEY.match(line)
        if match is None:
            raise Unsure(f"not a `key: value` line: {line.strip()[:20]}")
        key = _scalar(match["key"])
        if match["value"] is None or not match["value"].strip():
            child = {}
            parent[key] = child
            stack.append((indent, child, parent, key))
        else:
            parent[key] = _scalar(match["value"])
    return root


def gateway_extra(config_text: str, gateway: str = "") -> str:
    """`connect` when every Spark connection of the gateway is Spark Connect (`remote:`), else `spark`.

    >>> ci = "gateways:\\n  ci:\\n    connection:\\n      type: spark\\n      remote: sc://spark:15002\\n"
    >>> gateway_extra(ci)
    'connect'
    >>> gateway_extra(ci + "    test_connection:\\n      master: local[2]\\n")
    'spark'
    >>> gateway_extra("model_defaults:\\n  dialect: spark\\n")   # no gateways: local Spark
    'spark'
    >>> gateway_extra(ci + "default_gateway: ci\\n", "local")   # an unknown gateway: meshbot will say so
    'spark'
    >>> gateway_extra("gateways:\\n  duck:\\n    connection:\\n      type: duckdb\\n" + ci[10:])   # the first Spark one
    'connect'
    >>> gateway_extra(ci + "    test_connection:\\n      type: duckdb\\n")   # ignored by meshbot
    'connect'
    """
    try:
        config = block_mapping(config_text)
    except Unsure:
        return SPARK
    gateways = config.get("gateways")
    if not isinstance(gateways, dict) or not gateways:
        return SPARK
    name = gateway or config.get("default_gateway") or next(
        (key for key, spec in gateways.items() if isinstance(spec, dict) and _is_spark(spec.get("connection"))),
        next(iter(gateways)))
    spec = gateways.get(name)
    if not isinstance(spec, dict):
        return SPARK
    connections = [spec.get("connection"), *([spec["test_connection"]] if _is_spark(spec.get("test_connection"))
                                             else [])]
    for connection in connections:
        if not isinstance(connection, dict) or not isinstance(connection.get("remote"), str):
            return SPARK
        if not connection["remote"].strip() or connection.get("master"):
            return SPARK
        if str(connection.get("type", "spark")).lower() != "spark":
            return SPARK
    return CONNECT


def _is_spark(connection: object) -> bool:
    """A connection meshbot uses (bot.project.config: other types are ignored unless chosen)."""
    return isinstance(connection, dict) and str(connection.get("type", "spark")).lower() == "spark"


def project_extra(project: Path, gateway: str = "") -> str:
    """The extra for the project's config.yaml (config.yml); `spark` when there is none (config.py)."""
    for name in CONFIG_NAMES:
        path = project / name
        if path.is_file():
            try:
                return gateway_extra(path.read_text(encoding="utf-8"), gateway)
            except (OSError, UnicodeDecodeError):
                return SPARK
    return SPARK


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        print("usage: python -I extra.py PROJECT_DIR [GATEWAY]", file=sys.stderr)
        return 2
    print(project_extra(Path(argv[0]), argv[1] if len(argv) > 1 else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
