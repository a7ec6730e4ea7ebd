"""Benchmark a cold `meshbot plan prod --explain --json` (fresh clone: no .meshbot/cache) on 1000 models.

Generates the layered project of plan_scale.py, applies it state-only (the plan builder + PlanEvaluator,
no Spark tables), then runs N interleaved rounds in fresh processes, each round timing in turn:

- cold: `.meshbot/cache` removed first, as in a fresh clone or a CI run without a restored cache;
- warm: right after, with the cache the cold run wrote;
- reference: the floor of any meshbot command in the same round, `python -m bot --help` (interpreter
  start and the CLI's imports, no project read).

With `--baseline DIR --baseline-python PY`, each round also times cold and warm with another checkout
of meshbot (e.g. the commit before a change, in its own venv), just before this one's.
Prints the best wall time, the child's CPU (user+sys) and peak RSS of each, the machine's load average,
and which sqlglot build was used (`sqlglotc`, compiled, or pure Python).
Run: `.venv/bin/python benchmarks/cold_plan.py [--models 1000] [--repeats 5] [--workdir DIR]`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import plan_scale  # noqa: E402 - the generator, the state-only apply and the measuring helper

TARGETS = {"cold": (1.5, 150.0), "warm": (1.0, None)}


def _sqlglot_build() -> str:
    from sqlglot import exp

    return "sqlglotc (compiled)" if hasattr(exp.Expression, "__mypyc_attrs__") else "pure Python"


def measure_with(python: str, repo: Path, root: Path, *args: str) -> plan_scale.Measure:
    """plan_scale.measure, with another checkout's benchmarks/plan_scale.py run by another Python."""
    code = ("import sys, pathlib; sys.path.insert(0, %r); import plan_scale as b; "
            "m = b.run_cli(pathlib.Path(%r), *%r); print(repr((m.wall, m.cpu, m.rss_mb)))")
    proc = subprocess.run([python, "-c", code % (str(repo / "benchmarks"), str(root), args)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(proc.stdout + proc.stderr)
    wall, cpu, rss = eval(proc.stdout.strip().splitlines()[-1])   # our own repr of three floats
    return plan_scale.Measure(wall=wall, cpu=cpu, rss_mb=rss, output="")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--baseline", default=None, help="another meshbot checkout to time in each round")
    parser.add_argument("--baseline-python", default=sys.executable, help="the Python (venv) of --baseline")
    args = parser.parse_args(argv)
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="meshbot_cold_"))
    root = workdir / f"project_{args.models}"
    plan_scale.generate(root, args.models)
    applied = plan_scale.apply_state_only(root)
    print(f"[{args.models} models] applied state-only in {applied:.1f} s; sqlglot: {_sqlglot_build()}", flush=True)
    cache = root / ".meshbot" / "cache"
    plan = ("plan", "prod", "--explain", "--json")
    plan_scale.measure(root, *plan)   # writes bytecode (an installed meshbot has it)
    runs: dict[str, list[plan_scale.Measure]] = {"cold": [], "warm": [], "reference": []}
    if args.baseline:
        baseline = Path(args.baseline).resolve()
        runs = {"baseline cold": [], "baseline warm": [], **runs}
        measure_with(args.baseline_python, baseline, root, *plan)
    loads = []
    for round_ in range(args.repeats):
        loads.append(os.getloadavg()[0])
        if args.baseline:
            shutil.rmtree(cache, ignore_errors=True)
            runs["baseline cold"].append(measure_with(args.baseline_python, baseline, root, *plan))
            runs["baseline warm"].append(measure_with(args.baseline_python, baseline, root, *plan))
        shutil.rmtree(cache, ignore_errors=True)
        runs["cold"].append(plan_scale.measure(root, *plan))
        runs["warm"].append(plan_scale.measure(root, *plan))
        runs["reference"].append(plan_scale.measure(root, "--help"))
        print(f"round {round_ + 1}: " + "  ".join(f"{k} {v[-1].wall:.2f} s" for k, v in runs.items()) +
              f"  (load {loads[-1]:.1f})", flush=True)
    print(f"\n{args.models} models, plan prod --explain --json, best of {args.repeats} "
          f"(load average {min(loads):.1f}-{max(loads):.1f})")
    print(f"{'run':<34} {'wall s':>7} {'cpu s':>7} {'peak MB':>8}  target")
    labels = {"cold": "cold (no .meshbot/cache)", "warm": "warm (cache from the cold run)",
              "reference": "reference: python -m bot --help",
              "baseline cold": "baseline cold", "baseline warm": "baseline warm"}
    for key, measures in runs.items():
        best = min(measures, key=lambda m: m.wall)
        cpu, rss = min(m.cpu for m in measures), max(m.rss_mb for m in measures)
        target = TARGETS.get(key)
        text = ""
        if target:
            ok = best.wall <= target[0] and (target[1] is None or rss <= target[1])
            text = f"<= {target[0]} s" + (f", <= {target[1]:.0f} MB" if target[1] else "") + \
                ("  ok" if ok else "  MISSED")
        print(f"{labels[key]:<34} {best.wall:>7.2f} {cpu:>7.2f} {rss:>8.0f}  {text}")
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
