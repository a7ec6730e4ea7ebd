"""Comment commands (bot.github.commands): what a PR comment asks of the bot, in each namespace."""

from __future__ import annotations

from bot.github.commands import Command, Ignore, Reply, parse_comment


def test_comment_commands():
    assert parse_comment("/deploy") == Command("deploy")
    assert parse_comment("  \n/meshbot/deploy", namespace="meshbot") == Command("deploy")
    assert isinstance(parse_comment("/deploy", namespace="meshbot"), Ignore)
    assert isinstance(parse_comment("please /deploy"), Ignore)
    assert isinstance(parse_comment("/build"), Ignore)                     # another bot's command
    assert isinstance(parse_comment("/meshbot/nope", namespace="meshbot"), Reply)
    assert "disabled" in parse_comment("/deploy", enabled=False).text
    assert "deploy" in parse_comment("/help").text
