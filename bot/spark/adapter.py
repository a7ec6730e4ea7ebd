"""A Spark-backed stand-in for SQLMesh's EngineAdapter: the methods custom materializations call, on meshbot's engine."""

from __future__ import annotations

import contextlib
from datetime import timedelta
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from sqlglot import exp
from sqlglot.errors import SqlglotError

from bot.errors import EngineError
from bot.project.model import Kind, KindName
from bot.timeline.times import to_datetime, to_ms
from bot.spark.engine import SparkEngine
from bot.spark.errors import spark_errors
from bot.spark.python_eval import is_pandas_df, is_spark_df
from bot.spark.sql import spark_sql, split_table, table_expression
from bot.spark.types import data_type

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

ColumnTypes = Mapping[str, Any]    # column name -> sqlglot DataType or type text


class UnsupportedAdapterMethod(EngineError, AttributeError):
    """A materialization called an EngineAdapter method meshbot's adapter does not offer."""


@dataclass
class SparkAdapter:
    """What `self.adapter` is in a custom materialization: SQLMesh's EngineAdapter method names and
    arguments, each run on meshbot's SparkEngine (Parquet tables: deletes and merges rewrite the table)."""

    engine: SparkEngine
    materialization: str = ""
    model: str = ""
    dialect: str = "spark"
    default_catalog: str | None = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise UnsupportedAdapterMethod(
            f"model {self.model}: custom materialization `{self.materialization}` calls "
            f"`adapter.{name}`, which meshbot's Spark adapter does not offer (it offers: "
            f"{', '.join(OFFERED)})")

    @property
    def spark(self) -> Any:
        return self.engine.session

    # ---------------------------------------------------------------- reading
    def table_exists(self, table_name: Any) -> bool:
        return self.engine.table_exists(_name(table_name))

    def columns(self, table_name: Any, include_pseudo_columns: bool = False) -> dict[str, exp.DataType]:
        """Column name -> sqlglot DataType, in table order."""
        return {name: data_type(kind) for name, kind in self.engine.columns(_name(table_name))}

    def fetchall(self, query: Any, ignore_unsupported_errors: bool = False,
                 quote_identifiers: bool = False) -> list[tuple]:
        return [tuple(row.values()) for row in self.engine.fetch(_sql(query), subject=self._subject("fetchall"))]

    def fetchone(self, query: Any, ignore_unsupported_errors: bool = False,
                 quote_identifiers: bool = False) -> tuple | None:
        rows = self.engine.fetch(_sql(query), limit=1, subject=self._subject("fetchone"))
        return tuple(rows[0].values()) if rows else None

    def fetchdf(self, query: Any, quote_identifiers: bool = False) -> Any:
        """The rows as a pandas DataFrame."""
        with spark_errors(self._subject("fetchdf")):
            return self.engine.sql(_sql(query)).toPandas()

    def fetch_pyspark_df(self, query: Any, quote_identifiers: bool = False) -> "DataFrame":
        return self.engine.dataframe(_sql(query), subject=self._subject("fetch_pyspark_df"))

    # ---------------------------------------------------------------- statements
    def execute(self, expressions: Any, ignore_unsupported_errors: bool = False,
                quote_identifiers: bool = True, **kwargs: Any) -> None:
        for item in expressions if isinstance(expressions, (list, tuple)) else [expressions]:
            self.engine.execute(_sql(item), subject=self._subject("execute"))

    @contextlib.contextmanager
    def transaction(self, condition: bool | None = None) -> Iterator[None]:
        """Spark has no transactions: statements take effect one by one."""
        yield

    @contextlib.contextmanager
    def session(self, properties: Any = None) -> Iterator[None]:
        yield

    # ---------------------------------------------------------------- objects
    def create_table(self, table_name: Any, target_columns_to_types: ColumnTypes, primary_key: Any = None,
                     exists: bool = True, table_description: str | None = None,
                     column_descriptions: Any = None, partitioned_by: Sequence[Any] | None = None,
                     **kwargs: Any) -> None:
        table = _name(table_name)
        if self.engine.table_exists(table):
            if not exists:
                raise EngineError(f"{self._subject('create_table')}: table {table} exists")
            return
        self.engine.create_table(table, columns=_columns(target_columns_to_types),
                                 partitioned_by=[_column_name(c) for c in partitioned_by or ()])

    def ctas(self, table_name: Any, query_or_df: Any, target_columns_to_types: ColumnTypes | None = None,
             exists: bool = True, **kwargs: Any) -> None:
        """CREATE TABLE ... AS: the table with the query's (or the given) columns, then its rows."""
        table = _name(table_name)
        if self.engine.table_exists(table):
            if not exists:
                raise EngineError(f"{self._subject('ctas')}: table {table} exists")
            return
        self.replace_query(table, query_or_df, target_columns_to_types=target_columns_to_types)

    def drop_table(self, table_name: Any, exists: bool = True, **kwargs: Any) -> None:
        self.engine.drop_table(_name(table_name))

    def create_view(self, view_name: Any, query_or_df: Any, replace: bool = True, **kwargs: Any) -> None:
        self.engine.create_view(_name(view_name), _sql(query_or_df), replace=replace)

    def drop_view(self, view_name: Any, ignore_if_not_exists: bool = True, **kwargs: Any) -> None:
        self.engine.drop_view(_name(view_name))

    # ---------------------------------------------------------------- writes
    def replace_query(self, table_name: Any, query_or_df: Any, target_columns_to_types: ColumnTypes | None = None,
                      table_description: str | None = None, column_descriptions: Any = None,
                      source_columns: Sequence[str] | None = None, **kwargs: Any) -> None:
        """Replace every row of the table with the query's (created first when absent, with the given
        columns or the query's); the rows are conformed to the table's columns."""
        from bot.spark.materialize import common

        table = _name(table_name)
        query = _source(query_or_df)
        common.recover_swap(self.engine, table)
        self._ensure(table, query, target_columns_to_types)
        if isinstance(query, str):
            common.rebuild(self.engine, table=table, query_sql=query, columns=self.engine.columns(table))
            return
        frame = common.source_frame(self.engine, query, table=table)
        common.rebuild(self.engine, table=table, frame=common.conformed(self.engine, frame, table=table))

    def insert_append(self, table_name: Any, query_or_df: Any, target_columns_to_types: ColumnTypes | None = None,
                      source_columns: Sequence[str] | None = None, **kwargs: Any) -> None:
        """Add the query's rows to the table (created first when absent)."""
        from bot.spark.materialize import common

        table = _name(table_name)
        query = _source(query_or_df)
        self._ensure(table, query, target_columns_to_types)
        if isinstance(query, str):
            common.write_query(self.engine, table=table, query_sql=query, columns=self.engine.columns(table),
                               replace=False)
            return
        frame = common.source_frame(self.engine, query, table=table)
        common.append(self.engine, table=table, frame=common.conformed(self.engine, frame, table=table))

    def delete_from(self, table_name: Any, where: Any = None) -> None:
        """Remove the rows matching `where` (all rows without one): the table is rewritten with the others."""
        from bot.spark.materialize import common

        table = _name(table_name)
        condition = _condition(where, self._subject("delete_from"))
        kept = exp.select("*").from_(table_expression(table))
        if condition is not None:
            kept = kept.where(exp.not_(exp.func("COALESCE", exp.paren(condition), exp.false())))
        else:
            kept = kept.where(exp.false())
        frame = self.engine.dataframe(spark_sql(kept), subject=self._subject("delete_from"))
        common.overwrite(self.engine, table=table, frame=frame)
        self.engine.invalidate(table)

    def insert_overwrite_by_time_partition(self, table_name: Any, query_or_df: Any, start: Any, end: Any,
                                           time_formatter: Callable[..., exp.Expression], time_column: Any,
                                           target_columns_to_types: ColumnTypes | None = None,
                                           source_columns: Sequence[str] | None = None, **kwargs: Any) -> None:
        """Replace the rows whose `time_column` is within [start, end) (epoch ms or datetimes, `end`
        exclusive as SQLMesh passes them) by the query's rows there, in one rewrite of the table."""
        from bot.spark.materialize import common

        table = _name(table_name)
        query = _source(query_or_df)
        self._ensure(table, query, target_columns_to_types)
        types = target_columns_to_types or self.columns(table)
        column = time_column if isinstance(time_column, exp.Expression) else exp.column(
            _column_name(getattr(time_column, "column", time_column)))
        low = time_formatter(to_datetime(to_ms(start)), types)
        high = time_formatter(to_datetime(to_ms(end)) - timedelta(microseconds=1), types)
        where = exp.Between(this=column, low=low, high=high)
        kept = exp.select("*").from_(table_expression(table)).where(
            exp.not_(exp.func("COALESCE", exp.paren(where.copy()), exp.false())))
        subject = self._subject("insert_overwrite_by_time_partition")
        columns = self.engine.columns(table)
        if isinstance(query, str):
            rows = common.batch_sql(self.engine, query, table=table, columns=columns, condition=where, fresh=True)
            frame = self.engine.dataframe(spark_sql(exp.union(kept, rows, distinct=False)), subject=subject)
        else:
            with spark_errors(subject):
                new = common.conform(common.source_frame(self.engine, query, table=table), columns)
                frame = self.engine.dataframe(spark_sql(kept), subject=subject).unionByName(
                    new.where(spark_sql(where)))
        common.overwrite(self.engine, table=table, frame=frame)   # staged first: the query may read the table
        self.engine.invalidate(table)

    def merge(self, target_table: Any, source_table: Any, target_columns_to_types: ColumnTypes | None = None,
              unique_key: Sequence[Any] = (), when_matched: Any = None, merge_filter: Any = None,
              source_columns: Sequence[str] | None = None, **kwargs: Any) -> None:
        """Upsert by `unique_key` as INCREMENTAL_BY_UNIQUE_KEY does (the source deduplicated by key)."""
        from bot.spark.materialize import incremental_key

        if when_matched is not None or merge_filter is not None:
            raise EngineError(f"{self._subject('merge')}: `when_matched` and `merge_filter` are not supported "
                              "by meshbot's Spark adapter")
        table = _name(target_table)
        query = _source(source_table)
        self._ensure(table, query, target_columns_to_types)
        keys = tuple(_column_name(key) for key in unique_key)
        incremental_key.evaluate(self.engine, kind=Kind(name=KindName.INCREMENTAL_BY_UNIQUE_KEY, unique_key=keys),
                                 table=table, query=query, start=0, end=0, execution_time=0, first_run=False)

    # ---------------------------------------------------------------- helpers
    def _ensure(self, table: str, query: Any, columns: ColumnTypes | None) -> None:
        from bot.spark.materialize import common

        if self.engine.table_exists(table):
            return
        if columns:
            self.engine.create_table(table, columns=_columns(columns))
        else:
            common.ensure_table(self.engine, table=table, frame=common.source_frame(self.engine, query, table=table))

    def _subject(self, method: str) -> str:
        return f"model {self.model}: custom materialization `{self.materialization}`: adapter.{method}"


OFFERED = sorted(name for name, value in vars(SparkAdapter).items()
                 if not name.startswith("_") and (callable(value) or isinstance(value, property)))


def _name(table: Any) -> str:
    """A table given as text (`db.t`, quoted or not) or a sqlglot Table, as meshbot's `schema.table`."""
    if isinstance(table, exp.Table):
        return ".".join(part.name for part in table.parts)
    text = str(table)
    if '"' in text:
        try:
            return ".".join(part.name for part in exp.to_table(text, dialect="duckdb").parts)
        except SqlglotError as error:
            raise EngineError(f"invalid table name `{text}`") from error
    return ".".join(split_table(text))


def _sql(query: Any) -> str:
    return query.sql(dialect="spark") if isinstance(query, exp.Expression) else str(query)


def _source(query_or_df: Any) -> Any:
    """SQL text for a query (text or sqlglot expression); a Spark or pandas DataFrame as it is."""
    if is_spark_df(query_or_df) or is_pandas_df(query_or_df):
        return query_or_df
    if isinstance(query_or_df, exp.Table):
        return spark_sql(exp.select("*").from_(table_expression(_name(query_or_df))))
    return _sql(query_or_df)


def _condition(where: Any, subject: str) -> exp.Expression | None:
    if where is None or where is True or (isinstance(where, exp.Boolean) and where.this):
        return None
    if isinstance(where, exp.Expression):
        return where
    try:
        return exp.condition(str(where), dialect="spark")
    except SqlglotError as error:
        raise EngineError(f"{subject}: cannot read the condition `{where}`: {error}") from None


def _column_name(column: Any) -> str:
    return column.name if isinstance(column, exp.Expression) else str(column)


def _columns(types: ColumnTypes) -> list[tuple[str, str]]:
    return [(name, kind.sql(dialect="spark") if isinstance(kind, exp.DataType) else str(kind))
            for name, kind in types.items()]
