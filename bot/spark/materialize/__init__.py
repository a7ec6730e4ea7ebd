"""Materialization API: create a model's physical table and evaluate a batch, dispatching on the kind."""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

from bot.errors import EngineError
from bot.project.model import Kind, KindName, Model
from bot.spark.engine import SparkEngine
from bot.spark.materialize import (common, custom, full, incremental_key, incremental_partition, incremental_time,
                                  incremental_unmanaged, scd2, seed, view)

STRATEGIES: dict[KindName, ModuleType] = {
    KindName.FULL: full,
    KindName.VIEW: view,
    KindName.INCREMENTAL_BY_TIME_RANGE: incremental_time,
    KindName.INCREMENTAL_BY_UNIQUE_KEY: incremental_key,
    KindName.SCD_TYPE_2_BY_TIME: scd2,
    KindName.SCD_TYPE_2_BY_COLUMN: scd2,
    KindName.SEED: seed,
    KindName.INCREMENTAL_BY_PARTITION: incremental_partition,
    KindName.INCREMENTAL_UNMANAGED: incremental_unmanaged,
    KindName.CUSTOM: custom,
}


def _strategy(kind: Kind, table: str) -> ModuleType | None:
    if not kind.name.is_materialized:
        return None
    strategy = STRATEGIES.get(kind.name)
    if strategy is None:
        raise EngineError(f"{table}: kind {kind.name.value} cannot be materialized")
    return strategy


def create_physical(engine: SparkEngine, *, kind: Kind, table: str, query_sql: str | None,
                    columns: Sequence[tuple[str, str]] | None, partitioned_by: Sequence[str] = (),
                    model: Model | None = None) -> None:
    """Create the empty physical table (or the view) of a model if absent; no Spark job runs.

    Columns come from `columns` (declared types, any sqlglot spelling) or from the analyzed
    schema of `query_sql`. SCD type 2 tables get valid_from/valid_to. EXTERNAL and EMBEDDED
    models own nothing and are ignored. `model` is needed by CUSTOM kinds only (their materialization
    is found from the model's project).
    """
    strategy = _strategy(kind, table)
    if strategy is not None:
        extra = {"model": model} if strategy is custom else {}
        strategy.create(engine, kind=kind, table=table, query_sql=query_sql, columns=columns,
                        partitioned_by=tuple(partitioned_by), **extra)


def settle_table(engine: SparkEngine, table: str) -> bool:
    """Whether the physical table exists now, from the catalog, with a killed writer's swap finished;
    only under the table's version lease (see common.settle_table)."""
    return common.settle_table(engine, table)


def evaluate(engine: SparkEngine, *, kind: Kind, table: str, query: Any, start: int, end: int,
             execution_time: int, first_run: bool, model: Model | None = None) -> None:
    """Write one batch [start, end) (epoch ms) of a model into `table` with its kind's semantics.

    `query` is rendered Spark SQL, a Spark DataFrame or a pandas DataFrame (Python models); it
    may read `table` itself (self-referencing models). `first_run` means the table holds no
    recorded interval yet: incremental kinds then replace the table's whole content.
    """
    strategy = _strategy(kind, table)
    if strategy is None:
        return
    extra = {"model": model} if strategy is custom else {}
    with engine.table_lock(table):
        strategy.evaluate(engine, kind=kind, table=table, query=query, start=start, end=end,
                          execution_time=execution_time, first_run=first_run, **extra)
