"""Typed results of a deploy, a cleanup or a rollback (and check titles, notes, refusals): templates/outcomes.md.j2 renders them."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum

from bot.diff.gates import Finding
from bot.report.comment_state import queue_marker
from bot.report.markdown import render_part
from bot.report.media import WrittenMarkdown

TEMPLATE = "outcomes.md.j2"


class DeployKind(str, Enum):
    REFUSED_STORAGE = "refused_storage"           # the gateway's state or catalog would vanish with the runner
    REFUSED_NO_PULL_REQUEST = "refused_no_pull_request"   # approvals are required, and no PR has this commit
    REFUSED_NO_APPROVAL = "refused_no_approval"
    PLAN_FAILED = "plan_failed"
    UP_TO_DATE = "up_to_date"
    REFUSED_LARGE_BACKFILL = "refused_large_backfill"
    REFUSED_PLAN_CHANGED = "refused_plan_changed"   # require_approved_plan, and the plan is not the approved one
    REFUSED_DRIFT = "refused_drift"   # the plan would undo prod's drift, and no `/deploy --allow-drift` allowed it
    APPLY_FAILED = "apply_failed"
    DEPLOYED = "deployed"


@dataclass(frozen=True)
class BackfillLimit:
    what: str            # batches, intervals or executor_hours (estimated from recorded Spark task time)
    total: int | float
    limit: int | float


@dataclass(frozen=True)
class ModelBackfill:
    name: str
    intervals: int
    batches: int
    executor_hours: float | None = None   # estimated from recorded task time; None: none recorded
    basis: str = ""                       # what the estimate comes from
    executor_limited: bool = False        # cicd_bot.max_backfill_executor_hours is set: say when none is recorded


@dataclass(frozen=True)
class LargeBackfill:
    """A plan over cicd_bot.max_backfill_batches, max_backfill_intervals or max_backfill_executor_hours, and what
    each model computes."""

    over: tuple[BackfillLimit, ...]
    models: tuple[ModelBackfill, ...]


@dataclass(frozen=True)
class PlanDrift:
    """The plan about to deploy differs from the approved prod plan preview."""

    approved: str                  # the preview's digest
    digest: str                    # this plan's
    models: tuple[str, ...] = ()   # models whose version differs; () when only intervals do
    unrecorded: int = 0            # changes the preview's record left out (it names a few hundred at most)
    queue_sha: str = ""            # compared with the plan the merge queue checked on this commit instead


@dataclass(frozen=True)
class RunAfterDeploy:
    """cicd_bot.run_on_deploy: what the run right after the deploy did."""

    error: str = ""
    nothing_due: bool = False
    batches: int = 0
    reused: int = 0


@dataclass(frozen=True)
class MergeResult:
    """The merge of the PR after a /deploy (cicd_bot.merge_method)."""

    method: str
    sha: str = ""
    error: str = ""


@dataclass(frozen=True)
class DeployOutcome:
    kind: DeployKind
    environment: str
    reason: str = ""                    # why it was refused or failed (error text, approval summary)
    sha: str = ""                       # the commit no pull request was found for
    large: LargeBackfill | None = None
    drift: PlanDrift | None = None
    plan_id: str = ""
    changes: int = 0
    batches: int = 0                    # batches computed
    models: int = 0                     # models they belong to
    took: str = ""                      # the apply's wall time, "4 s" (bot.plan.estimate.format_seconds)
    deployed_sha: str = ""
    digest: str = ""
    destructive: tuple[str, ...] = ()   # models allowed destructive changes
    allowed_by: str = ""                # who allowed them
    ran: RunAfterDeploy | None = None
    merge: MergeResult | None = None
    undone: tuple[str, ...] = ()        # drifted models the plan would undo (REFUSED_DRIFT)

    @property
    def conclusion(self) -> str:
        return "success" if self.kind in (DeployKind.DEPLOYED, DeployKind.UP_TO_DATE) else "failure"

    @property
    def ok(self) -> bool:
        """Deployed (or nothing to deploy), and the run and merge after it did not fail."""
        return (self.conclusion == "success" and not (self.ran and self.ran.error)
                and not (self.merge and self.merge.error))

    @property
    def summary(self) -> str:
        return render_part(TEMPLATE, "deploy_summary", self)

    @property
    def details(self) -> tuple[str, ...]:
        text = render_part(TEMPLATE, "deploy_details", self)
        return (text,) if text else ()

    @property
    def report(self) -> str:
        """The summary and details, as the comment's deploy section and the job summary show them."""
        return WrittenMarkdown("\n\n".join((self.summary,) + self.details))

    @property
    def more(self) -> str:
        """What the details say beyond the summary (drift, destructive changes, the run after), for the comment's
        deployed section."""
        return WrittenMarkdown("\n\n".join(replace(self, merge=None).details))   # the status line says the merge

    @property
    def status(self) -> str:
        """The comment's status line after a deploy; "" derives it from the checks."""
        return render_part(TEMPLATE, "deploy_status", self) if self.kind is DeployKind.DEPLOYED else ""


class CleanupKind(str, Enum):
    REFUSED_STORAGE = "refused_storage"
    ALREADY_REMOVED = "already_removed"
    KEPT = "kept"                       # merged, and cicd_bot.invalidate_environment_after_deploy is false
    REMOVED = "removed"
    FAILED = "failed"


@dataclass(frozen=True)
class QueueOutcome:
    """What meshbot found on a merge queue entry: the queue's merge commit of pull request `number` on top
    of `base_sha` (the base branch and the entries ahead of it), planned against `environment`."""

    number: int
    sha: str                            # merge_group.head_sha: the commit checked, and deployed once merged
    base_branch: str
    environment: str
    base_sha: str = ""
    refusal: str = ""                   # why meshbot did not check the entry (the checks fail with it)
    error: str = ""                     # the combined plan could not be built
    failed: tuple[str, ...] = ()        # the checks that failed
    digest: str = ""                    # the combined plan's digest (recorded for the deploy)
    plan_id: str = ""
    changes: int = 0
    large: LargeBackfill | None = None  # the combined plan computes more than the backfill guard allows

    @property
    def ok(self) -> bool:
        return not (self.refusal or self.error or self.failed or self.large)

    @property
    def text(self) -> str:
        """The PR comment's merge queue section (with the record of a passed entry) and the job summary."""
        return render_part("queue.md.j2", "queue_report", self)

    @property
    def record(self) -> WrittenMarkdown:
        return queue_marker(self.sha, self.digest) if self.ok and self.digest else WrittenMarkdown("")

    @property
    def plan_title(self) -> str:
        """The Prod Plan Preview check's title on the queue's commit."""
        return render_part("queue.md.j2", "plan_title", self)

    @property
    def refused_title(self) -> str:
        """Each required check's title when meshbot did not check the entry."""
        return render_part("queue.md.j2", "refused_title", self)

    def approval_title(self, summary: str) -> str:
        """The Required Approval check's title on the queue's commit: the PR's own approvals."""
        return render_part("queue.md.j2", "approval_title", (self, summary))


@dataclass(frozen=True)
class CleanupOutcome:
    kind: CleanupKind
    environment: str
    merged: bool = False
    reason: str = ""

    @property
    def status(self) -> str:
        return render_part(TEMPLATE, "cleanup_status", self)


@dataclass(frozen=True)
class RollbackOutcome:
    environment: str
    error: str = ""
    from_plan_id: str = ""
    to_plan_id: str = ""
    plan_id: str = ""
    seconds: float = 0.0
    repointed: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return render_part(TEMPLATE, "rollback", self)


@dataclass(frozen=True)
class DeployWays:
    """How a PR can be deployed under the settings: the comment's "How to deploy"."""

    merge_environment: str
    merge_deploys: bool = False         # merging the PR deploys to merge_environment
    tag_environment: str = ""           # "" when a release tag does not deploy
    command: str = ""                   # the `/deploy` command (it deploys to merge_environment), "" when off
    merge_method: str = ""              # the merge after a /deploy
    gated: bool = False                 # required approvals first

    @property
    def text(self) -> str:
        return render_part(TEMPLATE, "deploy_ways", self)


def gate_finding(finding: Finding) -> str:
    """One line of the Data Diff check: what a gate (or the Spark plan check) found on a model."""
    return render_part(TEMPLATE, "gate_finding", finding)


class RefusalKind(str, Enum):
    EPHEMERAL_STORAGE = "ephemeral_storage"     # the gateway's state or catalog would vanish with the runner
    UNTRUSTED = "untrusted"                     # the deploy gates have no trusted source
    NOT_PROD_BRANCH = "not_prod_branch"         # a scheduled or dispatched run off a prod branch
    NO_CHECKOUT_HEAD = "no_checkout_head"       # a rollback outside a git checkout
    NO_DEFAULT_HEAD = "no_default_head"         # a rollback whose default branch's head could not be read


@dataclass(frozen=True)
class Refusal:
    """Why a runner refused to work at all (bot.github.authorize refuses the rest, before the project is read)."""

    kind: RefusalKind
    detail: str = ""             # the gateway, what is missing (UNTRUSTED) or the event's ref (NOT_PROD_BRANCH)
    default_branch: str = ""
    storage: tuple[str, ...] = ()   # what the gateway keeps on the runner (EPHEMERAL_STORAGE)

    @property
    def text(self) -> str:
        return render_part(TEMPLATE, "refusal", self)


class NoteKind(str, Enum):
    SAYS = "says"                                   # `text`, as it is
    NOT_SERVED = "not_served"                       # the command does not serve the step the event asks for
    NO_PULL_REQUEST = "no_pull_request"
    CLEANUP_WITHOUT_PULL_REQUEST = "cleanup_without_pull_request"
    FORK_WITHOUT_ENVIRONMENT = "fork_without_environment"   # a fork's PR closed: it never had an environment
    NOTHING_TO_AUTHORIZE = "nothing_to_authorize"
    AUTHORIZED = "authorized"
    NO_PROJECT_FILE = "no_project_file"             # the comment's status: the PR changes no project file
    ENVIRONMENT_NOT_SYNCED = "environment_not_synced"   # the comment's notice
    NOT_COMPARED = "not_compared"                   # a data diff's or a Spark plan comparison's note
    NOTIFICATIONS_SKIPPED = "notifications_skipped"  # local mode: `number` targets (`text`) not told


@dataclass(frozen=True)
class JobNote:
    """A line a runner says: in the job summary (nothing to do, refused, authorized) or the comment (notes)."""

    kind: NoteKind
    text: str = ""
    command: str = ""
    event: str = ""
    step: str = ""               # the step the event asks for (NOT_SERVED without a text)
    number: int = 0
    origin: str = ""             # the fork of a PR
    merged: bool = False
    user: str = ""
    sha: str = ""

    @property
    def line(self) -> str:
        return render_part(TEMPLATE, "job_note", self)


@dataclass(frozen=True)
class CheckTitle:
    """A check run's one-line summary: its title on GitHub and its detail on the comment's status line."""

    check: str                  # CheckName
    failed: bool = False        # the step itself failed: no environment synced, no plan built, no data diff
    environment: str = ""       # PR Environment Synced
    tests: str = ""             # Unit Tests: passed, failed or error (TestsView.status)
    total: int = 0
    failures: int = 0
    has_changes: bool = False   # Prod Plan Preview
    changes: int = 0
    digest: str = ""
    compared: int = 0           # Data Diff: models compared
    gate_failed: int = 0        # models a Data Diff gate failed on
    plan_failed: int = 0        # models the Spark plan check failed on
    warnings: int = 0

    @property
    def text(self) -> str:
        return render_part(TEMPLATE, "check_title", self)

    @property
    def changes_title(self) -> str:
        """The heading of the changes a PR environment's check lists."""
        return render_part(TEMPLATE, "changes_title", self)
