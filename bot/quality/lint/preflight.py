"""The plan-time column check of the models a plan builds, with each passing verdict kept in .meshbot/cache."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Iterable, Mapping

from bot.errors import PlanError
from bot.project.cache import KeyedEntries, cache_context
from bot.project.loader import Project
from bot.project.model import KindName
from bot.project.output_columns import OutputColumns
from bot.quality.lint.rules import RULES, ModelSource, ProjectFacts
from bot.quality.lint.runner import Violation

PREFLIGHT_RULE = "ambiguousorinvalidcolumn"
VERDICT_CACHE_FILE = Path(".meshbot") / "cache" / "columns.json"
VERDICT_FORMAT = 1


def _entry_fits(entry: Any) -> bool:
    """[verdict key]"""
    return type(entry) is list and len(entry) == 1 and type(entry[0]) is str


def check_columns_before_spark(project: Project, *, rendered: Mapping[str, str], names: Iterable[str],
                               use_cache: bool = True, read_cache: bool = True) -> None:
    """Before Spark starts: each SQL model a plan builds (`names`), in a repository whose linter is off, must
    have columns that resolve against its parents' known columns, else a PlanError names file, line and column.

    SQLMesh's `init` turns this rule on; Spark would stop the same query, only later (after the JVM, the unit
    tests, the tables). Nothing is checked where a parent's columns are unknown; a repository whose linter is
    on is checked by its own configuration (where `ignored_rules` can turn this off). A model that passed with
    the same rendered query and the same columns of what it reads is not checked again (a first plan of
    1,000 models would otherwise parse and qualify each, ~3 ms apiece)."""
    wanted = set(names)
    if not wanted or all(r.config.linter.enabled for r in project.repositories):
        return   # a plan that builds nothing (no change) reads no cache file
    columns = OutputColumns(project.models, rendered)
    facts = ProjectFacts(models=project.models, columns=columns, tested=frozenset())
    store = KeyedEntries(project.root, VERDICT_CACHE_FILE, what="column check cache",
                         header=("format", VERDICT_FORMAT), entry=_entry_fits, read=use_cache and read_cache)
    base = cache_context("columns")
    passed: dict[str, list[Any]] = {}
    violations = []
    for repository in project.repositories:
        if repository.config.linter.enabled:
            continue
        models = repository.models if project.parts else project.models
        for name in sorted(wanted & set(models)):
            model = project.models[name]
            if model.kind.name is KindName.EXTERNAL or name not in rendered:
                continue
            key = _verdict_key(base, name, rendered[name], project, columns)
            if store.entries.get(name) == [key]:
                passed[name] = [key]
                continue
            found = [Violation(rule=PREFLIGHT_RULE, level="error", model=name, path=model.path, line=f.line,
                               message=f.message, column=f.column)
                     for f in RULES[PREFLIGHT_RULE](ModelSource(model, rendered[name], single_use=True), facts)]
            violations.extend(found)
            if not found:
                passed[name] = [key]
    if use_cache and passed:
        kept = {name: entry for name, entry in store.entries.items() if name in project.models}
        store.save({**kept, **passed})   # verdicts of models that are gone are dropped
    if violations:
        lines = "\n".join(v.describe(project.root) for v in violations)
        raise PlanError(f"{len(violations)} model(s) read a column their parents do not have (Spark would stop "
                        f"there); nothing was run:\n{lines}")


def _verdict_key(base: str, name: str, sql: str, project: Project, columns: OutputColumns) -> str:
    """What the check reads: the rendered query and the columns of every model it can read, its parents and,
    through each EMBEDDED parent it inlines, that parent's own."""
    read: dict[str, list[str] | None] = {}
    pending = sorted(project.models[name].depends_on)
    while pending:
        parent = pending.pop()
        if parent in read or parent == name:
            continue
        model = project.models.get(parent)
        read[parent] = columns.of(parent) if model is not None else None
        if model is not None and model.kind.name is KindName.EMBEDDED:
            pending.extend(sorted(model.depends_on))
    text = "\0".join((base, name, sql, repr(sorted(read.items()))))
    return hashlib.sha256(text.encode()).hexdigest()
