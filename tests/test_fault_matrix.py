"""SIGKILL at each step of `plan --auto-apply`, on SQLite and PostgreSQL state: one re-run converges.

Every meshbot process talks to the session's Spark Connect server (no JVM of its own), and kills
itself at the named step through the MESHBOT_KILL_AT hook (bot/faults.py).
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
POINTS = ("mid-backfill:2", "after-last-batch", "after-state-write", "between-views", "after-finalize")
# PostgreSQL differs from SQLite in how state is written (row locks, transactions), so its run kills
# at the steps that leave a state write half done: an interval recorded mid-backfill, the promoted but
# unfinalized row, and views half written; SQLite runs every step.
POSTGRES_POINTS = ("mid-backfill:2", "after-state-write", "between-views")
PLAN = ("plan", "--auto-apply", "--execution-time", "2024-01-04")


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


def _project(root: Path, schema: str, url: str, state: dict) -> Path:
    write_project(root, schema, state=state)
    config = yaml.safe_load((root / "config.yaml").read_text())
    config["gateways"]["local"]["connection"] = {"type": "spark", "remote": url}
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    return root


def _meshbot(root: Path, *args: str, kill_at: str | None = None) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("MESHBOT_KILL_AT", None)
    if kill_at:
        env["MESHBOT_KILL_AT"] = kill_at
    done = subprocess.run([sys.executable, "-m", "bot", "-p", str(root), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    return done.returncode, done.stdout + done.stderr


def _served(url: str, schemas: dict[str, str]) -> dict[str, dict]:
    """Rows each project's prod views serve (schema names made comparable; a missing view says so)."""
    script = f"""
import json
from pyspark.sql import SparkSession
s = SparkSession.builder.remote({url!r}).getOrCreate()
out = {{}}
for key, schema in {schemas!r}.items():
    out[key] = {{}}
    for view in ("src", "events", "daily", "other"):
        try:
            rows = sorted(map(repr, s.sql(f"SELECT * FROM `{{schema}}`.`{{view}}`").collect()))
        except Exception as exc:
            rows = "unreadable: " + str(exc).splitlines()[0]
        out[key]["S." + view] = rows
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
class Case:
    """One kill point on one state backend: its own project and schema, and its runs once they ended."""

    backend: str
    point: str
    root: Path
    schema: str
    state: dict
    outcome: Future


@pytest.fixture(scope="module")
def matrix(connect_server, tmp_path_factory):
    """Every case of both backends, plus the same project planned without faults (the rows every run must
    end up serving), queued at once on three lanes: a backend's test waits only for its own cases."""
    url, tag = connect_server.url, uuid.uuid4().hex[:6]
    base = tmp_path_factory.mktemp("fault_matrix")
    clean_schema = f"fm{tag}_clean"
    clean_root = _project(base / "clean", clean_schema, url, _state("sqlite"))
    pool = ThreadPoolExecutor(max_workers=3)   # 3: 73 s here, 2: 104 s, 4: 83 s (each client waits on the server)
    clean = pool.submit(_meshbot, clean_root, *PLAN)
    cases: list[Case] = []
    for backend, points in (("sqlite", POINTS), ("postgres", POSTGRES_POINTS)):
        for point in points:
            schema, state = f"fm{tag}_{len(cases)}", _state(backend)
            root = _project(base / f"p{len(cases)}", schema, url, state)
            cases.append(Case(backend, point, root, schema, state, pool.submit(_kill_then_rerun, root, point)))
    try:
        yield clean, clean_schema, cases
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _drop(url, [clean_schema, *(case.schema for case in cases)])
        _drop_postgres_schemas([case.state["schema"] for case in cases if case.backend == "postgres"])


def _kill_then_rerun(root: Path, point: str) -> tuple[int, str, int, str]:
    return _meshbot(root, *PLAN, kill_at=point) + _meshbot(root, *PLAN)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_sigkill_at_every_step_of_a_plan_then_one_rerun_serves_the_clean_rows(backend, matrix, connect_server):
    clean, clean_schema, cases = matrix
    cases = [case for case in cases if case.backend == backend]
    for case in cases:
        code, output, again_code, again_output = case.outcome.result()
        assert code == -signal.SIGKILL, f"{case.point}: not killed:\n{output}"
        assert again_code == 0, f"{case.point}: re-run failed:\n{again_output}"
        if case.point in ("after-state-write", "between-views"):   # the row was written, its views not
            assert "was not finalized" in again_output, again_output
    clean_code, clean_output = clean.result()
    assert clean_code == 0, clean_output
    served = _served(connect_server.url, {"clean": clean_schema, **{case.point: case.schema for case in cases}})
    expected = served.pop("clean")
    assert expected["S.events"] and expected["S.daily"]
    for point, rows in served.items():
        assert rows == expected, point
    for case in cases:   # nothing is left to finish
        assert _unfinalized(case.root, case.state) == [], case.point
