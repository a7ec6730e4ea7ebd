"""A multi-repo project planned from some of its repositories: prod's models of the others, taken from the state."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from bot.project.dag import DAG
from bot.project.loader import Project
from bot.project.serialize import model_from_dict
from bot.snapshot import SnapshotId
from bot.state.protocol import StateReader


def with_unloaded_repositories(project: Project, state: Callable[[], StateReader]) -> Project:
    """`project` plus every model of prod whose repository (its `project` key) is not loaded, as SQLMesh
    does when the loaded configs name their `project`: `sqlmesh -p repo_1 plan` keeps repo_2's models
    and plans the children a change of repo_1 reaches there.

    Such a model is its snapshot's stored definition; `Project.held_renders` keeps the reference render
    stored with it, so its fingerprint is the one prod has until a parent changes. Without a `project`
    key on any loaded repository the project is returned as it is and `state` is not opened (a
    single-repository project owns prod);
    a snapshot that records no repository (a plan of one repository without the key, or of an older
    meshbot) counts as the loaded one's, so that deleting its file removes it.
    """
    loaded = {repository.config.project for repository in project.repositories if repository.config.project}
    if not loaded:
        return project
    reader = state()
    prod = reader.get_environment("prod")
    if prod is None:
        return project
    wanted = [SnapshotId(s.name, s.identifier) for s in prod.snapshots if s.name not in project.models]
    held = {snapshot.name: snapshot for snapshot in reader.get_snapshots(wanted).values()
            if snapshot.definition.get("project") and snapshot.definition["project"] not in loaded}
    if not held:
        return project
    models = {**project.models, **{name: replace(model_from_dict(snapshot.definition),
                                                 unloaded_from=snapshot.definition["project"])
                                   for name, snapshot in held.items()}}
    dag = DAG.build(models)
    return replace(project, models={name: models[name] for name in dag.order}, dag=dag,
                   parts=project.repositories,
                   held_renders={name: snapshot.rendered_query for name, snapshot in held.items()})

