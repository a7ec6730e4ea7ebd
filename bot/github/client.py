"""The only PyGithub user: domain-typed GitHub calls, retried by PyGithub's GithubRetry."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, Callable, TypeVar
from urllib.parse import quote

import github
import requests
from github import Auth, GithubException, GithubRetry, RateLimitExceededExceedsMaxWait

from bot.errors import GithubError
from bot.github.ports import CheckRun, TokenPermissionError
from bot.github.event import PullRequest, Repo, Review, parse_pull_request, parse_review

T = TypeVar("T")
_RETRIED_METHODS = frozenset({"GET", "HEAD", "POST", "PATCH", "PUT", "DELETE"})


@dataclass(frozen=True)
class RetryPolicy:
    """How GitHub calls are retried inside an Action job: a few quick tries, every wait capped.

    5xx answers and dropped connections wait `backoff` x 0, 2, 4, 8... seconds; a secondary rate limit
    waits `secondary_rate_wait`, or the answer's Retry-After; a primary one until its reset. No single
    wait exceeds `max_wait`, so a whole call waits at most `retries` x `max_wait` seconds; a primary
    limit resetting later than that fails at once. Tests pass zeros so nothing sleeps.
    """

    retries: int = 4
    backoff: float = 1.0
    secondary_rate_wait: float = 30.0
    max_wait: float = 60.0

    def build(self) -> GithubRetry:
        return _CappedRetry(total=self.retries, backoff_factor=self.backoff, backoff_max=self.max_wait,
                            secondary_rate_wait=self.secondary_rate_wait, max_rate_limit_wait=self.max_wait,
                            allowed_methods=_RETRIED_METHODS)


class _CappedRetry(GithubRetry):
    """GithubRetry whose Retry-After waits are capped like its backoffs (urllib3 honours any value)."""

    def get_retry_after(self, response: Any) -> float | None:
        seconds = super().get_retry_after(response)
        return None if seconds is None else min(seconds, self.backoff_max)


class GithubClient:
    """GitHub REST through PyGithub; 5xx, dropped connections and rate limits are retried per `retry`.

    The token is never part of repr or errors.
    """

    def __init__(self, *, token: str, repo: Repo, api_url: str = "https://api.github.com",
                 bot_login: str = "github-actions[bot]", retry: RetryPolicy = RetryPolicy(),
                 seconds_between_writes: float = 1.0) -> None:
        self._gh = github.Github(auth=Auth.Token(token), base_url=api_url.rstrip("/"), retry=retry.build(),
                                 lazy=True, seconds_between_requests=None,
                                 seconds_between_writes=seconds_between_writes or None)
        self._repo = self._gh.get_repo(repo.full_name)
        self._base = f"/repos/{repo.full_name}"
        self.bot_login = bot_login
        self._api_url = api_url.rstrip("/")
        self._retries = retry.retries
        self._check_urls: dict[int, str] = {}

    def __repr__(self) -> str:
        return f"GithubClient(repo={self._base[7:]!r})"

    # -- errors ------------------------------------------------------------------------------

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        """Run one (already retried) call; whatever still fails becomes a GithubError naming `what`."""
        try:
            return fn()
        except RateLimitExceededExceedsMaxWait as error:
            raise GithubError(f"GitHub API {what} is rate limited and would have to wait {error.wait:.0f} s, "
                              f"longer than meshbot waits; re-run the job later") from None
        except GithubException as error:
            if error.status == 403 and not _rate_limited(error):
                raise TokenPermissionError(f"GitHub API {what} was refused (HTTP 403): {_message(error)}. "
                                           "The token cannot do this; on a pull request from a fork "
                                           "GitHub gives workflows a read-only token.") from None
            raise GithubError(f"GitHub API {what} failed with HTTP {error.status}: {_message(error)}") from None
        except requests.exceptions.RetryError as error:
            raise GithubError(f"GitHub API {what} still failed after {self._retries} retries "
                              f"({_retry_reason(error)}); GitHub may be degraded, re-run the job later") from None
        except requests.exceptions.RequestException as error:
            raise GithubError(f"could not reach the GitHub API at {self._api_url} ({what}): "
                              f"{type(error).__name__}. Check GITHUB_API_URL and the runner's "
                              "network access.") from None

    def _request(self, verb: str, path: str, body: dict[str, Any] | None = None, *,
                 parameters: dict[str, str] | None = None) -> Any:
        requester = self._gh.requester
        return self._call(f"{verb} {path}", lambda: requester.requestJsonAndCheck(
            verb, f"{self._base}{path}", parameters=parameters, input=body)[1])

    # -- the default branch --------------------------------------------------------------------

    def file_at(self, relative: str, *, ref: str) -> str | None:
        """The text of the file `relative` (from the repository root) at `ref`; None when there is none."""
        try:
            data = self._request("GET", f"/contents/{quote(relative)}", parameters={"ref": ref})
        except GithubError as error:
            if "HTTP 404" in str(error):
                return None
            raise
        if not isinstance(data, dict) or data.get("type") != "file":
            return None
        if data.get("encoding") != "base64":   # over 1 MB the API sends no content: fail closed, never "absent"
            raise GithubError(f"{relative} at `{ref}` could not be read through the contents API "
                              f"(encoding `{data.get('encoding')}`, {data.get('size')} bytes)")
        return base64.b64decode(data.get("content") or "").decode("utf-8", errors="replace")

    # A branch is always named through its git reference (`heads/<branch>`) and then compared or read by its commit: a bare name
    # in a compare or contents call resolves as git resolves it, and a writer's tag of the same name wins.

    def is_on_branch(self, sha: str, branch: str) -> bool:
        """Whether commit `sha` is reachable from `branch` (the compare API: identical or behind)."""
        data = self._request("GET", f"/compare/{self.branch_head(branch)}...{sha}")
        return data.get("status") in ("identical", "behind")

    def branch_head(self, branch: str) -> str:
        """The newest commit of the branch `branch` (never of a tag that has its name)."""
        return str(self._request("GET", f"/git/ref/heads/{quote(branch, safe='')}")["object"]["sha"])

    def branch_file(self, relative: str, *, branch: str) -> str | None:
        """The text of the file `relative` on the branch `branch` (at its newest commit); None when there is none."""
        return self.file_at(relative, ref=self.branch_head(branch))

    def commits_behind(self, base: str, head: str) -> int:
        """How many commits of branch `base` commit `head` does not contain (the compare API's behind_by)."""
        return int(self._request("GET", f"/compare/{self.branch_head(base)}...{head}").get("behind_by") or 0)

    # -- comments ----------------------------------------------------------------------------

    def find_comment(self, number: int, *, marker: str) -> tuple[int, str] | None:
        """The bot's own marked comment on PR `number` (the newest if several)."""
        def scan() -> tuple[int, str] | None:
            found = None
            for comment in self._repo.get_issue(number).get_comments():
                if comment.user.login == self.bot_login and marker in (comment.body or ""):
                    found = (comment.id, comment.body)
            return found
        return self._call(f"list comments of #{number}", scan)

    def create_comment(self, number: int, body: str) -> int:
        return int(self._request("POST", f"/issues/{number}/comments", {"body": body})["id"])

    def edit_comment(self, comment_id: int, body: str) -> None:
        self._request("PATCH", f"/issues/comments/{comment_id}", {"body": body})

    def add_reaction(self, comment_id: int, content: str) -> None:
        self._request("POST", f"/issues/comments/{comment_id}/reactions", {"content": content})

    # -- checks ------------------------------------------------------------------------------

    def create_check(self, check: CheckRun) -> int:
        data = self._request("POST", "/check-runs", {"head_sha": check.head_sha, **_check_body(check)})
        if data.get("html_url"):
            self._check_urls[int(data["id"])] = str(data["html_url"])
        return int(data["id"])

    def check_url(self, check_id: int) -> str | None:
        """The check run's page, as GitHub answered when it was created."""
        return self._check_urls.get(check_id)

    def update_check(self, check_id: int, check: CheckRun) -> None:
        self._request("PATCH", f"/check-runs/{check_id}", _check_body(check))

    # -- pull requests, reviews, permissions ---------------------------------------------------

    def pull_request(self, number: int) -> PullRequest:
        return parse_pull_request(self._request("GET", f"/pulls/{number}"))

    def merge_pull(self, number: int, *, method: str, sha: str) -> str:
        """Merge PR `number` with `method` only if its head is still `sha`; the merge commit's sha."""
        data = self._request("PUT", f"/pulls/{number}/merge", {"merge_method": method, "sha": sha})
        return str(data.get("sha") or "")

    def pulls_for_commit(self, sha: str) -> list[PullRequest]:
        return [parse_pull_request(p) for p in self._request("GET", f"/commits/{sha}/pulls")]

    def changed_files(self, number: int) -> list[str]:
        return self._call(f"files of #{number}", lambda: [
            f.filename for f in self._repo.get_pull(number).get_files()])

    def list_reviews(self, number: int) -> list[Review]:
        raw = self._call(f"reviews of #{number}", lambda: [
            r.raw_data for r in self._repo.get_pull(number).get_reviews()])
        return [parse_review(r) for r in raw]

    def permission(self, username: str) -> str:
        """admin, maintain, write, triage, read or none (a 404 means no access)."""
        try:
            return str(self._request("GET", f"/collaborators/{username}/permission")["permission"])
        except GithubError as error:
            if "HTTP 404" in str(error):
                return "none"
            raise

    def is_team_member(self, org: str, team_slug: str, username: str) -> bool:
        path = f"/orgs/{org}/teams/{team_slug}/memberships/{username}"
        requester = self._gh.requester
        try:
            data = self._call(f"GET {path}", lambda: requester.requestJsonAndCheck("GET", path)[1])
        except GithubError as error:
            if "HTTP 404" in str(error):
                return False
            raise
        return data.get("state") == "active"


def _check_body(check: CheckRun) -> dict[str, Any]:
    body: dict[str, Any] = {"name": check.name, "status": check.status}
    if check.conclusion is not None:
        body["conclusion"] = check.conclusion
    if check.title or check.summary:
        output = {"title": check.title or check.name, "summary": check.summary or check.title}
        if check.text:
            output["text"] = check.text
        body["output"] = output
    return body


def _retry_reason(error: requests.exceptions.RetryError) -> str:
    """urllib3's last reason, e.g. `too many 503 error responses`."""
    cause = error.args[0] if error.args else None
    return str(getattr(cause, "reason", None) or cause or "no answer")


def _rate_limited(error: GithubException) -> bool:
    headers = {k.lower(): v for k, v in (error.headers or {}).items()}
    return ("retry-after" in headers or headers.get("x-ratelimit-remaining") == "0"
            or "rate limit" in _message(error).lower())


def _message(error: GithubException) -> str:
    data = error.data
    if isinstance(data, dict) and data.get("message"):
        return str(data["message"])
    return str(data or error.message or "")
