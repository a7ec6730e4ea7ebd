"""main(): dispatch from real payloads with GitHub mocked (OpenAPI-validated) or in local mode."""

from __future__ import annotations

import copy

import responses

from bot.github.action import Invocation, main
from bot.github.client import RetryPolicy
from github_support import (API_ENV, COMMENT_EVENT, FakeEngine, FakeRepository, NoEngine, default_branch_config,
                            install, no_waiting, payload, write_event)  # noqa: F401 (a fixture)


def test_deploy_comment_from_user_without_write_access_gets_a_reply_and_no_deploy(tmp_path):
    raw = payload(COMMENT_EVENT)
    raw["comment"]["body"] = "/deploy"
    env = {"GITHUB_ACTIONS": "true", "GITHUB_TOKEN": "ghs_token_value", "GITHUB_API_URL": "https://api.github.com"}
    lines: list[str] = []
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gh = install(rsps)
        repo = FakeRepository(gh, permissions={"chhsia0": "read"},
                              default_config=default_branch_config({"enable_deploy_command": True}))
        code = main(Invocation(event_name="issue_comment", event_path=write_event(tmp_path, raw)), env=env,
                    context_factory=lambda path, gw: NoEngine(), out=lines.append)
        assert not gh.errors
    assert code == 1
    assert [c[:2] for c in gh.calls] == [
        ("GET", "/repos/chhsia0/knative-route-demo/git/ref/heads/master"),   # the branch, never a tag named so
        ("GET", "/repos/chhsia0/knative-route-demo/contents/config.yaml"),
        ("GET", "/repos/chhsia0/knative-route-demo/collaborators/chhsia0/permission"),
        ("POST", "/repos/chhsia0/knative-route-demo/issues/3/comments")]
    assert repo.comments[0]["body"].startswith("@chhsia0 ignored `/deploy`: it needs write permission")
    assert repo.reactions == [] and repo.checks == {}
    assert lines == ["::add-mask::ghs_token_value"]


def test_fork_pull_request_gets_a_notice_not_a_crash(tmp_path):
    raw = payload("_supplementary/ailisp__reallyfastci/test/data/webhook/webhook-pr-from-fork.json")
    out = tmp_path / "out"
    code = main(Invocation(event_name="pull_request", event_path=write_event(tmp_path, raw), output_dir=str(out)),
                env={}, context_factory=lambda path, gw: NoEngine())
    assert code == 0
    assert "fork" in (out / "summary.md").read_text()


def test_missing_event_and_unknown_command_are_clear_errors(tmp_path):
    lines: list[str] = []
    assert main(Invocation(), env={}, out=lines.append) == 1
    assert lines[0].startswith("::error title=meshbot::no event")
    raw = payload("pull_request/opened.payload.json")
    lines.clear()
    code = main(Invocation(command="nope", event_name="pull_request", event_path=write_event(tmp_path, raw),
                           output_dir=str(tmp_path / "o")), env={},
                context_factory=lambda path, gw: NoEngine(), out=lines.append)
    assert code == 1 and "unknown command `nope`" in lines[0]


def test_no_token_inside_actions_is_reported(tmp_path):
    raw = payload("pull_request/opened.payload.json")
    lines: list[str] = []
    code = main(Invocation(event_name="pull_request", event_path=write_event(tmp_path, raw)),
                env={"GITHUB_ACTIONS": "true"}, context_factory=lambda path, gw: NoEngine(), out=lines.append)
    assert code == 1 and "no GitHub token" in lines[0]


def test_deleted_tag_push_deploys_nothing(tmp_path):
    out = tmp_path / "out"
    code = main(Invocation(event_name="push", event_path=write_event(tmp_path, payload("push/payload.json")),
                           output_dir=str(out)), env={},
                context_factory=lambda path, gw: NoEngine())
    assert code == 0 and "deleted" in (out / "summary.md").read_text()


def test_fork_pull_request_with_a_read_only_token_gets_a_notice_not_a_crash(tmp_path):
    raw = copy.deepcopy(payload("pull_request_review/submitted.payload.json"))
    raw["pull_request"]["head"]["repo"]["full_name"] = "someone/Hello-World"
    lines: list[str] = []
    summary = tmp_path / "summary.md"
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gh = install(rsps)
        repo = FakeRepository(gh, default_config=default_branch_config({"required_approvers": ["ann"]}))
        repo.set_pull(raw["pull_request"])
        # the subset documents only 201 for checks/create, so this real-world 403 is sent unvalidated
        gh.routes[("POST", "/repos/{owner}/{repo}/check-runs")] = [
            (403, {}, {"message": "Resource not accessible by integration",
                       "documentation_url": "https://docs.github.com/rest/checks/runs#create-a-check-run"}, False)]
        code = main(Invocation(event_name="pull_request_review", event_path=write_event(tmp_path, raw)),
                    env={**API_ENV, "GITHUB_STEP_SUMMARY": str(summary)},
                    context_factory=lambda path, gw: NoEngine(), out=lines.append)
        assert not gh.errors
    assert code == 0
    assert lines[-1].startswith("::warning title=meshbot::") and "fork `someone/Hello-World`" in lines[-1]
    assert "read-only" in summary.read_text() and "Resource not accessible by integration" in summary.read_text()
    assert len(gh.sent("POST", r"/check-runs$")) == 1     # a 403 that is no rate limit is not retried
    assert repo.comments == []


# -- no traceback from any command: one `::error` line and exit 1 ------------------------------------

def test_release_without_github_sha_is_a_clear_error(tmp_path):
    lines: list[str] = []
    code = main(Invocation(event_name="release", event_path=write_event(tmp_path, payload("release/published.payload.json")),
                           output_dir=str(tmp_path / "o"), project_path=str(tmp_path)),
                env={"MESHBOT_CICD_BOT": "deploy_on: tag"},
                context_factory=lambda path, gw: FakeEngine(), out=lines.append)
    assert code == 1 and len(lines) == 1
    assert lines[0].startswith("::error title=meshbot::a release event does not name its commit")
    assert "GITHUB_SHA" in lines[0]


def test_unreachable_api_is_a_clear_error(tmp_path, no_waiting):
    import re

    import requests

    lines: list[str] = []
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        rsps.add(responses.GET, re.compile(r"https://api\.github\.com/.*"),
                 body=requests.exceptions.ConnectionError("Name or service not known"))
        code = main(Invocation(event_name="pull_request",
                               event_path=write_event(tmp_path, payload("pull_request/synchronize.payload.json"))),
                    env=API_ENV, context_factory=lambda path, gw: NoEngine(), out=lines.append)
    assert code == 1
    assert lines[-1] == ("::error title=meshbot::could not reach the GitHub API at https://api.github.com (GET "
                         "/git/ref/heads/master): ConnectionError. Check GITHUB_API_URL and the runner's network "
                         "access.")


def test_github_error_answers_after_retries_are_a_clear_error(tmp_path, no_waiting):
    lines: list[str] = []
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gh = install(rsps)
        FakeRepository(gh)
        gh.routes[("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/files")] = [(
            503, {}, {"code": "unavailable", "message": "Service unavailable",
                      "documentation_url": "https://docs.github.com"}, True)]
        code = main(Invocation(event_name="pull_request",
                               event_path=write_event(tmp_path, payload("pull_request/synchronize.payload.json"))),
                    env=API_ENV, context_factory=lambda path, gw: NoEngine(), out=lines.append)
        assert not gh.errors
    assert code == 1 and len(gh.sent("GET", "/files$")) == RetryPolicy().retries + 1
    assert lines[-1] == ("::error title=meshbot::GitHub API files of #2 still failed after 4 retries (too many "
                         "503 error responses); GitHub may be degraded, re-run the job later")


def test_an_unexpected_error_is_one_line_without_the_token(tmp_path):
    def broken(path, gateway):
        raise RuntimeError("boom while using ghs_token_value\nsecond line")

    lines: list[str] = []
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        FakeRepository(install(rsps))
        code = main(Invocation(event_name="pull_request",
                               event_path=write_event(tmp_path, payload("pull_request/opened.payload.json"))),
                    env=API_ENV, context_factory=broken, out=lines.append)
    assert code == 1
    assert lines[-1] == ("::error title=meshbot::unexpected RuntimeError while running `run-all`: boom while using "
                         "***%0Asecond line")
    # the phase it stopped in is folded and closed before the error
    assert lines[1] == "::group::meshbot: load the project" and lines[-2] == "::endgroup::"
    assert lines[-3].startswith("load the project: stopped after ") and not any("ghs_" in line for line in lines[1:])
