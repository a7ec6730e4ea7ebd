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
from concurrent.futures import ThreadPoolExecutor
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


@pytest.fixture
def state_for(request):
    """backend → a function giving each project its own state_connection (fresh PostgreSQL schemas)."""
    backend = request.param
    created: list[str] = []

    def make(name: str) -> dict:
        if backend == "sqlite":
            return {"type": "sqlite", "database": ".meshbot/state.db"}
        schema = f"meshbot_fm_{uuid.uuid4().hex[:8]}"
        created.append(schema)
        return {"type": "postgres", "host": "127.0.0.1", "port": 5432, "user": "postgres",
                "database": "test", "schema": schema}

    make.backend = backend
    yield make
    if created:
        import sqlalchemy as sa

        engine = sa.create_engine("postgresql+psycopg2://postgres@127.0.0.1:5432/test")
        with engine.begin() as conn:
            for schema in created:
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


def _ok(root: Path, *args: str) -> str:
    code, output = _meshbot(root, *args)
    assert code == 0, output
    return output


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


class CleanRun:
    """The same project planned without faults, in the background beside the killed runs: its schema
    holds the rows every run must end up serving."""

    def __init__(self, root: Path, schema: str) -> None:
        self.schema = schema
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env.pop("MESHBOT_KILL_AT", None)
        self._process = subprocess.Popen([sys.executable, "-m", "bot", "-p", str(root), *PLAN], cwd=ROOT, env=env,
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self._output: str | None = None

    def wait(self) -> str:
        if self._output is None:
            self._output, _ = self._process.communicate(timeout=600)
        assert self._process.returncode == 0, self._output
        return self.schema

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()


@pytest.fixture(scope="module")
def clean(connect_server, tmp_path_factory):
    schema = f"fm{uuid.uuid4().hex[:6]}_clean"
    root = _project(tmp_path_factory.mktemp("clean") / "p", schema, connect_server.url,
                    {"type": "sqlite", "database": ".meshbot/state.db"})
    run = CleanRun(root, schema)
    try:
        yield run
    finally:
        run.stop()
        _drop(connect_server.url, [schema])


@pytest.mark.slow
@pytest.mark.parametrize("state_for", ["sqlite", "postgres"], indirect=True)
def test_sigkill_at_every_step_of_a_plan_then_one_rerun_serves_the_clean_rows(
        state_for, connect_server, clean, tmp_path):
    tag = uuid.uuid4().hex[:6]
    url = connect_server.url
    points = POSTGRES_POINTS if state_for.backend == "postgres" else POINTS
    schemas = {point: f"fm{tag}_{i}" for i, point in enumerate(points)}
    states = {point: state_for(point) for point in points}
    roots = {point: _project(tmp_path / f"p{i}", schemas[point], url, states[point])
             for i, point in enumerate(points)}

    def kill_then_rerun(point: str) -> tuple[int, str, int, str]:
        return _meshbot(roots[point], *PLAN, kill_at=point) + _meshbot(roots[point], *PLAN)

    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            outcomes = dict(zip(points, pool.map(kill_then_rerun, points)))
        for point, (code, output, again_code, again_output) in outcomes.items():
            assert code == -signal.SIGKILL, f"{point}: not killed:\n{output}"
            assert again_code == 0, f"{point}: re-run failed:\n{again_output}"
            if point in ("after-state-write", "between-views"):   # the row was written, its views not
                assert "was not finalized" in again_output, again_output
        served = _served(url, {"clean": clean.wait(), **schemas})
        expected = served.pop("clean")
        assert expected["S.events"] and expected["S.daily"]
        for point, rows in served.items():
            assert rows == expected, point
        for point, root in roots.items():   # nothing is left to finish
            assert _unfinalized(root, states[point]) == [], point
    finally:
        _drop(url, list(schemas.values()))
