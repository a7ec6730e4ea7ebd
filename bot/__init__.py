"""meshbot: SQLMesh-compatible transformations on Spark with virtual data environments."""

from typing import Any

__version__ = "0.1.0"

_EXPORTS = {"macro": "bot.project.macros", "model": "bot.project.python_model"}


def __getattr__(name: str) -> Any:
    """Lazy re-exports for project files: `from bot import macro, model`."""
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'bot' has no attribute {name!r}")
