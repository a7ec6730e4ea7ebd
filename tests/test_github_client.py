"""GithubClient against a mocked api.github.com validated by GitHub's OpenAPI description."""

from __future__ import annotations

import time

import pytest
import responses
from urllib3 import HTTPResponse

from bot.errors import GithubError
from bot.github.ports import CheckRun, TokenPermissionError
from bot.report.comment_state import comment_marker
from bot.github.client import GithubClient, RetryPolicy
from bot.github.event import Repo
from github_support import example, install, pull_request_example

COMMENTS = "/repos/{owner}/{repo}/issues/{issue_number}/comments"
COMMENT = "/repos/{owner}/{repo}/issues/comments/{comment_id}"
MARKER = comment_marker(None)
BOT = "github-actions[bot]"


@pytest.fixture
def gh():
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        mock = install(rsps)
        yield mock
        assert not mock.errors


NO_WAIT = RetryPolicy(backoff=0, secondary_rate_wait=0, max_wait=0)


@pytest.fixture
def client():
    return GithubClient(token="ghs_secret_token", repo=Repo("octocat", "Hello-World"), bot_login=BOT,
                        seconds_between_writes=0, retry=NO_WAIT)


def _comment(comment_id: int, login: str, body: str) -> dict:
    item = example(COMMENT, "patch")
    item.update(id=comment_id, body=body)
    item["user"]["login"] = login
    return item


def test_the_bot_creates_its_comment_then_finds_and_edits_it(gh, client):
    gh.add("GET", COMMENTS, [])
    created = example(COMMENTS, "post", "201")
    gh.add("POST", COMMENTS, created, status=201)
    assert client.find_comment(2, marker=MARKER) is None
    assert client.create_comment(2, f"{MARKER}\nfirst") == created["id"]
    assert gh.sent("POST", r"/issues/2/comments$") == [{"body": f"{MARKER}\nfirst"}]

    # someone quoting the marker does not capture it; the bot's own comment is edited in place
    gh.routes.clear()
    gh.add("GET", COMMENTS, [_comment(7, "octocat", f"> {MARKER}"), _comment(9, BOT, f"{MARKER}\nold")])
    gh.add("PATCH", COMMENT, _comment(9, BOT, "x"))
    assert client.find_comment(2, marker=MARKER) == (9, f"{MARKER}\nold")
    client.edit_comment(9, f"{MARKER}\nsecond")
    assert gh.sent("PATCH", r"/issues/comments/9$") == [{"body": f"{MARKER}\nsecond"}]
    assert len(gh.sent("POST", r"/comments$")) == 1


def _secondary_limit() -> dict:
    return {"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
            "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}


def test_secondary_rate_limit_is_retried_until_the_comment_is_posted(gh, client):
    gh.add("POST", COMMENTS, _secondary_limit(), status=403)
    gh.add("POST", COMMENTS, _secondary_limit(), status=403, headers={"Retry-After": "7"})
    created = example(COMMENTS, "post", "201")
    gh.add("POST", COMMENTS, created, status=201)
    assert client.create_comment(2, "hello") == created["id"]
    assert gh.sent("POST", r"/issues/2/comments$") == [{"body": "hello"}] * 3


def test_secondary_rate_limit_that_outlasts_the_retries_is_a_github_error(gh, client):
    gh.add("POST", COMMENTS, _secondary_limit(), status=403)
    with pytest.raises(GithubError) as raised:
        client.create_comment(2, "hello")
    assert str(raised.value) == ("GitHub API POST /issues/2/comments still failed after 4 retries (too many 403 "
                                 "error responses); GitHub may be degraded, re-run the job later")
    assert not isinstance(raised.value, TokenPermissionError)
    assert len(gh.sent("POST", r"/issues/2/comments$")) == NO_WAIT.retries + 1


def test_a_refused_write_is_a_permission_error_without_retries(gh, client):
    gh.add("POST", COMMENTS, {"message": "Resource not accessible by integration",
                              "documentation_url": "https://docs.github.com"}, status=403)
    with pytest.raises(TokenPermissionError, match="read-only token"):
        client.create_comment(2, "hello")
    assert len(gh.sent("POST", r"/issues/2/comments$")) == 1


def test_primary_rate_limit_waits_for_its_reset_only_when_that_is_soon(gh):
    patient = GithubClient(token="t", repo=Repo("octocat", "Hello-World"), seconds_between_writes=0,
                           retry=RetryPolicy(backoff=0, secondary_rate_wait=0, max_wait=60))
    reviews = "/repos/{owner}/{repo}/pulls/{pull_number}/reviews"
    limit = {"message": "API rate limit exceeded for installation ID 1.", "documentation_url": "https://docs.github.com"}
    soon = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(time.time()) + 20)}
    gh.add("GET", reviews, limit, status=403, headers=soon, validate=False)   # the subset lists 200 only
    gh.add("GET", reviews, example(reviews, "get"))
    assert patient.list_reviews(12)[0].state == "APPROVED"

    gh.routes.clear()
    later = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(time.time()) + 3600)}
    gh.add("GET", reviews, limit, status=403, headers=later, validate=False)
    with pytest.raises(GithubError, match="rate limited and would have to wait 36[0-9]{2} s"):
        patient.list_reviews(12)


def test_server_error_then_success(gh, client):
    gh.add("GET", "/repos/{owner}/{repo}/pulls/{pull_number}", {"message": "Service unavailable",
                                                                "documentation_url": "https://docs.github.com"},
           status=503)
    gh.add("GET", "/repos/{owner}/{repo}/pulls/{pull_number}", pull_request_example())
    pr = client.pull_request(1347)
    assert (pr.number, pr.author, pr.base_ref) == (1347, "octocat", "master")
    assert len(gh.calls) == 2


def test_server_errors_are_retried_then_reported_without_the_token(gh, client):
    gh.add("GET", "/repos/{owner}/{repo}/pulls/{pull_number}", {"message": "boom",
                                                                "documentation_url": "https://docs.github.com"},
           status=500)
    with pytest.raises(GithubError) as raised:
        client.pull_request(1347)
    assert str(raised.value) == ("GitHub API GET /pulls/1347 still failed after 4 retries (too many 500 error "
                                 "responses); GitHub may be degraded, re-run the job later")
    assert len(gh.calls) == NO_WAIT.retries + 1
    assert "ghs_secret_token" not in repr(client)


def test_the_default_policy_bounds_every_wait():
    policy = RetryPolicy()
    retry = policy.build()
    assert (retry.total, retry.backoff_max, retry.max_rate_limit_wait) == (4, 60.0, 60.0)
    assert {"PATCH", "POST", "PUT"} <= retry.allowed_methods and 403 in retry.status_forcelist
    assert retry.get_retry_after(HTTPResponse(headers={"Retry-After": "900"})) == 60.0
    assert retry.get_retry_after(HTTPResponse(headers={"Retry-After": "7"})) == 7.0


def test_permission_team_membership_reaction_and_commit_pulls(gh, client):
    gh.add("GET", "/repos/{owner}/{repo}/collaborators/{username}/permission",
           example("/repos/{owner}/{repo}/collaborators/{username}/permission", "get"))
    assert client.permission("octocat") == "admin"
    gh.add("GET", "/repos/{owner}/{repo}/collaborators/{username}/permission",
           {"message": "Not Found", "documentation_url": "x"}, status=404, validate=False)
    gh.routes[("GET", "/repos/{owner}/{repo}/collaborators/{username}/permission")].pop(0)
    assert client.permission("stranger") == "none"

    gh.add("GET", "/orgs/{org}/teams/{team_slug}/memberships/{username}",
           example("/orgs/{org}/teams/{team_slug}/memberships/{username}", "get"))
    assert client.is_team_member("octo-org", "data-leads", "octocat") is True

    gh.add("POST", "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions",
           example("/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions", "post", "201"), status=201)
    client.add_reaction(5, "rocket")
    assert gh.sent("POST", r"/reactions$") == [{"content": "rocket"}]

    gh.add("GET", "/repos/{owner}/{repo}/commits/{commit_sha}/pulls",
           example("/repos/{owner}/{repo}/commits/{commit_sha}/pulls", "get"))
    pulls = client.pulls_for_commit("6dcb09b5b57875f334f61aebed695e2e4193db5e")
    assert pulls[0].number == 1347


def test_completed_check_run_update_body(gh, client):
    gh.add("PATCH", "/repos/{owner}/{repo}/check-runs/{check_run_id}",
           example("/repos/{owner}/{repo}/check-runs/{check_run_id}", "patch"))
    client.update_check(4, CheckRun(name="meshbot - Unit Tests", head_sha="a" * 40, status="completed",
                                    conclusion="failure", title="1 of 3 unit tests failed", summary="details"))
    assert gh.sent("PATCH", r"/check-runs/4$") == [{
        "name": "meshbot - Unit Tests", "status": "completed", "conclusion": "failure",
        "output": {"title": "1 of 3 unit tests failed", "summary": "details"}}]
