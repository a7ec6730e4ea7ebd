"""Run the selected lint rules over a project's models: violations in file order, and what they mean for a plan."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from bot.errors import PlanError
from bot.project.config import LinterConfig, find_config_file
from bot.project.loader import Project
from bot.project.model import KindName, Model
from bot.project.output_columns import OutputColumns
from bot.quality.lint.rules import RULES, ModelSource, ProjectFacts, custom_rule
from bot.quality.lint.selection import RuleLevels, model_ignored_rules
from bot.quality.lint.user_rules import Rule, load_custom_rules
from bot.quality.unit_test_files import load_test_files


@dataclass(frozen=True)
class Violation:
    """A finding of a selected rule, with its level (`error` or `warning`) and where it is."""

    rule: str
    level: str
    model: str
    path: Path
    line: int
    message: str
    column: int = 0

    def describe(self, root: Path) -> str:
        """`file:line[:column]: level [rule] model name: message`, the file relative to `root` when inside it.

        >>> Violation("noselectstar", "error", "db.m", Path("/p/models/m.sql"), 2, "No *.").describe(Path("/p"))
        'models/m.sql:2: error [noselectstar] model db.m: No *.'
        """
        try:
            where = self.path.relative_to(root)
        except ValueError:
            where = self.path
        at = f"{self.line}:{self.column}" if self.column else str(self.line)
        return f"{where}:{at}: {self.level} [{self.rule}] model {self.model}: {self.message}"


@dataclass(frozen=True)
class LintResult:
    """Every violation of a lint run, in file order."""

    violations: tuple[Violation, ...]

    @property
    def errors(self) -> tuple[Violation, ...]:
        return tuple(v for v in self.violations if v.level == "error")

    @property
    def warnings(self) -> tuple[Violation, ...]:
        return tuple(v for v in self.violations if v.level == "warning")

    def check_before_plan(self, root: Path) -> tuple[str, ...]:
        """As SQLMesh's plan does when `linter.enabled`: errors stop it (a PlanError listing every
        violation); otherwise the warnings, described, for the plan to show."""
        if self.errors:
            lines = "\n".join(v.describe(root) for v in self.violations)
            raise PlanError(f"the linter found {len(self.errors)} error(s); fix them, move their rules to "
                            f"`linter.warn_rules`, or add them to `ignored_rules`:\n{lines}")
        return tuple(v.describe(root) for v in self.warnings)


def lint_models(models: Mapping[str, Model], *, config: LinterConfig, config_path: Path,
                rendered: Mapping[str, str], tested: Iterable[str],
                custom: Mapping[str, type[Rule]] | None = None,
                only: Iterable[str] | None = None) -> tuple[Violation, ...]:
    """Run the configured rules over every model (EXTERNAL ones only as parents), or over those named
    `only` (one repository's, with the whole project as their facts); violations in file order.

    Nothing runs unless `linter.enabled` (SQLMesh's `sqlmesh lint` is silent then too)."""
    rules = {**RULES, **{name: custom_rule(rule) for name, rule in (custom or {}).items()}}
    levels = RuleLevels.from_config(config, path=config_path, available=rules)   # checked even when disabled
    if not config.enabled:
        return ()
    project = ProjectFacts(models=models, columns=OutputColumns(models, rendered), tested=frozenset(tested))
    violations: list[Violation] = []
    for model in (models.values() if only is None else (models[name] for name in only)):
        if model.kind.name is KindName.EXTERNAL:
            continue
        source = ModelSource(model, rendered.get(model.name))
        ignored = model_ignored_rules(source, rules)
        for level, names in (("error", levels.errors), ("warning", levels.warnings)):
            for name in sorted(names - ignored):
                violations.extend(Violation(rule=name, level=level, model=model.name, path=model.path,
                                            line=f.line, message=f.message, column=f.column)
                                  for f in rules[name](source, project))
    return tuple(sorted(violations, key=lambda v: (str(v.path), v.line, v.rule)))


def lint_project(project: Project, *, rendered: Mapping[str, str]) -> LintResult:
    """Lint a loaded project: each repository's models with its own `linter:` config and `linter/*.py` rules."""
    tested = {test.model for test in load_test_files(project.test_files, project.config.model_defaults.catalogs)}
    violations = [violation for repository in project.repositories for violation in lint_models(
        project.models, config=repository.config.linter, config_path=find_config_file(repository.root),
        rendered=rendered, tested=tested, custom=load_custom_rules(repository.root),
        only=repository.models if project.parts else None)]
    return LintResult(violations=tuple(sorted(violations, key=lambda v: (str(v.path), v.line, v.rule))))

