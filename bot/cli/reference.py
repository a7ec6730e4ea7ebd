"""The generated reference pages: docs/cli.md from the click commands, docs/settings.md from the settings dataclasses."""

from __future__ import annotations

import dataclasses
import inspect
import sys
from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import click

from bot.cli.app import _attach_github, cli
from bot.github.settings import SQLMESH_ACCEPTED, SQLMESH_ALIASES, BotSettings
from bot.project.config import (FormatConfig, LinterConfig, ModelDefaults, ProjectConfig, SparkConnection,
                                StateConnection, UserConfig)
from bot.report.markdown import render

REGENERATE = "python -m bot.cli.reference"   # run from the checkout's root: writes docs/cli.md and docs/settings.md


@dataclass(frozen=True)
class OptionDoc:
    names: str                   # as --help shows them: `-o, --on TEXT`
    help: str
    default: str | None
    choices: tuple[str, ...]
    envvar: str | None


@dataclass(frozen=True)
class CommandDoc:
    path: str                    # `meshbot plan`
    usage: str
    help: str
    summary: str                 # the first sentence, for the table of commands
    options: tuple[OptionDoc, ...]


@dataclass(frozen=True)
class SettingDoc:
    key: str                     # the whole YAML path: `gateways.<name>.connection.master`
    type: str
    default: str
    literal: bool                # the default is a value (shown as code), not a phrase
    doc: str


@dataclass(frozen=True)
class SectionDoc:
    title: str
    settings: tuple[SettingDoc, ...]


@dataclass(frozen=True)
class SettingsPage:
    sections: tuple[SectionDoc, ...]
    aliases: tuple[tuple[str, str], ...]   # SQLMesh's cicd_bot names meshbot reads as its own
    accepted: tuple[str, ...]              # SQLMesh's cicd_bot names accepted with a warning


# --------------------------------------------------------------------------------------------
# docs/cli.md
# --------------------------------------------------------------------------------------------

def _commands(ctx: click.Context) -> Iterator[click.Context]:
    """`ctx` and the context of every visible command under it, depth first, by name."""
    yield ctx
    command = ctx.command
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from _commands(click.Context(sub, info_name=name, parent=ctx))


def _help(command: click.Command) -> str:
    text = inspect.cleandoc(command.help or command.short_help or "")
    return " ".join(line for line in text.splitlines() if line.strip() != "\b")


def _option(param: click.Option, ctx: click.Context) -> OptionDoc | None:
    record = param.get_help_record(ctx)
    if record is None:
        return None
    default = None if param.multiple or param.is_flag else param.get_default(ctx, call=False)
    # only plain values: click 8.3+ stands an UNSET sentinel for "no default"
    shown = str(default) if isinstance(default, (str, int, float)) and default != "" else None
    choices = tuple(str(c) for c in param.type.choices) if isinstance(param.type, click.Choice) else ()
    envvar = param.envvar if isinstance(param.envvar, str) else None
    return OptionDoc(names=record[0], help=" ".join((param.help or "").split()), default=shown,
                     choices=choices, envvar=envvar)


def command_docs() -> tuple[CommandDoc, ...]:
    """Every command of `meshbot`, the group first, with its usage and options (not --help)."""
    _attach_github()
    docs = []
    for ctx in _commands(click.Context(cli, info_name="meshbot")):
        command = ctx.command
        options = (_option(p, ctx) for p in command.params if isinstance(p, click.Option))
        text = _help(command)
        docs.append(CommandDoc(path=ctx.command_path, usage=" ".join([ctx.command_path,
                                                                       *command.collect_usage_pieces(ctx)]),
                               help=text, summary=text.split(". ")[0].rstrip(".") + ".",
                               options=tuple(o for o in options if o is not None)))
    return tuple(docs)


def cli_page() -> str:
    return str(render("docs_cli.md.j2", {"commands": command_docs(), "regenerate": REGENERATE}))


# --------------------------------------------------------------------------------------------
# docs/settings.md
# --------------------------------------------------------------------------------------------

# (title, YAML path of the section's keys, the dataclass they are read into)
SECTIONS: tuple[tuple[str, str, type], ...] = (
    ("Top-level keys", "", ProjectConfig),
    ("`model_defaults`", "model_defaults.", ModelDefaults),
    ("A gateway's `connection` (and `test_connection`, for unit tests)", "gateways.<name>.connection.",
     SparkConnection),
    ("A gateway's `state_connection`", "gateways.<name>.state_connection.", StateConnection),
    ("`users`", "users[].", UserConfig),
    ("`linter`", "linter.", LinterConfig),
    ("`format`", "format.", FormatConfig),
    ("`cicd_bot`: the GitHub bot", "cicd_bot.", BotSettings),
)
_SIMPLE_TYPES = {"bool": "true or false", "int": "whole number", "float": "number", "str": "text"}


def _type_of(annotation: str) -> str:
    """The YAML shape of a field's annotation.

    >>> _type_of("str | None"), _type_of("tuple[str, ...]"), _type_of("dict[str, Any]"), _type_of("bool")
    ('text', 'list of text', 'mapping', 'true or false')
    """
    text = annotation.removesuffix(" | None")
    if text in _SIMPLE_TYPES:
        return _SIMPLE_TYPES[text]
    if text.startswith(("tuple[", "frozenset[")) and not text.startswith("tuple[tuple["):
        return "list of text" if text.split("[", 1)[1].startswith("str") else "list of mappings"
    return "mapping"


def _shown_default(field: dataclasses.Field) -> str:
    if "shown" in field.metadata:
        return str(field.metadata["shown"])
    if field.default is not MISSING:
        value: Any = field.default
    elif field.default_factory is not MISSING:
        value = field.default_factory()
    else:
        return "required"
    if dataclasses.is_dataclass(value):
        raise ValueError(f"field `{field.name}`: give documented(..., shown=...) for a default the reference can show")
    if isinstance(value, bool):
        return "true" if value else "false"
    if value in (None, "", (), {}, frozenset()):
        return "none"
    return ", ".join(map(str, value)) if isinstance(value, (tuple, frozenset)) else str(value)


def setting_docs(settings: type, prefix: str) -> tuple[SettingDoc, ...]:
    """The documented fields of one settings dataclass (a field without `doc` is not read from YAML)."""
    return tuple(SettingDoc(key=field.metadata.get("key") or prefix + field.name,
                            type=field.metadata.get("shape") or _type_of(str(field.type)),
                            default=_shown_default(field), doc=field.metadata["doc"],
                            literal="shown" not in field.metadata and _shown_default(field) not in ("none", "required"))
                 for field in dataclasses.fields(settings) if field.metadata.get("doc"))


def settings_page() -> str:
    page = SettingsPage(sections=tuple(SectionDoc(title, setting_docs(cls, prefix)) for title, prefix, cls in SECTIONS),
                        aliases=tuple(SQLMESH_ALIASES.items()), accepted=SQLMESH_ACCEPTED)
    view = {"page": page, "regenerate": REGENERATE, "env_var": "{{ env_var('NAME') }}"}
    return str(render("docs_settings.md.j2", view))


PAGES: dict[str, Callable[[], str]] = {"cli.md": cli_page, "settings.md": settings_page}


def write(folder: Path) -> list[Path]:
    """Write every generated page into `folder`; the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, page in PAGES.items():
        (folder / name).write_text(page(), encoding="utf-8")
        written.append(folder / name)
    return written


if __name__ == "__main__":
    for path in write(Path(sys.argv[1] if len(sys.argv) > 1 else "docs")):
        print(f"wrote {path}")
