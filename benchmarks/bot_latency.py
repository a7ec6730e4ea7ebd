"""Benchmark `meshbot github run-all` on a one-model pull request of the example project, local mode.

Writes the example project (`meshbot init`), applies prod on local Spark (untimed), changes one model
(`shop.orders` gains a column), builds the `pull_request opened` event from the recorded webhook
payloads (tests/fixtures/github/webhooks), then times, in fresh processes and interleaved, best of N:

- `meshbot github --output-dir ... run-all` (PR environment, unit tests, prod preview, data diff,
  comment), each run on a copy of the applied project so every run creates the PR environment anew;
- the reference: the floor every run-all pays, a fresh Python process that starts a local Spark
  session with the project's settings and runs `SELECT 1`.

It also prints the per-phase line the bot writes at the end of its run (`meshbot timings: ...`).
With `--baseline DIR --baseline-python PY`, each round also times the same run-all with another
checkout of meshbot (e.g. the commit before a change, in its own venv), on the same project copy.
Run: `.venv/bin/python benchmarks/bot_latency.py [--repeats 3] [--workdir DIR]`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAYLOADS = REPO / "tests" / "fixtures" / "github" / "webhooks"
TARGET_S = 35.0

# as demo.sh: deploys on merge, one required approver
BOT_CONFIG = ("\ncicd_bot: {deploy_on: merge}\n"
              "users: [{username: ann, github_username: ann-gh, roles: [required_approver]}]\n")

_SPARK_FLOOR = """
import sys, time
from bot.context import Context
started = time.perf_counter()
context = Context(sys.argv[1])
context.engine.session.sql("SELECT 1").collect()
print(f"{time.perf_counter() - started:.2f}")
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "GITHUB_ACTIONS")}
    return env


def meshbot(*args: str, check: bool = True, repo: Path = REPO,
            python: str = sys.executable) -> subprocess.CompletedProcess:
    proc = subprocess.run([python, "-m", "bot", *args], cwd=repo, capture_output=True, text=True,
                          env=_env())
    if check and proc.returncode != 0:
        raise SystemExit(f"meshbot {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def prepare(workdir: Path) -> tuple[Path, Path]:
    """The applied example project with one changed model (kept pristine), and the events folder."""
    project = workdir / "project"
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    meshbot("init", str(project))
    with (project / "config.yaml").open("a") as handle:
        handle.write(BOT_CONFIG)
    started = time.perf_counter()
    meshbot("-p", str(project), "plan", "prod", "--auto-apply", "--no-prompts")
    print(f"prod applied on Spark in {time.perf_counter() - started:.1f} s (untimed)", flush=True)
    events = open_one_model_pr(project, workdir)
    shutil.copytree(project, workdir / "pristine", symlinks=True)
    return project, events


def open_one_model_pr(project: Path, workdir: Path) -> Path:
    """The PR: one column added to shop.orders, and the `opened` event (with its answers file) for it."""
    orders = project / "models" / "orders.sql"
    text = orders.read_text()
    changed = re.sub(r"^  ds$", "  ds,\n  amount * 100 AS amount_cents", text, count=1, flags=re.M)
    if changed == text:
        raise SystemExit("could not change models/orders.sql: the example project changed")
    orders.write_text(changed)
    events = workdir / "events"
    events.mkdir()
    opened = json.loads((PAYLOADS / "pull_request" / "opened.payload.json").read_text())
    (events / "opened.json").write_text(json.dumps(opened))
    (events / "answers-open.json").write_text(json.dumps({"pulls": [opened["pull_request"]]}))
    return events


def _reset(project: Path) -> None:
    """Back to the applied, changed project (same path: the embedded catalog keeps absolute paths)."""
    shutil.rmtree(project)
    shutil.copytree(project.parent / "pristine", project, symlinks=True)


def run_all(project: Path, events: Path, *, repo: Path = REPO,
            python: str = sys.executable) -> tuple[float, str]:
    _reset(project)
    output = project.parent / "github"
    shutil.rmtree(output, ignore_errors=True)
    started = time.perf_counter()
    proc = meshbot("github", "--event-name", "pull_request", "--event-path", str(events / "opened.json"),
                   "--answers", str(events / "answers-open.json"), "--output-dir", str(output),
                   "-p", str(project), "run-all", check=False, repo=repo, python=python)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"run-all failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    timings = next((line for line in (proc.stdout + proc.stderr).splitlines()
                    if line.startswith("meshbot timings:")), "(no timing line)")
    return wall, timings


def spark_floor(project: Path) -> float:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _SPARK_FLOOR, str(project)], cwd=REPO, capture_output=True,
                          text=True, env=_env())
    if proc.returncode != 0:
        raise SystemExit(f"spark floor failed:\n{proc.stderr[-3000:]}")
    return time.perf_counter() - started


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--baseline", default=None, help="another meshbot checkout to time in each round")
    parser.add_argument("--baseline-python", default=None, help="the Python (venv) of --baseline")
    args = parser.parse_args(argv)
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="meshbot_bot_")) / "bench"
    if args.workdir and (workdir / "pristine").is_dir():   # reuse the applied project of an earlier run
        project, events = workdir / "project", workdir / "events"
    else:
        project, events = prepare(workdir)
    walls, floors, lines, baselines, baseline_lines = [], [], [], [], []
    for round_ in range(args.repeats):
        load_before = _load()
        baseline_first = round_ % 2 == 0   # alternate, so neither side always runs on a colder machine
        def baseline() -> None:
            wall, timings = run_all(project, events, repo=Path(args.baseline).resolve(),
                                    python=args.baseline_python or sys.executable)
            baselines.append(wall)
            baseline_lines.append(timings)

        if args.baseline and baseline_first:
            baseline()
        wall, timings = run_all(project, events)
        if args.baseline and not baseline_first:
            baseline()
        floor = spark_floor(project)
        walls.append(wall)
        floors.append(floor)
        lines.append(timings)
        base = f"   baseline {baselines[-1]:6.1f} s" if baselines else ""
        print(f"round {round_ + 1}: run-all {wall:6.1f} s{base}   spark floor {floor:5.1f} s   "
              f"load {load_before}\n  {timings}" + (f"\n  baseline: {baseline_lines[-1]}" if baselines else ""),
              flush=True)
    best = min(range(len(walls)), key=walls.__getitem__)
    print(f"\nrun-all, one-model PR (best of {args.repeats})   {walls[best]:6.1f} s   "
          f"target <= {TARGET_S:.0f} s  {'ok' if walls[best] <= TARGET_S else 'MISSED'}")
    if baselines:
        print(f"baseline {args.baseline} (best of {args.repeats})   {min(baselines):6.1f} s")
    print(f"reference: Spark session start + SELECT 1    {min(floors):6.1f} s")
    print(f"  {lines[best]}")
    if not args.workdir:
        shutil.rmtree(workdir.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
