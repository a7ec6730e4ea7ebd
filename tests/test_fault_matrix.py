"""SIGKILL at each step of `plan --auto-apply`, on SQLite and PostgreSQL state: every re-run resumes.

Every meshbot process talks to the session's Spark Connect server (no JVM of its own), and kills
itself at the named step through the MESHBOT_KILL_AT hook (bot/faults.py). A chain plans one project
again and again, each run killed at a later step than the run before, so each run starts from what the
previous kill left and must get past it; a last run without a kill finishes. Then every prod view
serves exactly the rows the project defines (SERVED): nothing missing, nothing twice.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from test_faults import write_project

ROOT = Path(__file__).resolve().parent.parent
# The steps, in the order a plan reaches them; "mid-backfill:2" is the second recorded batch of six.
# Each backend's chains cover every step once; PostgreSQL differs from SQLite in how state is written
# (row locks, transactions), so its chain kills where a state write is left half done: an interval
# recorded mid-backfill, the promoted but unfinalized row, views half written.
CHAINS = {
    "sqlite": (("mid-backfill:2", "after-state-write"),
               ("after-last-batch", "between-views", "after-finalize")),
    "postgres": (("mid-backfill:2", "after-state-write", "between-views"),),
}
# After a kill here the environment row is promoted but not finalized: the next run must say so.
UNFINALIZED_AFTER = ("after-state-write", "between-views")
PLAN = ("plan", "--auto-apply", "--execution-time", "2024-01-04")
# What test_faults.write_project's models hold once planned at 2024-01-04: src every day of its sequence
# times k = 1..3 (amount = the day), events the three complete days before the execution time, daily
# their sums, other its constant.
SERVED = {
    "src": sorted([f"2024-01-{day:02d}", day, k] for day in range(1, 21) for k in (1, 2, 3)),
    "events": sorted([f"2024-01-{day:02d}", day, k] for day in range(1, 4) for k in (1, 2, 3)),
    "daily": [[f"2024-01-{day:02d}", 3 * day] for day in range(1, 4)],
    "other": [[42]],
}


def _state(backend: str) -> dict:
    """A project's state_connection: its own SQLite file, or a fresh PostgreSQL schema (made by the migration)."""
    if backend == "sqlite":
        return {"type": "sqlite", "database": ".meshbot/state.db"}
    return {"type": "postgres", "host": "127.0.0.1", "port": 5432, "user": "postgres",
            "database": "test", "schema": f"meshbot_fm_{uuid.uuid4().hex[:8]}"}


def _drop_postgres_schemas(schemas: list[str]) -> None:
    import sqlalchemy as sa

    engine = sa.create_engine("postgresql+psycopg2://postgres@127.0.0.1:5432/test")
    with engine.begin() as conn:
        for schema in schemas:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    engine.dispose()


def remote_project(root: Path, schema: str, url: str, state: dict) -> Path:
    write_project(root, schema, state=state)
    config = yaml.safe_load((root / "config.yaml").read_text())
    config["gateways"]["local"]["connection"] = {"type": "spark", "remote": url}
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    return root


def _meshbot(root: Path, *args: str, kill_at: str | None = None) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}   # a killed run's lines too
    env.pop("MESHBOT_KILL_AT", None)
    if kill_at:
        env["MESHBOT_KILL_AT"] = kill_at
    done = subprocess.run([sys.executable, "-m", "bot", "-p", str(root), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    return done.returncode, done.stdout + done.stderr


def _served(url: str, schemas: dict[str, str]) -> dict[str, dict]:
    """Rows each project's prod views serve, sorted (a missing view says so instead)."""
    script = f"""
import json
from pyspark.sql import SparkSession
s = SparkSession.builder.remote({url!r}).getOrCreate()
out = {{}}
for key, schema in {schemas!r}.items():
    out[key] = {{}}
    for view in ("src", "events", "daily", "other"):
        try:
            rows = sorted(list(row) for row in s.sql(f"SELECT * FROM `{{schema}}`.`{{view}}`").collect())
        except Exception as exc:
            rows = "unreadable: " + str(exc).splitlines()[0]
        out[key][view] = rows
print(json.dumps(out))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _unfinalized(root: Path, state: dict) -> list[str]:
    """Names of environments whose row is not finalized, read straight from the state database."""
    import sqlalchemy as sa

    if state["type"] == "sqlite":
        engine, table = sa.create_engine(f"sqlite:///{root / state['database']}"), "environments"
    else:
        engine = sa.create_engine("postgresql+psycopg2://postgres@127.0.0.1:5432/test")
        table = f'"{state["schema"]}".environments'
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text(f"SELECT name FROM {table} WHERE finalized_ts IS NULL")).all()
    finally:
        engine.dispose()
    return [row[0] for row in rows]


def _drop(url: str, schemas: list[str]) -> None:
    names = [n for s in schemas for n in (s, f"{s}__dev", f"sqlmesh__{s}")]
    script = (f"from pyspark.sql import SparkSession; s = SparkSession.builder.remote({url!r}).getOrCreate()\n"
              f"for n in {names!r}: s.sql(f'DROP DATABASE IF EXISTS `{{n}}` CASCADE')")
    subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=300)


@dataclass(frozen=True)
class Chain:
    """One project planned once per kill point, in order, then once more: its runs once they ended."""

    backend: str
    points: tuple[str, ...]
    root: Path
    schema: str
    state: dict
    runs: Future   # [(exit code, output)], one per point, then the last run's


@pytest.fixture(scope="module")
def matrix(connect_server, tmp_path_factory):
    """Every chain of both backends queued at once, one lane each: a backend's test waits only for its own."""
    url, tag = connect_server.url, uuid.uuid4().hex[:6]
    base = tmp_path_factory.mktemp("fault_matrix")
    pool = ThreadPoolExecutor(max_workers=sum(map(len, CHAINS.values())))
    chains: list[Chain] = []
    for backend, backend_chains in CHAINS.items():
        for points in backend_chains:
            schema, state = f"fm{tag}_{len(chains)}", _state(backend)
            root = remote_project(base / f"p{len(chains)}", schema, url, state)
            chains.append(Chain(backend, points, root, schema, state, pool.submit(_plan_runs, root, points)))
    try:
        yield chains
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _drop(url, [chain.schema for chain in chains])
        _drop_postgres_schemas([chain.state["schema"] for chain in chains if chain.backend == "postgres"])


def _plan_runs(root: Path, points: tuple[str, ...]) -> list[tuple[int, str]]:
    return [_meshbot(root, *PLAN, kill_at=point) for point in points] + [_meshbot(root, *PLAN)]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_sigkill_at_every_step_of_a_plan_each_rerun_resumes_and_serves_every_row_once(
        backend, matrix, connect_server):
    chains = [chain for chain in matrix if chain.backend == backend]
    for chain in chains:
        runs = chain.runs.result()
        for (code, output), point in zip(runs, chain.points):   # each run got as far as its own step
            assert code == -signal.SIGKILL, f"{point}: not killed there:\n{output}"
        last_code, last_output = runs[-1]
        assert last_code == 0, f"after {chain.points}: the last run failed:\n{last_output}"
        for (_, output_after), point in zip(runs[1:], chain.points):
            if point in UNFINALIZED_AFTER:   # the row was written, its views not (all of them)
                assert "was not finalized" in output_after, f"after {point}:\n{output_after}"
    served = _served(connect_server.url, {" > ".join(chain.points): chain.schema for chain in chains})
    for chain, rows in served.items():
        assert rows == SERVED, chain
    for chain in chains:   # nothing is left to finish
        assert _unfinalized(chain.root, chain.state) == [], chain.points
