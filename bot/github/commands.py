"""PR comment text → exactly one of Command, Reply (help or usage) or Ignore."""

from __future__ import annotations

from dataclasses import dataclass

COMMANDS = ("deploy", "rollback")
HELP = ("meshbot commands: `{prefix}deploy` applies the prod plan of this PR "
        "(needs write access and the required approvals); `{prefix}rollback [PLAN_ID]` serves the merge "
        "environment's previous plan (or PLAN_ID) again, nothing recomputed (required approvers only); "
        "`{prefix}help` shows this message.")


@dataclass(frozen=True)
class Command:
    name: str                 # one of COMMANDS
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class Reply:
    text: str


@dataclass(frozen=True)
class Ignore:
    reason: str


ParsedComment = Command | Reply | Ignore


def command_prefix(namespace: str | None) -> str:
    """The text that starts a command: `/` or `/<namespace>/`.

    >>> command_prefix(None), command_prefix("meshbot"), command_prefix("/prod/")
    ('/', '/meshbot/', '/prod/')
    """
    ns = (namespace or "").strip().strip("/")
    return f"/{ns}/" if ns else "/"


def parse_comment(body: str, *, namespace: str | None = None, enabled: bool = True) -> ParsedComment:
    """Parse a comment: only a first non-empty line starting with the prefix is a command.

    >>> parse_comment("/deploy")
    Command(name='deploy', args=())
    >>> parse_comment("/meshbot/deploy now", namespace="meshbot")
    Command(name='deploy', args=('now',))
    >>> parse_comment("/deploy", namespace="meshbot")
    Ignore(reason='not a meshbot command')
    >>> parse_comment("looks good to me")
    Ignore(reason='not a meshbot command')
    """
    prefix = command_prefix(namespace)
    line = next((ln.strip() for ln in (body or "").splitlines() if ln.strip()), "")
    if not line.startswith(prefix):
        return Ignore("not a meshbot command")
    words = line[len(prefix):].split()
    if not words or "/" in words[0]:
        return Ignore("not a meshbot command")
    name = words[0].lower()
    if name == "help":
        return Reply(HELP.format(prefix=prefix))
    if name not in COMMANDS:
        if prefix == "/":
            return Ignore(f"`/{name}` is not a meshbot command")   # other bots share the bare slash
        return Reply(f"unknown command `{prefix}{name}`. " + HELP.format(prefix=prefix))
    if not enabled:
        return Reply(f"`{prefix}{name}` is disabled (cicd_bot.enable_deploy_command is false).")
    return Command(name=name, args=tuple(words[1:]))
