"""Typed user-macro arguments and evaluator attributes; expected values are SQLMesh 0.236.4's on DuckDB.

SQLMesh ran this project with `sqlmesh plan --auto-apply`, then `sqlmesh plan --restate-model typed.m
--auto-apply`; the row it wrote each time is written below. The one deliberate difference:
`evaluator.engine_adapter.dialect` is the engine meshbot runs on, `spark` (SQLMesh's was `duckdb`).
"""

from __future__ import annotations

import pytest
from sqlglot import exp

from bot.context import Context
from bot.errors import ConfigError
from bot.plan.definition import PlanOptions
from bot.project.loader import load_project
from bot.project.macro_args import CoercionError, coerce
from bot.project.render import render_sql

from project_files import write_files

MACROS = '''\
import typing as t

from sqlglot import exp
from sqlmesh import macro
from sqlmesh.core.macros import SQL


@macro()
def repeat_str(evaluator, text: str, n: int):
    return exp.Literal.string(text * n)


@macro()
def add_float(evaluator, a: float, b: float):
    return exp.Literal.number(a + b)


@macro()
def pick(evaluator, flag: bool, a, b):
    return a if flag else b


@macro()
def joined(evaluator, cols: list[str]):
    return exp.Literal.string("|".join(cols))


@macro()
def int_total(evaluator, nums: t.List[int]):
    return sum(nums)


@macro()
def as_sql(evaluator, cond: SQL):
    return exp.Literal.string(cond)


@macro()
def qualified(evaluator, col: exp.Column):
    return exp.Literal.string(f"{type(col).__name__}:{col.table}.{col.name}")


@macro()
def kinds(evaluator, e: exp.Expression, *rest: int):
    return exp.Literal.string(type(e).__name__ + ":" + str(sum(rest)))


@macro()
def maybe(evaluator, v: t.Union[int, str]):
    return exp.Literal.string(type(v).__name__)


@macro()
def stage_info(evaluator):
    if evaluator.runtime_stage == "loading":
        return exp.Literal.string("loading")
    return exp.Literal.string(f"{evaluator.runtime_stage}|{evaluator.gateway}|{evaluator.engine_adapter.dialect}")


@macro()
def col_types(evaluator, name: str):
    return exp.Literal.string(",".join(f"{k}:{v.sql()}" for k, v in evaluator.columns_to_types(name).items()))
'''
MODEL = """\
MODEL (name typed.m, kind FULL);
SELECT
  @repeat_str('ab', 3) AS r,
  @add_float(1.5, '2') AS f,
  @pick(true, 1, 2) AS p,
  @joined(['x', y]) AS c,
  @int_total([1, 2, 3]) AS tot,
  @as_sql(a = 1 AND b) AS s,
  @qualified('t.col') AS q,
  @kinds(x + 1, 2, 3) AS k,
  @maybe('7') AS u1,
  @maybe(abc) AS u2,
  @stage_info() AS st,
  @col_types('typed.src') AS ct,
  @runtime_stage AS rs
FROM typed.src
"""
FILES = {
    "config.yaml": "model_defaults:\n  dialect: duckdb\n  start: '2024-01-01'\n",
    "macros/typed.py": MACROS,
    "models/src.sql": "MODEL (name typed.src, kind FULL, columns (id INT, label TEXT));\nSELECT 1 AS id, 'a' AS label\n",
    "models/m.sql": MODEL,
}
WHEN = PlanOptions(start="2024-01-01", end="2024-01-01", execution_time="2024-01-02")
ROW = "SELECT r, CAST(f AS DOUBLE), p, c, tot, s, q, k, u1, u2, st, ct, rs FROM typed.m"


def test_typed_macro_arguments_and_stages_give_sqlmeshs_row(tmp_path, clean_catalog):
    spark = clean_catalog
    root = write_files(tmp_path / "p", FILES)
    context = Context(root)
    context.apply(context.plan("prod", options=WHEN))
    # SQLMesh: ('ababab', 3.5, 1, 'x|y', 6, 'a = 1 AND b', 'Column:t.col', 'Add:5', 'int', 'str',
    #           'creating|local|duckdb', 'id:INT,label:TEXT', 'creating')
    expected = ("ababab", 3.5, 1, "x|y", 6, "a = 1 AND b", "Column:t.col", "Add:5", "int", "str",
                "creating|local|spark", "id:INT,label:TEXT", "creating")
    assert tuple(spark.sql(ROW).collect()[0]) == expected
    # restated, the table exists: SQLMesh wrote 'evaluating|local|duckdb' and 'evaluating'
    context = Context(root)
    context.apply(context.plan("prod", options=PlanOptions(start="2024-01-01", end="2024-01-01",
                                                           execution_time="2024-01-02",
                                                           restate_models=("typed.m",))))
    assert tuple(spark.sql("SELECT st, rs FROM typed.m").collect()[0]) == ("evaluating|local|spark", "evaluating")


def test_fingerprint_render_is_the_loading_stage(tmp_path):
    project = load_project(write_files(tmp_path / "p", FILES), use_cache=False)
    sql = render_sql(project.models["typed.m"], models=project.models)
    assert "'loading' AS `st`" in sql and "'loading' AS `rs`" in sql


# SQLMesh 0.236.4 (`sqlmesh render` of the same files): a failed coercion is logged ("Coercion of expression
# ''x'' to type '<class 'int'>' failed. Using non coerced expression") and the expression is passed on; the
# macro then renders the text "'ab' * 'x'" or fails with its own error; a missing argument is an error
@pytest.mark.parametrize(("call", "warning", "outcome"), [
    ("@repeat_str('ab', 'x')", "macro @REPEAT_STR: argument `n`: cannot coerce `'x'` to int", r"'\'ab\' * \'x\''"),
    ("@int_total(1)", "macro @INT_TOTAL: argument `nums`: cannot coerce `1` to List[int]",
     r"macro @INT_TOTAL failed: TypeError: .*not iterable"),
    ("@qualified(a + 1)", "macro @QUALIFIED: argument `col`: cannot coerce `a + 1` to exp.Column",
     r"macro @QUALIFIED failed: AttributeError: 'Add' object has no attribute 'table'"),
    ("@pick(true)", None, r"macro @PICK: arguments: missing a required argument: 'a'"),
])
def test_a_failed_coercion_warns_and_passes_the_expression_on_as_sqlmesh_does(tmp_path, call, warning, outcome):
    from bot.project import warn

    root = write_files(tmp_path / "p", {**FILES, "models/m.sql": f"MODEL (name typed.m, kind FULL);\nSELECT {call} AS x\n"})
    project = load_project(root, use_cache=False)
    before = len(warn.EMITTED)
    if outcome.startswith("'"):
        assert f"{outcome} AS `x`" in render_sql(project.models["typed.m"])
    else:
        with pytest.raises(ConfigError, match=outcome + r" in model typed.m") as caught:
            render_sql(project.models["typed.m"])
        assert str(root / "models" / "m.sql") in str(caught.value)
    told = warn.EMITTED[before:]
    if warning is None:
        assert not any("cannot coerce" in text for text in told)
    else:
        assert any(text.startswith(f"{root / 'models' / 'm.sql'}: {warning} in model typed.m; passed on as written")
                   for text in told), told


def test_coerce_rules():
    assert coerce(exp.Tuple(expressions=[exp.Literal.number(1), exp.Literal.string("a")]), tuple[int, str],
                  "duckdb") == (1, "a")
    assert coerce(exp.Literal.string("2024-01-02"), __import__("datetime").date, "duckdb").isoformat() == "2024-01-02"
    assert coerce(exp.Literal.number("1.5"), float, "duckdb") == 1.5
    with pytest.raises(CoercionError, match="expected 2 items, got 1"):
        coerce(exp.Tuple(expressions=[exp.Literal.number(1)]), tuple[int, int], "duckdb")


def test_keyword_and_star_arguments_are_coerced_too(tmp_path):
    # SQLMesh's `sqlmesh render typed.m2`: 'abab' AS "r", 'ccc' AS "r2", 'Column:9' AS "k"
    model = "MODEL (name typed.m2, kind FULL);\n" \
            "SELECT @repeat_str(text := 'ab', n := '2') AS r, @repeat_str('c', n := 3) AS r2, @kinds(y, '4', 5) AS k\n"
    project = load_project(write_files(tmp_path / "p", {**FILES, "models/m2.sql": model}), use_cache=False)
    assert render_sql(project.models["typed.m2"]) == "SELECT 'abab' AS `r`, 'ccc' AS `r2`, 'Column:9' AS `k`"
