"""Per-phase wall time of one bot run (load, spark, tests, plan, apply, diff, comment), and the early
Spark start that overlaps the session's launch with loading the project.

`TimedContext` and `TimedGithub` wrap the engine context and the GitHub port a runner gets: every call
is timed into its phase and otherwise passed through unchanged. The line printed at the end of
a run (`meshbot timings: ...`) and the job summary table come from the same `PhaseTimings`.

>>> timings = PhaseTimings()
>>> timings.add("plan", 1.25); timings.add("plan", 0.5); timings.add("tests", 2.0)
>>> timings.line(total=4.0)
'meshbot timings: load 0.0 s, spark 0.0 s, tests 2.0 s, plan 1.8 s, apply 0.0 s, diff 0.0 s, comment 0.0 s, other 0.2 s, total 4.0 s'
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator, Sequence, TypeVar

from bot.plan.apply import ApplyResult
from bot.diff.review import ReviewOptions, ReviewResult
from bot.github.ports import CheckRun, EngineContext, GithubPort
from bot.github.event import PullRequest, Review
from bot.plan.definition import Plan, PlanOptions, ProgressCallback
from bot.plan.drift import Drift
from bot.plan.janitor import JanitorResult
from bot.project.config import ProjectConfig
from bot.quality.results import TestSuiteResult
from bot.report.console import progress_lines
from bot.report.media import workflow_command

if TYPE_CHECKING:   # types only: the GitHub layer reaches state and Spark through the context
    from bot.plan.estimate import BackfillEstimate
    from bot.plan.rollback import RollbackResult
    from bot.plan.cron_run import RunResult

PHASES = ("load", "spark", "tests", "plan", "apply", "diff", "comment")
# How a phase is named in the job log's `::group::` folds.
GROUP_TITLES = {"load": "load the project", "spark": "wait for Spark", "tests": "unit tests", "plan": "plan",
                "apply": "apply", "diff": "data diff"}
T = TypeVar("T")


@dataclass
class PhaseTimings:
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    started: float = field(default_factory=time.perf_counter)

    def add(self, phase: str, seconds: float) -> None:
        self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        began = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - began)

    def total(self) -> float:
        return time.perf_counter() - self.started

    def rows(self, total: float | None = None) -> list[tuple[str, float]]:
        total = self.total() if total is None else total
        rows = [(name, self.seconds.get(name, 0.0)) for name in PHASES]
        rows.append(("other", max(0.0, total - sum(s for _, s in rows))))
        rows.append(("total", total))
        return rows

    def line(self, total: float | None = None) -> str:
        return "meshbot timings: " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.rows(total))


class TimedContext:
    """An EngineContext whose calls are timed per phase; `start_engine` starts Spark in a thread.

    Loading the project (parsing, on the first call that reads it) is timed as `load`, the session start
    as `spark` (when started early, only the part the run had to wait for); each Spark-using call waits
    for the early start to finish first.
    """

    def __init__(self, context: EngineContext, timings: PhaseTimings,
                 out: Callable[[str], None] | None = None) -> None:
        self._context = context
        self._timings = timings
        self._out = out   # the job log: each phase folded in a `::group::`, applies' batch lines in it
        self._loaded = False
        self._starter: threading.Thread | None = None
        self._start_error: BaseException | None = None

    @property
    def config(self) -> ProjectConfig:
        return self._context.config

    def load(self) -> None:
        """Parse the project once, timed as `load`."""
        if self._loaded:
            return
        with self._phase("load"):
            self._context.load()
        self._loaded = True

    def start_engine(self) -> None:
        """Launch the Spark session in the background; a start failure surfaces on first use."""
        if self._starter is not None:
            return

        def start() -> None:
            try:
                self._context.start_engine()
            except BaseException as error:   # noqa: BLE001 - re-raised by the first call that needs it
                self._start_error = error

        self._starter = threading.Thread(target=start, name="meshbot-spark-start", daemon=True)
        self._starter.start()

    def _wait_for_engine(self) -> None:
        if self._starter is None:
            return
        with self._phase("spark"):
            self._starter.join()
        self._starter = None
        if self._start_error is not None:
            error, self._start_error = self._start_error, None
            raise error

    def _timed(self, phase: str | None, call: Callable[[], T], *, loads: bool, spark: bool) -> T:
        if loads:
            self.load()
        if spark:
            self._wait_for_engine()
        if phase is None:
            return call()
        with self._phase(phase):
            return call()

    @contextmanager
    def _phase(self, name: str) -> Iterator[None]:
        """Timed into `name`; in the job log, a `::group::` of its own with an end line giving its time."""
        if self._out is None:
            with self._timings.phase(name):
                yield
            return
        title = GROUP_TITLES.get(name, name)
        self._out(workflow_command("group", f"meshbot: {title}"))
        began = time.perf_counter()
        outcome = "stopped after"
        try:
            with self._timings.phase(name):
                yield
            outcome = "done in"
        finally:
            self._out(f"{title}: {outcome} {time.perf_counter() - began:.1f} s")
            self._out(workflow_command("endgroup"))

    def _progress(self, progress: ProgressCallback | None) -> ProgressCallback | None:
        """The caller's progress, else (in the job log) a line per batch and a heartbeat while one runs."""
        if progress is not None or self._out is None:
            return progress
        return progress_lines(self._out)

    def plan(self, environment: str = "prod", *, options: PlanOptions = PlanOptions()) -> Plan:
        return self._timed("plan", lambda: self._context.plan(environment, options=options),
                           loads=True, spark=False)

    def apply(self, plan: Plan, *, progress: ProgressCallback | None = None) -> ApplyResult:
        progress = self._progress(progress)
        return self._timed("apply", lambda: self._context.apply(plan, progress=progress), loads=True, spark=True)

    def backfill_estimates(self, plan: Plan) -> tuple[BackfillEstimate, ...]:
        return self._timed("plan", lambda: self._context.backfill_estimates(plan), loads=False, spark=False)

    def model_versions(self) -> dict[str, str]:
        return self._timed("plan", self._context.model_versions, loads=True, spark=False)

    def test(self, *, patterns: Sequence[str] = (), files: Sequence[str] = ()) -> TestSuiteResult:
        return self._timed("tests", lambda: self._context.test(patterns=patterns, files=files),
                           loads=True, spark=True)

    def invalidate(self, environment: str, *, sync: bool = False) -> JanitorResult | None:
        return self._timed("apply", lambda: self._context.invalidate(environment, sync=sync),
                           loads=False, spark=True)

    def rollback(self, environment: str, *, to_plan_id: str | None = None) -> RollbackResult:
        return self._timed("apply", lambda: self._context.rollback(environment, to_plan_id=to_plan_id),
                           loads=False, spark=True)

    def run(self, environment: str = "prod", *, execution_time: str | None = None,
            progress: ProgressCallback | None = None, skip_when_busy: bool = False) -> RunResult:
        progress = self._progress(progress)
        return self._timed("apply", lambda: self._context.run(environment, execution_time=execution_time,
                                                               progress=progress, skip_when_busy=skip_when_busy),
                           loads=True, spark=False)

    def drift(self, environment: str = "prod", *, head_versions: dict[str, str] | None = None) -> Drift:
        return self._timed("plan", lambda: self._context.drift(environment, head_versions=head_versions),
                           loads=False, spark=False)

    def environment_names(self) -> list[str]:
        return self._timed("plan", self._context.environment_names, loads=False, spark=False)

    def machine_local_storage(self) -> tuple[str, ...]:
        return self._context.machine_local_storage()

    def view_name(self, model_name: str, environment: str) -> str:
        return self._timed(None, lambda: self._context.view_name(model_name, environment), loads=True, spark=False)

    def review(self, plan: Plan, options: ReviewOptions | None = None) -> ReviewResult:
        return self._timed("diff", lambda: self._context.review(plan, options), loads=True, spark=True)


class TimedGithub:
    """The GitHub port (API client or local folder) with every call timed as `comment`."""

    def __init__(self, github: GithubPort, timings: PhaseTimings) -> None:
        self._github = github
        self._timings = timings

    def _timed(self, call: Callable[[], T]) -> T:
        with self._timings.phase("comment"):
            return call()

    def create_comment(self, number: int, body: str) -> int:
        return self._timed(lambda: self._github.create_comment(number, body))

    def edit_comment(self, comment_id: int, body: str) -> None:
        self._timed(lambda: self._github.edit_comment(comment_id, body))

    def find_comment(self, number: int, *, marker: str) -> tuple[int, str] | None:
        return self._timed(lambda: self._github.find_comment(number, marker=marker))

    def create_check(self, check: CheckRun) -> int:
        return self._timed(lambda: self._github.create_check(check))

    def update_check(self, check_id: int, check: CheckRun) -> None:
        self._timed(lambda: self._github.update_check(check_id, check))

    def check_url(self, check_id: int) -> str | None:
        return self._github.check_url(check_id)

    def list_reviews(self, number: int) -> list[Review]:
        return self._timed(lambda: self._github.list_reviews(number))

    def permission(self, username: str) -> str:
        return self._timed(lambda: self._github.permission(username))

    def is_team_member(self, org: str, team_slug: str, username: str) -> bool:
        return self._timed(lambda: self._github.is_team_member(org, team_slug, username))

    def add_reaction(self, comment_id: int, content: str) -> None:
        self._timed(lambda: self._github.add_reaction(comment_id, content))

    def pull_request(self, number: int) -> PullRequest:
        return self._timed(lambda: self._github.pull_request(number))

    def merge_pull(self, number: int, *, method: str, sha: str) -> str:
        return self._timed(lambda: self._github.merge_pull(number, method=method, sha=sha))

    def pulls_for_commit(self, sha: str) -> list[PullRequest]:
        return self._timed(lambda: self._github.pulls_for_commit(sha))

    def changed_files(self, number: int) -> list[str]:
        return self._timed(lambda: self._github.changed_files(number))
