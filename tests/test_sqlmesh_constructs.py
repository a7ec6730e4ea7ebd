"""Constructs of real SQLMesh projects (issue 44), each in a small project of our own, with the rows SQLMesh
0.236.4 gives for the same files on DuckDB: a variable glued onto a name, macros in macros/__init__.py, a list
argument used as `x NOT IN @values` in an audit, a `str` macro argument given a dotted name, a Python model
parsing SQL with the name context.table() returns in sqlglot's default dialect, sqlmesh.utils.date helpers."""

from __future__ import annotations

from bot.context import Context
from bot.plan.definition import PlanOptions
from bot.project import sqlmesh_date
from bot.project import warn
from project_files import write_files

CONFIG = """
gateways:
  local:
    connection:
      type: spark
default_gateway: local
model_defaults:
  dialect: duckdb
  start: '2024-01-01'
"""
FILES = {
    "config.yaml": CONFIG,
    "macros/__init__.py": """
from sqlmesh import macro


@macro()
def double_it(evaluator, value):
    return f"({value.sql()} * 2)"


@macro()
def create_masking_policy(evaluator, policy: str):
    return None
""",
    "seeds/pay.csv": "id,method,amount,status\n1,card,10,a\n2,cash,5,b\n3,card,2,a\n",
    "models/pay.sql": """MODEL (name s.pay, kind SEED (path '../seeds/pay.csv'),
  columns (id INT, method TEXT, amount INT, status TEXT),
  audits (assert_accepted(column := status, accepted_values := ARRAY['a', 'b'])));
""",
    "audits/accepted.sql": "AUDIT (name assert_accepted);\nSELECT * FROM @this_model WHERE @column NOT IN @accepted_values\n",
    "models/pivot.sql": """MODEL (name s.pivot, kind FULL);
SELECT @EACH(['card', 'cash'], x -> SUM(CASE WHEN method = x THEN amount ELSE 0 END) AS amount_@x),
  @double_it(1) AS two
FROM s.pay;
@create_masking_policy(common.mp_customer_name)
""",
    "models/py.py": """
import typing as t
from datetime import datetime

import pandas as pd
from sqlglot import parse_one
from sqlmesh import ExecutionContext, model
from sqlmesh.utils.date import to_date, to_ds


@model("s.py", kind="FULL", columns={"n": "int", "d": "text"}, depends_on=["s.pay"])
def execute(context: ExecutionContext, start: datetime, end: datetime, execution_time: datetime, **kwargs: t.Any):
    counted = context.fetchdf(parse_one(f"SELECT COUNT(*) AS n FROM {context.table('s.pay')}"))
    return pd.DataFrame({"n": [int(counted["n"][0])], "d": [to_ds(to_date("2024-01-02"))]})
""",
}


def test_constructs_of_real_projects_run_and_give_sqlmesh_s_rows(tmp_path, clean_catalog):
    root = write_files(tmp_path / "p", FILES)
    before = len(warn.EMITTED)
    context = Context(root)
    try:
        context.apply(context.plan("prod", options=PlanOptions(execution_time="2024-01-02")))
        assert context.fetchdf("SELECT * FROM s.pivot") == [{"amount_card": 12, "amount_cash": 5, "two": 2}]
        assert context.fetchdf("SELECT * FROM s.py") == [{"n": 3, "d": "2024-01-02"}]
        assert context.fetchdf("SELECT COUNT(*) AS n FROM s.pay") == [{"n": 3}]
    finally:
        context.close()
    # SQLMesh logs "Coercion of expression 'common.mp_customer_name' to type '<class 'str'>' failed"
    assert any("macro @CREATE_MASKING_POLICY: argument `policy`: cannot coerce `common.mp_customer_name` to str"
               in text for text in warn.EMITTED[before:])


def test_the_sqlmesh_utils_date_stand_in_offers_sqlmesh_s_public_names():
    # dir() of sqlmesh.utils.date in SQLMesh 0.236.4, less its own imports
    public = {"UTC", "TimeLike", "DatetimeRange", "DatetimeRanges", "DATE_INT_FMT", "now", "now_timestamp", "now_ds",
              "yesterday", "yesterday_ds", "yesterday_timestamp", "to_timestamp", "to_datetime", "to_date",
              "date_dict", "to_ds", "to_ts", "to_tstz", "is_date", "make_inclusive", "make_inclusive_end",
              "make_exclusive", "make_ts_exclusive", "to_utc_timestamp", "validate_date_range", "time_like_to_str",
              "is_categorical_relative_expression", "is_relative", "to_time_column",
              "pandas_timestamp_to_pydatetime", "format_tz_datetime"}
    assert set(sqlmesh_date.__all__) == public
    assert sqlmesh_date.to_tstz("2024-01-02") == "2024-01-02 00:00:00+00:00"
    assert sqlmesh_date.date_dict("2024-01-03", "2024-01-01", "2024-01-02")["end_millis"] == 1704153600000
    assert sqlmesh_date.make_exclusive("2024-01-02").isoformat() == "2024-01-03T00:00:00+00:00"
    assert sqlmesh_date.is_relative("1 week ago") and not sqlmesh_date.is_relative("2 hours ago")


AUDITED = {
    "config.yaml": CONFIG,
    "models/a.sql": """MODEL (name s.a, kind FULL,
  audits (not_null_non_blocking(columns := (x)), unique_values_non_blocking(columns := (y)), not_null(columns := (y))));
SELECT CAST(NULL AS INT) AS x, 1 AS y UNION ALL SELECT 2, 1
""",
    "models/b.sql": "MODEL (name s.b, kind FULL, audits (positive));\nSELECT -1 AS amount\n",
    "audits/positive.sql": "AUDIT (name positive);\nSELECT * FROM @this_model WHERE amount <= 0\n",
}


def test_audit_checks_the_versions_a_failed_plan_built_and_fails_on_any_failed_audit(tmp_path, clean_catalog):
    """SQLMesh 0.236.4: after a plan that fails on a blocking audit, `sqlmesh audit` audits the tables that
    plan built (the versions of the project's files, never promoted) and exits 1 on any failure, blocking
    or not ("Finished with 3 audit errors")."""
    from click.testing import CliRunner

    from bot.cli import cli

    root = write_files(tmp_path / "p", AUDITED)
    plan = CliRunner().invoke(cli, ["-p", str(root), "plan", "--auto-apply"], catch_exceptions=False)
    assert plan.exit_code == 1 and "audits/positive.sql:1" in plan.output, plan.output
    audit = CliRunner().invoke(cli, ["-p", str(root), "audit"], catch_exceptions=False)
    assert audit.exit_code == 1, audit.output
    assert "audit `not_null` (non-blocking) on model `s.a` failed: 1 violating row(s)" in audit.output
    assert "audit `unique_values` (non-blocking) on model `s.a` failed" in audit.output
    assert "PASS audit `not_null` on model `s.a`" in audit.output
    assert f"audit `positive` (blocking, {root / 'audits' / 'positive.sql'}:1) on model `s.b` failed" in audit.output
    assert "1 passed, 1 failed, 2 non-blocking failed, 0 model(s) skipped" in audit.output
    only_a = CliRunner().invoke(cli, ["-p", str(root), "audit", "--model", "s.a"], catch_exceptions=False)
    assert only_a.exit_code == 1 and "1 passed, 0 failed, 2 non-blocking failed" in only_a.output
    (root / "models" / "b.sql").write_text("MODEL (name s.b, kind FULL, audits (positive));\nSELECT 1 AS amount\n")
    unbuilt = CliRunner().invoke(cli, ["-p", str(root), "audit", "--model", "s.b"], catch_exceptions=False)
    assert unbuilt.exit_code == 0 and "SKIPPED model `s.b`: no plan has built its current version yet" in unbuilt.output


CONFIG_PY = """
from sqlmesh.core.config import Config, GatewayConfig, SparkConnectionConfig, ModelDefaultsConfig, PlanConfig
from sqlmesh.core.config import BigQueryConnectionConfig, CategorizerConfig
from sqlmesh.core.config.common import VirtualEnvironmentMode, TableNamingConvention
from sqlmesh.core.config.linter import LinterConfig
from sqlmesh.core.user import User, UserRole

base = Config(
    gateways={"bq": GatewayConfig(connection=BigQueryConnectionConfig())},
    default_gateway="bq",
    model_defaults=ModelDefaultsConfig(dialect="duckdb", start="2024-01-01"),
    linter=LinterConfig(enabled=False),
    users=[User(username="ann", roles=[UserRole.REQUIRED_APPROVER])],
)
dev_only = base.copy(update={"virtual_environment_mode": VirtualEnvironmentMode.DEV_ONLY,
                             "plan": PlanConfig(auto_categorize_changes=CategorizerConfig.all_full())})
hashed = base.model_copy(update={"physical_table_naming_convention": TableNamingConvention.HASH_MD5})
config = base.update_with(Config(variables={"x": 1}))
config.gateways["local"] = GatewayConfig(connection=SparkConnectionConfig())
config.default_gateway = "local"
"""


def test_a_config_py_written_for_sqlmesh_loads_with_its_copies_enums_and_later_changes(tmp_path):
    """SQLMesh's own sushi config.py: Config objects copied with pydantic's copy/model_copy(update=...),
    merged with update_with, changed after they are made, enums from sqlmesh.core.config.common."""
    from bot.project.config import load_config

    root = write_files(tmp_path / "p", {"config.py": CONFIG_PY})
    config = load_config(root)
    assert config.default_gateway == "local" and type(config.gateway().connection).__name__ == "SparkConnection"
    assert config.variables == {"x": 1} and config.model_defaults.dialect == "duckdb"
    assert "bq" in config.unsupported_gateways
    assert [user.username for user in config.users] == ["ann"]


def test_the_config_stand_in_offers_each_config_module_of_sqlmesh():
    """Module by module, the names of SQLMesh 0.236.4's config package a config.py imports (its public
    config classes and enums), less its own bases and helpers."""
    import importlib

    from bot.project.sqlmesh_config import MODULES
    from bot.project.sqlmesh_shim import sqlmesh_shim

    assert set(MODULES["sqlmesh.core.config.common"]) == {"EnvironmentSuffixTarget", "TableNamingConvention",
                                                          "VirtualEnvironmentMode"}
    with sqlmesh_shim():
        for module, names in MODULES.items():
            for name in names:
                assert getattr(importlib.import_module(module), name) is not None, (module, name)
        common = importlib.import_module("sqlmesh.core.config.common")
        assert common.VirtualEnvironmentMode.DEV_ONLY.value == "dev_only"
        assert common.TableNamingConvention.HASH_MD5 == "hash_md5"


IS_SQL = {
    "config.yaml": CONFIG,
    "seeds/ev.csv": "id,ds\n1,2024-01-01\n2,2024-01-02\n3,2024-01-02\n4,2024-01-03\n",
    "models/ev.sql": "MODEL (name s.ev, kind SEED (path '../seeds/ev.csv'), columns (id INT, ds DATE));\n",
    "models/daily.py": '''
from sqlglot import exp
from sqlmesh import model
from sqlmesh.core.macros import MacroEvaluator
from sqlmesh.core.model.kind import ModelKindName


@model("s.daily", is_sql=True, kind=dict(name=ModelKindName.INCREMENTAL_BY_TIME_RANGE, time_column="ds"))
def entrypoint(evaluator: MacroEvaluator) -> exp.Select:
    start, end = evaluator.locals["start_date"], evaluator.locals["end_date"]
    if evaluator.runtime_stage != "loading":
        assert [p.name for p in evaluator.get_snapshot("s.daily").parents] == ['"s"."ev"']
        assert evaluator.default_catalog is None
    return (exp.select("ds", "COUNT(*) AS n", f"'{evaluator.runtime_stage}' AS stage")
            .from_("s.ev").where(f"ds BETWEEN '{start}' AND '{end}'").group_by("ds"))
''',
}


def test_an_is_sql_model_is_its_function_called_at_every_render_with_that_interval(tmp_path, clean_catalog):
    """SQLMesh's sushi `waiters`: an `is_sql` function reads the interval from `evaluator.locals`
    (start_date, end_date) and its parents from `evaluator.get_snapshot`; SQLMesh calls it for each
    interval it evaluates (runtime stage `evaluating`), so each day holds its own rows. SQLMesh 0.236.4
    on DuckDB, executed 2024-01-04: (2024-01-01, 1), (2024-01-02, 2), (2024-01-03, 1), all `evaluating`."""
    root = write_files(tmp_path / "p", IS_SQL)
    context = Context(root)
    try:
        context.apply(context.plan("prod", options=PlanOptions(execution_time="2024-01-04")))
        rows = context.fetchdf("SELECT CAST(ds AS STRING) AS ds, n, stage FROM s.daily ORDER BY ds")
    finally:
        context.close()
    assert rows == [{"ds": "2024-01-01", "n": 1, "stage": "evaluating"},
                    {"ds": "2024-01-02", "n": 2, "stage": "evaluating"},
                    {"ds": "2024-01-03", "n": 1, "stage": "evaluating"}]


PACKAGE_MACROS = {
    "site/corpus_macro_pkg/__init__.py": "",
    "site/corpus_macro_pkg/macros/__init__.py": "from corpus_macro_pkg.macros.scaled import scaled\n",
    "site/corpus_macro_pkg/macros/scaled.py": """
from sqlmesh.core.macros import macro


@macro()
def scaled(evaluator, value, factor=3):
    return f"({value.sql()} * {factor.sql() if hasattr(factor, 'sql') else factor})"
""",
    "p/config.yaml": CONFIG,
    # the project's macro file only imports the installed package's module: SQLMesh registers every @macro
    # that runs while its macro files import, wherever the function is defined
    "p/macros/__init__.py": "from corpus_macro_pkg import macros\n",
    "p/models/m.sql": "MODEL (name s.m, kind FULL);\nSELECT @scaled(2) AS six, @scaled(2, 5) AS ten\n",
}


def test_a_macro_a_macro_file_imports_from_an_installed_package_is_registered(tmp_path, monkeypatch, clean_catalog):
    write_files(tmp_path, PACKAGE_MACROS)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    context = Context(tmp_path / "p")
    try:
        context.apply(context.plan("prod", options=PlanOptions(execution_time="2024-01-02")))
        assert context.fetchdf("SELECT * FROM s.m") == [{"six": 6, "ten": 10}]   # SQLMesh's row on DuckDB
    finally:
        context.close()


SNOWFLAKE_AUDITED = {
    "config.yaml": CONFIG.replace("dialect: duckdb", "dialect: snowflake"),
    # Snowflake parses `FROM @this_model` as a staged file path: SQLMesh makes its name the macro variable
    "audits/positive.sql": "AUDIT (name assert_positive, blocking false);\nSELECT * FROM @this_model WHERE x < 0\n",
    "models/a.sql": "MODEL (name s.a, kind FULL, audits (assert_positive));\nSELECT 1 AS x UNION ALL SELECT 2 AS x\n",
    "models/b.sql": "MODEL (name s.b, kind FULL, audits (assert_positive));\nSELECT x - 2 AS x FROM s.a\n",
}


def test_a_snowflake_audit_reading_at_this_model_audits_the_model(tmp_path, clean_catalog):
    """SQLMesh 0.236.4 on DuckDB: s.b holds -1 and 0, and its audit fails with 1 row; s.a's passes. A stage path
    naming no variable (`FROM @my_stage`) stays the stage it is."""
    from click.testing import CliRunner

    from bot.cli import cli
    from bot.project.macros import MacroEvaluator
    from bot.project.sqltext import parse_sql

    root = write_files(tmp_path / "p", SNOWFLAKE_AUDITED)
    plan = CliRunner().invoke(cli, ["-p", str(root), "plan", "--auto-apply"], catch_exceptions=False)
    assert plan.exit_code == 0, plan.output
    audit = CliRunner().invoke(cli, ["-p", str(root), "audit"], catch_exceptions=False)
    assert audit.exit_code == 1, audit.output
    assert "on model `s.b` failed: 1 violating row(s)\n  x\n  --\n  -1\n" in audit.output
    assert "PASS audit `assert_positive` on model `s.a`" in audit.output
    assert "1 passed, 0 failed, 1 non-blocking failed" in audit.output
    staged = parse_sql("SELECT * FROM @my_stage", "snowflake")[0]
    assert MacroEvaluator(dialect="snowflake", variables={}, config_variables={}).transform(staged).sql(
        dialect="snowflake") == "SELECT * FROM @my_stage"
