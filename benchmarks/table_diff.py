"""Benchmark: table_diff vs one hand-written full-outer-join aggregate (the floor) on the same session.

Usage: .venv/bin/python benchmarks/table_diff.py [--rows N] [--repeat R] [--dir PATH]
Generates N rows x 10 columns with spark.range (1% of rows changed in the target), writes both as
Parquet tables, then times each approach (best of R runs) and prints both times and the ratio.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.diff.table_diff import table_diff  # noqa: E402
from bot.project.config import SparkConnection  # noqa: E402
from bot.spark.engine import SparkEngine  # noqa: E402
from bot.spark.session import get_session, stop_session  # noqa: E402

COLUMNS = """
    id,
    id * 2 AS c1,
    CAST(id % 1000 AS STRING) AS c2,
    id * 0.5D AS c3,
    CAST(id % 7 AS INT) AS c4,
    CONCAT('name_', CAST(id % 5000 AS STRING)) AS c5,
    DATE_ADD(DATE '2024-01-01', CAST(id % 365 AS INT)) AS c6,
    CAST(id % 100 AS DECIMAL(10, 2)) AS c7,
    id % 2 = 0 AS c8,
    {c9} AS c9
"""
FLOOR = """
SELECT
  COUNT(s.id) AS source_count, COUNT(t.id) AS target_count,
  SUM(IF(s.id IS NOT NULL AND t.id IS NOT NULL, 1, 0)) AS joined_count,
  SUM(IF(s.id IS NOT NULL AND t.id IS NULL, 1, 0)) AS source_only_count,
  SUM(IF(s.id IS NULL AND t.id IS NOT NULL, 1, 0)) AS target_only_count,
  {per_column},
  SUM(IF(s.id IS NOT NULL AND t.id IS NOT NULL AND {all_match}, 1, 0)) AS full_match_count
FROM bench.source s FULL OUTER JOIN bench.target t ON s.id = t.id
"""


def _match(col: str) -> str:
    if col in ("c3", "c7"):
        return f"ROUND(s.{col}, 3) <=> ROUND(t.{col}, 3)"
    return f"s.{col} <=> t.{col}"


def floor_sql() -> str:
    cols = [f"c{i}" for i in range(1, 10)]
    per_column = ", ".join(f"SUM(IF(s.id IS NOT NULL AND t.id IS NOT NULL AND {_match(c)}, 1, 0)) "
                           f"AS m_{c}" for c in cols)
    return FLOOR.format(per_column=per_column, all_match=" AND ".join(_match(c) for c in cols))


def generate(spark, rows: int) -> None:
    spark.sql("CREATE DATABASE IF NOT EXISTS bench")
    spark.sql("DROP TABLE IF EXISTS bench.source")
    spark.sql("DROP TABLE IF EXISTS bench.target")
    src = spark.range(rows).selectExpr(*_exprs("CAST(id % 97 AS BIGINT)"))
    src.write.format("parquet").saveAsTable("bench.source")
    tgt = spark.range(rows).selectExpr(*_exprs("CAST(id % 97 AS BIGINT) + IF(id % 100 = 0, 1, 0)"))
    tgt.write.format("parquet").saveAsTable("bench.target")


def _exprs(c9: str) -> list[str]:
    return [e.strip() for e in COLUMNS.format(c9=c9).split(",\n") if e.strip()]


def best_of(repeat: int, fn) -> tuple[float, object]:
    best, value = float("inf"), None
    for _ in range(repeat):
        began = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - began)
    return best, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--dir", type=Path, default=None, help="Spark state dir (default: temp)")
    args = parser.parse_args(argv)
    state_dir = args.dir or Path(tempfile.mkdtemp(prefix="meshbot_table_diff_bench_"))
    spark = get_session(SparkConnection(master="local[*]"), state_dir=state_dir)
    try:
        began = time.perf_counter()
        generate(spark, args.rows)
        print(f"generated 2 x {args.rows:,} rows x 10 columns in {time.perf_counter() - began:.1f}s")
        floor_sql_text = floor_sql()
        spark.sql(floor_sql_text).collect()   # warm up file listing and JIT
        floor_s, floor_row = best_of(args.repeat, lambda: spark.sql(floor_sql_text).collect()[0])
        diff_s, result = best_of(args.repeat, lambda: table_diff(
            engine=SparkEngine(spark), source_table="bench.source", target_table="bench.target", keys=["id"]))
        rows = result.rows
        assert rows.joined_count == floor_row["joined_count"], (rows, floor_row)
        assert rows.full_match_count == floor_row["full_match_count"], (rows, floor_row)
        print(f"floor (hand-written join aggregate): {floor_s:.2f}s")
        print(f"table_diff:                          {diff_s:.2f}s")
        print(f"ratio: {diff_s / floor_s:.2f}x   (partial matches: {rows.partial_match_count:,})")
    finally:
        stop_session()
    return 0


if __name__ == "__main__":
    sys.exit(main())
