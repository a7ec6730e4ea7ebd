"""Two `meshbot plan` processes of two environments with the same new model versions, started together
on one PostgreSQL state and one catalog (the session's Spark Connect server): each batch is written
once, each interval recorded once, and both environments serve every row once."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from test_fault_matrix import remote_project

ROOT = Path(__file__).resolve().parent.parent
DAYS = range(1, 11)   # planned at 2024-01-11: ten daily batches of events
EVENTS = sorted([f"2024-01-{day:02d}", day, k] for day in DAYS for k in (1, 2, 3))

pytestmark = pytest.mark.spark


def _start(root: Path, environment: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    env.pop("MESHBOT_KILL_AT", None)
    return subprocess.Popen([sys.executable, "-m", "bot", "-p", str(root), "plan", environment, "--auto-apply",
                             "--execution-time", "2024-01-11"], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _spark_rows(url: str, queries: dict[str, str]) -> dict[str, list]:
    script = f"""
import json
from pyspark.sql import SparkSession
s = SparkSession.builder.remote({url!r}).getOrCreate()
print(json.dumps({{key: sorted(list(row) for row in s.sql(sql).collect()) for key, sql in {queries!r}.items()}}))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return __import__("json").loads(done.stdout.strip().splitlines()[-1])


def test_two_plans_backfilling_the_same_versions_write_each_batch_once(
        tmp_path, connect_server, postgres_schema):
    schema = f"cw{uuid.uuid4().hex[:6]}"
    roots = [remote_project(tmp_path / name, schema, connect_server.url, postgres_schema) for name in ("a", "b")]
    try:
        processes = [_start(root, env) for root, env in zip(roots, ("pra", "prb"))]
        outputs = [process.communicate(timeout=300)[0] for process in processes]
        for process, output in zip(processes, outputs):
            assert process.returncode == 0, "\n\n".join(outputs)

        engine = sa.create_engine(sa.engine.URL.create(
            "postgresql+psycopg2", username=postgres_schema["user"], host=postgres_schema["host"],
            port=postgres_schema["port"], database=postgres_schema["database"]))
        with engine.connect() as conn:
            table = f'"{postgres_schema["schema"]}".intervals'
            counts = conn.execute(sa.text(
                f"SELECT name, start_ts, COUNT(*) FROM {table} WHERE NOT is_removed GROUP BY name, start_ts")).all()
            envs = conn.execute(sa.text(
                f'SELECT name, snapshots FROM "{postgres_schema["schema"]}".environments')).all()
        engine.dispose()
        assert [row for row in counts if row[2] != 1] == [], "an interval was recorded twice:\n" + "\n".join(outputs)
        assert sum(1 for row in counts if row[0] == f"{schema}.events") == len(DAYS)
        tables = {env: {s["name"]: s["table_name"] for s in snapshots} for env, snapshots in envs}
        assert tables["pra"] == tables["prb"]   # one version, one table, shared
        physical = tables["pra"][f"{schema}.events"]
        rows = _spark_rows(connect_server.url, {
            "table": f"SELECT ds, amount, k FROM {physical}",
            "pra": f"SELECT ds, amount, k FROM {schema}__pra.events",
            "prb": f"SELECT ds, amount, k FROM {schema}__prb.events",
            "daily": f"SELECT ds, total FROM {schema}__prb.daily"})
        assert rows["table"] == EVENTS, "the shared table holds a row twice or misses one"
        assert rows["pra"] == rows["prb"] == EVENTS
        assert rows["daily"] == [[f"2024-01-{day:02d}", 3 * day] for day in DAYS]
        both = "\n".join(outputs)
        assert "reused" in both or "waiting for" in both, both   # the two took turns
    finally:
        names = [schema, f"{schema}__pra", f"{schema}__prb", f"sqlmesh__{schema}"]
        script = (f"from pyspark.sql import SparkSession; s = SparkSession.builder.remote({connect_server.url!r})"
                  f".getOrCreate()\nfor n in {names!r}: s.sql(f'DROP DATABASE IF EXISTS `{{n}}` CASCADE')")
        subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=300)
