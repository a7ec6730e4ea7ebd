"""Gate settings from sources a pull request cannot change: the action's `config` input and the default
branch's config.yaml, read as data (no config.py, no env_var, no file of the checkout)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Protocol

from bot.errors import GithubError
from bot.github.checkout import GitCheckout
from bot.project.config import UserConfig, parse_users
from bot.project.limits import SOURCE
from bot.project.yaml_parse import YamlProblem, parse_yaml

INPUT_NAME = "the action's `config` input (MESHBOT_CICD_BOT)"
CONFIG_NAMES = ("config.yaml", "config.yml")
_TEMPLATE = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.DOTALL)
_UNRENDERED = "meshbot_template_value"     # what a template in the default branch's file reads as


class DefaultBranchFiles(Protocol):
    """Reads one file of the default branch: through the contents API, or a git ref in local mode."""

    @property
    def branch(self) -> str: ...
    def read(self, relative: str) -> str | None: ...   # None: no such file; GithubError: cannot tell


@dataclass(frozen=True)
class TrustedConfig:
    """The `cicd_bot` mapping and `users` list the bot's gates use, and where they came from."""

    cicd_bot: dict[str, Any]
    users: tuple[UserConfig, ...] = ()
    sources: tuple[str, ...] = ()     # empty: no trusted source was at hand, the gates keep safe defaults
    missing: str = ""                  # why there is no trusted source, for refusals

    @property
    def trusted(self) -> bool:
        return bool(self.sources)

    @property
    def where(self) -> str:
        return " and ".join(self.sources) or "meshbot's safe defaults"


def read_trusted_config(*, input_text: str | None, default_branch: DefaultBranchFiles | None,
                        project_subdir: str = "") -> TrustedConfig:
    """The action's input merged over the default branch's `cicd_bot`/`users`.

    Nothing here reads the checkout: on a pull request it holds the PR's files, which decide nothing.
    """
    cicd_bot: dict[str, Any] = {}
    users: tuple[UserConfig, ...] = ()
    sources: list[str] = []
    missing = ""
    if default_branch is not None:
        found = _default_branch_config(default_branch, project_subdir)
        if found is not None:
            where, raw = found
            cicd_bot.update(_section(raw.get("cicd_bot"), "cicd_bot", where))
            users = parse_users(raw.get("users"), where)
            sources.append(where)
        else:
            missing = (f"the default branch `{default_branch.branch}` has no "
                       f"{_path(project_subdir, 'config.yaml')}")
    else:
        missing = "the default branch's config.yaml could not be read here"
    if input_text and input_text.strip():
        data = _load_yaml(input_text, INPUT_NAME)
        data = _section(data, "config", INPUT_NAME)
        if "users" in data:
            users = parse_users(data.pop("users"), INPUT_NAME)
        cicd_bot.update(data)
        sources.append(INPUT_NAME)
    return TrustedConfig(cicd_bot=cicd_bot, users=users, sources=tuple(sources),
                         missing="" if sources else missing)


def _default_branch_config(files: DefaultBranchFiles, subdir: str) -> tuple[str, dict[str, Any]] | None:
    for name in CONFIG_NAMES:
        relative = _path(subdir, name)
        text = files.read(relative)
        if text is not None:
            where = f"{relative} on the default branch `{files.branch}`"
            raw = _section(_load_yaml(_TEMPLATE.sub(_UNRENDERED, text), where), "config", where)
            for key in ("cicd_bot", "users"):
                if _UNRENDERED in repr(raw.get(key)):
                    raise GithubError(f"{where}: `{key}` uses a template ({{{{ ... }}}}); the bot reads its gate "
                                      "settings as data, never rendered: write the values out, or set them in the "
                                      "action's `config` input")
            return where, raw
    return None


def _path(subdir: str, name: str) -> str:
    return str(PurePosixPath(subdir.strip("/")) / name) if subdir.strip("/") else name


def _load_yaml(text: str, where: str) -> Any:
    try:
        return parse_yaml(text).data
    except YamlProblem as problem:
        at = f"{where}: line {problem.line}" if problem.line is not None else where
        raise GithubError(f"{at}: {problem.detail}") from None


def _section(value: Any, key: str, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise GithubError(f"{where}: `{key}` must be a mapping of settings")
    return dict(value)


class _ContentsApi(Protocol):
    def branch_file(self, relative: str, *, branch: str) -> str | None: ...


@dataclass(frozen=True)
class ApiDefaultBranch:
    """The default branch read through the contents API (inside GitHub Actions)."""

    client: _ContentsApi   # bot.github.client.GithubClient
    branch: str

    def read(self, relative: str) -> str | None:
        return self.client.branch_file(relative, branch=self.branch)


@dataclass(frozen=True)
class GitDefaultBranch:
    """The default branch as the checkout's ref `origin/<branch>` (local mode)."""

    checkout: GitCheckout
    branch: str

    def read(self, relative: str) -> str | None:
        ref = f"origin/{self.branch}"
        size = self.checkout.size_at(ref, relative)
        if size is None:
            return None
        SOURCE.check(f"{relative} on the default branch `{self.branch}`", size)   # before git reads it all
        return self.checkout.file_at(ref, relative)
