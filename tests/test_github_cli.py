"""bot.github.cli: `meshbot github` lists and runs every bot command, its options reaching main() (here local
mode's --output-dir); the bot itself is tested through main() in the other test_github_* files."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rendered import shown
from bot.cli.app import cli
from bot.github.runners import COMMANDS
from github_support import payload


def test_meshbot_github_help_lists_every_command():
    result = CliRunner().invoke(cli, ["github", "--help"])
    assert result.exit_code == 0, result.output
    listed = result.output.split("Commands:")[1].split()
    assert set(COMMANDS) <= set(listed) and "run-all" in COMMANDS and "authorize-deploy" in COMMANDS


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_has_its_help(command):
    from bot.github.cli import COMMAND_HELP

    result = CliRunner().invoke(cli, ["github", command, "--help"])
    assert result.exit_code == 0 and " ".join(COMMAND_HELP[command].split()[:4]) in " ".join(result.output.split())
    assert set(COMMAND_HELP) == set(COMMANDS)


def test_options_reach_the_bot_and_its_exit_code_is_the_commands(tmp_path):
    event = tmp_path / "event.json"
    event.write_text(json.dumps(payload("push/payload.json")))     # a deleted tag: nothing to deploy
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["github", "--event-name", "push", "--event-path", str(event),
                                      "--output-dir", str(out), "--project-path", str(tmp_path / "none"), "run-all"],
                                env={"GITHUB_ACTIONS": None, "GITHUB_TOKEN": None, "MESHBOT_CICD_BOT": None})
    assert result.exit_code == 0, result.output
    assert "deleted" in (out / "summary.md").read_text()
    assert CliRunner().invoke(cli, ["github", "nope"]).exit_code == 2


def test_meshbots_own_project_and_gateway_options_reach_the_bot(tmp_path):
    """`meshbot -p DIR github ... run-all` runs on DIR (the group's own -p used to default to the current
    directory and win)."""
    opened = payload("pull_request/opened.payload.json")
    event, answers = tmp_path / "event.json", tmp_path / "answers.json"
    event.write_text(json.dumps(opened))
    answers.write_text(json.dumps({"pulls": [opened["pull_request"]]}))
    project, out = tmp_path / "elsewhere", tmp_path / "out"
    result = CliRunner().invoke(cli, ["-p", str(project), "--gateway", "ci", "github", "--event-name", "pull_request",
                                      "--event-path", str(event), "--answers", str(answers), "--output-dir", str(out),
                                      "run-all"],
                                env={"GITHUB_ACTIONS": None, "GITHUB_TOKEN": None, "MESHBOT_CICD_BOT": None})
    assert result.exit_code == 1, result.output   # no project there
    comment = shown((out / "comment.md").read_text())
    assert f"{project}/config.yaml" in comment and "(ci)" in comment, comment[:3000]
