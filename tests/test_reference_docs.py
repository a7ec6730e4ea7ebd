"""docs/cli.md and docs/settings.md are what bot/cli/reference.py writes from the click commands and the settings
dataclasses: a flag or setting added without its page regenerated fails here."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from bot.cli.reference import PAGES, REGENERATE, SECTIONS, command_docs, setting_docs, write
from bot.github.settings import BotSettings
from bot.project.config import _CONFIG_KEYS

ROOT = Path(__file__).resolve().parent.parent


def test_the_committed_reference_pages_are_what_the_generator_writes():
    for name, page in PAGES.items():
        path = ROOT / "docs" / name
        committed = path.read_text(encoding="utf-8") if path.is_file() else ""
        assert committed == page(), f"docs/{name} is out of date: run `{REGENERATE}` in the checkout and commit it"


def test_the_cli_page_has_every_command_and_flag():
    page = PAGES["cli.md"]()
    commands = command_docs()
    assert {"meshbot", "meshbot plan", "meshbot github", "meshbot github run-all"} <= {c.path for c in commands}
    for command in commands:
        assert f"## `{command.path}`" in page, command.path
        assert all(option.help for option in command.options), command.path
        assert all(f"`{option.names}`" in page for option in command.options), command.path
    plan = next(c for c in commands if c.path == "meshbot plan")
    assert "meshbot plan [OPTIONS] [ENVIRONMENT]" == plan.usage
    assert any(o.names == "-e, --end TEXT" for o in plan.options)


def test_every_config_key_and_bot_setting_is_documented():
    keys = {s.key for _, prefix, cls in SECTIONS for s in setting_docs(cls, prefix)}
    assert _CONFIG_KEYS <= {key.split(".")[0] for key in keys}
    undocumented = [f.name for f in dataclasses.fields(BotSettings) if not f.metadata.get("doc")]
    assert undocumented == [], "give each cicd_bot setting documented(default, doc)"


def test_the_generator_writes_both_pages(tmp_path):
    written = write(tmp_path / "docs")
    assert sorted(p.name for p in written) == ["cli.md", "settings.md"]
    assert all(p.read_text().startswith("# ") and "\n\n\n" not in p.read_text() for p in written)
