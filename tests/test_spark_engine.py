"""SparkEngine: quoting, cached catalog listings, queries and readable errors, on the real local Spark."""

from __future__ import annotations

import uuid

import pytest

from bot.errors import EngineError
from bot.spark.engine import SparkEngine
from bot.spark.errors import spark_message
from bot.spark.sql import quote_table


@pytest.fixture
def engine(clean_catalog):
    return SparkEngine(clean_catalog)


def _schema() -> str:
    return f"eng_{uuid.uuid4().hex[:8]}"


def test_quote_table_quotes_and_escapes_every_part():
    assert quote_table("a.b.c") == "`a`.`b`.`c`"
    assert quote_table("db.`we``ird`") == "`db`.`we``ird`"
    assert quote_table("`my.db`.t") == "`my.db`.`t`"
    for bad in ("", "a..b", "a.b.c.d", "db.\n", "db.we`ird"):
        with pytest.raises(EngineError, match="invalid table name"):
            quote_table(bad)


def test_spark_message_keeps_first_line_and_sql_snippet_only():
    java = ("An error occurred while calling o61.sql.\n: org.apache.spark.SparkException: Job aborted.\n"
            "\tat org.apache.spark.Foo(Foo.scala:1)\n")
    error = type("Py4JJavaError", (Exception,), {})(java)
    assert spark_message(error) == "org.apache.spark.SparkException: Job aborted."
    parse = Exception("\n[PARSE_SYNTAX_ERROR] Syntax error at or near 'x'.\n\n== SQL ==\nselect * fromm x\n---^^^\n")
    assert spark_message(parse) == ("[PARSE_SYNTAX_ERROR] Syntax error at or near 'x'.\n"
                                    "select * fromm x\n---^^^")


def test_catalog_listing_is_cached_and_kept_in_sync(engine):
    schema = _schema()
    assert engine.existing_objects(schema) == set()
    engine.create_schemas([schema, schema.upper()])
    engine.create_table(f"{schema}.Orders", columns=[("id", "INT"), ("amount", "DECIMAL(10, 2)")])
    engine.create_view(f"{schema}.v", f"SELECT id FROM {quote_table(schema + '.orders')}")
    assert engine.existing_objects(schema) == {"orders", "v"}
    assert engine.table_exists(f"{schema}.ORDERS") and not engine.table_exists(f"{schema}.nope")
    assert engine.columns(f"{schema}.orders") == [("id", "INT"), ("amount", "DECIMAL(10,2)")]
    # a fresh engine sees the same objects through one SHOW TABLES
    assert SparkEngine(engine.session).existing_objects(schema) == {"orders", "v"}
    engine.drop_view(f"{schema}.v")
    engine.drop_table(f"{schema}.orders")
    assert engine.existing_objects(schema) == set()
    engine.drop_schema(schema)
    assert engine.existing_objects(schema) == set()
    assert schema not in {row[0] for row in engine.session.sql("SHOW SCHEMAS").collect()}


def test_fetch_applies_limit_in_spark_and_returns_dicts(engine):
    rows = engine.fetch("SELECT id, CAST(id AS STRING) AS s FROM range(100) ORDER BY id", limit=3)
    assert rows == [{"id": 0, "s": "0"}, {"id": 1, "s": "1"}, {"id": 2, "s": "2"}]


def test_errors_name_the_subject_and_carry_no_java_stack(engine):
    with pytest.raises(EngineError) as bad_sql:
        engine.execute("SELECT * FROMM x", subject="model db.orders")
    text = str(bad_sql.value)
    assert text.startswith("model db.orders: [PARSE_SYNTAX_ERROR]")
    assert "\tat " not in text and "org.apache" not in text
    with pytest.raises(EngineError, match=r"running query: \[TABLE_OR_VIEW_NOT_FOUND\].*`no_db`\.`t`"):
        engine.fetch("SELECT * FROM no_db.t")
    with pytest.raises(EngineError, match=r"reading columns of no_db\.t: \[TABLE_OR_VIEW_NOT_FOUND\]"):
        engine.columns("no_db.t")
    assert "\n" not in str(pytest.raises(EngineError, engine.fetch, "SELECT nope FROM range(1)").value)


def test_generated_ddl_quotes_odd_column_names_and_keeps_spark_types(engine):
    """Column names with a space or a backtick reach the DDL quoted; types sqlglot does not model stay as given."""
    schema = _schema()
    engine.create_schemas([schema])
    table = f"{schema}.odd"
    engine.create_table(table, columns=[("order id", "INT"), ("we`ird", "STRUCT<`a b`: DECIMAL(10,2)>"),
                                        ("p", "STRING")], partitioned_by=["p"])
    engine.add_columns(table, columns=[("span", "INTERVAL DAY TO SECOND"), ("at", "TIMESTAMP_NTZ")])
    assert engine.columns(table) == [("order id", "INT"), ("we`ird", "STRUCT<`a b`: DECIMAL(10,2)>"),
                                     ("span", "INTERVAL DAY TO SECOND"), ("at", "TIMESTAMP_NTZ"), ("p", "STRING")]
    assert engine.partition_columns(table) == ["p"]
    engine.rename_table(table, f"{schema}.odd2")
    assert engine.existing_objects(schema) == {"odd2"}
