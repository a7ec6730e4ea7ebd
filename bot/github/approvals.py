"""Required-approver logic: latest review per user, on the head commit, never the author's (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from bot.github.event import Review

# A COMMENTED review leaves a user's earlier verdict standing, as on GitHub.
_VERDICTS = frozenset({"APPROVED", "CHANGES_REQUESTED", "DISMISSED"})


@dataclass(frozen=True)
class ApprovalStatus:
    approved: bool
    required: bool                         # False when no required approvers are configured
    approvers: tuple[str, ...] = ()        # required approvers whose approval counts
    stale: tuple[str, ...] = ()            # approved an older commit
    revoked: tuple[str, ...] = ()          # latest verdict is CHANGES_REQUESTED or DISMISSED
    min_approvals: int = 1
    unavailable: str = ""                  # why the approvers could not be read from a trusted source

    @property
    def summary(self) -> str:
        if self.unavailable:
            return (f"The required approvers could not be read from a trusted source ({self.unavailable}), so "
                    "no approval can count; set the action's `config` input or keep config.yaml on the "
                    "default branch.")
        if not self.required:
            return "No required approvers are configured."
        have = f"{len(self.approvers)} of {self.min_approvals} required approval(s)"
        parts = [f"{have}" + (f" from {', '.join('@' + a for a in self.approvers)}" if self.approvers else "")]
        if self.stale:
            parts.append("approval on an older commit (stale): " + ", ".join("@" + s for s in self.stale))
        if self.revoked:
            parts.append("changes requested or approval dismissed: " + ", ".join("@" + r for r in self.revoked))
        return "; ".join(parts) + "."


def latest_verdicts(reviews: Iterable[Review]) -> dict[str, Review]:
    """Each user's latest APPROVED / CHANGES_REQUESTED / DISMISSED review (input in submission order)."""
    latest: dict[str, Review] = {}
    ordered = sorted(enumerate(reviews), key=lambda pair: (pair[1].submitted_at or "", pair[0]))
    for _, review in ordered:
        if review.state in _VERDICTS:
            latest[review.user.lower()] = review
    return latest


def evaluate(*, reviews: Iterable[Review], head_sha: str, author: str,
             required_users: Iterable[str], min_approvals: int = 1,
             in_team: Callable[[str], bool] | None = None) -> ApprovalStatus:
    """Decide whether a PR has its required approvals.

    `in_team(login)` tells whether a reviewer belongs to one of the required teams (may call the API).
    """
    required = {u.lower() for u in required_users}
    if not required and in_team is None:
        return ApprovalStatus(approved=True, required=False, min_approvals=min_approvals)
    approvers, stale, revoked = [], [], []
    for login, review in latest_verdicts(reviews).items():
        if login == author.lower():
            continue
        if login not in required and not (in_team is not None and in_team(review.user)):
            continue
        if review.state != "APPROVED":
            revoked.append(review.user)
        elif review.commit_id != head_sha:
            stale.append(review.user)
        else:
            approvers.append(review.user)
    return ApprovalStatus(approved=len(approvers) >= min_approvals, required=True,
                          approvers=tuple(sorted(approvers)), stale=tuple(sorted(stale)),
                          revoked=tuple(sorted(revoked)), min_approvals=min_approvals)
