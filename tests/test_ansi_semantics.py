"""A value that does not fit is an error, never a silent NULL (ANSI Spark); where the model's dialect gives a
value instead (DuckDB's IEEE division, NULL for `//` and `%` by zero, 1-based element access), the rows are
DuckDB's. Expected rows are SQLMesh 0.236.4's on DuckDB 1.5 for the same files."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import sqlglot

from bot.context import Context
from bot.errors import BotError
from bot.plan.definition import PlanOptions
from bot.project.arithmetic import keep_dialect_arithmetic
from bot.project.config import SparkConnection
from bot.spark.session import _local_settings
from project_files import DUCKDB_DIALECT_CONFIG, write_files

VALUES = "(VALUES (1, 0, 5, 'a'), (-2, 0, 2, 'b'), (0, 0, 3, 'c'), (6, 4, 1, 'd')) AS t(a, b, i, k)"
FILES = {
    "config.yaml": DUCKDB_DIALECT_CONFIG,
    "models/arith.sql": f"""MODEL (name s.arith, kind FULL);
SELECT k, a / b AS q, a // b AS d, a % b AS r, MOD(a, b) AS m, [10, 20, 30][i] AS e, [10, 20, 30][-1] AS last,
  [10, 20, 30][2] AS second, MAP(['a'], [1])[k] AS v, TRY_CAST(k AS INT) AS t
FROM {VALUES}
""",
    "models/bad_cast.sql": "MODEL (name s.bad_cast, kind FULL);\nSELECT CAST(v AS INT) AS n FROM (VALUES ('1'), ('x7')) AS t(v)\n",
}


def test_duckdb_arithmetic_gives_duckdb_s_rows_and_a_bad_cast_fails_its_model(tmp_path, clean_catalog):
    root = write_files(tmp_path / "p", FILES)
    context = Context(root)
    try:
        with pytest.raises(BotError) as failed:
            context.apply(context.plan("prod", options=PlanOptions(execution_time="2024-01-02")))
        message = str(failed.value)
        assert "s.bad_cast" in message and "bad_cast.sql" in message and "'x7'" in message
        assert "\tat " not in message    # no Java stack
    finally:
        context.close()
    Path(root, "models/bad_cast.sql").unlink()
    context = Context(root)
    try:
        context.apply(context.plan("prod", options=PlanOptions(execution_time="2024-01-02")))
        rows = {row["k"]: row for row in context.fetchdf("SELECT * FROM s.arith")}
    finally:
        context.close()
    # DuckDB: (inf, None, None, None, None, 30, 20, 1, None), (-inf, None, None, None, 20, 30, 20, None, None), ...
    assert rows["a"]["q"] == math.inf and rows["b"]["q"] == -math.inf and math.isnan(rows["c"]["q"])
    assert rows["d"]["q"] == 1.5
    assert [(rows[k]["d"], rows[k]["r"], rows[k]["m"]) for k in "abcd"] == [(None, None, None)] * 3 + [(1, 2, 2)]
    assert [rows[k]["e"] for k in "abcd"] == [None, 20, 30, 10]
    assert {rows[k]["last"] for k in "abcd"} == {30} and {rows[k]["second"] for k in "abcd"} == {20}
    assert [rows[k]["v"] for k in "abcd"] == [1, None, None, None]
    assert {rows[k]["t"] for k in "abcd"} == {None}


@pytest.mark.parametrize(("dialect", "sql", "spark"), [
    ("duckdb", "SELECT x[i] FROM t", "SELECT TRY_ELEMENT_AT(x, i) FROM t"),   # sqlglot left x[i]
    ("duckdb", "SELECT x[0], x['f'], a / 2 FROM t", "SELECT NULL, x['f'], CAST(a AS DOUBLE) / 2 FROM t"),
    ("postgres", "SELECT arr[2], a / b, a % b FROM t", "SELECT TRY_ELEMENT_AT(arr, 2), a / b, a % b FROM t"),
    ("mysql", "SELECT a / b FROM t", "SELECT a / NULLIF(b, 0) FROM t"),
    ("spark", "SELECT a / b, arr[1] FROM t", "SELECT a / b, arr[1] FROM t"),
])
def test_each_dialect_keeps_its_own_division_and_indexing(dialect, sql, spark):
    tree = sqlglot.parse_one(sql, read=dialect)
    keep_dialect_arithmetic(tree, dialect)
    assert tree.sql("spark") == spark


def test_ansi_is_on_unless_the_gateway_s_config_turns_it_off(tmp_path):
    on, _ = _local_settings(SparkConnection(), tmp_path, verbose=False, catalog_only=False)
    off, _ = _local_settings(SparkConnection(config=(("spark.sql.ansi.enabled", "false"),)), tmp_path,
                             verbose=False, catalog_only=False)
    assert (on["spark.sql.ansi.enabled"], off["spark.sql.ansi.enabled"]) == ("true", "false")
