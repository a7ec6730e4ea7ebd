"""Benchmark: a first deploy, `meshbot plan --auto-apply --skip-backfill` of N models, per concurrent_tasks.

Usage: .venv/bin/python benchmarks/first_deploy.py [--models 100] [--concurrent-tasks 4,1] [--dir PATH]
       [--spark-config KEY=VALUE ...]
Generates plan_scale.py's layered project (N models: FULL / VIEW / INCREMENTAL_BY_TIME_RANGE over
1-3 parents of the two layers above) on `local[2]`, then, for each `concurrent_tasks` value in the
order given, copies it to a fresh directory (no state, no catalog) and runs the CLI in a child
process: JVM start, plan, N physical tables (columns from analyzing each query) and N views,
all on the embedded Derby metastore. Prints the wall time of each and the load average.
Issue 12 target: 1000 models <= 60 s, 2000 models <= 2.2x the 1000-model time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import plan_scale  # noqa: E402


def _load() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def _config_block(settings: list[str]) -> str:
    if not settings:
        return ""
    pairs = [setting.split("=", 1) for setting in settings]
    return "      config:\n" + "".join(f"        {key}: {json.dumps(value)}\n" for key, value in pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--concurrent-tasks", default="4,1")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--spark-config", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting added to the connection's `config` (repeatable), to measure a JVM or "
                             "metastore option")
    args = parser.parse_args()
    base = args.dir or Path(tempfile.mkdtemp(prefix="meshbot_deploy_"))
    template = base / "template"
    plan_scale.generate(template, args.models)
    config = (template / "config.yaml").read_text().replace("master: local[1]", "master: local[2]")
    results = []
    for index, value in enumerate(int(v) for v in args.concurrent_tasks.split(",")):
        root = base / f"c{value}_{index}"
        if root.exists():
            shutil.rmtree(root)
        shutil.copytree(template, root)
        (root / "config.yaml").write_text(
            config.replace("      master: local[2]\n", f"      master: local[2]\n      concurrent_tasks: {value}\n"
                           + _config_block(args.spark_config)))
        load = _load()
        measured = plan_scale.run_cli(root, "plan", "--auto-apply", "--skip-backfill", "--no-prompts")
        results.append((value, measured.wall, measured.cpu, load))
        print(f"first deploy of {args.models} models, concurrent_tasks: {value}: {measured.wall:7.1f} s wall "
              f"({measured.cpu:.1f} s CPU of the Python side; load average before {load})", flush=True)
    if len(results) > 1:
        print(f"speedup concurrent_tasks {results[0][0]} vs {results[-1][0]}: "
              f"{results[-1][1] / results[0][1]:.2f}x; load average after {_load()}")


if __name__ == "__main__":
    main()
