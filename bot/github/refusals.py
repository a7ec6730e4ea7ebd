"""What the gate says when an event asks for nothing or is refused: typed values, worded by templates/refusals.md.j2."""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.report.markdown import render_part
from bot.report.media import Written

TEMPLATE = "refusals.md.j2"


class Said:
    """A sentence of the gate; its macro in TEMPLATE is the class name in snake case (ForkClosed: fork_closed)."""

    @property
    def text(self) -> Written:
        return render_part(TEMPLATE, re.sub(r"(?<!^)(?=[A-Z])", "_", type(self).__name__).lower(), self)


# -- what classification says when an event asks for nothing (bot.github.classify) --

@dataclass(frozen=True)
class ForkClosed(Said):
    number: int
    origin: str            # the fork, as PullRequest.head_origin() names it


@dataclass(frozen=True)
class ForkNotBuilt(Said):
    number: int
    origin: str


@dataclass(frozen=True)
class NotANewComment(Said):
    pass


@dataclass(frozen=True)
class DispatchRollbackOrDeploy(Said):
    pass


@dataclass(frozen=True)
class OwnComment(Said):
    pass


@dataclass(frozen=True)
class CommentIgnored(Said):
    reason: str            # bot.github.commands.Ignore.reason


@dataclass(frozen=True)
class QueueEntryNotRequested(Said):
    action: str


@dataclass(frozen=True)
class NotAQueueBranch(Said):
    head_ref: str


@dataclass(frozen=True)
class QueueNotDeployed(Said):
    base_branch: str


@dataclass(frozen=True)
class BadRollbackInput(Said):
    environment: str
    target: str            # the workflow_dispatch input `rollback_to`


@dataclass(frozen=True)
class RefDeleted(Said):
    ref: str


@dataclass(frozen=True)
class NothingForEvent(Said):
    event: str
    action: str


# -- what authorization refuses (bot.github.authorize) --

@dataclass(frozen=True)
class NeedsWrite(Said):
    command: str           # with its prefix: `/deploy`, or `rollback` for a dispatch
    permission: str        # the commenter's, as the API names it


@dataclass(frozen=True)
class ForkRollback(Said):
    number: int
    origin: str


@dataclass(frozen=True)
class ForkDeploy(Said):
    number: int
    origin: str


@dataclass(frozen=True)
class ForkQueueEntry(Said):
    number: int
    origin: str


@dataclass(frozen=True)
class RollbackByApproverOnly(Said):
    command: str           # `/rollback` with its prefix


@dataclass(frozen=True)
class DispatchByApproverOnly(Said):
    user: str              # who dispatched the workflow
    action: str = "rollback"   # or "deploy": a deploy that undoes prod's drift


@dataclass(frozen=True)
class OptionsByApproverOnly(Said):
    options: tuple[str, ...]     # the option names given, in the comment's order, each once


@dataclass(frozen=True)
class ApprovalMissing(Said):
    summary: str           # ApprovalStatus.summary


@dataclass(frozen=True)
class QueueEntryStale(Said):
    number: int
    merged: bool


@dataclass(frozen=True)
class QueueBaseMismatch(Said):
    number: int
    pr_base: str
    queue_base: str


@dataclass(frozen=True)
class PullRequestNotOpen(Said):
    number: int
    merged: bool
    prefix: str


@dataclass(frozen=True)
class DraftPullRequest(Said):
    number: int


@dataclass(frozen=True)
class MergeabilityUnknown(Said):
    number: int
    prefix: str


@dataclass(frozen=True)
class MergeConflicts(Said):
    number: int
    base: str


@dataclass(frozen=True)
class BlockedByProtection(Said):
    number: int


@dataclass(frozen=True)
class PreviewHeadMoved(Said):
    number: int
    recorded: str          # the head the prod plan preview was built for
    head: str
    prefix: str


@dataclass(frozen=True)
class NoPreviewOfHead(Said):
    number: int
    head: str
    gateway: str | None    # the gateway whose comment was looked for (None: the default)
    prefix: str


@dataclass(frozen=True)
class BaseContainmentUnknown(Said):
    number: int
    base: str


@dataclass(frozen=True)
class BehindBase(Said):
    number: int
    behind: int
    base: str


@dataclass(frozen=True)
class CheckoutMismatch(Said):
    expected: str          # the commit the event names
    seen: str | None       # the checkout's head; None: not a git checkout
    what: str              # what `expected` is, e.g. "the pushed commit (GITHUB_SHA)"
    action: str = "deploy"
    from_authorize_job: bool = False   # the second job of a `/deploy`: `expected` is its first job's output


@dataclass(frozen=True)
class OffDefaultBranch(Said):
    sha: str
    default_branch: str
    unknown: bool          # whether git could not tell
    action: str = "deploy"
    what: str = "the tagged commit"
