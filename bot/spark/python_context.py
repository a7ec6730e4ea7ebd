"""What a Python model's `execute(context, start, end, execution_time, **kwargs)` receives, as SQLMesh gives it."""

from __future__ import annotations

import contextlib
import inspect
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence


from bot.errors import EngineError
from bot.project.blueprints import python_values
from bot.project.render import model_variables
from bot.project.model import Model
from bot.project.python_model import resolve_python_model
from bot.timeline.times import to_datetime
from bot.spark.engine import SparkEngine
from bot.spark.python_eval import to_spark_df
from bot.spark.sql import portable_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class EngineAdapter:
    """The part of SQLMesh's engine adapter Python models use: `fetchdf`, `fetchall`, `fetchone`,
    `fetch_pyspark_df`, `execute`, `table_exists`, `columns`, `spark`, `dialect`."""

    dialect = "spark"
    default_catalog = None

    def __init__(self, session: "SparkSession"):
        self.spark = session

    def fetchdf(self, query: Any, quote_identifiers: bool = False) -> Any:
        """Rows of a query (SQL text or a sqlglot expression, its identifiers quoted when asked) as pandas."""
        return self.spark.sql(_sql(query, quote_identifiers)).toPandas()

    def fetch_pyspark_df(self, query: Any, quote_identifiers: bool = False) -> "DataFrame":
        return self.spark.sql(_sql(query, quote_identifiers))

    def fetchall(self, query: Any, ignore_unsupported_errors: bool = False,
                 quote_identifiers: bool = False) -> list[tuple]:
        return [tuple(row) for row in self.spark.sql(_sql(query, quote_identifiers)).collect()]

    def fetchone(self, query: Any, ignore_unsupported_errors: bool = False,
                 quote_identifiers: bool = False) -> tuple | None:
        rows = self.spark.sql(_sql(query, quote_identifiers)).take(1)
        return tuple(rows[0]) if rows else None

    def execute(self, query: Any, ignore_unsupported_errors: bool = False, quote_identifiers: bool = True,
                **kwargs: Any) -> None:
        """Run one statement (or several, given a list)."""
        for item in query if isinstance(query, (list, tuple)) else [query]:
            self.spark.sql(_sql(item, quote_identifiers)).collect()

    def table_exists(self, table_name: Any) -> bool:
        return bool(self.spark.catalog.tableExists(_sql(table_name, False)))

    def columns(self, table_name: Any, include_pseudo_columns: bool = False) -> dict[str, Any]:
        """Column name -> sqlglot DataType."""
        from sqlglot import exp
        return {f.name: exp.DataType.build(f.dataType.simpleString(), dialect="spark")
                for f in self.spark.table(_sql(table_name, False)).schema.fields}


def _sql(query: Any, quote: bool = False) -> str:
    return query if isinstance(query, str) else query.sql(dialect="spark", identify=quote)


class ExecutionContext:
    """SQLMesh's ExecutionContext on Spark: `spark`, `resolve_table`/`table`, `fetchdf`, `var`, `gateway`,
    `engine_adapter`. `mapping` maps model names to the tables this run reads."""

    def __init__(self, session: "SparkSession", mapping: Mapping[str, str], *,
                 variables: Mapping[str, Any] | None = None, gateway: str = "", quote: bool = True,
                 blueprint_variables: Mapping[str, Any] | None = None):
        self.spark = session
        self.blueprint_variables = {str(k).lower(): v for k, v in (blueprint_variables or {}).items()}
        self.mapping = mapping
        self.variables = {str(k).lower(): v for k, v in (variables or {}).items()}
        self.gateway = gateway
        self.engine_adapter = EngineAdapter(session)
        self._quote = quote

    def resolve_table(self, name: str) -> str:
        """The table a model name stands for in this run (its physical table; an external table itself)."""
        key = str(name).lower().replace("`", "").replace('"', "")
        if key.count(".") == 2 and key.split(".", 1)[1] in self.mapping:   # `catalog.schema.table` of a model
            key = key.split(".", 1)[1]
        table = self.mapping.get(key, self.mapping.get(f"default.{key}", key))
        return portable_table(table) if self._quote else table

    def table(self, name: str) -> str:
        """Deprecated SQLMesh spelling of `resolve_table`."""
        return self.resolve_table(name)

    def fetchdf(self, query: Any, quote_identifiers: bool = False) -> Any:
        return self.engine_adapter.fetchdf(query, quote_identifiers=quote_identifiers)

    def fetch_pyspark_df(self, query: Any, quote_identifiers: bool = False) -> "DataFrame":
        return self.engine_adapter.fetch_pyspark_df(query, quote_identifiers=quote_identifiers)

    def with_variables(self, variables: Mapping[str, Any],
                       blueprint_variables: Mapping[str, Any] | None = None) -> "ExecutionContext":
        """A copy of this context with other variables (SQLMesh's `with_variables`)."""
        return ExecutionContext(self.spark, self.mapping, variables=variables, gateway=self.gateway,
                                quote=self._quote, blueprint_variables=blueprint_variables or {})

    def var(self, name: str, default: Any = None) -> Any:
        return self.variables.get(str(name).lower(), default)

    def blueprint_var(self, name: str, default: Any = None) -> Any:
        """A variable of the model's blueprint (`@model(..., blueprints=[...])`), else `default`."""
        return self.blueprint_variables.get(str(name).lower(), default)

    @property
    def default_catalog(self) -> str | None:
        return None

    default_dialect = "spark"
    snowpark = bigframe = None
    is_restatement = parent_intervals = None


def interval_datetimes(start: int, end: int, execution_time: int) -> tuple[datetime, datetime, datetime]:
    """SQLMesh's arguments for the interval [start, end) in epoch ms: UTC datetimes, `end` inclusive.

    >>> [d.isoformat() for d in interval_datetimes(1704067200000, 1704153600000, 1704153600000)]
    ['2024-01-01T00:00:00+00:00', '2024-01-01T23:59:59.999999+00:00', '2024-01-02T00:00:00+00:00']
    """
    return to_datetime(start), to_datetime(end) - timedelta(microseconds=1), to_datetime(execution_time)


def run_python_model(function: Callable[..., Any], context: ExecutionContext, *, start: int, end: int,
                     execution_time: int, columns: Sequence[tuple[str, str]] | None,
                     name: str) -> "DataFrame":
    """Call a model's function with SQLMesh's arguments and return its rows as one Spark DataFrame.

    A generator may yield several DataFrames (concatenated) or none; returning None (or yielding
    nothing) writes an empty interval, given declared columns.
    """
    args = interval_datetimes(start, end, execution_time)
    kwargs: dict[str, Any] = dict(context=context, start=args[0], end=args[1], execution_time=args[2])
    if _accepts(function, "latest"):
        kwargs["latest"] = args[2]   # SQLMesh still passes it (the execution time)
    result = function(**kwargs)
    if result is None:
        result = []
    try:
        return to_spark_df(context.spark, result, columns)
    except EngineError as error:
        raise EngineError(f"Python model {name}: {error}") from None


def python_model_frame(engine: SparkEngine, model: Model, *, mapping: Mapping[str, str], start: int,
                       end: int, execution_time: int, variables: Mapping[str, Any] | None = None,
                       gateway: str = "", quote: bool = True) -> "DataFrame":
    """A Python model's rows for [start, end) as one lazy Spark DataFrame, cast to its declared columns.

    `mapping` gives the tables `context.resolve_table` returns (quoted unless `quote` is False, as in
    unit tests whose inputs are temporary views). The model's own errors, and Spark's, pass through:
    callers name the model and interval in their own words.
    """
    context = ExecutionContext(engine.session, mapping, variables=model_variables(model, variables or {}),
                               gateway=gateway, quote=quote, blueprint_variables=python_values(model.blueprint_variables))
    return run_python_model(resolve_python_model(model), context, start=start, end=end,
                            execution_time=execution_time, columns=model.columns or None, name=model.name)


def _accepts(function: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


@contextlib.contextmanager
def session_properties(engine: SparkEngine, properties: Sequence[tuple[str, str]]) -> Iterator[None]:
    """A model's `session_properties` set on the engine's Spark session while it is evaluated, then restored."""
    if not properties:
        yield
        return
    session = engine.session
    previous = {key: session.conf.get(key, None) for key, _ in properties}
    for key, value in properties:
        session.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                session.conf.unset(key)
            else:
                session.conf.set(key, value)
