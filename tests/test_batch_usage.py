"""What a batch's Spark jobs cost: executor run time and bytes read, measured per thread from Spark's status
store and recorded with each batch in the state (schema 8). Local Spark, real SQLite state."""

from __future__ import annotations

import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import sqlalchemy as sa

from bot.context import Context
from bot.plan.definition import PlanOptions
from bot.spark.usage import measured
from project_files import LOCAL_SPARK_SQLITE_CONFIG


def test_each_thread_measures_only_its_own_jobs(engine_schema):
    """Two blocks reading different tables at the same time each count what they read alone; jobs outside a
    block are not counted."""
    engine, db = engine_schema
    for table, rows in (("small", 1_000), ("big", 200_000)):
        engine.execute(f"CREATE TABLE {db}.{table} USING parquet AS SELECT id, id * 3 AS amount FROM range({rows})")

    def read(table: str):
        with measured(engine.session) as usage:
            engine.fetch(f"SELECT SUM(amount) AS total FROM {db}.{table}")
        return usage

    alone = {table: read(table) for table in ("small", "big")}
    assert all(u.executor_ms > 0 and u.bytes_read > 0 for u in alone.values()), alone
    assert alone["big"].bytes_read > alone["small"].bytes_read
    with ThreadPoolExecutor(max_workers=3) as pool:
        unmeasured = pool.submit(engine.fetch, f"SELECT SUM(id) AS total FROM {db}.big")
        together = dict(zip(("small", "big"), pool.map(read, ("small", "big"))))
        unmeasured.result()
    assert {t: u.bytes_read for t, u in together.items()} == {t: u.bytes_read for t, u in alone.items()}


MODELS = {
    "src.sql": """\
        MODEL (name bu.src, kind FULL);
        SELECT CAST(d AS STRING) AS ds, CAST(id AS INT) AS amount
        FROM (SELECT explode(sequence(DATE'2024-01-01', DATE'2024-01-05', INTERVAL 1 DAY)) AS d), range(2000)
    """,
    "events.sql": """\
        MODEL (name bu.events, kind INCREMENTAL_BY_TIME_RANGE (time_column ds));
        SELECT ds, SUM(amount) AS amount FROM bu.src WHERE ds BETWEEN @start_ds AND @end_ds GROUP BY ds
    """,
}


def test_every_recorded_batch_keeps_its_executor_time_and_bytes_read(tmp_path: Path, clean_catalog):
    (tmp_path / "models").mkdir()
    (tmp_path / "config.yaml").write_text(LOCAL_SPARK_SQLITE_CONFIG)
    for name, text in MODELS.items():
        (tmp_path / "models" / name).write_text(textwrap.dedent(text))
    context = Context(tmp_path)
    plan = context.plan("prod", options=PlanOptions(execution_time="2024-01-04"))
    context.apply(plan)

    intervals = context.state.tables.intervals
    with context.state.engine.connect() as conn:
        rows = conn.execute(sa.select(intervals.c.name, intervals.c.elapsed_ms, intervals.c.executor_ms,
                                      intervals.c.bytes_read).where(intervals.c.name == "bu.events")).all()
    assert len(rows) >= 1
    for name, elapsed_ms, executor_ms, bytes_read in rows:
        assert elapsed_ms > 0 and executor_ms > 0 and bytes_read > 0, (name, elapsed_ms, executor_ms, bytes_read)
    version = plan.snapshots["bu.events"].version
    times = context.state.get_batch_times(["bu.events"])[("bu.events", version)]
    assert times.metered_batches == times.batches == len(rows) and times.executor_ms > 0
