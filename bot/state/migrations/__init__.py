"""Numbered state migrations (`vNNNN_<what>.py`, each with VERSION and upgrade()), found in order."""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

_MODULE_NAME = re.compile(r"^v(\d{4})_\w+$")


@dataclass(frozen=True)
class Migration:
    version: int
    module: str
    upgrade: Callable[..., None]   # upgrade(conn, *, schema) inside the migration transaction


@lru_cache(maxsize=1)
def all_migrations() -> tuple[Migration, ...]:
    """Every migration module of this package, sorted by version; versions must be 1..N without gaps."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        match = _MODULE_NAME.match(info.name)
        if not match:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        if module.VERSION != int(match.group(1)):
            raise RuntimeError(f"migration {info.name} declares VERSION = {module.VERSION}")
        found.append(Migration(module.VERSION, info.name, module.upgrade))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(f"state migrations are not numbered 1..N: {[m.module for m in found]}")
    return tuple(found)


def latest_version() -> int:
    """The schema version this meshbot writes."""
    return len(all_migrations())
