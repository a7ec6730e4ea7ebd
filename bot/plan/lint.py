"""Model linter: SQLMesh's built-in rules on sqlglot, chosen by the `linter:` config and `ignored_rules`."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify import qualify

from bot.errors import ConfigError, PlanError
from bot.plan.columns import OutputColumns
from bot.project.config import LinterConfig, find_config_file
from bot.project.lint_rules import ModelView, Rule, load_custom_rules
from bot.project.loader import Project
from bot.project.header import parse_value, split_blocks, value_names
from bot.project.model import KindName, Model
from bot.project.sqltext import line_at
from bot.quality.unit_test_files import load_test_files

_DOT = r"\s*\.\s*"
_ERROR_POSITION = re.compile(r"\.?\s*Line: \d+, Col: \d+\.?")


@dataclass(frozen=True)
class Finding:
    """What a rule found in one model: a message and the file line it points at."""

    message: str
    line: int


@dataclass(frozen=True)
class Violation:
    """A finding of a selected rule, with its level (`error` or `warning`) and where it is."""

    rule: str
    level: str
    model: str
    path: Path
    line: int
    message: str

    def describe(self, root: Path) -> str:
        """`file:line: level [rule] model name: message`, the file relative to `root` when inside it.

        >>> Violation("noselectstar", "error", "db.m", Path("/p/models/m.sql"), 2, "No *.").describe(Path("/p"))
        'models/m.sql:2: error [noselectstar] model db.m: No *.'
        """
        try:
            where = self.path.relative_to(root)
        except ValueError:
            where = self.path
        return f"{where}:{self.line}: {self.level} [{self.rule}] model {self.model}: {self.message}"


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


class _Source:
    """One model as the rules see it: the model, its file text and its rendered query."""

    def __init__(self, model: Model, rendered: str | None) -> None:
        self.model = model
        try:
            self.text = model.path.read_text(encoding="utf-8") if model.path.suffix == ".sql" else ""
        except OSError:
            self.text = ""
        found = self.text.find(model.query_text) if model.query_text else -1
        self.query_offset = found if found >= 0 else 0
        self.query_line = line_at(self.text, found) if found >= 0 else model.line
        try:
            parsed = sqlglot.parse_one(rendered, dialect="spark") if rendered else None
        except SqlglotError:
            parsed = None
        self.rendered = parsed if isinstance(parsed, exp.Query) else None
        self.qualified: tuple[exp.Query | None, SqlglotError | None] | None = None   # set by _qualified

    def line_of(self, word: str) -> int:
        """Line of the first `word` (whole word, any case; a dotted name may be quoted part by part) in
        the query, else the query's first line."""
        parts = [rf"[`\"]?{re.escape(part)}[`\"]?" for part in word.split(".")]
        dotted = _DOT.join(parts)
        pattern = re.compile(rf"(?<![\w.]){dotted}(?!\w)", re.I)
        match = pattern.search(self.text, self.query_offset)
        return line_at(self.text, match.start()) if match else self.query_line


@dataclass(frozen=True)
class _Project:
    """What rules may look at besides the model: every model, known output columns, tested models."""

    models: Mapping[str, Model]
    columns: OutputColumns
    tested: frozenset[str]


def _missing_parents(model: Model, project: _Project) -> list[str]:
    """Parents whose output columns are unknown (unregistered tables, stars over them, ...)."""
    return sorted(p for p in model.depends_on
                  if p != model.name and (p not in project.models or project.columns.of(p) is None))


def _qualified(source: _Source, project: _Project) -> tuple[exp.Query | None, SqlglotError | None]:
    """The rendered query qualified against its parents' columns, as SQLMesh optimizes it; (None, None)
    when some parent's columns are unknown, (None, error) when a column cannot be resolved."""
    if source.qualified is None:
        source.qualified = _qualify(source, project)
    return source.qualified


def _qualify(source: _Source, project: _Project) -> tuple[exp.Query | None, SqlglotError | None]:
    if source.rendered is None or _missing_parents(source.model, project):
        return None, None
    schema: dict[str, dict[str, dict[str, str]]] = {}
    for parent in source.model.depends_on:
        parts = parent.split(".")
        if len(parts) != 2:
            return None, None
        schema.setdefault(parts[0], {})[parts[1]] = {c: "STRING" for c in project.columns.of(parent) or ()}
    try:
        return qualify(source.rendered.copy(), schema=schema, dialect="spark"), None
    except SqlglotError as error:
        return None, error


def no_select_star(source: _Source, project: _Project) -> list[Finding]:
    """Query should not contain SELECT * on its outer most projections, even if it can be expanded."""
    query = source.model.query
    if not isinstance(query, exp.Query) or not query.is_star:
        return []
    return [Finding(no_select_star.__doc__ or "", source.line_of("*"))]


def invalid_select_star_expansion(source: _Source, project: _Project) -> list[Finding]:
    """SELECT * cannot be expanded because some parent's columns are unknown."""
    query = source.rendered
    if query is None or not any(s.is_star for s in query.selects):
        return []
    missing = _missing_parents(source.model, project)
    if not missing:
        return []
    names = ", ".join(f"'{m}'" for m in missing)
    return [Finding(f"SELECT * cannot be expanded due to missing schema(s) for model(s): {names}. Register "
                    f"them in external_models.yaml with their columns, or make sure that the model "
                    f"'{source.model.name}' can be rendered at parse time.", source.line_of("*"))]


def ambiguous_or_invalid_column(source: _Source, project: _Project) -> list[Finding]:
    """A column of the query cannot be resolved against its parents' columns."""
    _, error = _qualified(source, project)
    if error is None:
        return []
    text = _ERROR_POSITION.sub("", str(error)).strip()
    column = re.search(r"Column '([^']+)'", text)
    line = source.line_of(column.group(1).split(".")[-1]) if column else source.query_line
    return [Finding(f"{text} for model '{source.model.name}', the column may not exist or is ambiguous.", line)]


def no_missing_audits(source: _Source, project: _Project) -> list[Finding]:
    """Model `audits` must be configured to test data quality."""
    model = source.model
    if model.audits or model.kind.name in (KindName.EXTERNAL, KindName.EMBEDDED):
        return []
    return [Finding(no_missing_audits.__doc__ or "", model.line)]


def no_missing_unit_test(source: _Source, project: _Project) -> list[Finding]:
    """All models must have a unit test found in the tests/ directory yaml files."""
    model = source.model
    if model.kind.name is KindName.EXTERNAL or model.name in project.tested:
        return []
    return [Finding(f"Model {model.name} is missing unit test(s). Please add in the tests/ directory.",
                    model.line)]


def no_missing_external_models(source: _Source, project: _Project) -> list[Finding]:
    """All external models must be registered in the external_models.yaml file."""
    model = source.model
    if model.kind.name is KindName.EXTERNAL:
        return []
    return [Finding(f"Model '{model.name}' depends on unregistered external model '{parent}'. Please "
                    f"register it in external_models.yaml.", source.line_of(parent))
            for parent in sorted(model.depends_on) if parent not in project.models]


def no_ambiguous_projections(source: _Source, project: _Project) -> list[Finding]:
    """All projections in a model must have unique & inferrable names or explicit aliases."""
    qualified, _ = _qualified(source, project)
    query = qualified or source.rendered
    if query is None:
        return []
    seen: set[str] = set()
    for projection in query.selects:
        name = projection.output_name
        if name == "*":
            continue
        if not name:
            return [Finding(f"Outer projection '{projection.sql(dialect=source.model.dialect)}' must have "
                            f"inferrable names or explicit aliases.", source.query_line)]
        if name in seen:
            return [Finding(f"Found duplicate outer select name '{name}'", source.query_line)]
        seen.add(name)
    return []


LintRule = Callable[[_Source, _Project], list[Finding]]

RULES: dict[str, LintRule] = {
    "ambiguousorinvalidcolumn": ambiguous_or_invalid_column,
    "invalidselectstarexpansion": invalid_select_star_expansion,
    "noambiguousprojections": no_ambiguous_projections,
    "nomissingaudits": no_missing_audits,
    "nomissingexternalmodels": no_missing_external_models,
    "nomissingunittest": no_missing_unit_test,
    "noselectstar": no_select_star,
}


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


def model_ignored_rules(source: _Source, available: Iterable[str] = RULES) -> frozenset[str]:
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


def custom_rule(rule: type[Rule]) -> LintRule:
    """A `linter/*.py` rule as a linter rule: its violations' ranges (0-based lines) become file lines."""
    def check(source: _Source, project: _Project) -> list[Finding]:
        view = ModelView(source.model, rendered=source.rendered, columns=project.columns.of(source.model.name))
        try:
            found = rule(None).check_model(view)
        except Exception as error:   # user code: name the rule and the model, not a traceback
            raise ConfigError(f"custom linter rule `{rule.name}` failed on model {source.model.name}: "
                              f"{type(error).__name__}: {error}", path=inspect.getfile(rule)) from None
        found = [found] if hasattr(found, "violation_msg") else list(found or ())   # ours or SQLMesh's
        return [Finding(v.violation_msg,
                        v.violation_range.start.line + 1 if v.violation_range else source.model.line)
                for v in found]
    return check


def lint_models(models: Mapping[str, Model], *, config: LinterConfig, config_path: Path,
                rendered: Mapping[str, str], tested: Iterable[str],
                custom: Mapping[str, type[Rule]] | None = None) -> tuple[Violation, ...]:
    """Run the configured rules over every model (EXTERNAL ones only as parents); violations in file order.

    Nothing runs unless `linter.enabled` (SQLMesh's `sqlmesh lint` is silent then too)."""
    rules = {**RULES, **{name: custom_rule(rule) for name, rule in (custom or {}).items()}}
    levels = RuleLevels.from_config(config, path=config_path, available=rules)   # checked even when disabled
    if not config.enabled:
        return ()
    project = _Project(models=models, columns=OutputColumns(models, rendered), tested=frozenset(tested))
    violations: list[Violation] = []
    for model in models.values():
        if model.kind.name is KindName.EXTERNAL:
            continue
        source = _Source(model, rendered.get(model.name))
        ignored = model_ignored_rules(source, rules)
        for level, names in (("error", levels.errors), ("warning", levels.warnings)):
            for name in sorted(names - ignored):
                violations.extend(Violation(rule=name, level=level, model=model.name, path=model.path,
                                            line=f.line, message=f.message)
                                  for f in rules[name](source, project))
    return tuple(sorted(violations, key=lambda v: (str(v.path), v.line, v.rule)))


def lint_project(project: Project, *, rendered: Mapping[str, str]) -> LintResult:
    """Lint a loaded project with its own `linter:` config and its `linter/*.py` rules."""
    tested = {test.model for test in load_test_files(project.test_files, project.config.model_defaults.catalogs)}
    violations = lint_models(project.models, config=project.config.linter,
                             config_path=find_config_file(project.root), rendered=rendered, tested=tested,
                             custom=load_custom_rules(project.root))
    return LintResult(violations=violations)
