"""Model blueprints: one file, one model per blueprint; expected values are SQLMesh 0.236.4's on DuckDB.

SQLMesh ran this project with `sqlmesh plan --auto-apply` (prod), then again after the edit in
`test_blueprints_plan_apply_and_replan_like_sqlmesh`.
"""

from __future__ import annotations

import pytest

from bot.context import Context
from bot.errors import ConfigError
from bot.plan.definition import PlanOptions
from bot.project.loader import load_project
from bot.project.render import render_sql
from bot.project.serialize import model_from_dict, model_to_dict

from project_files import write_files

PER_CUSTOMER = """\
MODEL (
  name @{customer}.orders,
  kind FULL,
  blueprints (
    (customer := bp_acme, cust := 'acme', min_amount := 15),
    (customer := bp_globex, cust := 'globex')
  )
);
SELECT id, amount, @blueprint_var('min_amount', 0) AS min_amount, @cust AS who
FROM bp_raw.orders
WHERE customer = @cust AND amount >= @blueprint_var('min_amount', 0)
"""
FILES = {
    "config.yaml": "model_defaults:\n  dialect: duckdb\n  start: '2024-01-01'\n",
    "models/raw_orders.sql": """\
MODEL (name bp_raw.orders, kind FULL);
SELECT * FROM (VALUES (1, 'acme', 10), (2, 'acme', 20), (3, 'acme', 30), (4, 'globex', 5), (5, 'globex', 50))
  AS t(id, customer, amount)
""",
    "models/per_customer.sql": PER_CUSTOMER,
    "models/acme_total.sql": "MODEL (name bp_reports.acme_total, kind FULL);\n"
                             "SELECT COUNT(*) AS n, SUM(amount) AS total FROM bp_acme.orders\n",
    # one blueprint whose `src` is a table name read as `FROM @src`: a parent like any other
    "models/copies.sql": """\
MODEL (
  name @{customer}.src_count,
  kind FULL,
  blueprints ((customer := bp_acme, src := bp_raw.orders, who := 'acme'))
);
SELECT COUNT(*) AS n FROM @src WHERE customer = @who
""",
    # a macro generates the blueprints (SQLMesh's `blueprints @gen_regions()`)
    "macros/gen.py": """\
from sqlmesh import macro


@macro()
def gen_regions(evaluator):
    return "((region := bp_north, code := 'N'), (region := bp_south, code := 'S'))"
""",
    "models/per_region.sql": """\
MODEL (
  name @{region}.codes,
  kind FULL,
  blueprints @gen_regions()
);
SELECT @code AS code, @blueprint_var('code') || '-x' AS tagged
""",
    "models/py_bp.py": """\
import typing as t

import pandas as pd
from sqlmesh import ExecutionContext, model


@model(
    "@{schema}.py_t",
    kind="FULL",
    blueprints=[{"schema": "bp_acme", "customer": "acme", "n": 2}, {"schema": "bp_globex", "customer": "globex", "n": 3}],
    columns={"i": "int", "who": "text"},
)
def execute(context: ExecutionContext, **kwargs: t.Any) -> pd.DataFrame:
    n = context.blueprint_var("n")
    return pd.DataFrame({"i": list(range(n)), "who": [context.blueprint_var("customer")] * n})
""",
}
WHEN = PlanOptions(start="2024-01-01", end="2024-01-01", execution_time="2024-01-02")


def test_one_model_per_blueprint_with_its_own_values_and_parents(tmp_path):
    project = load_project(write_files(tmp_path / "p", FILES), use_cache=False)
    assert set(project.models) == {"bp_raw.orders", "bp_acme.orders", "bp_globex.orders", "bp_reports.acme_total",
                                   "bp_acme.py_t", "bp_globex.py_t", "bp_north.codes", "bp_south.codes",
                                   "bp_acme.src_count"}
    assert project.models["bp_acme.src_count"].depends_on == {"bp_raw.orders"}
    assert project.models["bp_reports.acme_total"].depends_on == {"bp_acme.orders"}
    assert project.models["bp_globex.orders"].depends_on == {"bp_raw.orders"}
    # SQLMesh's `sqlmesh render acme.orders`: `15 AS "min_amount", 'acme' AS "who"`, filter `amount >= 15`
    assert render_sql(project.models["bp_acme.orders"]) == (
        "SELECT `id`, `amount`, 15 AS `min_amount`, 'acme' AS `who` FROM `bp_raw`.`orders` "
        "WHERE `customer` = 'acme' AND `amount` >= 15")
    assert "0 AS `min_amount`, 'globex' AS `who`" in render_sql(project.models["bp_globex.orders"])
    # state keeps the blueprint with the model (a Python model's values live only there)
    stored = model_to_dict(project.models["bp_acme.py_t"])
    assert stored["blueprint_variables"] == [["customer", "'acme'"], ["n", "2"], ["schema", "'bp_acme'"]]
    assert model_from_dict(stored).blueprint_variables == project.models["bp_acme.py_t"].blueprint_variables


def test_blueprints_plan_apply_and_replan_like_sqlmesh(tmp_path, clean_catalog):
    spark = clean_catalog
    root = write_files(tmp_path / "p", FILES)
    context = Context(root)
    plan = context.plan("prod", options=WHEN)
    # SQLMesh: Added Models acme.orders, globex.orders, raw.orders, reports.acme_total, the Python
    # model's bp_acme.py_t and bp_globex.py_t, and the generated bp_north.codes and bp_south.codes
    assert sorted(c.name for c in plan.changes if c.change.value == "added") == [
        "bp_acme.orders", "bp_acme.py_t", "bp_acme.src_count", "bp_globex.orders", "bp_globex.py_t",
        "bp_north.codes", "bp_raw.orders", "bp_reports.acme_total", "bp_south.codes"]
    assert plan.snapshots["bp_acme.orders"].fingerprint != plan.snapshots["bp_globex.orders"].fingerprint
    # the same Python source, told apart by the blueprint's values
    assert plan.snapshots["bp_acme.py_t"].fingerprint.data_hash != plan.snapshots["bp_globex.py_t"].fingerprint.data_hash
    context.apply(plan)

    def rows(sql):
        return [tuple(r) for r in spark.sql(sql).collect()]

    # SQLMesh: acme.orders (2, 20, 15, acme), (3, 30, 15, acme); globex.orders (4, 5, 0, globex), (5, 50, 0, globex)
    assert rows("SELECT * FROM bp_acme.orders ORDER BY id") == [(2, 20, 15, "acme"), (3, 30, 15, "acme")]
    assert rows("SELECT * FROM bp_globex.orders ORDER BY id") == [(4, 5, 0, "globex"), (5, 50, 0, "globex")]
    assert rows("SELECT * FROM bp_reports.acme_total") == [(2, 50)]
    # SQLMesh: bp_acme.py_t (0, acme), (1, acme); bp_globex.py_t (0..2, globex)
    assert rows("SELECT * FROM bp_acme.py_t ORDER BY i") == [(0, "acme"), (1, "acme")]
    assert rows("SELECT * FROM bp_globex.py_t ORDER BY i") == [(0, "globex"), (1, "globex"), (2, "globex")]
    # SQLMesh: bp_acme.src_count (3,); bp_north.codes ('N', 'N-x'); bp_south.codes ('S', 'S-x')
    assert rows("SELECT * FROM bp_acme.src_count") == [(3,)]
    assert rows("SELECT * FROM bp_north.codes") + rows("SELECT * FROM bp_south.codes") == [("N", "N-x"), ("S", "S-x")]

    # one blueprint's value changed and one blueprint added; SQLMesh: Added initech.orders; Directly
    # Modified acme.orders (Breaking); Indirectly Modified reports.acme_total; globex.orders untouched
    (root / "models" / "per_customer.sql").write_text(PER_CUSTOMER.replace("min_amount := 15", "min_amount := 25")
        .replace("(customer := bp_globex, cust := 'globex')",
                 "(customer := bp_globex, cust := 'globex'),\n    (customer := bp_initech, cust := 'initech')"))
    replan = Context(root).plan("prod", options=WHEN)
    assert {c.name: (c.change.value, c.category.value if c.category else None) for c in replan.changes} == {
        "bp_initech.orders": ("added", "breaking"),
        "bp_acme.orders": ("directly_modified", "breaking"),
        "bp_reports.acme_total": ("indirectly_modified", "indirect_breaking")}
    Context(root).apply(replan)
    # SQLMesh: acme.orders (3, 30, 25, acme); initech.orders 0 rows; reports.acme_total (1, 30)
    assert rows("SELECT * FROM bp_acme.orders") == [(3, 30, 25, "acme")]
    assert rows("SELECT COUNT(*) FROM bp_initech.orders") == [(0,)]
    assert rows("SELECT * FROM bp_reports.acme_total") == [(1, 30)]


@pytest.mark.parametrize(("blueprints", "message"), [
    ("blueprints (x)", r"per_customer.sql:4: each blueprint is `\(name := value, ...\)`, got `x`"),
    ("blueprints @gen()", r"per_customer.sql: unknown macro @GEN"),
])
def test_malformed_blueprints_name_the_file_and_line(tmp_path, blueprints, message):
    text = PER_CUSTOMER.replace(PER_CUSTOMER[PER_CUSTOMER.index("blueprints"):PER_CUSTOMER.index("\n);")], blueprints)
    root = write_files(tmp_path / "p", {**FILES, "models/per_customer.sql": text})
    with pytest.raises(ConfigError, match=message):
        load_project(root, use_cache=False)


def test_blueprint_names_that_collide_are_a_duplicate_model_error(tmp_path):
    text = PER_CUSTOMER.replace("(customer := bp_globex, cust := 'globex')", "(customer := bp_acme, cust := 'x')")
    root = write_files(tmp_path / "p", {**FILES, "models/per_customer.sql": text})
    with pytest.raises(ConfigError, match=r"per_customer.sql:1: duplicate model name `bp_acme.orders`"):
        load_project(root, use_cache=False)


def test_python_blueprints_that_are_not_dicts_name_the_file_and_line(tmp_path):
    source = FILES["models/py_bp.py"].replace(
        'blueprints=[{"schema": "bp_acme", "customer": "acme", "n": 2}, {"schema": "bp_globex", "customer": "globex", "n": 3}]',
        'blueprints="((schema := bp_acme))"')
    root = write_files(tmp_path / "p", {**FILES, "models/py_bp.py": source})
    with pytest.raises(ConfigError, match=r"py_bp.py:7: each blueprint of @model\(blueprints=...\) must be a dict, "
                                          r"got '\(\(schema := bp_acme\)\)'"):
        load_project(root, use_cache=False)


def test_generated_blueprints_follow_the_macro_not_the_parse_cache(tmp_path):
    root = write_files(tmp_path / "p", FILES)
    assert {"bp_north.codes", "bp_south.codes"} <= set(load_project(root).models)
    macro = root / "macros" / "gen.py"
    macro.write_text(macro.read_text().replace("(region := bp_south, code := 'S')",
                                               "(region := bp_south, code := 'S'), (region := bp_east, code := 'E')"))
    models = load_project(root).models
    assert {"bp_north.codes", "bp_south.codes", "bp_east.codes"} <= set(models)
    assert dict(models["bp_east.codes"].blueprint_variables) == {"code": "'E'", "region": "bp_east"}


def test_config_variables_interpolate_into_names_without_blueprints(tmp_path):
    # SQLMesh with `variables: {target_schema: bp_cfg, col_suffix: total}`: model `bp_cfg.t`,
    # rendered `SELECT 1 AS "amount_total"`
    config = "model_defaults:\n  dialect: duckdb\nvariables:\n  target_schema: bp_cfg\n  col_suffix: total\n"
    root = write_files(tmp_path / "p", {"config.yaml": config, "models/t.sql":
                                   "MODEL (name @{target_schema}.t, kind FULL);\nSELECT 1 AS amount_@{col_suffix}\n"})
    project = load_project(root)
    assert render_sql(project.models["bp_cfg.t"]) == "SELECT 1 AS `amount_total`"
    (root / "config.yaml").write_text(config.replace("bp_cfg", "bp_other"))
    assert list(load_project(root).models) == ["bp_other.t"]    # not the cached parse


def test_a_blueprint_value_that_is_no_plain_name_fills_in_a_quoted_identifier(tmp_path):
    # SQLMesh 0.236.4 on DuckDB, blueprints ((customer := c1, field := d), (customer := c2, field := "pay to see")):
    # c2.b renders `SELECT "c" AS "c", "pay to see" AS "persona", "pay to see_c2" AS "tagged" FROM ...`
    # (persona = 'hidden'), c1.b `"d" AS "persona", "d_c1" AS "tagged"`; meshbot refused to load the file
    root = write_files(tmp_path / "p", {
        "config.yaml": "model_defaults:\n  dialect: duckdb\n",
        "models/a.sql": "MODEL (name s.a, kind FULL);\nSELECT 1 AS c, 'x' AS d, 'hidden' AS \"pay to see\"\n",
        "models/b.sql": "MODEL (name @customer.b, kind VIEW,\n  blueprints ((customer := c1, field := d),\n"
                        "    (customer := c2, field := \"pay to see\")));\nSELECT c, @{field} AS persona, "
                        "@{field}_@{customer} AS tagged FROM s.a\n",
    })
    models = load_project(root).models
    assert render_sql(models["c1.b"]) == "SELECT `c`, `d` AS `persona`, `d_c1` AS `tagged` FROM `s`.`a`"
    assert render_sql(models["c2.b"]) == ("SELECT `c`, `pay to see` AS `persona`, `pay to see_c2` AS `tagged` "
                                          "FROM `s`.`a`")
