"""The README's quickstart, command by command, on a fresh `meshbot init`: every command exits 0.

The commands come from the first ```bash block under "## Quickstart", one a line. `meshbot ...` lines run
through the real CLI in this process (on the test run's one Spark session); other lines run in bash.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

from click.testing import CliRunner

from bot.cli import cli

ROOT = Path(__file__).resolve().parent.parent
SHELL = ("&&", "||", "|", ">", ">>", "<", ";")


def quickstart_commands() -> list[str]:
    section = (ROOT / "README.md").read_text().split("\n## Quickstart\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "README.md: no ```bash block under ## Quickstart"
    return [line.strip() for line in block.group(1).splitlines() if line.strip() and not line.strip().startswith("#")]


def test_the_quickstart_is_one_command_a_line_from_init_to_a_dev_plan():
    commands = quickstart_commands()
    assert commands[0] == "meshbot init my_project"
    assert not [c for c in commands if c.endswith("\\")]
    plans = [c for c in commands if " plan" in c]
    # prod first: a new dev environment with no change against prod has nothing to plan
    assert plans[0] == "meshbot -p my_project plan --auto-apply" and any(" plan dev " in c for c in plans[1:])


def test_every_quickstart_command_works_on_a_fresh_init(tmp_path, monkeypatch, clean_catalog):
    monkeypatch.chdir(tmp_path)
    for command in quickstart_commands():
        words = shlex.split(command)
        if words[0] == "meshbot" and not set(words) & set(SHELL):
            result = CliRunner().invoke(cli, words[1:])
            assert result.exit_code == 0, (command, result.output, result.exception)
        else:
            done = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, (command, done.stdout, done.stderr)
    assert (tmp_path / "my_project" / ".gitignore").read_text().splitlines() == [".meshbot/"]
