"""New tables copied straight into the session catalog are the tables CREATE TABLE makes: the same
catalog entry field by field, the same rows, partitions and DESCRIBE output, IF NOT EXISTS kept;
what a copy cannot reproduce goes through CREATE TABLE, which still names what is wrong."""

from __future__ import annotations

import pytest

from bot.errors import EngineError
from bot.spark.engine import SparkEngine
from catalog_entries import catalog_entry, hive_calls

COLUMNS = [("id", "bigint"), ("Amount", "decimal(10,2)"), ("ds", "string"), ("seen", "timestamp"),
           ("local_seen", "timestamp_ntz"), ("day", "date"), ("ok", "boolean"), ("ratio", "double")]


def _entry(engine: SparkEngine, schema: str, name: str) -> dict[str, object]:
    """The catalog entry of `schema.name`, its location with the table's own name left out."""
    fields = catalog_entry(engine, schema, name)
    fields["storage"] = str(fields["storage"]).replace(f"/{name.lower()},", "/<table>,")
    return fields


def _by_create_table(engine: SparkEngine, table: str, columns, partitioned_by=()) -> None:
    """`create_table` on an engine that has made no table yet, so it runs CREATE TABLE."""
    SparkEngine(engine.session).create_table(table, columns=columns, partitioned_by=partitioned_by)


def _describe(engine: SparkEngine, table: str) -> list[dict]:
    own = {"Table", "Created Time", "Location", "Last Access"}
    return [row for row in engine.fetch(f"DESCRIBE TABLE EXTENDED {table}") if row["col_name"] not in own]


def test_a_copied_table_is_the_table_create_table_makes(engine_schema):
    engine, db = engine_schema
    _by_create_table(engine, f"{db}.by_sql_plain", COLUMNS)
    _by_create_table(engine, f"{db}.by_sql_parts", COLUMNS, ["DS", "day"])
    engine.create_table(f"{db}.first", columns=[("x", "int")])          # CREATE TABLE: the template
    before = hive_calls(engine)
    engine.create_table(f"{db}.copy_plain", columns=COLUMNS)
    engine.create_table(f"{db}.copy_parts", columns=COLUMNS, partitioned_by=["DS", "day"])
    # the listing of the schema, then a copy's few calls each: far fewer than CREATE TABLE's 15
    assert hive_calls(engine) - before <= 1 + 2 * 9

    rows = ("(1, 2.50, '2024-01-02', TIMESTAMP'2024-01-02 03:04:05', TIMESTAMP_NTZ'2024-01-02 03:04:05', "
            "DATE'2024-01-02', true, 0.5)")
    for made_by_sql, copied in (("by_sql_plain", "copy_plain"), ("by_sql_parts", "copy_parts")):
        assert _entry(engine, db, copied) == _entry(engine, db, made_by_sql)
        for table in (made_by_sql, copied):
            engine.execute(f"INSERT INTO {db}.{table} SELECT {', '.join(name for name, _ in engine.columns(f'{db}.{table}'))} "
                           f"FROM VALUES {rows} AS v({', '.join(name for name, _ in COLUMNS)})")
        assert engine.fetch(f"SELECT * FROM {db}.{copied}") == engine.fetch(f"SELECT * FROM {db}.{made_by_sql}")
        assert _describe(engine, f"{db}.{copied}") == _describe(engine, f"{db}.{made_by_sql}")
    assert engine.fetch(f"SHOW PARTITIONS {db}.copy_parts") == [{"partition": "ds=2024-01-02/day=2024-01-02"}]
    assert engine.partition_columns(f"{db}.copy_parts") == ["ds", "day"]
    assert {"copy_plain", "copy_parts"} <= engine.existing_objects(db, fresh=True)


def test_an_existing_table_is_kept_as_create_table_if_not_exists_would(engine_schema):
    engine, db = engine_schema
    engine.execute(f"CREATE TABLE {db}.kept (id INT, note STRING) USING parquet")
    engine.execute(f"INSERT INTO {db}.kept VALUES (1, 'old')")
    other = SparkEngine(engine.session)
    other.create_table(f"{db}.first", columns=[("x", "int")])
    other.create_table(f"{db}.kept", columns=[("id", "bigint")])     # listed as existing: IF NOT EXISTS
    assert other.fetch(f"SELECT * FROM {db}.kept") == [{"id": 1, "note": "old"}]

    stale = SparkEngine(engine.session)
    stale.create_table(f"{db}.second", columns=[("x", "int")])
    engine.execute(f"CREATE TABLE {db}.late (id INT) USING parquet")   # after `stale` listed the schema
    engine.execute(f"INSERT INTO {db}.late VALUES (5)")
    stale.create_table(f"{db}.late", columns=[("other", "string")])   # a copy, yet nothing is replaced
    assert stale.fetch(f"SELECT * FROM {db}.late") == [{"id": 5}]


@pytest.mark.parametrize("columns, partitioned_by", [
    ([("code", "varchar(3)"), ("id", "int")], []),
    ([("item", "struct<sku: string, tags: array<string>>"), ("id", "int")], []),
    ([("order id", "int"), ("ds", "string")], ["ds"]),
], ids=["varchar", "struct", "spaced name"])
def test_what_a_copy_cannot_reproduce_goes_through_create_table(engine_schema, columns, partitioned_by):
    engine, db = engine_schema
    engine.create_table(f"{db}.first", columns=[("x", "int")])
    before = hive_calls(engine)
    engine.create_table(f"{db}.made", columns=columns, partitioned_by=partitioned_by)
    assert hive_calls(engine) - before >= 12                          # CREATE TABLE's own calls
    _by_create_table(engine, f"{db}.reference", columns, partitioned_by)
    assert _entry(engine, db, "made") == _entry(engine, db, "reference")


def test_bad_columns_are_refused_by_name_and_nothing_is_created(engine_schema):
    engine, db = engine_schema
    engine.create_table(f"{db}.first", columns=[("x", "int")])
    with pytest.raises(EngineError, match=rf"creating table {db}\.twice"):
        engine.create_table(f"{db}.twice", columns=[("id", "int"), ("ID", "string")])
    with pytest.raises(EngineError, match=rf"creating table {db}\.no_part.*(?i:ds)"):
        engine.create_table(f"{db}.no_part", columns=[("id", "int")], partitioned_by=["ds"])
    with pytest.raises(EngineError, match=rf"creating table {db}\.only_parts.*ALL_PARTITION_COLUMNS_NOT_ALLOWED"):
        engine.create_table(f"{db}.only_parts", columns=[("ds", "string")], partitioned_by=["ds"])
    assert {"twice", "no_part", "only_parts"}.isdisjoint(engine.existing_objects(db, fresh=True))


def test_a_statement_through_execute_makes_the_next_table_by_create_table(engine_schema):
    engine, db = engine_schema
    engine.create_table(f"{db}.first", columns=[("x", "int")])
    engine.execute("SET spark.sql.hive.manageFilesourcePartitions=false")
    try:
        before = hive_calls(engine)
        engine.create_table(f"{db}.after_set", columns=[("x", "int"), ("ds", "string")], partitioned_by=["ds"])
        assert hive_calls(engine) - before >= 12
        before = hive_calls(engine)
        engine.create_table(f"{db}.copy_after_set", columns=[("x", "int"), ("ds", "string")], partitioned_by=["ds"])
        assert hive_calls(engine) - before <= 9
        assert _entry(engine, db, "copy_after_set") == _entry(engine, db, "after_set")
        assert _entry(engine, db, "copy_after_set")["tracksPartitionsInCatalog"] == "False"
    finally:
        engine.execute("RESET spark.sql.hive.manageFilesourcePartitions")
