"""Several repositories loaded as one project (SQLMesh's multi-repo `-p repo_1 -p repo_2`): one DAG and one state."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

from bot.errors import ConfigError
from bot.project.cache import with_fields
from bot.project.config import ProjectConfig, find_config_file, load_config
from bot.project.dag import DAG
from bot.project.loader import Project, Repository, load_project


def load_repositories(roots: Sequence[Path], *, config: ProjectConfig, read_cache: bool = True,
                      fresh_files: frozenset[str] | None = None,
                      while_parsing: Callable[[], None] | None = None,
                      render_gateway: str | None = None) -> Project:
    """Load each repository with its own config, macros, audits and tests, as SQLMesh does, into one Project.

    The first repository's `config` is the project's (gateways, state, plan settings); each model keeps
    its own repository's `variables` and `project` key. `fresh_files` are relative to the first root
    (`../repo_2/models/c.sql` names a file of the second). A model defined by two repositories is a
    ConfigError naming both files.
    """
    roots = [Path(root).resolve() for root in roots]
    _refuse_repeated(roots)
    parts: list[Project] = []
    for index, root in enumerate(roots):
        own = config if index == 0 else load_config(root)
        part = load_project(root, config=own, read_cache=read_cache,
                            fresh_files=_relative_to(fresh_files, roots[0], root),
                            while_parsing=while_parsing if index == 0 else None,
                            render_gateway=render_gateway)
        parts.append(part)
    return merge(parts)


def merge(parts: Sequence[Project]) -> Project:
    """One project over the repositories' models; see load_repositories."""
    if len(parts) == 1:
        return parts[0]
    models: dict = {}
    audits: dict = {}
    repositories = []
    for part in parts:
        project, variables = part.config.project or part.root.name, dict(part.config.variables)
        stamped = {name: with_fields(model, project=project, variables=variables)
                   for name, model in part.models.items()}
        for name, model in stamped.items():
            if name in models:
                raise ConfigError(f"model `{name}` is defined in two repositories: {models[name].path} and "
                                  f"{model.path}", path=model.path, line=model.line)
        models.update(stamped)
        for name, audit in part.audits.items():
            if name in audits and audits[name].path != audit.path:
                raise ConfigError(f"audit `{name}` is defined in two repositories: {audits[name].path} and "
                                  f"{audit.path}", path=audit.path, line=audit.line)
            audits[name] = audit
        repositories.append(Repository(root=part.root, config=part.config, models=tuple(part.models)))
    _refuse_repeated_names(repositories)
    dag = DAG.build(models)
    primary = parts[0]
    return replace(primary, models={name: models[name] for name in dag.order}, audits=audits, dag=dag,
                   test_files=tuple(path for part in parts for path in part.test_files),
                   macro_files=tuple(path for part in parts for path in part.macro_files),
                   source_digests={name: digest for part in parts for name, digest in part.source_digests.items()},
                   early_renders=None, parts=tuple(repositories))


def _relative_to(files: frozenset[str] | None, first: Path, root: Path) -> frozenset[str] | None:
    """`files` (relative to `first`, `/`-separated) that lie under `root`, relative to it.

    >>> sorted(_relative_to(frozenset({"models/a.sql", "../r2/models/c.sql"}), Path("/w/r1"), Path("/w/r2")))
    ['models/c.sql']
    >>> sorted(_relative_to(frozenset({"models/a.sql", "../r2/models/c.sql"}), Path("/w/r1"), Path("/w/r1")))
    ['models/a.sql']
    """
    if files is None:
        return None
    inside = set()
    for name in files:
        path = Path(os.path.normpath(first / name))
        if path.is_relative_to(root):
            inside.add(path.relative_to(root).as_posix())
    return frozenset(inside)


def _refuse_repeated(roots: Sequence[Path]) -> None:
    for index, root in enumerate(roots):
        find_config_file(root)   # a folder without config is a ConfigError naming it
        for other in roots[:index]:
            if root == other or root.is_relative_to(other) or other.is_relative_to(root):
                raise ConfigError(f"-p names {other} and {root}: one repository inside another (or twice); "
                                  f"give each repository of a multi-repo project once", path=root)


def _refuse_repeated_names(repositories: Sequence[Repository]) -> None:
    seen: dict[str, Path] = {}
    for repository in repositories:
        if repository.name in seen:
            raise ConfigError(f"repositories {seen[repository.name]} and {repository.root} are both named "
                              f"`{repository.name}`: give each config.yaml its own `project` key",
                              path=find_config_file(repository.root))
        seen[repository.name] = repository.root
