"""Tables and views the engine created are analyzed from stand-ins of their columns: same columns and
types as over the real tables, no metastore call, and the real analysis whenever a stand-in could differ."""

from __future__ import annotations

from bot.context import Context
from bot.plan.definition import PlanOptions
from bot.project.model import Kind, KindName
from bot.spark.engine import SparkEngine
from bot.spark.materialize import common, create_physical
from bot.spark.sql import parse_query, spark_sql
from bot.spark.stand_ins import with_stand_ins
from bot.spark.types import schema_columns
from ops_project import CONFIG
from project_files import write_files


def _hive_calls(engine: SparkEngine) -> int:
    """Calls Spark's Hive client has made so far (Spark's own metric)."""
    metrics = engine.session._jvm.org.apache.spark.metrics.source.HiveCatalogMetrics
    return metrics.METRIC_HIVE_CLIENT_CALLS().getCount()


def _real_columns(engine: SparkEngine, query: str) -> list[tuple[str, str]]:
    return schema_columns(engine.dataframe(query).schema)


def _parents(engine: SparkEngine, db: str) -> tuple[str, str]:
    orders, events = f"{db}.orders__1", f"{db}.events__2"
    engine.create_table(orders, columns=[
        ("id", "INT"), ("amount", "DECIMAL(12, 3)"), ("customer", "STRUCT<`name`: STRING, `tags`: ARRAY<STRING>>"),
        ("scores", "MAP<STRING, DOUBLE>"), ("placed_at", "TIMESTAMP"), ("local_at", "TIMESTAMP_NTZ"),
        ("paid", "BOOLEAN"), ("payload", "BINARY")])
    # partitioned on a column in the middle: the catalog keeps partition columns last
    engine.create_table(events, columns=[("ds", "DATE"), ("order_id", "BIGINT"), ("kind", "STRING"),
                                         ("weight", "FLOAT")], partitioned_by=["ds"])
    return orders, events


def test_stand_in_analysis_gives_the_columns_and_types_of_the_real_one(engine_schema):
    engine, db = engine_schema
    orders, events = _parents(engine, db)
    queries = [
        f"SELECT * FROM {events}",
        f"SELECT o.id, o.amount * 2 AS doubled, o.customer.name AS customer_name, o.scores['a'] AS a_score "
        f"FROM {orders} AS o",
        f"SELECT orders__1.id, events__2.* FROM {orders} JOIN {events} ON orders__1.id = events__2.order_id",
        f"WITH totals AS (SELECT order_id, SUM(weight) AS w, COUNT(*) AS n FROM {events} GROUP BY order_id) "
        f"SELECT o.*, t.w / t.n AS avg_weight FROM {orders} AS o LEFT JOIN totals AS t ON o.id = t.order_id",
        f"SELECT id, amount / 7 AS ratio, placed_at - INTERVAL 1 DAY AS before, CAST(local_at AS DATE) AS d "
        f"FROM {orders} WHERE id IN (SELECT order_id FROM {events} WHERE kind = 'x')",
        f"SELECT id AS k FROM {orders} UNION ALL SELECT order_id FROM {events}",
        f"SELECT kind, explode(array(weight, weight)) AS w FROM {events}",
    ]
    for query in queries:
        sql = spark_sql(parse_query(query, "test"))
        assert with_stand_ins(sql, engine.created_columns) is not None, sql   # the stand-in path is taken
        calls = _hive_calls(engine)
        columns = common.query_columns(engine, sql, table=f"{db}.child")
        assert _hive_calls(engine) == calls, sql   # not one metastore call
        assert columns == _real_columns(engine, sql), sql
    assert engine.columns(events) == engine.created_columns[events.lower()]


def test_a_view_model_keeps_its_columns_for_the_models_that_read_it(engine_schema):
    engine, db = engine_schema
    orders, _ = _parents(engine, db)
    view = f"{db}.recent__3"
    create_physical(engine, kind=Kind(name=KindName.VIEW), table=view, columns=None,
                    query_sql=f"SELECT `id`, `amount` + 1 AS `amount` FROM `{db}`.`orders__1` WHERE `paid`")
    assert engine.created_columns[view] == engine.columns(view) == [("id", "INT"), ("amount", "DECIMAL(13,3)")]

    query = f"SELECT `r`.`amount`, `o`.`placed_at` FROM `{db}`.`recent__3` AS `r` JOIN `{db}`.`orders__1` AS `o` USING (`id`)"
    calls = _hive_calls(engine)
    columns = common.query_columns(engine, query, table=f"{db}.child__4")
    assert _hive_calls(engine) == calls   # neither the view nor, through it, its table was read from the metastore
    assert columns == _real_columns(engine, query) == [("amount", "DECIMAL(13,3)"), ("placed_at", "TIMESTAMP")]


def test_what_a_stand_in_could_get_wrong_is_analyzed_for_real(engine_schema):
    engine, db = engine_schema
    orders, _ = _parents(engine, db)
    known = engine.created_columns
    # a column qualified with its table's schema would not resolve against the stand-in's alias
    three_part = f"SELECT `{db}`.`orders__1`.`id` FROM `{db}`.`orders__1`"
    assert with_stand_ins(three_part, known) is None
    assert common.query_columns(engine, three_part, table=f"{db}.c1") == [("id", "INT")]
    # the file metadata column exists on the Parquet table only: the stand-in analysis fails, the real one runs
    metadata = f"SELECT `id`, `_metadata`.`file_path` AS `path` FROM `{db}`.`orders__1`"
    assert with_stand_ins(metadata, known) is not None
    assert common.query_columns(engine, metadata, table=f"{db}.c2") == [("id", "INT"), ("path", "STRING")]
    # sampling keeps the real table
    assert with_stand_ins(f"SELECT `id` FROM `{db}`.`orders__1` TABLESAMPLE (10 PERCENT)", known) is None


def test_ddl_through_the_engine_forgets_the_recorded_columns(engine_schema):
    engine, db = engine_schema
    orders, _ = _parents(engine, db)
    engine.add_columns(orders, columns=[("note", "STRING")])
    query = f"SELECT * FROM `{db}`.`orders__1`"
    assert common.query_columns(engine, query, table=f"{db}.c")[-1] == ("note", "STRING")

    engine.create_table(f"{db}.other__9", columns=[("x", "INT")])
    engine.execute(f"ALTER TABLE `{db}`.`other__9` ADD COLUMNS (`y` STRING)")   # any statement may be DDL
    assert engine.created_columns == {}
    assert common.query_columns(engine, f"SELECT * FROM `{db}`.`other__9`", table=f"{db}.c") == [
        ("x", "INT"), ("y", "STRING")]


def test_physical_properties_reach_the_table_and_keep_its_recorded_columns(engine_schema):
    engine, db = engine_schema
    orders, _ = _parents(engine, db)
    engine.set_table_properties(orders, [("owner_team", "data"), ("note", "it's")])
    properties = {row["key"]: row["value"] for row in engine.fetch(f"SHOW TBLPROPERTIES {orders}")}
    assert properties["owner_team"] == "data" and properties["note"] == "it's"
    calls = _hive_calls(engine)
    common.query_columns(engine, f"SELECT `id` FROM `{db}`.`orders__1`", table=f"{db}.c")
    assert _hive_calls(engine) == calls   # the properties changed no column: the stand-in still serves


def test_a_deploy_sets_a_models_physical_properties_and_analyzes_its_child_from_a_stand_in(tmp_path, clean_catalog,
                                                                                            monkeypatch):
    project = write_files(tmp_path / "props", {
        "config.yaml": CONFIG,
        "models/base.sql": "MODEL (name standprops.base, kind FULL, physical_properties (owner_team = 'data'));\n"
                           "SELECT 1 AS id, CAST(2.5 AS DECIMAL(4, 1)) AS amount\n",
        "models/child.sql": "MODEL (name standprops.child, kind FULL);\nSELECT id, amount * 2 AS amount "
                            "FROM standprops.base\n",
    })
    probes: list[str | None] = []
    real = common.with_stand_ins

    def recording(query_sql, known, **options):
        probe = real(query_sql, known, **options)
        probes.append(probe)
        return probe

    monkeypatch.setattr(common, "with_stand_ins", recording)
    context = Context(project)
    context.apply(context.plan("prod", options=PlanOptions(skip_backfill=True)))
    base = context.table_in("prod", "standprops.base")
    properties = {row["key"]: row["value"] for row in context.engine.fetch(f"SHOW TBLPROPERTIES {base}")}
    assert properties["owner_team"] == "data"
    assert any(probe and "CAST(NULL AS DECIMAL(4, 1))" in probe for probe in probes)   # the child read a stand-in
    assert context.engine.columns(context.table_in("prod", "standprops.child")) == [
        ("id", "INT"), ("amount", "DECIMAL(6,1)")]
