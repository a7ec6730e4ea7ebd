"""The stand-in for SQLMesh 0.236.4's `sqlmesh.core.config` package: its public classes and enums, module by module."""

from __future__ import annotations

from enum import Enum
from typing import Any

# SQLMesh 0.236.4's connection config classes and their `type`
CONNECTION_TYPES = {
    "SparkConnectionConfig": "spark", "DuckDBConnectionConfig": "duckdb", "PostgresConnectionConfig": "postgres",
    "MotherDuckConnectionConfig": "motherduck", "SnowflakeConnectionConfig": "snowflake",
    "DatabricksConnectionConfig": "databricks", "BigQueryConnectionConfig": "bigquery",
    "GCPPostgresConnectionConfig": "gcp_postgres", "RedshiftConnectionConfig": "redshift",
    "MySQLConnectionConfig": "mysql", "MSSQLConnectionConfig": "mssql", "AzureSQLConnectionConfig": "azuresql",
    "FabricConnectionConfig": "fabric", "TrinoConnectionConfig": "trino", "ClickhouseConnectionConfig": "clickhouse",
    "AthenaConnectionConfig": "athena", "RisingwaveConnectionConfig": "risingwave",
    "StarRocksConnectionConfig": "starrocks", "Db2ConnectionConfig": "db2",
}

# SQLMesh 0.236.4's enums a config names, with their values (member names are the values upper-cased)
ENUM_VALUES = {
    "AutoCategorizationMode": ("full", "semi", "off"),
    "EnvironmentSuffixTarget": ("schema", "table", "catalog"),
    "TableNamingConvention": ("schema_and_table", "table_only", "hash_md5"),
    "VirtualEnvironmentMode": ("full", "dev_only"),
    "IntervalUnit": ("year", "month", "day", "hour", "half_hour", "quarter_hour", "five_minute"),
    "OnAdditiveChange": ("ERROR", "WARN", "ALLOW", "IGNORE"),
    "BigQueryConnectionMethod": ("oauth", "oauth-secrets", "service-account", "service-account-json"),
    "BigQueryPriority": ("batch", "interactive"),
    "TrinoAuthenticationMethod": ("no-auth", "basic", "ldap", "kerberos", "jwt", "certificate", "oauth"),
    "UserRole": ("required_approver",),
}

_SETTINGS = ("Config", "ModelDefaultsConfig", "GatewayConfig", "PlanConfig", "NameInferenceConfig", "LinterConfig",
             "CategorizerConfig", "FormatConfig", "BuiltInSchedulerConfig", "MigrationConfig", "RunConfig",
             "JanitorConfig", "UIConfig", "DbtConfig", "CICDBotConfig", "User")

# Each public module of SQLMesh 0.236.4's config package and the names of it this stand-in offers
# (OnDestructiveChange is bot.project.model's own)
MODULES: dict[str, tuple[str, ...]] = {
    "sqlmesh.core.config": (
        "Config", "ModelDefaultsConfig", "GatewayConfig", "PlanConfig", "NameInferenceConfig", "LinterConfig",
        "CategorizerConfig", "AutoCategorizationMode", "FormatConfig", "BuiltInSchedulerConfig", "MigrationConfig",
        "RunConfig", "DbtConfig", "EnvironmentSuffixTarget", "TableNamingConvention", *CONNECTION_TYPES),
    "sqlmesh.core.config.categorizer": ("AutoCategorizationMode", "CategorizerConfig"),
    "sqlmesh.core.config.common": ("EnvironmentSuffixTarget", "TableNamingConvention", "VirtualEnvironmentMode"),
    "sqlmesh.core.config.connection": (*CONNECTION_TYPES, "BigQueryConnectionMethod", "BigQueryPriority",
                                       "TrinoAuthenticationMethod"),
    "sqlmesh.core.config.dbt": ("DbtConfig",),
    "sqlmesh.core.config.format": ("FormatConfig",),
    "sqlmesh.core.config.gateway": ("GatewayConfig",),
    "sqlmesh.core.config.janitor": ("JanitorConfig",),
    "sqlmesh.core.config.linter": ("LinterConfig",),
    "sqlmesh.core.config.migration": ("MigrationConfig",),
    "sqlmesh.core.config.model": ("ModelDefaultsConfig", "IntervalUnit", "OnAdditiveChange", "OnDestructiveChange"),
    "sqlmesh.core.config.naming": ("NameInferenceConfig",),
    "sqlmesh.core.config.plan": ("CategorizerConfig", "PlanConfig"),
    "sqlmesh.core.config.root": ("Config", "EnvironmentSuffixTarget", "TableNamingConvention",
                                 "VirtualEnvironmentMode", "CICDBotConfig", "User"),
    "sqlmesh.core.config.run": ("RunConfig",),
    "sqlmesh.core.config.scheduler": ("BuiltInSchedulerConfig",),
    "sqlmesh.core.config.ui": ("UIConfig",),
    "sqlmesh.core.user": ("User", "UserRole"),
}


class ConfigObject:
    """A SQLMesh config class (`Config`, `ModelDefaultsConfig`, ...): keeps its keyword arguments, which
    `to_raw` turns into what the same settings are in config.yaml. Attributes read and set the arguments,
    so a config.py may change a Config after making it (`config.gateways["x"] = ...`)."""

    _type: str | None = None

    def __init__(self, **kwargs: Any):
        object.__setattr__(self, "kwargs", kwargs)

    def __getattr__(self, name: str) -> Any:
        kwargs = object.__getattribute__(self, "kwargs")
        if name in kwargs:
            return kwargs[name]
        raise AttributeError(f"{type(self).__name__} has no setting `{name}` here")

    def __setattr__(self, name: str, value: Any) -> None:
        self.kwargs[name] = value

    def copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> "ConfigObject":
        """Pydantic's copy (SQLMesh's configs are pydantic models): the same settings, `update` over them."""
        return type(self)(**{**self.kwargs, **(update or {})})

    model_copy = copy

    def update_with(self, other: "ConfigObject") -> "ConfigObject":
        """SQLMesh's `update_with`: `other`'s settings over these, mappings (gateways, variables) merged."""
        merged = dict(self.kwargs)
        for key, value in other.kwargs.items():
            mine = merged.get(key)
            merged[key] = {**mine, **value} if isinstance(mine, dict) and isinstance(value, dict) else value
        return type(self)(**merged)

    def to_raw(self) -> dict[str, Any]:
        raw = {key: _raw(value) for key, value in self.kwargs.items()}
        if self._type:
            raw.setdefault("type", self._type)
        return raw


def _raw(value: Any) -> Any:
    if isinstance(value, ConfigObject):
        return value.to_raw()
    if isinstance(value, dict):
        return {str(k): _raw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_raw(v) for v in value]
    return getattr(value, "value", value)   # enums as their value


def config_class(name: str, type_: str | None = None) -> type:
    return type(name, (ConfigObject,), {"_type": type_, "__module__": __name__})


class _Categorizer(ConfigObject):
    """CategorizerConfig, with SQLMesh's `all_full()`, `all_semi()` and `all_off()`."""

    @classmethod
    def _all(cls, mode: str) -> "_Categorizer":
        return cls(**{kind: mode for kind in ("external", "python", "sql", "seed")})

    @classmethod
    def all_full(cls) -> "_Categorizer":
        return cls._all("full")

    @classmethod
    def all_semi(cls) -> "_Categorizer":
        return cls._all("semi")

    @classmethod
    def all_off(cls) -> "_Categorizer":
        return cls._all("off")


CLASSES: dict[str, Any] = {name: config_class(name) for name in _SETTINGS}
CLASSES["CategorizerConfig"] = type("CategorizerConfig", (_Categorizer,), {"__module__": __name__})
CLASSES["BuiltInSchedulerConfig"] = config_class("BuiltInSchedulerConfig", "builtin")   # SQLMesh's default
# Connections of other engines: a config.py writes them for its other gateways; meshbot refuses such a
# gateway only when it is chosen (bot.project.config).
CLASSES.update({name: config_class(name, type_) for name, type_ in CONNECTION_TYPES.items()})
CLASSES.update({name: Enum(name, [(value.upper().replace("-", "_"), value) for value in values], type=str,
                           module=__name__)
                for name, values in ENUM_VALUES.items()})
globals().update(CLASSES)   # as module attributes: bot.project.sqlmesh_shim resolves names here
