"""SQLMesh's built-in lint rules on sqlglot, one function each, and `linter/*.py` rules adapted to run beside them."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Mapping

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify import qualify

from bot.errors import ConfigError
from bot.project.model import KindName, Model
from bot.project.output_columns import OutputColumns
from bot.project.sqltext import line_at
from bot.quality.lint.user_rules import ModelView, Rule

_DOT = r"\s*\.\s*"
_ERROR_POSITION = re.compile(r"\.?\s*Line: \d+, Col: \d+\.?")


@dataclass(frozen=True)
class Finding:
    """What a rule found in one model: a message and the file line it points at."""

    message: str
    line: int
    column: int = 0   # 1-based character of the line it points at; 0: the line only


class ModelSource:
    """One model as the rules see it: the model, its file text and its rendered query (each read when first
    asked for). `single_use`: one rule reads the rendered query, and may qualify it in place."""

    def __init__(self, model: Model, rendered: str | None, *, single_use: bool = False) -> None:
        self.model = model
        self.rendered_sql = rendered
        self.single_use = single_use
        self.qualified: tuple[exp.Query | None, SqlglotError | None] | None = None   # set by _qualified

    @cached_property
    def text(self) -> str:
        try:
            return self.model.path.read_text(encoding="utf-8") if self.model.path.suffix == ".sql" else ""
        except OSError:
            return ""

    @cached_property
    def _query_start(self) -> int:
        return self.text.find(self.model.query_text) if self.model.query_text else -1

    @property
    def query_offset(self) -> int:
        return max(self._query_start, 0)

    @property
    def query_line(self) -> int:
        found = self._query_start
        return line_at(self.text, found) if found >= 0 else self.model.line

    @cached_property
    def rendered(self) -> exp.Query | None:
        try:
            parsed = sqlglot.parse_one(self.rendered_sql, dialect="spark") if self.rendered_sql else None
        except SqlglotError:
            parsed = None
        return parsed if isinstance(parsed, exp.Query) else None

    def line_of(self, word: str) -> int:
        """Line of the first `word` (whole word, any case; a dotted name may be quoted part by part) in
        the query, else the query's first line."""
        return self.position_of(word)[0]

    def position_of(self, word: str) -> tuple[int, int]:
        """(line, 1-based column) of the first `word` in the query as `line_of` finds it; column 0 when not found."""
        parts = [rf"[`\"]?{re.escape(part)}[`\"]?" for part in word.split(".")]
        dotted = _DOT.join(parts)
        pattern = re.compile(rf"(?<![\w]){dotted}(?!\w)", re.I)
        match = pattern.search(self.text, self.query_offset)
        if not match:
            return self.query_line, 0
        return line_at(self.text, match.start()), match.start() - self.text.rfind("\n", 0, match.start())


@dataclass(frozen=True)
class ProjectFacts:
    """What rules may look at besides the model: every model, known output columns, tested models."""

    models: Mapping[str, Model]
    columns: OutputColumns
    tested: frozenset[str]


def _missing_parents(model: Model, project: ProjectFacts) -> list[str]:
    """Parents whose output columns are unknown (unregistered tables, stars over them, ...)."""
    return sorted(p for p in model.depends_on
                  if p != model.name and (p not in project.models or project.columns.of(p) is None))


def _qualified(source: ModelSource, project: ProjectFacts) -> tuple[exp.Query | None, SqlglotError | None]:
    """The rendered query qualified against its parents' columns, as SQLMesh optimizes it; (None, None)
    when some parent's columns are unknown, (None, error) when a column cannot be resolved."""
    if source.qualified is None:
        source.qualified = _qualify(source, project)
    return source.qualified


def _qualify(source: ModelSource, project: ProjectFacts) -> tuple[exp.Query | None, SqlglotError | None]:
    if source.rendered is None or _missing_parents(source.model, project):
        return None, None
    schema: dict[str, dict[str, dict[str, str]]] = {}
    # the tables the rendered query reads: its parents, and the parents of EMBEDDED ones it inlined
    ctes = {cte.alias_or_name.lower() for cte in source.rendered.find_all(exp.CTE)}
    for table in source.rendered.find_all(exp.Table):
        if not table.name or (not table.db and table.name.lower() in ctes):
            continue
        name = f"{table.db}.{table.name}" if table.db and not table.catalog else None
        columns = project.columns.of(name) if name in project.models else None
        if name is None or columns is None:
            return None, None   # a catalog-qualified name, a table function or a source of unknown columns
        schema.setdefault(table.db, {})[table.name] = {c: "STRING" for c in columns}
    try:
        query = source.rendered if source.single_use else source.rendered.copy()
        return qualify(query, schema=schema, dialect="spark"), None
    except SqlglotError as error:
        return None, error


def no_select_star(source: ModelSource, project: ProjectFacts) -> list[Finding]:
    """Query should not contain SELECT * on its outer most projections, even if it can be expanded."""
    query = source.model.query
    if not isinstance(query, exp.Query) or not query.is_star:
        return []
    return [Finding(no_select_star.__doc__ or "", source.line_of("*"))]


def invalid_select_star_expansion(source: ModelSource, project: ProjectFacts) -> list[Finding]:
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


def ambiguous_or_invalid_column(source: ModelSource, project: ProjectFacts) -> list[Finding]:
    """A column of the query cannot be resolved against its parents' columns."""
    _, error = _qualified(source, project)
    if error is None:
        return []
    text = _ERROR_POSITION.sub("", str(error)).strip()
    found = re.search(r"Column '([^']+)'|Unknown column: (\S+)", text)
    line, column = source.position_of((found.group(1) or found.group(2)).split(".")[-1]) if found else \
        (source.query_line, 0)
    return [Finding(f"{text} for model '{source.model.name}', the column may not exist or is ambiguous.", line,
                    column)]


def no_missing_audits(source: ModelSource, project: ProjectFacts) -> list[Finding]:
    """Model `audits` must be configured to test data quality."""
    model = source.model
    if model.audits or model.kind.name in (KindName.EXTERNAL, KindName.EMBEDDED):
        return []
    return [Finding(no_missing_audits.__doc__ or "", model.line)]


def no_missing_unit_test(source: ModelSource, project: ProjectFacts) -> list[Finding]:
    """All models must have a unit test found in the tests/ directory yaml files."""
    model = source.model
    if model.kind.name is KindName.EXTERNAL or model.name in project.tested:
        return []
    return [Finding(f"Model {model.name} is missing unit test(s). Please add in the tests/ directory.",
                    model.line)]


def no_missing_external_models(source: ModelSource, project: ProjectFacts) -> list[Finding]:
    """All external models must be registered in the external_models.yaml file."""
    model = source.model
    if model.kind.name is KindName.EXTERNAL:
        return []
    return [Finding(f"Model '{model.name}' depends on unregistered external model '{parent}'. Please "
                    f"register it in external_models.yaml.", source.line_of(parent))
            for parent in sorted(model.depends_on) if parent not in project.models]


def no_ambiguous_projections(source: ModelSource, project: ProjectFacts) -> list[Finding]:
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


LintRule = Callable[[ModelSource, ProjectFacts], list[Finding]]

RULES: dict[str, LintRule] = {
    "ambiguousorinvalidcolumn": ambiguous_or_invalid_column,
    "invalidselectstarexpansion": invalid_select_star_expansion,
    "noambiguousprojections": no_ambiguous_projections,
    "nomissingaudits": no_missing_audits,
    "nomissingexternalmodels": no_missing_external_models,
    "nomissingunittest": no_missing_unit_test,
    "noselectstar": no_select_star,
}


def custom_rule(rule: type[Rule]) -> LintRule:
    """A `linter/*.py` rule as a linter rule: its violations' ranges (0-based lines) become file lines."""
    def check(source: ModelSource, project: ProjectFacts) -> list[Finding]:
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


