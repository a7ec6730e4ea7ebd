"""main(): dispatch from real payloads with GitHub mocked (OpenAPI-validated) or in local mode."""

from __future__ import annotations

import copy
import json
import threading
from dataclasses import replace
from pathlib import Path

import pytest
import responses

from bot.github.action import Invocation, main
from bot.report.comment_state import comment_marker
from bot.github.client import GithubClient, RetryPolicy
from bot.github.event import Repo, parse_event
from bot.github.local import StepOutputs
from bot.github.runners import BotRun
from bot.github.runners.base import ephemeral_storage_refusal, post_comment
from bot.github.settings import load_settings
from bot.github.views import COMMENT_LIMIT, ChangeView, CommentView, PlanView
from github_support import FakeEngine, FakeRepository, default_branch_config, example, install, payload

COMMENT_EVENT = "_supplementary/go-playground__webhooks/testdata/github/pull-request-issue-comment.json"


class NoEngine:
    """These scenarios must never reach the project: any use of it fails the test."""

    def __getattr__(self, name):
        raise AssertionError(f"the engine was called ({name}) but should not have been")


def _write(tmp_path, raw: dict):
    path = tmp_path / "event.json"
    path.write_text(json.dumps(raw))
    return str(path)


def test_deploy_comment_from_user_without_write_access_gets_a_reply_and_no_deploy(tmp_path):
    raw = payload(COMMENT_EVENT)
    raw["comment"]["body"] = "/deploy"
    env = {"GITHUB_ACTIONS": "true", "GITHUB_TOKEN": "ghs_token_value", "GITHUB_API_URL": "https://api.github.com"}
    lines: list[str] = []
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gh = install(rsps)
        repo = FakeRepository(gh, permissions={"chhsia0": "read"},
                              default_config=default_branch_config({"enable_deploy_command": True}))
        code = main(Invocation(event_name="issue_comment", event_path=_write(tmp_path, raw)), env=env,
                    context_factory=lambda path, gw: NoEngine(), out=lines.append)
        assert not gh.errors
    assert code == 1
    assert [c[:2] for c in gh.calls] == [
        ("GET", "/repos/chhsia0/knative-route-demo/contents/config.yaml"),
        ("GET", "/repos/chhsia0/knative-route-demo/collaborators/chhsia0/permission"),
        ("POST", "/repos/chhsia0/knative-route-demo/issues/3/comments")]
    assert repo.comments[0]["body"].startswith("@chhsia0 ignored `/deploy`: it needs write permission")
    assert repo.reactions == [] and repo.checks == {}
    assert lines == ["::add-mask::ghs_token_value"]


def test_fork_pull_request_gets_a_notice_not_a_crash(tmp_path):
    raw = payload("_supplementary/ailisp__reallyfastci/test/data/webhook/webhook-pr-from-fork.json")
    out = tmp_path / "out"
    code = main(Invocation(event_name="pull_request", event_path=_write(tmp_path, raw), output_dir=str(out)),
                env={}, context_factory=lambda path, gw: NoEngine())
    assert code == 0
    assert "fork" in (out / "summary.md").read_text()


def test_missing_event_and_unknown_command_are_clear_errors(tmp_path):
    lines: list[str] = []
    assert main(Invocation(), env={}, out=lines.append) == 1
    assert lines[0].startswith("::error title=meshbot::no event")
    raw = payload("pull_request/opened.payload.json")
    lines.clear()
    code = main(Invocation(command="nope", event_name="pull_request", event_path=_write(tmp_path, raw),
                           output_dir=str(tmp_path / "o")), env={},
                context_factory=lambda path, gw: NoEngine(), out=lines.append)
    assert code == 1 and "unknown command `nope`" in lines[0]


def test_no_token_inside_actions_is_reported(tmp_path):
    raw = payload("pull_request/opened.payload.json")
    lines: list[str] = []
    code = main(Invocation(event_name="pull_request", event_path=_write(tmp_path, raw)),
                env={"GITHUB_ACTIONS": "true"}, context_factory=lambda path, gw: NoEngine(), out=lines.append)
    assert code == 1 and "no GitHub token" in lines[0]


def test_deleted_tag_push_deploys_nothing(tmp_path):
    out = tmp_path / "out"
    code = main(Invocation(event_name="push", event_path=_write(tmp_path, payload("push/payload.json")),
                           output_dir=str(out)), env={},
                context_factory=lambda path, gw: NoEngine())
    assert code == 0 and "deleted" in (out / "summary.md").read_text()


def _api_env() -> dict:
    return {"GITHUB_ACTIONS": "true", "GITHUB_TOKEN": "ghs_token_value", "GITHUB_API_URL": "https://api.github.com"}


def test_pull_request_that_changes_no_project_file_skips_the_engine(tmp_path):
    raw = payload("pull_request/synchronize.payload.json")
    summary = tmp_path / "summary.md"
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gh = install(rsps)
        repo = FakeRepository(gh, files=["README.md", ".github/workflows/meshbot-pr.yml", "docs/guide.md"])
        code = main(Invocation(event_name="pull_request", event_path=_write(tmp_path, raw)),
                    env={**_api_env(), "GITHUB_STEP_SUMMARY": str(summary)},
                    context_factory=lambda path, gw: NoEngine(), out=lambda line: None)
        assert not gh.errors
    assert code == 0
    assert [c[:2] for c in gh.calls] == [
        ("GET", "/repos/Codertocat/Hello-World/contents/config.yaml"),
        ("GET", "/repos/Codertocat/Hello-World/pulls/2/files"),
        ("GET", "/repos/Codertocat/Hello-World/issues/2/comments"),
        ("POST", "/repos/Codertocat/Hello-World/issues/2/comments")]
    assert "changes no project file" in repo.comments[0]["body"] and repo.checks == {}


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
        code = main(Invocation(event_name="pull_request_review", event_path=_write(tmp_path, raw)),
                    env={**_api_env(), "GITHUB_STEP_SUMMARY": str(summary)},
                    context_factory=lambda path, gw: NoEngine(), out=lines.append)
        assert not gh.errors
    assert code == 0
    assert lines[-1].startswith("::warning title=meshbot::") and "fork `someone/Hello-World`" in lines[-1]
    assert "read-only" in summary.read_text() and "Resource not accessible by integration" in summary.read_text()
    assert len(gh.sent("POST", r"/check-runs$")) == 1     # a 403 that is no rate limit is not retried
    assert repo.comments == []


def test_comment_that_would_pass_the_limit_is_posted_shortened_and_valid(tmp_path):
    diff = "\n".join(f"-select {i} as old_{i}\n+select {i} as new_{i}" for i in range(900))
    changes = tuple(ChangeView(f"db.model_{i}", "directly modified", "Breaking", "FULL", diff=diff)
                    for i in range(12))
    view = CommentView(marker=comment_marker(None), status="status", prod_plan=PlanView("prod", changes=changes),
                       approval="1 of 1 required approval(s).")
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gh = install(rsps)
        repo = FakeRepository(gh)
        client = GithubClient(token="t", repo=Repo("Codertocat", "Hello-World"), seconds_between_writes=0)
        run = BotRun(event=parse_event("pull_request", payload("pull_request/opened.payload.json")),
                     settings=load_settings({}), github=client, context=NoEngine(),
                     outputs=StepOutputs.in_folder(tmp_path))
        post_comment(run, 2, view)
        assert not gh.errors
    body = repo.comments[0]["body"]
    assert len(body) <= COMMENT_LIMIT < len((tmp_path / "summary.md").read_text())
    assert body.count("```") % 2 == 0 and body.count("<details>") == body.count("</details>")
    assert comment_marker(None) in body and "1 of 1 required approval(s)." in body and "shortened" in body


def test_state_and_catalog_on_the_runner_are_refused_inside_github_actions(tmp_path):
    """The default gateway keeps SQLite state and a Derby catalog under .meshbot/: on a fresh runner every
    job would start from nothing, so the PR Environment Synced check fails naming what to configure."""
    from bot.context import Context
    from bot.project.example import write_example

    project = tmp_path / "shop"
    write_example(project)
    raw = payload("pull_request/opened.payload.json")
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gh = install(rsps)
        repo = FakeRepository(gh)
        code = main(Invocation(command="update-pr-environment", event_name="pull_request",
                               event_path=_write(tmp_path, raw), project_path=str(project)),
                    env=_api_env(), out=lambda line: None)
        assert not gh.errors
    assert code == 1
    check = repo.check("meshbot - PR Environment Synced")
    assert check["conclusion"] == "failure"
    text = check["output"]["summary"]
    assert "the gateway `local`" in text and "the SQLite file" in text and "embedded Derby metastore" in text
    assert "type: postgres" in text and "remote: sc://" in text and "allow_ephemeral_state: true" in text
    assert "refuses to run on this GitHub Actions runner" in repo.comments[0]["body"]
    assert not (project / ".meshbot" / "state.db").exists()
    assert "meshbot-spark-start" not in {t.name for t in threading.enumerate()}   # no JVM for a refused run

    # The team gateway the example ships (PostgreSQL + Spark Connect) passes; a throwaway demo may opt in.
    run = BotRun(event=parse_event("pull_request", raw), settings=load_settings({}), github=None,
                 context=Context(project, gateway="ci"), outputs=StepOutputs.in_folder(tmp_path / "o"),
                 on_actions_runner=True)
    assert ephemeral_storage_refusal(run) is None
    local = BotRun(event=run.event, settings=load_settings({"allow_ephemeral_state": True}), github=None,
                   context=Context(project), outputs=run.outputs, on_actions_runner=True)
    assert ephemeral_storage_refusal(local) is None
    assert ephemeral_storage_refusal(replace(local, settings=load_settings({}))) is not None
    assert ephemeral_storage_refusal(replace(local, settings=load_settings({}), on_actions_runner=False)) is None


# -- no traceback from any command: one `::error` line and exit 1 ------------------------------------

@pytest.fixture
def no_waiting(monkeypatch):
    """PyGithub sleeps between writes: record the waits instead."""
    import time

    waits: list[float] = []
    monkeypatch.setattr(time, "sleep", waits.append)
    return waits


def test_unknown_pull_request_in_local_mode_is_a_clear_error(tmp_path):
    raw = payload(COMMENT_EVENT)
    raw["comment"]["body"] = "/deploy"
    lines: list[str] = []
    code = main(Invocation(event_name="issue_comment", event_path=_write(tmp_path, raw),
                           output_dir=str(tmp_path / "o"), answers=_write_answers(tmp_path, chhsia0="write")),
                env={"MESHBOT_CICD_BOT": "enable_deploy_command: true"},
                context_factory=lambda path, gw: NoEngine(), out=lines.append)
    assert code == 1
    assert lines == ["::error title=meshbot::pull request #3 is unknown in local mode: the event payload does "
                     "not describe it and meshbot makes no network call here; add it to the `pulls` of an "
                     "answers file (--answers)"]


def _write_answers(tmp_path, **permissions: str) -> str:
    path = tmp_path / "answers.json"
    path.write_text(json.dumps({"permissions": permissions}))
    return str(path)


def test_release_without_github_sha_is_a_clear_error(tmp_path):
    lines: list[str] = []
    code = main(Invocation(event_name="release", event_path=_write(tmp_path, payload("release/published.payload.json")),
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
                               event_path=_write(tmp_path, payload("pull_request/synchronize.payload.json"))),
                    env=_api_env(), context_factory=lambda path, gw: NoEngine(), out=lines.append)
    assert code == 1
    assert lines[-1] == ("::error title=meshbot::could not reach the GitHub API at https://api.github.com (GET "
                         "/contents/config.yaml): ConnectionError. Check GITHUB_API_URL and the runner's network "
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
                               event_path=_write(tmp_path, payload("pull_request/synchronize.payload.json"))),
                    env=_api_env(), context_factory=lambda path, gw: NoEngine(), out=lines.append)
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
                               event_path=_write(tmp_path, payload("pull_request/opened.payload.json"))),
                    env=_api_env(), context_factory=broken, out=lines.append)
    assert code == 1
    assert lines[1:] == ["::error title=meshbot::unexpected RuntimeError while running `run-all`: boom while using "
                     "***%0Asecond line"]
