"""Frozen value types for a loaded model: its kind, its audits and its SQL, fields only."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Mapping

from sqlglot import exp


class KindName(str, Enum):
    """The model kinds SQLMesh defines; the value is the spelling used in MODEL headers."""

    FULL = "FULL"
    VIEW = "VIEW"
    INCREMENTAL_BY_TIME_RANGE = "INCREMENTAL_BY_TIME_RANGE"
    INCREMENTAL_BY_UNIQUE_KEY = "INCREMENTAL_BY_UNIQUE_KEY"
    SCD_TYPE_2_BY_TIME = "SCD_TYPE_2_BY_TIME"
    SCD_TYPE_2_BY_COLUMN = "SCD_TYPE_2_BY_COLUMN"
    SEED = "SEED"
    EXTERNAL = "EXTERNAL"
    EMBEDDED = "EMBEDDED"
    INCREMENTAL_BY_PARTITION = "INCREMENTAL_BY_PARTITION"
    INCREMENTAL_UNMANAGED = "INCREMENTAL_UNMANAGED"
    CUSTOM = "CUSTOM"

    @property
    def is_incremental(self) -> bool:
        return self in (KindName.INCREMENTAL_BY_TIME_RANGE, KindName.INCREMENTAL_BY_UNIQUE_KEY,
                        KindName.SCD_TYPE_2_BY_TIME, KindName.SCD_TYPE_2_BY_COLUMN,
                        KindName.INCREMENTAL_BY_PARTITION, KindName.INCREMENTAL_UNMANAGED)


    @property
    def is_materialized(self) -> bool:
        """True when the kind owns a physical table or view (EXTERNAL and EMBEDDED do not)."""
        return self not in (KindName.EXTERNAL, KindName.EMBEDDED)


# Other spellings SQLMesh accepts for a kind.
KIND_ALIASES = {"SCD_TYPE_2": KindName.SCD_TYPE_2_BY_TIME.value}


class OnDestructiveChange(str, Enum):
    ERROR = "error"
    WARN = "warn"
    ALLOW = "allow"


@dataclass(frozen=True)
class Kind:
    """A kind with its properties; properties that do not apply to the kind keep their defaults."""

    name: KindName = KindName.VIEW
    # INCREMENTAL_BY_TIME_RANGE
    time_column: str | None = None
    time_column_format: str = "%Y-%m-%d"
    batch_size: int | None = None
    lookback: int = 0
    forward_only: bool = False
    disable_restatement: bool = False
    on_destructive_change: OnDestructiveChange = OnDestructiveChange.ERROR
    # INCREMENTAL_BY_UNIQUE_KEY and SCD_TYPE_2_*
    unique_key: tuple[str, ...] = ()
    # SCD_TYPE_2_*
    valid_from_name: str = "valid_from"
    valid_to_name: str = "valid_to"
    updated_at_name: str = "updated_at"
    scd_columns: tuple[str, ...] = ()  # BY_COLUMN: columns whose change opens a new version; ("*",) = all
    invalidate_hard_deletes: bool = False
    # INCREMENTAL_UNMANAGED: replace the whole table on each run instead of appending
    insert_overwrite: bool = False
    # VIEW
    materialized: bool = False
    # SEED
    seed_path: str | None = None
    csv_settings: tuple[tuple[str, Any], ...] = ()
    # CUSTOM: the materialization's name and its `materialization_properties (...)` as SQL text
    materialization: str | None = None
    materialization_properties: str = ""

    def data_properties(self) -> dict[str, Any]:
        """Properties that decide the data; they enter the data hash."""
        props: dict[str, Any] = {"name": self.name.value}
        if self.name is KindName.INCREMENTAL_BY_TIME_RANGE:
            props.update(time_column=self.time_column, time_column_format=self.time_column_format)
        if self.unique_key:
            props["unique_key"] = list(self.unique_key)
        if self.name in (KindName.SCD_TYPE_2_BY_TIME, KindName.SCD_TYPE_2_BY_COLUMN):
            props.update(valid_from_name=self.valid_from_name, valid_to_name=self.valid_to_name,
                         updated_at_name=self.updated_at_name, scd_columns=list(self.scd_columns),
                         invalidate_hard_deletes=self.invalidate_hard_deletes)
        if self.name is KindName.VIEW:
            props["materialized"] = self.materialized
        if self.name is KindName.INCREMENTAL_UNMANAGED:
            props["insert_overwrite"] = self.insert_overwrite
        if self.name is KindName.SEED:
            props["csv_settings"] = [list(item) for item in self.csv_settings]
        if self.name is KindName.CUSTOM:
            props.update(materialization=self.materialization,
                         materialization_properties=self.materialization_properties)
        return props

    def metadata_properties(self) -> dict[str, Any]:
        """Properties that change how, not what, is computed; they enter the metadata hash."""
        return {
            "batch_size": self.batch_size,
            "lookback": self.lookback,
            "forward_only": self.forward_only,
            "disable_restatement": self.disable_restatement,
            "on_destructive_change": self.on_destructive_change.value,
        }


@dataclass(frozen=True)
class AuditRef:
    """An audit attached to a model: `not_null(columns := (id))`; args are SQL text in Spark dialect."""

    name: str
    args: tuple[tuple[str, str], ...] = ()
    blocking: bool = True


@dataclass(frozen=True, eq=False)
class Model:
    """One model of the project as written, before rendering.

    `name` is normalized: lowercase, `schema.table` (or `catalog.schema.table`); `default` schema
    when the header gives none. `query` is parsed in the model's own `dialect`; rendering
    (bot.project.render) expands macros and transpiles to Spark SQL.
    """

    name: str
    kind: Kind
    dialect: str
    path: Path
    query: exp.Expression | None = None          # None for SEED, EXTERNAL and Python models
    query_text: str = ""                         # source text of the query, for diffs and errors
    pre_statements: tuple[exp.Expression, ...] = ()
    post_statements: tuple[exp.Expression, ...] = ()
    cron: str = "@daily"
    start: str | None = None
    end: str | None = None
    grains: tuple[str, ...] = ()
    audits: tuple[AuditRef, ...] = ()
    owner: str | None = None
    tags: tuple[str, ...] = ()
    description: str | None = None
    column_descriptions: tuple[tuple[str, str], ...] = ()
    columns: tuple[tuple[str, str], ...] = ()    # declared (name, Spark type), in order
    partitioned_by: tuple[str, ...] = ()
    physical_properties: tuple[tuple[str, str], ...] = ()
    session_properties: tuple[tuple[str, str], ...] = ()   # Spark settings while the model is evaluated
    depends_on_explicit: tuple[str, ...] = ()
    depends_on: frozenset[str] = field(default_factory=frozenset)  # parents found in the SQL plus explicit
    enabled: bool = True
    python_source: str | None = None             # Python models: source of the module defining it
    python_entrypoint: str | None = None         # Python models: function name
    seed_content_hash: str | None = None         # SEED: sha256 of the CSV bytes
    seed_abs_path: Path | None = None
    jinja_query: str | None = None               # source of a JINJA_QUERY block; `query` is its reference render
    jinja_line: int = 1                          # file line on which `jinja_query` starts
    jinja_macros: tuple[tuple[str, str], ...] = ()   # (name, definition) of the macros/*.sql macros its Jinja calls
    line: int = 1                                # line of the MODEL header in `path`
    blueprint_variables: tuple[tuple[str, str], ...] = ()   # (name, SQL value) of this model's blueprint
    project: str = ""                            # the `project` key of its repository's config (multi-repo)
    # a model of prod held from a repository the plan did not load (bot.plan.unloaded_repositories): that
    # repository's `project` key; its macros are not loaded, so an unknown macro says to load it with -p
    unloaded_from: str = ""
    # `@model(is_sql=True)`: the function (name, module source) that returns its query, called at every
    # render with that render's evaluator as SQLMesh does; `query` is what it returned at load
    sql_function: str | None = None
    sql_function_source: str | None = None
    # a multi-repo project's models render with their own repository's `variables` (bot.project.repositories);
    # None: with the variables the operation passes (its project's config)
    variables: Mapping[str, Any] | None = None

    @property
    def is_python(self) -> bool:
        return self.python_entrypoint is not None

    @property
    def schema_name(self) -> str:
        return self.name.split(".")[-2]

    @property
    def table_name(self) -> str:
        return self.name.split(".")[-1]

    @property
    def catalog_name(self) -> str | None:
        parts = self.name.split(".")
        return parts[0] if len(parts) == 3 else None
