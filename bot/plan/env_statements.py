"""The config's `before_all` and `after_all` statements, parsed before Spark starts so a bad one changes nothing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlglot import exp

from bot.errors import ConfigError
from bot.project.config import ProjectConfig, find_config_file
from bot.project.model import Kind, Model
from bot.project.sqltext import parse_sql


@dataclass(frozen=True)
class EnvironmentStatements:
    """One config key's statements (`before_all` or `after_all`), parsed in the project's dialect;
    `owner` stands for the config file when their macros are rendered."""

    key: str
    owner: Model
    expressions: tuple[exp.Expression, ...]


def parse_environment_statements(config: ProjectConfig, key: str, project_root: Path) -> EnvironmentStatements:
    """Parse `config`'s `key` statements; one that does not parse is a ConfigError naming the config file."""
    statements: tuple[str, ...] = getattr(config, key)
    dialect = config.model_defaults.dialect
    config_path = find_config_file(project_root) if statements else None
    owner = Model(name=f"config.{key}", kind=Kind(), dialect=dialect, path=config_path)
    expressions: list[exp.Expression] = []
    for text in statements:
        try:
            expressions.extend(parse_sql(text, dialect))
        except Exception as error:  # noqa: BLE001 - sqlglot raises several error types
            raise ConfigError(f"`{key}` statement `{text[:60]}` does not parse: {error}",
                              path=config_path) from None
    return EnvironmentStatements(key=key, owner=owner, expressions=tuple(expressions))


def parse_before_and_after(config: ProjectConfig, project_root: Path) -> tuple[EnvironmentStatements,
                                                                                EnvironmentStatements]:
    """The config's before_all and after_all, parsed."""
    return (parse_environment_statements(config, "before_all", project_root),
            parse_environment_statements(config, "after_all", project_root))
