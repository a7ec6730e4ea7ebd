"""Which meshbot state owns a physical schema: its id in the schema's DBPROPERTIES, read and written here."""

from __future__ import annotations

import re

from bot.spark.engine import SparkEngine
from bot.spark.errors import spark_errors
from bot.spark.sql import quote_table

OWNER_PROPERTY = "meshbot.state_id"
_PROPERTY = re.compile(r"\(([^,()]+),([^()]*)\)")


def parse_properties(text: str) -> dict[str, str]:
    """DESCRIBE SCHEMA EXTENDED's `Properties` value as a mapping.

    >>> parse_properties("((meshbot.state_id,ab12), (owner,me))")
    {'meshbot.state_id': 'ab12', 'owner': 'me'}
    >>> parse_properties("")
    {}
    """
    return {key.strip(): value.strip() for key, value in _PROPERTY.findall(text or "")}


def schema_owner(engine: SparkEngine, schema: str) -> str | None:
    """The id of the state that owns `schema` (None: no meshbot state claimed it)."""
    with spark_errors(f"describing schema {schema}"):
        rows = engine.fetch(f"DESCRIBE SCHEMA EXTENDED {quote_table(schema)}", subject=f"describing schema {schema}")
    for row in rows:
        if str(row.get("info_name", "")).lower() == "properties":
            return parse_properties(str(row.get("info_value") or "")).get(OWNER_PROPERTY) or None
    return None


def claim_schema(engine: SparkEngine, schema: str, state_id: str) -> None:
    """Record `state_id` as the owner of `schema`."""
    statement = (f"ALTER SCHEMA {quote_table(schema)} SET DBPROPERTIES "
                 f"('{OWNER_PROPERTY}' = '{state_id.replace(chr(39), '')}')")
    with spark_errors(f"setting the owner of schema {schema}"):
        engine.sql(statement)
