"""`AUDIT (...)` blocks: audits/*.sql files and audits written inline in a model file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlglot import exp

from bot.errors import ConfigError
from bot.project.catalogs import Catalogs
from bot.project.header import Block, parse_body, parse_value, value_items, value_pairs, value_text
from bot.project.sqltext import to_sql


@dataclass(frozen=True)
class AuditDefinition:
    """A user audit from audits/*.sql: `AUDIT (name x, blocking false, defaults (...)); SELECT ...`."""

    name: str
    query: exp.Expression
    query_text: str
    path: Path
    dialect: str
    blocking: bool = True
    defaults: tuple[tuple[str, str], ...] = ()   # (argument, SQL text in the audit's dialect)
    line: int = 1
    standalone: bool = False    # `standalone true`: run on its own by plan and audit, not attached to a model


def scoped_audit_key(name: str, path: Path | str) -> str:
    """The key of an audit written inline in a model file, for that file's models only (as in SQLMesh,
    where two model files may each define their own `unique_id`)."""
    return f"{name}\0{path}"


def audits_from_blocks(blocks: list[Block], *, text: str, path: Path, default_dialect: str,
                       catalogs: Catalogs = Catalogs()) -> list[AuditDefinition]:
    """AuditDefinitions of `AUDIT (...)` blocks (audits/*.sql, or inline in a model file); table names
    lose the default catalog (`"jaffle_shop"."main"."orders"` reads model `main.orders`)."""
    audits = []
    for block in blocks:
        props = {p.key: p for p in block.props}
        if "name" not in props:
            raise ConfigError("the AUDIT header needs a `name`", path=path, line=block.line)
        dialect = value_text(parse_value(props["dialect"], dialect="", path=path), "").lower() \
            if "dialect" in props else default_dialect
        values = {k: parse_value(p, dialect=dialect, path=path) for k, p in props.items()}
        statements = parse_body(block, text=text, dialect=dialect, path=path)
        query = next((s for s in statements if isinstance(s.expression, exp.Query)), None)
        name = value_text(values["name"], dialect).lower()
        if query is None:
            raise ConfigError(f"audit `{name}` has no query", path=path, line=block.line)
        catalogs.strip([s.expression for s in statements], path=path, owner=f"audit `{name}`", text=text)
        blocking = value_text(values["blocking"], dialect).lower() != "false" if "blocking" in values else True
        standalone = value_text(values["standalone"], dialect).lower() == "true" if "standalone" in values else False
        audits.append(AuditDefinition(
            name=name, query=query.expression, query_text=query.text, path=path, dialect=dialect,
            blocking=blocking, line=block.line, standalone=standalone,
            defaults=_audit_defaults(props, values, dialect=dialect, path=path),
        ))
    return audits


def _audit_defaults(props: dict, values: dict, *, dialect: str, path: Path) -> tuple[tuple[str, str], ...]:
    if "defaults" not in values:
        return ()
    value_pairs(props["defaults"], values["defaults"], dialect, path)   # validates the shape
    return tuple((value_text(item.this, dialect).lower(), to_sql(item.expression, dialect))
                 for item in value_items(values["defaults"]))
