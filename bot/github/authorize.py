"""Who may do what an event asks: write permission, a pull request of this repository that can merge, required
approvers and approvals, the checkout being exactly the commit the event names. Reads the GitHub API only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from bot.github.approvals import ApprovalStatus, evaluate
from bot.github.classify import DeployOptions
from bot.github.commands import command_prefix
from bot.github.event import Event, PullRequest
from bot.github.ports import WRITE_PERMISSIONS, GithubPort
from bot.github.refusals import (ApprovalMissing, BaseContainmentUnknown, BehindBase, BlockedByProtection,
                                 CheckoutMismatch, DispatchByApproverOnly, DraftPullRequest, ForkDeploy,
                                 ForkQueueEntry, ForkRollback, MergeabilityUnknown, MergeConflicts, NeedsWrite,
                                 NoPreviewOfHead, OffDefaultBranch, OptionsByApproverOnly, PreviewHeadMoved, PullRequestNotOpen,
                                 QueueBaseMismatch, QueueEntryStale, RollbackByApproverOnly, Said)
from bot.github.settings import BotSettings
from bot.report.comment_state import comment_marker, recorded_checks, recorded_plan_digest


def authorize_rollback(event: Event, settings: BotSettings, github: GithubPort) -> Verdict:
    """May the `/rollback` of this comment roll back now? Write permission, a pull request of this
    repository (not a fork), and a required approver as commenter. Reads the GitHub API only."""
    comment = event.comment
    prefix = command_prefix(settings.command_namespace)
    refused = _writer_refusal(github, comment.user, f"{prefix}rollback")
    if refused is not None:
        return refused
    pr = github.pull_request(comment.issue_number)
    if pr.is_from_fork(event.repo):
        return Verdict(pr, ForkRollback(pr.number, pr.head_origin()))
    if not _is_required_approver(github, settings, event, comment.user):
        return Verdict(pr, RollbackByApproverOnly(f"{prefix}rollback"))
    return Verdict(pr, None)


def authorize_dispatch(event: Event, settings: BotSettings, github: GithubPort, *, action: str) -> str | None:
    """May the user who dispatched the deploy workflow with `rollback: true` (action "rollback") or with
    `allow_drift: true` (action "deploy") do it? The same people as `/rollback` and `/deploy --allow-drift`:
    write permission and a required approver. The refusal, or None."""
    user = event.sender or ""
    refused = _writer_refusal(github, user, action)
    if refused is not None:
        return refused.refusal
    if not _is_required_approver(github, settings, event, user):
        return DispatchByApproverOnly(user, action).text
    return None


@dataclass(frozen=True)
class Verdict:
    """Whether a deploy may go ahead; `refused` is the reason when not (a reply to a command)."""

    pull_request: PullRequest | None
    refused: Said | None = None
    approval: ApprovalStatus | None = None

    @property
    def refusal(self) -> str | None:
        """The refusal's sentence (Markdown), or None when the deploy may go ahead."""
        return None if self.refused is None else self.refused.text


def authorize_command(event: Event, settings: BotSettings, github: GithubPort, *,
                      checkout_head: str | None, check_head: bool,
                      commits_behind: Callable[[str, str], int | None],
                      options: DeployOptions = DeployOptions()) -> Verdict:
    """May the `/deploy` of this comment deploy now? The commenter, the pull request (origin, state,
    mergeability, the head the preview was built for), its approvals and, with `check_head`, the
    checkout (it must be exactly the PR's head). Reads the GitHub API only."""
    comment = event.comment
    prefix = command_prefix(settings.command_namespace)
    refused = _writer_refusal(github, comment.user, f"{prefix}deploy")
    if refused is not None:
        return refused
    pr = github.pull_request(comment.issue_number)
    refused = _pull_request_refusal(event, pr, github, settings, prefix) or _behind_refusal(pr, commits_behind)
    if refused is not None:
        return Verdict(pr, refused)
    if check_head and checkout_head != pr.head_sha:
        return Verdict(pr, CheckoutMismatch(pr.head_sha, checkout_head, f"the head of #{pr.number}",
                                            from_authorize_job=True))
    if options.names and not _is_required_approver(github, settings, event, comment.user):
        return Verdict(pr, OptionsByApproverOnly(options.names))
    approval = approval_status(github, settings, event.repo.owner, pr)
    if not approval.approved:
        return Verdict(pr, ApprovalMissing(approval.summary), approval)
    return Verdict(pr, None, approval)


def authorize_merge_group(event: Event, settings: BotSettings, github: GithubPort, *,
                          checkout_head: str | None) -> Verdict:
    """May meshbot check this merge queue entry? GitHub sends `merge_group` only for a pull request that met
    the branch's rules (its approvals among them) when it was queued; meshbot still asks the API for the PR
    the queue branch names: from this repository (never a fork's code), open, into the queue's base; the
    checkout must be exactly the queue's merge commit. Approvals are the PR's, on the PR's head commit."""
    group = event.merge_group
    pr = github.pull_request(group.pr_numbers[0])
    if pr.is_from_fork(event.repo):
        return Verdict(pr, ForkQueueEntry(pr.number, pr.head_origin()))
    if pr.state != "open" or pr.merged:
        return Verdict(pr, QueueEntryStale(pr.number, pr.merged))
    if pr.base_ref != group.base_branch:
        return Verdict(pr, QueueBaseMismatch(pr.number, pr.base_ref, group.base_branch))
    if checkout_head != group.head_sha:
        return Verdict(pr, CheckoutMismatch(group.head_sha, checkout_head,
                                            "the merge queue's commit (merge_group.head_sha)",
                                            action="merge queue check"))
    return Verdict(pr, None)


def _writer_refusal(github: GithubPort, login: str, command: str) -> "Verdict | None":
    """A command that touches prod needs write permission on the repository (asked of the API)."""
    permission = github.permission(login)
    if permission in WRITE_PERMISSIONS:
        return None
    return Verdict(None, NeedsWrite(command, permission))


def _pull_request_refusal(event: Event, pr: PullRequest, github: GithubPort, settings: BotSettings,
                          prefix: str) -> Said | None:
    if pr.state != "open" or pr.merged:
        return PullRequestNotOpen(pr.number, pr.merged, prefix)
    if pr.is_from_fork(event.repo):
        return ForkDeploy(pr.number, pr.head_origin())
    if pr.mergeable_state == "draft" or pr.draft:
        return DraftPullRequest(pr.number)
    if pr.mergeable is None:
        return MergeabilityUnknown(pr.number, prefix)
    if pr.mergeable is False or pr.mergeable_state == "dirty":
        return MergeConflicts(pr.number, pr.base_ref)
    if pr.mergeable_state == "blocked" and settings.check_if_blocked_on_deploy_to_prod:
        return BlockedByProtection(pr.number)
    found = github.find_comment(pr.number, marker=comment_marker(settings.gateway))
    body = found[1] if found else None
    recorded, _ = recorded_checks(body)
    if recorded and recorded != pr.head_sha:
        return PreviewHeadMoved(pr.number, recorded, pr.head_sha, prefix)
    if recorded is None or recorded_plan_digest(body) is None:
        return NoPreviewOfHead(pr.number, pr.head_sha, settings.gateway, prefix)
    return None


def _behind_refusal(pr: PullRequest, commits_behind: Callable[[str, str], int | None]) -> Said | None:
    """`/deploy` deploys the PR's head: it must contain its base, or prod would lose what was merged since."""
    behind = commits_behind(pr.base_ref, pr.head_sha)
    if behind == 0:
        return None
    if behind is None:
        return BaseContainmentUnknown(pr.number, pr.base_ref)
    return BehindBase(pr.number, behind, pr.base_ref)


def _is_required_approver(github: GithubPort, settings: BotSettings, event: Event, login: str) -> bool:
    if login.lower() in {u.lower() for u in settings.required_approvers}:
        return True
    for team in settings.required_teams:
        org, _, slug = team.rpartition("/")
        if github.is_team_member(org or event.repo.owner, slug, login):
            return True
    return False


def approval_status(github: GithubPort, settings: BotSettings, owner: str, pr: PullRequest) -> ApprovalStatus:
    """The required-approval verdict of `pr` under the trusted settings, from its reviews and team memberships."""
    if not settings.has_required_approvers:
        return ApprovalStatus(approved=True, required=False)
    reviews = github.list_reviews(pr.number)

    def in_team(login: str) -> bool:
        for team in settings.required_teams:
            org, _, slug = team.rpartition("/")
            if github.is_team_member(org or owner, slug, login):
                return True
        return False

    return evaluate(reviews=reviews, head_sha=pr.head_sha, author=pr.author,
                    required_users=settings.required_approvers, min_approvals=settings.min_approvals,
                    in_team=in_team if settings.required_teams else None)


def checkout_refusal(expected: str, checkout_head: str | None, what: str) -> str | None:
    """Why the job must not deploy its checkout: it is not exactly `expected`, the commit the event names.

    >>> checkout_refusal("abc1234def", "abc1234def", "the pushed commit") is None
    True
    >>> checkout_refusal("abc1234def", None, "the pushed commit")[:60]
    'deploy refused: the checked-out commit cannot be read (not a'
    """
    if checkout_head == expected:
        return None
    return CheckoutMismatch(expected, checkout_head, what).text


def release_refusal(sha: str, default_branch: str, on_default_branch: Callable[[str], bool | None], *,
                    action: str = "deploy", what: str = "the tagged commit") -> str | None:
    """Why `action` must not run on commit `sha` (`what`): it must be a commit of the default branch."""
    answer = on_default_branch(sha)
    if answer is True:
        return None
    return OffDefaultBranch(sha, default_branch, unknown=answer is None, action=action, what=what).text
