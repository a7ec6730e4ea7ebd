"""Benchmark: promote a dev environment of N models whose physical tables already exist (a virtual update).

Usage: .venv/bin/python benchmarks/virtual_update.py [--models 500] [--dir PATH]
Setup (not timed): a project of N independent FULL models applied to prod with --skip-backfill, so
every physical table exists. Timed: `plan dev --include-unmodified` + apply, which evaluates nothing
and only promotes the environment and creates its N views. Prints the total, the plan and apply
parts, and the time per view (target: total under 60 s for 500 models on 2 cores).
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
from bot.plan.definition import PlanOptions  # noqa: E402

CONFIG = """\
gateways:
  local:
    connection: {type: spark, master: 'local[2]', config: {spark.sql.shuffle.partitions: '2'}}
    state_connection: {type: sqlite, database: .meshbot/state.db}
default_gateway: local
model_defaults: {dialect: spark, start: '2024-01-01', cron: '@daily'}
"""
MODEL = "MODEL (name vu.m{i:03d}, kind FULL);\nSELECT {i} AS id, 'x' AS label\n"


def generate(root: Path, models: int) -> None:
    (root / "models").mkdir(parents=True)
    (root / "config.yaml").write_text(CONFIG)
    for i in range(models):
        (root / "models" / f"m{i:03d}.sql").write_text(MODEL.format(i=i))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=500)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    root = (args.dir or Path(tempfile.mkdtemp(prefix="meshbot_vu_"))) / "project"
    if root.exists():
        shutil.rmtree(root)
    generate(root, args.models)

    setup = Context(root)
    began = time.perf_counter()
    setup.apply(setup.plan("prod", options=PlanOptions(skip_backfill=True)))
    print(f"setup: {args.models} tables and prod views in {time.perf_counter() - began:.1f} s (not timed)")
    setup.close()

    context = Context(root)
    began = time.perf_counter()
    plan = context.plan("dev", options=PlanOptions(include_unmodified=True))
    planned = time.perf_counter()
    result = context.apply(plan)
    done = time.perf_counter()
    assert not result.evaluated, "a virtual update must evaluate nothing"
    total = done - began
    print(f"virtual update of `dev` ({result.views_created} views): total {total:.2f} s "
          f"(plan {planned - began:.2f} s, apply {done - planned:.2f} s); "
          f"{(done - planned) / max(result.views_created, 1) * 1000:.1f} ms per view; "
          f"target < 60 s for 500 models")
    context.close()


if __name__ == "__main__":
    main()
