"""Benchmark `meshbot plan --explain` on generated projects of 100, 1000 and 5000 models.

For each size: generate a layered project, apply it once (`plan --auto-apply --skip-backfill` on
Spark, or, with `--apply state`, the real plan builder + PlanEvaluator with a runner that creates
nothing on Spark), then time `python -m bot -p DIR plan --explain` in a fresh subprocess with no
change and with 5 changed models, twice each (the first run after a change refreshes the parse
cache, the second is the steady state). Peak memory is the child's ru_maxrss, CPU time its
user+sys time. Run: `.venv/bin/python benchmarks/plan_scale.py [--sizes 100,1000,5000]`.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KINDS = ("FULL", "VIEW", "INCREMENTAL_BY_TIME_RANGE")
SPARK_APPLY_LIMIT = 100   # above this, "auto" writes the applied state without Spark

CONFIG = """\
gateways:
  local:
    connection:
      type: spark
      master: local[1]
    state_connection:
      type: sqlite
      database: .meshbot/state.db
default_gateway: local
model_defaults:
  dialect: spark
  start: '2024-01-01'
  cron: '@daily'
variables:
  min_amount: 5
"""


# -- project generation ---------------------------------------------------------------------------

def _layers(count: int) -> list[int]:
    """Layer index per model: ~10% sources, then layers of decreasing width."""
    depth = max(3, min(12, count // 50))
    sources = max(2, count // 10)
    layer_of = [0] * sources
    rest = count - sources
    for i in range(rest):
        layer_of.append(1 + i * (depth - 1) // max(rest, 1))
    return layer_of


def _header(name: str, kind: str, index: int) -> str:
    if kind == "INCREMENTAL_BY_TIME_RANGE":
        kind_sql = "INCREMENTAL_BY_TIME_RANGE (\n    time_column (ds, '%Y-%m-%d')\n  )"
    else:
        kind_sql = kind
    return (f"MODEL (\n  name {name},\n  kind {kind_sql},\n  start '2024-01-01',\n"
            f"  end '2024-01-03',\n  grain id,\n  description 'generated model {index}'\n);\n\n")


def _source_sql(index: int) -> str:
    rows = ",\n    ".join(f"({i}, '2024-01-0{1 + i % 3}', {10.0 * (i + index % 7):.1f}, 'c{i % 4}')"
                          for i in range(1, 6))
    return ("-- a generated source model\nSELECT\n  id,\n  ds,\n  amount,\n  category\n"
            f"FROM (\n  VALUES\n    {rows}\n) AS t(id, ds, amount, category)\n")


def _child_sql(index: int, parents: list[str], rng: random.Random, *, incremental: bool) -> str:
    shape = rng.choice(("join", "aggregate", "case")) if len(parents) > 1 else \
        rng.choice(("aggregate", "case"))
    where = "WHERE p0.ds BETWEEN @start_ds AND @end_ds" if incremental else \
        "WHERE p0.amount >= @VAR('min_amount')"
    joins = "".join(f"\nLEFT JOIN {parent} AS p{i} ON p0.id = p{i}.id AND p0.ds = p{i}.ds"
                    for i, parent in enumerate(parents[1:], start=1))
    extra = " + ".join(f"COALESCE(p{i}.amount, 0)" for i in range(1, len(parents))) or "0"
    source = f"{parents[0]} AS p0{joins}"
    if shape == "aggregate":
        return (f"WITH base AS (\n  SELECT p0.id, p0.ds, p0.amount + {extra} AS amount, p0.category\n"
                f"  FROM {source}\n  {where}\n)\nSELECT\n  id,\n  ds,\n"
                f"  CAST(SUM(amount) * {1 + index % 5} AS DOUBLE) AS amount,\n  MAX(category) AS category\n"
                "FROM base\nGROUP BY\n  id,\n  ds\n")
    if shape == "case":
        return ("SELECT\n  p0.id,\n  p0.ds,\n"
                f"  CASE WHEN p0.amount > {index % 50} THEN p0.amount * 2 ELSE p0.amount + {extra} END"
                " AS amount,\n"
                f"  CASE WHEN p0.category = 'c1' THEN 'one' ELSE p0.category END AS category\n"
                f"FROM {source}\n{where}\n")
    return (f"SELECT\n  p0.id,\n  p0.ds,\n  p0.amount + {extra} AS amount,\n"
            f"  COALESCE(p1.category, p0.category) AS category\nFROM {source}\n{where}\n")


def generate(root: Path, count: int, *, seed: int = 7) -> list[Path]:
    """Write a project of `count` models under root; returns the model files (parents first)."""
    rng = random.Random(seed)
    if root.exists():
        shutil.rmtree(root)
    (root / "models").mkdir(parents=True)
    (root / "config.yaml").write_text(CONFIG)
    layer_of = _layers(count)
    by_layer: dict[int, list[str]] = {}
    files = []
    for index, layer in enumerate(layer_of):
        name = f"bench_l{layer}.m{index:05d}"
        if layer == 0:
            kind, sql = rng.choice(("FULL", "VIEW")), _source_sql(index)
        else:
            kind = KINDS[index % len(KINDS)]
            pool = [n for lower in range(max(0, layer - 2), layer) for n in by_layer.get(lower, ())]
            parents = rng.sample(pool, k=min(len(pool), rng.randint(1, 3)))
            sql = _child_sql(index, parents, rng, incremental=kind == "INCREMENTAL_BY_TIME_RANGE")
        by_layer.setdefault(layer, []).append(name)
        path = root / "models" / f"l{layer}" / f"m{index:05d}.sql"
        path.parent.mkdir(exist_ok=True)
        path.write_text(_header(name, kind, index) + sql)
        files.append(path)
    return files


def change_models(files: list[Path], count: int = 5) -> list[Path]:
    """Edit `count` models spread over the DAG (a non-breaking extra column-free change: a new filter)."""
    step = max(1, len(files) // count)
    picked = files[step // 2::step][:count]
    for path in picked:
        text = path.read_text()
        path.write_text(text.replace("AS amount,", "AS amount, /* edited */", 1)
                        .replace("SELECT\n", "SELECT DISTINCT\n", 1))
    return picked


# -- applying ---------------------------------------------------------------------------------------

def run_cli(root: Path, *args: str, check: bool = True) -> "Measure":
    """Run `python -m bot -p root ARGS` as a child and measure it."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "bot", "-p", str(root), *args], cwd=REPO,
                          capture_output=True, text=True, env=_child_env(root))
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if check and proc.returncode != 0:
        raise SystemExit(f"meshbot {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # ru_maxrss of RUSAGE_CHILDREN is the largest child so far: children must grow, or use a fresh
    # measuring process (see _measure_in_child) so each figure is its own.
    return Measure(wall=wall, cpu=cpu, rss_mb=after.ru_maxrss / 1024, output=proc.stdout)


def _child_env(root: Path) -> dict[str, str]:
    """Children write bytecode (to a private folder), as an installed meshbot would have it."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(root.parent / "pycache")
    return env


@dataclass(frozen=True)
class Measure:
    wall: float
    cpu: float
    rss_mb: float
    output: str


def measure(root: Path, *args: str) -> Measure:
    """Run the CLI inside a fresh helper process so RUSAGE_CHILDREN.ru_maxrss is this run's alone."""
    code = ("import sys, pathlib; sys.path.insert(0, %r); import plan_scale as b; "
            "m = b.run_cli(pathlib.Path(%r), *%r); "
            "print(repr((m.wall, m.cpu, m.rss_mb))); sys.stderr.write(m.output)")
    proc = subprocess.run([sys.executable, "-c", code % (str(Path(__file__).parent), str(root), args)],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(proc.stdout + proc.stderr)
    wall, cpu, rss = eval(proc.stdout.strip().splitlines()[-1])   # our own repr of three floats
    return Measure(wall=wall, cpu=cpu, rss_mb=rss, output=proc.stderr)


def apply_with_spark(root: Path) -> float:
    started = time.perf_counter()
    run_cli(root, "plan", "--auto-apply", "--skip-backfill")
    return time.perf_counter() - started


class _NoSparkRunner:
    """A BatchRunner that creates nothing: the state records what a --skip-backfill apply records."""

    def ensure_schemas(self, schemas) -> None: ...
    def create_physical(self, snapshot, model, *, table, table_mapping) -> None: ...
    def evaluate(self, snapshot, model, *, table, interval, table_mapping, execution_time) -> None: ...
    def audit(self, snapshot, model, *, table, interval, execution_time): return ()
    def replace_views(self, views) -> None: ...
    def drop_views(self, views) -> None: ...


def apply_state_only(root: Path) -> float:
    """The plan builder's plan applied through the real PlanEvaluator and state store, without Spark."""
    sys.path.insert(0, str(REPO))
    from bot.context import Context
    from bot.plan.definition import PlanOptions
    from bot.plan.evaluator import PlanEvaluator

    started = time.perf_counter()
    context = Context(root)
    plan = context.plan("prod", options=PlanOptions(skip_backfill=True))
    models = context.models
    PlanEvaluator(state=context.state, runner=_NoSparkRunner(),
                  models_for=lambda s: models[s.name]).apply(plan)
    context.close()
    return time.perf_counter() - started


# -- the benchmark ----------------------------------------------------------------------------------

def bench_size(count: int, *, workdir: Path, apply_mode: str, repeats: int) -> list[tuple]:
    root = workdir / f"project_{count}"
    files = generate(root, count)
    mode = apply_mode if apply_mode != "auto" else ("spark" if count <= SPARK_APPLY_LIMIT else "state")
    apply_s = apply_with_spark(root) if mode == "spark" else apply_state_only(root)
    how = ("`plan --auto-apply --skip-backfill` on Spark" if mode == "spark" else
           "the plan builder + PlanEvaluator with a no-op runner (state written, no Spark tables/views)")
    print(f"[{count} models] applied once with {how} in {apply_s:.1f} s", flush=True)
    rows = []
    cold = measure(root, "plan", "--explain")   # writes bytecode; the apply already filled the caches
    _check_no_change(cold, count)
    runs = [measure(root, "plan", "--explain") for _ in range(repeats)]
    rows.append((count, "no change", *_best(runs)))
    changed = change_models(files)
    first = measure(root, "plan", "--explain")
    _check_changes(first, changed)
    rows.append((count, "5 changes, first run", first.wall, first.cpu, first.rss_mb))
    runs = [measure(root, "plan", "--explain") for _ in range(repeats)]
    rows.append((count, "5 changes, again", *_best(runs)))
    return rows


def _best(runs: list[Measure]) -> tuple[float, float, float]:
    best = min(runs, key=lambda m: m.wall)
    return best.wall, min(m.cpu for m in runs), max(m.rss_mb for m in runs)


def _check_no_change(m: Measure, count: int) -> None:
    if "Directly Modified" in m.output or "Added" in m.output:
        raise SystemExit(f"expected no changes for {count} models, got:\n{m.output[:2000]}")


def _check_changes(m: Measure, changed: list[Path]) -> None:
    if "Directly Modified" not in m.output:
        raise SystemExit(f"expected {len(changed)} directly modified models, got:\n{m.output[:2000]}")


TARGETS = {(1000, "no change"): (2.5, 150), (1000, "5 changes, first run"): (4.0, None),
           (1000, "5 changes, again"): (4.0, None),
           (5000, "no change"): (15.0, None), (5000, "5 changes, first run"): (15.0, None),
           (5000, "5 changes, again"): (15.0, None)}


def print_table(rows: list[tuple]) -> None:
    print(f"\n{'models':>6}  {'plan --explain':<26} {'wall s':>7} {'cpu s':>7} {'peak MB':>8}  target")
    for count, case, wall, cpu, rss in rows:
        target = TARGETS.get((count, case))
        text = ""
        if target:
            ok = wall <= target[0] and (target[1] is None or rss <= target[1])
            text = f"< {target[0]} s" + (f", < {target[1]} MB" if target[1] else "") + \
                ("  ok" if ok else "  MISSED")
        print(f"{count:>6}  {case:<26} {wall:>7.2f} {cpu:>7.2f} {rss:>8.0f}  {text}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--apply", dest="apply_mode", choices=("auto", "spark", "state"), default="auto",
                        help=f"auto: Spark up to {SPARK_APPLY_LIMIT} models, state-only above")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", default=None, help="keep generated projects here")
    args = parser.parse_args(argv)
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="meshbot_bench_"))
    rows = []
    for count in (int(s) for s in args.sizes.split(",")):
        rows += bench_size(count, workdir=workdir, apply_mode=args.apply_mode, repeats=args.repeats)
    print_table(rows)
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
