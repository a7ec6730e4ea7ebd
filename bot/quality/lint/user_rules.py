"""SQLMesh-style custom linter rules from `linter/*.py`: the `Rule` base they subclass and the model they see."""

from __future__ import annotations

import abc
import importlib.util
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlglot import exp

from bot.errors import ConfigError
from bot.project.model import KindName, Model
from bot.project.sqlmesh_shim import project_imports, source_spec, sqlmesh_shim


@dataclass(frozen=True)
class Position:
    """A place in a file, 0-based as in the LSP (and SQLMesh's `Position`)."""

    line: int
    character: int


@dataclass(frozen=True)
class Range:
    start: Position
    end: Position


class _NamedByClass(abc.ABCMeta):
    """A rule is named after its class, lower-cased (`NoMissingOwner` → `nomissingowner`)."""

    def __new__(mcs, name: str, bases: tuple, attrs: dict) -> Any:
        attrs["name"] = name.lower()
        return super().__new__(mcs, name, bases, attrs)


class Rule(metaclass=_NamedByClass):
    """Base of a custom rule: `check_model(model)` returns None, a RuleViolation or a list of them."""

    name = "rule"

    def __init__(self, context: Any = None) -> None:
        self.context = context

    @abc.abstractmethod
    def check_model(self, model: Any) -> Any:
        """The violations of this rule in `model`."""

    @property
    def summary(self) -> str:
        return self.__doc__ or ""

    def violation(self, violation_msg: str | None = None, violation_range: Range | None = None,
                  fixes: Any = None) -> RuleViolation:
        return RuleViolation(rule=self, violation_msg=violation_msg or self.summary,
                             violation_range=violation_range, fixes=fixes)


class RuleViolation:
    def __init__(self, rule: Rule, violation_msg: str, violation_range: Range | None = None,
                 fixes: Any = None) -> None:
        self.rule, self.violation_msg, self.violation_range = rule, violation_msg, violation_range
        self.fixes = fixes or []


@dataclass(frozen=True)
class KindView:
    name: KindName

    @property
    def is_symbolic(self) -> bool:
        return self.name in (KindName.EXTERNAL, KindName.EMBEDDED)

    @property
    def is_view(self) -> bool:
        return self.name is KindName.VIEW


class ModelView:
    """A meshbot model under the attribute names SQLMesh's `Model` gives custom rules."""

    def __init__(self, model: Model, *, rendered: exp.Query | None, columns: list[str] | None) -> None:
        self._model, self._rendered = model, rendered
        self.name = self.fqn = model.name
        self.owner, self.description, self.tags = model.owner, model.description, list(model.tags)
        self.kind = KindView(model.kind.name)
        self.audits = [(a.name, dict(a.args)) for a in model.audits]
        self.query, self.dialect, self.cron = model.query, model.dialect, model.cron
        self.start, self.end, self.grains = model.start, model.end, list(model.grains)
        self.depends_on = set(model.depends_on)
        self.columns_to_types = ({c: exp.DataType.build(t, dialect="spark") for c, t in model.columns}
                                 or ({c: exp.DataType.build("unknown") for c in columns} if columns else None))
        self.column_descriptions = dict(model.column_descriptions)
        self._path = model.path

    def render_query(self) -> exp.Query | None:
        return self._rendered


def load_custom_rules(root: Path) -> dict[str, type[Rule]]:
    """The Rule subclasses defined in `<root>/linter/*.py`, by name; a file that fails to import is a
    ConfigError naming it."""
    folder = root / "linter"
    rules: dict[str, type[Rule]] = {}
    if not folder.is_dir():
        return rules
    for path in sorted(p for p in folder.glob("*.py") if p.name != "__init__.py"):
        spec = source_spec(f"meshbot_linter_{path.stem}", path)
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        try:
            with sqlmesh_shim(), project_imports(root):
                spec.loader.exec_module(module)
        except Exception as error:   # user code: any failure is theirs to fix
            raise ConfigError(f"cannot load custom linter rules: {type(error).__name__}: {error}",
                              path=path) from None
        for value in vars(module).values():
            if inspect.isclass(value) and value.__module__ == module.__name__ and _is_rule(value):
                rules[value.name] = value
    return rules


def _is_rule(cls: type) -> bool:
    """A subclass of our Rule, or of SQLMesh's own when SQLMesh is installed and was imported instead."""
    return not inspect.isabstract(cls) and any(
        base.__name__ == "Rule" and base.__module__ in (__name__, "sqlmesh.core.linter.rule")
        for base in cls.__mro__[1:])
