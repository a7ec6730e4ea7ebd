"""Let SQLMesh project files (`from sqlmesh import macro, model`) import while meshbot runs them."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
import types
from typing import Any, Iterator

from bot.project.model import KindName

# Fake module name -> {attribute: (meshbot module, attribute)}, resolved lazily on first access.
_LAZY = {
    "sqlmesh": {"macro": ("bot.project.macros", "macro"), "model": ("bot.project.python_model", "model")},
    "sqlmesh.core": {},
    "sqlmesh.core.macros": {"macro": ("bot.project.macros", "macro"),
                            "MacroEvaluator": ("bot.project.macros", "MacroEvaluator")},
    "sqlmesh.core.model": {"model": ("bot.project.python_model", "model")},
    "sqlmesh.core.model.kind": {},
    "sqlmesh.core.context": {},
}


class ExecutionContext:
    """Stand-in for SQLMesh's ExecutionContext in annotations; the runner passes its own context."""


def _module(name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__path__ = []  # a package, so `import sqlmesh.core.macros` resolves through sys.modules
    lazy = _LAZY[name]

    def __getattr__(attr: str) -> Any:
        if attr in lazy:
            source, target = lazy[attr]
            return getattr(importlib.import_module(source), target)
        raise AttributeError(f"meshbot does not provide `{name}.{attr}`")

    module.__getattr__ = __getattr__  # type: ignore[attr-defined]
    module.ExecutionContext = ExecutionContext  # type: ignore[attr-defined]
    module.ModelKindName = KindName  # type: ignore[attr-defined]
    return module


@contextlib.contextmanager
def sqlmesh_shim() -> Iterator[None]:
    """While active, `import sqlmesh` gives meshbot's decorators, unless SQLMesh itself is installed."""
    if "sqlmesh" in sys.modules or importlib.util.find_spec("sqlmesh") is not None:
        yield
        return
    modules = {name: _module(name) for name in _LAZY}
    sys.modules.update(modules)
    try:
        yield
    finally:
        for name in modules:
            sys.modules.pop(name, None)
