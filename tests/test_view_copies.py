"""Environment views (`SELECT * FROM table`) copied straight into the session catalog are the views
CREATE VIEW makes: the same catalog entry field by field, the same rows and columns, the same
replacement of an existing view; what a copy cannot reproduce goes through CREATE VIEW."""

from __future__ import annotations

import pytest

from bot.spark.engine import SparkEngine

# Fields of Spark's catalog entry that differ between any two views.
_OWN_FIELDS = {"identifier", "createTime", "lastAccessTime", "multipartIdentifier"}


def _entry(engine: SparkEngine, schema: str, name: str) -> dict[str, str]:
    """The session catalog's entry of `schema.name`, field by field, as text (properties as a dict)."""
    jvm = engine.session._jvm
    catalog = engine.session._jsparkSession.sessionState().catalog()
    entry = catalog.getTableMetadata(jvm.org.apache.spark.sql.catalyst.TableIdentifier(name, jvm.scala.Some(schema)))
    names = str(entry.productElementNames().toList().mkString("\x1f")).split("\x1f")
    fields: dict[str, str] = {}
    for index, field in enumerate(names):
        if field in _OWN_FIELDS:
            continue
        value = entry.productElement(index)
        fields[field] = str(value.json()) if field == "schema" else str(value.toString() if hasattr(value, "toString")
                                                                          else value)
    properties = jvm.scala.jdk.javaapi.CollectionConverters.asJava(entry.properties())
    fields["properties"] = {str(key): str(properties.get(key)) for key in properties.keySet()
                            if str(key) != "transient_lastDdlTime"}
    return fields


def _hive_calls(engine: SparkEngine) -> int:
    metrics = engine.session._jvm.org.apache.spark.metrics.source.HiveCatalogMetrics
    return metrics.METRIC_HIVE_CLIENT_CALLS().getCount()


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
    before = _hive_calls(engine)
    engine.create_star_view(f"{db}.copy_orders", f"{db}.orders")
    engine.create_star_view(f"{db}.copy_priced", f"{db}.priced")
    # a copy reads its target and writes its entry: far fewer metastore calls than CREATE VIEW's ~15
    assert _hive_calls(engine) - before <= 2 * 8

    for made_by_sql, copied in (("by_sql_orders", "copy_orders"), ("by_sql_priced", "copy_priced")):
        assert _entry(engine, db, copied) == _entry(engine, db, made_by_sql)
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
    assert _entry(engine, db, "in_batch") == _entry(engine, db, "by_sql")


def test_a_statement_between_views_ends_the_copies(parents):
    """A SET (say, in a before_all) changes what a view captures of the session: later views are
    made by CREATE VIEW until the next batch, so they capture it."""
    engine, db = parents
    engine.start_view_batch()
    engine.create_star_view(f"{db}.first", f"{db}.orders")
    engine.execute("SET spark.sql.legacy.timeParserPolicy=CORRECTED")
    try:
        engine.create_star_view(f"{db}.after_set", f"{db}.orders")
        captured = _entry(engine, db, "after_set")["properties"]
    finally:
        engine.execute("RESET spark.sql.legacy.timeParserPolicy")
    assert captured.get("view.sqlConfig.spark.sql.legacy.timeParserPolicy") == "CORRECTED"
