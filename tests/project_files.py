"""Write a test project's files (relative path -> text) under a root folder."""

from __future__ import annotations

from pathlib import Path


def write_files(root: Path, files: dict[str, str]) -> Path:
    """Write each file, creating its folders; returns `root`."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root
