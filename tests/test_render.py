"""Tests for bot.project.render: macros in context, table mapping, EMBEDDED inlining, Spark transpilation."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.errors import ConfigError
from bot.project.model import Kind, KindName, Model
from bot.project.render import (REFERENCE_END, REFERENCE_START, normalized_query_sql, render_expression,
                                render_query, render_sql, render_statements)
from bot.project.sqltext import parse_sql

JAN1, JAN2 = 1_704_067_200_000, 1_704_153_600_000


def make_model(sql: str, *, name: str = "db.m", dialect: str = "spark", kind: KindName = KindName.FULL,
               pre: str = "", post: str = "", path: Path = Path("/nonexistent/models/m.sql"),
               columns: tuple = ()) -> Model:
    return Model(name=name, kind=Kind(name=kind), dialect=dialect, path=path, query=parse_sql(sql, dialect)[0],
                 pre_statements=tuple(parse_sql(pre, dialect)) if pre else (),
                 post_statements=tuple(parse_sql(post, dialect)) if post else (), columns=columns)


def test_interval_and_this_model() -> None:
    model = make_model("SELECT * FROM @this_model WHERE ds BETWEEN @start_ds AND @end_ds")
    assert render_sql(model, start=JAN1, end=JAN2, table_mapping={"db.m": "sqlmesh__db.db__m__1"}) == \
        "SELECT * FROM `sqlmesh__db`.`db__m__1` WHERE `ds` BETWEEN '2024-01-01' AND '2024-01-01'"
    assert render_sql(model) == "SELECT * FROM `db`.`m` WHERE `ds` BETWEEN '1970-01-01' AND '1970-01-01'"


def test_table_mapping_keeps_alias_so_columns_resolve() -> None:
    model = make_model("SELECT orders.id, c.name, db.orders.amount FROM db.orders "
                       "JOIN db.customers AS c ON orders.cid = c.id JOIN other.t ON TRUE")
    mapping = {"db.orders": "sqlmesh__db.db__orders__123", "db.customers": "db__dev.customers"}
    assert render_sql(model, table_mapping=mapping) == (
        "SELECT `orders`.`id`, `c`.`name`, `orders`.`amount` FROM `sqlmesh__db`.`db__orders__123` AS `orders` "
        "JOIN `db__dev`.`customers` AS `c` ON `orders`.`cid` = `c`.`id` JOIN `other`.`t` ON TRUE")


def test_unqualified_names_default_schema_and_ctes_are_not_mapped() -> None:
    model = make_model("WITH orders AS (SELECT 1 AS x) SELECT * FROM orders JOIN items ON TRUE")
    mapping = {"default.orders": "p.orders_1", "default.items": "p.items_1"}
    assert render_sql(model, table_mapping=mapping) == (
        "WITH `orders` AS (SELECT 1 AS `x`) SELECT * FROM `orders` JOIN `p`.`items_1` AS `items` ON TRUE")


def test_embedded_parent_is_inlined_as_aliased_subquery() -> None:
    parent = make_model("SELECT id, @start_ds AS ds FROM db.raw WHERE id > 0", name="db.emb",
                        kind=KindName.EMBEDDED)
    child = make_model("SELECT e.id FROM db.emb AS e JOIN db.emb ON TRUE")
    sql = render_sql(child, start=JAN1, end=JAN2, models={"db.emb": parent},
                     table_mapping={"db.raw": "p.raw_1", "db.emb": "never.used"})
    inner = "(SELECT `id`, '2024-01-01' AS `ds` FROM `p`.`raw_1` AS `raw` WHERE `id` > 0)"
    assert sql == f"SELECT `e`.`id` FROM {inner} AS `e` JOIN {inner} AS `emb` ON TRUE"


def test_embedded_cycle_is_an_error() -> None:
    a = make_model("SELECT * FROM db.b", name="db.a", kind=KindName.EMBEDDED)
    b = make_model("SELECT * FROM db.a", name="db.b", kind=KindName.EMBEDDED)
    with pytest.raises(ConfigError, match="EMBEDDED models reference each other: db.a -> db.b -> db.a"):
        render_sql(a, models={"db.a": a, "db.b": b})


@pytest.mark.parametrize(("dialect", "sql", "expected"), [
    ("duckdb", "SELECT a::INT, a // 2, list_value(1, 2) AS l FROM t WHERE ds = @start_ds",
     "SELECT CAST(`a` AS INT), `a` DIV 2, ARRAY(1, 2) AS `l` FROM `t` WHERE `ds` = '2024-01-01'"),
    ("postgres", "SELECT ds::TEXT, x ILIKE 'a%', DATE_TRUNC('month', d) FROM t WHERE ds <= @end_ds",
     "SELECT CAST(`ds` AS STRING), `x` ILIKE 'a%', DATE_TRUNC('MONTH', `d`) FROM `t` WHERE `ds` <= '2024-01-01'"),
    ("postgres", 'SELECT "Name" FROM "Shop"."Orders"', "SELECT `Name` FROM `Shop`.`Orders`"),
])
def test_transpiles_to_spark(dialect: str, sql: str, expected: str) -> None:
    assert render_sql(make_model(sql, dialect=dialect), start=JAN1, end=JAN2) == expected


def test_model_query_is_never_mutated() -> None:
    model = make_model("SELECT @start_ds FROM db.orders -- c")
    before = model.query.sql("spark")
    render_query(model, table_mapping={"db.orders": "p.o"}, start=JAN1, end=JAN2)
    assert model.query.sql("spark") == before


def test_pre_statement_defs_apply_to_query_and_statements() -> None:
    model = make_model("SELECT @size AS s FROM db.t",
                       pre="@DEF(size, 10); CACHE TABLE x AS SELECT @size",
                       post="INSERT INTO db.log SELECT @size, @start_ds FROM db.t; @IF(@gateway = 'prod', 1 = 1)")
    assert render_sql(model) == "SELECT 10 AS `s` FROM `db`.`t`"
    mapping = {"db.t": "p.t_1", "db.log": "p.log_1"}
    assert render_statements(model, model.pre_statements, table_mapping=mapping) == [
        "CACHE TABLE `x` AS SELECT 10"]
    assert render_statements(model, model.post_statements, table_mapping=mapping, start=JAN1, end=JAN2) == [
        "INSERT INTO `p`.`log_1` SELECT 10, '2024-01-01' FROM `p`.`t_1` AS `t`"]


def test_render_expression_for_audits_uses_this_model_override() -> None:
    model = make_model("SELECT 1 AS id")
    audit = parse_sql("SELECT * FROM @this_model WHERE id IS NULL AND ds = @start_ds", "spark")[0]
    [rendered] = render_expression(audit, model=model, start=JAN1, end=JAN2, this_model="tmp.slice")
    assert rendered.sql("spark") == "SELECT * FROM tmp.slice WHERE id IS NULL AND ds = '2024-01-01'"


def test_unknown_macro_names_the_model_file(tmp_path: Path) -> None:
    model = make_model("SELECT @missing(1)", path=tmp_path / "models" / "m.sql")
    with pytest.raises(ConfigError, match=r"models/m.sql: unknown macro @MISSING in model db.m"):
        render_sql(model)


def test_user_macros_found_from_the_model_path(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("model_defaults:\n  dialect: spark\n")
    (tmp_path / "macros").mkdir()
    (tmp_path / "macros" / "m.py").write_text("from bot import macro\n@macro()\ndef ten(ev):\n    return 10\n")
    model = make_model("SELECT @ten() AS t", path=tmp_path / "models" / "sub" / "m.sql")
    assert render_sql(model) == "SELECT 10 AS `t`"


def test_config_variables_and_gateway() -> None:
    model = make_model("SELECT @VAR('n', 1) AS n, @gateway AS g, @owner AS o")
    assert render_sql(model, variables={"owner": "ann"}, gateway="prod") == \
        "SELECT 1 AS `n`, 'prod' AS `g`, 'ann' AS `o`"


def test_normalized_sql_ignores_comments_and_whitespace() -> None:
    base = make_model("SELECT id, amount FROM db.orders")
    edited = make_model("-- header comment\nSELECT   id, /* money */ amount\n\nFROM db.orders  -- trailing")
    changed = make_model("SELECT id, amount FROM db.orders WHERE amount > 0")
    assert normalized_query_sql(base) == normalized_query_sql(edited)
    assert normalized_query_sql(base) != normalized_query_sql(changed)
    assert "/*" not in normalized_query_sql(edited)


def test_normalized_sql_is_stable_at_the_reference_interval() -> None:
    model = make_model("SELECT * FROM t WHERE ds BETWEEN @start_ds AND @end_ds AND e = @execution_ds")
    assert normalized_query_sql(model) == normalized_query_sql(model, start=REFERENCE_START, end=REFERENCE_END)
    assert "'1970-01-01'" in normalized_query_sql(model) and "'1970-01-02'" in normalized_query_sql(model)


def test_fingerprinting_many_models_gives_one_text_each() -> None:
    models = [make_model(f"SELECT a, b + {i} AS c, @start_ds AS ds FROM db.src_{i % 50} "
                         f"JOIN db.other USING (a) WHERE x > {i} GROUP BY 1, 2, 3") for i in range(500)]
    texts = {normalized_query_sql(m, table_mapping={"db.other": "p.other"}) for m in models}
    assert len(texts) == 500


def test_bigquery_hashes_are_bytes_on_spark_too(spark) -> None:
    # SQLMesh 0.236.4 on DuckDB (and BigQuery): ba7816bf...15ad, 32, a9993e36...d89d; sqlglot alone gave
    # Spark a hex string for SHA256 (TO_HEX of it 128 characters long) and an unknown S_H_A1_DIGEST
    model = make_model("SELECT TO_HEX(SHA256('abc')) AS h, LENGTH(SHA256('abc')) AS n, TO_HEX(SHA1('abc')) AS h1",
                       dialect="bigquery")
    sql = render_sql(model)
    assert "UNHEX(SHA2('abc', 256))" in sql and "UNHEX(SHA('abc'))" in sql
    assert "UNHEX(SHA2('abc', 256))" in render_sql(make_model("SELECT SHA2_BINARY('abc') AS h", dialect="snowflake"))
    (row,) = spark.sql(sql).collect()
    assert (row["h"].lower(), row["n"], row["h1"].lower()) == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", 32,
        "a9993e364706816aba3e25717850c26c9cd0d89d")
