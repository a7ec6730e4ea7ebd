"""Benchmark what a fresh CI runner pays from job start to meshbot's first comment, next to SQLMesh's install (issue 27).

Measured in one run, on copies of the action's checkout (the repository's files without bytecode, as
`uses:` downloads them), every install in a fresh virtualenv with nothing cached:

(a) cold install from the package registry: meshbot per extra as action.yml installs it (its own `Install
    uv` and `Install meshbot` steps, run by bash with the runner's variables: a pinned uv fetched by pip,
    then `uv venv`, `uv pip install --no-cache --require-hashes -r requirements/<extra>.txt` and
    `uv pip install --no-cache --no-deps -e .`, no bytecode, as on a pull request); for
    reference meshbot[connect] with pip (`python -m venv`, `pip install --no-cache-dir -e .[connect]`);
    and `sqlmesh[github]==0.236.4` both ways, with pip as SQLMesh's documentation installs it and with the
    action's uv steps. pip's configuration and PIP_* variables are left out (PIP_CONFIG_FILE is the null
    device), so every package comes from the registry;
(b) install from a local wheelhouse with uv (`pip wheel` once, untimed, then `uv pip install --no-index
    --find-links`): what a cache of wheels instead of the environment would cost;
(b') the action's warm path: the environment as the default branch saves it (the action's install with
    bytecode) packed as actions/cache packs it (tar + zstd), removed, unpacked at its own path, then
    `--help` from it: the restore's local part (the archive's download, its size printed, comes on top);
(c) job start -> comment on the example project's shipped `ci` gateway: state in a PostgreSQL database of
    the machine's server (one per job), catalog and warehouse on a Spark Connect server this benchmark
    starts (tests/spark_servers.py). Each job bootstraps prod from a clone (untimed), then times, on a
    fresh copy of the action's checkout: the install ((a)'s action install for a cold job, (b')'s unpack
    for a warm one), and `meshbot github run-all` for a one-model pull request (benchmarks/bot_latency.py's
    change: `shop.orders` gains a column) in a fresh `git clone`, with GITHUB_ACTIONS set. A cold job's
    run compiles what it imports; a warm one finds the site-packages' bytecode but not meshbot's own (the
    action's checkout is new on every runner). setup-python (a tool-cache hit on GitHub's runners) is not
    part of it.

Installed sizes are the virtualenv's bytes on disk. Run: `.venv/bin/python benchmarks/fresh_runner.py`
(`--cold-repeats N` rounds of (a), best kept; `--run-repeats N` jobs of each kind in (c); `--skip-cold`,
`--skip-pip`, `--skip-run` leave parts out; `--workdir DIR` keeps what it made).
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
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "benchmarks"))

SQLMESH = "sqlmesh[github]==0.236.4"
UV_STEP, INSTALL_STEP = "Install uv", "Install meshbot from the action's checkout"
POSTGRES = dict(host="127.0.0.1", port="5432", user="postgres", database="test")
CONNECT, SPARK = "meshbot[connect]", "meshbot[spark]"


@dataclass(frozen=True)
class Install:
    seconds: float
    venv: Path
    parts: str = ""     # how the seconds split, when they do

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


def pip_env(**extra: str) -> dict[str, str]:
    """This process's environment without pip's and Python's settings: the registry alone, as on a fresh runner."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PIP_", "PYTHON", "UV_", "VIRTUAL_ENV", "GITHUB_"))}
    env["PIP_CONFIG_FILE"] = os.devnull
    return {**env, **extra}


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


def _fresh(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", label).strip("-")


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


# --------------------------------------------------------------------------------------------
# The action's checkout and its install steps
# --------------------------------------------------------------------------------------------

def action_checkout(path: Path) -> Path:
    """The repository's files (tracked and untracked, not ignored) at `path`, without bytecode or .git."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout
    _fresh(path)
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            (path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, path / name)
    return path


def _runner_env(workdir: Path, action: Path, temp: Path, **extra: str) -> dict[str, str]:
    """What the action's steps see: setup-python's `python` first on PATH, the runner's variables."""
    python_bin = workdir / "python-bin"
    if not python_bin.exists():
        python_bin.mkdir(parents=True)
        (python_bin / "python").symlink_to(Path(sys.base_prefix) / "bin" / "python3")
    return pip_env(PATH=f"{python_bin}{os.pathsep}{os.environ['PATH']}", GITHUB_ACTION_PATH=str(action),
                   RUNNER_TEMP=str(temp), **extra)


def _step(name: str) -> dict:
    steps = yaml.safe_load((REPO / "action.yml").read_text())["runs"]["steps"]
    return next(step for step in steps if step.get("name") == name)


def _run_step(name: str, env: dict[str, str]) -> float:
    step = _step(name)
    step_env = {key: value for key, value in step.get("env", {}).items() if not str(value).startswith("${{")}
    return run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=Path(env["RUNNER_TEMP"]),
               env={**env, **step_env})


def action_install(workdir: Path, action: Path, extra: str, *, bytecode: bool) -> Install:
    """action.yml's `Install uv` and `Install meshbot` steps, as a cache miss runs them."""
    temp = _fresh(workdir / "runner-temp" / f"{extra}-{'bytecode' if bytecode else 'plain'}")
    venv = temp / "meshbot-venv"
    env = _runner_env(workdir, action, temp, MESHBOT_LOCK=str(action / "requirements" / f"{extra}.txt"),
                      MESHBOT_VENV=str(venv),
                      MESHBOT_UV=str(temp / "meshbot-uv" / "bin" / "uv"), MESHBOT_BYTECODE=str(bytecode).lower())
    uv = _run_step(UV_STEP, env)
    install = _run_step(INSTALL_STEP, env)
    return Install(uv + install, venv, f"uv {uv:.1f} + install {install:.1f}")


def sqlmesh_uv_install(workdir: Path, action: Path, *, bytecode: bool) -> Install:
    """SQLMesh the same way: the action's `Install uv` step, then `uv venv` and `uv pip install --no-cache`."""
    temp = _fresh(workdir / "runner-temp" / f"sqlmesh-{'bytecode' if bytecode else 'plain'}")
    venv, uv = temp / "sqlmesh-venv", temp / "meshbot-uv" / "bin" / "uv"
    env = _runner_env(workdir, action, temp, UV_NO_CONFIG="1")
    fetch = _run_step(UV_STEP, env)
    python = Path(sys.base_prefix) / "bin" / "python3"
    started = time.perf_counter()
    run([str(uv), "venv", "--quiet", "--python", str(python), str(venv)], cwd=temp, env=env)
    run([str(uv), "pip", "install", "--quiet", "--no-cache", "--python", str(venv / "bin" / "python"),
         *(["--compile-bytecode"] if bytecode else []), SQLMESH], cwd=temp, env=env)
    install = time.perf_counter() - started
    return Install(fetch + install, venv, f"uv {fetch:.1f} + install {install:.1f}")


def pip_install(workdir: Path, spec: list[str]) -> Install:
    """`python -m venv` and `pip install --no-cache-dir`: a plain install without the action."""
    venv = workdir / "pip" / _slug(" ".join(spec))
    if venv.exists():
        shutil.rmtree(venv)
    started = time.perf_counter()
    run(["python3", "-m", "venv", str(venv)])
    run([str(venv / "bin" / "python"), "-m", "pip", "install", "--no-cache-dir", "--quiet",
         "--disable-pip-version-check", *spec], cwd=workdir)
    return Install(time.perf_counter() - started, venv)


def wheelhouse_install(workdir: Path, label: str, spec: str) -> tuple[float, float]:
    """`pip wheel` (untimed but printed), then uv from the wheelhouse alone into a fresh environment."""
    house = workdir / "wheels" / _slug(label)
    builder = workdir / "wheel-builder"
    if not builder.exists():
        run(["python3", "-m", "venv", str(builder)])
    build = run([str(builder / "bin" / "python"), "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check",
                 "--wheel-dir", str(house), spec, "setuptools>=77", "wheel"], cwd=workdir)
    uv = next((workdir / "runner-temp").glob("*/meshbot-uv/bin/uv"))
    venv = workdir / "wheelhouse-venv" / _slug(label)
    if venv.exists():
        shutil.rmtree(venv)
    started = time.perf_counter()
    env = pip_env(UV_NO_CONFIG="1")
    run([str(uv), "venv", "--quiet", "--python", str(Path(sys.base_prefix) / "bin" / "python3"), str(venv)], env=env)
    run([str(uv), "pip", "install", "--quiet", "--no-cache", "--no-index", "--find-links", str(house),
         "--python", str(venv / "bin" / "python"), *(["-e"] if label.startswith("meshbot") else []), spec],
        cwd=workdir, env=env)
    return time.perf_counter() - started, build


def pack(venv: Path) -> Path:
    """The environment as actions/cache keeps it (a zstd tar), and removed."""
    archive = venv.with_name(venv.name + ".tar.zst")
    run(["tar", "--use-compress-program", "zstd -T0", "-cf", str(archive), "-C", str(venv.parent), venv.name])
    shutil.rmtree(venv)
    return archive


def unpack(archive: Path) -> float:
    return run(["tar", "--use-compress-program", "zstd -d", "-xf", str(archive), "-C", str(archive.parent)])


# --------------------------------------------------------------------------------------------
# (c) job start -> comment on the `ci` gateway
# --------------------------------------------------------------------------------------------

def _psql(sql: str) -> None:
    run(["psql", "-q", "-h", POSTGRES["host"], "-p", POSTGRES["port"], "-U", POSTGRES["user"], "-d",
         POSTGRES["database"], "-c", sql], env=os.environ.copy())


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=Bench", "-c", "user.email=bench@example.com", *args], cwd=cwd,
                          capture_output=True, text=True, check=True).stdout.strip()


@dataclass
class Job:
    """One pull request's first job on a fresh runner: its own state database, prod bootstrapped."""
    root: Path
    database: str
    env: dict[str, str]
    head: str = ""

    def clone(self, name: str) -> Path:
        path = self.root / name
        _git(self.root, "clone", "-q", str(self.root / "origin.git"), str(path))
        if self.head:
            _git(path, "checkout", "-q", self.head)
        return path


def _drop_schemas(url: str) -> None:
    """The server's catalog outlives the jobs: each job starts from none of the example's schemas."""
    names = ("shop", "sqlmesh__shop", "shop__hello_world_2")
    drops = "; ".join(f"s.sql('DROP DATABASE IF EXISTS `{name}` CASCADE')" for name in names)
    script = f"from pyspark.sql import SparkSession; s = SparkSession.builder.remote({url!r}).getOrCreate(); {drops}"
    run([sys.executable, "-c", script], env=os.environ.copy())


def prepare_job(workdir: Path, url: str, index: int) -> Job:
    """The example project in a repository, prod applied on the `ci` gateway, the PR's commit pushed."""
    import bot_latency

    root = _fresh(workdir / f"job-{index}")
    database = f"meshbot_fresh_{os.getpid()}_{index}"
    _psql(f'DROP DATABASE IF EXISTS "{database}"')
    _psql(f'CREATE DATABASE "{database}"')
    _drop_schemas(url)
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("GITHUB_", "SPARK_", "PYSPARK_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(MESHBOT_SPARK_REMOTE=url, MESHBOT_STATE_HOST=POSTGRES["host"], MESHBOT_STATE_PORT=POSTGRES["port"],
               MESHBOT_STATE_DATABASE=database, MESHBOT_STATE_USER=POSTGRES["user"])
    job = Job(root, database, env)
    _git(root, "init", "-q", "--bare", "-b", "master", "origin.git")
    work = job.clone("author")
    project = work / "warehouse"
    subprocess.run([sys.executable, "-m", "bot", "init", str(project)], check=True, capture_output=True, cwd=root)
    with (project / "config.yaml").open("a") as handle:
        handle.write(bot_latency.BOT_CONFIG)
    (work / ".gitignore").write_text(".meshbot/\n")
    _git(work, "add", "-A")
    _git(work, "commit", "-q", "-m", "the shop project")
    _git(work, "push", "-q", "origin", "HEAD:master")
    bootstrap = job.clone("bootstrap")
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "bot", "-p", str(bootstrap / "warehouse"), "--gateway", "ci", "plan",
                           "prod", "--auto-apply", "--no-prompts"], capture_output=True, text=True, cwd=bootstrap,
                          env=env)
    if proc.returncode != 0:
        raise SystemExit(f"prod bootstrap on the ci gateway failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    print(f"    prod bootstrapped on the ci gateway in {time.perf_counter() - started:.1f} s (untimed)", flush=True)
    _git(work, "checkout", "-q", "-b", "changes")
    events = bot_latency.open_one_model_pr(project, root)
    _git(work, "commit", "-q", "-am", "orders in cents")
    _git(work, "push", "-q", "origin", "HEAD:changes")
    job.head = _git(work, "rev-parse", "HEAD")
    for name in ("opened.json", "answers-open.json"):    # the PR's head is the pushed commit
        path = events / name
        data = json.loads(path.read_text())
        for pull in [data.get("pull_request")] + data.get("pulls", []):
            if pull:
                pull["head"]["sha"] = job.head
        path.write_text(json.dumps(data))
    return job


def run_all(job: Job, python: Path) -> tuple[float, str]:
    """`meshbot github run-all` on the PR's `opened` event in a fresh clone, as the action's `Run meshbot` step."""
    clone = job.clone("runner")
    events = job.root / "events"
    env = {**job.env, "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(clone), "GITHUB_SHA": job.head}
    started = time.perf_counter()
    proc = subprocess.run([str(python), "-m", "bot", "github", "--event-name", "pull_request",
                           "--event-path", str(events / "opened.json"), "--answers", str(events / "answers-open.json"),
                           "--output-dir", str(job.root / "github"), "-p", str(clone / "warehouse"), "--gateway", "ci",
                           "run-all"], cwd=clone, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    if proc.returncode != 0 or not (job.root / "github" / "comment.md").is_file():
        raise SystemExit(f"run-all failed or wrote no comment:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    timing = next((line for line in (proc.stdout + proc.stderr).splitlines()
                   if line.startswith("meshbot timings:")), "(no timing line)")
    return wall, timing


def jobs_through_connect(workdir: Path, repeats: int, warm_archive: Path) -> dict[str, list[tuple[float, float, str]]]:
    """Cold and warm jobs, alternated: (install or unpack seconds, run-all seconds, timing line) each."""
    from spark_servers import start_connect, stop, wait_for_connect

    server = wait_for_connect(start_connect(_fresh(workdir / "connect-server"), java_options=""))   # a server's defaults
    jobs: dict[str, list[tuple[float, float, str]]] = {"cold": [], "warm": []}
    databases = []
    try:
        for round_ in range(repeats):
            for kind in ("cold", "warm") if round_ % 2 == 0 else ("warm", "cold"):
                job = prepare_job(workdir, server.url, len(databases))
                databases.append(job.database)
                if kind == "cold":
                    action = action_checkout(workdir / "action-cold")
                    install = action_install(workdir, action, "connect", bytecode=False)
                    seconds, python, parts = install.seconds, install.python, install.parts
                else:
                    action_checkout(workdir / "action-warm")      # the path the archive's environment points to
                    seconds = unpack(warm_archive)
                    python, parts = warm_archive.parent / "meshbot-venv" / "bin" / "python", "unpack"
                wall, timing = run_all(job, python)
                jobs[kind].append((seconds, wall, timing))
                print(f"  {kind} job: install ({parts}) {seconds:.1f} s + run-all {wall:.1f} s = {seconds + wall:.1f} s   "
                      f"load {_load()}\n    {timing}", flush=True)
                if kind == "warm":
                    shutil.rmtree(warm_archive.parent / "meshbot-venv")
        return jobs
    finally:
        stop(server)
        for database in databases:
            _psql(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


# --------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--skip-cold", action="store_true", help="leave out (a)")
    parser.add_argument("--skip-pip", action="store_true", help="leave pip's installs out of (a)")
    parser.add_argument("--skip-run", action="store_true", help="leave out (c)")
    parser.add_argument("--run-repeats", type=int, default=2, help="jobs of each kind in (c)")
    parser.add_argument("--cold-repeats", type=int, default=3, help="rounds of (a), best kept")
    args = parser.parse_args(argv)
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="meshbot_fresh_"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"python {sys.version.split()[0]}, workdir {workdir}, load {_load()}", flush=True)
    action = action_checkout(workdir / "action")

    cold: dict[str, list[Install]] = {}
    installed: dict[str, int] = {}
    if not args.skip_cold:
        print("\n(a) cold install from the registry (fresh environment, nothing cached)", flush=True)
        subjects = {
            f"{CONNECT}, action (uv)": lambda: action_install(workdir, action, "connect", bytecode=False),
            f"{SQLMESH}, uv": lambda: sqlmesh_uv_install(workdir, action, bytecode=False),
        }
        if not args.skip_pip:
            subjects[f"{CONNECT}, pip"] = lambda: pip_install(workdir, ["-e", f"{action}[connect]"])
            subjects[f"{SQLMESH}, pip"] = lambda: pip_install(workdir, [SQLMESH])
        for round_ in range(args.cold_repeats):
            order = list(subjects) if round_ % 2 == 0 else list(reversed(subjects))
            if round_ == 0:     # the full PySpark, the slowest, once
                order.append(f"{SPARK}, action (uv)")
            for label in order:
                install = (action_install(workdir, action, "spark", bytecode=False) if label.startswith(SPARK)
                           else subjects[label]())
                cold.setdefault(label, []).append(install)
                installed[label] = size(install.venv)
                print(f"  {label:36s} {install.seconds:6.1f} s {install.parts:>24s}  {mb(installed[label]):>9s} "
                      f"installed   load {_load()}", flush=True)

    print("\n(b) uv from a local wheelhouse (uv pip install --no-index --find-links)", flush=True)
    wheelhouse: dict[str, float] = {}
    for label, spec in ((CONNECT, f"{action}[connect]"), (SQLMESH, SQLMESH)):
        if not any((workdir / "runner-temp").glob("*/meshbot-uv/bin/uv")):
            action_install(workdir, action, "connect", bytecode=False)     # for its uv
        wheelhouse[label], build = wheelhouse_install(workdir, label, spec)
        print(f"  {label:36s} {wheelhouse[label]:6.1f} s   (wheelhouse built in {build:.1f} s)   load {_load()}",
              flush=True)

    print("\n(b') the action's warm path: the saved environment (with bytecode) unpacked from a zstd tar", flush=True)
    warm_action = action_checkout(workdir / "action-warm")
    saved = {CONNECT: action_install(workdir, warm_action, "connect", bytecode=True),
             SQLMESH: sqlmesh_uv_install(workdir, warm_action, bytecode=True)}
    restored: dict[str, tuple[float, float, int, int]] = {}
    archives: dict[str, Path] = {}
    for label, install in saved.items():
        venv = install.venv
        installed_bytes = size(venv)
        archives[label] = pack(venv)
        seconds = unpack(archives[label])
        check = run([str(venv / "bin" / ("meshbot" if label.startswith("meshbot") else "sqlmesh")), "--help"])
        restored[label] = (seconds, check, archives[label].stat().st_size, installed_bytes)
        print(f"  {label:36s} unpack {seconds:5.1f} s + first command {check:4.1f} s   archive "
              f"{mb(restored[label][2])}, {mb(installed_bytes)} installed", flush=True)
    shutil.rmtree(saved[CONNECT].venv)

    jobs: dict[str, list[tuple[float, float, str]]] = {}
    if not args.skip_run:
        print("\n(c) job start -> comment: install + run-all on a one-model PR, ci gateway (PostgreSQL + Spark Connect)",
              flush=True)
        jobs = jobs_through_connect(workdir, args.run_repeats, archives[CONNECT])

    print("\nsummary")
    for label, runs in cold.items():
        best = min(runs, key=lambda install: install.seconds)
        print(f"  (a) {label:36s} best {best.seconds:5.1f} s of {len(runs)} "
              f"({', '.join(f'{r.seconds:.1f}' for r in runs)})  {mb(installed[label])} installed")
    for label in wheelhouse:
        seconds, check, archive, installed_bytes = restored[label]
        print(f"  (b) {label:36s} wheelhouse {wheelhouse[label]:5.1f} s   (b') unpack {seconds:4.1f} s + --help "
              f"{check:3.1f} s, archive {mb(archive)}")
    if cold:
        best = {label: min(install.seconds for install in runs) for label, runs in cold.items()}
        ours, theirs = best[f"{CONNECT}, action (uv)"], best.get(f"{SQLMESH}, pip")
        if theirs is not None:
            print(f"  target: meshbot[connect]'s cold install <= SQLMesh's: {ours:.1f} s (the action's) vs {theirs:.1f} s "
                  f"(pip, as SQLMesh documents it)  {'ok' if ours <= theirs else 'MISSED'}")
        print(f"  same tool: uv {ours:.1f} vs {best[f'{SQLMESH}, uv']:.1f} s"
              + (f"; pip {best[f'{CONNECT}, pip']:.1f} vs {theirs:.1f} s" if theirs is not None else ""))
    for kind, target in (("cold", 45.0), ("warm", 15.0)):
        if jobs.get(kind):
            install, wall, _ = min(jobs[kind], key=lambda job: job[0] + job[1])
            total = install + wall
            print(f"  target: job start -> comment, {kind}: {install:.1f} + {wall:.1f} = {total:.1f} s "
                  f"(best of {len(jobs[kind])}) <= {target:.0f} s  {'ok' if total <= target else 'MISSED'}")
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
