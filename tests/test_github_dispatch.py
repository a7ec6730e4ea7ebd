"""bot.github.runners.dispatch: `authorize-deploy`, the first job of the /deploy workflow (no checkout, no
secrets), outputs the head to deploy, or the default branch's for a rollback, to authorized commenters only.

Dispatching every other command is tried end to end in test_github_action.py and test_github_trust.py."""

from __future__ import annotations

import copy

import pytest
import responses

from bot.github.action import Invocation, main
from github_support import (API_ENV, FakeRepository, default_branch_config, install, no_waiting,  # noqa: F401
                            payload, pr_comment_event, write_event)

pytestmark = pytest.mark.usefixtures("no_waiting")


def test_authorize_deploy_outputs_the_head_to_check_out(tmp_path):
    """The first job of the /deploy workflow: no checkout, no project; it outputs what the second deploys."""
    outputs = tmp_path / "outputs.env"
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gh = install(rsps)
        repo = FakeRepository(gh, permissions={"writer": "write", "reader": "read"},
                              default_config=default_branch_config({"enable_deploy_command": True}))
        pull = copy.deepcopy(payload("pull_request/opened.payload.json")["pull_request"])
        repo.set_pull(pull, mergeable=True, mergeable_state="clean")

        def authorize(login: str) -> int:
            outputs.write_text("")
            return main(Invocation(command="authorize-deploy", project_path=str(tmp_path / "no-checkout"),
                                   event_path=write_event(tmp_path, pr_comment_event("/deploy", login)),
                                   event_name="issue_comment"),
                        env={**API_ENV, "GITHUB_OUTPUT": str(outputs)}, context_factory=None, out=lambda line: None)

        assert authorize("writer") == 1   # no preview of the head yet (or the PR workflow uses another gateway)
        assert "has no prod plan preview for its head" in repo.comments[-1]["body"]
        repo.previewed(pull["head"]["sha"])
        assert authorize("writer") == 0
        values = dict(line.split("=", 1) for line in outputs.read_text().splitlines())
        assert values == {"authorized": "true", "sha": pull["head"]["sha"], "pr_number": "2"}
        assert authorize("reader") == 1
        assert dict(line.split("=", 1) for line in outputs.read_text().splitlines()) == {"authorized": "false"}
        assert not gh.errors, gh.errors
    assert repo.reactions == [] and repo.checks == {}


def test_authorize_deploy_outputs_the_default_branch_head_for_a_rollback(tmp_path):
    """`/rollback` goes through the same two jobs as `/deploy`: the first (no checkout, no secrets) checks a
    required approver asked and outputs the default branch's head, which the second checks out."""
    outputs = tmp_path / "outputs.env"
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gh = install(rsps)
        repo = FakeRepository(gh, permissions={"ann-gh": "write", "writer": "write"}, default_branch_sha="e" * 40,
                              default_config=default_branch_config({"enable_deploy_command": True,
                                                                    "required_approvers": ["ann-gh"]}))
        repo.set_pull(copy.deepcopy(payload("pull_request/opened.payload.json")["pull_request"]))

        def authorize(login: str) -> int:
            outputs.write_text("")
            return main(Invocation(command="authorize-deploy", project_path=str(tmp_path / "no-checkout"),
                                   event_path=write_event(tmp_path, pr_comment_event("/rollback", login)),
                                   event_name="issue_comment"),
                        env={**API_ENV, "GITHUB_OUTPUT": str(outputs)}, out=lambda line: None)

        assert authorize("ann-gh") == 0
        assert dict(line.split("=", 1) for line in outputs.read_text().splitlines()) == {
            "authorized": "true", "sha": "e" * 40, "pr_number": "2"}
        assert authorize("writer") == 1
        assert "can be given by a required approver only" in repo.comments[-1]["body"]
        assert not gh.errors, gh.errors
