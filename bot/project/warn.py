"""Warnings about project files (a setting meshbot does not use): printed once per process, never fatal."""

from __future__ import annotations

import sys
from pathlib import Path

_SEEN: set[str] = set()
EMITTED: list[str] = []   # every warning given, in order (tests and reports read it)


def project_warning(message: str, *, path: Path | str | None, line: int | None = None) -> str:
    """Print `Warning: <file>:<line>: <message>` to stderr (once per process) and return the text."""
    where = f"{path}:{line}: " if path and line else f"{path}: " if path else ""
    text = f"{where}{message}"
    if text not in _SEEN:
        _SEEN.add(text)
        EMITTED.append(text)
        print(f"Warning: {text}", file=sys.stderr)
    return text
