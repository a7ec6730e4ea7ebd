"""Webhook payload JSON → frozen event dataclasses (pull requests, reviews, comments, pushes, releases, merge groups)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.errors import GithubError

PR_SYNC_ACTIONS = frozenset({"opened", "synchronize", "reopened", "ready_for_review"})


@dataclass(frozen=True)
class Repo:
    owner: str
    name: str
    default_branch: str = "main"

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


@dataclass(frozen=True)
class PullRequest:
    number: int
    title: str
    author: str
    head_sha: str
    head_ref: str
    base_ref: str
    head_repo: str | None      # "owner/name" of the head repository; None when the fork was deleted
    draft: bool = False
    merged: bool = False
    state: str = "open"
    mergeable: bool | None = None        # GET /pulls/{n} only; None while GitHub is still computing it
    mergeable_state: str | None = None   # clean, blocked, dirty, behind, unstable, draft, unknown...
    base_sha: str = ""                   # the base branch's commit when the event was sent

    def is_from_fork(self, repo: Repo) -> bool:
        """True unless the head branch lives in `repo` (a deleted head repository cannot be trusted either)."""
        return self.head_repo is None or self.head_repo.lower() != repo.full_name.lower()

    def head_origin(self) -> str:
        """Where the head branch comes from, for messages: never prints `None`.

        >>> PullRequest(1, "t", "a", "s", "h", "main", None).head_origin()
        'a head repository that is no longer available (deleted fork)'
        >>> PullRequest(1, "t", "a", "s", "h", "main", "me/repo").head_origin()
        'the fork `me/repo`'
        """
        if self.head_repo is None:
            return "a head repository that is no longer available (deleted fork)"
        return f"the fork `{self.head_repo}`"


@dataclass(frozen=True)
class Review:
    user: str
    state: str                 # APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED (upper case)
    commit_id: str | None
    submitted_at: str | None


@dataclass(frozen=True)
class Comment:
    id: int
    user: str
    body: str
    issue_number: int
    on_pull_request: bool


# the branch GitHub's merge queue builds for an entry: gh-readonly-queue/<base branch>/pr-<number>-<base sha>
_QUEUE_REF = re.compile(r"^(?:refs/heads/)?gh-readonly-queue/(?P<base>.+)/pr-(?P<number>\d+)-(?P<sha>[0-9a-f]{40})$")


@dataclass(frozen=True)
class MergeGroup:
    """A merge queue entry (`merge_group` event): the queue's merge commit of a PR on top of those ahead of it."""

    head_sha: str              # the merge commit the queue tests, and lands on the base branch when it passes
    head_ref: str              # refs/heads/gh-readonly-queue/<base>/pr-<N>-<sha>
    base_ref: str              # refs/heads/<base>
    base_sha: str = ""         # the commit the entry was built on (the base branch's, or the entry ahead's)

    @property
    def base_branch(self) -> str:
        return self.base_ref[len("refs/heads/"):] if self.base_ref.startswith("refs/heads/") else self.base_ref

    @property
    def pr_numbers(self) -> tuple[int, ...]:
        """The pull request(s) the head ref names: GitHub names the entry's own PR (those ahead of it have
        entries of their own). () when the ref is not a merge queue branch.

        >>> MergeGroup("s", "refs/heads/gh-readonly-queue/main/pr-104-" + "9" * 40, "refs/heads/main").pr_numbers
        (104,)
        >>> MergeGroup("s", "refs/heads/feature", "refs/heads/main").pr_numbers
        ()
        """
        match = _QUEUE_REF.match(self.head_ref)
        return (int(match.group("number")),) if match and match.group("base") == self.base_branch else ()


@dataclass(frozen=True)
class Event:
    """What the bot needs from one webhook: exactly the fields its runners read."""

    name: str                  # GITHUB_EVENT_NAME: pull_request, pull_request_review, issue_comment, push...
    action: str | None
    repo: Repo
    sender: str | None = None
    pull_request: PullRequest | None = None
    review: Review | None = None
    comment: Comment | None = None
    ref: str | None = None     # push: refs/heads/main or refs/tags/v1
    sha: str | None = None     # push: the `after` commit
    tag: str | None = None     # push of a tag, or release tag_name
    deleted: bool = False      # push that deleted the branch or tag
    inputs: tuple[tuple[str, str], ...] = ()   # workflow_dispatch: the inputs given, as strings
    merge_group: MergeGroup | None = None      # merge_group: the queue entry

    def input(self, name: str) -> str:
        """A workflow_dispatch input ('' when not given); booleans read as 'true' / 'false'."""
        return dict(self.inputs).get(name, "")

    @property
    def is_pr_sync(self) -> bool:
        return self.name in ("pull_request", "pull_request_target") and self.action in PR_SYNC_ACTIONS

    @property
    def is_pr_closed(self) -> bool:
        return self.name in ("pull_request", "pull_request_target") and self.action == "closed"

    @property
    def branch(self) -> str | None:
        if self.ref and self.ref.startswith("refs/heads/"):
            return self.ref[len("refs/heads/"):]
        return None


def read_json(path: str | Path, *, what: str) -> Any:
    """A JSON file the bot is given; missing or malformed is a GithubError naming `what`, file and line."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GithubError(f"{what} file not found: {path}") from None
    except json.JSONDecodeError as error:
        raise GithubError(f"{path}:{error.lineno}: {what} is not valid JSON: {error.msg}") from None


def load_event(*, name: str, path: str | Path, repository: str | None = None, ref: str | None = None) -> Event:
    """Read the payload file GitHub wrote (GITHUB_EVENT_PATH) and parse it.

    A `schedule` payload names no ref (and, in older runners, no repository): `ref` (GITHUB_REF, the default
    branch a schedule runs on) and `repository` (GITHUB_REPOSITORY) stand in for them."""
    payload = read_json(path, what="event payload (GITHUB_EVENT_PATH / --event-path)")
    if isinstance(payload, dict) and name in ("schedule", "workflow_dispatch") and not payload.get("ref") and ref:
        payload = {**payload, "ref": ref}
    if isinstance(payload, dict) and "repository" not in payload and repository and "/" in repository:
        owner, _, repo = repository.partition("/")
        branch = ref[len("refs/heads/"):] if ref and ref.startswith("refs/heads/") else "main"
        payload = {**payload, "repository": {"full_name": repository, "name": repo, "owner": {"login": owner},
                                             "default_branch": branch}, "ref": payload.get("ref") or ref}
    return parse_event(name, payload)


def parse_event(name: str, payload: dict[str, Any]) -> Event:
    """Turn a webhook payload into an Event; unknown events keep just the repository and action."""
    if not isinstance(payload, dict) or "repository" not in payload:
        raise GithubError(f"`{name}` payload has no `repository`; is GITHUB_EVENT_PATH the right file?")
    repo = _repo(payload["repository"])
    sender = (payload.get("sender") or {}).get("login")
    base = dict(name=name, action=payload.get("action"), repo=repo, sender=sender)
    if "pull_request" in payload and payload["pull_request"]:
        base["pull_request"] = parse_pull_request(payload["pull_request"])
    if payload.get("review"):
        base["review"] = parse_review(payload["review"])
    if payload.get("comment") and payload.get("issue"):
        base["comment"] = _comment(payload["comment"], payload["issue"])
    if name == "push":
        ref = str(payload.get("ref") or "")
        base.update(ref=ref, sha=payload.get("after"), deleted=bool(payload.get("deleted")),
                    tag=ref[len("refs/tags/"):] if ref.startswith("refs/tags/") else None)
    if name in ("workflow_dispatch", "schedule"):
        base.update(ref=payload.get("ref"))
    if name == "workflow_dispatch" and isinstance(payload.get("inputs"), dict):
        base.update(inputs=tuple((str(k), str(v).lower() if isinstance(v, bool) else str(v))
                                 for k, v in payload["inputs"].items() if v is not None))
    if name == "merge_group" and isinstance(payload.get("merge_group"), dict):
        group = payload["merge_group"]
        base.update(merge_group=MergeGroup(head_sha=str(group.get("head_sha") or ""),
                                           head_ref=str(group.get("head_ref") or ""),
                                           base_ref=str(group.get("base_ref") or ""),
                                           base_sha=str(group.get("base_sha") or "")),
                    sha=str(group.get("head_sha") or "") or None)
    if name == "release" and payload.get("release"):
        release = payload["release"]
        base.update(tag=release.get("tag_name"), sha=None,
                    ref=f"refs/tags/{release.get('tag_name')}")
    return Event(**base)


def _repo(raw: dict[str, Any]) -> Repo:
    owner = raw.get("owner") or {}
    full = str(raw.get("full_name") or "")
    owner_login = owner.get("login") or owner.get("name") or full.split("/")[0]
    return Repo(owner=str(owner_login), name=str(raw.get("name") or full.split("/")[-1]),
                default_branch=str(raw.get("default_branch") or raw.get("master_branch") or "main"))


def parse_pull_request(raw: dict[str, Any]) -> PullRequest:
    """A pull request from a webhook payload or a REST answer (GET /pulls/{n}, GET /commits/{sha}/pulls)."""
    head, base = raw.get("head") or {}, raw.get("base") or {}
    head_repo = head.get("repo")
    return PullRequest(
        number=int(raw["number"]), title=str(raw.get("title") or ""),
        author=str((raw.get("user") or {}).get("login") or ""),
        head_sha=str(head.get("sha") or ""), head_ref=str(head.get("ref") or ""),
        base_ref=str(base.get("ref") or ""),
        head_repo=head_repo.get("full_name") if head_repo else None,
        draft=bool(raw.get("draft")), merged=bool(raw.get("merged_at") or raw.get("merged")),
        state=str(raw.get("state") or "open"), mergeable=raw.get("mergeable"),
        mergeable_state=raw.get("mergeable_state"), base_sha=str(base.get("sha") or ""))


def parse_review(raw: dict[str, Any]) -> Review:
    return Review(user=str((raw.get("user") or {}).get("login") or ""),
                  state=str(raw.get("state") or "").upper(), commit_id=raw.get("commit_id"),
                  submitted_at=raw.get("submitted_at"))


def _comment(raw: dict[str, Any], issue: dict[str, Any]) -> Comment:
    return Comment(id=int(raw["id"]), user=str((raw.get("user") or {}).get("login") or ""),
                   body=str(raw.get("body") or ""), issue_number=int(issue["number"]),
                   on_pull_request="pull_request" in issue)
