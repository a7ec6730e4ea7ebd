"""A model that fails at runtime fails alone (issue 44): what SQLMesh 0.236.4 does on DuckDB with the same four
models (src; bad, reading src, fails; child, reading bad; other, reading src), for `plan --auto-apply` and `run`.

SQLMesh builds src and other and records their intervals, builds neither bad nor child (no table: "Skipped models"
child, "Failed models" bad with the engine's error), promotes nothing ("Error: Plan application failed.", exit 1);
`sqlmesh run` likewise fills src and other, records nothing of bad and child, and exits 1 ("Error: Run failed.").
A rerun after the fix builds only what is missing."""

from __future__ import annotations

from click.testing import CliRunner

from bot.cli import cli
from bot.context import Context
from project_files import DUCKDB_DIALECT_CONFIG, write_files

CONFIG = DUCKDB_DIALECT_CONFIG
FULL = {
    "config.yaml": CONFIG,
    "models/src.sql": "MODEL (name s.src, kind FULL);\nSELECT * FROM (VALUES (1, 'a'), (2, 'b')) AS t(id, code)\n",
    # a function Spark does not have: Spark refuses the query when bad's table is created (DuckDB when it
    # runs); a column src lacks would be refused before Spark starts (tests/test_fail_fast.py)
    "models/bad.sql": "MODEL (name s.bad, kind FULL);\n\nSELECT id, no_such_function(id) AS code_num FROM s.src\n",
    "models/child.sql": "MODEL (name s.child, kind FULL);\nSELECT id, code_num + 1 AS n FROM s.bad\n",
    "models/other.sql": "MODEL (name s.other, kind FULL);\nSELECT id * 10 AS id10 FROM s.src\n",
}


def _meshbot(root, *args: str):
    return CliRunner().invoke(cli, ["-p", str(root), *args], catch_exceptions=False)


def _recorded(context: Context) -> dict[str, list]:
    """Model name -> recorded intervals of the version the project's files define."""
    plan = context.plan("prod")
    keys = [(s.name, s.version) for s in plan.snapshots.values()]
    found = context.state.get_intervals(keys)
    return {name: list(found[(name, version)].intervals) if (name, version) in found else []
            for name, version in keys}


def test_a_model_spark_refuses_fails_alone_and_the_fixed_rerun_builds_the_rest(tmp_path, clean_catalog):
    root = write_files(tmp_path / "p", FULL)
    failed = _meshbot(root, "plan", "--auto-apply", "--no-prompts")
    assert failed.exit_code == 1, failed.output
    assert f"model `s.bad` ({root / 'models' / 'bad.sql'}:1) could not have its table created" in failed.output
    assert "no_such_function" in failed.output.lower()
    assert "not evaluated because an upstream model failed: `s.child`" in failed.output
    context = Context(root)
    try:
        assert context.state.get_environment("prod") is None          # nothing promoted
        recorded = _recorded(context)
        assert recorded["s.src"] and recorded["s.other"] and not recorded["s.bad"] and not recorded["s.child"]
        plan = context.plan("prod")
        tables = plan.tables()
        assert context.fetchdf(f"SELECT id10 FROM {tables['s.other']} ORDER BY id10") == [{"id10": 10}, {"id10": 20}]
        assert not context.engine.table_exists(tables["s.bad"]) and not context.engine.table_exists(tables["s.child"])
    finally:
        context.close()

    (root / "models" / "bad.sql").write_text("MODEL (name s.bad, kind FULL);\nSELECT id, 7 AS code_num FROM s.src\n")
    fixed = Context(root)
    try:
        result = fixed.apply(fixed.plan("prod"))
        assert sorted({name for name, _, _ in result.evaluated}) == ["s.bad", "s.child"]   # src, other reused
        assert fixed.fetchdf("SELECT id, n FROM s.child ORDER BY id") == [{"id": 1, "n": 8}, {"id": 2, "n": 8}]
        assert fixed.fetchdf("SELECT id10 FROM s.other ORDER BY id10") == [{"id10": 10}, {"id10": 20}]
    finally:
        fixed.close()


DAILY = "kind INCREMENTAL_BY_TIME_RANGE(time_column ds), cron '@daily'"
INCREMENTAL = {
    "config.yaml": CONFIG,
    "models/src.sql": f"MODEL (name s.src, {DAILY});\nSELECT CAST(@start_ds AS DATE) AS ds, 1 AS v\n",
    # fails at runtime, for days from 2024-01-03 on (Spark's raise_error; DuckDB's error() in the oracle)
    "models/bad.sql": f"""MODEL (name s.bad, {DAILY}, dialect spark);
SELECT ds, IF(ds >= DATE '2024-01-03', raise_error('too late'), v) AS v FROM s.src WHERE ds BETWEEN @start_ds AND @end_ds
""",
    "models/child.sql": f"MODEL (name s.child, {DAILY});\nSELECT ds, v + 1 AS v FROM s.bad WHERE ds BETWEEN @start_ds AND @end_ds\n",
    "models/other.sql": f"MODEL (name s.other, {DAILY});\nSELECT ds, v * 10 AS v FROM s.src WHERE ds BETWEEN @start_ds AND @end_ds\n",
}
DAY = 86_400_000
JAN_1 = 1_704_067_200_000


def test_a_batch_failing_at_runtime_fails_its_model_alone_in_plan_and_in_run(tmp_path, clean_catalog):
    root = write_files(tmp_path / "p", INCREMENTAL)
    first = _meshbot(root, "plan", "--auto-apply", "--no-prompts", "--execution-time", "2024-01-03")
    assert first.exit_code == 0, first.output
    run = _meshbot(root, "run", "--execution-time", "2024-01-05")
    assert run.exit_code == 1, run.output
    assert "`s.bad`" in run.output and "too late" in run.output
    assert "not evaluated because an upstream model failed: `s.child`" in run.output
    context = Context(root)
    try:
        recorded = _recorded(context)
        assert recorded["s.src"] == recorded["s.other"] == [(JAN_1, JAN_1 + 4 * DAY)]
        assert recorded["s.bad"] == recorded["s.child"] == [(JAN_1, JAN_1 + 2 * DAY)]
        # src writes one row per batch (its start day): SQLMesh's tables hold the same rows
        assert context.fetchdf("SELECT CAST(ds AS STRING) AS ds, v FROM s.other ORDER BY ds") == [
            {"ds": "2024-01-01", "v": 10}, {"ds": "2024-01-03", "v": 10}]
        assert context.fetchdf("SELECT CAST(ds AS STRING) AS ds, v FROM s.child ORDER BY ds") == [
            {"ds": "2024-01-01", "v": 2}]
    finally:
        context.close()

    # a plan that adds a model failing at runtime: the others are built, prod keeps serving the plan before
    files = {"models/late.sql": f"""MODEL (name s.late, {DAILY}, dialect spark);
SELECT ds, raise_error('no data') AS v FROM s.src WHERE ds BETWEEN @start_ds AND @end_ds
""", "models/fresh.sql": f"MODEL (name s.fresh, {DAILY});\nSELECT ds, v FROM s.src WHERE ds BETWEEN @start_ds AND @end_ds\n"}
    write_files(root, {**files, "models/bad.sql": INCREMENTAL["models/bad.sql"].replace("raise_error('too late')", "v")})
    prod_before = Context(root).state.get_environment("prod").plan_id
    second = _meshbot(root, "plan", "--auto-apply", "--no-prompts", "--execution-time", "2024-01-05")
    assert second.exit_code == 1, second.output
    assert "`s.late`" in second.output and "no data" in second.output
    again = Context(root)
    try:
        assert again.state.get_environment("prod").plan_id == prod_before
        recorded = _recorded(again)
        assert recorded["s.fresh"] == [(JAN_1, JAN_1 + 4 * DAY)] and recorded["s.late"] == []
        assert recorded["s.bad"] == recorded["s.child"] == [(JAN_1, JAN_1 + 4 * DAY)]
    finally:
        again.close()
