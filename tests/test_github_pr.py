"""bot.github.runners.pr: the pull request runners (unit tests, PR environment, prod plan, approvals).

Their comment and checks are tried end to end in test_github_comment.py, test_github_lifecycle.py and
test_github_fresh_clone.py; the prod preview's own/base split in test_github_base_changes.py."""

from __future__ import annotations

import responses

from bot.github.action import Invocation, main
from github_support import API_ENV, FakeRepository, NoEngine, install, payload, write_event


def test_pull_request_that_changes_no_project_file_skips_the_engine(tmp_path):
    raw = payload("pull_request/synchronize.payload.json")
    summary = tmp_path / "summary.md"
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        gh = install(rsps)
        repo = FakeRepository(gh, files=["README.md", ".github/workflows/meshbot-pr.yml", "docs/guide.md"])
        code = main(Invocation(event_name="pull_request", event_path=write_event(tmp_path, raw)),
                    env={**API_ENV, "GITHUB_STEP_SUMMARY": str(summary)},
                    context_factory=lambda path, gw: NoEngine(), out=lambda line: None)
        assert not gh.errors
    assert code == 0
    assert [c[:2] for c in gh.calls] == [
        ("GET", "/repos/Codertocat/Hello-World/git/ref/heads/master"),
        ("GET", "/repos/Codertocat/Hello-World/contents/config.yaml"),
        ("GET", "/repos/Codertocat/Hello-World/pulls/2/files"),
        ("GET", "/repos/Codertocat/Hello-World/issues/2/comments"),
        ("POST", "/repos/Codertocat/Hello-World/issues/2/comments")]
    assert "changes no project file" in repo.comments[0]["body"] and repo.checks == {}
