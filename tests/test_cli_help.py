"""Every command and every flag of the `meshbot` CLI says what it does in --help."""

from __future__ import annotations

import click

from bot.cli.app import _attach_github, cli


def _commands(group: click.Group, prefix: str = "meshbot"):
    for name, command in sorted(group.commands.items()):
        yield f"{prefix} {name}", command
        if isinstance(command, click.Group):
            yield from _commands(command, f"{prefix} {name}")


def test_every_command_and_flag_has_a_help_line():
    _attach_github()
    missing = []
    for path, command in [("meshbot", cli), *_commands(cli)]:
        if not (command.help or command.short_help):
            missing.append(path)
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden and not (param.help or "").strip():
                missing.append(f"{path} {param.opts[0]}")
    assert not missing, missing
