"""Which lint rules run, and at which level: the `linter:` config, `ignored_rules` in config and in a model."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from bot.errors import ConfigError
from bot.project.config import LinterConfig
from bot.project.header import parse_value, split_blocks, value_names
from bot.quality.lint.rules import RULES, ModelSource


def select_rules(names: Iterable[str], among: Iterable[str], *, where: str, path: Path,
                 line: int | None = None) -> frozenset[str]:
    """Rule names from config (`all` means every rule of `among`); an unknown name is a ConfigError.

    >>> sorted(select_rules(["ALL"], ["a", "b"], where="rules", path=Path("config.yaml")))
    ['a', 'b']
    >>> select_rules(["nope"], ["a"], where="linter.rules", path=Path("config.yaml"))
    Traceback (most recent call last):
    ...
    bot.errors.ConfigError: config.yaml: linter rule `nope` in `linter.rules` could not be found (rules here: a)
    """
    available = frozenset(among)
    chosen = {n.lower() for n in names}
    if "all" in chosen:
        return available
    for name in sorted(chosen - available):
        raise ConfigError(f"linter rule `{name}` in `{where}` could not be found (rules here: "
                          f"{', '.join(sorted(available)) or 'none'})", path=path, line=line)
    return frozenset(chosen)


@dataclass(frozen=True)
class RuleLevels:
    """The rules that raise errors and those that only warn, after `ignored_rules`."""

    errors: frozenset[str]
    warnings: frozenset[str]

    @classmethod
    def from_config(cls, config: LinterConfig, *, path: Path, available: Iterable[str] = RULES) -> RuleLevels:
        ignored = select_rules(config.ignored_rules, available, where="linter.ignored_rules", path=path)
        included = frozenset(available) - ignored
        errors = select_rules(config.rules, included, where="linter.rules", path=path)
        warnings = select_rules(config.warn_rules, included, where="linter.warn_rules", path=path)
        if errors & warnings:
            raise ConfigError(f"rules cannot both warn and raise an error: {', '.join(sorted(errors & warnings))} "
                              f"(in `linter.rules` and `linter.warn_rules`)", path=path)
        return cls(errors, warnings)


def model_ignored_rules(source: ModelSource, available: Iterable[str] = RULES) -> frozenset[str]:
    """The `ignored_rules` property of the model's MODEL header (names checked against RULES)."""
    if not source.text:
        return frozenset()
    model = source.model
    for block in split_blocks(source.text, keyword="MODEL", path=model.path, also="AUDIT"):
        for prop in block.props:
            if block.keyword == "MODEL" and prop.key == "ignored_rules":
                names = value_names(parse_value(prop, dialect=model.dialect, path=model.path), model.dialect)
                return select_rules(names, available, where="ignored_rules", path=model.path, line=prop.line)
    return frozenset()


