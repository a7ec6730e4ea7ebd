"""BotRun (what every runner gets) and the helpers runners share: checks, comment, environment name."""

from __future__ import annotations

import hashlib
import posixpath
import re
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath
from typing import Callable

from bot.errors import BotError
from bot.github.ports import CheckRun, EngineContext, GithubPort
from bot.github.check_names import CheckName
from bot.github.event import Event, PullRequest
from bot.github.seal import SealedContext
from bot.github.local import StepOutputs
from bot.github.outcomes import Refusal, RefusalKind
from bot.github.timing import PhaseTimings
from bot.github.settings import BotSettings, pr_environment_name
from bot.github.trusted import TrustedConfig
from bot.github.views import CheckSummaryView, CommentView
from bot.github.comment_fitting import COMMENT_LIMIT, SAFETY, render_check_summary, render_comment, truncate_markdown
from bot.plan.definition import Plan
from bot.plan.drift import Drift
from bot.redact import redact
from bot.report.comment_state import CheckState, comment_marker, format_models, outside_markers, recorded_checks
from bot.report.markdown import render, render_part

PROJECT_SUFFIXES = frozenset({".sql", ".py", ".yaml", ".yml", ".csv", ".json"})


@dataclass
class BotRun:
    """The dependencies of one bot invocation, built by bot.github.action."""

    event: Event
    settings: BotSettings
    github: GithubPort
    context: EngineContext
    outputs: StepOutputs
    project_subdir: str = ""          # the project's folder relative to the repository root
    # a multi-repo project's other folders (relative to the repository root), after project_subdir's
    other_subdirs: tuple[str, ...] = ()
    sha: str | None = None            # GITHUB_SHA
    on_actions_runner: bool = False   # GITHUB_ACTIONS=true: this machine is gone after the job
    notify: bool = True               # False: local mode without --notify, which posts to no notification target
    run_url: str | None = None        # $GITHUB_SERVER_URL/$GITHUB_REPOSITORY/actions/runs/$GITHUB_RUN_ID
    checks: list[CheckState] = field(default_factory=list)   # the check runs this run completed
    timings: PhaseTimings | None = None   # this run's phase times (None in unit tests)
    seal: SealedContext | None = None     # the project behind `context`, sealed until the event is authorized
    trusted: TrustedConfig = TrustedConfig(cicd_bot={}, sources=("the settings given",))
    checkout_head: str | None = None      # the commit checked out (git HEAD), None outside a git checkout
    on_default_branch: Callable[[str], bool | None] = lambda sha: None   # is this commit on the default branch?
    commits_behind: Callable[[str, str], int | None] = lambda base, head: None   # base branch's commits head lacks
    default_branch_head: Callable[[], str | None] = lambda: None      # the default branch's newest commit
    # each model's version at the PR's base commit (None: the checkout's history cannot tell)
    base_versions: Callable[[PullRequest], dict[str, str] | None] = lambda pr: None

    def open_project(self, *, read_cache: bool = True, fresh_files: frozenset[str] | None = None) -> None:
        """The event is authorized: the project's files may be read from now on (with `read_cache`
        False, not .meshbot/cache: whoever could write it, a deploy parses what it deploys; with
        `fresh_files`, a pull request's own files, none of theirs: see pull_request_cache)."""
        if self.seal is not None:
            self.seal.unseal(read_cache=read_cache, fresh_files=fresh_files)

    @property
    def pull_request(self) -> PullRequest | None:
        return self.event.pull_request

    @property
    def marker(self) -> str:
        return comment_marker(self.settings.gateway)

    def pr_environment(self, number: int) -> str:
        return pr_environment_name(self.settings.pr_environment_name or self.event.repo.name, number)


def output_key(check_name: str) -> str:
    """`PR Environment Synced` → `pr_environment_synced`.

    >>> output_key("Prod Plan Preview")
    'prod_plan_preview'
    """
    return re.sub(r"[^a-z0-9]+", "_", check_name.lower()).strip("_")


def redact_markdown(text: str) -> str:
    """`redact(text)` that keeps meshbot's hidden markers whole: a secret that happens to read `meshbot`
    (a state user, say) must not stop the bot from finding its comment and sections again."""
    return outside_markers(text, redact)


def start_check(run: BotRun, name: str, sha: str) -> int:
    return run.github.create_check(CheckRun(name=run.settings.check_name(name), head_sha=sha,
                                            status="in_progress"))


def finish_check(run: BotRun, check_id: int, *, name: str, sha: str, conclusion: str,
                 view: CheckSummaryView) -> None:
    """Complete a check with a rendered summary and record its conclusion as a step output."""
    text = redact(render_check_summary(view))
    run.github.update_check(check_id, CheckRun(
        name=run.settings.check_name(name), head_sha=sha, status="completed", conclusion=conclusion,
        title=redact(view.summary)[:200], summary=text))
    run.outputs.set(output_key(name), conclusion)
    run.checks[:] = [c for c in run.checks if c.name != name]
    run.checks.append(CheckState(name=name, conclusion=conclusion, url=run.github.check_url(check_id),
                                 detail=view.summary))


def post_comment(run: BotRun, number: int, view: CommentView) -> None:
    """Render with the sections other commands wrote before, redact, post once; full text to the summary.

    The checks shown are this run's plus those an earlier run recorded for the same head commit, so the
    status line always reflects every check (a review event re-runs only the approval check)."""
    existing = run.github.find_comment(number, marker=run.marker)
    old = existing[1] if existing else None
    view = replace(view, checks=_merged_checks(old, view.head_sha, run.checks), run_url=view.run_url or run.run_url)
    body, full = render_comment(view.after(old))
    body = redact_markdown(body)
    if len(body) > COMMENT_LIMIT:
        body = truncate_markdown(body, COMMENT_LIMIT - SAFETY)
    if existing is None:
        run.github.create_comment(number, body)
    else:
        run.github.edit_comment(existing[0], body)
    run.outputs.summary(full)


def ephemeral_storage_refusal(run: BotRun) -> str | None:
    """On a GitHub Actions runner, the error for a gateway whose state or catalog would vanish with it."""
    if not run.on_actions_runner or run.settings.allow_ephemeral_state:
        return None
    parts = run.context.machine_local_storage()
    if not parts:
        return None
    gateway = run.settings.gateway or run.context.config.default_gateway
    return Refusal(RefusalKind.EPHEMERAL_STORAGE, gateway, storage=parts).text


def require_lasting_storage(run: BotRun) -> None:
    """Raise the ephemeral_storage_refusal as a BotError, for steps that report BotErrors in their check."""
    refusal = ephemeral_storage_refusal(run)
    if refusal:
        raise BotError(refusal)


def _merged_checks(old_body: str | None, sha: str | None, new: list[CheckState]) -> tuple[CheckState, ...]:
    old_sha, old = recorded_checks(old_body)
    by_name = {c.name: c for c in old} if old_sha == sha and sha else {}
    by_name.update({c.name: c for c in new})
    order = {name: i for i, name in enumerate(CheckName.ALL)}
    return tuple(sorted(by_name.values(), key=lambda c: order.get(c.name, len(order))))


def find_drift(run: BotRun, environment: str, head_versions: dict[str, str] | None) -> Drift | None:
    """The drift of `environment` (bot.plan.drift), None when it has none or the state cannot tell."""
    try:
        found = run.context.drift(environment, head_versions=head_versions)
    except BotError:
        return None
    return found if found.drifted else None


def drift_report(drift: Drift) -> str:
    """The drift as the PR comment's `drift` section and a run's job summary show it."""
    return render_part("drift.md.j2", "drift_report", drift)


def reply(run: BotRun, number: int, user: str | None, text: str) -> None:
    """A short answer to a comment command, posted on the PR (and in the job summary)."""
    body = redact(render("reply.md.j2", {"user": user, "text": text}))
    run.github.create_comment(number, body)
    run.outputs.summary(body)


def error_text(error: BaseException) -> str:
    return str(error) if isinstance(error, BotError) else f"{type(error).__name__}: {error}"


def touches_project(files: list[str], subdir: str) -> bool:
    """True when a changed file is a project file; an unknown file list (empty) counts as changed.

    >>> touches_project(["README.md"], ""), touches_project(["models/a.sql"], "")
    (False, True)
    >>> touches_project(["other/models/a.sql"], "proj"), touches_project([".github/workflows/pr.yml"], "")
    (False, False)
    """
    if not files:
        return True
    root = PurePosixPath(subdir.strip("/")) if subdir.strip("/") else None
    for name in files:
        path = PurePosixPath(name)
        if root is not None and root not in path.parents:
            continue
        if any(part.startswith(".") for part in path.parts[:-1]):
            continue       # .github/workflows/*.yml and other tool folders are not project files
        if path.suffix.lower() in PROJECT_SUFFIXES:
            return True
    return False


LISTED_FILES = 3000   # GitHub lists at most this many files of a pull request


def pull_request_cache(files: list[str], subdir: str, others: tuple[str, ...] = ()) -> tuple[bool, frozenset[str]]:
    """(read_cache, fresh_files) for a pull request's sync: its changed project files (as
    touches_project tells them) relative to the project (`subdir`; files of a multi-repo project's
    `others` folders as `../` paths from it), which it takes from no cache (entries there under their
    keys are anyone's who could save one in the PR's cache scope, its own code included); nothing from
    the cache when the list is unknown (empty) or may be cut short.

    >>> pull_request_cache(["proj/models/a.sql", "proj/README.md", "other/models/b.sql"], "proj")
    (True, frozenset({'models/a.sql'}))
    >>> sorted(pull_request_cache(["r1/models/a.sql", "r2/models/c.sql"], "r1", ("r2",))[1])
    ['../r2/models/c.sql', 'models/a.sql']
    >>> pull_request_cache([], "")
    (False, frozenset())
    """
    if not files or len(files) >= LISTED_FILES:
        return False, frozenset()
    root = subdir.strip("/") or "."
    own = frozenset(posixpath.relpath(name, root) for name in files
                    if any(touches_project([name], folder) for folder in (subdir, *others)))
    return True, own


RECORDED_CHANGES = 300   # the changes a plan digest's record names (~10,000 characters; a comment holds 65,536)


def plan_digest(plan: Plan) -> tuple[str, str]:
    """(digest, record) of what a prod plan would deploy. The digest covers every snapshot and interval;
    the record names the models the plan changes (name@identifier, a removed one name@-), at most
    RECORDED_CHANGES of them, so that a deploy refused for drift can say which models moved."""
    every = format_models({name: snap.identifier for name, snap in plan.snapshots.items()})
    intervals = ";".join(f"{b.snapshot_id.name}:{b.kind}:{list(b.intervals)}"
                         for b in sorted(plan.backfills, key=lambda b: b.snapshot_id))
    digest = hashlib.sha256(f"{every}|{intervals}".encode()).hexdigest()[:16]
    return digest, format_models(planned_identifiers(plan, changed_only=True), limit=RECORDED_CHANGES)


def planned_identifiers(plan: Plan, *, changed_only: bool = False) -> dict[str, str]:
    """Model name -> the snapshot identifier `plan` deploys (`-` for a model it removes): every model's, or
    only those of its changes."""
    if changed_only:
        return {c.name: c.snapshot.identifier if c.snapshot is not None else "-" for c in plan.changes}
    found = {name: snap.identifier for name, snap in plan.snapshots.items()}   # a listed one's: no row read
    found.update({c.name: "-" for c in plan.changes if c.snapshot is None})
    return found
