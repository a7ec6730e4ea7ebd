"""Settings dataclasses for config.yaml: gateways, connections, model defaults; secrets kept out of repr."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.errors import ConfigError


@dataclass(frozen=True)
class SparkConnection:
    """`type: spark`: local master by default, a cluster master URL, or Spark Connect (`remote`)."""

    master: str | None = None
    remote: str | None = None
    config: tuple[tuple[str, str], ...] = ()
    catalog: str | None = None


@dataclass(frozen=True)
class StateConnection:
    """`type: sqlite` (database path) or `type: postgres`; the password never appears in repr."""

    type: str = "sqlite"
    database: str | None = None
    host: str = "127.0.0.1"
    port: int = 5432
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    schema: str | None = None   # PostgreSQL schema for the state tables (default: public)


@dataclass(frozen=True)
class Gateway:
    name: str
    connection: SparkConnection = SparkConnection()
    state_connection: StateConnection = StateConnection()
    test_connection: SparkConnection | None = None


@dataclass(frozen=True)
class ModelDefaults:
    dialect: str = "spark"
    kind: str | None = None
    cron: str = "@daily"
    start: str | None = None
    owner: str | None = None
    on_destructive_change: str = "error"


@dataclass(frozen=True)
class UserConfig:
    username: str
    github_username: str | None = None
    roles: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProjectConfig:
    root: Path
    gateways: dict[str, Gateway]
    default_gateway: str
    model_defaults: ModelDefaults
    variables: dict[str, Any] = field(default_factory=dict)
    snapshot_ttl: str = "in 1 week"
    environment_ttl: str = "in 1 week"
    physical_schema_mapping: dict[str, str] = field(default_factory=dict)
    auto_categorize_changes: str = "full"
    include_unmodified: bool = False
    cicd_bot: dict[str, Any] = field(default_factory=dict)   # parsed by bot.github.settings
    users: tuple[UserConfig, ...] = ()

    def gateway(self, name: str | None = None) -> Gateway:
        key = name or self.default_gateway
        if key not in self.gateways:
            known = ", ".join(sorted(self.gateways)) or "none"
            raise ConfigError(f"unknown gateway `{key}` (--gateway); known gateways: {known}",
                              path=self.root / "config.yaml")
        return self.gateways[key]
