"""Write the bundled example project (a small shop on Spark) into a directory."""

from __future__ import annotations

import shutil
from pathlib import Path

from bot.errors import ConfigError

EXAMPLE_DIR = Path(__file__).with_name("example")


def write_example(target: Path) -> None:
    """Copy the example project into `target`, which must be absent or empty, with a `.gitignore` that
    keeps `.meshbot/` out of Git."""
    target = Path(target)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ConfigError("refusing to write the example project into a non-empty directory", path=target)
    target.mkdir(parents=True, exist_ok=True)
    for source in sorted(EXAMPLE_DIR.rglob("*")):
        relative = source.relative_to(EXAMPLE_DIR)
        if any(part.startswith(".") or part == "__pycache__" for part in relative.parts):
            continue
        if source.is_dir():
            (target / relative).mkdir(parents=True, exist_ok=True)
        else:
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target / relative)
    # what meshbot keeps next to a project (caches, local Spark's warehouse and logs) is no source file
    (target / ".gitignore").write_text(".meshbot/\n")
