"""Spark plan regressions of a PR: the physical plan of a directly modified model's new query against its
prod version's, over the same window and the same tables. Pure: it compares PlanSummary values."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Protocol

from bot.diff.prod_vs_pr import window_text
from bot.errors import BotError, ConfigError
from bot.spark.physical_plan import NESTED_LOOP_JOINS, PlanSummary, ScanSummary, explain

if TYPE_CHECKING:
    from bot.spark.engine import SparkEngine

LEVELS = ("off", "warn", "fail")
PRUNING = "partition pruning"
PUSHDOWN = "filter pushdown"
NESTED_LOOP = "nested loop join"
SHUFFLES = "shuffles"


@dataclass(frozen=True)
class PlanRegression:
    kind: str        # PRUNING, PUSHDOWN, NESTED_LOOP, SHUFFLES
    message: str


@dataclass(frozen=True)
class PlanComparison:
    """One directly modified model's plans, prod's version and the PR's; `note` says why there is none."""

    model: str
    window: str = ""                       # as bot.diff.prod_vs_pr.window_text
    prod: PlanSummary | None = None
    pr: PlanSummary | None = None
    regressions: tuple[PlanRegression, ...] = ()
    note: str = ""

    @property
    def compared(self) -> bool:
        return self.prod is not None and self.pr is not None


class QueryPair(Protocol):
    """Prod's and the PR's SQL of one model over the same window and tables (bot.plan.preview_queries.PlanQueries)."""

    @property
    def prod_sql(self) -> str: ...
    @property
    def pr_sql(self) -> str: ...
    @property
    def time_columns(self) -> tuple[str, ...]: ...


class ExplainedModel(Protocol):
    """A preview target with its queries (bot.plan.preview_queries.PreviewTarget, asked with plan_queries=True)."""

    @property
    def name(self) -> str: ...
    @property
    def window(self) -> tuple[int, int] | None: ...
    @property
    def queries(self) -> QueryPair | str | None: ...


def compare_plans(engine: "SparkEngine", targets: Iterable[ExplainedModel]) -> tuple[PlanComparison, ...]:
    """EXPLAIN both queries of each target that has them (bot.plan.preview_queries.PlanQueries) and compare."""
    out: list[PlanComparison] = []
    for target in targets:
        queries = target.queries
        window = window_text(target.window)
        if queries is None:
            continue
        if isinstance(queries, str):
            out.append(PlanComparison(target.name, window=window, note=queries))
            continue
        try:
            prod = explain(engine, queries.prod_sql, subject=f"explaining prod's {target.name}")
        except BotError as error:
            out.append(PlanComparison(target.name, window=window, note=f"not compared: prod's query: {error}"))
            continue
        try:
            pr = explain(engine, queries.pr_sql, subject=f"explaining the PR's {target.name}")
        except BotError as error:
            out.append(PlanComparison(target.name, window=window, note=f"not compared: the PR's query: {error}"))
            continue
        out.append(PlanComparison(target.name, window=window, prod=prod, pr=pr, regressions=regressions(
            prod, pr, time_columns=queries.time_columns)))
    return tuple(out)


def parse_level(raw: object, *, where: str) -> str:
    """`cicd_bot.plan_regressions`: off, warn (the default) or fail."""
    if raw is None:
        return "warn"
    level = "off" if raw is False else str(raw).lower()
    if level not in LEVELS:
        raise ConfigError(f"cicd_bot.plan_regressions must be one of {', '.join(LEVELS)} (got `{raw}`)", path=where)
    return level


def regressions(prod: PlanSummary, pr: PlanSummary, *, time_columns: Iterable[str] = ()) -> tuple[PlanRegression, ...]:
    """What the PR's plan does worse than prod's: a table scan that lost its partition filters on a column
    prod's plan prunes it on, or its pushed filter on one of `time_columns` (the model's time column and
    partitioned_by); a new CartesianProduct or BroadcastNestedLoopJoin; more shuffle exchanges.
    Scans pair by table and count: a table prod scans twice, once pruned, may be so in the PR too.

    >>> pruned = ScanSummary("spark_catalog.shop.events", "parquet", partition_filters=("ds",))
    >>> whole = ScanSummary("spark_catalog.shop.events", "parquet")
    >>> for found in regressions(PlanSummary(scans=(pruned,), exchanges=1),
    ...                          PlanSummary(scans=(whole,), joins=("CartesianProduct",), exchanges=3)):
    ...     print(found.message)
    `spark_catalog.shop.events` is read without partition pruning on `ds` (prod's plan prunes on it)
    a new CartesianProduct (every row of one side joined with every row of the other)
    3 shuffles (Exchange) against 1 in prod's plan
    """
    found: list[PlanRegression] = []
    time_columns = {c.strip("`\"").lower() for c in time_columns}
    for table in dict.fromkeys(scan.table for scan in prod.scans):
        before = [s for s in prod.scans if s.table == table]
        after = [s for s in pr.scans if s.table == table]
        for column in dict.fromkeys(c for s in before for c in s.partition_filters):
            if _unfiltered(after, column, "partition_filters") > _unfiltered(before, column, "partition_filters"):
                found.append(PlanRegression(PRUNING, f"`{table}` is read without partition pruning on `{column}` "
                                                     f"(prod's plan prunes on it)"))
        for column in dict.fromkeys(c for s in before for c in s.pushed_filters if c in time_columns):
            if _unfiltered(after, column, "pushed_filters") > _unfiltered(before, column, "pushed_filters"):
                found.append(PlanRegression(PUSHDOWN, f"`{table}` is read without the filter on `{column}` "
                                                      f"pushed into the scan (prod's plan pushes it)"))
    prod_loops, pr_loops = ([j for j in plan.joins if j in NESTED_LOOP_JOINS] for plan in (prod, pr))
    if len(pr_loops) > len(prod_loops):   # counted together: table sizes alone choose one kind or the other
        extra = len(pr_loops) - len(prod_loops)
        kinds = sorted(set((Counter(pr_loops) - Counter(prod_loops)).elements()))
        what = (f"a new {kinds[0]}" if extra == 1 and len(kinds) == 1
                else f"{extra} more nested loop join{'s' if extra > 1 else ''} "
                     f"({', '.join(kinds or sorted(set(pr_loops)))})")
        found.append(PlanRegression(NESTED_LOOP, f"{what} (every row of one side joined with every row of the other)"))
    if pr.exchanges > prod.exchanges:
        found.append(PlanRegression(SHUFFLES, f"{pr.exchanges} shuffles (Exchange) against {prod.exchanges} in "
                                              f"prod's plan"))
    return tuple(found)


def _unfiltered(scans: list[ScanSummary], column: str, field: str) -> int:
    return sum(1 for scan in scans if column not in getattr(scan, field))


def summary_line(comparison: PlanComparison) -> str:
    """One line: what regressed, shortest first words.

    >>> summary_line(PlanComparison("m", prod=PlanSummary(), pr=PlanSummary(),
    ...                             regressions=(PlanRegression(PRUNING, "x"), PlanRegression(SHUFFLES, "y"))))
    'lost partition pruning, more shuffles'
    """
    if not comparison.compared:
        return "not compared"
    if not comparison.regressions:
        return "no regression"
    words = {PRUNING: "lost partition pruning", PUSHDOWN: "lost filter pushdown", NESTED_LOOP: "new nested loop join",
             SHUFFLES: "more shuffles"}
    return ", ".join(dict.fromkeys(words[r.kind] for r in comparison.regressions))


def plan_rows(comparison: PlanComparison) -> tuple[tuple[str, str, str], ...]:
    """(what, prod, PR) rows that show both plans side by side: shuffles, broadcasts, joins, scans.

    >>> scan = ScanSummary("spark_catalog.shop.events", "parquet", partition_filters=("ds",))
    >>> for row in plan_rows(PlanComparison("m", prod=PlanSummary(scans=(scan,), joins=("SortMergeJoin",),
    ...                                                            exchanges=2), pr=PlanSummary(scans=(scan,)))):
    ...     print(row)
    ('shuffles (Exchange)', '2', '0')
    ('broadcasts', '0', '0')
    ('joins', 'SortMergeJoin', 'none')
    ('scans', 'spark_catalog.shop.events (pruned on ds)', 'spark_catalog.shop.events (pruned on ds)')
    """
    if comparison.prod is None or comparison.pr is None:
        return ()
    prod, pr = comparison.prod, comparison.pr

    def joins(plan: PlanSummary) -> str:
        counts = Counter(plan.joins)
        return ", ".join(f"{name}{f' ×{n}' if n > 1 else ''}" for name, n in counts.items()) or "none"

    def scans(plan: PlanSummary) -> str:
        return "; ".join(_scan_text(scan) for scan in plan.scans) or "none"

    return (("shuffles (Exchange)", str(prod.exchanges), str(pr.exchanges)),
            ("broadcasts", str(prod.broadcasts), str(pr.broadcasts)),
            ("joins", joins(prod), joins(pr)),
            ("scans", scans(prod), scans(pr)))


def _scan_text(scan: ScanSummary) -> str:
    notes = ([f"pruned on {', '.join(scan.partition_filters)}"] if scan.partition_filters else []) + (
        [f"filters pushed on {', '.join(scan.pushed_filters)}"] if scan.pushed_filters else [])
    return scan.table + (f" ({'; '.join(notes)})" if notes else "")
