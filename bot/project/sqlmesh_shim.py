"""Let SQLMesh project files (`from sqlmesh import macro, model`) import while meshbot runs them."""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import sys
import threading
import traceback
import types
from datetime import date, datetime
from enum import Enum
from pathlib import Path
from typing import Any, Iterator, Union

from bot.errors import ConfigError
from bot.project.files import read_text
from bot.project.limits import check_file
from bot.project import sqlmesh_config, sqlmesh_date
from bot.project.model import KindName

# Fake module name -> {attribute: (meshbot module, attribute)}, resolved lazily on first access;
# a target module of None means this module.
# The linter's names live a layer above, in bot.quality.lint: only a user file asking for them (a
# `linter/*.py` rule) imports that module, never the loader itself.
_LINT = "bot.quality.lint.user_rules"
_MACRO = {"macro": ("bot.project.macros", "macro"), "MacroEvaluator": ("bot.project.macros", "MacroEvaluator"),
          "SQL": (None, "SQL")}
_MODEL = {"model": ("bot.project.python_model", "model"), "ModelKindName": (None, "KindName")}
_DATES = {name: ("bot.project.sqlmesh_date", name) for name in sqlmesh_date.__all__}
_RULES = {name: (_LINT, name) for name in ("Rule", "RuleViolation", "Range", "Position")}
_MATERIALIZATION = {"CustomMaterialization": ("bot.project.materializations", "CustomMaterialization")}
_CUSTOM_KIND = {"CustomKind": ("bot.project.materializations", "CustomKind")}
_KIND_CLASSES = {name: (None, name) for name in (
    "FullKind", "ViewKind", "IncrementalByTimeRangeKind", "IncrementalByUniqueKeyKind", "IncrementalByPartitionKind",
    "IncrementalUnmanagedKind", "SCDType2ByTimeKind", "SCDType2ByColumnKind", "SeedKind", "ExternalKind",
    "EmbeddedKind", "TimeColumn")}
_KINDS = {**_KIND_CLASSES, **_CUSTOM_KIND, "ModelKindName": (None, "KindName"),
          "OnDestructiveChange": ("bot.project.model", "OnDestructiveChange")}

_CONFIG = "bot.project.sqlmesh_config"
_LAZY: dict[str, dict[str, tuple[str | None, str]]] = {
    **{module: {name: ("bot.project.model" if name == "OnDestructiveChange" else _CONFIG, name) for name in names}
       for module, names in sqlmesh_config.MODULES.items()},
    "sqlmesh": {**_MACRO, **_MODEL, **_MATERIALIZATION, **_CUSTOM_KIND, "QueryOrDF": (None, "QueryOrDF"),
                "Model": (_LINT, "ModelView"), "ExecutionContext": (None, "ExecutionContext"),
                "EngineAdapter": (None, "EngineAdapter"), "str_to_bool": (None, "str_to_bool")},
    "sqlmesh.core": {},
    "sqlmesh.core.macros": _MACRO,
    "sqlmesh.core.model": {**_MODEL, **_KINDS, **{name: (_LINT, "ModelView")
                                         for name in ("Model", "SqlModel", "PythonModel", "SeedModel")}},
    "sqlmesh.core.linter": {},
    "sqlmesh.core.linter.rule": _RULES,
    "sqlmesh.core.model.kind": _KINDS,
    "sqlmesh.core.snapshot": {},
    "sqlmesh.core.snapshot.evaluator": _MATERIALIZATION,
    "sqlmesh.core.engine_adapter._typing": {"QueryOrDF": (None, "QueryOrDF")},
    "sqlmesh.core.context": {"ExecutionContext": (None, "ExecutionContext")},
    "sqlmesh.core.engine_adapter": {"EngineAdapter": (None, "EngineAdapter")},
    "sqlmesh.utils": {"str_to_bool": (None, "str_to_bool")},
    "sqlmesh.utils.date": _DATES,
    "sqlmesh.utils.pydantic": {"validate_string": (None, "validate_string")},
    "sqlmesh.integrations.github.cicd.config": {name: (None, name) for name in (
        "GithubCICDBotConfig", "MergeMethod")},
    "sqlmesh.core.notification_target": {name: (None, name) for name in (
        "NotificationEvent", "ConsoleNotificationTarget", "SlackWebhookNotificationTarget",
        "SlackApiNotificationTarget", "BasicSMTPNotificationTarget")},
}


_ConfigObject = sqlmesh_config.ConfigObject
Config = sqlmesh_config.CLASSES["Config"]
_config_class = sqlmesh_config.config_class
ConsoleNotificationTarget = _config_class("ConsoleNotificationTarget", "console")
SlackWebhookNotificationTarget = _config_class("SlackWebhookNotificationTarget", "slack_webhook")
SlackApiNotificationTarget = _config_class("SlackApiNotificationTarget", "slack_api")   # refused when loaded
BasicSMTPNotificationTarget = _config_class("BasicSMTPNotificationTarget", "smtp")      # refused when loaded


GithubCICDBotConfig = _config_class("GithubCICDBotConfig", "github")


class MergeMethod(str, Enum):
    MERGE = "merge"
    SQUASH = "squash"
    REBASE = "rebase"


class NotificationEvent(str, Enum):
    APPLY_START = "apply_start"
    APPLY_END = "apply_end"
    APPLY_FAILURE = "apply_failure"
    RUN_START = "run_start"
    RUN_END = "run_end"
    RUN_FAILURE = "run_failure"
    AUDIT_FAILURE = "audit_failure"
    MIGRATION_START = "migration_start"
    MIGRATION_END = "migration_end"
    MIGRATION_FAILURE = "migration_failure"


def python_config(path: Any) -> dict[str, Any]:
    """The settings of a SQLMesh `config.py`: its `config` (or only) Config object, as config.yaml's mapping."""
    path = Path(path)
    namespace: dict[str, Any] = {"__file__": str(path), "__name__": "meshbot_project_config"}
    source = read_text(path)
    try:
        with sqlmesh_shim(), project_imports(path.parent):
            exec(compile(source, str(path), "exec"), namespace)
    except Exception as error:  # a user file: report any failure with its line
        import traceback
        line = error.lineno if isinstance(error, SyntaxError) else next(
            (f.lineno for f in reversed(traceback.extract_tb(error.__traceback__)) if f.filename == str(path)), None)
        reason = unsupported_import(error) or f"{type(error).__name__}: {error}"
        raise ConfigError(f"cannot load config.py: {reason}", path=path, line=line) from None
    found = namespace.get("config")
    if not isinstance(found, _ConfigObject):
        configs = [v for v in namespace.values() if isinstance(v, Config)]
        if len(configs) != 1:
            raise ConfigError("config.py must define `config = Config(...)`", path=path)
        found = configs[0]
    return found.to_raw()


class TimeColumn:
    """SQLMesh's TimeColumn: `TimeColumn("ds")`, `TimeColumn(column="ds", format="%Y%m%d")`."""

    def __init__(self, column: Any, format: str | None = None):
        self.column, self.format = column, format

    def as_property(self) -> Any:
        name = getattr(self.column, "name", None) or str(self.column)
        return (name, self.format) if self.format else name


class _ModelKind:
    """A SQLMesh kind class as a Python model's `@model(kind=...)` gives it; `kind_properties()` is the
    `{"name": ..., property: value}` mapping meshbot reads (names of columns, TimeColumn as text)."""

    kind_name = ""

    def __init__(self, **properties: Any):
        self.properties = {k: v for k, v in properties.items() if k not in ("name", "dialect")}

    @property
    def name(self) -> KindName:
        return KindName(self.kind_name)

    def kind_properties(self) -> dict[str, Any]:
        return {"name": self.kind_name, **{key: _kind_property(value) for key, value in self.properties.items()}}


def _kind_property(value: Any) -> Any:
    if isinstance(value, TimeColumn):
        return value.as_property()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_kind_property(v) for v in value]
    if hasattr(value, "sql") and hasattr(value, "name"):   # a sqlglot column or identifier
        return value.name or value.sql()
    return value


def _kind_class(class_name: str, kind_name: str) -> type:
    return type(class_name, (_ModelKind,), {"kind_name": kind_name})


FullKind = _kind_class("FullKind", "FULL")
ViewKind = _kind_class("ViewKind", "VIEW")
IncrementalByTimeRangeKind = _kind_class("IncrementalByTimeRangeKind", "INCREMENTAL_BY_TIME_RANGE")
IncrementalByUniqueKeyKind = _kind_class("IncrementalByUniqueKeyKind", "INCREMENTAL_BY_UNIQUE_KEY")
IncrementalByPartitionKind = _kind_class("IncrementalByPartitionKind", "INCREMENTAL_BY_PARTITION")
IncrementalUnmanagedKind = _kind_class("IncrementalUnmanagedKind", "INCREMENTAL_UNMANAGED")
SCDType2ByTimeKind = _kind_class("SCDType2ByTimeKind", "SCD_TYPE_2_BY_TIME")
SCDType2ByColumnKind = _kind_class("SCDType2ByColumnKind", "SCD_TYPE_2_BY_COLUMN")
SeedKind = _kind_class("SeedKind", "SEED")
ExternalKind = _kind_class("ExternalKind", "EXTERNAL")
EmbeddedKind = _kind_class("EmbeddedKind", "EMBEDDED")


class ExecutionContext:
    """Stand-in for SQLMesh's ExecutionContext in annotations; the runner passes its own context."""


class EngineAdapter:
    """Stand-in for SQLMesh's EngineAdapter in annotations."""


class SQL(str):
    """SQLMesh's `SQL` type hint for macro arguments: the argument's SQL text."""


TimeLike = Union[date, datetime, str, int, float]
QueryOrDF = Any   # a sqlglot query or a DataFrame


def validate_string(value: Any) -> str:
    """SQLMesh's `sqlmesh.utils.pydantic.validate_string`: a sqlglot node's name, else the value as text."""
    return value.name if hasattr(value, "name") and hasattr(value, "sql") else str(value)


def str_to_bool(value: Any) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes", "y", "on")


def _module(name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__path__ = []  # a package, so `import sqlmesh.core.macros` resolves through sys.modules
    lazy = _LAZY[name]

    def __getattr__(attr: str) -> Any:
        if attr in lazy:
            source, target = lazy[attr]
            if source is None:
                return KindName if target == "KindName" else globals()[target]
            return getattr(importlib.import_module(source), target)
        raise AttributeError(f"meshbot does not provide `{name}.{attr}`")

    module.__getattr__ = __getattr__  # type: ignore[attr-defined]
    return module


def unsupported_import(error: BaseException) -> str | None:
    """For an import of a SQLMesh name meshbot lacks, a message naming it; None for any other error.

    >>> unsupported_import(ImportError("cannot import name 'X' from 'sqlmesh.core.macros'", name="sqlmesh.core.macros"))
    'meshbot does not provide `sqlmesh.core.macros.X` (SQLMesh is not installed; meshbot stands in for the names it supports)'
    """
    if not isinstance(error, ImportError):
        return None
    module = error.name or ""
    if not (module == "sqlmesh" or module.startswith("sqlmesh.")):
        return None
    if isinstance(error, ModuleNotFoundError):
        what = module
    else:
        text = str(error)
        attr = text.split("'")[1] if text.startswith("cannot import name '") else "?"
        what = f"{module}.{attr}"
    return f"meshbot does not provide `{what}` (SQLMesh is not installed; meshbot stands in for the names it supports)"


# `sys.modules` and `sys.path` belong to the whole process: user files imported from several threads
# at once (Python models evaluated by concurrent backfill tasks) would see another thread's shim or
# project folder taken away mid-import. One import of a user file at a time (reentrant: the two
# context managers below nest).
_USER_IMPORTS = threading.RLock()


@contextlib.contextmanager
def sqlmesh_shim() -> Iterator[None]:
    """While active, `import sqlmesh` gives meshbot's decorators, unless SQLMesh itself is installed."""
    with _USER_IMPORTS:
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


class SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """Compiles a project file's source on every import, never reading or writing `__pycache__`: a
    compiled file beside the project's code (committed in a pull request, where reviewers do not read
    it, or left by another job; an unchecked-hash .pyc is run without looking at the source at all) is
    never run in its place, and an edit within the same second is never missed."""

    def get_code(self, fullname: str) -> types.CodeType:
        path = self.get_filename(fullname)
        return self.source_to_code(self.get_data(path), path)


def source_spec(module_name: str, path: Path) -> importlib.machinery.ModuleSpec:
    """The spec that imports one project file from its source (SourceOnlyLoader)."""
    spec = importlib.util.spec_from_file_location(module_name, path,
                                                  loader=SourceOnlyLoader(module_name, str(path)))
    assert spec is not None
    return spec


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


@contextlib.contextmanager
def project_imports(root: Any) -> Iterator[None]:
    """The project root is importable (`from helper import x`, `from macros.utils import y`) while
    active, from source only (SourceOnlyLoader, also for packages below it); modules imported from the
    project are forgotten afterwards, so each load reads them afresh."""
    if root is None:
        yield
        return
    folder = str(root)

    def source_finder(path: str) -> importlib.machinery.FileFinder:
        if not _inside(os.path.abspath(path), os.path.abspath(folder)):
            raise ImportError("not a project folder")   # the next hook takes it
        return importlib.machinery.FileFinder(path, (SourceOnlyLoader, importlib.machinery.SOURCE_SUFFIXES))

    def forget_finders() -> None:
        for path in [p for p in sys.path_importer_cache if _inside(os.path.abspath(p), os.path.abspath(folder))]:
            sys.path_importer_cache.pop(path, None)

    with _USER_IMPORTS:
        before = set(sys.modules)
        forget_finders()
        sys.path_hooks.insert(0, source_finder)
        sys.path.insert(0, folder)
        try:
            yield
        finally:
            with contextlib.suppress(ValueError):
                sys.path.remove(folder)
            with contextlib.suppress(ValueError):
                sys.path_hooks.remove(source_finder)
            forget_finders()
            for name in set(sys.modules) - before:
                file = getattr(sys.modules.get(name), "__file__", None) or ""
                paths = list(getattr(sys.modules.get(name), "__path__", None) or ())
                if file.startswith(folder) or any(str(p).startswith(folder) for p in paths):
                    sys.modules.pop(name, None)


def project_root(path: Any) -> Any:
    """The nearest folder above `path` holding a config.yaml/config.yml/config.py, else None."""
    from pathlib import Path
    for parent in Path(path).resolve().parents:
        if any((parent / n).is_file() for n in ("config.yaml", "config.yml", "config.py")):
            return parent
    return None


def import_user_file(path: Path, *, root: Path, prefix: str = "meshbot_user", what: str = "") -> dict[str, Any]:
    """Import one of the project's Python files (macros, materializations) under the `sqlmesh` shim, with the
    project root importable; its names, or a ConfigError naming the file and the failing line."""
    check_file(path)
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]
    module_name = f"{prefix}_{digest}_{path.stem}"
    spec = source_spec(module_name, path)
    assert spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        with sqlmesh_shim(), project_imports(root):
            spec.loader.exec_module(module)
    except Exception as error:  # a user file: report any failure with its line
        line = next((f.lineno for f in reversed(traceback.extract_tb(error.__traceback__))
                     if Path(f.filename) == path), None)
        reason = unsupported_import(error) or f"{type(error).__name__}: {error}"
        raise ConfigError(f"cannot import{what}: {reason}", path=path, line=line) from error
    finally:
        sys.modules.pop(module_name, None)
    return vars(module)
