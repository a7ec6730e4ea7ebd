"""A SQLMesh project run unchanged on Spark; every expected value is what SQLMesh 0.236.4 gave on DuckDB.

The project (written by `write_files`) was run with
`sqlmesh plan dev --auto-apply --start 2024-01-01 --end 2024-01-04` after creating `ext.customers`
and `ext.regions`; the counts and rows below are SQLMesh's.
"""

from __future__ import annotations

import pytest

from bot.context import Context
from bot.errors import ConfigError, QualityError
from bot.plan.definition import PlanOptions
from bot.project.loader import load_project
from bot.project.model import KindName
from bot.quality.audit_report import standalone_warnings
from bot.spark.python_context import ExecutionContext, run_python_model

from project_files import write_files

FILES = {
    "config.yaml": """\
model_defaults:
  dialect: duckdb
  start: '2024-01-01'
variables:
  factor: 2
before_all:
  - CREATE TABLE IF NOT EXISTS ext.env_log (env TEXT, stage TEXT)
  - INSERT INTO ext.env_log VALUES (@this_env, 'before')
after_all:
  - INSERT INTO ext.env_log VALUES (@this_env, 'after')
""",
    "helper.py": """\
def scaled(value, factor):
    return int(value) * int(factor)
""",
    "models/raw_events.sql": """\
MODEL (name compat.raw_events, kind FULL);
SELECT id, status, CAST(ds AS DATE) AS ds, amount, customer_id
FROM (VALUES (1, 'a', '2024-01-01', 10, 1), (2, 'b', '2024-01-01', 20, 2), (3, 'a', '2024-01-02', 30, 1),
             (4, 'c', '2024-01-03', 40, 3)) AS t(id, status, ds, amount, customer_id)
""",
    # no depends_on: the parent comes from context.resolve_table; the project root is importable;
    # a generator yields one frame per status and returns nothing for the empty 2024-01-04.
    "models/py_daily.py": """\
import typing as t

import pandas as pd
from sqlglot import exp
from sqlmesh import ExecutionContext, model
from sqlmesh.core.model.kind import ModelKindName

from helper import scaled


@model(
    "compat.py_daily",
    kind=dict(name=ModelKindName.INCREMENTAL_BY_TIME_RANGE, time_column="ds", batch_size=1),
    columns={"ds": "date", "status": "text", "amount": "bigint", "window": "text"},
    audits=[("accepted_values", {"column": exp.column("status"), "is_in": ["a", "b", "c"]})],
)
def execute(context: ExecutionContext, start, end, execution_time, **kwargs: t.Any) -> t.Iterator[pd.DataFrame]:
    table = context.resolve_table("compat.raw_events")
    rows = context.fetchdf(
        f"SELECT ds, status, amount FROM {table} "
        f"WHERE ds BETWEEN '{start.strftime('%Y-%m-%d')}' AND '{end.strftime('%Y-%m-%d')}' ORDER BY id")
    if rows.empty:
        return
    factor = context.var("factor")
    for status, group in rows.groupby("status"):
        yield pd.DataFrame({"ds": group["ds"], "status": status,
                            "amount": [scaled(v, factor) for v in group["amount"]],
                            "window": f"{type(start).__name__}|{start.isoformat()}|{end.isoformat()}"})
""",
    "models/by_status.py": """\
from sqlmesh import model
from sqlmesh.core.macros import MacroEvaluator


@model("compat.by_status", is_sql=True, kind="FULL")
def entrypoint(evaluator: MacroEvaluator) -> str:
    return "SELECT status, SUM(amount) AS total FROM compat.py_daily GROUP BY status"
""",
    "models/status_scd.sql": """\
MODEL (name compat.status_scd, kind SCD_TYPE_2 (unique_key id));
SELECT id, status, CAST(ds AS TIMESTAMP) AS updated_at FROM compat.raw_events
""",
    "models/part_counts.sql": """\
MODEL (name compat.part_counts, kind INCREMENTAL_BY_PARTITION, partitioned_by status);
SELECT COUNT(*) AS n, status FROM compat.raw_events GROUP BY status
""",
    "models/unmanaged_log.sql": """\
MODEL (name compat.unmanaged_log, kind INCREMENTAL_UNMANAGED);
SELECT id, amount FROM compat.raw_events WHERE amount > 15
""",
    "models/enriched.sql": """\
MODEL (name compat.enriched, kind FULL, audits (positive_amount, assert_region (region := 'north')));
SELECT e.id, e.amount, c.name, r.region
FROM compat.raw_events AS e
JOIN ext.customers AS c ON e.customer_id = c.customer_id
LEFT JOIN ext.regions AS r ON c.customer_id = r.customer_id;

AUDIT (name positive_amount);
SELECT * FROM @this_model WHERE amount <= 0;

AUDIT (name assert_region);
SELECT * FROM @this_model WHERE region = @region AND amount > 100
""",
    "audits/no_big_amounts.sql": """\
AUDIT (name no_big_amounts, standalone true);
SELECT * FROM compat.raw_events WHERE amount > 1000
""",
    "external_models.yaml": "- name: ext.customers\n  columns:\n    customer_id: int\n    name: text\n",
    "external_models/regions.yaml": "- name: ext.regions\n  columns:\n    customer_id: int\n    region: text\n",
}


# Spark only (not in the SQLMesh run): a model's session_properties hold while it runs, and its
# physical_properties become table properties of its physical table.
SPARK_ONLY = {
    "models/props.py": """\
import pandas as pd
from sqlmesh import model


@model("compat.props", kind="FULL", columns={"partitions": "text"},
       session_properties={"spark.sql.shuffle.partitions": "7"}, physical_properties={"team": "data"})
def execute(context, start, end, execution_time, **kwargs):
    return pd.DataFrame({"partitions": [context.spark.conf.get("spark.sql.shuffle.partitions")]})
""",
}


def test_sqlmesh_project_runs_unchanged_with_sqlmeshs_results(tmp_path, clean_catalog):
    spark = clean_catalog
    root = write_files(tmp_path / "compat", {**FILES, **SPARK_ONLY})
    spark.sql("CREATE DATABASE IF NOT EXISTS ext")
    spark.sql("CREATE TABLE ext.customers USING parquet AS "
              "SELECT * FROM VALUES (1, 'ann'), (2, 'bob'), (3, 'cy') AS t(customer_id, name)")
    spark.sql("CREATE TABLE ext.regions USING parquet AS "
              "SELECT * FROM VALUES (1, 'north'), (2, 'south') AS t(customer_id, region)")
    context = Context(root)
    models = context.models
    assert models["compat.py_daily"].depends_on == {"compat.raw_events"}     # inferred
    assert models["compat.by_status"].depends_on == {"compat.py_daily"}
    assert models["compat.status_scd"].kind.name is KindName.SCD_TYPE_2_BY_TIME
    plan = context.plan("dev", options=PlanOptions(start="2024-01-01", end="2024-01-04",
                                                   execution_time="2024-01-05"))
    result = context.apply(plan)
    batches = [(name, start) for name, start, _ in result.evaluated if name == "compat.py_daily"]
    assert len(batches) == 4                                    # SQLMesh: [1/4] .. [4/4]

    def rows(sql):
        return [tuple(r) for r in spark.sql(sql).collect()]

    # SQLMesh: row counts per model
    counts = {name: rows(f"SELECT COUNT(*) FROM compat__dev.{name}")[0][0] for name in (
        "raw_events", "py_daily", "by_status", "status_scd", "part_counts", "unmanaged_log", "enriched")}
    assert counts == {"raw_events": 4, "py_daily": 4, "by_status": 3, "status_scd": 4, "part_counts": 3,
                      "unmanaged_log": 3, "enriched": 4}
    window = "datetime|{0}T00:00:00+00:00|{0}T23:59:59.999999+00:00"
    assert rows("SELECT CAST(ds AS STRING), status, amount, window FROM compat__dev.py_daily "
                "ORDER BY ds, status") == [
        ("2024-01-01", "a", 20, window.format("2024-01-01")), ("2024-01-01", "b", 40, window.format("2024-01-01")),
        ("2024-01-02", "a", 60, window.format("2024-01-02")), ("2024-01-03", "c", 80, window.format("2024-01-03"))]
    assert rows("SELECT status, total FROM compat__dev.by_status ORDER BY status") == \
        [("a", 80), ("b", 40), ("c", 80)]
    assert rows("SELECT n, status FROM compat__dev.part_counts ORDER BY status") == [(2, "a"), (1, "b"), (1, "c")]
    assert rows("SELECT id, amount, name, region FROM compat__dev.enriched ORDER BY id") == \
        [(1, 10, "ann", "north"), (2, 20, "bob", "south"), (3, 30, "ann", "north"), (4, 40, "cy", None)]
    assert rows("SELECT id, status, CAST(updated_at AS STRING), CAST(valid_from AS STRING), valid_to "
                "FROM compat__dev.status_scd ORDER BY id") == [
        (1, "a", "2024-01-01 00:00:00", "1970-01-01 00:00:00", None),
        (2, "b", "2024-01-01 00:00:00", "1970-01-01 00:00:00", None),
        (3, "a", "2024-01-02 00:00:00", "1970-01-01 00:00:00", None),
        (4, "c", "2024-01-03 00:00:00", "1970-01-01 00:00:00", None)]
    # the external models are read where they live, never from a versioned table
    env = context.state.get_environment("dev").by_name()
    assert rows("SELECT env, stage FROM ext.env_log ORDER BY stage DESC") == [("dev", "before"), ("dev", "after")]   # SQLMesh's
    assert rows("SELECT partitions FROM compat__dev.props") == [("7",)]
    assert spark.conf.get("spark.sql.shuffle.partitions") != "7"
    properties = dict(rows(f"SHOW TBLPROPERTIES {env['compat.props'].table_name}"))
    assert properties["team"] == "data"
    assert env["ext.customers"].table_name == "ext.customers"
    assert result.audit_warnings == ()
    # a plain function returning nothing writes an empty interval, like a generator yielding nothing
    empty = run_python_model(lambda context, start, end, execution_time, **kwargs: None,
                             ExecutionContext(spark, {}), start=0, end=86_400_000, execution_time=86_400_000,
                             columns=[("id", "INT")], name="compat.nothing")
    assert empty.count() == 0
    # `meshbot audit` runs the model audits (inline ones too) and the standalone audit; SQLMesh:
    # "audits passed 2" for enriched, "passed 1" for no_big_amounts and for py_daily
    report = context.audit(environment="dev")
    assert sorted((r.audit, r.model, r.violation_count) for r in report.results) == [
        ("accepted_values", "compat.py_daily", 0), ("assert_region", "compat.enriched", 0),
        ("no_big_amounts", "standalone", 0), ("positive_amount", "compat.enriched", 0)]
    # SQLMesh's plan after adding a column to each: "by_status (Non-breaking)" (a query it can
    # analyze), "py_daily (Breaking)" (Python code)
    for name, old, new in (("by_status.py", "SUM(amount) AS total FROM", "SUM(amount) AS total, COUNT(*) AS n FROM"),
                           ("py_daily.py", '"window": "text"}', '"window": "text", "window2": "text"}')):
        path = root / "models" / name
        path.write_text(path.read_text().replace(old, new).replace('"window": f"', '"window2": "x", "window": f"'))
    replan = Context(root).plan("dev", options=PlanOptions(start="2024-01-01", end="2024-01-04",
                                                           execution_time="2024-01-05"))
    assert {c.name: (c.change.value, c.category.value) for c in replan.changes} == {
        "compat.by_status": ("directly_modified", "non_breaking"),
        "compat.py_daily": ("directly_modified", "breaking")}
    # with `amount > 25`, SQLMesh's `audit`: "no_big_amounts ❌ FAIL [2]"; a blocking failure fails the plan
    (root / "audits" / "no_big_amounts.sql").write_text(
        "AUDIT (name no_big_amounts, standalone true);\nSELECT * FROM compat.raw_events WHERE amount > 25\n")
    changed = Context(root)
    failed = [r for r in changed.audit(environment="dev").results if not r.passed]
    assert [(r.audit, r.violation_count) for r in failed] == [("no_big_amounts", 2)]
    with pytest.raises(QualityError, match="no_big_amounts"):
        standalone_warnings(changed.engine, audit_defs=changed.project.audits, variables=changed.config.variables,
                            table_mapping={name: e.table_name for name, e in env.items()})


def test_unsupported_settings_are_warnings_naming_file_and_line(tmp_path, capsys):
    root = write_files(tmp_path / "w", {
        "config.yaml": "model_defaults:\n  dialect: duckdb\n  optimize_query: false\nui:\n  enabled: true\n",
        "models/a.sql": "MODEL (\n  name w.a,\n  kind INCREMENTAL_BY_UNIQUE_KEY (unique_key id, when_matched x),\n"
                        "  signals (ready()),\n  colour 'blue'\n);\nSELECT 1 AS id",
        "models/p.py": "from sqlmesh import model\n\n\n@model('w.p', columns={'id': 'int'}, "
                       "virtual_properties={'x': 1})\ndef execute(context, **kw):\n    return None\n",
    })
    load_project(root, use_cache=False)
    err = capsys.readouterr().err
    config, model, python = root / "config.yaml", root / "models" / "a.sql", root / "models" / "p.py"
    assert f"Warning: {config}:4: config key `ui` is not supported by meshbot and is ignored" in err
    assert f"{config}:3: config key `model_defaults.optimize_query` is not supported" in err
    assert f"{model}:3: model w.a: kind property `when_matched` is not supported by meshbot" in err
    assert f"{model}:4: MODEL property `signals` is not supported by meshbot and is ignored" in err
    assert f"{model}:5: MODEL property `colour` is not a MODEL property and is ignored" in err
    assert f"{python}:4: model w.p: `@model` argument `virtual_properties` is not supported" in err


def test_custom_kind_and_missing_sqlmesh_names_are_one_clear_error(tmp_path):
    root = write_files(tmp_path / "c", {
        "config.yaml": "model_defaults:\n  dialect: duckdb\n",
        "models/a.sql": "MODEL (\n  name c.a,\n  kind CUSTOM (materialization 'my_mat')\n);\nSELECT 1 AS id"})
    with pytest.raises(ConfigError, match=r"a.sql:3: model c.a: custom materialization `my_mat` not found"):
        load_project(root, use_cache=False)
    (root / "models" / "a.sql").unlink()
    (root / "models" / "b.py").write_text("from sqlmesh.core.macros import MacroEvaluator, RuntimeStage\n")
    with pytest.raises(ConfigError, match=r"b.py:1: cannot import Python model file: meshbot does not provide "
                                          r"`sqlmesh.core.macros.RuntimeStage`"):
        load_project(root, use_cache=False)


def test_project_root_is_importable_from_macros(tmp_path):
    from bot.project.render import render_sql

    root = write_files(tmp_path / "m", {
        "config.yaml": "model_defaults:\n  dialect: duckdb\n",
        "macros/__init__.py": "",
        "macros/utils.py": "def double_sql(text):\n    return f'{text} * 2'\n",
        "macros/twice.py": "from sqlmesh import macro\nfrom macros.utils import double_sql\n\n\n"
                           "@macro()\ndef twice(evaluator, column):\n    return double_sql(column.sql())\n",
        "models/a.sql": "MODEL (name m.a, kind FULL);\nSELECT @twice(x) AS y FROM (SELECT 1 AS x) AS t",
    })
    project = load_project(root, use_cache=False)
    assert "`x` * 2 AS `y`" in render_sql(project.models["m.a"])


def test_config_py_with_a_sqlmesh_config_object(tmp_path):
    from bot.project.config import load_config

    root = write_files(tmp_path / "p", {
        "config.py": "from sqlmesh.core.config import Config, ModelDefaultsConfig\n\n"
                     "config = Config(\n    model_defaults=ModelDefaultsConfig(dialect='duckdb', start='2024-01-01'),\n"
                     "    variables={'factor': 2},\n    after_all=['SELECT 1'],\n)\n",
        "models/a.sql": "MODEL (name p.a, kind FULL);\nSELECT @factor AS f",
    })
    config = load_config(root)
    assert (config.model_defaults.dialect, config.model_defaults.start) == ("duckdb", "2024-01-01")
    assert config.variables == {"factor": 2} and config.after_all == ("SELECT 1",)
    assert list(load_project(root, use_cache=False).models) == ["p.a"]
    (root / "config.py").write_text("from sqlmesh.core.config import Config, NotAThing\n")
    with pytest.raises(ConfigError, match=r"config.py:1: cannot load config.py: meshbot does not provide "
                                          r"`sqlmesh.core.config.NotAThing`"):
        load_config(root)


def test_a_config_py_written_for_other_engines_loads_and_runs_on_its_spark_gateway(tmp_path):
    """A public project's config.py: BigQuery and DuckDB gateways beside Spark, SQLMesh's default
    scheduler, a migration event (SQLMesh 0.236.4 loads the same file)."""
    from bot.project.config import load_config

    root = write_files(tmp_path / "p", {
        "config.py": (
            "from sqlmesh.core.config import (BigQueryConnectionConfig, BuiltInSchedulerConfig, Config,\n"
            "    DuckDBConnectionConfig, GatewayConfig, ModelDefaultsConfig, SparkConnectionConfig)\n"
            "from sqlmesh.core.config.connection import BigQueryConnectionMethod\n"
            "from sqlmesh.core.notification_target import NotificationEvent, ConsoleNotificationTarget\n\n"
            "config = Config(\n"
            "    gateways={'bq': GatewayConfig(connection=BigQueryConnectionConfig(\n"
            "                  method=BigQueryConnectionMethod.SERVICE_ACCOUNT_JSON, keyfile_json='Bq-Secret-Key')),\n"
            "              'duck': GatewayConfig(connection=DuckDBConnectionConfig(database='x.duckdb')),\n"
            "              'spark': GatewayConfig(connection=SparkConnectionConfig(),\n"
            "                                     scheduler=BuiltInSchedulerConfig())},\n"
            "    model_defaults=ModelDefaultsConfig(dialect='bigquery'),\n"
            "    notification_targets=[ConsoleNotificationTarget(\n"
            "        notify_on=[NotificationEvent.APPLY_FAILURE, NotificationEvent.MIGRATION_FAILURE])],\n"
            ")\n"),
        "models/a.sql": "MODEL (name p.a, kind FULL);\nSELECT 1 AS x",
    })
    config = load_config(root)
    assert config.default_gateway == "spark" and sorted(config.unsupported_gateways) == ["bq", "duck"]
    assert config.notification_targets[0].notify_on == {"apply_failure", "migration_failure"}
    with pytest.raises(ConfigError, match=r"config.py: `gateways.bq.connection`: connection type `bigquery` is "
                                          "not supported"):
        config.gateway("bq")
    from bot.redact import redact
    assert "Bq-Secret-Key" not in redact("keyfile Bq-Secret-Key")
    assert list(load_project(root, use_cache=False).models) == ["p.a"]


def test_a_config_py_with_sqlmeshs_github_bot_config_gives_the_bot_its_settings(tmp_path):
    """SQLMesh's `GithubCICDBotConfig` in config.py (locally; in Actions gate settings come from a trusted source)."""
    from bot.github.settings import load_settings
    from bot.project.config import load_config

    root = tmp_path / "project"
    root.mkdir()
    (root / "config.py").write_text(
        "from sqlmesh.core.config import Config, ModelDefaultsConfig\n"
        "from sqlmesh.integrations.github.cicd.config import GithubCICDBotConfig, MergeMethod\n"
        "config = Config(model_defaults=ModelDefaultsConfig(dialect='duckdb'),\n"
        "                cicd_bot=GithubCICDBotConfig(enable_deploy_command=True, merge_method=MergeMethod.SQUASH,\n"
        "                                             skip_pr_backfill=False, prod_branch_name='main'))\n")
    settings = load_settings(load_config(root).cicd_bot)
    assert (settings.enable_deploy_command, settings.merge_method, settings.skip_pr_backfill) == (True, "squash", False)
    assert settings.prod_branch_names == ("main",)
