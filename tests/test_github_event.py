"""Event parsing on the real webhook payloads (bot.github.event)."""

from __future__ import annotations

import json

import pytest

from bot.errors import GithubError
from bot.github.event import load_event, parse_event
from github_support import WEBHOOKS, payload

SUPP = "_supplementary/"


@pytest.mark.parametrize("path", sorted(str(p.relative_to(WEBHOOKS)) for p in WEBHOOKS.glob("pull_request/*.json")))
def test_every_pull_request_payload_parses(path):
    raw = payload(path)
    event = parse_event("pull_request", raw)
    assert event.pull_request.number == raw["pull_request"]["number"]
    assert event.pull_request.head_sha == raw["pull_request"]["head"]["sha"]
    assert event.is_pr_sync == (raw["action"] in ("opened", "synchronize", "reopened", "ready_for_review"))


def test_opened_pull_request_fields():
    event = parse_event("pull_request", payload("pull_request/opened.payload.json"))
    pr = event.pull_request
    assert (event.repo.full_name, pr.number, pr.head_ref, pr.base_ref, pr.author) == (
        "Codertocat/Hello-World", 2, "changes", "master", "Codertocat")
    assert not pr.is_from_fork(event.repo)


def test_fork_and_merged_close_payloads():
    fork = parse_event("pull_request", payload(SUPP + "ailisp__reallyfastci/test/data/webhook/webhook-pr-from-fork.json"))
    assert fork.pull_request.is_from_fork(fork.repo)
    closed = parse_event("pull_request", payload(SUPP + "ailisp__reallyfastci/test/data/webhook/webhook-pr-close.json"))
    assert closed.is_pr_closed and closed.pull_request.merged


def test_reviews_comments_pushes_and_releases():
    review = parse_event("pull_request_review", payload(SUPP + "go-playground__webhooks/testdata/github/pull-request-review.json"))
    assert (review.review.user, review.review.state) == ("baxterthehacker", "APPROVED")
    dismissed = parse_event("pull_request_review", payload("pull_request_review/dismissed.payload.json"))
    assert dismissed.review.state == "DISMISSED"
    comment = parse_event("issue_comment", payload(SUPP + "go-playground__webhooks/testdata/github/pull-request-issue-comment.json"))
    assert comment.comment.on_pull_request and comment.comment.body == "/build"
    plain = parse_event("issue_comment", payload("issue_comment/created.payload.json"))
    assert not plain.comment.on_pull_request
    push = parse_event("push", payload("push/with-new-branch.payload.json"))
    assert push.branch == "master" and push.tag is None and push.sha.startswith("6113728f")
    deleted = parse_event("push", payload("push/payload.json"))
    assert deleted.deleted and deleted.tag == "simple-tag"
    tag = parse_event("push", payload("ghes-35/push/payload.json"))
    assert tag.tag and tag.branch is None
    release = parse_event("release", payload("release/published.payload.json"))
    assert release.tag == payload("release/published.payload.json")["release"]["tag_name"]


def test_load_event_reports_missing_and_malformed_files(tmp_path):
    with pytest.raises(GithubError, match="not found"):
        load_event(name="push", path=tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(GithubError, match="bad.json:1"):
        load_event(name="push", path=bad)
    good = tmp_path / "e.json"
    good.write_text(json.dumps(payload("pull_request/synchronize.payload.json")))
    assert load_event(name="pull_request", path=good).action == "synchronize"


def test_a_deleted_head_repository_is_named_as_such_and_is_never_trusted():
    raw = json.loads(json.dumps(payload("pull_request/opened.payload.json")))
    raw["pull_request"]["head"]["repo"] = None
    event = parse_event("pull_request", raw)
    pr = event.pull_request
    assert pr.head_repo is None and pr.is_from_fork(event.repo)
    assert pr.head_origin() == "a head repository that is no longer available (deleted fork)"


def test_doctests_of_the_event_and_comment_sections():
    import doctest

    import bot.github.event
    import bot.report.comment_state

    assert doctest.testmod(bot.github.event).failed == 0 and doctest.testmod(bot.report.comment_state).failed == 0
