"""SCD_TYPE_2_BY_TIME and SCD_TYPE_2_BY_COLUMN: keep every version of a row with valid_from/valid_to.

The query is a snapshot of the source. The batch is deduplicated by key into a staging table
(BY_TIME keeps the latest `updated_at`), then the history is rebuilt into a second table and
swapped in:
- closed versions (valid_to set) are kept as they are;
- a current version whose key changed (BY_TIME: larger updated_at; BY_COLUMN: any watched
  column differs, NULL-safe) is closed at the change time (updated_at, or the execution time)
  and the new version opens at that time;
- a current version whose key is missing from the snapshot is closed at the execution time when
  `invalidate_hard_deletes`, else kept open;
- a new key opens at 1970-01-01 on the first run, else at updated_at (BY_TIME) or the
  execution time (BY_COLUMN).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.errors import EngineError
from bot.project.model import Kind, KindName
from bot.project.timeutil import to_datetime
from bot.spark.engine import SparkEngine, quote_table, spark_errors
from bot.spark.materialize import common
from bot.spark.types import quote_identifier as q

EPOCH_START = "TIMESTAMP'1970-01-01 00:00:00'"
_PRESENT = "__meshbot_present"


def create(engine: SparkEngine, *, kind: Kind, table: str, query_sql: str | None,
           columns: Sequence[tuple[str, str]] | None, partitioned_by: Sequence[str] = ()) -> None:
    cols = common.declared_or_query_columns(engine, table=table, query_sql=query_sql, columns=columns)
    declared = {name.lower() for name, _ in cols}
    extra = [(name, "TIMESTAMP") for name in (kind.valid_from_name, kind.valid_to_name)
             if name.lower() not in declared]
    common.create_table(engine, table=table, columns=[*cols, *extra], partitioned_by=partitioned_by,
                        normalize_types=bool(columns))


def evaluate(engine: SparkEngine, *, kind: Kind, table: str, query: Any, start: int, end: int,
             execution_time: int, first_run: bool) -> None:
    common.recover_swap(engine, table)
    frame = common.source_frame(engine, query, table=table)
    if not engine.table_exists(table):
        raise EngineError(f"{table}: the SCD type 2 table does not exist; create it first")
    validity = {kind.valid_from_name.lower(), kind.valid_to_name.lower()}
    source_cols = [(n, t) for n, t in engine.columns(table) if n.lower() not in validity]
    keys = common.resolve_keys(kind.unique_key, source_cols, table=table)
    by_time = kind.name is KindName.SCD_TYPE_2_BY_TIME
    updated_at = common.resolve_keys([kind.updated_at_name], source_cols, table=table,
                                     what="updated_at_name")[0] if by_time else None
    with spark_errors(f"evaluating {table}"):
        rows = common.dedup(common.conform(frame, source_cols), keys=keys,
                            first_order=[updated_at] if updated_at else ())
    staged = common.stage(engine, table=table, frame=rows)
    try:
        names = [name for name, _ in source_cols]
        spec = _Spec(kind=kind, table=table, staged=staged, names=names, keys=keys, updated_at=updated_at,
                     watched=_watched(kind, names, keys, table=table),
                     execution_ts=_timestamp(execution_time))
        if first_run:
            sql = first_load_sql(spec)
            common.overwrite(engine, table=table, frame=engine.dataframe(sql, subject=f"evaluating {table}"))
        else:
            sql = history_sql(spec)
            common.swap_in(engine, table=table, frame=engine.dataframe(sql, subject=f"evaluating {table}"))
    finally:
        engine.drop_table(staged)


@dataclass(frozen=True)
class _Spec:
    """What the SQL builders need."""

    kind: Kind
    table: str
    staged: str
    names: list[str]
    keys: list[str]
    updated_at: str | None
    watched: list[str]
    execution_ts: str

    @property
    def vf(self) -> str:
        return q(self.kind.valid_from_name)

    @property
    def vt(self) -> str:
        return q(self.kind.valid_to_name)


def _watched(kind: Kind, names: list[str], keys: list[str], *, table: str) -> list[str]:
    if kind.name is KindName.SCD_TYPE_2_BY_TIME:
        return []
    if not kind.scd_columns or kind.scd_columns == ("*",):
        return [name for name in names if name not in keys]
    return common.resolve_keys(kind.scd_columns, [(n, "") for n in names], table=table, what="columns")


def _timestamp(epoch_ms: int) -> str:
    moment = to_datetime(epoch_ms)
    return f"TIMESTAMP'{moment:%Y-%m-%d %H:%M:%S.%f}'"


def first_load_sql(spec: _Spec) -> str:
    """Every staged row opens at 1970-01-01."""
    cols = ", ".join(q(name) for name in spec.names)
    return f"SELECT {cols}, {EPOCH_START} AS {spec.vf}, CAST(NULL AS TIMESTAMP) AS {spec.vt} " \
           f"FROM {quote_table(spec.staged)}"


def history_sql(spec: _Spec) -> str:
    """The whole new history: closed versions, current versions (maybe closed now), new versions."""
    table, staged = quote_table(spec.table), quote_table(spec.staged)
    cols = ", ".join(q(name) for name in spec.names)
    c_cols = ", ".join(f"`c`.{q(name)}" for name in spec.names)
    s_cols = ", ".join(f"`s`.{q(name)}" for name in spec.names)
    join = common.null_safe_join(spec.keys, "c", "s")
    changed, change_time = _change(spec)
    hard_delete = spec.execution_ts if spec.kind.invalidate_hard_deletes else f"`c`.{spec.vt}"
    new_key_time = f"CAST(`s`.{q(spec.updated_at)} AS TIMESTAMP)" if spec.updated_at else spec.execution_ts
    return f"""
WITH `c` AS (SELECT *, TRUE AS `{_PRESENT}` FROM {table} WHERE {spec.vt} IS NULL),
`s` AS (SELECT *, TRUE AS `{_PRESENT}` FROM {staged})
SELECT {cols}, {spec.vf}, {spec.vt} FROM {table} WHERE {spec.vt} IS NOT NULL
UNION ALL
SELECT {c_cols}, `c`.{spec.vf},
  CASE WHEN `s`.`{_PRESENT}` IS NULL THEN {hard_delete}
       WHEN {changed} THEN {change_time} ELSE `c`.{spec.vt} END
FROM `c` LEFT JOIN `s` ON {join}
UNION ALL
SELECT {s_cols}, CASE WHEN `c`.`{_PRESENT}` IS NULL THEN {new_key_time} ELSE {change_time} END,
  CAST(NULL AS TIMESTAMP)
FROM `s` LEFT JOIN `c` ON {join}
WHERE `c`.`{_PRESENT}` IS NULL OR ({changed})"""


def _change(spec: _Spec) -> tuple[str, str]:
    """(predicate that the staged row is a new version of the current one, time of the change)."""
    if spec.updated_at:
        new = f"CAST(`s`.{q(spec.updated_at)} AS TIMESTAMP)"
        return f"COALESCE({new} > CAST(`c`.{q(spec.updated_at)} AS TIMESTAMP), FALSE)", new
    if not spec.watched:
        return "FALSE", spec.execution_ts
    differs = " OR ".join(f"NOT (`c`.{q(name)} <=> `s`.{q(name)})" for name in spec.watched)
    return f"({differs})", spec.execution_ts
