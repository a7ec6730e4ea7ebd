"""main(): dispatch from real payloads with GitHub mocked (OpenAPI-validated) or in local mode."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import responses

from bot.github.action import Invocation, main
from github_support import example, install, payload

COMMENT_EVENT = "_supplementary/go-playground__webhooks/testdata/github/pull-request-issue-comment.json"


class NoEngine:
    """Only a config: these scenarios must never reach the engine."""

    def __init__(self, cicd_bot: dict) -> None:
        self.config = SimpleNamespace(cicd_bot=cicd_bot, users=())

    def __getattr__(self, name):
        raise AssertionError(f"the engine was called ({name}) but should not have been")


def _write(tmp_path, raw: dict):
    path = tmp_path / "event.json"
    path.write_text(json.dumps(raw))
    return str(path)


def test_deploy_comment_from_user_without_write_access_is_ignored(tmp_path):
    raw = payload(COMMENT_EVENT)
    raw["comment"]["body"] = "/deploy"
    env = {"GITHUB_ACTIONS": "true", "GITHUB_TOKEN": "ghs_token_value", "GITHUB_API_URL": "https://api.github.com"}
    lines: list[str] = []
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gh = install(rsps)
        gh.add("GET", "/repos/{owner}/{repo}/collaborators/{username}/permission",
               {**example("/repos/{owner}/{repo}/collaborators/{username}/permission", "get"), "permission": "read",
                "role_name": "read"})
        code = main(Invocation(event_name="issue_comment", event_path=_write(tmp_path, raw)), env=env,
                    context_factory=lambda path, gw: NoEngine({"enable_deploy_command": True}), out=lines.append)
        assert not gh.errors
    assert code == 0
    assert [c[:2] for c in gh.calls] == [("GET", "/repos/chhsia0/knative-route-demo/collaborators/chhsia0/permission")]
    assert lines == ["::add-mask::ghs_token_value"]


def test_fork_pull_request_gets_a_notice_not_a_crash(tmp_path):
    raw = payload("_supplementary/ailisp__reallyfastci/test/data/webhook/webhook-pr-from-fork.json")
    out = tmp_path / "out"
    code = main(Invocation(event_name="pull_request", event_path=_write(tmp_path, raw), output_dir=str(out)),
                env={}, context_factory=lambda path, gw: NoEngine({}))
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
                context_factory=lambda path, gw: NoEngine({}), out=lines.append)
    assert code == 1 and "unknown command `nope`" in lines[0]


def test_no_token_inside_actions_is_reported(tmp_path):
    raw = payload("pull_request/opened.payload.json")
    lines: list[str] = []
    code = main(Invocation(event_name="pull_request", event_path=_write(tmp_path, raw)),
                env={"GITHUB_ACTIONS": "true"}, context_factory=lambda path, gw: NoEngine({}), out=lines.append)
    assert code == 1 and "no GitHub token" in lines[0]


def test_deleted_tag_push_deploys_nothing(tmp_path):
    out = tmp_path / "out"
    code = main(Invocation(event_name="push", event_path=_write(tmp_path, payload("push/payload.json")),
                           output_dir=str(out)), env={},
                context_factory=lambda path, gw: NoEngine({"deploy_on": "both"}))
    assert code == 0 and "deleted" in (out / "summary.md").read_text()
