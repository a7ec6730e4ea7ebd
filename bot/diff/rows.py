"""Row-level comparison of two Spark tables: every statistic in one full-outer-join aggregate query."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from sqlglot import exp

if TYPE_CHECKING:
    from bot.spark.engine import SparkEngine

S, T = "s", "t"
PRESENT = "__meshbot_present"     # TRUE on every row of a side, NULL after the outer join when absent
KEY_COUNT = "__meshbot_key_rows"  # rows of the same side sharing this row's key
KEY_ROW = "__meshbot_key_row"     # 1, 2, ... among the rows of the same side sharing this row's key
_NUMERIC_PREFIXES = ("float", "double", "decimal")
_NUMBER_PREFIXES = ("tinyint", "smallint", "int", "bigint", "float", "double", "decimal", "byte", "short", "long")
_ORDERED_PREFIXES = _NUMBER_PREFIXES + ("date", "timestamp")


@dataclass(frozen=True)
class DiffSamples:
    """Up to `limit` rows of each kind, ordered by key; changed rows carry `s__col` and `t__col`."""

    source_only: tuple[dict[str, Any], ...] = ()
    target_only: tuple[dict[str, Any], ...] = ()
    changed: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class ColumnProfile:
    """One column on one side: null rows, approximate distinct values (HyperLogLog), and for numbers,
    dates and times the smallest and largest value; the mean for numbers. None where not computed."""

    nulls: int
    distinct: int
    minimum: Any = None
    maximum: Any = None
    mean: float | None = None


@dataclass(frozen=True)
class RowDiff:
    """Row statistics of a keyed comparison.

    With duplicate keys, joined/match counts count joined pairs, while source/target counts stay
    exact row counts. Rows with a NULL key never join: they count as source-only/target-only and in
    `null_key_*`. `column_match_pct` is the % of joined rows where the column matches.
    """

    source_count: int
    target_count: int
    joined_count: int
    full_match_count: int
    partial_match_count: int
    source_only_count: int
    target_only_count: int
    column_match_pct: dict[str, float] = field(default_factory=dict)
    null_key_source_count: int = 0
    null_key_target_count: int = 0
    duplicate_key_source_count: int = 0
    duplicate_key_target_count: int = 0
    samples: DiffSamples | None = None
    distinct_key_source_count: int = 0     # key values (NULL counted once) of each side
    distinct_key_target_count: int = 0
    profiles: dict[str, tuple[ColumnProfile, ColumnProfile]] = field(default_factory=dict)   # (source, target)


@dataclass(frozen=True)
class RowDiffQuery:
    """What to compare: both sides, the key, the compared columns with their (source, target) types."""

    source_table: str | exp.Query
    target_table: str | exp.Query
    keys: tuple[str, ...]
    columns: tuple[tuple[str, str, str], ...]   # (name, source type, target type)
    where: str | None = None
    decimals: int = 3
    profile: bool = True     # profile each compared column in the same query (ColumnProfile)


def row_diff(engine: "SparkEngine", spec: RowDiffQuery, *, show_sample: bool = False,
             limit: int = 20) -> RowDiff:
    """Run the one aggregate query (plus three sample queries when asked) and return the statistics."""
    row = engine.fetch_one(stats_sql(spec), subject="comparing rows")
    joined = int(row["joined_count"] or 0)
    pct = {name: (100.0 * int(row[f"match_{i}"] or 0) / joined if joined else 0.0)
           for i, (name, _, _) in enumerate(spec.columns)}
    full = int(row["full_match_count"] or 0)
    samples = _samples(engine, spec, limit) if show_sample else None
    counts = {S: _int(row["source_count"]), T: _int(row["target_count"])}
    profiles = {name: (_profile(row, i, S, counts[S]), _profile(row, i, T, counts[T]))
                for i, (name, _, _) in enumerate(spec.columns)} if spec.profile else {}
    return RowDiff(
        source_count=counts[S], target_count=counts[T],
        joined_count=joined, full_match_count=full, partial_match_count=joined - full,
        source_only_count=_int(row["source_only_count"]),
        target_only_count=_int(row["target_only_count"]), column_match_pct=pct,
        null_key_source_count=_int(row["null_key_source_count"]),
        null_key_target_count=_int(row["null_key_target_count"]),
        duplicate_key_source_count=_int(row["duplicate_key_source_count"]),
        duplicate_key_target_count=_int(row["duplicate_key_target_count"]),
        samples=samples,
        distinct_key_source_count=_int(row["distinct_key_source_count"]),
        distinct_key_target_count=_int(row["distinct_key_target_count"]),
        profiles=profiles,
    )


def _profile(row: dict[str, Any], index: int, side: str, rows: int) -> ColumnProfile:
    prefix = f"p{index}_{side}_"
    values, total = _int(row[prefix + "values"]), row.get(prefix + "sum")
    return ColumnProfile(nulls=rows - values, distinct=_int(row[prefix + "distinct"]),
                         minimum=row.get(prefix + "min"), maximum=row.get(prefix + "max"),
                         mean=float(total) / values if total is not None and values else None)


def _ordered(column_type: str) -> bool:
    """Numbers, dates and times: min and max say something about them."""
    return column_type.lower().startswith(_ORDERED_PREFIXES)


def _numeric(column_type: str) -> bool:
    return column_type.lower().startswith(_NUMBER_PREFIXES)


def profile_projections(columns: Sequence[tuple[str, str, str]]) -> list[exp.Expression]:
    """Per compared column and side, in the statistics query itself (no second scan): its non-NULL
    values and, for numbers, their sum, each row counted on its first joined copy only; approximate
    distinct values, min and max (duplicates change neither). Plain COUNT/SUM/MIN/MAX keep the
    aggregate code-generated; the null count and the mean are derived from them (`_profile`)."""
    projections: list[exp.Expression] = []
    for index, (name, source_type, target_type) in enumerate(columns):
        for side, other, column_type in ((S, T, source_type), (T, S, target_type)):
            prefix = f"p{index}_{side}_"
            value = _col(name, side)
            once = exp.If(this=_first_copy(other), true=value, false=exp.null())
            projections += [exp.alias_(exp.Count(this=once), prefix + "values"),
                            exp.alias_(exp.func("APPROX_COUNT_DISTINCT", value), prefix + "distinct")]
            if _ordered(column_type):
                projections += [exp.alias_(exp.Min(this=value), prefix + "min"),
                                exp.alias_(exp.Max(this=value), prefix + "max")]
            if _numeric(column_type):
                projections.append(exp.alias_(exp.Sum(this=exp.If(
                    this=_first_copy(other), true=exp.cast(value, "DOUBLE"), false=exp.null())), prefix + "sum"))
    return projections


def _int(value: Any) -> int:
    return int(round(float(value))) if value is not None else 0


def _col(name: str, side: str) -> exp.Column:
    return exp.column(name, table=side, quoted=True)


def relation(side: str | exp.Query, alias: str = "__meshbot_side") -> exp.Expression:
    """A FROM item for `side`: the table itself, or the query as an aliased subquery."""
    return exp.to_table(side, dialect="spark") if isinstance(side, str) else side.subquery(alias)


def _side(table: str | exp.Query, keys: Sequence[str], where: str | None) -> exp.Select:
    """SELECT *, TRUE AS present, COUNT(*) OVER (PARTITION BY keys) AS key_rows,
    ROW_NUMBER() OVER (PARTITION BY keys ORDER BY keys) AS key_row FROM table [WHERE]: one window
    (the frame spans the key's rows either way), sharing the join's sort on the key."""
    by = [exp.column(k, quoted=True) for k in keys]
    order = exp.Order(expressions=[exp.Ordered(this=exp.column(k, quoted=True), nulls_first=True) for k in keys])
    whole = exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING",
                           end="UNBOUNDED", end_side="FOLLOWING")
    count = exp.Window(this=exp.Count(this=exp.Star()), partition_by=by, order=order, spec=whole)
    number = exp.Window(this=exp.RowNumber(), partition_by=[k.copy() for k in by], order=order.copy())
    select = exp.select(exp.Star(), exp.alias_(exp.true(), PRESENT, quoted=True),
                        exp.alias_(count, KEY_COUNT, quoted=True),
                        exp.alias_(number, KEY_ROW, quoted=True)).from_(relation(table))
    if where:
        select = select.where(where, dialect="spark")
    return select


def joined_relation(spec: RowDiffQuery) -> exp.Select:
    """SELECT ... FROM (source) s FULL OUTER JOIN (target) t ON s.k = t.k (no projections yet)."""
    on = exp.and_(*(exp.EQ(this=_col(k, S), expression=_col(k, T)) for k in spec.keys))
    return (exp.select().from_(_side(spec.source_table, spec.keys, spec.where).subquery(S))
            .join(_side(spec.target_table, spec.keys, spec.where).subquery(T), on=on,
                  join_type="FULL OUTER"))


def _present(side: str) -> exp.Expression:
    return exp.Not(this=exp.Is(this=_col(PRESENT, side), expression=exp.null()))


def _absent(side: str) -> exp.Expression:
    return exp.Is(this=_col(PRESENT, side), expression=exp.null())


def _both() -> exp.Expression:
    return exp.and_(_present(S), _present(T))


def column_match(name: str, source_type: str, target_type: str, decimals: int) -> exp.Expression:
    """s.c <=> t.c, with floats/decimals rounded and mismatched or map types compared as strings."""
    left, right = _col(name, S), _col(name, T)
    types = (source_type.lower(), target_type.lower())
    if any(t.startswith(_NUMERIC_PREFIXES) for t in types):
        left = exp.func("ROUND", left, exp.Literal.number(decimals))
        right = exp.func("ROUND", right, exp.Literal.number(decimals))
    elif types[0] != types[1] or any("map<" in t for t in types):
        left = exp.cast(left, "STRING")
        right = exp.cast(right, "STRING")
    return exp.NullSafeEQ(this=left, expression=right)


def _sum_if(condition: exp.Expression, value: exp.Expression | None = None) -> exp.Expression:
    value = value if value is not None else exp.Literal.number(1)
    return exp.Sum(this=exp.If(this=condition, true=value, false=exp.Literal.number(0)))


def _first_copy(other: str) -> exp.Expression:
    """The one joined copy of a row that counts it: a row matching n rows of the `other` side appears
    n times in the join, once with each; it counts where that row is the key's first (or absent).
    Integer counts on a flag, not 1/n weights: exact, and cheap enough to keep the aggregate fused."""
    return exp.paren(exp.or_(_absent(other), exp.EQ(this=_col(KEY_ROW, other), expression=exp.Literal.number(1))))


def _null_key(keys: Sequence[str], side: str) -> exp.Expression:
    return exp.or_(*(exp.Is(this=_col(k, side), expression=exp.null()) for k in keys))


def stats_sql(spec: RowDiffQuery) -> str:
    """The single aggregate query computing every row statistic and per-column match count."""
    matches = [column_match(n, st, tt, spec.decimals) for n, st, tt in spec.columns]
    all_match = exp.and_(*matches) if matches else exp.true()
    projections: list[exp.Expression] = []
    for this, other in ((S, T), (T, S)):
        label = "source" if this == S else "target"
        once = exp.and_(_present(this), _first_copy(other))
        dup = exp.and_(once, exp.GT(this=_col(KEY_COUNT, this), expression=exp.Literal.number(1)),
                       exp.Not(this=exp.paren(_null_key(spec.keys, this))))
        projections += [
            exp.alias_(_sum_if(exp.and_(once, exp.EQ(this=_col(KEY_ROW, this), expression=exp.Literal.number(1)))),
                       f"distinct_key_{label}_count"),
            exp.alias_(_sum_if(once), f"{label}_count"),
            exp.alias_(_sum_if(exp.and_(_present(this), _absent(other))), f"{label}_only_count"),
            exp.alias_(_sum_if(exp.and_(_present(this), exp.paren(_null_key(spec.keys, this)))),
                       f"null_key_{label}_count"),
            exp.alias_(_sum_if(dup), f"duplicate_key_{label}_count"),
        ]
    projections += [
        exp.alias_(_sum_if(_both()), "joined_count"),
        exp.alias_(_sum_if(exp.and_(_both(), all_match)), "full_match_count"),
    ]
    projections += [exp.alias_(_sum_if(exp.and_(_both(), m)), f"match_{i}")
                    for i, m in enumerate(matches)]
    if spec.profile:
        projections += profile_projections(spec.columns)
    return joined_relation(spec).select(*projections).sql(dialect="spark", identify=True)


def sample_sqls(spec: RowDiffQuery, limit: int) -> dict[str, str]:
    """One query per sample kind, each ordered by key and limited to `limit` rows."""
    base = joined_relation(spec)
    compared = [name for name, _, _ in spec.columns]
    matches = [column_match(n, st, tt, spec.decimals) for n, st, tt in spec.columns]
    out: dict[str, str] = {}
    for kind, side, cond in (("source_only", S, exp.and_(_present(S), _absent(T))),
                             ("target_only", T, exp.and_(_present(T), _absent(S)))):
        cols = [_col(k, side) for k in spec.keys] + [_col(c, side) for c in compared]
        query = base.copy().select(*cols).where(cond).order_by(*_keys_ordered(spec.keys, side))
        out[kind] = query.limit(limit).sql(dialect="spark", identify=True)
    differs = exp.Not(this=exp.paren(exp.and_(*matches))) if matches else exp.false()
    cols = [exp.alias_(_col(k, S), k, quoted=True) for k in spec.keys]
    for name in compared:
        cols += [exp.alias_(_col(name, S), f"s__{name}", quoted=True),
                 exp.alias_(_col(name, T), f"t__{name}", quoted=True)]
    query = base.copy().select(*cols).where(exp.and_(_both(), differs))
    out["changed"] = (query.order_by(*_keys_ordered(spec.keys, S)).limit(limit)
                      .sql(dialect="spark", identify=True))
    return out


def _keys_ordered(keys: Sequence[str], side: str) -> list[exp.Expression]:
    return [exp.Ordered(this=_col(k, side), nulls_first=True) for k in keys]


def _samples(engine: "SparkEngine", spec: RowDiffQuery, limit: int) -> DiffSamples:
    rows = {kind: tuple(engine.fetch(sql, subject=f"sampling {kind.replace('_', '-')} rows"))
            for kind, sql in sample_sqls(spec, limit).items()}
    return DiffSamples(source_only=rows["source_only"], target_only=rows["target_only"],
                       changed=rows["changed"])
