"""Benchmark: meshbot's backfill (Context.plan + apply) vs the same rendered statements run directly (the floor).

Usage: .venv/bin/python benchmarks/backfill_overhead.py [--models 30] [--days 60] [--batch-size 1]
       [--concurrent-tasks 4,1] [--no-floor] [--dir PATH]
Generates a project of N models (every third FULL, the rest INCREMENTAL_BY_TIME_RANGE, model i
reading model (i-1)//2) over D daily intervals and times meshbot once per `concurrent_tasks` value
(each in its own schema, same process and SparkSession, in the order given), then replays each
batch's rendered query as one CTAS/INSERT statement (sequentially) into a separate schema. Prints
the times with the JVM's CPU time in each run (in cores: how busy the driver JVM kept the machine),
the speedup of the most concurrent value over the least, best run of each (issue 12 target: 4 vs
1 >= 1.5x), the ratio of the sequential run to the floor (target <= 1.25x) and Spark jobs per
model-interval (counted with the status tracker per job group).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.context import Context  # noqa: E402
from bot.plan.definition import BackfillKind, Plan, PlanOptions  # noqa: E402
from bot.plan.execution import order_snapshots  # noqa: E402
from bot.project.render import render_sql  # noqa: E402
from bot.timeline.times import to_ms  # noqa: E402
from bot.spark.sql import quote_table  # noqa: E402

START = "2024-01-01"
CONFIG = """\
gateways:
  local:
    connection:
      type: spark
      master: 'local[2]'
      concurrent_tasks: {concurrent}
      config: {{spark.sql.shuffle.partitions: '2', spark.ui.retainedJobs: '100000'{extra}}}
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


def generate(root: Path, *, models: int, days: int, batch_size: int | None, concurrent: int = 1,
             schema: str = "bench", spark_config: Sequence[str] = ()) -> None:
    (root / "models").mkdir(parents=True)
    extra = "".join(f", {key}: {json.dumps(value)}" for key, value in (item.split("=", 1) for item in spark_config))
    (root / "config.yaml").write_text(CONFIG.format(start=START, concurrent=concurrent, extra=extra))
    (root / "models" / "m00.sql").write_text(SOURCE.format(start=START, days=days))
    batch = f", batch_size {batch_size}" if batch_size else ""
    for i in range(1, models):
        name, parent = f"m{i:02d}", f"m{(i - 1) // 2:02d}"
        text = FULL if i % 3 == 0 else INCR
        (root / "models" / f"{name}.sql").write_text(text.format(name=name, parent=parent, batch=batch))
    if schema != "bench":
        for path in (root / "models").glob("*.sql"):
            path.write_text(re.sub(r"\bbench\.", f"{schema}.", path.read_text()))


def child_cpu() -> float:
    """CPU seconds (user + system, with their own waited-for children) of this process's children:
    the Spark driver JVM, and the `chmod`s it starts."""
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid():
            total += sum(int(v) for v in fields[11:15])
    return total / os.sysconf("SC_CLK_TCK")


def jobs_in(spark, group: str) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


def run_meshbot(root: Path, execution_time: str) -> tuple[float, float, Plan, Context]:
    """(wall seconds, the JVM's CPU seconds, plan, context) of one plan + apply."""
    context = Context(root)
    spark = context.engine.session           # start Spark and the metastore outside the timing
    spark.sql("SHOW SCHEMAS").collect()
    spark.sparkContext.setJobGroup("meshbot", "meshbot backfill")
    cpu = child_cpu()
    began = time.perf_counter()
    plan = context.plan("prod", options=PlanOptions(execution_time=execution_time))
    context.apply(plan)
    return time.perf_counter() - began, child_cpu() - cpu, plan, context


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
    parser.add_argument("--concurrent-tasks", default="4,1",
                        help="comma-separated concurrent_tasks values, each timed once in this order")
    parser.add_argument("--no-floor", action="store_true", help="skip the hand-written floor")
    parser.add_argument("--warmup-days", type=int, default=3,
                        help="first backfill the same models over this many days, untimed (0: none), "
                             "so no timed run pays for a cold JVM")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--spark-config", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting added to the connection's `config` (repeatable), to measure a JVM "
                             "option; it applies to the one session, started by the first project")
    args = parser.parse_args()
    base = args.dir or Path(tempfile.mkdtemp(prefix="meshbot_bench_"))
    execution_time = time.strftime("%Y-%m-%d", time.gmtime((to_ms(START) + args.days * 86_400_000) / 1000))
    values = [int(v) for v in args.concurrent_tasks.split(",")]
    timings: list[tuple[int, float, int, float]] = []
    context = plan = None
    if args.warmup_days:
        warm = base / "warmup"
        if warm.exists():
            shutil.rmtree(warm)
        generate(warm, models=args.models, days=args.warmup_days, batch_size=args.batch_size,
                 concurrent=values[0], schema="bench_warmup", spark_config=args.spark_config)
        warm_time = time.strftime("%Y-%m-%d", time.gmtime((to_ms(START) + args.warmup_days * 86_400_000) / 1000))
        _, _, _, context = run_meshbot(warm, warm_time)
        for name in ("bench_warmup", "sqlmesh__bench_warmup"):
            context.engine.session.sql(f"DROP SCHEMA IF EXISTS `{name}` CASCADE")
    for index, concurrent in enumerate(values):
        root = base / f"project_c{concurrent}_{index}"
        if root.exists():
            shutil.rmtree(root)
        schema = f"bench_c{concurrent}_{index}"
        generate(root, models=args.models, days=args.days, batch_size=args.batch_size,
                 concurrent=concurrent, schema=schema, spark_config=args.spark_config)
        before = jobs_in(context.engine.session, "meshbot") if context is not None else 0
        seconds, jvm, plan, context = run_meshbot(root, execution_time)
        jobs = jobs_in(context.engine.session, "meshbot") - before   # the group spans every run
        timings.append((concurrent, seconds, jobs, jvm))
        for name in (schema, f"sqlmesh__{schema}"):
            context.engine.session.sql(f"DROP SCHEMA IF EXISTS `{name}` CASCADE")
    model_intervals = sum(len(b.intervals) if b.kind is BackfillKind.INTERVALS else 1 for b in plan.backfills)
    batches = sum(len(b.batches) for b in plan.backfills)
    print(f"project: {args.models} models x {args.days} days, batch_size {args.batch_size}: "
          f"{model_intervals} model-intervals in {batches} batches; load average before: "
          f"{_load()}")
    for concurrent, seconds, jobs, jvm in timings:
        print(f"meshbot backfill, concurrent_tasks: {concurrent}: {seconds:8.2f} s  ({jobs} Spark jobs, "
              f"{jobs / model_intervals:.2f} per model-interval; JVM CPU {jvm:.1f} s = "
              f"{jvm / seconds:.2f} cores)")
    best = {value: min(t for v, t, _, _ in timings if v == value) for value in dict.fromkeys(values)}
    if len(best) > 1:
        most, fewest = max(best), min(best)
        print(f"speedup concurrent_tasks {most} vs {fewest} (best run of each): "
              f"{best[fewest] / best[most]:.2f}x (target >= 1.5x for 4 vs 1)")
    if not args.no_floor:
        floor_s, statements = run_floor(context, plan)
        floor_jobs = jobs_in(context.engine.session, "floor")
        sequential = min((t for t in timings if t[0] == 1), default=timings[-1], key=lambda t: t[1])
        print(f"floor ({statements} statements):     {floor_s:8.2f} s  ({floor_jobs} Spark jobs, "
              f"{floor_jobs / model_intervals:.2f} per model-interval)")
        print(f"ratio meshbot (concurrent_tasks: {sequential[0]}) / floor: {sequential[1] / floor_s:.2f}x "
              "(target <= 1.25x)")
    print(f"load average after: {_load()}")
    context.close()


def _load() -> str:
    import os

    return " ".join(f"{v:.1f}" for v in os.getloadavg())


if __name__ == "__main__":
    main()
