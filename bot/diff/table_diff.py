"""table_diff: compare two Spark tables by key (schema and row statistics) and its JSON shape."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Sequence

from sqlglot import exp

from bot.diff.arguments import DiffTables, TableDiffOptions, check_arguments
from bot.diff.rows import RowDiff, RowDiffQuery, relation, row_diff
from bot.diff.schema import SchemaDiff, schema_diff
from bot.errors import PlanError

if TYPE_CHECKING:
    from bot.spark.engine import SparkEngine


@dataclass(frozen=True)
class TableDiffResult:
    """Everything table_diff found; renderers (console, markdown, JSON) read only this."""

    source_table: str
    target_table: str
    source_label: str
    target_label: str
    keys: tuple[str, ...]
    schema: SchemaDiff
    rows: RowDiff
    decimals: int = 3
    skip_columns: tuple[str, ...] = ()
    where: str | None = None
    model: str | None = None


@dataclass(frozen=True)
class ModelDataDiff:
    """One changed model of a PR compared with prod over a window: prod is the source (base), the PR
    the target (change), so a column the PR adds is "added".

    `rows` is the keyed comparison; it is None when the model has no key (then only the counts and the
    schema are known) or when nothing was compared (`note` says why, and `schema` is None too).
    """

    model: str
    kind: str
    reason: str                           # directly modified / breaking change upstream
    window: str                           # "2024-01-02 00:00 – 2024-01-08 00:00 (7 days)" or "whole query"
    previewed: bool                       # True: the PR's rows were computed from a preview
    keys: tuple[str, ...] = ()
    key_source: str = ""                  # grain / unique_key
    schema: SchemaDiff | None = None
    rows: RowDiff | None = None
    source_count: int | None = None       # prod's rows in the window
    target_count: int | None = None       # the PR's rows in the window
    note: str = ""

    @property
    def compared(self) -> bool:
        return self.schema is not None


class DiffSide(Protocol):
    """One side of a comparison whose columns are already known: a table/view name or a query."""

    @property
    def relation(self) -> str | exp.Query: ...

    @property
    def columns(self) -> tuple[tuple[str, str], ...]: ...


def _columns(engine: "SparkEngine", side: str | DiffSide, skip: set[str]) -> list[tuple[str, str]]:
    columns = engine.dtypes(side) if isinstance(side, str) else side.columns
    return [(n, t) for n, t in columns if n.lower() not in skip]


def _relation(side: str | DiffSide) -> str | exp.Query:
    return side if isinstance(side, str) else side.relation


def count_rows(engine: "SparkEngine", *, source_table: str | DiffSide, target_table: str | DiffSide,
               skip_columns: Sequence[str] = ()) -> tuple[SchemaDiff, int, int]:
    """Schema diff and both row counts (one query) of two sides that have no key to join on."""
    skip = {c.lower() for c in skip_columns}
    source, target = _columns(engine, source_table, skip), _columns(engine, target_table, skip)
    counts = [exp.alias_(exp.select(exp.Count(this=exp.Star())).from_(relation(_relation(side), alias))
                         .subquery(), alias, quoted=True)
              for side, alias in ((source_table, "source_count"), (target_table, "target_count"))]
    row = engine.fetch_one(exp.select(*counts).sql(dialect="spark", identify=True), subject="counting rows")
    return schema_diff(source, target), int(row["source_count"]), int(row["target_count"])


def table_diff(*, engine: "SparkEngine", source_table: str | DiffSide, target_table: str | DiffSide,
               keys: Sequence[str], skip_columns: Sequence[str] = (), where: str | None = None,
               decimals: int = 3, show_sample: bool = False, limit: int = 20,
               source_label: str | None = None, target_label: str | None = None,
               model: str | None = None) -> TableDiffResult:
    """Compare `source_table` with `target_table` joined on `keys`.

    Reads both schemas (metadata only), then computes every row statistic in one full outer join
    aggregate; with `show_sample`, fetches up to `limit` rows of each difference kind ordered by key.
    `where` (Spark SQL) filters both sides. `model` only names the model in error messages. A side given
    as a DiffSide (a query or a table whose columns are known) is not looked up in the catalog and its
    name is not checked: it comes from meshbot, not from a user.
    """
    names = {flag: side for flag, side in (("source_table", source_table), ("target_table", target_table))
             if isinstance(side, str)}
    check_arguments(**names, where=where)
    what = (f"model `{model}`" if model
            else f"`{_label(source_table)}` vs `{_label(target_table)}`")
    if not keys:
        raise PlanError(f"table_diff of {what} needs key columns: pass one or more with `-o COLUMN`")
    skip = {c.lower() for c in skip_columns}
    source, target = _columns(engine, source_table, skip), _columns(engine, target_table, skip)
    schema = schema_diff(source, target)
    _check_keys(keys, source, target, what)
    key_set = {k.lower() for k in keys}
    target_types = {n.lower(): t for n, t in target}
    columns = tuple((n, t, target_types[n.lower()]) for n, t in source
                    if n.lower() in target_types and n.lower() not in key_set)
    spec = RowDiffQuery(source_table=_relation(source_table), target_table=_relation(target_table),
                        keys=tuple(keys), columns=columns, where=where, decimals=decimals)
    rows = row_diff(engine, spec, show_sample=show_sample, limit=limit)
    return TableDiffResult(source_table=_label(source_table), target_table=_label(target_table),
                           source_label=source_label or _label(source_table),
                           target_label=target_label or _label(target_table), keys=tuple(keys),
                           schema=schema, rows=rows, decimals=decimals,
                           skip_columns=tuple(skip_columns), where=where, model=model)


def diff_tables(engine: "SparkEngine", tables: DiffTables, options: TableDiffOptions) -> TableDiffResult:
    """table_diff of the two tables `tables` resolved, as `options` say."""
    return table_diff(engine=engine, source_table=tables.source_table, target_table=tables.target_table,
                      keys=tables.keys, skip_columns=options.skip, where=options.where, decimals=options.decimals,
                      show_sample=options.show_sample, limit=options.limit, source_label=tables.source_label,
                      target_label=tables.target_label, model=tables.model)


def _label(side: str | DiffSide) -> str:
    relation = _relation(side)
    return relation if isinstance(relation, str) else "(query)"


def _check_keys(keys: Sequence[str], source: list[tuple[str, str]],
                target: list[tuple[str, str]], what: str) -> None:
    for side, cols in (("source", source), ("target", target)):
        names = {n.lower() for n, _ in cols}
        missing = [k for k in keys if k.lower() not in names]
        if missing:
            raise PlanError(f"table_diff of {what}: key column(s) {', '.join(missing)} not in the "
                            f"{side} table; pick keys with `-o COLUMN`")


def to_json(result: TableDiffResult) -> dict[str, Any]:
    """The `--json` shape: schema, row counts, per-column match % and keys."""
    rows = result.rows
    return {
        "schema": {
            "added": [[c, t] for c, t in result.schema.added],
            "removed": [[c, t] for c, t in result.schema.removed],
            "modified": [[c, old, new] for c, old, new in result.schema.modified],
        },
        "rows": {
            "source_count": rows.source_count,
            "target_count": rows.target_count,
            "joined_count": rows.joined_count,
            "full_match_count": rows.full_match_count,
            "partial_match_count": rows.partial_match_count,
            "source_only_count": rows.source_only_count,
            "target_only_count": rows.target_only_count,
        },
        "columns": {name: round(pct, 2) for name, pct in rows.column_match_pct.items()},
        "keys": list(result.keys),
    }
