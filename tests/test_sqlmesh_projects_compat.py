"""Real SQLMesh projects unchanged (issue 26): audits read the environment's tables, catalog-qualified
names, `$root` seed paths, grains, `ignore_patterns`, kind properties.

Expected values come from SQLMesh 0.236.4 on DuckDB, run on the same projects (noted per test).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.context import Context
from bot.errors import ConfigError, QualityError
from bot.plan.definition import PlanOptions
from bot.project.loader import load_project
from tests.project_files import write_files

OPTIONS = PlanOptions(execution_time="2024-01-03")
CONFIG = "model_defaults:\n  dialect: duckdb\n  start: '2024-01-01'\n"
POSITIVE = "MODEL (name db.order_f, kind FULL{audits});\nSELECT 1 AS id, 10 AS amount\n"
NEGATIVE = ("MODEL (name db.order_f, kind FULL{audits});\n"
            "SELECT 1 AS id, -10 AS amount UNION ALL SELECT 2 AS id, -5 AS amount\n")


def _apply(context: Context, environment: str):
    return context.apply(context.plan(environment, options=OPTIONS))


def test_an_audit_naming_its_model_audits_the_dev_version(tmp_path, clean_catalog):
    # SQLMesh 0.236.4: the dev plan fails, "'no_negative' audit error: 2 rows failed", its query
    # reading the dev version's physical table (`... "db__order_f__3291226586" AS "order_f"`)
    audits = ", audits (no_negative)"
    root = write_files(tmp_path / "p", {
        "config.yaml": CONFIG,
        "models/order_f.sql": POSITIVE.format(audits=audits),
        "audits/no_negative.sql": "AUDIT (name no_negative);\nSELECT * FROM db.order_f WHERE amount < 0\n",
    })
    _apply(Context(root), "prod")
    (root / "models" / "order_f.sql").write_text(NEGATIVE.format(audits=audits))
    context = Context(root)
    with pytest.raises(QualityError) as failure:
        _apply(context, "dev")
    assert "no_negative" in str(failure.value) and "2 violating row(s)" in str(failure.value)
    assert context.state.get_environment("dev") is None
    assert [r.violation_count for r in Context(root).audit(environment="prod").results] == [0]


def test_an_audit_naming_a_parent_reads_the_parents_dev_version(tmp_path, clean_catalog):
    # SQLMesh 0.236.4: "'parent_positive' audit error: 2 rows failed"; both the catalog-qualified
    # `"jaffle_shop"."db"."other"` and `db.order_f` read the dev versions' physical tables
    root = write_files(tmp_path / "p", {
        "config.yaml": CONFIG + "default_catalog: jaffle_shop\n",
        "models/order_f.sql": POSITIVE.format(audits=""),
        "models/other.sql": "MODEL (name db.other, kind FULL, audits (parent_positive));\nSELECT id FROM db.order_f\n",
        "audits/parent_positive.sql": (
            "AUDIT (name parent_positive);\nSELECT o.id FROM \"jaffle_shop\".\"db\".\"other\" AS o\n"
            "JOIN db.order_f AS f ON f.id = o.id WHERE f.amount < 0\n"),
    })
    _apply(Context(root), "prod")
    (root / "models" / "order_f.sql").write_text(NEGATIVE.format(audits=""))
    context = Context(root)
    with pytest.raises(QualityError) as failure:
        _apply(context, "dev")
    assert "parent_positive" in str(failure.value) and "2 violating row(s)" in str(failure.value)


JAFFLE = {
    "config.yaml": CONFIG + "default_catalog: jaffle_shop\n",
    "seeds/orders.csv": "id,amount,status\n1,10,paid\n2,25,paid\n3,7,open\n",
    "models/staging/seed_orders.sql":
        "MODEL (name jaffle_shop.raw.seed_orders, kind SEED (path '$root/seeds/orders.csv'));\n",
    "models/orders.sql": ("MODEL (name jaffle_shop.main.orders, kind FULL, audits (positive_amount, paid_seen));\n"
                          "SELECT id, amount, status FROM \"jaffle_shop\".\"raw\".\"seed_orders\"\n"),
    "models/summary.sql": (
        "MODEL (name main.summary, kind FULL);\n"
        "SELECT COUNT(*) AS n, SUM(o.amount) AS total, SUM(CASE WHEN s.status = 'paid' THEN 1 ELSE 0 END) AS paid\n"
        "FROM jaffle_shop.main.orders AS o JOIN raw.seed_orders AS s ON s.id = o.id\n"),
    "audits/a.sql": (
        "AUDIT (name positive_amount);\nSELECT * FROM \"jaffle_shop\".\"main\".\"orders\" WHERE amount <= 0;\n\n"
        "AUDIT (name paid_seen);\n"
        "SELECT * FROM main.orders WHERE status NOT IN (SELECT status FROM jaffle_shop.raw.seed_orders);\n"),
}


def test_the_default_catalog_is_mapped_away(tmp_path, clean_catalog):
    # SQLMesh 0.236.4 on DuckDB (database jaffle_shop.db), same files: main.summary is n=3, total=42, paid=2
    root = write_files(tmp_path / "p", JAFFLE)
    context = Context(root)
    assert sorted(context.models) == ["main.orders", "main.summary", "raw.seed_orders"]
    assert context.models["main.summary"].depends_on == {"main.orders", "raw.seed_orders"}
    assert context.models["raw.seed_orders"].seed_abs_path == root / "seeds" / "orders.csv"
    _apply(context, "prod")
    assert [dict(r.asDict()) if hasattr(r, "asDict") else dict(r)
            for r in context.fetchdf("SELECT * FROM main.summary")] == [{"n": 3, "total": 42, "paid": 2}]
    assert [r.violation_count for r in context.audit(models=["main.orders"]).results] == [0, 0]


def test_spark_catalog_is_a_default_catalog_and_another_catalog_is_named(tmp_path):
    files = {**JAFFLE, "config.yaml": CONFIG}
    root = write_files(tmp_path / "p", files)
    with pytest.raises(ConfigError) as failure:
        load_project(root)
    assert str(failure.value).startswith(f"{root / 'models' / 'orders.sql'}:1: model `jaffle_shop.main.orders`: "
                                         "catalog `jaffle_shop` is not the default catalog (`spark_catalog`;")

    root = write_files(tmp_path / "q", {"config.yaml": CONFIG, "models/a.sql": (
        "MODEL (name spark_catalog.db.a, kind FULL);\nSELECT 1 AS id\n"), "models/b.sql": (
        "MODEL (name db.b, kind FULL);\nSELECT a.id FROM spark_catalog.db.a AS a\n"
        "JOIN elsewhere.db.x AS x ON x.id = a.id\n")})
    with pytest.raises(ConfigError) as failure:
        load_project(root)
    assert str(failure.value) == (
        f"{root / 'models' / 'b.sql'}:3: model `db.b` reads `elsewhere.db.x AS x`: catalog `elsewhere` is neither "
        "the default catalog (`spark_catalog`; set `default_catalog` in config.yaml to the catalog the project was "
        "written for) nor a Spark catalog of a gateway (`spark.sql.catalog.elsewhere`)")

    (root / "config.yaml").write_text(CONFIG + "gateways:\n  local:\n    connection:\n      type: spark\n"
                                      "      config:\n        spark.sql.catalog.elsewhere: some.Catalog\n")
    project = load_project(root)
    assert sorted(project.models) == ["db.a", "db.b"]
    assert project.models["db.b"].depends_on == {"db.a", "elsewhere.db.x"}


def test_a_grain_the_model_lacks_warns_unless_strict(tmp_path, capsys):
    # SQLMesh 0.236.4 plans this model without a word; meshbot warns (file and line), `strict: true` refuses
    root = write_files(tmp_path / "p", {"config.yaml": CONFIG, "models/m.sql": (
        "MODEL (\n  name db.m,\n  kind FULL,\n  grain (id, nope)\n);\nSELECT 1 AS id\n")})
    plan = Context(root).plan("prod", options=OPTIONS)
    assert plan.change_for("db.m") is not None
    where = f"{root / 'models' / 'm.sql'}:4: "
    assert (f"Warning: {where}`grain` of model `db.m` names column `nope`, which the model does not produce "
            "(its columns: id); `strict: true` in config.yaml makes this an error") in capsys.readouterr().err

    (root / "config.yaml").write_text(CONFIG + "strict: true\n")
    with pytest.raises(ConfigError) as failure:
        Context(root).plan("prod", options=OPTIONS)
    assert str(failure.value).startswith(where + "`grain` of model `db.m` names column `nope`")


def test_ignore_patterns_skip_files_as_in_sqlmesh(tmp_path, capsys):
    # SQLMesh 0.236.4 loads this project with one model, db.a (SELECT 1), no audit and no unit test
    root = write_files(tmp_path / "p", {
        "config.yaml": CONFIG + "ignore_patterns:\n  - \"models/legacy/*\"\n  - \"*_old.sql\"\n"
                                "  - \"tests/test_skip.yaml\"\n",
        "models/a.sql": "MODEL (name db.a, kind FULL); SELECT 1 AS id",
        "models/legacy/broken.sql": "MODEL (name db.broken kind FULL SELECT",
        "models/a_old.sql": "MODEL (name db.a, kind FULL); SELECT 2 AS id",
        "audits/bad_old.sql": "AUDIT (name x; SELECT",
        "tests/test_skip.yaml": "test_skip:\n  model: db.nope\n  outputs:\n    query: []\n",
    })
    project = load_project(root)
    assert list(project.models) == ["db.a"] and "SELECT 1" in project.models["db.a"].query_text
    assert project.audits == {} and project.test_files == ()
    assert "ignore_patterns" not in capsys.readouterr().err


DAYS = ", ".join(f"('2024-01-0{d}')" for d in range(1, 9))
LOOKBACK = {
    "config.yaml": CONFIG,
    "models/days.sql": f"MODEL (name db.days, kind FULL);\nSELECT CAST(d AS DATE) AS ds FROM (VALUES {DAYS}) AS t(d)\n",
    "models/ev.sql": (
        "MODEL (\n  name db.ev,\n"
        "  kind INCREMENTAL_BY_TIME_RANGE (time_column ds, batch_size 2, lookback 1, forward_only true),\n"
        "  start '2024-01-01',\n  cron '@daily',\n  allow_partials false,\n  clustered_by (ds)\n);\n"
        "SELECT ds, @start_ds AS batch_start, @end_ds AS batch_end FROM db.days WHERE ds BETWEEN @start_ds AND @end_ds\n"),
}


def test_batch_size_and_lookback_of_a_forward_only_model_match_sqlmesh(tmp_path, clean_catalog, capsys):
    # SQLMesh 0.236.4 (Python API, same files on DuckDB): plan at 2024-01-06 runs batches [01, 02], [03, 04],
    # [05]; a run at 2024-01-08 recomputes 05 (lookback 1) with 06, then 07
    root = write_files(tmp_path / "p", LOOKBACK)
    context = Context(root)
    model = context.models["db.ev"]
    assert (model.kind.batch_size, model.kind.lookback, model.kind.forward_only) == (2, 1, True)
    err = capsys.readouterr().err
    assert "ev.sql:6: MODEL property `allow_partials` is not supported by meshbot and is ignored" in err
    assert "ev.sql:7: MODEL property `clustered_by` is not supported by meshbot and is ignored" in err

    def rows():
        return [(str(r["ds"]), r["batch_start"], r["batch_end"])
                for r in context.fetchdf("SELECT * FROM db.ev ORDER BY ds")]

    context.apply(context.plan("prod", options=PlanOptions(execution_time="2024-01-06 00:00:00")))
    assert rows() == [("2024-01-01", "2024-01-01", "2024-01-02"), ("2024-01-02", "2024-01-01", "2024-01-02"),
                      ("2024-01-03", "2024-01-03", "2024-01-04"), ("2024-01-04", "2024-01-03", "2024-01-04"),
                      ("2024-01-05", "2024-01-05", "2024-01-05")]
    context.run("prod", execution_time="2024-01-08 00:00:00")
    assert rows()[4:] == [("2024-01-05", "2024-01-05", "2024-01-06"), ("2024-01-06", "2024-01-05", "2024-01-06"),
                          ("2024-01-07", "2024-01-07", "2024-01-07")]


def test_lookback_recomputes_intervals_already_recorded_even_one_day_batches(tmp_path, clean_catalog):
    # SQLMesh 0.236.4 (Python API, DuckDB), batch_size 1, lookback 2: plan at 2024-01-06 computes 01..05
    # (computed_at 2024-01-06); a run at 2024-01-08 recomputes 04 and 05 with 06 and 07 (computed_at 2024-01-08)
    files = dict(LOOKBACK)
    files["models/ev.sql"] = (
        "MODEL (\n  name db.ev,\n  kind INCREMENTAL_BY_TIME_RANGE (time_column ds, batch_size 1, lookback 2),\n"
        "  start '2024-01-01',\n  cron '@daily'\n);\n"
        "SELECT ds, @execution_ds AS computed_at FROM db.days WHERE ds BETWEEN @start_ds AND @end_ds\n")
    context = Context(write_files(tmp_path / "p", files))
    context.apply(context.plan("prod", options=PlanOptions(execution_time="2024-01-06 00:00:00")))
    context.run("prod", execution_time="2024-01-08 00:00:00")
    assert [(str(r["ds"]), r["computed_at"]) for r in context.fetchdf("SELECT * FROM db.ev ORDER BY ds")] == [
        ("2024-01-01", "2024-01-06"), ("2024-01-02", "2024-01-06"), ("2024-01-03", "2024-01-06"),
        ("2024-01-04", "2024-01-08"), ("2024-01-05", "2024-01-08"), ("2024-01-06", "2024-01-08"),
        ("2024-01-07", "2024-01-08")]


# A project shaped like the public SQLMesh projects the table of docs/coming-from-sqlmesh.md was drawn from (jaffle-shop, sushi,
# OMOP style): DuckDB SQL, a `$root` seed with batch_size and columns, `=` audit arguments and [lists], a
# trailing comma in the header, catalog-qualified names, an inline AUDIT, audits naming their model, a
# self-referencing incremental model, both SCD type 2 kinds, config keys meshbot does not use.
SHOP = {
    "config.yaml": """\
project: shop
default_target_environment: dev
default_catalog: shop
gateways:
  local:
    connection:
      type: spark
model_defaults:
  dialect: duckdb
  start: 2024-01-01
plan:
  enable_preview: true
""",
    "seeds/raw_orders.csv": "id,customer_id,status,amount,ds\n1,1,placed,10,2024-01-01\n2,2,shipped,20,2024-01-02\n",
    "models/raw_orders.sql": """\
MODEL (
  name main.raw_orders,
  kind SEED (
    path '$root/seeds/raw_orders.csv',
    batch_size 1000
  ),
  depends_on (),
  columns (id INT, customer_id INT, status TEXT, amount INT, ds TEXT)
)
""",
    "models/staging/stg_orders.sql": """\
MODEL (
  name main.stg_orders,
  kind INCREMENTAL_BY_TIME_RANGE (
    time_column ds,
    forward_only true,
    on_destructive_change warn
  ),
  cron '*/5 * * * *',
  grains [id, ds],
  references [customer_id],
  allow_partials TRUE,
  audits (
    UNIQUE_VALUES(columns = (id)),
    NOT_NULL(columns=[id, customer_id, ds]),
    ACCEPTED_VALUES("column" = status, is_in = ['placed', 'shipped']),
    unique_combination_of_columns(columns=[id, ds]),
    orders_have_customers
  ),
);
SELECT id::INT AS id, customer_id::INT AS customer_id, status, amount, ds::TEXT AS ds
FROM "shop"."main"."raw_orders" WHERE ds BETWEEN @start_ds AND @end_ds;

AUDIT (name orders_have_customers);
SELECT * FROM "shop"."main"."stg_orders" WHERE customer_id IS NULL
""",
    "models/lifetime.sql": """\
MODEL (
  name main.lifetime,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ds, batch_size 1),
  grains [customer_id, ds],
  columns (customer_id INT, revenue BIGINT, ds TEXT, customer_key TEXT),
  audits (lifetime_positive)
);
WITH prev AS (
  SELECT customer_id, revenue FROM main.lifetime WHERE ds = strftime(@end_date - INTERVAL '1' DAY, '%Y-%m-%d')
)
SELECT o.customer_id, SUM(o.amount) + COALESCE(MAX(p.revenue), 0) AS revenue, @end_ds AS ds,
  @generate_surrogate_key(o.customer_id) AS customer_key
FROM main.stg_orders AS o LEFT JOIN prev AS p ON p.customer_id = o.customer_id
WHERE o.ds = @end_ds GROUP BY o.customer_id
""",
    "models/snap.sql": """\
model (
    name main.snap,
    kind scd_type_2_by_column (
        unique_key id,
        columns *,
        execution_time_as_valid_from true
    )
);
select id, status from main.stg_orders
""",
    "models/by_time.sql": """\
MODEL (
  name main.by_time,
  kind SCD_TYPE_2_BY_TIME (unique_key id, updated_at_name event_date)
);
SELECT id::INT AS id, ds::DATE AS event_date FROM main.stg_orders
""",
    "audits/lifetime.sql": """\
AUDIT (name lifetime_positive, dialect duckdb, blocking FALSE);
SELECT * FROM main.LIFETIME WHERE revenue < 0;
""",
}


def test_a_project_shaped_like_public_sqlmesh_projects_gives_sqlmesh_rows(tmp_path, clean_catalog, capsys):
    # SQLMesh 0.236.4, same files on DuckDB (database shop.duckdb instead of default_catalog), plan at
    # 2024-01-03: the rows below; main.snap's valid_from is 2024-01-03 there (execution_time_as_valid_from),
    # 1970-01-01 here (the property is ignored with a warning)
    root = write_files(tmp_path / "p", SHOP)
    context = Context(root)
    context.apply(context.plan("prod", options=OPTIONS))
    err = capsys.readouterr().err
    for warned in ("config key `default_target_environment`", "`plan.enable_preview`",
                   "MODEL property `references`", "MODEL property `allow_partials`",
                   "kind property `execution_time_as_valid_from`"):
        assert warned in err
    assert "config key `project`" not in err   # a multi-repo project's name: read (tests/test_multi_repo.py)

    def rows(sql: str) -> list[tuple]:
        return [tuple(row.values()) if isinstance(row, dict) else tuple(row) for row in context.fetchdf(sql)]

    assert rows("SELECT * FROM main.stg_orders ORDER BY id") == [
        (1, 1, "placed", 10, "2024-01-01"), (2, 2, "shipped", 20, "2024-01-02")]
    assert rows("SELECT * FROM main.lifetime ORDER BY customer_id") == [
        (1, 10, "2024-01-01", "c4ca4238a0b923820dcc509a6f75849b"),
        (2, 20, "2024-01-02", "c81e728d9d4c2f636f067f89cc14862c")]
    assert rows("SELECT id, status, valid_to FROM main.snap ORDER BY id") == [(1, "placed", None), (2, "shipped", None)]
    assert rows("SELECT id, CAST(event_date AS STRING), valid_to FROM main.by_time ORDER BY id") == [
        (1, "2024-01-01", None), (2, "2024-01-02", None)]


def test_external_models_and_depends_on_lose_the_default_catalog(tmp_path):
    # `sqlmesh create_external_models` writes fully qualified names ('"jaffle_shop"."raw"."events"')
    root = write_files(tmp_path / "p", {
        "config.yaml": CONFIG + "default_catalog: jaffle_shop\n",
        "external_models.yaml": "- name: '\"jaffle_shop\".\"raw\".\"events\"'\n  columns:\n    id: int\n",
        "models/a.sql": ("MODEL (name jaffle_shop.db.a, kind FULL, depends_on (jaffle_shop.raw.events));\n"
                         "SELECT id FROM \"jaffle_shop\".\"raw\".\"events\"\n"),
    })
    project = load_project(root)
    assert sorted(project.models) == ["db.a", "raw.events"]
    assert project.models["db.a"].depends_on == {"raw.events"}

    (root / "external_models.yaml").write_text("- name: other.raw.events\n")
    with pytest.raises(ConfigError) as failure:
        load_project(root)
    assert str(failure.value).startswith(f"{root / 'external_models.yaml'}: external model #1 names "
                                         "`other.raw.events`: catalog `other` is neither the default catalog")


def test_python_models_and_unit_tests_lose_the_default_catalog_too(tmp_path):
    """A DuckDB project's Python model (`@model("jaffle_shop.main.py_orders")`, resolve_table of a qualified
    name, an is_sql query) and unit tests naming `jaffle_shop.main.orders` load with two-part names."""
    from bot.quality.unit_test_files import load_test_files

    root = write_files(tmp_path / "p", {
        "config.yaml": CONFIG + "default_catalog: jaffle_shop\n",
        "models/orders.sql": "MODEL (name jaffle_shop.main.orders, kind FULL);\nSELECT 1 AS id\n",
        "models/py_orders.py": (
            "import pandas as pd\n"
            "from sqlmesh import model\n\n"
            "@model('jaffle_shop.main.py_orders', columns={'id': 'int'})\n"
            "def execute(context, start, end, execution_time, **kwargs):\n"
            "    return context.fetchdf(f\"SELECT id FROM {context.resolve_table('jaffle_shop.main.orders')}\")\n"),
        "models/sql_orders.py": (
            "from sqlmesh import model\n\n"
            "@model('jaffle_shop.main.sql_orders', is_sql=True, kind='FULL')\n"
            "def entrypoint(evaluator):\n"
            "    return 'SELECT id FROM jaffle_shop.main.orders'\n"),
        "tests/test_orders.yaml": (
            "test_py_orders:\n  model: jaffle_shop.main.py_orders\n"
            "  inputs:\n    jaffle_shop.main.orders:\n      - id: 1\n"
            "  outputs:\n    query:\n      - id: 1\n"),
    })
    project = load_project(root)
    assert sorted(project.models) == ["main.orders", "main.py_orders", "main.sql_orders"]
    assert project.models["main.py_orders"].depends_on == {"main.orders"}
    assert project.models["main.sql_orders"].depends_on == {"main.orders"}
    (test,) = load_test_files(project.test_files, project.config.model_defaults.catalogs)
    assert test.model == "main.py_orders" and [name for name, _ in test.inputs] == ["main.orders"]
