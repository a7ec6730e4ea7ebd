"""Benchmark what a fresh CI runner pays before meshbot's first comment, next to SQLMesh's install (issue 27).

Measured in one run, each in a fresh virtualenv made by this machine's `python3 -m venv` (its bundled pip):

(a) cold install from the package registry, as a runner without a cache: `pip install --no-cache-dir` of
    meshbot per extra (`-e .[connect]`, `-e .[spark]`, editable as the action installs it) and of
    `sqlmesh[github]==0.236.4`. pip's configuration and PIP_* variables are left out (PIP_CONFIG_FILE
    set to the null device), so every package comes from the registry, never from a local mirror;
(b) install from a local wheelhouse (`pip wheel` once, untimed here, then `pip install --no-index
    --find-links`): a warm pip cache, what the action would pay if it kept wheels instead of the
    environment;
(b') the action's warm path: the installed virtualenv of (b) as actions/cache keeps it (a zstd tar),
    unpacked at its own path, then `meshbot --help` from it: the restore's local part (the download of
    the archive, whose size is printed, comes on top);
(c) job start -> comment: `meshbot github run-all` for a one-model pull request of the example project
    (benchmarks/bot_latency.py's PR: `shop.orders` gains a column) from the `[connect]` environment,
    against a Spark Connect server this benchmark starts from the installed PySpark (tests/spark_servers.py);
    prod is applied first through the same server (untimed). A job is then: setup-python + the install
    (a) or (b') + this run.

Installed sizes are the virtualenv's bytes on disk. Run: `.venv/bin/python benchmarks/fresh_runner.py`
(`--cold-repeats N` rounds of (a), best kept; `--skip-cold` leaves out (a), `--skip-run` leaves out (c), `--workdir DIR` keeps the environments).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "benchmarks"))

SQLMESH = "sqlmesh[github]==0.236.4"
CERT = Path("/etc/ssl/certs/ca-certificates.crt")
# what is installed, by label: the pip arguments of a cold install, and of `pip wheel` for the wheelhouse
SUBJECTS: dict[str, tuple[list[str], list[str]]] = {
    "meshbot[connect]": (["-e", f"{REPO}[connect]"], [f"{REPO}[connect]"]),
    "meshbot[spark]": (["-e", f"{REPO}[spark]"], [f"{REPO}[spark]"]),
    SQLMESH: ([SQLMESH], [SQLMESH]),
}


def pip_env() -> dict[str, str]:
    """This process's environment without pip's settings: the registry alone, as on a fresh runner."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PIP_", "PYTHON"))}
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


def pip_options() -> list[str]:
    return ["--disable-pip-version-check", "--quiet", *(["--cert", str(CERT)] if CERT.is_file() else [])]


def run(command: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=cwd, env=env if env is not None else pip_env(), capture_output=True,
                          text=True)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(command)}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return elapsed


def size(path: Path) -> int:
    return sum(entry.lstat().st_size for entry in path.rglob("*") if entry.is_file() and not entry.is_symlink())


def mb(count: int) -> str:
    return f"{count / 1e6:,.0f} MB"


def fresh_venv(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    run(["python3", "-m", "venv", str(path)], env=pip_env())
    return path / "bin" / "python"


def cold_install(workdir: Path, label: str) -> tuple[float, int]:
    python = fresh_venv(workdir / "cold" / _slug(label))
    elapsed = run([str(python), "-m", "pip", "install", "--no-cache-dir", *pip_options(), *SUBJECTS[label][0]],
                  cwd=workdir)
    return elapsed, size(python.parent.parent)


def wheelhouse_install(workdir: Path, label: str) -> tuple[float, float, int, Path]:
    house = workdir / "wheels" / _slug(label)
    python = fresh_venv(workdir / "warm" / _slug(label))
    build = run([str(python), "-m", "pip", "wheel", "--wheel-dir", str(house), *pip_options(),
                 *SUBJECTS[label][1], "setuptools>=77", "wheel"], cwd=workdir)
    python = fresh_venv(workdir / "warm" / _slug(label))
    elapsed = run([str(python), "-m", "pip", "install", "--no-index", "--find-links", str(house), *pip_options(),
                   *SUBJECTS[label][0]], cwd=workdir)
    return elapsed, build, size(python.parent.parent), python.parent.parent


def restore(venv: Path, command: list[str]) -> tuple[float, float, int]:
    """Pack `venv` as actions/cache does (tar + zstd), remove it, unpack it at its path, run `command`."""
    archive = venv.with_suffix(".tar.zst")
    run(["tar", "--use-compress-program", "zstd -T0", "-cf", str(archive), "-C", str(venv.parent), venv.name])
    shutil.rmtree(venv)
    unpack = run(["tar", "--use-compress-program", "zstd -d", "-xf", str(archive), "-C", str(venv.parent)])
    check = run(command)
    return unpack, check, archive.stat().st_size


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", label).strip("-")


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


# --------------------------------------------------------------------------------------------
# (c) job start -> comment through Spark Connect
# --------------------------------------------------------------------------------------------

def pr_through_connect(workdir: Path, python: Path, repeats: int) -> list[tuple[float, str]]:
    import bot_latency
    from spark_servers import start_connect, stop, wait_for_connect

    server = wait_for_connect(start_connect(_fresh(workdir / "connect-server")))
    try:
        runs = []
        for round_ in range(repeats):
            project, events = _connect_project(workdir / f"pr-{round_}", python, server.url, round_)
            output = project.parent / "github"
            started = time.perf_counter()
            proc = subprocess.run([str(python), "-m", "bot", "github", "--event-name", "pull_request",
                                   "--event-path", str(events / "opened.json"), "--answers",
                                   str(events / "answers-open.json"), "--output-dir", str(output),
                                   "-p", str(project), "run-all"],
                                  cwd=project.parent, capture_output=True, text=True, env=bot_latency._env())
            wall = time.perf_counter() - started
            if proc.returncode != 0:
                raise SystemExit(f"run-all failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
            comments = [path for path in output.rglob("*") if path.is_file() and "comment" in path.name]
            if not comments:
                raise SystemExit(f"run-all wrote no comment under {output}")
            timing = next((line for line in (proc.stdout + proc.stderr).splitlines()
                           if line.startswith("meshbot timings:")), "(no timing line)")
            runs.append((wall, timing))
            print(f"  run-all {wall:5.1f} s   load {_load()}\n    {timing}", flush=True)
        return runs
    finally:
        stop(server)


def _fresh(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def _connect_project(workdir: Path, python: Path, url: str, round_: int) -> tuple[Path, Path]:
    """The example project on the Connect server (its own schema names per round), prod applied, one model
    changed, and the `pull_request opened` event (as benchmarks/bot_latency.py builds them)."""
    import bot_latency

    _fresh(workdir)
    project = workdir / "project"
    subprocess.run([str(python), "-m", "bot", "init", str(project)], check=True, capture_output=True, cwd=workdir)
    config = project / "config.yaml"
    text = config.read_text().replace("      master: local[*]\n", f"      remote: {url}\n")
    config.write_text(text + bot_latency.BOT_CONFIG)
    for path in (project / "models").rglob("*.sql"):   # a schema per round: the server's catalog is shared
        path.write_text(path.read_text().replace("shop.", f"shop{round_}."))
    for path in [*(project / "tests").rglob("*.yaml"), *(project / "audits").rglob("*.sql")]:
        path.write_text(path.read_text().replace("shop.", f"shop{round_}."))
    started = time.perf_counter()
    proc = subprocess.run([str(python), "-m", "bot", "-p", str(project), "plan", "prod", "--auto-apply",
                           "--no-prompts"], capture_output=True, text=True, cwd=workdir)
    if proc.returncode != 0:
        raise SystemExit(f"prod apply through Spark Connect failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    print(f"  prod applied through Spark Connect in {time.perf_counter() - started:.1f} s (untimed)", flush=True)
    return project, bot_latency.open_one_model_pr(project, workdir)


# --------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--skip-cold", action="store_true")
    parser.add_argument("--skip-run", action="store_true")
    parser.add_argument("--run-repeats", type=int, default=2)
    parser.add_argument("--cold-repeats", type=int, default=3, help="rounds of cold installs (best is kept)")
    args = parser.parse_args(argv)
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="meshbot_fresh_"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"python {sys.version.split()[0]}, workdir {workdir}, load {_load()}", flush=True)

    cold: dict[str, tuple[float, int]] = {}
    if not args.skip_cold:
        print("\n(a) cold install from the registry (fresh venv, --no-cache-dir)", flush=True)
        # rounds alternate meshbot[connect] and SQLMesh (neither always on the busier moment); the full
        # PySpark, the slowest, once in the first round
        times: dict[str, list[float]] = {label: [] for label in SUBJECTS}
        for round_ in range(args.cold_repeats):
            order = ["meshbot[connect]", SQLMESH] if round_ % 2 == 0 else [SQLMESH, "meshbot[connect]"]
            for label in order + (["meshbot[spark]"] if round_ == 0 else []):
                elapsed, installed = cold_install(workdir, label)
                times[label].append(elapsed)
                cold[label] = (min(times[label]), installed)
                print(f"  {label:28s} {elapsed:6.1f} s   {mb(installed):>9s} installed   load {_load()}", flush=True)
        print("  best of each: " + ", ".join(f"{label} {min(t):.1f} s" for label, t in times.items()), flush=True)

    print("\n(b) install from a local wheelhouse (pip install --no-index --find-links)", flush=True)
    warm: dict[str, tuple[float, float, int, Path]] = {}
    for label in SUBJECTS:
        warm[label] = wheelhouse_install(workdir, label)
        print(f"  {label:28s} {warm[label][0]:6.1f} s   (wheelhouse built in {warm[label][1]:.1f} s)   "
              f"load {_load()}", flush=True)

    print("\n(b') the action's warm path: the installed virtualenv restored from a zstd tar", flush=True)
    restored: dict[str, tuple[float, float, int]] = {}
    for label in SUBJECTS:
        venv = warm[label][3]
        command = [str(venv / "bin" / ("meshbot" if label.startswith("meshbot") else "sqlmesh")), "--help"]
        restored[label] = restore(venv, command)
        unpack, check, archive = restored[label]
        print(f"  {label:28s} unpack {unpack:5.1f} s + first command {check:4.1f} s   archive {mb(archive)}",
              flush=True)

    runs: list[tuple[float, str]] = []
    if not args.skip_run:
        print("\n(c) job start -> comment: run-all on a one-model PR through Spark Connect, from meshbot[connect]",
              flush=True)
        runs = pr_through_connect(workdir, warm["meshbot[connect]"][3] / "bin" / "python", args.run_repeats)

    print("\nsummary")
    print(f"  {'':28s} {'cold install':>13s} {'wheelhouse':>11s} {'venv restore':>13s} {'installed':>10s} "
          f"{'archive':>8s}")
    for label in SUBJECTS:
        cold_s = f"{cold[label][0]:.1f} s" if label in cold else "-"
        print(f"  {label:28s} {cold_s:>13s} {warm[label][0]:9.1f} s {restored[label][0]:11.1f} s "
              f"{mb(warm[label][2]):>10s} {mb(restored[label][2]):>8s}")
    if cold:
        connect, sqlmesh = cold["meshbot[connect]"][0], cold[SQLMESH][0]
        print(f"  target: meshbot[connect] cold install <= SQLMesh's: {connect:.1f} s vs {sqlmesh:.1f} s  "
              f"{'ok' if connect <= sqlmesh else 'MISSED'}")
    if runs:
        best = min(runs)
        print(f"  run-all through Spark Connect (best of {len(runs)}): {best[0]:.1f} s")
        for label, install in (("cold", cold.get("meshbot[connect]", (None,))[0]),
                               ("warm", restored["meshbot[connect]"][0])):
            if install is not None:
                print(f"  job start -> comment, {label} ({label} install + run-all): {install + best[0]:.1f} s "
                      "+ setup-python")
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
