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

from sqlglot import exp

from bot.errors import EngineError
from bot.project.model import Kind, KindName
from bot.timeline.times import to_datetime
from bot.spark.engine import SparkEngine
from bot.spark.errors import spark_errors
from bot.spark.sql import spark_sql, table_expression
from bot.spark.materialize import common

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
    execution_ts: exp.Expression

    @property
    def vf(self) -> str:
        return self.kind.valid_from_name

    @property
    def vt(self) -> str:
        return self.kind.valid_to_name


def _watched(kind: Kind, names: list[str], keys: list[str], *, table: str) -> list[str]:
    if kind.name is KindName.SCD_TYPE_2_BY_TIME:
        return []
    if not kind.scd_columns or kind.scd_columns == ("*",):
        return [name for name in names if name not in keys]
    return common.resolve_keys(kind.scd_columns, [(n, "") for n in names], table=table, what="columns")


def _timestamp(epoch_ms: int) -> exp.Expression:
    moment = to_datetime(epoch_ms)
    return _timestamp_literal(f"{moment:%Y-%m-%d %H:%M:%S.%f}")


def _timestamp_literal(text: str) -> exp.Expression:
    return exp.cast(exp.Literal.string(text), "TIMESTAMP")


def _col(name: str, side: str | None = None) -> exp.Column:
    return exp.column(name, table=side, quoted=True)


def _null_timestamp() -> exp.Expression:
    return exp.cast(exp.null(), "TIMESTAMP")


def _absent(side: str) -> exp.Expression:
    return exp.Is(this=_col(_PRESENT, side), expression=exp.null())


def first_load_sql(spec: _Spec) -> str:
    """Every staged row opens at 1970-01-01."""
    return spark_sql(exp.select(*(_col(name) for name in spec.names),
                                exp.alias_(_timestamp_literal("1970-01-01 00:00:00"), spec.vf, quoted=True),
                                exp.alias_(_null_timestamp(), spec.vt, quoted=True))
                     .from_(table_expression(spec.staged)))


def history_sql(spec: _Spec) -> str:
    """The whole new history: closed versions, current versions (maybe closed now), new versions."""
    flagged = exp.alias_(exp.true(), _PRESENT, quoted=True)
    current = (exp.select(exp.Star(), flagged).from_(table_expression(spec.table))
               .where(exp.Is(this=_col(spec.vt), expression=exp.null())))
    staged = exp.select(exp.Star(), flagged.copy()).from_(table_expression(spec.staged))
    join = common.null_safe_join(spec.keys, "c", "s")
    changed, change_time = _change(spec)
    hard_delete = spec.execution_ts if spec.kind.invalidate_hard_deletes else _col(spec.vt, "c")
    new_key_time = (exp.cast(_col(spec.updated_at, "s"), "TIMESTAMP") if spec.updated_at
                    else spec.execution_ts)
    is_closed = exp.not_(exp.paren(exp.Is(this=_col(spec.vt), expression=exp.null())))
    closed = (exp.select(*(_col(name) for name in [*spec.names, spec.vf, spec.vt]))
              .from_(table_expression(spec.table)).where(is_closed))
    valid_to = (exp.Case().when(_absent("s"), hard_delete.copy())
                .when(changed.copy(), change_time.copy()).else_(_col(spec.vt, "c")))
    kept = (exp.select(*(_col(name, "c") for name in spec.names), _col(spec.vf, "c"), valid_to)
            .from_("c").join("s", on=join.copy(), join_type="LEFT"))
    valid_from = exp.Case().when(_absent("c"), new_key_time.copy()).else_(change_time.copy())
    opened = (exp.select(*(_col(name, "s") for name in spec.names), valid_from, _null_timestamp())
              .from_("s").join("c", on=join.copy(), join_type="LEFT")
              .where(exp.or_(_absent("c"), exp.paren(changed.copy()))))
    history = exp.union(exp.union(closed, kept, distinct=False), opened, distinct=False)
    return spark_sql(history.with_("c", as_=current).with_("s", as_=staged))


def _change(spec: _Spec) -> tuple[exp.Expression, exp.Expression]:
    """(predicate that the staged row is a new version of the current one, time of the change)."""
    if spec.updated_at:
        new = exp.cast(_col(spec.updated_at, "s"), "TIMESTAMP")
        newer = exp.GT(this=new, expression=exp.cast(_col(spec.updated_at, "c"), "TIMESTAMP"))
        return exp.func("COALESCE", newer, exp.false()), new.copy()
    if not spec.watched:
        return exp.false(), spec.execution_ts
    differs = exp.or_(*(exp.not_(exp.paren(exp.NullSafeEQ(this=_col(name, "c"), expression=_col(name, "s"))))
                        for name in spec.watched))
    return exp.paren(differs), spec.execution_ts
