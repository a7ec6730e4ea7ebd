"""CUSTOM: the project's materialization class (materializations/*.py or an entry point) writes each batch through SparkAdapter."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.errors import BotError, EngineError
from bot.project.materializations import CustomMaterialization, MaterializedModel, find_materialization, kind_type
from bot.project.model import Kind, Model
from bot.timeline.times import to_datetime
from bot.spark.adapter import SparkAdapter
from bot.spark.engine import SparkEngine
from bot.spark.materialize import full
from bot.spark.python_eval import is_pandas_df, is_spark_df
from bot.spark.sql import parse_query


def _materialization(engine: SparkEngine, kind: Kind, model: Model | None, table: str) -> tuple[Any, SparkAdapter]:
    if model is None:
        raise EngineError(f"{table}: kind CUSTOM needs its model to find materialization `{kind.materialization}`")
    name = kind.materialization or ""
    cls = find_materialization(name, model=model.name, path=model.path, line=model.line)
    adapter = SparkAdapter(engine, materialization=name, model=model.name)
    return cls(adapter), adapter


def create(engine: SparkEngine, *, kind: Kind, table: str, query_sql: str | None,
           columns: Sequence[tuple[str, str]] | None, partitioned_by: Sequence[str] = (),
           model: Model | None = None) -> None:
    """The materialization's own `create` when it overrides it; else an empty table as FULL makes one."""
    instance, _ = _materialization(engine, kind, model, table)
    assert model is not None
    if getattr(type(instance), "create", None) in (None, CustomMaterialization.create):
        full.create(engine, kind=kind, table=table, query_sql=query_sql, columns=columns,
                    partitioned_by=partitioned_by)
        return
    view = MaterializedModel(model, kind=kind_type(type(instance))(kind, model.dialect),
                             query=parse_query(query_sql, f"creating {table}") if query_sql else None)
    _call(model, kind, "create", lambda: instance.create(table_name=table, model=view, is_table_deployable=True,
                                                          render_kwargs={}, skip_grants=True))
    engine.invalidate(table)


def evaluate(engine: SparkEngine, *, kind: Kind, table: str, query: Any, start: int, end: int,
             execution_time: int, first_run: bool, model: Model | None = None) -> None:
    """One batch: `insert(table_name, query_or_df, model, is_first_insert, render_kwargs, ...)` as
    SQLMesh calls it; a SQL model's query comes as a sqlglot expression (Spark dialect), a Python
    model's as a Spark DataFrame; start and end are epoch ms, execution_time a UTC datetime."""
    instance, adapter = _materialization(engine, kind, model, table)
    assert model is not None
    source = query if is_spark_df(query) or is_pandas_df(query) else parse_query(query, f"evaluating {table}")
    view = MaterializedModel(model, kind=kind_type(type(instance))(kind, model.dialect),
                             query=None if is_spark_df(source) or is_pandas_df(source) else source)
    moment = to_datetime(execution_time)
    render_kwargs = dict(start=start, end=end, execution_time=moment, runtime_stage="evaluating",
                         engine_adapter=adapter, snapshot=None, snapshots={}, deployability_index=None)
    _call(model, kind, "insert", lambda: instance.insert(
        table_name=table, query_or_df=source, model=view, is_first_insert=first_run, render_kwargs=render_kwargs,
        start=start, end=end, execution_time=moment, batch_index=0, snapshot=None, snapshots={},
        deployability_index=None, physical_properties=dict(view.physical_properties), is_snapshot_deployable=True))
    engine.invalidate(table)


def _call(model: Model, kind: Kind, method: str, call: Any) -> None:
    try:
        call()
    except BotError:
        raise
    except Exception as error:  # the project's code: name the model, materialization and method
        raise EngineError(f"model {model.name}: custom materialization `{kind.materialization}` failed in "
                          f"`{method}`: {type(error).__name__}: {error}") from error
