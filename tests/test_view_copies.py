"""Environment views (`SELECT * FROM table`) copied straight into the session catalog are the views
CREATE VIEW makes: the same catalog entry field by field, the same rows and columns, the same
replacement of an existing view; what a copy cannot reproduce goes through CREATE VIEW."""

from __future__ import annotations

import pytest

from catalog_entries import catalog_entry, hive_calls


@pytest.fixture
def parents(engine_schema):
    """A partitioned table with a comment, nested and decimal columns and one row, and a view over it."""
    engine, db = engine_schema
    engine.execute(f"CREATE TABLE {db}.orders (id INT COMMENT 'order id', item STRUCT<sku: STRING, tags: ARRAY<STRING>>, "
                   f"price DECIMAL(10,2), ds STRING) USING parquet PARTITIONED BY (ds)")
    engine.execute(f"INSERT INTO {db}.orders VALUES (7, named_struct('sku', 'a-1', 'tags', array('x')), 2.50, '2024-01-02')")
    engine.execute(f"CREATE VIEW {db}.priced AS SELECT id, item.sku AS sku, price * 2 AS doubled FROM {db}.orders")
    return engine, db


def test_a_copied_view_is_the_view_create_view_makes(parents):
    engine, db = parents
    engine.create_star_view(f"{db}.by_sql_orders", f"{db}.orders")      # no batch: CREATE VIEW
    engine.create_star_view(f"{db}.by_sql_priced", f"{db}.priced")
    engine.start_view_batch()
    engine.create_star_view(f"{db}.first", f"{db}.orders")              # the batch's template
    before = hive_calls(engine)
    engine.create_star_view(f"{db}.copy_orders", f"{db}.orders")
    engine.create_star_view(f"{db}.copy_priced", f"{db}.priced")
    # a copy reads its target and writes its entry: far fewer metastore calls than CREATE VIEW's ~15
    assert hive_calls(engine) - before <= 2 * 8

    for made_by_sql, copied in (("by_sql_orders", "copy_orders"), ("by_sql_priced", "copy_priced")):
        assert catalog_entry(engine, db, copied) == catalog_entry(engine, db, made_by_sql)
        assert engine.fetch(f"SELECT * FROM {db}.{copied}") == engine.fetch(f"SELECT * FROM {db}.{made_by_sql}")
        assert engine.fetch(f"DESCRIBE TABLE {db}.{copied}") == engine.fetch(f"DESCRIBE TABLE {db}.{made_by_sql}")
    assert engine.fetch(f"SELECT * FROM {db}.copy_priced") == [{"id": 7, "sku": "a-1", "doubled": pytest.approx(5)}]
    assert "copy_orders" in engine.existing_objects(db)


def test_a_batch_replaces_existing_views_and_reads_new_tables(parents):
    engine, db = parents
    engine.execute(f"CREATE TABLE {db}.orders_v2 (id INT, note STRING) USING parquet")
    engine.execute(f"INSERT INTO {db}.orders_v2 VALUES (8, 'new')")
    engine.start_view_batch()
    engine.create_star_view(f"{db}.env_orders", f"{db}.orders")
    engine.create_star_view(f"{db}.env_priced", f"{db}.priced")
    engine.start_view_batch()
    engine.create_star_view(f"{db}.env_other", f"{db}.priced")
    engine.create_star_view(f"{db}.env_orders", f"{db}.orders_v2")      # exists: CREATE OR REPLACE
    assert engine.fetch(f"SELECT * FROM {db}.env_orders") == [{"id": 8, "note": "new"}]
    assert engine.fetch(f"SELECT doubled FROM {db}.env_other") == engine.fetch(f"SELECT doubled FROM {db}.env_priced")


def test_char_and_varchar_targets_keep_create_view(engine_schema):
    engine, db = engine_schema
    engine.execute(f"CREATE TABLE {db}.codes (code CHAR(3), label VARCHAR(10)) USING parquet")
    engine.execute(f"CREATE TABLE {db}.plain (id INT) USING parquet")
    engine.create_star_view(f"{db}.by_sql", f"{db}.codes")
    engine.start_view_batch()
    engine.create_star_view(f"{db}.first", f"{db}.plain")
    engine.create_star_view(f"{db}.in_batch", f"{db}.codes")
    assert catalog_entry(engine, db, "in_batch") == catalog_entry(engine, db, "by_sql")


def test_a_statement_between_views_ends_the_copies(parents):
    """A SET (say, in a before_all) changes what a view captures of the session: later views are
    made by CREATE VIEW until the next batch, so they capture it."""
    engine, db = parents
    engine.start_view_batch()
    engine.create_star_view(f"{db}.first", f"{db}.orders")
    engine.execute("SET spark.sql.legacy.timeParserPolicy=CORRECTED")
    try:
        engine.create_star_view(f"{db}.after_set", f"{db}.orders")
        captured = catalog_entry(engine, db, "after_set")["properties"]
    finally:
        engine.execute("RESET spark.sql.legacy.timeParserPolicy")
    assert captured.get("view.sqlConfig.spark.sql.legacy.timeParserPolicy") == "CORRECTED"
