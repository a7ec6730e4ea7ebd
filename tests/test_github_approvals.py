"""Required approvals from real review payloads: latest per user, head commit only, never the author."""

from __future__ import annotations

from dataclasses import replace

from bot.github.approvals import evaluate
from bot.github.event import Review, parse_event
from github_support import payload

HEAD = "b7a1f9c27caa4e03c14a88feb56e2d4f7500aa63"


def _approved() -> Review:
    event = parse_event("pull_request_review",
                        payload("_supplementary/go-playground__webhooks/testdata/github/pull-request-review.json"))
    return replace(event.review, commit_id=HEAD)


def test_required_approver_on_head_commit_approves():
    status = evaluate(reviews=[_approved()], head_sha=HEAD, author="skalnik", required_users=["baxterthehacker"])
    assert status.approved and status.approvers == ("baxterthehacker",)


def test_stale_approval_after_a_new_push_does_not_count():
    status = evaluate(reviews=[_approved()], head_sha="f" * 40, author="skalnik", required_users=["baxterthehacker"])
    assert not status.approved and status.stale == ("baxterthehacker",)
    assert "stale" in status.summary


def test_later_changes_requested_or_dismissal_revokes_but_comment_does_not():
    approved = _approved()
    later = replace(approved, state="CHANGES_REQUESTED", submitted_at="2099-01-01T00:00:00Z")
    assert not evaluate(reviews=[approved, later], head_sha=HEAD, author="x", required_users=["baxterthehacker"]).approved
    dismissed = parse_event("pull_request_review", payload("pull_request_review/dismissed.payload.json")).review
    assert dismissed.state == "DISMISSED"
    comment = replace(approved, state="COMMENTED", submitted_at="2099-01-01T00:00:00Z")
    assert evaluate(reviews=[approved, comment], head_sha=HEAD, author="x",
                    required_users=["baxterthehacker"]).approved


def test_author_and_non_required_reviewers_do_not_count_and_min_approvals():
    approved = _approved()
    assert not evaluate(reviews=[approved], head_sha=HEAD, author="baxterthehacker",
                        required_users=["baxterthehacker"]).approved
    assert not evaluate(reviews=[approved], head_sha=HEAD, author="x", required_users=["someone"]).approved
    other = replace(approved, user="ann")
    assert not evaluate(reviews=[approved], head_sha=HEAD, author="x", required_users=["baxterthehacker", "ann"],
                        min_approvals=2).approved
    assert evaluate(reviews=[approved, other], head_sha=HEAD, author="x", required_users=["baxterthehacker", "ann"],
                    min_approvals=2).approved


def test_team_membership_counts():
    status = evaluate(reviews=[_approved()], head_sha=HEAD, author="x", required_users=[],
                      in_team=lambda login: login == "baxterthehacker")
    assert status.approved
    assert not evaluate(reviews=[], head_sha=HEAD, author="x", required_users=[]).required
