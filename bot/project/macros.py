"""SQLMesh-style macros: interval variables, the @macro registry, and the evaluator that expands them."""

from __future__ import annotations

import functools
from collections import ChainMap
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any, Callable, Mapping, MutableMapping

import sqlglot
from sqlglot import exp

from bot.errors import ConfigError
from bot.project.macro_args import BadArgument, bind_arguments
from bot.project.macro_builtins import BUILTINS, to_expression
from bot.project.sqlmesh_shim import import_user_file
from bot.project.warn import project_warning
from bot.project.sqltext import braced_text, fill_braced, has_braced
from bot.project.sqltext import macro_call_name as macro_name
from bot.project.sqltext import parse_sql
from bot.timeline.times import to_datetime, to_ds, to_ts

_MACRO_ATTR = "__meshbot_macro__"

MacroFunction = Callable[..., Any]
# the modules where `@macro` marked a function: which modules a macro file imports may hold a package's macros
_MARKED: set[str] = set()
ColumnsLookup = Callable[[str], "tuple[tuple[str, str], ...] | None"]  # model name -> declared columns


def macro(name: str | MacroFunction | None = None) -> Any:
    """Mark a function in macros/ as a user macro: `@macro()` or `@macro("other_name")`.

    The function is called with the evaluator first and sqlglot expressions as arguments.
    """
    def mark(func: MacroFunction) -> MacroFunction:
        setattr(func, _MACRO_ATTR, (name if isinstance(name, str) else func.__name__).lower())
        _MARKED.add(str(getattr(func, "__module__", "") or ""))
        return func

    if callable(name):
        return mark(name)
    return mark


@dataclass(frozen=True)
class MacroRegistry:
    """User macros of one project, by lower-case name."""

    functions: Mapping[str, MacroFunction] = field(default_factory=dict)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.functions)


EMPTY_REGISTRY = MacroRegistry()


@functools.lru_cache(maxsize=64)
def _load_cached(root: Path, stamp: tuple[tuple[str, int, int], ...]) -> MacroRegistry:
    functions: dict[str, MacroFunction] = {}
    packages: list[ModuleType] = []
    for file_name, _, _ in stamp:
        path = root / "macros" / file_name
        for value in import_user_file(path, root=path.resolve().parent.parent).values():
            name = getattr(value, _MACRO_ATTR, None)
            if callable(value) and isinstance(name, str):
                functions[name] = value
            elif isinstance(value, ModuleType) and value.__name__.split(".")[0] not in _ENGINE_PACKAGES:
                packages.append(value)
    for name, func in _package_macros(packages).items():
        functions.setdefault(name, func)   # the project's own definition of a name wins
    return MacroRegistry(MappingProxyType(functions))


_ENGINE_PACKAGES = frozenset({"sqlmesh", "bot", "sqlglot"})


def _package_macros(modules: list[ModuleType]) -> dict[str, MacroFunction]:
    """The `@macro` functions of the modules a macro file imported (`from pkg import macros`, `import pkg`)
    and of their submodules: SQLMesh registers every @macro its macro files' imports run, wherever it is
    defined, so a package's macros count as the project's (whether or not it was imported before)."""
    found: dict[str, MacroFunction] = {}
    seen: set[str] = set()
    stack = list(modules)
    while stack:
        module = stack.pop()
        if module.__name__ in seen or not any(marked == module.__name__ or marked.startswith(module.__name__ + ".")
                                              for marked in _MARKED):
            continue   # no @macro was ever marked in it or below it (os, pandas...)
        seen.add(module.__name__)
        for value in list(vars(module).values()):
            name = getattr(value, _MACRO_ATTR, None)
            if callable(value) and isinstance(name, str):
                found.setdefault(name, value)
            elif isinstance(value, ModuleType) and value.__name__.startswith(module.__name__ + "."):
                stack.append(value)   # a submodule of the package
    return found


def macro_files(root: Path) -> list[Path]:
    """Every Python file under macros/ of the project at `root`, in subfolders and `__init__.py` too, as
    SQLMesh loads them (`macros/**/*.py`); bytecode and hidden folders left out."""
    folder = Path(root) / "macros"
    if not folder.is_dir():
        return []
    return sorted(path for path in folder.rglob("*.py") if path.is_file() and not any(
        part == "__pycache__" or part.startswith(".") for part in path.relative_to(folder).parts[:-1]))


def load_macros(root: Path) -> MacroRegistry:
    """Import every macro file of the project at `root` (macro_files); cached until a file changes."""
    files = macro_files(root)
    if not files:
        return EMPTY_REGISTRY
    folder = Path(root) / "macros"
    stamp = tuple((path.relative_to(folder).as_posix(), path.stat().st_mtime_ns, path.stat().st_size)
                  for path in files)
    return _load_cached(Path(root).resolve(), stamp)


def known_macro_names(root: Path) -> set[str]:
    """Built-in macro names plus the project's user macros, lower-case."""
    return set(BUILTINS) | set(load_macros(root).names)


def interval_variables(*, start: int, end: int, execution_time: int) -> dict[str, Any]:
    """Macro variables of the interval [start, end) in epoch ms; `end_*` values are inclusive.

    >>> v = interval_variables(start=1704067200000, end=1704153600000, execution_time=1704153600000)
    >>> v["start_ds"], v["end_ds"], v["end_ts"], v["end_millis"], v["execution_ds"]
    ('2024-01-01', '2024-01-01', '2024-01-01 23:59:59.999999', 1704153599999, '2024-01-02')
    """
    end_dt = to_datetime(end) - timedelta(microseconds=1)
    values: dict[str, Any] = {}
    for prefix, moment, ms, ts in (
        ("start", to_datetime(start), start, to_ts(start)),
        ("end", end_dt, end - 1, to_ts(end - 1, micros=999)),
        ("execution", to_datetime(execution_time), execution_time, to_ts(execution_time)),
    ):
        values.update({
            f"{prefix}_ds": to_ds(ms),
            f"{prefix}_ts": ts,
            f"{prefix}_date": moment.date(),
            f"{prefix}_dt": moment,
            f"{prefix}_epoch": moment.timestamp(),
            f"{prefix}_millis": ms,
        })
    return values


def _replace_tree(expression: exp.Expression, fun: Callable[[exp.Expression], Any],
                  prune: Callable[[exp.Expression], bool]) -> Any:
    """sqlglot's `exp.replace_tree` (leaves first), whose function may also return None or a list.

    sqlglot's own is typed to return an expression, which the compiled build (`sqlglotc`) enforces.
    """
    stack = list(expression.dfs(prune=prune))
    new_node: Any = expression
    while stack:
        node = stack.pop()
        new_node = fun(node)
        if new_node is not node:
            node.replace(new_node)
            if isinstance(new_node, exp.Expression):
                stack.append(new_node)
    return new_node


@dataclass(frozen=True)
class EngineInfo:
    """The part of SQLMesh's EngineAdapter that macros read."""

    dialect: str


SPARK_ENGINE = EngineInfo(dialect="spark")


@dataclass(frozen=True)
class SnapshotView:
    """A model's snapshot as a macro sees it through `evaluator.get_snapshot`: its quoted name and parents."""

    name: str
    parents: tuple["SnapshotView", ...]


def _fqn(name: str) -> str:
    """`sushi.orders` as SQLMesh names a snapshot: `"sushi"."orders"`."""
    return ".".join(f'"{part}"' for part in name.split("."))


class MacroEvaluator:
    """Expands macros in one model's expressions; user macros receive it as first argument.

    `variables` holds the built-in variables (interval, @this_model, @gateway); `config_variables`
    the project's `variables` (read by @VAR and by plain `@name`); `blueprint_variables` those of the
    model's blueprint (@BLUEPRINT_VAR and plain `@name`); `locals` the @DEF values.
    """

    def __init__(self, *, dialect: str, variables: Mapping[str, Any], config_variables: Mapping[str, Any],
                 registry: MacroRegistry = EMPTY_REGISTRY, path: Path | str | None = None,
                 model_name: str = "", columns_of: ColumnsLookup | None = None,
                 blueprint_variables: Mapping[str, Any] | None = None,
                 parents_of: Callable[[str], tuple[str, ...] | None] | None = None,
                 unloaded_from: str = ""):
        self.dialect = dialect
        self.unloaded_from = unloaded_from   # the model is held from this repository, not loaded (multi-repo)
        self.variables = dict(variables)
        self.config_variables = {str(k).lower(): v for k, v in config_variables.items()}
        self.registry = registry
        self.path = path
        self.model_name = model_name
        self.columns_of = columns_of or (lambda _name: None)
        self.blueprint_variables = {str(k).lower(): v for k, v in (blueprint_variables or {}).items()}
        self.parents_of = parents_of or (lambda _name: None)
        # SQLMesh's `evaluator.locals`: the @DEF values over the built-in variables (start_date, ...);
        # @DEF writes into the first map only
        self.locals: MutableMapping[str, Any] = ChainMap({}, self.variables)

    # --- API for user macros -------------------------------------------------------------
    def var(self, name: str, default: Any = None) -> Any:
        """A project variable's Python value (`variables:` in config.yaml), else `default`."""
        return self.config_variables.get(name.lower(), default)

    def blueprint_var(self, name: str, default: Any = None) -> Any:
        """A variable of this model's blueprint (an expression), else `default`."""
        return self.blueprint_variables.get(name.lower(), default)

    @property
    def this_model(self) -> str:
        """The table this model writes (or the view read), quoted, in the model's dialect."""
        table = self.variables.get("this_model")
        return table.sql(self.dialect, identify=True, comments=False) if isinstance(table, exp.Expression) \
            else str(table)

    @property
    def gateway(self) -> str:
        return str(self.variables.get("gateway", ""))

    @property
    def runtime_stage(self) -> str:
        """SQLMesh's stage value: `loading` (fingerprints, diffs), `creating`, `evaluating`, `auditing`, ..."""
        return str(self.variables.get("runtime_stage", "loading"))

    @property
    def this_env(self) -> str:
        """The environment name, known in before_all and after_all statements."""
        if "this_env" not in self.config_variables:
            raise self.error("evaluator.this_env is only available in before_all and after_all")
        return str(self.config_variables["this_env"])

    @property
    def default_catalog(self) -> str | None:
        """SQLMesh's default catalog of the gateway: none on Spark's session catalog."""
        return None

    def get_snapshot(self, model_name: str | exp.Expression) -> "SnapshotView | None":
        """What SQLMesh's `get_snapshot` tells of a model (its name and its parents' names, quoted as
        SQLMesh writes them), or None for a name that is no model of the project."""
        name = model_name.sql(self.dialect) if isinstance(model_name, exp.Expression) else str(model_name)
        key = name.replace("`", "").replace('"', "").lower()
        parents = self.parents_of(key)
        if parents is None:
            return None
        return SnapshotView(name=_fqn(key), parents=tuple(SnapshotView(name=_fqn(p), parents=()) for p in parents))

    @property
    def engine_adapter(self) -> EngineInfo:
        """What macros read of SQLMesh's engine adapter: the engine's `dialect` (always Spark here)."""
        return SPARK_ENGINE

    def columns_to_types(self, model_name: str | exp.Expression) -> dict[str, exp.DataType]:
        """Declared `columns` of a model; a placeholder while loading, as SQLMesh gives before schemas exist."""
        name = model_name.sql(self.dialect) if isinstance(model_name, exp.Expression) else str(model_name)
        columns = self.columns_of(name.replace("`", "").replace('"', "").lower())
        if columns:
            return {column: exp.DataType.build(kind, dialect="spark") for column, kind in columns}
        if self.runtime_stage == "loading":
            return {"__schema_unavailable_at_load__": exp.DataType.build("unknown")}
        raise self.error(f"the columns of model {name} are not known: declare its `columns`")

    def parse_one(self, text: str) -> exp.Expression:
        """Parse SQL text of the model's dialect; macro calls in it are expanded."""
        try:
            parsed = parse_sql(text, self.dialect)
        except sqlglot.errors.ParseError as error:
            raise self.error(f"cannot parse SQL produced by a macro: {text!r}: {error}") from error
        if len(parsed) != 1:
            raise self.error(f"SQL produced by a macro must be one expression: {text!r}")
        return self.transform(parsed[0])

    def error(self, message: str) -> ConfigError:
        where = f" in model {self.model_name}" if self.model_name else ""
        return ConfigError(message + where, path=self.path)

    # --- expansion -----------------------------------------------------------------------
    def lookup(self, name: str) -> Any:
        key = name.lower()
        for scope in self._scopes():
            if key in scope:
                return scope[key]
        raise self.error(f"macro variable @{name} is undefined")

    def has_variable(self, name: str) -> bool:
        key = name.lower()
        return any(key in scope for scope in self._scopes())

    def _scopes(self) -> tuple[Mapping[str, Any], ...]:
        """Where `@name` is looked up, first match wins: @DEF, built-ins, the blueprint, config variables."""
        return self.locals, self.blueprint_variables, self.config_variables   # locals holds the built-ins too

    def transform(self, expression: exp.Expression) -> Any:
        """Expand every macro in `expression` (mutated in place; pass a copy). Leaves first.

        Returns an expression, a list of expressions (a macro returning several), or None when the
        whole expression was removed (a statement that is only @DEF, or a false @IF).
        """
        return _replace_tree(expression, self._visit, prune=_is_macro_lambda)

    def _visit(self, node: exp.Expression) -> Any:
        if isinstance(node, exp.Parameter) and isinstance(node.this, (exp.Var, exp.Identifier)):
            return self._variable(node, node.this.name)
        if _is_stage_path(node):
            # Snowflake reads `FROM @name` as a staged file path: SQLMesh makes its name the macro variable
            # `@name` (`@this_model` in an audit), and leaves a path naming no variable as the stage it is
            name = node.name[1:]
            return self._variable(node, name) if self.has_variable(name) else node
        if (self.dialect == "duckdb" and isinstance(node, exp.Abs) and isinstance(node.this, exp.Column)
                and not node.this.table and self.has_variable(node.this.name)):
            return self._variable(node, node.this.name)  # DuckDB parses `@x` as ABS(x)
        if isinstance(node, exp.Identifier) and isinstance(node.this, str) and has_braced(node.this):
            return exp.to_identifier(fill_braced(node.this, self._braced_value), quoted=node.quoted)
        name = macro_name(node)
        if name is None:
            return node
        return self.call(name, node)

    def _braced_value(self, name: str) -> str:
        """What `@{name}` puts into an identifier (a @DEF, built-in, blueprint or config variable)."""
        return braced_text(to_expression(self.lookup(name)), self.dialect)

    def _variable(self, node: exp.Expression, name: str) -> Any:
        value = to_expression(self.lookup(name)).copy()
        parent = node.parent
        if isinstance(parent, exp.In) and node.arg_key == "field" and isinstance(value, (exp.Array, exp.Tuple)):
            # `x IN @values` with a list: SQLMesh prints `x IN [...]` and parses it back as `x IN (...)`
            parent.set("expressions", value.expressions)
            return None
        if isinstance(parent, exp.Table) and node.arg_key == "this":
            if isinstance(value, exp.Literal) and value.is_string:
                value = exp.to_table(value.name, dialect=self.dialect)
            elif isinstance(value, (exp.Column, exp.Dot)):   # a blueprint's `src := db.orders`
                value = exp.to_table(value.sql(self.dialect), dialect=self.dialect)
            if isinstance(value, exp.Table):
                _merge_table(parent, value)
                return node
        return value

    def call(self, name: str, node: exp.Anonymous) -> Any:
        func = BUILTINS.get(name) or self.registry.functions.get(name)
        if func is None:
            if self.unloaded_from:
                raise ConfigError(
                    f"unknown macro @{name.upper()} in model {self.model_name}: the model is prod's, held from "
                    f"repository `{self.unloaded_from}`, which this plan did not load, and its macros are that "
                    f"repository's: load it too (`-p <folder of {self.unloaded_from}>` beside this repository's -p)",
                    path=self.path)
            raise self.error(f"unknown macro @{name.upper()}")
        args, kwargs = _split_args(node.expressions)
        if name not in BUILTINS:
            def not_coerced(parameter: str, reason: str) -> None:
                where = f" in model {self.model_name}" if self.model_name else ""
                project_warning(f"macro @{name.upper()}: argument `{parameter}`: {reason}{where}; passed on "
                                "as written (SQLMesh does the same)", path=self.path)

            bound = bind_arguments(func, self, args, kwargs, not_coerced=not_coerced)
            if isinstance(bound, BadArgument):
                what = f"argument `{bound.parameter}`" if bound.parameter else "arguments"
                raise self.error(f"macro @{name.upper()}: {what}: {bound.reason}")
            args, kwargs = list(bound[0][1:]), bound[1]
        try:
            result = func(self, *args, **kwargs)
        except ConfigError:
            raise
        except Exception as error:  # a user macro failed: name it
            raise self.error(f"macro @{name.upper()} failed: {type(error).__name__}: {error}") from error
        return self._result(result)

    def _result(self, result: Any) -> Any:
        if result is None:
            return None
        if isinstance(result, (list, tuple)):
            items = [self._result(item) for item in result]
            return [item for item in items if item is not None]
        if isinstance(result, str):
            return self.parse_one(result)
        if isinstance(result, exp.Expression):
            return self.transform(result) if _has_macros(result) else result
        return to_expression(result)


def _merge_table(target: exp.Table, source: exp.Table) -> None:
    for key in ("this", "db", "catalog"):
        target.set(key, source.args.get(key))


def _is_macro_lambda(node: exp.Expression) -> bool:
    return isinstance(node, exp.Lambda) and node.parent is not None and macro_name(node.parent) is not None


def _is_stage_path(node: exp.Expression) -> bool:
    """A Snowflake staged-file path in a table's place (`FROM @this_model` parsed as Var('@this_model'))."""
    return (isinstance(node, exp.Var) and isinstance(node.parent, exp.Table) and node.arg_key == "this"
            and node.name.startswith("@") and len(node.name) > 1 and "{" not in node.name and "/" not in node.name)


def _has_macros(node: exp.Expression) -> bool:
    return any(isinstance(n, exp.Parameter) or macro_name(n) or _is_stage_path(n)
               or (isinstance(n, exp.Identifier) and isinstance(n.this, str) and has_braced(n.this))
               for n in node.walk())


def _split_args(args: list[exp.Expression]) -> tuple[list[exp.Expression], dict[str, exp.Expression]]:
    positional = [a for a in args if not isinstance(a, (exp.PropertyEQ, exp.Kwarg))]
    keywords = {a.this.name.lower(): a.expression for a in args if isinstance(a, (exp.PropertyEQ, exp.Kwarg))}
    return positional, keywords
