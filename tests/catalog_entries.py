"""Test support: Spark session catalog entries field by field, and the Hive metastore calls made so far."""

from __future__ import annotations

from bot.spark.engine import SparkEngine

# Fields of Spark's catalog entry that differ between any two tables or views.
OWN_FIELDS = {"identifier", "createTime", "lastAccessTime", "multipartIdentifier"}


def catalog_entry(engine: SparkEngine, schema: str, name: str) -> dict[str, object]:
    """The session catalog's entry of `schema.name`, field by field, as text (properties as a dict,
    without Hive's own `transient_lastDdlTime`)."""
    jvm = engine.session._jvm
    catalog = engine.session._jsparkSession.sessionState().catalog()
    entry = catalog.getTableMetadata(jvm.org.apache.spark.sql.catalyst.TableIdentifier(name, jvm.scala.Some(schema)))
    names = str(entry.productElementNames().toList().mkString("\x1f")).split("\x1f")
    fields: dict[str, object] = {}
    for index, field in enumerate(names):
        if field in OWN_FIELDS:
            continue
        value = entry.productElement(index)
        fields[field] = str(value.json()) if field == "schema" else str(value.toString() if hasattr(value, "toString")
                                                                          else value)
    properties = jvm.scala.jdk.javaapi.CollectionConverters.asJava(entry.properties())
    fields["properties"] = {str(key): str(properties.get(key)) for key in properties.keySet()
                            if str(key) != "transient_lastDdlTime"}
    return fields


def hive_calls(engine: SparkEngine) -> int:
    """Hive metastore client calls of this JVM so far (Spark's own HiveCatalogMetrics)."""
    metrics = engine.session._jvm.org.apache.spark.metrics.source.HiveCatalogMetrics
    return metrics.METRIC_HIVE_CLIENT_CALLS().getCount()
