"""Which changes of a PR's prod plan are the PR's own, and which are on its base branch but not yet in prod."""

from __future__ import annotations

import tempfile
from enum import Enum
from pathlib import Path
from typing import Callable, Mapping, Sequence

from bot.errors import BotError
from bot.github.checkout import GitCheckout
from bot.github.event import PullRequest
from bot.plan.definition import ChangeType, Plan


class Origin(str, Enum):
    PULL_REQUEST = "pull_request"   # the PR's files make the change
    BASE = "base"                   # the base branch already has it; prod does not yet serve it


def base_commit(checkout: GitCheckout, pr: PullRequest) -> str | None:
    """The commit the PR's head branched from on its base: the merge base of the checkout (the PR's merge
    ref or its head) and the base branch (the event's base commit, or `origin/<base>`); None when the
    checkout's history cannot tell (a depth-1 clone: check out with `fetch-depth: 2` or more)."""
    merged_into = "HEAD^1" if pr.head_sha and checkout.commit_of("HEAD^2") == pr.head_sha else None
    for ref in (pr.base_sha, merged_into, f"origin/{pr.base_ref}" if pr.base_ref else None):
        if ref and checkout.has_ref(ref):
            return checkout.merge_base("HEAD", ref)
    return None


def load_base_versions(project: Sequence[GitCheckout], pr: PullRequest,
                       open_project: Callable[[list[Path]], Mapping[str, str]]) -> dict[str, str] | None:
    """Each model's version at the PR's base commit (`open_project` loads the project's folders, one per
    repository of a multi-repo project, exported from git, and answers its model versions), or None when
    the base cannot be read or loaded."""
    commit = base_commit(project[0], pr)
    if commit is None:
        return None
    with tempfile.TemporaryDirectory(prefix="meshbot-base-") as folder:
        # each under its own name: the loader names a repository without a `project` key by its folder
        folders = [Path(folder) / str(index) / (checkout.path.resolve().name or "project")
                   for index, checkout in enumerate(project)]
        if not all(checkout.export(commit, where) for checkout, where in zip(project, folders)):
            return None
        try:
            return dict(open_project(folders))
        except BotError:
            return None


def change_origins(plan: Plan, base_versions: Mapping[str, str]) -> dict[str, Origin]:
    """Each change of `plan` by where it comes from: the base when the base branch's project has the very
    version the plan brings (or, for a removal, no longer has the model); the PR otherwise."""
    origins = {}
    for change in plan.changes:
        if change.change is ChangeType.REMOVED:
            from_base = change.name not in base_versions
        else:
            from_base = change.snapshot is not None and base_versions.get(change.name) == change.snapshot.identifier
        origins[change.name] = Origin.BASE if from_base else Origin.PULL_REQUEST
    return origins
