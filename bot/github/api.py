"""What runners need from GitHub and from the engine, as small Protocols plus the values they exchange."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, Sequence

from bot.context import ApplyResult
from bot.diff.api import ModelDataDiff
from bot.errors import GithubError
from bot.github.event import PullRequest, Review
from bot.plan.definition import Plan, PlanOptions, ProgressCallback
from bot.plan.janitor import JanitorResult
from bot.project.config import ProjectConfig
from bot.quality.api import TestSuiteResult

if TYPE_CHECKING:   # types only: the GitHub layer reaches state and Spark through the context
    from bot.plan.rollback import RollbackResult
    from bot.plan.run import RunResult
    from bot.state.api import Environment

MARKER_PREFIX = "<!-- meshbot:pr-comment"
WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})


def comment_marker(gateway: str | None) -> str:
    """The hidden HTML marker that identifies the bot's PR comment (one per gateway)."""
    return f"{MARKER_PREFIX} gateway={gateway or 'default'} -->"


class TokenPermissionError(GithubError):
    """GitHub refused a call with 403 (not a rate limit): the token lacks the permission, as on fork PRs."""


@dataclass(frozen=True)
class CheckRun:
    """One check run as posted: conclusion None while in progress."""

    name: str
    head_sha: str
    status: str                      # queued, in_progress, completed
    conclusion: str | None = None    # success, failure, neutral, skipped, action_required, cancelled
    title: str = ""
    summary: str = ""
    text: str = ""


class GithubPort(Protocol):
    """The GitHub operations the bot performs, in domain terms (real client or local folder)."""

    def create_comment(self, number: int, body: str) -> int: ...
    def edit_comment(self, comment_id: int, body: str) -> None: ...
    def find_comment(self, number: int, *, marker: str) -> tuple[int, str] | None: ...
    def create_check(self, check: CheckRun) -> int: ...
    def update_check(self, check_id: int, check: CheckRun) -> None: ...
    def check_url(self, check_id: int) -> str | None: ...
    def list_reviews(self, number: int) -> list[Review]: ...
    def permission(self, username: str) -> str: ...
    def is_team_member(self, org: str, team_slug: str, username: str) -> bool: ...
    def add_reaction(self, comment_id: int, content: str) -> None: ...
    def pull_request(self, number: int) -> PullRequest: ...
    def merge_pull(self, number: int, *, method: str, sha: str) -> str: ...
    def pulls_for_commit(self, sha: str) -> list[PullRequest]: ...
    def changed_files(self, number: int) -> list[str]: ...


class EngineContext(Protocol):
    """The slice of bot.context.Context the runners call, with the engine's own result types.

    bot.context.Context satisfies it, and so do the timing wrapper and the tests' FakeEngine; the GitHub
    layer reaches Spark and state only through these methods.
    """

    @property
    def config(self) -> ProjectConfig: ...
    def load(self) -> None: ...
    def start_engine(self) -> None: ...
    def plan(self, environment: str = "prod", *, options: PlanOptions = PlanOptions()) -> Plan: ...
    def apply(self, plan: Plan, *, progress: ProgressCallback | None = None) -> ApplyResult: ...
    def test(self, *, patterns: Sequence[str] = (), files: Sequence[str] = ()) -> TestSuiteResult: ...
    def invalidate(self, environment: str, *, sync: bool = False) -> JanitorResult | None: ...
    def run(self, environment: str = "prod", *, execution_time: str | None = None,
            progress: ProgressCallback | None = None) -> RunResult: ...
    def environments(self) -> list[Environment]: ...
    def rollback(self, environment: str, *, to_plan_id: str | None = None) -> RollbackResult: ...
    def machine_local_storage(self) -> tuple[str, ...]: ...
    def view_name(self, model_name: str, environment: str) -> str: ...
    def preview_diff(self, plan: Plan, *, environment: str | None = None, window_days: int = 7,
                     full_scope: str = "whole", decimals: int = 3, show_sample: bool = False,
                     limit: int = 20) -> tuple[ModelDataDiff, ...]: ...
