"""Where the bot runs: GitHub Actions (the API) or a local folder (--output-dir), behind one interface."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Protocol

from bot.errors import GithubError
from bot.github.checkout import GitCheckout
from bot.github.event import Event, PullRequest
from bot.github.local import Answers, LocalOutput, StepOutputs, load_answers
from bot.github.ports import GithubPort
from bot.github.trusted import ApiDefaultBranch, GitDefaultBranch
from bot.report.media import workflow_command

if TYPE_CHECKING:
    from bot.github.client import GithubClient

DEFAULT_OUTPUT_DIR = "meshbot-output"


class Host(Protocol):
    """What differs between a job on GitHub Actions and a rehearsal in a local folder."""

    github: GithubPort
    outputs: StepOutputs
    missing: str        # why the default branch's settings cannot be read, when they cannot

    @property
    def default_branch(self) -> ApiDefaultBranch | GitDefaultBranch | None: ...
    def subdir(self, project_path: str) -> str: ...
    def on_default_branch(self, sha: str) -> bool | None: ...
    def commits_behind(self, base: str, head: str) -> int | None: ...
    def default_branch_head(self) -> str | None: ...
    def signed_in_as(self, login: str) -> None: ...


@dataclass
class LocalHost:
    """No network: what the bot posts goes to a folder, what it asks GitHub comes from --answers, and the
    default branch is the checkout's `origin/<branch>`."""

    checkout: GitCheckout
    branch: str
    github: LocalOutput
    outputs: StepOutputs

    @property
    def missing(self) -> str:
        return f"the checkout has no git ref `{self._ref}` to read the default branch's config.yaml from"

    @property
    def _ref(self) -> str:
        return f"origin/{self.branch}"

    @property
    def default_branch(self) -> GitDefaultBranch | None:
        return GitDefaultBranch(self.checkout, self.branch) if self.checkout.has_ref(self._ref) else None

    def subdir(self, project_path: str) -> str:
        root = self.checkout.root()
        return project_subdir(project_path, str(root)) if root else ""

    def on_default_branch(self, sha: str) -> bool | None:
        return self.checkout.is_ancestor(sha, self._ref)

    def commits_behind(self, base: str, head: str) -> int | None:
        contains = self.checkout.is_ancestor(f"origin/{base}", head)
        return None if contains is None else (0 if contains else 1)

    def default_branch_head(self) -> str | None:
        return self.checkout.commit_of(self._ref)

    def signed_in_as(self, login: str) -> None:
        return None


@dataclass
class ActionsHost:
    """A job on GitHub Actions: the REST API, the step's output and summary files, the workspace."""

    client: "GithubClient"
    branch: str
    workspace: str | None
    outputs: StepOutputs
    missing: str = ""

    @property
    def github(self) -> GithubPort:
        return self.client

    @property
    def default_branch(self) -> ApiDefaultBranch:
        return ApiDefaultBranch(self.client, self.branch)

    def subdir(self, project_path: str) -> str:
        return project_subdir(project_path, self.workspace)

    def on_default_branch(self, sha: str) -> bool | None:
        return self.client.is_on_branch(sha, self.branch)

    def commits_behind(self, base: str, head: str) -> int | None:
        return self.client.commits_behind(base, head)

    def default_branch_head(self) -> str | None:
        return self.client.branch_head(self.branch)

    def signed_in_as(self, login: str) -> None:
        self.client.bot_login = login


def local_host(event: Event, checkout: GitCheckout, *, output_dir: str | None, answers: str | None) -> LocalHost:
    folder = output_dir or DEFAULT_OUTPUT_DIR
    given = load_answers(answers) if answers else Answers()
    pulls: tuple[PullRequest, ...] = (event.pull_request,) if event.pull_request is not None else ()
    return LocalHost(checkout, event.repo.default_branch, LocalOutput(folder, pull_requests=pulls, answers=given),
                     StepOutputs.in_folder(folder))


def actions_host(event: Event, *, token: str | None, env: Mapping[str, str], out: Callable[[str], None]) -> ActionsHost:
    from bot.github.client import GithubClient

    token = token or env.get("GITHUB_TOKEN") or env.get("INPUT_GITHUB_TOKEN")
    if not token:
        raise GithubError("no GitHub token: set GITHUB_TOKEN (the action's `github_token` input) or --token")
    out(workflow_command("add-mask", token))
    client = GithubClient(token=token, repo=event.repo, api_url=env.get("GITHUB_API_URL") or "https://api.github.com")
    return ActionsHost(client, event.repo.default_branch, env.get("GITHUB_WORKSPACE"),
                       StepOutputs(output_file=env.get("GITHUB_OUTPUT"), summary_file=env.get("GITHUB_STEP_SUMMARY")))


def project_subdir(project_path: str, workspace: str | None) -> str:
    """The project's folder relative to the repository root, taken from the path as written: a symlink
    the checkout brings must not point the bot at another folder's settings, so one on the way is refused."""
    root = Path(os.path.abspath(workspace or os.getcwd()))
    path = Path(os.path.abspath(project_path))
    try:
        rel = path.relative_to(root)
    except ValueError:
        try:
            rel = path.relative_to(root.resolve())
            root = root.resolve()
        except ValueError:
            return ""
    for depth in range(1, len(rel.parts) + 1):
        if (root.joinpath(*rel.parts[:depth])).is_symlink():
            raise GithubError(f"the project folder `{rel.as_posix()}` goes through a symlink in the checkout "
                              f"(`{Path(*rel.parts[:depth]).as_posix()}`); meshbot reads a project only from "
                              "a real folder of the repository")
    return "" if str(rel) == "." else rel.as_posix()
