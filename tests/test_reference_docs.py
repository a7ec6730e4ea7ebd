"""docs/cli.md and docs/settings.md are what bot/cli/reference.py writes from the click commands and the settings
dataclasses: a flag or setting added without its page regenerated fails here."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import yaml

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


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_between_the_pages_lands_on_a_page_and_heading_that_exist():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    anchors = {p.resolve(): {_anchor(h) for h in re.findall(r"^#+ (.+)$", p.read_text(), re.M)} for p in pages}
    broken = []
    for page in pages:
        for target, anchor in re.findall(r"\]\(([^)#\s:]*)(?:#([^)\s]+))?\)", page.read_text()):
            path = (page.parent / target).resolve() if target else page.resolve()
            if not path.exists() or (anchor and path.suffix == ".md" and anchor not in anchors.get(path, set())):
                broken.append(f"{page.name}: ({target}#{anchor})")
    assert broken == []


def test_the_action_page_names_every_input_and_output_of_action_yml():
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    page = (ROOT / "docs" / "action.md").read_text()
    missing = [name for name in (*action["inputs"], *action["outputs"]) if f"`{name}`" not in page]
    assert missing == []
