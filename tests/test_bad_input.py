"""Bad input through the real CLI: one paragraph naming the culprit, exit code 1, no traceback, nothing changed."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli import cli
from bot.project.example import write_example


PHASE_LINE = re.compile(r".+ \.\.\.|.+: stopped after \d+\.\d s")


def invoke(root: Path, *args: str):
    return CliRunner().invoke(cli, ["-p", str(root), *args], catch_exceptions=False)


def assert_refused(result, *needles: str) -> str:
    """Exit 1 with one `Error:` paragraph holding every needle, and no traceback (beside the lines a phase
    prints outside a terminal when it starts and stops)."""
    output = "".join(line for line in result.output.splitlines(keepends=True)
                     if not PHASE_LINE.fullmatch(line.rstrip("\n")))
    assert result.exit_code == 1, output
    assert "Traceback" not in output and output.count("Error:") == 1, output
    assert output.strip().startswith("Error:") and "\n\n" not in output.strip(), output
    for needle in needles:
        assert needle in output, output
    return output


@pytest.fixture
def shop(tmp_path) -> Path:
    write_example(tmp_path / "shop")
    return tmp_path / "shop"


def test_non_utf8_model_file_is_named(shop):
    (shop / "models" / "latin1.sql").write_bytes(
        b"MODEL (name shop.latin1, kind FULL);\n\nSELECT 1 AS x -- caf\xe9\n")
    assert_refused(invoke(shop, "plan", "--explain"), "models/latin1.sql:3", "not UTF-8", "0xe9")


def test_ttl_in_the_past_is_refused_before_anything_runs(shop):
    config = shop / "config.yaml"
    config.write_text(config.read_text() + "environment_ttl: 1 week\n")
    line = config.read_text().splitlines().index("environment_ttl: 1 week") + 1
    assert_refused(invoke(shop, "plan", "dev", "--auto-apply"), f"config.yaml:{line}", "`environment_ttl`",
                   "'1 week' is in the past")
    assert not (shop / ".meshbot").exists()


def test_a_yaml_alias_bomb_in_config_is_refused_before_anything_runs(shop):
    config = shop / "config.yaml"
    levels = ["lol_0: &lol_0 [" + ", ".join(["lol"] * 10) + "]"]
    levels += [f"lol_{n}: &lol_{n} [" + ", ".join([f"*lol_{n - 1}"] * 10) + "]" for n in range(1, 6)]
    config.write_text(config.read_text() + "variables:\n" + "".join(f"  {level}\n" for level in levels))
    line = len(config.read_text().splitlines()) - 1   # the fifth level passes the budget
    assert_refused(invoke(shop, "plan", "dev", "--auto-apply"), f"config.yaml:{line}:",
                   "YAML aliases repeat too many nodes", "limit of 100,000 plus 20 per node written")
    assert not (shop / ".meshbot").exists()


@pytest.mark.parametrize("key", ["start", "end"])
def test_unreadable_model_start_or_end_names_file_and_line(shop, key):
    (shop / "models" / "odd.sql").write_text(
        f"MODEL (\n  name shop.odd,\n  kind FULL,\n  {key} 'next tuesday-ish'\n);\n\nSELECT 1 AS x\n")
    assert_refused(invoke(shop, "plan", "--explain"), "models/odd.sql:4", f"`{key}`",
                   "cannot understand the time 'next tuesday-ish'")


def test_non_utf8_audit_and_test_files_are_named(shop):
    (shop / "audits" / "latin1.sql").write_bytes(b"AUDIT (name latin1);\nSELECT 1 -- \xff\n")
    assert_refused(invoke(shop, "plan", "--explain"), "audits/latin1.sql:2", "not UTF-8")
    (shop / "audits" / "latin1.sql").unlink()
    (shop / "tests" / "test_latin1.yaml").write_bytes(b"test_x:\n  model: shop.orders # \xe9\n")
    assert_refused(invoke(shop, "test"), "tests/test_latin1.yaml:2", "not UTF-8")


@pytest.mark.parametrize("layout", ["file_cycle", "self", "folder_to_ancestor"])
def test_symlink_loop_under_models_is_refused(shop, layout):
    models = shop / "models"
    if layout == "file_cycle":
        os.symlink("b.sql", models / "a.sql")
        os.symlink("a.sql", models / "b.sql")
        culprit = "models/a.sql"
    elif layout == "self":
        (models / "nested").mkdir()
        os.symlink("me.sql", models / "nested" / "me.sql")
        culprit = "models/nested/me.sql"
    else:
        (models / "nested").mkdir()
        os.symlink("..", models / "nested" / "up")
        culprit = "models/nested/up"
    assert_refused(invoke(shop, "plan", "--explain"), "symlink loop", culprit)
    assert not (shop / ".meshbot" / "state.db").exists()


def test_symlinked_model_file_still_loads(shop, tmp_path):
    shared = tmp_path / "shared.sql"
    shared.write_text("MODEL (name shop.shared, kind FULL);\nSELECT 1 AS x\n")
    os.symlink(shared, shop / "models" / "shared.sql")
    result = invoke(shop, "plan", "--explain")
    assert result.exit_code == 0, result.output
    assert "shop.shared" in result.output


@pytest.mark.parametrize("link", [".meshbot", ".meshbot/cache", ".meshbot/state.db", ".meshbot/cache/models.json"])
@pytest.mark.parametrize("command", [("plan", "--explain"), ("plan", "dev", "--auto-apply", "--skip-backfill")])
def test_a_symlink_in_the_meshbot_folder_is_refused_and_nothing_outside_is_touched(shop, tmp_path, link, command):
    """meshbot writes its caches and state (and Spark its warehouse) under .meshbot/: a committed symlink
    there would send those writes, and the cache's deletes, to whatever it points at."""
    outside = tmp_path / "outside"
    (outside / "cache").mkdir(parents=True)
    for name in ("state.db", "cache/models.json", "cache/rendered.json"):
        (outside / name).write_text("not meshbot's\n")
    target = {".meshbot": outside, ".meshbot/cache": outside / "cache"}.get(link, outside / "state.db")
    (shop / link).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, shop / link)
    assert_refused(invoke(shop, *command), f"`{link}` is a symlink (to `{target}`)", "nothing was changed")
    for name in ("state.db", "cache/models.json", "cache/rendered.json"):
        assert (outside / name).read_text() == "not meshbot's\n"
    assert sorted(p.name for p in outside.rglob("*")) == ["cache", "models.json", "rendered.json", "state.db"]


@pytest.mark.parametrize("command", [
    ("plan", "--explain"), ("plan", "dev", "--explain"), ("plan", "pr_7", "--explain", "--skip-backfill"),
    ("render", "shop.orders"), ("evaluate", "shop.orders"), ("audit",),
])
def test_start_after_end_is_refused_on_any_environment(shop, command):
    result = invoke(shop, *command, "--start", "2024-01-05", "--end", "2024-01-01")
    assert_refused(result, "`--start 2024-01-05` is after `--end 2024-01-01`")
    assert not (shop / ".meshbot").exists()   # refused before state or Spark were touched


def test_start_equal_to_end_is_one_day(shop):
    result = invoke(shop, "render", "shop.orders", "--start", "2024-01-03", "--end", "2024-01-03")
    assert result.exit_code == 0, result.output
    assert "'2024-01-03'" in result.output


@pytest.mark.parametrize("sql, kind", [
    ("DROP TABLE shop.orders", "DROP"), ("INSERT INTO shop.orders SELECT * FROM shop.orders", "INSERT"),
    ("WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x", "INSERT"), ("TRUNCATE TABLE shop.orders", "TRUNCATE"),
    ("SET spark.sql.ansi.enabled=true", "SET"), ("CREATE TABLE t AS SELECT 1 AS x", "CREATE"),
    ("ADD JAR /tmp/x.jar", "ADD JAR"), ("SELECT TRANSFORM(x) USING 'rm -rf /' FROM t", "TRANSFORM"),
])
def test_fetchdf_refuses_statements_that_are_not_queries(shop, sql, kind):
    out = assert_refused(invoke(shop, "fetchdf", sql), "fetchdf runs queries only", kind, "--allow-writes")
    assert not (shop / ".meshbot").exists(), out   # refused before Spark or state started


def test_fetchdf_refuses_several_statements_and_garbage(shop):
    assert_refused(invoke(shop, "fetchdf", "SELECT 1; DROP TABLE shop.orders"), "holds 2 statements")
    assert_refused(invoke(shop, "fetchdf", "SELECT FROM WHERE ((("), "could not read the SQL as a query")
    assert_refused(invoke(shop, "fetchdf", "  ;  "), "needs a query")


@pytest.mark.parametrize("args, needles", [
    (["prod:dev", "shop.orders", "-o", "order_id; DROP TABLE x"], ["`order_id; DROP TABLE x` (-o/--on)"]),
    (["prod:dev", "shop.orders", "-s", "amount)"], ["`amount)` (-s/--skip-columns)"]),
    (["prod:dev", "shop.orders", "--where", "1=1; DROP TABLE shop.orders"], ["--where", "holds a `;`"]),
    (["prod:dev", "shop.orders", "--where", "amount > (SELECT MAX(x) FROM secrets.t)"], ["subqueries"]),
    (["prod:dev", "shop.orders", "--where", "amount >"], ["does not parse"]),
    (["prod:dev", "shop.orders", "--where", "reflect('java.lang.System', 'exit', 0) IS NULL"],
     ["calls `reflect`"]),
    (["shop.a;DROP TABLE x:shop.b", "-o", "id"], ["`shop.a;DROP TABLE x` (SOURCE) is not a table name"]),
    (["x:y", "--source-table", "shop.a b", "--target-table", "shop.b", "-o", "id"], ["(--source-table)"]),
    (["prod:", "shop.orders"], ["needs both sides"]),
    (["prod:dev", "shop.orders", "--limit", "-3"], ["--limit"]),
])
def test_table_diff_refuses_garbage_before_spark(shop, args, needles):
    assert_refused(invoke(shop, "table_diff", *args), *needles)
    assert not (shop / ".meshbot").exists()


def test_fetchdf_writes_only_with_the_flag(shop, clean_catalog):
    """The refused DDL leaves the catalog as it was; with --allow-writes it runs."""
    spark = clean_catalog
    spark.sql("CREATE DATABASE IF NOT EXISTS bad_input_fetch")
    spark.sql("CREATE TABLE bad_input_fetch.t USING parquet AS SELECT 1 AS x")
    assert_refused(invoke(shop, "fetchdf", "DROP TABLE bad_input_fetch.t"), "DROP")
    assert spark.catalog.tableExists("bad_input_fetch.t")
    rows = invoke(shop, "fetchdf", "--json", "SELECT x FROM bad_input_fetch.t")
    assert rows.exit_code == 0 and '"x": 1' in rows.output, rows.output
    dropped = invoke(shop, "fetchdf", "--allow-writes", "DROP TABLE bad_input_fetch.t")
    assert dropped.exit_code == 0, dropped.output
    assert not spark.catalog.tableExists("bad_input_fetch.t")


def test_table_diff_api_checks_tables_and_filter_before_using_spark():
    """Callers other than the CLI (the PR bot) get the same refusal; the session is never touched."""
    from bot.diff.table_diff import table_diff
    from bot.errors import PlanError

    with pytest.raises(PlanError, match="holds a `;`"):
        table_diff(engine=None, source_table="shop.a", target_table="shop.b", keys=["id"],
                   where="id > 0; DROP TABLE shop.a")
    with pytest.raises(PlanError, match="not a table name"):
        table_diff(engine=None, source_table="shop.a", target_table="shop.b WHERE 1=1", keys=["id"])


def test_a_query_spark_refuses_names_the_model_and_its_file(tmp_path, clean_catalog):
    """Spark's own message names only the physical table (`sqlmesh__bad_q.bad_q__a__123`)."""
    from project_files import write_files

    def error_line(result) -> str:
        assert result.exit_code == 1 and "Traceback" not in result.output, result.output
        (line,) = [line for line in result.output.splitlines() if line.startswith("Error:")]
        return line

    root = write_files(tmp_path / "p", {
        "config.yaml": "model_defaults:\n  dialect: duckdb\n",
        "models/a.sql": "MODEL (name bad_q.a, kind FULL);\nSELECT no_such_function(x) AS y FROM (SELECT 1 AS x) AS t\n"})
    where = f"{root / 'models' / 'a.sql'}:1"
    created = error_line(invoke(root, "plan", "--auto-apply"))
    assert created.startswith(f"Error: model `bad_q.a` ({where}) could not have its table created: ") and \
        "no_such_function" in created.lower(), created
    # (a column no parent has is found before Spark: tests/test_fail_fast.py)
    (root / "models" / "a.sql").write_text("MODEL (name bad_q.a, kind FULL, columns (x INT));\n"
                                           "SELECT no_such_function(x) AS x FROM (SELECT 1 AS x) AS t\n")
    evaluated = error_line(invoke(root, "plan", "--auto-apply"))
    assert evaluated.startswith(f"Error: model `bad_q.a` ({where}) failed for [") and "no_such_function" in evaluated.lower()
