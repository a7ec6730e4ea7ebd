"""bot.github.runners.cleanup: closing a PR removes its environment and drops the comment's sections that went stale.

A merged PR's environment kept (invalidate_environment_after_deploy: false) and a fork's close are tried end to
end in test_github_comment.py."""

from __future__ import annotations

import pytest

from github_support import bot, no_waiting, payload  # noqa: F401 (fixtures)

pytestmark = pytest.mark.usefixtures("no_waiting")


def test_closing_a_pr_cleans_up_its_environment_and_drops_stale_sections(bot):
    b = bot()
    assert b("pull_request", payload("pull_request/opened.payload.json")) == 0
    assert "How to deploy" in b.comment
    assert b("pull_request", payload("pull_request/closed.payload.json")) == 0
    assert b.engine.invalidated == ["hello_world_2"]
    assert ":broom: This PR was closed: environment `hello_world_2` was removed" in b.status
    assert "How to deploy" not in b.comment and "shop__hello_world_2" not in b.comment
    assert "Prod plan preview" in b.comment          # kept as the record of what was proposed
