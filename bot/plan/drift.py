"""Drift: what changed an environment (prod) since the default branch's last deploy, by any other plan.

Every promotion records where its plan came from (`source` in environment_history). A deploy of the default
branch by the GitHub bot records `deploy <branch>@<sha> ...`; anything else (a local `plan prod`, a rollback,
a `/deploy` of a pull request's head, a forward-only fix) records something else. The newest deploy of the
default branch is the baseline: each model whose snapshot now differs from it was changed by the plans
promoted after it, which are reported with when and from where. With `head_versions` (each model's version
at the default branch's head), a model prod now serves exactly as the head would deploy it is left out: the
next deploy keeps it."""

from __future__ import annotations

import getpass
import os
import socket
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Mapping, Protocol

DEPLOY = "deploy "      # the prefix of a default-branch deploy's source


def deploy_source(branch: str, sha: str, where: str = "", *, tag: str = "") -> str:
    """The source a deploy of the default branch records (`tag`: the release or tag that deployed it).

    >>> deploy_source("main", "0123456789abcdef0123", "https://github.com/o/r/actions/runs/7")
    'deploy main@0123456789ab https://github.com/o/r/actions/runs/7'
    >>> deploy_source("main", "0123456789abcdef0123", tag="v1.2")
    'deploy main@0123456789ab release v1.2'
    """
    return f"{DEPLOY}{branch}@{sha[:12]}" + (f" release {tag}" if tag else "") + (f" {where}" if where else "")


def is_default_branch_deploy(source: str) -> bool:
    return source.startswith(DEPLOY)


def local_source(what: str = "plan") -> str:
    """Where a plan applied here comes from: the command, the user and the machine (and a CI run, if any).

    >>> local_source("rollback").startswith("rollback by ")
    True
    """
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = os.environ.get("USER") or "unknown"
    run = os.environ.get("GITHUB_RUN_ID")
    where = f" (GitHub Actions run {run} of {os.environ.get('GITHUB_REPOSITORY', '?')})" if run else ""
    return f"{what} by {user}@{socket.gethostname()}{where}"


@dataclass(frozen=True)
class DriftPlan:
    """A plan promoted after the baseline deploy: its id, when, and from where."""

    plan_id: str
    promoted_ts: int
    source: str            # "" for a plan promoted before state schema 10 (unknown)

    @property
    def when(self) -> str:
        """
        >>> DriftPlan("p", 86_400_000, "").when
        '1970-01-02 00:00 UTC'
        """
        return datetime.fromtimestamp(self.promoted_ts / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


@dataclass(frozen=True)
class DriftedModel:
    name: str
    deployed: str          # the snapshot identifier the baseline deploy served ("-": it had none)
    now: str               # the one the environment serves now ("-": removed)
    plan_id: str           # the plan that made the change (the first after the baseline to serve `now`)


@dataclass(frozen=True)
class Drift:
    """The environment compared with the default branch's last deploy; empty `models` means no drift."""

    environment: str
    baseline: DriftPlan | None = None          # the default branch's last deploy (None: none recorded)
    models: tuple[DriftedModel, ...] = ()
    plans: tuple[DriftPlan, ...] = ()          # the plans after the baseline that made a change in `models`

    @property
    def drifted(self) -> bool:
        return bool(self.models)

    def plan(self, plan_id: str) -> DriftPlan | None:
        return next((p for p in self.plans if p.plan_id == plan_id), None)


class HistoryReader(Protocol):
    def get_environment(self, name: str): ...
    def get_environment_history(self, name: str) -> list: ...


def find_drift(state: HistoryReader, environment: str = "prod", *,
               head_versions: Mapping[str, str] | None = None) -> Drift:
    """The drift of `environment` in `state` (reads state only; Spark never starts)."""
    current = state.get_environment(environment)
    if current is None:
        return Drift(environment)
    history = sorted(state.get_environment_history(environment), key=lambda e: e.promoted_ts)
    base_index = next((i for i in range(len(history) - 1, -1, -1) if is_default_branch_deploy(history[i].source)), None)
    if base_index is None:
        return Drift(environment)
    base = history[base_index]
    baseline = DriftPlan(base.plan_id, base.promoted_ts, base.source)
    after = history[base_index + 1:]
    if current.plan_id == base.plan_id or not after:
        return Drift(environment, baseline)
    deployed = {s.name: s.identifier for s in base.snapshots}
    now = {s.name: s.identifier for s in current.snapshots}
    models = []
    for name in sorted(set(deployed) | set(now)):
        before, served = deployed.get(name, "-"), now.get(name, "-")
        if before == served:
            continue
        if head_versions is not None and served != "-" and head_versions.get(name) == served:
            continue   # prod serves it as the default branch's head would: the next deploy keeps it
        by = next((e for e in after if {s.name: s.identifier for s in e.snapshots}.get(name, "-") == served),
                  after[-1])
        models.append(DriftedModel(name, before, served, by.plan_id))
    used = {m.plan_id for m in models}
    plans = tuple(DriftPlan(e.plan_id, e.promoted_ts, e.source) for e in after if e.plan_id in used)
    return Drift(environment, baseline, tuple(models), plans)
