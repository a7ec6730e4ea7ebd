"""Snapshots: one version of one model, its fingerprint, and its physical and virtual names."""

from __future__ import annotations

import functools
import re
import zlib
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Iterable


class ChangeCategory(str, Enum):
    """How a change affects downstream data (SQLMesh's change categories)."""

    BREAKING = "breaking"
    NON_BREAKING = "non_breaking"
    INDIRECT_BREAKING = "indirect_breaking"
    INDIRECT_NON_BREAKING = "indirect_non_breaking"
    METADATA = "metadata"
    FORWARD_ONLY = "forward_only"

    @property
    def label(self) -> str:
        return {
            "breaking": "Breaking",
            "non_breaking": "Non-breaking",
            "indirect_breaking": "Indirect Breaking",
            "indirect_non_breaking": "Indirect Non-breaking",
            "metadata": "Metadata",
            "forward_only": "Forward-only",
        }[self.value]

    @property
    def needs_new_version(self) -> bool:
        return self in (ChangeCategory.BREAKING, ChangeCategory.NON_BREAKING,
                        ChangeCategory.INDIRECT_BREAKING)


def hash_parts(*parts: str) -> str:
    """A short, stable, decimal hash of strings (SQLMesh uses crc32 the same way).

    >>> hash_parts("a", "b")
    '693802825'
    """
    return str(zlib.crc32(";".join(parts).encode("utf-8")))


@dataclass(frozen=True)
class Fingerprint:
    """The four hashes that identify a model version (a Merkle tree over the DAG)."""

    data_hash: str
    metadata_hash: str
    parent_data_hash: str = "0"
    parent_metadata_hash: str = "0"

    @functools.cached_property   # read several times per model by a plan; the dataclass stays frozen
    def identifier(self) -> str:
        """Changes whenever anything about the model or its ancestors changes."""
        return hash_parts(self.data_hash, self.metadata_hash,
                         self.parent_data_hash, self.parent_metadata_hash)

    @property
    def data_version(self) -> str:
        """Changes when the data of the model or of an ancestor changes (breaking by default)."""
        return hash_parts(self.data_hash, self.parent_data_hash)


@dataclass(frozen=True, order=True)
class SnapshotId:
    name: str
    identifier: str


NO_PHYSICAL_TABLE = frozenset({"EXTERNAL", "EMBEDDED"})   # kinds with no table nor view of their own


@dataclass(frozen=True)
class Snapshot:
    """A model version as stored in state.

    `definition` is the JSON-ready model (bot.project.serialize); `rendered_query` is the Spark SQL
    rendered with fixed reference dates, kept so a later plan can diff against it without the old files.
    """

    name: str
    fingerprint: Fingerprint
    version: str
    kind: str
    definition: dict[str, Any]
    rendered_query: str = ""
    change_category: ChangeCategory | None = None
    parents: tuple[SnapshotId, ...] = ()
    forward_only: bool = False
    physical_schema: str = ""
    created_ts: int = 0
    updated_ts: int = 0
    ttl: str = "in 1 week"
    columns: tuple[tuple[str, str], ...] = field(default=())  # known output columns (name, type)

    @property
    def snapshot_id(self) -> SnapshotId:
        return SnapshotId(self.name, self.fingerprint.identifier)

    @property
    def identifier(self) -> str:
        return self.fingerprint.identifier

    @property
    def is_physical(self) -> bool:
        """Whether this version has a table (or view) of its own: an EXTERNAL model is read where it lives,
        an EMBEDDED one is inlined into its readers."""
        return self.kind not in NO_PHYSICAL_TABLE

    @property
    def table_name(self) -> str:
        if self.kind == "EXTERNAL":   # an external model is read where it lives, never versioned
            return self.name
        return physical_table_name(self.name, self.version, schema=self.physical_schema or None)

    @property
    def dev_table_name(self) -> str:
        """Forward-only previews in dev write to a separate `__dev` table, never to prod's table."""
        return self.table_name + DEV_TABLE_SUFFIX



DEV_TABLE_SUFFIX = "__dev"   # a physical table's name ends with its version (digits), never with this

_NON_WORD = re.compile(r"[^a-zA-Z0-9_]")


def sanitize(name: str) -> str:
    """Make a name safe as a Spark identifier part.

    >>> sanitize("Feature/ABC-12")
    'feature_abc_12'
    """
    return _NON_WORD.sub("_", name).lower()


def split_name(name: str) -> tuple[str | None, str, str]:
    """`[catalog.]schema.table` → (catalog, schema, table)."""
    parts = name.split(".")
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    if len(parts) == 2:
        return None, parts[0], parts[1]
    return None, "default", parts[0]


def physical_schema_name(model_name: str, mapping: dict[str, str] | None = None) -> str:
    """`db.orders` → `sqlmesh__db` unless `physical_schema_mapping` maps the schema elsewhere."""
    _, schema, _ = split_name(model_name)
    if mapping and schema in mapping:
        return sanitize(mapping[schema])
    return f"sqlmesh__{sanitize(schema)}"


def physical_table_name(model_name: str, version: str, *, schema: str | None = None) -> str:
    """`db.orders`, v `1234` → `sqlmesh__db.db__orders__1234`."""
    _, model_schema, table = split_name(model_name)
    physical_schema = schema or physical_schema_name(model_name)
    return f"{physical_schema}.{sanitize(model_schema)}__{sanitize(table)}__{version}"


def normalize_environment(name: str) -> str:
    """Environment names: lowercased, every non-word character becomes `_`.

    >>> normalize_environment("Feature/Login-Page")
    'feature_login_page'
    """
    return re.sub(r"\W", "_", name.strip()).lower()


def view_names(model_names: Iterable[str], environment: str) -> dict[str, str]:
    """Each model's view in `environment`: what queries read there."""
    return {name: view_name(name, environment) for name in model_names}


def view_name(model_name: str, environment: str) -> str:
    """`db.orders` in `dev` → `db__dev.orders`; in `prod` → `db.orders`."""
    catalog, schema, table = split_name(model_name)
    env_schema = schema if environment == "prod" else f"{schema}__{environment}"
    return ".".join(p for p in (catalog, env_schema, table) if p)
