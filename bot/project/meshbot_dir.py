"""The project's `.meshbot` folder, refused when a symlink there could send meshbot's writes and deletes out of the project.

meshbot writes its caches, SQLite state, warehouse, catalog and logs under `PROJECT/.meshbot`, and the
GitHub Action deletes, restores and saves `PROJECT/.meshbot/cache`. The files of a checkout are hostile
input: a `.meshbot` committed as a symlink to `/home/runner` would take all of that there. So `.meshbot`,
`.meshbot/cache` and anything directly in either may not be a symlink (a dangling one included).

Standard library only: the action runs this file with `python -I` before meshbot is installed,
`python -I bot/project/meshbot_dir.py PROJECT_PATH`, which also refuses a symlink on the way to the
project folder below the current directory (the workspace), prints one `::error::` line naming the
path and exits 1; it prints nothing and exits 0 when nothing is a symlink.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path, PurePath

MESHBOT_DIR = ".meshbot"
CACHE_DIR = "cache"


def symlink_in(root: Path) -> Path | None:
    """The first symlink among root/.meshbot, root/.meshbot/cache and what is directly in either; None
    when there is none (or no such folder)."""
    folder = root / MESHBOT_DIR
    if folder.is_symlink():
        return folder
    for directory in (folder, folder / CACHE_DIR):
        try:
            entries = os.scandir(directory)
        except OSError:   # absent, not a folder, unreadable: nothing in it to follow
            continue
        with entries:
            for entry in sorted(entries, key=lambda e: e.name):
                if entry.is_symlink():
                    return Path(entry.path)
    return None


def symlink_on_the_way(base: Path, relative: PurePath) -> Path | None:
    """The first of base/relative's leading parts (below `base`) that is a symlink, or None."""
    path = base
    for part in relative.parts:
        path = path / part
        if part not in (".", "..") and path.is_symlink():
            return path
    return None


def refusal(link: Path, base: Path) -> str:
    """Why `link` stops meshbot, naming it relative to `base` (the project, or the action's workspace)."""
    try:
        where = link.relative_to(base).as_posix()
    except ValueError:
        where = str(link)
    try:
        target = os.readlink(link)
    except OSError:
        target = "?"
    return (f"`{where}` is a symlink (to `{target}`): meshbot writes and deletes under the project's `.meshbot/` "
            "and follows no symlink there or on the way to it; nothing was changed. Remove the link (state and "
            "tables can live elsewhere: the gateway's state_connection, spark.sql.warehouse.dir)")


def checked(root: Path) -> Path:
    """root/.meshbot, once no symlink is there (else a ConfigError naming the link)."""
    link = symlink_in(root)
    if link is not None:
        from bot.errors import ConfigError   # meshbot's callers only: the action's `python -I` run never gets here

        raise ConfigError(refusal(link, root), path=link)
    return root / MESHBOT_DIR


def main(argv: list[str]) -> int:
    """Exit 1 with a workflow error when a symlink lies on the way to, or in, any PROJECT_PATH's `.meshbot/`."""
    if not argv:
        print("usage: python -I meshbot_dir.py PROJECT_PATH [PROJECT_PATH ...]", file=sys.stderr)
        return 2
    for folder in argv:
        workspace = Path.cwd()
        project = Path(folder)
        if project.is_absolute():
            try:
                relative: PurePath = project.relative_to(workspace)
            except ValueError:   # outside the workspace: only its last part is the checkout's to shape
                workspace, relative = project.parent, PurePath(project.name)
        else:
            relative = project
        link = symlink_on_the_way(workspace, relative) or symlink_in(workspace / relative)
        if link is not None:
            message = refusal(link, workspace).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
            print(f"::error title=meshbot::{message}", flush=True)   # a path's line break starts no command
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
