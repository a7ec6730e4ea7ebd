"""Jinja models and macros/*.sql macros; every expected value is what SQLMesh 0.236.4 gave on DuckDB.

The project below (config with a DuckDB gateway instead of none) was run with
`sqlmesh plan dev --auto-apply --start 2024-01-01 --end 2024-01-04 --execution-time 2024-01-05`
after creating `jj_log.runs`; then with `> 0` changed to `> 25` in the macro, then with a SQL and a
Jinja comment added to `totals`. The categories, counts and rows asserted below are SQLMesh's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.context import Context
from bot.errors import ConfigError
from bot.fingerprint import fingerprint_models
from bot.plan.definition import PlanOptions
from bot.project.loader import load_project
from bot.project.render import normalized_query_sql, render_sql, render_statements
from bot.project.serialize import model_from_dict, model_to_dict

from project_files import write_files

DAY = 86_400_000
JAN_2 = 1_704_153_600_000
OPTIONS = PlanOptions(start="2024-01-01", end="2024-01-04", execution_time="2024-01-05")

FILES = {
    "config.yaml": "model_defaults:\n  dialect: duckdb\n  start: '2024-01-01'\nvariables:\n  min_amount: 15\n",
    "macros/filters.sql": "{% macro positive(col) %}{{ col }} > 0{% endmacro %}\n",
    "models/raw.sql": """\
MODEL (name jj.raw, kind FULL);
SELECT id, CAST(ds AS DATE) AS ds, amount
FROM (VALUES (1, '2024-01-01', 10), (2, '2024-01-01', 20), (3, '2024-01-02', 30), (4, '2024-01-03', -5),
             (5, '2024-01-03', 50)) AS t(id, ds, amount)
""",
    "models/daily.sql": """\
MODEL (
  name jj.daily,
  kind INCREMENTAL_BY_TIME_RANGE (time_column ds, batch_size 1)
);

JINJA_STATEMENT_BEGIN;
{% if runtime_stage == 'evaluating' %}
INSERT INTO jj_log.runs VALUES ('{{ start_ds }}', '{{ end_ds }}');
{% endif %}
JINJA_END;

JINJA_QUERY_BEGIN;
SELECT id, ds, amount, '{{ execution_ds }}' AS run_ds
FROM jj.raw
WHERE ds BETWEEN '{{ start_ds }}' AND '{{ end_ds }}'
  AND {{ positive('amount') }}
  AND amount >= {{ var('min_amount') }}
JINJA_END;
""",
    "models/totals.sql": """\
MODEL (name jj.totals, kind FULL);

JINJA_QUERY_BEGIN;
SELECT
{% for col in ['id', 'amount'] %}
  SUM({{ col }}) AS sum_{{ col }}{% if not loop.last %},{% endif %}
{% endfor %}
FROM jj.raw
JINJA_END;
""",
}


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def _rows(spark, sql: str) -> list[tuple]:
    return [tuple(r) for r in spark.sql(sql).collect()]


def test_jinja_project_plans_and_applies_with_sqlmeshs_results(tmp_path, clean_catalog):
    spark = clean_catalog
    root = write_files(tmp_path / "jj", FILES)
    spark.sql("CREATE DATABASE IF NOT EXISTS jj_log")
    spark.sql("CREATE TABLE jj_log.runs (start_ds STRING, end_ds STRING) USING parquet")
    context = Context(root)
    assert context.models["jj.daily"].depends_on == {"jj.raw"}       # from the rendered query
    assert context.models["jj.totals"].depends_on == {"jj.raw"}
    plan = context.plan("dev", options=OPTIONS)
    assert {c.name: c.change.value for c in plan.changes} == \
        {"jj.raw": "added", "jj.daily": "added", "jj.totals": "added"}
    result = context.apply(plan)
    # SQLMesh: [1/4] .. [4/4] jj__dev.daily, one batch per day, each with its own start_ds/end_ds
    assert sorted(start for name, start, _ in result.evaluated if name == "jj.daily") == \
        [JAN_2 - DAY, JAN_2, JAN_2 + DAY, JAN_2 + 2 * DAY]
    days = [(f"2024-01-0{d}", f"2024-01-0{d}") for d in range(1, 5)]
    assert _rows(spark, "SELECT * FROM jj_log.runs ORDER BY start_ds") == days
    assert _rows(spark, "SELECT COUNT(*) FROM jj__dev.raw") == [(5,)]
    assert _rows(spark, "SELECT id, CAST(ds AS STRING), amount, run_ds FROM jj__dev.daily ORDER BY id") == [
        (2, "2024-01-01", 20, "2024-01-05"), (3, "2024-01-02", 30, "2024-01-05"), (5, "2024-01-03", 50, "2024-01-05")]
    assert _rows(spark, "SELECT sum_id, sum_amount FROM jj__dev.totals") == [(15, 105)]

    # SQLMesh: "Directly Modified: jj__dev.daily (Breaking)", daily backfilled again; totals untouched
    _edit(root / "macros" / "filters.sql", "> 0", "> 25")
    context = Context(root)
    plan = context.plan("dev", options=OPTIONS)
    assert [(c.name, c.change.value, c.category.value) for c in plan.changes] == \
        [("jj.daily", "directly_modified", "breaking")]
    context.apply(plan)
    assert _rows(spark, "SELECT id, amount FROM jj__dev.daily ORDER BY id") == [(3, 30), (5, 50)]
    assert _rows(spark, "SELECT * FROM jj_log.runs ORDER BY start_ds") == sorted(days * 2)

    # SQLMesh: "Metadata Updated: jj__dev.totals", "SKIP: No model batches to execute"
    _edit(root / "models" / "totals.sql", "FROM jj.raw", "-- totals over every row\n{# jinja note #}\nFROM jj.raw")
    context = Context(root)
    plan = context.plan("dev", options=OPTIONS)
    assert [(c.name, c.change.value, c.category.value) for c in plan.changes] == \
        [("jj.totals", "metadata_updated", "metadata")]
    assert not plan.backfills
    assert context.apply(plan).evaluated == ()


def _fingerprints(root: Path):
    project = load_project(root, use_cache=False)
    rendered = {name: normalized_query_sql(model, variables=project.config.variables)
                for name, model in project.models.items()}
    return fingerprint_models(project.models, list(project.dag.order), rendered)


def test_jinja_edits_change_the_fingerprints_of_the_models_using_them(tmp_path):
    root = write_files(tmp_path / "fp", FILES)
    before = _fingerprints(root)
    _edit(root / "models" / "totals.sql", "FROM jj.raw", "-- a comment\n{# a Jinja comment #}\nFROM jj.raw")
    comment = _fingerprints(root)
    assert comment["jj.totals"].data_hash == before["jj.totals"].data_hash           # same rendered query
    assert comment["jj.totals"].metadata_hash != before["jj.totals"].metadata_hash   # still a change
    assert comment["jj.daily"] == before["jj.daily"]

    _edit(root / "macros" / "filters.sql", "{% endmacro %}", "{# no-op #}{% endmacro %}")
    macro_comment = _fingerprints(root)
    assert macro_comment["jj.daily"].data_hash == comment["jj.daily"].data_hash
    assert macro_comment["jj.daily"].metadata_hash != comment["jj.daily"].metadata_hash
    assert macro_comment["jj.totals"] == comment["jj.totals"]                        # does not call it

    _edit(root / "macros" / "filters.sql", "> 0", ">= 0")
    changed = _fingerprints(root)
    assert changed["jj.daily"].data_hash != macro_comment["jj.daily"].data_hash
    assert changed["jj.totals"] == macro_comment["jj.totals"] and changed["jj.raw"] == macro_comment["jj.raw"]

    # another macro file that no model calls changes nothing
    (root / "macros" / "unused.sql").write_text("{% macro unused() %}1{% endmacro %}\n")
    assert _fingerprints(root) == changed


def test_jinja_renders_each_interval_with_sqlmeshs_names(tmp_path):
    root = write_files(tmp_path / "r", {**FILES, "models/names.sql": """\
MODEL (name jj.names, kind FULL);
JINJA_QUERY_BEGIN;
SELECT '{{ start_date }}|{{ end_ts }}|{{ execution_ds }}|{{ latest_ds }}|{{ start_epoch }}' AS dates,
       '{{ gateway }}|{{ this_model }}|{{ var('missing', 'dflt') }}' AS env, * FROM {{ resolve_table('jj.raw') }}
JINJA_END;
"""})
    project = load_project(root, use_cache=False)
    model = project.models["jj.names"]
    assert model.depends_on == {"jj.raw"}                         # resolve_table at load time
    sql = render_sql(model, start=JAN_2, end=JAN_2 + DAY, execution_time=JAN_2 + 3 * DAY,
                     table_mapping={"jj.raw": "sqlmesh__jj.raw_1", "jj.names": "sqlmesh__jj.names_2"},
                     gateway="prod")
    assert "'2024-01-02|2024-01-02 23:59:59.999999|2024-01-05|2024-01-05|1704153600.0' AS `dates`" in sql
    assert """'prod|"sqlmesh__jj"."names_2"|dflt' AS `env`""" in sql
    assert "FROM `sqlmesh__jj`.`raw_1`" in sql
    daily = project.models["jj.daily"]
    assert render_statements(daily, daily.pre_statements, start=JAN_2, end=JAN_2 + DAY) == []   # loading stage
    assert render_statements(daily, daily.pre_statements, start=JAN_2, end=JAN_2 + DAY,
                             runtime_stage="evaluating") == \
        ["INSERT INTO `jj_log`.`runs` VALUES ('2024-01-02', '2024-01-02')"]
    # stored in state and read back, the model renders the same
    again = model_from_dict(model_to_dict(daily))
    assert render_sql(again, start=JAN_2, end=JAN_2 + DAY) == render_sql(daily, start=JAN_2, end=JAN_2 + DAY)
    assert render_statements(again, again.pre_statements, start=JAN_2, end=JAN_2 + DAY, runtime_stage="evaluating") \
        == ["INSERT INTO `jj_log`.`runs` VALUES ('2024-01-02', '2024-01-02')"]


@pytest.mark.parametrize("body, line, message", [
    ("SELECT 1 AS a,\n  {{ nope }} AS b", 4, r"undefined Jinja variable or macro: 'nope' is undefined"),
    ("SELECT 1 AS a,\n\n  {{ missing_macro(1) }} AS b", 5, r"'missing_macro' is undefined"),
    ("SELECT 1 AS a\n{% if true %}\nFROM t", 4, r"cannot render Jinja: Unexpected end of template"),
    ("SELECT {{ 1 + }} AS a", 3, r"cannot render Jinja"),
])
def test_jinja_errors_name_the_model_file_and_line(tmp_path, body, line, message):
    root = write_files(tmp_path / "e", {"config.yaml": "model_defaults:\n  dialect: duckdb\n",
                                   "models/bad.sql": f"MODEL (name e.bad);\nJINJA_QUERY_BEGIN;\n{body}\nJINJA_END;\n"})
    with pytest.raises(ConfigError, match=message) as failure:
        load_project(root, use_cache=False)
    location = failure.value.location
    assert (Path(location.path), location.line) == (root / "models" / "bad.sql", line)


def test_unclosed_block_and_bad_macro_file_are_errors_with_their_line(tmp_path):
    root = write_files(tmp_path / "u", {"config.yaml": "model_defaults:\n  dialect: duckdb\n",
                                   "models/a.sql": "MODEL (name u.a);\n\nJINJA_QUERY_BEGIN;\nSELECT 1\n"})
    with pytest.raises(ConfigError, match=r"a.sql:3: `JINJA_QUERY_BEGIN` has no matching JINJA_END"):
        load_project(root, use_cache=False)
    write_files(root, {"models/a.sql": "MODEL (name u.a);\nJINJA_QUERY_BEGIN;\nSELECT {{ m() }} AS x\nJINJA_END;\n",
                  "macros/m.sql": "{% macro m() %}\n{% if %}\n{% endmacro %}\n"})
    with pytest.raises(ConfigError, match=r"m.sql:2: Jinja syntax error"):
        load_project(root, use_cache=False)


def test_macros_call_each_other_and_rendering_is_sandboxed(tmp_path):
    root = write_files(tmp_path / "s", {
        "config.yaml": "model_defaults:\n  dialect: duckdb\nvariables:\n  k: 5\n",
        "macros/math.sql": "{% macro double(x) %}{{ x }} * 2{% endmacro %}\n"
                           "{% macro shifted(x) %}({{ double(x) }} + {{ var('k') }}){% endmacro %}\n",
        "models/a.sql": "MODEL (name s.a, kind FULL);\nJINJA_QUERY_BEGIN;\nSELECT {{ shifted(3) }} AS v\nJINJA_END;\n",
    })
    model = load_project(root, use_cache=False).models["s.a"]
    assert [name for name, _ in model.jinja_macros] == ["double", "shifted"]
    assert render_sql(model, variables={"k": 5}) == "SELECT (3 * 2 + 5) AS `v`"
    write_files(root, {"models/a.sql": "MODEL (name s.a);\nJINJA_QUERY_BEGIN;\n"
                                  "SELECT '{{ ''.__class__.__mro__ }}' AS v\nJINJA_END;\n"})
    with pytest.raises(ConfigError, match=r"a.sql:3: model s.a: cannot render Jinja: access to attribute "
                                          r"'__class__' of 'str' object is unsafe"):
        load_project(root, use_cache=False)
