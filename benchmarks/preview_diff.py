"""Benchmark: the PR preview diff of one changed INCREMENTAL_BY_TIME_RANGE model over a 7-day window vs one
hand-written full-outer-join aggregate over the same window (the floor), on the same session.

Usage: .venv/bin/python benchmarks/preview_diff.py [--rows N] [--days D] [--window W] [--repeat R] [--dir PATH]
Generates a raw Parquet table of N rows x 10 columns spread over D consecutive days, a project with one
incremental model over it (grain id), applies it to prod (N rows in prod's table), then changes one column
for 1% of the rows and times the data diff of `Context.review` of the prod plan (window W days, nothing written)
against the hand-written query (one untimed warm-up run each, then R rounds timing one of each, best of
each and the medians kept); prints both, the ratio, and checks they agree. The same rounds also time
the data diff without the column profiles (null share, approx distinct, min/max/mean: issue 28) and the
whole review (data diff and Spark plans in one preview pass), and count the Spark jobs of each, to show
the profile rides in the same aggregate query instead of a second scan.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from datetime import date, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import table_diff  # noqa: E402
from table_diff import best_of  # noqa: E402

import bot.diff.table_diff as diff_api  # noqa: E402

from bot.context import Context  # noqa: E402
from bot.diff.review import ReviewOptions  # noqa: E402
from bot.plan.definition import PlanOptions  # noqa: E402
from bot.project.example import EXAMPLE_DIR  # noqa: E402
from bot.spark.sql import quote_table  # noqa: E402
from bot.spark.session import stop_session  # noqa: E402

START = date(2024, 1, 1)
MODEL = """
MODEL (
  name bench.daily_events,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column (ds, '%Y-%m-%d'),
    batch_size 10000
  ),
  start '2024-01-01',
  end '{end}',
  grain id
);

SELECT
  id,
  {c1} AS c1,
  c2, c3, c4, c5, c6, c7, c8, c9,
  ds
FROM bench_raw.events
WHERE ds BETWEEN @start_ds AND @end_ds
"""
OLD_C1, NEW_C1 = "c1", "c1 + IF(id % 100 = 0, 1, 0)"
BASE = "(SELECT * FROM {prod} WHERE ds BETWEEN '{first}' AND '{last}') s"
CHANGE = """(
  SELECT id, {new_c1} AS c1, c2, c3, c4, c5, c6, c7, c8, c9, ds
  FROM bench_raw.events WHERE ds BETWEEN '{first}' AND '{last}'
) t"""


def floor_sql(prod: str, first: str, last: str) -> str:
    """table_diff.py's hand-written aggregate, over prod's window and the changed query's window."""
    return (table_diff.floor_sql()
            .replace("bench.source s", BASE.format(prod=quote_table(prod), first=first, last=last))
            .replace("bench.target t", CHANGE.format(new_c1=NEW_C1, first=first, last=last)))


def generate(spark, rows: int, days: int) -> None:
    """N rows over `days` consecutive days (ds as 'YYYY-MM-DD'), written day-contiguous as Parquet."""
    per_day = max(1, rows // days)
    spark.sql("CREATE DATABASE IF NOT EXISTS bench_raw")
    spark.sql("DROP TABLE IF EXISTS bench_raw.events")
    frame = spark.range(rows).selectExpr(
        "id", "id * 2 AS c1", "CAST(id % 1000 AS STRING) AS c2", "id * 0.5D AS c3",
        "CAST(id % 7 AS INT) AS c4", "CONCAT('name_', CAST(id % 5000 AS STRING)) AS c5",
        "DATE_ADD(DATE '2024-01-01', CAST(id % 365 AS INT)) AS c6", "CAST(id % 100 AS DECIMAL(10, 2)) AS c7",
        "id % 2 = 0 AS c8", "CAST(id % 97 AS BIGINT) AS c9",
        f"CAST(DATE_ADD(DATE '{START}', CAST(LEAST(id DIV {per_day}, {days - 1}) AS INT)) AS STRING) AS ds")
    frame.write.format("parquet").saveAsTable("bench_raw.events")


def _jobs(spark, call) -> int:
    """Spark jobs one call starts (its job group's, from the status tracker)."""
    group = f"bench_{time.monotonic_ns()}"
    spark.sparkContext.setJobGroup(group, "benchmark")
    try:
        call()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--days", type=int, default=100)
    parser.add_argument("--window", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None, help="work folder (default: temp, removed after)")
    args = parser.parse_args(argv)
    work = args.dir or Path(tempfile.mkdtemp(prefix="meshbot_preview_diff_bench_"))
    root = work / "project"
    (root / "models").mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text((EXAMPLE_DIR / "config.yaml").read_text())   # local Spark, SQLite
    end = START + timedelta(days=args.days - 1)
    model = root / "models" / "daily_events.sql"
    model.write_text(MODEL.format(end=end, c1=OLD_C1))
    try:
        context = Context(root)
        spark = context.engine.session
        began = time.perf_counter()
        generate(spark, args.rows, args.days)
        print(f"generated {args.rows:,} rows x 11 columns over {args.days} days in "
              f"{time.perf_counter() - began:.1f}s")
        began = time.perf_counter()
        context.apply(context.plan("prod", options=PlanOptions(skip_tests=True)))
        prod = context.table_in("prod", "bench.daily_events")
        print(f"applied to prod ({spark.table(prod).count():,} rows) in {time.perf_counter() - began:.1f}s")

        model.write_text(MODEL.format(end=end, c1=NEW_C1))
        context = Context(root)
        plan = context.plan("prod", options=PlanOptions(skip_tests=True))
        first, last = end - timedelta(days=args.window - 1), end
        floor_text = floor_sql(prod, str(first), str(last))

        def diff():
            return context.review(plan, ReviewOptions(window_days=args.window, plan_queries=False)).diffs

        def review():
            return context.review(plan, ReviewOptions(window_days=args.window))

        # one untimed run of each first (file listing, JIT), then --repeat rounds each timing the floor
        # and the preview diff one after the other (both see the same load on a shared machine); best of each
        cold_s, _ = best_of(1, diff)
        spark.sql(floor_text).collect()
        floor_times: list[float] = []
        diff_times: list[float] = []
        bare_times: list[float] = []
        review_times: list[float] = []
        with_profiles = diff_api.row_diff

        def without_profiles():
            diff_api.row_diff = lambda engine, spec, **kw: with_profiles(engine, replace(spec, profile=False), **kw)
            try:
                return diff()
            finally:
                diff_api.row_diff = with_profiles

        for _ in range(args.repeat):
            run_s, floor_row = best_of(1, lambda: spark.sql(floor_text).collect()[0])
            floor_times.append(run_s)
            run_s, results = best_of(1, diff)
            diff_times.append(run_s)
            run_s, _ = best_of(1, without_profiles)
            bare_times.append(run_s)
            run_s, _ = best_of(1, review)
            review_times.append(run_s)
        jobs = {name: _jobs(spark, call) for name, call in (
            ("with profiles", diff),
            ("without", without_profiles), ("review", review))}
        floor_s, diff_s = min(floor_times), min(diff_times)
        floor_median, diff_median = statistics.median(floor_times), statistics.median(diff_times)
        (result,) = results
        rows = result.rows
        assert rows.joined_count == floor_row["joined_count"], (rows, floor_row)
        assert rows.full_match_count == floor_row["full_match_count"], (rows, floor_row)
        assert rows.source_count == floor_row["source_count"], (rows, floor_row)
        print(f"window: {result.window}; {rows.source_count:,} prod rows, {rows.target_count:,} PR rows, "
              f"{rows.partial_match_count:,} changed")
        print(f"floor (hand-written join aggregate): best {floor_s:.2f}s, median {floor_median:.2f}s")
        print(f"data diff:                           best {diff_s:.2f}s, median {diff_median:.2f}s   "
              f"(first, cold run: {cold_s:.2f}s)")
        print(f"ratio: best {diff_s / floor_s:.2f}x, median {diff_median / floor_median:.2f}x   "
              f"(target <= 1.5x)")
        bare_s, bare_median = min(bare_times), statistics.median(bare_times)
        print(f"data diff without column profiles:    best {bare_s:.2f}s, median {bare_median:.2f}s; the profiles "
              f"add {100 * (diff_s / bare_s - 1):+.0f}% (best), {100 * (diff_median / bare_median - 1):+.0f}% (median)")
        print(f"whole review (data diff + Spark plans, one preview pass): best {min(review_times):.2f}s, "
              f"median {statistics.median(review_times):.2f}s")
        print(f"Spark jobs per data diff: {jobs['with profiles']} with profiles, {jobs['without']} without; "
              f"{jobs['review']} per whole review")
    finally:
        stop_session()
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
