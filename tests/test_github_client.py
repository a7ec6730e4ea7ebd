"""GithubClient against a mocked api.github.com validated by GitHub's OpenAPI description."""

from __future__ import annotations

import pytest
import responses

from bot.errors import GithubError
from bot.github.api import CheckRun, comment_marker
from bot.github.client import GithubClient
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


@pytest.fixture
def sleeps():
    return []


@pytest.fixture
def client(sleeps):
    return GithubClient(token="ghs_secret_token", repo=Repo("octocat", "Hello-World"), bot_login=BOT,
                        seconds_between_writes=0, sleep=sleeps.append, clock=lambda: 1_000_000.0)


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


def test_rate_limit_with_retry_after_is_retried_after_waiting(gh, client, sleeps):
    error = {"message": "You have exceeded a secondary rate limit.",
             "documentation_url": "https://docs.github.com"}
    gh.add("POST", "/repos/{owner}/{repo}/check-runs", error, status=403,
           headers={"retry-after": "7"}, validate=False)
    gh.add("POST", "/repos/{owner}/{repo}/check-runs", example("/repos/{owner}/{repo}/check-runs", "post", "201"),
           status=201)
    check_id = client.create_check(CheckRun(name="meshbot - Unit Tests", head_sha="a" * 40,
                                            status="in_progress"))
    assert check_id == example("/repos/{owner}/{repo}/check-runs", "post", "201")["id"]
    assert sleeps == [7.0]


def test_rate_limit_reset_header_is_honoured(gh, client, sleeps):
    gh.add("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews", {"message": "API rate limit exceeded"},
           status=403, headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1000030"}, validate=False)
    gh.add("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews",
           example("/repos/{owner}/{repo}/pulls/{pull_number}/reviews", "get"))
    reviews = client.list_reviews(12)
    assert sleeps == [30.0]
    assert reviews[0].state == "APPROVED" and reviews[0].commit_id


def test_server_errors_are_retried_then_reported_without_the_token(gh, client, sleeps):
    for _ in range(6):
        gh.add("GET", "/repos/{owner}/{repo}/pulls/{pull_number}", {"message": "boom"}, status=502, validate=False)
    with pytest.raises(GithubError) as raised:
        client.pull_request(1347)
    assert "HTTP 502" in str(raised.value) and "ghs_secret_token" not in str(raised.value)
    assert sleeps == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert "ghs_secret_token" not in repr(client)


def test_server_error_then_success(gh, client, sleeps):
    gh.add("GET", "/repos/{owner}/{repo}/pulls/{pull_number}", {"message": "unavailable"}, status=503,
           validate=False)
    gh.add("GET", "/repos/{owner}/{repo}/pulls/{pull_number}", pull_request_example())
    pr = client.pull_request(1347)
    assert (pr.number, pr.author, pr.base_ref) == (1347, "octocat", "master")
    assert sleeps == [1.0]


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
