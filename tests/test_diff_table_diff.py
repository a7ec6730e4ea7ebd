"""table_diff on two Spark tables holding every kind of difference, and its JSON shape."""

from __future__ import annotations

import json

import pytest

from bot.diff.arguments import resolve_keys
from bot.diff.table_diff import table_diff, to_json
from bot.diff.rows import RowDiffQuery, stats_sql
from bot.errors import PlanError
from bot.spark.engine import SparkEngine

SOURCE = """
SELECT * FROM VALUES
  (1, 'a', 1.0D, 1, 'x'), (2, 'b', 2.0D, 2, 'x'), (3, 'c', 3.0D, 3, 'x'), (4, 'd', 4.0D, 4, 'x'),
  (CAST(NULL AS INT), 'n', 0.0D, 0, 'x'), (5, 'e', 5.0D, 5, 'x'), (5, 'e2', 5.0D, 5, 'x')
  AS src(id, name, amount, qty, dropped)
"""
TARGET = """
SELECT id, name, amount, CAST(qty AS BIGINT) AS qty, CAST(extra AS DATE) AS extra FROM VALUES
  (1, 'a', 1.0000001D, 1, '2024-01-01'), (2, 'B', 2.0D, 2, NULL), (3, 'c', 3.0D, 3, NULL),
  (6, 'f', 6.0D, 6, NULL), (CAST(NULL AS INT), 'n', 0.0D, 0, NULL), (5, 'e', 5.0D, 5, NULL)
  AS tgt(id, name, amount, qty, extra)
"""


@pytest.fixture(scope="module")
def tables(spark):
    spark.sql(SOURCE).createOrReplaceTempView("diff_src")
    spark.sql(TARGET).createOrReplaceTempView("diff_tgt")
    yield "diff_src", "diff_tgt"
    spark.catalog.dropTempView("diff_src")
    spark.catalog.dropTempView("diff_tgt")


def test_table_diff_counts_every_kind_of_difference(spark, tables):
    result = table_diff(engine=SparkEngine(spark), source_table=tables[0], target_table=tables[1],
                        keys=["id"], show_sample=True, limit=10, source_label="prod", target_label="dev")
    assert result.schema.added == (("extra", "date"),)
    assert result.schema.removed == (("dropped", "string"),)
    assert result.schema.modified == (("qty", "int", "bigint"),)
    rows = result.rows
    assert (rows.source_count, rows.target_count) == (7, 6)
    assert rows.joined_count == 5                 # ids 1, 2, 3 and both source rows of id 5
    assert rows.full_match_count == 3             # 1 (float noise below 3 decimals), 3, 5/'e'
    assert rows.partial_match_count == 2          # 2 ('b' vs 'B') and 5/'e2'
    assert (rows.source_only_count, rows.target_only_count) == (2, 2)   # 4 + NULL key; 6 + NULL key
    assert (rows.null_key_source_count, rows.null_key_target_count) == (1, 1)
    assert (rows.duplicate_key_source_count, rows.duplicate_key_target_count) == (2, 0)
    assert rows.column_match_pct == {"name": 60.0, "amount": 100.0, "qty": 100.0}
    samples = rows.samples
    assert [r["id"] for r in samples.source_only] == [None, 4]
    assert [r["id"] for r in samples.target_only] == [None, 6]
    assert sorted((r["id"], r["s__name"], r["t__name"]) for r in samples.changed) == [
        (2, "b", "B"), (5, "e2", "e")]
    assert (result.source_label, result.target_label) == ("prod", "dev")
    # key values per side (NULL once): source 1, 2, 3, 4, 5, NULL; target 1, 2, 3, 5, 6, NULL
    assert (rows.distinct_key_source_count, rows.distinct_key_target_count) == (6, 6)


def test_the_same_query_profiles_each_compared_column_on_both_sides(spark, tables):
    """Null rows, approximate distinct values, min/max/mean (numbers; min/max for dates too), each row
    counted once even where a duplicate key repeats it in the join."""
    rows = table_diff(engine=SparkEngine(spark), source_table=tables[0], target_table=tables[1],
                      keys=["id"]).rows
    source, target = rows.profiles["amount"]
    assert (source.nulls, source.distinct, source.minimum, source.maximum) == (0, 6, 0.0, 5.0)
    assert source.mean == pytest.approx(20.0 / 7)            # 0 + 1 + 2 + 3 + 4 + 5 + 5 over 7 rows
    assert (target.nulls, target.distinct, target.minimum, target.maximum) == (0, 6, 0.0, 6.0)
    assert target.mean == pytest.approx(17.0000001 / 6)
    name_source, name_target = rows.profiles["name"]
    assert (name_source.distinct, name_target.distinct) == (7, 6)
    assert name_source.minimum is None and name_source.mean is None           # strings: counts only
    assert set(rows.profiles) == {"name", "amount", "qty"}


def test_a_duplicated_key_on_one_side_is_counted_in_rows_and_distinct_keys(spark):
    spark.sql("SELECT * FROM VALUES (1, 10), (2, 20) AS s(k, v)").createOrReplaceTempView("dup_src")
    spark.sql("SELECT * FROM VALUES (1, 10), (1, 11), (1, 12), (2, 20), (2, CAST(NULL AS INT)) AS t(k, v)"
              ).createOrReplaceTempView("dup_tgt")
    rows = table_diff(engine=SparkEngine(spark), source_table="dup_src", target_table="dup_tgt", keys=["k"]).rows
    assert (rows.target_count, rows.distinct_key_target_count, rows.duplicate_key_target_count) == (5, 2, 5)
    assert (rows.source_count, rows.distinct_key_source_count) == (2, 2)
    source, target = rows.profiles["v"]
    assert (source.nulls, target.nulls) == (0, 1) and target.mean == pytest.approx(53 / 4)


def test_table_diff_decimals_skip_where_and_json(spark, tables):
    result = table_diff(engine=SparkEngine(spark), source_table=tables[0], target_table=tables[1],
                        keys=["id"], skip_columns=["name", "extra"], where="id <= 3", decimals=9)
    assert result.rows.samples is None
    assert json.loads(json.dumps(to_json(result))) == {
        "schema": {"added": [], "removed": [["dropped", "string"]],
                   "modified": [["qty", "int", "bigint"]]},
        "rows": {"source_count": 3, "target_count": 3, "joined_count": 3, "full_match_count": 2,
                 "partial_match_count": 1, "source_only_count": 0, "target_only_count": 0},
        "columns": {"amount": 66.67, "qty": 100.0},
        "keys": ["id"],
    }


def test_stats_are_one_aggregate_query_with_quoted_identifiers():
    sql = stats_sql(RowDiffQuery(source_table="db.a", target_table="db.b", keys=("id",),
                                 columns=(("v", "double", "double"),)))
    assert sql.count("SELECT") == 3 and sql.count("FULL OUTER JOIN") == 1
    assert "`db`.`a`" in sql and "ROUND(`s`.`v`, 3) IS NOT DISTINCT FROM ROUND(`t`.`v`, 3)" in sql


def test_missing_keys_name_the_model_and_suggest_o():
    with pytest.raises(PlanError, match=r"db\.orders.*-o COLUMN"):
        resolve_keys(model="db.orders", on=(), grains=())
    assert resolve_keys(model="db.orders", on=("a",), grains=("id",)) == ("a",)


def test_unknown_key_column_is_a_plan_error(spark, tables):
    with pytest.raises(PlanError, match="key column.*nope.*source"):
        table_diff(engine=SparkEngine(spark), source_table=tables[0], target_table=tables[1], keys=["nope"],
                   model="db.x")



def test_backquoted_names_with_a_dot_and_a_space_are_compared_as_named(spark):
    """A user may name relations whose names hold a dot or a space; each side is read as that one relation."""
    spark.sql("CREATE OR REPLACE TEMPORARY VIEW `orders.v1` AS "
              "SELECT * FROM VALUES (1, 'a'), (2, 'b') AS t(id, name)")
    spark.sql("CREATE OR REPLACE TEMPORARY VIEW `orders v2` AS "
              "SELECT * FROM VALUES (1, 'a'), (2, 'B'), (3, 'c') AS t(id, name)")
    try:
        result = table_diff(engine=SparkEngine(spark), source_table="`orders.v1`",
                            target_table="`orders v2`", keys=["id"])
    finally:
        spark.catalog.dropTempView("orders.v1")
        spark.catalog.dropTempView("orders v2")
    rows = result.rows
    assert (rows.source_count, rows.target_count, rows.joined_count) == (2, 3, 2)
    assert (rows.full_match_count, rows.target_only_count) == (1, 1)
    assert (result.source_table, result.target_table) == ("`orders.v1`", "`orders v2`")
