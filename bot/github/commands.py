"""PR comment text → exactly one of Command, Reply (help or usage) or Ignore."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from bot.report.markdown import render_part

COMMANDS = ("deploy", "rollback")


@dataclass(frozen=True)
class Command:
    name: str                 # one of COMMANDS
    args: tuple[str, ...] = ()


class ReplyKind(str, Enum):
    HELP = "help"
    UNKNOWN_COMMAND = "unknown_command"
    DISABLED = "disabled"                       # cicd_bot.enable_deploy_command is false
    UNKNOWN_OPTIONS = "unknown_options"         # `/deploy` with options it does not know
    BAD_ROLLBACK_ARGS = "bad_rollback_args"     # `/rollback` with more than one plan id, or not hex


@dataclass(frozen=True)
class Reply:
    """An answer to a comment; templates/outcomes.md.j2 (`reply`) writes its text."""

    kind: ReplyKind
    prefix: str = "/"
    command: str = ""                    # the command the comment named
    unknown: tuple[str, ...] = ()        # UNKNOWN_OPTIONS: what it did not know
    options: tuple[str, ...] = ()        # UNKNOWN_OPTIONS: what it knows
    environment: str = ""                # BAD_ROLLBACK_ARGS: the environment `/rollback` serves

    @property
    def text(self) -> str:
        return render_part("outcomes.md.j2", "reply", self)


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
        return Reply(ReplyKind.HELP, prefix)
    if name not in COMMANDS:
        if prefix == "/":
            return Ignore(f"`/{name}` is not a meshbot command")   # other bots share the bare slash
        return Reply(ReplyKind.UNKNOWN_COMMAND, prefix, name)
    if not enabled:
        return Reply(ReplyKind.DISABLED, prefix, name)
    return Command(name=name, args=tuple(words[1:]))
