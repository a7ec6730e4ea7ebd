"""A query's physical Spark plan, summarized: which tables it scans and with which partition and pushed
filters, its joins, and its shuffles. `EXPLAIN FORMATTED` is a SQL statement, so the same text comes back
from a local session and from a Spark Connect server; nothing is read or computed."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from bot.spark.errors import spark_errors

if TYPE_CHECKING:
    from bot.spark.engine import SparkEngine

NESTED_LOOP_JOINS = ("CartesianProduct", "BroadcastNestedLoopJoin")
JOINS = ("BroadcastHashJoin", "SortMergeJoin", "ShuffledHashJoin") + NESTED_LOOP_JOINS

_HEADER = re.compile(r"^\((\d+)\) (\S+)(?: (.*))?$")
_ATTRIBUTE = re.compile(r"([A-Za-z_][\w$]*)#\d+L?")
_NOT_NULL = re.compile(r"isnotnull\([A-Za-z_][\w$]*#\d+L?\)")
_PUSHED = re.compile(r"(?:EqualTo|EqualNullSafe|GreaterThan|GreaterThanOrEqual|LessThan|LessThanOrEqual|In|"
                     r"StringStartsWith|StringEndsWith|StringContains)\(`?([^,()`]+)`?,")


@dataclass(frozen=True)
class ScanSummary:
    """One table scan: `table` as Spark names it (spark_catalog.db.t), the columns its partition filters
    prune on and those its pushed (data source) filters test; IS NOT NULL alone counts for neither."""

    table: str
    format: str = ""
    partition_filters: tuple[str, ...] = ()
    pushed_filters: tuple[str, ...] = ()


@dataclass(frozen=True)
class PlanSummary:
    """What a physical plan does that costs: its scans, its joins (node names, in plan order), its shuffle
    exchanges (`Exchange`, not broadcasts; a reused exchange counts once) and broadcast exchanges."""

    scans: tuple[ScanSummary, ...] = ()
    joins: tuple[str, ...] = ()
    exchanges: int = 0
    broadcasts: int = 0


def explain(engine: "SparkEngine", sql: str, *, subject: str = "explaining a query") -> PlanSummary:
    """The summary of `sql`'s physical plan (EXPLAIN FORMATTED: analyzed and planned, not run)."""
    with spark_errors(subject):
        rows = engine.sql(f"EXPLAIN FORMATTED {sql}").collect()
    text = "\n".join(str(row[0]) for row in rows)
    if "== Physical Plan ==" not in text:
        with spark_errors(subject):   # EXPLAIN answers an analysis error as text rather than raising it
            engine.dataframe(sql, subject=subject)
    return summarize(text)


def summarize(text: str) -> PlanSummary:
    """Parse `EXPLAIN FORMATTED` output: each node's numbered block of details after the tree.

    >>> plan = summarize('''== Physical Plan ==
    ... * ColumnarToRow (2)
    ... +- Scan parquet spark_catalog.x.ev (1)
    ...
    ... (1) Scan parquet spark_catalog.x.ev
    ... Output [2]: [id#43, ds#46]
    ... PartitionFilters: [isnotnull(ds#46), (ds#46 >= 2024-01-01)]
    ... PushedFilters: [IsNotNull(id), GreaterThan(id,3)]
    ...
    ... (2) ColumnarToRow [codegen id : 1]
    ... Input [2]: [id#43, ds#46]
    ... ''')
    >>> plan.scans
    (ScanSummary(table='spark_catalog.x.ev', format='parquet', partition_filters=('ds',), pushed_filters=('id',)),)
    """
    scans: list[ScanSummary] = []
    joins: list[str] = []
    exchanges = broadcasts = 0
    for node, rest, details in _blocks(text):
        if node == "Scan" and rest:
            parts = rest.split(" ", 1)
            table, fmt = (parts[1], parts[0]) if len(parts) == 2 else (parts[0], "")
            scans.append(_scan(table.strip(), fmt, details))
        elif node == "BatchScan" and rest:
            scans.append(_scan(rest.strip(), "", details))
        elif node in JOINS:
            joins.append(node)
        elif node == "Exchange":
            exchanges += 1
        elif node == "BroadcastExchange":
            broadcasts += 1
    return PlanSummary(scans=tuple(scans), joins=tuple(joins), exchanges=exchanges, broadcasts=broadcasts)


def _blocks(text: str) -> list[tuple[str, str, dict[str, str]]]:
    """(node name, the rest of its header, {detail: value}) per numbered block."""
    blocks: list[tuple[str, str, dict[str, str]]] = []
    current: tuple[str, str, dict[str, str]] | None = None
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            rest = re.sub(r"\s*\[codegen id : \d+\]$", "", header.group(3) or "")
            current = (header.group(2), rest, {})
            blocks.append(current)
        elif not line.strip() or line.startswith("="):
            current = None
        elif current is not None and ": " in line:
            key, value = line.split(": ", 1)
            current[2][key.strip()] = value.strip()
    return blocks


def _scan(table: str, fmt: str, details: dict[str, str]) -> ScanSummary:
    partition = _NOT_NULL.sub("", details.get("PartitionFilters", ""))
    return ScanSummary(table=table, format=fmt,
                       partition_filters=_unique(m.group(1) for m in _ATTRIBUTE.finditer(partition)),
                       pushed_filters=_unique(m.group(1) for m in _PUSHED.finditer(details.get("PushedFilters", ""))))


def _unique(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(name.lower() for name in names))
