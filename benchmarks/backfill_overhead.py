"""Benchmark: meshbot's backfill (Context.plan + apply) vs the same rendered statements run directly (the floor).

Usage: .venv/bin/python benchmarks/backfill_overhead.py [--models 30] [--days 60] [--batch-size 1] [--dir PATH]
Generates a project of N models (every third FULL, the rest INCREMENTAL_BY_TIME_RANGE) over D daily
intervals, times meshbot, then replays each batch's rendered query as one CTAS/INSERT statement on
the same SparkSession into a separate schema. Prints both times, their ratio (target <= 1.25x)
and Spark jobs per model-interval (counted with the status tracker per job group).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.context import Context  # noqa: E402
from bot.plan.definition import BackfillKind, Plan, PlanOptions  # noqa: E402
from bot.plan.evaluator import order_snapshots  # noqa: E402
from bot.project.render import render_sql  # noqa: E402
from bot.project.timeutil import to_ms  # noqa: E402
from bot.spark.engine import quote_table  # noqa: E402

START = "2024-01-01"
CONFIG = """\
gateways:
  local:
    connection:
      type: spark
      master: 'local[2]'
      config: {{spark.sql.shuffle.partitions: '2', spark.ui.retainedJobs: '100000'}}
    state_connection: {{type: sqlite, database: .meshbot/state.db}}
default_gateway: local
model_defaults: {{dialect: spark, start: '{start}', cron: '@daily'}}
"""
SOURCE = """\
MODEL (name bench.m00, kind FULL);
SELECT CAST(d AS STRING) AS ds, id, CAST(id * day(d) AS INT) AS amount
FROM (SELECT explode(sequence(DATE'{start}', DATE_ADD(DATE'{start}', {days}), INTERVAL 1 DAY)) AS d)
LATERAL VIEW explode(sequence(1, 50)) t AS id
"""
FULL = "MODEL (name bench.{name}, kind FULL);\nSELECT ds, id, amount + 1 AS amount FROM bench.{parent}\n"
INCR = """\
MODEL (name bench.{name}, kind INCREMENTAL_BY_TIME_RANGE (time_column ds{batch}));
SELECT ds, id, (amount * 2) % 1000 AS amount FROM bench.{parent} WHERE ds BETWEEN @start_ds AND @end_ds
"""


def generate(root: Path, *, models: int, days: int, batch_size: int | None) -> None:
    (root / "models").mkdir(parents=True)
    (root / "config.yaml").write_text(CONFIG.format(start=START))
    (root / "models" / "m00.sql").write_text(SOURCE.format(start=START, days=days))
    batch = f", batch_size {batch_size}" if batch_size else ""
    for i in range(1, models):
        name, parent = f"m{i:02d}", f"m{(i - 1) // 2:02d}"
        text = FULL if i % 3 == 0 else INCR
        (root / "models" / f"{name}.sql").write_text(text.format(name=name, parent=parent, batch=batch))


def jobs_in(spark, group: str) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


def run_meshbot(root: Path, execution_time: str) -> tuple[float, Plan, Context]:
    context = Context(root)
    spark = context.engine.session           # start Spark and the metastore outside the timing
    spark.sql("SHOW SCHEMAS").collect()
    spark.sparkContext.setJobGroup("meshbot", "meshbot backfill")
    began = time.perf_counter()
    plan = context.plan("prod", options=PlanOptions(execution_time=execution_time))
    context.apply(plan)
    return time.perf_counter() - began, plan, context


def run_floor(context: Context, plan: Plan) -> tuple[float, int]:
    """Each batch's rendered query as one statement: CTAS for the first batch, INSERT INTO after."""
    spark = context.engine.session
    spark.sparkContext.setJobGroup("floor", "direct statements")
    spark.sql("DROP SCHEMA IF EXISTS `bench_floor` CASCADE")
    began = time.perf_counter()
    spark.sql("CREATE SCHEMA `bench_floor`")
    mapping = {name: f"bench_floor.{name.split('.')[1]}" for name in plan.snapshots}
    backfills = {b.snapshot_id.name: b for b in plan.backfills}
    statements = 0
    for snapshot in order_snapshots(plan.snapshots.values()):
        backfill = backfills.get(snapshot.name)
        if backfill is None:
            continue
        model, table = context.models[snapshot.name], quote_table(mapping[snapshot.name])
        for index, (start, end) in enumerate(backfill.batches):
            sql = render_sql(model, start=start, end=end, execution_time=plan.execution_time,
                             variables=context.config.variables, table_mapping=mapping,
                             models=context.models, gateway=context.gateway.name,
                             this_model=mapping[snapshot.name])
            full = backfill.kind is BackfillKind.FULL_REFRESH
            verb = f"CREATE TABLE {table} USING parquet AS" if index == 0 else f"INSERT INTO {table}"
            spark.sql(f"{verb} {sql}" if index == 0 or not full else f"INSERT OVERWRITE {table} {sql}")
            statements += 1
    elapsed = time.perf_counter() - began
    spark.sql("DROP SCHEMA IF EXISTS `bench_floor` CASCADE")
    return elapsed, statements


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=30)
    parser.add_argument("--days", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    root = (args.dir or Path(tempfile.mkdtemp(prefix="meshbot_bench_"))) / "project"
    if root.exists():
        shutil.rmtree(root)
    generate(root, models=args.models, days=args.days, batch_size=args.batch_size)
    execution_time = time.strftime("%Y-%m-%d", time.gmtime((to_ms(START) + args.days * 86_400_000) / 1000))
    meshbot_s, plan, context = run_meshbot(root, execution_time)
    spark = context.engine.session
    meshbot_jobs = jobs_in(spark, "meshbot")
    floor_s, statements = run_floor(context, plan)
    floor_jobs = jobs_in(spark, "floor")
    model_intervals = sum(len(b.intervals) if b.kind is BackfillKind.INTERVALS else 1 for b in plan.backfills)
    batches = sum(len(b.batches) for b in plan.backfills)
    print(f"project: {args.models} models x {args.days} days, batch_size {args.batch_size}: "
          f"{model_intervals} model-intervals in {batches} batches")
    print(f"meshbot backfill (plan + apply): {meshbot_s:8.2f} s  ({meshbot_jobs} Spark jobs, "
          f"{meshbot_jobs / model_intervals:.2f} per model-interval, {meshbot_jobs / batches:.2f} per batch)")
    print(f"floor ({statements} statements):     {floor_s:8.2f} s  ({floor_jobs} Spark jobs, "
          f"{floor_jobs / model_intervals:.2f} per model-interval)")
    print(f"ratio meshbot / floor: {meshbot_s / floor_s:.2f}x (target <= 1.25x)")
    context.close()


if __name__ == "__main__":
    main()
